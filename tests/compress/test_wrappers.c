/* test_wrappers.c: the stateful codecs ef(), ef21() and aq() (compress/wrappers/wrappers.h).
 *
 *  - EF invariant: over R rounds, sum of decoded messages + final residual =
 *    sum of inputs, per element within the exact float bound
 *    sum_t 2^-24 (|y_t| + |y_t - C(y_t)|) (one rounding in y = x + e and one in
 *    e = y - C(y) per round); q2 (nearest) and topk:0.1 inner codecs.
 *  - EF reduces the accumulated error |sum x - sum decoded| against the bare
 *    codec on a slowly varying input (at least 10x smaller after 200 rounds).
 *  - EF21: the receiver's g tracks a constant x (error at rounds 1 < 10 < 50
 *    shrinking, final relative error < 1e-4); sender and receiver g bitwise
 *    equal; the receiver's output is g.
 *  - AQ: many rounds of micro-batches (1..6 samples, random order, new and
 *    repeated ids mixed, ids including 0 and UINT64_MAX): every decoded row
 *    equals the receiver's buffer row, the first sight of an id is exact
 *    (fp32 warm-up), sender and receiver buffers are bitwise equal (memcmp
 *    over all slots, same ids in the same slot order, equal digests), and the
 *    reconstruction error is below the bare codec's. The spill path (mem
 *    limit of 3 rows, so most rows live in an mmap'ed file over several
 *    chunks) gives bitwise the same outputs and buffers as memory.
 *  - Corrupted and truncated messages, wrong flags, wrong ids, duplicate ids,
 *    wrong shapes are rejected and leave the receiver's state bitwise as it
 *    was (snapshot before and after); the genuine message then decodes.
 *  - Errors name what is wrong: shape changes name both shapes; aq without
 *    sample ids names aq; an unusable spill dir fails without changing state.
 *  - AQ details: one object as both ends (loopback) keeps the roles apart; a
 *    restarted sender re-warms the receiver (warm-up overwrites); the delta
 *    message is bitwise the bare codec's message of x - m for ctx, while a
 *    stochastic warm-up codec draws from another stream.
 *  - Through the framework: pz_codec_create("aq(q4)") etc. give bitwise the
 *    same outputs as the wrappers called directly, and a corrupted message
 *    leaves the next genuine one decoding identically; canonical specs read
 *    back to themselves; ef(aq(q4)) (nested) keeps the EF invariant.
 * Every failure is printed and makes the exit status 1. */
#include "compress/core/codec.h"
#include "compress/wrappers/wrappers.h"
#include "base/mem.h"
#include "base/rng.h"
#include "base/status.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"

static pz_rng rng;

/* ---- helpers ------------------------------------------------------------- */

static pz_shape shape3(int64_t a, int64_t b, int64_t c) {
    pz_shape s = {.ndim = 3, .dims = {a, b, c}};
    return s;
}

static void fill_normal(float *x, size_t n, float sd) {
    for (size_t i = 0; i < n; i++) x[i] = sd * pz_rng_normal(&rng);
}

static pz_wrapper *make(pz_wrap_kind kind, const char *inner_spec, const pz_wrap_opts *opts) {
    pz_codec *inner = NULL;
    pz_status st = pz_codec_create(inner_spec, &inner);
    if (st) pz_die("pz_codec_create(%s): %s", inner_spec, pz_last_error());
    pz_wrapper *w = NULL;
    st = pz_wrapper_create(kind, opts, inner, &w);
    if (st) pz_die("pz_wrapper_create(%s): %s", inner_spec, pz_last_error());
    return w;
}

/* encode on tx, decode on rx; returns status of the decode (encode must work) */
static pz_status send(pz_wrapper *tx, pz_wrapper *rx, const float *x, const pz_shape *s, const pz_codec_ctx *ctx,
                      float *out, uint8_t *buf, size_t cap, size_t *len, uint8_t *flags) {
    pz_status st = pz_wrapper_encode(tx, x, s, ctx, buf, cap, len, flags);
    if (st) pz_die("encode with %s: %s", pz_wrapper_spec(tx), pz_last_error());
    return pz_wrapper_decode(rx, *flags, buf, *len, s, ctx, out);
}

/* A sender and a receiver of one wrapper over an inner codec, with a
 * message buffer, an input x and an output of shape s. */
typedef struct {
    pz_wrapper *tx, *rx;
    pz_shape s;
    size_t n, cap, len;
    uint8_t *buf, flags;
    float *x, *out;
} wpair;

static void wpair_open(wpair *w, pz_wrap_kind kind, const char *inner, pz_shape s) {
    w->tx = make(kind, inner, NULL);
    w->rx = make(kind, inner, NULL);
    w->s = s;
    w->n = pz_shape_numel(&s);
    w->cap = pz_wrapper_max_payload(w->tx, &s);
    w->len = 0;
    w->buf = xmalloc(w->cap);
    w->flags = 0;
    w->x = xmalloc(w->n * sizeof(float));
    w->out = xmalloc(w->n * sizeof(float));
}

/* sends w->x with ctx into w->out; returns the status of the decode */
static pz_status wpair_send(wpair *w, const pz_codec_ctx *ctx) {
    return send(w->tx, w->rx, w->x, &w->s, ctx, w->out, w->buf, w->cap, &w->len, &w->flags);
}

static void wpair_close(wpair *w) {
    PZ_FREE_ALL(w->buf, w->x, w->out);
    pz_wrapper_free(w->tx);
    pz_wrapper_free(w->rx);
}

static double l2(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (b ? (double)b[i] : 0.0);
        s += d * d;
    }
    return sqrt(s);
}

/* ---- EF ---------------------------------------------------------------------- */

