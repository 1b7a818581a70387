/* pipeline_dp.c: the data-parallel part of a pipeline rank's step
 * (--replicas D > 1; docs/data-parallel.md).
 *
 * The world is S x D ranks: stage s of replica r is world rank s x D + r
 * (stage-major, the default: a stage's replicas on contiguous ranks, as
 * Megatron orders them) or r x S + s (replica-major). Each replica runs
 * the whole schedule with its own peers (world_of), so the pipeline's
 * messages, the tied exchange between its first and last stage and its
 * validation stay inside the replica; the only traffic between replicas is
 * the stage's gradient average (runtime/dp/group.h, uncompressed) and the
 * step's one reduction over all ranks (pipeline.c, finish_step).
 *
 * Data: a step's global batch is D x M micro-batches of the loader's
 * order; replica r takes the contiguous block r*M .. r*M+M-1. Every
 * replica's loader passes over the whole global batch (it reads and drops
 * the others' micro-batches), so at every step boundary all loaders stand at
 * the same place: a checkpoint's loader position is every replica's, and a
 * run with D replicas sees the micro-batches, in the same order, that one
 * pipeline with D x M micro-batches sees. */
#include "runtime/exec/pipeline_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "runtime/ckpt/fault.h"
#include "runtime/ckpt/resume.h"
#include "stages/binsgdm.h"

/* --dp-link-mbps, --dp-link-latency-ms: the transport's simulated links
 * (the mechanism of --link-mbps) to the group's members, with --dp-hosts
 * (or the hosts found from the names) only to those on other hosts. A link so slow that one message outlasts
 * --peer-timeout would end in "peer frozen?" at the receiver: say so first. */
static pz_status dp_links(exec *x, int hosts) {
    const pz_dp_opts *o = &x->o->dp;
    if (o->link_mbps <= 0 && o->link_latency_ms <= 0) return PZ_OK;
    pz_dp_group_set_link(&x->dp, hosts, o->link_mbps, o->link_latency_ms);
    size_t most = 0;
    for (int cc = 0; cc < x->V; cc++) {
        size_t m = pz_dp_allreduce_max_message(&x->dp, x->ch[cc].stage.grads.numel, PZ_DP_AUTO);
        if (x->cr && pz_dp_creduce_max_message(x->cr[cc]) > m) m = pz_dp_creduce_max_message(x->cr[cc]);
        if (x->crw && pz_dp_creduce_max_message(x->crw) > m) m = pz_dp_creduce_max_message(x->crw);
        if (m > most) most = m;
    }
    return pz_dp_check_link(o->link_mbps, o->link_latency_ms, most, x->o->net.peer_timeout);
}

/* --dp-reduce hierarchical without --dp-hosts: the hosts are those the
 * ranks run on, their host names exchanged over the stage's group
 * (pz_dp_group_hosts: H runs of consecutive replicas, each run one name;
 * refused otherwise, naming the replica out of place). */
static pz_status find_hosts(exec *x, int *hosts) {
    pz_status st = pz_dp_group_hosts(&x->dp, NULL, hosts);
    if (st == PZ_OK && is_root(x))
        fprintf(stderr, "pipezip train: --dp-reduce hierarchical: stage 0's %d replicas run on %d host%s (their host "
                "names), %d each\n", x->D, *hosts, *hosts == 1 ? "" : "s", x->D / *hosts);
    return st;
}

/* --dp-bucket-mb in floats, at least one */
static size_t bucket_floats(const exec *x) {
    size_t bf = (size_t)((double)x->o->dp.bucket_mb * (1 << 20) / sizeof(float));
    return bf ? bf : 1;
}

