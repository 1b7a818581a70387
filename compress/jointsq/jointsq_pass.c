/* jointsq_pass.c: JointSQ's assignment pass over all groups: every group's
 * pick at two multipliers and the candidates between them, with a vector
 * form per instruction-set level (the algorithm: compress/jointsq/jointsq.c;
 * the item errors it repeats bit for bit: jointsq_solve.c; the passes'
 * driver: jointsq_assign.c). */
#include "compress/jointsq/jointsq_priv.h"

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
    pz_jsq_errs(x + i, t, 1, NULL, md, E[0], E[1], E[2], E[3]);
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

/* Lanes a block of the pass below takes at a time: each block costs its
 * calls' set-up (the constants and totals reloaded, the loops' exits
 * mispredicted), about 7% of the pass's instructions at 256 lanes; at
 * 1024 a block's lists still sit in L1 beside its 4 KB of x. */
enum { JSQ_B8 = 1024 };

/* 8 offsets at p (16 bits: a block has more than 256 lanes): the lanes that
 * m selects (the compress table's row), plus base. */
static inline void jsq_store_off8(uint16_t *p, unsigned m, __m128i base) {
    __m128i o = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)pz_v8_ctab[m]));
    _mm_storeu_si128((__m128i *)(void *)p, _mm_add_epi16(o, base));
}

/* A lower bound, as a float, of g(f) = f - f*f as the pass computes it (two
 * roundings, unit u = 2^-24) for every float f in [flo, fhi] within
 * [0, 1): the exact f - f^2 is concave, so least at an end of the range, and
 * the roundings take at most f^2 u (1 + u) + g u from it (in double, with a
 * margin for double's own roundings). 0 where f*f may leave the normal
 * range, or the bound is not positive: g >= 0 always (f*f rounds to at
 * most f). */
static float jsq_g_low(float flo, float fhi) {
    if (!(flo >= 0x1p-60f)) return 0.0f;
    const double u = 0x1p-24, m = 0x1p-40;
    double a = (double)flo - (double)flo * flo, b = (double)fhi - (double)fhi * fhi;
    double g = (a < b ? a : b) * (1 - u) * (1 - m) - (double)fhi * fhi * u * (1 + u) * (1 + m);
    if (!(g > 0)) return 0.0f;
    float gf = (float)g;
    return (double)gf > g ? nextafterf(gf, 0.0f) : gf;
}

/* Whether every key in [klo, khi] (|x| bits) takes width 0 at both
 * multipliers (offsets hm[0], hm[1]): at each, the largest e0 + h0 there (at
 * khi: every step is a monotone fp operation) is at most a lower bound of
 * each e_c + h_c (pz_mckp_pick keeps width 0 unless some v_c < v0; a width
 * not allowed has e_c = INFINITY). The bound of e_c = D2_c g(f), f =
 * frac(y), y = x M^-1 / D_c: jsq_g_low over the f of the range where y keeps
 * its integer part, else 0. */
static int jsq_zero_ok8(const jsq_model *md, const float hm[2][4], uint32_t klo, uint32_t khi) {
    float xl = pz_u2f(klo) * md->invM, xu = pz_u2f(khi) * md->invM;
    for (int t = 0; t < 2; t++) {
        float e0 = xu * xu, v0 = e0 + hm[t][0];
        for (int c = 1; c < 4; c++) {
            float yl = xl * md->invD[c], yu = xu * md->invD[c];
            yl = yl < JSQ_YMAX ? yl : JSQ_YMAX;
            yu = yu < JSQ_YMAX ? yu : JSQ_YMAX;
            float g = 0.0f;
            if ((int32_t)yl == (int32_t)yu) g = jsq_g_low(yl - (float)(int32_t)yl, yu - (float)(int32_t)yu);
            float ec = md->D2[c] * g, vc = ec + hm[t][c];
            if (vc < v0) return 0;
        }
    }
    return 1;
}