static void test_ef_invariant(const char *inner) {
    enum { R = 300 };
    wpair w;
    wpair_open(&w, PZ_WRAP_EF, inner, shape3(4, 8, 16));
    float *y = xmalloc(w.n * sizeof(float));
    double *sx = xcalloc(w.n, sizeof(double)), *sc = xcalloc(w.n, sizeof(double));
    double *bound = xcalloc(w.n, sizeof(double));
    const double u = ldexp(1.0, -24);
    for (int t = 0; t < R; t++) {
        fill_normal(w.x, w.n, 1.0f);
        size_t ne;
        const float *e = pz_wrapper_vector(w.tx, PZ_WRAP_SENDER, &ne);
        CHECK(t == 0 ? e == NULL : ne == w.n, "ef(%s): residual missing at round %d", inner, t);
        for (size_t i = 0; i < w.n; i++) y[i] = w.x[i] + (e ? e[i] : 0.0f);
        uint64_t ids[4] = {11, 22, 33, 44}; /* used when the inner codec is aq() */
        pz_codec_ctx ctx = {.seed = 7, .step = (uint64_t)t, .edge = 1, .sample_ids = ids};
        pz_status st = wpair_send(&w, &ctx);
        CHECK(!st && w.flags == 0, "ef(%s): decode: %s", inner, pz_last_error());
        for (size_t i = 0; i < w.n; i++) {
            sx[i] += w.x[i];
            sc[i] += w.out[i];
            bound[i] += u * (fabs((double)y[i]) + fabs((double)y[i] - (double)w.out[i]));
        }
    }
    size_t ne;
    const float *e = pz_wrapper_vector(w.tx, PZ_WRAP_SENDER, &ne);
    double worst = 0;
    size_t bad = 0;
    for (size_t i = 0; i < w.n; i++) {
        double dev = fabs(sc[i] + (double)e[i] - sx[i]);
        double tol = 1.01 * bound[i] + 1e-12;
        if (dev / tol > worst) worst = dev / tol;
        bad += dev > tol;
    }
    printf("ef(%s) invariant over %d rounds: worst |sum sent + e - sum x| = %.3f of its bound, e norm %.3g\n",
           inner, R, worst, l2(e, NULL, w.n));
    CHECK(bad == 0, "ef(%s): %zu elements break sum sent + e = sum x (worst %.3g of bound)", inner, bad, worst);
    CHECK(pz_wrapper_vector(w.rx, PZ_WRAP_RECEIVER, &ne) == NULL, "ef receiver keeps no state");
    free(y); free(sx); free(sc); free(bound);
    wpair_close(&w);
}

static void test_ef_reduces_error(const char *inner) {
    enum { R = 200 };
    wpair w;
    wpair_open(&w, PZ_WRAP_EF, inner, shape3(2, 8, 32));
    pz_codec *bare = NULL;
    if (pz_codec_create(inner, &bare)) pz_die("%s", pz_last_error());
    float *base = xmalloc(w.n * sizeof(float)), *out2 = xmalloc(w.n * sizeof(float));
    double *acc_ef = xcalloc(w.n, sizeof(double)), *acc_bare = xcalloc(w.n, sizeof(double));
    fill_normal(base, w.n, 1.0f);
    for (int t = 0; t < R; t++) {
        for (size_t i = 0; i < w.n; i++) w.x[i] = base[i] + 0.1f * pz_rng_normal(&rng);
        pz_codec_ctx ctx = {.seed = 3, .step = (uint64_t)t};
        CHECK(!wpair_send(&w, &ctx), "ef(%s): %s", inner, pz_last_error());
        pz_shape got;
        if (pz_codec_encode(bare, w.x, &w.s, &ctx, w.buf, w.cap, &w.len) ||
            pz_codec_decode(bare, w.buf, w.len, &ctx, out2, w.n, &got))
            pz_die("%s: %s", inner, pz_last_error());
        for (size_t i = 0; i < w.n; i++) {
            acc_ef[i] += (double)w.x[i] - w.out[i];
            acc_bare[i] += (double)w.x[i] - out2[i];
        }
    }
    double e_ef = 0, e_bare = 0;
    for (size_t i = 0; i < w.n; i++) {
        e_ef += acc_ef[i] * acc_ef[i];
        e_bare += acc_bare[i] * acc_bare[i];
    }
    e_ef = sqrt(e_ef);
    e_bare = sqrt(e_bare);
    printf("accumulated error after %d rounds: %s %.4g, ef(%s) %.4g\n", R, inner, e_bare, inner, e_ef);
    CHECK(e_ef < 0.1 * e_bare, "ef(%s) accumulated error %.4g not 10x below the bare codec's %.4g", inner, e_ef,
          e_bare);
    free(base); free(out2); free(acc_ef); free(acc_bare);
    pz_codec_free(bare);
    wpair_close(&w);
}

/* ---- EF21 -------------------------------------------------------------------- */

