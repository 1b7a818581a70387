/* pipeline_ckpt.c: what a rank reads and writes: checkpoints and --resume
 * (runtime/ckpt/resume.h for the files), --save and --dump-edge (see
 * runtime/exec/pipeline_exec.h).
 *
 * Checkpoints are written as if each global chunk were a stage of a
 * G-stage pipeline: shard g holds chunk g (parameters, AdamW moments, the
 * loader position, codec state of its boundaries g-1 and g) and the
 * manifest says G stages. By tensor name, any other layout resumes from it,
 * and it from any other. */
#include "runtime/exec/pipeline_exec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/mem.h"
#include "compress/core/codec.h"
#include "compress/core/npy.h"
#include "runtime/plan/fingerprint.h"
#include "runtime/ckpt/fault.h"
#include "runtime/ckpt/resume.h"

/* The codecs of chunk c's edge ends (and their error-metric twins), named
 * by edge, direction and role, for the checkpoint's codec state. */
static int chunk_codecs(exec *x, pz_chunk *c, const char **names, pz_codec **cs) {
    static const char *const tag[4][2] = {{"out.fwd.send", "out.fwd.send.twin"}, {"out.bwd.recv", "out.bwd.recv.twin"},
                                          {"in.fwd.recv", "in.fwd.recv.twin"},   {"in.bwd.send", "in.bwd.send.twin"}};
    int n = 0, at = 4 * (int)(c - x->ch);
    for (int k = 0; k < 4; k++) {
        if (x->au.end[at + k].live) continue;   /* auto: stateless candidates, nothing to keep (autopolicy.h) */
        pz_codec *e[2] = {c->end[k].codec, c->end[k].shadow};
        for (int j = 0; j < 2; j++)
            if (e[j]) names[n] = tag[k][j], cs[n++] = e[j];
    }
    return n;
}

pz_status exec_job_start(exec *x, const pz_gpt2_config *cfg) {
    const pz_train_opts *o = x->o;
    char *fp = pz_fingerprint_build(o, cfg, &x->pol, x->train.paths ? &x->train : NULL, x->val.paths ? &x->val : NULL);
    pz_fp_share share = {x->rank, x->replica * o->model.micro, o->model.micro};   /* this replica's block */
    pz_status st = pz_fingerprint_agree(x->tp, x->wrank, x->S * x->D, fp, &share);
    if (st == PZ_OK) st = pz_ckpt_job_start(x->tp, &o->ckpt, x->wrank, x->S * x->D, fp, &x->job);
    free(fp);
    return st;
}

/* one rank's load of a checkpoint (pz_resume_start's callback): every
 * chunk's part by tensor name, its codecs' state, auto's decisions */
static pz_status load_step(void *ctx, const char *dir, int step) {
    exec *x = ctx;
    pz_status st = PZ_OK;
    int same = 1;
    for (int cc = 0; cc < x->V && st == PZ_OK; cc++) {
        pz_chunk *c = &x->ch[cc];
        int same_c = 0;
        const char *names[8];
        pz_codec *cs[8];
        int n = chunk_codecs(x, c, names, cs);
        st = pz_resume_read_shard(dir, step, c->g, x->G, &c->stage, &c->opt, &x->loader, &same_c);
        if (st == PZ_OK && same_c) st = pz_resume_read_codecs(dir, step, c->g, names, cs, n);
        for (int i = 0; st == PZ_OK && !same_c && i < n; i++)
            if (pz_codec_keeps_state(cs[i]))
                fprintf(stderr, "pipezip train: rank %d: warning: another layout than the checkpoint's: chunk %d's %s "
                        "(%s) starts with empty state (aq: its first epoch again)\n", x->rank, c->g, names[i],
                        pz_codec_spec(cs[i]));
        same = same && same_c;
    }
    if (st == PZ_OK) st = exec_dp_load(x, dir, step);
    if (st == PZ_OK && x->au.any) {   /* auto's decisions; none there (another policy): start over */
        char *path = pz_resume_rank_path(dir, step, x->rank, ".auto");
        if (same && access(path, F_OK) == 0) {
            if ((st = pz_auto_load(&x->au, path)) == PZ_OK) st = exec_tied_follow(x);   /* tied: as auto's pick */
        } else if (is_root(x))
            fprintf(stderr, "pipezip train: the checkpoint holds no decisions of --compress auto for this "
                    "layout: it starts from its initial candidates\n");
        free(path);
    }
    return st;
}

