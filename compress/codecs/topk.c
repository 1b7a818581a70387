/* topk.c: magnitude TopK with exact selection.
 *
 * Spec:  topk:<fraction>[,scope=row|tensor][,values=fp32|fp16|q8]
 *        defaults scope=row, values=fp32; 1e-9 <= fraction <= 1.
 *
 * Segments. scope=row: each row (last dimension, the hidden channel, of
 * length C = dims[ndim-1]) is a segment, as in Rudakov et al.; a 1-D tensor is
 * one row. scope=tensor: the whole tensor (n elements) is one segment.
 * A segment of length L keeps
 *     k(L) = min(L, max(1, floor(fraction * L)))    (k(0) = 0)
 * elements, where fraction is the decimal of the canonical spec (the
 * shortest decimal that reads back as the stored fp32 value, so 0.7 is 7/10
 * and not 0.69999998) and the product is evaluated exactly in integers.
 * K = (number of segments) * k(L) values are sent.
 *
 * Selection. Exactly the k largest |x| of each segment: T = the k-th largest
 * magnitude, found by an exact selection (compress/core/kselect.h) among the
 * candidates that a one-pass filter with an estimated lower bound of T keeps
 * (or among the whole segment when the estimate was wrong; see "encode"
 * below), then the elements with |x| > T and, of those with |x| == T, the
 * ones with the lowest indices ("ties broken by lower index"), so the set is
 * deterministic.
 * Magnitudes compare as the bits of |x|: -0 == +0, inf above every finite
 * value, NaN above inf.
 *
 * Payload (little-endian):
 *   byte 0        index coding: 0 = bitmap, 1 = delta varints (other values invalid)
 *   scales        values=q8 only: one fp32 per segment (none when K = 0)
 *   values        K values in ascending flat index order: fp32 (4 bytes),
 *                 fp16 (2 bytes, round to nearest even, |x| >= 65520 -> inf),
 *                 or q8 (1 byte, two's complement q in [-127, 127])
 *   indices       the K flat indices i_0 < i_1 < ... of the kept elements, as
 *     bitmap:     ceil(n/8) bytes, bit i (byte i/8, bit i%8, LSB first) set iff
 *                 element i is kept; padding bits of the last byte are zero;
 *     varints:    LEB128 of d_0 = i_0 and d_j = i_j - i_(j-1) - 1 (gap minus one),
 *                 V = sum_j len(d_j) bytes, len(d) = max(1, ceil(bitlen(d)/7)).
 * The encoder takes the varints iff V < ceil(n/8) (ties go to the bitmap), so
 *     payload bytes = 1 + 4*S + K*vb + min(V, ceil(n/8))  [varints iff V < ceil(n/8)]
 * with vb = 4, 2, 1 for fp32, fp16, q8, S = number of segments for q8 (0 when
 * K = 0 or values != q8). max_payload is the bitmap case (exact upper bound).
 *
 * q8 values: per segment s = max |x| over the segment (always kept), fp32;
 * q = rne(x * (127 / s)) clamped to [-127, 127] with 127/s computed in fp32
 * (s = 0: all codes 0); decoded as q * (s / 127), s/127 in fp32. Error
 * |x - x'| <= s/254 (plus fp32 rounding). Non-finite kept values with q8 are
 * refused (PZ_ERR_ARG); fp32 and fp16 carry them through.
 *
 * Decoding writes zeros to every element not kept and validates everything:
 * the coding byte, the exact length, scales (finite, >= 0), q8 codes (-128 is
 * invalid), index range, strictly ascending indices (no overflow of the gap
 * sum), exactly k indices in every segment (bitmap popcount per segment),
 * zero bitmap padding, varints minimal and used only when shorter than the
 * bitmap, and every byte consumed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/bitpack.h"
#include "compress/core/codec_impl.h"
#include "compress/core/codec_ext.h"
#include "compress/core/elem.h"
#include "compress/core/elem_codecs.h"
#include "compress/core/kselect.h"
#include "compress/core/spec.h"
#include "base/mem.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "topk.c assumes a little-endian host"
#endif

#define TOPK_MIN_FRACTION 1e-9

/* ---- spec parsing ---- */

/* The shortest decimal that reads back as f, as num / den (exact). f in
 * [1e-9, 1]. */
