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
 * Choosing the widths: a multiple-choice knapsack (compress/jointsq/mckp.h), one item
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
 * The solver (compress/jointsq/mckp.h) is Lagrangian: for a multiplier lambda each
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
#include "compress/jointsq/jointsq_priv.h"

/* ---- spec ---- */

/* one option of a jointsq spec (after its leading number) */
static int jsq_opt(const char *spec, const pz_spec_opt *o, pz_codec_params *p, pz_status *st) {
    if (!pz_spec_key_is(o, "group") || !o->val) return 0;
    uint64_t g;
    *st = pz_spec_uint(spec, o->voff, o->val, o->vlen, 1, JSQ_MAX_GROUP, &g, "jointsq group");
    if (*st == PZ_OK) p->group_size = (uint32_t)g;
    return 1;
}

static pz_status jsq_parse(pz_codec_params *p, const char *args, const char *spec, size_t where) {
    static const pz_spec_lead lead = {"jointsq budget", "jointsq needs a budget in bits per element, as in jointsq:1.5",
                                      0.0, JSQ_MAX_BITS, 0.0f, "jointsq budget must be > 0", jsq_opt, "jointsq",
                                      "group=<N>",
                                      {.id = PZ_CODEC_JOINTSQ, .group_mode = PZ_GROUP_BLOCK,
                                       .group_size = JSQ_DEFAULT_GROUP}};
    return pz_spec_parse_lead(spec, where, args, &lead, &p->budget, p);
}

