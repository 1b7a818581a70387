/* pipeline.c: the executor of one pipeline rank.
 *
 * Follow one micro-batch i through stage s (0 < s < S-1):
 *   RECV_ACT i   post a receive of the (B,T,C) activation from rank s-1
 *   FORWARD i    wait for it, run the stage's blocks (activations kept in slot i % bound)
 *   SEND_ACT i   encode the stage output into send buffer i % nwire and send it
 *                to rank s+1 (non-blocking; the buffer's previous send must be out)
 *   RECV_GRAD i  post a receive of d(output) from rank s+1
 *   BACKWARD i   wait for it, backward through the blocks; d(input) lands in a send buffer
 *   SEND_GRAD i  send d(input) to rank s-1 (non-blocking)
 *   (zb-h1: BACKWARD i is the input gradient only, and BACKWARD_WEIGHT i,
 *   later, the blocks' weight gradients; the slot is free after it)
 * After the last micro-batch: REDUCE_TIED (the first and last stage add their
 * wte gradients so both copies stay equal) and OPTIM_STEP (global gradient
 * norm over all ranks, clipping, AdamW; loss gathered for rank 0's log).
 * Neither end waits for its own wte send, and the last stage adds the first
 * stage's copy only after the norm's reduction (its norm skips wte): over a
 * slow link that 4*V*C-byte message is the step's longest, and the first
 * stage starts the next step while it is still on its way.
 * Receives are waited for only where their data is used, so a rank keeps
 * driving UCX progress (for its own sends too) while it waits.
 * What crosses an edge is encoded by the policy's codec (runtime/edge.c):
 * SEND_* encodes into a wire buffer of a ring of its own (nwire, a little
 * more than the activation slots, so a send still on a slow link never holds
 * up the next forward or backward), the wait before FORWARD or BACKWARD
 * decodes the received message into the stage's input. By default a
 * progress thread of the transport moves the messages meanwhile. */
#include "runtime/pipeline.h"
#include "runtime/pipeline_exec.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stages/gpt2_checkpoint.h"
#include "runtime/cores.h"
#include "runtime/device.h"
#include "runtime/edge.h"
#include "runtime/gather.h"
#include "runtime/metrics.h"
#include "runtime/nvtx.h"
#include "runtime/partition.h"
#include "runtime/policy.h"
#include "runtime/report.h"
#include "runtime/resume.h"
#include "runtime/fingerprint.h"
#include "runtime/memplan.h"
#include "runtime/staging.h"
#include "runtime/trace.h"
#include "runtime/transport.h"
#include "schedules/schedule.h"
#include "base/clock.h"
#include "base/mem.h"


static void trace(exec *x, const char *name, int micro, double t0, double t1) {
    pz_trace_add(&x->trace, name, micro, t0, t1);
}


static void progress_hook(void *tp) { pz_transport_progress(tp); }

/* Sums over the ranks; one stage alone has no transport and nothing to add. */
static pz_status allreduce(exec *x, double *v, int n) {
    return x->tp ? pz_transport_allreduce_sum_f64(x->tp, v, n) : PZ_OK;
}

/* Waits for a request, counting the time as waiting (and tracing it). */
static pz_status wait_req_at(exec *x, pz_request **req, int micro, size_t *len, double *done_at) {
    if (!*req) return PZ_OK;
    double t0 = pz_now();
    PZ_RANGE_PUSH("wait micro %d", micro);
    pz_status st = pz_transport_wait_at(x->tp, *req, len, done_at);
    PZ_RANGE_POP();
    *req = NULL;
    double t1 = pz_now();
    x->wait_s += t1 - t0;
    if (t1 - t0 > 1e-4) trace(x, "wait", micro, t0, t1);
    return st;
}

static pz_status wait_req(exec *x, pz_request **req, int micro) { return wait_req_at(x, req, micro, NULL, NULL); }

/* "recv activation, edge 1-2 forward, step 3 micro 0": what transport
 * errors (a failed frame check among them) name. */
static void describe(char *w, size_t cap, const exec *x, int peer, int kind, uint32_t step, int micro,
                     const char *what) {
    int lo = peer < x->rank ? peer : x->rank;
    snprintf(w, cap, "%s, edge %d-%d %s, step %u micro %d", what, lo, lo + 1, kind == KIND_GRAD ? "backward" : "forward",
             step, micro);
}

static pz_status post_recv(exec *x, int peer, int kind, uint32_t step, int micro, uint8_t *buf, size_t cap,
                           pz_request **req, const char *what) {
    char w[96];
    describe(w, sizeof w, x, peer, kind, step, micro, what);
    PZ_RANGE_PUSH("%s", w);
    pz_status st = pz_transport_recv(x->tp, peer, pz_tag(peer, step, (uint32_t)micro, (uint32_t)kind), buf, cap, w, req);
    PZ_RANGE_POP();
    return st;
}

static pz_status post_send(exec *x, int peer, int kind, uint32_t step, int micro, const uint8_t *buf, size_t len,
                           pz_request **req, const char *what) {
    char w[96];
    describe(w, sizeof w, x, peer, kind, step, micro, what);
    PZ_RANGE_PUSH("%s", w);
    pz_status st = pz_transport_send(x->tp, peer, pz_tag(x->rank, step, (uint32_t)micro, (uint32_t)kind), buf, len,
                                     w, req);
    PZ_RANGE_POP();
    return st;
}

