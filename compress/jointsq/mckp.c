/* mckp.c: multiple-choice knapsack by Lagrangian bisection (see mckp.h). */

/* the pick loops are throughput-bound: let gcc use 512-bit vectors where the
 * build targets AVX-512 (it defaults to 256 bits) */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif
#include "compress/jointsq/mckp.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

#define KEY_MAX 0x7f7fffffu      /* bits of FLT_MAX */

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* Picks at lam of items [0, n) (per-item costs c, or the same costs cu for
 * every item when c is NULL); writes them to ch (unless NULL), returns the
 * sum of picked costs. The vector loops compute exactly what pz_mckp_pick
 * does. */
static uint64_t eval(float *const *ea, uint32_t *const *c, const uint32_t *cu, size_t n, float lam, uint8_t *ch) {
    const float *const e[PZ_MCKP_OPTS] = {ea[0], ea[1], ea[2], ea[3]};   /* (ch may alias ea[]: reloaded) */
    uint64_t cost = 0;
    size_t i = 0;
#if defined(__AVX512F__)
    const __m512 lv = _mm512_set1_ps(lam);
    const __mmask16 all[PZ_MCKP_OPTS] = {0xffff, 0xffff, 0xffff, 0xffff};
    __mmask16 m[PZ_MCKP_OPTS - 1];
    if (!c) {
        /* the same costs for all: count the picks per option and sum the
         * costs once at the end */
        __m512 h[PZ_MCKP_OPTS];
        for (int o = 0; o < PZ_MCKP_OPTS; o++) h[o] = _mm512_mul_ps(lv, _mm512_cvtepu32_ps(_mm512_set1_epi32((int)cu[o])));
        __m512i cnt = _mm512_setzero_si512();
        uint64_t nc[PZ_MCKP_OPTS] = {0, 0, 0, 0};
        /* (chunks of 1023 vectors between flushes: no count in the loop) */
        for (size_t end; i + 16 <= n; pz_mckp_vcount_flush(&cnt, nc)) {
            end = n - i > 1023 * 16 ? i + 1023 * 16 : n;
            for (; i + 16 <= end; i += 16) {
                __m512 v[PZ_MCKP_OPTS];
                for (int o = 0; o < PZ_MCKP_OPTS; o++) v[o] = _mm512_add_ps(_mm512_loadu_ps(e[o] + i), h[o]);
                __m512i a = pz_mckp_vpick(v, all, m);
                if (ch) _mm_storeu_si128((__m128i *)(void *)(ch + i), _mm512_cvtepi32_epi8(a));
                cnt = pz_mckp_vcount(cnt, a);
            }
        }
        cost = ((uint64_t)i - nc[1] - nc[2] - nc[3]) * cu[0] + nc[1] * cu[1] + nc[2] * cu[2] + nc[3] * cu[3];
    } else {
        __m512i acc = _mm512_setzero_si512();
        for (; i + 16 <= n; i += 16) {
            __m512i k[PZ_MCKP_OPTS];
            __m512 v[PZ_MCKP_OPTS];
            for (int o = 0; o < PZ_MCKP_OPTS; o++) {
                k[o] = _mm512_loadu_si512((const void *)(c[o] + i));
                v[o] = _mm512_add_ps(_mm512_loadu_ps(e[o] + i), _mm512_mul_ps(lv, _mm512_cvtepu32_ps(k[o])));
            }
            __m512i a = pz_mckp_vpick(v, all, m);
            __m512i cc = k[0];
            for (int o = 1; o < PZ_MCKP_OPTS; o++) cc = _mm512_mask_mov_epi32(cc, m[o - 1], k[o]);
            if (ch) _mm_storeu_si128((__m128i *)(void *)(ch + i), _mm512_cvtepi32_epi8(a));
            acc = _mm512_add_epi64(acc, _mm512_cvtepu32_epi64(_mm512_castsi512_si256(cc)));
            acc = _mm512_add_epi64(acc, _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(cc, 1)));
        }
        cost = (uint64_t)_mm512_reduce_add_epi64(acc);
    }
