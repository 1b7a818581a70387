/* jointsq.c: JointSQ, joint sparsification and quantisation under a bit budget
 * that counts everything on the wire.
 *
 * Spec:  jointsq:<bits>[,group=<N>]     0 < bits <= 32; N in 1..4096, default 1.
 *
 * Items. The n elements (flat order) form ng = ceil(n/N) groups of N (the
 * last one shorter when N does not divide n); N = 1 (default) gives every
 * element its own width. Each group gets one width w in {0, 2, 4, 8} bits per
 * element; 0 drops the group (decoded as zeros).
 *
 * Payload (the framework's message header comes on top and is NOT counted in
 * the budget):
 *   byte 0   k, the Rice parameter of the map (0..12; other values invalid)
 *   map      bit stream filled LSB first (bit j = bit j%8 of byte 1 + j/8):
 *            repeat { run r of dropped groups as Rice(k): floor(r/2^k) one
 *            bits, a zero bit, then r mod 2^k in k bits (LSB first); if the
 *            run reaches group ng, stop; else the next group is kept and a class
 *            code follows: "0" = 2-bit, "10" = 4-bit, "11" = 8-bit }.
 *            So a final run (possibly 0) always ends the map. Zero-padded to a byte.
 *   scales   one fp32 per width class that has a group, in the order 2, 4, 8:
 *            s_w = max |x| over the class's elements.
 *   values   per class present, in the order 2, 4, 8: the codes of the class's
 *            elements in element order, w bits each, LSB first (the CGX layout
 *            for w = 2, 4, 8, ending at the byte that holds the last code),
 *            zero-padded to a byte. Code c = q + L_w with L_w = 2^(w-1) - 1
 *            (1, 7, 127) and q in [-L_w, L_w]; the code 2^w - 1 is invalid.
 * When no group is kept the payload is empty (0 bytes) and decodes to zeros.
 *
 * Size. With runs r_1..r_(K+1) (K kept groups), g_w kept groups and m_w
 * elements in class w, P = number of classes present:
 *   bits(map) = sum_j (floor(r_j / 2^k) + 1 + k) + g_2 + 2 g_4 + 2 g_8
 *   bytes     = 1 + ceil(bits(map)/8) + 4 P + ceil(2 m_2/8) + ceil(4 m_4/8) + m_8
 * Budget: bytes * 8 <= floor(bits * n) for every message (bits = the fp32
 * value of the spec, the product taken in double); when even an empty map
 * does not fit (floor(bits*n) < 8*(121/8 + 2)) the payload is empty.
 * max_payload = min(floor(floor(bits * n) / 8), ceil(3 ng / 8) + 12 + n + 2).
 *
 * Quantiser (per class, unbiased). s_w as above, fp32; y = x * (L_w / s_w)
 * with L_w/s_w in fp32; q = floor(y) + [u < y - floor(y)] clamped to
 * [-L_w, L_w], u = pz_uniform(pz_ctx_key(ctx), i) for element i; decoded as
 * q * (s_w / L_w) with s_w/L_w in fp32. So E[x'] = x for every element of a
 * kept group (up to fp32 rounding and the 2^-24 grain of u), and Var =
 * step^2 f(1-f) <= step^2/4 with step = s_w/L_w and f = frac(|x|/step).
 * Dropped groups decode to 0: JointSQ is biased toward 0 on them by design
 * (sparsification is 0-bit quantisation; pair it with ef() for training).
 * Which groups are kept depends only on x, never on ctx, so across decodes
 * with different ctx.step the same elements are kept.
 *
 * Choosing the widths: a multiple-choice knapsack (compress/mckp.h), one item
 * per group, options w = 0, 2, 4, 8. Costs are separable upper bounds in
 * units of 2^-k bits: since floor(r/2^k) <= r/2^k, a dropped group costs 1
 * unit (1/2^k bit of unary) and a kept group of size z costs
 *   2^k (1 + k + code(w) + w z),  code = 1, 2, 2 bits for w = 2, 4, 8,
 * plus 1 + k bits for the final run (reserved). Error(w) is the expected
 * squared error: sum x^2 for w = 0; for w > 0 the exact variance of stochastic
 * rounding, sum step_w^2 f (1 - f), allowed only when the group's max |x| <= s_w
 * (no clipping). Capacity = 8 floor(floor(bits*n)/8) - 121 - (1 + k) bits,
 * the 121 reserving the header byte, three scales (96), the map's padding (7)
 * and the 2- and 4-bit streams' padding (6 + 4). Every map written with this
 * k fits: its bits are at most the chosen costs / 2^k plus the final run.
 *
 * The solver (compress/mckp.h) is Lagrangian: for a multiplier lambda each
 * group independently takes the width minimising Error(w) + lambda Cost(w);
 * bisection on lambda finds the critical multiplier, the groups tied at it
 * are switched in index order while they fit, and a fill spends what is left.
 * Its certified gap: error - optimal error < the error drop of the critical
 * (first tied, unfitting) upgrade, i.e. at most one group's sum x^2 - min_w
 * Error(w) (see mckp.h, tested against brute force); "optimal" is over this
 * model (the costs above, the scales chosen below).
 *
 * Large tensors (more groups than the sample below) are not solved item by
 * item in memory: a sample brackets the critical multiplier, [lam_lo, lam_hi]
 * = the multipliers at which the sample's cost meets (1 + 0.03) and (1 - 0.03)
 * times the capacity scaled to the sample; one pass over all groups (errors
 * and both picks 16 at a time; scratch: the class byte of each group and
 * the candidates, at most ng/32 + 65536 of them at 28 bytes) keeps
 * pick(lam_hi) for every group whose pick is the same at both ends, and
 * collects the others (the candidates, a few per cent) with their errors;
 * the exact solver then runs on the candidates alone with the capacity the
 * rest leaves. The non-candidates' choices are the ones the solver would make
 * on the whole problem (a pick that does not change across the bracket does
 * not change at the critical multiplier inside it, up to fp32 rounding), so
 * the result and its gap are those of the solver on all groups. If the pass
 * shows that the bracket misses (cost(lam_hi) > capacity or cost(lam_lo) <=
 * capacity) or
 * holds more than ng/32 + 65536 candidates, the next pass uses a bracket
 * interpolated (cost linear in log lambda) from the measured costs and kept
 * inside the bounds found so far; after 8 passes the candidates are all
 * taken (many groups tied at one multiplier), after 40 (fp32 rounding gone
 * wild) every group is a candidate.
 *
 * Scales and k depend on the solution, so they are searched on the sample:
 * all groups when ng <= 16384 (G = 1; for G > 1 min(16384, max(4096,
 * 262144/G)) groups), else that many full groups taken as runs of
 * max(1, 16/G) consecutive groups, one at a hashed position in each of equal
 * strata of the tensor, with the capacity scaled by the sample's share.
 * k starts from the mean run length of a budget spent on 2-bit groups;
 * s_8 = max |x|; s_2 = 2 t with t the magnitude of the group of rank min(ng/4,
 * room / (4 + 2N + k)) from the top; s_4 is tried at the group magnitudes of
 * ranks ng/8, ng/32, ng/128, ng/512 (4 solves, ranks scaled to the sample);
 * the solution with the lowest model error is kept, then solved once more
 * with its class maxima as scales (except s_8 on a sample: the tensor's max
 * must stay codable) and the k that codes its runs best, and that refinement
 * is used if its model error is no higher. Solves on a sample use the
 * multiplier found to 2^-10 relative, and its picks. The message is written
 * with the chosen solution's k and with the class maxima of the whole
 * tensor's solution as scales (scales only shrink, never clip).
 *
 * Known limit: one scale per width class per tensor. On data with infinite
 * variance (Student-t, 2 dof) above ~2 bits per element, topk with per-row q8
 * scales has lower error because the 8-bit step is set by the single largest
 * outlier. */
/* hot loops are throughput-bound: let gcc use 512-bit vectors where the
 * build targets AVX-512 (it defaults to 256 bits) */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec_impl.h"
#include "compress/elem.h"
#include "compress/kselect.h"
#include "compress/mckp.h"
#include "compress/spec.h"
#include "base/mem.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "jointsq.c assumes a little-endian host"
#endif

#define JSQ_DEFAULT_GROUP 1
#define JSQ_MAX_GROUP 4096
#define JSQ_MAX_K 12             /* Rice parameter of the map */
#define JSQ_MAX_BITS 32.0
#define JSQ_RESERVE 121          /* bits: header byte, 3 scales, map pad, 2/4-bit stream pads */
#define JSQ_CANDIDATES 4         /* scale candidates tried, then one refinement */
/* s_4 candidates: the group magnitude at these fractions of groups from the top (0: max) */
static const double jsq_q4[JSQ_CANDIDATES] = {1.0 / 8, 1.0 / 32, 1.0 / 128, 1.0 / 512};

static const int jsq_width[4] = {0, 2, 4, 8};
static const int jsq_L[4] = {0, 1, 7, 127};

/* ---- spec ---- */

static pz_status jsq_parse(pz_codec_params *p, const char *args, const char *spec, size_t where) {
    memset(p, 0, sizeof *p);
    p->id = PZ_CODEC_JOINTSQ;
    p->group_mode = PZ_GROUP_BLOCK;
    p->group_size = JSQ_DEFAULT_GROUP;
    if (args[0] != ':') return pz_spec_fail(spec, where, "jointsq needs a budget in bits per element, as in jointsq:1.5");
    size_t blen = strcspn(args + 1, ",");
    double b;
    pz_status st = pz_spec_float(spec, where + 1, args + 1, blen, 0.0, JSQ_MAX_BITS, &b, "jointsq budget");
    if (st != PZ_OK) return st;
    if (!((float)b > 0.0f)) return pz_spec_fail(spec, where + 1, "jointsq budget must be > 0");
    p->budget = (float)b;
    size_t pos = 1 + blen;
    if (args[pos] == ',') {
        pos++;
        if (!args[pos]) return pz_spec_fail(spec, where + pos, "empty option after ','");
    } else if (args[pos]) {
        return pz_spec_fail(spec, where + pos, "',' expected");
    }
    pz_spec_opt o;
    int r;
    while ((r = pz_spec_next_opt(spec, where, args, &pos, &o)) > 0) {
        if (pz_spec_key_is(&o, "group") && o.val) {
            uint64_t g;
            st = pz_spec_uint(spec, o.voff, o.val, o.vlen, 1, JSQ_MAX_GROUP, &g, "jointsq group");
            if (st != PZ_OK) return st;
            p->group_size = (uint32_t)g;
        } else {
            return pz_spec_fail(spec, o.off, "unknown jointsq option '%.*s' (group=<N>)", (int)o.klen, o.key);
        }
    }
    if (r < 0) return PZ_ERR_ARG;
    return PZ_OK;
}

static void jsq_format(const pz_codec_params *p, char *buf, size_t cap) {
    /* the shortest decimal that reads back as the same float, never in
     * exponent form ("1e+01"): the spec grammar allows '+' only in "+zstd" */
    char b[64];
    int ok = 0;
    for (int prec = 1; prec <= 9 && !ok; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, (double)p->budget);
        ok = !strchr(b, 'e') && strtof(b, NULL) == p->budget;
    }
    for (int dec = 1; dec <= 45 && !ok; dec++) {
        snprintf(b, sizeof b, "%.*f", dec, (double)p->budget);
        ok = strtof(b, NULL) == p->budget;
    }
    snprintf(buf, cap, "jointsq:%s,group=%u", b, (unsigned)p->group_size);
}

static pz_status jsq_validate(const pz_codec_params *p) {
    if (p->id != PZ_CODEC_JOINTSQ) return pz_fail(PZ_ERR_FORMAT, "jointsq: wrong codec id %u", p->id);
    if (!(p->budget > 0.0f && p->budget <= (float)JSQ_MAX_BITS))
        return pz_fail(PZ_ERR_FORMAT, "jointsq: budget %g outside (0, 32]", (double)p->budget);
    if (p->group_mode != PZ_GROUP_BLOCK || p->group_size < 1 || p->group_size > JSQ_MAX_GROUP)
        return pz_fail(PZ_ERR_FORMAT, "jointsq: bad group (mode %u, size %u)", p->group_mode, p->group_size);
    return PZ_OK;
}

/* ---- geometry ---- */

typedef struct {
    size_t n, G, ng;
    size_t pmax;       /* budget in bytes: floor(floor(bits*n)/8) */
} jsq_geom;

