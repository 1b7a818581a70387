/* mckp.h: multiple-choice knapsack by Lagrangian relaxation (private to
 * compress/; used by jointsq.c, tested against brute force).
 *
 * Problem. n items; item i has PZ_MCKP_OPTS options o = 0..3 with an integer
 * cost c[o] and an error e[o] >= 0 (e = INFINITY: option not allowed).
 * Costs ascend strictly with o and option 0 is always allowed. Choose one
 * option per item so that the sum of costs <= capacity and the sum of errors
 * is minimal.
 *
 * Method. For a multiplier lambda >= 0 every item independently takes
 *     pick(lambda) = argmin_o  e[o] + lambda * c[o]      (fp32, ties to the lower o)
 * (the per-item threshold rule of the Lagrangian: a larger lambda never buys
 * a dearer option, up to fp32 rounding). cost(lambda) = sum of picked costs
 * falls as lambda grows, from the all-best choice at lambda = 0 to all option
 * 0 at FLT_MAX (where every e + lambda c is +inf). The solver:
 *  1. searches the bits of lambda (fp32, so about 31 steps at most) for two
 *     consecutive floats lo < hi with cost(hi) <= capacity < cost(lo); each
 *     step tries where the cost, linear in the bits of lambda between the
 *     ends, meets the capacity, and halves the bracket after a step that did
 *     not; after each step the items whose pick is the same at both ends are
 *     fixed and leave the active set (compacted in place), so the work
 *     shrinks fast; a bracket known in advance (lam_lo, lam_hi) is checked
 *     and used;
 *  2. takes pick(hi) for every item; the items still active (pick(lo) differs:
 *     they are tied at the critical multiplier) are switched to pick(lo), in
 *     index order, while the switch fits the room left (ties broken by index);
 *     the first tied switch that does not fit is the critical upgrade;
 *  3. fill: while room is left, takes the upgrade with the best error drop per
 *     cost that fits, among the items active when the set first had 256 or
 *     fewer (those with multipliers nearest the critical one). This only
 *     lowers the error.
 *
 * Gap. For every lambda >= 0,  LB(lambda) = sum_i min_o (e_io + lambda c_io)
 * - lambda * capacity  is a lower bound of the optimum (weak duality), and
 * max over lambda of LB is the LP relaxation's optimum. The solver reports
 *     gap = err - max(LB(lo), LB(hi))  >=  err - optimal err,
 * a certificate computed from the solution (0 when the all-best choice
 * fits: then the solution is optimal). Before the fill, err - LB(hi) =
 * hi * (room left after step 2), and that room is below the cost of the
 * critical upgrade, whose error drop is hi times its cost (it is tied at hi);
 * so a priori
 *     err - optimal err <= gap < crit = e[a] - e[b] of the critical upgrade,
 * at most one item's e[0] - min_o e[o] (up to fp32 rounding of the picks).
 * info->gap and info->crit report both. */
#ifndef PZ_MCKP_H
#define PZ_MCKP_H

#include <stddef.h>
#include <stdint.h>

#define PZ_MCKP_OPTS 4

typedef struct {
    uint32_t cost[PZ_MCKP_OPTS];   /* strictly ascending */
    float err[PZ_MCKP_OPTS];       /* >= 0, INFINITY = not allowed; err[0] finite */
} pz_mckp_item;

typedef struct {
    uint64_t cost;      /* sum of chosen costs (<= capacity when base_fits) */
    double err;         /* sum of chosen errors */
    double gap;         /* certified bound on err - optimal err (see above) */
    double crit;        /* error drop of the critical upgrade (a priori bound), 0 if none */
    float lambda;       /* the critical multiplier hi (0: the all-best choice fits) */
    int base_fits;      /* 0 when even all-option-0 exceeds the capacity */
    size_t upgrades;    /* items not at option 0 */
} pz_mckp_info;

/* Items as arrays (structure of arrays): err[o][i], cost[o][i]; when ucost
 * is not NULL every item has the costs ucost[o] and cost[] is not used. */
typedef struct {
    float *err[PZ_MCKP_OPTS];
    uint32_t *cost[PZ_MCKP_OPTS];
    const uint32_t *ucost;
} pz_mckp_soa;

/* The pick rule (scalar form; the vector loops compute the same). */
static inline int pz_mckp_pick(float e0, float e1, float e2, float e3, float c0, float c1, float c2,
                               float c3, float lam) {
    float v0 = e0 + lam * c0, v1 = e1 + lam * c1, v2 = e2 + lam * c2, v3 = e3 + lam * c3;
    int a = 0;
    float b = v0;
    if (v1 < b) { a = 1; b = v1; }
    if (v2 < b) { a = 2; b = v2; }
    if (v3 < b) a = 3;
    return a;
}

#if defined(__AVX512F__)
#include <immintrin.h>
/* The same rule on 16 items: v[c] = e_c + lam * c_c; option c >= 1 may win
 * only where ok[c] (where it may not, its error is INFINITY: it never would).
 * m[c - 1] receives where option c took over from the best so far. */
static inline __m512i pz_mckp_vpick(const __m512 v[PZ_MCKP_OPTS], const __mmask16 ok[PZ_MCKP_OPTS],
                                    __mmask16 m[PZ_MCKP_OPTS - 1]) {
    __m512 b = v[0];
    __m512i a = _mm512_setzero_si512();
    for (int c = 1; c < PZ_MCKP_OPTS; c++) {
        m[c - 1] = _mm512_mask_cmp_ps_mask(ok[c], v[c], b, _CMP_LT_OQ);
        b = _mm512_mask_mov_ps(b, m[c - 1], v[c]);
        a = _mm512_mask_mov_epi32(a, m[c - 1], _mm512_set1_epi32(c));
    }
    return a;
}

