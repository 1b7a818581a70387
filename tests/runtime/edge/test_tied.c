/* test_tied.c: the tied-embedding exchange (runtime/edge/tied.c).
 *
 *  - for raw floats and for several stateless codecs, two ends that each
 *    encode their gradient and add the other's message end with bitwise
 *    equal sums, and the sum is that of the decoded terms: raw and fp32
 *    exactly g0 + g1, lossy codecs within their error;
 *  - the message sizes: raw V*C*4 bytes, q8 about a quarter;
 *  - codecs with state (ef, ef21, aq) are refused, naming the reason;
 *  - the default follows the bwd codec of edge 0-1 with 2 stages, where it
 *    has no state, and auto's live candidate where that codec is auto: both
 *    ends switch with it and stay equal;
 *  - a peer's message of the wrong length, another shape or a damaged
 *    header is an error naming the peer, not a crash or a silent add. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/edge/tied.h"
#include "base/mem.h"
#include "base/rng.h"
#include "base/status.h"
#include "tests/check.h"

enum { V = 67, C = 48 };

static void fill(float *g, size_t n, uint64_t seed) {
    pz_rng r;
    pz_rng_seed(&r, seed);
    for (size_t k = 0; k < n; k++) g[k] = 0.01f * pz_rng_normal(&r);
    g[5] = 0.7f;   /* a row that a few tokens dominate */
}

/* One exchange between ends a (0) and b (1, rank 3 say) that hold their
 * codecs; returns the largest difference of the sum from g0 + g1 relative
 * to its largest magnitude. */
static double exchange_ends(pz_tied *a, pz_tied *b, const char *what, size_t *msg_len) {
    size_t n = (size_t)V * C, l0 = 0, l1 = 0;
    float *g0 = xmalloc(n * 4), *g1 = xmalloc(n * 4), *exact = xmalloc(n * 4);
    fill(g0, n, 1);
    fill(g1, n, 2);
    for (size_t k = 0; k < n; k++) exact[k] = g0[k] + g1[k];
    double worst = INFINITY;
    if (!a->out || !b->out) goto out;
    CHECK_STATUS(pz_tied_encode(a, g0, 9, 4, 0, &l0), PZ_OK, NULL);
    CHECK_STATUS(pz_tied_encode(b, g1, 9, 4, 1, &l1), PZ_OK, NULL);
    CHECK(l0 <= a->cap && l1 <= b->cap, "%s: message longer than the capacity", what);
    memcpy(b->in, a->out, l0);   /* the transport */
    memcpy(a->in, b->out, l1);
    CHECK_STATUS(pz_tied_add(a, l1, 9, 4, 1, g0), PZ_OK, NULL);
    CHECK_STATUS(pz_tied_add(b, l0, 9, 4, 0, g1), PZ_OK, NULL);
    CHECK(!memcmp(g0, g1, n * 4), "%s: the two ends' sums differ", what);
    double m = 0.0, d = 0.0;
    for (size_t k = 0; k < n; k++) {
        m = fmax(m, fabs(exact[k]));
        d = fmax(d, fabs((double)g0[k] - exact[k]));
    }
    worst = d / m;
    *msg_len = l0;
out:
    free(g0);
    free(g1);
    free(exact);
    return worst;
}

static double exchange(const char *spec, size_t *msg_len) {
    pz_tied a = {0}, b = {0};
    CHECK_STATUS(pz_tied_init(&a, spec, V, C), PZ_OK, NULL);
    CHECK_STATUS(pz_tied_init(&b, spec, V, C), PZ_OK, NULL);
    double worst = exchange_ends(&a, &b, spec ? spec : "(null)", msg_len);
    pz_tied_free(&a);
    pz_tied_free(&b);
    return worst;
}