/* The largest key at or below which every lane takes width 0 at both
 * multipliers (-1 when key 0 may not), so that one integer compare a lane
 * sets them aside in the pass: first from key 0, where the bound of e_c is 0
 * (e0 + h0 <= h_1 <= h_c), then from past the limit so far, again and again
 * (each range of keys a fresh range of f for jsq_g_low: on bench_codecs'
 * tensor 9 steps reach the first key where a width wins, past a third of
 * the lanes jointsq:4 would otherwise give the picks; 2 steps got 80% of
 * them). On [k0, k] the test only weakens as k grows, so a bisection finds
 * each step's limit. */
enum { JSQ_ZSTEPS = 16 };
static int32_t jsq_zero_limit8(const jsq_model *md, const uint32_t cf[4], float lam_lo, float lam_hi) {
    float hm[2][4];
    for (int c = 0; c < 4; c++) {
        hm[0][c] = lam_lo * (float)cf[c];
        hm[1][c] = lam_hi * (float)cf[c];
    }
    int32_t lim = -1;
    for (int step = 0; step < JSQ_ZSTEPS; step++) {
        uint32_t k0 = (uint32_t)(lim + 1), lo = k0, hi = 0x7f800000u;   /* proved up to lo; hi: infinity, never */
        if (!jsq_zero_ok8(md, hm, k0, k0)) return lim;
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (jsq_zero_ok8(md, hm, k0, mid)) lo = mid;
            else hi = mid;
        }
        lim = (int32_t)lo;
    }
    return lim;
}

/* The largest key at which every width is allowed (|x| <= s_c for c = 1..3;
 * for |x| >= 0 the float and key orders agree), -1 when a width never is. */
static int32_t jsq_free_limit8(const jsq_model *md) {
    int32_t lim = INT32_MAX;
    for (int c = 1; c < 4; c++) {
        int32_t k = md->s[c] >= 0 ? (int32_t)pz_f2u(md->s[c]) : -1;
        lim = k < lim ? k : lim;
    }
    return lim;
}

/* Whether width 3 can win, at lam_hi or lam_lo, where width 2 is allowed:
 * not when e_2 + h_2 <= h_3 for the largest e_2 the arithmetic can give
 * (d_2 (f - f^2) with f in [0, 1) rounds to at most d_2 (1/4 + 2^-23), below
 * d_2 (1/4 + 2^-22)), since e_3 >= 0 and a tie goes to the lower width. The
 * bound is taken with the same fp operations, which are monotone. */
static int jsq_need3(const jsq_model *md, const __m256 hh[4], const __m256 hl[4]) {
    __m256 u2 = _mm256_mul_ps(_mm256_set1_ps(md->D2[2]), _mm256_set1_ps(0x1.00001p-2f));
    __m256 ok = _mm256_and_ps(_mm256_cmp_ps(_mm256_add_ps(u2, hh[2]), hh[3], _CMP_LE_OQ),
                              _mm256_cmp_ps(_mm256_add_ps(u2, hl[2]), hl[3], _CMP_LE_OQ));
    return (_mm256_movemask_ps(ok) & 1) == 0;
}

/* The pick of v[0..nopt) (pz_mckp_vpick8 without masks, for nopt <= 4) */
static inline __m256i jsq_pick_n8(const __m256 v[4], int nopt) {
    const __m256 one = _mm256_castsi256_ps(_mm256_set1_epi32(1));
    __m256 lt = _mm256_cmp_ps(v[1], v[0], _CMP_LT_OQ), b = _mm256_min_ps(v[1], v[0]);
    __m256 a = _mm256_and_ps(lt, one);
    for (int c = 2; c < nopt; c++) {
        lt = _mm256_cmp_ps(v[c], b, _CMP_LT_OQ);
        b = _mm256_min_ps(v[c], b);
        a = _mm256_blendv_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(c)), lt);
    }
    return _mm256_castps_si256(a);
}

/* Both picks of 8 lanes where every width is allowed (key <= the free
 * limit): jsq_verrs8's errors without the INFINITY blends, and width 3 left
 * out when it cannot win (with3 = 0, jsq_need3): the same picks. */
