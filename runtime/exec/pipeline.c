/* pipeline.c: the executor of one pipeline rank, for every schedule.
 *
 * A rank holds V >= 1 model chunks (runtime/exec/pipeline_exec.h; V > 1 only for
 * interleaved, Megatron's virtual pipeline) and walks its schedule's
 * instruction list every step. Follow one micro-batch i through a chunk
 * that is neither first nor last (runtime/exec/pipeline_instr.c):
 *   RECV_ACT i   post a receive of the (B,T,C) activation from the chunk before
 *   FORWARD i    wait for it, decode, run the chunk's blocks (slot i % bound)
 *   SEND_ACT i   encode the output into a send buffer and send it on (non-blocking)
 *   RECV_GRAD i  post a receive of d(output) from the chunk after
 *   BACKWARD i   wait for it, backward through the blocks; d(input) lands in a send buffer
 *   SEND_GRAD i  send d(input) back (non-blocking)
 *   (zb-h1: BACKWARD i is the input gradient only, and BACKWARD_WEIGHT i,
 *   later, the blocks' weight gradients; the slot is free after it)
 * After the last micro-batch: REDUCE_TIED (rank 0's chunk 0 and rank S-1's
 * chunk V-1 add their wte gradients so both copies stay equal), then the
 * step tail here: one reduction over all ranks (gradient norm, loss, step
 * statistics, auto's decisions, stop signals, warmup=auto's figures),
 * clipping and AdamW on every chunk, the step line, checkpoints,
 * validation. By default a progress thread of the transport moves the
 * messages meanwhile. */
#include "runtime/exec/pipeline.h"
#include "runtime/exec/pipeline_exec.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/mem.h"
#include "runtime/plan/cores.h"
#include "runtime/plan/device.h"
#include "runtime/ckpt/fault.h"
#include "runtime/ckpt/resume.h"
#include "runtime/observe/nvtx.h"
#include "runtime/plan/partition.h"
#include "runtime/plan/options.h"
#include "runtime/observe/report.h"

/* Preemption: a signal only sets this; the step loop acts on it (all ranks
 * agree through the step's reduction) at the next step boundary. */
static volatile sig_atomic_t stop_signal;
static int stopped_by;
static void on_stop_signal(int sig) { stop_signal = sig; }
int pz_pipeline_stopped_by(void) { return stopped_by; }

static void progress_hook(void *tp) { pz_transport_progress(tp); }

/* Simulated links (--link-mbps, --link-latency-ms, read per boundary like
 * --compress; runtime/edge/policy.h): each peer gets the link to it. */
static void set_links(exec *x) {
    for (int p = 0; p < x->S; p++) {
        double rate, lat;
        if (p == x->rank) continue;
        pz_policy_peer_link(&x->pol, x->S, x->rank, p, &rate, &lat);
        if (rate > 0 || lat > 0) pz_transport_set_link(x->tp, pz_replica_world(&x->rep, p), rate, lat);
    }
}

/* every message fits --peer-timeout on its simulated link */
static pz_status check_links(const exec *x) {
    pz_status st = PZ_OK;
    for (int cc = 0; cc < x->V; cc++)
        for (int k = FWD_TX; k <= BWD_TX && st == PZ_OK; k += BWD_TX - FWD_TX) {
            const pz_edge_end *tx = &x->ch[cc].end[k];
            if (tx->numel)
                st = pz_policy_check_message(&x->pol, x->S, tx->edge, tx->cap, k == FWD_TX ? "activation" : "gradient",
                                             x->o->net.peer_timeout);
        }
    return st;
}

/* Adds this rank's edge statistics of the step into the reduction array;
 * the rank's codec seconds are the edges' encode and decode times. Or
 * (es NULL) the codec state this rank holds: memory, and spill files. */
