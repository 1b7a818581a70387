/* test_wire_crc: one CRC-32C pass per payload on the wire (issue 23). A
 * message between ranks is a frame (runtime/net/frame.c) around the sample ids
 * and a codec message (compress/core/message.c); both used to checksum the same
 * payload, and a wrapper's inner messages a third time. The test links
 * with -Wl,--wrap=pz_crc32c and counts the bytes every CRC call covers:
 *  - encoding an edge message (pz_edge_encode, with its error-measuring
 *    twin decode) and the tied exchange's message checksums nothing;
 *  - sealing the frame checksums its 32 header bytes and the payload once;
 *  - the receiver's frame check the same, and decoding nothing more;
 *  - the values decoded equal those of the stored form (a codec not marked
 *    framed, as `pipezip codec --out` writes), which still has its CRC and
 *    refuses a framed message, naming why (pz_codec_peek_framed reads it).
 * Specs: raw float32, base codecs, +zstd, and wrappers with inner messages
 * (ef, aq, hadamard), forward and backward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/mem.h"
#include "base/rng.h"
#include "compress/core/codec.h"
#include "runtime/edge/edge.h"
#include "runtime/net/frame.h"
#include "runtime/edge/policy.h"
#include "runtime/edge/tied.h"
#include "tests/check.h"

uint32_t __real_pz_crc32c(uint32_t crc, const void *buf, size_t n);
uint32_t __wrap_pz_crc32c(uint32_t crc, const void *buf, size_t n);

static size_t crc_bytes;   /* bytes covered by CRC calls since the last reset */

uint32_t __wrap_pz_crc32c(uint32_t crc, const void *buf, size_t n) {
    crc_bytes += n;
    return __real_pz_crc32c(crc, buf, n);
}

enum { B = 2, T = 8, C = 32 };

