/* train.c: what training needs around the loop: the flags' defaults, the
 * model built from a preset or a checkpoint, saving it, and the evaluation
 * loss of `pipezip eval`. The loop itself is runtime/exec/pipeline.c's, for one
 * stage as for many. */
#include "runtime/plan/train.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/isa.h"
#include "stages/gpt2_checkpoint.h"
#include "runtime/plan/device.h"
#include "schedules/schedule.h"
#include "runtime/observe/nvtx.h"
#include "base/clock.h"
#include "base/io/file.h"
#include "base/io/iocheck.h"
#include "base/mem.h"

/* --save's places: a directory save writes DIR/model.safetensors and
 * DIR/config.json (pz_params_save), else the file itself */
static void add_save(pz_io_set *io, const char *save) {
    if (!pz_save_is_dir(save)) {
        pz_io_add(io, PZ_IO_OUT_FILE, "--save", save);
        return;
    }
    pz_io_add(io, PZ_IO_OUT_DIR, "--save", save);
    static const char *const names[] = {"model.safetensors", "config.json"};
    for (int i = 0; i < 2; i++) {
        char *p = pz_path_join(save, names[i]);
        pz_io_add(io, PZ_IO_OUT_FILE, "--save", p);
        free(p);
    }
}

/* a flag's input: a file, or an HF model directory and the files in it */
static void add_input(pz_io_set *io, const char *flag, const char *path) {
    pz_io_add(io, PZ_IO_IN, flag, path);
    DIR *d = path ? opendir(path) : NULL;
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char *p = pz_path_join(path, e->d_name);
        pz_io_add(io, PZ_IO_IN, flag, p);
        free(p);
    }
    closedir(d);
}

static void add_shards(pz_io_set *io, const char *flag, const char *spec) {
    char **paths = NULL;
    size_t n = 0;
    if (!spec || pz_dataset_paths(spec, &paths, &n) != PZ_OK) return;   /* the loader reports a bad spec */
    for (size_t i = 0; i < n; i++) {
        pz_io_add(io, PZ_IO_IN, flag, paths[i]);
        free(paths[i]);
    }
    free(paths);
}

pz_status pz_train_check_io(const pz_train_opts *o, int writes_rank0) {
    pz_io_set io = {0};
    add_shards(&io, "--data", o->model.data);
    add_shards(&io, "--val-data", o->model.val_data);
    add_input(&io, "--init", o->model.init);
    pz_io_add(&io, PZ_IO_IN, "--policy-file", o->link.policy_file);
    pz_io_add(&io, PZ_IO_IN, "--job-secret-file", o->net.job_secret_file);
    pz_io_add(&io, PZ_IO_OUT_DIR, "--checkpoint-dir", o->ckpt.dir);
    if (o->observe.dump_edge) pz_io_add(&io, PZ_IO_OUT_DIR, "--dump-dir", o->observe.dump_dir);
    if (writes_rank0 && o->model.save) add_save(&io, o->model.save);
    if (writes_rank0) pz_io_add(&io, PZ_IO_OUT_FILE, "--trace", o->observe.trace);
    for (int i = 0; writes_rank0 && o->observe.metrics && i < 2; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s.%s", o->observe.metrics, i ? "csv" : "jsonl");
        pz_io_add(&io, PZ_IO_OUT_FILE, "--metrics", path);
    }
    pz_status st = pz_io_check(&io);
    pz_io_free(&io);
    return st;
}

void pz_train_opts_default(pz_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->model.batch = 8;
    o->model.seq = 64;
    o->model.steps = 100;
    o->model.micro = 1;
    o->sched.stages = 1;
    o->dp.replicas = 1;
    o->dp.bucket_mb = 25.0f;   /* Megatron's and torch DDP's bucket size */
    o->sched.name = "auto";   /* 1f1b, with extra warm-up where the links lag (issue 26) */
    o->net.peer_timeout = 60.0f;
    o->ckpt.keep = 2;
    o->host.threads = 0;
    o->host.bind = 1;            /* PZ_BIND_CORES */
    o->host.device = "cpu";
    o->model.val_every = 25;
    o->model.val_batches = 8;
    o->model.seed = 1337;
    o->link.eval_compress = 1;
    o->observe.error_metrics = 1;
    o->observe.dump_dir = "edge-dump";
    pz_optim_config_default(&o->model.optim);
}