#elif defined(__AVX2__)
    const __m256 lv = _mm256_set1_ps(lam);
    __m256 m[PZ_MCKP_OPTS - 1];
    if (!c) {
        __m256 h[PZ_MCKP_OPTS];
        for (int o = 0; o < PZ_MCKP_OPTS; o++) h[o] = _mm256_mul_ps(lv, pz_v8_cvtepu32_ps(_mm256_set1_epi32((int)cu[o])));
        __m256i cnt = _mm256_setzero_si256();
        uint64_t nc[PZ_MCKP_OPTS] = {0, 0, 0, 0};
        for (size_t end; i + 8 <= n; pz_mckp_vcount8_flush(&cnt, nc)) {
            end = n - i > 1023 * 8 ? i + 1023 * 8 : n;
#pragma GCC unroll 2  /* (the loop bookkeeping was a quarter of its instructions) */
            for (; i + 8 <= end; i += 8) {
                __m256 v[PZ_MCKP_OPTS];
                for (int o = 0; o < PZ_MCKP_OPTS; o++) v[o] = _mm256_add_ps(_mm256_loadu_ps(e[o] + i), h[o]);
                __m256i a = pz_mckp_vpick8(v, NULL, m);
                if (ch) pz_v8_store_bytes(ch + i, a);
                cnt = pz_mckp_vcount8(cnt, a);
            }
        }
        cost = ((uint64_t)i - nc[1] - nc[2] - nc[3]) * cu[0] + nc[1] * cu[1] + nc[2] * cu[2] + nc[3] * cu[3];
    } else {
        __m256i acc = _mm256_setzero_si256();
        for (; i + 8 <= n; i += 8) {
            __m256i k[PZ_MCKP_OPTS];
            __m256 v[PZ_MCKP_OPTS];
            for (int o = 0; o < PZ_MCKP_OPTS; o++) {
                k[o] = _mm256_loadu_si256((const __m256i *)(const void *)(c[o] + i));
                v[o] = _mm256_add_ps(_mm256_loadu_ps(e[o] + i), _mm256_mul_ps(lv, pz_v8_cvtepu32_ps(k[o])));
            }
            __m256i a = pz_mckp_vpick8(v, NULL, m);
            __m256 cc = _mm256_castsi256_ps(k[0]);
            for (int o = 1; o < PZ_MCKP_OPTS; o++) cc = _mm256_blendv_ps(cc, _mm256_castsi256_ps(k[o]), m[o - 1]);
            if (ch) pz_v8_store_bytes(ch + i, a);
            __m256i ci = _mm256_castps_si256(cc);
            acc = _mm256_add_epi64(acc, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(ci)));
            acc = _mm256_add_epi64(acc, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(ci, 1)));
        }
        uint64_t a4[4];
        _mm256_storeu_si256((__m256i *)(void *)a4, acc);
        cost = a4[0] + a4[1] + a4[2] + a4[3];
    }
#endif
    for (; i < n; i++) {
        uint32_t k0 = c ? c[0][i] : cu[0], k1 = c ? c[1][i] : cu[1], k2 = c ? c[2][i] : cu[2], k3 = c ? c[3][i] : cu[3];
        int a = pz_mckp_pick(e[0][i], e[1][i], e[2][i], e[3][i], (float)k0, (float)k1, (float)k2, (float)k3, lam);
        if (ch) ch[i] = (uint8_t)a;
        cost += a == 0 ? k0 : a == 1 ? k1 : a == 2 ? k2 : k3;
    }
    return cost;
}

uint64_t pz_mckp_pick_uniform(float *const err[PZ_MCKP_OPTS], const uint32_t cost[PZ_MCKP_OPTS], size_t n,
                              float lam, uint8_t *choice) {
    return eval(err, NULL, cost, n, lam, choice);
}

float pz_mckp_lambda(const pz_mckp_soa *s, size_t n, uint64_t capacity, int rel_bits, float guess,
                     uint64_t *cost, double *err, uint8_t *choice) {
    uint32_t lo = 0, hi = KEY_MAX;
    uint64_t chi;
    /* (the picks are wanted only for the error at the end) */
    uint64_t c0 = eval(s->err, s->ucost ? NULL : s->cost, s->ucost, n, 0.0f, NULL);
    if (c0 <= capacity) {
        hi = 0;
        chi = c0;
    } else {
        chi = UINT64_MAX;
        if (guess > 0 && guess < FLT_MAX / 16) {     /* bracket around the guess */
            uint32_t a = f2u(guess * 0.5f), b = f2u(guess * 2.0f);
            for (int t = 0; t < 8; t++) {
                uint64_t cb = eval(s->err, s->ucost ? NULL : s->cost, s->ucost, n, u2f(b), NULL);
                if (cb <= capacity) {
                    hi = b;
                    chi = cb;
                    break;
                }
                lo = b;
                if (u2f(b) > FLT_MAX / 16) break;
                b = f2u(u2f(b) * 16.0f);
            }
            if (chi != UINT64_MAX) {
                for (int t = 0; t < 8 && a > lo; t++) {
                    uint64_t ca = eval(s->err, s->ucost ? NULL : s->cost, s->ucost, n, u2f(a), NULL);
                    if (ca > capacity) {
                        lo = a;
                        break;
                    }
                    hi = a;
                    chi = ca;
                    a = f2u(u2f(a) * (1.0f / 16));
                }
            }
        }
        if (chi == UINT64_MAX) chi = eval(s->err, s->ucost ? NULL : s->cost, s->ucost, n, u2f(hi), NULL);
        uint32_t tol = rel_bits >= 23 ? 1 : 1u << (23 - (rel_bits < 0 ? 0 : rel_bits));
        while (hi - lo > tol) {
            uint32_t mid = lo + (hi - lo) / 2;
            uint64_t cm = eval(s->err, s->ucost ? NULL : s->cost, s->ucost, n, u2f(mid), NULL);
            if (cm <= capacity) {
                hi = mid;
                chi = cm;
            } else {
                lo = mid;
            }
        }
    }
    float lam = u2f(hi);
    if (cost) *cost = chi;
    if (err || choice) {
        uint8_t *ch = choice ? choice : xmalloc(n ? n : 1);
        eval(s->err, s->ucost ? NULL : s->cost, s->ucost, n, lam, ch);
        if (err) {
            double e = 0;
            for (size_t i = 0; i < n; i++) e += s->err[ch[i]][i];
            *err = e;
        }
        if (!choice) free(ch);
    }
    return lam;
}