pz_status exec_dp_init(exec *x) {
    const int bsgd = x->o->model.optim.kind == PZ_OPTIM_BINSGDM;
    if (x->D < 2 && !bsgd) return PZ_OK;
    int *ranks = xcalloc((size_t)x->D, sizeof *ranks);
    pz_dp_layout_ranks(x->o->dp.layout ? PZ_DP_LAYOUT_STRIDED : PZ_DP_LAYOUT_CONTIGUOUS, x->rank, x->S, x->D, ranks);
    pz_status st = pz_dp_group_init(&x->dp, x->tp, x->wrank, ranks, x->D);
    free(ranks);
    size_t bf = bucket_floats(x);
    /* the buckets (cpu: the ring runs in place; binsgdm exchanges its m/b instead) */
    x->sync = x->D > 1 && !bsgd && x->be->host_memory && !x->o->dp.variance ? xcalloc((size_t)x->V, sizeof *x->sync)
                                                                             : NULL;   /* --dp-variance: the raw gradient at the end */
    for (int cc = 0; x->sync && cc < x->V && st == PZ_OK; cc++) {
        pz_stage *s = &x->ch[cc].stage;   /* the hook: exec_dp_backward */
        size_t hold = pz_dp_held(&s->cfg, x->S, x->G, x->ch[cc].g);
        st = pz_dp_sync_init(&x->sync[cc], &x->dp, s->grad_mem, s->grads.numel, hold, bf);
        s->grads_final_ctx = &x->sync[cc];
    }
    int hosts = x->o->dp.hosts;
    pz_dp_mode mode = x->D < 2 ? PZ_DP_ALLGATHER : (pz_dp_mode)x->o->dp.reduce;
    if (st == PZ_OK && (x->o->dp.compress || bsgd) && mode == PZ_DP_HIERARCHICAL && !hosts) st = find_hosts(x, &hosts);
    if (st == PZ_OK && (x->o->dp.compress || bsgd)) {
        /* --dp-compress: one reduction per chunk, with error feedback;
         * binsgdm's exchange: its codec, no error feedback (pipeline_binsgdm.c) */
        pz_dp_copts co = {mode, !bsgd, (uint64_t)x->o->model.seed, hosts};
        x->cr = xcalloc((size_t)x->V, sizeof *x->cr);
        for (int cc = 0; cc < x->V && st == PZ_OK; cc++) {
            size_t w = bsgd ? exec_bsgd_tied(x, &x->ch[cc]) : 0;
            st = pz_dp_creduce_create(&x->cr[cc], &x->dp, bsgd ? PZ_BINSGDM_SPEC : x->o->dp.compress, &co,
                                      x->ch[cc].stage.grads.numel - w);
            /* the tied wte: its own messages and random stream, the same on
             * the first and the last rank, so both copies move alike */
            pz_dp_copts cw = co;
            cw.seed ^= 0x9e3779b97f4a7c15ull;
            if (st == PZ_OK && w) st = pz_dp_creduce_create(&x->crw, &x->dp, PZ_BINSGDM_SPEC, &cw, w);
        }
    }
    return st == PZ_OK ? dp_links(x, hosts) : st;
}

void exec_dp_skip(exec *x, int tail) {
    if (x->D < 2 || !(holds_first(x) || holds_last(x))) return;
    int n = (tail ? x->D - 1 - x->replica : x->replica) * x->o->model.micro;
    for (int k = 0; k < n; k++) pz_loader_next(&x->loader, x->tok, x->tgt, x->ids_tmp);
}

double exec_dp_plan_bytes(const pz_mem_job *j, int r) {
    const exec *x = j->dp_ctx;
    const int bsgd = x->o->model.optim.kind == PZ_OPTIM_BINSGDM;
    pz_dp_copts co = {(pz_dp_mode)x->o->dp.reduce, !bsgd, 0, x->o->dp.hosts};
    int me = x->replica;
    if (co.mode == PZ_DP_HIERARCHICAL && !co.hosts) co.hosts = 1, me = 0;   /* hosts not known yet: a leader's, the most */
    return pz_dp_plan_stage(j->cfg, j->ranges, x->S, x->V, r, bsgd ? 0 : bucket_floats(x), x->D, me,
                            x->o->dp.compress || bsgd ? &co : NULL);
}

/* this step averages through --dp-compress's codec (after --dp-warmup) */
static int compressed(const exec *x, int step) { return x->cr && step >= x->o->dp.warmup; }

void exec_dp_backward(exec *x, pz_chunk *c, int step, int last) {
    int on = x->sync && last && !compressed(x, step);
    if (on) pz_dp_sync_arm(&x->sync[c - x->ch]);
    /* zero-bubble: an earlier micro-batch's weight pass may run after the
     * last one's input pass, and its gradients are not final */
    c->stage.grads_final = on ? pz_dp_sync_ready : NULL;
}

