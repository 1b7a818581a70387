/* pipeline_instr.c: the instructions of a rank's list, one micro-batch and
 * one chunk each (see runtime/exec/pipeline.c for the walk of one micro-batch),
 * validation, and the send/receive helpers both use.
 *
 * Every communication instruction's peer (rank, chunk, boundary) comes from
 * pz_instr_peer. Messages are tagged (sender, step, micro*V + sender's local
 * chunk, kind); each crosses its boundary once per step. What crosses is
 * encoded by the policy's codec of the boundary (runtime/edge/edge.c): SEND_*
 * encodes into a buffer of the chunk's send ring (a little more than its
 * activation slots, so a send still on a slow link never holds up the next
 * compute), the wait before FORWARD or BACKWARD decodes the received message
 * into the stage's input. Receives are waited for only where their data is
 * used, so a rank keeps driving the transport's progress while it waits. */
#include "runtime/exec/pipeline_exec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "runtime/observe/nvtx.h"
#include "runtime/observe/report.h"

void exec_trace(exec *x, const char *name, int micro, double t0, double t1) {
    pz_trace_add(&x->trace, name, micro, t0, t1);
}

/* Waits for a request, counting the time as waiting (and tracing it). */
static pz_status wait_req(exec *x, pz_request **req, int micro, size_t *len, double *done_at) {
    if (!*req) return PZ_OK;
    double t0 = pz_now();
    PZ_RANGE_PUSH("wait micro %d", micro);
    pz_status st = pz_transport_wait_at(x->tp, *req, len, done_at);
    PZ_RANGE_POP();
    *req = NULL;
    double t1 = pz_now();
    x->wait_s += t1 - t0;
    if (t1 - t0 > 1e-4) exec_trace(x, "wait", micro, t0, t1);
    return st;
}

/* A message's tag field: micro-batch and the sender's local chunk. */
static uint32_t field(const exec *x, int micro, int chunk) { return (uint32_t)(micro * x->V + chunk); }

/* Posts a receive (recv = 1) or a send of one message across boundary b;
 * "recv activation, edge 1-2 forward, step 3 micro 0" is what transport
 * errors (a failed frame check among them) name. */
static pz_status post(exec *x, int recv, int peer, int b, int kind, uint32_t step, int micro, uint32_t fld,
                      uint8_t *buf, size_t len, pz_request **req, const char *what) {
    char w[96];
    snprintf(w, sizeof w, "%s, edge %d-%d %s, step %u micro %d", what, b, b + 1,
             kind == PZ_KIND_GRAD ? "backward" : "forward", step, micro);
    PZ_RANGE_PUSH("%s", w);
    peer = pz_replica_world(&x->rep, peer);   /* the stage's rank in this replica */
    pz_status st = recv ? pz_transport_recv(x->tp, peer, pz_tag(peer, step, fld, (uint32_t)kind), buf, len, w, req)
                        : pz_transport_send(x->tp, peer, pz_tag(x->rep.wrank, step, fld, (uint32_t)kind), buf, len, w, req);
    PZ_RANGE_POP();
    return st;
}

/* Encodes src with edge end e into wire and sends it (edge.c times the codec). */
static pz_status encode_send(exec *x, pz_edge_end *e, int peer, int kind, uint64_t step, int micro, uint32_t fld,
                             const float *src, const uint64_t *ids, uint8_t *wire, pz_request **req,
                             const char *what) {
    size_t len = 0;
    pz_status st = exec_dump_edge(x, e, kind, step, micro, src);
    if (st != PZ_OK) return st;
    double t0 = pz_now();
    PZ_RANGE_PUSH("encode edge %d step %llu micro %d", e->edge, (unsigned long long)step, micro);
    st = pz_edge_encode(e, src, ids, (uint64_t)x->o->model.seed, step, (uint32_t)micro, wire, &len);
    PZ_RANGE_POP();
    if (e->codec) exec_trace(x, "encode", micro, t0, pz_now());
    if (st != PZ_OK) return st;
    /* auto: the candidates on this micro-batch, if sampled (validation's ends are never auto's) */
    if (x->au.any && (st = pz_auto_sample(&x->au, e, src, ids, (uint64_t)x->o->model.seed, step, (uint32_t)micro)) != PZ_OK)
        return st;
    pz_auto_sent(&x->au, e, micro, len, pz_now());
    return post(x, 0, peer, e->edge, kind, (uint32_t)step, micro, fld, wire, len, req, what);   /* tags: low 32 bits */
}