static void test_exchange(void) {
    static const struct {
        const char *spec;
        double bound;
    } cases[] = {{NULL, 0.0},       {"none", 0.0}, {"fp32", 0.0}, {"fp16", 1e-3}, {"q8", 0.01},
                 {"q4:round=stochastic", 0.2}, {"hadamard(q8)", 0.01}, {"q8+zstd", 0.01}, {"topk:0.5", 0.2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = 0;
        double e = exchange(cases[i].spec, &len);
        const char *s = cases[i].spec ? cases[i].spec : "(null)";
        printf("tied %-22s %6zu bytes  max error %.3g of the largest magnitude\n", s, len, e);
        CHECK(e <= cases[i].bound, "%s: error %g above %g", s, e, cases[i].bound);
        if (!cases[i].spec || !strcmp(cases[i].spec, "none"))
            CHECK(len == (size_t)V * C * 4, "%s: raw message %zu bytes", s, len);
        if (cases[i].spec && !strcmp(cases[i].spec, "q8"))
            CHECK(len < (size_t)V * C * 4 / 3, "q8: %zu bytes, not about a quarter of %d", len, V * C * 4);
    }
}

static void test_refused(void) {
    static const char *const stateful[] = {"ef(q4)", "ef21(sign)", "aq(q4)", "hadamard(ef(q8))"};
    for (size_t i = 0; i < sizeof stateful / sizeof stateful[0]; i++) {
        pz_tied t = {0};
        CHECK_STATUS(pz_tied_init(&t, stateful[i], V, C), PZ_ERR_ARG, "without state");
        CHECK(!t.out && !t.codec, "%s: a refused init left buffers", stateful[i]);
        pz_tied_free(&t);
    }
    pz_tied t = {0};
    /* a gradient: q rounds stochastically unless told otherwise */
    CHECK_STATUS(pz_tied_init(&t, "q8", V, C), PZ_OK, "");
    CHECK(t.codec && strstr(pz_codec_spec(t.codec), "round=stochastic"), "--compress-tied q8 is %s",
          t.codec ? pz_codec_spec(t.codec) : "(none)");
    pz_tied_free(&t);
    CHECK_STATUS(pz_tied_init(&t, "q8:round=nearest", V, C), PZ_OK, "");
    CHECK(t.codec && strstr(pz_codec_spec(t.codec), "round=nearest"), "q8:round=nearest became %s",
          t.codec ? pz_codec_spec(t.codec) : "(none)");
    pz_tied_free(&t);
    CHECK_STATUS(pz_tied_init(&t, "q9", V, C), PZ_ERR_ARG, "--compress-tied");
    pz_tied_free(&t);
    pz_tied_free(&t);   /* twice, and on a zeroed struct: safe */
}

static void test_bad_messages(void) {
    size_t n = (size_t)V * C, len = 0;
    float *g = xcalloc(n, 4);
    pz_tied raw = {0}, q = {0}, other = {0};
    CHECK_STATUS(pz_tied_init(&raw, NULL, V, C), PZ_OK, NULL);
    CHECK_STATUS(pz_tied_add(&raw, n * 4 - 4, 1, 1, 1, g), PZ_ERR_PEER, "from the last stage");
    CHECK_STATUS(pz_tied_init(&q, "q8", V, C), PZ_OK, NULL);
    CHECK_STATUS(pz_tied_init(&other, "q8", V + 1, C), PZ_OK, NULL);
    float *g2 = xcalloc(n + C, 4);
    fill(g2, n + C, 3);
    CHECK_STATUS(pz_tied_encode(&other, g2, 1, 1, 0, &len), PZ_OK, NULL);
    memcpy(q.in, other.out, len < q.cap ? len : q.cap);
    memset(g, 0, n * 4);
    pz_status st = pz_tied_add(&q, len < q.cap ? len : q.cap, 1, 1, 0, g);
    CHECK(st != PZ_OK, "a message of another shape was added");
    CHECK_STATUS(pz_tied_encode(&q, g, 1, 1, 0, &len), PZ_OK, NULL);
    q.in[0] ^= 0x5a;   /* damaged header */
    memcpy(q.in + 1, q.out + 1, len - 1);
    CHECK_STATUS(pz_tied_add(&q, len, 1, 1, 0, g), PZ_ERR_PEER, "from the first stage");
    pz_tied_free(&raw);
    pz_tied_free(&q);
    pz_tied_free(&other);
    free(g);
    free(g2);
}

/* --compress-tied's default (issue 26): the bwd codec of the edge that joins
 * the first and the last stage, when it has no state; else raw */
static void test_follow(void) {
    static const struct { int stages; const char *policy; const char *want; int follows_auto; } cases[] = {
        {2, "fwd=q4,bwd=q8", "q8", 0},
        {2, "bwd=topk:0.1", "topk:0.1", 0},
        {2, "fwd=q4", NULL, 0},                  /* bwd raw */
        {2, "bwd=ef(q8)", NULL, 0},              /* state on one end only */
        {2, "bwd=aq(q4)", NULL, 0},
        {2, "bwd=auto", NULL, 1},                /* changes at run time: pz_tied_init_auto */
        {2, "auto", NULL, 1},
        {2, "fwd=auto,bwd=q8", "q8", 0},
        {3, "bwd=auto", NULL, 0},                /* no edge joins the first and the last stage */
        {3, "fwd=q4,bwd=q8", NULL, 0},
        {4, "fwd=q4,bwd=q8", NULL, 0},           /* interleaved 2 x 2 chunks, too */
        {1, "", NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pz_policy p;
        pz_policy_init(&p, cases[i].stages);
        CHECK_STATUS(cases[i].stages > 1 ? pz_policy_parse(&p, cases[i].policy, "--compress") : PZ_OK, PZ_OK, NULL);
        const char *got = pz_tied_follow(&p), *want = cases[i].want;
        CHECK(want ? got && strcmp(got, want) == 0 : !got, "%d stages, %s: follows '%s', not '%s'",
              cases[i].stages, cases[i].policy, got ? got : "(raw)", want ? want : "(raw)");
        CHECK(pz_tied_follows_auto(&p) == cases[i].follows_auto, "%d stages, %s: follows auto %d", cases[i].stages,
              cases[i].policy, pz_tied_follows_auto(&p));
        pz_policy_free(&p);
    }
}

/* Where edge 0-1's bwd is auto, both ends use auto's live candidate and
 * switch with it: after each switch the sums stay bitwise equal, the message
 * is the candidate's, and the buffers (sized for the largest candidate, raw
 * here) stay where they are, since a send may still read the last one. */
static void test_auto(void) {
    pz_auto_spec as;
    CHECK_STATUS(pz_auto_parse_for("auto:candidates=none/fp16/q8/q2", PZ_USE_GRADIENT, &as), PZ_OK, NULL);
    pz_tied a = {0}, b = {0};
    CHECK_STATUS(pz_tied_init_auto(&a, &as, 2, V, C), PZ_OK, NULL);
    CHECK_STATUS(pz_tied_init_auto(&b, &as, 2, V, C), PZ_OK, NULL);
    CHECK(a.cap >= (size_t)V * C * 4, "capacity %zu below the raw candidate's %d bytes", a.cap, V * C * 4);
    const uint8_t *out = a.out;
    static const struct { int cur; size_t lo, hi; double bound; } steps[] = {
        {2, 1, V * C + 2 * C * 4 + 64, 0.01},     /* q8: a byte per element and the scales */
        {0, V * C * 4, V * C * 4, 0.0},           /* none: exact */
        {3, 1, V * C / 4 + 2 * C * 4 + 64, 0.2},  /* q2 */
        {1, V * C * 2, V * C * 2 + 64, 1e-3},     /* fp16 */
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        CHECK_STATUS(pz_tied_use(&a, steps[i].cur), PZ_OK, NULL);
        CHECK_STATUS(pz_tied_use(&b, steps[i].cur), PZ_OK, NULL);
        size_t len = 0;
        double e = exchange_ends(&a, &b, as.cand[steps[i].cur], &len);
        printf("tied following auto, %-5s %6zu bytes  max error %.3g\n", as.cand[steps[i].cur], len, e);
        CHECK(len >= steps[i].lo && len <= steps[i].hi, "%s: %zu bytes, expected %zu..%zu", as.cand[steps[i].cur],
              len, steps[i].lo, steps[i].hi);
        CHECK(e <= steps[i].bound, "%s: error %g above %g", as.cand[steps[i].cur], e, steps[i].bound);
        CHECK(a.out == out, "a switch moved the send buffer");
    }
    pz_tied_free(&a);
    pz_tied_free(&b);
    pz_auto_spec_free(&as);
}

int main(void) {
    test_follow();
    test_auto();
    test_exchange();
    test_refused();
    test_bad_messages();
    return check_summary("test_tied");
}