/* --dp-variance: the exact mean of the n gradients at grad (host memory:
 * replicas run on the cpu), in a copy, before the sync replaces them with
 * its estimate (chunk_sync counts the sync's bytes after it). */
static pz_status exact_mean(exec *x, const float *grad, size_t n, float **out) {
    *out = xmalloc(n * sizeof(float) + 1);
    memcpy(*out, grad, n * sizeof(float));
    return pz_dp_allreduce(&x->dp, *out, n, 1, PZ_DP_AUTO);
}

/* adds ||est - exact||^2 and ||exact||^2 to x->dp_err (uncompressed, est is
 * the same all-reduce's result: 0 exactly) */
static void add_error(exec *x, const float *est, const float *exact, size_t n) {
    double d2 = 0.0, r2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)est[i] - exact[i];
        d2 += d * d;
        r2 += (double)exact[i] * exact[i];
    }
    x->dp_err[0] += d2;
    x->dp_err[1] += r2;
}

/* One chunk's average after the tied add: the rest of its buckets, or the
 * whole chunk at once (compressed: pz_dp_creduce_run is one blocking call
 * per chunk; a backend without host memory: through a host copy). */
static pz_status chunk_sync(exec *x, int cc, int step) {
    pz_stage *s = &x->ch[cc].stage;
    pz_dp_sync *y = x->sync && !compressed(x, step) ? &x->sync[cc] : NULL;
    float *exact = NULL;   /* --dp-variance (no buckets then) */
    pz_status st = x->o->dp.variance ? exact_mean(x, s->grad_mem, s->grads.numel, &exact) : PZ_OK;
    double t0 = pz_now();
    uint64_t sent0 = x->dp.bytes_sent;
    if (st == PZ_OK)
        st = y ? pz_dp_sync_finish(y)
           : compressed(x, step) ? pz_dp_creduce_run(x->cr[cc], s->grad_mem, s->grad_mem, (uint64_t)step)
           : pz_dp_mean_dev(&x->dp, x->be, s->grad_mem, s->grads.numel);
    if (st == PZ_OK && exact) add_error(x, s->grad_mem, exact, s->grads.numel);
    free(exact);
    for (int i = 0; y && i < y->nb; i++)
        if (y->b[i].state == 2) exec_trace(x, "dp bucket", -1, y->b[i].t_start, y->b[i].t_done);
    if (!y) exec_trace(x, "dp sync", -1, t0, pz_now());
    x->dp_fig[PZ_DP_RAW] += (double)s->grads.numel * sizeof(float);
    x->dp_fig[PZ_DP_WIRE] += y ? (double)y->sent : (double)(x->dp.bytes_sent - sent0);
    x->dp_fig[PZ_DP_SYNC] += y ? y->sync_s : pz_now() - t0;
    x->dp_fig[PZ_DP_HIDDEN] += y ? y->hidden_s : 0.0;
    return st;
}

pz_status exec_dp_sync(exec *x, int step) {
    pz_status st = PZ_OK;
    if (x->D > 1) pz_fault_point("sync", step + 1, x->wrank);   /* mid-step: the other replicas wait in the average */
    /* binsgdm exchanges m/b in its step instead (and fills dp_fig there) */
    if (x->o->model.optim.kind == PZ_OPTIM_BINSGDM) return PZ_OK;
    memset(x->dp_fig, 0, sizeof x->dp_fig);
    /* the buckets that started during the backward end first, then the
     * tied add (the last rank waits there for the first rank's backward),
     * then the rest: wte holds both ends' sum before it is averaged */
    for (int cc = 0; x->sync && !compressed(x, step) && cc < x->V && st == PZ_OK; cc++)
        st = pz_dp_sync_drain(&x->sync[cc]);
    if (st == PZ_OK) st = exec_tied_finish(x, (uint32_t)step);
    for (int cc = 0; cc < x->V && st == PZ_OK; cc++) st = chunk_sync(x, cc, step);
    return st;
}

void exec_dp_variance(exec *x, double *out) {
    out[0] = x->dp_err[0];
    out[1] = x->dp_err[1];
    x->dp_err[0] = x->dp_err[1] = 0.0;
}