static void frac_decimal(float f, uint64_t *num, uint64_t *den) {
    char buf[48];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, (double)f);
        if (strtof(buf, NULL) == f) break;
    }
    /* buf = d[.ddd]e[+-]XX */
    uint64_t m = 0;
    int nd = 0;
    const char *s = buf;
    for (; *s && *s != 'e'; s++) {
        if (*s >= '0' && *s <= '9') {
            m = m * 10 + (uint64_t)(*s - '0');
            nd++;
        }
    }
    int e = *s == 'e' ? atoi(s + 1) : 0;
    int scale = nd - 1 - e;          /* value = m / 10^scale */
    uint64_t d = 1;
    while (scale < 0) { m *= 10; scale++; }
    while (scale > 0 && m % 10 == 0) { m /= 10; scale--; }
    for (int i = 0; i < scale; i++) d *= 10;
    *num = m;
    *den = d;
}

static size_t topk_k(float fraction, size_t L) {
    if (L == 0) return 0;
    uint64_t num, den;
    frac_decimal(fraction, &num, &den);
    unsigned __int128 q = ((unsigned __int128)num * L) / den;
    size_t k = q >= L ? L : (size_t)q;
    return k < 1 ? 1 : k;
}

/* one option of a topk spec (after its leading number) */
static int topk_opt(const char *spec, const pz_spec_opt *o, pz_codec_params *p, pz_status *st) {
    size_t at = o->val ? o->voff : o->off;
    if (pz_spec_key_is(o, "scope")) {
        if (pz_spec_val_is(o, "row")) p->per_row = 1;
        else if (pz_spec_val_is(o, "tensor")) p->per_row = 0;
        else *st = pz_spec_fail(spec, at, "topk scope must be row or tensor");
        return 1;
    }
    if (!pz_spec_key_is(o, "values")) return 0;
    if (pz_spec_val_is(o, "fp32")) p->value_mode = PZ_VALUES_FP32;
    else if (pz_spec_val_is(o, "fp16")) p->value_mode = PZ_VALUES_FP16;
    else if (pz_spec_val_is(o, "q8")) p->value_mode = PZ_VALUES_Q8;
    else *st = pz_spec_fail(spec, at, "topk values must be fp32, fp16 or q8");
    return 1;
}

static pz_status topk_parse(pz_codec_params *p, const char *args, const char *spec, size_t where) {
    static const pz_spec_lead lead = {"topk fraction", "topk needs a fraction, as in topk:0.1", TOPK_MIN_FRACTION, 1.0,
                                      -INFINITY, NULL, topk_opt, "topk", "scope=, values=",
                                      {.id = PZ_CODEC_TOPK, .per_row = 1, .value_mode = PZ_VALUES_FP32}};
    pz_status st = pz_spec_parse_lead(spec, where, args, &lead, &p->fraction, p);
    if (st != PZ_OK) return st;
    p->group_mode = p->per_row ? PZ_GROUP_ROW : PZ_GROUP_TENSOR;
    return PZ_OK;
}

static void topk_format(const pz_codec_params *p, char *buf, size_t cap) {
    static const char *vn[] = {"fp32", "fp16", "q8"};
    char fr[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(fr, sizeof fr, "%.*g", prec, (double)p->fraction);
        if (strtof(fr, NULL) == p->fraction) break;
    }
    snprintf(buf, cap, "topk:%s,scope=%s,values=%s", fr, p->per_row ? "row" : "tensor",
             p->value_mode <= PZ_VALUES_Q8 ? vn[p->value_mode] : "?");
}

static pz_status topk_validate(const pz_codec_params *p) {
    if (p->id != PZ_CODEC_TOPK) return pz_fail(PZ_ERR_FORMAT, "topk: wrong codec id %u", p->id);
    if (!(p->fraction >= (float)TOPK_MIN_FRACTION && p->fraction <= 1.0f))
        return pz_fail(PZ_ERR_FORMAT, "topk: fraction %g outside [1e-9, 1]", (double)p->fraction);
    if (p->per_row > 1 || p->group_mode != (p->per_row ? PZ_GROUP_ROW : PZ_GROUP_TENSOR))
        return pz_fail(PZ_ERR_FORMAT, "topk: bad scope %u (group mode %u)", p->per_row, p->group_mode);
    if (p->value_mode > PZ_VALUES_Q8)
        return pz_fail(PZ_ERR_FORMAT, "topk: bad value mode %u", p->value_mode);
    return PZ_OK;
}