static pz_status jsq_geom_(const pz_codec_params *p, const pz_shape *s, jsq_geom *g) {
    memset(g, 0, sizeof *g);
    if (s->ndim < 1 || s->ndim > PZ_MAX_DIMS) return pz_fail(PZ_ERR_SHAPE, "jointsq: bad ndim %d", s->ndim);
    size_t n = 1;
    for (int d = 0; d < s->ndim; d++) {
        if (s->dims[d] <= 0) return pz_fail(PZ_ERR_SHAPE, "jointsq: dimension must be > 0");
        if (n > (size_t)UINT32_MAX / (size_t)s->dims[d])
            return pz_fail(PZ_ERR_SHAPE, "jointsq: more than 2^32-1 elements");
        n *= (size_t)s->dims[d];
    }
    if (p->group_size < 1) return pz_fail(PZ_ERR_ARG, "jointsq: group size 0");
    g->n = n;
    g->G = p->group_size;
    g->ng = n / g->G + (n % g->G != 0);
    double bits = floor((double)p->budget * (double)n);
    g->pmax = (size_t)(bits / 8.0);
    return PZ_OK;
}

static size_t jsq_max_payload(const pz_codec_params *p, const pz_shape *s) {
    jsq_geom g;
    if (jsq_geom_(p, s, &g) != PZ_OK) return 0;
    size_t all = (3 * g.ng + 7) / 8 + 12 + g.n + 2;
    return g.pmax < all ? g.pmax : all;
}


/* Scratch of megabytes: each fresh 4 KiB page costs a fault (microseconds
 * on a VM), so where the kernel offers transparent huge pages on request,
 * the buffer is 2 MiB-aligned and asks for them (only the pages touched are
 * backed either way). */
#if defined(__linux__)
#include <sys/mman.h>
#endif
static void *jsq_big_alloc_(size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t huge = (size_t)1 << 21;
    if (n >= huge) {
        size_t r = (n + huge - 1) & ~(huge - 1);
        void *p = aligned_alloc(huge, r);
        if (p) {
            (void)madvise(p, r, MADV_HUGEPAGE);
            return p;
        }
    }
#endif
    return xmalloc(n ? n : 1);
}

/* ---- vector helpers ---- */

#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VBMI2__)
#define JSQ_VEC 1
#endif

#define JSQ_CH 4096              /* elements per chunk of the value loops (multiple of 64) */
#define JSQ_BLOCK 1024           /* items per block of the assignment pass */
/* (the tests build a copy of this file with some of these changed) */
#ifndef JSQ_SAMPLE
#define JSQ_SAMPLE 16384         /* items sampled for the scale search and the bracket */
#endif
#define JSQ_SAMPLE_ELEMS 262144  /* ... and at most about this many elements */
#ifndef JSQ_DELTA
#define JSQ_DELTA 0.03           /* the bracket: sample capacity * (1 -+ JSQ_DELTA) */
#endif
#ifndef JSQ_CCAP_MIN
#define JSQ_CCAP_MIN 65536       /* candidates kept: ng / 32 + JSQ_CCAP_MIN */
#endif
#define JSQ_YMAX 16777216.0f

/* bit i set iff p[i] != 0, i < 64 */
static inline uint64_t nz64_(const uint8_t *p) {
#if defined(JSQ_VEC)
    __m512i v = _mm512_loadu_si512((const void *)p);
    return _mm512_test_epi8_mask(v, v);
#else
    uint64_t m = 0;
    for (int j = 0; j < 64; j++) m |= (uint64_t)(p[j] != 0) << j;
    return m;
#endif
}

/* ---- item errors ---- */

typedef struct {
    float invM;            /* errors are in units of M^2, M = max |x| */
    float s[4];            /* scales: a group may take width c iff its max |x| <= s[c] */
    float invD[4], D2[4];  /* 1 / normalised step, normalised step squared */
} jsq_model;

static void jsq_model_(jsq_model *md, float M, const float s[4]) {
    memset(md, 0, sizeof *md);
    md->invM = 1.0f / M;
    for (int c = 1; c < 4; c++) {
        float sh = s[c] * md->invM;
        float D = sh / (float)jsq_L[c];
        md->invD[c] = D > 0 ? 1.0f / D : 0.0f;
        md->D2[c] = D * D;
        md->s[c] = s[c] > 0 ? s[c] : -1.0f;
    }
}

/* Model errors of the items (groups of G, the last one shorter) covering
 * x[0..nel): e0 = sum x^2, e_c = sum step_c^2 f (1 - f) (the variance of
 * stochastic rounding) or INFINITY where the group's max gm > s_c.
 * gm: group maxima (NULL when G == 1: |x|). */
static void jsq_errs_(const float *x, size_t nel, size_t G, const float *gm, const jsq_model *md,
                      float *e0, float *e1, float *e2, float *e3) {
    const float invM = md->invM, i1 = md->invD[1], i2 = md->invD[2], i3 = md->invD[3];
    const float d1 = md->D2[1], d2 = md->D2[2], d3 = md->D2[3];
    const float s1 = md->s[1], s2 = md->s[2], s3 = md->s[3];
    if (G == 1) {
        size_t i = 0;
#if defined(__AVX512F__)
        const __m512 vM = _mm512_set1_ps(invM), vi1 = _mm512_set1_ps(i1), vi2 = _mm512_set1_ps(i2),
                     vi3 = _mm512_set1_ps(i3), vd1 = _mm512_set1_ps(d1), vd2 = _mm512_set1_ps(d2),
                     vd3 = _mm512_set1_ps(d3), vs1 = _mm512_set1_ps(s1), vs2 = _mm512_set1_ps(s2),
                     vs3 = _mm512_set1_ps(s3), ymax = _mm512_set1_ps(JSQ_YMAX), inf = _mm512_set1_ps(INFINITY);
        const __m512i absm = _mm512_set1_epi32(0x7fffffff);
        for (; i + 16 <= nel; i += 16) {
            __m512 xa = _mm512_castsi512_ps(_mm512_and_si512(_mm512_loadu_si512((const void *)(x + i)), absm));
            __m512 xh = _mm512_mul_ps(xa, vM);
            __m512 y1 = _mm512_min_ps(_mm512_mul_ps(xh, vi1), ymax);
            __m512 y2 = _mm512_min_ps(_mm512_mul_ps(xh, vi2), ymax);
            __m512 y3 = _mm512_min_ps(_mm512_mul_ps(xh, vi3), ymax);
            __m512 f1 = _mm512_sub_ps(y1, _mm512_roundscale_ps(y1, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
            __m512 f2 = _mm512_sub_ps(y2, _mm512_roundscale_ps(y2, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
            __m512 f3 = _mm512_sub_ps(y3, _mm512_roundscale_ps(y3, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
            _mm512_storeu_ps(e0 + i, _mm512_mul_ps(xh, xh));
            __m512 r1 = _mm512_mul_ps(vd1, _mm512_sub_ps(f1, _mm512_mul_ps(f1, f1)));
            __m512 r2 = _mm512_mul_ps(vd2, _mm512_sub_ps(f2, _mm512_mul_ps(f2, f2)));
            __m512 r3 = _mm512_mul_ps(vd3, _mm512_sub_ps(f3, _mm512_mul_ps(f3, f3)));
            _mm512_storeu_ps(e1 + i, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(xa, vs1, _CMP_LE_OQ), inf, r1));
            _mm512_storeu_ps(e2 + i, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(xa, vs2, _CMP_LE_OQ), inf, r2));
            _mm512_storeu_ps(e3 + i, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(xa, vs3, _CMP_LE_OQ), inf, r3));
        }
#endif
        for (; i < nel; i++) {
            float xa = fabsf(x[i]), xh = xa * invM;
            float y1 = xh * i1, y2 = xh * i2, y3 = xh * i3;
            y1 = y1 < JSQ_YMAX ? y1 : JSQ_YMAX;
            y2 = y2 < JSQ_YMAX ? y2 : JSQ_YMAX;
            y3 = y3 < JSQ_YMAX ? y3 : JSQ_YMAX;
            float f1 = y1 - (float)(int32_t)y1, f2 = y2 - (float)(int32_t)y2, f3 = y3 - (float)(int32_t)y3;
            e0[i] = xh * xh;
            e1[i] = xa <= s1 ? d1 * (f1 - f1 * f1) : INFINITY;
            e2[i] = xa <= s2 ? d2 * (f2 - f2 * f2) : INFINITY;
            e3[i] = xa <= s3 ? d3 * (f3 - f3 * f3) : INFINITY;
        }
        return;
    }
    size_t ni = nel / G + (nel % G != 0), j = 0;
#if defined(__AVX512F__)
    const __m512 vM = _mm512_set1_ps(invM), vi1 = _mm512_set1_ps(i1), vi2 = _mm512_set1_ps(i2),
                 vi3 = _mm512_set1_ps(i3);
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
#define JSQ_TERMS(XV, T0, T1, T2, T3)                                                            \
    do {                                                                                           \
        __m512 xh_ = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(XV, absm)), vM);           \
        __m512 y1_ = _mm512_mul_ps(xh_, vi1), y2_ = _mm512_mul_ps(xh_, vi2), y3_ = _mm512_mul_ps(xh_, vi3); \
        __m512 f1_ = _mm512_sub_ps(y1_, _mm512_roundscale_ps(y1_, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)); \
        __m512 f2_ = _mm512_sub_ps(y2_, _mm512_roundscale_ps(y2_, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)); \
        __m512 f3_ = _mm512_sub_ps(y3_, _mm512_roundscale_ps(y3_, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)); \
        T0 = _mm512_mul_ps(xh_, xh_);                                                              \
        T1 = _mm512_sub_ps(f1_, _mm512_mul_ps(f1_, f1_));                                          \
        T2 = _mm512_sub_ps(f2_, _mm512_mul_ps(f2_, f2_));                                          \
        T3 = _mm512_sub_ps(f3_, _mm512_mul_ps(f3_, f3_));                                          \
    } while (0)
    /* (large values of y are only in groups whose errors are INFINITY) */
    if (G == 2 || G == 4 || G == 8) {
        /* 16 / G groups per vector: sums within aligned runs of G lanes */
        const __mmask16 pick = G == 8 ? 0x0101 : G == 4 ? 0x1111 : 0x5555;
        const size_t per = 16 / G;
        for (; j + per <= nel / G; j += per) {
            __m512i xv = _mm512_loadu_si512((const void *)(x + j * G));
            __m512 t[4];
            JSQ_TERMS(xv, t[0], t[1], t[2], t[3]);
            float r[4][16];
            for (int c = 0; c < 4; c++) {
                __m512 v = t[c];
                if (G == 8) v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));
                if (G >= 4) v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4E));
                v = _mm512_add_ps(v, _mm512_permute_ps(v, 0xB1));
                _mm512_storeu_ps(r[c], _mm512_maskz_compress_ps(pick, v));
            }
            for (size_t q = 0; q < per; q++) {
                float g = gm[j + q];
                e0[j + q] = r[0][q];
                e1[j + q] = g <= s1 ? d1 * r[1][q] : INFINITY;
                e2[j + q] = g <= s2 ? d2 * r[2][q] : INFINITY;
                e3[j + q] = g <= s3 ? d3 * r[3][q] : INFINITY;
            }
        }
    } else if (G >= 16) {
        /* a group: vectors of 16 (the last one masked), then one sum */
        for (; j < ni; j++) {
            size_t b = j * G, e = b + G < nel ? b + G : nel;
            __m512 s0 = _mm512_setzero_ps(), sa = s0, sb = s0, sc = s0;
            for (size_t i = b; i < e; i += 16) {
                __mmask16 live = e - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (e - i)) - 1);
                __m512i xv = _mm512_maskz_loadu_epi32(live, x + i);
                __m512 t0, t1, t2, t3;
                JSQ_TERMS(xv, t0, t1, t2, t3);
                s0 = _mm512_add_ps(s0, t0);              /* masked lanes: x = 0, terms 0 */
                sa = _mm512_add_ps(sa, t1);
                sb = _mm512_add_ps(sb, t2);
                sc = _mm512_add_ps(sc, t3);
            }
            float g = gm[j];
            e0[j] = _mm512_reduce_add_ps(s0);
            e1[j] = g <= s1 ? d1 * _mm512_reduce_add_ps(sa) : INFINITY;
            e2[j] = g <= s2 ? d2 * _mm512_reduce_add_ps(sb) : INFINITY;
            e3[j] = g <= s3 ? d3 * _mm512_reduce_add_ps(sc) : INFINITY;
        }
    }