static void test_ef21_tracks(const char *inner) {
    enum { R = 200 };
    wpair w;
    wpair_open(&w, PZ_WRAP_EF21, inner, shape3(2, 4, 64));
    fill_normal(w.x, w.n, 1.0f);
    double nx = l2(w.x, NULL, w.n), err[R + 1];
    for (int t = 1; t <= R; t++) {
        pz_codec_ctx ctx = {.seed = 11, .step = (uint64_t)t};
        CHECK(!wpair_send(&w, &ctx), "ef21(%s): %s", inner, pz_last_error());
        size_t ng, nt;
        const float *g = pz_wrapper_vector(w.rx, PZ_WRAP_RECEIVER, &ng);
        const float *gt = pz_wrapper_vector(w.tx, PZ_WRAP_SENDER, &nt);
        CHECK(g && ng == w.n && !memcmp(g, w.out, w.n * sizeof(float)), "ef21(%s): output is not g at round %d", inner,
              t);
        CHECK(gt && nt == w.n && !memcmp(g, gt, w.n * sizeof(float)),
              "ef21(%s): sender and receiver g differ at round %d", inner, t);
        err[t] = l2(w.out, w.x, w.n) / nx;
    }
    printf("ef21(%s) relative error of g: round 1 %.3g, 10 %.3g, 50 %.3g, %d %.3g\n", inner, err[1], err[10],
           err[50], R, err[R]);
    /* shrinking, or already exact (q2 nearest on the midtread grid reaches g = x by round 10) */
    CHECK(err[10] < err[1] && (err[50] < err[10] || err[10] == 0.0) && err[R] <= err[50],
          "ef21(%s): error does not shrink", inner);
    CHECK(err[R] < 1e-4, "ef21(%s): g does not reach x (%.3g)", inner, err[R]);
    CHECK(pz_wrapper_state_digest(w.tx, PZ_WRAP_SENDER) == pz_wrapper_state_digest(w.rx, PZ_WRAP_RECEIVER),
          "ef21(%s): digests differ", inner);

    /* a corrupt or truncated message leaves the receiver's g as it was */
    float *snap = xmalloc(w.n * sizeof(float));
    size_t ng;
    memcpy(snap, pz_wrapper_vector(w.rx, PZ_WRAP_RECEIVER, &ng), w.n * sizeof(float));
    for (size_t i = 0; i < w.n; i++) w.x[i] += 0.5f;
    pz_codec_ctx ctx = {.seed = 11, .step = 999};
    if (pz_wrapper_encode(w.tx, w.x, &w.s, &ctx, w.buf, w.cap, &w.len, &w.flags)) pz_die("%s", pz_last_error());
    int accepted = 0;
    for (size_t cut = 0; cut < w.len; cut += 1 + cut / 8)
        accepted += !pz_wrapper_decode(w.rx, w.flags, w.buf, cut, &w.s, &ctx, w.out);
    for (size_t p = 0; p < w.len; p++) {
        w.buf[p] ^= 0x10;
        accepted += !pz_wrapper_decode(w.rx, w.flags, w.buf, w.len, &w.s, &ctx, w.out);
        w.buf[p] ^= 0x10;
    }
    pz_shape other = shape3(4, 2, 64);
    accepted += !pz_wrapper_decode(w.rx, w.flags, w.buf, w.len, &other, &ctx, w.out);
    accepted += !pz_wrapper_decode(w.rx, 1, w.buf, w.len, &w.s, &ctx, w.out);
    CHECK(accepted == 0, "ef21(%s): %d corrupted messages accepted", inner, accepted);
    CHECK(!memcmp(snap, pz_wrapper_vector(w.rx, PZ_WRAP_RECEIVER, &ng), w.n * sizeof(float)),
          "ef21(%s): a rejected message changed g", inner);
    CHECK(!pz_wrapper_decode(w.rx, w.flags, w.buf, w.len, &w.s, &ctx, w.out), "ef21(%s): genuine message rejected: %s",
          inner, pz_last_error());
    CHECK(pz_wrapper_state_digest(w.tx, PZ_WRAP_SENDER) == pz_wrapper_state_digest(w.rx, PZ_WRAP_RECEIVER),
          "ef21(%s): out of sync after the genuine message", inner);
    free(snap);
    wpair_close(&w);
}

static void test_shape_errors(void) {
    pz_wrapper *w = make(PZ_WRAP_EF, "q4", NULL);
    pz_shape a = shape3(4, 8, 16), b = shape3(2, 8, 16);
    float x[512] = {0};
    uint8_t buf[4096], flags;
    size_t len;
    pz_codec_ctx ctx = {0};
    CHECK(!pz_wrapper_encode(w, x, &a, &ctx, buf, sizeof buf, &len, &flags), "ef: %s", pz_last_error());
    pz_status st = pz_wrapper_encode(w, x, &b, &ctx, buf, sizeof buf, &len, &flags);
    CHECK(st == PZ_ERR_SHAPE && strstr(pz_last_error(), "(4,8,16)") && strstr(pz_last_error(), "(2,8,16)"),
          "ef: a shape change must name both shapes, got %d: %s", st, pz_last_error());
    pz_wrapper_free(w);

    /* a failed first encode (buffer too small) fixes nothing */
    w = make(PZ_WRAP_EF21, "q4", NULL);
    st = pz_wrapper_encode(w, x, &a, &ctx, buf, 10, &len, &flags);
    size_t nv;
    CHECK(st != PZ_OK && pz_wrapper_vector(w, PZ_WRAP_SENDER, &nv) == NULL, "ef21: failed encode left state");
    CHECK(!pz_wrapper_encode(w, x, &b, &ctx, buf, sizeof buf, &len, &flags), "ef21: %s", pz_last_error());
    pz_wrapper_free(w);

    /* options other than aq's are refused; the inner codec is freed (ASan) */
    pz_codec *inner;
    if (pz_codec_create("q4", &inner)) pz_die("%s", pz_last_error());
    pz_wrap_opts o = {.mem_limit = 5};
    st = pz_wrapper_create(PZ_WRAP_EF, &o, inner, &w);
    CHECK(st == PZ_ERR_ARG && !w, "ef with mem= must be refused");

    w = make(PZ_WRAP_AQ, "q4", NULL);
    uint64_t ids[4] = {1, 2, 3, 4}, dup[4] = {1, 2, 3, 1};
    pz_codec_ctx c0 = {0}, c1 = {.sample_ids = ids}, c2 = {.sample_ids = dup};
    st = pz_wrapper_encode(w, x, &a, &c0, buf, sizeof buf, &len, &flags);
    CHECK(st == PZ_ERR_ARG && strstr(pz_last_error(), "aq"), "aq without ids: %d %s", st, pz_last_error());
    st = pz_wrapper_encode(w, x, &a, NULL, buf, sizeof buf, &len, &flags);
    CHECK(st == PZ_ERR_ARG, "aq with NULL ctx: %d", st);
    st = pz_wrapper_encode(w, x, &a, &c2, buf, sizeof buf, &len, &flags);
    CHECK(st == PZ_ERR_ARG && strstr(pz_last_error(), "twice"), "aq duplicate ids: %d %s", st, pz_last_error());
    CHECK(pz_wrapper_aq_count(w, PZ_WRAP_SENDER) == 0, "aq: rejected encodes changed the buffers");
    CHECK(!pz_wrapper_encode(w, x, &a, &c1, buf, sizeof buf, &len, &flags), "aq: %s", pz_last_error());
    pz_shape c = shape3(4, 16, 8);
    st = pz_wrapper_encode(w, x, &c, &c1, buf, sizeof buf, &len, &flags);
    CHECK(st == PZ_ERR_SHAPE && strstr(pz_last_error(), "(4,16,8)") && strstr(pz_last_error(), "(1,8,16)"),
          "aq: a row shape change must name both, got %d: %s", st, pz_last_error());
    CHECK(!pz_wrapper_encode(w, x, &b, &c1, buf, sizeof buf, &len, &flags), "aq: fewer samples: %s",
          pz_last_error());
    pz_wrapper_free(w);

    /* an unusable spill directory fails the message and changes nothing */
    pz_wrap_opts bad = {.mem_limit = 1, .spill_dir = "/nonexistent/pipezip"};
    w = make(PZ_WRAP_AQ, "q4", &bad);
    st = pz_wrapper_encode(w, x, &a, &c1, buf, sizeof buf, &len, &flags);
    CHECK(st == PZ_ERR_IO && strstr(pz_last_error(), "/nonexistent/pipezip"), "aq bad dir: %d %s", st,
          pz_last_error());
    CHECK(pz_wrapper_aq_count(w, PZ_WRAP_SENDER) == 0, "aq: failed spill changed the buffers");
    pz_wrapper_free(w);
}

