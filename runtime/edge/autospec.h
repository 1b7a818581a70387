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
/* A candidate fits when its link time per step is within a share of the
 * step's compute. With micro-batches in flight beyond plain 1F1B's (gpipe,
 * 1f1b:warmup=K > 0) the link runs beside compute and only its throughput
 * counts: 0.9 (the rest is slack for jitter and codec time). In plain 1F1B
 * and zb-h1 each micro-batch's activation and gradient are on its round
 * trip's critical path, so every second of link time lengthens the step:
 * only 0.05 of compute may go to each direction's link (at most ~10% per
 * edge). */
#define PZ_AUTO_MARGIN 0.9
#define PZ_AUTO_MARGIN_EXPOSED 0.05

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
/* The candidate both ends start with: the first (most precise), or the last
 * (fewest bytes, as listed) when the edge has a simulated rate, so a slow
 * link is not flooded before the first measurement. Same on every rank. */
int pz_auto_initial(const pz_auto_spec *a, double mbps);
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
    double bytes;      /* wire bytes per step the rule weighs (pz_auto_step_bytes) */
} pz_auto_fig;

/* Wire bytes per step that the rule weighs for a candidate sending
 * msg_bytes per message, micro messages per step. Where the link runs beside
 * compute (overlapped: gpipe, 1f1b:warmup=K), one message more: the step's
 * first activation crosses before the next stage can start and its last
 * gradient after the last backward, outside any overlap (fill and drain),
 * so with few micro-batches a codec whose micro messages just fit the share
 * of compute still stretches the step by a message's time. Where each
 * message is on the critical path anyway (plain 1F1B, zb-h1), micro. */
double pz_auto_step_bytes(double msg_bytes, int micro, int overlapped);

/* The decision (candidates with rel_err >= 1, worse than zeros, left out
 * unless all are): among measured candidates, the lowest rel_err whose link
 * time per step, bytes / rate + latency_s (rate in bytes/s; 0 = unlimited),
 * is at most margin * compute_s; if none fits, the one with the least link
 * time. Quality bound: a pick with rel_err above max_err is replaced by the
 * candidate within max_err with the least link time, when that time is at
 * most twice margin * compute_s (a step stretched by at most the link's
 * share again, rather than a gradient or activation too coarse to train
 * on). Ties go to the earlier candidate. Returns the index and its link
 * time (*link_s), or -1 when nothing was measured. */
int pz_auto_choose(const pz_auto_fig *f, int n, double compute_s, double rate, double latency_s, double margin,
                   double max_err, double *link_s);

#endif
