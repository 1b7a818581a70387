/* autowarm.h: warmup=auto's K (and --schedule auto's, issue 26) from the
 * figures of one reduced step. */
#ifndef PZ_RUNTIME_PLAN_AUTOWARM_H
#define PZ_RUNTIME_PLAN_AUTOWARM_H

#include <stddef.h>
#include <stdio.h>

#include "runtime/edge/policy.h"

/* The figures every rank has after the step's reduction, for S ranks and m
 * micro-batches: compute seconds per rank (3 figures per rank, the first),
 * micro-batch 0's round trips rtt and holds per rank (pz_sched_link_rtt),
 * the edge statistics (PZ_EDGE_STATS_N per boundary and direction), and the
 * extra warm-up each rank's host memory holds. */
typedef struct {
    const double *ranks3, *rtt, *hold, *edges, *kfit;
} pz_warm_figs;

/* The extra warm-up that lets the pipeline's round trip hide behind compute
 * (pz_sched_auto_warmup; with a simulated rate its throughput bound too),
 * capped by the memory of every host (said on stderr when `say`). Every
 * rank computes it from the same reduced bits, so all agree. *rtt01: edge
 * 0-1's round trip; *cmax: the slowest rank's compute per micro-batch. */
int pz_auto_warmup_k(const pz_policy *pol, int S, int m, const pz_warm_figs *f, int say, double *rtt01, double *cmax);

/* --schedule auto's choice, on f: plain 1F1B when the links keep up with
 * compute, else the warm-up it needs. name gets "1f1b" or
 * "1f1b:warmup=K" (for the metrics). */
void pz_auto_warmup_say(FILE *f, int k, double rtt01, double c, char *name, size_t cap);

#endif