/* ---- AQ ---------------------------------------------------------------------- */

enum { POOL = 60, MAXB = 6, ROUNDS = 150 };

typedef struct {
    uint64_t ids[POOL];
    float *base; /* POOL rows */
    size_t row;
    pz_shape row_shape;
} aq_world;

static void world_init(aq_world *wd, int64_t T, int64_t C, uint64_t seed) {
    pz_rng r;
    pz_rng_seed(&r, seed);
    wd->row = (size_t)(T * C);
    wd->row_shape = shape3(1, T, C);
    for (int i = 0; i < POOL; i++) wd->ids[i] = pz_rng_next(&r);
    wd->ids[0] = 0;
    wd->ids[1] = UINT64_MAX;
    wd->ids[2] = 1;
    wd->base = xmalloc(POOL * wd->row * sizeof(float));
    for (size_t i = 0; i < POOL * wd->row; i++) wd->base[i] = pz_rng_normal(&r);
}

/* Round t's micro-batch: B distinct pool indices (random order) among the
 * first avail(t), so new ids keep arriving mixed with seen ones; x = base +
 * a small drift (activations that change slowly between epochs). */
static size_t world_batch(const aq_world *wd, int t, pz_rng *r, int *pick, uint64_t *ids, float *x) {
    size_t avail = 4 + (size_t)t / 2;
    if (avail > POOL) avail = POOL;
    size_t B = 1 + pz_rng_below(r, MAXB);
    if (B > avail) B = avail;
    /* distinct indices by rejection; a flag per pool index, not a scan of
     * pick[] (gcc 12 -O3 -march=native warned pick may be uninitialized) */
    unsigned char taken[POOL] = {0};
    for (size_t i = 0; i < B; i++) {
        int p;
        do p = (int)pz_rng_below(r, avail);
        while (taken[p]);
        taken[p] = 1;
        pick[i] = p;
        ids[i] = wd->ids[p];
        for (size_t e = 0; e < wd->row; e++)
            x[i * wd->row + e] = wd->base[(size_t)p * wd->row + e] + 0.05f * pz_rng_normal(r);
    }
    return B;
}

/* bitwise comparison of two sides' buffers (same ids, same slot order) */
static int stores_equal(const pz_wrapper *a, pz_wrap_role ra, const pz_wrapper *b, pz_wrap_role rb) {
    size_t n = pz_wrapper_aq_count(a, ra);
    if (n != pz_wrapper_aq_count(b, rb)) return 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t ia, ib;
        size_t la, lb;
        const float *pa = pz_wrapper_aq_slot(a, ra, i, &ia, &la), *pb = pz_wrapper_aq_slot(b, rb, i, &ib, &lb);
        if (!pa || !pb || ia != ib || la != lb || memcmp(pa, pb, la * sizeof(float))) return 0;
        if (pz_wrapper_aq_find(b, rb, ia) != pb) return 0;
    }
    return pz_wrapper_state_digest(a, ra) == pz_wrapper_state_digest(b, rb);
}

typedef struct {
    float *outs; /* every decoded output, concatenated */
    size_t nouts;
    double err_aq, err_bare; /* reconstruction error over the last 30 rounds */
} aq_run;

