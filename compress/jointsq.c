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
 * and the 2- and 4-bit streams' padding (6 + 4). The solver is the Lagrangian
 * / convex-hull greedy: optimal up to the critical upgrade (its error drop
 * bounds the gap; see mckp.h).
 * Scales and k depend on the solution, so they are searched: k starts from the
 * mean run length of a budget spent on 2-bit groups; s_8 = max |x|;
 * s_2 = 2 t with t the magnitude of the group of rank min(ng/4, room / (4 + 2N
 * + k)) from the top; s_4 is tried at the group magnitudes of ranks ng/8,
 * ng/32, ng/128, ng/512 (4 solves); the solution with the lowest model error
 * is kept, then solved once more with its class maxima as scales and the k
 * that codes its runs best, and that refinement is used if its model error is
 * no higher. The message is written with the chosen solution's k and with the
 * class maxima as scales (scales only shrink, never clip).
 *
 * Known limit: one scale per width class per tensor. On data with infinite
 * variance (Student-t, 2 dof) above ~2 bits per element, topk with per-row q8
 * scales has lower error because the 8-bit step is set by the single largest
 * outlier. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec_impl.h"
#include "compress/elem.h"
#include "compress/kselect.h"
#include "compress/mckp.h"
#include "compress/spec.h"

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
    char b[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, (double)p->budget);
        if (strtof(b, NULL) == p->budget) break;
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

/* ---- little bit streams, LSB first ---- */

typedef struct {
    uint8_t *p;
    uint64_t acc;
    int nacc;
} bitw_;

static inline void bw_put_(bitw_ *w, uint32_t v, int n) {
    w->acc |= (uint64_t)v << w->nacc;
    w->nacc += n;
    while (w->nacc >= 8) {
        *w->p++ = (uint8_t)w->acc;
        w->acc >>= 8;
        w->nacc -= 8;
    }
}
static inline void bw_flush_(bitw_ *w) {
    if (w->nacc > 0) *w->p++ = (uint8_t)w->acc;
    w->acc = 0;
    w->nacc = 0;
}

typedef struct {
    const uint8_t *p, *end;
    uint64_t acc;
    int nacc;
} bitr_;

/* Reads n <= 8 bits; past the end reads zeros and sets *err. */
static inline uint32_t br_get_(bitr_ *r, int n, int *err) {
    if (r->nacc < n) {
        if (r->p < r->end) {
            r->acc |= (uint64_t)*r->p++ << r->nacc;
            r->nacc += 8;
        } else {
            *err = 1;
            return 0;
        }
    }
    uint32_t v = (uint32_t)(r->acc & ((1u << n) - 1));
    r->acc >>= n;
    r->nacc -= n;
    return v;
}

/* ---- encode ---- */

/* Item costs in units of 2^-k bits (see the header comment). */
static inline void jsq_costs_(int k, uint32_t sz, uint32_t c[4]) {
    c[0] = 1;
    c[1] = (1 + (uint32_t)k + 1 + 2 * sz) << k;
    c[2] = (1 + (uint32_t)k + 2 + 4 * sz) << k;
    c[3] = (1 + (uint32_t)k + 2 + 8 * sz) << k;
}

/* Model errors (in units of M^2) of every group for scales s[1..3], costs for
 * Rice parameter k. */
static void jsq_items_(const float *x, const jsq_geom *g, const float *gmax, float M,
                       const float s[4], int k, pz_mckp_item *items) {
    float invM = 1.0f / M;
    float invD[4], D2[4];
    for (int c = 1; c < 4; c++) {
        float sh = s[c] * invM;                 /* normalised scale */
        float D = sh / (float)jsq_L[c];
        invD[c] = D > 0 ? 1.0f / D : 0.0f;
        D2[c] = D * D;
    }
    uint32_t cfull[4];
    jsq_costs_(k, (uint32_t)g->G, cfull);
    for (size_t gi = 0; gi < g->ng; gi++) {
        size_t b = gi * g->G, e = b + g->G < g->n ? b + g->G : g->n;
        float e0 = 0, a2 = 0, a4 = 0, a8 = 0;
        for (size_t i = b; i < e; i++) {
            float xh = fabsf(x[i]) * invM;
            e0 += xh * xh;
            float y2 = xh * invD[1], y4 = xh * invD[2], y8 = xh * invD[3];
            float f2 = y2 - floorf(y2), f4 = y4 - floorf(y4), f8 = y8 - floorf(y8);
            a2 += f2 - f2 * f2;
            a4 += f4 - f4 * f4;
            a8 += f8 - f8 * f8;
        }
        pz_mckp_item *it = &items[gi];
        if (e - b == g->G) memcpy(it->cost, cfull, sizeof cfull);
        else jsq_costs_(k, (uint32_t)(e - b), it->cost);
        it->err[0] = e0;
        float acc[4] = {0, a2, a4, a8};
        float gm = gmax[gi];
        for (int c = 1; c < 4; c++)
            it->err[c] = (gm <= s[c] && s[c] > 0) ? D2[c] * acc[c] : INFINITY;
    }
}

