/* pipeline_exec.h: the state of one pipeline rank's executor, shared by
 * the files that make it up (private to runtime/pipeline*.c):
 *   pipeline.c        the step loop and the instructions (the hub)
 *   pipeline_slots.c  activation slots, send buffers, warmup=auto's resizing
 *   pipeline_ckpt.c   checkpoints and --resume of this rank, fault injection
 *   pipeline_chunks.c interleaved schedules (V > 1 chunks per rank): an executor of its own */
#ifndef PZ_PIPELINE_EXEC_H
#define PZ_PIPELINE_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/autopolicy.h"
#include "runtime/data.h"
#include "runtime/edge.h"
#include "runtime/optim.h"
#include "runtime/policy.h"
#include "runtime/staging.h"
#include "runtime/tied.h"
#include "runtime/trace.h"
#include "runtime/train.h"
#include "runtime/transport.h"
#include "schedules/schedule.h"
#include "stages/stage.h"

enum { KIND_ACT = 1, KIND_GRAD = 2, KIND_TIED = 3, KIND_VAL = 4, KIND_SAVE = 5 };

typedef struct {
    const pz_train_opts *o;
    pz_transport *tp;
    int rank, world;
    pz_schedule sched;
    pz_stage stage;
    pz_optim opt;
    pz_sched_spec spec;        /* --schedule; warmup=auto resolved after the first steps */
    int bound;                 /* activation slots */
    int kfit;                  /* warmup=auto: the largest extra warm-up this host's memory holds */
    int nwire;                 /* send buffers (act_wire_out, grad_wire_out) */
    size_t cap_in, cap_out;    /* wire buffer sizes (training and validation messages) */
    pz_acts *slots;
    float **act_in;            /* per slot: received activation (non-first) */
    float **grad_in;           /* per slot: received d(output) (non-last) */
    float **grad_out;          /* per slot: d(input) being sent (non-first) */
    pz_request **act_recv, **grad_recv;   /* per slot */
    pz_request **act_send, **grad_send;   /* per send buffer */
    size_t act_bytes;          /* B*T*C floats */
    pz_staging stg;            /* host <-> device hops of edge tensors (runtime/staging.h) */
    int *tok, *tgt;            /* host batch of the current micro-batch */
    /* edges: the out edge (rank -> rank+1) and the in edge (rank-1 -> rank) */
    pz_policy pol;
    pz_autopol au;             /* --compress auto: candidates, measurements, switches (runtime/autopolicy.h) */
    pz_edge_end fwd_tx, bwd_rx;        /* out edge, when not last */
    pz_edge_end fwd_rx, bwd_tx;        /* in edge, when not first */
    pz_edge_end val_tx[2], val_rx[2];  /* validation: [0] raw, [1] eval codec */
    uint8_t **act_wire_in, **grad_wire_in;    /* per slot */
    uint8_t **act_wire_out, **grad_wire_out;  /* per send buffer */
    uint64_t **ids;            /* per slot: the micro-batch's B sample ids */
    size_t *ids_tmp;           /* loader output */
    pz_dataset train, val;
    pz_loader loader;
    /* per-step metrics */
    double compute_s, wait_s, codec_s;
    pz_trace trace;            /* --trace: this rank's timeline */
    /* warmup=auto's measurement: micro-batch 0's round trip over the out edge,
     * from its activation's send to its gradient's arrival */
    double rtt_sent, rtt0;
    /* the tied-embedding exchange (first and last stage) */
    pz_tied tied;                      /* the messages and the codec (--compress-tied) */
    double tied_wire;                  /* bytes of this end's message in the step */
    pz_request *tied_send, *tied_recv;
    float *tied_view;                  /* last stage: host view of grads.wte until the add */
} exec;

static inline int is_first(const exec *x) { return x->rank == 0; }
static inline int is_last(const exec *x) { return x->rank == x->world - 1; }

/* Sums over the ranks; one stage alone has no transport and nothing to add. */
static inline pz_status exec_allreduce(exec *x, double *v, int n) {
    return x->tp ? pz_transport_allreduce_sum_f64(x->tp, v, n) : PZ_OK;
}

/* pipeline_slots.c */
void exec_slots_alloc(exec *x);
void exec_slots_free(exec *x);
/* kfit: per rank, the largest extra warm-up its host's memory holds (exec.kfit) */
pz_status exec_auto_warmup(exec *x, const double *red, const double *es, const double *rtt, const double *kfit);

/* pipeline_ckpt.c */
void exec_fault_arm(int armed);
void exec_fault_point(const char *what, int step, int rank);
void exec_fault_flip(exec *x, int armed);
pz_status exec_resume_from(exec *x, int *start);
pz_status exec_resume_step(pz_transport *tp, const pz_train_opts *o, int rank, int *start, const char **dir);
pz_status exec_checkpoint(exec *x, int step);

/* --dump-edge: the tensor src about to be encoded on edge end e (runtime/pipeline_dump.c) */
pz_status exec_dump_edge(exec *x, const pz_edge_end *e, int kind, uint64_t step, int micro, const float *src);

/* pipeline.c: SIGTERM/SIGINT stop every rank at the next step boundary.
 * install (on = 1) or restore (on = 0) the handlers; the signal this
 * process got (0: none); the one the run stopped by (pz_pipeline_stopped_by) */
struct sigaction;
void exec_stop_install(int on, struct sigaction *old_term, struct sigaction *old_int);
int exec_stop_signal(void);
void exec_stop_set(int sig);

/* pipeline_chunks.c: runs an interleaved schedule with spec->virtual_stages > 1 */
pz_status pz_pipeline_run_interleaved(const pz_train_opts *o, const pz_sched_spec *spec, int rank, int world,
                                      const char *master_addr, int master_port);

#endif