pz_status pz_model_config(const char *preset, const char *init, int heads, pz_gpt2_config *cfg) {
    if ((preset == NULL) == (init == NULL))
        return pz_fail(PZ_ERR_ARG, "give exactly one of --preset NAME or --init FILE|DIR");
    if (preset && heads > 0) return pz_fail(PZ_ERR_ARG, "--heads is for a model file or directory, not a preset");
    if (preset) return pz_gpt2_preset(preset, cfg);
    pz_ckpt_format fmt;
    return pz_ckpt_read_config_heads(init, heads, cfg, &fmt);
}

pz_status pz_model_create_stage(pz_stage *s, const pz_backend *be, const pz_gpt2_config *cfg,
                                const pz_stage_range *r, const char *init, uint64_t seed, int B, int T) {
    pz_status st = pz_stage_init(s, be, cfg, r, B, T);
    if (st != PZ_OK) return st;
    /* parameters are built on the host and copied, so a device backend works too;
     * initialisation draws per named tensor, so any split gives the same model */
    float *host = xmalloc(s->params.numel * sizeof(float));
    pz_gpt2_params hp;
    pz_gpt2_params_bind(&hp, cfg, r, host);
    if (!init) pz_gpt2_params_init(&hp, seed);
    else st = pz_ckpt_load(init, &hp);
    if (st == PZ_OK) be->from_host(s->param_mem, host, s->params.numel * sizeof(float));
    pz_gpt2_params_unbind(&hp);
    free(host);
    if (st != PZ_OK) pz_stage_free(s);
    return st;
}

pz_status pz_model_create(pz_stage *s, const pz_backend *be, const char *preset,
                          const char *init, int heads, uint64_t seed, int B, int T) {
    pz_gpt2_config cfg;
    pz_status st = pz_model_config(preset, init, heads, &cfg);
    if (st != PZ_OK) return st;
    pz_stage_range r = pz_whole_model(&cfg);
    return pz_model_create_stage(s, be, &cfg, &r, init, seed, B, T);
}

int pz_save_is_dir(const char *path) {
    struct stat sb;
    size_t len = strlen(path);
    return (len > 0 && path[len - 1] == '/') || (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode));
}

pz_status pz_params_save(const pz_gpt2_params *hp, const char *path) {
    if (!pz_save_is_dir(path)) return pz_ckpt_save(path, hp, PZ_CKPT_AUTO);
    /* an HF model directory: the weights, then config.json, each atomic */
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return pz_fail(PZ_ERR_IO, "--save %s: cannot create the directory: %s", path, strerror(errno));
    size_t n = strlen(path) + 32;
    char *weights = xmalloc(n), *config = xmalloc(n);
    snprintf(weights, n, "%s/model.safetensors", path);
    snprintf(config, n, "%s/config.json", path);
    pz_status st = pz_ckpt_save(weights, hp, PZ_CKPT_SAFETENSORS);
    if (st == PZ_OK) st = pz_hf_config_write(config, &hp->cfg);
    free(weights);
    free(config);
    return st;
}

pz_status pz_model_save(const pz_stage *s, const char *path) {
    float *host = xmalloc(s->params.numel * sizeof(float));
    s->be->to_host(host, s->param_mem, s->params.numel * sizeof(float));
    pz_gpt2_params hp;
    pz_gpt2_params_bind(&hp, &s->cfg, &s->range, host);
    pz_status st = pz_params_save(&hp, path);
    pz_gpt2_params_unbind(&hp);
    free(host);
    return st;
}

pz_status pz_eval_loss(pz_stage *s, pz_acts *a, const pz_dataset *d, int nbatches,
                       double *loss, int *batches_used) {
    pz_loader l;
    pz_status st = pz_loader_init(&l, d, s->B, 0, 0);
    if (st != PZ_OK) return st;
    int avail = (int)pz_loader_batches_per_epoch(&l);
    if (avail < 1) {
        pz_loader_free(&l);
        return pz_fail(PZ_ERR_SHAPE, "evaluation data has fewer than one batch of %d x %d tokens",
                       s->B, s->T);
    }
    int n = (nbatches <= 0 || nbatches > avail) ? avail : nbatches;
    size_t BT = (size_t)s->B * s->T;
    int *inp = xmalloc(BT * sizeof(int)), *tgt = xmalloc(BT * sizeof(int));
    double sum = 0.0;
    for (int k = 0; k < n; k++) {
        pz_loader_next(&l, inp, tgt, NULL);
        pz_stage_forward(s, a, inp, NULL, tgt, 0.0f);
        sum += a->loss;
    }
    free(inp);
    free(tgt);
    pz_loader_free(&l);
    *loss = sum / n;
    if (batches_used) *batches_used = n;
    return PZ_OK;
}

