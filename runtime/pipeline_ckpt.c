/* pipeline_ckpt.c: a rank's checkpoints and --resume (runtime/resume.h for
 * the files), and the fault injection the tests kill ranks with (see
 * runtime/pipeline_exec.h). */
#include "runtime/pipeline_exec.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compress/codec.h"
#include "runtime/resume.h"

/* Fault injection for the tests (PIPEZIP_FAULT=WHAT:STEP:RANK): this rank
 * exits with status 3 at that point, as a killed process would stop there.
 * WHAT is "step" (after the step's optimizer update and checkpoint) or
 * "checkpoint" (its shard written, before the ranks meet for the manifest);
 * "end" (STEP 0) stops the rank with SIGSTOP once it has finished, so that
 * the launcher must notice a rank frozen after the others exited. 
 * A resumed run (--resume, as restarts are) is not faulted again. */
static int fault_armed;
void exec_fault_arm(int armed) { fault_armed = armed; }
void exec_fault_point(const char *what, int step, int rank) {
    const char *f = fault_armed ? getenv("PIPEZIP_FAULT") : NULL;
    char w[32];
    int s, r;
    if (!f || sscanf(f, "%31[a-z]:%d:%d", w, &s, &r) != 3) return;
    if (strcmp(w, what) == 0 && s == step && r == rank) {
        int freeze = strcmp(what, "end") == 0;
        fprintf(stderr, "pipezip train: rank %d: PIPEZIP_FAULT=%s: %s at %s %d\n", rank, f,
                freeze ? "stopping (SIGSTOP)" : "exiting", what, step);
        fflush(NULL);
        if (freeze) raise(SIGSTOP);
        else _exit(3);
    }
}

/* Fault injection for the frame checks (PIPEZIP_FAULT_FLIP=WHAT:STEP:RANK[:AT]):
 * rank RANK flips one byte of the first message of kind WHAT ("activation",
 * "gradient" or "tied") it sends at step STEP (numbered from 0, as the
 * messages name steps). AT: "payload" (default, the middle of it), "header"
 * (the step field) or a byte offset into the frame (runtime/frame.h). The
 * receiver must refuse it, naming edge, direction and step. */
void exec_fault_flip(exec *x, int armed) {
    const char *f = armed ? getenv("PIPEZIP_FAULT_FLIP") : NULL;
    char w[32], at[32] = "payload";
    int s, r;
    if (!f || !x->tp || sscanf(f, "%31[a-z]:%d:%d:%31s", w, &s, &r, at) < 3 || r != x->rank || s < 0) return;
    static const char *const names[] = {"activation", "gradient", "tied"};
    static const unsigned kinds[] = {KIND_ACT, KIND_GRAD, KIND_TIED};
    long off = !strcmp(at, "payload") ? -1 : !strcmp(at, "header") ? 16 : strtol(at, NULL, 10);
    for (int k = 0; k < 3; k++)
        if (!strcmp(w, names[k])) pz_transport_fault_flip(x->tp, kinds[k], (uint32_t)s, off);
}

/* The codecs this rank holds on its edges (and their error-metric twins),
 * named by edge, direction and role, for the checkpoint's codec state. */
static int edge_codecs(exec *x, const char **names, pz_codec **cs) {
    static const char *const tag[4][2] = {{"out.fwd.send", "out.fwd.send.twin"}, {"out.bwd.recv", "out.bwd.recv.twin"},
                                          {"in.fwd.recv", "in.fwd.recv.twin"},   {"in.bwd.send", "in.bwd.send.twin"}};
    pz_edge_end *ends[4] = {&x->fwd_tx, &x->bwd_rx, &x->fwd_rx, &x->bwd_tx};
    int n = 0;
    for (int k = 0; k < 4; k++) {
        if (x->au.end[k].live) continue;   /* auto: stateless candidates, nothing to keep (autopolicy.h) */
        pz_codec *c[2] = {ends[k]->codec, ends[k]->shadow};
        for (int j = 0; j < 2; j++)
            if (c[j]) names[n] = tag[k][j], cs[n++] = c[j];
    }
    return n;
}

/* --resume: rank 0 finds the newest complete checkpoint in the --resume
 * directory (or --checkpoint-dir for auto) and every rank gets its step:
 * *start = the steps done, or -1: none (auto: start fresh); *dir = where.
 * Both executors start with it. tp NULL: one process. */
