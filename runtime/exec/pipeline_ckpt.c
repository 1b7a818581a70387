/* pipeline_ckpt.c: what a rank reads and writes: checkpoints and --resume
 * (runtime/ckpt/resume.h for the files), --save (runtime/ckpt/gather.h) and
 * --dump-edge (runtime/observe/dump.h); see runtime/exec/pipeline_exec.h.
 *
 * Checkpoints are written as if each global chunk were a stage of a
 * G-stage pipeline: shard g holds chunk g (parameters, AdamW moments, the
 * loader position, codec state of its boundaries g-1 and g) and the
 * manifest says G stages. By tensor name, any other layout resumes from it,
 * and it from any other. */
#include "runtime/exec/pipeline_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"
#include "compress/core/codec.h"
#include "runtime/plan/fingerprint.h"
#include "runtime/ckpt/fault.h"
#include "runtime/ckpt/gather.h"
#include "runtime/ckpt/resume.h"
#include "runtime/observe/dump.h"

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
    char *fp = pz_fingerprint_build(x->flags, cfg, &x->pol, x->train.paths ? &x->train : NULL, x->val.paths ? &x->val : NULL);
    pz_fp_share share = {x->rank, x->rep.replica * o->model.micro, o->model.micro};   /* this replica's block */
    pz_status st = pz_fingerprint_agree(x->tp, x->rep.wrank, x->S * x->rep.D, fp, &share);
    if (st == PZ_OK) st = pz_ckpt_job_start(x->tp, &o->ckpt, x->rep.wrank, x->S * x->rep.D, fp, &x->job);
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
    if (st == PZ_OK) st = pz_replica_load(&x->rep, dir, step);
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
    pz_status st = pz_resume_start(x->tp, &x->o->ckpt, x->rep.wrank, x->S * x->rep.D, &x->job, load_step, x, start, &dir);
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
    for (int cc = 0; x->rep.replica == 0 && cc < x->V && st == PZ_OK; cc++) {
        pz_chunk *c = &x->ch[cc];
        const char *names[8];
        pz_codec *cs[8];
        int n = chunk_codecs(x, c, names, cs);
        st = pz_resume_write_shard(dir, step, c->g, x->G, &c->stage, &c->opt, &x->loader, &x->job);
        if (st == PZ_OK) st = pz_resume_write_codecs(dir, step, c->g, names, cs, n);
    }
    if (st == PZ_OK) st = pz_replica_save(&x->rep, dir, step);   /* every replica its own error feedback, binsgdm state */
    if (st == PZ_OK && x->au.any) {   /* the candidates auto goes on with */
        char *path = pz_resume_rank_path(dir, step, x->rank, ".auto");
        st = pz_auto_save(&x->au, path);
        free(path);
    }
    pz_fault_point("checkpoint", step, x->rep.wrank);
    double bad = st != PZ_OK;
    pz_status st2 = exec_allreduce(x, &bad, 1);
    if (st2 != PZ_OK) return st2;
    /* a shard that could not be written (a full disk): none of it stays, the run goes on */
    if (bad > 0) {
        for (int cc = 0; x->rep.replica == 0 && cc < x->V; cc++) pz_resume_abandon(dir, step, x->ch[cc].g, &x->job, cc ? PZ_OK : st);
        return step == x->o->model.steps && !x->o->model.save ? pz_resume_final_lost(dir, step, &x->job) : PZ_OK;
    }
    if (is_root(x) && (st = pz_resume_commit(dir, step, x->G, x->o->ckpt.keep, &x->job)) == PZ_OK)
        fprintf(stderr, "pipezip train: checkpoint of step %d in %s\n", step, dir);
    else if (is_root(x)) st = pz_resume_abandon(dir, step, -1, &x->job, st);
    return st;
}

/* --save: replica 0's stages gather the model on its rank 0 (runtime/ckpt/gather.h) */
pz_status exec_gather_save(exec *x, const pz_stage_range *all, const char *path) {
    if (x->rep.replica > 0) return PZ_OK;   /* replica 0's pipeline holds every replica's model */
    int *wr = xcalloc((size_t)x->S, sizeof *wr);
    float **params = xcalloc((size_t)x->V, sizeof *params);
    for (int s = 0; s < x->S; s++) wr[s] = pz_replica_world(&x->rep, s);
    for (int cc = 0; cc < x->V; cc++) params[cc] = x->ch[cc].stage.param_mem;
    pz_status st = pz_gather_save(x->tp, x->be, &x->ch[0].stage.cfg, all, x->S, x->V, x->rank, wr, params, path);
    free(wr);
    free(params);
    return st;
}

/* --dump-edge STEP (runtime/observe/dump.h) */
pz_status exec_dump_edge(exec *x, const pz_edge_end *e, int kind, uint64_t step, int micro, const float *src) {
    const pz_train_opts *o = x->o;
    if (!o->observe.dump_edge || step + 1 != (uint64_t)o->observe.dump_edge || (kind != PZ_KIND_ACT && kind != PZ_KIND_GRAD))
        return PZ_OK;
    return pz_dump_edge(o->observe.dump_dir, step + 1, e->edge, kind == PZ_KIND_GRAD, x->rep.replica * o->model.micro + micro,
                        (size_t)o->model.batch, (size_t)o->model.seq, (size_t)x->ch[0].stage.cfg.channels, src);
}