int pz_params_nonfinite(const pz_stage *s, char *name, size_t cap) {
    size_t n = s->params.numel;
    float *host = xmalloc(n * sizeof(float) + 1);
    s->be->to_host(host, s->param_mem, n * sizeof(float));
    int nt = pz_gpt2_params_tensors(&s->params, NULL), found = 0;
    pz_tensor_info *ti = xcalloc((size_t)nt + 1, sizeof *ti);
    pz_gpt2_params_tensors(&s->params, ti);
    for (int i = 0; i < nt && !found; i++)
        for (size_t k = 0; k < ti[i].numel; k++)
            if (!isfinite(host[ti[i].offset + k])) {
                snprintf(name, cap, "%s[%zu] = %g", ti[i].name, k, (double)host[ti[i].offset + k]);
                found = 1;
                break;
            }
    free(ti);
    free(host);
    return found;
}

void pz_train_print_start(FILE *f, const pz_train_opts *o, const pz_gpt2_config *cfg, int S, int V, int D,
                          size_t samples, int threads, int warmup_auto) {
    const pz_model_opts *m = &o->model;
    const char *es = m->micro == 1 ? "" : "es";
    if (D > 1)
        fprintf(f, "pipezip train: %d replicas x %d stage%s (%s: rank = %s), global batch %d x %d micro-batches "
                "of %d x %d, replica r takes micro-batches r*%d..r*%d+%d\n", D, S, S == 1 ? "" : "s",
                o->dp.layout ? "replica-major" : "stage-major", o->dp.layout ? "replica x S + stage" : "stage x D + replica",
                D, m->micro, m->batch, m->seq, m->micro, m->micro, m->micro - 1);
    if (S == 1)
        fprintf(f, "pipezip train: %zu parameters (L=%d NH=%d C=%d V=%d Vp=%d maxT=%d), "
                "batch %d x seq %d x %d micro-batch%s, %zu training samples, %d thread%s\n",
                pz_gpt2_numel(cfg), cfg->num_layers, cfg->num_heads, cfg->channels, cfg->vocab_size,
                cfg->padded_vocab_size, cfg->max_seq_len, m->batch, m->seq, m->micro, es, samples, threads,
                threads == 1 ? "" : "s");
    else if (V > 1)
        fprintf(f, "pipezip train: %d stages x %d chunks, %s schedule, %d micro-batch%s of %d x %d per step\n", S, V,
                o->sched.name, m->micro, es, m->batch, m->seq);
    else
        fprintf(f, "pipezip train: %d stages, %s schedule, %d micro-batch%s of %d x %d per step\n", S, o->sched.name,
                m->micro, es, m->batch, m->seq);
    if (warmup_auto && S > 1)
        fprintf(f, "pipezip train: %s: step 1 runs plain 1F1B and measures compute and links\n",
                warmup_auto == PZ_SCHED_NAMED_AUTO ? "--schedule auto" : "warmup=auto");
}

void pz_train_print_policy(FILE *f, const pz_link_opts *l, const pz_policy *pol, int V, const char *tied) {
    fprintf(f, "compression policy%s:\n", V > 1 ? " (edge I-J: the boundary between chunks I and J)" : "");
    for (int e = 0; e < pol->stages - 1; e++) fputs("  ", f), pz_policy_print_edge(f, pol, e);
    fprintf(f, "  tied exchange: %s%s\n", tied ? tied : "none (exact)",
            l->compress_tied ? "" : tied ? " (as edge 0-1's bwd; --compress-tied none keeps it exact)" : "");
    fprintf(f, "  validation: %s\n", l->eval_compress && pz_policy_any(pol, PZ_FWD)
                                         ? "through the fwd codecs (wrappers' inner codec)" : "uncompressed");
}

pz_status pz_train_diverged(int step, double loss, double norm, int rank, const char *bad, int from_start) {
    const char *hint = from_start ? " (from the starting model: check --init)" : "";
    if (rank >= 0)
        return pz_fail(PZ_ERR_ARG, "step %d: loss %g, gradient norm %g: rank %d's weights are not finite%s%s%s", step,
                       loss, norm, rank, bad ? ": " : "", bad ? bad : "", hint);
    return pz_fail(PZ_ERR_ARG, "step %d: loss %g, gradient norm %g: training diverged (try a lower --lr)", step, loss,
                   norm);
}