/* The active set of the bisection: the items whose pick still differs
 * between the ends of the bracket, in index order, compacted in place at
 * the front of the work arrays. */
typedef struct {
    float *e[PZ_MCKP_OPTS];
    uint32_t *c[PZ_MCKP_OPTS];
    uint32_t *id;          /* original positions; NULL: identity (not compacted yet) */
    size_t m;
    const uint32_t *cu;    /* the same costs for every item (c[] unused), or NULL */
    uint32_t *idbuf;       /* room for the ids once compacted (m + 16) */
} active_;

static inline uint32_t acost(const active_ *A, int o, size_t j) { return A->cu ? A->cu[o] : A->c[o][j]; }

/* compact's vector part: the items in whole vectors (16 with AVX-512, 8
 * with AVX2), from the first; returns how many it took (0 without either),
 * advancing *kp (kept items) and the fixed items' cost and error sums. */
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VBMI2__)
static size_t compact_vec(const active_ *A, uint8_t *ch_lo, uint8_t *ch_hi, uint8_t *choice, uint32_t *nid,
                          size_t m, size_t *kp, uint64_t *fcp, double *fep) {
    float *e0 = A->e[0], *e1 = A->e[1], *e2 = A->e[2], *e3 = A->e[3];
    uint32_t *c0 = A->c[0], *c1 = A->c[1], *c2 = A->c[2], *c3 = A->c[3], *id = A->id;
    const uint32_t *cu = A->cu;
    size_t k = *kp, j = 0;
    uint64_t fc = *fcp;
    double fe = *fep;
    {
        const __m512i one = _mm512_set1_epi32(1), two = _mm512_set1_epi32(2), three = _mm512_set1_epi32(3);
        __m512i iv = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        __m512i fcv = _mm512_setzero_si512();
        __m512d fev = _mm512_setzero_pd();
        uint32_t ids[16], as[16];
        for (; j + 16 <= m; j += 16) {
            __m128i lo8 = _mm_loadu_si128((const __m128i *)(const void *)(ch_lo + j));
            __m128i hi8 = _mm_loadu_si128((const __m128i *)(const void *)(ch_hi + j));
            __mmask16 act = _mm_cmpneq_epi8_mask(lo8, hi8), fix = (__mmask16)~act;
            __m512i a = _mm512_cvtepu8_epi32(hi8);
            __m512 v0 = _mm512_loadu_ps(e0 + j), v1 = _mm512_loadu_ps(e1 + j), v2 = _mm512_loadu_ps(e2 + j),
                   v3 = _mm512_loadu_ps(e3 + j);
            __m512i u0, u1, u2, u3;
            if (cu) {
                u0 = _mm512_set1_epi32((int)cu[0]);
                u1 = _mm512_set1_epi32((int)cu[1]);
                u2 = _mm512_set1_epi32((int)cu[2]);
                u3 = _mm512_set1_epi32((int)cu[3]);
            } else {
                u0 = _mm512_loadu_si512((const void *)(c0 + j));
                u1 = _mm512_loadu_si512((const void *)(c1 + j));
                u2 = _mm512_loadu_si512((const void *)(c2 + j));
                u3 = _mm512_loadu_si512((const void *)(c3 + j));
            }
            __m512i idv = id ? _mm512_loadu_si512((const void *)(id + j))
                             : _mm512_add_epi32(iv, _mm512_set1_epi32((int)j));
            if (fix) {
                __mmask16 k1 = _mm512_cmpeq_epi32_mask(a, one), k2 = _mm512_cmpeq_epi32_mask(a, two),
                          k3 = _mm512_cmpeq_epi32_mask(a, three);
                __m512i ca = _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(_mm512_mask_mov_epi32(u0, k1, u1), k2, u2), k3, u3);
                __m512 ea = _mm512_mask_mov_ps(_mm512_mask_mov_ps(_mm512_mask_mov_ps(v0, k1, v1), k2, v2), k3, v3);
                ca = _mm512_maskz_mov_epi32(fix, ca);
                ea = _mm512_maskz_mov_ps(fix, ea);
                fcv = _mm512_add_epi64(fcv, _mm512_cvtepu32_epi64(_mm512_castsi512_si256(ca)));
                fcv = _mm512_add_epi64(fcv, _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(ca, 1)));
                fev = _mm512_add_pd(fev, _mm512_cvtps_pd(_mm512_castps512_ps256(ea)));
                fev = _mm512_add_pd(fev, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(ea), 1))));
                _mm512_storeu_si512((void *)ids, idv);
                _mm512_storeu_si512((void *)as, a);
                unsigned f = fix;
                while (f) {
                    int l = __builtin_ctz(f);
                    f &= f - 1;
                    choice[ids[l]] = (uint8_t)as[l];
                }
            }
            _mm512_storeu_ps(e0 + k, _mm512_maskz_compress_ps(act, v0));
            _mm512_storeu_ps(e1 + k, _mm512_maskz_compress_ps(act, v1));
            _mm512_storeu_ps(e2 + k, _mm512_maskz_compress_ps(act, v2));
            _mm512_storeu_ps(e3 + k, _mm512_maskz_compress_ps(act, v3));
            if (!cu) {
                _mm512_storeu_si512((void *)(c0 + k), _mm512_maskz_compress_epi32(act, u0));
                _mm512_storeu_si512((void *)(c1 + k), _mm512_maskz_compress_epi32(act, u1));
                _mm512_storeu_si512((void *)(c2 + k), _mm512_maskz_compress_epi32(act, u2));
                _mm512_storeu_si512((void *)(c3 + k), _mm512_maskz_compress_epi32(act, u3));
            }
            _mm512_storeu_si512((void *)(nid + k), _mm512_maskz_compress_epi32(act, idv));
            _mm_storeu_si128((__m128i *)(void *)(ch_lo + k), _mm_maskz_compress_epi8(act, lo8));
            _mm_storeu_si128((__m128i *)(void *)(ch_hi + k), _mm_maskz_compress_epi8(act, hi8));
            k += (size_t)__builtin_popcount(act);
        }
        fc += (uint64_t)_mm512_reduce_add_epi64(fcv);
        fe += _mm512_reduce_add_pd(fev);
    }
    *kp = k;
    *fcp = fc;
    *fep = fe;
    return j;
}
#elif defined(__AVX2__)
static size_t compact_vec(const active_ *A, uint8_t *ch_lo, uint8_t *ch_hi, uint8_t *choice, uint32_t *nid,
                          size_t m, size_t *kp, uint64_t *fcp, double *fep) {
    float *e0 = A->e[0], *e1 = A->e[1], *e2 = A->e[2], *e3 = A->e[3];
    uint32_t *c0 = A->c[0], *c1 = A->c[1], *c2 = A->c[2], *c3 = A->c[3], *id = A->id;
    const uint32_t *cu = A->cu;
    size_t k = *kp, j = 0;
    uint64_t fc = *fcp;
    double fe = *fep;
    {   /* the same 8 items at a time (compress/core/vec8.h's table compress) */
        const __m256i one = _mm256_set1_epi32(1), two = _mm256_set1_epi32(2), three = _mm256_set1_epi32(3);
        const __m256i iv = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        __m256i fcv = _mm256_setzero_si256();
        __m256d fev = _mm256_setzero_pd();
        uint32_t ids[8];
        for (; j + 8 <= m; j += 8) {
            __m128i lo8 = _mm_loadl_epi64((const __m128i *)(const void *)(ch_lo + j));
            __m128i hi8 = _mm_loadl_epi64((const __m128i *)(const void *)(ch_hi + j));
            unsigned act = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(lo8, hi8)) & 0xffu, fix = ~act & 0xffu;
            __m256i a = _mm256_cvtepu8_epi32(hi8);
            __m256 v0 = _mm256_loadu_ps(e0 + j), v1 = _mm256_loadu_ps(e1 + j), v2 = _mm256_loadu_ps(e2 + j),
                   v3 = _mm256_loadu_ps(e3 + j);
            __m256i u0, u1, u2, u3;
            if (cu) {
                u0 = _mm256_set1_epi32((int)cu[0]);
                u1 = _mm256_set1_epi32((int)cu[1]);
                u2 = _mm256_set1_epi32((int)cu[2]);
                u3 = _mm256_set1_epi32((int)cu[3]);
            } else {
                u0 = _mm256_loadu_si256((const __m256i *)(const void *)(c0 + j));
                u1 = _mm256_loadu_si256((const __m256i *)(const void *)(c1 + j));
                u2 = _mm256_loadu_si256((const __m256i *)(const void *)(c2 + j));
                u3 = _mm256_loadu_si256((const __m256i *)(const void *)(c3 + j));
            }
            __m256i idv = id ? _mm256_loadu_si256((const __m256i *)(const void *)(id + j))
                             : _mm256_add_epi32(iv, _mm256_set1_epi32((int)j));
            if (fix) {
                __m256 k1 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(a, one)),
                       k2 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(a, two)),
                       k3 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(a, three));
                __m256 fx = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(lo8), a));
                __m256 ca = _mm256_blendv_ps(
                    _mm256_blendv_ps(_mm256_blendv_ps(_mm256_castsi256_ps(u0), _mm256_castsi256_ps(u1), k1),
                                     _mm256_castsi256_ps(u2), k2),
                    _mm256_castsi256_ps(u3), k3);
                __m256 ea = _mm256_blendv_ps(_mm256_blendv_ps(_mm256_blendv_ps(v0, v1, k1), v2, k2), v3, k3);
                __m256i cai = _mm256_castps_si256(_mm256_and_ps(ca, fx));
                ea = _mm256_and_ps(ea, fx);
                fcv = _mm256_add_epi64(fcv, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(cai)));
                fcv = _mm256_add_epi64(fcv, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(cai, 1)));
                fev = _mm256_add_pd(fev, _mm256_cvtps_pd(_mm256_castps256_ps128(ea)));
                fev = _mm256_add_pd(fev, _mm256_cvtps_pd(_mm256_extractf128_ps(ea, 1)));
                if (id) {   /* all 8 picks, the active ones' provisional (a loop
                               * over the fixed lanes mispredicted its exit) */
                    _mm256_storeu_si256((__m256i *)(void *)ids, idv);
                    uint64_t as = (uint64_t)_mm_cvtsi128_si64(hi8);
                    for (int l = 0; l < 8; l++) choice[ids[l]] = (uint8_t)(as >> 8 * l);
                }
            }
            /* before the first compact the ids are j..j + 7: all 8 picks in
             * one store, the active ones' provisional as in the scalar loop
             * below (a loop over the fixed lanes mispredicted its exit) */
            if (!id) _mm_storel_epi64((__m128i *)(void *)(choice + j), hi8);
            _mm256_storeu_ps(e0 + k, _mm256_castsi256_ps(pz_v8_compress(act, _mm256_castps_si256(v0))));
            _mm256_storeu_ps(e1 + k, _mm256_castsi256_ps(pz_v8_compress(act, _mm256_castps_si256(v1))));
            _mm256_storeu_ps(e2 + k, _mm256_castsi256_ps(pz_v8_compress(act, _mm256_castps_si256(v2))));
            _mm256_storeu_ps(e3 + k, _mm256_castsi256_ps(pz_v8_compress(act, _mm256_castps_si256(v3))));
            if (!cu) {
                _mm256_storeu_si256((__m256i *)(void *)(c0 + k), pz_v8_compress(act, u0));
                _mm256_storeu_si256((__m256i *)(void *)(c1 + k), pz_v8_compress(act, u1));
                _mm256_storeu_si256((__m256i *)(void *)(c2 + k), pz_v8_compress(act, u2));
                _mm256_storeu_si256((__m256i *)(void *)(c3 + k), pz_v8_compress(act, u3));
            }
            _mm256_storeu_si256((__m256i *)(void *)(nid + k), pz_v8_compress(act, idv));
            _mm_storel_epi64((__m128i *)(void *)(ch_lo + k), pz_v8_compress_b(act, lo8));
            _mm_storel_epi64((__m128i *)(void *)(ch_hi + k), pz_v8_compress_b(act, hi8));
            k += (size_t)__builtin_popcount(act);
        }
        uint64_t f4[4];
        double d4[4];
        _mm256_storeu_si256((__m256i *)(void *)f4, fcv);
        _mm256_storeu_pd(d4, fev);
        fc += f4[0] + f4[1] + f4[2] + f4[3];
        fe += (d4[0] + d4[1]) + (d4[2] + d4[3]);
    }
    *kp = k;
    *fcp = fc;
    *fep = fe;
    return j;
}
#else
static size_t compact_vec(const active_ *A, uint8_t *ch_lo, uint8_t *ch_hi, uint8_t *choice, uint32_t *nid,
                          size_t m, size_t *kp, uint64_t *fcp, double *fep) {
    (void)A, (void)ch_lo, (void)ch_hi, (void)choice, (void)nid, (void)m, (void)kp, (void)fcp, (void)fep;
    return 0;
}
#endif

