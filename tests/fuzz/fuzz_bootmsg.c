/* fuzz_bootmsg.c: libFuzzer entry for the bootstrap's message parsers and
 * proofs (runtime/net/bootmsg.c), which read bytes from unauthenticated peers.
 *
 * Input: one byte that picks the world size (1..256), then frames as they
 * would arrive on a connection. Each frame's header is checked as rank 0 and
 * the joining ranks check it, and its payload goes to the parser of its
 * type; an AUTH followed by a PROOF is verified with a fixed key, as rank 0
 * does. Stops at the first bad header, as the bootstrap drops the
 * connection there. Aborts on a broken promise of a parser: a pointer or a
 * length outside the input, an unbounded allocation, an unprintable reason.
 *
 * clang: built as fuzz_bootmsg with -fsanitize=fuzzer (tests/meson.build).
 * Any compiler: linked with fuzz_bootmsg_replay.c and fuzz_driver.c into
 * fuzz_bootmsg_replay (replay files, or a deterministic mutation smoke test). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/net/bootmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t key[] = "fuzz_bootmsg key";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int world = 1 + data[0];
    size_t off = 1;
    pz_boot_auth auth;
    int have_auth = 0;
    uint8_t nonce0[PZ_BOOT_NONCE];
    memset(nonce0, 0xa5, sizeof nonce0);
    while (size - off >= PZ_BOOT_HDR) {
        unsigned type;
        size_t len;
        if (pz_boot_header_get(data + off, world, &type, &len, "fuzz") != PZ_OK) return 0;
        if (len > pz_boot_max_payload(type, world) || pz_boot_max_payload(type, world) == 0) abort();
        off += PZ_BOOT_HDR;
        if (len > size - off) return 0; /* the rest never arrives */
        const uint8_t *p = data + off;
        off += len;
        switch (type) {
        case PZ_F_AUTH:
            have_auth = pz_boot_auth_get(p, len, &auth) == PZ_OK;
            if (have_auth && (len != PZ_BOOT_AUTH_LEN || (auth.flags & ~PZ_BOOT_FLAG_SECRET))) abort();
            break;
        case PZ_F_CHALLENGE: {
            pz_boot_challenge c;
            if (pz_boot_challenge_get(p, len, &c) == PZ_OK && len != PZ_BOOT_CHALLENGE_LEN) abort();
            break;
        }
        case PZ_F_PROOF:
        case PZ_F_ACCEPT:
            if (len == PZ_BOOT_MAC && have_auth) {
                uint8_t mac[PZ_BOOT_MAC];
                pz_boot_mac(key, sizeof key - 1, type == PZ_F_PROOF ? PZ_BOOT_ROLE_JOINING : PZ_BOOT_ROLE_RANK0,
                            auth.nonce, nonce0, auth.rank, auth.world, (uint32_t)world, mac);
                /* a forged proof passes only by a 2^-256 chance: treat as a bug */
                if (pz_boot_mac_equal(mac, p)) abort();
            }
            break;
        case PZ_F_HELLO: {
            uint32_t rank, w;
            const uint8_t *blob;
            size_t blen;
            if (pz_boot_hello_get(p, len, &rank, &w, &blob, &blen) == PZ_OK) {
                if (blen == 0 || blen > PZ_BOOT_MAX_BLOB || blob < p || blob + blen != p + len) abort();
                volatile uint8_t last = blob[blen - 1];
                (void)last;
            }
            break;
        }
        case PZ_F_TABLE: {
            uint8_t **blobs = calloc((size_t)world, sizeof *blobs);
            size_t *lens = calloc((size_t)world, sizeof *lens), sum = 4;
            if (pz_boot_table_get(p, len, world, blobs, lens) == PZ_OK) {
                for (int r = 0; r < world; r++) {
                    if (!blobs[r] || lens[r] == 0 || lens[r] > PZ_BOOT_MAX_BLOB) abort();
                    sum += 4 + lens[r];
                }
                if (sum != len) abort();
            } else {
                for (int r = 0; r < world; r++)
                    if (blobs[r] || lens[r]) abort(); /* nothing left behind on failure */
            }
            for (int r = 0; r < world; r++) free(blobs[r]);
            free(blobs);
            free(lens);
            break;
        }
        case PZ_F_REJECT: {
            char reason[PZ_BOOT_REJECT_MAX + 1];
            pz_boot_reason(p, len, reason, sizeof reason);
            size_t n = strlen(reason);
            if (n != len) abort();
            for (size_t i = 0; i < n; i++)
                if (reason[i] < 32 || reason[i] > 126) abort();
            break;
        }
        default: break; /* BYE, ACK: a length check only */
        }
    }
    return 0;
}
