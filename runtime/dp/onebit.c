/* onebit.c: --dp-compress-what momentum, 1-bit Adam's exchange
 * (Tang et al. 2021, "1-bit Adam: Communication Efficient Large-Scale
 * Training with Adam's Convergence Speed"; docs/data-parallel.md).
 *
 * Why: AdamW over a sign-compressed gradient average fails (the DP sweep:
 * +34% validation loss on demo), because AdamW's v, fed the compressed
 * gradient's squares, stops being the gradient's variance, and the error
 * feedback cannot repair a nonlinear v. 1-bit Adam lets AdamW run on the
 * exact average for --dp-warmup steps, then freezes v (it changes slowly
 * once trained a while: the paper's observation) and makes the update
 * linear in what is exchanged: each replica folds its own gradient into
 * the momentum, the replicas' momenta go through the chunk's compressed
 * reduction (the codec of --dp-compress, the reduction's worker and owner
 * error feedback), and the mean replaces every replica's m; the update is
 * AdamW's with v frozen (stages/optim.h, pz_optim_step_frozen).
 *
 * During the warm-up nothing differs from plain AdamW: the bucketed
 * uncompressed average, then pz_optim_step. After it pz_replica_sync leaves
 * the gradients alone (each replica's own), so the norm (and clipping) is
 * the replicas' root mean square of their gradients' norms, as binsgdm's.
 * Every replica decodes the same messages, so m, and the parameters, stay
 * identical (pz_replica_check still compares m and v); the checkpoint's shards
 * hold m and the frozen v, the dpef files the error feedback.
 *
 * --dp-compress-what grad-frozen-v is the same step without the momentum's
 * exchange: the gradient average went through the codec (pz_replica_sync,
 * as grad), and AdamW, v frozen, folds it into m. With v fixed the update
 * is linear in the gradients, so the error feedback's sums carry through
 * to m; the test of whether the nonlinear v was what sank sign+EF. */
#include "runtime/dp/replica.h"

#include <string.h>

int pz_replica_onebit_on(const pz_replica *r, int step) {
    return r->o->dp.momentum && pz_replica_frozen_on(r, step);
}

int pz_replica_frozen_on(const pz_replica *r, int step) {
    return r->o->dp.freeze_v && r->cr && step >= r->o->dp.warmup;
}

pz_status pz_replica_onebit_step(pz_replica *r, int step, double norm, float *lr) {
    pz_status st = PZ_OK;
    /* filled here, after the step's reduction: reports show it a step late
     * (grad-frozen-v: pz_replica_sync filled them) */
    if (r->o->dp.momentum) memset(r->fig, 0, sizeof r->fig);
    for (int cc = 0; cc < r->V && st == PZ_OK; cc++) {
        pz_optim *opt = r->ch[cc].opt;
        pz_optim_momentum(opt, r->ch[cc].stage, pz_clip_scale(&opt->cfg, norm));
        if (r->o->dp.momentum)
            st = pz_dp_creduce_exchange(r->cr[cc], &r->dp, opt->m, opt->numel, (uint64_t)step, 1, r->fig);
        if (st == PZ_OK) *lr = pz_optim_step_frozen(opt, r->ch[cc].stage, r->o->dp.warmup);
    }
    return st;
}