/* Encodes x with edge end e into wire and sends it (edge.c times the codec). */
static pz_status encode_send(exec *x, pz_edge_end *e, int peer, int kind, uint64_t step, int micro,
                             const float *src, const uint64_t *ids, uint8_t *wire, pz_request **req,
                             const char *what) {
    size_t len = 0;
    pz_status st = exec_dump_edge(x, e, kind, step, micro, src);
    if (st != PZ_OK) return st;
    double t0 = pz_now();
    PZ_RANGE_PUSH("encode edge %d step %llu micro %d", e->edge, (unsigned long long)step, micro);
    st = pz_edge_encode(e, src, ids, (uint64_t)x->o->seed, step, (uint32_t)micro, wire, &len);
    PZ_RANGE_POP();
    double t1 = pz_now();
    if (e->codec) trace(x, "encode", micro, t0, t1);
    if (st != PZ_OK) return st;
    /* auto: the candidates on this micro-batch, if sampled (validation's ends are never auto's) */
    if (x->au.any && (st = pz_auto_sample(&x->au, e, src, ids, (uint64_t)x->o->seed, step, (uint32_t)micro)) != PZ_OK)
        return st;
    pz_auto_sent(&x->au, e, micro, len, pz_now());
    return post_send(x, peer, kind, (uint32_t)step, micro, wire, len, req, what);   /* tags: the low 32 bits */
}

/* Waits for a send of edge end e, the message of micro-batch micro (-1:
 * none), and tells auto when it was done (its link measurement). */
static pz_status wait_send(exec *x, pz_edge_end *e, pz_request **req, int micro) {
    double done = 0.0;
    int had = *req != NULL;
    pz_status st = wait_req_at(x, req, micro, NULL, &done);
    if (st == PZ_OK && had) pz_auto_send_done(&x->au, e, micro, done);
    return st;
}

/* Waits for a posted receive into wire and decodes it into out. */
static pz_status recv_decode(exec *x, pz_edge_end *e, pz_request **req, uint64_t step, int micro,
                             const uint8_t *wire, float *out, uint64_t *ids, double *done_at) {
    size_t len = 0;
    pz_status st = wait_req_at(x, req, micro, &len, done_at);
    if (st != PZ_OK) return st;
    double t0 = pz_now();
    PZ_RANGE_PUSH("decode edge %d step %llu micro %d", e->edge, (unsigned long long)step, micro);
    st = pz_edge_decode(e, wire, len, (uint64_t)x->o->seed, step, (uint32_t)micro, out, ids);
    PZ_RANGE_POP();
    double t1 = pz_now();
    if (e->codec) trace(x, "decode", micro, t0, t1);
    return st;
}

/* The stage's forward on slot's micro-batch: tokens on the first stage, the
 * received activation elsewhere; dscale 0 (validation) skips d(loss). */
static void stage_forward(exec *x, int slot, float dscale) {
    const float *in = is_first(x) ? NULL : pz_staging_in(&x->stg, x->act_in[slot]);
    pz_stage_forward(&x->stage, &x->slots[slot], x->tok, in, x->tgt, dscale);
}

/* What the stage sends on: the last block's output, on the host. */
static const float *stage_output(exec *x, int slot) {
    int nb = x->stage.range.l1 - x->stage.range.l0;
    const float *out = nb > 0 ? x->slots[slot].blocks[nb - 1].res3 : x->slots[slot].input;
    return pz_staging_out(&x->stg, slot, out);   /* device -> host before encoding */
}

/* Waits for the peer's tied-embedding gradient and adds it to ours. */
static pz_status tied_finish(exec *x, uint32_t step) {
    if (!x->tied_view) return PZ_OK;
    size_t n = (size_t)x->stage.cfg.padded_vocab_size * x->stage.cfg.channels, len = 0;
    double t0 = pz_now();
    pz_status st = wait_req_at(x, &x->tied_recv, -1, &len, NULL);
    float *g = x->tied_view;
    if (st == PZ_OK) st = pz_tied_add(&x->tied, len, (uint64_t)x->o->seed, step, is_first(x) ? 1 : 0, g);
    pz_staging_view_done(&x->stg, x->stage.grads.wte, g, n);
    x->tied_view = NULL;
    trace(x, "tied", -1, t0, pz_now());
    return st;
}

