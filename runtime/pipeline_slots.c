/* pipeline_slots.c: a rank's buffers for the micro-batches in flight, and
 * warmup=auto, which resizes them (see runtime/pipeline_exec.h). */
#include "runtime/pipeline_exec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

/* Frees what slots_alloc made; safe on a zeroed exec and twice. */
void exec_slots_free(exec *x) {
    for (int k = 0; x->slots && k < x->bound; k++) {
        pz_acts_free(&x->slots[k], &x->stage);
        pz_host_buffer_free(x->stage.be, x->act_in[k]);
        pz_host_buffer_free(x->stage.be, x->grad_in[k]);
        pz_host_buffer_free(x->stage.be, x->grad_out[k]);
        free(x->act_wire_in[k]);
        free(x->grad_wire_in[k]);
        free(x->ids[k]);
    }
    for (int k = 0; x->act_wire_out && k < x->nwire; k++) {
        free(x->act_wire_out[k]);
        free(x->grad_wire_out[k]);
    }
    free(x->slots); free(x->act_in); free(x->grad_in); free(x->grad_out);
    free(x->act_wire_in); free(x->grad_wire_in); free(x->ids);
    free(x->act_recv); free(x->grad_recv);
    free(x->act_wire_out); free(x->grad_wire_out); free(x->act_send); free(x->grad_send);
    x->slots = NULL;
    x->act_in = x->grad_in = x->grad_out = NULL;
    x->act_wire_in = x->grad_wire_in = x->act_wire_out = x->grad_wire_out = NULL;
    x->ids = NULL;
    x->act_recv = x->grad_recv = x->act_send = x->grad_send = NULL;
    pz_staging_free(&x->stg);
}

/* Buffers for x->bound activations in flight (the stage's saved activations,
 * received tensors and messages, d(input), sample ids) and a ring of
 * x->nwire send buffers. Needs the edges (setup_edges) for the sizes. */
void exec_slots_alloc(exec *x) {
    const pz_backend *be = x->stage.be;
    int n = x->bound, B = x->o->batch;
    x->nwire = x->bound + 2 < x->o->micro ? x->bound + 2 : x->o->micro;
    x->slots = xcalloc((size_t)n, sizeof *x->slots);
    x->act_in = xcalloc((size_t)n, sizeof *x->act_in);
    x->grad_in = xcalloc((size_t)n, sizeof *x->grad_in);
    x->grad_out = xcalloc((size_t)n, sizeof *x->grad_out);
    x->act_wire_in = xcalloc((size_t)n, sizeof *x->act_wire_in);
    x->grad_wire_in = xcalloc((size_t)n, sizeof *x->grad_wire_in);
    x->ids = xcalloc((size_t)n, sizeof *x->ids);
    x->act_recv = xcalloc((size_t)n, sizeof *x->act_recv);
    x->grad_recv = xcalloc((size_t)n, sizeof *x->grad_recv);
    for (int k = 0; k < n; k++) {
        pz_acts_init(&x->slots[k], &x->stage);
        x->ids[k] = xcalloc((size_t)B, sizeof **x->ids);
        if (!is_first(x)) {
            x->act_in[k] = pz_host_buffer(be, x->act_bytes);
            x->grad_out[k] = pz_host_buffer(be, x->act_bytes);
            x->act_wire_in[k] = xaligned_alloc(x->cap_in);
        }
        if (!is_last(x)) {
            x->grad_in[k] = pz_host_buffer(be, x->act_bytes);
            x->grad_wire_in[k] = xaligned_alloc(x->bwd_rx.cap);
        }
    }
    x->act_wire_out = xcalloc((size_t)x->nwire, sizeof *x->act_wire_out);
    x->grad_wire_out = xcalloc((size_t)x->nwire, sizeof *x->grad_wire_out);
    x->act_send = xcalloc((size_t)x->nwire, sizeof *x->act_send);
    x->grad_send = xcalloc((size_t)x->nwire, sizeof *x->grad_send);
    for (int k = 0; k < x->nwire; k++) {
        if (!is_last(x)) x->act_wire_out[k] = xaligned_alloc(x->cap_out);
        if (!is_first(x)) x->grad_wire_out[k] = xaligned_alloc(x->bwd_tx.cap);
    }
    pz_staging_init(&x->stg, be, x->act_bytes, n);
}