/* What the autos chose (warmup=auto's K; --compress auto's live codec per
 * boundary and direction): every replica decides from the step's one
 * reduction, so all hold the same choices. Averaged gradients would keep
 * the parameters equal even if a replica chose otherwise: compared apart. */
static pz_status same_choices(exec *x, const char *when) {
    int n = 1 + (x->au.any ? 2 * x->au.edges : 0);
    int *v = xcalloc((size_t)n, sizeof *v);
    v[0] = x->spec.warmup_extra;
    if (n > 1) memcpy(v + 1, x->au.cur, (size_t)(n - 1) * sizeof *v);
    char w[96];
    snprintf(w, sizeof w, "the schedule's warm-up and --compress auto's codecs %s", when);
    pz_status st = pz_dp_check_identical(&x->dp, v, (size_t)n * sizeof *v, w);
    free(v);
    return st;
}

pz_status exec_dp_check(exec *x, const char *when) {
    pz_status st = x->D > 1 ? same_choices(x, when) : PZ_OK;
    for (int cc = 0; x->D > 1 && cc < x->V && st == PZ_OK; cc++) {
        pz_chunk *c = &x->ch[cc];
        char w[3][96];
        snprintf(w[0], sizeof w[0], "chunk %d's parameters %s", c->g, when);
        snprintf(w[1], sizeof w[1], "chunk %d's AdamW m %s", c->g, when);
        snprintf(w[2], sizeof w[2], "chunk %d's AdamW v %s", c->g, when);
        size_t n = c->stage.params.numel;
        st = pz_dp_check_identical_dev(&x->dp, x->be, c->stage.param_mem, n, w[0]);
        if (x->o->model.optim.kind == PZ_OPTIM_BINSGDM) continue;   /* its m and b are each replica's own */
        if (st == PZ_OK && (st = pz_dp_check_identical_dev(&x->dp, x->be, c->opt.m, n, w[1])) == PZ_OK)
            st = pz_dp_check_identical_dev(&x->dp, x->be, c->opt.v, n, w[2]);
    }
    return st;
}

void exec_dp_free(exec *x) {
    pz_dp_creduce_free(x->crw);
    x->crw = NULL;
    for (int cc = 0; x->cr && cc < x->V; cc++) pz_dp_creduce_free(x->cr[cc]);
    for (int cc = 0; x->sync && cc < x->V; cc++) pz_dp_sync_free(&x->sync[cc]);
    free(x->cr);
    free(x->sync);
    x->cr = NULL;
    x->sync = NULL;
    pz_dp_group_free(&x->dp);
}

pz_status exec_dp_save(exec *x, const char *dir, int step) {
    pz_status st = PZ_OK;
    if (x->o->model.optim.kind == PZ_OPTIM_BINSGDM) return exec_bsgd_save(x, dir, step);   /* no error feedback */
    for (int cc = 0; x->cr && cc < x->V && st == PZ_OK; cc++) {
        uint8_t *blob = NULL;
        size_t len = 0;
        if ((st = pz_dp_creduce_save(x->cr[cc], &blob, &len)) == PZ_OK)
            st = pz_resume_write_side(dir, step, x->ch[cc].g, "dpef", x->replica, blob, len);
        free(blob);
    }
    return st;
}

pz_status exec_dp_load(exec *x, const char *dir, int step) {
    pz_status st = PZ_OK;
    if (x->o->model.optim.kind == PZ_OPTIM_BINSGDM) return exec_bsgd_load(x, dir, step);
    for (int cc = 0; x->cr && cc < x->V && st == PZ_OK; cc++) {
        char *path = NULL;
        uint8_t *blob = NULL;
        size_t len = 0;
        if ((st = pz_resume_read_side(dir, step, x->ch[cc].g, "dpef", x->replica, "error feedback of --dp-compress",
                                      &blob, &len, &path)) == PZ_OK &&
            (st = pz_dp_creduce_load(x->cr[cc], blob, len)) != PZ_OK)
            st = pz_fail(st, "--resume: %s: %s", path, pz_last_error());
        free(blob);
        free(path);
    }
    return st;
}