/* Picks counted per option in each lane, 10 bits per option c >= 1 (option c
 * adds 1 << 10 (c - 1)): add at most 1023 vectors, then empty the counts
 * into n[1..3] with pz_mckp_vcount_flush. */
static inline __m512i pz_mckp_vcount(__m512i cnt, __m512i a) {
    const __m512i tab = _mm512_setr_epi32(0, 1, 1 << 10, 1 << 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_add_epi32(cnt, _mm512_permutexvar_epi32(a, tab));
}

static inline void pz_mckp_vcount_flush(__m512i *cnt, uint64_t n[PZ_MCKP_OPTS]) {
    const __m512i f = _mm512_set1_epi32(0x3ff);
    n[1] += (uint64_t)_mm512_reduce_add_epi32(_mm512_and_si512(*cnt, f));
    n[2] += (uint64_t)_mm512_reduce_add_epi32(_mm512_and_si512(_mm512_srli_epi32(*cnt, 10), f));
    n[3] += (uint64_t)_mm512_reduce_add_epi32(_mm512_srli_epi32(*cnt, 20));
    *cnt = _mm512_setzero_si512();
}
#elif defined(__AVX2__)
#include "compress/core/vec8.h"
/* The same rule on 8 items (x86-64-v3): ok[c] all-ones lanes where option c
 * may win (NULL: everywhere); m[c - 1] as above, as all-ones lanes. */
static inline __m256i pz_mckp_vpick8(const __m256 v[PZ_MCKP_OPTS], const __m256 *ok, __m256 m[PZ_MCKP_OPTS - 1]) {
    __m256 b = v[0];
    __m256i a = _mm256_setzero_si256();
    for (int c = 1; c < PZ_MCKP_OPTS; c++) {
        __m256 lt = _mm256_cmp_ps(v[c], b, _CMP_LT_OQ);
        m[c - 1] = ok ? _mm256_and_ps(lt, ok[c]) : lt;
        b = ok ? _mm256_blendv_ps(b, v[c], m[c - 1]) : _mm256_min_ps(v[c], b);   /* (min: v[c] < b ? v[c] : b) */
        a = _mm256_castps_si256(
            _mm256_blendv_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(_mm256_set1_epi32(c)), m[c - 1]));
    }
    return a;
}

/* pz_mckp_vcount on 8 lanes: at most 1023 vectors between flushes */
static inline __m256i pz_mckp_vcount8(__m256i cnt, __m256i a) {
    const __m256i tab = _mm256_setr_epi32(0, 1, 1 << 10, 1 << 20, 0, 0, 0, 0);
    return _mm256_add_epi32(cnt, _mm256_permutevar8x32_epi32(tab, a));
}

static inline void pz_mckp_vcount8_flush(__m256i *cnt, uint64_t n[PZ_MCKP_OPTS]) {
    const __m256i f = _mm256_set1_epi32(0x3ff);
    n[1] += pz_v8_hsum_epi32(_mm256_and_si256(*cnt, f));
    n[2] += pz_v8_hsum_epi32(_mm256_and_si256(_mm256_srli_epi32(*cnt, 10), f));
    n[3] += pz_v8_hsum_epi32(_mm256_srli_epi32(*cnt, 20));
    *cnt = _mm256_setzero_si256();
}
#endif

/* Solves the problem; choice[i] receives the option index of item i. When the
 * options 0 alone exceed the capacity, all items get option 0 and
 * info->base_fits = 0. Allocates O(n) scratch (aborts on out of memory). */
void pz_mckp_solve(const pz_mckp_item *items, size_t n, uint64_t capacity,
                   uint8_t *choice, pz_mckp_info *info);

/* The same on arrays. lam_lo < lam_hi: a bracket expected to hold the
 * critical multiplier (0 and INFINITY when unknown); a wrong bracket only
 * costs time. want_gap = 0 skips the two passes that compute info->gap (then
 * NAN; info->crit is always set) and lets the solver use s's arrays as
 * scratch (their contents are lost); want_gap = 1 leaves
 * them as they were. */
void pz_mckp_solve_soa(pz_mckp_soa *s, size_t n, uint64_t capacity, float lam_lo, float lam_hi,
                       int want_gap, uint8_t *choice, pz_mckp_info *info, void *work);

/* work: NULL, or pz_mckp_work_bytes(n) bytes (or more) the solver may use
 * (a caller that solves often keeps them: fresh pages cost their zeroing
 * on every call). */
size_t pz_mckp_work_bytes(size_t n);

/* pick(lam) of n items whose costs are the same for all (cost[o]); writes
 * the picks to choice and returns the sum of their costs. */
uint64_t pz_mckp_pick_uniform(float *const err[PZ_MCKP_OPTS], const uint32_t cost[PZ_MCKP_OPTS], size_t n,
                              float lam, uint8_t *choice);

/* An approximate critical multiplier, for estimates: a lambda with
 * cost(lambda) <= capacity < cost(lambda') for some lambda' < lambda within a
 * relative 2^-rel_bits (rel_bits <= 23) of it; 0 when cost(0) <= capacity.
 * guess > 0 starts the search around it. *cost, *err and choice (n bytes;
 * each optional) receive the cost, error and picks of pick(lambda). */
float pz_mckp_lambda(const pz_mckp_soa *s, size_t n, uint64_t capacity, int rel_bits, float guess,
                     uint64_t *cost, double *err, uint8_t *choice);

/* Exhaustive search (tests only): optimal sum of errors over all 4^n
 * assignments within the capacity, n <= 12; writes the best choice. */
double pz_mckp_brute(const pz_mckp_item *items, size_t n, uint64_t capacity, uint8_t *choice);

#endif
