/* quant.c: q<b>, uniform quantization with b = 1..8 bits.
 *
 * Per group (see qcommon.h) a range [lo, hi] is sent:
 *   scale=absmax: lo = -s, hi = s, s = max|x| of the group rounded up to the
 *                 scale dtype;
 *   scale=minmax: lo = min(x) rounded down, hi = max(x) rounded up.
 * and both sides build the group's grid from it (pz_q_grid, elem_codecs.h):
 *   grid=midrise: 2^b levels lo + k*step, step = (hi - lo)/K, k = 0..K,
 *                 K = 2^b - 1 (absmax: symmetric, 0 is not a level);
 *   grid=midtread (the default), b >= 2: levels (k - z)*step, so that 0 is
 *     exactly level z:
 *     absmax: z = L = 2^(b-1) - 1, step = s/L (one ulp more when L*step < s),
 *             levels -L..L times step (AQ-SGD's symmetric grid), k = 0..2L;
 *             code 2^b - 1 is unused;
 *     minmax: step = (hi - lo)/(K - 1), z = ceil(-lo/step) (one more if
 *             rounding left z*step < -lo), k = 0..K: one level of the 2^b
 *             pays for aligning the grid on 0; a group whose range does not
 *             hold 0 uses the midrise grid (no 0 to represent);
 *     b = 1 has no room for 3 levels: midtread is the midrise grid, {-s, +s}
 *     (absmax) or {lo, hi} (minmax).
 * Each grid covers every value of its group, so stochastic rounding
 * (k = floor(y) + Bernoulli(y - floor(y)), y = the position of x on the grid)
 * never clips and is unbiased; nearest rounding (ties to even) errs by at
 * most step/2: absmax s/(2^b - 1) (midrise) or s/(2^b - 2) (midtread, b >= 2),
 * minmax (hi - lo)/(2(2^b - 1)) or (hi - lo)/(2(2^b - 2)).
 * A group whose range is zero decodes to lo exactly (all zeros for a zero
 * group). Tiny groups (step below 2^-126) are quantised at 2^64 times their
 * size (pz_qgrid), so their relative error is that of any other group;
 * fp16 scales that underflow send the group as zeros (qcommon.h).
 * Payload: G scales (absmax: s; minmax: lo, hi interleaved) as fp32 or fp16,
 * then ceil(n/8)*b bytes of codes k in the CGX layout (bitpack.h). */

/* hot loops are throughput-bound: let gcc use 512-bit vectors where the
 * build targets AVX-512 (it defaults to 256 bits) */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/bitpack.h"
#include "compress/codecs/qcommon.h"
#include "base/mem.h"

static pz_status q_parse(pz_codec_params *p, const char *args, const char *spec, size_t where) {
    p->scale_mode = PZ_SCALE_ABSMAX;
    p->group_mode = PZ_GROUP_CHANNEL;
    p->round_mode = PZ_ROUND_UNSET;   /* the default of the codec's use (spec.c, pz_codec_create_for) */
    p->scale_fp32 = 1;
    p->grid = PZ_GRID_MIDTREAD;
    size_t i;
    pz_status st = pz_spec_bits(spec, where, args, "q", &i, p);
    if (st != PZ_OK) return st;
    if (!args[i]) return PZ_OK;
    if (args[i] != ':') return pz_spec_fail(spec, where + i, "expected ':' before the options");
    i++;
    const char *list = args + i;
    size_t base = where + i, pos = 0;
    pz_spec_opt o;
    int r;
    while ((r = pz_spec_next_opt(spec, base, list, &pos, &o)) > 0) {
        if (pz_spec_scale_opt(spec, &o, p, &st)) {
            if (st != PZ_OK) return st;
        } else if (pz_spec_key_is(&o, "scale") && o.val) {
            if (pz_spec_val_is(&o, "absmax")) p->scale_mode = PZ_SCALE_ABSMAX;
            else if (pz_spec_val_is(&o, "minmax")) p->scale_mode = PZ_SCALE_MINMAX;
            else return pz_spec_fail(spec, o.voff, "scale must be absmax or minmax");
        } else if (pz_spec_key_is(&o, "round") && o.val) {
            if (pz_spec_val_is(&o, "stochastic")) p->round_mode = PZ_ROUND_STOCHASTIC;
            else if (pz_spec_val_is(&o, "nearest")) p->round_mode = PZ_ROUND_NEAREST;
            else return pz_spec_fail(spec, o.voff, "round must be stochastic or nearest");
        } else if (pz_spec_key_is(&o, "grid") && o.val) {
            if (pz_spec_val_is(&o, "midtread")) p->grid = PZ_GRID_MIDTREAD;
            else if (pz_spec_val_is(&o, "midrise")) p->grid = PZ_GRID_MIDRISE;
            else return pz_spec_fail(spec, o.voff, "grid must be midtread or midrise");
        } else {
            return pz_spec_unknown(spec, &o, "q", "scale=, group=, round=, sdtype=, grid=");
        }
    }
    return r < 0 ? PZ_ERR_ARG : PZ_OK;
}