/* warmup=auto: from the step just reduced (red: per-rank compute seconds at
 * red[4 + 3r], edge statistics at es), the extra warm-up that lets the
 * pipeline's round trip hide behind compute; when it differs from the one
 * in use, the schedule and the activation slots are rebuilt (at a step
 * boundary nothing is in flight). Every rank computes it from the same
 * reduced bits, so all ranks agree. */
pz_status exec_auto_warmup(exec *x, const double *red, const double *es, const double *rtt, const double *kfit) {
    const int S = x->world, m = x->o->micro;
    double *c = xcalloc((size_t)S, sizeof *c), *link_rtt = xcalloc((size_t)S, sizeof *link_rtt);
    double *period = xcalloc((size_t)S, sizeof *period);
    for (int q = 0; q < S; q++) c[q] = red[4 + 3 * q] / m;
    for (int e = 0; e + 1 < S; e++) {
        /* micro-batch 0 found every link and stage idle, so its round trip
         * from stage e is: edge e down and up, plus stage e+1's compute and
         * round trip; what is left is edge e's, measured on whatever link it
         * is (real, or --link-mbps/--link-latency-ms) */
        double down = e + 2 < S ? rtt[e + 1] : 0.0;
        link_rtt[e] = fmax(0.0, rtt[e] - c[e + 1] - down);
        /* the throughput bound per message is known for a simulated rate */
        double Bps = x->pol.mbps[e] * 1e6 / 8.0;
        const double *f = es + (2 * e + PZ_FWD) * PZ_EDGE_STATS_N, *b = es + (2 * e + PZ_BWD) * PZ_EDGE_STATS_N;
        if (Bps > 0) period[e] = fmax(f[1], b[1]) / m / Bps;   /* [1]: wire bytes */
    }
    int k = pz_sched_auto_warmup(S, m, c, link_rtt, period), kmem = m;
    for (int q = 0; q < S; q++)
        if (kfit[q] < kmem) kmem = (int)kfit[q];   /* every rank has every rank's figure: they agree */
    if (k > kmem) {
        if (x->rank == 0)
            fprintf(stderr, "pipezip train: warmup=auto: K = %d would keep more micro-batches in flight than the "
                    "memory of some host holds; capped at K = %d\n", k, kmem);
        k = kmem;
    }
    double rtt01 = link_rtt[0];
    free(c);
    free(link_rtt);
    free(period);
    if (k == x->spec.warmup_extra) return PZ_OK;
    int old_bound = x->bound;
    exec_slots_free(x);
    pz_schedule_free(&x->sched);
    x->spec.warmup_extra = k;
    pz_status st = pz_schedule_build(&x->sched, &x->spec, x->rank, S, m);
    if (st != PZ_OK) return st;
    x->bound = pz_schedule_in_flight_bound(&x->spec, x->rank, S, m);
    exec_slots_alloc(x);
    /* what one more activation slot costs on this rank */
    double slot_mib = ((double)x->slots[0].numel * sizeof(float) + 3.0 * (double)x->act_bytes +
                       (double)x->cap_in + (double)x->bwd_rx.cap) / (1 << 20);
    if (x->bound != old_bound)
        fprintf(stderr, "pipezip train: rank %d: warmup=auto: K = %d extra warm-up micro-batches per downstream stage "
                "(edge 0-1's round trip measured %.0f ms), %d in flight (was %d), %+.1f MiB of activations\n",
                x->rank, k, 1e3 * rtt01, x->bound, old_bound, (x->bound - old_bound) * slot_mib);
    return PZ_OK;
}

