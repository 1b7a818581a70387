/* creduce.h: compressed data-parallel reductions over the codec messages of
 * compress/ (any stateless codec spec: sign, q4, nuq4:code=elias,
 * topk:0.01, jointsq:2, ...). `pipezip train --dp-compress` runs one per
 * model chunk (runtime/dp/replica.c).
 *
 * The codec sees each message as a 1-D tensor: one row of its elements. So
 * group=row or tensor means one scale per message (sign's default, as in
 * 1-bit Adam), and q's default group=channel one scale per element (more
 * bytes than fp32): give q a block size, e.g. q4:group=512 (AC-SGD's
 * buckets of 512 values).
 *
 * Every replica passes its gradient g (n floats) and gets back the same
 * estimate of the group's mean, bit for bit on every member (everyone decodes
 * the same messages and sums them in group order). Modes:
 *
 *  allgather (NUQSGD/QSGD, JointSQ's script, PyTorch's quantization hooks):
 *    x = g + e_w (e_w = 0 without error feedback); send msg = C(x) to every
 *    other member; e_w = x - dec(msg); out = (sum over members in group order
 *    of dec(msg_i)) / D. Messages have variable length (receives are posted
 *    with the codec's bound; the transport reports the real length).
 *
 *  twophase (DeepSpeed 1-bit Adam, AC-SGD): x = g + e_w, split into D chunks
 *    (pz_dp_chunk); msg_j = C(x_j) goes to chunk j's owner (member j);
 *    e_w[j] = x_j - dec(msg_j). The owner averages the D decoded chunks in
 *    group order, y; z = y + e_s; sends C(z) to every member and keeps
 *    e_s = z - dec(C(z)) (n / D floats); everyone decodes the D owners'
 *    messages into out.
 *
 *  hierarchical (BinSGDM/Birder's reading, see docs): the D members form H
 *    hosts of D / H consecutive members (simulated, or pz_dp_group_hosts). Each host averages its
 *    members' gradients uncompressed (pz_dp_allreduce within the host); the
 *    first member of every host (its leader) runs twophase with the other
 *    leaders on the host mean; the leader then sends the result to its host
 *    (pz_dp_broadcast_post). Only the leaders' twophase
 *    crosses hosts: about 2(H-1)/H x |C(n)| per leader instead of every
 *    member's 2(D-1)/D. A bucket goes through the three stages as its
 *    messages arrive (host mean, leaders' bucket, broadcast), each started
 *    by test or wait once the one before it is done; the leaders start
 *    their buckets in bucket order.
 *
 * Error feedback (ef = 1) is this module's own (the codec must keep no
 * state: ef() and friends are refused) because the worker error spans the
 * whole vector across chunks and the owner's covers its chunk; both are
 * saved and restored bit for bit with pz_dp_creduce_save/load. The identity
 * sum over steps of out = sum of the true means - mean over members of e_w -
 * the concatenated e_s holds (twophase; allgather without the e_s term).
 *
 * Buckets (o->bucket > 0): the vector is cut as pz_dp_buckets cuts it and
 * each bucket is reduced on its own, as above (the codec sees a bucket, or
 * a bucket's chunk, as one message: its scale spans that, not the vector).
 * e_w stays one n-float vector; e_s is each bucket's owned chunk, in bucket
 * order. So another bucket size gives other numbers (and state that does
 * not load: the blob names the cut).
 *
 * Every message carries runtime/dp/dpmsg.h's header inside the transport's
 * frame; a message whose header, codec or shape differs from what this
 * member expects fails the call with PZ_ERR_PEER naming the sender and the
 * difference. After an error close the transport (group.h). */
#ifndef PZ_DP_CREDUCE_H
#define PZ_DP_CREDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "compress/core/codec.h"
#include "runtime/dp/group.h"

typedef enum { PZ_DP_ALLGATHER = 1, PZ_DP_TWOPHASE = 2, PZ_DP_HIERARCHICAL = 3 } pz_dp_mode;

typedef struct {
    pz_dp_mode mode;
    int ef;           /* error feedback on the workers (and owners, twophase) */
    uint64_t seed;    /* the codecs' random streams (stochastic rounding) */
    int hosts;        /* hierarchical: H, dividing D (0 = 1 for other modes) */
    size_t bucket;    /* buckets of at most this many floats, cut as pz_dp_buckets (0: one, the whole vector) */
    size_t hold;      /* ... with the held prefix [0, hold) apart (runtime/dp/sync.h) */
} pz_dp_copts;

typedef struct pz_dp_creduce pz_dp_creduce;

/* A reduction of n-float vectors over g (kept by reference). Refuses a codec
 * that keeps state, n < D (empty chunks), a host count that does not divide
 * D, a mode it does not know. */
