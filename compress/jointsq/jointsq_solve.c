/* jointsq_solve.c: JointSQ's model error of each group per width, the
 * knapsack's items filled from it, and the assignment pass that picks every
 * group's width between two multipliers (the algorithm:
 * compress/jointsq/jointsq.c; the item arrays and the passes' driver:
 * jointsq_assign.c). */
#include "compress/jointsq/jointsq_priv.h"

/* ---- item errors ---- */


#if defined(__AVX512F__)
/* The sum of 16 lanes folded in halves (lane l += lane l + 8, + 4, + 2, + 1),
 * spelled out: the scalar path of jsq_errs adds in this order, and
 * _mm512_reduce_add_ps leaves the order to the compiler. */
static inline float jsq_fold16(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}
#endif

/* jsq_errs for G = 1: each element's errors, from |x|. */
static void jsq_errs_elem(const float *x, size_t nel, const jsq_model *md, float *e0, float *e1, float *e2,
                          float *e3) {
    const float invM = md->invM, i1 = md->invD[1], i2 = md->invD[2], i3 = md->invD[3];
    const float d1 = md->D2[1], d2 = md->D2[2], d3 = md->D2[3];
    const float s1 = md->s[1], s2 = md->s[2], s3 = md->s[3];
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
#elif defined(__AVX2__)
    const __m256 vM = _mm256_set1_ps(invM), ymax = _mm256_set1_ps(JSQ_YMAX), inf = _mm256_set1_ps(INFINITY);
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    const float iv[4] = {0, i1, i2, i3}, dv[4] = {0, d1, d2, d3}, sv[4] = {0, s1, s2, s3};
    float *eo[4] = {e0, e1, e2, e3};
    for (; i + 8 <= nel; i += 8) {
        __m256 xa = _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(x + i)), absm));
        __m256 xh = _mm256_mul_ps(xa, vM);
        _mm256_storeu_ps(e0 + i, _mm256_mul_ps(xh, xh));
        for (int c = 1; c < 4; c++) {
            __m256 y = _mm256_min_ps(_mm256_mul_ps(xh, _mm256_set1_ps(iv[c])), ymax);
            __m256 f = _mm256_sub_ps(y, _mm256_round_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
            __m256 r = _mm256_mul_ps(_mm256_set1_ps(dv[c]), _mm256_sub_ps(f, _mm256_mul_ps(f, f)));
            _mm256_storeu_ps(eo[c] + i, _mm256_blendv_ps(inf, r, _mm256_cmp_ps(xa, _mm256_set1_ps(sv[c]), _CMP_LE_OQ)));
        }
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
}

/* Model errors of the items (groups of G, the last one shorter) covering
 * x[0..nel): e0 = sum x^2, e_c = sum step_c^2 f (1 - f) (the variance of
 * stochastic rounding) or INFINITY where the group's max gm > s_c.
 * Every level sums a group in one order, so that the picks and hence the
 * messages are the same bits everywhere (issue 26): element b + i into lane
 * i % 16, then the lanes folded in halves (jsq_fold16). The AVX-512 paths
 * for G = 2, 4, 8 fold the same way within their G lanes.
 * gm: group maxima (NULL when G == 1: |x|). */
static void jsq_errs(const float *x, size_t nel, size_t G, const float *gm, const jsq_model *md,
                     float *e0, float *e1, float *e2, float *e3) {
    const float invM = md->invM, i1 = md->invD[1], i2 = md->invD[2], i3 = md->invD[3];
    const float d1 = md->D2[1], d2 = md->D2[2], d3 = md->D2[3];
    const float s1 = md->s[1], s2 = md->s[2], s3 = md->s[3];
    if (G == 1) {
        jsq_errs_elem(x, nel, md, e0, e1, e2, e3);
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
            e0[j] = jsq_fold16(s0);
            e1[j] = g <= s1 ? d1 * jsq_fold16(sa) : INFINITY;
            e2[j] = g <= s2 ? d2 * jsq_fold16(sb) : INFINITY;
            e3[j] = g <= s3 ? d3 * jsq_fold16(sc) : INFINITY;
        }
    }
