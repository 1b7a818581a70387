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
 * --link-mbps and --link-latency-ms are read per boundary too; a physical
 * link (rank l to (l+1) % S) gets the slowest of its boundaries (set_links).
 * --metrics reports per boundary. SIGTERM or SIGINT on any rank stops all
 * after the step (checkpointed). */
#include "runtime/pipeline.h"
#include "runtime/pipeline_exec.h"
#include "runtime/pipeline_chunks.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/mem.h"
#include "runtime/cores.h"
#include "runtime/device.h"
#include "runtime/fingerprint.h"
#include "runtime/memplan.h"
#include "runtime/partition.h"
#include "runtime/report.h"

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
    if (o->dump_edge)
        return pz_fail(PZ_ERR_ARG, "--schedule %s: --dump-edge is not supported with interleaved schedules yet", v);
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
    for (int side = 0; side < 2 && st == PZ_OK; side++) {
        if (side == 0 ? c->g == x->G - 1 : c->g == 0) continue;
        int e = side == 0 ? c->g : c->g - 1;
        const char *fs = pz_policy_codec(&x->pol, e, PZ_FWD), *bs = pz_policy_codec(&x->pol, e, PZ_BWD);
        if (side == 0) {
            if ((st = pz_edge_init(&c->fwd_tx, e, PZ_FWD, 1, fs, B, T, C, o->error_metrics)) != PZ_OK) break;
            if ((st = pz_edge_init(&c->bwd_rx, e, PZ_BWD, 0, bs, B, T, C, 0)) != PZ_OK) break;
            st = pz_edge_init_val(c->val_tx, e, 1, fs, B, T, C);
        } else {
            if ((st = pz_edge_init(&c->fwd_rx, e, PZ_FWD, 0, fs, B, T, C, 0)) != PZ_OK) break;
            if ((st = pz_edge_init(&c->bwd_tx, e, PZ_BWD, 1, bs, B, T, C, o->error_metrics)) != PZ_OK) break;
            st = pz_edge_init_val(c->val_rx, e, 0, fs, B, T, C);
        }
    }
    if (st != PZ_OK) return st;
    c->cap_in = pz_edge_wire_cap(&c->fwd_rx, c->val_rx);
    c->cap_out = pz_edge_wire_cap(&c->fwd_tx, c->val_tx);
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

static pz_status tied_finish(iexec *x, uint32_t step) {
    if (!x->tied_view) return PZ_OK;
    chunk *c = &x->ch[tied_chunk(x)];
    size_t n = (size_t)c->stage.cfg.padded_vocab_size * c->stage.cfg.channels, len = 0;
    double t0 = pz_now();
    pz_status st = iwait(x, &x->tied_recv, -1, &len);
    if (st == PZ_OK)
        st = pz_tied_add(&x->tied, len, (uint64_t)x->o->seed, step, holds_first(x) ? 1 : 0, x->tied_view);
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
         * gradient and adds the other's (runtime/tied.h) */
        int tc = tied_chunk(x);
        if (tc < 0) return PZ_OK;
        chunk *t = &x->ch[tc];
        int peer = holds_first(x) ? x->S - 1 : 0;
        size_t n = (size_t)t->stage.cfg.padded_vocab_size * t->stage.cfg.channels, len = 0;
        if ((st = iwait(x, &x->tied_send, -1, NULL)) != PZ_OK) return st;
        float *g = pz_staging_view(&t->stg, t->stage.grads.wte, n);
        x->tied_view = g;   /* given back by tied_finish, on error by iexec_free */
        if ((st = pz_tied_encode(&x->tied, g, (uint64_t)o->seed, step, holds_first(x) ? 0 : 1, &len)) != PZ_OK) return st;
        x->tied_wire = (double)len;
        char w[64];
        snprintf(w, sizeof w, "tied embedding gradient step %u", step);
        st = pz_transport_recv(x->tp, peer, pz_tag(peer, step, 0, KIND_TIED), x->tied.in, x->tied.cap, w,
                               &x->tied_recv);
        if (st == PZ_OK)
            st = pz_transport_send(x->tp, peer, pz_tag(x->rank, step, 0, KIND_TIED), x->tied.out, len, w,
                                   &x->tied_send);
        itrace(x, "tied", -1, t0, pz_now());
        if (st != PZ_OK || !holds_first(x)) return st;   /* the last rank adds after the norm */
        return tied_finish(x, step);
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
    pz_tied_free(&x->tied);
    free(x->tok);
    free(x->tgt);
    free(x->ids_tmp);
    pz_loader_free(&x->loader);
    pz_dataset_close(&x->train);
    pz_dataset_close(&x->val);
    pz_policy_free(&x->pol);
    pz_metrics_free(&x->met);
    pz_trace_free(&x->trace);
    pz_schedule_free(&x->sched);
}