/* ---- sizes ---- */

typedef struct {
    size_t n;       /* elements */
    size_t nseg;    /* segments */
    size_t L;       /* segment length */
    size_t k;       /* kept per segment */
    size_t K;       /* kept in all */
    size_t vb;      /* bytes per value */
    size_t nscale;  /* fp32 scales */
    size_t fixed;   /* coding byte + scales + values */
    size_t bitmap;  /* bitmap bytes */
} topk_geom;

static pz_status topk_geom_of(const pz_codec_params *p, const pz_shape *s, topk_geom *g) {
    memset(g, 0, sizeof *g);
    if (s->ndim < 1 || s->ndim > PZ_MAX_DIMS) return pz_fail(PZ_ERR_SHAPE, "topk: bad ndim %d", s->ndim);
    size_t n = 1;
    for (int d = 0; d < s->ndim; d++) {
        if (s->dims[d] < 0) return pz_fail(PZ_ERR_SHAPE, "topk: negative dimension");
        if (s->dims[d] && n > (size_t)UINT32_MAX / (size_t)s->dims[d])
            return pz_fail(PZ_ERR_SHAPE, "topk: more than 2^32-1 elements");
        n *= (size_t)s->dims[d];
    }
    if (n > UINT32_MAX) return pz_fail(PZ_ERR_SHAPE, "topk: more than 2^32-1 elements");
    g->n = n;
    if (n > 0) {
        g->L = p->per_row ? (size_t)s->dims[s->ndim - 1] : n;
        g->nseg = n / g->L;
    }
    g->k = topk_k(p->fraction, g->L);
    g->K = g->nseg * g->k;
    g->vb = p->value_mode == PZ_VALUES_FP32 ? 4 : p->value_mode == PZ_VALUES_FP16 ? 2 : 1;
    g->nscale = (p->value_mode == PZ_VALUES_Q8 && g->K > 0) ? g->nseg : 0;
    g->fixed = 1 + 4 * g->nscale + g->K * g->vb;
    g->bitmap = (n + 7) / 8;
    return PZ_OK;
}

pz_status pz_topk_geometry(const pz_codec_params *p, const pz_shape *s, size_t *nseg, size_t *L, size_t *k) {
    topk_geom g;
    pz_status st = topk_geom_of(p, s, &g);
    if (st != PZ_OK) return st;
    *nseg = g.nseg;
    *L = g.L;
    *k = g.k;
    return PZ_OK;
}

static size_t topk_max_payload(const pz_codec_params *p, const pz_shape *s) {
    topk_geom g;
    if (topk_geom_of(p, s, &g) != PZ_OK) return 0;
    return g.fixed + g.bitmap;
}

/* ---- encode ----
 *
 * Per segment, the exact top k is found without a full radix select in the
 * common case:
 *   1. a lower bound t of the k-th largest key is estimated: for rows shorter
 *      than TOPK_SAMPLE_MIN from the previous segment's threshold T as
 *      T * (1 - delta) (delta adapts to keep about k/4 spare candidates), for
 *      longer segments from a strided sample of TOPK_SAMPLE elements (rank
 *      p S + 4 sqrt(p S) + 16 of the sample, p = k/L);
 *   2. one branch-free pass gathers the candidates, key >= t, with their
 *      indices (AVX-512: vpcompressd of 16 at a time; AVX2: 8 at a time
 *      through a table, compress/codecs/topk_select.h);
 *   3. if there are at least k of them (and not more than the buffer), the
 *      exact k-th largest key T among the candidates is the segment's
 *      (every element outside is below t <= T); else the segment falls back
 *      to the full radix selection (pz_kth_largest_abs);
 *   4. a filter keeps key > T and the first k - above candidates with key == T
 *      (candidates are in index order, so ties go to the lower index).
 * Values go straight into the payload (every segment has exactly k, at
 * offset seg*k), converted on the way; indices are written as varints while
 * they can still beat the bitmap, and turned into the bitmap otherwise. */

#include "compress/codecs/topk_select.h"

#define TOPK_SAMPLE 16384          /* sample size for long segments */
#define TOPK_SAMPLE_MIN 32768      /* segments at least this long are sampled */

