/* report.h: the JSON lines a training run prints on stdout, one per step
 * and one per validation pass (the formats `pipezip train --help` names).
 * One stage prints the short forms; a pipeline adds its bytes per direction
 * and each stage's compute, wait and codec milliseconds. */
#ifndef PZ_REPORT_H
#define PZ_REPORT_H

#include <stdio.h>

typedef struct {
    int step;               /* 1-based */
    double loss, norm, ms, tok_s;
    float lr;
    double tied_wire;       /* bytes of one end's tied-embedding message (pipelines) */
    const double *dp;       /* --replicas: per stage PZ_DP_FIGS (runtime/observe/metrics.h), else NULL */
    double dp_var;          /* --dp-variance: ||estimate - exact mean||^2 / ||exact mean||^2, else < 0 */
} pz_step_line;

/* edge_stats: the step's summed pz_edge_stats per (edge, direction), `edges` of them (NULL
 * or world 1: the short form); rank_s: per rank compute, wait and codec
 * seconds, 3 values each. */
void pz_report_step(FILE *f, const pz_step_line *s, int world, int edges, const double *edge_stats,
                    const double *rank_s);

/* compressed < 0: one stage (no "compressed" field). */
void pz_report_val(FILE *f, int step, double loss, int batches, int compressed);

#endif