/* --resume: the newest checkpoint of this job that loads on every rank
 * (runtime/ckpt/resume.h, pz_resume_start). *start = steps already done. */
pz_status exec_resume(exec *x, int *start) {
    const char *dir;
    pz_status st = pz_resume_start(x->tp, &x->o->ckpt, x->wrank, x->S * x->D, &x->job, load_step, x, start, &dir);
    if (st != PZ_OK || *start < 0) {
        *start = 0;
        return st;
    }
    /* replicas loaded the same shards: they must hold the same bits */
    if ((st = exec_dp_check(x, "after --resume")) != PZ_OK) return st;
    if (is_root(x)) fprintf(stderr, "pipezip train: resumed from %s, step %d\n", dir, *start);
    return PZ_OK;
}

/* Writes this step's checkpoint: every chunk its shard, then, once all are
 * durable (a collective carrying each rank's outcome), rank 0 the manifest. */
pz_status exec_checkpoint(exec *x, int step) {
    const char *dir = x->o->ckpt.dir;
    /* replicas: identical (checked), so replica 0's shards are every replica's */
    pz_status st = exec_dp_check(x, "at a checkpoint");
    if (st != PZ_OK) return st;
    for (int cc = 0; x->replica == 0 && cc < x->V && st == PZ_OK; cc++) {
        pz_chunk *c = &x->ch[cc];
        const char *names[8];
        pz_codec *cs[8];
        int n = chunk_codecs(x, c, names, cs);
        st = pz_resume_write_shard(dir, step, c->g, x->G, &c->stage, &c->opt, &x->loader, &x->job);
        if (st == PZ_OK) st = pz_resume_write_codecs(dir, step, c->g, names, cs, n);
    }
    if (st == PZ_OK) st = exec_dp_save(x, dir, step);   /* every replica its own error feedback */
    if (st == PZ_OK && x->au.any) {   /* the candidates auto goes on with */
        char *path = pz_resume_rank_path(dir, step, x->rank, ".auto");
        st = pz_auto_save(&x->au, path);
        free(path);
    }
    pz_fault_point("checkpoint", step, x->wrank);
    double bad = st != PZ_OK;
    pz_status st2 = exec_allreduce(x, &bad, 1);
    if (st2 != PZ_OK) return st2;
    /* a shard that could not be written (a full disk): none of it stays, the run goes on */
    if (bad > 0) {
        for (int cc = 0; x->replica == 0 && cc < x->V; cc++) pz_resume_abandon(dir, step, x->ch[cc].g, &x->job, cc ? PZ_OK : st);
        return PZ_OK;
    }
    if (is_root(x) && (st = pz_resume_commit(dir, step, x->G, x->o->ckpt.keep, &x->job)) == PZ_OK)
        fprintf(stderr, "pipezip train: checkpoint of step %d in %s\n", step, dir);
    else if (is_root(x)) st = pz_resume_abandon(dir, step, -1, &x->job, st);
    return st;
}

/* Copies every tensor of `from` into the tensor of the same name in `to`. */
static void copy_by_name(pz_gpt2_params *to, const pz_gpt2_params *from) {
    int nt = pz_gpt2_params_tensors(to, NULL), nf = pz_gpt2_params_tensors(from, NULL);
    pz_tensor_info *tt = xcalloc((size_t)nt, sizeof *tt), *tf = xcalloc((size_t)nf, sizeof *tf);
    pz_gpt2_params_tensors(to, tt);
    pz_gpt2_params_tensors(from, tf);
    for (int i = 0; i < nf; i++)
        for (int j = 0; j < nt; j++)
            if (strcmp(tf[i].name, tt[j].name) == 0) memcpy(tt[j].data, tf[i].data, tf[i].numel * sizeof(float));
    free(tt);
    free(tf);
}

/* --save: every rank sends its chunks' parameters to rank 0, which
 * assembles them by tensor name, whatever the split, and saves them
 * (stages/gpt2_checkpoint.h formats). */