#undef JSQ_TERMS
#endif
    for (; j < ni; j++) {
        size_t b = j * G, e = b + G < nel ? b + G : nel;
        float a[4][16];
        memset(a, 0, sizeof a);
        for (size_t i = b; i < e; i++) {        /* element i into lane (i - b) % 16 */
            float xh = fabsf(x[i]) * invM;
            float y1 = xh * i1, y2 = xh * i2, y3 = xh * i3;
            y1 = y1 < JSQ_YMAX ? y1 : JSQ_YMAX;
            y2 = y2 < JSQ_YMAX ? y2 : JSQ_YMAX;
            y3 = y3 < JSQ_YMAX ? y3 : JSQ_YMAX;
            float f1 = y1 - (float)(int32_t)y1, f2 = y2 - (float)(int32_t)y2, f3 = y3 - (float)(int32_t)y3;
            size_t l = (i - b) & 15;
            a[0][l] += xh * xh;
            a[1][l] += f1 - f1 * f1;
            a[2][l] += f2 - f2 * f2;
            a[3][l] += f3 - f3 * f3;
        }
        /* fold the lanes in halves; lanes past the group hold +0 and the
         * terms are >= 0, so folding only w = 2^ceil(log2(min(len, 16)))
         * lanes gives the bits of the full 16-lane fold */
        size_t w = 1;
        while (w < e - b && w < 16) w <<= 1;
        for (size_t h = w / 2; h; h /= 2)
            for (int c = 0; c < 4; c++)
                for (size_t l = 0; l < h; l++) a[c][l] += a[c][l + h];
        float g = gm[j];
        e0[j] = a[0][0];
        e1[j] = g <= s1 ? d1 * a[1][0] : INFINITY;
        e2[j] = g <= s2 ? d2 * a[2][0] : INFINITY;
        e3[j] = g <= s3 ? d3 * a[3][0] : INFINITY;
    }
}

/* Item costs in units of 2^-k bits (see the header comment). */
static inline void jsq_costs(int k, uint32_t sz, uint32_t c[4]) {
    c[0] = 1;
    c[1] = (1 + (uint32_t)k + 1 + 2 * sz) << k;
    c[2] = (1 + (uint32_t)k + 2 + 4 * sz) << k;
    c[3] = (1 + (uint32_t)k + 2 + 8 * sz) << k;
}

/* Items [0, ni) of s from the elements x[0..nel) (groups of G). */
void pz_jsq_soa_fill(const float *x, size_t nel, size_t G, const float *gm, const jsq_model *md, int k,
                          pz_mckp_soa *s, uint32_t *ucost) {
    size_t ni = nel / G + (nel % G != 0);
    jsq_errs(x, nel, G, gm, md, s->err[0], s->err[1], s->err[2], s->err[3]);
    uint32_t cf[4];
    jsq_costs(k, (uint32_t)G, cf);
    if (ucost && nel % G == 0) {                  /* every item a full group */
        memcpy(ucost, cf, sizeof cf);
        s->ucost = ucost;
        return;
    }
    s->ucost = NULL;
    for (int o = 0; o < 4; o++)
        for (size_t j = 0; j < ni; j++) s->cost[o][j] = cf[o];
    if (nel % G) {
        jsq_costs(k, (uint32_t)(nel % G), cf);
        for (int o = 0; o < 4; o++) s->cost[o][ni - 1] = cf[o];
    }
}


/* ---- the assignment pass over all groups ----
 * For two multipliers lam_lo < lam_hi, every group's pick at both (the rule
 * of pz_mckp_pick); cls[] receives the pick at lam_hi; the groups whose picks
 * differ are the candidates (their items go to cand/cid, at most ccap). */

#if defined(__AVX512F__) || defined(__AVX2__)
/* The vector passes' last elements [i, n) (fewer than a vector), with the
 * scalar forms: picks, counts, candidates and maxima. */
