/* tah.c: TAH-Quant-style activation codec (arXiv 2506.01352): tiles with a
 * pivot swap and Hadamard transform where one element dominates, asymmetric
 * min/max quantisation with fp16 zero and scale, 3 or 4 bits per tile (or
 * per token) chosen by entropy, under a bit budget that counts the whole
 * payload. compress/README.md ("tah") is the reference for the wire format;
 * this comment repeats it next to the code.
 *
 * Spec:  tah:<bits>[,tile=G][,alloc=tile|token][,rank=entropy|range]
 *        3 < bits <= 16; G a power of two in 2..1024 (default 64);
 *        alloc=tile (default) or token; rank=entropy (default) or range.
 * Parameter block: id 9, budget = bits (f32), group_size = G, per_row = 1
 * for alloc=token, scale_mode = 1 for rank=range; every other field 0.
 *
 * Geometry: n elements, C = last dim, R = n / C rows (tokens), T = ceil(C/G)
 * tiles per row, NT = R*T tiles; tile t = r*T + j holds the elements
 * r*C + j*G ... of row r, G of them except the last tile of a row, which has
 * w = C - (T-1)*G (a partial tile when G does not divide C). k = log2(G).
 * Allocation units: the NT tiles (alloc=tile, A = NT bitmap bits, unit cost
 * u = G) or the R rows (alloc=token, A = R, u = C).
 *
 * Payload:
 *   4*NT bytes  per tile: u16 zero, u16 scale (fp16, little-endian)
 *   bit stream  (MSB first within each byte):
 *               NT flag bits (1 = pivot swap + Hadamard; 0 on partial tiles),
 *               A bitmap bits (1 = the unit's codes are 4 bits, 0 = 3 bits),
 *               P pivot indices of k bits (P = number of flags set), in tile
 *               order, each < G,
 *               the codes: per tile in tile order, its w codes of b bits
 *               (b = 4 or 3 from the tile's unit), zero-padded to a byte.
 *
 * Budget: B = 8*floor(floor(bits*n)/8) bits (bits the f32 of the spec, the
 * product in double). F = 33*NT + A + 3*n (zeros, scales, flags, bitmap and
 * 3 bits per element) must be <= B, else encoding fails (PZ_ERR_ARG, with
 * the smallest bits that fit). Then P <= Pmax = floor((B - F)/k) (the
 * encoder drops the flags of the tiles with the smallest |x1|/|x2| beyond
 * that), and the number of 4-bit units is K = min(U, floor((B - F - k*P)/u))
 * with U = NT or R units. The payload is 4*NT + ceil((NT + A + k*P + 3n +
 * E)/8) bytes, E = the elements of the 4-bit units (<= K*u), so its 8*bytes
 * <= B: every message meets the budget, within u + 7 bits of it unless
 * every unit has 4 bits. The decoder recomputes Pmax and K from the shape,
 * the parameters and the flags and requires exactly K bitmap ones and
 * exactly that payload length.
 *
 * Encoding, per tile x[0..w): a full tile whose largest |x| (lowest index on
 * ties), at index p, is > 0 and >= 2 times the largest |x| of the others
 * sets its flag: x[p] and x[0] swap, then y = H x / sqrt(G) with H the
 * Sylvester Hadamard matrix (H[i][j] = (-1)^popcount(i & j)); else y = x.
 * zero z = min y rounded down to fp16, scale s = (max y - z)/(2^b - 1)
 * rounded up to fp16 (and raised by fp16 steps until z + (2^b - 1) s >= max
 * y), code q = clamp(floor((y - z)/s + 1/2), 0, 2^b - 1) (0 when s = 0),
 * computed with the fp16 values the receiver reads. Decoding: y' = z + q*s,
 * then for flagged tiles x' = H y' / sqrt(G) and x'[0], x'[p] swap back.
 * Units ranked by the entropy of |x|/sum|x| over the unit (original x; 0
 * for an all-zero unit; rank=entropy) or by sum over the unit's tiles of
 * w * (max y - min y)^2, what 4 instead of 3 bits saves in squared error up
 * to a constant (rank=range): the K highest get 4 bits (ties: lower index).
 * Inputs with inf or NaN, and tiles whose min or max (after the transform)
 * is beyond +-65504, are refused (PZ_ERR_ARG). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec_impl.h"
#include "compress/core/spec.h"
#include "base/bytes.h"
#include "base/half.h"
#include "base/mem.h"

#define TAH_DEFAULT_TILE 64
#define TAH_MAX_TILE 1024
#define TAH_MIN_BITS 3.0
#define TAH_MAX_BITS 16.0
#define TAH_FP16_MAX 65504.0f

/* ---- spec ---- */

