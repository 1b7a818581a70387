/* options.c: see options.h. */
#include "runtime/plan/options.h"

#include <stdio.h>
#include <string.h>

#include "base/flags.h"
#include "compress/core/codec.h"
#include "stages/binsgdm.h"

#include "runtime/plan/cores.h"
#include "runtime/plan/device.h"
#include "runtime/net/jobsecret.h"

void pz_train_words_default(pz_train_words *w) {
    w->eval_compress = "on";
    w->error_metrics = "on";
    w->bind = "cores";
    w->progress = "thread";
    w->max_restarts = 0;
    w->layout = "stage-major";
    w->dp_reduce = NULL;
    w->optimizer = "adamw";
    w->dp_bucket_given = 0;
    w->dp_variance = "off";
    w->dp_what = "grad";
    w->check = 0;
}

pz_status pz_sched_of_flags(const char *schedule, int virtual_stages, pz_sched_spec *sp) {
    pz_status st = pz_sched_parse(schedule, sp);
    if (st != PZ_OK) return st;
    if (virtual_stages) {
        if (sp->kind != PZ_SCHED_INTERLEAVED)
            return pz_fail(PZ_ERR_ARG, "--virtual-stages %d needs --schedule interleaved, not %s", virtual_stages,
                           schedule);
        if (sp->virtual_stages && sp->virtual_stages != virtual_stages)
            return pz_fail(PZ_ERR_ARG, "--virtual-stages %d contradicts --schedule %s", virtual_stages, schedule);
        sp->virtual_stages = virtual_stages;
    }
    if (sp->kind == PZ_SCHED_INTERLEAVED && !sp->virtual_stages)
        return pz_fail(PZ_ERR_ARG, "--schedule interleaved needs the model chunks per stage: interleaved:v=V or "
                       "--virtual-stages V");
    return PZ_OK;
}

pz_status pz_train_sched(const pz_sched_opts *s, pz_sched_spec *sp) {
    return pz_sched_of_flags(s->name, s->virtual_stages, sp);
}

int pz_sched_chunks(const pz_sched_spec *sp) {
    return sp->kind == PZ_SCHED_INTERLEAVED && sp->virtual_stages > 1 ? sp->virtual_stages : 1;
}

int pz_train_nchunks(const pz_sched_opts *s) {
    pz_sched_spec sp;
    return pz_train_sched(s, &sp) != PZ_OK ? s->stages : s->stages * pz_sched_chunks(&sp);
}

pz_status pz_train_policy(const pz_link_opts *l, int nchunks, pz_policy *p) {
    pz_policy_init(p, nchunks);
    pz_status st = PZ_OK;
    if (l->policy_file) st = pz_policy_parse_file(p, l->policy_file);
    if (st == PZ_OK && l->compress) st = pz_policy_parse(p, l->compress, "--compress");
    if (st == PZ_OK && l->mbps) st = pz_policy_parse_mbps(p, l->mbps, "--link-mbps");
    if (st == PZ_OK && l->latency_ms) st = pz_policy_parse_latency(p, l->latency_ms, "--link-latency-ms");
    if (st != PZ_OK) pz_policy_free(p);
    return st;
}

pz_status pz_train_check(const pz_train_opts *o, const pz_sched_spec *sp) {
    const int V = pz_sched_chunks(sp);
    const char *v = o->sched.name;
    if (!o->model.data) return pz_fail(PZ_ERR_ARG, "--data is required (token shards; see 'pipezip tokenize')");
    if (V == 1) return PZ_OK;
    if (o->sched.stages < 2)
        return pz_fail(PZ_ERR_ARG, "--schedule %s: interleaving needs --stages 2 or more (one process would hold "
                       "all %d chunks: train it with the default schedule)", v, V);
    if ((long)o->model.micro * V > 65536)
        return pz_fail(PZ_ERR_ARG, "--schedule %s: --micro-batches %d x %d chunks is over 65536 (the message tags)",
                       v, o->model.micro, V);
    if (o->model.micro % o->sched.stages != 0)
        return pz_fail(PZ_ERR_ARG, "--schedule %s: --micro-batches %d must be a multiple of --stages %d", v, o->model.micro,
                       o->sched.stages);
    if (o->sched.split) {
        int n = 1;
        for (const char *q = o->sched.split; *q; q++) n += *q == ',';
        if (n != o->sched.stages * V)
            return pz_fail(PZ_ERR_ARG, "--split '%s' names %d pieces; --schedule %s with --stages %d cuts the model "
                           "into %d chunks: give blocks per chunk, in model order (rank r holds chunks r, r+%d, ...)",
                           o->sched.split, n, v, o->sched.stages, o->sched.stages * V, o->sched.stages);
    }
    return PZ_OK;
}

