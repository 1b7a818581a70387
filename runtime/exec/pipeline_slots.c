/* pipeline_slots.c: a rank's edge ends and its buffers for the micro-batches
 * in flight, and warmup=auto, which resizes them (see runtime/exec/pipeline_exec.h). */
#include "runtime/exec/pipeline_exec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "runtime/plan/autowarm.h"

/* Chunk c's edge ends: the out edge (boundary g: we send fwd, receive bwd)
 * unless c is last, the in edge (boundary g-1) unless c is first.
 * pz_auto_edge_init reads the policy: plain ends, or auto's candidates. */
pz_status exec_edges(exec *x, pz_chunk *c) {
    const pz_train_opts *o = x->o;
    int B = o->model.batch, T = o->model.seq, C = c->stage.cfg.channels, at = 4 * (int)(c - x->ch);
    pz_status st = PZ_OK;
    for (int side = 0; side < 2 && st == PZ_OK; side++) {
        if (side == 0 ? is_last(x, c) : is_first(c)) continue;
        int e = side == 0 ? c->g : c->g - 1, k = 2 * side;   /* k: FWD_TX or FWD_RX */
        const char *fs = pz_policy_codec(&x->pol, e, PZ_FWD);
        if ((st = pz_auto_edge_init(&x->au, &x->pol, at + k, &c->end[k], e, PZ_FWD, side == 0, B, T, C,
                                    side == 0 && o->observe.error_metrics)) != PZ_OK ||
            (st = pz_auto_edge_init(&x->au, &x->pol, at + k + 1, &c->end[k + 1], e, PZ_BWD, side == 1, B, T, C,
                                    side == 1 && o->observe.error_metrics)) != PZ_OK)
            break;
        st = pz_edge_init_val(side == 0 ? c->val_tx : c->val_rx, e, side == 0, fs, B, T, C);
    }
    if (st != PZ_OK) return st;
    /* wire buffers: validation messages reuse the first ones, so size for both */
    c->cap_in = pz_edge_wire_cap(&c->end[FWD_RX], c->val_rx);
    c->cap_out = pz_edge_wire_cap(&c->end[FWD_TX], c->val_tx);
    return PZ_OK;
}

/* The receive rings: the most receives of a chunk posted and not yet
 * consumed (by its FORWARD or BACKWARD) at once while the list runs. */
static void ring_sizes(exec *x) {
    int *pa = xcalloc((size_t)x->V, sizeof *pa), *pg = xcalloc((size_t)x->V, sizeof *pg);
    for (int c = 0; c < x->V; c++) x->ch[c].nact = x->ch[c].ngrad = 1;
    for (int k = 0; k < x->sched.n; k++) {
        const pz_instr *in = &x->sched.ins[k];
        pz_chunk *c = &x->ch[in->chunk];
        int *a = &pa[in->chunk], *g = &pg[in->chunk];
        switch (in->op) {
        case PZ_OP_RECV_ACT: if (++*a > c->nact) c->nact = *a; break;
        case PZ_OP_RECV_GRAD: if (++*g > c->ngrad) c->ngrad = *g; break;
        case PZ_OP_FORWARD: if (!is_first(c)) --*a; break;
        case PZ_OP_BACKWARD: if (!is_last(x, c)) --*g; break;
        default: break;
        }
    }
    free(pa);
    free(pg);
}

static void chunk_alloc(exec *x, pz_chunk *c) {
    const pz_backend *be = x->be;
    const int first = is_first(c), last = is_last(x, c), B = x->o->model.batch, n = c->bound;
    c->nwire = n + 2 < x->o->model.micro ? n + 2 : x->o->model.micro;
    c->slots = xcalloc((size_t)n, sizeof *c->slots);
    c->ids = xcalloc((size_t)n, sizeof *c->ids);
    c->grad_out = xcalloc((size_t)n, sizeof *c->grad_out);
    /* auto splits the last micro-batch's backward: only its slot keeps the
     * output gradients for the weight half (zb-h1: every slot) */
    const int m = x->o->model.micro, split = pz_sched_splits_last(&x->sched.spec, x->S) ? (m - 1) % n : -1;
    for (int k = 0; k < n; k++) {
        pz_acts_init_split(&c->slots[k], &c->stage, c->stage.defer_weights || k == split);
        c->ids[k] = xcalloc((size_t)B, sizeof **c->ids);
        if (!first) c->grad_out[k] = pz_host_buffer(be, x->act_bytes);
    }
    if (!first) c->act_in = pz_host_buffer(be, x->act_bytes);
    if (!last) c->grad_in = pz_host_buffer(be, x->act_bytes);
    c->act_wire_in = xcalloc((size_t)c->nact, sizeof *c->act_wire_in);
    c->act_recv = xcalloc((size_t)c->nact, sizeof *c->act_recv);
    for (int k = 0; k < c->nact && !first; k++) c->act_wire_in[k] = xaligned_alloc(c->cap_in);
    c->grad_wire_in = xcalloc((size_t)c->ngrad, sizeof *c->grad_wire_in);
    c->grad_recv = xcalloc((size_t)c->ngrad, sizeof *c->grad_recv);
    for (int k = 0; k < c->ngrad && !last; k++) c->grad_wire_in[k] = xaligned_alloc(c->end[BWD_RX].cap);
    c->act_wire_out = xcalloc((size_t)c->nwire, sizeof *c->act_wire_out);
    c->grad_wire_out = xcalloc((size_t)c->nwire, sizeof *c->grad_wire_out);
    c->act_send = xcalloc((size_t)c->nwire, sizeof *c->act_send);
    c->grad_send = xcalloc((size_t)c->nwire, sizeof *c->grad_send);
    for (int k = 0; k < c->nwire; k++) {
        if (!last) c->act_wire_out[k] = xaligned_alloc(c->cap_out);
        if (!first) c->grad_wire_out[k] = xaligned_alloc(c->end[BWD_TX].cap);
    }
    pz_staging_init(&c->stg, be, x->act_bytes, n);
}