static void q_format(const pz_codec_params *p, char *buf, size_t cap) {
    char g[24];
    snprintf(buf, cap, "q%u:scale=%s,group=%s,round=%s,sdtype=%s,grid=%s", (unsigned)p->bits,
             p->scale_mode == PZ_SCALE_MINMAX ? "minmax" : "absmax", pz_spec_group_name(p, g, sizeof g),
             p->round_mode == PZ_ROUND_NEAREST ? "nearest" : "stochastic", p->scale_fp32 ? "fp32" : "fp16",
             p->grid == PZ_GRID_MIDTREAD ? "midtread" : "midrise");
}

static pz_status q_validate(const pz_codec_params *p) {
    if (p->bits < 1 || p->bits > 8) return pz_fail(PZ_ERR_FORMAT, "q: bits %u", p->bits);
    if (p->scale_mode > PZ_SCALE_MINMAX || p->group_mode > PZ_GROUP_TENSOR || p->round_mode > PZ_ROUND_NEAREST ||
        p->scale_fp32 > 1 || p->grid > PZ_GRID_MIDTREAD)
        return pz_fail(PZ_ERR_FORMAT, "q: bad mode field");
    if ((p->group_mode == PZ_GROUP_BLOCK) != (p->group_size != 0) || p->group_size > (1u << 31))
        return pz_fail(PZ_ERR_FORMAT, "q: bad group size %u", p->group_size);
    if (p->value_mode || p->per_row || p->elias || p->stochastic || p->fraction != 0.0f || p->budget != 0.0f)
        return pz_fail(PZ_ERR_FORMAT, "q: fields of other codecs set");
    return PZ_OK;
}

static size_t nscales(const pz_codec_params *p) { return p->scale_mode == PZ_SCALE_MINMAX ? 2 : 1; }

static size_t q_scale_bytes(const pz_codec_params *p, const pz_shape *s) {
    return pz_group_count(p, s) * nscales(p) * (p->scale_fp32 ? 4 : 2);
}

static size_t q_max_payload(const pz_codec_params *p, const pz_shape *s) {
    return q_scale_bytes(p, s) + pz_pack_bytes(pz_shape_numel(s), p->bits);
}

/* Per-group statistics: range [lo, hi] of each group (absmax: -s..s) and
 * whether every value is finite. */
static int group_stats(const pz_codec_params *p, const pz_groups *g, const float *x, float *lo, float *hi) {
    uint32_t worst = 0;    /* max of |x| bits: >= 0x7f800000 means inf or NaN */
    int minmax = p->scale_mode == PZ_SCALE_MINMAX;
    if (g->span) {
        for (size_t gi = 0; gi < g->G; gi++) {
            size_t a = gi * g->span, e = a + g->span < g->n ? a + g->span : g->n;
            uint32_t am = 0;
            int32_t mn = INT32_MAX, mx = INT32_MIN;
            if (minmax) {
#pragma omp simd reduction(max : am, mx) reduction(min : mn)
                for (size_t i = a; i < e; i++) {
                    uint32_t b = pz_f2u(x[i]);
                    uint32_t ab = b & 0x7fffffffu;
                    am = ab > am ? ab : am;
                    int32_t o = pz_ord32(b);
                    mn = o < mn ? o : mn;
                    mx = o > mx ? o : mx;
                }
                lo[gi] = pz_u2f((uint32_t)pz_ord32((uint32_t)mn));
                hi[gi] = pz_u2f((uint32_t)pz_ord32((uint32_t)mx));
            } else {
#pragma omp simd reduction(max : am)
                for (size_t i = a; i < e; i++) {
                    uint32_t ab = pz_f2u(x[i]) & 0x7fffffffu;
                    am = ab > am ? ab : am;
                }
                hi[gi] = pz_u2f(am);
                lo[gi] = -hi[gi];
            }
            worst = am > worst ? am : worst;
        }
    } else {
        size_t C = g->C, R = g->n / C;
        uint32_t *am = xcalloc(C, 4);
        int32_t *mn = minmax ? xmalloc(C * 4) : NULL, *mx = minmax ? xmalloc(C * 4) : NULL;
        if (minmax)
            for (size_t c = 0; c < C; c++) { mn[c] = INT32_MAX; mx[c] = INT32_MIN; }
        for (size_t r = 0; r < R; r++) {
            const float *row = x + r * C;
            if (minmax) {
#pragma omp simd
                for (size_t c = 0; c < C; c++) {
                    uint32_t rb = pz_f2u(row[c]), ab = rb & 0x7fffffffu;
                    am[c] = ab > am[c] ? ab : am[c];
                    int32_t o = pz_ord32(rb);
                    mn[c] = o < mn[c] ? o : mn[c];
                    mx[c] = o > mx[c] ? o : mx[c];
                }
            } else {
#pragma omp simd
                for (size_t c = 0; c < C; c++) {
                    uint32_t ab = pz_f2u(row[c]) & 0x7fffffffu;
                    am[c] = ab > am[c] ? ab : am[c];
                }
            }
        }
        for (size_t c = 0; c < C; c++) {
            worst = am[c] > worst ? am[c] : worst;
            if (minmax) {
                lo[c] = pz_u2f((uint32_t)pz_ord32((uint32_t)mn[c]));
                hi[c] = pz_u2f((uint32_t)pz_ord32((uint32_t)mx[c]));
            } else {
                hi[c] = pz_u2f(am[c]);
                lo[c] = -hi[c];
            }
        }
        free(am);
        free(mn);
        free(mx);
    }
    return worst < 0x7f800000u;
}