static double edge_sums(exec *x, double *es, double *file) {
    double mem = 0.0;
    x->codec_s = 0.0;
    for (int cc = 0; cc < x->V; cc++)
        for (int k = 0; k < 4; k++) {
            if (es) x->codec_s += pz_edge_stats_take(&x->ch[cc].end[k], es);
            else mem += pz_edge_state_bytes(&x->ch[cc].end[k], file);
        }
    return mem;
}

/* A loss or norm that is not finite: weights that were never finite are
 * not the learning rate's fault; say which rank holds them. */
static pz_status diverged(exec *x, int step, int first_step, double loss, double norm) {
    char bad[160] = "";
    double *nf = xcalloc((size_t)x->S, sizeof *nf);
    for (int cc = 0; cc < x->V; cc++)
        if (!nf[x->rank]) nf[x->rank] = pz_params_nonfinite(&x->ch[cc].stage, bad, sizeof bad);
    int mine = nf[x->rank] > 0, other = -1;
    if (exec_allreduce(x, nf, x->S) == PZ_OK)
        for (int r = 0; r < x->S && other < 0; r++)
            if (nf[r] > 0) other = r;
    free(nf);
    return pz_train_diverged(step + 1, loss, norm, mine ? x->rank : other, mine ? bad : NULL, step == first_step);
}

/* The step tail after the list ran: sends out, one reduction, auto's
 * switches, warmup=auto, the tied add, AdamW on every chunk, the step line. */