/* Waits for a send of edge end e, the message of micro-batch micro (-1:
 * none), and tells auto when it was done (its link measurement). */
static pz_status wait_send(exec *x, pz_edge_end *e, pz_request **req, int micro) {
    double done = 0.0;
    int had = *req != NULL;
    pz_status st = wait_req(x, req, micro, NULL, &done);
    if (st == PZ_OK && had) pz_auto_send_done(&x->au, e, micro, done);
    return st;
}

/* Waits for a posted receive into wire and decodes it into out. */
static pz_status recv_decode(exec *x, pz_edge_end *e, pz_request **req, uint64_t step, int micro,
                             const uint8_t *wire, float *out, uint64_t *ids, double *done_at) {
    size_t len = 0;
    pz_status st = wait_req(x, req, micro, &len, done_at);
    if (st != PZ_OK) return st;
    double t0 = pz_now();
    PZ_RANGE_PUSH("decode edge %d step %llu micro %d", e->edge, (unsigned long long)step, micro);
    st = pz_edge_decode(e, wire, len, (uint64_t)x->o->model.seed, step, (uint32_t)micro, out, ids);
    PZ_RANGE_POP();
    if (e->codec) exec_trace(x, "decode", micro, t0, pz_now());
    return st;
}

/* What a chunk sends on: its last block's output, on the host. */
static const float *chunk_output(pz_chunk *c, int slot) {
    int nb = c->stage.range.l1 - c->stage.range.l0;
    const float *out = nb > 0 ? c->slots[slot].blocks[nb - 1].res3 : c->slots[slot].input;
    return pz_staging_out(&c->stg, slot, out);   /* device -> host before encoding */
}

/* Where auto halves the micro-batches (exec.halves), the loader still reads
 * --batch samples at a time, so the same samples make up a step (an epoch's
 * tail too): an even i reads the next batch and takes its first half, an
 * odd i moves the second half to the front. */
void exec_next_input(exec *x, pz_loader *l, int i) {
    if (!x->halves || i % 2 == 0) {
        pz_loader_next(l, x->tok, x->tgt, x->ids_tmp);
        return;
    }
    size_t hb = (size_t)x->o->model.batch, n = hb * (size_t)x->o->model.seq;
    memcpy(x->tok, x->tok + n, n * sizeof *x->tok);
    memcpy(x->tgt, x->tgt + n, n * sizeof *x->tgt);
    memcpy(x->ids_tmp, x->ids_tmp + hb, hb * sizeof *x->ids_tmp);
}

/* The forward of micro-batch i on chunk c: tokens into the first chunk, the
 * received activation elsewhere; dscale 0 (validation) skips d(loss). The
 * loader feeds the first and the last chunk (they must agree on the ids). */
static pz_status forward(exec *x, pz_chunk *c, int slot, uint32_t step, int i, float dscale, double *loss_sum) {
    const pz_train_opts *o = x->o;
    const float *in = is_first(c) ? NULL : pz_staging_in(&c->stg, c->act_in);
    uint64_t *ids = c->ids[slot];
    if (is_first(c))
        for (int b = 0; b < o->model.batch; b++) ids[b] = x->ids_tmp[b];
    else if (is_last(x, c))
        for (int b = 0; b < o->model.batch; b++)
            if (ids[b] != x->ids_tmp[b])
                return pz_fail(PZ_ERR_PEER, "step %u micro %d: sample %d of the activation into chunk %d (rank %d) has "
                               "id %llu, this rank's loader has %llu: the ranks read different data (same --data, "
                               "--seed, --batch?)", step, i, b, c->g, x->rank, (unsigned long long)ids[b],
                               (unsigned long long)x->ids_tmp[b]);
    double t0 = pz_now();
    PZ_RANGE_PUSH("F stage %d step %u micro %d", c->g, step, i);
    pz_stage_forward(&c->stage, &c->slots[slot], x->tok, in, x->tgt, dscale);
    PZ_RANGE_POP();
    if (is_last(x, c)) *loss_sum += c->slots[slot].loss;
    double t1 = pz_now();
    if (dscale != 0.0f) {
        x->compute_s += t1 - t0;
        exec_trace(x, "forward", i, t0, t1);
    }
    return PZ_OK;
}

