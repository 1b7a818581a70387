/* autospec.h: the `auto` value of the compression policy (runtime/edge/policy.h)
 * and the rule that picks a candidate codec; pure functions, no runtime
 * state (runtime/exec/autopolicy.h runs them in the pipeline).
 *
 *   auto [':' opt (',' opt)*]
 *   opt := 'every=' N                  re-decide after every N steps (default 10)
 *        | 'candidates=' C ('/' C)*    codecs to pick from, most precise first
 *        | 'max-err=' E                quality bound (default 0.5, pz_auto_choose)
 * A candidate is 'none' (raw float32) or a codec spec without state across
 * messages (no ef, ef21 or aq: see runtime/exec/autopolicy.c for why). '/' never
 * occurs in codec specs, which use , : ( ) + themselves; a comma ends the
 * candidate list only before 'every=' or 'candidates='. Default candidates:
 * PZ_AUTO_DEFAULT. */
#ifndef PZ_AUTOSPEC_H
#define PZ_AUTOSPEC_H

#include <stddef.h>

#include "base/status.h"

#define PZ_AUTO_MAX 16
#define PZ_AUTO_DEFAULT "fp16/q8/hadamard(q4)/q4/q2"
#define PZ_AUTO_EVERY 10
#define PZ_AUTO_MAX_ERR 0.5   /* issue 26: q2's 0.79 cost +2.6% loss in the sweep (docs/results.md) */
/* The rule predicts each candidate's step (pz_auto_step_s). Where the
 * schedule keeps micro-batches in flight beyond plain 1F1B's (gpipe,
 * 1f1b:warmup=K > 0) the link runs beside compute, and its messages hide
 * while they take at most PZ_AUTO_MARGIN of it (the rest is slack for jitter
 * and codec time). Among candidates whose predicted steps are within
 * PZ_AUTO_TOL of the fastest, the least error wins (issue 26: a more
 * precise codec that costs 1% or less of the step; the two directions of
 * an edge decide apart, so together they stay within 2%). */
#define PZ_AUTO_MARGIN 0.9
#define PZ_AUTO_TOL 0.01

typedef struct {
    int every;                   /* re-decide after every `every` steps */
    double max_err;              /* max-err=E: the quality bound */
    int n;                       /* candidates */
    char *cand[PZ_AUTO_MAX];     /* as written ("none" for raw) */
    char *canon[PZ_AUTO_MAX];    /* canonical specs, every parameter spelled out */
} pz_auto_spec;

/* Whether a policy codec value is auto ("auto" or "auto:..."). */
int pz_auto_is(const char *spec);
/* Parses and checks an auto value (candidates are built once). Errors end
 * in " at offset N" (N into text), as codec spec errors do, so the policy
 * parser can put its caret there. a is zeroed first; free it either way. */
pz_status pz_auto_parse(const char *text, pz_auto_spec *a);
/* The same with the codec defaults of use (enum pz_codec_use): the
 * candidates of a bwd value are gradient codecs (pz_codec_create_for). */
pz_status pz_auto_parse_for(const char *text, int use, pz_auto_spec *a);
void pz_auto_spec_free(pz_auto_spec *a);
/* The candidate both ends start with, before anything is measured; the
 * same on every rank (a pure function of its arguments). Without a simulated
 * rate (mbps <= 0): the first (most precise). With one: the fewest bytes
 * among candidates whose error on a probe is within max-err (all of them
 * when none is): compute is not known before step 1, so it is taken as 0,
 * the guess under which every byte is on the step's critical path. The
 * probe is a deterministic Gaussian tensor of the edge's shape (B, T, C),
 * on which q2 errs 0.84 (nearest) and 1.26 (stochastic), q4 0.13 and 0.19,
 * near and above what the demo preset's tensors measured (autospec.c);
 * bytes and errors are the candidate codecs' own (use: enum pz_codec_use).
 * est_err (may be NULL) gets the start's error on the probe (-1: no probe). */
int pz_auto_start(const pz_auto_spec *a, int use, int B, int T, int C, double mbps, double *est_err);
/* Whether the sender decides after 1-based step `step`: after step 2 (step
 * 1 gives the first compute figure, and is cold), then after every
 * multiple of every. */
int pz_auto_decides(const pz_auto_spec *a, int step);
/* The expected cost of candidate cand (as written) alone in direction dir
 * (PZ_FWD/PZ_BWD), from the compression sweep's table (docs/results.md,
 * 2026-11-25: validation loss vs none after 40 fine-tuning steps from GPT-2
 * 124M, 3 seeds), e.g. "+2.62%"; NULL where the table has no such row. */
const char *pz_auto_sweep_cost(const char *cand, int dir);
/* "auto(every 10, max-err 0.5: fp16 | q8:... | ...)" */
void pz_auto_describe(const pz_auto_spec *a, char *buf, size_t cap);

/* What the sender measured of one candidate over the decision window. */
typedef struct {
    int measured;      /* 0: no sample yet (never chosen) */
    double rel_err;    /* ||x - x'|| / ||x|| over the sampled micro-batches */
    double msg;        /* wire bytes per message */
    double tied;       /* wire bytes of the tied-embedding message this direction's link carries per step (0: none) */
} pz_auto_fig;

/* The step the rule predicts (what it knows of one edge and direction). */
typedef struct {
    double compute_s;  /* the pipeline's compute per step */
    double rate;       /* link bytes/s (0: unlimited) */
    double latency_s;  /* one-way delay per message */
    int micro;         /* messages per step */
    int overlapped;    /* the link runs beside compute (gpipe, 1f1b:warmup=K > 0) */
} pz_auto_link;

/* A candidate's predicted step seconds and (*link_s, may be NULL) its link
 * seconds per step (micro messages, the tied one, delays). Overlapped:
 * max(compute, micro messages' time / PZ_AUTO_MARGIN) plus what no overlap
 * hides at the step boundary: one message (the first activation crosses
 * before the next stage starts; the last gradient after the last backward:
 * fill and drain) and the tied message (exchanged after the last backward).
 * Otherwise (plain 1F1B, zb-h1: each micro-batch's round trip waits for its
 * messages): compute plus every message and the tied one. */
double pz_auto_step_s(const pz_auto_fig *f, const pz_auto_link *l, double *link_s);

/* The decision (candidates with rel_err >= 1, worse than zeros, left out
 * unless all are): the candidates within max_err when one of them predicts
 * a step at most twice the fastest candidate's (pz_auto_step_s), else all;
 * among them, the least rel_err whose step is within PZ_AUTO_TOL of their
 * fastest. Ties go to the earlier candidate. Returns the index, its
 * predicted step (*step_s) and link time (*link_s), or -1 when nothing was
 * measured. */
int pz_auto_choose(const pz_auto_fig *f, int n, const pz_auto_link *l, double max_err, double *step_s, double *link_s);

#endif
