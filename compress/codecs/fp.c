/* fp.c: fp32 (identity), fp16 and bf16 (round to nearest even).
 * Payload: the n values, little-endian, 4 / 2 / 2 bytes each. */
#include <stdio.h>
#include <string.h>

#include "compress/core/codec_impl.h"
#include "compress/core/elem.h"
#include "compress/core/spec.h"

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "compress/ assumes a little-endian host"
#endif

static pz_status fp_parse(pz_codec_params *p, const char *args, const char *spec, size_t where) {
    (void)p;
    if (args[0]) return pz_spec_fail(spec, where, "this codec takes no arguments");
    return PZ_OK;
}

static pz_status fp_validate(const pz_codec_params *p) {
    pz_codec_params z;
    memset(&z, 0, sizeof z);
    z.id = p->id;
    if (memcmp(&z, p, sizeof z) != 0) return pz_fail(PZ_ERR_FORMAT, "fp codecs take no parameters");
    return PZ_OK;
}

static size_t elem_bytes(const pz_codec_params *p) { return p->id == PZ_CODEC_FP32 ? 4 : 2; }

static const char *fp_name(const pz_codec_params *p) {
    return p->id == PZ_CODEC_FP32 ? "fp32" : p->id == PZ_CODEC_FP16 ? "fp16" : "bf16";
}

static void fp_format(const pz_codec_params *p, char *buf, size_t cap) { snprintf(buf, cap, "%s", fp_name(p)); }

static size_t fp_max_payload(const pz_codec_params *p, const pz_shape *s) {
    return pz_shape_numel(s) * elem_bytes(p);
}

/* ---- fp16 ---- */
static void fp16_pack(const float *x, size_t n, uint8_t *out) {
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(out + 2 * i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#elif defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++) {
        uint16_t h = pz_f32_to_f16(x[i]);
        memcpy(out + 2 * i, &h, 2);
    }
}

static void fp16_unpack(const uint8_t *in, size_t n, float *out) {
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(in + 2 * i))));
#elif defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + 2 * i))));
#endif
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, in + 2 * i, 2);
        out[i] = pz_f16_to_f32(h);
    }
}

/* ---- bf16 ---- */
static void bf16_pack(const float *x, size_t n, uint8_t *out) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        uint32_t f;
        memcpy(&f, x + i, 4);
        uint32_t r = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
        uint32_t q = (f >> 16) | 0x40u;
        uint16_t h = (uint16_t)((f & 0x7fffffffu) > 0x7f800000u ? q : r);
        memcpy(out + 2 * i, &h, 2);
    }
}

static void bf16_unpack(const uint8_t *in, size_t n, float *out) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, in + 2 * i, 2);
        uint32_t f = (uint32_t)h << 16;
        memcpy(out + i, &f, 4);
    }
}

/* ---- the three codecs: fp32 is a copy ---- */
static pz_status fp_encode(const pz_codec_params *p, const float *x, const pz_shape *s,
                           const pz_codec_ctx *ctx, uint8_t *out, size_t cap, size_t *len) {
    (void)ctx;
    size_t need = fp_max_payload(p, s);
    if (cap < need) return pz_fail(PZ_ERR_SHAPE, "encode: %zu bytes of room, payload needs %zu", cap, need);
    if (p->id == PZ_CODEC_FP32) memcpy(out, x, need);
    else if (p->id == PZ_CODEC_FP16) fp16_pack(x, need / 2, out);
    else bf16_pack(x, need / 2, out);
    *len = need;
    return PZ_OK;
}

static pz_status fp_decode(const pz_codec_params *p, const uint8_t *in, size_t len,
                           const pz_shape *s, float *out) {
    size_t want = fp_max_payload(p, s);
    if (len != want) return pz_fail(PZ_ERR_FORMAT, "%s: payload of %zu bytes, expected %zu", fp_name(p), len, want);
    if (p->id == PZ_CODEC_FP32) memcpy(out, in, len);
    else if (p->id == PZ_CODEC_FP16) fp16_unpack(in, len / 2, out);
    else bf16_unpack(in, len / 2, out);
    return PZ_OK;
}

const pz_codec_impl pz_codec_fp32 = {"fp32", PZ_CODEC_FP32, fp_parse, fp_format, fp_validate,
                                     fp_max_payload, fp_encode, fp_decode, NULL, NULL};
const pz_codec_impl pz_codec_fp16 = {"fp16", PZ_CODEC_FP16, fp_parse, fp_format, fp_validate,
                                     fp_max_payload, fp_encode, fp_decode, NULL, NULL};
const pz_codec_impl pz_codec_bf16 = {"bf16", PZ_CODEC_BF16, fp_parse, fp_format, fp_validate,
                                     fp_max_payload, fp_encode, fp_decode, NULL, NULL};