static void jsq_pass_b1_tail(const float *x, size_t i, size_t n, const jsq_model *md, const uint32_t cf[4],
                             float lam_lo, float lam_hi, uint8_t *cls, pz_mckp_soa *cand, jsq_cside *cs_,
                             size_t ccap, uint64_t nh[4], int64_t *dsum, size_t *ncp, jsq_passb *r) {
    float E[4][16];
    size_t t = n - i, nc = *ncp;
    if (!t) return;
    jsq_errs(x + i, t, 1, NULL, md, E[0], E[1], E[2], E[3]);
    for (size_t j = 0; j < t; j++) {
        float fc[4] = {(float)cf[0], (float)cf[1], (float)cf[2], (float)cf[3]};
        int a = pz_mckp_pick(E[0][j], E[1][j], E[2][j], E[3][j], fc[0], fc[1], fc[2], fc[3], lam_hi);
        int bb = pz_mckp_pick(E[0][j], E[1][j], E[2][j], E[3][j], fc[0], fc[1], fc[2], fc[3], lam_lo);
        cls[i + j] = (uint8_t)a;
        nh[a]++;
        if (a != bb) {
            *dsum += (int64_t)cf[bb] - (int64_t)cf[a];
            if (nc < ccap) {
                cs_->id[nc] = (uint32_t)(i + j);
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
    *ncp = nc;
}

/* The vector passes' end: the last elements [i, n) (jsq_pass_b1_tail), then
 * the counts, costs and candidates of the pass into r (nh[1..3], dsum, nc:
 * the vector part's; r->nmax[1..3] set). */
static void jsq_pass_b1_finish(const float *x, size_t i, size_t n, const jsq_model *md, const uint32_t cf[4],
                               float lam_lo, float lam_hi, uint8_t *cls, pz_mckp_soa *cand, jsq_cside *cs_,
                               size_t ccap, uint64_t nh[4], int64_t dsum, size_t nc, jsq_passb *r) {
    r->nmax[0] = 0;
    jsq_pass_b1_tail(x, i, n, md, cf, lam_lo, lam_hi, cls, cand, cs_, ccap, nh, &dsum, &nc, r);
    nh[0] = n - nh[1] - nh[2] - nh[3];
    r->cost_hi = 0;
    for (int o = 0; o < 4; o++) {
        r->nh[o] = nh[o];
        r->cost_hi += nh[o] * cf[o];
    }
    r->cost_lo = (uint64_t)((int64_t)r->cost_hi + dsum);
    r->ncand = nc;
    memcpy(r->ucost, cf, sizeof r->ucost);
    cand->ucost = r->ucost; /* every candidate a full group */
}
#endif

#if defined(__AVX512F__)
/* The G = 1 model on 16 lanes: errors of |x| (key = its bits) and the pick
 * for per-class offsets h[c] = lam * cost[c]. */
typedef struct {
    __m512 vM, i1, i2, i3, d1, d2, d3, s1, s2, s3;
} jsq_vmodel;

static inline jsq_vmodel jsq_vmodel_of(const jsq_model *md) {
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

/* frac(y) = y - trunc(y) for y >= 0, exactly (one instruction with AVX-512DQ) */
static inline __m512 jsq_vfrac(__m512 y) {
#if defined(__AVX512DQ__)
    return _mm512_reduce_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
#else
    return _mm512_sub_ps(y, _mm512_roundscale_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
#endif
}

/* The errors of |x| (key = its bits) per width before the no-clipping rule:
 * e[c] for c = 1..3 is finite everywhere, ok[c] says where it is allowed
 * (elsewhere the error is INFINITY). */
static inline void jsq_verrs_raw(const jsq_vmodel *K, __m512i key, __m512 e[4], __mmask16 ok[4]) {
    __m512 xa = _mm512_castsi512_ps(key), xh = _mm512_mul_ps(xa, K->vM);
    /* no clamp of y here: lanes where it would matter are not allowed */
    __m512 f1 = jsq_vfrac(_mm512_mul_ps(xh, K->i1)), f2 = jsq_vfrac(_mm512_mul_ps(xh, K->i2)),
           f3 = jsq_vfrac(_mm512_mul_ps(xh, K->i3));
    e[0] = _mm512_mul_ps(xh, xh);
    e[1] = _mm512_mul_ps(K->d1, _mm512_sub_ps(f1, _mm512_mul_ps(f1, f1)));
    e[2] = _mm512_mul_ps(K->d2, _mm512_sub_ps(f2, _mm512_mul_ps(f2, f2)));
    e[3] = _mm512_mul_ps(K->d3, _mm512_sub_ps(f3, _mm512_mul_ps(f3, f3)));
    ok[0] = 0xffff;
    ok[1] = _mm512_cmp_ps_mask(xa, K->s1, _CMP_LE_OQ);
    ok[2] = _mm512_cmp_ps_mask(xa, K->s2, _CMP_LE_OQ);
    ok[3] = _mm512_cmp_ps_mask(xa, K->s3, _CMP_LE_OQ);
}

static inline void jsq_verrs(const jsq_vmodel *K, __m512i key, __m512 e[4]) {
    const __m512 inf = _mm512_set1_ps(INFINITY);
    __mmask16 ok[4];
    jsq_verrs_raw(K, key, e, ok);
    for (int c = 1; c < 4; c++) e[c] = _mm512_mask_blend_ps(ok[c], inf, e[c]);
}

/* The pick for per-class offsets h[c] = lam * cost[c] (pz_mckp_vpick on the
 * raw errors: a width not allowed never wins). */
static inline __m512i jsq_vpick(const __m512 e[4], const __mmask16 ok[4], const __m512 h[4]) {
    __m512 v[4];
    __mmask16 m[3];
    for (int c = 0; c < 4; c++) v[c] = _mm512_add_ps(e[c], h[c]);
    return pz_mckp_vpick(v, ok, m);
}

/* The same pass for G = 1 in one sweep: errors, both picks and the
 * candidates 16 elements at a time, in registers. */
static void jsq_pass_b1(const float *x, size_t n, const jsq_model *md, const uint32_t cf[4], float lam_lo,
                        float lam_hi, uint8_t *cls, pz_mckp_soa *cand, jsq_cside *cs_, size_t ccap, jsq_passb *r) {
    uint32_t *cid = cs_->id;
    const jsq_vmodel K = jsq_vmodel_of(md);
    __m512 hh[4], hl[4];
    for (int c = 0; c < 4; c++) {
        hh[c] = _mm512_set1_ps(lam_hi * (float)cf[c]);
        hl[c] = _mm512_set1_ps(lam_lo * (float)cf[c]);
    }
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1), step = _mm512_set1_epi32(16);
    const __m512i two = _mm512_add_epi32(one, one);
    __m512i iv = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i mx1 = _mm512_setzero_si512(), mx2 = mx1, mx3 = mx1;
    __m512i nhv = _mm512_setzero_si512(), nlv = nhv;   /* packed counts of the picks at lam_hi, lam_lo */
    uint64_t nh[4] = {0, 0, 0, 0}, nl[4] = {0, 0, 0, 0};
    size_t nc = 0, i = 0, it = 0;
    for (; i + 16 <= n; i += 16, iv = _mm512_add_epi32(iv, step)) {
        __m512i key = _mm512_and_si512(_mm512_loadu_si512((const void *)(x + i)), absm);
        __m512 e[4];
        __mmask16 ok[4];
        jsq_verrs_raw(&K, key, e, ok);
        __m512i a = jsq_vpick(e, ok, hh), bq = jsq_vpick(e, ok, hl);
        _mm_storeu_si128((__m128i *)(void *)(cls + i), _mm512_cvtepi32_epi8(a));
        nhv = pz_mckp_vcount(nhv, a);             /* picks per class at both ends */
        nlv = pz_mckp_vcount(nlv, bq);
        if (++it == 1023) {
            pz_mckp_vcount_flush(&nhv, nh);
            pz_mckp_vcount_flush(&nlv, nl);
            it = 0;
        }
        __mmask16 dif = _mm512_cmpneq_epi32_mask(a, bq), keep = (__mmask16)~dif;
        mx1 = _mm512_mask_max_epu32(mx1, _mm512_mask_cmpeq_epi32_mask(keep, a, one), mx1, key);
        mx2 = _mm512_mask_max_epu32(mx2, _mm512_mask_cmpeq_epi32_mask(keep, a, two), mx2, key);
        mx3 = _mm512_mask_max_epu32(mx3, _mm512_mask_cmpgt_epi32_mask(keep, a, two), mx3, key);
        /* no branch on dif (set in about half the vectors: a branch would
         * mispredict); the candidates' ids, picks and keys are stored here,
         * their errors after the loop; the stores past the candidates are
         * overwritten or, at ccap, land in the 16 slots of slack */
        size_t at = nc < ccap ? nc : ccap;
        _mm512_storeu_si512((void *)(cid + at), _mm512_maskz_compress_epi32(dif, iv));
        _mm512_storeu_si512((void *)(cs_->hi + at), _mm512_maskz_compress_epi32(dif, a));
        _mm512_storeu_si512((void *)(cs_->key + at), _mm512_maskz_compress_epi32(dif, key));
        nc += (size_t)__builtin_popcount(dif);
    }
    pz_mckp_vcount_flush(&nhv, nh);
    pz_mckp_vcount_flush(&nlv, nl);
    /* cost(lo) - cost(hi) over the vectors: class 0 takes the rest */
    int64_t dsum = 0;
    for (int c = 1; c < 4; c++) dsum += ((int64_t)nl[c] - (int64_t)nh[c]) * ((int64_t)cf[c] - (int64_t)cf[0]);
    {   /* the candidates' errors: the same vector arithmetic as above, so
         * the same bits */
        size_t nv = nc < ccap ? nc : ccap;
        for (size_t j = 0; j < nv; j += 16) {
            __mmask16 live = nv - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nv - j)) - 1);
            __m512i key = _mm512_maskz_loadu_epi32(live, cs_->key + j);
            __m512 e[4];
            jsq_verrs(&K, key, e);
            for (int o = 0; o < 4; o++) _mm512_mask_storeu_ps(cand->err[o] + j, live, e[o]);
        }
    }
    r->nmax[1] = _mm512_reduce_max_epu32(mx1);
    r->nmax[2] = _mm512_reduce_max_epu32(mx2);
    r->nmax[3] = _mm512_reduce_max_epu32(mx3);
    jsq_pass_b1_finish(x, i, n, md, cf, lam_lo, lam_hi, cls, cand, cs_, ccap, nh, dsum, nc, r);
}
#elif defined(__AVX2__)
/* x86-64-v3: the same pass 8 elements at a time, the same arithmetic (a
 * truncation and a subtraction for frac, compare vectors for the masks, the
 * table compress of compress/core/vec8.h for the candidates' stores). */
typedef struct {
    __m256 vM, i[4], d[4], s[4];
} jsq_vmodel8;

static inline jsq_vmodel8 jsq_vmodel8_of(const jsq_model *md) {
    jsq_vmodel8 K;
    K.vM = _mm256_set1_ps(md->invM);
    for (int c = 1; c < 4; c++) {
        K.i[c] = _mm256_set1_ps(md->invD[c]);
        K.d[c] = _mm256_set1_ps(md->D2[c]);
        K.s[c] = _mm256_set1_ps(md->s[c]);
    }
    return K;
}

/* errors of |x| (key), INFINITY where the width is not allowed, as
 * jsq_verrs (blended once here: the picks then need no masks, and 16
 * registers hold less than AVX-512's 32) */
static inline void jsq_verrs8(const jsq_vmodel8 *K, __m256i key, __m256 e[4]) {
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 xa = _mm256_castsi256_ps(key), xh = _mm256_mul_ps(xa, K->vM);
    e[0] = _mm256_mul_ps(xh, xh);
    for (int c = 1; c < 4; c++) {
        __m256 y = _mm256_mul_ps(xh, K->i[c]);
        __m256 f = _mm256_sub_ps(y, _mm256_round_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
        __m256 ec = _mm256_mul_ps(K->d[c], _mm256_sub_ps(f, _mm256_mul_ps(f, f)));
        e[c] = _mm256_blendv_ps(inf, ec, _mm256_cmp_ps(xa, K->s[c], _CMP_LE_OQ));
    }
}

static inline __m256i jsq_vpick8(const __m256 e[4], const __m256 h[4]) {
    __m256 v[4], m[3];
    for (int c = 0; c < 4; c++) v[c] = _mm256_add_ps(e[c], h[c]);
    return pz_mckp_vpick8(v, NULL, m);
}

/* Lanes a block of the pass below takes at a time. */
enum { JSQ_B8 = 256 };

/* Of 8 lanes (key = |x| bits), the mask of those that may keep a width at
 * lam_lo or lam_hi: a lane whose dropped cost e0 + h[0] is at most h[1]
 * takes width 0 at that multiplier, because every kept width costs at least
 * h[c] >= h[1] (errors are >= 0, fp addition and h are monotone) and a tie
 * goes to the lower width. The test uses jsq_verrs8's e0 and jsq_vpick8's
 * sum, so it is exact, not an estimate. */
static inline unsigned jsq_maybe_kept8(const jsq_vmodel8 *K, __m256i key, const __m256 hh[4], const __m256 hl[4]) {
    __m256 xh = _mm256_mul_ps(_mm256_castsi256_ps(key), K->vM), e0 = _mm256_mul_ps(xh, xh);
    __m256 z = _mm256_and_ps(_mm256_cmp_ps(_mm256_add_ps(e0, hl[0]), hl[1], _CMP_LE_OQ),
                             _mm256_cmp_ps(_mm256_add_ps(e0, hh[0]), hh[1], _CMP_LE_OQ));
    return ~(unsigned)_mm256_movemask_ps(z) & 0xffu;
}

/* The pass for G = 1, in blocks of JSQ_B8 lanes: the lanes that surely take
 * width 0 at both multipliers (jsq_maybe_kept8: about a third of them at
 * jointsq:4, two thirds at jointsq:2) are set aside first, and the errors,
 * both picks and the candidates are computed for the others only, packed 8
 * to a vector (a lane of |x| = 0 pads the last: it picks width 0 at both
 * ends, so it adds no count, maximum or candidate); their picks are then
 * spread back into cls. */
static void jsq_pass_b1(const float *x, size_t n, const jsq_model *md, const uint32_t cf[4], float lam_lo,
                        float lam_hi, uint8_t *cls, pz_mckp_soa *cand, jsq_cside *cs_, size_t ccap, jsq_passb *r) {
    uint32_t *cid = cs_->id;
    const jsq_vmodel8 K = jsq_vmodel8_of(md);
    __m256 hh[4], hl[4];
    for (int c = 0; c < 4; c++) {
        hh[c] = _mm256_set1_ps(lam_hi * (float)cf[c]);
        hl[c] = _mm256_set1_ps(lam_lo * (float)cf[c]);
    }
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), one = _mm256_set1_epi32(1), two = _mm256_set1_epi32(2),
                  three = _mm256_set1_epi32(3), iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i mx1 = _mm256_setzero_si256(), mx2 = mx1, mx3 = mx1, nhv = mx1, nlv = mx1;
    uint64_t nh[4] = {0, 0, 0, 0}, nl[4] = {0, 0, 0, 0};
    uint32_t kkey[JSQ_B8 + 8], kid[JSQ_B8 + 8];
    uint8_t kmask[JSQ_B8 / 8], kcls[JSQ_B8 + 16];
    size_t nc = 0, i = 0, it = 0;
    while (n - i >= 8) {
        size_t nb = n - i < JSQ_B8 ? (n - i) & ~(size_t)7 : JSQ_B8, nk = 0;
        for (size_t b = 0; b < nb; b += 8) {               /* set aside the surely dropped */
            __m256i key = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(x + i + b)), absm);
            unsigned m = jsq_maybe_kept8(&K, key, hh, hl);
            kmask[b / 8] = (uint8_t)m;
            __m256i iv = _mm256_add_epi32(_mm256_set1_epi32((int)(i + b)), iota);
            _mm256_storeu_si256((__m256i *)(void *)(kkey + nk), pz_v8_compress(m, key));
            _mm256_storeu_si256((__m256i *)(void *)(kid + nk), pz_v8_compress(m, iv));
            nk += (size_t)__builtin_popcount(m);
        }
        _mm256_storeu_si256((__m256i *)(void *)(kkey + nk), _mm256_setzero_si256());
        for (size_t k = 0; k < nk; k += 8) {
            __m256i key = _mm256_loadu_si256((const __m256i *)(const void *)(kkey + k));
            __m256i iv = _mm256_loadu_si256((const __m256i *)(const void *)(kid + k));
            __m256 e[4];
            jsq_verrs8(&K, key, e);
            __m256i a = jsq_vpick8(e, hh), bq = jsq_vpick8(e, hl);
            pz_v8_store_bytes(kcls + k, a);
            nhv = pz_mckp_vcount8(nhv, a);
            nlv = pz_mckp_vcount8(nlv, bq);
            if (++it == 1023) {
                pz_mckp_vcount8_flush(&nhv, nh);
                pz_mckp_vcount8_flush(&nlv, nl);
                it = 0;
            }
            __m256i same = _mm256_cmpeq_epi32(a, bq);
            __m256i kk = _mm256_and_si256(key, same);  /* keys of the kept lanes (0 does not raise a max) */
            mx1 = _mm256_max_epu32(mx1, _mm256_and_si256(kk, _mm256_cmpeq_epi32(a, one)));
            mx2 = _mm256_max_epu32(mx2, _mm256_and_si256(kk, _mm256_cmpeq_epi32(a, two)));
            mx3 = _mm256_max_epu32(mx3, _mm256_and_si256(kk, _mm256_cmpeq_epi32(a, three)));
            /* no branch on the candidates (see the AVX-512 pass) */
            unsigned dif = ~pz_v8_mask(same) & 0xffu;
            size_t at = nc < ccap ? nc : ccap;
            _mm256_storeu_si256((__m256i *)(void *)(cid + at), pz_v8_compress(dif, iv));
            _mm256_storeu_si256((__m256i *)(void *)(cs_->hi + at), pz_v8_compress(dif, a));
            _mm256_storeu_si256((__m256i *)(void *)(cs_->key + at), pz_v8_compress(dif, key));
            nc += (size_t)__builtin_popcount(dif);
        }
        for (size_t b = 0, k = 0; b < nb; b += 8) {         /* the picks back in place, 0 where set aside */
            __m128i p8 = _mm_loadl_epi64((const __m128i *)(const void *)(kcls + k));
            _mm_storel_epi64((__m128i *)(void *)(cls + i + b), pz_v8_expand_b(kmask[b / 8], p8));
            k += (size_t)__builtin_popcount(kmask[b / 8]);
        }
        i += nb;
    }
    pz_mckp_vcount8_flush(&nhv, nh);
    pz_mckp_vcount8_flush(&nlv, nl);
    int64_t dsum = 0;
    for (int c = 1; c < 4; c++) dsum += ((int64_t)nl[c] - (int64_t)nh[c]) * ((int64_t)cf[c] - (int64_t)cf[0]);
    {   /* the candidates' errors, by the same arithmetic */
        size_t nv = nc < ccap ? nc : ccap;
        for (size_t j = 0; j < nv; j += 8) {
            size_t l = nv - j < 8 ? nv - j : 8;
            __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)l), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            __m256i key = _mm256_maskload_epi32((const int *)(const void *)(cs_->key + j), live);
            __m256 e[4];
            jsq_verrs8(&K, key, e);
            for (int o = 0; o < 4; o++) _mm256_maskstore_ps(cand->err[o] + j, live, e[o]);
        }
    }
    r->nmax[1] = pz_v8_hmax_epu32(mx1);
    r->nmax[2] = pz_v8_hmax_epu32(mx2);
    r->nmax[3] = pz_v8_hmax_epu32(mx3);
    jsq_pass_b1_finish(x, i, n, md, cf, lam_lo, lam_hi, cls, cand, cs_, ccap, nh, dsum, nc, r);
}
#endif

