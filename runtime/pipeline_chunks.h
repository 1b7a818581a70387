/* pipeline_chunks.h: the state of one rank of an interleaved pipeline,
 * shared by pipeline_chunks.c (the executor) and pipeline_chunks_io.c
 * (--save, checkpoints, --resume); private to those. */
#ifndef PZ_PIPELINE_CHUNKS_H
#define PZ_PIPELINE_CHUNKS_H

#include "runtime/metrics.h"
#include "runtime/pipeline_exec.h"

/* one model chunk of this rank */
typedef struct {
    int g;                           /* global chunk */
    pz_stage stage;
    pz_optim opt;
    int peak, nact, ngrad, nwire;    /* slots, receive rings (activations, gradients), send ring */
    pz_acts *slots;
    uint64_t **ids;                  /* per slot: the micro-batch's sample ids */
    float **grad_out;                /* per slot: d(input) to send (g > 0) */
    float *act_in, *grad_in;         /* the decoded message, consumed at once */
    uint8_t **act_wire_in, **grad_wire_in;    /* receive rings */
    pz_request **act_recv, **grad_recv;
    uint8_t **act_wire_out, **grad_wire_out;  /* send ring */
    pz_request **act_send, **grad_send;
    pz_edge_end fwd_tx, bwd_rx;      /* out end: boundary g (g < G-1) */
    pz_edge_end fwd_rx, bwd_tx;      /* in end: boundary g-1 (g > 0) */
    pz_edge_end val_tx[2], val_rx[2];
    size_t cap_in, cap_out;
    pz_staging stg;
} chunk;

typedef struct {
    const pz_train_opts *o;
    pz_transport *tp;
    int rank, S, V, G;
    pz_schedule sched;
    pz_policy pol;
    chunk *ch;                       /* V */
    const pz_backend *be;
    size_t act_bytes;
    int *tok, *tgt;
    size_t *ids_tmp;
    pz_dataset train, val;
    pz_loader loader;
    double compute_s, wait_s, codec_s;
    pz_trace trace;
    pz_tied tied;                    /* the messages and the codec (--compress-tied) */
    double tied_wire;                /* bytes of this end's message in the step */
    float *tied_view;
    pz_request *tied_send, *tied_recv;
    pz_metrics met;                  /* rank 0: per-boundary metrics and the summary */
} iexec;

static inline int is_first_chunk(const iexec *x, int c) { return x->ch[c].g == 0; }
static inline int is_last_chunk(const iexec *x, int c) { return x->ch[c].g == x->G - 1; }
static inline int holds_first(const iexec *x) { return x->rank == 0; }
static inline int holds_last(const iexec *x) { return x->rank == x->S - 1; }
/* the chunk holding the tied embedding on this rank (first or last), or -1 */
static inline int tied_chunk(const iexec *x) { return holds_first(x) ? 0 : holds_last(x) ? x->V - 1 : -1; }

/* pipeline_chunks_io.c */
pz_status ichunk_gather_save(iexec *x, const pz_stage_range *all, const char *path);
pz_status ichunk_checkpoint(iexec *x, int step);
pz_status ichunk_resume(iexec *x, int *start);

#endif
