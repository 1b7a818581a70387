/* autopolicy.h: `--compress auto` in the pipeline executor (runtime/exec/pipeline*.c).
 *
 * For each (edge, direction) whose policy value is auto (runtime/edge/autospec.h):
 *  - both ends build an edge end per candidate codec; the executor's end
 *    (x->fwd_tx, ...) holds the live one, and a switch swaps ends, so the
 *    executor's code is the same as for a fixed codec. Every candidate's end
 *    gets the largest candidate's wire capacity, so buffers never change.
 *  - the sender encodes and decodes one sampled micro-batch per step
 *    (micro = step mod M) with every candidate's evaluation codec, apart
 *    from the live one's state: relative L2 error and wire bytes on the live
 *    tensor; it also times its own sends (link throughput).
 *  - at decision steps the sender picks (pz_auto_choose) and puts its pick
 *    into the step's reduction; after it every rank switches at the same step
 *    boundary, when no message is in flight. So a receiver always decodes
 *    with the codec the sender encoded with, and the decisions of rank 0's
 *    log and metrics are the senders' own.
 * Checkpoints keep the decisions (pz_auto_save, one small file per rank),
 * so a resumed run goes on with the candidates it stopped with; its window
 * of measurements starts empty, and it decides at the next multiple of
 * every. The candidates keep no state, so there is no codec state to keep. */
#ifndef PZ_AUTOPOLICY_H
#define PZ_AUTOPOLICY_H

#include <stdint.h>

#include "runtime/edge/autospec.h"
#include "runtime/edge/edge.h"
#include "runtime/observe/metrics.h"
#include "runtime/edge/policy.h"

/* per (edge, direction) in the step's reduction: chosen candidate + 1 (0: no
 * decision this step), its relative error, link seconds per step, the
 * compute seconds it was held against, the link rate in bytes/s (0 =
 * unlimited), its predicted step seconds (pz_auto_step_s), the live
 * candidate's measured error and predicted step (-1: not measured) */
#define PZ_AUTO_RED 8

typedef struct {
    pz_edge_end *live;          /* the executor's end (NULL: this slot is not auto) */
    const pz_auto_spec *spec;
    int edge, dir, sender, cur;
    pz_edge_end *cand;          /* [n]: the candidates' ends; cand[cur] is empty (it is *live) */
    /* the sender's measurements over the decision window */
    pz_codec **eval;            /* [n]: evaluation codecs (NULL for none) */
    uint8_t *wire;              /* evaluation scratch: a message and its decoding */
    float *out;
    double *err2, *norm2, *bytes;   /* [n]: sums over sampled messages */
    int *samples;
    double *post_t, *post_len, *done_t;   /* [micro]: this step's sends */
    double link_rate;                     /* window: the best rate a send achieved, bytes/s */
    double compute_sum;
    int compute_n;
} pz_auto_end;

typedef struct {
    int edges, micro, any;
    pz_auto_spec *specs;        /* [2*edge + dir]: n = 0 where not auto */
    int *cur;                   /* [2*edge + dir]: every rank's view of the live candidate */
    double *start_err;          /* [2*edge + dir]: the start's error on pz_auto_start's probe (-1: none) */
    pz_auto_end *end;           /* [nend]: this rank's ends, as the executor's slots (4 per chunk) */
    int nend;
    int tied_follows;           /* the tied exchange follows edge 0-1's bwd pick (runtime/edge/tied.h) */
    double eval_s;              /* time spent evaluating candidates */
    int eval_n;                 /* sampled messages evaluated */
} pz_autopol;

/* Parses the policy's auto values (already checked by the policy parser)
 * and picks each one's start (pz_auto_start, edges of B x T x C floats);
 * nend: the executor's edge-end slots. */
pz_status pz_auto_init(pz_autopol *a, const pz_policy *pol, int micro, int nend, int B, int T, int C);
/* Frees everything; safe on a zeroed struct and twice. Frees the candidates'
 * ends, not the executor's live ends. */
void pz_auto_free(pz_autopol *a);
/* pz_edge_init for slot 0..nend-1 (per chunk: fwd_tx, bwd_rx, fwd_rx, bwd_tx), or, where the
 * policy says auto, the candidates' ends with the initial one in *e. */
pz_status pz_auto_edge_init(pz_autopol *a, const pz_policy *pol, int slot, pz_edge_end *e, int edge, int dir,
                            int sender, int B, int T, int C, int measure_error);

/* After e encoded x of micro-batch micro: evaluates every candidate on the
 * sampled micro-batch (nothing for other ends or micro-batches). */
pz_status pz_auto_sample(pz_autopol *a, const pz_edge_end *e, const float *x, const uint64_t *ids, uint64_t seed,
                         uint64_t step, uint32_t micro);
/* A message of len bytes was posted at t / its send completed at t. */
void pz_auto_sent(pz_autopol *a, const pz_edge_end *e, int micro, size_t len, double t);
void pz_auto_send_done(pz_autopol *a, const pz_edge_end *e, int micro, double t);

/* What the rule weighs for the sender end s (pz_auto_fig, one per
 * candidate, from the window's samples): with tied_bytes, the tied message
 * each way per step; where the exchange follows this end's picks
 * (tied_follows, edge 0-1 bwd), each candidate's own, the live one's scaled
 * by the two candidates' message sizes. */
void pz_auto_figs(const pz_autopol *a, const pz_auto_end *s, double tied_bytes, pz_auto_fig *f);
/* Before the step's reduction (step 1-based): folds the step's sends into
 * the window and, at decision steps, writes this rank's picks into dec
 * (overlapped: the schedule runs the link beside compute, gpipe or
 * 1f1b:warmup=K > 0: pz_auto_step_s's two cases;
 * tied_bytes: the tied-embedding message each way per step that every
 * edge's link carries too: the caller passes it where every link joins the
 * first and the last rank, 2 ranks, else 0; where it follows edge 0-1's bwd
 * pick, tied_follows, each bwd candidate is weighed with its own, in
 * proportion to its messages) ([2*edge + dir][PZ_AUTO_RED], zeroed by the caller). */
void pz_auto_contribute(pz_autopol *a, const pz_policy *pol, int step, int overlapped, double tied_bytes, double *dec);
/* After the reduction: the pipeline's compute seconds this step (the largest
 * of the ranks), then the switches every rank makes; rank 0 (m != NULL)
 * prints the decisions and hands them to the metrics. */
void pz_auto_note_compute(pz_autopol *a, double compute_s);
void pz_auto_apply(pz_autopol *a, const double *dec, int step, pz_metrics *m);
/* Whether some auto decides after 1-based step (every rank agrees). */
int pz_auto_decided(const pz_autopol *a, int step);
/* Checkpoints: the live candidate of every auto (edge, direction), as text
 * ("pipezip-auto 1 <edges>" then "<2*edge+dir> <candidates> <live>" lines).
 * Loading switches this rank's ends; a file of another policy (other edges
 * or candidate counts) is refused, before anything changes. */
pz_status pz_auto_save(const pz_autopol *a, const char *path);
pz_status pz_auto_load(pz_autopol *a, const char *path);
/* Rank 0 at the start: the metrics' codecs are the start candidates (printed, with the probe's errors). */
void pz_auto_print_start(const pz_autopol *a, pz_metrics *m);
/* Rank 0 after loading: the metrics' codecs are the loaded candidates (printed). */
void pz_auto_metrics_sync(const pz_autopol *a, pz_metrics *m);
/* The evaluation's cost, one line on stderr (ranks that evaluated). */
void pz_auto_report(const pz_autopol *a, int rank, double run_s, int steps);

#endif