pz_status pz_train_schedule(const pz_train_opts *o, pz_sched_spec *sp) {
    pz_status st = pz_train_sched(&o->sched, sp);
    return st == PZ_OK ? pz_train_check(o, sp) : st;
}

static pz_status on_off(const char *flag, const char *v, int *out) {
    if (strcmp(v, "on") == 0) *out = 1;
    else if (strcmp(v, "off") == 0) *out = 0;
    else return pz_fail(PZ_ERR_ARG, "%s: expected on or off, got '%s'", flag, v);
    return PZ_OK;
}

/* flags that act on what crosses stage boundaries, with one stage (--trace
 * and --metrics also show the replicas' average) */
static const char *pipeline_only(const pz_train_opts *o) {
    const int dp = o->dp.replicas > 1;
    return o->sched.stages > 1 ? NULL : o->observe.trace && !dp ? "--trace" : o->sched.split ? "--split"
         : o->link.compress ? "--compress" : o->link.policy_file ? "--policy-file" : o->link.mbps ? "--link-mbps"
         : o->link.latency_ms ? "--link-latency-ms" : o->link.compress_tied ? "--compress-tied"
         : o->observe.metrics && !dp ? "--metrics" : o->net.job_secret_file ? "--job-secret-file" : NULL;
}

/* --replicas D: the world is S x D ranks, and what the data-parallel path
 * does not do yet is refused here, before anything starts. */
static pz_status replicas_check(pz_train_opts *o, const pz_train_words *w) {
    if (strcmp(w->layout, "stage-major") == 0) o->dp.layout = 0;
    else if (strcmp(w->layout, "replica-major") == 0) o->dp.layout = 1;
    else return pz_fail(PZ_ERR_ARG, "--layout must be stage-major or replica-major, not '%s'", w->layout);
    if (o->dp.replicas < 1) return pz_fail(PZ_ERR_ARG, "--replicas %d: at least 1", o->dp.replicas);
    if ((long)o->sched.stages * o->dp.replicas > PZ_TRAIN_MAX_WORLD)
        return pz_fail(PZ_ERR_ARG, "--stages %d x --replicas %d = %ld processes, over the %d ranks a job may have "
                       "(the transport's tags)", o->sched.stages, o->dp.replicas, (long)o->sched.stages * o->dp.replicas,
                       PZ_TRAIN_MAX_WORLD);
    if (o->dp.replicas == 1) {
        if (o->dp.layout) return pz_fail(PZ_ERR_ARG, "--layout needs --replicas 2 or more");
        const char *link = o->dp.link_mbps > 0 ? "--dp-link-mbps" : o->dp.link_latency_ms > 0 ? "--dp-link-latency-ms" : NULL;
        if (link)
            return pz_fail(PZ_ERR_ARG, "%s needs --replicas 2 or more (it simulates the links between data-parallel "
                           "replicas; --link-mbps and --link-latency-ms simulate the pipeline's)", link);
        if (w->dp_bucket_given) return pz_fail(PZ_ERR_ARG, "--dp-bucket-mb needs --replicas 2 or more");
        if (o->dp.variance) return pz_fail(PZ_ERR_ARG, "--dp-variance on needs --replicas 2 or more");
        return PZ_OK;
    }
    /* interleaving, warmup=auto, --compress auto and --dump-edge work with
     * replicas: what the autos decide comes from the step's one reduction
     * over all S x D ranks, so every replica decides the same (checked with
     * the parameters, pz_replica_check). --trace: each rank writes its world
     * rank's fragment; --metrics: world rank 0 writes. */
    if (strcmp(o->host.device, "cpu") != 0)
        return pz_fail(PZ_ERR_ARG, "--replicas needs --device cpu for now (docs/data-parallel.md)");
    return PZ_OK;
}