/* REDUCE_TIED: both ends hold wte; each sends its gradient and adds the
 * other's, so the two copies stay identical (runtime/edge/tied.h). Neither end
 * waits for its own send, nor here for the other's: the first rank adds it
 * when its step ends, before the norm (auto runs the last micro-batch's
 * weight half meanwhile, while the message crosses), the last rank only
 * after the norm's reduction (its norm skips wte): over a slow link that
 * message is the step's longest, and the first rank starts the next step
 * while it is still on its way. */
static pz_status reduce_tied(exec *x, int peer, uint32_t step) {
    pz_chunk *c = tied_chunk(x);
    if (!c) return PZ_OK;
    size_t n = (size_t)c->stage.cfg.padded_vocab_size * c->stage.cfg.channels, len = 0;
    double t0 = pz_now();
    peer = pz_replica_world(&x->rep, peer);   /* each replica's first and last stage exchange their own */
    pz_status st = wait_req(x, &x->tied_send, -1, NULL, NULL);   /* last step's, long gone */
    if (st != PZ_OK) return st;
    float *g = pz_staging_view(&c->stg, c->stage.grads.wte, n);   /* host copy on a device */
    x->tied_view = g;   /* given back by exec_tied_finish, on error by the executor's free */
    if ((st = pz_tied_encode(&x->tied, g, (uint64_t)x->o->model.seed, step, holds_first(x) ? 0 : 1, &len)) != PZ_OK)
        return st;
    x->tied_wire = (double)len;
    char w[96];
    snprintf(w, sizeof w, "tied embedding gradient, ranks 0 and %d, step %u", x->S - 1, step);
    st = pz_transport_recv(x->tp, peer, pz_tag(peer, step, 0, PZ_KIND_TIED), x->tied.in, x->tied.cap, w, &x->tied_recv);
    if (st == PZ_OK)
        st = pz_transport_send(x->tp, peer, pz_tag(x->rep.wrank, step, 0, PZ_KIND_TIED), x->tied.out, len, w, &x->tied_send);
    exec_trace(x, "tied", -1, t0, pz_now());
    return st;   /* the add: exec_tied_finish, at the step's end */
}

/* Where edge 0-1's bwd is auto, the tied exchange follows its live
 * candidate (tied.h): after the step's add, with the switches every rank
 * made after the step's reduction (or loaded on resume). */
pz_status exec_tied_follow(exec *x) { return x->tied.follow ? pz_tied_use(&x->tied, x->au.cur[PZ_BWD]) : PZ_OK; }

pz_status exec_tied_add(void *x, uint32_t step) { return exec_tied_finish(x, step); }

pz_status exec_tied_finish(exec *x, uint32_t step) {
    if (!x->tied_view) return exec_tied_follow(x);
    pz_chunk *c = tied_chunk(x);
    size_t n = (size_t)c->stage.cfg.padded_vocab_size * c->stage.cfg.channels, len = 0;
    double t0 = pz_now();
    pz_status st = wait_req(x, &x->tied_recv, -1, &len, NULL);
    if (st == PZ_OK) st = pz_tied_add(&x->tied, len, (uint64_t)x->o->model.seed, step, holds_first(x) ? 1 : 0, x->tied_view);
    pz_staging_view_done(&c->stg, c->stage.grads.wte, x->tied_view, n);
    x->tied_view = NULL;
    exec_trace(x, "tied", -1, t0, pz_now());
    return st == PZ_OK ? exec_tied_follow(x) : st;
}

/* BACKWARD (zb-h1, and auto's last micro-batch: the input gradient only) and
 * BACKWARD_WEIGHT. */
static pz_status backward(exec *x, pz_chunk *c, int slot, uint32_t step, int i, int weights) {
    const int half = c->stage.defer_weights || (i == x->o->model.micro - 1 && pz_sched_splits_last(&x->sched.spec, x->S));
    double t0 = pz_now();
    pz_replica_backward(&x->rep, (int)(c - x->ch), (int)step, i == x->o->model.micro - 1);   /* replicas: the last one's buckets start */
    if (weights) {
        PZ_RANGE_PUSH("W stage %d step %u micro %d", c->g, step, i);
        pz_stage_backward_weight(&c->stage, &c->slots[slot]);
    } else {
        PZ_RANGE_PUSH("B stage %d step %u micro %d", c->g, step, i);
        (half ? pz_stage_backward_input : pz_stage_backward)(
            &c->stage, &c->slots[slot], is_last(x, c) ? NULL : pz_staging_in(&c->stg, c->grad_in),
            is_first(c) ? NULL : pz_staging_dx(&c->stg, c->grad_out[slot]));
        if (!is_first(c)) pz_staging_dx_done(&c->stg, c->grad_out[slot]);
    }
    PZ_RANGE_POP();
    double t1 = pz_now();
    x->compute_s += t1 - t0;
    exec_trace(x, weights ? "weight" : "backward", i, t0, t1);
    return PZ_OK;
}

