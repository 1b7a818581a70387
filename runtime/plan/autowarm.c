/* autowarm.c: see autowarm.h. */
#include "runtime/plan/autowarm.h"

#include <math.h>
#include <stdlib.h>

#include "base/mem.h"
#include "runtime/edge/edge.h"
#include "schedules/schedule.h"

int pz_auto_warmup_k(const pz_policy *pol, int S, int m, const pz_warm_figs *f, int say, double *rtt01, double *cmax) {
    double *c = xcalloc((size_t)S, sizeof *c), *link_rtt = xcalloc((size_t)S, sizeof *link_rtt);
    double *period = xcalloc((size_t)S, sizeof *period);
    for (int q = 0; q < S; q++) c[q] = f->ranks3[3 * q] / m;
    /* each edge's round trip, measured on whatever link it is (real, or
     * --link-mbps/--link-latency-ms) */
    pz_sched_link_rtt(S, f->rtt, f->hold, link_rtt);
    for (int e = 0; e + 1 < S; e++) {
        /* the throughput bound per message is known for a simulated rate */
        double Bps = pol->mbps[e] * 1e6 / 8.0;
        const double *fw = f->edges + (2 * e + PZ_FWD) * PZ_EDGE_STATS_N;
        const double *bw = f->edges + (2 * e + PZ_BWD) * PZ_EDGE_STATS_N;
        if (Bps > 0) period[e] = fmax(fw[1], bw[1]) / m / Bps;   /* [1]: wire bytes */
    }
    int k = pz_sched_auto_warmup(S, m, c, link_rtt, period), kmem = m;
    for (int q = 0; q < S; q++)
        if (f->kfit[q] < kmem) kmem = (int)f->kfit[q];   /* every rank has every rank's figure: they agree */
    if (k > kmem) {
        if (say)
            fprintf(stderr, "pipezip train: warmup=auto: K = %d would keep more micro-batches in flight than the "
                    "memory of some host holds; capped at K = %d\n", k, kmem);
        k = kmem;
    }
    *rtt01 = link_rtt[0], *cmax = 0.0;
    for (int q = 0; q < S; q++) *cmax = fmax(*cmax, c[q]);
    free(c);
    free(link_rtt);
    free(period);
    return k;
}

void pz_auto_warmup_say(FILE *f, int k, double rtt01, double c, char *name, size_t cap) {
    snprintf(name, cap, "1f1b");
    if (k > 0) snprintf(name, cap, "1f1b:warmup=%d", k);
    if (!f) return;
    if (k > 0)
        fprintf(f, "pipezip train: --schedule auto: %s (edge 0-1's round trip %.0f ms against %.0f ms of "
                "compute per micro-batch: %d more micro-batches in flight per downstream stage hide it)\n", name,
                1e3 * rtt01, 1e3 * c, k);
    else
        fprintf(f, "pipezip train: --schedule auto: %s (the links keep up with compute: round trip %.0f ms, "
                "%.0f ms of compute per micro-batch)\n", name, 1e3 * rtt01, 1e3 * c);
}