/* one option of a tah spec (after its leading number) */
static int tah_opt(const char *spec, const pz_spec_opt *o, pz_codec_params *p, pz_status *st) {
    uint64_t g;
    if (pz_spec_key_is(o, "tile") && o->val) {
        *st = pz_spec_uint(spec, o->voff, o->val, o->vlen, 2, TAH_MAX_TILE, &g, "tah tile");
        if (*st == PZ_OK && (g & (g - 1))) *st = pz_spec_fail(spec, o->voff, "tah tile must be a power of two");
        if (*st == PZ_OK) p->group_size = (uint32_t)g;
    } else if (pz_spec_key_is(o, "alloc") && o->val) {
        if (pz_spec_val_is(o, "tile")) p->per_row = 0;
        else if (pz_spec_val_is(o, "token")) p->per_row = 1;
        else *st = pz_spec_fail(spec, o->voff, "alloc must be tile or token");
    } else if (pz_spec_key_is(o, "rank") && o->val) {
        if (pz_spec_val_is(o, "entropy")) p->scale_mode = 0;
        else if (pz_spec_val_is(o, "range")) p->scale_mode = 1;
        else *st = pz_spec_fail(spec, o->voff, "rank must be entropy or range");
    } else {
        return 0;
    }
    return 1;
}

static pz_status tah_parse(pz_codec_params *p, const char *args, const char *spec, size_t where) {
    static const pz_spec_lead lead = {
        "tah budget", "tah needs a budget in bits per element, as in tah:3.5", 0.0, TAH_MAX_BITS, (float)TAH_MIN_BITS,
        "tah budget must be > 3: every element takes at least 3 bits, plus the tile overhead", tah_opt,
        "tah", "tile=<G>, alloc=tile|token, rank=entropy|range", {.id = PZ_CODEC_TAH, .group_size = TAH_DEFAULT_TILE}};
    return pz_spec_parse_lead(spec, where, args, &lead, &p->budget, p);
}

static void tah_format(const pz_codec_params *p, char *buf, size_t cap) {
    char b[64];
    pz_spec_format_float(p->budget, b);
    snprintf(buf, cap, "tah:%s,tile=%u,alloc=%s,rank=%s", b, (unsigned)p->group_size, p->per_row ? "token" : "tile",
             p->scale_mode ? "range" : "entropy");
}

static pz_status tah_validate(const pz_codec_params *p) {
    if (p->id != PZ_CODEC_TAH) return pz_fail(PZ_ERR_FORMAT, "tah: wrong codec id %u", p->id);
    if (!(p->budget > (float)TAH_MIN_BITS && p->budget <= (float)TAH_MAX_BITS))
        return pz_fail(PZ_ERR_FORMAT, "tah: budget %g outside (3, 16]", (double)p->budget);
    uint32_t g = p->group_size;
    if (g < 2 || g > TAH_MAX_TILE || (g & (g - 1)))
        return pz_fail(PZ_ERR_FORMAT, "tah: tile %u is not a power of two in 2..%d", (unsigned)g, TAH_MAX_TILE);
    if (p->per_row > 1) return pz_fail(PZ_ERR_FORMAT, "tah: alloc byte %u (0 tile, 1 token)", p->per_row);
    if (p->scale_mode > 1) return pz_fail(PZ_ERR_FORMAT, "tah: rank byte %u (0 entropy, 1 range)", p->scale_mode);
    uint32_t fr;
    memcpy(&fr, &p->fraction, 4);
    if (p->bits || p->group_mode || p->round_mode || p->scale_fp32 || p->value_mode ||
        p->elias || p->stochastic || fr)
        return pz_fail(PZ_ERR_FORMAT, "tah: parameter fields it does not use are not 0");
    return PZ_OK;
}