#undef JSQ_TERMS
#endif
    for (; j < ni; j++) {
        size_t b = j * G, e = b + G < nel ? b + G : nel;
        float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
        for (size_t i = b; i < e; i++) {
            float xh = fabsf(x[i]) * invM;
            float y1 = xh * i1, y2 = xh * i2, y3 = xh * i3;
            y1 = y1 < JSQ_YMAX ? y1 : JSQ_YMAX;
            y2 = y2 < JSQ_YMAX ? y2 : JSQ_YMAX;
            y3 = y3 < JSQ_YMAX ? y3 : JSQ_YMAX;
            float f1 = y1 - (float)(int32_t)y1, f2 = y2 - (float)(int32_t)y2, f3 = y3 - (float)(int32_t)y3;
            a0 += xh * xh;
            a1 += f1 - f1 * f1;
            a2 += f2 - f2 * f2;
            a3 += f3 - f3 * f3;
        }
        float g = gm[j];
        e0[j] = a0;
        e1[j] = g <= s1 ? d1 * a1 : INFINITY;
        e2[j] = g <= s2 ? d2 * a2 : INFINITY;
        e3[j] = g <= s3 ? d3 * a3 : INFINITY;
    }
}

/* Item costs in units of 2^-k bits (see the header comment). */
static inline void jsq_costs_(int k, uint32_t sz, uint32_t c[4]) {
    c[0] = 1;
    c[1] = (1 + (uint32_t)k + 1 + 2 * sz) << k;
    c[2] = (1 + (uint32_t)k + 2 + 4 * sz) << k;
    c[3] = (1 + (uint32_t)k + 2 + 8 * sz) << k;
}

/* Items [0, ni) of s from the elements x[0..nel) (groups of G). */
static void jsq_soa_fill_(const float *x, size_t nel, size_t G, const float *gm, const jsq_model *md, int k,
                          pz_mckp_soa *s, uint32_t *ucost) {
    size_t ni = nel / G + (nel % G != 0);
    jsq_errs_(x, nel, G, gm, md, s->err[0], s->err[1], s->err[2], s->err[3]);
    uint32_t cf[4];
    jsq_costs_(k, (uint32_t)G, cf);
    if (ucost && nel % G == 0) {                  /* every item a full group */
        memcpy(ucost, cf, sizeof cf);
        s->ucost = ucost;
        return;
    }
    s->ucost = NULL;
    for (int o = 0; o < 4; o++)
        for (size_t j = 0; j < ni; j++) s->cost[o][j] = cf[o];
    if (nel % G) {
        jsq_costs_(k, (uint32_t)(nel % G), cf);
        for (int o = 0; o < 4; o++) s->cost[o][ni - 1] = cf[o];
    }
}

static pz_mckp_soa jsq_soa_alloc_(size_t n, void **blk) {
    pz_mckp_soa s;
    s.ucost = NULL;
    n += 16;                                      /* slack for vector stores */
    uint8_t *b = jsq_big_alloc_(n * 32 + 64);
    for (int o = 0; o < 4; o++) {
        s.err[o] = (float *)(void *)(b + (size_t)o * n * 4);
        s.cost[o] = (uint32_t *)(void *)(b + (size_t)(4 + o) * n * 4);
    }
    *blk = b;
    return s;
}

/* The Rice parameter that codes the map of cls[] in the fewest bits (the
 * smallest such k): sum over runs r of floor(r / 2^k), from a histogram of
 * the run lengths. */
static int jsq_best_k_(const uint8_t *cls, size_t ng) {
    enum { RH = 1024 };
    uint32_t h[RH];
    uint64_t big[JSQ_MAX_K + 1];
    memset(h, 0, sizeof h);
    memset(big, 0, sizeof big);
    size_t run = 0, kept = 0;
    for (size_t i = 0; i <= ng; i++) {
        if (i < ng && !cls[i]) {
            run++;
            continue;
        }
        if (run < RH) h[run]++;
        else for (int k = 0; k <= JSQ_MAX_K; k++) big[k] += run >> k;
        run = 0;
        kept += i < ng;
    }
    int best = 0;
    uint64_t bb = UINT64_MAX;
    for (int k = 0; k <= JSQ_MAX_K; k++) {
        uint64_t b = big[k] + (uint64_t)(kept + 1) * (1 + (uint64_t)k);
        for (size_t r = (size_t)1 << k; r < RH; r++) b += (uint64_t)h[r] * (r >> k);
        if (b < bb) {
            bb = b;
            best = k;
        }
    }
    return best;
}

/* ---- the assignment pass over all groups ----
 * For two multipliers lam_lo < lam_hi, every group's pick at both (the rule
 * of pz_mckp_pick); cls[] receives the pick at lam_hi; the groups whose picks
 * differ are the candidates (their items go to cand/cid, at most ccap). */
/* Candidates' positions, picks at lam_hi and magnitudes (bits of the group's
 * max |x|), beside their items in a pz_mckp_soa. */
typedef struct {
    uint32_t *id, *hi, *key;
    void *blk;
} jsq_cside;

static jsq_cside jsq_cside_alloc_(size_t cap) {
    jsq_cside c;
    cap += 16;
    uint32_t *b = jsq_big_alloc_(3 * cap * sizeof *b);
    c.id = b;
    c.hi = b + cap;
    c.key = b + 2 * cap;
    c.blk = b;
    return c;
}

typedef struct {
    uint64_t cost_hi, cost_lo;   /* sums of the picked costs */
    size_t ncand;                /* candidates (may exceed ccap: then not all stored) */
    uint64_t nh[4];              /* groups per pick at lam_hi */
    uint32_t nmax[4];            /* max |x| (bits) per pick at lam_hi over the non-candidates */
    uint32_t ucost[4];           /* the candidates' costs when all the same (cand->ucost) */
} jsq_passb;

#if defined(__AVX512F__)
/* The G = 1 model on 16 lanes: errors of |x| (key = its bits) and the pick
 * for per-class offsets h[c] = lam * cost[c]. */
typedef struct {
    __m512 vM, i1, i2, i3, d1, d2, d3, s1, s2, s3;
} jsq_vmodel;

static inline jsq_vmodel jsq_vmodel_(const jsq_model *md) {
    jsq_vmodel K;
    K.vM = _mm512_set1_ps(md->invM);
    K.i1 = _mm512_set1_ps(md->invD[1]);
    K.i2 = _mm512_set1_ps(md->invD[2]);
    K.i3 = _mm512_set1_ps(md->invD[3]);
    K.d1 = _mm512_set1_ps(md->D2[1]);
    K.d2 = _mm512_set1_ps(md->D2[2]);
    K.d3 = _mm512_set1_ps(md->D2[3]);
    K.s1 = _mm512_set1_ps(md->s[1]);
    K.s2 = _mm512_set1_ps(md->s[2]);
    K.s3 = _mm512_set1_ps(md->s[3]);
    return K;
}

