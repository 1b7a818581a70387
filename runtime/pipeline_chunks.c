/* pipeline_chunks.c: the executor of one rank of an interleaved pipeline
 * (--schedule interleaved:v=V with V > 1, Megatron's virtual pipeline).
 *
 * The model is cut into G = S*V chunks (runtime/partition.c with S*V
 * pieces); rank r owns the global chunks g = c*S + r for its local chunks
 * c = 0..V-1, each a pz_stage of its own with its own optimizer, activation
 * slots and edge ends. Global chunk 0 holds the embedding (rank 0's chunk 0,
 * "first"), global chunk G-1 the head (rank S-1's chunk V-1, "last"). The
 * activation of chunk g goes to g+1 across model boundary g (0..G-2), on
 * rank (g+1) % S: the ranks form a ring, rank S-1 sending back to rank 0.
 *
 * The instruction list is schedules/interleaved.c's; every communication
 * instruction's peer (rank, chunk, boundary) comes from pz_instr_peer.
 * Per chunk c:
 *   slots        micro % pz_schedule_chunk_peak(c) (FIFO per chunk: no collision)
 *   receive ring micro % R, R the most receives of the chunk posted and not
 *                yet consumed while walking the list (FIFO again)
 *   send ring    micro % nwire; a buffer's previous send is waited for first
 * Messages are tagged (sender, step, micro*V + sender's local chunk, kind).
 * Codecs and their state are per boundary: policy edge b is boundary b
 * (pz_policy_init(p, G)), so --compress '1-2:fwd=q8' names the boundary
 * between global chunks 1 and 2. One optimizer step per rank covers all
 * its chunks: the gradient norm sums every chunk before the allreduce, and
 * REDUCE_TIED adds rank 0's chunk-0 and rank S-1's chunk-(V-1) wte gradients.
 * Validation runs the batches through the ring chunk by chunk (g = 0..G-1).
 *
 * Checkpoints (runtime/resume.h) are written as if each global chunk were a
 * stage of a G-stage pipeline: shard rank-g holds chunk g (parameters, AdamW
 * moments, the loader position, codec state of its boundaries g-1 and g),
 * the manifest says G stages. By tensor name, any other layout resumes
 * from it, and it from any other.
 * Not yet: --metrics, --link-mbps/--link-latency-ms (refused with a message)
 * and the stop-at-step-boundary signal handling. */
#include "runtime/pipeline.h"
#include "runtime/pipeline_exec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/mem.h"
#include "runtime/cores.h"
#include "runtime/device.h"
#include "runtime/partition.h"
#include "runtime/report.h"
#include "runtime/resume.h"

/* one model chunk of this rank */
typedef struct {
    int g;                           /* global chunk */
    pz_stage stage;
    pz_optim opt;
    int peak, nact, ngrad, nwire;    /* slots, receive rings (activations, gradients), send ring */
    pz_acts *slots;
    uint64_t **ids;                  /* per slot: the micro-batch's sample ids */
    float **grad_out;                /* per slot: d(input) to send (g > 0) */
    float *act_in, *grad_in;         /* the decoded message, consumed at once */
    uint8_t **act_wire_in, **grad_wire_in;    /* receive rings */
    pz_request **act_recv, **grad_recv;
    uint8_t **act_wire_out, **grad_wire_out;  /* send ring */
    pz_request **act_send, **grad_send;
    pz_edge_end fwd_tx, bwd_rx;      /* out end: boundary g (g < G-1) */
    pz_edge_end fwd_rx, bwd_tx;      /* in end: boundary g-1 (g > 0) */
    pz_edge_end val_tx[2], val_rx[2];
    size_t cap_in, cap_out;
    pz_staging stg;
} chunk;

typedef struct {
    const pz_train_opts *o;
    pz_transport *tp;
    int rank, S, V, G;
    pz_schedule sched;
    pz_policy pol;
    chunk *ch;                       /* V */
    const pz_backend *be;
    size_t act_bytes;
    int *tok, *tgt;
    size_t *ids_tmp;
    pz_dataset train, val;
    pz_loader loader;
    double compute_s, wait_s, codec_s;
    pz_trace trace;
    float *tied_out, *tied_in, *tied_view;
    pz_request *tied_send, *tied_recv;
} iexec;

static int is_first_chunk(const iexec *x, int c) { return x->ch[c].g == 0; }
static int is_last_chunk(const iexec *x, int c) { return x->ch[c].g == x->G - 1; }
static int holds_first(const iexec *x) { return x->rank == 0; }
static int holds_last(const iexec *x) { return x->rank == x->S - 1; }
/* the chunk holding the tied embedding on this rank (first or last), or -1 */
static int tied_chunk(const iexec *x) { return holds_first(x) ? 0 : holds_last(x) ? x->V - 1 : -1; }

pz_status pz_pipeline_sched(const pz_train_opts *o, pz_sched_spec *sp) {
    pz_status st = pz_sched_parse(o->schedule, sp);
    if (st != PZ_OK) return st;
    if (o->virtual_stages) {
        if (sp->kind != PZ_SCHED_INTERLEAVED)
            return pz_fail(PZ_ERR_ARG, "--virtual-stages %d needs --schedule interleaved, not %s", o->virtual_stages,
                           o->schedule);
        if (sp->virtual_stages && sp->virtual_stages != o->virtual_stages)
            return pz_fail(PZ_ERR_ARG, "--virtual-stages %d contradicts --schedule %s", o->virtual_stages,
                           o->schedule);
        sp->virtual_stages = o->virtual_stages;
    }
    if (sp->kind == PZ_SCHED_INTERLEAVED && !sp->virtual_stages)
        return pz_fail(PZ_ERR_ARG, "--schedule interleaved needs the model chunks per stage: interleaved:v=V or "
                       "--virtual-stages V");
    return PZ_OK;
}

int pz_pipeline_nchunks(const pz_train_opts *o) {
    pz_sched_spec sp;
    if (pz_pipeline_sched(o, &sp) != PZ_OK || sp.kind != PZ_SCHED_INTERLEAVED) return o->stages;
    return o->stages * sp.virtual_stages;
}