static inline size_t varint_len32(uint32_t d) {
    return 1 + (d >= (1u << 7)) + (d >= (1u << 14)) + (d >= (1u << 21)) + (d >= (1u << 28));
}

/* The index section writer: varints while they can still be shorter than
 * the bitmap, the bitmap otherwise. */
typedef struct {
    uint8_t *ix;         /* payload + fixed */
    size_t room;         /* bytes writable at ix */
    size_t bitmap;       /* bitmap bytes */
    size_t V;            /* varint bytes written */
    size_t lim;          /* varints stay while V <= lim = min(room, bitmap - 1) */
    uint32_t prev;       /* last index + 1 (0 before the first) */
    int bitmap_mode;
    int too_small;
} idxw_;

static void idxw_to_bitmap(idxw_ *w) {
    /* rebuild the indices written so far as a bitmap */
    uint8_t *bm = xcalloc(w->bitmap, 1);
    size_t q = 0;
    uint64_t pos = 0;
    while (q < w->V) {
        uint64_t d;
        if (w->ix[q] < 0x80) d = w->ix[q++];
        else if (pz_varint_get(w->ix, w->V, &q, &d) != PZ_OK) break;   /* cannot happen */
        pos += d;
        bm[pos >> 3] |= (uint8_t)(1u << (pos & 7));
        pos++;
    }
    memcpy(w->ix, bm, w->bitmap);
    free(bm);
    w->bitmap_mode = 1;
}

static void idxw_put(idxw_ *w, const uint32_t *idx, size_t k) {
    size_t j = 0;
    if (!w->bitmap_mode) {
        uint8_t *ix = w->ix;
        size_t V = w->V, lim = w->lim;
        uint32_t prev = w->prev;
        for (; j < k; j++) {
            uint32_t d = idx[j] - prev;
            if (d < 0x80 && V < lim) {
                ix[V++] = (uint8_t)d;
            } else {
                size_t l = varint_len32(d);
                if (V + l <= lim) {
                    V += pz_varint_put(ix + V, d);
                } else if (V + l > w->bitmap - 1 && w->room >= w->bitmap) {
                    w->V = V;
                    idxw_to_bitmap(w);
                    break;
                } else {
                    w->too_small = 1;
                    w->V = V;
                    return;
                }
            }
            prev = idx[j] + 1;
        }
        w->V = V;
        w->prev = prev;
    }
    if (w->bitmap_mode) {
        uint8_t *bm = w->ix;
        for (; j < k; j++) bm[idx[j] >> 3] |= (uint8_t)(1u << (idx[j] & 7));
    }
}

/* Writes the k values of one segment at o (vb bytes each). */
static pz_status put_values(const pz_codec_params *p, const float *v, size_t k, uint8_t *o, float *scale) {
    if (p->value_mode == PZ_VALUES_FP32) {
        memcpy(o, v, k * 4);
        return PZ_OK;
    }
    size_t j = 0;
    if (p->value_mode == PZ_VALUES_FP16) {
#if defined(__AVX512F__)
        for (; j + 16 <= k; j += 16)
            _mm256_storeu_si256((__m256i *)(void *)(o + 2 * j),
                                _mm512_cvtps_ph(_mm512_loadu_ps(v + j), _MM_FROUND_TO_NEAREST_INT));
#elif defined(__F16C__)
        for (; j + 8 <= k; j += 8)
            _mm_storeu_si128((__m128i *)(void *)(o + 2 * j),
                             _mm256_cvtps_ph(_mm256_loadu_ps(v + j), _MM_FROUND_TO_NEAREST_INT));
#endif
        for (; j < k; j++) {
            uint16_t h = pz_f32_to_f16(v[j]);
            memcpy(o + 2 * j, &h, 2);
        }
        return PZ_OK;
    }
    uint32_t mk = 0;
    for (j = 0; j < k; j++) {
        uint32_t key = pz_abs_key(v[j]);
        mk = key > mk ? key : mk;
    }
    if (mk >= 0x7f800000u) return pz_fail(PZ_ERR_ARG, "topk: non-finite value with values=q8");
    float sc = pz_u2f(mk);
    *scale = sc;
    float inv = pz_topk_q8_inv(sc);
    int8_t *q = (int8_t *)o;
#pragma omp simd
    for (j = 0; j < k; j++) q[j] = pz_topk_q8(v[j], inv);   /* compress/core/elem_codecs.h */
    return PZ_OK;
}

