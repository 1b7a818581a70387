/* replica.c: the data-parallel part of a pipeline rank's step (--replicas
 * D > 1; docs/data-parallel.md), and --optimizer binsgdm's exchange.
 *
 * The world is S x D ranks: stage s of replica r is world rank s x D + r
 * (stage-major, the default: a stage's replicas on contiguous ranks, as
 * Megatron orders them) or r x S + s (replica-major). Each replica runs
 * the whole schedule with its own peers (pz_replica_world), so the
 * pipeline's messages, the tied exchange between its first and last stage
 * and its validation stay inside the replica; the only traffic between
 * replicas is the stage's gradient average (runtime/dp/group.h) and the
 * executor's one reduction of the step over all ranks.
 *
 * Data: a step's global batch is D x M micro-batches of the loader's
 * order; replica r takes the contiguous block r*M .. r*M+M-1. Every
 * replica's loader passes over the whole global batch (it reads and drops
 * the others' micro-batches), so at every step boundary all loaders stand at
 * the same place: a checkpoint's loader position is every replica's, and a
 * run with D replicas sees the micro-batches, in the same order, that one
 * pipeline with D x M micro-batches sees.
 *
 * binsgdm (stages/binsgdm.h has the rule; docs/data-parallel.md what was
 * taken from the paper): the gradients are not averaged before the step
 * (pz_replica_sync leaves them): each replica folds its own gradient into
 * its own m and b, writes u = m/b over the gradient buffer, and the stage's
 * replicas exchange u through the chunk's compressed reduction (made with
 * the codec PZ_BINSGDM_SPEC and no error feedback: the binary randomisation
 * is unbiased, E[dec] = u). allgather sends each replica's 1-bit message to
 * the others; twophase and hierarchical re-randomise the owners' (hosts')
 * means, which stay in [-1, 1]. Every replica decodes the same messages, so
 * the applied mean, and the parameters, are identical; m and b are each
 * replica's own. The messages' random bits come from (--seed, step,
 * member), so a resumed run draws the same bits. One replica: the same
 * codec round trip on its own u (a group of one). With S > 1 the tied wte,
 * which the first and the last rank both hold and update, goes in messages
 * of its own with a random stream of its own, the same on both ends, so
 * both copies apply the same update. */
#include "runtime/dp/replica.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "runtime/ckpt/fault.h"
#include "runtime/ckpt/resume.h"
#include "stages/binsgdm.h"

static int bsgd(const pz_replica *r) { return r->o->model.optim.kind == PZ_OPTIM_BINSGDM; }
static int holds_end(const pz_replica *r) { return r->rank == 0 || r->rank == r->S - 1; }

void pz_replica_place(pz_replica *r, const pz_train_opts *o, int wrank, int S, int V) {
    r->o = o;
    r->S = S;
    r->V = V;
    r->G = S * V;
    r->D = o->dp.replicas > 1 ? o->dp.replicas : 1;
    r->wrank = wrank;
    r->rank = pz_dp_layout_stage(o->dp.layout ? PZ_DP_LAYOUT_STRIDED : PZ_DP_LAYOUT_CONTIGUOUS, wrank, S, r->D);
    r->replica = o->dp.layout ? wrank / S : wrank % r->D;
}

int pz_replica_world(const pz_replica *r, int stage) {
    return r->o->dp.layout ? r->replica * r->S + stage : stage * r->D + r->replica;
}

/* floats of the tied wte at the start of chunk cc's buffers that binsgdm
 * exchanges on their own (S > 1: rank 0's chunk 0, rank S-1's chunk V-1), else 0 */
static size_t tied_floats(const pz_replica *r, int cc) {
    int tied = r->S > 1 && ((r->rank == 0 && cc == 0) || (r->rank == r->S - 1 && cc == r->V - 1));
    const pz_gpt2_config *c = &r->ch[cc].stage->cfg;
    return tied ? (size_t)c->padded_vocab_size * c->channels : 0;
}

/* --dp-link-mbps, --dp-link-latency-ms: the transport's simulated links
 * (the mechanism of --link-mbps) to the group's members, with --dp-hosts
 * (or the hosts found from the names) only to those on other hosts. A link so slow that one message outlasts
 * --peer-timeout would end in "peer frozen?" at the receiver: say so first. */