void pz_jsq_pass_b(const float *x, const jsq_geom *g, const float *gm, const jsq_model *md, int k,
                        float lam_lo, float lam_hi, uint8_t *cls, pz_mckp_soa *cand, jsq_cside *cs_,
                        size_t ccap, jsq_passb *r) {
    float *E = xmalloc(4 * JSQ_BLOCK * sizeof *E);
    float *E0 = E, *E1 = E + JSQ_BLOCK, *E2 = E + 2 * JSQ_BLOCK, *E3 = E + 3 * JSQ_BLOCK;
    uint8_t dif[JSQ_BLOCK + 64], lo_[JSQ_BLOCK + 64];
    float *Ev[4] = {E0, E1, E2, E3};
    uint32_t cf[4], cs[4];
    jsq_costs(k, (uint32_t)g->G, cf);
    size_t last_short = g->n % g->G ? g->ng - 1 : SIZE_MAX;
    if (last_short != SIZE_MAX) jsq_costs(k, (uint32_t)(g->n % g->G), cs);
#if defined(__AVX512F__) || defined(__AVX2__)
    if (g->G == 1) {
        free(E);
        jsq_pass_b1(x, g->n, md, cf, lam_lo, lam_hi, cls, cand, cs_, ccap, r);
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
        jsq_errs(x + eb, ee - eb, g->G, gm ? gm + j0 : NULL, md, E0, E1, E2, E3);
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
            uint64_t m = nz64(dif + i0);
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