static pz_status topk_encode(const pz_codec_params *p, const float *x, const pz_shape *s,
                             const pz_codec_ctx *ctx, uint8_t *payload, size_t cap, size_t *len) {
    (void)ctx;
    topk_geom g;
    pz_status st = topk_geom_of(p, s, &g);
    if (st != PZ_OK) return st;
    if (cap < g.fixed) return pz_fail(PZ_ERR_ARG, "topk: payload buffer of %zu bytes too small", cap);
    if (g.K == 0) {
        if (cap < 1 + g.bitmap) return pz_fail(PZ_ERR_ARG, "topk: payload buffer too small");
        payload[0] = 0;
        memset(payload + 1, 0, g.bitmap);
        *len = 1 + g.bitmap;
        return PZ_OK;
    }
    const size_t L = g.L, k = g.k;
    const int sampled = L >= TOPK_SAMPLE_MIN;
    /* candidate buffer: the whole segment for short ones; for sampled ones
     * about twice the expected count */
    size_t ccap = L;
    if (sampled && k < L) {
        double pS = (double)k * TOPK_SAMPLE / (double)L;
        double want = (pS + 4.0 * sqrt(pS) + 16.0) / TOPK_SAMPLE * (double)L;
        double c = 2.0 * want + 4096.0;
        ccap = c < (double)L ? (size_t)c : L;
    }
    uint32_t *cidx = NULL, *kidx = NULL, *keys = NULL, *scratch = NULL;
    float *cval = NULL, *kval = NULL;
    if (k < L) {
        cidx = pz_alloc_huge((ccap + TOPK_SLACK) * sizeof *cidx);
        cval = pz_alloc_huge((ccap + TOPK_SLACK) * sizeof *cval);
        size_t nk = ccap > TOPK_SAMPLE ? ccap : TOPK_SAMPLE;
        keys = pz_alloc_huge((nk + TOPK_SLACK) * sizeof *keys);
    }
    kidx = pz_alloc_huge((k + TOPK_SLACK) * sizeof *kidx);
    kval = pz_alloc_huge((k + TOPK_SLACK) * sizeof *kval);

    idxw_ w = {.ix = payload + g.fixed, .room = cap - g.fixed, .bitmap = g.bitmap};
    w.lim = w.room < g.bitmap - 1 ? w.room : g.bitmap - 1;
    if (g.K >= g.bitmap) {                     /* V >= K: the bitmap wins for sure */
        if (w.room < g.bitmap) w.too_small = 1;
        else memset(w.ix, 0, g.bitmap);
        w.bitmap_mode = 1;
    }

    uint8_t *vals = payload + 1 + 4 * g.nscale;
    int have_est = 0;
    uint32_t t_est = 0;
    float delta = 0.25f;
    const size_t spare = k / 4 > 8 ? k / 4 : 8;
    for (size_t sg = 0; sg < g.nseg && st == PZ_OK && !w.too_small; sg++) {
        const float *xs = x + sg * L;
        uint32_t base = (uint32_t)(sg * L);
        const uint32_t *oi;
        const float *ov;
        if (k == L) {
            for (size_t i = 0; i < L; i++) kidx[i] = base + (uint32_t)i;
            oi = kidx;
            ov = xs;
        } else {
            size_t m = SIZE_MAX;
            if (sampled) {
                size_t S = TOPK_SAMPLE, stride = L / S;
                for (size_t j = 0; j < S; j++) keys[j] = pz_abs_key(xs[j * stride]);
                double pS = (double)k * (double)S / (double)L;
                double r = ceil(pS + 4.0 * sqrt(pS) + 16.0);
                size_t above;
                uint32_t t = r >= (double)S ? 0 : pz_kth_largest_key(keys, S, (size_t)r, &above);
                m = gather_ge(xs, L, t, base, ccap, cidx, cval);
            } else if (have_est) {
                m = gather_ge(xs, L, t_est, base, ccap, cidx, cval);
            }
            uint32_t T;
            if (m != SIZE_MAX && m >= k) {
                for (size_t j = 0; j < m; j++) keys[j] = pz_abs_key(cval[j]);
                size_t above;
                T = pz_kth_largest_key(keys, m, k, &above);
                filter(cidx, cval, m, T, k - above, kidx, kval);
                size_t extra = m - k;
                if (extra > 4 * spare) delta *= 0.7f;
                else if (extra < spare) delta = delta * 1.4f < 1.0f ? delta * 1.4f : 1.0f;
            } else {                                 /* full radix selection */
                if (!scratch) scratch = pz_alloc_huge(L * sizeof *scratch);
                size_t above;
                T = pz_kth_largest_abs(xs, L, k, scratch, &above);
                compact(xs, L, base, T, k - above, kidx, kval);
                if (have_est) delta = delta * 2.0f < 1.0f ? delta * 2.0f : 1.0f;
            }
            if (!sampled) {
                have_est = T < 0x7f800000u;
                t_est = delta >= 1.0f ? 0 : pz_abs_key(pz_u2f(T) * (1.0f - delta));
            }
            oi = kidx;
            ov = kval;
        }
        float sc = 0;
        st = put_values(p, ov, k, vals + sg * k * g.vb, &sc);
        if (g.nscale) memcpy(payload + 1 + 4 * sg, &sc, 4);
        idxw_put(&w, oi, k);
    }
    free(cidx);
    free(cval);
    free(keys);
    free(kidx);
    free(kval);
    free(scratch);
    if (st != PZ_OK) return st;
    size_t total = g.fixed + (w.bitmap_mode ? g.bitmap : w.V);
    if (w.too_small || total > cap)
        return pz_fail(PZ_ERR_ARG, "topk: payload buffer of %zu bytes too small (up to %zu needed)", cap,
                       g.fixed + g.bitmap);
    payload[0] = (uint8_t)!w.bitmap_mode;
    *len = total;
    return PZ_OK;
}

