/* pipeline_exec.h: the state of one pipeline rank's executor, shared by
 * the files that make it up (private to runtime/exec/pipeline*.c):
 *   pipeline.c        set-up, the step loop and its one reduction
 *   pipeline_instr.c  the instructions, validation, the send/receive helpers
 *   pipeline_slots.c  edges, activation slots and rings, warmup=auto's resizing
 *   pipeline_ckpt.c   checkpoints, --resume, --save, --dump-edge
 *
 * A rank holds V >= 1 model chunks (V = 1: every schedule but interleaved).
 * With S ranks the model is cut into G = S*V chunks; rank r's local chunk c
 * is global chunk g = c*S + r. Global chunk 0 holds the embedding ("first",
 * on rank 0), G-1 the head ("last", on rank S-1). Boundary b (0..G-2) joins
 * global chunks b and b+1; the policy's edge b is boundary b. */
#ifndef PZ_PIPELINE_EXEC_H
#define PZ_PIPELINE_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/exec/autopolicy.h"
#include "runtime/ckpt/job.h"
#include "runtime/dp/creduce.h"
#include "runtime/dp/group.h"
#include "runtime/dp/sync.h"
#include "stages/data.h"
#include "runtime/edge/edge.h"
#include "runtime/observe/metrics.h"
#include "stages/optim.h"
#include "runtime/edge/policy.h"
#include "runtime/exec/staging.h"
#include "runtime/edge/tied.h"
#include "runtime/observe/trace.h"
#include "runtime/plan/memplan.h"
#include "runtime/plan/train.h"
#include "runtime/net/transport.h"
#include "schedules/schedule.h"
#include "stages/stage.h"

/* One model chunk of this rank and its buffers:
 *   slots        micro % bound (each chunk's forwards and backwards run in
 *                micro-batch order, so two live micro-batches never share one)
 *   receive ring micro % nact (ngrad): the most receives of the chunk posted
 *                and not yet consumed while walking the list
 *   send ring    micro % nwire; a buffer's previous send is waited for first */
typedef struct {
    int g;                           /* global chunk */
    pz_stage stage;
    pz_optim opt;
    int bound, nact, ngrad, nwire;
    pz_acts *slots;
    uint64_t **ids;                  /* per slot: the micro-batch's sample ids */
    float **grad_out;                /* per slot: d(input) to send (g > 0) */
    float *act_in, *grad_in;         /* the decoded message, consumed at once */
    uint8_t **act_wire_in, **grad_wire_in;    /* receive rings */
    pz_request **act_recv, **grad_recv;
    uint8_t **act_wire_out, **grad_wire_out;  /* send ring */
    pz_request **act_send, **grad_send;
    pz_edge_end end[4];              /* fwd_tx, bwd_rx (boundary g), fwd_rx, bwd_tx (boundary g-1) */
    pz_edge_end val_tx[2], val_rx[2];   /* validation: [0] raw, [1] eval codec */
    size_t cap_in, cap_out;          /* wire buffers (training and validation messages) */
    pz_staging stg;                  /* host <-> device hops of edge tensors (runtime/exec/staging.h) */
} pz_chunk;
enum { FWD_TX, BWD_RX, FWD_RX, BWD_TX };   /* pz_chunk.end */

/* The step's reduction, one layout for every schedule (offsets into it). */
typedef struct {
    int sumsq, loss, tied, ranks, edges, rtt, hold, stop, kfit, autod, dp, dpvar, n;
} pz_red_layout;

typedef struct {
    const pz_train_opts *o;
    pz_transport *tp;
    const pz_backend *be;
    int rank, S, V, G;         /* rank: this process's stage (0..S-1) */
    /* --replicas D (docs/data-parallel.md): this process is stage `rank` of
     * replica `replica`, world rank wrank (o->dp.layout); dp is the stage's
     * group of D replicas (D > 1), which averages the gradients every step */
    int D, replica, wrank;
    pz_dp_group dp;
    pz_dp_creduce **cr;        /* --dp-compress: per chunk, its compressed reduction (V) */
    pz_dp_sync *sync;          /* per chunk, its bucketed average (V; runtime/dp/sync.h) */
    double dp_fig[PZ_DP_FIGS]; /* the step's data-parallel figures (runtime/observe/metrics.h) */
    pz_dp_creduce *crw;        /* binsgdm, S > 1: the tied wte's own exchange (first and last rank) */
    double dp_err[2];          /* --dp-variance, this step: ||estimate - exact mean||^2, ||exact mean||^2 */
    pz_sched_spec spec;        /* --schedule; warmup=auto resolved after the first steps */
    pz_schedule sched;
    pz_policy pol;             /* per boundary */
    pz_autopol au;             /* --compress auto (runtime/exec/autopolicy.h): 4 ends per chunk */
    pz_chunk *ch;              /* V */
    int kfit;                  /* warmup=auto: the largest extra warm-up this host's memory holds */
    int auto_told;             /* --schedule auto: 1 + the K last reported (0: none yet) */
    int rewarm;                /* --schedule auto: decide K again after this step (auto switched codecs) */
    size_t act_bytes;          /* B*T*C floats */
    int *tok, *tgt;            /* host batch of the current micro-batch */
    size_t *ids_tmp;           /* loader output */
    pz_dataset train, val;
    pz_loader loader;
    double compute_s, wait_s, codec_s;   /* per step */
    pz_trace trace;            /* --trace: this rank's timeline */
    /* warmup=auto's measurement (pz_sched_link_rtt): micro-batch 0's round
     * trip over the out edge, from its activation's send to its gradient's
     * arrival; and its hold here, from its activation's arrival to its
     * gradient's send */
    double rtt_sent, rtt0, act0_at, hold0;
    pz_tied tied;              /* the tied-embedding exchange (runtime/edge/tied.h) */
    double tied_wire;          /* bytes of this end's message in the step */
    pz_request *tied_send, *tied_recv;
    float *tied_view;          /* last rank: host view of grads.wte until the add */
    pz_metrics met;            /* rank 0: per-boundary metrics and the summary */
    pz_red_layout red;
    pz_ckpt_job job;           /* what its checkpoints name, the directory's lock (runtime/ckpt/job.h) */
} exec;