/* How many of a[0..m), b[0..m) (NULL: zeros) differ (AVX2: a compare mask's bits
 * counted 32 at a time; gcc's own vector loop widened every byte to 64
 * bits). */
static size_t count_ne(const uint8_t *a, const uint8_t *b, size_t m) {
    size_t n = 0, j = 0;
#if defined(__AVX2__)
    for (; j + 32 <= m; j += 32) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(a + j));
        __m256i y = b ? _mm256_loadu_si256((const __m256i *)(const void *)(b + j)) : _mm256_setzero_si256();
        n += 32 - (size_t)__builtin_popcount((unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, y)));
    }
#endif
    for (; j < m; j++) n += a[j] != (b ? b[j] : 0);
    return n;
}

/* Fixes the items with ch_lo == ch_hi (their choice is final) and moves the
 * others to the front; branch-free. */
static void compact(active_ *A, uint8_t *ch_lo, uint8_t *ch_hi, uint8_t *choice, uint64_t *fcost,
                    double *ferr) {
    size_t m = A->m, keep = count_ne(ch_lo, ch_hi, m);
    if (keep == m) return;
    if (keep > m - m / 4 && A->id) return;            /* not worth a pass yet */
    float *e0 = A->e[0], *e1 = A->e[1], *e2 = A->e[2], *e3 = A->e[3];
    uint32_t *c0 = A->c[0], *c1 = A->c[1], *c2 = A->c[2], *c3 = A->c[3], *id = A->id;
    const uint32_t *cu = A->cu;
    uint32_t *nid = id ? id : A->idbuf;
    size_t k = 0, j = 0;
    uint64_t fc = 0;
    double fe = 0;
    j = compact_vec(A, ch_lo, ch_hi, choice, nid, m, &k, &fc, &fe);
    for (; j < m; j++) {
        int a = ch_hi[j], lo = ch_lo[j];
        uint32_t i = id ? id[j] : (uint32_t)j;
        uint32_t ca = acost(A, a, j);
        float ea = a == 0 ? e0[j] : a == 1 ? e1[j] : a == 2 ? e2[j] : e3[j];
        size_t act = lo != a;
        choice[i] = (uint8_t)a;                        /* final unless still active */
        fc += act ? 0 : ca;
        fe += act ? 0.0 : (double)ea;
        e0[k] = e0[j]; e1[k] = e1[j]; e2[k] = e2[j]; e3[k] = e3[j];
        if (!cu) {
            c0[k] = c0[j]; c1[k] = c1[j]; c2[k] = c2[j]; c3[k] = c3[j];
        }
        if (k < keep) nid[k] = i;          /* (the slots past keep may be past the ids' end) */
        ch_lo[k] = (uint8_t)lo;
        ch_hi[k] = (uint8_t)a;
        k += act;
    }
    A->m = keep;
    A->id = nid;
    *fcost += fc;
    *ferr += fe;
}