/* ---- decode ---- */

#define TOPK_DCHUNK 1024

/* Values jj0 .. jj0+cnt-1 of the value section, as floats. */
static void get_values(const pz_codec_params *p, const uint8_t *vals, size_t jj0, size_t cnt, float step,
                       float *v) {
    size_t j = 0;
    if (p->value_mode == PZ_VALUES_FP32) {
        memcpy(v, vals + 4 * jj0, cnt * 4);
    } else if (p->value_mode == PZ_VALUES_FP16) {
        const uint8_t *h = vals + 2 * jj0;
#if defined(__AVX512F__)
        for (; j + 16 <= cnt; j += 16)
            _mm512_storeu_ps(v + j, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(h + 2 * j))));
#elif defined(__F16C__)
        for (; j + 8 <= cnt; j += 8)
            _mm256_storeu_ps(v + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(h + 2 * j))));
#endif
        for (; j < cnt; j++) {
            uint16_t u;
            memcpy(&u, h + 2 * j, 2);
            v[j] = pz_f16_to_f32(u);
        }
    } else {
        const int8_t *q = (const int8_t *)(vals + jj0);
#pragma omp simd
        for (j = 0; j < cnt; j++) v[j] = (float)q[j] * step;
    }
}

static pz_status topk_decode(const pz_codec_params *p, const uint8_t *payload, size_t len,
                             const pz_shape *s, float *out) {
    topk_geom g;
    pz_status st = topk_geom_of(p, s, &g);
    if (st != PZ_OK) return st;
    if (len < g.fixed) return pz_fail(PZ_ERR_FORMAT, "topk: payload of %zu bytes shorter than %zu", len, g.fixed);
    uint8_t coding = payload[0];
    if (coding > 1) return pz_fail(PZ_ERR_FORMAT, "topk: bad index coding %u", coding);
    size_t ilen = len - g.fixed;
    if (coding == 0 && ilen != g.bitmap)
        return pz_fail(PZ_ERR_FORMAT, "topk: bitmap of %zu bytes, expected %zu", ilen, g.bitmap);
    if (coding == 1 && (ilen >= g.bitmap || ilen < g.K))
        return pz_fail(PZ_ERR_FORMAT, "topk: varint section of %zu bytes not in [%zu, %zu)", ilen, g.K, g.bitmap);
    const uint8_t *vals = payload + 1 + 4 * g.nscale;
    for (size_t i = 0; i < g.nscale; i++) {
        float sc;
        memcpy(&sc, payload + 1 + 4 * i, 4);
        if (!(sc >= 0.0f) || !isfinite(sc)) return pz_fail(PZ_ERR_FORMAT, "topk: bad q8 scale");
    }
    if (p->value_mode == PZ_VALUES_Q8) {
        int bad = 0;
        for (size_t j = 0; j < g.K; j++) bad |= vals[j] == 0x80;
        if (bad) return pz_fail(PZ_ERR_FORMAT, "topk: q8 code -128");
    }
    memset(out, 0, g.n * sizeof *out);
    const uint8_t *ix = payload + g.fixed;
    int err = 0;
    if (g.K == 0) {
        for (size_t i = 0; i < ilen; i++) err |= ix[i] != 0;
        if (err) return pz_fail(PZ_ERR_FORMAT, "topk: corrupt index or value section");
        return PZ_OK;
    }
    float vbuf[TOPK_DCHUNK];
    if (coding == 1) {
        size_t q = 0;
        uint64_t next = 0;                         /* lowest index the next one may have */
        for (size_t sg = 0; sg < g.nseg && !err; sg++) {
            uint64_t lo = (uint64_t)sg * g.L, hi = lo + g.L;
            float step = 0;
            if (g.nscale) {
                memcpy(&step, payload + 1 + 4 * sg, 4);
                step /= 127.0f;
            }
            for (size_t j0 = 0; j0 < g.k && !err; j0 += TOPK_DCHUNK) {
                size_t cnt = g.k - j0 < TOPK_DCHUNK ? g.k - j0 : TOPK_DCHUNK;
                get_values(p, vals, sg * g.k + j0, cnt, step, vbuf);
                for (size_t j = 0; j < cnt; j++) {
                    uint64_t gap;
                    if (q < ilen && ix[q] < 0x80) {
                        gap = ix[q++];
                    } else if (pz_varint_get(ix, ilen, &q, &gap) != PZ_OK) {
                        err = 1;
                        break;
                    }
                    if (gap >= hi - next) { err = 1; break; }
                    uint64_t pos = next + gap;
                    if (pos < lo) { err = 1; break; }
                    out[pos] = vbuf[j];
                    next = pos + 1;
                }
            }
        }
        if (q != ilen) err = 1;
    } else {
        /* bitmap: the jj-th set bit must lie in segment jj / k; also count
         * the bytes the varints would have taken, to check the choice */
        size_t V = 0, jj = 0, sg = 0, cnt = 0, vfill = 0, vpos = 0;
        uint64_t lo = 0, hi = g.L, prevn = 0;
        float step = 0;
        for (size_t wb = 0; wb < g.bitmap && !err; wb += 8) {
            uint64_t wd = 0;
            size_t nbytes = g.bitmap - wb < 8 ? g.bitmap - wb : 8;
            memcpy(&wd, ix + wb, nbytes);
            while (wd) {
                uint64_t pos = wb * 8 + (uint64_t)__builtin_ctzll(wd);
                wd &= wd - 1;
                if (jj >= g.K) { err = 1; break; }
                if (cnt == g.k) {
                    sg++;
                    cnt = 0;
                    lo += g.L;
                    hi += g.L;
                }
                if (pos < lo || pos >= hi) { err = 1; break; }
                if (cnt == 0 && g.nscale) {
                    memcpy(&step, payload + 1 + 4 * sg, 4);
                    step /= 127.0f;
                }
                if (vpos == vfill) {                 /* refill within the segment */
                    size_t c = g.k - cnt < TOPK_DCHUNK ? g.k - cnt : TOPK_DCHUNK;
                    get_values(p, vals, jj, c, step, vbuf);
                    vfill = c;
                    vpos = 0;
                }
                out[pos] = vbuf[vpos++];
                if (cnt + 1 == g.k) vfill = vpos;    /* next segment refills */
                V += varint_len32((uint32_t)(pos - prevn));
                prevn = pos + 1;
                jj++;
                cnt++;
            }
        }
        if (!err && jj != g.K) err = 1;
        if (!err && V < g.bitmap) err = 1;     /* varints would have been used */
    }
    if (err) return pz_fail(PZ_ERR_FORMAT, "topk: corrupt index or value section");
    return PZ_OK;
}

const pz_codec_impl pz_codec_topk = {"topk", PZ_CODEC_TOPK, topk_parse, topk_format, topk_validate,
                                     topk_max_payload, topk_encode, topk_decode, NULL, NULL};