pz_status pz_pipeline_interleaved_check(const pz_train_opts *o, const pz_sched_spec *sp) {
    if (sp->kind != PZ_SCHED_INTERLEAVED || sp->virtual_stages <= 1) return PZ_OK;
    const char *v = o->schedule;
    if (o->stages < 2)
        return pz_fail(PZ_ERR_ARG, "--schedule %s: interleaving needs --stages 2 or more (one process would hold "
                       "all %d chunks: train it with the default schedule)", v, sp->virtual_stages);
    if ((long)o->micro * sp->virtual_stages > 65536)
        return pz_fail(PZ_ERR_ARG, "--schedule %s: --micro-batches %d x %d chunks is over 65536 (the message tags)",
                       v, o->micro, sp->virtual_stages);
    if (o->micro % o->stages != 0)
        return pz_fail(PZ_ERR_ARG, "--schedule %s: --micro-batches %d must be a multiple of --stages %d", v, o->micro,
                       o->stages);
    if (o->split) {
        int n = 1;
        for (const char *q = o->split; *q; q++) n += *q == ',';
        if (n != o->stages * sp->virtual_stages)
            return pz_fail(PZ_ERR_ARG, "--split '%s' names %d pieces; --schedule %s with --stages %d cuts the model "
                           "into %d chunks: give blocks per chunk, in model order (rank r holds chunks r, r+%d, ...)",
                           o->split, n, v, o->stages, o->stages * sp->virtual_stages, o->stages);
    }
    const char *no = o->metrics ? "--metrics" : o->link_mbps ? "--link-mbps" : o->link_latency ? "--link-latency-ms" : NULL;
    if (no)
        return pz_fail(PZ_ERR_ARG, "--schedule %s: %s is not supported with interleaved schedules yet", v, no);
    return PZ_OK;
}

static void itrace(iexec *x, const char *name, int micro, double t0, double t1) {
    pz_trace_add(&x->trace, name, micro, t0, t1);
}

static void progress_hook(void *tp) { pz_transport_progress(tp); }

static pz_status iwait(iexec *x, pz_request **req, int micro, size_t *len) {
    if (!*req) return PZ_OK;
    double t0 = pz_now();
    pz_status st = pz_transport_wait_at(x->tp, *req, len, NULL);
    *req = NULL;
    double t1 = pz_now();
    x->wait_s += t1 - t0;
    if (t1 - t0 > 1e-4) itrace(x, "wait", micro, t0, t1);
    return st;
}

static pz_status irecv(iexec *x, int peer, int kind, uint32_t step, uint32_t field, uint8_t *buf, size_t cap,
                       pz_request **req, const char *what, int micro) {
    char w[96];
    snprintf(w, sizeof w, "%s step %u micro %d", what, step, micro);
    return pz_transport_recv(x->tp, peer, pz_tag(peer, step, field, (uint32_t)kind), buf, cap, w, req);
}

static pz_status iencode_send(iexec *x, pz_edge_end *e, int peer, int kind, uint64_t step, int micro, uint32_t field,
                              const float *src, const uint64_t *ids, uint8_t *wire, pz_request **req,
                              const char *what) {
    size_t len = 0;
    double t0 = pz_now();
    pz_status st = pz_edge_encode(e, src, ids, (uint64_t)x->o->seed, step, (uint32_t)micro, wire, &len);
    if (e->codec) itrace(x, "encode", micro, t0, pz_now());
    if (st != PZ_OK) return st;
    char w[96];
    snprintf(w, sizeof w, "%s step %u micro %d", what, (uint32_t)step, micro);
    return pz_transport_send(x->tp, peer, pz_tag(x->rank, (uint32_t)step, field, (uint32_t)kind), wire, len, w, req);
}

static pz_status irecv_decode(iexec *x, pz_edge_end *e, pz_request **req, uint64_t step, int micro,
                              const uint8_t *wire, float *out, uint64_t *ids) {
    size_t len = 0;
    pz_status st = iwait(x, req, micro, &len);
    if (st != PZ_OK) return st;
    double t0 = pz_now();
    st = pz_edge_decode(e, wire, len, (uint64_t)x->o->seed, step, (uint32_t)micro, out, ids);
    if (e->codec) itrace(x, "decode", micro, t0, pz_now());
    return st;
}

static const float *chunk_output(chunk *c, int slot) {
    int nb = c->stage.range.l1 - c->stage.range.l0;
    const float *out = nb > 0 ? c->slots[slot].blocks[nb - 1].res3 : c->slots[slot].input;
    return pz_staging_out(&c->stg, slot, out);
}

/* The receive rings: the most receives of a chunk posted and not yet
 * consumed (by its FORWARD or BACKWARD) at once while the list runs. */
static void ring_sizes(iexec *x) {
    int *pa = xcalloc((size_t)x->V, sizeof *pa), *pg = xcalloc((size_t)x->V, sizeof *pg);
    for (int k = 0; k < x->sched.n; k++) {
        const pz_instr *in = &x->sched.ins[k];
        chunk *c = &x->ch[in->chunk];
        switch (in->op) {
        case PZ_OP_RECV_ACT: if (++pa[in->chunk] > c->nact) c->nact = pa[in->chunk]; break;
        case PZ_OP_RECV_GRAD: if (++pg[in->chunk] > c->ngrad) c->ngrad = pg[in->chunk]; break;
        case PZ_OP_FORWARD: if (c->g > 0) pa[in->chunk]--; break;
        case PZ_OP_BACKWARD: if (c->g < x->G - 1) pg[in->chunk]--; break;
        default: break;
        }
    }
    free(pa);
    free(pg);
}

