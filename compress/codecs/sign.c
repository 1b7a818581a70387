/* sign.c: one-bit codes with one scale per group (groups as in qcommon.h,
 * default group=row, i.e. one scale per token).
 *   sign (= sign:scaled): bit = (x >= 0); decoded m*(2*bit - 1) with m the
 *       group's mean |x| (EF-SignSGD's scaled sign; biased, use with ef()).
 *   sign:stochastic: with s = max|x| of the group (rounded up to the scale
 *       dtype), bit = 1 with probability (1 + x/s)/2; decoded s*(2*bit - 1).
 *       E[decoded] = x (BinSGDM/Birder binary randomisation).
 * A group whose scale is 0 decodes to zeros.
 * Payload: G scales (fp32 or fp16), then ceil(n/8) bytes of bits, bit j of a
 * byte = element 8*i + j (the CGX layout with b = 1). */

/* hot loops are throughput-bound: let gcc use 512-bit vectors where the
 * build targets AVX-512 (it defaults to 256 bits) */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/bitpack.h"
#include "compress/codecs/qcommon.h"
#include "base/mem.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

static pz_status sign_parse(pz_codec_params *p, const char *args, const char *spec, size_t where) {
    p->group_mode = PZ_GROUP_ROW;
    p->scale_fp32 = 1;
    p->stochastic = 0;
    if (!args[0]) return PZ_OK;
    if (args[0] != ':') return pz_spec_fail(spec, where, "expected ':' before the options");
    size_t base = where + 1, pos = 0;
    pz_spec_opt o;
    int r;
    pz_status st;
    while ((r = pz_spec_next_opt(spec, base, args + 1, &pos, &o)) > 0) {
        if (pz_spec_key_is(&o, "stochastic") && !o.val) p->stochastic = 1;
        else if (pz_spec_key_is(&o, "scaled") && !o.val) p->stochastic = 0;
        else if (pz_spec_scale_opt(spec, &o, p, &st)) {
            if (st != PZ_OK) return st;
        } else {
            return pz_spec_unknown(spec, &o, "sign", "scaled, stochastic, group=, sdtype=");
        }
    }
    return r < 0 ? PZ_ERR_ARG : PZ_OK;
}

static void sign_format(const pz_codec_params *p, char *buf, size_t cap) {
    char g[24];
    snprintf(buf, cap, "sign:%s,group=%s,sdtype=%s", p->stochastic ? "stochastic" : "scaled",
             pz_spec_group_name(p, g, sizeof g), p->scale_fp32 ? "fp32" : "fp16");
}

static pz_status sign_validate(const pz_codec_params *p) {
    if (p->group_mode > PZ_GROUP_TENSOR || p->scale_fp32 > 1 || p->stochastic > 1)
        return pz_fail(PZ_ERR_FORMAT, "sign: bad mode field");
    if ((p->group_mode == PZ_GROUP_BLOCK) != (p->group_size != 0) || p->group_size > (1u << 31))
        return pz_fail(PZ_ERR_FORMAT, "sign: bad group size %u", p->group_size);
    if (p->bits || p->scale_mode || p->round_mode || p->value_mode || p->per_row || p->elias ||
        p->fraction != 0.0f || p->budget != 0.0f)
        return pz_fail(PZ_ERR_FORMAT, "sign: fields of other codecs set");
    return PZ_OK;
}

static size_t scale_bytes(const pz_codec_params *p, const pz_shape *s) {
    return pz_group_count(p, s) * (p->scale_fp32 ? 4 : 2);
}

static size_t sign_max_payload(const pz_codec_params *p, const pz_shape *s) {
    return scale_bytes(p, s) + pz_pack_bytes(pz_shape_numel(s), 1);
}

/* Scale per group: mean |x| (scaled) or max |x| (stochastic). 0 on inf/NaN. */
static int sign_scales(const pz_codec_params *p, const pz_groups *g, const float *x, float *sc) {
    uint32_t worst = 0;
    if (g->span) {
        for (size_t gi = 0; gi < g->G; gi++) {
            size_t a = gi * g->span, e = a + g->span < g->n ? a + g->span : g->n;
            uint32_t am = 0;
#pragma omp simd reduction(max : am)
            for (size_t i = a; i < e; i++) {
                uint32_t ab = pz_f2u(x[i]) & 0x7fffffffu;
                am = ab > am ? ab : am;
            }
            /* the canonical order of compress/core/elem_codecs.h, as the GPU sums */
            double sum = p->stochastic ? 0.0 : pz_sum_abs_canon(x + a, e - a);
            worst = am > worst ? am : worst;
            sc[gi] = p->stochastic ? pz_u2f(am) : pz_sign_mean(sum, e - a);
        }
    } else {
        size_t C = g->C, R = g->n / C;
        uint32_t *am = xcalloc(C, 4);
        double *sum = xcalloc(C, sizeof(double));
        for (size_t r = 0; r < R; r++) {
            const float *row = x + r * C;
#pragma omp simd
            for (size_t c = 0; c < C; c++) {
                uint32_t ab = pz_f2u(row[c]) & 0x7fffffffu;
                am[c] = ab > am[c] ? ab : am[c];
                sum[c] = sum[c] + pz_term_abs(row[c]);
            }
        }
        for (size_t c = 0; c < C; c++) {
            worst = am[c] > worst ? am[c] : worst;
            sc[c] = p->stochastic ? pz_u2f(am[c]) : pz_sign_mean(sum[c], R);
        }
        free(am);
        free(sum);
    }
    return worst < 0x7f800000u;
}