/* Runs one instruction of the training schedule. */
static pz_status run_instr(exec *x, const pz_instr *in, uint32_t step, double *loss_sum) {
    const pz_train_opts *o = x->o;
    int i = in->micro, slot = i >= 0 ? i % x->bound : 0;
    pz_status st = PZ_OK;
    double t0 = pz_now();
    switch (in->op) {
    case PZ_OP_RECV_ACT:
        return post_recv(x, x->rank - 1, KIND_ACT, step, i, x->act_wire_in[slot], x->fwd_rx.cap, &x->act_recv[slot],
                         "recv activation");
    case PZ_OP_RECV_GRAD:
        return post_recv(x, x->rank + 1, KIND_GRAD, step, i, x->grad_wire_in[slot], x->bwd_rx.cap,
                         &x->grad_recv[slot], "recv gradient");
    case PZ_OP_FORWARD: {
        if (is_first(x) || is_last(x)) pz_loader_next(&x->loader, x->tok, x->tgt, x->ids_tmp);
        if (is_first(x))
            for (int b = 0; b < o->batch; b++) x->ids[slot][b] = x->ids_tmp[b];
        else if ((st = recv_decode(x, &x->fwd_rx, &x->act_recv[slot], step, i, x->act_wire_in[slot],
                                   x->act_in[slot], x->ids[slot], NULL)) != PZ_OK)
            return st;
        if (is_last(x) && !is_first(x))
            for (int b = 0; b < o->batch; b++)
                if (x->ids[slot][b] != x->ids_tmp[b])
                    return pz_fail(PZ_ERR_PEER, "step %u micro %d: sample %d of the activation from rank %d has id %llu, "
                                   "this stage's loader has %llu: the stages read different data (same --data, --seed, --batch?)",
                                   step, i, b, x->rank - 1, (unsigned long long)x->ids[slot][b],
                                   (unsigned long long)x->ids_tmp[b]);
        float dscale = 1.0f / ((float)o->batch * o->seq * o->micro);
        t0 = pz_now();
        PZ_RANGE_PUSH("F stage %d step %u micro %d", x->rank, step, i);
        stage_forward(x, slot, dscale);
        PZ_RANGE_POP();
        if (is_last(x)) *loss_sum += x->slots[slot].loss;
        double t1 = pz_now();
        x->compute_s += t1 - t0;
        trace(x, "forward", i, t0, t1);
        return PZ_OK;
    }
    case PZ_OP_SEND_ACT: {
        int w = i % x->nwire;   /* the buffer's previous message (micro-batch i - nwire) must be out */
        if ((st = wait_send(x, &x->fwd_tx, &x->act_send[w], i - x->nwire)) != PZ_OK) return st;
        t0 = pz_now();
        st = encode_send(x, &x->fwd_tx, x->rank + 1, KIND_ACT, step, i, stage_output(x, slot), x->ids[slot],
                         x->act_wire_out[w], &x->act_send[w], "send activation");
        if (i == 0) x->rtt_sent = pz_now();
        trace(x, "send", i, t0, pz_now());
        return st;
    }
    case PZ_OP_BACKWARD: {
        double arrived = 0.0;
        if (!is_last(x) && (st = recv_decode(x, &x->bwd_rx, &x->grad_recv[slot], step, i, x->grad_wire_in[slot],
                                             x->grad_in[slot], x->ids[slot], &arrived)) != PZ_OK)
            return st;
        if (!is_last(x) && i == 0) x->rtt0 = arrived - x->rtt_sent;
        t0 = pz_now();
        PZ_RANGE_PUSH("B stage %d step %u micro %d", x->rank, step, i);
        /* zb-h1: the input gradient only; BACKWARD_WEIGHT does the rest */
        (x->stage.defer_weights ? pz_stage_backward_input : pz_stage_backward)(
            &x->stage, &x->slots[slot], is_last(x) ? NULL : pz_staging_in(&x->stg, x->grad_in[slot]),
            is_first(x) ? NULL : pz_staging_dx(&x->stg, x->grad_out[slot]));
        if (!is_first(x)) pz_staging_dx_done(&x->stg, x->grad_out[slot]);
        PZ_RANGE_POP();
        double t1 = pz_now();
        x->compute_s += t1 - t0;
        trace(x, "backward", i, t0, t1);
        return PZ_OK;
    }
    case PZ_OP_BACKWARD_WEIGHT: {
        t0 = pz_now();
        PZ_RANGE_PUSH("W stage %d step %u micro %d", x->rank, step, i);
        pz_stage_backward_weight(&x->stage, &x->slots[slot]);
        PZ_RANGE_POP();
        double t1 = pz_now();
        x->compute_s += t1 - t0;
        trace(x, "weight", i, t0, t1);
        return PZ_OK;
    }
    case PZ_OP_SEND_GRAD: {
        int w = i % x->nwire;
        if ((st = wait_send(x, &x->bwd_tx, &x->grad_send[w], i - x->nwire)) != PZ_OK) return st;
        t0 = pz_now();
        st = encode_send(x, &x->bwd_tx, x->rank - 1, KIND_GRAD, step, i, x->grad_out[slot], x->ids[slot],
                         x->grad_wire_out[w], &x->grad_send[w], "send gradient");
        trace(x, "send", i, t0, pz_now());
        return st;
    }
    case PZ_OP_REDUCE_TIED: {
        /* both ends hold wte; each sends its gradient and adds the other's,
         * so the two copies stay identical (runtime/tied.h) */
        int peer = is_first(x) ? x->world - 1 : 0;
        size_t n = (size_t)x->stage.cfg.padded_vocab_size * x->stage.cfg.channels, len = 0;
        if ((st = wait_req(x, &x->tied_send, -1)) != PZ_OK) return st;   /* last step's, long gone */
        float *g = pz_staging_view(&x->stg, x->stage.grads.wte, n);   /* host copy on a device */
        x->tied_view = g;   /* given back by tied_finish, on error too */
        if ((st = pz_tied_encode(&x->tied, g, (uint64_t)o->seed, step, is_first(x) ? 0 : 1, &len)) != PZ_OK) return st;
        x->tied_wire = (double)len;
        char w[96];
        snprintf(w, sizeof w, "tied embedding gradient, ranks 0 and %d, step %u", x->world - 1, step);
        st = pz_transport_recv(x->tp, peer, pz_tag(peer, step, 0, KIND_TIED), x->tied.in, x->tied.cap, w,
                               &x->tied_recv);
        if (st == PZ_OK)
            st = pz_transport_send(x->tp, peer, pz_tag(x->rank, step, 0, KIND_TIED), x->tied.out, len, w,
                                   &x->tied_send);
        trace(x, "tied", -1, t0, pz_now());
        if (st != PZ_OK || is_last(x)) return st;   /* the last stage adds after the norm (tied_finish) */
        return tied_finish(x, step);
    }
    case PZ_OP_OPTIM_STEP:
        return PZ_OK;   /* done by the step loop, which needs the collectives */
    }
    return pz_fail(PZ_ERR_ARG, "unknown schedule op %d", (int)in->op);
}

/* Validation: the val batches flow forward through all stages in file order,
 * through the policy's evaluation codecs (compressed = 1) or raw. */