/* ---- geometry and budget ---- */

typedef struct {
    size_t n, C, R, T, NT, G, wlast;
    int k;               /* log2(G) */
    int token;           /* alloc=token */
    uint64_t A, U, unit; /* bitmap bits, units, a 4-bit unit's extra bits */
    uint64_t B;          /* budget in bits, a multiple of 8 */
    uint64_t F;          /* fixed bits: 33*NT + A + 3n */
} tah_geom;

static pz_status tah_geom_of(const pz_codec_params *p, const pz_shape *s, tah_geom *g) {
    memset(g, 0, sizeof *g);
    size_t n = pz_shape_numel(s);
    if (!n) return pz_fail(PZ_ERR_SHAPE, "tah: bad shape");
    g->n = n;
    g->C = (size_t)s->dims[s->ndim - 1];
    g->R = n / g->C;
    g->G = p->group_size;
    g->k = 0;
    while (((size_t)1 << g->k) < g->G) g->k++;
    g->T = (g->C + g->G - 1) / g->G;
    g->wlast = g->C - (g->T - 1) * g->G;
    g->NT = g->R * g->T;
    g->token = p->per_row != 0;
    g->A = g->token ? g->R : g->NT;
    g->U = g->A;
    g->unit = g->token ? g->C : g->G;
    double bits = floor((double)p->budget * (double)n);
    g->B = (uint64_t)(bits / 8.0) * 8;
    g->F = 33 * (uint64_t)g->NT + g->A + 3 * (uint64_t)n;
    return PZ_OK;
}

static uint64_t tah_pmax(const tah_geom *g) { return (g->B - g->F) / (uint64_t)g->k; }

static uint64_t tah_k4(const tah_geom *g, uint64_t P) {
    uint64_t k = (g->B - g->F - (uint64_t)g->k * P) / g->unit;
    return k < g->U ? k : g->U;
}

static size_t tah_max_payload(const pz_codec_params *p, const pz_shape *s) {
    tah_geom g;
    if (tah_geom_of(p, s, &g) != PZ_OK) return 0;
    uint64_t all = 4 * (uint64_t)g.NT + (g.NT + g.A + (uint64_t)g.k * g.NT + 4 * (uint64_t)g.n + 7) / 8;
    uint64_t b = g.B / 8;
    return (size_t)(b < all ? b : all);
}

/* ---- the transform ---- */

/* y = H y / sqrt(G) in place (Sylvester order; its own inverse) */
static void tah_hadamard(float *y, size_t G) {
    for (size_t h = 1; h < G; h *= 2)
        for (size_t i = 0; i < G; i += 2 * h)
            for (size_t j = i; j < i + h; j++) {
                float a = y[j], b = y[j + h];
                y[j] = a + b;
                y[j + h] = a - b;
            }
    float c = (float)(1.0 / sqrt((double)G));
    for (size_t j = 0; j < G; j++) y[j] *= c;
}

/* Float bits as integers, so that max and min reductions vectorise:
 * |x| as an unsigned key (ordered for finite x), and x as a signed key
 * ordered like the floats (its own inverse). */