/* Runs ROUNDS messages from a fresh sender to a fresh receiver. */
static void run_aq(const char *inner, const aq_world *wd, const pz_wrap_opts *opts, aq_run *res, pz_wrapper **txo,
                   pz_wrapper **rxo) {
    pz_wrapper *tx = make(PZ_WRAP_AQ, inner, opts), *rx = make(PZ_WRAP_AQ, inner, opts);
    pz_codec *bare = NULL;
    if (pz_codec_create(inner, &bare)) pz_die("%s", pz_last_error());
    pz_rng r;
    pz_rng_seed(&r, 1234);
    size_t row = wd->row, maxn = MAXB * row;
    pz_shape smax = wd->row_shape;
    smax.dims[0] = MAXB;
    size_t cap = pz_wrapper_max_payload(tx, &smax), len;
    uint8_t *buf = xmalloc(cap), flags;
    float *x = xmalloc(maxn * sizeof(float)), *out = xmalloc(maxn * sizeof(float)), *ob = xmalloc(maxn * sizeof(float));
    res->outs = xmalloc((size_t)ROUNDS * maxn * sizeof(float));
    res->nouts = 0;
    res->err_aq = res->err_bare = 0;
    int seen[POOL] = {0}, pick[MAXB], bad_first = 0, bad_row = 0, bad_flags = 0;
    uint64_t ids[MAXB];
    for (int t = 0; t < ROUNDS; t++) {
        size_t B = world_batch(wd, t, &r, pick, ids, x);
        pz_shape s = wd->row_shape;
        s.dims[0] = (int64_t)B;
        pz_codec_ctx ctx = {.seed = 99, .step = (uint64_t)t, .edge = 2, .dir = 0, .micro = (uint32_t)(t % 4),
                            .sample_ids = ids};
        pz_status st = send(tx, rx, x, &s, &ctx, out, buf, cap, &len, &flags);
        CHECK(!st, "aq(%s) round %d: %s", inner, t, pz_last_error());
        size_t nnew = 0;
        for (size_t i = 0; i < B; i++) nnew += !seen[pick[i]];
        bad_flags += flags != ((nnew ? 1 : 0) | (nnew < B ? 2 : 0));
        for (size_t i = 0; i < B; i++) {
            const float *m = pz_wrapper_aq_find(rx, PZ_WRAP_RECEIVER, ids[i]);
            bad_row += !m || memcmp(m, out + i * row, row * sizeof(float));
            if (!seen[pick[i]]) bad_first += memcmp(x + i * row, out + i * row, row * sizeof(float)) != 0;
            seen[pick[i]] = 1;
        }
        memcpy(res->outs + res->nouts, out, B * row * sizeof(float));
        res->nouts += B * row;
        if (t >= ROUNDS - 30) {
            pz_shape got;
            if (pz_codec_encode(bare, x, &s, &ctx, buf, cap, &len) ||
                pz_codec_decode(bare, buf, len, &ctx, ob, maxn, &got))
                pz_die("%s", pz_last_error());
            res->err_aq += l2(out, x, B * row);
            res->err_bare += l2(ob, x, B * row);
        }
    }
    CHECK(bad_first == 0, "aq(%s): %d first sights not exact with the fp32 warm-up", inner, bad_first);
    CHECK(bad_row == 0, "aq(%s): %d decoded rows differ from the receiver's buffer", inner, bad_row);
    CHECK(bad_flags == 0, "aq(%s): %d messages with unexpected flags", inner, bad_flags);
    CHECK(stores_equal(tx, PZ_WRAP_SENDER, rx, PZ_WRAP_RECEIVER), "aq(%s): sender and receiver buffers differ",
          inner);
    size_t nseen = 0;
    for (int i = 0; i < POOL; i++) nseen += seen[i];
    CHECK(pz_wrapper_aq_count(rx, PZ_WRAP_RECEIVER) == nseen && nseen > POOL / 2, "aq(%s): %zu ids held, %zu seen",
          inner, pz_wrapper_aq_count(rx, PZ_WRAP_RECEIVER), nseen);
    free(buf); free(x); free(out); free(ob);
    pz_codec_free(bare);
    *txo = tx;
    *rxo = rx;
}

static void test_aq(const char *inner) {
    aq_world wd;
    world_init(&wd, 4, 32, 5);
    aq_run a;
    pz_wrapper *tx, *rx;
    run_aq(inner, &wd, NULL, &a, &tx, &rx);
    printf("aq(%s): %d rounds, %zu ids, buffers equal; reconstruction error last 30 rounds %.4g vs bare %.4g\n",
           inner, ROUNDS, pz_wrapper_aq_count(rx, PZ_WRAP_RECEIVER), a.err_aq, a.err_bare);
    CHECK(a.err_aq < 0.5 * a.err_bare, "aq(%s): error %.4g not below half the bare codec's %.4g", inner, a.err_aq,
          a.err_bare);
    size_t fb;
    pz_wrapper_state_bytes(rx, &fb);
    CHECK(fb == 0, "aq(%s): in-memory run used a file (%zu bytes)", inner, fb);
    pz_wrapper_free(tx);
    pz_wrapper_free(rx);
    free(a.outs);
    free(wd.base);
}

static void test_aq_spill(const char *inner) {
    aq_world wd;
    world_init(&wd, 8, 256, 6); /* 8 KiB rows: file chunks of 8, 8, 16, ... rows */
    pz_wrap_opts spill = {.mem_limit = 3 * wd.row * sizeof(float), .spill_dir = NULL};
    aq_run a, b;
    pz_wrapper *tx1, *rx1, *tx2, *rx2;
    run_aq(inner, &wd, NULL, &a, &tx1, &rx1);
    run_aq(inner, &wd, &spill, &b, &tx2, &rx2);
    CHECK(a.nouts == b.nouts && !memcmp(a.outs, b.outs, a.nouts * sizeof(float)),
          "aq(%s): spilled run decodes differently", inner);
    CHECK(stores_equal(rx1, PZ_WRAP_RECEIVER, rx2, PZ_WRAP_RECEIVER) && stores_equal(tx1, PZ_WRAP_SENDER, tx2,
          PZ_WRAP_SENDER), "aq(%s): spilled buffers differ from in-memory ones", inner);
    size_t fb1, fb2, mb2 = pz_wrapper_state_bytes(rx2, &fb2);
    pz_wrapper_state_bytes(rx1, &fb1);
    printf("aq(%s) spill: mem limit %zu B -> %zu B in memory, %zu B in the file; bitwise equal to in-memory\n",
           inner, spill.mem_limit, mb2, fb2);
    size_t held = pz_wrapper_aq_count(rx2, PZ_WRAP_RECEIVER);
    CHECK(fb1 == 0 && fb2 >= (held - 3) * wd.row * sizeof(float), "aq(%s): file bytes %zu / %zu", inner, fb1, fb2);
    pz_wrapper_free(tx1); pz_wrapper_free(rx1); pz_wrapper_free(tx2); pz_wrapper_free(rx2);
    free(a.outs); free(b.outs); free(wd.base);
}

/* Full copy of one side's buffers, for before/after comparisons. */
typedef struct {
    size_t count, row;
    uint64_t *ids;
    float *rows;
    uint64_t digest;
} aq_snap;

