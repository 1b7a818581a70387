/* sync.h: one model chunk's gradient average over its data-parallel group,
 * in buckets that start while the last micro-batch's backward still runs
 * (issue 25, "When the data-parallel sync runs"; docs/data-parallel.md).
 *
 * A chunk keeps its gradients in one flat buffer whose tail is computed
 * first: the backward goes head (final LayerNorm, at the top), then the
 * blocks from the last to the first, then the embeddings (at offset 0;
 * stages/gpt2_params.h). So "grad[lo, n) is final" is one number that only
 * falls, and a bucket is a fixed range [lo, hi) of the buffer: it starts
 * (a non-blocking ring all-reduce, group.h) once the mark falls to its lo.
 * Buckets are cut from the top down, bucket_floats each, the same on every
 * replica, and start in that order, so the group's collectives line up.
 *
 * As Megatron does, only the step's last backward arms the sync (the earlier
 * micro-batches' gradients are not final); the stage's grads_final hook
 * (stages/stage.h) reports the mark and gives the in-flight buckets their
 * progress: the ring reduces and forwards a segment only inside
 * pz_dp_op_test or wait, on the thread that calls them, so the hook, run
 * between blocks, is what moves the buckets while the backward computes.
 *
 * The held prefix [0, hold) (the tied word embedding, which the first and
 * last stage add to each other before the average) never starts early:
 * finish starts it, after the caller's tied add.
 *
 * The sum: each element is summed by the ring in one place and copied, so
 * every replica holds the same bits. With 2 replicas the sum a + b does not
 * depend on where the buckets are cut (addition commutes), so the result is
 * bit for bit the unbucketed all-reduce's; with more replicas the ring's
 * order of the D terms depends on an element's position in its bucket.
 *
 * Compressed (pz_dp_sync_codec): each bucket is one of the reduction's
 * buckets (creduce.h), started, tested and waited for in the same places:
 * its encoding (and worker error) at start, its owners' steps as its
 * messages arrive. The codec's scale then spans a bucket (or its chunk),
 * so the bucket size changes the numbers (the replicas stay identical). */
#ifndef PZ_DP_SYNC_H
#define PZ_DP_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/dp/creduce.h"
#include "runtime/dp/group.h"
#include "stages/gpt2_params.h"

typedef struct {
    size_t lo, hi;          /* floats of the buffer */
    pz_dp_op *op;           /* in flight, else NULL */
    int state;              /* 0 not started, 1 in flight, 2 done */
    double t_start, t_done; /* pz_now() seconds */
} pz_dp_bucket;

typedef struct {
    pz_dp_group *g;
    pz_dp_creduce *cr;      /* this step's compressed reduction, else NULL (pz_dp_sync_codec) */
    uint64_t step;
    float *grad;
    size_t n, hold;
    int nb;
    pz_dp_bucket *b;        /* in start order: from the top of the buffer down, then the held prefix */
    int next;               /* the first bucket not started */
    int armed;
    size_t ready_lo;        /* grad[ready_lo, n) is final */
    pz_status err;          /* the first failure inside the hook, returned by drain or finish */
    int drained;
    double t_first, t_last; /* the first start, the last completion */
    double t_backward_end;  /* when the mark reached 0 (the backward's end) */
    uint64_t sent0;
    /* this step's figures, set by finish: sync_s, the time buckets were in
     * flight: from the first start to the last early bucket's end, plus
     * finish's own time; hidden_s, the part of it the caller did not spend
     * waiting in drain or finish (it computed the backward, sent, ...);
     * sent, the bytes this member sent */
    double sync_s, hidden_s;
    uint64_t sent;
} pz_dp_sync;

/* Cuts grad[0, n) into buckets of at most bucket_floats (>= 1), the held
 * prefix [0, hold) apart. The buffer belongs to the sync from arm to finish. */
pz_status pz_dp_sync_init(pz_dp_sync *s, pz_dp_group *g, float *grad, size_t n, size_t hold, size_t bucket_floats);
void pz_dp_sync_free(pz_dp_sync *s);
/* How many buckets init cuts, and the most bytes their in-flight
 * all-reduces allocate at once (each its own receive space of 2 chunks of
 * D and its request table), for the memory plan. */
int pz_dp_sync_count(size_t n, size_t hold, size_t bucket_floats);
size_t pz_dp_sync_bytes(size_t n, size_t hold, size_t bucket_floats, int D);

/* The held prefix of global chunk g of G (S stages): the tied word
 * embedding on a pipeline's first and last chunk, which the two ends add to
 * each other before the average; 0 elsewhere. */
size_t pz_dp_held(const pz_gpt2_config *cfg, int S, int G, int g);

/* The memory plan's figure of stage r's V chunks (global chunk c x S + r of
 * ranges[S x V]): pz_dp_plan_bytes of each, the tied prefix held. */
double pz_dp_plan_stage(const pz_gpt2_config *cfg, const pz_stage_range *ranges, int S, int V, int r,
                        size_t bucket_floats, int D, int me, const pz_dp_copts *o);

/* The memory plan's bytes for one chunk of n floats (held prefix hold) on
 * member me of D: its buckets all in flight at once (bucket_floats 0: none,
 * binsgdm) and, with a compressed reduction (o, NULL: none), the error
 * feedback it keeps: the worker's (the chunk) and the server's (the part it
 * owns), as pz_dp_creduce_ef_floats. */
size_t pz_dp_plan_bytes(size_t n, size_t hold, size_t bucket_floats, int D, int me, const pz_dp_copts *o);

/* This step's buckets go through cr (--dp-compress, its buckets cut as the
 * sync's: pz_dp_copts.bucket and hold; refused otherwise), or the ring all-reduce
 * (cr NULL: uncompressed, --dp-warmup). Call before arm; it stays until changed.
 * With cr, `sent` counts cr's messages (pz_dp_creduce_sent_to; hierarchical:
 * those between hosts). */
pz_status pz_dp_sync_codec(pz_dp_sync *s, pz_dp_creduce *cr, uint64_t step);
/* The step's last backward begins: the hook's marks count from here. A
 * second call before finish changes nothing (zero-bubble schedules run the
 * last micro-batch's backward in two halves). */
void pz_dp_sync_arm(pz_dp_sync *s);
/* The stage's grads_final hook (ctx: the sync): grad[lo, n) is final; the
 * buckets above the mark start, the ones in flight progress. */
void pz_dp_sync_ready(void *ctx, size_t lo);
/* Waits for the buckets started so far (the caller's tied add may follow). */
pz_status pz_dp_sync_drain(pz_dp_sync *s);
/* Starts every bucket not started yet (the held prefix; all of them if the
 * sync was never armed) and waits for all: grad holds the mean. Disarms. */
pz_status pz_dp_sync_finish(pz_dp_sync *s);

#endif