/* --optimizer binsgdm: its 1-bit exchange is its own (runtime/dp/
 * replica.c), so it takes no --dp-compress; on the CPU only. */
static pz_status optimizer_check(pz_train_opts *o, const pz_train_words *w) {
    if (strcmp(w->optimizer, "adamw") == 0) {
        o->model.optim.kind = PZ_OPTIM_ADAMW;
        return PZ_OK;
    }
    if (strcmp(w->optimizer, "binsgdm") != 0)
        return pz_fail(PZ_ERR_ARG, "--optimizer must be adamw or binsgdm, not '%s'", w->optimizer);
    o->model.optim.kind = PZ_OPTIM_BINSGDM;
    if (o->dp.compress && strcmp(o->dp.compress, "none") != 0)
        return pz_fail(PZ_ERR_ARG, "--optimizer binsgdm sends its own 1-bit messages (a binary randomisation of m/b, "
                       "codec " PZ_BINSGDM_SPEC "); --dp-compress '%s' is the codec of AdamW's gradient average: "
                       "drop it", o->dp.compress);
    if (strcmp(o->host.device, "cpu") != 0)
        return pz_fail(PZ_ERR_ARG, "--optimizer binsgdm runs on --device cpu only (its update is plain host loops)");
    return PZ_OK;
}

/* --dp-compress-what momentum (1-bit Adam, runtime/dp/onebit.c) and
 * grad-frozen-v: AdamW's v freezes when the warm-up ends, so there must be
 * one (a v of 0 would divide by eps); the tied embedding's two copies
 * (S > 1) would need a momentum exchange of their own, which only binsgdm
 * has (grad-frozen-v averages their summed gradient, as grad does). */
static pz_status momentum_check(pz_train_opts *o, const pz_train_words *w) {
    o->dp.momentum = strcmp(w->dp_what, "momentum") == 0;
    o->dp.freeze_v = o->dp.momentum || strcmp(w->dp_what, "grad-frozen-v") == 0;
    if (!o->dp.freeze_v && strcmp(w->dp_what, "grad") != 0)
        return pz_fail(PZ_ERR_ARG, "--dp-compress-what must be grad, grad-frozen-v or momentum, not '%s'", w->dp_what);
    if (o->dp.freeze_v && o->dp.warmup < 1)
        return pz_fail(PZ_ERR_ARG, "--dp-compress-what %s needs --dp-warmup N >= 1: AdamW's second moment is "
                       "frozen when the warm-up ends (1-bit Adam), and without one it would be zero", w->dp_what);
    if (o->dp.momentum && o->sched.stages > 1)
        return pz_fail(PZ_ERR_ARG, "--dp-compress-what momentum needs --stages 1 for now: the tied embedding's copies "
                       "on the first and the last stage would get different momentum estimates");
    return PZ_OK;
}

/* --dp-compress (or binsgdm's exchange) and its companions: the codec must
 * exist and keep no state (the reduction's error feedback is its own), the
 * mode be known, the hosts divide D. Checked here, before any process starts. */