pz_status pz_dp_creduce_create(pz_dp_creduce **out, pz_dp_group *g, const char *spec, const pz_dp_copts *o,
                               size_t n);
void pz_dp_creduce_free(pz_dp_creduce *c);
/* The mean estimate of the members' grad into out (both n floats; they may
 * be the same buffer). `step` feeds the codecs' random streams. Runs every
 * bucket: start them all, then wait for each. */
pz_status pz_dp_creduce_run(pz_dp_creduce *c, const float *grad, float *out, uint64_t step);

/* The buckets one at a time, so that they travel while the backward
 * computes (runtime/dp/sync.h): start encodes bucket k of grad (with its
 * worker error), posts its receives and sends and returns; test does what
 * has arrived (twophase: the owner's average, server error and re-encoding
 * once its D - 1 parts are in, then each owner's result decoded into out as
 * it arrives) and says whether the bucket is done; wait finishes it. The
 * members start their buckets in the same order (each takes the group's
 * collective number at start). grad[lo, hi) and out[lo, hi) of the bucket
 * belong to it until it is done. Data moves only inside test or wait.
 * Hierarchical buckets move the same way (their three stages above); the
 * buckets of a group of one run whole inside start (the codec's round trip:
 * nothing to wait for). */
int pz_dp_creduce_buckets(const pz_dp_creduce *c);
void pz_dp_creduce_range(const pz_dp_creduce *c, int k, size_t *lo, size_t *hi);
pz_status pz_dp_creduce_start(pz_dp_creduce *c, int k, const float *grad, float *out, uint64_t step);
pz_status pz_dp_creduce_test(pz_dp_creduce *c, int k, int *done);
pz_status pz_dp_creduce_wait(pz_dp_creduce *c, int k);

/* Error-feedback state as one self-checking blob (malloc'ed): the mode,
 * spec, group size, position, n, and e_w / e_s; load refuses a blob of
 * another configuration or a damaged one before anything changes. */
pz_status pz_dp_creduce_save(const pz_dp_creduce *c, uint8_t **blob, size_t *len);
pz_status pz_dp_creduce_load(pz_dp_creduce *c, const uint8_t *blob, size_t len);

/* The residuals (NULL, 0 when the mode keeps none): e_w (n floats) and
 * e_s: this member's part of every bucket, in bucket order (*len floats in
 * all; *lo: where the first bucket's part starts, which with one bucket is
 * e_s's element range [*lo, *lo + *len)). */
const float *pz_dp_creduce_worker_error(const pz_dp_creduce *c, size_t *len);
/* The floats of those two (*worker, *server) that create would allocate for
 * n elements on member me of D, without creating it (the memory plan). */
void pz_dp_creduce_ef_floats(const pz_dp_copts *o, size_t n, int D, int me, size_t *worker, size_t *server);
const float *pz_dp_creduce_server_error(const pz_dp_creduce *c, size_t *lo, size_t *len);

/* Bytes of compressed messages this member sent so far (headers included)
 * to each group member (D entries, index = group index); for reports and
 * tests. Hierarchical: the leaders' compressed exchange only (the host's
 * uncompressed all-reduce counts in its group's bytes_sent). */
const uint64_t *pz_dp_creduce_sent_to(const pz_dp_creduce *c);
/* binsgdm's exchange of the n floats at u over c's group g: through c when
 * `compressed` (its 1-bit messages), else (--dp-warmup) their uncompressed
 * mean (one member: u itself). fig[0..2] get what it took added: float32's
 * bytes, the bytes this rank sent (c's messages, hierarchical's between
 * hosts only; the warm-up's all-reduce by the group: the flat modes also
 * post through g, so one count, not both) and the seconds. */
pz_status pz_dp_creduce_exchange(pz_dp_creduce *c, pz_dp_group *g, float *u, size_t n, uint64_t step, int compressed,
                                 double *fig);

/* The largest message (header included) this member may receive over a
 * network link in one run: a codec bound of the slots; hierarchical: the
 * leaders' exchange between hosts (0 on the other members, whose messages
 * stay inside their host). */
size_t pz_dp_creduce_max_message(const pz_dp_creduce *c);

/* Bytes of memory c holds (error feedback, scratch vectors, message slots,
 * a hierarchical member's host group scratch and leader reduction): what a
 * memory plan counts for it. */
size_t pz_dp_creduce_bytes(const pz_dp_creduce *c);

/* Tests: called with every message this member sends (after its header),
 * before it leaves: phase (dpmsg.h), chunk, its elements [lo, lo + count),
 * the codec message. */
typedef void (*pz_dp_tap)(void *user, int phase, int chunk, size_t lo, size_t count, const uint8_t *msg, size_t len);
void pz_dp_creduce_set_tap(pz_dp_creduce *c, pz_dp_tap fn, void *user);

#endif