static inline void jsq_verrs_(const jsq_vmodel *K, __m512i key, __m512 e[4]) {
    const __m512 inf = _mm512_set1_ps(INFINITY);
    __m512 xa = _mm512_castsi512_ps(key), xh = _mm512_mul_ps(xa, K->vM);
    /* no clamp of y here: lanes where it would matter are not allowed (INFINITY) */
    __m512 y1 = _mm512_mul_ps(xh, K->i1), y2 = _mm512_mul_ps(xh, K->i2), y3 = _mm512_mul_ps(xh, K->i3);
    __m512 f1 = _mm512_sub_ps(y1, _mm512_roundscale_ps(y1, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
    __m512 f2 = _mm512_sub_ps(y2, _mm512_roundscale_ps(y2, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
    __m512 f3 = _mm512_sub_ps(y3, _mm512_roundscale_ps(y3, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
    e[0] = _mm512_mul_ps(xh, xh);
    e[1] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(xa, K->s1, _CMP_LE_OQ), inf,
                                _mm512_mul_ps(K->d1, _mm512_sub_ps(f1, _mm512_mul_ps(f1, f1))));
    e[2] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(xa, K->s2, _CMP_LE_OQ), inf,
                                _mm512_mul_ps(K->d2, _mm512_sub_ps(f2, _mm512_mul_ps(f2, f2))));
    e[3] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(xa, K->s3, _CMP_LE_OQ), inf,
                                _mm512_mul_ps(K->d3, _mm512_sub_ps(f3, _mm512_mul_ps(f3, f3))));
}

static inline __m512i jsq_vpick_(const __m512 e[4], __m512 h0, __m512 h1, __m512 h2, __m512 h3) {
    const __m512i one = _mm512_set1_epi32(1);
    __m512 b = _mm512_add_ps(e[0], h0), v1 = _mm512_add_ps(e[1], h1), v2 = _mm512_add_ps(e[2], h2),
           v3 = _mm512_add_ps(e[3], h3);
    __m512i a = _mm512_setzero_si512();
    __mmask16 m = _mm512_cmp_ps_mask(v1, b, _CMP_LT_OQ);
    b = _mm512_mask_mov_ps(b, m, v1);
    a = _mm512_mask_mov_epi32(a, m, one);
    m = _mm512_cmp_ps_mask(v2, b, _CMP_LT_OQ);
    b = _mm512_mask_mov_ps(b, m, v2);
    a = _mm512_mask_mov_epi32(a, m, _mm512_add_epi32(one, one));
    m = _mm512_cmp_ps_mask(v3, b, _CMP_LT_OQ);
    return _mm512_mask_mov_epi32(a, m, _mm512_add_epi32(one, _mm512_add_epi32(one, one)));
}

/* The same pass for G = 1 in one sweep: errors, both picks and the
 * candidates 16 elements at a time, in registers. */
static void jsq_pass_b1_(const float *x, size_t n, const jsq_model *md, const uint32_t cf[4], float lam_lo,
                         float lam_hi, uint8_t *cls, pz_mckp_soa *cand, jsq_cside *cs_, size_t ccap, jsq_passb *r) {
    uint32_t *cid = cs_->id;
    const jsq_vmodel K = jsq_vmodel_(md);
    const __m512 h0 = _mm512_set1_ps(lam_hi * (float)cf[0]), h1 = _mm512_set1_ps(lam_hi * (float)cf[1]),
                 h2 = _mm512_set1_ps(lam_hi * (float)cf[2]), h3 = _mm512_set1_ps(lam_hi * (float)cf[3]);
    const __m512 l0 = _mm512_set1_ps(lam_lo * (float)cf[0]), l1 = _mm512_set1_ps(lam_lo * (float)cf[1]),
                 l2 = _mm512_set1_ps(lam_lo * (float)cf[2]), l3 = _mm512_set1_ps(lam_lo * (float)cf[3]);
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1), step = _mm512_set1_epi32(16);
    const __m512i two = _mm512_add_epi32(one, one);
    /* costs by class, for the lo - hi cost difference of the candidates */
    const __m512i ctab = _mm512_setr_epi32((int)cf[0], (int)cf[1], (int)cf[2], (int)cf[3], 0, 0, 0, 0, 0, 0, 0, 0,
                                           0, 0, 0, 0);
    __m512i iv = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i mx1 = _mm512_setzero_si512(), mx2 = mx1, mx3 = mx1;
    __m512i n1 = _mm512_setzero_si512(), n2 = n1, n3 = n1;
    __m512i dlo = _mm512_setzero_si512();          /* cost(lo) - cost(hi), per lane */
    int64_t dsum = 0;
    size_t nc = 0, i = 0, it = 0;
    for (; i + 16 <= n; i += 16, iv = _mm512_add_epi32(iv, step)) {
        __m512i key = _mm512_and_si512(_mm512_loadu_si512((const void *)(x + i)), absm);
        __m512 e[4];
        jsq_verrs_(&K, key, e);
        __m512i a = jsq_vpick_(e, h0, h1, h2, h3), bq = jsq_vpick_(e, l0, l1, l2, l3);
        _mm_storeu_si128((__m128i *)(void *)(cls + i), _mm512_cvtepi32_epi8(a));
        __mmask16 k1 = _mm512_cmpeq_epi32_mask(a, one), k2 = _mm512_cmpeq_epi32_mask(a, two);
        __mmask16 k3 = _mm512_cmpgt_epi32_mask(a, two);
        n1 = _mm512_mask_add_epi32(n1, k1, n1, one);
        n2 = _mm512_mask_add_epi32(n2, k2, n2, one);
        n3 = _mm512_mask_add_epi32(n3, k3, n3, one);
        __mmask16 dif = _mm512_cmpneq_epi32_mask(a, bq), keep = (__mmask16)~dif;
        mx1 = _mm512_mask_max_epu32(mx1, k1 & keep, mx1, key);
        mx2 = _mm512_mask_max_epu32(mx2, k2 & keep, mx2, key);
        mx3 = _mm512_mask_max_epu32(mx3, k3 & keep, mx3, key);
        if (dif) {
            dlo = _mm512_add_epi32(dlo, _mm512_maskz_sub_epi32(dif, _mm512_permutexvar_epi32(bq, ctab),
                                                              _mm512_permutexvar_epi32(a, ctab)));
            if (++it == 4096) {                      /* flush before the 32-bit lanes could overflow */
                dsum += _mm512_reduce_add_epi32(dlo);
                dlo = _mm512_setzero_si512();
                it = 0;
            }
            if (nc < ccap) {                         /* the arrays have 16 slots of slack */
                _mm512_storeu_si512((void *)(cid + nc), _mm512_maskz_compress_epi32(dif, iv));
                _mm512_storeu_si512((void *)(cs_->hi + nc), _mm512_maskz_compress_epi32(dif, a));
                _mm512_storeu_si512((void *)(cs_->key + nc), _mm512_maskz_compress_epi32(dif, key));
                for (int o = 0; o < 4; o++) _mm512_storeu_ps(cand->err[o] + nc, _mm512_maskz_compress_ps(dif, e[o]));
            }
            nc += (size_t)__builtin_popcount(dif);
        }
    }
    dsum += _mm512_reduce_add_epi32(dlo);
    uint64_t nh[4] = {0, 0, 0, 0};
    {
        uint32_t t1[16], t2[16], t3[16];
        _mm512_storeu_si512((void *)t1, n1);
        _mm512_storeu_si512((void *)t2, n2);
        _mm512_storeu_si512((void *)t3, n3);
        for (int j = 0; j < 16; j++) {
            nh[1] += t1[j];
            nh[2] += t2[j];
            nh[3] += t3[j];
        }
    }
    r->nmax[1] = _mm512_reduce_max_epu32(mx1);
    r->nmax[2] = _mm512_reduce_max_epu32(mx2);
    r->nmax[3] = _mm512_reduce_max_epu32(mx3);
    r->nmax[0] = 0;
    if (i < n) {                                 /* the tail, with the scalar forms */
        float E[4][16];
        size_t t = n - i;
        jsq_errs_(x + i, t, 1, NULL, md, E[0], E[1], E[2], E[3]);
        for (size_t j = 0; j < t; j++) {
            float fc[4] = {(float)cf[0], (float)cf[1], (float)cf[2], (float)cf[3]};
            int a = pz_mckp_pick(E[0][j], E[1][j], E[2][j], E[3][j], fc[0], fc[1], fc[2], fc[3], lam_hi);
            int bb = pz_mckp_pick(E[0][j], E[1][j], E[2][j], E[3][j], fc[0], fc[1], fc[2], fc[3], lam_lo);
            cls[i + j] = (uint8_t)a;
            nh[a]++;
            if (a != bb) {
                dsum += (int64_t)cf[bb] - (int64_t)cf[a];
                if (nc < ccap) {
                    cid[nc] = (uint32_t)(i + j);
                    cs_->hi[nc] = (uint32_t)a;
                    cs_->key[nc] = pz_abs_key(x[i + j]);
                    for (int o = 0; o < 4; o++) cand->err[o][nc] = E[o][j];
                }
                nc++;
            } else if (a) {
                uint32_t k = pz_abs_key(x[i + j]);
                r->nmax[a] = k > r->nmax[a] ? k : r->nmax[a];
            }
        }
    }
    nh[0] = n - nh[1] - nh[2] - nh[3];
    r->cost_hi = 0;
    for (int o = 0; o < 4; o++) {
        r->nh[o] = nh[o];
        r->cost_hi += nh[o] * cf[o];
    }
    r->cost_lo = (uint64_t)((int64_t)r->cost_hi + dsum);
    r->ncand = nc;
    memcpy(r->ucost, cf, sizeof r->ucost);
    cand->ucost = r->ucost;                      /* every candidate a full group */
}
#endif

static void jsq_pass_b_(const float *x, const jsq_geom *g, const float *gm, const jsq_model *md, int k,
                        float lam_lo, float lam_hi, uint8_t *cls, pz_mckp_soa *cand, jsq_cside *cs_,
                        size_t ccap, jsq_passb *r) {
    float *E = xmalloc(4 * JSQ_BLOCK * sizeof *E);
    float *E0 = E, *E1 = E + JSQ_BLOCK, *E2 = E + 2 * JSQ_BLOCK, *E3 = E + 3 * JSQ_BLOCK;
    uint8_t dif[JSQ_BLOCK + 64], lo_[JSQ_BLOCK + 64];
    float *Ev[4] = {E0, E1, E2, E3};
    uint32_t cf[4], cs[4];
    jsq_costs_(k, (uint32_t)g->G, cf);
    size_t last_short = g->n % g->G ? g->ng - 1 : SIZE_MAX;
    if (last_short != SIZE_MAX) jsq_costs_(k, (uint32_t)(g->n % g->G), cs);
#if defined(__AVX512F__)
    if (g->G == 1) {
        free(E);
        jsq_pass_b1_(x, g->n, md, cf, lam_lo, lam_hi, cls, cand, cs_, ccap, r);
        return;
    }
#endif
    r->cost_hi = r->cost_lo = 0;
    r->ncand = 0;
    cand->ucost = NULL;
    memset(r->nh, 0, sizeof r->nh);
    memset(r->nmax, 0, sizeof r->nmax);
    for (size_t j0 = 0; j0 < g->ng; j0 += JSQ_BLOCK) {
        size_t nb = g->ng - j0 < JSQ_BLOCK ? g->ng - j0 : JSQ_BLOCK;
        size_t eb = j0 * g->G, ee = (j0 + nb) * g->G < g->n ? (j0 + nb) * g->G : g->n;
        jsq_errs_(x + eb, ee - eb, g->G, gm ? gm + j0 : NULL, md, E0, E1, E2, E3);
        size_t nv = j0 + nb - 1 == last_short ? nb - 1 : nb;
        uint8_t *cl = cls + j0;
        r->cost_hi += pz_mckp_pick_uniform(Ev, cf, nv, lam_hi, cl);
        r->cost_lo += pz_mckp_pick_uniform(Ev, cf, nv, lam_lo, lo_);
        for (size_t i = 0; i < nv; i++) dif[i] = cl[i] != lo_[i];
        if (nv < nb) {                                  /* the short last group */
            float fs[4] = {(float)cs[0], (float)cs[1], (float)cs[2], (float)cs[3]};
            int a = pz_mckp_pick(E0[nv], E1[nv], E2[nv], E3[nv], fs[0], fs[1], fs[2], fs[3], lam_hi);
            int b = pz_mckp_pick(E0[nv], E1[nv], E2[nv], E3[nv], fs[0], fs[1], fs[2], fs[3], lam_lo);
            cl[nv] = (uint8_t)a;
            dif[nv] = (uint8_t)(a != b);
            r->cost_hi += cs[a];
            r->cost_lo += cs[b];
        }
        for (size_t i = 0; i < nb; i++) {
            int c = cl[i];
            r->nh[c]++;
            if (dif[i] || !c) continue;
            uint32_t mk = gm ? pz_f2u(gm[j0 + i]) : pz_abs_key(x[j0 + i]);
            r->nmax[c] = mk > r->nmax[c] ? mk : r->nmax[c];
        }
        memset(dif + nb, 0, 64);
        for (size_t i0 = 0; i0 < nb; i0 += 64) {
            uint64_t m = nz64_(dif + i0);
            while (m) {
                size_t i = i0 + (size_t)__builtin_ctzll(m);
                m &= m - 1;
                if (r->ncand < ccap) {
                    size_t c = r->ncand;
                    cs_->id[c] = (uint32_t)(j0 + i);
                    cs_->hi[c] = cl[i];
                    cs_->key[c] = gm ? pz_f2u(gm[j0 + i]) : pz_abs_key(x[j0 + i]);
                    cand->err[0][c] = E0[i];
                    cand->err[1][c] = E1[i];
                    cand->err[2][c] = E2[i];
                    cand->err[3][c] = E3[i];
                    const uint32_t *cc = j0 + i == last_short ? cs : cf;
                    for (int o = 0; o < 4; o++) cand->cost[o][c] = cc[o];
                }
                r->ncand++;
            }
        }
    }
    free(E);
}

/* ---- bit writer for the map (LSB first, 32 bits at a time) ---- */

typedef struct {
    uint8_t *p;        /* byte holding the next bit */
    uint64_t acc;      /* the n < 8 pending bits (the low bits of *p) */
    unsigned n;
} mapw_;

/* Appends nb <= 32 bits; branch-free: stores 8 bytes every time (the buffer
 * has 8 bytes of slack past the end of the map). By value, so that the
 * state stays in registers. */
#if defined(JSQ_VEC)
static inline mapw_ mw_put64_(mapw_ w, uint64_t v, unsigned nb) {   /* nb <= 56 */
    w.acc |= v << w.n;
    w.n += nb;
    memcpy(w.p, &w.acc, 8);
    w.p += w.n >> 3;
    w.acc >>= w.n & ~7u;
    w.n &= 7;
    return w;
}
#endif

static inline mapw_ mw_put_(mapw_ w, uint32_t v, unsigned nb) {
    w.acc |= (uint64_t)v << w.n;
    w.n += nb;
    memcpy(w.p, &w.acc, 8);
    w.p += w.n >> 3;
    w.acc >>= w.n & ~7u;
    w.n &= 7;
    return w;
}

/* Class counts (groups) and maxima (bits of the max |x|) of cls[0..ng);
 * mag: |x| per group as floats (group maxima, or x itself when G == 1). */
static void jsq_class_stats_(const uint8_t *cls, size_t ng, const float *mag, size_t cnt[4], uint32_t mx[4]) {
    size_t i = 0;
#if defined(__AVX512F__)
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512i m1 = _mm512_setzero_si512(), m2 = m1, m3 = m1;
    const __m512i c1 = _mm512_set1_epi32(1), c2 = _mm512_set1_epi32(2), c3 = _mm512_set1_epi32(3);
    for (; i + 16 <= ng; i += 16) {
        __m512i cv = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(cls + i)));
        __m512i key = _mm512_and_si512(_mm512_loadu_si512((const void *)(mag + i)), absm);
        __mmask16 k1 = _mm512_cmpeq_epi32_mask(cv, c1), k2 = _mm512_cmpeq_epi32_mask(cv, c2),
                  k3 = _mm512_cmpeq_epi32_mask(cv, c3);
        m1 = _mm512_mask_max_epu32(m1, k1, m1, key);
        m2 = _mm512_mask_max_epu32(m2, k2, m2, key);
        m3 = _mm512_mask_max_epu32(m3, k3, m3, key);
        cnt[1] += (size_t)__builtin_popcount(k1);
        cnt[2] += (size_t)__builtin_popcount(k2);
        cnt[3] += (size_t)__builtin_popcount(k3);
    }
    uint32_t r1 = _mm512_reduce_max_epu32(m1), r2 = _mm512_reduce_max_epu32(m2), r3 = _mm512_reduce_max_epu32(m3);
    mx[1] = r1 > mx[1] ? r1 : mx[1];
    mx[2] = r2 > mx[2] ? r2 : mx[2];
    mx[3] = r3 > mx[3] ? r3 : mx[3];
#endif
    for (; i < ng; i++) {
        int c = cls[i];
        uint32_t key = pz_abs_key(mag[i]);
        cnt[c]++;
        mx[c] = key > mx[c] ? key : mx[c];
    }
}

static const uint32_t jsq_ccode[4] = {0, 0x0, 0x1, 0x3};
static const int jsq_clen[4] = {0, 1, 2, 2};