static pz_status chunk_edges(iexec *x, chunk *c) {
    const pz_train_opts *o = x->o;
    int B = o->batch, T = o->seq, C = c->stage.cfg.channels;
    pz_status st = PZ_OK;
    char ev[512];
    for (int side = 0; side < 2 && st == PZ_OK; side++) {
        if (side == 0 ? c->g == x->G - 1 : c->g == 0) continue;
        int e = side == 0 ? c->g : c->g - 1;
        const char *fs = pz_policy_codec(&x->pol, e, PZ_FWD), *bs = pz_policy_codec(&x->pol, e, PZ_BWD);
        const char *evs = NULL;
        if (fs) {
            if ((st = pz_policy_eval_spec(fs, ev, sizeof ev)) != PZ_OK) break;
            evs = ev;
        }
        if (side == 0) {
            if ((st = pz_edge_init(&c->fwd_tx, e, PZ_FWD, 1, fs, B, T, C, o->error_metrics)) != PZ_OK) break;
            if ((st = pz_edge_init(&c->bwd_rx, e, PZ_BWD, 0, bs, B, T, C, 0)) != PZ_OK) break;
            if ((st = pz_edge_init(&c->val_tx[0], e, PZ_FWD, 1, NULL, B, T, C, 0)) != PZ_OK) break;
            st = pz_edge_init(&c->val_tx[1], e, PZ_FWD, 1, evs, B, T, C, 0);
        } else {
            if ((st = pz_edge_init(&c->fwd_rx, e, PZ_FWD, 0, fs, B, T, C, 0)) != PZ_OK) break;
            if ((st = pz_edge_init(&c->bwd_tx, e, PZ_BWD, 1, bs, B, T, C, o->error_metrics)) != PZ_OK) break;
            if ((st = pz_edge_init(&c->val_rx[0], e, PZ_FWD, 0, NULL, B, T, C, 0)) != PZ_OK) break;
            st = pz_edge_init(&c->val_rx[1], e, PZ_FWD, 0, evs, B, T, C, 0);
        }
    }
    if (st != PZ_OK) return st;
    c->cap_in = c->fwd_rx.cap;
    c->cap_out = c->fwd_tx.cap;
    for (int k = 0; k < 2; k++) {
        if (c->val_rx[k].cap > c->cap_in) c->cap_in = c->val_rx[k].cap;
        if (c->val_tx[k].cap > c->cap_out) c->cap_out = c->val_tx[k].cap;
    }
    return PZ_OK;
}

static void chunk_alloc(iexec *x, chunk *c, int peak) {
    const pz_backend *be = x->be;
    const int first = c->g == 0, last = c->g == x->G - 1, B = x->o->batch;
    c->peak = peak;
    if (c->nact < 1) c->nact = 1;
    if (c->ngrad < 1) c->ngrad = 1;
    c->nwire = peak + 2 < x->o->micro ? peak + 2 : x->o->micro;
    c->slots = xcalloc((size_t)peak, sizeof *c->slots);
    c->ids = xcalloc((size_t)peak, sizeof *c->ids);
    c->grad_out = xcalloc((size_t)peak, sizeof *c->grad_out);
    for (int k = 0; k < peak; k++) {
        pz_acts_init(&c->slots[k], &c->stage);
        c->ids[k] = xcalloc((size_t)B, sizeof **c->ids);
        if (!first) c->grad_out[k] = pz_host_buffer(be, x->act_bytes);
    }
    if (!first) c->act_in = pz_host_buffer(be, x->act_bytes);
    if (!last) c->grad_in = pz_host_buffer(be, x->act_bytes);
    c->act_wire_in = xcalloc((size_t)c->nact, sizeof *c->act_wire_in);
    c->act_recv = xcalloc((size_t)c->nact, sizeof *c->act_recv);
    for (int k = 0; k < c->nact; k++)
        if (!first) c->act_wire_in[k] = xaligned_alloc(c->cap_in);
    c->grad_wire_in = xcalloc((size_t)c->ngrad, sizeof *c->grad_wire_in);
    c->grad_recv = xcalloc((size_t)c->ngrad, sizeof *c->grad_recv);
    for (int k = 0; k < c->ngrad; k++)
        if (!last) c->grad_wire_in[k] = xaligned_alloc(c->bwd_rx.cap);
    c->act_wire_out = xcalloc((size_t)c->nwire, sizeof *c->act_wire_out);
    c->grad_wire_out = xcalloc((size_t)c->nwire, sizeof *c->grad_wire_out);
    c->act_send = xcalloc((size_t)c->nwire, sizeof *c->act_send);
    c->grad_send = xcalloc((size_t)c->nwire, sizeof *c->grad_send);
    for (int k = 0; k < c->nwire; k++) {
        if (!last) c->act_wire_out[k] = xaligned_alloc(c->cap_out);
        if (!first) c->grad_wire_out[k] = xaligned_alloc(c->bwd_tx.cap);
    }
    pz_staging_init(&c->stg, be, x->act_bytes, peak);
}