/* Runs one instruction of the list. */
pz_status exec_run_instr(exec *x, const pz_instr *in, uint32_t step, double *loss_sum) {
    const pz_train_opts *o = x->o;
    const int i = in->micro, cc = in->chunk < 0 || in->chunk >= x->V ? 0 : in->chunk;
    pz_chunk *c = &x->ch[cc];
    const int slot = i >= 0 ? i % c->bound : 0, ra = i >= 0 ? i % c->nact : 0, rg = i >= 0 ? i % c->ngrad : 0;
    const int w = i >= 0 ? i % c->nwire : 0;   /* send buffer: its previous message (micro i - nwire) must be out */
    const pz_peer p = pz_instr_peer(&x->sched, in);
    pz_status st = PZ_OK;
    double t0 = pz_now(), arrived = 0.0;
    switch (in->op) {
    case PZ_OP_RECV_ACT:
        return post(x, 1, p.rank, p.boundary, PZ_KIND_ACT, step, i, field(x, i, p.chunk), c->act_wire_in[ra],
                    c->end[FWD_RX].cap, &c->act_recv[ra], "recv activation");
    case PZ_OP_RECV_GRAD:
        return post(x, 1, p.rank, p.boundary, PZ_KIND_GRAD, step, i, field(x, i, p.chunk), c->grad_wire_in[rg],
                    c->end[BWD_RX].cap, &c->grad_recv[rg], "recv gradient");
    case PZ_OP_FORWARD:
        if (is_first(c) || is_last(x, c)) exec_next_input(x, &x->loader, i);
        if (!is_first(c) && (st = recv_decode(x, &c->end[FWD_RX], &c->act_recv[ra], step, i, c->act_wire_in[ra],
                                                 c->act_in, c->ids[slot],
                                                 i == 0 && cc == 0 ? &x->act0_at : NULL)) != PZ_OK)
            return st;
        return forward(x, c, slot, step, i, 1.0f / ((float)o->model.batch * o->model.seq * o->model.micro), loss_sum);
    case PZ_OP_SEND_ACT:
        if ((st = wait_send(x, &c->end[FWD_TX], &c->act_send[w], i - c->nwire)) != PZ_OK) return st;
        t0 = pz_now();
        st = encode_send(x, &c->end[FWD_TX], p.rank, PZ_KIND_ACT, step, i, field(x, i, cc), chunk_output(c, slot),
                         c->ids[slot], c->act_wire_out[w], &c->act_send[w], "send activation");
        if (i == 0 && cc == 0) x->rtt_sent = pz_now();
        exec_trace(x, "send", i, t0, pz_now());
        return st;
    case PZ_OP_BACKWARD:
        if (!is_last(x, c) && (st = recv_decode(x, &c->end[BWD_RX], &c->grad_recv[rg], step, i, c->grad_wire_in[rg],
                                                c->grad_in, c->ids[slot], &arrived)) != PZ_OK)
            return st;
        if (!is_last(x, c) && i == 0 && cc == 0) x->rtt0 = arrived - x->rtt_sent;
        return backward(x, c, slot, step, i, 0);
    case PZ_OP_BACKWARD_WEIGHT:
        return backward(x, c, slot, step, i, 1);
    case PZ_OP_SEND_GRAD:
        if ((st = wait_send(x, &c->end[BWD_TX], &c->grad_send[w], i - c->nwire)) != PZ_OK) return st;
        t0 = pz_now();
        st = encode_send(x, &c->end[BWD_TX], p.rank, PZ_KIND_GRAD, step, i, field(x, i, cc), c->grad_out[slot],
                         c->ids[slot], c->grad_wire_out[w], &c->grad_send[w], "send gradient");
        if (i == 0 && cc == 0) x->hold0 = pz_now() - x->act0_at;
        exec_trace(x, "send", i, t0, pz_now());
        return st;
    case PZ_OP_REDUCE_TIED:
        return reduce_tied(x, p.rank, step);
    case PZ_OP_OPTIM_STEP:
        return PZ_OK;   /* done by the step loop, which needs the collectives */
    }
    return pz_fail(PZ_ERR_ARG, "unknown schedule op %d", (int)in->op);
}