static pz_status dp_links(pz_replica *r, int hosts) {
    const pz_dp_opts *o = &r->o->dp;
    if (o->link_mbps <= 0 && o->link_latency_ms <= 0) return PZ_OK;
    pz_dp_group_set_link(&r->dp, hosts, o->link_mbps, o->link_latency_ms);
    size_t most = 0;
    for (int cc = 0; cc < r->V; cc++) {
        size_t m = pz_dp_allreduce_max_message(&r->dp, r->ch[cc].stage->grads.numel, PZ_DP_AUTO);
        if (r->cr && pz_dp_creduce_max_message(r->cr[cc]) > m) m = pz_dp_creduce_max_message(r->cr[cc]);
        if (r->crw && pz_dp_creduce_max_message(r->crw) > m) m = pz_dp_creduce_max_message(r->crw);
        if (m > most) most = m;
    }
    return pz_dp_check_link(o->link_mbps, o->link_latency_ms, most, r->o->net.peer_timeout);
}

/* --dp-reduce hierarchical without --dp-hosts: the hosts are those the
 * ranks run on, their host names exchanged over the stage's group
 * (pz_dp_group_hosts: H runs of consecutive replicas, each run one name;
 * refused otherwise, naming the replica out of place). */
static pz_status find_hosts(pz_replica *r, int *hosts) {
    pz_status st = pz_dp_group_hosts(&r->dp, NULL, hosts);
    if (st == PZ_OK && r->wrank == 0)
        fprintf(stderr, "pipezip train: --dp-reduce hierarchical: stage 0's %d replicas run on %d host%s (their host "
                "names), %d each\n", r->D, *hosts, *hosts == 1 ? "" : "s", r->D / *hosts);
    return st;
}

/* --dp-bucket-mb in floats, at least one */
static size_t bucket_floats(const pz_replica *r) {
    size_t bf = (size_t)((double)r->o->dp.bucket_mb * (1 << 20) / sizeof(float));
    return bf ? bf : 1;
}

/* --dp-compress: one reduction per chunk, with error feedback, in the
 * sync's buckets (the same cut without a sync, --dp-variance, so that
 * dp_var measures the numbers training gets); binsgdm's exchange: its
 * codec, no error feedback, one bucket (the tied wte: its own messages and
 * random stream, the same on the first and the last rank, so both copies
 * move alike) */
static pz_status make_reductions(pz_replica *r, pz_dp_mode mode, int hosts) {
    pz_status st = PZ_OK;
    pz_dp_copts co = {mode, !bsgd(r), (uint64_t)r->o->model.seed, hosts, 0, 0};
    r->cr = xcalloc((size_t)r->V, sizeof *r->cr);
    for (int cc = 0; cc < r->V && st == PZ_OK; cc++) {
        size_t w = bsgd(r) ? tied_floats(r, cc) : 0;
        co.bucket = bsgd(r) ? 0 : bucket_floats(r);
        co.hold = pz_dp_held(&r->ch[cc].stage->cfg, r->S, r->G, r->ch[cc].g);
        st = pz_dp_creduce_create(&r->cr[cc], &r->dp, bsgd(r) ? PZ_BINSGDM_SPEC : r->o->dp.compress, &co,
                                  r->ch[cc].stage->grads.numel - w);
        pz_dp_copts cw = co;
        cw.seed ^= 0x9e3779b97f4a7c15ull;
        if (st == PZ_OK && w) st = pz_dp_creduce_create(&r->crw, &r->dp, PZ_BINSGDM_SPEC, &cw, w);
    }
    return st;
}

pz_status pz_replica_start(pz_replica *r, pz_transport *tp, const pz_backend *be, const pz_replica_chunk *ch,
                           pz_trace *trace, pz_replica_tied_fn tied_add, void *tied_ctx) {
    if (r->D < 2 && !bsgd(r)) return PZ_OK;
    r->be = be;
    r->trace = trace;
    r->tied_add = tied_add;
    r->tied_ctx = tied_ctx;
    r->ch = xcalloc((size_t)r->V, sizeof *r->ch);
    memcpy(r->ch, ch, (size_t)r->V * sizeof *r->ch);
    int *ranks = xcalloc((size_t)r->D, sizeof *ranks);
    pz_dp_layout_ranks(r->o->dp.layout ? PZ_DP_LAYOUT_STRIDED : PZ_DP_LAYOUT_CONTIGUOUS, r->rank, r->S, r->D, ranks);
    pz_status st = pz_dp_group_init(&r->dp, tp, r->wrank, ranks, r->D);
    free(ranks);
    size_t bf = bucket_floats(r);
    /* the buckets (cpu: the ring runs in place; binsgdm exchanges its m/b instead) */
    r->sync = r->D > 1 && !bsgd(r) && be->host_memory && !r->o->dp.variance ? xcalloc((size_t)r->V, sizeof *r->sync)
                                                                           : NULL;   /* --dp-variance: the raw gradient at the end */
    for (int cc = 0; r->sync && cc < r->V && st == PZ_OK; cc++) {
        pz_stage *s = r->ch[cc].stage;   /* the hook: pz_replica_backward */
        size_t hold = pz_dp_held(&s->cfg, r->S, r->G, r->ch[cc].g);
        st = pz_dp_sync_init(&r->sync[cc], &r->dp, s->grad_mem, s->grads.numel, hold, bf);
        s->grads_final_ctx = &r->sync[cc];
    }
    int hosts = r->o->dp.hosts;
    pz_dp_mode mode = r->D < 2 ? PZ_DP_ALLGATHER : (pz_dp_mode)r->o->dp.reduce;
    if (st == PZ_OK && (r->o->dp.compress || bsgd(r)) && mode == PZ_DP_HIERARCHICAL && !hosts) st = find_hosts(r, &hosts);
    if (st == PZ_OK && (r->o->dp.compress || bsgd(r))) st = make_reductions(r, mode, hosts);
    return st == PZ_OK ? dp_links(r, hosts) : st;
}