pz_status exec_gather_save(exec *x, const pz_stage_range *all, const char *path) {
    const pz_gpt2_config *cfg = &x->ch[0].stage.cfg;
    pz_status st = PZ_OK;
    const char *w = "parameters for --save, to rank 0";
    if (x->replica > 0) return PZ_OK;   /* replica 0's pipeline holds every replica's model */
    for (int cc = 0; x->rank != 0 && cc < x->V && st == PZ_OK; cc++) {
        pz_stage *s = &x->ch[cc].stage;
        size_t bytes = s->params.numel * sizeof(float);
        float *host = xmalloc(bytes);
        x->be->to_host(host, s->param_mem, bytes);
        pz_request *r = NULL;
        st = pz_transport_send(x->tp, world_of(x, 0), pz_tag(x->wrank, 0, (uint32_t)cc, PZ_KIND_SAVE), host, bytes, w, &r);
        if (st == PZ_OK) st = pz_transport_wait(x->tp, r, NULL);
        free(host);
    }
    if (x->rank != 0) return st;
    pz_stage_range whole = pz_whole_model(cfg);
    float *mem = xmalloc(pz_stage_numel(cfg, &whole) * sizeof(float));
    pz_gpt2_params full;
    pz_gpt2_params_bind(&full, cfg, &whole, mem);
    for (int g = 0; g < x->G && st == PZ_OK; g++) {
        int r = g % x->S, cc = g / x->S;
        size_t n = pz_stage_numel(cfg, &all[g]);
        float *part = xmalloc(n * sizeof(float));
        if (r == 0) x->be->to_host(part, x->ch[cc].stage.param_mem, n * sizeof(float));
        else {
            pz_request *req = NULL;
            int wr = world_of(x, r);
            st = pz_transport_recv(x->tp, wr, pz_tag(wr, 0, (uint32_t)cc, PZ_KIND_SAVE), part, n * sizeof(float), w, &req);
            if (st == PZ_OK) st = pz_transport_wait(x->tp, req, NULL);
        }
        if (st == PZ_OK) {
            pz_gpt2_params p;
            pz_gpt2_params_bind(&p, cfg, &all[g], part);
            copy_by_name(&full, &p);
            pz_gpt2_params_unbind(&p);
        }
        free(part);
    }
    if (st == PZ_OK && (st = pz_params_save(&full, path)) == PZ_OK) fprintf(stderr, "pipezip train: saved %s\n", path);
    pz_gpt2_params_unbind(&full);
    free(mem);
    return st;
}

/* --dump-edge STEP. At that step (1-based, as the step lines count), each
 * sender writes the tensor it is about to encode, before any codec touches
 * it, as float32 .npy of shape (B, T, C):
 *   DIR/step<S>-edge<e>-<e+1>-fwd-micro<m>.npy   activations, by chunk e
 *   DIR/step<S>-edge<e>-<e+1>-bwd-micro<m>.npy   their gradients, by chunk e+1
 * (replicas: m counts the global batch, replica r's micro-batches from r x M)
 * so codecs can be studied on real tensors (`pipezip codec --in`, the sweep). */
pz_status exec_dump_edge(exec *x, const pz_edge_end *e, int kind, uint64_t step, int micro, const float *src) {
    const pz_train_opts *o = x->o;
    if (!o->observe.dump_edge || step + 1 != (uint64_t)o->observe.dump_edge || (kind != PZ_KIND_ACT && kind != PZ_KIND_GRAD)) return PZ_OK;
    if (mkdir(o->observe.dump_dir, 0755) != 0 && errno != EEXIST)
        return pz_fail(PZ_ERR_IO, "--dump-dir %s: %s", o->observe.dump_dir, strerror(errno));
    char path[4200];
    snprintf(path, sizeof path, "%s/step%llu-edge%d-%d-%s-micro%d.npy", o->observe.dump_dir, (unsigned long long)step + 1,
             e->edge, e->edge + 1, kind == PZ_KIND_ACT ? "fwd" : "bwd",
             x->replica * o->model.micro + micro);
    pz_shape sh = {3, {(size_t)o->model.batch, (size_t)o->model.seq, (size_t)x->ch[0].stage.cfg.channels}};
    pz_status st = pz_npy_write(path, &sh, src);
    if (st != PZ_OK) return pz_fail(st, "--dump-edge: %s", pz_last_error());
    return PZ_OK;
}