static void chunk_free(iexec *x, chunk *c) {
    for (int k = 0; c->slots && k < c->peak; k++) {
        pz_acts_free(&c->slots[k], &c->stage);
        free(c->ids[k]);
        pz_host_buffer_free(x->be, c->grad_out[k]);
    }
    if (c->slots) {
        pz_host_buffer_free(x->be, c->act_in);
        pz_host_buffer_free(x->be, c->grad_in);
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
    if (c->slots) pz_staging_free(&c->stg);
    pz_edge_free(&c->fwd_tx); pz_edge_free(&c->bwd_rx); pz_edge_free(&c->fwd_rx); pz_edge_free(&c->bwd_tx);
    for (int k = 0; k < 2; k++) { pz_edge_free(&c->val_tx[k]); pz_edge_free(&c->val_rx[k]); }
    pz_optim_free(&c->opt, &c->stage);
    pz_stage_free(&c->stage);
}

static pz_status tied_finish(iexec *x) {
    if (!x->tied_view) return PZ_OK;
    chunk *c = &x->ch[tied_chunk(x)];
    size_t n = (size_t)c->stage.cfg.padded_vocab_size * c->stage.cfg.channels;
    double t0 = pz_now();
    pz_status st = iwait(x, &x->tied_recv, -1, NULL);
    if (st == PZ_OK)
        for (size_t k = 0; k < n; k++) x->tied_view[k] += x->tied_in[k];
    pz_staging_view_done(&c->stg, c->stage.grads.wte, x->tied_view, n);
    x->tied_view = NULL;
    itrace(x, "tied", -1, t0, pz_now());
    return st;
}

/* Runs one instruction of the interleaved list. */
static pz_status run_instr(iexec *x, const pz_instr *in, uint32_t step, double *loss_sum) {
    const pz_train_opts *o = x->o;
    const int i = in->micro, cc = in->chunk < 0 || in->chunk >= x->V ? 0 : in->chunk;
    chunk *c = &x->ch[cc];
    const int slot = i >= 0 ? i % c->peak : 0, V = x->V;
    const pz_peer p = pz_instr_peer(&x->sched, in);
    pz_status st = PZ_OK;
    double t0 = pz_now();
    switch (in->op) {
    case PZ_OP_RECV_ACT: {
        int r = i % c->nact;
        return irecv(x, p.rank, KIND_ACT, step, (uint32_t)(i * V + p.chunk), c->act_wire_in[r], c->fwd_rx.cap,
                     &c->act_recv[r], "recv activation", i);
    }
    case PZ_OP_RECV_GRAD: {
        int r = i % c->ngrad;
        return irecv(x, p.rank, KIND_GRAD, step, (uint32_t)(i * V + p.chunk), c->grad_wire_in[r], c->bwd_rx.cap,
                     &c->grad_recv[r], "recv gradient", i);
    }
    case PZ_OP_FORWARD: {
        const int first = is_first_chunk(x, cc), last = is_last_chunk(x, cc);
        if (first || last) pz_loader_next(&x->loader, x->tok, x->tgt, x->ids_tmp);
        const float *xin = NULL;
        if (first) {
            for (int b = 0; b < o->batch; b++) c->ids[slot][b] = x->ids_tmp[b];
        } else {
            int r = i % c->nact;
            if ((st = irecv_decode(x, &c->fwd_rx, &c->act_recv[r], step, i, c->act_wire_in[r], c->act_in,
                                   c->ids[slot])) != PZ_OK)
                return st;
            xin = pz_staging_in(&c->stg, c->act_in);
        }
        if (last)
            for (int b = 0; b < o->batch; b++)
                if (c->ids[slot][b] != x->ids_tmp[b])
                    return pz_fail(PZ_ERR_PEER, "step %u micro %d: sample %d of the activation into chunk %d has id %llu, "
                                   "this rank's loader has %llu: the ranks read different data (same --data, --seed, --batch?)",
                                   step, i, b, c->g, (unsigned long long)c->ids[slot][b],
                                   (unsigned long long)x->ids_tmp[b]);
        float dscale = 1.0f / ((float)o->batch * o->seq * o->micro);
        t0 = pz_now();
        pz_stage_forward(&c->stage, &c->slots[slot], x->tok, xin, x->tgt, dscale);
        if (last) *loss_sum += c->slots[slot].loss;
        double t1 = pz_now();
        x->compute_s += t1 - t0;
        itrace(x, "forward", i, t0, t1);
        return PZ_OK;
    }
    case PZ_OP_SEND_ACT: {
        int w = i % c->nwire;
        if ((st = iwait(x, &c->act_send[w], i, NULL)) != PZ_OK) return st;
        t0 = pz_now();
        st = iencode_send(x, &c->fwd_tx, p.rank, KIND_ACT, step, i, (uint32_t)(i * V + cc), chunk_output(c, slot),
                          c->ids[slot], c->act_wire_out[w], &c->act_send[w], "send activation");
        itrace(x, "send", i, t0, pz_now());
        return st;
    }
    case PZ_OP_BACKWARD: {
        const int first = is_first_chunk(x, cc), last = is_last_chunk(x, cc);
        if (!last) {
            int r = i % c->ngrad;
            if ((st = irecv_decode(x, &c->bwd_rx, &c->grad_recv[r], step, i, c->grad_wire_in[r], c->grad_in,
                                   c->ids[slot])) != PZ_OK)
                return st;
        }
        t0 = pz_now();
        pz_stage_backward(&c->stage, &c->slots[slot], last ? NULL : pz_staging_in(&c->stg, c->grad_in),
                          first ? NULL : pz_staging_dx(&c->stg, c->grad_out[slot]));
        if (!first) pz_staging_dx_done(&c->stg, c->grad_out[slot]);
        double t1 = pz_now();
        x->compute_s += t1 - t0;
        itrace(x, "backward", i, t0, t1);
        return PZ_OK;
    }
    case PZ_OP_SEND_GRAD: {
        int w = i % c->nwire;
        if ((st = iwait(x, &c->grad_send[w], i, NULL)) != PZ_OK) return st;
        t0 = pz_now();
        st = iencode_send(x, &c->bwd_tx, p.rank, KIND_GRAD, step, i, (uint32_t)(i * V + cc), c->grad_out[slot],
                          c->ids[slot], c->grad_wire_out[w], &c->grad_send[w], "send gradient");
        itrace(x, "send", i, t0, pz_now());
        return st;
    }
    case PZ_OP_REDUCE_TIED: {
        /* rank 0's chunk 0 and rank S-1's chunk V-1 hold wte: each sends its
         * gradient and adds the other's (g0 + g1 == g1 + g0 bitwise) */
        int tc = tied_chunk(x);
        if (tc < 0) return PZ_OK;
        chunk *t = &x->ch[tc];
        int peer = holds_first(x) ? x->S - 1 : 0;
        size_t n = (size_t)t->stage.cfg.padded_vocab_size * t->stage.cfg.channels;
        if ((st = iwait(x, &x->tied_send, -1, NULL)) != PZ_OK) return st;
        if (!x->tied_out) {
            x->tied_out = xaligned_alloc(n * sizeof(float));
            x->tied_in = xaligned_alloc(n * sizeof(float));
        }
        float *g = pz_staging_view(&t->stg, t->stage.grads.wte, n);
        memcpy(x->tied_out, g, n * sizeof(float));
        char w[64];
        snprintf(w, sizeof w, "tied embedding gradient step %u", step);
        st = pz_transport_recv(x->tp, peer, pz_tag(peer, step, 0, KIND_TIED), x->tied_in, n * sizeof(float), w,
                               &x->tied_recv);
        if (st == PZ_OK)
            st = pz_transport_send(x->tp, peer, pz_tag(x->rank, step, 0, KIND_TIED), x->tied_out, n * sizeof(float),
                                   w, &x->tied_send);
        x->tied_view = g;
        itrace(x, "tied", -1, t0, pz_now());
        if (st != PZ_OK || !holds_first(x)) return st;   /* the last rank adds after the norm */
        return tied_finish(x);
    }
    case PZ_OP_OPTIM_STEP:
        return PZ_OK;
    default:
        break;
    }
    return pz_fail(PZ_ERR_ARG, "interleaved executor: op %s is not one it runs", pz_op_name(in->op));
}

/* Validation: each batch goes through the global chunks 0..G-1 in order
 * round the ring, raw or through the evaluation codecs. */
static pz_status validate(iexec *x, uint32_t val_round, int compressed, double *loss, int *used) {
    const pz_train_opts *o = x->o;
    pz_loader vl;
    int nb = 0;
    pz_status st = PZ_OK;
    const int ends = holds_first(x) || holds_last(x);
    *loss = 0.0;
    if (ends) {
        if ((st = pz_loader_init(&vl, &x->val, o->batch, 0, 0)) != PZ_OK) return st;
        nb = (int)pz_loader_batches_per_epoch(&vl);
        if (nb < 1) {
            pz_loader_free(&vl);
            return pz_fail(PZ_ERR_SHAPE, "evaluation data has fewer than one batch of %d x %d tokens", o->batch, o->seq);
        }
        if (nb > o->val_batches) nb = o->val_batches;
    }
    double cnt = holds_first(x) ? nb : 0.0;
    if ((st = pz_transport_allreduce_sum_f64(x->tp, &cnt, 1)) != PZ_OK) goto out;
    nb = (int)cnt;
    double sum = 0.0;
    uint64_t cstep = (1ull << 40) | val_round;
    for (int k = 0; k < nb && st == PZ_OK; k++) {
        if (ends) pz_loader_next(&vl, x->tok, x->tgt, x->ids_tmp);
        for (int cc = 0; cc < x->V && st == PZ_OK; cc++) {
            chunk *c = &x->ch[cc];
            uint64_t *ids = c->ids[0];
            const float *xin = NULL;
            pz_request *r = NULL;
            const uint32_t field = (uint32_t)(k * x->V + cc) & 0xffffu;
            if (c->g == 0) {
                for (int b = 0; b < o->batch; b++) ids[b] = x->ids_tmp[b];
            } else {
                int peer = (c->g - 1) % x->S, pc = (c->g - 1) / x->S;
                uint32_t pf = (uint32_t)(k * x->V + pc) & 0xffffu;
                if ((st = irecv(x, peer, KIND_VAL, val_round, pf, c->act_wire_in[0], c->val_rx[compressed].cap, &r,
                                "recv validation activation", k)) != PZ_OK ||
                    (st = irecv_decode(x, &c->val_rx[compressed], &r, cstep, k, c->act_wire_in[0], c->act_in, ids)) !=
                        PZ_OK)
                    break;
                xin = pz_staging_in(&c->stg, c->act_in);
            }
            pz_stage_forward(&c->stage, &c->slots[0], x->tok, xin, x->tgt, 0.0f);
            if (c->g == x->G - 1) sum += c->slots[0].loss;
            else {
                int peer = (c->g + 1) % x->S;
                if ((st = iencode_send(x, &c->val_tx[compressed], peer, KIND_VAL, cstep, k, field,
                                       chunk_output(c, 0), ids, c->act_wire_out[0], &r,
                                       "send validation activation")) != PZ_OK ||
                    (st = iwait(x, &r, k, NULL)) != PZ_OK)
                    break;
            }
        }
    }
    double v = holds_last(x) ? sum : 0.0;
    if (st == PZ_OK) st = pz_transport_allreduce_sum_f64(x->tp, &v, 1);
    *loss = nb > 0 ? v / nb : NAN;
    *used = nb;
out:
    if (ends) pz_loader_free(&vl);
    return st;
}

static pz_status validate_print(iexec *x, int step, uint32_t *val_round, int compressed) {
    double vl;
    int used = 0;
    pz_status st = validate(x, (*val_round)++, compressed, &vl, &used);
    if (st == PZ_OK && x->rank == 0) pz_report_val(stdout, step, vl, used, compressed);
    return st;
}

/* --save: rank 0 gathers every rank's chunks by tensor name. */
static pz_status gather_save(iexec *x, const pz_stage_range *all, const char *path) {
    const pz_gpt2_config *cfg = &x->ch[0].stage.cfg;
    pz_status st = PZ_OK;
    char w[64];
    snprintf(w, sizeof w, "parameters for --save");
    if (x->rank != 0) {
        for (int cc = 0; cc < x->V && st == PZ_OK; cc++) {
            pz_stage *s = &x->ch[cc].stage;
            size_t bytes = s->params.numel * sizeof(float);
            float *host = xmalloc(bytes);
            x->be->to_host(host, s->param_mem, bytes);
            pz_request *r = NULL;
            st = pz_transport_send(x->tp, 0, pz_tag(x->rank, 0, (uint32_t)cc, KIND_SAVE), host, bytes, w, &r);
            if (st == PZ_OK) st = pz_transport_wait(x->tp, r, NULL);
            free(host);
        }
        return st;
    }
    pz_stage_range whole = pz_whole_model(cfg);
    float *mem = xmalloc(pz_stage_numel(cfg, &whole) * sizeof(float));
    pz_gpt2_params full;
    pz_gpt2_params_bind(&full, cfg, &whole, mem);
    int nt = pz_gpt2_params_tensors(&full, NULL);
    pz_tensor_info *tt = xcalloc((size_t)nt, sizeof *tt);
    pz_gpt2_params_tensors(&full, tt);
    for (int g = 0; g < x->G && st == PZ_OK; g++) {
        int r = g % x->S, cc = g / x->S;
        size_t n = pz_stage_numel(cfg, &all[g]);
        float *part = xmalloc(n * sizeof(float));
        if (r == 0) x->be->to_host(part, x->ch[cc].stage.param_mem, n * sizeof(float));
        else {
            pz_request *req = NULL;
            st = pz_transport_recv(x->tp, r, pz_tag(r, 0, (uint32_t)cc, KIND_SAVE), part, n * sizeof(float), w, &req);
            if (st == PZ_OK) st = pz_transport_wait(x->tp, req, NULL);
        }
        if (st == PZ_OK) {
            pz_gpt2_params p;
            pz_gpt2_params_bind(&p, cfg, &all[g], part);
            int nf = pz_gpt2_params_tensors(&p, NULL);
            pz_tensor_info *tf = xcalloc((size_t)nf, sizeof *tf);
            pz_gpt2_params_tensors(&p, tf);
            for (int a = 0; a < nf; a++)
                for (int b = 0; b < nt; b++)
                    if (strcmp(tf[a].name, tt[b].name) == 0) memcpy(tt[b].data, tf[a].data, tf[a].numel * sizeof(float));
            free(tf);
            pz_gpt2_params_unbind(&p);
        }
        free(part);
    }
    free(tt);
    if (st == PZ_OK && (st = pz_params_save(&full, path)) == PZ_OK) fprintf(stderr, "pipezip train: saved %s\n", path);
    pz_gpt2_params_unbind(&full);
    free(mem);
    return st;
}

/* The codecs of chunk c's edge ends, named as pipeline_ckpt.c names a stage's. */
static int chunk_codecs(chunk *c, const char **names, pz_codec **cs) {
    static const char *const tag[4][2] = {{"out.fwd.send", "out.fwd.send.twin"}, {"out.bwd.recv", "out.bwd.recv.twin"},
                                          {"in.fwd.recv", "in.fwd.recv.twin"},   {"in.bwd.send", "in.bwd.send.twin"}};
    pz_edge_end *ends[4] = {&c->fwd_tx, &c->bwd_rx, &c->fwd_rx, &c->bwd_tx};
    int n = 0;
    for (int k = 0; k < 4; k++) {
        pz_codec *e[2] = {ends[k]->codec, ends[k]->shadow};
        for (int j = 0; j < 2; j++)
            if (e[j]) names[n] = tag[k][j], cs[n++] = e[j];
    }
    return n;
}

/* One shard per global chunk, then (all durable) rank 0's manifest of G stages. */
static pz_status ichunk_checkpoint(iexec *x, int step) {
    const char *dir = x->o->checkpoint_dir;
    pz_status st = PZ_OK;
    for (int cc = 0; cc < x->V && st == PZ_OK; cc++) {
        chunk *c = &x->ch[cc];
        const char *names[8];
        pz_codec *cs[8];
        int n = chunk_codecs(c, names, cs);
        st = pz_resume_write_shard(dir, step, c->g, x->G, &c->stage, &c->opt, &x->loader);
        if (st == PZ_OK) st = pz_resume_write_codecs(dir, step, c->g, names, cs, n);
    }
    exec_fault_point("checkpoint", step, x->rank);
    double bad = st != PZ_OK;
    pz_status st2 = pz_transport_allreduce_sum_f64(x->tp, &bad, 1);
    if (st != PZ_OK) return st;
    if (st2 != PZ_OK) return st2;
    if (bad > 0)
        return pz_fail(PZ_ERR_IO, "rank %d: another rank could not write its checkpoint shards of step %d (the "
                       "previous checkpoint stays the newest)", x->rank, step);
    if (x->rank == 0 && (st = pz_resume_commit(dir, step, x->G, x->o->keep_checkpoints)) == PZ_OK)
        fprintf(stderr, "pipezip train: checkpoint of step %d in %s\n", step, dir);
    return st;
}

/* --resume: rank 0 finds the step, every chunk loads its part by tensor name. */
static pz_status ichunk_resume(iexec *x, int *start) {
    const pz_train_opts *o = x->o;
    int is_auto = strcmp(o->resume, "auto") == 0;
    const char *dir = is_auto ? o->checkpoint_dir : o->resume;
    double v = 0.0;
    pz_status st = PZ_OK;
    if (x->rank == 0) {
        int step;
        if ((st = pz_resume_find(dir, is_auto, &step)) != PZ_OK) return st;
        if (step < 0 && !is_auto)
            return pz_fail(PZ_ERR_ARG, "--resume %s: no complete checkpoint there (use --resume auto to start "
                           "fresh when there is none)", dir);
        v = step + 1.0;
    }
    if ((st = pz_transport_allreduce_sum_f64(x->tp, &v, 1)) != PZ_OK) return st;
    *start = (int)v - 1;
    if (*start < 0) {
        if (x->rank == 0) fprintf(stderr, "pipezip train: --resume auto: no checkpoint in %s, starting fresh\n", dir);
        *start = 0;
        return PZ_OK;
    }
    for (int cc = 0; cc < x->V && st == PZ_OK; cc++) {
        chunk *c = &x->ch[cc];
        int same = 0;
        st = pz_resume_read_shard(dir, *start, c->g, x->G, &c->stage, &c->opt, &x->loader, &same);
        const char *names[8];
        pz_codec *cs[8];
        int n = chunk_codecs(c, names, cs);
        if (st == PZ_OK && same) st = pz_resume_read_codecs(dir, *start, c->g, names, cs, n);
        for (int i = 0; st == PZ_OK && !same && i < n; i++)
            if (pz_codec_has_state(cs[i]))
                fprintf(stderr, "pipezip train: rank %d: warning: another layout than the checkpoint's: chunk %d's %s "
                        "(%s) starts with empty state (aq: its first epoch again)\n", x->rank, c->g, names[i],
                        pz_codec_spec(cs[i]));
    }
    double bad = st != PZ_OK;
    pz_status st2 = pz_transport_allreduce_sum_f64(x->tp, &bad, 1);
    if (st == PZ_OK && st2 == PZ_OK && bad > 0)
        st = pz_fail(PZ_ERR_PEER, "rank %d: another rank could not load its shards of the checkpoint", x->rank);
    if (st == PZ_OK && x->rank == 0) fprintf(stderr, "pipezip train: resumed from %s, step %d\n", dir, *start);
    return st == PZ_OK ? st2 : st;
}

static void iexec_free(iexec *x) {
    for (int cc = 0; x->ch && cc < x->V; cc++) {
        if (x->tied_view && cc == tied_chunk(x)) {
            chunk *c = &x->ch[cc];
            pz_staging_view_done(&c->stg, c->stage.grads.wte, x->tied_view,
                                 (size_t)c->stage.cfg.padded_vocab_size * c->stage.cfg.channels);
            x->tied_view = NULL;
        }
        chunk_free(x, &x->ch[cc]);
    }
    free(x->ch);
    free(x->tied_out);
    free(x->tied_in);
    free(x->tok);
    free(x->tgt);
    free(x->ids_tmp);
    pz_loader_free(&x->loader);
    pz_dataset_close(&x->train);
    pz_dataset_close(&x->val);
    pz_policy_free(&x->pol);
    pz_trace_free(&x->trace);
    pz_schedule_free(&x->sched);
}

/* One optimizer step's reductions and update, after the list ran. */
static pz_status finish_step(iexec *x, int step, double t0, double loss_sum, double *red, int nred) {
    const pz_train_opts *o = x->o;
    const int S = x->S;
    pz_status st = PZ_OK;
    for (int cc = 0; cc < x->V && st == PZ_OK; cc++)
        for (int k = 0; k < x->ch[cc].nwire && st == PZ_OK; k++) {
            if ((st = iwait(x, &x->ch[cc].act_send[k], -1, NULL)) != PZ_OK) break;
            st = iwait(x, &x->ch[cc].grad_send[k], -1, NULL);
        }
    if (st != PZ_OK) return st;
    memset(red, 0, (size_t)nred * sizeof *red);
    /* the norm over every chunk; wte once (rank S-1's chunk V-1 copy equals rank 0's) */
    for (int cc = 0; cc < x->V; cc++) {
        pz_stage *s = &x->ch[cc].stage;
        size_t skip = is_last_chunk(x, cc) ? (size_t)s->cfg.padded_vocab_size * s->cfg.channels : 0;
        red[0] += x->be->sumsq(s->grad_mem + skip, s->grads.numel - skip);
    }
    red[1] = holds_last(x) ? loss_sum / o->micro : 0.0;
    /* edge statistics: all boundaries summed into edge 0 (the step line sums them per direction) */
    double *es = red + 4 + 3 * S;
    x->codec_s = 0.0;
    for (int cc = 0; cc < x->V; cc++) {
        pz_edge_end *ends[4] = {&x->ch[cc].fwd_tx, &x->ch[cc].bwd_rx, &x->ch[cc].fwd_rx, &x->ch[cc].bwd_tx};
        for (int k = 0; k < 4; k++) {
            pz_edge_end *e = ends[k];
            if (!e->numel) continue;
            x->codec_s += e->st.enc_s + e->st.dec_s;
            const double *v = &e->st.raw;
            double *d = es + e->dir * PZ_EDGE_STATS_N;
            for (int j = 0; j < PZ_EDGE_STATS_N; j++) d[j] += v[j];
            memset(&e->st, 0, sizeof e->st);
        }
    }
    red[4 + 3 * x->rank + 0] = x->compute_s;
    red[4 + 3 * x->rank + 1] = x->wait_s;
    red[4 + 3 * x->rank + 2] = x->codec_s;
    if ((st = pz_transport_allreduce_sum_f64(x->tp, red, nred)) != PZ_OK) return st;
    double norm = sqrt(red[0]), loss = red[1];
    if (!isfinite(loss) || !isfinite(norm))
        return pz_fail(PZ_ERR_ARG, "step %d: loss %g, gradient norm %g: training diverged (try a lower --lr)",
                       step + 1, loss, norm);
    if ((st = tied_finish(x)) != PZ_OK) return st;
    double t_opt = pz_now();
    float lr = 0.0f;
    for (int cc = 0; cc < x->V; cc++)
        lr = pz_optim_step(&x->ch[cc].opt, &x->ch[cc].stage, pz_clip_scale(&x->ch[cc].opt.cfg, norm));
    itrace(x, "optimizer", -1, t_opt, pz_now());
    size_t BT = (size_t)o->batch * o->seq;
    double ms = 1e3 * (pz_now() - t0), tok_s = (double)BT * o->micro / (ms * 1e-3);
    if (x->rank == 0) {
        pz_step_line line = {step + 1, loss, norm, ms, tok_s, lr};
        pz_report_step(stdout, &line, S, es, red + 4);
    }
    if (x->rank == 0 && isatty(2))
        fprintf(stderr, "\rstep %d/%d loss %.4f  %.0f ms  %.0f tok/s   ", step + 1, o->steps, loss, ms, tok_s);
    return PZ_OK;
}

pz_status pz_pipeline_run_interleaved(const pz_train_opts *o, const pz_sched_spec *spec, int rank, int world,
                                      const char *master_addr, int master_port) {
    iexec x;
    memset(&x, 0, sizeof x);
    x.o = o;
    x.rank = rank;
    x.S = world;
    x.V = spec->virtual_stages;
    x.G = world * x.V;
    if (o->trace) pz_trace_start(&x.trace, pz_now());
    pz_status st;
    if ((st = pz_pipeline_interleaved_check(o, spec)) != PZ_OK) return st;
    pz_cores cores;
    if ((st = pz_cores_setup(rank, world, master_addr, o->threads, o->bind, &cores)) != PZ_OK) return st;
    pz_cores_print(stderr, rank, &cores);
    x.be = pz_backend_for(o->device, rank, cores.threads, &st);
    if (!x.be) return st;
    if (!o->data) return pz_fail(PZ_ERR_ARG, "--data is required (token shards; see 'pipezip tokenize')");
    if (world != o->stages) return pz_fail(PZ_ERR_ARG, "WORLD_SIZE %d does not match --stages %d", world, o->stages);
    pz_gpt2_config cfg;
    if ((st = pz_model_config(o->preset, o->init, o->heads, &cfg)) != PZ_OK) return st;
    if ((st = pz_pipeline_policy(o, &x.pol)) != PZ_OK) return st;
    double *red = NULL;
    pz_stage_range *all = xcalloc((size_t)x.G, sizeof *all);
    if ((st = pz_partition(&cfg, o->seq, x.G, o->split, all)) != PZ_OK) goto cleanup;
    if (o->save && rank == 0 && (st = pz_check_writable_dir("--save", o->save)) != PZ_OK) goto cleanup;
    if (rank == 0) {
        fprintf(stderr, "interleaved: %d chunks, rank r holds chunks r, r+%d, ...:\n", x.G, world);
        pz_partition_print(stderr, &cfg, o->seq, x.G, all);
        fprintf(stderr, "compression policy (edge I-J: the boundary between chunks I and J):\n");
        for (int e = 0; e < x.G - 1; e++) fputs("  ", stderr), pz_policy_print_edge(stderr, &x.pol, e);
        fprintf(stderr, "  validation: %s\n", o->eval_compress && pz_policy_any(&x.pol, PZ_FWD)
                                                  ? "through the fwd codecs (wrappers' inner codec)" : "uncompressed");
    }
    if ((st = pz_schedule_build(&x.sched, spec, rank, world, o->micro)) != PZ_OK) goto cleanup;
    x.ch = xcalloc((size_t)x.V, sizeof *x.ch);
    pz_optim_config oc = o->optim;
    oc.total_steps = o->steps;
    if (!o->warmup_given) oc.warmup_steps = o->steps / 10;
    size_t BT = (size_t)o->batch * o->seq;
    x.act_bytes = BT * (size_t)cfg.channels * sizeof(float);
    for (int cc = 0; cc < x.V; cc++) {
        chunk *c = &x.ch[cc];
        c->g = cc * world + rank;
        if ((st = pz_model_create_stage(&c->stage, x.be, &cfg, &all[c->g], o->init, (uint64_t)o->seed, o->batch,
                                        o->seq)) != PZ_OK)
            goto cleanup;
        if ((st = pz_optim_init(&c->opt, &c->stage, &oc)) != PZ_OK) goto cleanup;
        if ((st = chunk_edges(&x, c)) != PZ_OK) goto cleanup;
    }
    if (holds_first(&x) || holds_last(&x)) {
        if ((st = pz_dataset_open(&x.train, o->data, o->seq, cfg.vocab_size)) != PZ_OK) goto cleanup;
        if ((st = pz_loader_init(&x.loader, &x.train, o->batch, 1, (uint64_t)o->seed)) != PZ_OK) goto cleanup;
        if (o->val_data && (st = pz_dataset_open(&x.val, o->val_data, o->seq, cfg.vocab_size)) != PZ_OK) goto cleanup;
    }
    x.tok = xcalloc(BT, sizeof(int));
    x.tgt = xcalloc(BT, sizeof(int));
    x.ids_tmp = xcalloc((size_t)o->batch, sizeof *x.ids_tmp);
    ring_sizes(&x);
    for (int cc = 0; cc < x.V; cc++) chunk_alloc(&x, &x.ch[cc], pz_schedule_chunk_peak(&x.sched, cc));

    pz_transport_opts to = {rank, world, master_addr, master_port, o->peer_timeout, o->peer_timeout, !o->progress_inline,
                            o->job_secret, o->job_secret_len};
    if ((st = pz_transport_init(&x.tp, &to)) != PZ_OK) goto cleanup;
    pz_staging_report(&x.ch[0].stg, x.tp, rank);
    if (o->progress_inline)
        for (int cc = 0; cc < x.V; cc++) {
            x.ch[cc].stage.between_blocks = progress_hook;
            x.ch[cc].stage.between_blocks_ctx = x.tp;
        }
    if (rank == 0)
        fprintf(stderr, "pipezip train: %d stages x %d chunks, %s schedule, %d micro-batch%s of %d x %d per step\n",
                world, x.V, o->schedule, o->micro, o->micro == 1 ? "" : "es", o->batch, o->seq);

    /* reduction array: [0] grad sumsq, [1] loss, [2..3] unused, then 3 per
     * rank (compute, wait, codec seconds), then one edge's statistics */
    int nred = 4 + 3 * world + 2 * (world - 1) * PZ_EDGE_STATS_N;
    red = xcalloc((size_t)nred, sizeof *red);
    uint32_t val_round = 0;
    int first_step = 0;
    exec_fault_arm(o->resume == NULL);
    if (o->resume && (st = ichunk_resume(&x, &first_step)) == PZ_OK && o->val_every > 0)
        val_round = (uint32_t)(first_step / o->val_every);
    for (int step = first_step; step < o->steps && st == PZ_OK; step++) {
        double t0 = pz_now(), loss_sum = 0.0;
        x.compute_s = x.wait_s = x.codec_s = 0.0;
        for (int cc = 0; cc < x.V; cc++) pz_stage_zero_grad(&x.ch[cc].stage);
        for (int k = 0; k < x.sched.n && st == PZ_OK; k++)
            st = run_instr(&x, &x.sched.ins[k], (uint32_t)step, &loss_sum);
        if (st != PZ_OK || (st = finish_step(&x, step, t0, loss_sum, red, nred)) != PZ_OK) break;
        int last = step + 1 == o->steps;
        if (o->checkpoint_dir && (last || (o->checkpoint_every > 0 && (step + 1) % o->checkpoint_every == 0)) &&
            (st = ichunk_checkpoint(&x, step + 1)) != PZ_OK)
            break;
        exec_fault_point("step", step + 1, rank);
        if (o->val_data && o->val_every > 0 && ((step + 1) % o->val_every == 0 || last)) {
            int comp = o->eval_compress && pz_policy_any(&x.pol, PZ_FWD);
            if ((st = validate_print(&x, step + 1, &val_round, comp)) != PZ_OK) break;
            if (rank == 0 && isatty(2)) fprintf(stderr, "\n");
            if (last && pz_policy_any(&x.pol, PZ_FWD) && (st = validate_print(&x, step + 1, &val_round, !comp)) != PZ_OK)
                break;
        }
    }
    if (rank == 0 && isatty(2)) fprintf(stderr, "\n");
    if (st == PZ_OK && o->save) st = gather_save(&x, all, o->save);
    if (st == PZ_OK && o->trace) st = pz_trace_write_fragment(&x.trace, o->trace, rank);
    pz_transport_close(x.tp, st != PZ_OK);
    x.tp = NULL;
cleanup:
    free(red);
    iexec_free(&x);
    free(all);
    return st;
}