/* The group's grid from its stored range (pz_q_grid); 0 when not usable. */
static int make_grid(const pz_codec_params *p, float lo, float hi, pz_qgrid *gr) {
    return pz_q_grid(lo, hi, p->bits, p->grid == PZ_GRID_MIDTREAD, p->scale_mode == PZ_SCALE_MINMAX, gr);
}

/* Codes of m elements xi[j] of a run, j = 0..m-1: the group's encoder
 * parameters are of[j*cs], iv[j*cs], fs[j*cs] (cs = 0: one group; cs = 1:
 * channel groups, one per element; without tiny groups every fs is 1 and the
 * channel loop skips it); the per-element formulas are those of
 * compress/core/elem_codecs.h, shared with the GPU kernels. */
#define Q_RUN(FORMULA)                                                                                   \
    do {                                                                                                 \
        if (cs && tiny) {                                                                                \
            _Pragma("omp simd") for (uint32_t j = 0; j < (uint32_t)m; j++) cd[j] = FORMULA(j);            \
        } else if (cs) {                                                                                 \
            _Pragma("omp simd") for (uint32_t j = 0; j < (uint32_t)m; j++) cd[j] = FORMULA##P(j);         \
        } else {                                                                                         \
            float of0 = of[0], iv0 = iv[0], fs0 = fs[0];                                                 \
            _Pragma("omp simd") for (uint32_t j = 0; j < (uint32_t)m; j++) cd[j] = FORMULA##0(j);         \
        }                                                                                                \
    } while (0)
#define Q_STOCH(j) pz_q_code_stoch(xi[j] * fs[j], of[j], iv[j], kmax, pz_uniform2(klo, khi, i32 + j))
#define Q_STOCH0(j) pz_q_code_stoch(xi[j] * fs0, of0, iv0, kmax, pz_uniform2(klo, khi, i32 + j))
#define Q_STOCHP(j) pz_q_code_stoch(xi[j], of[j], iv[j], kmax, pz_uniform2(klo, khi, i32 + j))
#define Q_STMT(j) pz_q_code_stoch_mt(xi[j] * fs[j], of[j], iv[j], kmax, pz_uniform2(klo, khi, i32 + j))
#define Q_STMT0(j) pz_q_code_stoch_mt(xi[j] * fs0, of0, iv0, kmax, pz_uniform2(klo, khi, i32 + j))
#define Q_STMTP(j) pz_q_code_stoch_mt(xi[j], of[j], iv[j], kmax, pz_uniform2(klo, khi, i32 + j))
#define Q_NEAR(j) pz_q_code_near(xi[j] * fs[j], of[j], iv[j], kmax)
#define Q_NEAR0(j) pz_q_code_near(xi[j] * fs0, of0, iv0, kmax)
#define Q_NEARP(j) pz_q_code_near(xi[j], of[j], iv[j], kmax)