void pz_replica_skip(const pz_replica *r, pz_loader *l, int *tok, int *tgt, size_t *ids, int tail) {
    if (r->D < 2 || !holds_end(r)) return;
    int n = (tail ? r->D - 1 - r->replica : r->replica) * r->o->model.micro;
    for (int k = 0; k < n; k++) pz_loader_next(l, tok, tgt, ids);
}

double pz_replica_plan_bytes(const pz_mem_job *j, int s) {
    const pz_replica *r = j->dp_ctx;
    pz_dp_copts co = {(pz_dp_mode)r->o->dp.reduce, !bsgd(r), 0, r->o->dp.hosts, 0, 0};
    int me = r->replica;
    if (co.mode == PZ_DP_HIERARCHICAL && !co.hosts) co.hosts = 1, me = 0;   /* hosts not known yet: a leader's, the most */
    return pz_dp_plan_stage(j->cfg, j->ranges, r->S, r->V, s, bsgd(r) ? 0 : bucket_floats(r), r->D, me,
                            r->o->dp.compress || bsgd(r) ? &co : NULL);
}

/* this step averages through --dp-compress's codec (after --dp-warmup) */
static int compressed(const pz_replica *r, int step) { return r->cr && step >= r->o->dp.warmup; }

/* the chunk's buckets go through its compressed reduction this step, or the ring */
static pz_status sync_codec(pz_replica *r, int cc, int step) {
    return pz_dp_sync_codec(&r->sync[cc], compressed(r, step) ? r->cr[cc] : NULL, (uint64_t)step);
}

void pz_replica_backward(pz_replica *r, int cc, int step, int last) {
    if (!r->ch) return;   /* not started: no replicas, AdamW */
    int on = r->sync && last && !pz_replica_onebit_on(r, step);   /* 1-bit Adam: no gradient average */
    /* a cut that differs fails the same call again in chunk_sync, which returns it */
    if (on) on = sync_codec(r, cc, step) == PZ_OK;
    if (on) pz_dp_sync_arm(&r->sync[cc]);
    /* zero-bubble: an earlier micro-batch's weight pass may run after the
     * last one's input pass, and its gradients are not final */
    r->ch[cc].stage->grads_final = on ? pz_dp_sync_ready : NULL;
}

/* --dp-variance: the exact mean of the n gradients at grad (host memory:
 * replicas run on the cpu), in a copy, before the sync replaces them with
 * its estimate (chunk_sync counts the sync's bytes after it). */
static pz_status exact_mean(pz_replica *r, const float *grad, size_t n, float **out) {
    *out = xmalloc(n * sizeof(float) + 1);
    memcpy(*out, grad, n * sizeof(float));
    return pz_dp_allreduce(&r->dp, *out, n, 1, PZ_DP_AUTO);
}

/* adds ||est - exact||^2 and ||exact||^2 to r->err (uncompressed, est is
 * the same all-reduce's result: 0 exactly) */
static void add_error(pz_replica *r, const float *est, const float *exact, size_t n) {
    double d2 = 0.0, r2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)est[i] - exact[i];
        d2 += d * d;
        r2 += (double)exact[i] * exact[i];
    }
    r->err[0] += d2;
    r->err[1] += r2;
}

/* One chunk's average after the tied add: the rest of its buckets
 * (uncompressed or compressed), or the whole chunk at once (--dp-variance:
 * compressed, pz_dp_creduce_run; a backend without host memory: through a
 * host copy). */