#define FILL_SET 256

/* The fill set: copies of the items active when the set first has FILL_SET
 * or fewer (those with multipliers nearest the critical one). */
typedef struct {
    size_t n;
    uint32_t id[FILL_SET];
    float e[FILL_SET][PZ_MCKP_OPTS];
    uint32_t c[FILL_SET][PZ_MCKP_OPTS];
} fillset_;

static void fill_snap(const active_ *A, fillset_ *F) {
    size_t m = A->m < FILL_SET ? A->m : FILL_SET;
    for (size_t j = 0; j < m; j++) {
        F->id[j] = A->id ? A->id[j] : (uint32_t)j;
        for (int o = 0; o < PZ_MCKP_OPTS; o++) {
            F->e[j][o] = A->e[o][j];
            F->c[j][o] = acost(A, o, j);
        }
    }
    F->n = m;
}

static void swap(uint8_t **a, uint8_t **b) {
    uint8_t *t = *a;
    *a = *b;
    *b = t;
}

/* Lagrangian lower bound sum_i min_o (e + lam c) - lam * capacity. */
static double lower_bound(const pz_mckp_soa *s, size_t n, uint64_t capacity, double lam) {
    double lb = 0;
    for (size_t i = 0; i < n; i++) {
        double b = INFINITY;
        for (int o = 0; o < PZ_MCKP_OPTS; o++) {
            double v = (double)s->err[o][i] + lam * (double)(s->ucost ? s->ucost[o] : s->cost[o][i]);
            b = v < b ? v : b;
        }
        lb += b;
    }
    return lb - lam * (double)capacity;
}