static inline __attribute__((always_inline)) void jsq_picks_free8(const jsq_vmodel8 *K, __m256i key, const __m256 hh[4], const __m256 hl[4],
                                   int with3, __m256i *a, __m256i *bq) {
    const int nopt = with3 ? 4 : 3;
    __m256 xh = _mm256_mul_ps(_mm256_castsi256_ps(key), K->vM), e[4], vh[4], vl[4];
    e[0] = _mm256_mul_ps(xh, xh);
    for (int c = 1; c < nopt; c++) {
        __m256 y = _mm256_mul_ps(xh, K->i[c]);
        __m256 f = _mm256_sub_ps(y, _mm256_round_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
        e[c] = _mm256_mul_ps(K->d[c], _mm256_sub_ps(f, _mm256_mul_ps(f, f)));
    }
    for (int c = 0; c < nopt; c++) {
        vh[c] = _mm256_add_ps(e[c], hh[c]);
        vl[c] = _mm256_add_ps(e[c], hl[c]);
    }
    *a = jsq_pick_n8(vh, nopt);
    *bq = jsq_pick_n8(vl, nopt);
}

/* One block's lanes that may keep a width, in two lists by key: the free
 * lanes (every width allowed) and the others. A list holds the keys, their
 * offsets in the block and, after jsq_list_picks8, their picks at lam_hi
 * and the indices of those whose pick differs at lam_lo. */
typedef struct {
    uint32_t key[JSQ_B8 + 8];
    uint16_t off[JSQ_B8 + 8], dif[JSQ_B8 + 8];
    uint8_t pick[JSQ_B8 + 16];
    size_t n, ndif;
} jsq_list8;

/* The pass's running totals: picks per class at both ends (packed, see
 * pz_mckp_vcount8; it: vectors since the last flush), and the largest key
 * per class among the lanes whose picks agree. */
typedef struct {
    __m256i nhv, nlv, mx[4];
    uint64_t nh[4], nl[4];
    size_t it;
} jsq_tot8;

/* Splits the nb lanes of x (a block; nb a multiple of 8) into the lists
 * ls[0] (free) and ls[1] (others); kmask[b / 8] gets the free lanes of each
 * 8. The others (a few % of the lanes, in about a fifth of the 8s) are
 * only marked in the first sweep, as one byte per 8, and packed in a second
 * over the marked 8s: packing them beside the free lanes cost 8 of the 36
 * instructions per 8 lanes and spilled registers. (noinline here and below:
 * inside the pass the compiler spills the lists' pointers and the totals
 * and reloads them every 8 lanes; one base pointer for both lists keeps
 * their arrays at fixed offsets.) */
static __attribute__((noinline)) void jsq_split8(const float *x, size_t nb, int32_t drop, int32_t free_,
                                                 jsq_list8 *ls, uint8_t *kmask) {
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), vd = _mm256_set1_epi32(drop), vf = _mm256_set1_epi32(free_);
    uint8_t omask[JSQ_B8 / 8 + 32];
    uint32_t *fkey = ls[0].key;
    uint16_t *foff = ls[0].off;
    size_t nf = 0;
    __m128i base = _mm_setzero_si128();                  /* the lanes' offset in every 16 bits */
    for (size_t b = 0; b < nb; b += 8, base = _mm_add_epi16(base, _mm_set1_epi16(8))) {
        __m256i key = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(x + b)), absm);
        __m256i kept = _mm256_cmpgt_epi32(key, vd), over = _mm256_cmpgt_epi32(key, vf);
        unsigned mf = pz_v8_mask(_mm256_andnot_si256(over, kept));
        kmask[b / 8] = (uint8_t)mf;
        omask[b / 8] = (uint8_t)pz_v8_mask(_mm256_and_si256(over, kept));
        _mm256_storeu_si256((__m256i *)(void *)(fkey + nf), pz_v8_compress(mf, key));
        jsq_store_off8(foff + nf, mf, base);
        nf += (size_t)__builtin_popcount(mf);
    }
    size_t no = 0;
    memset(omask + nb / 8, 0, 32);                      /* no 8s past the block */
    for (size_t j0 = 0; j0 < nb / 8; j0 += 32) {        /* the marked 8s, 32 at a time */
        __m256i om = _mm256_loadu_si256((const __m256i *)(const void *)(omask + j0));
        uint32_t any = ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(om, _mm256_setzero_si256()));
        while (any) {
            size_t j = j0 + (size_t)__builtin_ctz(any);
            any &= any - 1;
            unsigned mo = omask[j];
            __m256i key = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(x + 8 * j)), absm);
            _mm256_storeu_si256((__m256i *)(void *)(ls[1].key + no), pz_v8_compress(mo, key));
            jsq_store_off8(ls[1].off + no, mo, _mm_set1_epi16((short)(8 * j)));
            no += (size_t)__builtin_popcount(mo);
        }
    }
    /* a lane of |x| = 0 pads the last 8: it picks width 0 at both ends, so
     * it adds no count, maximum or candidate */
    _mm256_storeu_si256((__m256i *)(void *)(ls[0].key + nf), _mm256_setzero_si256());
    _mm256_storeu_si256((__m256i *)(void *)(ls[1].key + no), _mm256_setzero_si256());
    ls[0].n = nf;
    ls[1].n = no;
}