static pz_status chunk_sync(pz_replica *r, int cc, int step) {
    pz_stage *s = r->ch[cc].stage;
    pz_dp_sync *y = r->sync ? &r->sync[cc] : NULL;
    float *exact = NULL;   /* --dp-variance (no buckets then) */
    pz_status st = r->o->dp.variance ? exact_mean(r, s->grad_mem, s->grads.numel, &exact)
                 : y                 ? sync_codec(r, cc, step)
                                     : PZ_OK;
    double t0 = pz_now();
    uint64_t sent0 = r->dp.bytes_sent;
    if (st == PZ_OK)
        st = y ? pz_dp_sync_finish(y)
           : compressed(r, step) ? pz_dp_creduce_run(r->cr[cc], s->grad_mem, s->grad_mem, (uint64_t)step)
           : pz_dp_mean_dev(&r->dp, r->be, s->grad_mem, s->grads.numel);
    if (st == PZ_OK && exact) add_error(r, s->grad_mem, exact, s->grads.numel);
    free(exact);
    for (int i = 0; y && i < y->nb; i++)
        if (y->b[i].state == 2) pz_trace_add(r->trace, "dp bucket", -1, y->b[i].t_start, y->b[i].t_done);
    if (!y) pz_trace_add(r->trace, "dp sync", -1, t0, pz_now());
    r->fig[PZ_DP_RAW] += (double)s->grads.numel * sizeof(float);
    r->fig[PZ_DP_WIRE] += y ? (double)y->sent : (double)(r->dp.bytes_sent - sent0);
    r->fig[PZ_DP_SYNC] += y ? y->sync_s : pz_now() - t0;
    r->fig[PZ_DP_HIDDEN] += y ? y->hidden_s : 0.0;
    return st;
}

pz_status pz_replica_sync(pz_replica *r, int step) {
    pz_status st = PZ_OK;
    if (r->D > 1) pz_fault_point("sync", step + 1, r->wrank);   /* mid-step: the other replicas wait in the average */
    /* binsgdm exchanges m/b in its step instead (and fills fig there) */
    if (bsgd(r)) return PZ_OK;
    if (pz_replica_onebit_on(r, step)) return PZ_OK;   /* 1-bit Adam: the momentum, in its step (onebit.c) */
    memset(r->fig, 0, sizeof r->fig);
    /* the buckets that started during the backward end first, then the
     * tied add (the last rank waits there for the first rank's backward),
     * then the rest: wte holds both ends' sum before it is averaged */
    for (int cc = 0; r->sync && cc < r->V && st == PZ_OK; cc++) st = pz_dp_sync_drain(&r->sync[cc]);
    if (st == PZ_OK) st = r->tied_add(r->tied_ctx, (uint32_t)step);
    for (int cc = 0; cc < r->V && st == PZ_OK; cc++) st = chunk_sync(r, cc, step);
    return st;
}

/* u's n floats over the stage's replicas, 1-bit after --dp-warmup (fig: what it took) */
static pz_status exchange(pz_replica *r, pz_dp_creduce *cr, float *u, size_t n, int step) {
    return pz_dp_creduce_exchange(cr, &r->dp, u, n, (uint64_t)step, step >= r->o->dp.warmup, r->fig);
}

pz_status pz_replica_binsgdm_step(pz_replica *r, int step, double norm, float *lr) {
    pz_status st = PZ_OK;
    /* this step's exchange; it runs after the step's reduction, so whoever
     * reports fig with that reduction shows it one step later */
    memset(r->fig, 0, sizeof r->fig);
    for (int cc = 0; cc < r->V && st == PZ_OK; cc++) {
        pz_optim *opt = r->ch[cc].opt;
        pz_stage *s = r->ch[cc].stage;
        /* the tied wte leads the chunk's buffers on both ends (stages/gpt2_params.c):
         * both hold the same sum of gradients, so the same m, b and u */
        size_t w = tied_floats(r, cc), n = s->grads.numel;
        pz_binsgdm_prepare(opt, s, pz_clip_scale(&opt->cfg, norm));
        if (w) st = exchange(r, r->crw, s->grad_mem, w, step);
        if (st == PZ_OK) st = exchange(r, r->cr[cc], s->grad_mem + w, n - w, step);
        if (st == PZ_OK) *lr = pz_binsgdm_step(opt, s);
    }
    return st;
}

void pz_replica_variance(pz_replica *r, double *out) {
    out[0] = r->err[0];
    out[1] = r->err[1];
    r->err[0] = r->err[1] = 0.0;
}

/* What the autos chose (warmup=auto's K; --compress auto's live codec per
 * boundary and direction): every replica decides from the step's one
 * reduction, so all hold the same choices. Averaged gradients would keep
 * the parameters equal even if a replica chose otherwise: compared apart. */