static pz_status validate(exec *x, uint32_t val_round, int compressed, double *loss, int *used) {
    const pz_train_opts *o = x->o;
    pz_loader vl;
    int nb = 0;
    pz_status st = PZ_OK;
    *loss = 0.0;
    if (is_first(x) || is_last(x)) {
        if ((st = pz_loader_init(&vl, &x->val, o->batch, 0, 0)) != PZ_OK) return st;
        nb = (int)pz_loader_batches_per_epoch(&vl);
        if (nb < 1) {
            pz_loader_free(&vl);
            return pz_fail(PZ_ERR_SHAPE, "evaluation data has fewer than one batch of %d x %d tokens", o->batch, o->seq);
        }
        if (nb > o->val_batches) nb = o->val_batches;
    }
    /* every rank must agree on the count: first and last computed it from the same data */
    double cnt = is_first(x) ? nb : 0.0;
    if ((st = allreduce(x, &cnt, 1)) != PZ_OK) goto out;
    nb = (int)cnt;
    double sum = 0.0;
    /* a step number of its own, so evaluation draws other random numbers
     * than training; its low 32 bits (the round) go into the message tags */
    uint64_t cstep = (1ull << 40) | val_round;
    pz_edge_end *tx = &x->val_tx[compressed], *rx = &x->val_rx[compressed];
    uint64_t *ids = x->ids[0];
    for (int k = 0; k < nb && st == PZ_OK; k++) {
        pz_request *r = NULL;
        if (is_first(x) || is_last(x)) pz_loader_next(&vl, x->tok, x->tgt, x->ids_tmp);
        if (is_first(x))
            for (int b = 0; b < o->batch; b++) ids[b] = x->ids_tmp[b];
        else if ((st = post_recv(x, x->rank - 1, KIND_VAL, val_round, k, x->act_wire_in[0], rx->cap, &r,
                                 "recv validation activation")) != PZ_OK ||
                 (st = recv_decode(x, rx, &r, cstep, k, x->act_wire_in[0], x->act_in[0], ids, NULL)) != PZ_OK)
            break;
        stage_forward(x, 0, 0.0f);
        if (is_last(x)) sum += x->slots[0].loss;
        else if ((st = encode_send(x, tx, x->rank + 1, KIND_VAL, cstep, k, stage_output(x, 0), ids, x->act_wire_out[0],
                                   &r, "send validation activation")) != PZ_OK ||
                 (st = wait_req(x, &r, k)) != PZ_OK)
            break;
    }
    double v = is_last(x) ? sum : 0.0;
    if (st == PZ_OK) st = allreduce(x, &v, 1);
    *loss = nb > 0 ? v / nb : NAN;
    *used = nb;
out:
    if (is_first(x) || is_last(x)) pz_loader_free(&vl);
    return st;
}

static void exec_free(exec *x) {
    exec_slots_free(x);
    free(x->ids_tmp);
    pz_edge_free(&x->fwd_tx); pz_edge_free(&x->bwd_rx); pz_edge_free(&x->fwd_rx); pz_edge_free(&x->bwd_tx);
    for (int k = 0; k < 2; k++) { pz_edge_free(&x->val_tx[k]); pz_edge_free(&x->val_rx[k]); }
    pz_auto_free(&x->au);
    pz_policy_free(&x->pol);
    free(x->tok); free(x->tgt);
    pz_trace_free(&x->trace);
    if (x->tied_view)   /* a failed step left the last stage's view open */
        pz_staging_view_done(&x->stg, x->stage.grads.wte, x->tied_view,
                             (size_t)x->stage.cfg.padded_vocab_size * x->stage.cfg.channels);
    pz_tied_free(&x->tied);
    pz_optim_free(&x->opt, &x->stage);
    pz_loader_free(&x->loader);
    pz_dataset_close(&x->train);
    pz_dataset_close(&x->val);
    pz_stage_free(&x->stage);
    pz_schedule_free(&x->sched);
}

pz_status pz_pipeline_policy(const pz_train_opts *o, pz_policy *p) {
    pz_policy_init(p, pz_pipeline_nchunks(o));
    pz_status st = PZ_OK;
    if (o->policy_file) st = pz_policy_parse_file(p, o->policy_file);
    if (st == PZ_OK && o->compress) st = pz_policy_parse(p, o->compress, "--compress");
    if (st == PZ_OK && o->link_mbps) st = pz_policy_parse_mbps(p, o->link_mbps, "--link-mbps");
    if (st == PZ_OK && o->link_latency) st = pz_policy_parse_latency(p, o->link_latency, "--link-latency-ms");
    /* the interleaved executor (pipeline_chunks.c) has no candidates' ends to switch */
    if (st == PZ_OK && pz_pipeline_nchunks(o) != o->stages && pz_policy_has_auto(p))
        st = pz_fail(PZ_ERR_ARG, "--compress auto is not supported by the interleaved schedule (virtual stages): "
                     "name the codecs, or use 1f1b, gpipe or zb-h1");
    if (st != PZ_OK) pz_policy_free(p);
    return st;
}

/* The policy as one line of text, for the summary: "0-1:fwd=...,bwd=...;..." */
static void policy_text(const pz_policy *p, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int e = 0; e < p->stages - 1 && n < cap; e++) {
        const char *f = pz_policy_codec(p, e, PZ_FWD), *b = pz_policy_codec(p, e, PZ_BWD);
        int k = snprintf(buf + n, cap - n, "%s%d-%d:fwd=%s,bwd=%s", e ? ";" : "", e, e + 1, f ? f : "none",
                         b ? b : "none");
        if (k < 0) break;
        n += (size_t)k;
    }
}

/* Builds this rank's edge ends and wire buffers. */
static pz_status setup_edges(exec *x) {
    const pz_train_opts *o = x->o;
    int B = o->batch, T = o->seq, C = x->stage.cfg.channels, r = x->rank;
    pz_status st = pz_auto_init(&x->au, &x->pol, o->micro);
    if (st != PZ_OK) return st;
    if (x->world > 1 && (is_first(x) || is_last(x)) &&
        (st = pz_tied_init(&x->tied, o->compress_tied, x->stage.cfg.padded_vocab_size, C)) != PZ_OK)
        return st;
    for (int side = 0; side < 2 && st == PZ_OK; side++) {
        /* side 0: the out edge (we send fwd, receive bwd); side 1: the in edge */
        if (side == 0 ? is_last(x) : is_first(x)) continue;
        int e = side == 0 ? r : r - 1;
        const char *fs = pz_policy_codec(&x->pol, e, PZ_FWD);
        /* pz_auto_edge_init reads the policy: plain ends, or auto's candidates */
        if (side == 0) {
            if ((st = pz_auto_edge_init(&x->au, &x->pol, 0, &x->fwd_tx, e, PZ_FWD, 1, B, T, C, o->error_metrics)) != PZ_OK)
                break;
            if ((st = pz_auto_edge_init(&x->au, &x->pol, 1, &x->bwd_rx, e, PZ_BWD, 0, B, T, C, 0)) != PZ_OK) break;
            st = pz_edge_init_val(x->val_tx, e, 1, fs, B, T, C);
        } else {
            if ((st = pz_auto_edge_init(&x->au, &x->pol, 2, &x->fwd_rx, e, PZ_FWD, 0, B, T, C, 0)) != PZ_OK) break;
            if ((st = pz_auto_edge_init(&x->au, &x->pol, 3, &x->bwd_tx, e, PZ_BWD, 1, B, T, C, o->error_metrics)) != PZ_OK)
                break;
            st = pz_edge_init_val(x->val_rx, e, 0, fs, B, T, C);
        }
    }
    if (st != PZ_OK) return st;
    /* wire buffers: validation messages reuse the first ones, so size for both */
    x->cap_in = pz_edge_wire_cap(&x->fwd_rx, x->val_rx);
    x->cap_out = pz_edge_wire_cap(&x->fwd_tx, x->val_tx);
    x->ids_tmp = xcalloc((size_t)B, sizeof *x->ids_tmp);
    return PZ_OK;
}

