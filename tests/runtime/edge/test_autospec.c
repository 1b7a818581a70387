/* test_autospec: --compress auto's pure parts (runtime/edge/autospec.c): the
 * decision rule on given compute, link and error figures (and the quality
 * bound, max-err), the candidate
 * list and its defaults, the initial candidate and the decision steps. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/edge/autospec.h"
#include "tests/check.h"

/* candidates in the default order: error rises, bytes per step fall */
static const pz_auto_fig figs[] = {
    {1, 2e-4, 100000}, /* fp16 */ {1, 4e-3, 50000}, /* q8 */ {1, 0.05, 26000}, /* hadamard(q4) */
    {1, 0.09, 25000},  /* q4 */   {1, 0.6, 12500},  /* q2 */
};
enum { NF = sizeof figs / sizeof figs[0] };
#define NB 1e9   /* no quality bound: the rule's time part alone */

/* issue 26: the quality bound (max-err). At 10 Mbit/s in plain 1F1B (0.05
 * of compute), auto sent activations as q2 (rel err 0.79, +2.6% loss in the
 * sweep) where q4 missed the share by less than 2x. */
static void test_quality_bound(void) {
    pz_auto_fig f[NF];
    memcpy(f, figs, sizeof f);
    f[4].rel_err = 0.79;   /* q2 as measured on the demo preset's activations */
    double link = 0;
    /* compute 0.25 s: 12.5 ms allowed; only q2's 10 ms fits, q4's 20 ms within 2x */
    CHECK(pz_auto_choose(f, NF, 0.25, 1.25e6, 0, PZ_AUTO_MARGIN_EXPOSED, NB, &link) == 4, "without the bound: q2");
    int got = pz_auto_choose(f, NF, 0.25, 1.25e6, 0, PZ_AUTO_MARGIN_EXPOSED, PZ_AUTO_MAX_ERR, &link);
    CHECK(got == 3 && fabs(link - 0.02) < 1e-9, "bound 0.5: candidate %d (link %g s), want q4", got, link);
    CHECK(f[got].rel_err <= PZ_AUTO_MAX_ERR, "a pick above the bound");
    /* under it, the least link time within 2x (q4, not the more precise hadamard(q4) at 20.8 ms) */
    CHECK(pz_auto_choose(f, NF, 0.21, 1.25e6, 0, PZ_AUTO_MARGIN_EXPOSED, PZ_AUTO_MAX_ERR, &link) == 3, "q4 in 2x");
    /* nothing under the bound within 2x (15 ms of 0.15 s): the fewest bytes, even above it */
    CHECK(pz_auto_choose(f, NF, 0.15, 1.25e6, 0, PZ_AUTO_MARGIN_EXPOSED, PZ_AUTO_MAX_ERR, &link) == 4,
          "nothing within 2x: q2");
    /* a pick within the bound is kept as it is (hadamard(q4) fits 25 ms) */
    CHECK(pz_auto_choose(f, NF, 0.5, 1.25e6, 0, PZ_AUTO_MARGIN_EXPOSED, PZ_AUTO_MAX_ERR, &link) == 2, "fits");
    /* a tight bound: only fp16 and q8 qualify; q8 at 40 ms is within 2 x 0.9 x 25 ms */
    CHECK(pz_auto_choose(f, NF, 0.025, 1.25e6, 0, PZ_AUTO_MARGIN, 0.01, &link) == 1, "max-err 0.01: q8");
    /* the expected cost from the sweep's table (docs/results.md), where it has a row */
    CHECK(pz_auto_sweep_cost("q2", 0) && strcmp(pz_auto_sweep_cost("q2", 0), "+2.62%") == 0, "fwd q2's cost");
    CHECK(pz_auto_sweep_cost("q2", 1) && strcmp(pz_auto_sweep_cost("q2", 1), "+0.23%") == 0, "bwd q2's cost");
    CHECK(!pz_auto_sweep_cost("q8", 0) && !pz_auto_sweep_cost("q4", 1) && !pz_auto_sweep_cost(NULL, 0),
          "a cost where the sweep has no row");
    /* the option */
    pz_auto_spec a;
    CHECK(pz_auto_parse("auto", &a) == PZ_OK && a.max_err == PZ_AUTO_MAX_ERR, "default max-err %g", a.max_err);
    pz_auto_spec_free(&a);
    CHECK(pz_auto_parse("auto:max-err=0.2,every=3", &a) == PZ_OK && a.max_err == 0.2 && a.every == 3, "%s",
          pz_last_error());
    pz_auto_spec_free(&a);
    CHECK(pz_auto_parse("auto:candidates=q8/q4,max-err=0.3", &a) == PZ_OK && a.max_err == 0.3 && a.n == 2, "%s",
          pz_last_error());
    pz_auto_spec_free(&a);
    static const char *bad[] = {"auto:max-err=0", "auto:max-err=-1", "auto:max-err=x", "auto:max-err=",
                                "auto:max-err=0.5,max-err=0.4", "auto:max-err=0.5x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(pz_auto_parse(bad[i], &a) == PZ_ERR_ARG && strstr(pz_last_error(), "max-err"), "'%s': %s", bad[i],
              pz_last_error());
        pz_auto_spec_free(&a);
    }
}

