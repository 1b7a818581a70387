/* fuzz_codec_decode.c: libFuzzer entry for codec message decoding: the
 * header parser (pz_codec_peek) and every decoder behind pz_codec_decode,
 * with untrusted bytes and a fixed output capacity.
 *
 * clang: built as fuzz_codec_decode with -fsanitize=fuzzer (tests/meson.build),
 *   e.g.  fuzz_codec_decode -max_total_time=60 CORPUS_DIR
 * Any compiler: linked with fuzz_codec_replay.c and fuzz_driver.c into fuzz_codec_decode_replay,
 * which replays files, writes a seed corpus (--seed DIR) or runs a
 * deterministic mutation smoke test. */
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OUT_CAP (1u << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static float out[OUT_CAP];
    static uint64_t ids[OUT_CAP];
    if (!ids[1])
        for (uint64_t i = 0; i < OUT_CAP; i++) ids[i] = i;
    char spec[1024];
    pz_shape shape;
    int peeked = pz_codec_peek(data, size, spec, sizeof spec, &shape) == PZ_OK;
    if (peeked) {
        /* invariants a successful peek promises */
        size_t n = pz_shape_numel(&shape);
        if (!n || shape.ndim < 1 || shape.ndim > PZ_MAX_DIMS) abort();
        pz_codec *c = NULL;
        if (pz_codec_create(spec, &c) != PZ_OK) abort();   /* the peeked spec always parses */
        pz_codec_ctx ctx = {1, 2, 0, 0, 0, ids};
        pz_shape got;
        pz_status st = pz_codec_decode(c, data, size, &ctx, out, OUT_CAP, &got);
        if (st == PZ_OK) {
            if (n > OUT_CAP || got.ndim != shape.ndim || memcmp(got.dims, shape.dims, sizeof got.dims)) abort();
            volatile float first = out[0], last = out[n - 1];
            (void)first;
            (void)last;
        } else if (n > OUT_CAP && st != PZ_ERR_SHAPE) {
            /* too large for the buffer: must be refused for that reason (or as
             * malformed before the size check) */
            if (st != PZ_ERR_FORMAT) abort();
        }
        pz_codec_free(c);
    }
    /* a base-codec decoder must refuse or decode anything, consistently with peek */
    static pz_codec *base;
    if (!base && pz_codec_create("fp32", &base) != PZ_OK) abort();
    pz_shape got;
    pz_status st = pz_codec_decode(base, data, size, NULL, out, OUT_CAP, &got);
    if (st == PZ_OK && !peeked) abort();
    return 0;
}