static pz_status finish_step(exec *x, int step, int first_step, double t0, double loss_sum, double *red) {
    const pz_train_opts *o = x->o;
    const pz_red_layout *L = &x->red;
    const int S = x->S;
    /* the first rank's tied add (REDUCE_TIED only sent): before its norm */
    pz_status st = holds_first(x) && x->tied_view ? exec_tied_finish(x, (uint32_t)step) : PZ_OK;
    if (st == PZ_OK) st = exec_wait_sends(x);
    if (st != PZ_OK) return st;
    /* replicas: the tied add first (the last rank's otherwise waits for the
     * norm), so that the average covers both ends' sum; then the average,
     * and the loader past the other replicas' micro-batches */
    if (x->rep.D > 1 && (st = pz_replica_sync(&x->rep, step)) != PZ_OK) return st;
    pz_replica_skip(&x->rep, &x->loader, x->tok, x->tgt, x->ids_tmp, 1);
    memset(red, 0, (size_t)L->n * sizeof *red);
    for (int cc = 0; cc < x->V; cc++) {   /* the global norm: wte counted once (rank S-1's copy equals rank 0's) */
        pz_stage *s = &x->ch[cc].stage;
        size_t skip = is_last(x, &x->ch[cc]) && S > 1 ? (size_t)s->cfg.padded_vocab_size * s->cfg.channels : 0;
        red[L->sumsq] += x->be->sumsq(s->grad_mem + skip, s->grads.numel - skip);
    }
    red[L->loss] = holds_last(x) ? loss_sum / o->model.micro : 0.0;
    red[L->tied] = holds_first(x) ? x->tied_wire : 0.0;   /* one end's message (both have the same size) */
    edge_sums(x, red + L->edges, NULL);
    red[L->ranks + 3 * x->rank + 0] = x->compute_s;
    red[L->ranks + 3 * x->rank + 1] = x->wait_s;
    red[L->ranks + 3 * x->rank + 2] = x->codec_s;
    red[L->rtt + x->rank] = holds_last(x) ? 0.0 : x->rtt0;
    red[L->hold + x->rank] = holds_first(x) ? 0.0 : x->hold0;
    red[L->stop] = stop_signal == SIGTERM;   /* ranks that got each signal */
    red[L->stop + 1] = stop_signal == SIGINT;
    /* warmup=auto: what each rank's host can hold; replicas: replica 0's
     * figure, times D so that the mean below gives it back exactly */
    red[L->kfit + x->rank] = x->rep.replica == 0 ? (double)x->kfit * x->rep.D : 0.0;
    memcpy(red + L->dp + PZ_DP_FIGS * x->rank, x->rep.fig, sizeof x->rep.fig);   /* zero without replicas */
    if (x->rep.D > 1) pz_replica_variance(&x->rep, red + L->dpvar);
    /* the link runs beside compute with gpipe and extra warm-up (autospec.h);
     * --schedule auto adds the warm-up a codec's link time needs (below), so
     * its candidates are weighed as hidden too (issue 26) */
    const int named_auto = x->spec.warmup_auto == PZ_SCHED_NAMED_AUTO;
    pz_auto_contribute(&x->au, &x->pol, step + 1,
                       x->spec.kind == PZ_SCHED_GPIPE || x->spec.warmup_extra > 0 || named_auto,
                       S == 2 ? x->tied_wire : 0.0, red + L->autod);   /* 2 ranks: every link carries wte too */
    /* replicas: each adds 1/D of its figures, so the sum over the world is
     * the replicas' mean (loss: of the global batch; the gradients are equal
     * after the average, so their norm is one replica's) */
    for (int i = 0; x->rep.D > 1 && i < L->n; i++) red[i] /= x->rep.D;
    if ((st = exec_allreduce(x, red, L->n)) != PZ_OK) return st;
    if (x->au.any) {   /* every rank switches here, between steps: no message is in flight */
        double cmax = 0.0;
        for (int r = 0; r < S; r++) cmax = fmax(cmax, red[L->ranks + 3 * r]);
        pz_auto_note_compute(&x->au, cmax);
        pz_auto_apply(&x->au, red + L->autod, step + 1, is_root(x) ? &x->met : NULL);
    }
    double norm = sqrt(red[L->sumsq]), loss = red[L->loss];
    if (!isfinite(loss) || !isfinite(norm)) return diverged(x, step, first_step, loss, norm);
    /* warmup=auto: decided from the first step (cold caches, so it may err
     * low) and decided again from the second; --schedule auto also from the
     * step after each switch of --compress auto, whose bytes it must hide */
    if (x->spec.warmup_auto && (step < 2 || x->rewarm) && S > 1 && (st = exec_auto_warmup(x, red)) != PZ_OK)
        return st;
    x->rewarm = named_auto && pz_auto_decided(&x->au, step + 1);
    if ((st = exec_tied_finish(x, (uint32_t)step)) != PZ_OK) return st;
    double t_opt = pz_now();
    float lr = 0.0f;
    PZ_RANGE_PUSH("optimizer stage %d step %d", x->rank, step);
    const int frozen = pz_replica_frozen_on(&x->rep, step);   /* v frozen: 1-bit Adam or grad-frozen-v */
    if (o->model.optim.kind == PZ_OPTIM_BINSGDM) st = pz_replica_binsgdm_step(&x->rep, step, norm, &lr);
    else if (frozen) st = pz_replica_onebit_step(&x->rep, step, norm, &lr);
    for (int cc = 0; o->model.optim.kind == PZ_OPTIM_ADAMW && !frozen && cc < x->V; cc++)
        lr = pz_optim_step(&x->ch[cc].opt, &x->ch[cc].stage, pz_clip_scale(&x->ch[cc].opt.cfg, norm));
    PZ_RANGE_POP();
    if (st != PZ_OK) return st;
    exec_trace(x, "optimizer", -1, t_opt, pz_now());
    double ms = 1e3 * (pz_now() - t0), tok_s = (double)o->model.batch * o->model.seq * o->model.micro * x->rep.D / (ms * 1e-3);
    if (is_root(x)) {
        /* --dp-variance: the error ratio where the sync averaged gradients (an
         * all-zero exact mean, or none measured, prints no dp_var) */
        const double *v = red + L->dpvar;
        pz_step_line line = {step + 1, loss, norm, ms, tok_s, lr, red[L->tied], x->rep.D > 1 ? red + L->dp : NULL,
                             o->dp.variance && v[1] > 0.0 ? v[0] / v[1] : -1.0};
        pz_report_step(stdout, &line, S, x->G - 1, red + L->edges, red + L->ranks);
        if (S * x->rep.D > 1) pz_metrics_step(&x->met, step + 1, red + L->edges, line.dp, tok_s);
        if (isatty(2)) fprintf(stderr, "\rstep %d/%d loss %.4f  %.0f ms  %.0f tok/s   ", step + 1, o->model.steps, loss, ms, tok_s);
    }
    return PZ_OK;
}