/* One message over edge 0-1 in direction dir: encode, frame, check, decode. */
static void one_edge(const char *spec, int dir) {
    char what[128];
    snprintf(what, sizeof what, "%s %s", spec, dir == PZ_FWD ? "forward" : "backward");
    pz_edge_end tx, rx;
    CHECK_STATUS(pz_edge_init(&tx, 0, dir, 1, spec, B, T, C, 1), PZ_OK, NULL);
    CHECK_STATUS(pz_edge_init(&rx, 0, dir, 0, spec, B, T, C, 0), PZ_OK, NULL);
    size_t n = (size_t)B * T * C, cap = pz_edge_capacity(&tx), len = 0;
    float *x = xmalloc(n * sizeof(float)), *y = xmalloc(n * sizeof(float));
    uint8_t *wire = xmalloc(cap), hdr[PZ_FRAME_HDR];
    uint64_t ids[B] = {11, 12}, got_ids[B] = {0, 0};
    pz_rng r;
    pz_rng_seed(&r, 5);
    for (size_t i = 0; i < n; i++) x[i] = pz_rng_normal(&r);

    crc_bytes = 0;
    CHECK_STATUS(pz_edge_encode(&tx, x, ids, 3, 4, 1, wire, &len), PZ_OK, NULL);
    CHECK(crc_bytes == 0, "%s: encoding (and its twin decode) checksummed %zu bytes; the frame's CRC is the only one",
          what, crc_bytes);
    pz_frame_id id = {0x55, 4, 1, (uint8_t)(dir == PZ_FWD ? 1 : 2), 0, 1};
    crc_bytes = 0;
    pz_frame_put(hdr, &id, wire, len);
    CHECK(crc_bytes == 32 + len, "%s: sealing the frame checksummed %zu bytes, want 32 + %zu", what, crc_bytes, len);
    crc_bytes = 0;
    CHECK(pz_frame_check(hdr, sizeof hdr, &id, wire, len, NULL, 0) == PZ_FRAME_OK, "%s: frame check", what);
    CHECK_STATUS(pz_edge_decode(&rx, wire, len, 3, 4, 1, y, got_ids), PZ_OK, NULL);
    CHECK(crc_bytes == 32 + len, "%s: the receiver checksummed %zu bytes, want the frame's 32 + %zu once", what,
          crc_bytes, len);
    if (dir == PZ_FWD) CHECK(got_ids[0] == 11 && got_ids[1] == 12, "%s: sample ids", what);

    if (strcmp(spec, "none") != 0) {
        /* the stored form: the same values, its own CRC, and no framed message accepted */
        pz_codec *st = NULL;
        CHECK_STATUS(pz_codec_create_for(spec, pz_dir_use(dir), &st), PZ_OK, NULL);
        pz_shape sh = {3, {B, T, C}}, got;
        size_t mcap = pz_codec_max_encoded_size(st, &sh), mlen = 0;
        uint8_t *m = xmalloc(mcap);
        float *z = xmalloc(n * sizeof(float));
        pz_codec_ctx ctx = {.seed = 3, .step = 4, .edge = 0, .dir = (uint32_t)dir, .micro = 1,
                            .sample_ids = dir == PZ_FWD ? ids : NULL};
        crc_bytes = 0;
        CHECK_STATUS(pz_codec_encode(st, x, &sh, &ctx, m, mcap, &mlen), PZ_OK, NULL);
        CHECK(crc_bytes >= mlen - 4, "%s: a stored message is checksummed (%zu bytes of %zu)", what, crc_bytes, mlen);
        /* the same size, as only the CRC's value differs; through +zstd inner messages' zero CRCs may pack smaller */
        int zstd = strstr(spec, "+zstd") != NULL;
        CHECK(zstd ? len - tx.ids_bytes <= mlen : len - tx.ids_bytes == mlen,
              "%s: stored message of %zu bytes, framed %zu", what, mlen, len - tx.ids_bytes);
        CHECK_STATUS(pz_codec_decode(st, m, mlen, &ctx, z, n, &got), PZ_OK, NULL);
        CHECK(memcmp(y, z, n * sizeof(float)) == 0, "%s: framed and stored messages decode differently", what);
        CHECK_STATUS(pz_codec_decode(st, wire + tx.ids_bytes, len - tx.ids_bytes, &ctx, z, n, &got), PZ_ERR_FORMAT,
                     "without its own CRC");
        CHECK_STATUS(pz_codec_peek(wire + tx.ids_bytes, len - tx.ids_bytes, NULL, 0, NULL), PZ_ERR_FORMAT,
                     "without its own CRC");
        char s1[600] = "", s2[600] = "";
        crc_bytes = 0;
        CHECK_STATUS(pz_codec_peek_framed(wire + tx.ids_bytes, len - tx.ids_bytes, s1, sizeof s1, NULL), PZ_OK, NULL);
        CHECK(crc_bytes == 0, "%s: peeking a framed message checksummed %zu bytes", what, crc_bytes);
        CHECK_STATUS(pz_codec_peek(m, mlen, s2, sizeof s2, NULL), PZ_OK, NULL);
        CHECK(strcmp(s1, s2) == 0, "%s: the framed message peeks as '%s', the stored one as '%s'", what, s1, s2);
        /* a framed message whose zero CRC field was changed is refused */
        wire[tx.ids_bytes + 68] ^= 1;   /* ndim 3: the header's CRC field is at 48 + 3 * 8 - 4 */
        CHECK_STATUS(pz_edge_decode(&rx, wire, len, 3, 4, 1, y, got_ids), PZ_ERR_FORMAT, NULL);
        pz_codec_free(st);
        free(m);
        free(z);
    }
    pz_edge_free(&tx);
    pz_edge_free(&rx);
    free(x);
    free(y);
    free(wire);
}

/* The tied embedding's gradient exchange: encode (with its own decode) and
 * the peer's decode checksum nothing; the frame does. */
static void tied(void) {
    pz_tied a, b;
    CHECK_STATUS(pz_tied_init(&a, "q8", 16, C), PZ_OK, NULL);
    CHECK_STATUS(pz_tied_init(&b, "q8", 16, C), PZ_OK, NULL);
    float g[16 * C], h[16 * C];
    for (int i = 0; i < 16 * C; i++) g[i] = (float)((i * 37) % 19) - 9.0f, h[i] = 0;
    size_t len = 0;
    crc_bytes = 0;
    CHECK_STATUS(pz_tied_encode(&a, g, 1, 2, 0, &len), PZ_OK, NULL);
    memcpy(b.in, a.out, len);
    CHECK_STATUS(pz_tied_add(&b, len, 1, 2, 0, h), PZ_OK, NULL);
    CHECK(crc_bytes == 0, "tied: the exchange's codec checksummed %zu bytes", crc_bytes);
    CHECK(memcmp(g, h, sizeof g) == 0, "tied: the peer adds what the sender decoded");
    pz_tied_free(&a);
    pz_tied_free(&b);
}

int main(void) {
    static const char *const specs[] = {"none", "fp16", "q4", "topk:0.25", "q8+zstd", "ef(q4)", "aq(q4)",
                                        "hadamard(q4)+zstd", "ef(hadamard(sign))"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        one_edge(specs[i], PZ_FWD);
        if (strncmp(specs[i], "aq(", 3) != 0) one_edge(specs[i], PZ_BWD);   /* aq is for activations */
    }
    tied();
    return check_summary("wire-crc");
}