static void choose(double compute, double mbps, double lat_ms, int want, double want_link) {
    double link = -1;
    int got = pz_auto_choose(figs, NF, compute, mbps * 1e6 / 8, lat_ms * 1e-3, PZ_AUTO_MARGIN, NB, &link);
    CHECK(got == want, "compute %g s, %g Mbit/s, %g ms: candidate %d, want %d", compute, mbps, lat_ms, got, want);
    CHECK(want_link < 0 || (link > want_link * 0.999 && link < want_link * 1.001), "link %g s, want %g", link,
          want_link);
}

int main(void) {
    test_quality_bound();
    /* a fast link: the most precise one fits (100 kB at 10 Gbit/s: 80 us) */
    choose(0.01, 10000, 0, 0, 8e-5);
    /* unlimited (rate 0) and no delay: everything fits, fp16 wins */
    {
        double link = -1;
        CHECK(pz_auto_choose(figs, NF, 0.01, 0, 0, PZ_AUTO_MARGIN, NB, &link) == 0 && link == 0, "unlimited link");
    }
    /* 10 Mbit/s = 1.25 MB/s: fp16 needs 80 ms, q8 40 ms, hadamard(q4) 20.8 ms, q4 20 ms, q2 10 ms */
    choose(0.1, 10, 0, 0, 0.08);       /* 80 ms <= 0.9 * 100 ms */
    choose(0.08, 10, 0, 1, 0.04);      /* fp16 is over 72 ms: q8 */
    choose(0.025, 10, 0, 2, 0.0208);   /* 22.5 ms: hadamard(q4) fits and errs less than q4 */
    choose(0.0115, 10, 0, 4, 0.01);    /* only q2 fits 10.35 ms */
    choose(0.001, 10, 0, 4, 0.01);     /* nothing fits: the fewest bytes */
    /* fill and drain: where the link runs beside compute, one message more
     * per step. The demo preset's case at 10 Mbit/s, 4 micro-batches of
     * 4 x 128 x 384, compute 1.65 s: fp16's 4 messages of 393216 bytes take
     * 1.26 s, within 0.9 x 1.65 = 1.485 s, but with the fifth 1.57 s, not:
     * q8 (0.79 s) is chosen; where every message is on the critical path,
     * no extra message */
    CHECK(pz_auto_step_bytes(393216, 4, 1) == 5 * 393216.0, "overlapped: micro + 1 messages");
    CHECK(pz_auto_step_bytes(393216, 4, 0) == 4 * 393216.0, "exposed: micro messages");
    {
        pz_auto_fig f[2] = {{1, 2e-4, 0}, {1, 4e-3, 0}};
        double link = -1;
        f[0].bytes = pz_auto_step_bytes(393216, 4, 0);
        f[1].bytes = pz_auto_step_bytes(196864, 4, 0);
        CHECK(pz_auto_choose(f, 2, 1.65, 1.25e6, 0, PZ_AUTO_MARGIN, NB, &link) == 0, "fp16 without the fill message");
        f[0].bytes = pz_auto_step_bytes(393216, 4, 1);
        f[1].bytes = pz_auto_step_bytes(196864, 4, 1);
        CHECK(pz_auto_choose(f, 2, 1.65, 1.25e6, 0, PZ_AUTO_MARGIN, NB, &link) == 1 && fabs(link - 0.787456) < 1e-6,
              "q8 with it: %g s", link);
    }
    /* a candidate worse than zeros (rel err >= 1) is never the pick while
     * another one is useful: q2 at rel err 1.16 on gradients (measured on
     * the demo preset) loses to q4 even where only q2 fits the compute */
    {
        pz_auto_fig f[3] = {{1, 4e-3, 1e6}, {1, 0.155, 5e5}, {1, 1.16, 2.6e5}};
        double link = -1;
        CHECK(pz_auto_choose(f, 3, 0.3, 1.25e6, 0, PZ_AUTO_MARGIN, NB, &link) == 1, "q2 worse than zeros was picked");
        f[1].rel_err = 1.0;
        f[0].rel_err = 1.5;
        CHECK(pz_auto_choose(f, 3, 0.3, 1.25e6, 0, PZ_AUTO_MARGIN, NB, &link) == 2, "all bad: the fewest bytes");
    }
    /* the margin: just within 0.9 of compute fits, just over does not */
    choose(0.08 / 0.9 * 1.001, 10, 0, 0, 0.08);
    choose(0.08 / 0.9 * 0.999, 10, 0, 1, 0.04);
    /* one-way delay is added to each candidate's link time: 30 ms pushes q8 out of 63 ms */
    choose(0.07, 10, 30, 2, 0.0508);
    choose(0.07, 10, 0, 1, 0.04);
    /* plain 1F1B: only 0.05 of compute; 25 ms of 0.5 s fit hadamard(q4), not q8's 40 */
    {
        double link = 0;
        int got = pz_auto_choose(figs, NF, 0.5, 1.25e6, 0, PZ_AUTO_MARGIN_EXPOSED, NB, &link);
        CHECK(got == 2, "exposed margin: candidate %d, want 2", got);
    }
    /* unmeasured candidates are skipped; none measured: -1 */
    {
        pz_auto_fig f[NF];
        memcpy(f, figs, sizeof f);
        f[0].measured = 0;
        double link = 0;
        CHECK(pz_auto_choose(f, NF, 1.0, 1.25e6, 0, PZ_AUTO_MARGIN, NB, &link) == 1, "unmeasured fp16 picked");
        for (int k = 0; k < NF; k++) f[k].measured = 0;
        CHECK(pz_auto_choose(f, NF, 1.0, 1.25e6, 0, PZ_AUTO_MARGIN, NB, &link) == -1, "nothing measured, yet a pick");
    }
    /* equal errors: the earlier candidate; equal bytes when nothing fits: the earlier one too */
    {
        pz_auto_fig f[3] = {{1, 0.1, 1000}, {1, 0.1, 500}, {1, 0.2, 500}};
        double link = 0;
        CHECK(pz_auto_choose(f, 3, 1.0, 0, 0, PZ_AUTO_MARGIN, NB, &link) == 0, "tie on error");
        CHECK(pz_auto_choose(f, 3, 1e-9, 1e3, 0, PZ_AUTO_MARGIN, NB, &link) == 1, "tie on bytes");
    }

    /* the spec: defaults, options, canonical names */
    {
        pz_auto_spec a;
        CHECK(pz_auto_parse("auto", &a) == PZ_OK, "%s", pz_last_error());
        CHECK(a.every == PZ_AUTO_EVERY && a.n == 5 && strcmp(a.cand[0], "fp16") == 0 &&
                  strcmp(a.cand[2], "hadamard(q4)") == 0 && strncmp(a.canon[1], "q8:", 3) == 0,
              "defaults: every %d, %d candidates", a.every, a.n);
        /* fp16 first when the rate is unknown, the fewest bytes as listed when simulated */
        CHECK(pz_auto_initial(&a, 0) == 0 && pz_auto_initial(&a, 10) == 4, "initial candidates");
        pz_auto_spec_free(&a);
        pz_auto_spec_free(&a);   /* safe twice */
        CHECK(pz_auto_parse("auto:every=7,candidates=none/q4:group=row,round=nearest", &a) == PZ_OK, "%s",
              pz_last_error());
        CHECK(a.every == 7 && a.n == 2 && strcmp(a.cand[0], "none") == 0 &&
                  strcmp(a.cand[1], "q4:group=row,round=nearest") == 0,
              "options: every %d, %d candidates", a.every, a.n);
        /* decisions after step 2, then every multiple of every */
        int d[16], nd = 0;
        for (int s = 1; s <= 15; s++)
            if (pz_auto_decides(&a, s)) d[nd++] = s;
        CHECK(nd == 3 && d[0] == 2 && d[1] == 7 && d[2] == 14, "decision steps: %d of them", nd);
        char buf[256];
        pz_auto_describe(&a, buf, sizeof buf);
        CHECK(strncmp(buf, "auto(every 7, max-err 0.5: none | q4:", 37) == 0 && buf[strlen(buf) - 1] == ')',
              "describe: %s", buf);
        pz_auto_describe(&a, buf, 12);   /* truncated, terminated */
        CHECK(strlen(buf) == 11, "describe into 12 bytes: '%s'", buf);
        pz_auto_spec_free(&a);
        CHECK_STATUS(pz_auto_parse("auto:every=1000001", &a), PZ_ERR_ARG, "1 .. 1000000");
        pz_auto_spec_free(&a);
        CHECK(!pz_auto_is("autox") && !pz_auto_is(NULL) && pz_auto_is("auto:every=1"), "pz_auto_is");
        /* more than PZ_AUTO_MAX candidates */
        char many[256] = "auto:candidates=q8";
        for (int k = 1; k <= PZ_AUTO_MAX; k++) strcat(many, "/q4");
        CHECK_STATUS(pz_auto_parse(many, &a), PZ_ERR_ARG, "more than 16 candidates");
        pz_auto_spec_free(&a);
    }
    return check_summary("test_autospec");
}
