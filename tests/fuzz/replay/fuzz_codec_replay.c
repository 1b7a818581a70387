/* fuzz_codec_replay.c: runs the codec decoding fuzz entry without libFuzzer.
 *
 *   fuzz_codec_decode_replay FILE...     replay inputs (crash reproducers, corpus)
 *   fuzz_codec_decode_replay --seed DIR  write seed messages (every codec) for a corpus
 *   fuzz_codec_decode_replay [N]         mutation smoke test: N (default 20000)
 *                                        deterministic mutations of the seeds,
 *                                        half of them with the CRC recomputed so
 *                                        that they reach the decoders (framed
 *                                        seeds, as edges send them, have none) 
 * Meant to run under ASan/UBSan in ordinary (gcc) builds; the main is
 * tests/fuzz/replay/fuzz_driver.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec.h"
#include "base/crc32c.h"
#include "base/io/file.h"
#include "base/mem.h"
#include "base/rng.h"
#include "tests/fuzz/replay/fuzz_driver.h"

static const char *const seed_specs[] = {
    "fp32", "fp16", "bf16", "q1", "q4", "q8:round=nearest", "q3:scale=minmax,group=5,sdtype=fp16", "q2:group=row",
    "q4:group=tensor", "nuq1:bucket=8", "nuq4:bucket=16", "nuq4:bucket=16,code=elias", "nuq8", "sign",
    "sign:stochastic,group=channel,sdtype=fp16", "topk:0.25", "topk:0.5,scope=tensor,values=q8", "topk:0.1,values=fp16",
    "jointsq:2", "jointsq:6,group=4", "q4+zstd", "fp32+zstd", "ef(q4)", "ef21(sign)", "aq(q4)", "ef(topk:0.3)+zstd",
    "tah:16,tile=8", "tah:8,tile=8,alloc=token", "tah:14,tile=4", "ef(tah:16,tile=4)",
    "hadamard(fp32,block=2)", "aq(hadamard(q2))", "hadamard(q4)", "hadamard(ef21(sign))", "hadamard(aq(q4))+zstd",
    "ef(hadamard(hadamard(fp16)))",
};

static int make_seeds(fuzz_image *seeds) {
    pz_shape shapes[] = {{2, {3, 40, 0, 0}}, {3, {2, 3, 7, 0}}, {1, {13, 0, 0, 0}}};
    int k = 0;
    pz_rng r;
    pz_rng_seed(&r, 77);
    for (size_t s = 0; s < sizeof seed_specs / sizeof seed_specs[0]; s++) {
        pz_shape *sh = &shapes[s % 3];
        size_t n = pz_shape_numel(sh);
        float *x = xmalloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) x[i] = strstr(seed_specs[s], "zstd") ? (float)(i % 4) : pz_rng_normal(&r);
        /* every spec stored (with its CRC); every other one also framed, as an edge sends it */
        for (int framed = 0; framed <= (int)(s % 2); framed++) {
            pz_codec *c;
            if (pz_codec_create(seed_specs[s], &c) != PZ_OK) pz_die("%s", pz_last_error());
            pz_codec_set_framed(c, framed);
            size_t cap = pz_codec_max_encoded_size(c, sh), len;
            uint8_t *m = xmalloc(cap);
            uint64_t ids[3] = {0, 1, 2};
            pz_codec_ctx ctx = {1, 2, 0, 0, 0, ids};
            if (pz_codec_encode(c, x, sh, &ctx, m, cap, &len) != PZ_OK) pz_die("%s: %s", seed_specs[s], pz_last_error());
            seeds[k].data = m;
            seeds[k].len = len;
            k++;
            pz_codec_free(c);
        }
        free(x);
    }
    return k;
}

static void fix_crc(uint8_t *b, size_t len) {
    if (len < 56 || b[9] < 1 || b[9] > 4 || (b[6] & 0x04)) return;   /* a framed message has no CRC */
    size_t H = 48 + 8 * (size_t)b[9];
    if (len < H) return;
    uint32_t crc = pz_crc32c(pz_crc32c(0, b, H - 4), b + H, len - H);
    memcpy(b + H - 4, &crc, 4);
}

static void mutate(pz_rng *r, uint8_t *b, size_t *len, size_t cap) {
    int k = 1 + (int)pz_rng_below(r, 4);
    for (int i = 0; i < k && *len > 0; i++) {
        size_t at = (size_t)pz_rng_below(r, *len);
        switch (pz_rng_below(r, 8)) {
        case 0: case 1: b[at] = (uint8_t)pz_rng_next(r); break;
        case 2: b[at] ^= (uint8_t)(1u << pz_rng_below(r, 8)); break;
        case 3: fuzz_delete_run(r, b, len, at); break;
        case 4: /* insert a byte */
            if (*len < cap) fuzz_insert_byte(b, len, at, (uint8_t)pz_rng_next(r));
            break;
        case 5: *len = (size_t)pz_rng_below(r, *len + 1); break;   /* truncate */
        case 6: /* a header field: small values are the interesting ones */
            b[pz_rng_below(r, *len < 64 ? *len : 64)] = (uint8_t)pz_rng_below(r, 10);
            break;
        case 7: /* the payload length field, kept consistent half the time */
            if (*len >= 56 && b[9] >= 1 && b[9] <= 4 && *len >= 48 + 8 * (size_t)b[9]) {
                size_t H = 48 + 8 * (size_t)b[9];
                uint64_t pl = *len - H + (pz_rng_below(r, 2) ? 0 : pz_rng_below(r, 5) - 2);
                memcpy(b + H - 12, &pl, 8);
            }
            break;
        }
    }
    if (pz_rng_below(r, 2)) fix_crc(b, *len);
}

int main(int argc, char **argv) {
    static const fuzz_target t = {"codec", ".pzc", 20000, 20240327, make_seeds, mutate, NULL};
    return fuzz_main(&t, argc, argv);
}
