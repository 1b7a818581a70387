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
#include "runtime/dp/replica.h"
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
    const pz_train_opts *o;    /* the flags; &halved where auto halves the micro-batches */
    pz_train_opts halved;      /* --batch B/2, --micro-batches 2m (pz_sched_halves) */
    int halves;                /* 1 then: micro-batch 2i and 2i+1 are the loader's batch i's halves */
    const pz_train_opts *flags; /* as given: the loader's batch, the job's fingerprint */
    pz_transport *tp;
    const pz_backend *be;
    int rank, S, V, G;         /* rank: this process's stage (0..S-1), rep.rank */
    /* --replicas D and binsgdm (runtime/dp/replica.h): this process is stage
     * `rank` of replica rep.replica, world rank rep.wrank, of rep.D */
    pz_replica rep;
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

/* the rank that prints, commits checkpoints, saves: world rank 0 */
static inline int is_root(const exec *x) { return x->rep.wrank == 0; }
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
/* micro-batch i's tokens into exec.tok/tgt/ids_tmp from loader l (halves: i's half) */
void exec_next_input(exec *x, pz_loader *l, int i);
pz_status exec_run_instr(exec *x, const pz_instr *in, uint32_t step, double *loss_sum);
/* after the list: this step's sends are out (before the parameters change) */
pz_status exec_wait_sends(exec *x);
/* the last rank's wte gradient gets the first rank's copy (after the norm);
 * then exec_tied_follow: the codec of auto's live candidate, where it follows one */
pz_status exec_tied_finish(exec *x, uint32_t step);
pz_status exec_tied_add(void *x, uint32_t step);   /* the same, as the replica's hook */
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

/* the replicas hold the same parameters, optimizer state and choices (runtime/dp/replica.h) */
static inline pz_status exec_dp_check(exec *x, const char *when) {
    return pz_replica_check(&x->rep, x->spec.warmup_extra, x->au.any ? x->au.cur : NULL, 2 * x->au.edges, when);
}

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