/* Simulated links (--link-mbps, --link-latency-ms, read per boundary like
 * --compress): the physical link between rank l and rank (l+1) % S (the
 * ring; l = S-1 is the wrap link to rank 0) carries the boundaries b with
 * b % S == l, and gets the slowest rate and the longest delay among them. */
static void link_of(const iexec *x, int l, double *rate, double *lat) {
    *rate = 0.0, *lat = 0.0;
    for (int b = l; b < x->G - 1; b += x->S) {
        if (x->pol.mbps[b] > 0 && (*rate == 0.0 || x->pol.mbps[b] < *rate)) *rate = x->pol.mbps[b];
        if (x->pol.latency_ms[b] > *lat) *lat = x->pol.latency_ms[b];
    }
}

/* Each peer gets the link to it: a ring neighbour its link (both, with
 * S = 2), a farther one (the collectives with rank 0) the slowest rate and
 * the summed delays of the links between, upwards from the lower rank. */
static void set_links(iexec *x) {
    const int S = x->S, r = x->rank;
    for (int p = 0; p < S; p++) {
        if (p == r) continue;
        double rate = 0.0, lat = 0.0, lr, ll;
        int n = 0, ls[2];
        if (p == (r + 1) % S) ls[n++] = r;
        if (r == (p + 1) % S) ls[n++] = p;
        if (n) {
            for (int k = 0; k < n; k++) {
                link_of(x, ls[k], &lr, &ll);
                if (lr > 0 && (rate == 0.0 || lr < rate)) rate = lr;
                if (ll > lat) lat = ll;
            }
        } else {
            for (int l = p < r ? p : r; l < (p < r ? r : p); l++) {
                link_of(x, l, &lr, &ll);
                if (lr > 0 && (rate == 0.0 || lr < rate)) rate = lr;
                lat += ll;
            }
        }
        if (rate > 0 || lat > 0) pz_transport_set_link(x->tp, p, rate, lat);
    }
}

/* A link so slow that one message outlasts --peer-timeout would end in
 * "peer frozen?" at the receiver: say what is wrong first. */