static inline uint32_t tah_akey(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    return u & 0x7fffffffu;
}
static inline int32_t tah_ord(int32_t b) { return b ^ (int32_t)((uint32_t)(b >> 31) >> 1); }
static inline float tah_float(uint32_t u) {
    float v;
    memcpy(&v, &u, 4);
    return v;
}

/* Whether a full tile takes the pivot path: *p = index of the largest |x|
 * (lowest on ties), *ratio = |x_p| / largest |x| of the others. */
static int tah_pivot(const float *x, size_t G, uint32_t *p, float *ratio) {
    uint32_t k1 = 0, k2 = 0;
    for (size_t j = 0; j < G; j++) {
        uint32_t k = tah_akey(x[j]);
        k1 = k > k1 ? k : k1;
    }
    size_t pi = 0;
    while (tah_akey(x[pi]) != k1) pi++;
    for (size_t j = 0; j < G; j++) {
        uint32_t k = j == pi ? 0 : tah_akey(x[j]);
        k2 = k > k2 ? k : k2;
    }
    float m1 = tah_float(k1), m2 = tah_float(k2);
    *p = (uint32_t)pi;
    *ratio = m2 > 0.0f ? m1 / m2 : INFINITY;
    return m1 > 0.0f && m1 >= 2.0f * m2;
}

/* ln(a) for a finite a > 0 with exact frexp and basic double arithmetic
 * only, so that every CPU and ISA level ranks alike (libm's log may differ
 * in the last bit between its variants): a = m 2^e with m in [1, 2),
 * ln m = 2 atanh(t), t = (m - 1)/(m + 1) in [0, 1/3), the series to t^13
 * (error < 1e-8). */
static double tah_ln_series(double m, int e) {
    double t = (m - 1.0) / (m + 1.0), t2 = t * t;
    double s = 1.0 / 13;
    s = s * t2 + 1.0 / 11;
    s = s * t2 + 1.0 / 9;
    s = s * t2 + 1.0 / 7;
    s = s * t2 + 1.0 / 5;
    s = s * t2 + 1.0 / 3;
    s = s * t2 + 1.0;
    return (double)e * 0.69314718055994530942 + 2.0 * t * s;
}

static double tah_ln(double a) {
    int e;
    double m = 2.0 * frexp(a, &e);
    return tah_ln_series(m, e - 1);
}

/* the same for a float, split by its bits (normal or subnormal) */
static inline double tah_lnf(float a) {
    uint32_t u;
    memcpy(&u, &a, 4);
    int e = -127;
    if (u < 0x00800000u) {   /* subnormal: exact scaling by 2^32 */
        a *= 4294967296.0f;
        memcpy(&u, &a, 4);
        e -= 32;
    }
    e += (int)(u >> 23);
    u = (u & 0x007fffffu) | 0x3f800000u;
    float m;
    memcpy(&m, &u, 4);
    return tah_ln_series((double)m, e);
}

/* entropy of |x| / sum |x| over x[0..w) (natural log; 0 when all zero):
 * ln(sum) - sum(a ln a)/sum, sums in double in index order */
static double tah_entropy(const float *x, size_t w) {
    double sum = 0.0, sl = 0.0;
    for (size_t j = 0; j < w; j++) {
        float a = fabsf(x[j]);
        sum += (double)a;
        if (a > 0.0f) sl += (double)a * tah_lnf(a);
    }
    if (!(sum > 0.0)) return 0.0;
    return tah_ln(sum) - sl / sum;
}

typedef struct {
    double key;
    size_t i;
} tah_rank;