static pz_status same_choices(pz_replica *r, int warmup_extra, const int *cur, int ncur, const char *when) {
    int n = 1 + (cur ? ncur : 0);
    int *v = xcalloc((size_t)n, sizeof *v);
    v[0] = warmup_extra;
    if (n > 1) memcpy(v + 1, cur, (size_t)(n - 1) * sizeof *v);
    char w[96];
    snprintf(w, sizeof w, "the schedule's warm-up and --compress auto's codecs %s", when);
    pz_status st = pz_dp_check_identical(&r->dp, v, (size_t)n * sizeof *v, w);
    free(v);
    return st;
}

pz_status pz_replica_check(pz_replica *r, int warmup_extra, const int *cur, int n, const char *when) {
    pz_status st = r->D > 1 ? same_choices(r, warmup_extra, cur, n, when) : PZ_OK;
    for (int cc = 0; r->D > 1 && cc < r->V && st == PZ_OK; cc++) {
        const pz_replica_chunk *c = &r->ch[cc];
        char w[3][96];
        snprintf(w[0], sizeof w[0], "chunk %d's parameters %s", c->g, when);
        snprintf(w[1], sizeof w[1], "chunk %d's AdamW m %s", c->g, when);
        snprintf(w[2], sizeof w[2], "chunk %d's AdamW v %s", c->g, when);
        size_t numel = c->stage->params.numel;
        st = pz_dp_check_identical_dev(&r->dp, r->be, c->stage->param_mem, numel, w[0]);
        if (bsgd(r)) continue;   /* its m and b are each replica's own */
        if (st == PZ_OK && (st = pz_dp_check_identical_dev(&r->dp, r->be, c->opt->m, numel, w[1])) == PZ_OK)
            st = pz_dp_check_identical_dev(&r->dp, r->be, c->opt->v, numel, w[2]);
    }
    return st;
}

void pz_replica_free(pz_replica *r) {
    pz_dp_creduce_free(r->crw);
    r->crw = NULL;
    for (int cc = 0; r->cr && cc < r->V; cc++) pz_dp_creduce_free(r->cr[cc]);
    for (int cc = 0; r->sync && cc < r->V; cc++) pz_dp_sync_free(&r->sync[cc]);
    free(r->cr);
    free(r->sync);
    free(r->ch);
    r->cr = NULL;
    r->sync = NULL;
    r->ch = NULL;
    pz_dp_group_free(&r->dp);
}

/* One blob per chunk and replica beside the shards (step-N/rank-G.<ext>R):
 * binsgdm's m and b with replicas (replica 0's are also in the shard, as
 * AdamW's m and v; stages/binsgdm.h has the format), else --dp-compress's
 * error feedback. */
pz_status pz_replica_save(pz_replica *r, const char *dir, int step) {
    pz_status st = PZ_OK;
    int n = bsgd(r) ? (r->D > 1 ? r->V : 0) : r->cr ? r->V : 0;
    for (int cc = 0; cc < n && st == PZ_OK; cc++) {
        uint8_t *blob = NULL;
        size_t len = 0;
        if (bsgd(r)) pz_binsgdm_state_save(r->ch[cc].opt, &blob, &len);
        else st = pz_dp_creduce_save(r->cr[cc], &blob, &len);
        if (st == PZ_OK) st = pz_resume_write_side(dir, step, r->ch[cc].g, bsgd(r) ? "bsgd" : "dpef", r->replica, blob, len);
        free(blob);
    }
    return st;
}

pz_status pz_replica_load(pz_replica *r, const char *dir, int step) {
    pz_status st = PZ_OK;
    int n = bsgd(r) ? (r->D > 1 ? r->V : 0) : r->cr ? r->V : 0;
    for (int cc = 0; cc < n && st == PZ_OK; cc++) {
        char *path = NULL;
        uint8_t *blob = NULL;
        size_t len = 0;
        const char *what = bsgd(r) ? "binsgdm state (m, b)" : "error feedback of --dp-compress";
        st = pz_resume_read_side(dir, step, r->ch[cc].g, bsgd(r) ? "bsgd" : "dpef", r->replica, what, &blob, &len, &path);
        if (st == PZ_OK && bsgd(r)) st = pz_binsgdm_state_load(r->ch[cc].opt, blob, len, path);
        else if (st == PZ_OK && (st = pz_dp_creduce_load(r->cr[cc], blob, len)) != PZ_OK)
            st = pz_fail(st, "--resume: %s: %s", path, pz_last_error());
        free(blob);
        free(path);
    }
    return st;
}