/* one run of r dropped groups, then (c > 0) a kept group of class c */
static inline mapw_ mw_run_(mapw_ w, uint64_t r, int k, int c) {
    uint64_t q = r >> k;
    while (q > 16) {
        w = mw_put_(w, 0xffffu, 16);
        q -= 16;
    }
    uint32_t v = (uint32_t)((1u << q) - 1) | ((uint32_t)(r & ((1u << k) - 1)) << (q + 1));
    unsigned nb = (unsigned)q + 1 + (unsigned)k;
    v |= jsq_ccode[c] << nb;                      /* class 0 (the final run): no code */
    nb += (unsigned)jsq_clen[c];
    return mw_put_(w, v, nb);
}

/* Writes the map of cls[0..ng) with Rice parameter k at out (8 bytes of
 * slack past its end); returns its length in bits. With AVX-512 the kept
 * groups of 1024 at a time are gathered and their codes (value, length)
 * computed 16 at a time; the serial part only appends them. */
static uint64_t jsq_write_map_(const uint8_t *cls, size_t ng, int k, uint8_t *out) {
    mapw_ w = {out, 0, 0};
    size_t last = 0, i0 = 0;
#if defined(JSQ_VEC)
    enum { MB = 1024 };
    uint32_t pos[MB + 32], cl[MB + 32];
    uint64_t pv[MB / 2 + 16], pl[MB / 2 + 16];
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    /* per class: code << k and 1 + k + code length */
    const __m512i ctab = _mm512_setr_epi32(0, (int)(jsq_ccode[1] << k), (int)(jsq_ccode[2] << k),
                                           (int)(jsq_ccode[3] << k), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i ltab = _mm512_setr_epi32(1 + k, 1 + k + jsq_clen[1], 1 + k + jsq_clen[2], 1 + k + jsq_clen[3], 0,
                                           0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    /* codes of at most 24 bits go in pairs (<= 48 bits); longer ones (long runs) the slow way */
    const __m512i kv = _mm512_set1_epi32(k), rmask = _mm512_set1_epi32((1 << k) - 1), one = _mm512_set1_epi32(1),
                  nbmax = _mm512_set1_epi32(24), lo32 = _mm512_set1_epi64(0xffffffff);
    for (; i0 + MB <= ng; i0 += MB) {
        /* kept positions of the block and their classes */
        size_t cnt = 0;
        pos[0] = (uint32_t)last - 1;                 /* the previous kept group (wraps at 0: fine) */
        for (size_t j = 0; j < MB; j += 16) {
            __m128i c8 = _mm_loadu_si128((const __m128i *)(const void *)(cls + i0 + j));
            __mmask16 m = _mm_test_epi8_mask(c8, c8);
            __m512i p = _mm512_add_epi32(iota, _mm512_set1_epi32((int)(i0 + j)));
            _mm512_storeu_si512((void *)(pos + 1 + cnt), _mm512_maskz_compress_epi32(m, p));
            _mm512_storeu_si512((void *)(cl + cnt), _mm512_maskz_compress_epi32(m, _mm512_cvtepu8_epi32(c8)));
            cnt += (size_t)__builtin_popcount(m);
        }
        for (size_t j = 0; j < cnt; j += 16) {
            __mmask16 live = cnt - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cnt - j)) - 1);
            __m512i p = _mm512_loadu_si512((const void *)(pos + 1 + j)), pp = _mm512_loadu_si512((const void *)(pos + j));
            __m512i c = _mm512_maskz_mov_epi32(live, _mm512_loadu_si512((const void *)(cl + j)));
            __m512i r = _mm512_sub_epi32(_mm512_sub_epi32(p, pp), one);
            __m512i q = _mm512_srlv_epi32(r, kv);
            __m512i t = _mm512_or_si512(_mm512_permutexvar_epi32(c, ctab), _mm512_and_si512(r, rmask));
            __m512i v = _mm512_or_si512(_mm512_sllv_epi32(t, _mm512_add_epi32(q, one)),
                                        _mm512_sub_epi32(_mm512_sllv_epi32(one, q), one));
            __m512i nb = _mm512_add_epi32(q, _mm512_permutexvar_epi32(c, ltab));
            __mmask16 slow = _mm512_mask_cmpgt_epu32_mask(live, nb, nbmax);
            v = _mm512_maskz_mov_epi32(live, v);
            nb = _mm512_maskz_mov_epi32(live, nb);
            /* pairs: even | odd << len(even) */
            __m512i pvv = _mm512_or_si512(_mm512_and_si512(v, lo32),
                                          _mm512_sllv_epi64(_mm512_srli_epi64(v, 32), _mm512_and_si512(nb, lo32)));
            __m512i plv = _mm512_add_epi64(_mm512_and_si512(nb, lo32), _mm512_srli_epi64(nb, 32));
            /* a pair holding a slow code: length 255 */
            __mmask8 sp = (__mmask8)_pext_u32(slow | (slow >> 1), 0x5555u);
            plv = _mm512_mask_mov_epi64(plv, sp, _mm512_set1_epi64(255));
            _mm512_storeu_si512((void *)(pv + j / 2), pvv);
            _mm512_storeu_si512((void *)(pl + j / 2), plv);
        }
        size_t npair = (cnt + 1) / 2;
        for (size_t j = 0; j < npair; j++) {
            if (pl[j] != 255) {
                w = mw_put64_(w, pv[j], (unsigned)pl[j]);
            } else {
                for (size_t e = 2 * j; e < 2 * j + 2 && e < cnt; e++)
                    w = mw_run_(w, (size_t)pos[1 + e] - ((size_t)pos[e] + 1), k, (int)cl[e]);
            }
        }
        if (cnt) last = pos[cnt] + 1;
    }
#endif
    for (; i0 < ng; i0++) {
        if (!cls[i0]) continue;
        w = mw_run_(w, i0 - last, k, cls[i0]);
        last = i0 + 1;
    }
    w = mw_run_(w, ng - last, k, 0);
    return (uint64_t)(w.p - out) * 8 + w.n;
}

/* ---- value streams ---- */

/* Packs cnt codes (w bits each, LSB first) to out; writes ceil(w cnt / 8) bytes. */
static size_t jsq_pack_(const uint8_t *c, size_t cnt, int w, uint8_t *out) {
    size_t nbytes = (cnt * (size_t)w + 7) / 8;
    if (w == 8) {
        memcpy(out, c, cnt);
    } else if (w == 4) {
        size_t full = cnt / 2;
#pragma omp simd
        for (size_t j = 0; j < full; j++) out[j] = (uint8_t)(c[2 * j] | c[2 * j + 1] << 4);
        if (cnt & 1) out[full] = c[cnt - 1];
    } else {
        size_t full = cnt / 4;
#pragma omp simd
        for (size_t j = 0; j < full; j++)
            out[j] = (uint8_t)(c[4 * j] | c[4 * j + 1] << 2 | c[4 * j + 2] << 4 | c[4 * j + 3] << 6);
        if (cnt & 3) {
            uint8_t b = 0;
            for (size_t j = 0; j < (cnt & 3); j++) b |= (uint8_t)(c[4 * full + j] << (2 * j));
            out[full] = b;
        }
    }
    return nbytes;
}

/* Unpacks cnt codes starting at code index `at` of a w-bit stream (at a
 * multiple of 8 / w codes... at is a multiple of 8) into c; returns non-zero
 * when a code is the invalid 2^w - 1. */
static int jsq_unpack_(const uint8_t *in, size_t at, size_t cnt, int w, uint8_t *c) {
    const uint8_t *p = in + at * (size_t)w / 8;
    uint8_t bad = (uint8_t)((1u << w) - 1), any = 0;
    if (w == 8) {
        memcpy(c, p, cnt);
    } else if (w == 4) {
        size_t full = cnt / 2;
#pragma omp simd
        for (size_t j = 0; j < full; j++) {
            c[2 * j] = p[j] & 15;
            c[2 * j + 1] = (uint8_t)(p[j] >> 4);
        }
        if (cnt & 1) c[cnt - 1] = p[full] & 15;
    } else {
        size_t full = cnt / 4;
#pragma omp simd
        for (size_t j = 0; j < full; j++) {
            c[4 * j] = p[j] & 3;
            c[4 * j + 1] = (p[j] >> 2) & 3;
            c[4 * j + 2] = (p[j] >> 4) & 3;
            c[4 * j + 3] = (uint8_t)(p[j] >> 6);
        }
        for (size_t j = 0; j < (cnt & 3); j++) c[4 * full + j] = (p[full] >> (2 * j)) & 3;
    }
#pragma omp simd reduction(| : any)
    for (size_t j = 0; j < cnt; j++) any |= (uint8_t)(c[j] == bad);
    return any;
}

/* Codes of elements x[0..cnt) (element indices i0 + j) with per-element
 * classes ec, appended to the staging buffers st[1..3] (counts ns[]). */
static void jsq_codes_(const float *x, const uint8_t *ec, size_t cnt, uint32_t i0, pz_ukey uk, const float inv[4],
                       uint8_t *st[4], size_t ns[4]) {
    size_t j = 0;
#if defined(JSQ_VEC)
    const __m512 invt = _mm512_setr_ps(inv[0], inv[1], inv[2], inv[3], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512 Lt = _mm512_setr_ps(0.0f, 1.0f, 7.0f, 127.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i klo = _mm512_set1_epi32((int)uk.lo), khi = _mm512_set1_epi32((int)uk.hi);
    const __m512i m1 = _mm512_set1_epi32(0x7feb352d), m2 = _mm512_set1_epi32((int)0x846ca68bu);
    const __m512 one = _mm512_set1_ps(1.0f), u24 = _mm512_set1_ps(0x1p-24f);
    for (; j + 64 <= cnt; j += 64) {
        __m512i cv = _mm512_loadu_si512((const void *)(ec + j));
        uint8_t cb[64];
        for (int q = 0; q < 4; q++) {
            __m512i c32 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(ec + j + 16 * q)));
            __m512 iv = _mm512_permutexvar_ps(c32, invt), Lf = _mm512_permutexvar_ps(c32, Lt);
            __m512 y = _mm512_mul_ps(_mm512_loadu_ps(x + j + 16 * q), iv);
            __m512 f = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
            __m512i h = _mm512_xor_si512(_mm512_add_epi32(_mm512_set1_epi32((int)(i0 + (uint32_t)(j + 16 * q))), iota), klo);
            h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
            h = _mm512_mullo_epi32(h, m1);
            h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 15));
            h = _mm512_mullo_epi32(h, m2);
            h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
            h = _mm512_xor_si512(h, khi);
            __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(h, 8)), u24);
            __mmask16 up = _mm512_cmp_ps_mask(u, _mm512_sub_ps(y, f), _CMP_LT_OQ);
            __m512 qv = _mm512_mask_add_ps(f, up, f, one);
            qv = _mm512_min_ps(_mm512_max_ps(qv, _mm512_sub_ps(_mm512_setzero_ps(), Lf)), Lf);
            __m512i code = _mm512_cvtps_epi32(_mm512_add_ps(qv, Lf));
            _mm_storeu_si128((__m128i *)(void *)(cb + 16 * q), _mm512_cvtepi32_epi8(code));
        }
        __m512i codes = _mm512_loadu_si512((const void *)cb);
        for (int c = 1; c < 4; c++) {
            __mmask64 m = _mm512_cmpeq_epi8_mask(cv, _mm512_set1_epi8((char)c));
            _mm512_storeu_si512((void *)(st[c] + ns[c]), _mm512_maskz_compress_epi8(m, codes));
            ns[c] += (size_t)__builtin_popcountll(m);
        }
    }
#endif
    static const float Lt_s[4] = {0.0f, 1.0f, 7.0f, 127.0f};
    for (; j < cnt; j++) {
        int c = ec[j];
        float u = pz_uniform_w(uk, i0 + (uint32_t)j);
        float q = pz_clampf(pz_round_stoch(x[j] * inv[c], u), -Lt_s[c], Lt_s[c]);
        st[c][ns[c]] = (uint8_t)((int)q + jsq_L[c]);
        ns[c] += c != 0;
    }
}

/* ---- encode ---- */

