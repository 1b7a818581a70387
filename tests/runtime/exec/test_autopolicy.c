/* test_autopolicy: what --compress auto's sender weighs per candidate
 * (pz_auto_figs, runtime/exec/autopolicy.c) and the pair it then picks.
 * With 2 stages the tied-embedding exchange shares edge 0-1's link each way;
 * since 62d7300 it follows auto's bwd pick, so each bwd candidate is
 * weighed with its own tied message (the live one's scaled by the two
 * candidates' message sizes), while the fwd candidates all carry the same
 * one. Figures: the demo preset at 10 Mbit/s (4 x 128 x 384 floats a
 * message, 8 micro-batches; wte 256 x 384). */
#include <math.h>
#include <string.h>

#include "runtime/exec/autopolicy.h"
#include "tests/check.h"

#define MBPS10 1.25e6
/* bytes of a message as measured, default candidates: fp16 q8 hadamard(q4) q4 q2 */
static const double msg[] = {393300, 198216, 99984, 99912, 50760};
static const double fwd_err[] = {2e-4, 0.004, 0.075, 0.076, 0.64};
static const double bwd_err[] = {5e-4, 0.006, 0.118, 0.166, 1.12};

/* a sender end of edge 0-1 in direction dir, live candidate cur, one sample each */
static void end_fill(pz_auto_end *s, const pz_auto_spec *spec, int dir, int cur, const double *err, double *err2,
                     double *norm2, double *bytes, int *samples) {
    memset(s, 0, sizeof *s);
    s->spec = spec, s->edge = 0, s->dir = dir, s->sender = 1, s->cur = cur;
    s->err2 = err2, s->norm2 = norm2, s->bytes = bytes, s->samples = samples;
    for (int k = 0; k < spec->n; k++) err2[k] = err[k] * err[k], norm2[k] = 1.0, bytes[k] = msg[k], samples[k] = 1;
}

/* the pair (fwd, bwd) picked with compute c, the live tied message tied_live (both ways) */
static void pick_pair(const pz_autopol *a, const pz_auto_spec *sf, const pz_auto_spec *sb, int cur, double c,
                      double tied_live, int *pf, int *pb, pz_auto_fig *fb) {
    double err2[2][PZ_AUTO_MAX], norm2[2][PZ_AUTO_MAX], bytes[2][PZ_AUTO_MAX], step, link;
    int samples[2][PZ_AUTO_MAX];
    pz_auto_end ef, eb;
    pz_auto_fig ff[PZ_AUTO_MAX];
    end_fill(&ef, sf, PZ_FWD, cur, fwd_err, err2[0], norm2[0], bytes[0], samples[0]);
    end_fill(&eb, sb, PZ_BWD, cur, bwd_err, err2[1], norm2[1], bytes[1], samples[1]);
    pz_auto_figs(a, &ef, tied_live, ff);
    pz_auto_figs(a, &eb, tied_live, fb);
    pz_auto_link l = {c, MBPS10, 0.0, 8, 1};
    *pf = pz_auto_choose(ff, sf->n, &l, sf->max_err, &step, &link);
    *pb = pz_auto_choose(fb, sb->n, &l, sb->max_err, &step, &link);
}

int main(void) {
    pz_auto_spec sf, sb;
    CHECK(pz_auto_parse_for("auto", 0, &sf) == PZ_OK && pz_auto_parse_for("auto", 1, &sb) == PZ_OK, "%s",
          pz_last_error());
    pz_autopol a;
    memset(&a, 0, sizeof a);
    a.micro = 8;
    const double raw_tied = 256 * 384 * 4.0, q4_tied = 49956;   /* q4's tied message: about half its activation's */
    int pf = -1, pb = -1;
    pz_auto_fig fb[PZ_AUTO_MAX];
    /* following auto, live q4: each bwd candidate's tied message in proportion to its messages */
    a.tied_follows = 1;
    pick_pair(&a, &sf, &sb, 3, 1.65, q4_tied, &pf, &pb, fb);
    for (int k = 0; k < sb.n; k++)
        CHECK(fabs(fb[k].tied - q4_tied * msg[k] / msg[3]) < 1e-6, "bwd candidate %d: tied %g", k, fb[k].tied);
    /* compute 1.65 s: q8's exposed fill, drain and tied message cost more than 2%: hadamard(q4) both ways
     * (the fwd's q2 is faster, above max-err; the bwd's q2 errs worse than zeros) */
    CHECK(pf == 2 && pb == 2, "compute 1.65 s: fwd %d, bwd %d, want hadamard(q4) both", pf, pb);
    /* compute 9 s: q8's bwd message and its tied one take 0.118 s more than q4's, 1.3% of the step: still
     * hadamard(q4) (the fwd's q8 costs 0.079 s, within 1%); weighed with the live (q4) tied message for
     * every candidate, the bwd's q8 would cost 0.079 s too, and win */
    pick_pair(&a, &sf, &sb, 3, 9.0, q4_tied, &pf, &pb, fb);
    CHECK(pf == 1 && pb == 2, "compute 9 s, following: fwd %d, bwd %d, want q8 / hadamard(q4)", pf, pb);
    a.tied_follows = 0;
    pick_pair(&a, &sf, &sb, 3, 9.0, q4_tied, &pf, &pb, fb);
    CHECK(pb == 1 && fb[1].tied == q4_tied, "compute 9 s, one tied size for all: bwd %d, want q8", pb);
    /* the exchange raw (--compress-tied none): the same message for every candidate */
    pick_pair(&a, &sf, &sb, 3, 1.65, raw_tied, &pf, &pb, fb);
    CHECK(pf == 2 && pb == 2 && fb[0].tied == raw_tied && fb[4].tied == raw_tied, "raw tied: fwd %d, bwd %d", pf, pb);
    /* following, the live candidate fp16: the same scaled figures as from q4 */
    a.tied_follows = 1;
    pick_pair(&a, &sf, &sb, 0, 9.0, q4_tied * msg[0] / msg[3], &pf, &pb, fb);
    CHECK(pb == 2 && fabs(fb[3].tied - q4_tied) < 1e-6, "live fp16: bwd %d, q4's tied %g", pb, fb[3].tied);
    pz_auto_spec_free(&sf);
    pz_auto_spec_free(&sb);
    return check_summary("test_autopolicy");
}