/* The summary: codec state per rank (memory, spill files) and the progress
 * threads' CPU time, the metrics' table and files on rank 0. */
static pz_status finish_run(exec *x, double t_run) {
    const int S = x->S;
    double *sb = xcalloc((size_t)3 * S, sizeof *sb);
    sb[x->rank] = edge_sums(x, NULL, &sb[S + x->rank]);
    unsigned long rounds = 0, sleeps = 0;
    int threaded = pz_transport_thread_stats(x->tp, &sb[2 * S + x->rank], &rounds, &sleeps);
    if (x->rep.replica > 0) memset(sb, 0, (size_t)3 * S * sizeof *sb);   /* replica 0's stages stand for all */
    pz_status st = exec_allreduce(x, sb, 3 * S);
    if (st == PZ_OK && is_root(x)) {
        char pt[4096];
        pz_policy_text(&x->pol, pt, sizeof pt);
        st = pz_metrics_finish(&x->met, pt, sb, sb + S, S);
        double run_s = pz_now() - t_run;   /* what the progress threads cost: CPU seconds against the run */
        if (threaded) fprintf(stderr, "pipezip train: progress threads used, in %.2f s of training:", run_s);
        for (int r = 0; threaded && r < S; r++)
            fprintf(stderr, "%s rank %d %.3f s CPU (%.1f%% of a core)%s", r ? "," : "", r, sb[2 * S + r],
                    100.0 * sb[2 * S + r] / run_s, r == S - 1 ? "\n" : "");
    }
    free(sb);
    return st;
}