/* Simulated links: neighbours get their edge's rate and delay; a farther
 * peer (the tied-embedding exchange between the first and last stage, the
 * collectives with rank 0) the slowest rate on the way and the sum of the
 * delays, since its bytes cross every edge between. */
static void set_links(exec *x) {
    for (int p = 0; p < x->world; p++) {
        if (p == x->rank) continue;
        int lo = p < x->rank ? p : x->rank, hi = p < x->rank ? x->rank : p;
        double rate = 0.0, lat = 0.0;
        for (int e = lo; e < hi; e++) {
            if (x->pol.mbps[e] > 0 && (rate == 0.0 || x->pol.mbps[e] < rate)) rate = x->pol.mbps[e];
            lat += x->pol.latency_ms[e];
        }
        if (rate > 0 || lat > 0) pz_transport_set_link(x->tp, p, rate, lat);
    }
}

/* Adds this rank's edge statistics of the step into the reduction array;
 * the rank's codec seconds are the edges' encode and decode times. */
static void contribute_edges(exec *x, double *es) {
    pz_edge_end *ends[4] = {&x->fwd_tx, &x->bwd_rx, &x->fwd_rx, &x->bwd_tx};
    x->codec_s = 0.0;
    for (int k = 0; k < 4; k++) {
        pz_edge_end *e = ends[k];
        if (!e->numel) continue;   /* this rank has no such end */
        x->codec_s += e->st.enc_s + e->st.dec_s;
        const double *v = &e->st.raw;
        double *d = es + (2 * e->edge + e->dir) * PZ_EDGE_STATS_N;
        for (int j = 0; j < PZ_EDGE_STATS_N; j++) d[j] += v[j];
        memset(&e->st, 0, sizeof e->st);
    }
}

static double codec_state(exec *x, double *file) {
    pz_edge_end *ends[4] = {&x->fwd_tx, &x->bwd_rx, &x->fwd_rx, &x->bwd_tx};
    double mem = 0.0;
    *file = 0.0;
    for (int k = 0; k < 4; k++) {
        pz_codec *cs[2] = {ends[k]->codec, ends[k]->shadow};
        for (int j = 0; j < 2; j++) {
            if (!cs[j]) continue;
            size_t fb = 0;
            mem += (double)pz_codec_state_bytes(cs[j], &fb);
            *file += (double)fb;
        }
    }
    return mem;
}

/* Preemption: a signal only sets this; the step loop acts on it (all ranks
 * agree through the step's reduction) at the next step boundary. */
static volatile sig_atomic_t stop_signal;
static int stopped_by;
static void on_stop_signal(int sig) { stop_signal = sig; }
int pz_pipeline_stopped_by(void) { return stopped_by; }
/* the interleaved executor's share (pipeline_exec.h) */
void exec_stop_install(int on, struct sigaction *old_term, struct sigaction *old_int) {
    if (on) {
        struct sigaction sa = {.sa_handler = on_stop_signal};
        sigaction(SIGTERM, &sa, old_term);
        sigaction(SIGINT, &sa, old_int);
        stopped_by = 0;
    } else {
        sigaction(SIGTERM, old_term, NULL);
        sigaction(SIGINT, old_int, NULL);
    }
}
int exec_stop_signal(void) { return stop_signal; }
void exec_stop_set(int sig) { stopped_by = sig; }

/* Runs one validation pass and prints its line on rank 0. */
static pz_status validate_print(exec *x, int step, uint32_t *val_round, int compressed) {
    double vl;
    int used = 0;
    pz_status st = validate(x, (*val_round)++, compressed, &vl, &used);
    if (st == PZ_OK && x->rank == 0) pz_report_val(stdout, step, vl, used, x->world == 1 ? -1 : compressed);
    return st;
}