/* The solver's work memory for n items: three pick arrays and the ids of
 * the active set. */
static size_t picks_bytes(size_t n) { return (3 * (n + 64) + 63) / 64 * 64; }
size_t pz_mckp_work_bytes(size_t n) { return picks_bytes(n) + (n + 16) * sizeof(uint32_t); }

/* Spends the room left, round by round, on the option of the fill set with
 * the best error drop per unit of cost that still fits; returns the room
 * left and lowers *err by the drops taken. */
static uint64_t fill_room(const fillset_ *F, uint8_t *choice, uint64_t room, double *err) {
    for (int round = 0; room > 0 && round < 4 * FILL_SET; round++) {
        double best = 0;
        size_t bf = SIZE_MAX;
        int bo = 0;
        for (size_t f = 0; f < F->n; f++) {
            int a = choice[F->id[f]];
            double ea = F->e[f][a];
            for (int o = a + 1; o < PZ_MCKP_OPTS; o++) {
                uint64_t dc = (uint64_t)F->c[f][o] - F->c[f][a];
                double drop = ea - (double)F->e[f][o];
                if (dc > room || !(drop > 0)) continue;
                double eff = drop / (double)dc;
                if (eff > best) {
                    best = eff;
                    bf = f;
                    bo = o;
                }
            }
        }
        if (bf == SIZE_MAX) break;
        int a = choice[F->id[bf]];
        room -= F->c[bf][bo] - F->c[bf][a];
        *err -= (double)F->e[bf][a] - (double)F->e[bf][bo];
        choice[F->id[bf]] = (uint8_t)bo;
    }
    return room;
}