static void exec_free(exec *x) {
    pz_ckpt_job_free(&x->job);
    pz_replica_free(&x->rep);
    pz_chunk *t = tied_chunk(x);
    if (x->tied_view && t)   /* a failed step left the last rank's view open */
        pz_staging_view_done(&t->stg, t->stage.grads.wte, x->tied_view,
                             (size_t)t->stage.cfg.padded_vocab_size * t->stage.cfg.channels);
    for (int cc = 0; x->ch && cc < x->V; cc++) exec_chunk_free(x, &x->ch[cc]);
    free(x->ch);
    pz_auto_free(&x->au);
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

/* the tied exchange's codec: --compress-tied, else the edges' (pz_tied_follow) */
static const char *tied_spec(const exec *x) {
    return x->o->link.compress_tied ? x->o->link.compress_tied : pz_tied_follow(&x->pol);
}
/* without --compress-tied, where edge 0-1's bwd is auto: the exchange follows its live candidate */
static int tied_auto(const exec *x) { return !x->o->link.compress_tied && pz_tied_follows_auto(&x->pol); }

/* The rank's model chunks, data, edges, buffers, after the checks that
 * need no memory: the partition, the policy's printout, the memory plan. */
static pz_status setup_model(exec *x, const pz_gpt2_config *cfg, const pz_stage_range *all, const pz_cores *cores) {
    const pz_train_opts *o = x->o;
    const int rank = x->rank;
    pz_status st;
    if (is_root(x) && x->S > 1) {
        if (x->V > 1) fprintf(stderr, "interleaved: %d chunks, rank r holds chunks r, r+%d, ...:\n", x->G, x->S);
        pz_partition_print(stderr, cfg, o->model.seq, x->G, all);
        const char *ts = tied_spec(x) ? tied_spec(x) : tied_auto(x) ? "auto's live bwd candidate" : NULL;
        pz_train_print_policy(stderr, &o->link, &x->pol, x->V, ts);
    }
    if ((st = pz_schedule_build(&x->sched, &x->spec, rank, x->S, o->model.micro)) != PZ_OK) return st;
    {   /* before anything big is allocated: refuse a run that cannot fit */
        pz_mem_job mj = {cfg, all, &x->spec, &x->pol, x->S, o->model.batch, o->model.seq, o->model.micro,
                         x->be->host_memory, x->rep.D > 1 ? pz_replica_plan_bytes : NULL, &x->rep};
        char prefix[32] = "";
        if (x->S > 1) snprintf(prefix, sizeof prefix, "rank %d: ", rank);
        /* replicas: the plan knows stages, not replicas: this rank alone (docs/data-parallel.md) */
        int first = x->rep.D > 1 ? rank : rank - cores->local_rank, count = x->rep.D > 1 ? 1 : cores->local_ranks;
        if ((st = pz_mem_check(&mj, rank, first, count, prefix)) != PZ_OK) return st;
        if (x->spec.warmup_auto) x->kfit = pz_mem_max_warmup(&mj, first, count, o->model.micro);
    }
    pz_optim_config oc = o->model.optim;
    oc.total_steps = o->model.steps;
    if (!o->model.warmup_given) oc.warmup_steps = o->model.steps / 10;
    size_t BT = (size_t)o->model.batch * o->model.seq;
    x->act_bytes = BT * (size_t)cfg->channels * sizeof(float);
    x->ch = xcalloc((size_t)x->V, sizeof *x->ch);
    if ((st = pz_auto_init(&x->au, &x->pol, o->model.micro, 4 * x->V, o->model.batch, o->model.seq, cfg->channels)) != PZ_OK) return st;
    for (int cc = 0; cc < x->V; cc++) {
        pz_chunk *c = &x->ch[cc];
        c->g = cc * x->S + rank;
        if ((st = pz_model_create_stage(&c->stage, x->be, cfg, &all[c->g], o->model.init, (uint64_t)o->model.seed, o->model.batch,
                                        o->model.seq)) != PZ_OK ||
            (st = pz_optim_init(&c->opt, &c->stage, &oc)) != PZ_OK || (st = exec_edges(x, c)) != PZ_OK)
            return st;
        /* every B the input half (zb-h1, auto past stage 0): slots keep the matmuls' output gradients */
        c->stage.defer_weights = x->spec.kind == PZ_SCHED_ZBH1 || pz_sched_defers(&x->spec, c->g, x->S) > 0;
    }
    const int V = cfg->padded_vocab_size, C = cfg->channels;
    if (tied_chunk(x) && (st = tied_auto(x) ? pz_tied_init_auto(&x->tied, &x->au.specs[PZ_BWD], x->au.cur[PZ_BWD], V, C)
                                            : pz_tied_init(&x->tied, tied_spec(x), V, C)) != PZ_OK)
        return st;
    x->au.tied_follows = tied_auto(x);
    if (holds_first(x) || holds_last(x)) {
        if ((st = pz_dataset_open(&x->train, o->model.data, o->model.seq, cfg->vocab_size)) != PZ_OK ||
            (st = pz_loader_init(&x->loader, &x->train, x->flags->model.batch, 1, (uint64_t)o->model.seed)) != PZ_OK ||
            (o->model.val_data && (st = pz_dataset_open(&x->val, o->model.val_data, o->model.seq, cfg->vocab_size)) != PZ_OK))
            return st;
    }
    x->tok = xcalloc(BT << x->halves, sizeof(int));   /* the loader's batch */
    x->tgt = xcalloc(BT << x->halves, sizeof(int));
    x->ids_tmp = xcalloc((size_t)x->flags->model.batch, sizeof *x->ids_tmp);
    if ((st = check_links(x)) != PZ_OK) return st;
    exec_slots_alloc(x);
    if (x->S * x->rep.D > 1 && is_root(x) && (st = pz_metrics_init(&x->met, &x->pol, o->observe.metrics, o->model.micro, o->observe.error_metrics,
                                                          x->rep.D > 1 ? x->S : 0)) != PZ_OK)
        return st;
    if (x->au.any && is_root(x)) pz_auto_print_start(&x->au, &x->met);   /* what the steps before a decision send */
    /* the reduction, one layout for every schedule: gradient sumsq, loss,
     * tied bytes, 3 per rank (compute, wait, codec seconds), the edge
     * statistics per boundary and direction, warmup=auto's round trips
     * and holds (one each per rank), the ranks that got SIGTERM and SIGINT, warmup=auto's
     * memory fit per rank, auto's decisions per boundary and direction,
     * the data-parallel figures per rank (exec.rep.fig) */
    pz_red_layout *L = &x->red;
    L->sumsq = 0, L->loss = 1, L->tied = 2, L->ranks = 3, L->edges = L->ranks + 3 * x->S;
    L->rtt = L->edges + 2 * (x->G - 1) * PZ_EDGE_STATS_N, L->hold = L->rtt + x->S, L->stop = L->hold + x->S;
    L->kfit = L->stop + 2, L->autod = L->kfit + x->S, L->dp = L->autod + 2 * (x->G - 1) * PZ_AUTO_RED;
    L->dpvar = L->dp + PZ_DP_FIGS * x->S;
    L->n = L->dpvar + 2;
    return PZ_OK;
}

/* the replica's group, over the rank's chunks (runtime/dp/replica.h) */
static pz_status start_replica(exec *x) {
    pz_replica_chunk *rc = xcalloc((size_t)x->V, sizeof *rc);
    for (int cc = 0; cc < x->V; cc++) rc[cc] = (pz_replica_chunk){&x->ch[cc].stage, &x->ch[cc].opt, x->ch[cc].g};
    pz_status st = pz_replica_start(&x->rep, x->tp, x->be, rc, &x->trace, exec_tied_add, x);
    free(rc);
    return st;
}

/* The transport, the fingerprint the ranks must agree on, the links. */
static pz_status setup_transport(exec *x, const pz_gpt2_config *cfg, const char *master_addr, int master_port) {
    const pz_train_opts *o = x->o;
    pz_transport_opts to = {x->rep.wrank, x->S * x->rep.D, master_addr, master_port, o->net.peer_timeout, o->net.peer_timeout,
                            !o->net.progress_inline, o->net.job_secret, o->net.job_secret_len};
    pz_status st = pz_transport_init(&x->tp, &to);
    if (st != PZ_OK) return st;
    pz_transport_set_names(x->tp, &(pz_rank_layout){x->S, x->rep.D, o->dp.layout});
    /* authenticated: now the ranks must agree on what they compute, and on the job */
    if ((st = exec_job_start(x, cfg)) != PZ_OK) return st;   /* every rank has the verdict: the caller closes the transport */
    if ((st = start_replica(x)) != PZ_OK) return st;
    set_links(x);
    pz_fault_flip(x->tp, x->rep.wrank, o->ckpt.resume == NULL);
    pz_staging_report(&x->ch[0].stg, x->tp, x->rep.wrank);
    for (int cc = 0; o->net.progress_inline && cc < x->V; cc++) {   /* no thread: compute progresses between blocks */
        x->ch[cc].stage.between_blocks = progress_hook;
        x->ch[cc].stage.between_blocks_ctx = x->tp;
    }
    return PZ_OK;
}

/* The steps: the list, the step tail, a stop, checkpoints, validation. */
static pz_status train_steps(exec *x, int *stopped) {
    const pz_train_opts *o = x->o;
    uint32_t val_round = 0;
    int first_step = 0;
    pz_status st = PZ_OK;
    double *red = xcalloc((size_t)x->red.n, sizeof *red);
    pz_fault_arm(o->ckpt.resume == NULL);
    if (o->ckpt.resume && (st = exec_resume(x, &first_step)) == PZ_OK && o->model.val_every > 0)
        val_round = (uint32_t)(first_step / o->model.val_every);   /* the validations the run had done */
    if (o->ckpt.resume && st == PZ_OK && first_step > 0 && x->au.any && is_root(x)) pz_auto_metrics_sync(&x->au, &x->met);
    double t_run = pz_now();
    /* the tests' check that replicas stay identical after every step (else at checkpoints) */
    const char *ce = getenv("PIPEZIP_DP_CHECK");
    const int dp_check_each = x->rep.D > 1 && ce && strcmp(ce, "step") == 0;
    for (int step = first_step; step < o->model.steps && st == PZ_OK; step++) {
        double t0 = pz_now(), loss_sum = 0.0;
        x->compute_s = x->wait_s = x->codec_s = 0.0;
        for (int cc = 0; cc < x->V; cc++) pz_stage_zero_grad(&x->ch[cc].stage);
        pz_replica_skip(&x->rep, &x->loader, x->tok, x->tgt, x->ids_tmp, 0);   /* replica r's block of the global batch */
        for (int k = 0; k < x->sched.n && st == PZ_OK; k++)
            st = exec_run_instr(x, &x->sched.ins[k], (uint32_t)step, &loss_sum);
        if (st != PZ_OK || (st = finish_step(x, step, first_step, t0, loss_sum, red)) != PZ_OK) break;
        if (dp_check_each && (st = exec_dp_check(x, "after a step")) != PZ_OK) break;
        /* a signal anywhere: every rank stops after this step, checkpointed */
        int last = step + 1 == o->model.steps, stop = red[x->red.stop] > 0.0 || red[x->red.stop + 1] > 0.0;
        if (stop) *stopped = stopped_by = red[x->red.stop] > 0.0 ? SIGTERM : SIGINT;
        if (stop && is_root(x))
            fprintf(stderr, "pipezip train: %s: stopping after step %d%s\n", strsignal(stopped_by), step + 1,
                    o->ckpt.dir ? ", with a checkpoint" : " (no --checkpoint-dir: no checkpoint)");
        if (o->ckpt.dir && (last || stop || (o->ckpt.every > 0 && (step + 1) % o->ckpt.every == 0)) &&
            (st = exec_checkpoint(x, step + 1)) != PZ_OK)
            break;
        pz_fault_point("step", step + 1, x->rep.wrank);
        if (stop) break;   /* no validation: a preempted machine has seconds left */
        if (o->model.val_data && o->model.val_every > 0 && ((step + 1) % o->model.val_every == 0 || last)) {
            int comp = o->link.eval_compress && pz_policy_any(&x->pol, PZ_FWD);
            if ((st = exec_validate(x, step + 1, &val_round, comp)) != PZ_OK) break;
            if (is_root(x) && isatty(2)) fprintf(stderr, "\n");
            /* the final model both ways: does it need compression at evaluation? */
            if (last && pz_policy_any(&x->pol, PZ_FWD) && (st = exec_validate(x, step + 1, &val_round, !comp)) != PZ_OK)
                break;
        }
    }
    free(red);
    if (is_root(x) && isatty(2)) fprintf(stderr, "\n");
    if (st == PZ_OK) pz_auto_report(&x->au, x->rank, pz_now() - t_run, o->model.steps - first_step);
    if (st == PZ_OK && x->S * x->rep.D > 1) st = finish_run(x, t_run);
    return st;
}

pz_status pz_pipeline_run_rank(const pz_train_opts *o, int rank, int world,
                               const char *master_addr, int master_port) {
    exec x;
    memset(&x, 0, sizeof x);
    x.o = o;
    x.S = o->sched.stages;
    pz_status st;
    if ((st = pz_train_schedule(o, &x.spec)) != PZ_OK) return st;   /* runtime/plan/options.h */
    x.V = pz_sched_chunks(&x.spec);
    x.G = x.S * x.V;
    pz_replica_place(&x.rep, o, rank, x.S, x.V);   /* stage x.rep.rank of replica x.rep.replica */
    x.rank = x.rep.rank;
    if (world != x.S * x.rep.D) {
        if (x.rep.D == 1) return pz_fail(PZ_ERR_ARG, "WORLD_SIZE %d does not match --stages %d", world, o->sched.stages);
        return pz_fail(PZ_ERR_ARG, "WORLD_SIZE %d does not match --stages %d x --replicas %d = %d processes (the world "
                       "size is the launcher's: WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS)", world, x.S,
                       x.rep.D, x.S * x.rep.D);
    }
    if (o->observe.trace) pz_trace_start(&x.trace, pz_now());
    /* threads and cores first: before any OpenMP region starts its pool */
    pz_cores cores;
    if ((st = pz_cores_setup(rank, world, master_addr, o->host.threads, o->host.bind, &cores)) != PZ_OK) return st;
    pz_cores_print(stderr, rank, &cores);
    if (!(x.be = pz_backend_for(o->host.device, x.rank, cores.threads, &st))) return st;
    pz_gpt2_config cfg;
    if ((st = pz_model_config(o->model.preset, o->model.init, o->model.heads, &cfg)) != PZ_OK) return st;
    if ((st = pz_train_policy(&o->link, pz_train_nchunks(&o->sched), &x.pol)) != PZ_OK) return st;
    x.flags = o;
    if ((x.halves = pz_sched_halves(&x.spec, x.S, o->dp.replicas, o->model.batch, o->model.micro))) {
        x.halved = *o;   /* everything below runs 2m micro-batches of B/2 (exec_next_input) */
        x.halved.model.batch /= 2;
        x.halved.model.micro *= 2;
        x.o = o = &x.halved;
    }
    struct sigaction old_term, old_int, sa = {.sa_handler = on_stop_signal};
    int handlers = 0, stopped = 0;
    pz_stage_range *all = xcalloc((size_t)x.G, sizeof *all);
    if ((st = pz_partition_chunks(&cfg, o->model.seq, x.S, x.V, o->sched.split, all)) != PZ_OK) goto cleanup;
    /* every output writable and none an input, before anything is built (rank 0 also --save, --trace, --metrics) */
    if ((st = pz_train_check_io(o, rank == 0)) != PZ_OK) goto cleanup;   /* world rank 0 writes */
    if ((st = setup_model(&x, &cfg, all, &cores)) != PZ_OK) goto cleanup;
    if (world > 1 && (st = setup_transport(&x, &cfg, master_addr, master_port)) != PZ_OK) goto cleanup;
    if (world == 1 && ((st = exec_job_start(&x, &cfg)) != PZ_OK ||   /* its checkpoints name the job */
                       (st = start_replica(&x)) != PZ_OK))              /* binsgdm's exchange with itself */
        goto cleanup;
    if (is_root(&x))
        pz_train_print_start(stderr, x.flags, &cfg, x.S, x.V, x.rep.D, pz_dataset_num_samples(&x.train), cores.threads,
                             x.spec.warmup_auto);
    if (is_root(&x) && x.halves)
        fprintf(stderr, "pipezip train: --schedule auto: each micro-batch runs as its two halves, %d of "
                "%d x %d per step\n", o->model.micro, o->model.batch, o->model.seq);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &sa, &old_int);
    handlers = 1;
    stopped_by = 0;
    st = train_steps(&x, &stopped);
    /* a stopped run is not the finished model --save names (a checkpoint, if
     * asked for, holds where it stopped) */
    if (st == PZ_OK && o->model.save && stopped && rank == 0)
        fprintf(stderr, "pipezip train: stopped early: %s not written\n", o->model.save);
    if (st == PZ_OK && o->model.save && !stopped)
        st = pz_resume_note_last_good(exec_gather_save(&x, all, o->model.save), o->ckpt.dir, &x.job);
    if (st == PZ_OK && o->observe.trace) st = pz_trace_write_fragment(&x.trace, o->observe.trace, rank, x.rank, x.rep.D > 1 ? x.rep.replica : -1);
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
    exec_free(&x);
    free(all);
    if (st == PZ_OK) pz_fault_point("end", 0, rank);   /* PIPEZIP_FAULT=end:0:RANK: freeze once finished */
    return st;
}
