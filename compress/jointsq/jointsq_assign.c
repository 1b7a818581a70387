/* jointsq_assign.c: which width each group of a JointSQ tensor gets, around
 * the pass of jointsq_solve.c: the model's scales, the knapsack's item and
 * candidate arrays, the Rice parameter that codes a map best and, when the
 * scales were searched on a sample, the passes over all groups that bracket
 * the critical multiplier and the exact solve among their candidates (the
 * algorithm: compress/jointsq/jointsq.c). */
#include "compress/jointsq/jointsq_priv.h"

/* ---- the model and the item arrays ---- */

void pz_jsq_model(jsq_model *md, float M, const float s[4]) {
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

size_t pz_jsq_soa_bytes(size_t n) { return (n + 16) * 32 + 64; }

pz_mckp_soa pz_jsq_soa_at(void *blk, size_t n) {
    pz_mckp_soa s;
    s.ucost = NULL;
    n += 16;                                      /* slack for vector stores */
    uint8_t *b = blk;
    for (int o = 0; o < 4; o++) {
        s.err[o] = (float *)(void *)(b + (size_t)o * n * 4);
        s.cost[o] = (uint32_t *)(void *)(b + (size_t)(4 + o) * n * 4);
    }
    return s;
}

pz_mckp_soa pz_jsq_soa_alloc(size_t n, void **blk) {
    *blk = pz_alloc_huge(pz_jsq_soa_bytes(n));
    return pz_jsq_soa_at(*blk, n);
}

size_t pz_jsq_cside_bytes(size_t cap) { return 3 * (cap + 16) * sizeof(uint32_t); }

jsq_cside pz_jsq_cside_at(void *blk, size_t cap) {
    jsq_cside c;
    cap += 16;
    uint32_t *b = blk;
    c.id = b;
    c.hi = b + cap;
    c.key = b + 2 * cap;
    c.blk = b;
    return c;
}

jsq_cside pz_jsq_cside_alloc(size_t cap) { return pz_jsq_cside_at(pz_alloc_huge(pz_jsq_cside_bytes(cap)), cap); }

/* bit i set iff cls[i] != 0, for the n <= 64 groups from cls (nz64 for
 * a full 64) */
static inline uint64_t jsq_kept64(const uint8_t *cls, size_t n) {
    if (n == 64) return nz64(cls);
    uint64_t m = 0;
    for (size_t j = 0; j < n; j++) m |= (uint64_t)(cls[j] != 0) << j;
    return m;
}

/* The Rice parameter that codes the map of cls[] in the fewest bits (the
 * smallest such k): sum over runs r of floor(r / 2^k), from a histogram of
 * the run lengths. The runs come from the kept groups' bit masks, 64
 * groups at a time: a kept group after a kept one (run 0, the most common)
 * is counted by a popcount, and only those after a dropped group (where a
 * run ends) take a step of their own (a step per group, with its branch or
 * its store to the histogram, cost five times as much). */
int pz_jsq_best_k(const uint8_t *cls, size_t ng) {
    enum { RH = 1024 };
    uint32_t h[RH];
    uint64_t big[JSQ_MAX_K + 1];
    memset(h, 0, sizeof h);
    memset(big, 0, sizeof big);
    size_t kept = 0, last = 0;                       /* last: the group after the last kept one */
    uint64_t prev = 1;                               /* group i0 - 1 kept (group -1: yes) */
    for (size_t i0 = 0; i0 < ng; i0 += 64) {
        size_t n = ng - i0 < 64 ? ng - i0 : 64;
        uint64_t m = jsq_kept64(cls + i0, n), after = m << 1 | prev;
        kept += (size_t)__builtin_popcountll(m);
        h[0] += (uint32_t)__builtin_popcountll(m & after);
        for (uint64_t ends = m & ~after; ends; ends &= ends - 1) {
            unsigned p = (unsigned)__builtin_ctzll(ends);
            uint64_t below = m & ((1ull << p) - 1);
            if (below) last = i0 + 64 - (size_t)__builtin_clzll(below);
            size_t run = i0 + p - last;
            if (run < RH) h[run]++;
            else for (int k = 0; k <= JSQ_MAX_K; k++) big[k] += run >> k;
        }
        if (m) last = i0 + 64 - (size_t)__builtin_clzll(m);
        prev = m >> 63;
    }
    size_t run = ng - last;                          /* the final run */
    if (run < RH) h[run]++;
    else for (int k = 0; k <= JSQ_MAX_K; k++) big[k] += run >> k;
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

/* ---- every group's class on a large tensor ---- */

/* The candidate buffer of the passes over all groups: the items and their
 * side arrays, in the scratch for the default size, in buffers of their own
 * (cblk, csblk: the owner frees them) once a retry outgrows it. */
typedef struct {
    pz_mckp_soa cand;
    jsq_cside cs;
    size_t ccap;
    void *cblk, *csblk;
} jsq_cands;

/* The bracket for the next pass after one that missed: where cost, linear in
 * log(lambda) through the two points measured, meets the capacity, of a
 * width for about ccap / 4 candidates when the bracket held the multiplier
 * (too many candidates), else half as wide as this one; kept inside the
 * bounds (lamL, lamU) the passes found and at most a quarter of their span
 * wide, so the search cannot run away. */
static void jsq_next_bracket(const jsq_passb *r, uint64_t capacity, int ok_hi, int ok_lo, size_t ccap, float lamL,
                             float lamU, float *lam_lo, float *lam_hi) {
    double l0 = log(*lam_lo > 0 ? *lam_lo : FLT_MIN), l1 = log(*lam_hi < FLT_MAX ? *lam_hi : FLT_MAX);
    double width = l1 - l0, le, w;
    if (r->cost_lo > r->cost_hi && *lam_lo > 0) {
        double t = ((double)r->cost_lo - (double)capacity) / ((double)r->cost_lo - (double)r->cost_hi);
        le = l0 + t * width;
    } else {
        le = ok_hi ? l0 - 2 * width : l1 + 2 * width;
    }
    if (ok_hi && ok_lo) w = 0.5 * width * (double)ccap / 4 / (double)r->ncand;
    else w = 0.5 * width;
    if (lamL > 0 && lamU < INFINITY) {
        double a = log(lamL), bu = log(lamU);
        if (le <= a || le >= bu) le = 0.5 * (a + bu);
        if (w > 0.25 * (bu - a)) w = 0.25 * (bu - a);
    }
    *lam_lo = (float)exp(le - w);
    *lam_hi = (float)exp(le + w);
    if (lamL > 0 && *lam_lo < lamL) *lam_lo = lamL;
    if (*lam_hi > lamU) *lam_hi = lamU;
}

/* Passes over all groups until one brackets the critical multiplier
 * (cost(lam_hi) <= capacity < cost(lam_lo)) with at most ccap candidates:
 * then cls holds pick(lam_hi) for every group and *r the candidates. After 8
 * passes that bracket it with too many (many groups tied at one multiplier)
 * the candidates are all taken; after 40 (fp32 rounding gone wild) every
 * group is a candidate. */
static void jsq_bracket_passes(const jsq_enc *e, const jsq_model *md, int k, uint64_t capacity, float *lam_lo_,
                               float *lam_hi_, uint8_t *cls, jsq_cands *cb, jsq_passb *r) {
    float lam_lo = *lam_lo_, lam_hi = *lam_hi_;
    float lamL = 0, lamU = INFINITY;   /* cost > capacity at lamL, <= capacity at lamU */
    for (int tries = 0;; tries++) {
        if (!(lam_lo < lam_hi)) lam_lo = lam_hi * 0.5f;
        pz_jsq_pass_b(e->x, &e->g, e->gm, md, k, lam_lo, lam_hi < FLT_MAX ? lam_hi : FLT_MAX, cls, &cb->cand, &cb->cs,
                      cb->ccap, r);
        int ok_hi = r->cost_hi <= capacity, ok_lo = r->cost_lo > capacity || lam_lo == 0;
        if (ok_hi && ok_lo && r->ncand <= cb->ccap) break;
        if ((ok_hi && ok_lo && tries >= 8) || tries >= 40) {
            if (!(ok_hi && ok_lo)) {
                lam_lo = 0;
                lam_hi = INFINITY;
                r->ncand = e->g.ng;
            }
            free(cb->cblk);
            free(cb->csblk);
            cb->ccap = r->ncand;
            cb->cand = pz_jsq_soa_alloc(cb->ccap, &cb->cblk);
            cb->cs = pz_jsq_cside_alloc(cb->ccap);
            cb->csblk = cb->cs.blk;
            pz_jsq_pass_b(e->x, &e->g, e->gm, md, k, lam_lo, lam_hi < FLT_MAX ? lam_hi : FLT_MAX, cls, &cb->cand,
                          &cb->cs, cb->ccap, r);
            break;
        }
        if (r->cost_lo > capacity) lamL = lam_lo > lamL ? lam_lo : lamL;
        else lamU = lam_lo < lamU ? lam_lo : lamU;
        if (r->cost_hi > capacity) lamL = lam_hi > lamL ? lam_hi : lamL;
        else lamU = lam_hi < lamU ? lam_hi : lamU;
        if (!(lamL < lamU)) lamL = 0;                       /* (not monotone: start over) */
        if (lamU == 0) {                                    /* cost(0) fits: the all-best choice */
            lam_lo = lam_hi = 0;
            continue;
        }
        jsq_next_bracket(r, capacity, ok_hi, ok_lo, cb->ccap, lamL, lamU, &lam_lo, &lam_hi);
    }
    *lam_lo_ = lam_lo;
    *lam_hi_ = lam_hi;
}

/* The exact solver on the candidates with the capacity the other groups
 * leave, its choices written into cls; the class counts and maxima are the
 * pass's over the non-candidates plus the candidates' (in vector loops: a
 * loop that updates gcount[c] element by element waits on its own stores). */
static void jsq_solve_candidates(const jsq_enc *e, const jsq_cands *cb, const jsq_passb *r, uint64_t capacity,
                                 float lam_lo, float lam_hi, uint8_t *cls, size_t gcount[4], uint32_t cmax[4]) {
    size_t nc = r->ncand;
    const uint32_t *hi = cb->cs.hi;
    uint64_t fixed_cost = r->cost_hi;
    for (size_t j = 0; j < nc; j++) fixed_cost -= cb->cand.ucost ? cb->cand.ucost[hi[j]] : cb->cand.cost[hi[j]][j];
    uint8_t *cch = pz_scratch_get(e->scr, JSQ_S_CCH, nc ? nc : 1);
    pz_mckp_info info;
    /* the solver's work memory: in the scratch for the default candidate
     * buffer, its own beyond that */
    size_t ccap0 = pz_jsq_default_ccap(e->g.ng);
    void *mw = nc <= ccap0 ? pz_scratch_get(e->scr, JSQ_S_MCKP, pz_mckp_work_bytes(ccap0)) : NULL;
    pz_mckp_soa cand = cb->cand;
    pz_mckp_solve_soa(&cand, nc, capacity - fixed_cost, lam_lo, lam_hi, 0, cch, &info, mw);
    for (int c = 0; c < 4; c++) {
        gcount[c] = (size_t)r->nh[c];
        cmax[c] = r->nmax[c];
    }
    size_t w1 = 0, w2 = 0, w3 = 0, now_[4] = {0, 0, 0, 0};
#pragma omp simd reduction(+ : w1, w2, w3)
    for (size_t j = 0; j < nc; j++) {
        w1 += hi[j] == 1;
        w2 += hi[j] == 2;
        w3 += hi[j] == 3;
    }
    pz_jsq_class_stats(cch, nc, (const float *)(const void *)cb->cs.key, now_, cmax);
    gcount[1] = gcount[1] - w1 + now_[1];
    gcount[2] = gcount[2] - w2 + now_[2];
    gcount[3] = gcount[3] - w3 + now_[3];
    for (size_t j = 0; j < nc; j++) cls[cb->cs.id[j]] = cch[j];
}

/* Every group's class when the scales were searched on a sample: bracket the
 * critical multiplier on the sample, pass over all groups, then solve exactly
 * among the candidates (the groups whose pick changes inside the bracket).
 * Returns 1 with the class counts and maxima in gcount, cmax (counted on the
 * way), 0 when the caller must count them. */
int pz_jsq_assign_all(const jsq_enc *e, const jsq_best *best, uint8_t *cls, size_t gcount[4], uint32_t cmax[4]) {
    const int k = best->k;
    const size_t ng = e->g.ng;
    uint64_t capacity = e->room_bits > 1 + (uint64_t)k ? (e->room_bits - 1 - (uint64_t)k) << k : 0;
    if ((uint64_t)ng > capacity) {                          /* even the all-dropped map is over */
        memset(cls, 0, ng);
        return 0;
    }
    jsq_model md;
    pz_jsq_model(&md, e->M, best->sc);
    uint32_t ucost[4];
    pz_mckp_soa ss = pz_jsq_soa_at(pz_scratch_get(e->scr, JSQ_S_SAMPLE, pz_jsq_soa_bytes(e->ms)), e->ms);
    pz_jsq_soa_fill(e->sx, e->snel, e->g.G, e->sgm, &md, k, &ss, ucost);
    const double delta = pz_jsq_tune.delta, scap = (double)capacity * e->sfrac;
    float lam_hi = pz_mckp_lambda(&ss, e->ms, (uint64_t)(scap * (1 - delta)), 12, best->lam, NULL, NULL, NULL);
    float lam_lo = pz_mckp_lambda(&ss, e->ms, (uint64_t)(scap * (1 + delta)), 12, best->lam, NULL, NULL, NULL);
    jsq_cands cb;
    cb.ccap = pz_jsq_default_ccap(ng);
    cb.cand = pz_jsq_soa_at(pz_scratch_get(e->scr, JSQ_S_CAND, pz_jsq_soa_bytes(cb.ccap)), cb.ccap);
    cb.cs = pz_jsq_cside_at(pz_scratch_get(e->scr, JSQ_S_CSIDE, pz_jsq_cside_bytes(cb.ccap)), cb.ccap);
    cb.cblk = cb.csblk = NULL;
    jsq_passb r;
    jsq_bracket_passes(e, &md, k, capacity, &lam_lo, &lam_hi, cls, &cb, &r);
    jsq_solve_candidates(e, &cb, &r, capacity, lam_lo, lam_hi, cls, gcount, cmax);
    free(cb.cblk);
    free(cb.csblk);
    return 1;
}