/* Per-element classes of elements [i0, i0 + cnt) into ec (groups of G). */
static void jsq_expand_cls_(const uint8_t *cls, size_t G, size_t i0, size_t cnt, uint8_t *ec) {
    size_t i = 0;
    if (G <= 8 && i0 % G == 0) {                 /* 8-byte stores (ec has 8 bytes of slack) */
        for (size_t gi = i0 / G; i < cnt; i += G, gi++) {
            uint64_t v = cls[gi] * 0x0101010101010101ull;
            memcpy(ec + i, &v, 8);
        }
        return;
    }
    while (i < cnt) {
        size_t gi = (i0 + i) / G, end = (gi + 1) * G - i0;
        if (end > cnt) end = cnt;
        memset(ec + i, cls[gi], end - i);
        i = end;
    }
}

/* Solves the sample items s (ms of them) at capacity cap: the exact solver
 * when the sample is the whole tensor, else the approximate multiplier;
 * choice[] and the model error. */
static double jsq_solve_sample_(pz_mckp_soa *s, size_t ms, uint64_t cap, int exact, float *lam,
                                uint8_t *choice) {
    if (exact) {
        pz_mckp_info info;
        pz_mckp_solve_soa(s, ms, cap, 0.0f, INFINITY, 0, choice, &info);
        *lam = info.lambda;
        return info.base_fits ? info.err : INFINITY;
    }
    double err;
    uint64_t cost;
    *lam = pz_mckp_lambda(s, ms, cap, 10, *lam, &cost, &err);
    pz_mckp_cost_at(s, ms, *lam, choice, NULL);
    return err;
}

static pz_status jsq_encode(const pz_codec_params *p, const float *x, const pz_shape *s,
                            const pz_codec_ctx *ctx, uint8_t *payload, size_t cap, size_t *len) {
    jsq_geom g;
    pz_status st = jsq_geom_(p, s, &g);
    if (st != PZ_OK) return st;
    *len = 0;
    if (g.pmax * 8 < JSQ_RESERVE + 16) return PZ_OK;       /* no room for anything: empty */
    const size_t G = g.G, ng = g.ng;

    /* group maxima (G > 1) and the tensor's max |x| */
    float *gm = NULL;
    uint32_t kmax = 0;
    if (G == 1) {
#pragma omp simd reduction(max : kmax)
        for (size_t i = 0; i < g.n; i++) {
            uint32_t k = pz_abs_key(x[i]);
            kmax = k > kmax ? k : kmax;
        }
    } else {
        gm = xmalloc((ng + 16) * sizeof *gm);
        size_t gi = 0;
#if defined(__AVX512F__)
        const __m512i absm = _mm512_set1_epi32(0x7fffffff);
        if (G == 2 || G == 4 || G == 8) {            /* 16 / G groups per vector */
            const __mmask16 pick = G == 8 ? 0x0101 : G == 4 ? 0x1111 : 0x5555;
            const size_t per = 16 / G;
            __m512i mx = _mm512_setzero_si512();
            for (; gi + per <= g.n / G; gi += per) {
                __m512i v = _mm512_and_si512(_mm512_loadu_si512((const void *)(x + gi * G)), absm);
                if (G == 8) v = _mm512_max_epu32(v, _mm512_shuffle_i32x4(v, v, 0xB1));
                if (G >= 4) v = _mm512_max_epu32(v, _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)0x4E));
                v = _mm512_max_epu32(v, _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)0xB1));
                mx = _mm512_max_epu32(mx, v);
                _mm512_storeu_si512((void *)(gm + gi), _mm512_maskz_compress_epi32(pick, v));
            }
            uint32_t m = _mm512_reduce_max_epu32(mx);
            kmax = m > kmax ? m : kmax;
        } else if (G >= 16) {
            for (; gi < ng; gi++) {
                size_t b = gi * G, e = b + G < g.n ? b + G : g.n;
                __m512i v = _mm512_setzero_si512();
                for (size_t i = b; i < e; i += 16) {
                    __mmask16 live = e - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (e - i)) - 1);
                    v = _mm512_max_epu32(v, _mm512_and_si512(_mm512_maskz_loadu_epi32(live, x + i), absm));
                }
                uint32_t m = _mm512_reduce_max_epu32(v);
                gm[gi] = pz_u2f(m);
                kmax = m > kmax ? m : kmax;
            }
        }