static pz_status dp_compress_check(pz_train_opts *o, const pz_train_words *w) {
    if (o->dp.compress && strcmp(o->dp.compress, "none") == 0) o->dp.compress = NULL;
    const int bsgd = o->model.optim.kind == PZ_OPTIM_BINSGDM, compressed = o->dp.compress || bsgd;
    const char *needs = !compressed && w->dp_reduce ? "--dp-reduce" : !compressed && o->dp.warmup ? "--dp-warmup"
                      : o->dp.hosts && (!w->dp_reduce || strcmp(w->dp_reduce, "hierarchical") != 0) ? "--dp-hosts" : NULL;
    if (needs)
        return pz_fail(PZ_ERR_ARG, "%s needs --dp-compress SPEC (or --optimizer binsgdm)%s", needs,
                       strcmp(needs, "--dp-hosts") == 0 ? " and --dp-reduce hierarchical" : "");
    if (!o->dp.compress && strcmp(w->dp_what, "grad") != 0)
        return pz_fail(PZ_ERR_ARG, "--dp-compress-what %s needs --dp-compress SPEC (and --optimizer adamw)", w->dp_what);
    if (!compressed) return PZ_OK;
    if (o->dp.replicas < 2 && !bsgd) return pz_fail(PZ_ERR_ARG, "--dp-compress needs --replicas 2 or more");
    static const char *const modes[] = {"allgather", "twophase", "hierarchical"};
    o->dp.reduce = o->dp.replicas == 2 ? 1 : 2;   /* the default: all-gather for 2, two-phase above */
    for (int m = 0; w->dp_reduce && m < 3; m++)
        if (strcmp(w->dp_reduce, modes[m]) == 0) o->dp.reduce = m + 1;
    if (w->dp_reduce && strcmp(w->dp_reduce, modes[o->dp.reduce - 1]) != 0)
        return pz_fail(PZ_ERR_ARG, "--dp-reduce must be allgather, twophase or hierarchical, not '%s'", w->dp_reduce);
    /* no --dp-hosts: the hosts are the ranks' host names, found at start (runtime/dp/replica.c) */
    if (o->dp.reduce == 3 && o->dp.hosts && o->dp.replicas % o->dp.hosts != 0)
        return pz_fail(PZ_ERR_ARG, "--dp-reduce hierarchical needs --dp-hosts H dividing --replicas %d (H = %d), or no "
                       "--dp-hosts: then the hosts are those the ranks run on", o->dp.replicas, o->dp.hosts);
    if (bsgd) return PZ_OK;
    pz_status st = momentum_check(o, w);
    if (st != PZ_OK) return st;
    pz_codec *c = NULL;
    st = pz_codec_create_for(o->dp.compress, PZ_USE_GRADIENT, &c);
    if (st != PZ_OK) return pz_fail(PZ_ERR_ARG, "--dp-compress '%s': %s", o->dp.compress, pz_last_error());
    const char *wrapper = pz_codec_state_wrapper(c);   /* a static name: valid after the free */
    pz_codec_free(c);
    if (wrapper)
        return pz_fail(PZ_ERR_ARG, "--dp-compress '%s': its %s() wrapper keeps state across messages, which the "
                       "data-parallel reduction does not take: the reduction keeps its own error feedback (the "
                       "worker's, and with twophase the owner's); give the codec without %s()", o->dp.compress, wrapper,
                       wrapper);
    return PZ_OK;
}

pz_status pz_train_opts_check(pz_train_opts *o, const pz_train_words *w, pz_sched_spec *sched) {
    pz_status st;
    if ((st = on_off("--eval-compress", w->eval_compress, &o->link.eval_compress)) != PZ_OK ||
        (st = on_off("--error-metrics", w->error_metrics, &o->observe.error_metrics)) != PZ_OK ||
        (st = on_off("--dp-variance", w->dp_variance, &o->dp.variance)) != PZ_OK ||
        (st = pz_cores_parse_bind(w->bind, &o->host.bind)) != PZ_OK)
        return st;
    if (strcmp(w->progress, "thread") != 0 && strcmp(w->progress, "inline") != 0)
        return pz_fail(PZ_ERR_ARG, "--progress must be thread or inline, not '%s'", w->progress);
    o->net.progress_inline = strcmp(w->progress, "inline") == 0;
    if (!o->ckpt.dir && o->ckpt.every > 0)
        return pz_fail(PZ_ERR_ARG, "--checkpoint-every needs --checkpoint-dir");
    if (w->max_restarts > 0 && !o->ckpt.dir)
        return pz_fail(PZ_ERR_ARG, "--max-restarts needs --checkpoint-dir (restarts resume from there)");
    if (o->ckpt.resume && strcmp(o->ckpt.resume, "auto") == 0 && !o->ckpt.dir)
        return pz_fail(PZ_ERR_ARG, "--resume auto looks in --checkpoint-dir, which is not given");
    pz_sched_spec sp;
    if ((st = pz_train_schedule(o, &sp)) != PZ_OK) return st;
    if ((st = replicas_check(o, w)) != PZ_OK || (st = optimizer_check(o, w)) != PZ_OK ||
        (st = dp_compress_check(o, w)) != PZ_OK)
        return st;
    if (sched) *sched = sp;
    if ((st = pz_device_check(o->host.device, o->sched.stages)) != PZ_OK) return st;
    if (o->observe.dump_edge && o->sched.stages < 2)
        return pz_fail(PZ_ERR_ARG, "--dump-edge writes what crosses the pipeline's edges: it needs --stages 2 or more");
    if (o->observe.dump_edge > o->model.steps)
        return pz_fail(PZ_ERR_ARG, "--dump-edge %d: the run has only %d steps", o->observe.dump_edge, o->model.steps);
    const char *only = pipeline_only(o);
    if (only)
        return pz_fail(PZ_ERR_ARG, "%s needs --stages 2 or more (it acts on what crosses stage boundaries)", only);
    return PZ_OK;
}