/* Exact bits of the run-length map of cls[] with Rice parameter k. */
static uint64_t jsq_map_bits_(const uint8_t *cls, size_t ng, int k) {
    static const int clen[4] = {0, 1, 2, 2};
    uint64_t bits = 0, run = 0;
    for (size_t gi = 0; gi < ng; gi++) {
        if (!cls[gi]) { run++; continue; }
        bits += (run >> k) + 1 + (uint64_t)k + (uint64_t)clen[cls[gi]];
        run = 0;
    }
    return bits + (run >> k) + 1 + (uint64_t)k;
}

static pz_status jsq_encode(const pz_codec_params *p, const float *x, const pz_shape *s,
                            const pz_codec_ctx *ctx, uint8_t *payload, size_t cap, size_t *len) {
    jsq_geom g;
    pz_status st = jsq_geom_(p, s, &g);
    if (st != PZ_OK) return st;
    *len = 0;
    if (g.pmax * 8 < JSQ_RESERVE + 16) return PZ_OK;       /* no room for anything: empty */

    /* group maxima */
    float *gmax = xmalloc(g.ng * sizeof *gmax);
    uint32_t kmax = 0;
    for (size_t gi = 0; gi < g.ng; gi++) {
        size_t b = gi * g.G, e = b + g.G < g.n ? b + g.G : g.n;
        uint32_t m = 0;
        for (size_t i = b; i < e; i++) {
            uint32_t k = pz_abs_key(x[i]);
            m = k > m ? k : m;
        }
        gmax[gi] = pz_u2f(m);
        kmax = m > kmax ? m : kmax;
    }
    if (kmax >= 0x7f800000u) {
        free(gmax);
        return pz_fail(PZ_ERR_ARG, "jointsq: non-finite input");
    }
    if (kmax == 0) {                                        /* all zeros */
        free(gmax);
        return PZ_OK;
    }
    float M = pz_u2f(kmax);
    uint64_t room_bits = (uint64_t)g.pmax * 8 - JSQ_RESERVE;   /* map + values */

    /* initial Rice parameter: mean run length if the budget went to 2-bit groups */
    int k = 0;
    {
        double keep = (double)room_bits / (4.0 + 2.0 * (double)g.G);
        double mrun = keep >= (double)g.ng ? 1.0 : (double)g.ng / fmax(keep, 1.0);
        while (k < JSQ_MAX_K && ldexp(1.0, k + 1) <= mrun * 0.69) k++;
        /* the all-dropped map must fit: ng / 2^k + 1 + k bits */
        while (k < JSQ_MAX_K && (g.ng >> k) + 2 + (uint64_t)k > room_bits / 2) k++;
    }
    /* initial scales from the magnitude t of the smallest group the budget
     * could keep at 2 bits */
    float sc[4] = {0, M, M, M}, s4c[JSQ_CANDIDATES];
    {
        uint64_t k2 = room_bits / (4 + 2 * (uint64_t)g.G + (uint64_t)k);
        if (k2 < 1) k2 = 1;
        if (k2 > g.ng / 4) k2 = g.ng / 4 > 0 ? g.ng / 4 : 1;
        uint32_t *scratch = xmalloc(g.ng * sizeof *scratch);
        size_t above;
        float t = pz_u2f(pz_kth_largest_abs(gmax, g.ng, (size_t)k2, scratch, &above));
        for (int c = 0; c < JSQ_CANDIDATES; c++) {         /* s_4 candidates: upper quantiles */
            size_t r = (size_t)((double)g.ng * jsq_q4[c]);
            r = r < 1 ? 1 : r;
            s4c[c] = jsq_q4[c] > 0 ? pz_u2f(pz_kth_largest_abs(gmax, g.ng, r, scratch, &above)) : M;
        }
        free(scratch);
        if (t > 0) {
            sc[1] = 2 * t < M ? 2 * t : M;
            sc[2] = 8 * t < M ? 8 * t : M;
        }
    }

    pz_mckp_item *items = xmalloc(g.ng * sizeof *items);
    uint8_t *cls = xmalloc(g.ng), *cand = xmalloc(g.ng);
    double best_err = INFINITY;
    int best_k = k, next_k = k;
    float best_sc[4] = {0, M, M, M};
    for (int round = 0; round < JSQ_CANDIDATES + 1; round++) {
        float trial[4];
        int kk = k;
        if (round < JSQ_CANDIDATES) {
            memcpy(trial, sc, sizeof trial);
            trial[2] = s4c[round] > trial[1] ? s4c[round] : trial[1];
        } else {                                           /* refine the best */
            memcpy(trial, best_sc, sizeof trial);
            kk = next_k;
        }
        uint64_t fixed = 1 + (uint64_t)kk;                 /* final run, at least */
        uint64_t capacity = room_bits > fixed ? (room_bits - fixed) << kk : 0;
        jsq_items_(x, &g, gmax, M, trial, kk, items);
        pz_mckp_info info;
        pz_mckp_solve(items, g.ng, capacity, cand, &info);
        if (!info.base_fits) memset(cand, 0, g.ng);
        double err = info.base_fits ? info.err : INFINITY;
        if (!(err <= best_err) && !(round == 0)) continue;
        best_err = err;
        best_k = kk;
        memcpy(cls, cand, g.ng);
        /* class maxima as the next scales; the Rice parameter these runs want */
        float nm[4] = {0, 0, 0, 0};
        for (size_t gi = 0; gi < g.ng; gi++) nm[cls[gi]] = gmax[gi] > nm[cls[gi]] ? gmax[gi] : nm[cls[gi]];
        for (int c = 1; c < 4; c++) best_sc[c] = nm[c] > 0 ? nm[c] : trial[c];
        uint64_t bb = UINT64_MAX;
        for (int kq = 0; kq <= JSQ_MAX_K; kq++) {
            uint64_t b = jsq_map_bits_(cls, g.ng, kq);
            if (b < bb) { bb = b; next_k = kq; }
        }
    }
    free(items);
    free(cand);
    k = best_k;

    /* sizes */
    size_t gcount[4] = {0, 0, 0, 0}, mcount[4] = {0, 0, 0, 0};
    for (size_t gi = 0; gi < g.ng; gi++) {
        size_t b = gi * g.G, e = b + g.G < g.n ? b + g.G : g.n;
        gcount[cls[gi]]++;
        mcount[cls[gi]] += e - b;
    }
    if (gcount[0] == g.ng) {                                /* nothing kept */
        free(gmax);
        free(cls);
        return PZ_OK;
    }
    float scale[4] = {0, 0, 0, 0};
    for (size_t gi = 0; gi < g.ng; gi++)
        if (gmax[gi] > scale[cls[gi]]) scale[cls[gi]] = gmax[gi];
    free(gmax);
    uint64_t mapbits = jsq_map_bits_(cls, g.ng, k);
    size_t off_sc = 1 + (size_t)((mapbits + 7) / 8), nsc = 0;
    for (int c = 1; c < 4; c++) nsc += gcount[c] > 0;
    size_t off[4], total = off_sc + 4 * nsc;
    for (int c = 1; c < 4; c++) {
        off[c] = total;
        total += (mcount[c] * (size_t)jsq_width[c] + 7) / 8;
    }
    if (total > g.pmax) {                                   /* cannot happen: capacity reserves */
        free(cls);
        return pz_fail(PZ_ERR_ARG, "jointsq: internal: %zu bytes over the budget of %zu", total, g.pmax);
    }
    if (total > cap) {
        free(cls);
        return pz_fail(PZ_ERR_ARG, "jointsq: payload buffer of %zu bytes too small (%zu needed)", cap, total);
    }

    /* header and map */
    payload[0] = (uint8_t)k;
    static const uint32_t ccode[4] = {0, 0x0, 0x1, 0x3};
    static const int clen[4] = {0, 1, 2, 2};
    bitw_ mw = {payload + 1, 0, 0};
    uint64_t run = 0;
    uint32_t rmask = (1u << k) - 1;
    for (size_t gi = 0; gi <= g.ng; gi++) {
        if (gi < g.ng && !cls[gi]) { run++; continue; }
        uint64_t q = run >> k;
        while (q >= 32) { bw_put_(&mw, 0xffffffffu, 32); q -= 32; }
        bw_put_(&mw, (uint32_t)((1ull << q) - 1), (int)q + 1);     /* q ones, a zero */
        if (k) bw_put_(&mw, (uint32_t)run & rmask, k);
        if (gi < g.ng) bw_put_(&mw, ccode[cls[gi]], clen[cls[gi]]);
        run = 0;
    }
    bw_flush_(&mw);
    /* scales */
    size_t so = off_sc;
    float inv[4] = {0, 0, 0, 0};
    for (int c = 1; c < 4; c++) {
        if (!gcount[c]) continue;
        memcpy(payload + so, &scale[c], 4);
        so += 4;
        inv[c] = (float)jsq_L[c] / scale[c];
    }
    /* values */
    uint64_t key = pz_ctx_key(ctx);
    pz_ukey uk = pz_ukey_at(key, 0);
    bitw_ vw[4];
    for (int c = 1; c < 4; c++) vw[c] = (bitw_){payload + off[c], 0, 0};
    for (size_t gi = 0; gi < g.ng; gi++) {
        int c = cls[gi];
        if (!c) continue;
        size_t b = gi * g.G, e = b + g.G < g.n ? b + g.G : g.n;
        float Lc = (float)jsq_L[c], ic = inv[c];
        int w = jsq_width[c];
        for (size_t i = b; i < e; i++) {
            float u = pz_uniform_w(uk, (uint32_t)i);
            float q = pz_clampf(pz_round_stoch(x[i] * ic, u), -Lc, Lc);
            bw_put_(&vw[c], (uint32_t)((int)q + jsq_L[c]), w);
        }
    }
    for (int c = 1; c < 4; c++) bw_flush_(&vw[c]);
    free(cls);
    *len = total;
    return PZ_OK;
}

