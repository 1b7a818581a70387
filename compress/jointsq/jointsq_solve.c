/* jointsq_solve.c: JointSQ's model error of each group per width and the
 * knapsack's items filled from it (the algorithm: compress/jointsq/jointsq.c;
 * the item arrays and the passes' driver: jointsq_assign.c; the pass over
 * all groups: jointsq_pass.c). */
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
void pz_jsq_errs(const float *x, size_t nel, size_t G, const float *gm, const jsq_model *md, float *e0, float *e1,
                 float *e2, float *e3) {
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

/* Items [0, ni) of s from the elements x[0..nel) (groups of G). */
void pz_jsq_soa_fill(const float *x, size_t nel, size_t G, const float *gm, const jsq_model *md, int k,
                          pz_mckp_soa *s, uint32_t *ucost) {
    size_t ni = nel / G + (nel % G != 0);
    pz_jsq_errs(x, nel, G, gm, md, s->err[0], s->err[1], s->err[2], s->err[3]);
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