static void snap_take(aq_snap *s, const pz_wrapper *w, pz_wrap_role role) {
    s->count = pz_wrapper_aq_count(w, role);
    s->ids = xmalloc((s->count + 1) * sizeof(uint64_t));
    s->row = 0;
    pz_wrapper_aq_slot(w, role, 0, NULL, &s->row);
    s->rows = xmalloc((s->count * s->row + 1) * sizeof(float));
    for (size_t i = 0; i < s->count; i++)
        memcpy(s->rows + i * s->row, pz_wrapper_aq_slot(w, role, i, &s->ids[i], NULL), s->row * sizeof(float));
    s->digest = pz_wrapper_state_digest(w, role);
}

static int snap_same(const aq_snap *a, const aq_snap *b) {
    return a->count == b->count && a->row == b->row && a->digest == b->digest &&
           !memcmp(a->ids, b->ids, a->count * sizeof(uint64_t)) &&
           !memcmp(a->rows, b->rows, a->count * a->row * sizeof(float));
}

static void snap_free(aq_snap *s) {
    free(s->ids);
    free(s->rows);
}

static void test_aq_corrupt(const char *inner, size_t mem_limit) {
    aq_world wd;
    world_init(&wd, 2, 16, 8);
    pz_wrap_opts opts = {.mem_limit = mem_limit};
    pz_wrapper *tx = make(PZ_WRAP_AQ, inner, &opts), *rx = make(PZ_WRAP_AQ, inner, &opts);
    size_t row = wd.row;
    pz_shape s = wd.row_shape;
    s.dims[0] = 6;
    size_t cap = pz_wrapper_max_payload(tx, &s), len;
    uint8_t *buf = xmalloc(cap), *copy = xmalloc(cap), flags;
    float *x = xmalloc(6 * row * sizeof(float)), *out = xmalloc(6 * row * sizeof(float));
    /* warm up ids 0..9 */
    uint64_t ids[6];
    for (int t = 0; t < 5; t++) {
        pz_shape s2 = s;
        s2.dims[0] = 2;
        ids[0] = wd.ids[2 * t];
        ids[1] = wd.ids[2 * t + 1];
        fill_normal(x, 2 * row, 1.0f);
        pz_codec_ctx ctx = {.step = (uint64_t)t, .sample_ids = ids};
        CHECK(!send(tx, rx, x, &s2, &ctx, out, buf, cap, &len, &flags), "aq: %s", pz_last_error());
    }
    /* a mixed message: 4 seen ids, 2 new ones, interleaved (flags 3) */
    uint64_t mix[6] = {wd.ids[3], wd.ids[20], wd.ids[0], wd.ids[7], wd.ids[21], wd.ids[9]};
    fill_normal(x, 6 * row, 1.0f);
    pz_codec_ctx ctx = {.step = 10, .micro = 1, .sample_ids = mix};
    if (pz_wrapper_encode(tx, x, &s, &ctx, buf, cap, &len, &flags)) pz_die("%s", pz_last_error());
    CHECK(flags == 3, "aq: mixed message has flags %d", flags);
    memcpy(copy, buf, len);
    aq_snap before, after;
    snap_take(&before, rx, PZ_WRAP_RECEIVER);
    int accepted = 0, tried = 0;
    for (size_t cut = 0; cut < len; cut++, tried++) accepted += !pz_wrapper_decode(rx, flags, buf, cut, &s, &ctx, out);
    static const uint8_t masks[] = {0x01, 0x80, 0xff};
    for (size_t p = 0; p < len; p++)
        for (int k = 0; k < 3; k++, tried++) {
            buf[p] ^= masks[k];
            accepted += !pz_wrapper_decode(rx, flags, buf, len, &s, &ctx, out);
            buf[p] ^= masks[k];
        }
    CHECK(!memcmp(buf, copy, len), "test bug: message not restored");
    /* longer than the message: trailing bytes */
    buf[len] = 0;
    accepted += !pz_wrapper_decode(rx, flags, buf, len + 1, &s, &ctx, out);
    for (int f = 0; f < 256; f++, tried++)
        if (f != flags) accepted += !pz_wrapper_decode(rx, (uint8_t)f, buf, len, &s, &ctx, out);
    /* wrong ids: a delta id the receiver never saw, a duplicate, none */
    uint64_t wrong[6], dup[6];
    memcpy(wrong, mix, sizeof mix);
    wrong[0] = wd.ids[30];
    memcpy(dup, mix, sizeof mix);
    dup[5] = dup[0];
    pz_codec_ctx cw = ctx, cdup = ctx, cnone = ctx;
    cw.sample_ids = wrong;
    cdup.sample_ids = dup;
    cnone.sample_ids = NULL;
    accepted += !pz_wrapper_decode(rx, flags, buf, len, &s, &cw, out);
    accepted += !pz_wrapper_decode(rx, flags, buf, len, &s, &cdup, out);
    accepted += !pz_wrapper_decode(rx, flags, buf, len, &s, &cnone, out);
    /* wrong shapes: other sample count, other row */
    pz_shape s5 = s, srow = shape3(6, 4, 8), s2d = {.ndim = 2, .dims = {6, 32}};
    s5.dims[0] = 5;
    accepted += !pz_wrapper_decode(rx, flags, buf, len, &s5, &ctx, out);
    accepted += !pz_wrapper_decode(rx, flags, buf, len, &srow, &ctx, out);
    accepted += !pz_wrapper_decode(rx, flags, buf, len, &s2d, &ctx, out);
    tried += 7;
    snap_take(&after, rx, PZ_WRAP_RECEIVER);
    printf("aq(%s) mem=%zu: %d corrupted/truncated/mismatched decodes, %d accepted; receiver state %s\n", inner,
           mem_limit, tried, accepted, snap_same(&before, &after) ? "unchanged" : "CHANGED");
    CHECK(accepted == 0, "aq(%s): %d bad messages accepted", inner, accepted);
    CHECK(snap_same(&before, &after), "aq(%s): a rejected message changed the receiver's buffers", inner);
    CHECK(!pz_wrapper_decode(rx, flags, buf, len, &s, &ctx, out), "aq(%s): genuine message rejected: %s", inner,
          pz_last_error());
    CHECK(stores_equal(tx, PZ_WRAP_SENDER, rx, PZ_WRAP_RECEIVER), "aq(%s): out of sync after the genuine message",
          inner);
    snap_free(&before);
    snap_free(&after);
    free(buf); free(copy); free(x); free(out); free(wd.base);
    pz_wrapper_free(tx);
    pz_wrapper_free(rx);
}