/* ---- decode ---- */

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
    uint8_t *cls = xcalloc(g.ng, 1);
    int err = 0, nkept = 0;
    bitr_ mr = {payload + 1, payload + len, 0, 0};
    size_t gcount[4] = {0, 0, 0, 0}, mcount[4] = {0, 0, 0, 0};
    size_t pos = 0;
    uint64_t maxq = (uint64_t)len * 8;
    for (;;) {
        uint64_t q = 0;
        while (!err && br_get_(&mr, 1, &err)) if (++q > maxq) err = 1;
        uint64_t r = 0;
        for (int done = 0; done < k && !err; done += 8) {
            int nb = k - done < 8 ? k - done : 8;
            r |= (uint64_t)br_get_(&mr, nb, &err) << done;
        }
        if (err) break;
        r |= q << k;
        if (r > g.ng - pos) { err = 1; break; }
        pos += (size_t)r;
        if (pos == g.ng) break;                           /* final run */
        int c = 1;
        if (br_get_(&mr, 1, &err)) c = 2 + (int)br_get_(&mr, 1, &err);
        if (err) break;
        cls[pos] = (uint8_t)c;
        nkept++;
        pos++;
    }
    for (size_t gi = 0; gi < g.ng && !err; gi++) {
        size_t b = gi * g.G, e = b + g.G < g.n ? b + g.G : g.n;
        gcount[cls[gi]]++;
        mcount[cls[gi]] += e - b;
    }
    if (err || mr.acc != 0 || nkept == 0) {
        free(cls);
        return pz_fail(PZ_ERR_FORMAT, "jointsq: corrupt width map");
    }
    size_t off_sc = (size_t)(mr.p - payload), nsc = 0;
    for (int c = 1; c < 4; c++) nsc += gcount[c] > 0;
    size_t off[4] = {0, 0, 0, 0}, total = off_sc + 4 * nsc;
    for (int c = 1; c < 4; c++) {
        off[c] = total;
        total += (mcount[c] * (size_t)jsq_width[c] + 7) / 8;
    }
    if (total != len) {
        free(cls);
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
            free(cls);
            return pz_fail(PZ_ERR_FORMAT, "jointsq: bad scale for the %d-bit class", jsq_width[c]);
        }
        step[c] = sv / (float)jsq_L[c];
    }
    bitr_ vr[4];
    for (int c = 1; c < 4; c++)
        vr[c] = (bitr_){payload + off[c], payload + (c < 3 ? off[c + 1] : len), 0, 0};
    for (size_t gi = 0; gi < g.ng && !err; gi++) {
        int c = cls[gi];
        size_t b = gi * g.G, e = b + g.G < g.n ? b + g.G : g.n;
        if (!c) {
            memset(out + b, 0, (e - b) * sizeof *out);
            continue;
        }
        int w = jsq_width[c], Lc = jsq_L[c];
        uint32_t bad = (1u << w) - 1;
        float st_ = step[c];
        for (size_t i = b; i < e; i++) {
            uint32_t v = br_get_(&vr[c], w, &err);
            err |= v == bad;
            out[i] = (float)((int)v - Lc) * st_;
        }
    }
    for (int c = 1; c < 4 && !err; c++)
        if (vr[c].acc != 0 || vr[c].p != vr[c].end) err = 1;   /* padding zero, all used */
    free(cls);
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