#endif
        for (; gi < ng; gi++) {
            size_t b = gi * G, e = b + G < g.n ? b + G : g.n;
            uint32_t m = 0;
#pragma omp simd reduction(max : m)
            for (size_t i = b; i < e; i++) {
                uint32_t k = pz_abs_key(x[i]);
                m = k > m ? k : m;
            }
            gm[gi] = pz_u2f(m);
            kmax = m > kmax ? m : kmax;
        }
    }
    if (kmax >= 0x7f800000u) {
        free(gm);
        return pz_fail(PZ_ERR_ARG, "jointsq: non-finite input");
    }
    if (kmax == 0) {                                        /* all zeros */
        free(gm);
        return PZ_OK;
    }
    float M = pz_u2f(kmax);
    uint64_t room_bits = (uint64_t)g.pmax * 8 - JSQ_RESERVE;   /* map + values */

    /* initial Rice parameter: mean run length if the budget went to 2-bit groups */
    int k = 0;
    {
        double keep = (double)room_bits / (4.0 + 2.0 * (double)G);
        double mrun = keep >= (double)ng ? 1.0 : (double)ng / fmax(keep, 1.0);
        while (k < JSQ_MAX_K && ldexp(1.0, k + 1) <= mrun * 0.69) k++;
        /* the all-dropped map must fit: ng / 2^k + 1 + k bits */
        while (k < JSQ_MAX_K && (ng >> k) + 2 + (uint64_t)k > room_bits / 2) k++;
    }

    /* the sample: every item when there are few, else ms evenly spaced full groups */
    size_t ms = ng;
    size_t lim = G == 1 ? JSQ_SAMPLE : JSQ_SAMPLE_ELEMS / G;
    if (lim < 4096) lim = 4096;
    if (lim > JSQ_SAMPLE) lim = JSQ_SAMPLE;
    int exact = ng <= lim;
    if (!exact) ms = lim;
    const float *sx = x, *sgm = gm;
    float *sxb = NULL, *sgmb = NULL;
    size_t snel = g.n;
    if (!exact) {
        /* runs of bl groups (a cache line of floats when G = 1), one at a
         * hashed position in each of ms / bl equal strata (an even stride
         * would alias with periodic structure, e.g. channels) */
        size_t nfull = g.n / G;                             /* >= ms: ng > ms */
        size_t bl = G >= 16 ? 1 : 16 / G, nbl = ms / bl;
        ms = nbl * bl;
        sxb = xmalloc(ms * G * sizeof *sxb);
        if (gm) sgmb = xmalloc(ms * sizeof *sgmb);
        for (size_t j = 0; j < nbl; j++) {
            uint64_t a = (uint64_t)j * nfull / nbl, b = ((uint64_t)j + 1) * nfull / nbl;
            uint64_t span = b - a > bl ? b - a - bl + 1 : 1;
            size_t it = (size_t)(a + pz_mix32((uint32_t)j * 0x9e3779b9u + 0x7f4a7c15u) % span);
            if (it + bl > nfull) it = nfull - bl;
            memcpy(sxb + j * bl * G, x + it * G, bl * G * sizeof *sxb);
            if (gm) memcpy(sgmb + j * bl, gm + it, bl * sizeof *sgmb);
        }
        sx = sxb;
        sgm = sgmb;
        snel = ms * G;
    }
    double sfrac = (double)ms / (double)ng;                 /* sample capacity = capacity * sfrac */

    /* scales: s_8 = max |x|; s_2, s_4 from group-magnitude quantiles (on the sample) */
    float sc[4] = {0, M, M, M}, s4c[JSQ_CANDIDATES];
    {
        float *mags = xmalloc(ms * sizeof *mags);
        uint32_t *scratch = xmalloc(ms * sizeof *scratch);
        for (size_t j = 0; j < ms; j++) mags[j] = sgm ? sgm[j] : fabsf(sx[j]);
        uint64_t k2 = room_bits / (4 + 2 * (uint64_t)G + (uint64_t)k);
        if (k2 < 1) k2 = 1;
        if (k2 > ng / 4) k2 = ng / 4 > 0 ? ng / 4 : 1;
        size_t r2 = exact ? (size_t)k2 : (size_t)fmax(1.0, floor((double)k2 * sfrac + 0.5));
        size_t above;
        float t = pz_u2f(pz_kth_largest_abs(mags, ms, r2, scratch, &above));
        for (int c = 0; c < JSQ_CANDIDATES; c++) {          /* s_4 candidates: upper quantiles */
            size_t r = (size_t)((double)ms * jsq_q4[c]);
            r = r < 1 ? 1 : r;
            s4c[c] = pz_u2f(pz_kth_largest_abs(mags, ms, r, scratch, &above));
        }
        free(scratch);
        free(mags);
        if (t > 0) {
            sc[1] = 2 * t < M ? 2 * t : M;
            sc[2] = 8 * t < M ? 8 * t : M;
        }
    }

    void *sblk;
    uint32_t ucost[4];
    pz_mckp_soa ss = jsq_soa_alloc_(ms, &sblk);
    uint8_t *scls = xmalloc(ms), *scand = xmalloc(ms);
    double best_err = INFINITY;
    int best_k = k, next_k = k;
    float best_sc[4] = {0, M, M, M}, next_sc[4] = {0, M, M, M}, lam = 0, best_lam = 0;
    jsq_model md;
    for (int round = 0; round < JSQ_CANDIDATES + 1; round++) {
        float trial[4];
        int kk = k;
        if (round < JSQ_CANDIDATES) {
            memcpy(trial, sc, sizeof trial);
            trial[2] = s4c[round] > trial[1] ? s4c[round] : trial[1];
        } else {                                           /* refine the best */
            memcpy(trial, next_sc, sizeof trial);
            kk = next_k;
        }
        uint64_t fixed = 1 + (uint64_t)kk;                 /* final run, at least */
        uint64_t capacity = room_bits > fixed ? (room_bits - fixed) << kk : 0;
        uint64_t scap = exact ? capacity : (uint64_t)((double)capacity * sfrac);
        jsq_model_(&md, M, trial);
        jsq_soa_fill_(sx, snel, G, sgm, &md, kk, &ss, exact ? NULL : ucost);
        double err = jsq_solve_sample_(&ss, ms, scap, exact, &lam, scand);
        if (!(err <= best_err) && !(round == 0)) continue;
        best_err = err;
        best_k = kk;
        best_lam = lam;
        memcpy(best_sc, trial, sizeof trial);
        memcpy(scls, scand, ms);
        /* class maxima as the next scales (not s_8 on a sample: the tensor's
         * max must stay codable); the Rice parameter these runs want */
        float nm[4] = {0, 0, 0, 0};
        for (size_t j = 0; j < ms; j++) {
            float mg = sgm ? sgm[j] : fabsf(sx[j]);
            nm[scls[j]] = mg > nm[scls[j]] ? mg : nm[scls[j]];
        }
        for (int c = 1; c < 4; c++) next_sc[c] = nm[c] > 0 ? nm[c] : trial[c];
        if (!exact) next_sc[3] = trial[3];
        next_k = jsq_best_k_(scls, ms);
    }
    free(scand);
    k = best_k;

    uint8_t *cls;
    size_t gcount[4] = {0, 0, 0, 0}, mcount[4] = {0, 0, 0, 0};
    uint32_t cmax[4] = {0, 0, 0, 0};
    int have_stats = 0;
    if (exact) {
        cls = scls;
        scls = NULL;
        if (!(best_err < INFINITY)) memset(cls, 0, ng);
    } else {
        /* the full assignment: bracket the critical multiplier on the sample,
         * one pass over all groups, then the exact solution among the
         * candidates (the groups whose pick changes inside the bracket) */
        cls = jsq_big_alloc_(ng);
        uint64_t capacity = room_bits > 1 + (uint64_t)k ? (room_bits - 1 - (uint64_t)k) << k : 0;
        jsq_model_(&md, M, best_sc);
        if ((uint64_t)ng > capacity) {                      /* even the all-dropped map is over */
            memset(cls, 0, ng);
        } else {
            jsq_soa_fill_(sx, snel, G, sgm, &md, k, &ss, ucost);
            const double delta = JSQ_DELTA;
            float lam_hi = pz_mckp_lambda(&ss, ms, (uint64_t)((double)capacity * sfrac * (1 - delta)), 12,
                                          best_lam, NULL, NULL);
            float lam_lo = pz_mckp_lambda(&ss, ms, (uint64_t)((double)capacity * sfrac * (1 + delta)), 12,
                                          best_lam, NULL, NULL);
            size_t ccap = ng / 32 + JSQ_CCAP_MIN;
            if (ccap > ng) ccap = ng;
            void *cblk;
            pz_mckp_soa cand = jsq_soa_alloc_(ccap, &cblk);
            jsq_cside cs = jsq_cside_alloc_(ccap);
            jsq_passb r;
            /* the passes so far bound the critical multiplier: cost > capacity
             * at lamL, <= capacity at lamU */
            float lamL = 0, lamU = INFINITY;
            for (int tries = 0;; tries++) {
                if (!(lam_lo < lam_hi)) lam_lo = lam_hi * 0.5f;
                jsq_pass_b_(x, &g, gm, &md, k, lam_lo, lam_hi < FLT_MAX ? lam_hi : FLT_MAX, cls, &cand, &cs, ccap, &r);
                int ok_hi = r.cost_hi <= capacity, ok_lo = r.cost_lo > capacity || lam_lo == 0;
                if (ok_hi && ok_lo && r.ncand <= ccap) break;
                if ((ok_hi && ok_lo && tries >= 8) || tries >= 40) {
                    /* many groups tied at one multiplier: take them all; or
                     * (fp32 rounding gone wild) every group a candidate */
                    if (!(ok_hi && ok_lo)) {
                        lam_lo = 0;
                        lam_hi = INFINITY;
                        r.ncand = ng;
                    }
                    free(cblk);
                    free(cs.blk);
                    ccap = r.ncand;
                    cand = jsq_soa_alloc_(ccap, &cblk);
                    cs = jsq_cside_alloc_(ccap);
                    jsq_pass_b_(x, &g, gm, &md, k, lam_lo, lam_hi < FLT_MAX ? lam_hi : FLT_MAX, cls, &cand, &cs,
                                ccap, &r);
                    break;
                }
                if (r.cost_lo > capacity) lamL = lam_lo > lamL ? lam_lo : lamL;
                else lamU = lam_lo < lamU ? lam_lo : lamU;
                if (r.cost_hi > capacity) lamL = lam_hi > lamL ? lam_hi : lamL;
                else lamU = lam_hi < lamU ? lam_hi : lamU;
                if (!(lamL < lamU)) lamL = 0;                 /* (not monotone: start over) */
                if (lamU == 0) {                              /* cost(0) fits: the all-best choice */
                    lam_lo = lam_hi = 0;
                    continue;
                }
                /* the next bracket: where cost, linear in log(lambda) through
                 * the two points measured, meets the capacity, of a width for
                 * about ccap / 4 candidates; kept inside (lamL, lamU) and at
                 * most half as wide as that */
                double l0 = log(lam_lo > 0 ? lam_lo : FLT_MIN), l1 = log(lam_hi < FLT_MAX ? lam_hi : FLT_MAX);
                double width = l1 - l0, le, w;
                if (r.cost_lo > r.cost_hi && lam_lo > 0) {
                    double t = ((double)r.cost_lo - (double)capacity) / ((double)r.cost_lo - (double)r.cost_hi);
                    le = l0 + t * width;
                } else {
                    le = ok_hi ? l0 - 2 * width : l1 + 2 * width;
                }
                if (ok_hi && ok_lo) w = 0.5 * width * (double)ccap / 4 / (double)r.ncand;
                else w = 0.5 * width;
                if (lamL > 0 && lamU < INFINITY) {
                    double a = log(lamL), bu = log(lamU);
                    if (le <= a || le >= bu) le = 0.5 * (a + bu);
                    if (w > 0.25 * (bu - a)) w = 0.25 * (bu - a);
                }
                lam_lo = (float)exp(le - w);
                lam_hi = (float)exp(le + w);
                if (lamL > 0 && lam_lo < lamL) lam_lo = lamL;
                if (lam_hi > lamU) lam_hi = lamU;
            }
            size_t nc = r.ncand;
            uint64_t fixed_cost = r.cost_hi;
            for (size_t j = 0; j < nc; j++) {
                fixed_cost -= cand.ucost ? cand.ucost[cs.hi[j]] : cand.cost[cs.hi[j]][j];
            }
            uint8_t *cch = xmalloc(nc ? nc : 1);
            pz_mckp_info info;
            pz_mckp_solve_soa(&cand, nc, capacity - fixed_cost, lam_lo, lam_hi, 0, cch, &info);
            /* class counts and maxima: the pass's over the non-candidates,
             * plus the candidates' */
            for (int c = 0; c < 4; c++) {
                gcount[c] = (size_t)r.nh[c];
                cmax[c] = r.nmax[c];
            }
            for (size_t j = 0; j < nc; j++) {
                int c = cch[j];
                gcount[cs.hi[j]]--;
                gcount[c]++;
                cls[cs.id[j]] = (uint8_t)c;
                cmax[c] = cs.key[j] > cmax[c] ? cs.key[j] : cmax[c];
            }
            have_stats = 1;
            free(cch);
            free(cblk);
            free(cs.blk);
        }
    }
    free(sblk);
    free(scls);
    free(sxb);
    free(sgmb);

    /* sizes and class maxima; the map is written with the solve's k (its
     * costs bound the map's bits) */
    if (!have_stats) jsq_class_stats_(cls, ng, gm ? gm : x, gcount, cmax);
    size_t kept = gcount[1] + gcount[2] + gcount[3];
    gcount[0] = ng - kept;
    for (int c = 1; c < 4; c++) mcount[c] = gcount[c] * G;
    if (g.n % G && cls[ng - 1]) mcount[cls[ng - 1]] -= G - g.n % G;
    if (kept == 0) {                                        /* nothing kept */
        free(gm);
        free(cls);
        return PZ_OK;
    }
    /* the map: straight into the payload when the buffer has room for the
     * largest map the costs allow (room_bits) and the writer's 8-byte
     * stores, else through a scratch buffer */
    size_t maxmap = (size_t)(room_bits / 8) + 2;
    uint8_t *mtmp = cap >= 1 + maxmap + 8 ? NULL : xmalloc(maxmap + 8);
    uint64_t mapbits = jsq_write_map_(cls, ng, k, mtmp ? mtmp : payload + 1);
    size_t mapbytes = (size_t)((mapbits + 7) / 8);
    float scale[4] = {0, 0, 0, 0};
    for (int c = 1; c < 4; c++) scale[c] = pz_u2f(cmax[c]);
    size_t off_sc = 1 + mapbytes, nsc = 0;
    for (int c = 1; c < 4; c++) nsc += gcount[c] > 0;
    size_t off[4], total = off_sc + 4 * nsc;
    for (int c = 1; c < 4; c++) {
        off[c] = total;
        total += (mcount[c] * (size_t)jsq_width[c] + 7) / 8;
    }
    pz_status fail = PZ_OK;
    if (mapbits > room_bits || total > g.pmax)             /* cannot happen: capacity reserves */
        fail = pz_fail(PZ_ERR_ARG, "jointsq: internal: %zu bytes over the budget of %zu", total, g.pmax);
    else if (total > cap)
        fail = pz_fail(PZ_ERR_ARG, "jointsq: payload buffer of %zu bytes too small (%zu needed)", cap, total);
    if (fail != PZ_OK) {
        free(mtmp);
        free(gm);
        free(cls);
        return fail;
    }
    free(gm);
    payload[0] = (uint8_t)k;
    if (mtmp) {
        memcpy(payload + 1, mtmp, mapbytes);
        free(mtmp);
    } else if (mapbits % 8) {
        payload[mapbytes] &= (uint8_t)((1u << (mapbits % 8)) - 1);   /* (the writer's bytes past the end are overwritten below) */
    }
    /* scales */
    size_t so = off_sc;
    float inv[4] = {0, 0, 0, 0};
    for (int c = 1; c < 4; c++) {
        if (!gcount[c]) continue;
        memcpy(payload + so, &scale[c], 4);
        so += 4;
        inv[c] = (float)jsq_L[c] / scale[c];
    }
    /* values: codes staged per class, packed JSQ_CH at a time */
    pz_ukey uk = pz_ukey_at(pz_ctx_key(ctx), 0);
    uint8_t *stb = xmalloc(4 * (2 * JSQ_CH + 128)), *ecb = G > 1 ? xmalloc(JSQ_CH + 64) : NULL;
    uint8_t *stg[4];
    size_t ns[4] = {0, 0, 0, 0}, wo[4];
    for (int c = 0; c < 4; c++) {
        stg[c] = stb + (size_t)c * (2 * JSQ_CH + 128);
        wo[c] = off[c < 1 ? 1 : c];
    }
    for (size_t i0 = 0; i0 < g.n; i0 += JSQ_CH) {
        size_t cnt = g.n - i0 < JSQ_CH ? g.n - i0 : JSQ_CH;
        const uint8_t *ec = cls + i0;
        if (G > 1) {
            jsq_expand_cls_(cls, G, i0, cnt, ecb);
            ec = ecb;
        }
        jsq_codes_(x + i0, ec, cnt, (uint32_t)i0, uk, inv, stg, ns);
        for (int c = 1; c < 4; c++) {
            size_t done = 0;
            while (ns[c] - done >= JSQ_CH) {
                wo[c] += jsq_pack_(stg[c] + done, JSQ_CH, jsq_width[c], payload + wo[c]);
                done += JSQ_CH;
            }
            if (done) {
                memmove(stg[c], stg[c] + done, ns[c] - done);
                ns[c] -= done;
            }
        }
    }
    for (int c = 1; c < 4; c++) wo[c] += jsq_pack_(stg[c], ns[c], jsq_width[c], payload + wo[c]);
    free(stb);
    free(ecb);
    free(cls);
    *len = total;
    return PZ_OK;
}

/* ---- decode ---- */

typedef struct {
    const uint8_t *p, *end, *start;
    uint64_t acc;      /* next bits, LSB first; bits above n are zero */
    int n;
} mapr_;

static inline void mr_refill_(mapr_ *r) {
    if (r->end - r->p >= 8) {
        uint64_t w;
        memcpy(&w, r->p, 8);
        r->acc |= w << r->n;
        int adv = (63 - r->n) >> 3;
        r->p += adv;
        r->n += adv * 8;
        r->acc &= (1ull << r->n) - 1;          /* keep the bits above n zero */
    } else {
        while (r->n <= 56 && r->p < r->end) {
            r->acc |= (uint64_t)*r->p++ << r->n;
            r->n += 8;
        }
    }
}
static inline uint32_t mr_take_(mapr_ *r, int nb) {    /* nb <= n, nb < 32 */
    uint32_t v = (uint32_t)(r->acc & ((1ull << nb) - 1));
    r->acc >>= nb;
    r->n -= nb;
    return v;
}

#define JSQ_TBITS 12

/* The decoding table of JSQ_TBITS-bit windows for Rice parameter k. */
static uint64_t *jsq_map_table_(int k) {
    uint64_t *tab = xmalloc(sizeof *tab << JSQ_TBITS);
    for (uint32_t w = 0; w < (1u << JSQ_TBITS); w++) {
        uint64_t e = 0;
        unsigned bits = 0, cnt = 0;
        while (cnt < 4) {
            unsigned ones = 0;
            while (bits + ones < JSQ_TBITS && ((w >> (bits + ones)) & 1)) ones++;
            unsigned cpos = bits + ones + 1 + (unsigned)k;
            if (cpos + 1 > JSQ_TBITS) break;
            uint32_t run = (ones << k) | ((w >> (bits + ones + 1)) & ((1u << k) - 1));
            unsigned cls = 1, clen = 1;
            if ((w >> cpos) & 1) {
                if (cpos + 2 > JSQ_TBITS) break;
                cls = 2 + ((w >> (cpos + 1)) & 1);
                clen = 2;
            }
            if (run >= 1024) break;
            e |= (uint64_t)(run | cls << 10) << (7 + 12 * cnt);
            cnt++;
            bits = cpos + clen;
        }
        tab[w] = e | cnt | (uint64_t)bits << 3;
    }
    return tab;
}

/* Reads the width map (Rice runs and class codes) into cls[] (zeroed);
 * counts the groups per class. Returns non-zero on a malformed map; *state
 * is the reader after the map (for its end and padding). */