pz_status exec_wait_sends(exec *x) {
    pz_status st = PZ_OK;
    for (int cc = 0; cc < x->V && st == PZ_OK; cc++) {
        pz_chunk *c = &x->ch[cc];
        for (int k = 0; k < c->nwire && st == PZ_OK; k++) {
            int m = k + (x->o->model.micro - 1 - k) / c->nwire * c->nwire;   /* the last micro-batch sent from buffer k */
            if ((st = wait_send(x, &c->end[FWD_TX], &c->act_send[k], m)) == PZ_OK)
                st = wait_send(x, &c->end[BWD_TX], &c->grad_send[k], m);
        }
    }
    return st;
}

/* One validation batch k through this rank's chunks, in model order round
 * the ranks, raw or through the evaluation codecs. */
static pz_status validate_batch(exec *x, int k, uint32_t val_round, int comp, double *sum) {
    /* a step number of its own, so evaluation draws other random numbers
     * than training; its low 32 bits (the round) go into the message tags */
    uint64_t cstep = (1ull << 40) | val_round;
    pz_status st = PZ_OK;
    for (int cc = 0; cc < x->V && st == PZ_OK; cc++) {
        pz_chunk *c = &x->ch[cc];
        pz_request *r = NULL;
        if (!is_first(c)) {
            int g = c->g - 1;
            if ((st = post(x, 1, g % x->S, g, PZ_KIND_VAL, val_round, k, field(x, k, g / x->S) & 0xffffu,
                           c->act_wire_in[0], c->val_rx[comp].cap, &r, "recv validation activation")) != PZ_OK ||
                (st = recv_decode(x, &c->val_rx[comp], &r, cstep, k, c->act_wire_in[0], c->act_in, c->ids[0],
                                  NULL)) != PZ_OK)
                break;
        }
        if ((st = forward(x, c, 0, val_round, k, 0.0f, sum)) != PZ_OK || is_last(x, c)) break;
        if ((st = encode_send(x, &c->val_tx[comp], (c->g + 1) % x->S, PZ_KIND_VAL, cstep, k,
                              field(x, k, cc) & 0xffffu, chunk_output(c, 0), c->ids[0], c->act_wire_out[0], &r,
                              "send validation activation")) == PZ_OK)
            st = wait_req(x, &r, k, NULL, NULL);
    }
    return st;
}

/* Validation: the val batches flow forward through all chunks in file
 * order, through the policy's evaluation codecs (compressed = 1) or raw;
 * rank 0 prints the line. */
pz_status exec_validate(exec *x, int step, uint32_t *val_round, int compressed) {
    const pz_train_opts *o = x->o;
    const int ends = holds_first(x) || holds_last(x);
    uint32_t round = (*val_round)++;
    pz_loader vl;
    int nb = 0;
    pz_status st = PZ_OK;
    if (ends) {
        if ((st = pz_loader_init(&vl, &x->val, x->flags->model.batch, 0, 0)) != PZ_OK) return st;
        nb = (int)pz_loader_batches_per_epoch(&vl);
        if (nb < 1) {
            pz_loader_free(&vl);
            return pz_fail(PZ_ERR_SHAPE, "evaluation data has fewer than one batch of %d x %d tokens", x->flags->model.batch, o->model.seq);
        }
        if (nb > o->model.val_batches) nb = o->model.val_batches;
    }
    /* every rank must agree on the count: first and last computed it from the same data */
    double cnt = holds_first(x) && x->rep.replica == 0 ? nb : 0.0, sum = 0.0;   /* replicas: each validates, replica 0 counts */
    if ((st = exec_allreduce(x, &cnt, 1)) != PZ_OK) goto out;
    nb = (int)cnt;
    const int parts = 1 + x->halves;   /* halves: each batch as two, as in training */
    for (int k = 0; k < nb * parts && st == PZ_OK; k++) {
        if (ends) exec_next_input(x, &vl, k);
        st = validate_batch(x, k, round, compressed, &sum);
    }
    double v = holds_last(x) && x->rep.replica == 0 ? sum : 0.0;
    if (st == PZ_OK) st = exec_allreduce(x, &v, 1);
    if (st == PZ_OK && is_root(x))
        pz_report_val(stdout, step, nb > 0 ? v / (nb * parts) : NAN, nb, x->S == 1 ? -1 : compressed);
out:
    if (ends) pz_loader_free(&vl);
    return st;
}