/* Both picks of a list's lanes, 8 at a time, by kind: 0, the others
 * (jsq_verrs8's errors); 3 or 4, the free lanes with that many widths
 * (jsq_picks_free8). The picks at lam_hi and the lanes that differ go into
 * the list, the counts and maxima into t (at most JSQ_B8 / 8 vectors a
 * call, so a flush before a call that could pass 1023 is enough). */
static inline __attribute__((always_inline)) void jsq_list_picks8(const jsq_vmodel8 *K, const __m256 hh[4], const __m256 hl[4], int kind,
                                   jsq_list8 *L, jsq_tot8 *t) {
    const __m256i one = _mm256_set1_epi32(1), two = _mm256_set1_epi32(2), three = _mm256_set1_epi32(3);
    if (t->it + JSQ_B8 / 8 >= 1023) {
        pz_mckp_vcount8_flush(&t->nhv, t->nh);
        pz_mckp_vcount8_flush(&t->nlv, t->nl);
        t->it = 0;
    }
    __m256i nhv = t->nhv, nlv = t->nlv, mx1 = t->mx[1], mx2 = t->mx[2], mx3 = t->mx[3];
    const size_t n = L->n;
    const uint32_t *keys = L->key;
    uint8_t *pick = L->pick;
    uint16_t *dif = L->dif;
    size_t nd = 0;
    /* two loops: the picks (a long chain of dependent vector operations
     * per 8 lanes) into pa, pb, then their bookkeeping, whose operations
     * would otherwise wait in the scheduler behind that chain and leave
     * less room for the next 8s' picks */
    __m256i pa[JSQ_B8 / 8], pb[JSQ_B8 / 8];
    for (size_t k = 0; k < n; k += 8) {
        __m256i key = _mm256_loadu_si256((const __m256i *)(const void *)(keys + k));
        if (kind) {
            jsq_picks_free8(K, key, hh, hl, kind == 4, &pa[k / 8], &pb[k / 8]);
        } else {
            __m256 e[4];
            jsq_verrs8(K, key, e);
            pa[k / 8] = jsq_vpick8(e, hh);
            pb[k / 8] = jsq_vpick8(e, hl);
        }
    }
    __m128i base = _mm_setzero_si128();
    for (size_t k = 0; k < n; k += 8, base = _mm_add_epi16(base, _mm_set1_epi16(8))) {
        __m256i key = _mm256_loadu_si256((const __m256i *)(const void *)(keys + k)), a = pa[k / 8], bq = pb[k / 8];
        pz_v8_store_bytes(pick + k, a);
        nhv = pz_mckp_vcount8(nhv, a);
        nlv = pz_mckp_vcount8(nlv, bq);
        __m256i same = _mm256_cmpeq_epi32(a, bq);
        __m256i kk = _mm256_and_si256(key, same);  /* keys of the kept lanes (0 does not raise a max) */
        mx1 = _mm256_max_epu32(mx1, _mm256_and_si256(kk, _mm256_cmpeq_epi32(a, one)));
        mx2 = _mm256_max_epu32(mx2, _mm256_and_si256(kk, _mm256_cmpeq_epi32(a, two)));
        if (kind != 3) mx3 = _mm256_max_epu32(mx3, _mm256_and_si256(kk, _mm256_cmpeq_epi32(a, three)));
        unsigned d = ~pz_v8_mask(same) & 0xffu;       /* the differing lanes' indices, branch-free */
        jsq_store_off8(dif + nd, d, base);
        nd += (size_t)__builtin_popcount(d);
    }
    t->nhv = nhv;
    t->nlv = nlv;
    t->mx[1] = mx1;
    t->mx[2] = mx2;
    t->mx[3] = mx3;
    t->it += (n + 7) / 8;
    L->ndif = nd;
}