int pz_train_parse(int argc, char **argv, pz_train_opts *o, pz_train_words *w) {
    pz_train_opts_default(o);
    pz_train_words_default(w);
    const pz_flag fs[] = {
        {"--preset", PZ_FLAG_STR, &o->model.preset, "start from random weights of a preset: gpt2, demo, tiny", 0, 0, NULL},
        {"--init", PZ_FLAG_STR, &o->model.init, "start from a checkpoint: HF safetensors or llm.c .bin, or an HF model directory", 0, 0, NULL},
        {"--heads", PZ_FLAG_INT, &o->model.heads, "attention heads of --init when neither it nor its config.json says", 0, 65536, NULL},
        {"--data", PZ_FLAG_STR, &o->model.data, "training token shards: a file, a comma list or a glob", 0, 0, NULL},
        {"--val-data", PZ_FLAG_STR, &o->model.val_data, "validation token shards", 0, 0, NULL},
        {"--batch", PZ_FLAG_INT, &o->model.batch, "sequences per micro-batch (B)", 1, 65536, NULL},
        {"--seq", PZ_FLAG_INT, &o->model.seq, "tokens per sequence (T), at most the model's context", 1, 65536, NULL},
        {"--steps", PZ_FLAG_INT, &o->model.steps, "optimizer steps", 1, 100000000, NULL},
        {"--micro-batches", PZ_FLAG_INT, &o->model.micro, "micro-batches per step (gradients accumulate)", 1, 65535, NULL},
        {"--lr", PZ_FLAG_FLOAT, &o->model.optim.lr, "peak learning rate", 0, 10, NULL},
        {"--min-lr-frac", PZ_FLAG_FLOAT, &o->model.optim.min_lr_frac, "cosine decays to lr x this", 0, 1, NULL},
        {"--warmup", PZ_FLAG_INT, &o->model.optim.warmup_steps, "linear warm-up steps (default: steps/10)", 0, 100000000, &o->model.warmup_given},
        {"--optimizer", PZ_FLAG_STR, &w->optimizer, "adamw or binsgdm (BinSGDM/Birder: each replica's m/b sent as 1-bit binary randomisation, instead of --dp-compress; cpu only; docs/data-parallel.md)", 0, 0, NULL},
        {"--weight-decay", PZ_FLAG_FLOAT, &o->model.optim.weight_decay, "decoupled weight decay on 2-D weights (AdamW and binsgdm)", 0, 10, NULL},
        {"--beta1", PZ_FLAG_FLOAT, &o->model.optim.beta1, "AdamW beta1; binsgdm's beta (both its moments)", 0, 0.999999, NULL},
        {"--beta2", PZ_FLAG_FLOAT, &o->model.optim.beta2, "AdamW beta2 (binsgdm: unused)", 0, 0.999999, NULL},
        {"--grad-clip", PZ_FLAG_FLOAT, &o->model.optim.grad_clip, "clip the global gradient norm to this (0 = off)", 0, 1e9, NULL},
        {"--seed", PZ_FLAG_LONG, &o->model.seed, "seed for initialisation and shuffling", 0, 1e18, NULL},
        {"--val-every", PZ_FLAG_INT, &o->model.val_every, "validate every N steps (and after the last step; 0 = never)", 0, 100000000, NULL},
        {"--val-batches", PZ_FLAG_INT, &o->model.val_batches, "validation batches, read in file order", 1, 100000000, NULL},
        {"--save", PZ_FLAG_STR, &o->model.save, "write the trained model at the end: DIR/ = HF directory (model.safetensors + config.json), .bin = llm.c v3, else safetensors", 0, 0, NULL},
        {"--threads", PZ_FLAG_INT, &o->host.threads, "CPU threads per process (0 = the CPUs it may use / stages on this host)", 0, 1024, NULL},
        {"--bind", PZ_FLAG_STR, &w->bind, "cores: pin each stage on this host to its own CPUs when they divide evenly; none", 0, 0, NULL},
        {"--device", PZ_FLAG_STR, &o->host.device, "cpu, cuda or cuda:tf32; or one per stage, e.g. cpu,cuda", 0, 0, NULL},
        {"--stages", PZ_FLAG_INT, &o->sched.stages, "pipeline stages, one process each (1 = this process alone)", 1, 255, NULL},
        {"--replicas", PZ_FLAG_INT, &o->dp.replicas, "data-parallel replicas of the pipeline (world = stages x replicas processes; gradients averaged every step)", 1, PZ_TRAIN_MAX_WORLD, NULL},
        {"--layout", PZ_FLAG_STR, &w->layout, "with --replicas: stage-major (rank = stage x D + replica, the default) or replica-major (rank = replica x S + stage)", 0, 0, NULL},
        {"--dp-compress", PZ_FLAG_STR, &o->dp.compress, "with --replicas: codec of the gradient average, e.g. sign, q4:group=512, topk:0.01 (stateless; error feedback is the reduction's own; default none)", 0, 0, NULL},
        {"--dp-reduce", PZ_FLAG_STR, &w->dp_reduce, "with --dp-compress or --optimizer binsgdm: allgather (default for 2 replicas), twophase (default above) or hierarchical", 0, 0, NULL},
        {"--dp-compress-what", PZ_FLAG_STR, &w->dp_what, "with --dp-compress: grad (default: the gradient average goes through the codec), grad-frozen-v (as grad, and AdamW's v is frozen after --dp-warmup N >= 1) or momentum (1-bit Adam: after --dp-warmup N >= 1 AdamW's v is frozen and the replicas' momentum goes through the codec; --stages 1)", 0, 0, NULL},
        {"--dp-warmup", PZ_FLAG_INT, &o->dp.warmup, "with --dp-compress or --optimizer binsgdm: the first N steps average uncompressed", 0, 100000000, NULL},
        {"--dp-variance", PZ_FLAG_STR, &w->dp_variance, "with --replicas, on: each step also averages the gradients exactly and reports dp_var, ||mean estimate - exact mean||^2 / ||exact mean||^2 (a diagnostic: one more uncompressed all-reduce per step, and no buckets; off by default)", 0, 0, NULL},
        {"--dp-bucket-mb", PZ_FLAG_FLOAT, &o->dp.bucket_mb, "with --replicas: MiB per bucket of the gradient average, which starts during the last backward, compressed or not (default 25; --dp-compress: its error feedback is per bucket, a resume keeps the size)", 0.0001, 4096, &w->dp_bucket_given},
        {"--dp-hosts", PZ_FLAG_INT, &o->dp.hosts, "with --dp-reduce hierarchical: the replicas form H simulated hosts (H divides --replicas); default: the hosts the ranks run on (host names)", 0, 255, NULL},
        {"--dp-link-mbps", PZ_FLAG_FLOAT, &o->dp.link_mbps, "with --replicas: simulated rate of the links between replicas, Mbit/s (0 = unlimited; with --dp-hosts only between hosts)", 0, 1e7, NULL},
        {"--dp-link-latency-ms", PZ_FLAG_FLOAT, &o->dp.link_latency_ms, "with --replicas: simulated one-way delay of the links between replicas, ms", 0, 60000, NULL},
        {"--split", PZ_FLAG_STR, &o->sched.split, "blocks per stage, e.g. 3,3,3,3 (interleaved: per chunk; default: balanced by a cost model)", 0, 0, NULL},
        {"--schedule", PZ_FLAG_STR, &o->sched.name, "pipeline schedule: auto (1f1b, with the extra warm-up of warmup=auto where the links do not keep up with compute; said on stderr and in --metrics; an even --batch runs as 2x the micro-batches of half of it), 1f1b, 1f1b:warmup=K|auto (more in flight for slow links), zb-h1 (zero bubble), gpipe or interleaved:v=V (V model chunks per stage, Megatron's interleaved 1F1B)", 0, 0, NULL},
        {"--virtual-stages", PZ_FLAG_INT, &o->sched.virtual_stages, "with --schedule interleaved: model chunks per stage (the same as interleaved:v=V; no default: one of them says V)", 1, PZ_SCHED_MAX_VIRTUAL, NULL},
        {"--peer-timeout", PZ_FLAG_FLOAT, &o->net.peer_timeout, "seconds a stage waits for a peer before failing", 0.1, 86400, NULL},
        {"--job-secret-file", PZ_FLAG_STR, &o->net.job_secret_file, "file with the secret every rank proves it holds (else $" PZ_JOB_SECRET_ENV "; the local launcher makes one)", 0, 0, NULL},
        {"--trace", PZ_FLAG_STR, &o->observe.trace, "write a Chrome/Perfetto trace JSON of all stages (pipeline only)", 0, 0, NULL},
        {"--compress", PZ_FLAG_STR, &o->link.compress, "compression policy per edge and direction (grammar below)", 0, 0, NULL},
        {"--policy-file", PZ_FLAG_STR, &o->link.policy_file, "policy clauses, one per line, # comments (before --compress)", 0, 0, NULL},
        {"--eval-compress", PZ_FLAG_STR, &w->eval_compress, "on: validate through the fwd codecs; off: uncompressed", 0, 0, NULL},
        {"--link-mbps", PZ_FLAG_STR, &o->link.mbps, "simulated link rate, Mbit/s: N, or per edge 0-1=N;*=M (0 = unlimited)", 0, 0, NULL},
        {"--link-latency-ms", PZ_FLAG_STR, &o->link.latency_ms, "simulated one-way link delay, ms: N, or per edge 0-1=N;*=M", 0, 0, NULL},
        {"--compress-tied", PZ_FLAG_STR, &o->link.compress_tied, "codec of the tied-embedding gradient exchange between the first and last stage, e.g. q8 (stateless codecs; both copies stay equal); none = exact. Default: with 2 stages, the bwd codec of edge 0-1 where it has no state (no ef, ef21, aq; with auto, its live candidate), else none", 0, 0, NULL},
        {"--checkpoint-dir", PZ_FLAG_STR, &o->ckpt.dir, "write checkpoints to resume from here (each rank its shard, then a manifest)", 0, 0, NULL},
        {"--checkpoint-every", PZ_FLAG_INT, &o->ckpt.every, "steps between checkpoints (0 = after the last step only)", 0, 100000000, NULL},
        {"--keep-checkpoints", PZ_FLAG_INT, &o->ckpt.keep, "complete checkpoints to keep, newest first", 1, 1000000, NULL},
        {"--max-restarts", PZ_FLAG_INT, &w->max_restarts, "when a rank dies, restart all from the newest checkpoint up to K times (local launcher)", 0, 1000, NULL},
        {"--check", PZ_FLAG_BOOL, &w->check, "check the command line (every flag; the policy, links and split against the model's configuration), print ok and exit without training: scripts validate their flags before slow work", 0, 0, NULL},
        {"--resume", PZ_FLAG_STR, &o->ckpt.resume, "continue from the newest complete checkpoint in DIR; auto: in --checkpoint-dir, if any", 0, 0, NULL},
        {"--progress", PZ_FLAG_STR, &w->progress, "thread: a thread per stage moves messages while it computes; inline: only between blocks", 0, 0, NULL},
        {"--metrics", PZ_FLAG_STR, &o->observe.metrics, "write per-edge metrics to PREFIX.jsonl (per step) and PREFIX.csv", 0, 0, NULL},
        {"--dump-edge", PZ_FLAG_INT, &o->observe.dump_edge, "at step N, write every tensor a stage encodes (activations, gradients) as .npy (pipeline only)", 0, 1 << 30, NULL},
        {"--dump-dir", PZ_FLAG_STR, &o->observe.dump_dir, "directory for --dump-edge (created; default edge-dump)", 0, 0, NULL},
        {"--error-metrics", PZ_FLAG_STR, &w->error_metrics, "on: senders decode their own messages to report ||x-x'||/||x||", 0, 0, NULL},
    };
    int r = pz_flags_parse("train", "usage: pipezip train (--preset NAME | --init FILE) --data SHARDS [flags]\n\n"
                        "Trains a GPT-2. With --stages S > 1 the model is cut into S stages, each in its\n"
                        "own process on this host (or, when RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT or\n"
                        "mpirun/srun variables are set, this process is one rank of such a pipeline).\n"
                        "Prints one JSON line per step on stdout:\n"
                        "  {\"step\",\"loss\",\"lr\",\"norm\",\"ms\",\"tok_s\"} and {\"step\",\"val_loss\"} lines;\n"
                        "pipelines add fwd_raw/fwd_wire/bwd_raw/bwd_wire/tied_wire bytes per step, per-stage times,\n"
                        "\"compressed\" on validation lines, and a final {\"summary\":true,...} line; replicas add\n"
                        "dp_raw/dp_wire bytes and dp_sync_ms/dp_hidden_ms (the average's time, the part hidden).\n\n"
                        "Compression policy (--compress, --policy-file; needs --stages 2 or more):\n"
                        "  policy := clause (';' clause)*     clause := [EDGE ':'] DIR=CODEC (',' DIR=CODEC)* | none | auto\n"
                        "  EDGE: I-J (J = I+1) or *   DIR: fwd (activations), bwd (gradients), both\n"
                        "  CODEC: none (raw float32) or a codec spec: fp16, bf16, q4, q8:round=nearest, nuq4,\n"
                        "         sign, topk:0.1, jointsq:1.5, ef(topk:0.1), ef21(q4), aq(q4), hadamard(q4), q8+zstd, ...\n"
                        "         (compress/README.md). A clause naming an edge beats '*'; else later wins.\n"
                        "         q<b> rounds activations to nearest, gradients (bwd, --compress-tied)\n"
                        "         stochastically (unbiased), unless the spec names round=.\n"
                        "  e.g.  --compress 'fwd=aq(q4),bwd=q8'   --compress '0-1:fwd=topk:0.2;*:bwd=q8'\n"
                        "  CODEC auto[:every=N,candidates=A/B/...,max-err=E]: the sender of each edge and\n"
                        "         direction\n"
                        "         measures every candidate's error and bytes on one micro-batch per step,\n"
                        "         and after step 2, then every N steps (default 10), predicts each one's step\n"
                        "         (messages: bytes / --link-mbps or the measured rate, plus --link-latency-ms;\n"
                        "         with gpipe, warmup=K or --schedule auto max(compute, messages / 0.9) plus\n"
                        "         the exposed fill/drain message and the tied one; with plain 1f1b or zb-h1\n"
                        "         compute plus every message) and picks the fastest, or the least error\n"
                        "         within 1% of it; only candidates within relative error E (default 0.5)\n"
                        "         when one of them is within 2x of the fastest step; error >= 1 only if all\n"
                        "         are. It starts, on a simulated link, with the fewest bytes within E on a\n"
                        "         Gaussian probe (else the first candidate); both\n"
                        "         ends switch at the step boundary. Default candidates fp16/q8/hadamard(q4)/q4/q2;\n"
                        "         no ef/ef21/aq; not with interleaved. Decisions go to stderr and --metrics.\n"
                        "         A clause 'none' or 'auto[:...]' alone covers both directions of every edge.\n"
                        "aq() keys its buffers by the loader's sample ids, which travel with activations.\n"
                        "Validation with --eval-compress on uses the fwd codec, with ef/ef21/aq replaced by\n"
                        "their inner codec (evaluation must not touch training state); at the last step\n"
                        "both ways are reported. --link-mbps and --link-latency-ms delay each message in\n"
                        "the sender as a link of that rate and one-way delay would (a simulation;\n"
                        "tools/netns_pipeline.sh shapes real links). On slow or distant links,\n"
                        "--schedule auto (the default) keeps enough micro-batches in flight to hide them.\n\n"
                        "Interleaved 1F1B (--schedule interleaved:v=V, or interleaved --virtual-stages V):\n"
                        "the model is cut into S*V chunks, stage r holding chunks r, r+S, ...; the bubble\n"
                        "shrinks V times. --micro-batches must be a multiple of --stages, --split takes\n"
                        "S*V counts, and --compress's edge I-J is the boundary between chunks I and J.",
                        argc, argv, fs, (int)(sizeof fs / sizeof fs[0]), NULL);
    if (r) return r;
    pz_status st = pz_train_opts_check(o, w, NULL);
    if (st != PZ_OK) {
        fprintf(stderr, "pipezip train: error: %s\n", pz_last_error());
        return 1;
    }
    return 0;
}
