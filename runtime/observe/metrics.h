/* metrics.h: what compression did on each edge, kept by rank 0.
 *
 * Every step the ranks sum their pz_edge_stats (runtime/edge/edge.h) into one
 * array, [2*edge + dir][PZ_EDGE_STATS_N]; rank 0 feeds it here. Output:
 *  - PREFIX.jsonl: one line per step, one entry per edge and direction
 *    (bytes of that step, ratio, relative error, codec milliseconds), and
 *    with replicas the data-parallel average's bytes and times ("dp");
 *  - PREFIX.csv: one row per edge and direction over the whole run;
 *  - a table on stderr at the end.
 * Files are written atomically: a failed run leaves none. */
#ifndef PZ_METRICS_H
#define PZ_METRICS_H

#include <stdio.h>

#include "runtime/edge/policy.h"
#include "base/io/file.h"
#include "base/status.h"

/* A stage's data-parallel figures of a step (--replicas; the replicas'
 * mean): gradient bytes averaged, bytes it sent, seconds its average was in
 * flight (runtime/dp/sync.h), and seconds of those hidden behind its own
 * work (the backward, sends): not spent waiting for the average. */
enum { PZ_DP_RAW, PZ_DP_WIRE, PZ_DP_SYNC, PZ_DP_HIDDEN, PZ_DP_FIGS };

typedef struct {
    int edges, micro, error_metrics, steps;
    char **codec;              /* [2*e+d]: canonical spec or "none"; auto: the live candidate's */
    int *is_auto;              /* [2*e+d]: the policy says auto */
    double *next;              /* [2*e+d][5]: auto's decision after this step (rel err, link s,
                                  compute s, rate B/s, predicted step s), written by pz_metrics_step */
    char **next_codec;         /* [2*e+d]: the candidate picked, NULL: no decision */
    double *tot;               /* [2*e+d][PZ_EDGE_STATS_N]: run totals */
    double *relerr_sum;        /* [2*e+d]: sum of per-step relative errors */
    int *relerr_n;
    double *tok_s;             /* per step */
    int cap_tok;
    char sched[32];            /* --schedule auto's choice after this step, "": none */
    char *prefix;
    pz_atomic_file jl;
    int have_jl;
    int dp_stages;             /* --replicas: stages whose figures come each step (0: none) */
    double *dp_tot;            /* [stage][PZ_DP_FIGS]: run totals */
} pz_metrics;

pz_status pz_metrics_init(pz_metrics *m, const pz_policy *p, const char *prefix, int micro, int error_metrics,
                          int dp_stages);
/* Bytes of one direction summed over edges, from a step's stats array. */
void pz_metrics_dir_bytes(const double *es, int edges, int dir, double *raw, double *wire);
/* dp's figures ([stage][PZ_DP_FIGS]) summed over the stages into sum[PZ_DP_FIGS]. */
void pz_metrics_dp_sum(const double *dp, int stages, double *sum);
/* Records step (1-based) with its summed stats es, the stages' data-parallel
 * figures dp ([stage][PZ_DP_FIGS], NULL without replicas) and throughput. */
void pz_metrics_step(pz_metrics *m, int step, const double *es, const double *dp, double tok_s);
/* auto decided after the step that pz_metrics_step records next: (edge,
 * dir) k goes on with codec; the step's JSONL entry says so and the figures. */
void pz_metrics_auto(pz_metrics *m, int k, const char *codec, double rel_err, double link_s, double compute_s,
                     double rate, double step_s);
/* Writes the CSV, commits the JSONL, prints the table on stderr and the
 * {"summary":...} line on stdout. state_bytes / spill_bytes: per rank. */
pz_status pz_metrics_finish(pz_metrics *m, const char *policy_text, const double *state_bytes,
                            const double *spill_bytes, int world);
/* --schedule auto chose sched ("1f1b", "1f1b:warmup=K") after the step that
 * pz_metrics_step records next: its JSONL entry says so ("schedule_next"). */
void pz_metrics_schedule(pz_metrics *m, const char *sched);
void pz_metrics_free(pz_metrics *m);

#endif