static __attribute__((noinline)) void jsq_list_others8(const jsq_vmodel8 *K, const __m256 hh[4], const __m256 hl[4],
                                                       jsq_list8 *L, jsq_tot8 *t) {
    jsq_list_picks8(K, hh, hl, 0, L, t);
}
static __attribute__((noinline)) void jsq_list_free8(const jsq_vmodel8 *K, const __m256 hh[4], const __m256 hl[4],
                                                     int with3, jsq_list8 *L, jsq_tot8 *t) {
    if (with3) jsq_list_picks8(K, hh, hl, 4, L, t);
    else jsq_list_picks8(K, hh, hl, 3, L, t);
}

/* The free lanes' picks into the block's cls (0 in the other lanes), 8
 * lanes a step (the expansion of compress/core/vec8.h), two steps a turn
 * with the second's picks loaded at the first's count. */
static void jsq_expand16(const uint8_t *pick, const uint8_t *kmask, size_t nb, uint8_t *cls) {
    const uint8_t *end = cls + nb;
    for (; cls + 16 <= end; cls += 16, kmask += 2) {
        unsigned m0 = kmask[0], m1 = kmask[1];
        __m128i p0 = _mm_loadl_epi64((const __m128i *)(const void *)pick);
        pick += __builtin_popcount(m0);
        __m128i p1 = _mm_loadl_epi64((const __m128i *)(const void *)pick);
        pick += __builtin_popcount(m1);
        _mm_storel_epi64((__m128i *)(void *)cls, pz_v8_expand_b(m0, p0));
        _mm_storel_epi64((__m128i *)(void *)(cls + 8), pz_v8_expand_b(m1, p1));
    }
    if (cls < end) {
        __m128i p8 = _mm_loadl_epi64((const __m128i *)(const void *)pick);
        _mm_storel_epi64((__m128i *)(void *)cls, pz_v8_expand_b(kmask[0], p8));
    }
}

/* One block's candidates (the lanes of both lists whose picks differ), in
 * element order, to cs_ from *ncp on (at most ccap stored; *ncp counts
 * them all): the two lists' merged by offset (the others' are few). */
static void jsq_block_cands8(size_t i, const jsq_list8 *fr, const jsq_list8 *ot, jsq_cside *cs_, size_t ccap,
                             size_t *ncp) {
    uint32_t *cid = cs_->id, *chi = cs_->hi, *ckey = cs_->key;     /* (locals: the stores would reload them) */
    size_t a = 0, b = 0, nc = *ncp;
    const size_t na = fr->ndif, no = ot->ndif;
    while (a < na || b < no) {
        const jsq_list8 *L = fr;
        size_t j;
        if (b < no && (a == na || ot->off[ot->dif[b]] < fr->off[fr->dif[a]])) {
            L = ot;
            j = ot->dif[b++];
        } else {
            j = fr->dif[a++];
        }
        if (nc < ccap) {
            cid[nc] = (uint32_t)(i + L->off[j]);
            chi[nc] = L->pick[j];
            ckey[nc] = L->key[j];
        }
        nc++;
    }
    *ncp = nc;
}