/* One object as both ends (loopback, as the CLI does): the two roles keep
 * separate state and stay equal. */
static void test_aq_loopback(void) {
    pz_wrapper *w = make(PZ_WRAP_AQ, "q4", NULL);
    pz_shape s = shape3(3, 4, 8);
    size_t cap = pz_wrapper_max_payload(w, &s), len;
    uint8_t *buf = xmalloc(cap), flags;
    float x[96], out[96];
    for (int t = 0; t < 20; t++) {
        uint64_t ids[3] = {(uint64_t)t % 5, 10 + (uint64_t)t % 7, 100 + (uint64_t)t};
        fill_normal(x, 96, 1.0f);
        pz_codec_ctx ctx = {.step = (uint64_t)t, .sample_ids = ids};
        CHECK(!send(w, w, x, &s, &ctx, out, buf, cap, &len, &flags), "aq loopback: %s", pz_last_error());
    }
    CHECK(stores_equal(w, PZ_WRAP_SENDER, w, PZ_WRAP_RECEIVER), "aq loopback: roles differ");
    free(buf);
    pz_wrapper_free(w);
}

/* A restarted sender (fresh object) sends every id as warm-up again; the
 * receiver overwrites its buffers and the two are in sync from then on. */
static void test_aq_rewarm(void) {
    pz_wrapper *tx1 = make(PZ_WRAP_AQ, "q4", NULL), *rx = make(PZ_WRAP_AQ, "q4", NULL);
    pz_shape s = shape3(3, 2, 8);
    size_t cap = pz_wrapper_max_payload(tx1, &s), len;
    uint8_t *buf = xmalloc(cap), flags;
    float x[48], out[48];
    uint64_t ids[3] = {1, 2, 3};
    for (int t = 0; t < 5; t++) {
        fill_normal(x, 48, 1.0f);
        pz_codec_ctx ctx = {.step = (uint64_t)t, .sample_ids = ids};
        CHECK(!send(tx1, rx, x, &s, &ctx, out, buf, cap, &len, &flags), "aq: %s", pz_last_error());
    }
    pz_wrapper_free(tx1);
    pz_wrapper *tx2 = make(PZ_WRAP_AQ, "q4", NULL);
    uint64_t ids2[3] = {3, 1, 4};
    for (int t = 0; t < 5; t++) {
        fill_normal(x, 48, 1.0f);
        pz_codec_ctx ctx = {.step = 10 + (uint64_t)t, .sample_ids = ids2};
        CHECK(!send(tx2, rx, x, &s, &ctx, out, buf, cap, &len, &flags), "aq rewarm: %s", pz_last_error());
        CHECK(flags == (t ? 2 : 1), "aq rewarm: flags %d at round %d", flags, t);
        if (!t) CHECK(!memcmp(out, x, sizeof x), "aq rewarm: warm-up not exact");
    }
    int same = 1;
    for (int i = 0; i < 3; i++) {
        const float *a = pz_wrapper_aq_find(tx2, PZ_WRAP_SENDER, ids2[i]), *b = pz_wrapper_aq_find(rx, PZ_WRAP_RECEIVER, ids2[i]);
        same &= a && b && !memcmp(a, b, 16 * sizeof(float));
    }
    CHECK(same && pz_wrapper_aq_count(rx, PZ_WRAP_RECEIVER) == 4, "aq rewarm: receiver out of sync");
    free(buf);
    pz_wrapper_free(tx2);
    pz_wrapper_free(rx);
}

/* Random streams: the delta message is C's message for ctx as given (bitwise
 * the bare codec's), the warm-up message uses its own stream (with a
 * stochastic warm-up codec it differs from the bare codec's for that ctx). */
static void test_aq_streams(void) {
    /* stochastic rounding: the two streams must differ */
    pz_wrap_opts o = {.warmup_spec = "q4:round=stochastic"};
    pz_wrapper *tx = make(PZ_WRAP_AQ, "q4:round=stochastic", &o);
    pz_codec *bare = NULL;
    if (pz_codec_create("q4:round=stochastic", &bare)) pz_die("%s", pz_last_error());
    pz_shape s = shape3(2, 4, 32);
    size_t cap = pz_wrapper_max_payload(tx, &s), len, blen;
    uint8_t *buf = xmalloc(cap), *ref = xmalloc(cap), flags;
    float x[256], d[256];
    uint64_t ids[2] = {5, 6};
    pz_codec_ctx ctx = {.seed = 77, .step = 3, .edge = 1, .micro = 1, .sample_ids = ids};
    fill_normal(x, 256, 1.0f);
    if (pz_wrapper_encode(tx, x, &s, &ctx, buf, cap, &len, &flags) || pz_codec_encode(bare, x, &s, &ctx, ref, cap, &blen))
        pz_die("%s", pz_last_error());
    CHECK(flags == 1 && len == 8 + blen && memcmp(buf + 8, ref, blen), "aq: the warm-up message shares the delta stream");
    fill_normal(x, 256, 1.0f);
    for (int i = 0; i < 2; i++) {
        const float *m = pz_wrapper_aq_find(tx, PZ_WRAP_SENDER, ids[i]);
        for (int e = 0; e < 128; e++) d[i * 128 + e] = x[i * 128 + e] - m[e];
    }
    ctx.step = 4;
    if (pz_wrapper_encode(tx, x, &s, &ctx, buf, cap, &len, &flags) || pz_codec_encode(bare, d, &s, &ctx, ref, cap, &blen))
        pz_die("%s", pz_last_error());
    CHECK(flags == 2 && len == 8 + blen && !memcmp(buf + 8, ref, blen), "aq: the delta message is not C(x - m) for ctx");
    free(buf);
    free(ref);
    pz_codec_free(bare);
    pz_wrapper_free(tx);
}