/* The solver proper on work arrays w (overwritten), with work memory (NULL:
 * its own). */
static void solve(pz_mckp_soa *w, size_t n, uint64_t capacity, float lam_lo, float lam_hi, uint8_t *choice,
                  pz_mckp_info *info, uint32_t *lo_key, void *work) {
    uint8_t *own = work ? NULL : xmalloc(pz_mckp_work_bytes(n)), *wb = work ? work : own;
    uint8_t *ch_lo = wb, *ch_hi = wb + n + 64, *ch_mid = wb + 2 * (n + 64);
    active_ A = {.m = n, .cu = w->ucost, .idbuf = (uint32_t *)(void *)(wb + picks_bytes(n))};
    for (int o = 0; o < PZ_MCKP_OPTS; o++) {
        A.e[o] = w->err[o];
        A.c[o] = w->cost[o];
    }
    uint32_t *const *AC = A.cu ? NULL : A.c;
    uint32_t lo = lam_lo > 0 && lam_lo < FLT_MAX ? f2u(lam_lo) : 0;
    uint32_t hi = lam_hi > 0 && lam_hi < FLT_MAX ? f2u(lam_hi) : KEY_MAX;
    if (hi <= lo) {
        lo = 0;
        hi = KEY_MAX;
    }
    uint64_t clo = eval(A.e, AC, A.cu, n, u2f(lo), ch_lo), chi = 0;
    if (clo <= capacity && lo > 0) {                   /* bracket too high */
        hi = lo;
        chi = clo;
        swap(&ch_lo, &ch_hi);
        lo = 0;
        clo = eval(A.e, AC, A.cu, n, 0.0f, ch_lo);
    } else if (clo > capacity) {
        chi = eval(A.e, AC, A.cu, n, u2f(hi), ch_hi);
        if (chi > capacity) {                          /* bracket too low */
            lo = hi;
            clo = chi;
            swap(&ch_lo, &ch_hi);
            hi = KEY_MAX;
            chi = eval(A.e, AC, A.cu, n, u2f(hi), ch_hi);
        }
    }
    uint64_t cost;
    double err;
    if (clo <= capacity) {                             /* lo = 0: the all-best choice fits */
        memcpy(choice, ch_lo, n);
        hi = lo = 0;
        cost = clo;
        err = 0;
        for (size_t i = 0; i < n; i++) err += A.e[ch_lo[i]][i];
    } else {
        uint64_t fcost = 0;
        double ferr = 0;
        fillset_ F;
        F.n = SIZE_MAX;
        compact(&A, ch_lo, ch_hi, choice, &fcost, &ferr);
        if (A.m <= FILL_SET) fill_snap(&A, &F);
        int interp = 1;
        while (hi - lo > 1) {
            /* the next multiplier: where the cost, linear in the bits of
             * lambda (about log lambda) between the ends, meets the capacity;
             * a plain halving after a step that did not halve the bracket */
            uint32_t span = hi - lo, mid = lo + span / 2;
            if (interp && clo > chi) {
                double t = (double)(clo - capacity) / (double)(clo - chi);
                uint32_t off = (uint32_t)(t * (double)span), margin = span / 64 + 1;
                off = off < margin ? margin : off > span - margin ? span - margin : off;
                if (off >= 1 && off < span) mid = lo + off;
            }
            uint64_t cm = fcost + eval(A.e, AC, A.cu, A.m, u2f(mid), ch_mid);
            if (cm <= capacity) {
                hi = mid;
                chi = cm;
                swap(&ch_hi, &ch_mid);
            } else {
                lo = mid;
                clo = cm;
                swap(&ch_lo, &ch_mid);
            }
            interp = hi - lo <= span / 2;
            compact(&A, ch_lo, ch_hi, choice, &fcost, &ferr);
            if (F.n == SIZE_MAX && A.m <= FILL_SET) fill_snap(&A, &F);
        }
        if (F.n == SIZE_MAX) fill_snap(&A, &F);
        /* pick(hi) everywhere; the tied items switch to pick(lo) in index
         * order while that fits */
        uint64_t used = fcost;
        err = ferr;
        for (size_t j = 0; j < A.m; j++) {
            used += acost(&A, ch_hi[j], j);
            err += A.e[ch_hi[j]][j];
        }
        uint64_t room = capacity - used;              /* used <= capacity: cost(hi) <= capacity */
        int crit_seen = 0;
        for (size_t j = 0; j < A.m; j++) {
            int a = ch_hi[j], b = ch_lo[j];
            size_t i = A.id ? A.id[j] : j;
            choice[i] = (uint8_t)a;
            if (a == b || !(A.e[b][j] < A.e[a][j])) continue;
            int64_t dc = (int64_t)acost(&A, b, j) - (int64_t)acost(&A, a, j);
            if (dc <= 0 || (uint64_t)dc <= room) {
                room -= (uint64_t)dc;
                err -= (double)A.e[a][j] - (double)A.e[b][j];
                choice[i] = (uint8_t)b;
            } else if (!crit_seen) {
                info->crit = (double)A.e[a][j] - (double)A.e[b][j];
                crit_seen = 1;
            }
        }
        /* fill: the best error drop per cost that fits, among the fill set */
        room = fill_room(&F, choice, room, &err);
        cost = capacity - room;
    }
    free(own);
    info->cost = cost;
    info->err = err;
    info->lambda = u2f(hi);
    *lo_key = lo;
}

