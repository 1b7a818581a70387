/* fuzz_bootmsg_replay.c: the bootstrap message fuzz entry (fuzz_bootmsg.c)
 * without libFuzzer, through tests/fuzz/replay/fuzz_driver.c:
 *
 *   fuzz_bootmsg_replay FILE...     replay inputs (crash reproducers, corpus)
 *   fuzz_bootmsg_replay --seed DIR  write seed inputs for a libFuzzer corpus
 *   fuzz_bootmsg_replay [N]         mutation smoke test: N (default 200000)
 *                                   deterministic mutations of the seeds
 * The seeds are whole exchanges as the bootstrap sends them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/mem.h"
#include "base/rng.h"
#include "runtime/net/bootmsg.h"
#include "tests/fuzz/replay/fuzz_driver.h"

static size_t put_frame(uint8_t *b, unsigned type, const void *p, size_t n) {
    pz_boot_header_put(b, type, n);
    if (n) memcpy(b + PZ_BOOT_HDR, p, n);
    return PZ_BOOT_HDR + n;
}

/* one exchange of rank `rank` in a world of `world` */
static fuzz_image exchange(int world, int rank, int with_secret) {
    uint8_t *b = xcalloc(1 + 16 * PZ_BOOT_HDR + 4 + (size_t)world * 68 + 400, 1), buf[1024];
    size_t n = 0;
    b[n++] = (uint8_t)(world - 1);
    pz_boot_auth a = {(uint32_t)rank, (uint32_t)world, with_secret ? PZ_BOOT_FLAG_SECRET : 0, {0}};
    for (int i = 0; i < 32; i++) a.nonce[i] = (uint8_t)(i * 7 + rank);
    pz_boot_auth_put(buf, &a);
    n += put_frame(b + n, PZ_F_AUTH, buf, PZ_BOOT_AUTH_LEN);
    pz_boot_challenge c = {(uint32_t)world, a.flags, {0}};
    for (int i = 0; i < 32; i++) c.nonce[i] = (uint8_t)(i * 13);
    pz_boot_challenge_put(buf, &c);
    n += put_frame(b + n, PZ_F_CHALLENGE, buf, PZ_BOOT_CHALLENGE_LEN);
    uint8_t mac[32];
    pz_boot_mac((const uint8_t *)"a key", 5, PZ_BOOT_ROLE_JOINING, a.nonce, c.nonce, a.rank, a.world, c.world, mac);
    n += put_frame(b + n, PZ_F_PROOF, mac, 32);
    n += put_frame(b + n, PZ_F_ACCEPT, mac, 32);
    pz_put_u32(buf, (uint32_t)rank);
    pz_put_u32(buf + 4, (uint32_t)world);
    pz_put_u32(buf + 8, 64);
    memset(buf + 12, 0x42, 64);
    n += put_frame(b + n, PZ_F_HELLO, buf, 76);
    size_t t = 0;
    pz_put_u32(buf, (uint32_t)world);
    t = 4;
    for (int r = 0; r < world; r++) {
        pz_put_u32(buf + t, 64);
        memset(buf + t + 4, r, 64);
        t += 68;
    }
    n += put_frame(b + n, PZ_F_TABLE, buf, t);
    n += put_frame(b + n, PZ_F_REJECT, "rank 0 refused this connection: why", 35);
    pz_put_u32(buf, (uint32_t)rank);
    n += put_frame(b + n, PZ_F_BYE, buf, 4);
    n += put_frame(b + n, PZ_F_ACK, "\0\0\0\0", 4);
    return (fuzz_image){b, n};
}

static int make_seeds(fuzz_image *seeds) {
    seeds[0] = exchange(2, 1, 1);
    seeds[1] = exchange(4, 3, 0);
    seeds[2] = exchange(1, 0, 1);
    return 3;
}

/* a length field of some frame: small nudges and extremes */
static void length_step(pz_rng *r, uint8_t *b, size_t *len, size_t cap, size_t at, unsigned kind) {
    (void)cap, (void)at, (void)kind;
    size_t off = 1;
    for (;;) { /* walk the frames as they stand; stop at a random one */
        if (*len - off < PZ_BOOT_HDR) break;
        size_t fl = pz_get_u32(b + off + 8);
        if (pz_rng_below(r, 3) == 0 || fl > *len - off - PZ_BOOT_HDR) {
            uint32_t v = pz_rng_below(r, 4) == 0 ? 0xffffffffu : (uint32_t)(fl + pz_rng_below(r, 9)) - 4;
            pz_put_u32(b + off + 8, v);
            break;
        }
        off += PZ_BOOT_HDR + fl;
    }
}

static void mutate(pz_rng *r, uint8_t *b, size_t *len, size_t cap) {
    fuzz_mutate_steps(r, b, len, cap, 4, FUZZ_BYTE_STEPS + 1, length_step);
}

int main(int argc, char **argv) {
    static const fuzz_target t = {"bootmsg", ".pzboot", 200000, 20261125, make_seeds, mutate, NULL};
    return fuzz_main(&t, argc, argv);
}
