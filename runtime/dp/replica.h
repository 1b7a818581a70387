/* replica.h: one pipeline rank's part in data parallelism (--replicas D,
 * docs/data-parallel.md), and --optimizer binsgdm's exchange, which works
 * through the same group and reductions (also with D = 1).
 *
 * The executor (runtime/exec/) calls only this interface: it places the
 * rank (pz_replica_place, before the memory plan), starts the group once
 * the transport is up (pz_replica_start), and then calls the hooks of a
 * step: the loader's skip, the backward's hook, the step-tail sync (or
 * binsgdm's step), the checks, and the checkpoint's state. A zeroed
 * struct, placed or not, frees safely; with D = 1 and AdamW every hook
 * does nothing. */
#ifndef PZ_DP_REPLICA_H
#define PZ_DP_REPLICA_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/dp/creduce.h"
#include "runtime/dp/group.h"
#include "runtime/dp/sync.h"
#include "runtime/observe/metrics.h"
#include "runtime/observe/trace.h"
#include "runtime/plan/memplan.h"
#include "runtime/plan/train.h"
#include "stages/data.h"
#include "stages/optim.h"
#include "stages/stage.h"

/* what the replica needs of one of the rank's model chunks */
typedef struct {
    pz_stage *stage;
    pz_optim *opt;
    int g;                     /* global chunk */
} pz_replica_chunk;

/* the step's tied add (the executor's): the sync runs it after the
 * buckets that started during the backward, before the rest */
typedef pz_status (*pz_replica_tied_fn)(void *ctx, uint32_t step);

typedef struct {
    const pz_train_opts *o;
    const pz_backend *be;
    int S, V, G, rank;         /* the pipeline: stage `rank` of S, V chunks each */
    int D, replica, wrank;     /* stage `rank` of replica `replica`, world rank wrank */
    pz_replica_chunk *ch;      /* V */
    pz_trace *trace;
    pz_replica_tied_fn tied_add;
    void *tied_ctx;
    pz_dp_group dp;            /* the stage's group of D replicas */
    pz_dp_creduce **cr;        /* --dp-compress, or binsgdm: per chunk, its compressed reduction (V) */
    pz_dp_sync *sync;          /* per chunk, its bucketed average (V; runtime/dp/sync.h) */
    pz_dp_creduce *crw;        /* binsgdm, S > 1: the tied wte's own exchange (first and last rank) */
    double fig[PZ_DP_FIGS];    /* the step's data-parallel figures (runtime/observe/metrics.h) */
    double err[2];             /* --dp-variance, this step: ||estimate - exact mean||^2, ||exact mean||^2 */
} pz_replica;

/* Places world rank wrank of S x D ranks (o->dp.layout): r->rank and
 * r->replica. Allocates nothing. */
void pz_replica_place(pz_replica *r, const pz_train_opts *o, int wrank, int S, int V);
/* the world rank of stage `stage` of this replica (D = 1: the stage) */
int pz_replica_world(const pz_replica *r, int stage);
/* the memory plan's data-parallel term of stage r (pz_mem_job.dp_bytes; dp_ctx: the placed replica) */
double pz_replica_plan_bytes(const pz_mem_job *j, int r);

/* The group, the buckets (hooked on each chunk's stage), the reductions
 * and the simulated links (tp NULL: one rank alone, binsgdm's exchange with
 * itself). ch: the rank's V chunks; tied_add: see pz_replica_tied_fn. */
pz_status pz_replica_start(pz_replica *r, pz_transport *tp, const pz_backend *be, const pz_replica_chunk *ch,
                           pz_trace *trace, pz_replica_tied_fn tied_add, void *tied_ctx);
void pz_replica_free(pz_replica *r);

/* before micro-batch 0 (tail 0) or after the step (tail 1): the loader
 * passes over the other replicas' micro-batches of the global batch */
void pz_replica_skip(const pz_replica *r, pz_loader *l, int *tok, int *tgt, size_t *ids, int tail);
/* a backward pass of chunk cc begins (last: of the step's last
 * micro-batch, whose passes alone report final gradients to the buckets) */
void pz_replica_backward(pz_replica *r, int cc, int step, int last);
/* after the list (D > 1): the tied add, and every chunk's gradient averaged
 * over the stage's replicas (r->fig: what it took; binsgdm: nothing) */
pz_status pz_replica_sync(pz_replica *r, int step);
/* --optimizer binsgdm's step after the norm's reduction: moments, the
 * exchange of m/b, the update (lr: the one used) */
pz_status pz_replica_binsgdm_step(pz_replica *r, int step, double norm, float *lr);
/* --dp-compress-what momentum (1-bit Adam, onebit.c): whether step runs
 * with v frozen (after --dp-warmup), and that step after the norm's
 * reduction: each replica's momentum, its compressed mean, the update */
int pz_replica_onebit_on(const pz_replica *r, int step);
/* ... and whether AdamW's v is frozen this step (momentum or grad-frozen-v:
 * then pz_replica_onebit_step is the step; grad-frozen-v exchanges nothing
 * there, its gradients were averaged by pz_replica_sync) */
int pz_replica_frozen_on(const pz_replica *r, int step);
pz_status pz_replica_onebit_step(pz_replica *r, int step, double norm, float *lr);
/* --dp-variance's figures of the step (2 values, then zeroed) */
void pz_replica_variance(pz_replica *r, double *out);

/* The replicas hold the same parameters and optimizer state, bit for bit
 * (binsgdm: the parameters; its m and b are each replica's), and made the
 * same choices: the schedule's warm-up and the n codecs cur (or NULL). */
pz_status pz_replica_check(pz_replica *r, int warmup_extra, const int *cur, int n, const char *when);
/* the checkpoint's state of each replica beside the shards: --dp-compress's
 * error feedback (step-N/rank-G.dpefR), binsgdm's m and b (.bsgdR) */
pz_status pz_replica_save(pz_replica *r, const char *dir, int step);
pz_status pz_replica_load(pz_replica *r, const char *dir, int step);

#endif
