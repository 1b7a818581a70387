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
 * Selection. Exactly the k largest |x| of each segment, found by an O(L)
 * radix selection of the k-th largest magnitude (compress/kselect.h), then one
 * pass that keeps |x| > T and, of the elements with |x| == T, the ones with the
 * lowest indices ("ties broken by lower index"), so the set is deterministic.
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

#include "compress/bitpack.h"
#include "compress/codec_impl.h"
#include "compress/elem.h"
#include "compress/kselect.h"
#include "compress/spec.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "topk.c assumes a little-endian host"
#endif

#define TOPK_MIN_FRACTION 1e-9

/* ---- spec parsing ---- */

/* The shortest decimal that reads back as f, as num / den (exact). f in
 * [1e-9, 1]. */
static void frac_decimal_(float f, uint64_t *num, uint64_t *den) {
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

static size_t topk_k_(float fraction, size_t L) {
    if (L == 0) return 0;
    uint64_t num, den;
    frac_decimal_(fraction, &num, &den);
    unsigned __int128 q = ((unsigned __int128)num * L) / den;
    size_t k = q >= L ? L : (size_t)q;
    return k < 1 ? 1 : k;
}

static pz_status topk_parse(pz_codec_params *p, const char *args, const char *spec, size_t where) {
    memset(p, 0, sizeof *p);
    p->id = PZ_CODEC_TOPK;
    p->per_row = 1;
    p->value_mode = PZ_VALUES_FP32;
    if (args[0] != ':') return pz_spec_fail(spec, where, "topk needs a fraction, as in topk:0.1");
    size_t flen = strcspn(args + 1, ",");
    double f;
    pz_status st = pz_spec_float(spec, where + 1, args + 1, flen, TOPK_MIN_FRACTION, 1.0, &f,
                                 "topk fraction");
    if (st != PZ_OK) return st;
    p->fraction = (float)f;
    size_t pos = 1 + flen;
    if (args[pos] == ',') {
        pos++;
        if (!args[pos]) return pz_spec_fail(spec, where + pos, "empty option after ','");
    } else if (args[pos]) {
        return pz_spec_fail(spec, where + pos, "',' expected");
    }
    pz_spec_opt o;
    int r;
    while ((r = pz_spec_next_opt(spec, where, args, &pos, &o)) > 0) {
        if (pz_spec_key_is(&o, "scope")) {
            if (pz_spec_val_is(&o, "row")) p->per_row = 1;
            else if (pz_spec_val_is(&o, "tensor")) p->per_row = 0;
            else return pz_spec_fail(spec, o.val ? o.voff : o.off, "topk scope must be row or tensor");
        } else if (pz_spec_key_is(&o, "values")) {
            if (pz_spec_val_is(&o, "fp32")) p->value_mode = PZ_VALUES_FP32;
            else if (pz_spec_val_is(&o, "fp16")) p->value_mode = PZ_VALUES_FP16;
            else if (pz_spec_val_is(&o, "q8")) p->value_mode = PZ_VALUES_Q8;
            else return pz_spec_fail(spec, o.val ? o.voff : o.off, "topk values must be fp32, fp16 or q8");
        } else {
            return pz_spec_fail(spec, o.off, "unknown topk option '%.*s' (scope=, values=)",
                                (int)o.klen, o.key);
        }
    }
    if (r < 0) return PZ_ERR_ARG;
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

static pz_status topk_geom_(const pz_codec_params *p, const pz_shape *s, topk_geom *g) {
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
    g->k = topk_k_(p->fraction, g->L);
    g->K = g->nseg * g->k;
    g->vb = p->value_mode == PZ_VALUES_FP32 ? 4 : p->value_mode == PZ_VALUES_FP16 ? 2 : 1;
    g->nscale = (p->value_mode == PZ_VALUES_Q8 && g->K > 0) ? g->nseg : 0;
    g->fixed = 1 + 4 * g->nscale + g->K * g->vb;
    g->bitmap = (n + 7) / 8;
    return PZ_OK;
}

static size_t topk_max_payload(const pz_codec_params *p, const pz_shape *s) {
    topk_geom g;
    if (topk_geom_(p, s, &g) != PZ_OK) return 0;
    return g.fixed + g.bitmap;
}

/* ---- encode ---- */

static inline size_t varint_len32_(uint32_t d) {
    return 1 + (d >= (1u << 7)) + (d >= (1u << 14)) + (d >= (1u << 21)) + (d >= (1u << 28));
}

/* Keeps the top k of x[0..L) (threshold T, `above` keys > T): writes their
 * indices (base + i) and values, returns how many (k). idx/val need one slot
 * of slack after the k written. */
static size_t compact_(const float *x, size_t L, size_t base, uint32_t T, size_t ties,
                       uint32_t *idx, float *val) {
    size_t m = 0;
    for (size_t i = 0; i < L; i++) {
        uint32_t key = pz_abs_key(x[i]);
        size_t eq = key == T;
        size_t take = (key > T) | (eq & (ties > 0));
        ties -= eq & take;
        idx[m] = (uint32_t)(base + i);
        val[m] = x[i];
        m += take;
    }
    return m;
}

static pz_status topk_encode(const pz_codec_params *p, const float *x, const pz_shape *s,
                             const pz_codec_ctx *ctx, uint8_t *payload, size_t cap, size_t *len) {
    (void)ctx;
    topk_geom g;
    pz_status st = topk_geom_(p, s, &g);
    if (st != PZ_OK) return st;
    if (cap < g.fixed) return pz_fail(PZ_ERR_ARG, "topk: payload buffer of %zu bytes too small", cap);
    if (g.K == 0) {
        if (cap < 1 + g.bitmap) return pz_fail(PZ_ERR_ARG, "topk: payload buffer too small");
        payload[0] = 0;
        memset(payload + 1, 0, g.bitmap);
        *len = 1 + g.bitmap;
        return PZ_OK;
    }
    uint32_t *idx = xmalloc((g.K + 1) * sizeof *idx);
    float *val = xmalloc((g.K + 1) * sizeof *val);
    uint32_t *scratch = g.k < g.L ? xmalloc(g.L * sizeof *scratch) : NULL;
    size_t K = 0;
    for (size_t sg = 0; sg < g.nseg; sg++) {
        const float *xs = x + sg * g.L;
        if (g.k == g.L) {
            K += compact_(xs, g.L, sg * g.L, 0, g.L, idx + K, val + K);
        } else {
            size_t above;
            uint32_t T = pz_kth_largest_abs(xs, g.L, g.k, scratch, &above);
            K += compact_(xs, g.L, sg * g.L, T, g.k - above, idx + K, val + K);
        }
    }
    free(scratch);

    /* values */
    uint8_t *o = payload + 1;
    st = PZ_OK;
    if (p->value_mode == PZ_VALUES_FP32) {
        memcpy(o, val, K * 4);
    } else if (p->value_mode == PZ_VALUES_FP16) {
        for (size_t j = 0; j < K; j++) {
            uint16_t h = pz_f32_to_f16(val[j]);
            memcpy(o + 2 * j, &h, 2);
        }
    } else {
        int8_t *q = (int8_t *)(o + 4 * g.nseg);
        for (size_t sg = 0; sg < g.nseg && st == PZ_OK; sg++) {
            const float *v = val + sg * g.k;
            uint32_t mk = 0;
            for (size_t j = 0; j < g.k; j++) {
                uint32_t key = pz_abs_key(v[j]);
                mk = key > mk ? key : mk;
            }
            if (mk >= 0x7f800000u) {
                st = pz_fail(PZ_ERR_ARG, "topk: non-finite value with values=q8");
                break;
            }
            float sc = pz_u2f(mk);
            memcpy(o + 4 * sg, &sc, 4);
            float inv = sc > 0 ? 127.0f / sc : 0.0f;
            for (size_t j = 0; j < g.k; j++) {
                float r = pz_clampf(pz_round_near(v[j] * inv), -127.0f, 127.0f);
                q[sg * g.k + j] = (int8_t)(int)r;
            }
        }
    }

    /* indices */
    size_t V = 0;
    if (st == PZ_OK) {
        uint32_t prev = 0;
        for (size_t j = 0; j < K; j++) {
            uint32_t d = j ? idx[j] - prev - 1 : idx[j];
            V += varint_len32_(d);
            prev = idx[j];
        }
        int use_varint = V < g.bitmap;
        size_t total = g.fixed + (use_varint ? V : g.bitmap);
        if (total > cap) {
            st = pz_fail(PZ_ERR_ARG, "topk: payload buffer of %zu bytes too small (%zu needed)", cap, total);
        } else {
            uint8_t *ix = payload + g.fixed;
            payload[0] = (uint8_t)use_varint;
            if (use_varint) {
                size_t pos = 0;
                prev = 0;
                for (size_t j = 0; j < K; j++) {
                    uint32_t d = j ? idx[j] - prev - 1 : idx[j];
                    prev = idx[j];
                    if (d < 0x80) ix[pos++] = (uint8_t)d;
                    else pos += pz_varint_put(ix + pos, d);
                }
            } else {
                memset(ix, 0, g.bitmap);
                for (size_t j = 0; j < K; j++) ix[idx[j] >> 3] |= (uint8_t)(1u << (idx[j] & 7));
            }
            *len = total;
        }
    }
    free(idx);
    free(val);
    return st;
}

/* ---- decode ---- */

typedef struct {
    const topk_geom *g;
    const uint8_t *vals;     /* value section */
    const float *scale;      /* q8: per-segment step s/127 (decoded) */
    float *out;
    size_t j;                /* values consumed */
    size_t seg, seg_end, seg_cnt;
    int err;
} topk_dec;

static inline void dec_put_(topk_dec *d, const pz_codec_params *p, size_t pos) {
    while (pos >= d->seg_end) {          /* close full segments */
        if (d->seg_cnt != d->g->k) { d->err = 1; return; }
        d->seg++;
        d->seg_end += d->g->L;
        d->seg_cnt = 0;
    }
    if (d->seg_cnt == d->g->k || d->j >= d->g->K) { d->err = 1; return; }
    float v;
    if (p->value_mode == PZ_VALUES_FP32) {
        memcpy(&v, d->vals + 4 * d->j, 4);
    } else if (p->value_mode == PZ_VALUES_FP16) {
        uint16_t h;
        memcpy(&h, d->vals + 2 * d->j, 2);
        v = pz_f16_to_f32(h);
    } else {
        int8_t q = (int8_t)d->vals[d->j];
        if (q == -128) { d->err = 1; return; }
        v = (float)q * d->scale[d->seg];
    }
    d->out[pos] = v;
    d->j++;
    d->seg_cnt++;
}

static pz_status topk_decode(const pz_codec_params *p, const uint8_t *payload, size_t len,
                             const pz_shape *s, float *out) {
    topk_geom g;
    pz_status st = topk_geom_(p, s, &g);
    if (st != PZ_OK) return st;
    if (len < g.fixed) return pz_fail(PZ_ERR_FORMAT, "topk: payload of %zu bytes shorter than %zu", len, g.fixed);
    uint8_t coding = payload[0];
    if (coding > 1) return pz_fail(PZ_ERR_FORMAT, "topk: bad index coding %u", coding);
    size_t ilen = len - g.fixed;
    if (coding == 0 && ilen != g.bitmap)
        return pz_fail(PZ_ERR_FORMAT, "topk: bitmap of %zu bytes, expected %zu", ilen, g.bitmap);
    if (coding == 1 && (ilen >= g.bitmap || ilen < g.K))
        return pz_fail(PZ_ERR_FORMAT, "topk: varint section of %zu bytes not in [%zu, %zu)", ilen, g.K, g.bitmap);
    float *step = NULL;
    if (g.nscale) {
        step = xmalloc(g.nscale * sizeof *step);
        for (size_t i = 0; i < g.nscale; i++) {
            float sc;
            memcpy(&sc, payload + 1 + 4 * i, 4);
            if (!(sc >= 0.0f) || !isfinite(sc)) {
                free(step);
                return pz_fail(PZ_ERR_FORMAT, "topk: bad q8 scale");
            }
            step[i] = sc / 127.0f;
        }
    }
    memset(out, 0, g.n * sizeof *out);
    topk_dec d = {.g = &g, .vals = payload + 1 + 4 * g.nscale, .scale = step, .out = out,
                  .seg_end = g.L};
    const uint8_t *ix = payload + g.fixed;
    if (g.K == 0) {
        for (size_t i = 0; i < ilen; i++) d.err |= ix[i] != 0;
    } else if (coding == 0) {
        /* bitmap: walk set bits by 64-bit words; count the varint size the
         * other coding would have taken, to check the choice */
        size_t V = 0, prevp = 0;
        int first = 1;
        for (size_t wb = 0; wb < g.bitmap && !d.err; wb += 8) {
            uint64_t w = 0;
            size_t nbytes = g.bitmap - wb < 8 ? g.bitmap - wb : 8;
            memcpy(&w, ix + wb, nbytes);
            while (w) {
                size_t pos = wb * 8 + (size_t)__builtin_ctzll(w);
                w &= w - 1;
                if (pos >= g.n) { d.err = 1; break; }
                V += varint_len32_((uint32_t)(first ? pos : pos - prevp - 1));
                first = 0;
                prevp = pos;
                dec_put_(&d, p, pos);
                if (d.err) break;
            }
        }
        if (!d.err && V < g.bitmap) d.err = 1;     /* varints would have been used */
    } else {
        size_t q = 0;
        uint64_t pos = 0;
        for (size_t j = 0; j < g.K && !d.err; j++) {
            uint64_t gap;
            if (q < ilen && ix[q] < 0x80) {
                gap = ix[q++];
            } else if (pz_varint_get(ix, ilen, &q, &gap) != PZ_OK) {
                d.err = 1;
                break;
            }
            if (j && pos + 1 > (uint64_t)g.n) { d.err = 1; break; }
            uint64_t base = j ? pos + 1 : 0;
            if (gap >= (uint64_t)g.n - base) { d.err = 1; break; }
            pos = base + gap;
            dec_put_(&d, p, (size_t)pos);
        }
        if (q != ilen) d.err = 1;
    }
    if (!d.err) {
        /* every segment must hold exactly k */
        if (d.j != g.K || (g.K && (d.seg != g.nseg - 1 || d.seg_cnt != g.k))) d.err = 1;
    }
    free(step);
    if (d.err) return pz_fail(PZ_ERR_FORMAT, "topk: corrupt index or value section");
    return PZ_OK;
}

const pz_codec_impl pz_codec_topk = {
    .name = "topk",
    .id = PZ_CODEC_TOPK,
    .parse = topk_parse,
    .format = topk_format,
    .validate = topk_validate,
    .max_payload = topk_max_payload,
    .encode = topk_encode,
    .decode = topk_decode,
};