pz_status exec_resume_step(pz_transport *tp, const pz_train_opts *o, int rank, int *start, const char **dir) {
    int is_auto = strcmp(o->resume, "auto") == 0;
    *dir = is_auto ? o->checkpoint_dir : o->resume;
    *start = -1;
    double v = 0.0;
    pz_status st = PZ_OK;
    if (rank == 0) {
        int step;
        if ((st = pz_resume_find(*dir, is_auto, &step)) != PZ_OK) return st;
        if (step < 0 && !is_auto)
            return pz_fail(PZ_ERR_ARG, "--resume %s: no complete checkpoint there (use --resume auto to start "
                           "fresh when there is none)", *dir);
        v = step + 1.0;   /* 0: none */
    }
    if (tp && (st = pz_transport_allreduce_sum_f64(tp, &v, 1)) != PZ_OK) return st;
    if (v < 1.0) {
        if (rank == 0) fprintf(stderr, "pipezip train: --resume auto: no checkpoint in %s, starting fresh\n", *dir);
        return PZ_OK;
    }
    *start = (int)v - 1;
    return PZ_OK;
}

/* --resume: the newest complete checkpoint (rank 0 looks, every rank gets
 * its step), then each rank loads its shard. *start = steps already done. */
pz_status exec_resume_from(exec *x, int *start) {
    const char *dir;
    pz_status st = exec_resume_step(x->tp, x->o, x->rank, start, &dir);
    if (st != PZ_OK || *start < 0) {
        *start = 0;
        return st;
    }
    int same = 0;
    st = pz_resume_read_shard(dir, *start, x->rank, x->world, &x->stage, &x->opt, &x->loader, &same);
    if (st == PZ_OK) {
        const char *names[8];
        pz_codec *cs[8];
        int n = edge_codecs(x, names, cs);
        if (same) st = pz_resume_read_codecs(dir, *start, x->rank, names, cs, n);
        if (st == PZ_OK && x->au.any) {   /* auto's decisions; none there (another policy): start over */
            char *path = pz_resume_rank_path(dir, *start, x->rank, ".auto");
            if (same && access(path, F_OK) == 0) st = pz_auto_load(&x->au, path);
            else if (x->rank == 0)
                fprintf(stderr, "pipezip train: the checkpoint holds no decisions of --compress auto for this "
                        "layout: it starts from its initial candidates\n");
            free(path);
        }
        for (int i = 0; st == PZ_OK && !same && i < n; i++)
            if (pz_codec_keeps_state(cs[i]))
                fprintf(stderr, "pipezip train: rank %d: warning: another layout than the checkpoint's: %s (%s) "
                        "starts with empty state (aq: its first epoch again)\n", x->rank, names[i],
                        pz_codec_spec(cs[i]));
    }
    /* every rank must have loaded before any trains on */
    double bad = st != PZ_OK;
    pz_status st2 = exec_allreduce(x, &bad, 1);
    if (st == PZ_OK && st2 == PZ_OK && bad > 0)
        st = pz_fail(PZ_ERR_PEER, "rank %d: another rank could not load its shard of the checkpoint", x->rank);
    if (st == PZ_OK && x->rank == 0)
        fprintf(stderr, "pipezip train: resumed from %s, step %d\n", dir, *start);
    return st == PZ_OK ? st2 : st;
}

/* Writes this step's checkpoint: every rank its shard, then, once all are
 * durable (a collective carrying each rank's outcome), rank 0 the manifest. */
pz_status exec_checkpoint(exec *x, int step) {
    const char *names[8];
    pz_codec *cs[8];
    int n = edge_codecs(x, names, cs);
    pz_status st = pz_resume_write_shard(x->o->checkpoint_dir, step, x->rank, x->world, &x->stage, &x->opt,
                                         &x->loader);
    if (st == PZ_OK) st = pz_resume_write_codecs(x->o->checkpoint_dir, step, x->rank, names, cs, n);
    if (st == PZ_OK && x->au.any) {   /* the candidates auto goes on with */
        char *path = pz_resume_rank_path(x->o->checkpoint_dir, step, x->rank, ".auto");
        st = pz_auto_save(&x->au, path);
        free(path);
    }
    exec_fault_point("checkpoint", step, x->rank);
    double bad = st != PZ_OK;
    pz_status st2 = exec_allreduce(x, &bad, 1);
    if (st != PZ_OK) return st;
    if (st2 != PZ_OK) return st2;
    if (bad > 0)
        return pz_fail(PZ_ERR_IO, "rank %d: another rank could not write its checkpoint shard of step %d (the "
                       "previous checkpoint stays the newest)", x->rank, step);
    if (x->rank == 0 && (st = pz_resume_commit(x->o->checkpoint_dir, step, x->world, x->o->keep_checkpoints)) == PZ_OK)
        fprintf(stderr, "pipezip train: checkpoint of step %d in %s\n", step, x->o->checkpoint_dir);
    return st;
}