static void jsq_format(const pz_codec_params *p, char *buf, size_t cap) {
    char b[64];
    pz_spec_format_float(p->budget, b);
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


pz_status pz_jsq_geom(const pz_codec_params *p, const pz_shape *s, jsq_geom *g) {
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
    if (pz_jsq_geom(p, s, &g) != PZ_OK) return 0;
    size_t all = (3 * g.ng + 7) / 8 + 12 + g.n + 2;
    return g.pmax < all ? g.pmax : all;
}

/* ---- encode ----
 * (the scratch slots, the phases' shared state and the candidate buffer's
 * size: jointsq_priv.h) */

/* Groups sampled for the scale search when there are more than this. */
static size_t jsq_sample_limit(size_t G) {
    size_t lim = G == 1 ? pz_jsq_tune.sample : JSQ_SAMPLE_ELEMS / G;
    if (lim < 4096) lim = 4096;
    if (lim > pz_jsq_tune.sample) lim = pz_jsq_tune.sample;
    return lim;
}

/* The scratch an encode keeps for this shape: the slots above at their
 * sizes for the default candidate buffer (a retry that outgrows it takes
 * memory of its own for that call). */
static size_t jsq_scratch_bound(const pz_codec_params *p, const pz_shape *s) {
    jsq_geom g;
    if (pz_jsq_geom(p, s, &g) != PZ_OK) return 0;
    size_t lim = jsq_sample_limit(g.G), ms = g.ng <= lim ? g.ng : lim;
    size_t b = (g.G > 1 ? (g.ng + 16) * sizeof(float) : 0) + pz_jsq_soa_bytes(ms);
    if (g.ng > lim) {
        size_t ccap = pz_jsq_default_ccap(g.ng);
        b += ms * g.G * sizeof(float) + ms * sizeof(float) + g.ng + pz_jsq_soa_bytes(ccap) +
             pz_jsq_cside_bytes(ccap) + ccap + pz_mckp_work_bytes(ccap);
    }
    return b;
}


/* Solves the sample items s (ms of them) at capacity cap: the exact solver
 * when the sample is the whole tensor, else the approximate multiplier;
 * choice[] and the model error. */
static double jsq_solve_sample(pz_mckp_soa *s, size_t ms, uint64_t cap, int exact, float *lam,
                               uint8_t *choice) {
    if (exact) {
        pz_mckp_info info;
        pz_mckp_solve_soa(s, ms, cap, 0.0f, INFINITY, 0, choice, &info, NULL);
        *lam = info.lambda;
        return info.base_fits ? info.err : INFINITY;
    }
    double err;
    *lam = pz_mckp_lambda(s, ms, cap, 10, *lam, NULL, &err, choice);
    return err;
}
#if defined(__AVX512F__)
/* The group maxima that whole 512-bit vectors reach, from group 0: for G = 2,
 * 4, 8, 16 / G groups a vector, folded within each group by shuffles and
 * compressed to one lane per group; for G >= 16, one group at a time with a
 * masked load for its tail. Returns their max and, in *gi, the first group
 * left to the scalar loop. */
static uint32_t jsq_group_max_avx512(const float *x, const jsq_geom *g, float *gm, size_t *gi_) {
    const size_t G = g->G, ng = g->ng;
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    uint32_t kmax = 0;
    size_t gi = 0;
    if (G == 2 || G == 4 || G == 8) {
        const __mmask16 pick = G == 8 ? 0x0101 : G == 4 ? 0x1111 : 0x5555;
        const size_t per = 16 / G;
        __m512i mx = _mm512_setzero_si512();
        for (; gi + per <= g->n / G; gi += per) {
            __m512i v = _mm512_and_si512(_mm512_loadu_si512((const void *)(x + gi * G)), absm);
            if (G == 8) v = _mm512_max_epu32(v, _mm512_shuffle_i32x4(v, v, 0xB1));
            if (G >= 4) v = _mm512_max_epu32(v, _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)0x4E));
            v = _mm512_max_epu32(v, _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)0xB1));
            mx = _mm512_max_epu32(mx, v);
            _mm512_storeu_si512((void *)(gm + gi), _mm512_maskz_compress_epi32(pick, v));
        }
        kmax = _mm512_reduce_max_epu32(mx);
    } else if (G >= 16) {
        for (; gi < ng; gi++) {
            size_t b = gi * G, e = b + G < g->n ? b + G : g->n;
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
    *gi_ = gi;
    return kmax;
}
#endif

/* The tensor's max |x| (as its bits, pz_abs_key) and, when G > 1, every
 * group's max |x| in *gm (scratch): the groups' magnitudes decide which
 * widths they may take (no clipping) and where the scale quantiles lie. */
static uint32_t jsq_magnitudes(const float *x, const jsq_geom *g, pz_scratch *scr, float **gm_) {
    const size_t G = g->G, ng = g->ng;
    uint32_t kmax = 0;
    *gm_ = NULL;
    if (G == 1) {
#pragma omp simd reduction(max : kmax)
        for (size_t i = 0; i < g->n; i++) {
            uint32_t k = pz_abs_key(x[i]);
            kmax = k > kmax ? k : kmax;
        }
        return kmax;
    }
    float *gm = pz_scratch_get(scr, JSQ_S_GM, (ng + 16) * sizeof *gm);
    size_t gi = 0;
#if defined(__AVX512F__)
    kmax = jsq_group_max_avx512(x, g, gm, &gi);
#endif
    for (; gi < ng; gi++) {
        size_t b = gi * G, e = b + G < g->n ? b + G : g->n;
        uint32_t m = 0;
#pragma omp simd reduction(max : m)
        for (size_t i = b; i < e; i++) {
            uint32_t k = pz_abs_key(x[i]);
            m = k > m ? k : m;
        }
        gm[gi] = pz_u2f(m);
        kmax = m > kmax ? m : kmax;
    }
    *gm_ = gm;
    return kmax;
}

/* The Rice parameter the search starts from: the mean run length of the map
 * if the budget went to 2-bit groups; then raised until the all-dropped map
 * (ng / 2^k + 1 + k bits) fits in half the room, so a solution exists. */
static int jsq_initial_k(uint64_t room_bits, size_t G, size_t ng) {
    int k = 0;
    double keep = (double)room_bits / (4.0 + 2.0 * (double)G);
    double mrun = keep >= (double)ng ? 1.0 : (double)ng / fmax(keep, 1.0);
    while (k < JSQ_MAX_K && ldexp(1.0, k + 1) <= mrun * 0.69) k++;
    while (k < JSQ_MAX_K && (ng >> k) + 2 + (uint64_t)k > room_bits / 2) k++;
    return k;
}

/* The sample the scales are searched on: every group when there are few
 * (exact), else runs of bl full groups (a cache line of floats when G = 1),
 * one at a hashed position in each of ms / bl equal strata (an even stride
 * would alias with periodic structure, e.g. channels), copied to scratch. */
static void jsq_take_sample(jsq_enc *e) {
    const size_t G = e->g.G, ng = e->g.ng;
    size_t lim = jsq_sample_limit(G);
    e->exact = ng <= lim;
    e->ms = e->exact ? ng : lim;
    e->sx = e->x;
    e->sgm = e->gm;
    e->snel = e->g.n;
    if (!e->exact) {
        size_t nfull = e->g.n / G;                          /* >= ms: ng > ms */
        size_t bl = G >= 16 ? 1 : 16 / G, nbl = e->ms / bl;
        e->ms = nbl * bl;
        float *sxb = pz_scratch_get(e->scr, JSQ_S_SX, e->ms * G * sizeof *sxb), *sgmb = NULL;
        if (e->gm) sgmb = pz_scratch_get(e->scr, JSQ_S_SGM, e->ms * sizeof *sgmb);
        for (size_t j = 0; j < nbl; j++) {
            uint64_t a = (uint64_t)j * nfull / nbl, b = ((uint64_t)j + 1) * nfull / nbl;
            uint64_t span = b - a > bl ? b - a - bl + 1 : 1;
            size_t it = (size_t)(a + pz_mix32((uint32_t)j * 0x9e3779b9u + 0x7f4a7c15u) % span);
            if (it + bl > nfull) it = nfull - bl;
            memcpy(sxb + j * bl * G, e->x + it * G, bl * G * sizeof *sxb);
            if (e->gm) memcpy(sgmb + j * bl, e->gm + it, bl * sizeof *sgmb);
        }
        e->sx = sxb;
        e->sgm = sgmb;
        e->snel = e->ms * G;
    }
    e->sfrac = (double)e->ms / (double)ng;
}

/* The scales the search starts from: s_8 = M; s_2 = 2t and s_4 = 8t (at most
 * M) with t the magnitude of the group of rank min(ng/4, room / (4 + 2N + k))
 * from the top, the most 2-bit groups the budget could hold; and the s_4
 * candidates at the ranks jsq_q4 (all ranks scaled to the sample). */
static void jsq_scale_seeds(const jsq_enc *e, int k, float sc[4], float s4c[JSQ_CANDIDATES]) {
    const size_t ms = e->ms, ng = e->g.ng;
    const float M = e->M;
    float *mags = xmalloc(ms * sizeof *mags);
    uint32_t *scratch = xmalloc(ms * sizeof *scratch);
    for (size_t j = 0; j < ms; j++) mags[j] = e->sgm ? e->sgm[j] : fabsf(e->sx[j]);
    uint64_t k2 = e->room_bits / (4 + 2 * (uint64_t)e->g.G + (uint64_t)k);
    if (k2 < 1) k2 = 1;
    if (k2 > ng / 4) k2 = ng / 4 > 0 ? ng / 4 : 1;
    size_t r2 = e->exact ? (size_t)k2 : (size_t)fmax(1.0, floor((double)k2 * e->sfrac + 0.5));
    size_t above;
    float t = pz_u2f(pz_kth_largest_abs(mags, ms, r2, scratch, &above));
    for (int c = 0; c < JSQ_CANDIDATES; c++) {
        size_t r = (size_t)((double)ms * jsq_q4[c]);
        r = r < 1 ? 1 : r;
        s4c[c] = pz_u2f(pz_kth_largest_abs(mags, ms, r, scratch, &above));
    }
    free(scratch);
    free(mags);
    sc[0] = 0;
    sc[1] = sc[2] = sc[3] = M;
    if (t > 0) {
        sc[1] = 2 * t < M ? 2 * t : M;
        sc[2] = 8 * t < M ? 8 * t : M;
    }
}

/* The scales and Rice parameter with the lowest model error on the sample:
 * one solve per s_4 candidate, then one more with the best solution's class
 * maxima as scales (not s_8 on a sample: the tensor's max must stay codable)
 * and the k that codes its runs best, kept if its error is no higher. */
static void jsq_search_scales(const jsq_enc *e, int k, jsq_best *best) {
    const size_t ms = e->ms;
    const float M = e->M;
    float sc[4], s4c[JSQ_CANDIDATES];
    jsq_scale_seeds(e, k, sc, s4c);
    uint32_t ucost[4];
    pz_mckp_soa ss = pz_jsq_soa_at(pz_scratch_get(e->scr, JSQ_S_SAMPLE, pz_jsq_soa_bytes(ms)), ms);
    uint8_t *scand = xmalloc(ms);
    *best = (jsq_best){{0, M, M, M}, k, 0, INFINITY, xmalloc(ms)};
    int next_k = k;
    float next_sc[4] = {0, M, M, M}, lam = 0;   /* lam: each solve starts from the last one's */
    jsq_model md;
    for (int round = 0; round < JSQ_CANDIDATES + 1; round++) {
        float trial[4];
        int kk = k;
        if (round < JSQ_CANDIDATES) {
            memcpy(trial, sc, sizeof trial);
            trial[2] = s4c[round] > trial[1] ? s4c[round] : trial[1];
        } else {
            memcpy(trial, next_sc, sizeof trial);
            kk = next_k;
        }
        uint64_t fixed = 1 + (uint64_t)kk;                  /* final run, at least */
        uint64_t capacity = e->room_bits > fixed ? (e->room_bits - fixed) << kk : 0;
        uint64_t scap = e->exact ? capacity : (uint64_t)((double)capacity * e->sfrac);
        pz_jsq_model(&md, M, trial);
        pz_jsq_soa_fill(e->sx, e->snel, e->g.G, e->sgm, &md, kk, &ss, e->exact ? NULL : ucost);
        double err = jsq_solve_sample(&ss, ms, scap, e->exact, &lam, scand);
        if (!(err <= best->err) && !(round == 0)) continue;
        best->err = err;
        best->k = kk;
        best->lam = lam;
        memcpy(best->sc, trial, sizeof trial);
        memcpy(best->cls, scand, ms);
        size_t ncl[4] = {0, 0, 0, 0};
        uint32_t nm[4] = {0, 0, 0, 0};
        pz_jsq_class_stats(best->cls, ms, e->sgm ? e->sgm : e->sx, ncl, nm);
        for (int c = 1; c < 4; c++) next_sc[c] = nm[c] > 0 ? pz_u2f(nm[c]) : trial[c];
        if (!e->exact) next_sc[3] = trial[3];
        next_k = pz_jsq_best_k(best->cls, ms);
    }
    free(scand);
}

/* The value streams: per element chunk, the classes expanded to elements
 * (G > 1), the codes staged per class, and every full JSQ_CH of a class's
 * codes packed at its stream's write offset wo[c]; the rest at the end;
 * with ms, the map's codes too (pz_jsq_codes). */
static void jsq_write_values(const jsq_enc *e, const uint8_t *cls, const pz_codec_ctx *ctx, const float inv[4],
                             const size_t off[4], uint8_t *payload, jsq_mapst *ms) {
    const size_t G = e->g.G, n = e->g.n;
    pz_ukey uk = pz_ukey_at(pz_ctx_key(ctx), 0);
    uint8_t *stb = xmalloc(4 * (2 * JSQ_CH + 128)), *ecb = G > 1 ? xmalloc(JSQ_CH + 64) : NULL;
    uint8_t *stg[4];
    size_t ns[4] = {0, 0, 0, 0}, wo[4];
    for (int c = 0; c < 4; c++) {
        stg[c] = stb + (size_t)c * (2 * JSQ_CH + 128);
        wo[c] = off[c < 1 ? 1 : c];
    }
    for (size_t i0 = 0; i0 < n; i0 += JSQ_CH) {
        size_t cnt = n - i0 < JSQ_CH ? n - i0 : JSQ_CH;
        const uint8_t *ec = cls + i0;
        if (G > 1) {
            pz_jsq_expand_cls(cls, G, i0, cnt, ecb);
            ec = ecb;
        }
        pz_jsq_codes(e->x + i0, ec, cnt, (uint32_t)i0, uk, inv, stg, ns, ms);
        for (int c = 1; c < 4; c++) {
            size_t done = 0;
            while (ns[c] - done >= JSQ_CH) {
                wo[c] += pz_jsq_pack(stg[c] + done, JSQ_CH, jsq_width[c], payload + wo[c]);
                done += JSQ_CH;
            }
            if (done) {
                memmove(stg[c], stg[c] + done, ns[c] - done);
                ns[c] -= done;
            }
        }
    }
    for (int c = 1; c < 4; c++) wo[c] += pz_jsq_pack(stg[c], ns[c], jsq_width[c], payload + wo[c]);
    free(stb);
    free(ecb);
}

/* The message of classes cls (at least one group kept; gcount, cmax: groups
 * and max |x| bits per class): header byte k, the map, the scales (the class
 * maxima: scales only shrink, never clip), the value streams. The map goes
 * straight into the payload when the buffer has room for the largest map
 * the costs allow (room_bits) plus the writer's 8-byte stores, else through
 * a buffer of its own. */
static pz_status jsq_write_message(const jsq_enc *e, const uint8_t *cls, int k, const size_t gcount[4],
                                   const uint32_t cmax[4], const pz_codec_ctx *ctx, uint8_t *payload, size_t cap,
                                   size_t *len) {
    const size_t G = e->g.G, ng = e->g.ng;
    size_t mcount[4] = {0, 0, 0, 0}, vrel[4] = {0, 0, 0, 0}, vlen = 0, nsc = 0;
    for (int c = 1; c < 4; c++) mcount[c] = gcount[c] * G;
    if (e->g.n % G && cls[ng - 1]) mcount[cls[ng - 1]] -= G - e->g.n % G;
    float inv[4] = {0, 0, 0, 0};
    for (int c = 1; c < 4; c++) {                       /* the streams' offsets from the first's */
        vrel[c] = vlen;
        vlen += (mcount[c] * (size_t)jsq_width[c] + 7) / 8;
        nsc += gcount[c] > 0;
        if (gcount[c]) inv[c] = (float)jsq_L[c] / pz_u2f(cmax[c]);
    }
    size_t maxmap = (size_t)(e->room_bits / 8) + 2;
    uint8_t *mtmp = cap >= 1 + maxmap + 8 ? NULL : xmalloc(maxmap + 8), *mout = mtmp ? mtmp : payload + 1;
    uint8_t *vbuf = NULL;
    uint64_t mapbits;
#if defined(JSQ_FUSED_MAP)
    if (G == 1 && k > 0) {                              /* the map's codes in the values' sweep */
        jsq_mapst ms = {mout, 0, 0, k, 0};
        vbuf = xmalloc(vlen + 64);
        jsq_write_values(e, cls, ctx, inv, vrel, vbuf, &ms);
        mapbits = pz_jsq_map_finish(&ms, ng, mout);
    } else
#endif
        mapbits = pz_jsq_write_map(cls, ng, k, mout);
    size_t mapbytes = (size_t)((mapbits + 7) / 8), off_sc = 1 + mapbytes, off[4], total = off_sc + 4 * nsc + vlen;
    for (int c = 0; c < 4; c++) off[c] = off_sc + 4 * nsc + vrel[c];
    pz_status fail = PZ_OK;
    if (mapbits > e->room_bits || total > e->g.pmax)      /* cannot happen: capacity reserves */
        fail = pz_fail(PZ_ERR_ARG, "jointsq: internal: %zu bytes over the budget of %zu", total, e->g.pmax);
    else if (total > cap)
        fail = pz_fail(PZ_ERR_ARG, "jointsq: payload buffer of %zu bytes too small (%zu needed)", cap, total);
    if (fail != PZ_OK) {
        free(mtmp);
        free(vbuf);
        return fail;
    }
    payload[0] = (uint8_t)k;
    if (mtmp) {
        memcpy(payload + 1, mtmp, mapbytes);
        free(mtmp);
    } else if (mapbits % 8) {
        payload[mapbytes] &= (uint8_t)((1u << (mapbits % 8)) - 1);   /* (the writer's bytes past the end are overwritten below) */
    }
    size_t so = off_sc;
    for (int c = 1; c < 4; c++) {
        if (!gcount[c]) continue;
        float scale = pz_u2f(cmax[c]);
        memcpy(payload + so, &scale, 4);
        so += 4;
    }
    if (vbuf) {
        memcpy(payload + off[1], vbuf, vlen);
        free(vbuf);
    } else {
        jsq_write_values(e, cls, ctx, inv, off, payload, NULL);
    }
    *len = total;
    return PZ_OK;
}

/* Encode: the magnitudes, the sample, the scale search on it, every group's
 * class (the sample's solution when it is the whole tensor), the message. */
static pz_status jsq_encode_s(const pz_codec_params *p, const float *x, const pz_shape *s,
                              const pz_codec_ctx *ctx, uint8_t *payload, size_t cap, size_t *len, pz_scratch *scr) {
    jsq_enc e;
    memset(&e, 0, sizeof e);
    pz_status st = pz_jsq_geom(p, s, &e.g);
    if (st != PZ_OK) return st;
    *len = 0;
    if (e.g.pmax * 8 < JSQ_RESERVE + 16) return PZ_OK;     /* no room for anything: empty */
    float *gm;
    uint32_t kmax = jsq_magnitudes(x, &e.g, scr, &gm);
    if (kmax >= 0x7f800000u) return pz_fail(PZ_ERR_ARG, "jointsq: non-finite input");
    if (kmax == 0) return PZ_OK;                            /* all zeros */
    e.x = x;
    e.scr = scr;
    e.gm = gm;
    e.M = pz_u2f(kmax);
    e.room_bits = (uint64_t)e.g.pmax * 8 - JSQ_RESERVE;
    jsq_take_sample(&e);
    jsq_best best;
    jsq_search_scales(&e, jsq_initial_k(e.room_bits, e.g.G, e.g.ng), &best);

    const size_t ng = e.g.ng;
    uint8_t *cls = best.cls;
    size_t gcount[4] = {0, 0, 0, 0};
    uint32_t cmax[4] = {0, 0, 0, 0};
    int have_stats = 0;
    if (e.exact) {
        if (!(best.err < INFINITY)) memset(cls, 0, ng);
    } else {
        cls = pz_scratch_get(scr, JSQ_S_CLS, ng);
        have_stats = pz_jsq_assign_all(&e, &best, cls, gcount, cmax);
    }
    if (!have_stats) pz_jsq_class_stats(cls, ng, gm ? gm : x, gcount, cmax);
    size_t kept = gcount[1] + gcount[2] + gcount[3];
    gcount[0] = ng - kept;
    if (kept > 0) st = jsq_write_message(&e, cls, best.k, gcount, cmax, ctx, payload, cap, len);
    free(best.cls);
    return st;
}

/* The table's stateless entry: scratch for this call only. */
static pz_status jsq_encode(const pz_codec_params *p, const float *x, const pz_shape *s,
                            const pz_codec_ctx *ctx, uint8_t *payload, size_t cap, size_t *len) {
    pz_scratch sc = {{0}, {0}};
    pz_status st = jsq_encode_s(p, x, s, ctx, payload, cap, len, &sc);
    pz_scratch_release(&sc);
    return st;
}

const pz_codec_impl pz_codec_jointsq = {"jointsq", PZ_CODEC_JOINTSQ, jsq_parse, jsq_format, jsq_validate,
                                        jsq_max_payload, jsq_encode, pz_jsq_decode, jsq_encode_s,
                                        jsq_scratch_bound};