/* ---- through the framework (pz_codec) ------------------------------------------ */

/* Canonical specs spell out non-default options and read back to themselves. */
static void test_specs(void) {
    static const char *specs[] = {"aq(q4)", "aq(topk:0.1,mem=4096,spill=/tmp,warmup=fp16)", "aq(q4,warmup=fp32)",
                                  "ef(topk:0.1)", "ef21(q2:round=nearest)", "ef(aq(q4))"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        pz_codec *a = NULL, *b = NULL;
        pz_status st = pz_codec_create(specs[i], &a);
        CHECK(!st, "pz_codec_create(%s): %s", specs[i], pz_last_error());
        if (st) continue;
        st = pz_codec_create(pz_codec_spec(a), &b);
        CHECK(!st && !strcmp(pz_codec_spec(a), pz_codec_spec(b)), "%s: canonical '%s' does not read back (%s)",
              specs[i], pz_codec_spec(a), st ? pz_last_error() : pz_codec_spec(b));
        printf("spec %-45s -> %s\n", specs[i], pz_codec_spec(a));
        int defaults = i == 0 || i == 2;
        const char *cs = pz_codec_spec(a);
        CHECK(!defaults || (!strstr(cs, "warmup=") && !strstr(cs, "mem=") && !strstr(cs, "spill=")),
              "%s: default options spelled out: %s", specs[i], cs);
        pz_codec_free(a);
        pz_codec_free(b);
    }
}



static void test_framework(const char *spec, pz_wrap_kind kind, const char *inner) {
    pz_codec *ctx_tx = NULL, *ctx_rx = NULL;
    pz_status st = pz_codec_create(spec, &ctx_tx);
    if (!st) st = pz_codec_create(spec, &ctx_rx);
    CHECK(!st, "pz_codec_create(%s): %s", spec, pz_last_error());
    if (st) {
        pz_codec_free(ctx_tx);
        return;
    }
    CHECK(pz_codec_is_stateful_decoder(ctx_rx) == (kind != PZ_WRAP_EF), "%s: is_stateful_decoder", spec);
    pz_wrapper *tx = make(kind, inner, NULL), *rx = make(kind, inner, NULL);
    pz_shape s = shape3(4, 4, 16);
    size_t n = pz_shape_numel(&s);
    size_t cap = pz_codec_max_encoded_size(ctx_tx, &s), wcap = pz_wrapper_max_payload(tx, &s), len, wlen;
    uint8_t *msg = xmalloc(cap), *wbuf = xmalloc(wcap), flags;
    float x[256], out[256], ref[256];
    int mismatches = 0, accepted = 0;
    for (int t = 0; t < 40; t++) {
        uint64_t ids[4] = {(uint64_t)t % 6, 50 + (uint64_t)t % 9, 200 + (uint64_t)t, 7 + 3 * (uint64_t)(t % 2)};
        if (t % 2) ids[3] = 1000;
        fill_normal(x, n, 1.0f);
        pz_codec_ctx ctx = {.seed = 5, .step = (uint64_t)t, .micro = (uint32_t)t % 3, .sample_ids = ids};
        if (pz_codec_encode(ctx_tx, x, &s, &ctx, msg, cap, &len)) {
            CHECK(0, "%s encode: %s", spec, pz_last_error());
            break;
        }
        CHECK(!send(tx, rx, x, &s, &ctx, ref, wbuf, wcap, &wlen, &flags), "%s: %s", spec, pz_last_error());
        if (t % 5 == 4) { /* a corrupted copy first: rejected, and harmless */
            for (size_t p = 0; p < len; p += 1 + len / 50) {
                msg[p] ^= 0x40;
                pz_shape got;
                accepted += !pz_codec_decode(ctx_rx, msg, len, &ctx, out, n, &got);
                msg[p] ^= 0x40;
            }
            pz_shape got;
            accepted += !pz_codec_decode(ctx_rx, msg, len - 1, &ctx, out, n, &got);
        }
        pz_shape got;
        st = pz_codec_decode(ctx_rx, msg, len, &ctx, out, n, &got);
        CHECK(!st, "%s decode round %d: %s", spec, t, pz_last_error());
        mismatches += st || memcmp(out, ref, n * sizeof(float)) != 0;
    }
    printf("%s through pz_codec: %d of 40 outputs differ from the wrapper's; %d corrupted messages accepted\n", spec,
           mismatches, accepted);
    CHECK(mismatches == 0 && accepted == 0, "%s through pz_codec", spec);
    free(msg); free(wbuf);
    pz_codec_free(ctx_tx); pz_codec_free(ctx_rx);
    pz_wrapper_free(tx); pz_wrapper_free(rx);
}

int main(void) {
    pz_rng_seed(&rng, 42);
    test_ef_invariant("q2:round=nearest");
    test_ef_invariant("topk:0.1");
    test_ef_reduces_error("q2:round=nearest");
    test_ef_reduces_error("topk:0.1");
    test_ef21_tracks("topk:0.1");
    test_ef21_tracks("q2:round=nearest");
    test_shape_errors();
    test_aq("q4");
    test_aq("q2:round=nearest");
    test_aq("topk:0.3");
    test_aq_spill("q4");
    test_aq_corrupt("q4", 0);
    test_aq_corrupt("q4", 3 * 32 * sizeof(float));
    test_aq_loopback();
    test_aq_rewarm();
    test_aq_streams();
#ifndef PZ_TEST_NO_FRAMEWORK
    test_specs();
    test_ef_invariant("aq(q4)"); /* nested: ef around the framework's aq */
    test_framework("ef(q2:round=nearest)", PZ_WRAP_EF, "q2:round=nearest");
    test_framework("ef21(topk:0.1)", PZ_WRAP_EF21, "topk:0.1");
    test_framework("aq(q4)", PZ_WRAP_AQ, "q4");
#endif
    return check_summary("test_wrappers");
}