/* descending key, then ascending index */
static int tah_rank_cmp(const void *a, const void *b) {
    const tah_rank *x = a, *y = b;
    if (x->key > y->key) return -1;
    if (x->key < y->key) return 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* ---- the bit stream: MSB first, values of at most 16 bits ---- */

typedef struct {
    uint8_t *p, *end;
    uint64_t acc;   /* the n pending bits, right-aligned */
    int n, over;
} tah_bw;

static inline void tah_put(tah_bw *w, uint32_t v, int b) {
    w->acc = (w->acc << b) | v;
    w->n += b;
    if (w->n >= 32) {
        while (w->n >= 8) {
            w->n -= 8;
            if (w->p < w->end) *w->p++ = (uint8_t)(w->acc >> w->n);
            else w->over = 1;
        }
        w->acc &= (1u << w->n) - 1;
    }
}

/* pads with zeros to a byte; the bytes written, or SIZE_MAX past the end */
static size_t tah_finish(tah_bw *w, const uint8_t *start) {
    if (w->n & 7) tah_put(w, 0, 8 - (w->n & 7));
    while (w->n >= 8) {
        w->n -= 8;
        if (w->p < w->end) *w->p++ = (uint8_t)(w->acc >> w->n);
        else w->over = 1;
    }
    return w->over ? SIZE_MAX : (size_t)(w->p - start);
}

typedef struct {
    const uint8_t *p, *end;
    uint64_t acc;   /* the low n bits are unread */
    int n, err;
} tah_br;

static inline uint32_t tah_get(tah_br *r, int b) {
    if (r->n < b) {
        while (r->n <= 56 && r->p < r->end) {
            r->acc = (r->acc << 8) | *r->p++;
            r->n += 8;
        }
        if (r->n < b) {
            r->err = 1;
            return 0;
        }
    }
    r->n -= b;
    return (uint32_t)(r->acc >> r->n) & ((1u << b) - 1);
}

/* ---- quantisation shared by both sides ---- */

static inline float tah_deq(float z, float s, uint32_t q) { return z + (float)q * s; }

/* z and s of a tile with range [mn, mx] at b bits, as fp16 values */
static void tah_range(float mn, float mx, int b, uint16_t *hz, uint16_t *hs) {
    const float L = (float)((1u << b) - 1);
    *hz = pz_f32_to_f16_down(mn);
    float z = pz_f16_to_f32(*hz);
    *hs = pz_f32_to_f16_up((mx - z) / L);
    while (tah_deq(z, pz_f16_to_f32(*hs), (1u << b) - 1) < mx && *hs < 0x7bffu) (*hs)++;
}

/* ---- encode ---- */

/* tile t of x into y (w elements), swapped and transformed when flagged;
 * its min and max */
static size_t tah_tile(const tah_geom *g, const float *x, size_t t, int flagged, uint32_t pivot, float *y,
                       float *mn, float *mx) {
    size_t j = t % g->T, w = j == g->T - 1 ? g->wlast : g->G;
    memcpy(y, x + (t / g->T) * g->C + j * g->G, w * sizeof *y);
    if (flagged) {
        float v = y[0];
        y[0] = y[pivot];
        y[pivot] = v;
        tah_hadamard(y, g->G);
    }
    int32_t lo = INT32_MAX, hi = INT32_MIN;
    for (size_t e = 0; e < w; e++) {
        int32_t b;
        memcpy(&b, &y[e], 4);
        b = tah_ord(b);
        lo = b < lo ? b : lo;
        hi = b > hi ? b : hi;
    }
    *mn = tah_float((uint32_t)tah_ord(lo));
    *mx = tah_float((uint32_t)tah_ord(hi));
    return w;
}

/* Marks in wide[] the K units (tiles, or tokens) that get 4 bits: the
 * highest-ranked by range (rank=range) or by entropy. rk, y: scratch. */
static void tah_pick_wide(const pz_codec_params *p, const tah_geom *g, const float *x, const uint8_t *flag,
                          const uint16_t *piv, uint64_t K, tah_rank *rk, float *y, uint8_t *wide) {
    if (K >= g->U) {
        memset(wide, 1, g->U);
    } else if (K > 0 && p->scale_mode) {   /* rank=range */
        for (size_t u = 0; u < g->U; u++) {
            rk[u].key = 0.0;
            rk[u].i = u;
        }
        for (size_t t = 0; t < g->NT; t++) {
            float mn, mx;
            size_t w = tah_tile(g, x, t, flag[t], piv[t], y, &mn, &mx);
            double rg = (double)mx - (double)mn;
            double key = (double)w * rg * rg;   /* inf or NaN only beyond fp16: refused below */
            rk[g->token ? t / g->T : t].key += isnan(key) ? INFINITY : key;
        }
        qsort(rk, g->U, sizeof *rk, tah_rank_cmp);
        for (uint64_t i = 0; i < K; i++) wide[rk[i].i] = 1;
    } else if (K > 0) {
        for (size_t u = 0; u < g->U; u++) {
            const float *xu;
            size_t w;
            if (g->token) {
                xu = x + u * g->C;
                w = g->C;
            } else {
                size_t j = u % g->T;
                xu = x + (u / g->T) * g->C + j * g->G;
                w = j == g->T - 1 ? g->wlast : g->G;
            }
            rk[u].key = tah_entropy(xu, w);
            rk[u].i = u;
        }
        qsort(rk, g->U, sizeof *rk, tah_rank_cmp);
        for (uint64_t i = 0; i < K; i++) wide[rk[i].i] = 1;
    }
}

static pz_status tah_encode(const pz_codec_params *p, const float *x, const pz_shape *s,
                            const pz_codec_ctx *ctx, uint8_t *payload, size_t cap, size_t *len) {
    (void)ctx;
    *len = 0;
    tah_geom g;
    pz_status st = tah_geom_of(p, s, &g);
    if (st != PZ_OK) return st;
    if (g.F > g.B) {
        char spec[160];
        tah_format(p, spec, sizeof spec);
        return pz_fail(PZ_ERR_ARG,
                       "%s: the budget of %llu bits for %zu elements cannot hold the overhead (%llu bits: fp16 zero "
                       "and scale and a flag per tile, %llu bitmap bits) plus 3 bits per element; this shape needs "
                       "more than %.4f bits per element (or a larger tile)",
                       spec, (unsigned long long)g.B, g.n, (unsigned long long)(g.F - 3 * (uint64_t)g.n),
                       (unsigned long long)g.A, (double)g.F / (double)g.n);
    }
    for (size_t i = 0; i < g.n; i++)
        if (!isfinite(x[i])) return pz_fail(PZ_ERR_ARG, "tah encode: element %zu is not finite", i);
    size_t need = tah_max_payload(p, s);
    if (cap < need) return pz_fail(PZ_ERR_SHAPE, "tah encode: %zu bytes of room, payload needs up to %zu", cap, need);

    const size_t G = g.G, T = g.T, NT = g.NT;
    uint8_t *flag = xcalloc(NT, 1), *wide = xcalloc(g.U, 1);
    uint16_t *piv = xcalloc(NT, sizeof *piv);
    tah_rank *rk = xmalloc((NT > g.U ? NT : g.U) * sizeof *rk);
    float *y = xmalloc(G * sizeof *y);
    uint8_t *code = xmalloc(G);

    /* pass 1: pivot candidates, and the flags that fit */
    uint64_t P = 0;
    for (size_t t = 0; t < NT; t++) {
        size_t j = t % T, w = j == T - 1 ? g.wlast : G;
        if (w != G) continue;
        uint32_t pi;
        float ratio;
        if (tah_pivot(x + (t / T) * g.C + j * G, G, &pi, &ratio)) {
            flag[t] = 1;
            piv[t] = (uint16_t)pi;
            rk[P].key = ratio;
            rk[P].i = t;
            P++;
        }
    }
    uint64_t pmax = tah_pmax(&g);
    if (P > pmax) {   /* keep the pmax most dominant pivots */
        qsort(rk, (size_t)P, sizeof *rk, tah_rank_cmp);
        for (uint64_t i = pmax; i < P; i++) flag[rk[i].i] = 0;
        P = pmax;
    }

    /* the K highest-ranked units get 4 bits */
    tah_pick_wide(p, &g, x, flag, piv, tah_k4(&g, P), rk, y, wide);

    /* the bit stream: flags, bitmap, pivots */
    tah_bw bw = {payload + 4 * NT, payload + cap, 0, 0, 0};
    for (size_t t = 0; t < NT; t++) tah_put(&bw, flag[t], 1);
    for (size_t u = 0; u < g.U; u++) tah_put(&bw, wide[u], 1);
    for (size_t t = 0; t < NT; t++)
        if (flag[t]) tah_put(&bw, piv[t], g.k);

    /* pass 2: transform, zero and scale, codes */
    for (size_t t = 0; t < NT && st == PZ_OK; t++) {
        int b = wide[g.token ? t / T : t] ? 4 : 3;
        float mn, mx;
        size_t w = tah_tile(&g, x, t, flag[t], piv[t], y, &mn, &mx);
        if (!(mn >= -TAH_FP16_MAX && mx <= TAH_FP16_MAX)) {
            st = pz_fail(PZ_ERR_ARG, "tah encode: tile %zu spans [%g, %g], beyond the fp16 range of its zero and scale",
                         t, (double)mn, (double)mx);
            break;
        }
        uint16_t hz, hs;
        tah_range(mn, mx, b, &hz, &hs);
        pz_put_u16(payload + 4 * t, hz);
        pz_put_u16(payload + 4 * t + 2, hs);
        float z = pz_f16_to_f32(hz), sc = pz_f16_to_f32(hs);
        const float L = (float)((1u << b) - 1);
        if (sc > 0.0f) {
            for (size_t e = 0; e < w; e++) {
                float v = floorf((y[e] - z) / sc + 0.5f);
                code[e] = (uint8_t)(v <= 0.0f ? 0.0f : v >= L ? L : v);
            }
        } else {
            memset(code, 0, w);
        }
        for (size_t e = 0; e < w; e++) tah_put(&bw, code[e], b);
    }
    free(flag);
    free(wide);
    free(piv);
    free(rk);
    free(y);
    free(code);
    if (st != PZ_OK) return st;
    size_t used = tah_finish(&bw, payload + 4 * NT);
    if (used == SIZE_MAX) return pz_fail(PZ_ERR_SHAPE, "tah encode: payload overran its buffer");
    *len = 4 * NT + used;
    return PZ_OK;
}

/* ---- decode ---- */

static pz_status tah_decode(const pz_codec_params *p, const uint8_t *pl, size_t len, const pz_shape *s,
                            float *out) {
    tah_geom g;
    pz_status st = tah_geom_of(p, s, &g);
    if (st != PZ_OK) return st;
    const size_t G = g.G, T = g.T, NT = g.NT;
    if (g.F > g.B)
        return pz_fail(PZ_ERR_FORMAT, "tah: a budget of %llu bits cannot hold this shape (%llu bits at least)",
                       (unsigned long long)g.B, (unsigned long long)g.F);
    if (len < 4 * NT) return pz_fail(PZ_ERR_FORMAT, "tah: payload of %zu bytes, the scales alone take %zu", len, 4 * NT);
    for (size_t t = 0; t < NT; t++) {
        float z = pz_f16_to_f32(pz_get_u16(pl + 4 * t)), sc = pz_f16_to_f32(pz_get_u16(pl + 4 * t + 2));
        if (!isfinite(z) || !isfinite(sc) || (pz_get_u16(pl + 4 * t + 2) & 0x8000u))
            return pz_fail(PZ_ERR_FORMAT, "tah: tile %zu has zero %g and scale %g (finite, scale >= +0 expected)", t,
                           (double)z, (double)sc);
    }
    tah_br br = {pl + 4 * NT, pl + len, 0, 0, 0};
    uint8_t *flag = xmalloc(NT), *wide = xmalloc(g.U);
    uint16_t *piv = xcalloc(NT, sizeof *piv);
    uint64_t P = 0, ones = 0, E = 0;
    for (size_t t = 0; t < NT; t++) {
        flag[t] = (uint8_t)tah_get(&br, 1);
        P += flag[t];
        if (flag[t] && t % T == T - 1 && g.wlast != G) {
            st = pz_fail(PZ_ERR_FORMAT, "tah: flag set on the partial tile %zu", t);
            goto done;
        }
    }
    if (br.err) {
        st = pz_fail(PZ_ERR_FORMAT, "tah: payload ends inside the flags");
        goto done;
    }
    if (P > tah_pmax(&g)) {
        st = pz_fail(PZ_ERR_FORMAT, "tah: %llu pivots, the budget holds %llu", (unsigned long long)P,
                     (unsigned long long)tah_pmax(&g));
        goto done;
    }
    for (size_t u = 0; u < g.U; u++) {
        wide[u] = (uint8_t)tah_get(&br, 1);
        ones += wide[u];
        if (wide[u]) E += g.token ? g.C : (u % T == T - 1 ? g.wlast : G);
    }
    uint64_t K = tah_k4(&g, P);
    if (br.err || ones != K) {
        st = pz_fail(PZ_ERR_FORMAT, "tah: %llu 4-bit %ss in the bitmap, the budget gives %llu", (unsigned long long)ones,
                     g.token ? "token" : "tile", (unsigned long long)K);
        goto done;
    }
    uint64_t bits = g.NT + g.A + (uint64_t)g.k * P + 3 * (uint64_t)g.n + E;
    if ((uint64_t)(len - 4 * NT) != (bits + 7) / 8) {
        st = pz_fail(PZ_ERR_FORMAT, "tah: payload of %zu bytes, its flags and bitmap make it %llu", len,
                     (unsigned long long)(4 * (uint64_t)NT + (bits + 7) / 8));
        goto done;
    }
    for (size_t t = 0; t < NT; t++)
        if (flag[t]) {
            piv[t] = (uint16_t)tah_get(&br, g.k);
            if (piv[t] >= G) {   /* k bits cannot exceed G - 1; kept as the format's rule */
                st = pz_fail(PZ_ERR_FORMAT, "tah: pivot %u of tile %zu is not below %zu", piv[t], t, G);
                goto done;
            }
        }
    for (size_t t = 0; t < NT; t++) {
        size_t r = t / T, j = t % T, w = j == T - 1 ? g.wlast : G;
        int b = wide[g.token ? r : t] ? 4 : 3;
        float z = pz_f16_to_f32(pz_get_u16(pl + 4 * t)), sc = pz_f16_to_f32(pz_get_u16(pl + 4 * t + 2));
        float *y = out + r * g.C + j * G;
        for (size_t e = 0; e < w; e++) y[e] = tah_deq(z, sc, tah_get(&br, b));
        if (flag[t]) {
            tah_hadamard(y, G);
            float v = y[0];
            y[0] = y[piv[t]];
            y[piv[t]] = v;
        }
    }
    if (br.err) {
        st = pz_fail(PZ_ERR_FORMAT, "tah: payload ends inside the codes");
        goto done;
    }
    /* the exact length leaves fewer than 8 bits: the padding, zero */
    if (br.p != br.end || br.n >= 8 || (br.acc & ((1u << br.n) - 1)))
        st = pz_fail(PZ_ERR_FORMAT, "tah: padding bits not zero");
done:
    free(flag);
    free(wide);
    free(piv);
    return st;
}

const pz_codec_impl pz_codec_tah = {"tah", PZ_CODEC_TAH, tah_parse, tah_format, tah_validate,
                                    tah_max_payload, tah_encode, tah_decode, NULL, NULL};