static pz_status check_links(const iexec *x) {
    for (int cc = 0; cc < x->V; cc++)
        for (int side = 0; side < 2; side++) {
            const chunk *c = &x->ch[cc];
            const pz_edge_end *tx = side == 0 ? &c->fwd_tx : &c->bwd_tx;
            if (!tx->numel) continue;
            double rate, lat;
            link_of(x, tx->edge % x->S, &rate, &lat);
            if (!(rate > 0)) continue;
            double secs = (double)tx->cap * 8.0 / (rate * 1e6) + lat * 1e-3;
            if (secs > x->o->peer_timeout)
                return pz_fail(PZ_ERR_ARG, "--link-mbps %g on the link carrying boundary %d-%d: one %s message of up to "
                               "%zu bytes takes %.3g s on it, longer than --peer-timeout %g s, after which the "
                               "receiving rank would give its peer up: raise the rate or --peer-timeout", rate,
                               tx->edge, tx->edge + 1, side == 0 ? "activation" : "gradient", tx->cap, secs,
                               (double)x->o->peer_timeout);
        }
    return PZ_OK;
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
    red[nred - 1] = holds_first(x) ? x->tied_wire : 0.0;   /* one end's tied message */
    red[2] = exec_stop_signal() == SIGTERM;   /* ranks that got each signal */
    red[3] = exec_stop_signal() == SIGINT;
    /* edge statistics per boundary and direction */
    double *es = red + 4 + 3 * S;
    x->codec_s = 0.0;
    for (int cc = 0; cc < x->V; cc++) {
        pz_edge_end *ends[4] = {&x->ch[cc].fwd_tx, &x->ch[cc].bwd_rx, &x->ch[cc].fwd_rx, &x->ch[cc].bwd_tx};
        for (int k = 0; k < 4; k++) {
            pz_edge_end *e = ends[k];
            if (!e->numel) continue;
            x->codec_s += e->st.enc_s + e->st.dec_s;
            const double *v = &e->st.raw;
            double *d = es + (2 * e->edge + e->dir) * PZ_EDGE_STATS_N;
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
    if ((st = tied_finish(x, (uint32_t)step)) != PZ_OK) return st;
    double t_opt = pz_now();
    float lr = 0.0f;
    for (int cc = 0; cc < x->V; cc++)
        lr = pz_optim_step(&x->ch[cc].opt, &x->ch[cc].stage, pz_clip_scale(&x->ch[cc].opt.cfg, norm));
    itrace(x, "optimizer", -1, t_opt, pz_now());
    size_t BT = (size_t)o->batch * o->seq;
    double ms = 1e3 * (pz_now() - t0), tok_s = (double)BT * o->micro / (ms * 1e-3);
    if (x->rank == 0) {
        /* the step line sums the bytes per direction: all boundaries as its "edge 0" */
        double *sum = xcalloc((size_t)(2 * (S - 1) * PZ_EDGE_STATS_N), sizeof *sum);
        for (int b = 0; b < x->G - 1; b++)
            for (int k = 0; k < 2 * PZ_EDGE_STATS_N; k++) sum[k] += es[2 * b * PZ_EDGE_STATS_N + k];
        pz_step_line line = {step + 1, loss, norm, ms, tok_s, lr, red[nred - 1]};
        pz_report_step(stdout, &line, S, sum, red + 4);
        free(sum);
        pz_metrics_step(&x->met, step + 1, es, tok_s);
    }
    if (x->rank == 0 && isatty(2))
        fprintf(stderr, "\rstep %d/%d loss %.4f  %.0f ms  %.0f tok/s   ", step + 1, o->steps, loss, ms, tok_s);
    return PZ_OK;
}

/* The summary: codec state per rank (memory, spill files), the metrics'
 * table and files on rank 0. */
static pz_status finish_run(iexec *x) {
    const int S = x->S;
    double *sb = xcalloc((size_t)3 * S, sizeof *sb);
    for (int cc = 0; cc < x->V; cc++) {
        pz_edge_end *ends[4] = {&x->ch[cc].fwd_tx, &x->ch[cc].bwd_rx, &x->ch[cc].fwd_rx, &x->ch[cc].bwd_tx};
        for (int k = 0; k < 4; k++) {
            pz_codec *cs[2] = {ends[k]->codec, ends[k]->shadow};
            for (int j = 0; j < 2; j++) {
                if (!cs[j]) continue;
                size_t fb = 0;
                sb[x->rank] += (double)pz_codec_state_bytes(cs[j], &fb);
                sb[S + x->rank] += (double)fb;
            }
        }
    }
    unsigned long rounds = 0, sleeps = 0;
    pz_transport_thread_stats(x->tp, &sb[2 * S + x->rank], &rounds, &sleeps);
    pz_status st = pz_transport_allreduce_sum_f64(x->tp, sb, 3 * S);
    if (st == PZ_OK && x->rank == 0) {
        char pt[4096];
        size_t n = 0;
        pt[0] = 0;
        for (int e = 0; e < x->G - 1 && n < sizeof pt; e++) {
            const char *f = pz_policy_codec(&x->pol, e, PZ_FWD), *b = pz_policy_codec(&x->pol, e, PZ_BWD);
            int k = snprintf(pt + n, sizeof pt - n, "%s%d-%d:fwd=%s,bwd=%s", e ? ";" : "", e, e + 1, f ? f : "none",
                             b ? b : "none");
            if (k < 0) break;
            n += (size_t)k;
        }
        st = pz_metrics_finish(&x->met, pt, sb, sb + S, S);
    }
    free(sb);
    return st;
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
    int handlers = 0, stopped = 0;
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
    {   /* before anything big is allocated: refuse a run that cannot fit */
        pz_mem_job mj = {&cfg, all, spec, &x.pol, world, o->batch, o->seq, o->micro, x.be->host_memory};
        char prefix[32];
        snprintf(prefix, sizeof prefix, "rank %d: ", rank);
        if ((st = pz_mem_check(&mj, rank, rank - cores.local_rank, cores.local_ranks, prefix)) != PZ_OK) goto cleanup;
    }
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
    if (tied_chunk(&x) >= 0 && (st = pz_tied_init(&x.tied, o->compress_tied, cfg.padded_vocab_size,
                                                  cfg.channels)) != PZ_OK)
        goto cleanup;
    if (holds_first(&x) || holds_last(&x)) {
        if ((st = pz_dataset_open(&x.train, o->data, o->seq, cfg.vocab_size)) != PZ_OK) goto cleanup;
        if ((st = pz_loader_init(&x.loader, &x.train, o->batch, 1, (uint64_t)o->seed)) != PZ_OK) goto cleanup;
        if (o->val_data && (st = pz_dataset_open(&x.val, o->val_data, o->seq, cfg.vocab_size)) != PZ_OK) goto cleanup;
    }
    x.tok = xcalloc(BT, sizeof(int));
    x.tgt = xcalloc(BT, sizeof(int));
    x.ids_tmp = xcalloc((size_t)o->batch, sizeof *x.ids_tmp);
    if ((st = check_links(&x)) != PZ_OK) goto cleanup;
    ring_sizes(&x);
    for (int cc = 0; cc < x.V; cc++) chunk_alloc(&x, &x.ch[cc], pz_schedule_chunk_peak(&x.sched, cc));

    if (rank == 0 && (st = pz_metrics_init(&x.met, &x.pol, o->metrics, o->micro, o->error_metrics)) != PZ_OK)
        goto cleanup;
    pz_transport_opts to = {rank, world, master_addr, master_port, o->peer_timeout, o->peer_timeout, !o->progress_inline,
                            o->job_secret, o->job_secret_len};
    if ((st = pz_transport_init(&x.tp, &to)) != PZ_OK) goto cleanup;
    {   /* authenticated: now the ranks must agree on what they compute (runtime/fingerprint.h) */
        char *fp = pz_fingerprint_build(o, &cfg, &x.pol, x.train.paths ? &x.train : NULL, x.val.paths ? &x.val : NULL);
        st = pz_fingerprint_agree(x.tp, rank, world, fp);
        free(fp);
        if (st != PZ_OK) goto cleanup;
    }
    set_links(&x);
    pz_staging_report(&x.ch[0].stg, x.tp, rank);
    if (o->progress_inline)
        for (int cc = 0; cc < x.V; cc++) {
            x.ch[cc].stage.between_blocks = progress_hook;
            x.ch[cc].stage.between_blocks_ctx = x.tp;
        }
    if (rank == 0)
        fprintf(stderr, "pipezip train: %d stages x %d chunks, %s schedule, %d micro-batch%s of %d x %d per step\n",
                world, x.V, o->schedule, o->micro, o->micro == 1 ? "" : "es", o->batch, o->seq);

    /* reduction array: [0] grad sumsq, [1] loss, [2..3] ranks that got SIGTERM, SIGINT, then 3 per
     * rank (compute, wait, codec seconds), then the statistics per boundary */
    int nred = 4 + 3 * world + 2 * (x.G - 1) * PZ_EDGE_STATS_N + 1;   /* + the tied message's bytes */
    red = xcalloc((size_t)nred, sizeof *red);
    struct sigaction old_term, old_int;
    exec_stop_install(1, &old_term, &old_int);
    handlers = 1;
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
        int last = step + 1 == o->steps, stop = red[2] > 0.0 || red[3] > 0.0;
        if (stop) {   /* a signal anywhere: every rank stops after this step, checkpointed */
            stopped = red[2] > 0.0 ? SIGTERM : SIGINT;
            exec_stop_set(stopped);
            if (rank == 0)
                fprintf(stderr, "pipezip train: %s: stopping after step %d%s\n", strsignal(stopped), step + 1,
                        o->checkpoint_dir ? ", with a checkpoint" : " (no --checkpoint-dir: no checkpoint)");
        }
        if (o->checkpoint_dir &&
            (last || stop || (o->checkpoint_every > 0 && (step + 1) % o->checkpoint_every == 0)) &&
            (st = ichunk_checkpoint(&x, step + 1)) != PZ_OK)
            break;
        exec_fault_point("step", step + 1, rank);
        if (stop) break;
        if (o->val_data && o->val_every > 0 && ((step + 1) % o->val_every == 0 || last)) {
            int comp = o->eval_compress && pz_policy_any(&x.pol, PZ_FWD);
            if ((st = validate_print(&x, step + 1, &val_round, comp)) != PZ_OK) break;
            if (rank == 0 && isatty(2)) fprintf(stderr, "\n");
            if (last && pz_policy_any(&x.pol, PZ_FWD) && (st = validate_print(&x, step + 1, &val_round, !comp)) != PZ_OK)
                break;
        }
    }
    if (rank == 0 && isatty(2)) fprintf(stderr, "\n");
    if (st == PZ_OK) st = finish_run(&x);
    if (st == PZ_OK && o->save && stopped && rank == 0)
        fprintf(stderr, "pipezip train: stopped early: %s not written\n", o->save);
    if (st == PZ_OK && o->save && !stopped) st = ichunk_gather_save(&x, all, o->save);
    if (st == PZ_OK && o->trace) st = pz_trace_write_fragment(&x.trace, o->trace, rank);
    pz_transport_close(x.tp, st != PZ_OK);
    x.tp = NULL;
cleanup:
    if (x.tp) pz_transport_close(x.tp, 1);   /* a failure after the ranks met (the fingerprint) */
    if (handlers) exec_stop_install(0, &old_term, &old_int);
    free(red);
    iexec_free(&x);
    free(all);
    return st;
}