pz_status pz_pipeline_run_rank(const pz_train_opts *o, int rank, int world,
                               const char *master_addr, int master_port) {
    exec x;
    memset(&x, 0, sizeof x);
    x.o = o;
    x.rank = rank;
    x.world = world;
    pz_status st;
    {   /* V > 1 model chunks per rank: the executor of pipeline_chunks.c */
        pz_sched_spec sp;
        if ((st = pz_pipeline_sched(o, &sp)) != PZ_OK) return st;
        if (sp.kind == PZ_SCHED_INTERLEAVED && sp.virtual_stages > 1)
            return pz_pipeline_run_interleaved(o, &sp, rank, world, master_addr, master_port);
    }
    if (o->trace) pz_trace_start(&x.trace, pz_now());
    pz_metrics met;
    memset(&met, 0, sizeof met);
    double *red = NULL;
    struct sigaction old_term, old_int;
    int handlers = 0;
    /* threads and cores first: before any OpenMP region starts its pool */
    pz_cores cores;
    if ((st = pz_cores_setup(rank, world, master_addr, o->threads, o->bind, &cores)) != PZ_OK) return st;
    pz_cores_print(stderr, rank, &cores);
    const pz_backend *be = pz_backend_for(o->device, rank, cores.threads, &st);
    if (!be) return st;
    if (!o->data) return pz_fail(PZ_ERR_ARG, "--data is required (token shards; see 'pipezip tokenize')");
    if (world != o->stages)
        return pz_fail(PZ_ERR_ARG, "WORLD_SIZE %d does not match --stages %d", world, o->stages);

    pz_gpt2_config cfg;
    if ((st = pz_model_config(o->preset, o->init, o->heads, &cfg)) != PZ_OK) return st;
    if ((st = pz_pipeline_policy(o, &x.pol)) != PZ_OK) return st;
    pz_stage_range *ranges = xcalloc((size_t)world, sizeof *ranges);
    if ((st = pz_partition(&cfg, o->seq, world, o->split, ranges)) != PZ_OK) goto cleanup;
    if (o->save && rank == 0 && (st = pz_check_writable_dir("--save", o->save)) != PZ_OK) goto cleanup;
    if (world > 1 && rank == 0) {
        pz_partition_print(stderr, &cfg, o->seq, world, ranges);
        fprintf(stderr, "compression policy:\n");
        for (int e = 0; e < world - 1; e++) fputs("  ", stderr), pz_policy_print_edge(stderr, &x.pol, e);
        fprintf(stderr, "  validation: %s\n", o->eval_compress && pz_policy_any(&x.pol, PZ_FWD)
                                                  ? "through the fwd codecs (wrappers' inner codec)" : "uncompressed");
    }
    if ((st = pz_pipeline_sched(o, &x.spec)) != PZ_OK) goto cleanup;   /* interleaved v=1: plain 1F1B lists */
    if ((st = pz_schedule_build(&x.sched, &x.spec, rank, world, o->micro)) != PZ_OK) goto cleanup;
    /* before anything big is allocated: refuse a run that cannot fit */
    {
        pz_mem_job mj = {&cfg, ranges, &x.spec, &x.pol, world, o->batch, o->seq, o->micro, be->host_memory};
        char prefix[32] = "";
        if (world > 1) snprintf(prefix, sizeof prefix, "rank %d: ", rank);
        if ((st = pz_mem_check(&mj, rank, rank - cores.local_rank, cores.local_ranks, prefix)) != PZ_OK) goto cleanup;
        if (x.spec.warmup_auto) x.kfit = pz_mem_max_warmup(&mj, rank - cores.local_rank, cores.local_ranks, o->micro);
    }
    st = pz_model_create_stage(&x.stage, be, &cfg, &ranges[rank], o->init, (uint64_t)o->seed, o->batch, o->seq);
    if (st != PZ_OK) goto cleanup;
    if (is_first(&x) || is_last(&x)) {
        if ((st = pz_dataset_open(&x.train, o->data, o->seq, cfg.vocab_size)) != PZ_OK) goto cleanup;
        if ((st = pz_loader_init(&x.loader, &x.train, o->batch, 1, (uint64_t)o->seed)) != PZ_OK) goto cleanup;
        if (o->val_data) {
            if ((st = pz_dataset_open(&x.val, o->val_data, o->seq, cfg.vocab_size)) != PZ_OK) goto cleanup;
        }
    }
    pz_optim_config oc = o->optim;
    oc.total_steps = o->steps;
    if (!o->warmup_given) oc.warmup_steps = o->steps / 10;
    if ((st = pz_optim_init(&x.opt, &x.stage, &oc)) != PZ_OK) goto cleanup;

    size_t BT = (size_t)o->batch * o->seq;
    x.act_bytes = BT * (size_t)cfg.channels * sizeof(float);
    x.bound = pz_schedule_in_flight_bound(&x.spec, rank, world, o->micro);
    x.stage.defer_weights = x.spec.kind == PZ_SCHED_ZBH1;   /* slots keep the matmuls' output gradients */
    x.tok = xcalloc(BT, sizeof(int));
    x.tgt = xcalloc(BT, sizeof(int));
    if ((st = setup_edges(&x)) != PZ_OK) goto cleanup;
    /* a simulated link so slow that one message outlasts --peer-timeout
     * would end in "peer frozen?" at the receiver: say what is wrong first */
    for (int side = 0; side < 2 && world > 1; side++) {
        int e = side == 0 ? rank : rank - 1;
        const pz_edge_end *tx = side == 0 ? &x.fwd_tx : &x.bwd_tx;
        if (e < 0 || e >= world - 1 || !(x.pol.mbps[e] > 0)) continue;
        double secs = (double)tx->cap * 8.0 / (x.pol.mbps[e] * 1e6) + x.pol.latency_ms[e] * 1e-3;
        if (secs > o->peer_timeout) {
            st = pz_fail(PZ_ERR_ARG, "--link-mbps %g on edge %d-%d: one %s message of up to %zu bytes takes %.3g s on it, "
                         "longer than --peer-timeout %g s, after which the receiving stage would give its peer up: "
                         "raise the rate or --peer-timeout", x.pol.mbps[e], e, e + 1,
                         side == 0 ? "activation" : "gradient", tx->cap, secs, (double)o->peer_timeout);
            goto cleanup;
        }
    }
    exec_slots_alloc(&x);
    if (world > 1 && rank == 0 && (st = pz_metrics_init(&met, &x.pol, o->metrics, o->micro, o->error_metrics)) != PZ_OK)
        goto cleanup;

    if (world > 1) {
        pz_transport_opts to = {rank, world, master_addr, master_port, o->peer_timeout, o->peer_timeout, !o->progress_inline,
                                o->job_secret, o->job_secret_len};
        if ((st = pz_transport_init(&x.tp, &to)) != PZ_OK) goto cleanup;
        /* authenticated: now the ranks must agree on what they compute */
        char *fp = pz_fingerprint_build(o, &cfg, &x.pol, x.train.paths ? &x.train : NULL,
                                        x.val.paths ? &x.val : NULL);
        st = pz_fingerprint_agree(x.tp, rank, world, fp);
        free(fp);
        if (st != PZ_OK) goto cleanup;   /* every rank has the verdict: cleanup closes the transport */
        set_links(&x);
        exec_fault_flip(&x, o->resume == NULL);
        pz_staging_report(&x.stg, x.tp, rank);
        if (o->progress_inline) {   /* no thread: the compute thread progresses between blocks */
            x.stage.between_blocks = progress_hook;
            x.stage.between_blocks_ctx = x.tp;
        }
    }
    if (world == 1)
        fprintf(stderr, "pipezip train: %zu parameters (L=%d NH=%d C=%d V=%d Vp=%d maxT=%d), "
                "batch %d x seq %d x %d micro-batch%s, %zu training samples, %d thread%s\n",
                pz_gpt2_numel(&cfg), cfg.num_layers, cfg.num_heads, cfg.channels, cfg.vocab_size,
                cfg.padded_vocab_size, cfg.max_seq_len, o->batch, o->seq, o->micro, o->micro == 1 ? "" : "es",
                pz_dataset_num_samples(&x.train), cores.threads, cores.threads == 1 ? "" : "s");
    else if (rank == 0)
        fprintf(stderr, "pipezip train: %d stages, %s schedule, %d micro-batch%s of %d x %d per step\n",
                world, o->schedule, o->micro, o->micro == 1 ? "" : "es", o->batch, o->seq);
    if (x.spec.warmup_auto && world > 1 && rank == 0)
        fprintf(stderr, "pipezip train: warmup=auto: step 1 runs plain 1F1B and measures compute and links\n");
    int tty = rank == 0 && isatty(2);

    /* reduction array: [0] grad sumsq, [1] loss, then 3 per rank
     * (compute, wait, codec seconds), then the edge statistics */
    /* ... then the round trips of warmup=auto (one per rank), then the stop
     * signal (the largest a rank got) */
    /* ... then auto's decisions (PZ_AUTO_RED per edge and direction) */
    int eb = 4 + 3 * world, rb = eb + 2 * (world - 1) * PZ_EDGE_STATS_N, sb_ = rb + world, kb = sb_ + 2,
        ab = kb + world, nred = ab + 2 * (world - 1) * PZ_AUTO_RED;
    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &sa, &old_int);
    handlers = 1;
    stopped_by = 0;
    red = xcalloc((size_t)nred, sizeof *red);
    uint32_t val_round = 0;
    int first_step = 0;
    exec_fault_arm(o->resume == NULL);
    if (o->resume && (st = exec_resume_from(&x, &first_step)) == PZ_OK && o->val_every > 0)
        val_round = (uint32_t)(first_step / o->val_every);   /* the validations the run had done */
    if (o->resume && st == PZ_OK && first_step > 0 && x.au.any && rank == 0) pz_auto_metrics_sync(&x.au, &met);
    double t_run = pz_now();
    for (int step = first_step; step < o->steps && st == PZ_OK; step++) {
        double t0 = pz_now(), loss_sum = 0.0;
        x.compute_s = x.wait_s = x.codec_s = 0.0;
        pz_stage_zero_grad(&x.stage);
        for (int k = 0; k < x.sched.n && st == PZ_OK; k++)
            st = run_instr(&x, &x.sched.ins[k], (uint32_t)step, &loss_sum);
        /* sends of this step must be out before the parameters change */
        for (int k = 0; k < x.nwire && st == PZ_OK; k++) {
            int m = k + (o->micro - 1 - k) / x.nwire * x.nwire;   /* the last micro-batch sent from buffer k */
            if ((st = wait_send(&x, &x.fwd_tx, &x.act_send[k], m)) != PZ_OK) break;
            st = wait_send(&x, &x.bwd_tx, &x.grad_send[k], m);
        }
        if (st != PZ_OK) break;
        /* global norm: wte counted once (the last stage's copy equals the first's) */
        size_t skip = (is_last(&x) && world > 1) ? (size_t)cfg.padded_vocab_size * cfg.channels : 0;
        memset(red, 0, (size_t)nred * sizeof *red);
        red[0] = be->sumsq(x.stage.grad_mem + skip, x.stage.grads.numel - skip);
        red[1] = is_last(&x) ? loss_sum / o->micro : 0.0;
        red[2] = is_first(&x) ? x.tied_wire : 0.0;   /* one end's message (both have the same size) */
        red[4 + 3 * rank + 0] = x.compute_s;
        red[4 + 3 * rank + 1] = x.wait_s;
        red[rb + rank] = is_last(&x) ? 0.0 : x.rtt0;
        red[sb_] = stop_signal == SIGTERM;   /* ranks that got each signal */
        red[sb_ + 1] = stop_signal == SIGINT;
        red[kb + rank] = x.kfit;   /* warmup=auto: what each rank's host can hold */
        contribute_edges(&x, red + eb);
        red[4 + 3 * rank + 2] = x.codec_s;
        /* the link runs beside compute with gpipe and extra warm-up (autospec.h) */
        pz_auto_contribute(&x.au, &x.pol, step + 1, x.spec.kind == PZ_SCHED_GPIPE || x.spec.warmup_extra > 0,
                           x.tied_wire, red + ab);
        if ((st = allreduce(&x, red, nred)) != PZ_OK) break;
        if (x.au.any) {   /* every rank switches here, between steps: no message is in flight */
            double cmax = 0.0;
            for (int r = 0; r < world; r++) cmax = red[4 + 3 * r] > cmax ? red[4 + 3 * r] : cmax;
            pz_auto_note_compute(&x.au, cmax);
            pz_auto_apply(&x.au, red + ab, step + 1, rank == 0 ? &met : NULL);
        }
        double norm = sqrt(red[0]), loss = red[1];
        if (!isfinite(loss) || !isfinite(norm)) {
            /* weights that were never finite are not the learning rate's fault */
            char bad[160];
            double *nf = xcalloc((size_t)world, sizeof *nf);   /* which ranks hold such weights */
            nf[rank] = pz_params_nonfinite(&x.stage, bad, sizeof bad);
            int mine = nf[rank] > 0, other = -1;
            if (allreduce(&x, nf, world) == PZ_OK)
                for (int r = 0; r < world && other < 0; r++)
                    if (nf[r] > 0) other = r;
            free(nf);
            const char *hint = step == first_step ? " (from the starting model: check --init)" : "";
            if (mine)
                st = pz_fail(PZ_ERR_ARG, "step %d: loss %g, gradient norm %g: rank %d's weights are not finite: %s%s",
                             step + 1, loss, norm, rank, bad, hint);
            else if (other >= 0)
                st = pz_fail(PZ_ERR_ARG, "step %d: loss %g, gradient norm %g: rank %d's weights are not finite%s",
                             step + 1, loss, norm, other, hint);
            else
                st = pz_fail(PZ_ERR_ARG, "step %d: loss %g, gradient norm %g: training diverged (try a lower --lr)",
                             step + 1, loss, norm);
            break;
        }
        /* warmup=auto: decided from the first step (cold caches, so it may
         * err low) and decided again from the second */
        if (x.spec.warmup_auto && step < 2 && world > 1 && (st = exec_auto_warmup(&x, red, red + eb, red + rb, red + kb)) != PZ_OK)
            break;
        /* the last stage's wte gradient gets the first stage's copy now */
        if ((st = tied_finish(&x, (uint32_t)step)) != PZ_OK) break;
        double t_opt = pz_now();
        PZ_RANGE_PUSH("optimizer stage %d step %d", rank, step);
        float lr = pz_optim_step(&x.opt, &x.stage, pz_clip_scale(&x.opt.cfg, norm));
        PZ_RANGE_POP();
        trace(&x, "optimizer", -1, t_opt, pz_now());
        double ms = 1e3 * (pz_now() - t0), tok_s = (double)BT * o->micro / (ms * 1e-3);
        if (rank == 0) {
            pz_step_line line = {step + 1, loss, norm, ms, tok_s, lr, red[2]};
            pz_report_step(stdout, &line, world, red + eb, red + 4);
            if (world > 1) pz_metrics_step(&met, step + 1, red + eb, tok_s);
        }
        if (tty) fprintf(stderr, "\rstep %d/%d loss %.4f  %.0f ms  %.0f tok/s   ", step + 1, o->steps, loss, ms, tok_s);
        /* a signal anywhere: every rank stops after this step, checkpointed */
        int stop = red[sb_] > 0.0 || red[sb_ + 1] > 0.0;
        if (stop) stopped_by = red[sb_] > 0.0 ? SIGTERM : SIGINT;
        int last = step + 1 == o->steps;
        if (stop && rank == 0)
            fprintf(stderr, "pipezip train: %s: stopping after step %d%s\n", strsignal(stopped_by), step + 1,
                    o->checkpoint_dir ? ", with a checkpoint" : " (no --checkpoint-dir: no checkpoint)");
        if (o->checkpoint_dir &&
            (last || stop || (o->checkpoint_every > 0 && (step + 1) % o->checkpoint_every == 0)) &&
            (st = exec_checkpoint(&x, step + 1)) != PZ_OK)
            break;
        exec_fault_point("step", step + 1, rank);
        if (stop) break;   /* no validation: a preempted machine has seconds left */
        if (o->val_data && o->val_every > 0 && ((step + 1) % o->val_every == 0 || last)) {
            int comp = o->eval_compress && pz_policy_any(&x.pol, PZ_FWD);
            if ((st = validate_print(&x, step + 1, &val_round, comp)) != PZ_OK) break;
            if (tty) fprintf(stderr, "\n");
            /* the final model both ways: does it need compression at evaluation? */
            if (last && pz_policy_any(&x.pol, PZ_FWD) && (st = validate_print(&x, step + 1, &val_round, !comp)) != PZ_OK)
                break;
        }
    }
    if (tty) fprintf(stderr, "\n");
    if (st == PZ_OK) pz_auto_report(&x.au, rank, pz_now() - t_run, o->steps - first_step);
    if (st == PZ_OK && world > 1) {
        /* codec state per rank, for the summary's memory report */
        memset(red, 0, (size_t)nred * sizeof *red);
        double *sb = xcalloc((size_t)3 * world, sizeof *sb);
        sb[rank] = codec_state(&x, &sb[world + rank]);
        unsigned long rounds = 0, sleeps = 0;
        int threaded = pz_transport_thread_stats(x.tp, &sb[2 * world + rank], &rounds, &sleeps);
        st = allreduce(&x, sb, 3 * world);
        if (st == PZ_OK && rank == 0) {
            char pt[4096];
            policy_text(&x.pol, pt, sizeof pt);
            st = pz_metrics_finish(&met, pt, sb, sb + world, world);
            /* what the progress threads cost: CPU seconds against the run */
            if (threaded) {
                double run_s = pz_now() - t_run;
                fprintf(stderr, "pipezip train: progress threads used, in %.2f s of training:", run_s);
                for (int r = 0; r < world; r++)
                    fprintf(stderr, "%s rank %d %.3f s CPU (%.1f%% of a core)", r ? "," : "", r, sb[2 * world + r],
                            100.0 * sb[2 * world + r] / run_s);
                fputc('\n', stderr);
            }
        }
        free(sb);
    }
    /* a stopped run is not the finished model --save names (a checkpoint, if
     * asked for, holds where it stopped) */
    if (st == PZ_OK && o->save && stopped_by && rank == 0)
        fprintf(stderr, "pipezip train: stopped early: %s not written\n", o->save);
    if (st == PZ_OK && o->save && !stopped_by)
        st = pz_gather_save(x.tp, rank, world, &x.stage, ranges, KIND_SAVE, o->save);
    if (st == PZ_OK && o->trace) st = pz_trace_write_fragment(&x.trace, o->trace, rank);
    /* a failed close skips the shutdown barrier, the one step that could
     * replace the message of st */
    pz_transport_close(x.tp, st != PZ_OK);
    x.tp = NULL;

cleanup:
    if (x.tp) pz_transport_close(x.tp, 1);   /* a failure after the ranks met (the fingerprint) */
    if (handlers) {
        sigaction(SIGTERM, &old_term, NULL);
        sigaction(SIGINT, &old_int, NULL);
    }
    pz_metrics_free(&met);
    free(red);
    exec_free(&x);
    free(ranges);
    if (st == PZ_OK) exec_fault_point("end", 0, rank);   /* PIPEZIP_FAULT=end:0:RANK: freeze once finished */
    return st;
}