void pz_mckp_solve_soa(pz_mckp_soa *s, size_t n, uint64_t capacity, float lam_lo, float lam_hi, int want_gap,
                       uint8_t *choice, pz_mckp_info *info, void *work) {
    memset(info, 0, sizeof *info);
    uint64_t base = 0;
    if (s->ucost) {
        base = (uint64_t)n * s->ucost[0];
    } else {
        for (size_t i = 0; i < n; i++) base += s->cost[0][i];
    }
    memset(choice, 0, n);
    info->cost = base;
    info->base_fits = base <= capacity;
    info->gap = want_gap ? 0.0 : NAN;
    if (base > capacity || n == 0) {
        /* (the error of the all-zero choice is wanted only here: the
         * solver computes its own) */
        double err0 = 0;
        for (size_t i = 0; i < n; i++) err0 += s->err[0][i];
        info->err = err0;
        return;
    }

    /* work arrays: the caller's unless the gap (which needs every item at
     * the end) is wanted */
    pz_mckp_soa w = *s;
    uint8_t *blk = NULL;
    if (want_gap) {
        blk = xmalloc(n * 32 + 64);
        for (int o = 0; o < PZ_MCKP_OPTS; o++) {
            w.err[o] = (float *)(void *)(blk + (size_t)o * n * 4);
            w.cost[o] = (uint32_t *)(void *)(blk + (size_t)(4 + o) * n * 4);
            memcpy(w.err[o], s->err[o], n * 4);
            if (!s->ucost) memcpy(w.cost[o], s->cost[o], n * 4);
        }
    }
    uint32_t lo;
    solve(&w, n, capacity, lam_lo, lam_hi, choice, info, &lo, work);
    free(blk);
    info->upgrades = count_ne(choice, NULL, n);
    if (want_gap && info->lambda > 0) {
        double lb = lower_bound(s, n, capacity, (double)info->lambda);
        double lb2 = lower_bound(s, n, capacity, (double)u2f(lo));
        lb = lb2 > lb ? lb2 : lb;
        info->gap = info->err > lb ? info->err - lb : 0.0;
    }
}
