/* fuzz_codec_decode.c: libFuzzer entry for codec message decoding: the
 * header parser (pz_codec_peek) and every decoder behind pz_codec_decode,
 * with untrusted bytes and a fixed output capacity, in both readings of a
 * message: stored (its own CRC, as `pipezip codec --out` writes it) and
 * framed (no CRC of its own, flag 0x04 of header byte 6: the frame between
 * ranks carries the one CRC; compress/core/codec.h pz_codec_set_framed). The two
 * must agree: a framed reader decodes a stored message exactly as a stored
 * reader does, and a framed message exactly as its stored twin (flag
 * cleared, CRC computed) is read by a stored reader; a stored reader
 * refuses every framed message, inner ones too.
 *
 * clang: built as fuzz_codec_decode with -fsanitize=fuzzer (tests/meson.build),
 *   e.g.  fuzz_codec_decode -max_total_time=60 CORPUS_DIR
 * Any compiler: linked with fuzz_codec_replay.c and fuzz_driver.c into fuzz_codec_decode_replay,
 * which replays files, writes a seed corpus (--seed DIR) or runs a
 * deterministic mutation smoke test. */
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "compress/core/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OUT_CAP (1u << 16)
#define FLAG_FRAMED 0x04

static float out[OUT_CAP], out2[OUT_CAP];
static uint64_t ids[OUT_CAP];

/* Decodes msg with a stored and a framed codec of spec; what the stored
 * one decodes the framed one decodes the same. Returns the framed reader's
 * status (its values in out2). */
static pz_status decode_both(const char *spec, const uint8_t *msg, size_t len, const pz_shape *peeked) {
    pz_codec *c = NULL, *f = NULL;
    if (pz_codec_create(spec, &c) != PZ_OK || pz_codec_create(spec, &f) != PZ_OK) abort(); /* a peeked spec parses */
    pz_codec_set_framed(f, 1);
    pz_codec_ctx ctx = {1, 2, 0, 0, 0, ids};
    pz_shape got, got2;
    size_t n = pz_shape_numel(peeked);
    pz_status st = pz_codec_decode(c, msg, len, &ctx, out, OUT_CAP, &got);
    int crcless = st != PZ_OK && strstr(pz_last_error(), "without its own CRC") != NULL;
    pz_status st2 = pz_codec_decode(f, msg, len, &ctx, out2, OUT_CAP, &got2);
    /* the framed reader takes what the stored one takes, and more only where
     * the stored one missed a CRC (a framed inner message in a wrapper's) */
    if (st == PZ_OK ? st2 != PZ_OK : st2 == PZ_OK && !crcless) abort();
    if (st == PZ_OK) {
        if (n > OUT_CAP || got.ndim != peeked->ndim || memcmp(got.dims, peeked->dims, sizeof got.dims)) abort();
        if (memcmp(&got, &got2, sizeof got) || memcmp(out, out2, n * sizeof(float))) abort();
    } else if (n > OUT_CAP && st != PZ_ERR_SHAPE && st != PZ_ERR_FORMAT) {
        /* too large for the buffer: refused for that reason (or as malformed before the size check) */
        abort();
    }
    pz_codec_free(c);
    pz_codec_free(f);
    return st2;
}

/* A framed message: a framed reader must decode it exactly as its stored
 * twin (when its CRC field is zero, as a framed message's is). */
static void framed_twin(const uint8_t *data, size_t size) {
    if (size < 56 || data[9] < 1 || data[9] > PZ_MAX_DIMS) return;
    size_t H = 48 + 8 * (size_t)data[9];
    if (size < H || size > (1u << 24)) return;
    uint8_t *twin = malloc(size);
    if (!twin) return;
    memcpy(twin, data, size);
    twin[6] &= (uint8_t)~FLAG_FRAMED;
    uint32_t crc = pz_crc32c(pz_crc32c(0, twin, H - 4), twin + H, size - H);
    memcpy(twin + H - 4, &crc, 4);   /* little-endian hosts only, as the fuzzers run */
    char spec[1024];
    pz_shape shape;
    if (pz_codec_peek(twin, size, spec, sizeof spec, &shape) == PZ_OK) {
        size_t n = pz_shape_numel(&shape);
        pz_status want = decode_both(spec, twin, size, &shape);
        if (want == PZ_OK) memcpy(out, out2, n * sizeof(float));
        pz_codec *f = NULL;
        if (pz_codec_create(spec, &f) != PZ_OK) abort();
        pz_codec_set_framed(f, 1);
        pz_codec_ctx ctx = {1, 2, 0, 0, 0, ids};
        pz_shape got;
        pz_status st = pz_codec_decode(f, data, size, &ctx, out2, OUT_CAP, &got);
        uint32_t field;
        memcpy(&field, data + H - 4, 4);
        if (field != 0) {
            if (st != PZ_ERR_FORMAT) abort();   /* a framed message with a CRC value is malformed */
        } else {
            if (st != want || (st == PZ_OK && memcmp(out, out2, n * sizeof(float)))) abort();
        }
        pz_codec_free(f);
    }
    free(twin);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ids[1])
        for (uint64_t i = 0; i < OUT_CAP; i++) ids[i] = i;
    char spec[1024];
    pz_shape shape;
    int peeked = pz_codec_peek(data, size, spec, sizeof spec, &shape) == PZ_OK;
    if (peeked) {
        /* invariants a successful peek promises */
        size_t n = pz_shape_numel(&shape);
        if (!n || shape.ndim < 1 || shape.ndim > PZ_MAX_DIMS) abort();
        if (size >= 7 && (data[6] & FLAG_FRAMED)) abort();   /* the stored reader never takes a framed message */
        decode_both(spec, data, size, &shape);
    } else if (size >= 7 && (data[6] & FLAG_FRAMED)) {
        framed_twin(data, size);
    }
    /* a base-codec decoder must refuse or decode anything, consistently with peek */
    static pz_codec *base;
    if (!base && pz_codec_create("fp32", &base) != PZ_OK) abort();
    pz_shape got;
    pz_status st = pz_codec_decode(base, data, size, NULL, out, OUT_CAP, &got);
    if (st == PZ_OK && !peeked) abort();
    return 0;
}
