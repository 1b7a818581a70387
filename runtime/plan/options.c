/* options.c: see options.h. */
#include "runtime/plan/options.h"

#include <string.h>

#include "runtime/cores.h"
#include "runtime/device.h"

void pz_train_words_default(pz_train_words *w) {
    w->eval_compress = "on";
    w->error_metrics = "on";
    w->bind = "cores";
    w->progress = "thread";
    w->max_restarts = 0;
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

pz_status pz_train_sched(const pz_train_opts *o, pz_sched_spec *sp) {
    return pz_sched_of_flags(o->schedule, o->virtual_stages, sp);
}

int pz_sched_chunks(const pz_sched_spec *sp) {
    return sp->kind == PZ_SCHED_INTERLEAVED && sp->virtual_stages > 1 ? sp->virtual_stages : 1;
}

int pz_train_nchunks(const pz_train_opts *o) {
    pz_sched_spec sp;
    return pz_train_sched(o, &sp) != PZ_OK ? o->stages : o->stages * pz_sched_chunks(&sp);
}

pz_status pz_train_check(const pz_train_opts *o, const pz_sched_spec *sp) {
    const int V = pz_sched_chunks(sp);
    const char *v = o->schedule;
    if (!o->data) return pz_fail(PZ_ERR_ARG, "--data is required (token shards; see 'pipezip tokenize')");
    if (V == 1) return PZ_OK;
    if (o->stages < 2)
        return pz_fail(PZ_ERR_ARG, "--schedule %s: interleaving needs --stages 2 or more (one process would hold "
                       "all %d chunks: train it with the default schedule)", v, V);
    if ((long)o->micro * V > 65536)
        return pz_fail(PZ_ERR_ARG, "--schedule %s: --micro-batches %d x %d chunks is over 65536 (the message tags)",
                       v, o->micro, V);
    if (o->micro % o->stages != 0)
        return pz_fail(PZ_ERR_ARG, "--schedule %s: --micro-batches %d must be a multiple of --stages %d", v, o->micro,
                       o->stages);
    if (o->split) {
        int n = 1;
        for (const char *q = o->split; *q; q++) n += *q == ',';
        if (n != o->stages * V)
            return pz_fail(PZ_ERR_ARG, "--split '%s' names %d pieces; --schedule %s with --stages %d cuts the model "
                           "into %d chunks: give blocks per chunk, in model order (rank r holds chunks r, r+%d, ...)",
                           o->split, n, v, o->stages, o->stages * V, o->stages);
    }
    return PZ_OK;
}

pz_status pz_train_schedule(const pz_train_opts *o, pz_sched_spec *sp) {
    pz_status st = pz_train_sched(o, sp);
    return st == PZ_OK ? pz_train_check(o, sp) : st;
}

static pz_status on_off(const char *flag, const char *v, int *out) {
    if (strcmp(v, "on") == 0) *out = 1;
    else if (strcmp(v, "off") == 0) *out = 0;
    else return pz_fail(PZ_ERR_ARG, "%s: expected on or off, got '%s'", flag, v);
    return PZ_OK;
}

/* flags that act on what crosses stage boundaries, with one stage */
static const char *pipeline_only(const pz_train_opts *o) {
    return o->stages > 1 ? NULL : o->trace ? "--trace" : o->split ? "--split" : o->compress ? "--compress"
         : o->policy_file ? "--policy-file" : o->link_mbps ? "--link-mbps" : o->link_latency ? "--link-latency-ms"
         : o->compress_tied ? "--compress-tied" : o->metrics ? "--metrics"
         : o->job_secret_file ? "--job-secret-file" : NULL;
}

pz_status pz_train_opts_check(pz_train_opts *o, const pz_train_words *w, pz_sched_spec *sched) {
    pz_status st;
    if ((st = on_off("--eval-compress", w->eval_compress, &o->eval_compress)) != PZ_OK ||
        (st = on_off("--error-metrics", w->error_metrics, &o->error_metrics)) != PZ_OK ||
        (st = pz_cores_parse_bind(w->bind, &o->bind)) != PZ_OK)
        return st;
    if (strcmp(w->progress, "thread") != 0 && strcmp(w->progress, "inline") != 0)
        return pz_fail(PZ_ERR_ARG, "--progress must be thread or inline, not '%s'", w->progress);
    o->progress_inline = strcmp(w->progress, "inline") == 0;
    if (!o->checkpoint_dir && o->checkpoint_every > 0)
        return pz_fail(PZ_ERR_ARG, "--checkpoint-every needs --checkpoint-dir");
    if (w->max_restarts > 0 && !o->checkpoint_dir)
        return pz_fail(PZ_ERR_ARG, "--max-restarts needs --checkpoint-dir (restarts resume from there)");
    if (o->resume && strcmp(o->resume, "auto") == 0 && !o->checkpoint_dir)
        return pz_fail(PZ_ERR_ARG, "--resume auto looks in --checkpoint-dir, which is not given");
    pz_sched_spec sp;
    if ((st = pz_train_schedule(o, &sp)) != PZ_OK) return st;
    if (sched) *sched = sp;
    if ((st = pz_device_check(o->device, o->stages)) != PZ_OK) return st;
    if (o->dump_edge && o->stages < 2)
        return pz_fail(PZ_ERR_ARG, "--dump-edge writes what crosses the pipeline's edges: it needs --stages 2 or more");
    if (o->dump_edge > o->steps)
        return pz_fail(PZ_ERR_ARG, "--dump-edge %d: the run has only %d steps", o->dump_edge, o->steps);
    const char *only = pipeline_only(o);
    if (only)
        return pz_fail(PZ_ERR_ARG, "%s needs --stages 2 or more (it acts on what crosses stage boundaries)", only);
    return PZ_OK;
}