/* The pass for G = 1, in blocks of JSQ_B8 lanes. Each block's lanes are
 * split by key (jsq_split8): those that surely take width 0 at both
 * multipliers (key <= jsq_zero_limit8: 49% at jointsq:4, 79% at
 * jointsq:2, on normal data) are set aside; those where every width is allowed
 * (the free list, most of the rest) take the picks without INFINITY blends
 * and, where it cannot win, without width 3; the others (above the smallest
 * scale) take the full arithmetic. Packed 8 to a vector; their picks are
 * then spread back into cls, and the candidates taken in element order. */
static void jsq_pass_b1(const float *x, size_t n, const jsq_model *md, const uint32_t cf[4], float lam_lo,
                        float lam_hi, uint8_t *cls, pz_mckp_soa *cand, jsq_cside *cs_, size_t ccap, jsq_passb *r) {
    const jsq_vmodel8 K = jsq_vmodel8_of(md);
    __m256 hh[4], hl[4];
    for (int c = 0; c < 4; c++) {
        hh[c] = _mm256_set1_ps(lam_hi * (float)cf[c]);
        hl[c] = _mm256_set1_ps(lam_lo * (float)cf[c]);
    }
    const int32_t drop = jsq_zero_limit8(md, cf, lam_lo, lam_hi), free_ = jsq_free_limit8(md);
    const int with3 = jsq_need3(md, hh, hl);
    jsq_tot8 t;
    memset(&t, 0, sizeof t);
    jsq_list8 *fr = xmalloc(2 * sizeof *fr), *ot = fr + 1;
    uint8_t kmask[JSQ_B8 / 8];
    size_t nc = 0, i = 0;
    while (n - i >= 8) {
        size_t nb = n - i < JSQ_B8 ? (n - i) & ~(size_t)7 : JSQ_B8;
        jsq_split8(x + i, nb, drop, free_, fr, kmask);
        jsq_list_free8(&K, hh, hl, with3, fr, &t);
        jsq_list_others8(&K, hh, hl, ot, &t);
        jsq_expand16(fr->pick, kmask, nb, cls + i);
        for (size_t j = 0; j < ot->n; j++) cls[i + ot->off[j]] = ot->pick[j];
        jsq_block_cands8(i, fr, ot, cs_, ccap, &nc);
        i += nb;
    }
    free(fr);
    pz_mckp_vcount8_flush(&t.nhv, t.nh);
    pz_mckp_vcount8_flush(&t.nlv, t.nl);
    uint64_t *nh = t.nh, *nl = t.nl;
    int64_t dsum = 0;
    for (int c = 1; c < 4; c++) dsum += ((int64_t)nl[c] - (int64_t)nh[c]) * ((int64_t)cf[c] - (int64_t)cf[0]);
    {   /* the candidates' errors, by the same arithmetic (masked loads and
         * stores only for the last 8: AMD runs them as microcode, and they
         * took a quarter of this function's samples on every 8) */
        size_t nv = nc < ccap ? nc : ccap, j = 0;
        __m256 e[4];
        for (; j + 8 <= nv; j += 8) {
            jsq_verrs8(&K, _mm256_loadu_si256((const __m256i *)(const void *)(cs_->key + j)), e);
            for (int o = 0; o < 4; o++) _mm256_storeu_ps(cand->err[o] + j, e[o]);
        }
        if (j < nv) {
            __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(nv - j)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            jsq_verrs8(&K, _mm256_maskload_epi32((const int *)(const void *)(cs_->key + j), live), e);
            for (int o = 0; o < 4; o++) _mm256_maskstore_ps(cand->err[o] + j, live, e[o]);
        }
    }
    for (int c = 1; c < 4; c++) r->nmax[c] = pz_v8_hmax_epu32(t.mx[c]);
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
        pz_jsq_errs(x + eb, ee - eb, g->G, gm ? gm + j0 : NULL, md, E0, E1, E2, E3);
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