static pz_status q_encode(const pz_codec_params *p, const float *x, const pz_shape *s,
                          const pz_codec_ctx *ctx, uint8_t *out, size_t cap, size_t *len) {
    size_t need = q_max_payload(p, s);
    if (cap < need) return pz_fail(PZ_ERR_SHAPE, "q encode: %zu bytes of room, payload needs %zu", cap, need);
    pz_groups g;
    pz_groups_init(&g, p, s);
    int b = p->bits, fp32 = p->scale_fp32, minmax = p->scale_mode == PZ_SCALE_MINMAX;
    int mt = p->grid == PZ_GRID_MIDTREAD;
    int32_t kmax = pz_q_kmax(b, mt, minmax);
    float *lo = xmalloc(g.G * sizeof(float) * 5), *hi = lo + g.G, *offs = hi + g.G, *invs = offs + g.G,
          *fss = invs + g.G;
    pz_status st = PZ_OK;
    if (!group_stats(p, &g, x, lo, hi)) {
        st = pz_fail(PZ_ERR_ARG, "q encode: input holds inf or NaN");
        goto done;
    }
    /* scales as the receiver reads them, and the grids */
    int tiny = 0;
    for (size_t gi = 0; gi < g.G; gi++) {
        pz_qgrid gr;
        pz_q_range_put(out, gi, minmax, fp32, &lo[gi], &hi[gi]);
        if (!make_grid(p, lo[gi], hi[gi], &gr)) {
            st = pz_fail(PZ_ERR_ARG, "q encode: group %zu spans [%g, %g], beyond the range of %s scales",
                         gi, (double)lo[gi], (double)hi[gi], fp32 ? "fp32" : "fp16 (use sdtype=fp32)");
            goto done;
        }
        offs[gi] = gr.off;
        invs[gi] = gr.inv;
        fss[gi] = gr.fs;
        tiny |= gr.fs != 1.0f;
    }
    uint8_t *codes_out = out + q_scale_bytes(p, s);
    uint64_t key = pz_ctx_key(ctx);
    int stoch = p->round_mode == PZ_ROUND_STOCHASTIC;
    int cs = g.span == 0;
    PZ_ENCODE_RUNS(g, key, b, codes_out, {
        const float *xi = x + i, *of = offs + gi, *iv = invs + gi, *fs = fss + gi;
        if (stoch && mt) Q_RUN(Q_STMT);
        else if (stoch) Q_RUN(Q_STOCH);
        else Q_RUN(Q_NEAR);
    });
    *len = need;
done:
    free(lo);
    return st;
}

static pz_status q_decode(const pz_codec_params *p, const uint8_t *in, size_t len,
                          const pz_shape *s, float *out) {
    size_t need = q_max_payload(p, s);
    if (len != need) return pz_fail(PZ_ERR_FORMAT, "q: payload of %zu bytes, expected %zu", len, need);
    pz_groups g;
    pz_groups_init(&g, p, s);
    int b = p->bits, fp32 = p->scale_fp32, minmax = p->scale_mode == PZ_SCALE_MINMAX;
    int32_t kmax = pz_q_kmax(b, p->grid == PZ_GRID_MIDTREAD, minmax);
    float *lo = xmalloc(g.G * sizeof(float) * 3), *step = lo + g.G, *fd = step + g.G;
    pz_status st = PZ_OK;
    int tiny = 0;
    for (size_t gi = 0; gi < g.G; gi++) {
        float l, h;
        pz_qgrid gr;
        pz_q_range_get(in, gi, minmax, fp32, &l, &h);
        if (!make_grid(p, l, h, &gr)) {
            st = pz_fail(PZ_ERR_FORMAT, "q: group %zu has a bad scale", gi);
            goto done;
        }
        lo[gi] = gr.lo;
        step[gi] = gr.step;
        fd[gi] = gr.fd;
        tiny |= gr.fd != 1.0f;
    }
    const uint8_t *codes_in = in + q_scale_bytes(p, s);
    uint8_t codes[PZ_CHUNK];
    for (size_t a = 0; a < g.n; a += PZ_CHUNK) {
        size_t e = a + PZ_CHUNK < g.n ? a + PZ_CHUNK : g.n;
        if (pz_unpack_codes(codes_in + (a / 8) * (size_t)b, pz_pack_bytes(e - a, b), e - a, b, codes) != PZ_OK) {
            st = pz_fail(PZ_ERR_FORMAT, "q: non-zero padding after the last code");
            goto done;
        }
        for (size_t i = a; i < e;) {
            size_t gi, re = pz_group_run(&g, i, e, &gi);
            const uint8_t *cd = codes + (i - a);
            float *o = out + i;
            size_t m = re - i;
            if (g.span) {
                float l = lo[gi], sp = step[gi], f = fd[gi];
#pragma omp simd
                for (size_t j = 0; j < m; j++) o[j] = pz_q_value(cd[j], kmax, l, sp, f);
            } else if (!tiny) {   /* every fd is 1 */
                const float *l = lo + gi, *sp = step + gi;
#pragma omp simd
                for (size_t j = 0; j < m; j++) o[j] = pz_q_value_lin(cd[j], kmax, l[j], sp[j]);
            } else {
                const float *l = lo + gi, *sp = step + gi, *f = fd + gi;
#pragma omp simd
                for (size_t j = 0; j < m; j++) o[j] = pz_q_value(cd[j], kmax, l[j], sp[j], f[j]);
            }
            i = re;
        }
    }
done:
    free(lo);
    return st;
}

const pz_codec_impl pz_codec_q = {"q", PZ_CODEC_Q, q_parse, q_format, q_validate, q_max_payload, q_encode, q_decode,
                                 NULL, NULL};