static __attribute__((noinline)) int jsq_read_map_(mapr_ *state, size_t ng, int k, uint8_t *cls, size_t gcount[4]) {
    mapr_ mr = *state;
    int err = 0;
    size_t pos = 0;
    uint64_t maxq = (uint64_t)(mr.end - mr.start + 1) * 8;
    const uint64_t kmask = ((uint64_t)1 << k) - 1;
    size_t c23 = 0, c3 = 0, nk = 0;
    /* table path (k = 0, the short codes of large budgets; with longer codes
     * it does not pay): the codes held in the next JSQ_TBITS bits, up to 4
     * at a time (entry: count, bits used, then run (10 bits) and class (2)
     * each); far from the end of the map only, so that no run in a window
     * can reach the last group */
    uint64_t *tab = ng >= 16384 && k == 0 ? jsq_map_table_(k) : NULL;
    while (tab) {
        if (mr.n < 48) mr_refill_(&mr);
        if (ng - pos <= 4 * 1024 + 8 || mr.n < JSQ_TBITS) break;
        uint64_t e = tab[mr.acc & ((1u << JSQ_TBITS) - 1)];
        unsigned cnt = (unsigned)e & 7u;
        if (!cnt) {                                          /* a longer code: one by the per-code path */
            int ones = __builtin_ctzll(~mr.acc);
            if (ones + 3 + k > mr.n) break;
            uint64_t r = ((uint64_t)ones << k) | ((mr.acc >> (ones + 1)) & kmask);
            int used = ones + 1 + k;
            if (r >= ng - pos) break;
            pos += (size_t)r;
            unsigned b = (unsigned)(mr.acc >> used) & 3u;
            used += 1 + (int)(b & 1);
            mr.acc >>= used;
            mr.n -= used;
            cls[pos] = (uint8_t)((b & 1) ? 2 + (b >> 1) : 1);
            c23 += b & 1;
            c3 += b == 3;
            nk++;
            pos++;
            continue;
        }
        unsigned used = (unsigned)(e >> 3) & 15u;
        mr.acc >>= used;
        mr.n -= (int)used;
        e >>= 7;
        /* four slots, the unused ones (run 0, class 0) write a 0 where the
         * next code starts, which that code overwrites or leaves dropped */
        for (int t = 0; t < 4; t++, e >>= 12) {
            unsigned c = (unsigned)(e >> 10) & 3u;
            pos += (size_t)(e & 1023u);
            cls[pos] = (uint8_t)c;
            pos += c != 0;
            nk += c != 0;
            c23 += c >= 2;
            c3 += c == 3;
        }
    }
    free(tab);
    for (;;) {
        /* fast path: the whole code is in the bit buffer */
        if (mr.n < 48) mr_refill_(&mr);
        int ones = __builtin_ctzll(~mr.acc);                 /* <= n: bits above n are zero */
        if (ones + 3 + k <= mr.n) {
            uint64_t r = ((uint64_t)ones << k) | ((mr.acc >> (ones + 1)) & kmask);
            int used = ones + 1 + k;
            if (r >= ng - pos) {
                if (r != ng - pos) { err = 1; break; }
                mr.acc >>= used;
                mr.n -= used;
                break;                                       /* final run */
            }
            pos += (size_t)r;
            unsigned b = (unsigned)(mr.acc >> used) & 3u;
            used += 1 + (int)(b & 1);
            mr.acc >>= used;
            mr.n -= used;
            cls[pos] = (uint8_t)((b & 1) ? 2 + (b >> 1) : 1);
            c23 += b & 1;
            c3 += b == 3;
            nk++;
            pos++;
            continue;
        }
        /* slow path: long runs, the end of the data */
        uint64_t q = 0;
        for (;;) {
            if (mr.n < 57) mr_refill_(&mr);
            if (mr.n == 0) { err = 1; break; }
            ones = __builtin_ctzll(~mr.acc);
            if (ones < mr.n) {
                q += (uint64_t)ones;
                mr.acc >>= ones;
                mr.acc >>= 1;
                mr.n -= ones + 1;
                break;
            }
            q += (uint64_t)mr.n;
            mr.acc = 0;
            mr.n = 0;
            if (q > maxq) { err = 1; break; }
        }
        if (err) break;
        if (mr.n < k + 2) mr_refill_(&mr);
        if (mr.n < k) { err = 1; break; }
        uint64_t r = k ? mr_take_(&mr, k) : 0;
        r |= q << k;
        if (r > ng - pos) { err = 1; break; }
        pos += (size_t)r;
        if (pos == ng) break;                              /* final run */
        if (mr.n < 1) { err = 1; break; }
        int c = 1;
        if (mr_take_(&mr, 1)) {
            if (mr.n < 1) { err = 1; break; }
            c = 2 + (int)mr_take_(&mr, 1);
        }
        cls[pos] = (uint8_t)c;
        c23 += c >= 2;
        c3 += c == 3;
        nk++;
        pos++;
    }
    gcount[3] = c3;
    gcount[2] = c23 - c3;
    gcount[1] = nk - c23;
    *state = mr;
    return err;
}

static pz_status jsq_decode(const pz_codec_params *p, const uint8_t *payload, size_t len,
                            const pz_shape *s, float *out) {
    jsq_geom g;
    pz_status st = jsq_geom_(p, s, &g);
    if (st != PZ_OK) return st;
    if (len == 0) {
        memset(out, 0, g.n * sizeof *out);
        return PZ_OK;
    }
    if (len > g.pmax) return pz_fail(PZ_ERR_FORMAT, "jointsq: payload of %zu bytes over the budget of %zu", len, g.pmax);
    int k = payload[0];
    if (k > JSQ_MAX_K) return pz_fail(PZ_ERR_FORMAT, "jointsq: bad Rice parameter %d", k);
    const size_t G = g.G, ng = g.ng;
    /* the classes: for G = 1 in the last n bytes of out (writing out[i]
     * later only overwrites classes of elements <= i, already read), else
     * in a buffer */
    uint8_t *cls, *clsb = NULL;
    if (G == 1) {
        cls = (uint8_t *)(void *)out + 3 * g.n;
        memset(cls, 0, ng);
    } else {
        cls = clsb = xcalloc(ng + 64, 1);
    }
    int err = 0;
    size_t gcount[4] = {0, 0, 0, 0}, mcount[4] = {0, 0, 0, 0};
    mapr_ mr = {payload + 1, payload + len, payload + 1, 0, 0};
    err = jsq_read_map_(&mr, ng, k, cls, gcount);
    size_t kept = gcount[1] + gcount[2] + gcount[3];
    size_t off_sc = 0;
    if (!err) {
        uint64_t bitpos = (uint64_t)(mr.p - mr.start) * 8 - (uint64_t)mr.n;
        int pad = (int)((8 - bitpos % 8) % 8);
        if (pad > mr.n || (mr.acc & ((1ull << pad) - 1)) != 0) err = 1;   /* padding must be zero */
        off_sc = 1 + (size_t)((bitpos + 7) / 8);
    }
    if (err || kept == 0) {
        free(clsb);
        return pz_fail(PZ_ERR_FORMAT, "jointsq: corrupt width map");
    }
    for (int c = 1; c < 4; c++) mcount[c] = gcount[c] * G;
    if (g.n % G && cls[ng - 1]) mcount[cls[ng - 1]] -= G - g.n % G;
    size_t nsc = 0;
    for (int c = 1; c < 4; c++) nsc += gcount[c] > 0;
    size_t off[4] = {0, 0, 0, 0}, total = off_sc + 4 * nsc;
    for (int c = 1; c < 4; c++) {
        off[c] = total;
        total += (mcount[c] * (size_t)jsq_width[c] + 7) / 8;
    }
    if (total != len) {
        free(clsb);
        return pz_fail(PZ_ERR_FORMAT, "jointsq: payload of %zu bytes, the width map implies %zu", len, total);
    }
    float step[4] = {0, 0, 0, 0};
    size_t so = off_sc;
    for (int c = 1; c < 4; c++) {
        if (!gcount[c]) continue;
        float sv;
        memcpy(&sv, payload + so, 4);
        so += 4;
        if (!(sv > 0.0f) || !isfinite(sv)) {
            free(clsb);
            return pz_fail(PZ_ERR_FORMAT, "jointsq: bad scale for the %d-bit class", jsq_width[c]);
        }
        step[c] = sv / (float)jsq_L[c];
    }
    /* padding bits of each value stream must be zero */
    for (int c = 1; c < 4; c++) {
        size_t bits = mcount[c] * (size_t)jsq_width[c];
        if (bits % 8 && (payload[off[c] + bits / 8] >> (bits % 8)) != 0) err = 1;
    }
    /* values: codes unpacked per class into staging buffers, JSQ_CH at a time */
    uint8_t *stb = xcalloc(4 * (2 * JSQ_CH + 128), 1), *ecb = G > 1 ? xmalloc(JSQ_CH + 64) : NULL;
    uint8_t *stg[4];
    size_t sp[4] = {0, 0, 0, 0}, sa[4] = {0, 0, 0, 0}, rd[4] = {0, 0, 0, 0};
    for (int c = 0; c < 4; c++) stg[c] = stb + (size_t)c * (2 * JSQ_CH + 128);
    static const int Li[4] = {0, 1, 7, 127};
#if defined(JSQ_VEC)
    const __m512i Lt = _mm512_setr_epi32(0, 1, 7, 127, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512 St = _mm512_setr_ps(step[0], step[1], step[2], step[3], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
#endif
    for (size_t i0 = 0; i0 < g.n && !err; i0 += JSQ_CH) {
        size_t cnt = g.n - i0 < JSQ_CH ? g.n - i0 : JSQ_CH;
        const uint8_t *ec = cls + i0;
        if (G > 1) {
            jsq_expand_cls_(cls, G, i0, cnt, ecb);
            ec = ecb;
        }
        /* enough codes staged for this chunk: at most cnt per class */
        for (int c = 1; c < 4 && !err; c++) {
            size_t have = sa[c] - sp[c];
            if (have >= cnt || rd[c] == mcount[c]) continue;
            memmove(stg[c], stg[c] + sp[c], have);
            sp[c] = 0;
            size_t want = (2 * JSQ_CH - have) & ~(size_t)7;
            if (want > mcount[c] - rd[c]) want = mcount[c] - rd[c];
            err |= jsq_unpack_(payload + off[c], rd[c], want, jsq_width[c], stg[c] + have);
            rd[c] += want;
            sa[c] = have + want;
        }
        size_t j = 0;
#if defined(JSQ_VEC)
        for (; j + 64 <= cnt; j += 64) {
            __m512i cv = _mm512_loadu_si512((const void *)(ec + j));
            __m512i codes = _mm512_setzero_si512();
            for (int c = 1; c < 4; c++) {
                __mmask64 m = _mm512_cmpeq_epi8_mask(cv, _mm512_set1_epi8((char)c));
                codes = _mm512_mask_expand_epi8(codes, m, _mm512_loadu_si512((const void *)(stg[c] + sp[c])));
                sp[c] += (size_t)__builtin_popcountll(m);
            }
            uint8_t cb[64];
            _mm512_storeu_si512((void *)cb, codes);
            for (int q = 0; q < 4; q++) {
                __m512i c32 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(ec + j + 16 * q)));
                __m512i v32 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(cb + 16 * q)));
                __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(v32, _mm512_permutexvar_epi32(c32, Lt)));
                _mm512_storeu_ps(out + i0 + j + 16 * q, _mm512_mul_ps(v, _mm512_permutexvar_ps(c32, St)));
            }
        }
#endif
        for (; j < cnt; j++) {
            int c = ec[j];
            uint8_t v = stg[c][sp[c]];
            sp[c] += c != 0;
            out[i0 + j] = (float)((int)v - Li[c]) * step[c];
        }
        for (int c = 1; c < 4; c++) err |= sp[c] > sa[c];
    }
    for (int c = 1; c < 4 && !err; c++) err |= rd[c] != mcount[c] || sp[c] != sa[c];
    free(stb);
    free(ecb);
    free(clsb);
    if (err) return pz_fail(PZ_ERR_FORMAT, "jointsq: corrupt value codes");
    return PZ_OK;
}

const pz_codec_impl pz_codec_jointsq = {
    .name = "jointsq",
    .id = PZ_CODEC_JOINTSQ,
    .parse = jsq_parse,
    .format = jsq_format,
    .validate = jsq_validate,
    .max_payload = jsq_max_payload,
    .encode = jsq_encode,
    .decode = jsq_decode,
};