/* the world rank of stage `stage` of this replica (D = 1: the stage) */
static inline int world_of(const exec *x, int stage) {
    return x->o->dp.layout ? x->replica * x->S + stage : stage * x->D + x->replica;
}
/* the rank that prints, commits checkpoints, saves: world rank 0 */
static inline int is_root(const exec *x) { return x->wrank == 0; }
static inline int holds_first(const exec *x) { return x->rank == 0; }
static inline int holds_last(const exec *x) { return x->rank == x->S - 1; }
static inline int is_first(const pz_chunk *c) { return c->g == 0; }
static inline int is_last(const exec *x, const pz_chunk *c) { return c->g == x->G - 1; }
/* the chunk holding this rank's copy of the tied embedding, or NULL */
static inline pz_chunk *tied_chunk(const exec *x) {
    return x->S < 2 ? NULL : holds_first(x) ? &x->ch[0] : holds_last(x) ? &x->ch[x->V - 1] : NULL;
}

/* Sums over the ranks; one stage alone has no transport and nothing to add. */
static inline pz_status exec_allreduce(exec *x, double *v, int n) {
    return x->tp ? pz_transport_allreduce_sum_f64(x->tp, v, n) : PZ_OK;
}

/* pipeline_instr.c */
pz_status exec_run_instr(exec *x, const pz_instr *in, uint32_t step, double *loss_sum);
/* after the list: this step's sends are out (before the parameters change) */
pz_status exec_wait_sends(exec *x);
/* the last rank's wte gradient gets the first rank's copy (after the norm);
 * then exec_tied_follow: the codec of auto's live candidate, where it follows one */
pz_status exec_tied_finish(exec *x, uint32_t step);
pz_status exec_tied_follow(exec *x);
/* one validation pass; rank 0 prints its line */
pz_status exec_validate(exec *x, int step, uint32_t *val_round, int compressed);
void exec_trace(exec *x, const char *name, int micro, double t0, double t1);

/* pipeline_slots.c */
pz_status exec_edges(exec *x, pz_chunk *c);
void exec_slots_alloc(exec *x);
void exec_chunk_free(exec *x, pz_chunk *c);
/* kfit: per rank, the largest extra warm-up its host's memory holds (exec.kfit) */
pz_status exec_auto_warmup(exec *x, const double *red);

/* pipeline_dp.c: the data-parallel part of the step (D > 1) */
pz_status exec_dp_init(exec *x);
/* before micro-batch 0 (skip) or after the step (tail): the loader passes
 * over the other replicas' micro-batches of the global batch */
void exec_dp_skip(exec *x, int tail);
/* a backward pass of chunk c begins (last: of the step's last micro-batch,
 * whose passes alone report final gradients to the buckets) */
void exec_dp_backward(exec *x, pz_chunk *c, int step, int last);
/* the memory plan's data-parallel term of stage r (pz_mem_job.dp_bytes; dp_ctx: the exec) */
double exec_dp_plan_bytes(const pz_mem_job *j, int r);
/* after the list: the tied add, and every chunk's gradient averaged over
 * the stage's replicas (x->dp_fig: what it took) */
pz_status exec_dp_sync(exec *x, int step);
void exec_dp_free(exec *x);
/* --dp-compress: the reductions' error feedback, one file per chunk and
 * replica beside the checkpoint's shards (step-N/rank-G.dpefR) */
pz_status exec_dp_save(exec *x, const char *dir, int step);
pz_status exec_dp_load(exec *x, const char *dir, int step);
/* the replicas hold the same parameters and optimizer state, bit for bit
 * (binsgdm: the parameters; its m and b are each replica's) */
pz_status exec_dp_check(exec *x, const char *when);
/* --dp-variance's figures of the step for the reduction (2 values): the
 * squared error of the average and the squared exact mean (0 without it) */
void exec_dp_variance(exec *x, double *out);

/* pipeline_binsgdm.c: --optimizer binsgdm. The step after the norm's
 * reduction: moments, the exchange of m/b, the update (lr: the one used). */
pz_status exec_bsgd_step(exec *x, int step, double norm, float *lr);
/* floats of the tied wte at the start of chunk c's buffers that binsgdm
 * exchanges on their own (S > 1, first and last rank), else 0 */
size_t exec_bsgd_tied(const exec *x, const pz_chunk *c);
/* with replicas: each replica's m and b beside the shards (step-N/rank-G.bsgdR) */
pz_status exec_bsgd_save(exec *x, const char *dir, int step);
pz_status exec_bsgd_load(exec *x, const char *dir, int step);

/* pipeline_ckpt.c */
pz_status exec_resume(exec *x, int *start);
pz_status exec_checkpoint(exec *x, int step);
/* --save: rank 0 gathers every chunk by tensor name (all: the G ranges) */
pz_status exec_gather_save(exec *x, const pz_stage_range *all, const char *path);
/* The ranks agree on what they compute (runtime/plan/fingerprint.h; S > 1), and
 * rank 0 takes the checkpoint directory for this job (runtime/ckpt/job.h). */
pz_status exec_job_start(exec *x, const pz_gpt2_config *cfg);
/* --dump-edge: the tensor src about to be encoded on edge end e */
pz_status exec_dump_edge(exec *x, const pz_edge_end *e, int kind, uint64_t step, int micro, const float *src);

#endif