static pz_status sign_encode(const pz_codec_params *p, const float *x, const pz_shape *s,
                             const pz_codec_ctx *ctx, uint8_t *out, size_t cap, size_t *len) {
    size_t need = sign_max_payload(p, s);
    if (cap < need) return pz_fail(PZ_ERR_SHAPE, "sign encode: %zu bytes of room, payload needs %zu", cap, need);
    pz_groups g;
    pz_groups_init(&g, p, s);
    int fp32 = p->scale_fp32;
    float *sc = xmalloc(g.G * sizeof(float) * 2), *hinv = sc + g.G;
    if (!sign_scales(p, &g, x, sc)) {
        free(sc);
        return pz_fail(PZ_ERR_ARG, "sign encode: input holds inf or NaN");
    }
    for (size_t gi = 0; gi < g.G; gi++) {
        sc[gi] = pz_scale_store(sc[gi], fp32, p->stochastic ? +1 : 0);
        if (!isfinite(sc[gi])) {
            free(sc);
            return pz_fail(PZ_ERR_ARG, "sign encode: scale of group %zu beyond the fp16 range (use sdtype=fp32)", gi);
        }
        pz_scale_put(out, gi, sc[gi], fp32);
        hinv[gi] = pz_sign_hinv(sc[gi]);
    }
    uint8_t *bits_out = out + scale_bytes(p, s);
    if (!p->stochastic) {
        /* no randomness and no scale needed per element: straight to bits */
        size_t i = 0;
#if defined(__AVX512F__)
        for (; i + 16 <= g.n; i += 16) {
            __mmask16 m = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), _mm512_setzero_ps(), _CMP_GE_OQ);
            uint16_t mm = (uint16_t)m;
            memcpy(bits_out + i / 8, &mm, 2);
        }
#elif defined(__AVX2__)
        for (; i + 16 <= g.n; i += 16) {
            unsigned m0 = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), _mm256_setzero_ps(), _CMP_GE_OQ));
            unsigned m1 = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), _mm256_setzero_ps(), _CMP_GE_OQ));
            uint16_t mm = (uint16_t)(m0 | m1 << 8);
            memcpy(bits_out + i / 8, &mm, 2);
        }
#endif
        for (; i < g.n; i += 8) {
            uint32_t byte = 0;
            size_t e = i + 8 < g.n ? i + 8 : g.n;
            for (size_t j = i; j < e; j++) byte |= (uint32_t)pz_sign_bit_scaled(x[j]) << (j - i);
            bits_out[i / 8] = (uint8_t)byte;
        }
    } else {
        uint64_t key = pz_ctx_key(ctx);
        /* P(bit) = (1 + x/s)/2 = x*hinv + 1/2, hinv = 1/(2s) */
        PZ_ENCODE_RUNS(g, key, 1, bits_out, {
            const float *xi = x + i;
            if (g.span) {
                float hv = hinv[gi];
                _Pragma("omp simd") for (uint32_t j = 0; j < (uint32_t)m; j++)
                    cd[j] = pz_sign_bit_stoch(xi[j], hv, pz_uniform2(klo, khi, i32 + j));
            } else {
                const float *hv = hinv + gi;
                _Pragma("omp simd") for (uint32_t j = 0; j < (uint32_t)m; j++)
                    cd[j] = pz_sign_bit_stoch(xi[j], hv[j], pz_uniform2(klo, khi, i32 + j));
            }
        });
    }
    free(sc);
    *len = need;
    return PZ_OK;
}

static pz_status sign_decode(const pz_codec_params *p, const uint8_t *in, size_t len,
                             const pz_shape *s, float *out) {
    size_t need = sign_max_payload(p, s);
    if (len != need) return pz_fail(PZ_ERR_FORMAT, "sign: payload of %zu bytes, expected %zu", len, need);
    pz_groups g;
    pz_groups_init(&g, p, s);
    float *sc = xmalloc(g.G * sizeof(float));
    for (size_t gi = 0; gi < g.G; gi++) {
        sc[gi] = pz_scale_get(in, gi, p->scale_fp32);
        if (!(sc[gi] >= 0.0f) || !isfinite(sc[gi])) {
            free(sc);
            return pz_fail(PZ_ERR_FORMAT, "sign: group %zu has a bad scale", gi);
        }
    }
    const uint8_t *bits = in + scale_bytes(p, s);
    if (g.n % 8 && (bits[g.n / 8] >> (g.n % 8))) {
        free(sc);
        return pz_fail(PZ_ERR_FORMAT, "sign: non-zero padding after the last bit");
    }
    for (size_t a = 0; a < g.n; a += PZ_CHUNK) {
        size_t e = a + PZ_CHUNK < g.n ? a + PZ_CHUNK : g.n;
        pz_bits_to_pm1(bits + a / 8, e - a, out + a);   /* +-1, then scaled while in cache */
        for (size_t i = a; i < e;) {
            size_t gi, re = pz_group_run(&g, i, e, &gi);
            float *o = out + i;
            size_t m = re - i;
            if (g.span) {
                float v = sc[gi];
#pragma omp simd
                for (size_t j = 0; j < m; j++) o[j] = o[j] * v + 0.0f;   /* + 0: no -0 from a zero scale */
            } else {
                const float *v = sc + gi;
#pragma omp simd
                for (size_t j = 0; j < m; j++) o[j] = o[j] * v[j] + 0.0f;
            }
            i = re;
        }
    }
    free(sc);
    return PZ_OK;
}

const pz_codec_impl pz_codec_sign = {"sign", PZ_CODEC_SIGN, sign_parse, sign_format, sign_validate,
                                     sign_max_payload, sign_encode, sign_decode, NULL, NULL};