/* Frees what chunk_alloc made; safe on a zeroed chunk and twice. */
static void chunk_slots_free(exec *x, pz_chunk *c) {
    for (int k = 0; c->slots && k < c->bound; k++) {
        pz_acts_free(&c->slots[k], &c->stage);
        free(c->ids[k]);
        pz_host_buffer_free(x->be, c->grad_out[k]);
    }
    if (c->slots) {
        pz_host_buffer_free(x->be, c->act_in);
        pz_host_buffer_free(x->be, c->grad_in);
        pz_staging_free(&c->stg);
    }
    for (int k = 0; c->act_wire_in && k < c->nact; k++) free(c->act_wire_in[k]);
    for (int k = 0; c->grad_wire_in && k < c->ngrad; k++) free(c->grad_wire_in[k]);
    for (int k = 0; c->act_wire_out && k < c->nwire; k++) {
        free(c->act_wire_out[k]);
        free(c->grad_wire_out[k]);
    }
    free(c->slots); free(c->ids); free(c->grad_out);
    free(c->act_wire_in); free(c->act_recv); free(c->grad_wire_in); free(c->grad_recv);
    free(c->act_wire_out); free(c->grad_wire_out); free(c->act_send); free(c->grad_send);
    c->slots = NULL;
    c->ids = NULL;
    c->grad_out = NULL;
    c->act_in = c->grad_in = NULL;
    c->act_wire_in = c->grad_wire_in = c->act_wire_out = c->grad_wire_out = NULL;
    c->act_recv = c->grad_recv = c->act_send = c->grad_send = NULL;
}

/* Buffers of every chunk for the schedule built in x->sched. Needs the
 * edges (exec_edges) for the sizes. */
void exec_slots_alloc(exec *x) {
    ring_sizes(x);
    for (int c = 0; c < x->V; c++) {
        x->ch[c].bound = pz_schedule_chunk_peak(&x->sched, c);
        chunk_alloc(x, &x->ch[c]);
    }
}

static void exec_slots_free(exec *x) {
    for (int c = 0; x->ch && c < x->V; c++) chunk_slots_free(x, &x->ch[c]);
}

void exec_chunk_free(exec *x, pz_chunk *c) {
    chunk_slots_free(x, c);
    for (int k = 0; k < 4; k++) pz_edge_free(&c->end[k]);
    for (int k = 0; k < 2; k++) { pz_edge_free(&c->val_tx[k]); pz_edge_free(&c->val_rx[k]); }
    pz_optim_free(&c->opt, &c->stage);
    pz_stage_free(&c->stage);
}

/* warmup=auto (V = 1 only; runtime/plan/autowarm.h): K from the step just
 * reduced; when it differs from the one in use, the schedule and the
 * activation slots are rebuilt (at a step boundary nothing is in flight). */
pz_status exec_auto_warmup(exec *x, const double *red) {
    const int S = x->S, m = x->o->model.micro;
    const pz_warm_figs f = {red + x->red.ranks, red + x->red.rtt, red + x->red.hold, red + x->red.edges,
                            red + x->red.kfit};
    double rtt01, cmax;
    int k = pz_auto_warmup_k(&x->pol, S, m, &f, x->rank == 0, &rtt01, &cmax);
    if (x->spec.warmup_auto == PZ_SCHED_NAMED_AUTO && x->auto_told != k + 1) {   /* on stderr and in the metrics */
        char name[32];
        pz_auto_warmup_say(is_root(x) ? stderr : NULL, k, rtt01, cmax, name, sizeof name);
        x->auto_told = k + 1;
        if (is_root(x)) pz_metrics_schedule(&x->met, name);
    }
    if (k == x->spec.warmup_extra) return PZ_OK;
    pz_chunk *ch = &x->ch[0];
    int old_bound = ch->bound;
    exec_slots_free(x);
    pz_schedule_free(&x->sched);
    x->spec.warmup_extra = k;
    pz_status st = pz_schedule_build(&x->sched, &x->spec, x->rank, S, m);
    if (st != PZ_OK) return st;
    exec_slots_alloc(x);
    /* what one more activation slot costs on this rank: the saved
     * activations, d(input) to send, the output staged on the host */
    double slot_mib = ((double)ch->slots[0].numel * sizeof(float) + (is_first(ch) ? 0.0 : (double)x->act_bytes) +
                       (ch->stg.on_device ? (double)x->act_bytes : 0.0)) / (1 << 20);
    if (ch->bound != old_bound)
        fprintf(stderr, "pipezip train: rank %d: warmup=auto: K = %d extra warm-up micro-batches per downstream stage "
                "(edge 0-1's round trip measured %.0f ms), %d in flight (was %d), %+.1f MiB of activations\n",
                x->rank, k, 1e3 * rtt01, ch->bound, old_bound, (ch->bound - old_bound) * slot_mib);
    return PZ_OK;
}
