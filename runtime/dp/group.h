/* group.h: a data-parallel group (the D replicas of one pipeline stage) and
 * its uncompressed all-reduce over pipezip's transport (runtime/net/transport.h).
 *
 * `pipezip train --replicas D` creates one group per stage and averages
 * the gradients with the non-blocking all-reduce, in buckets (runtime/dp/sync.h).
 *
 * A group is a list of world ranks; the default layout puts replicas of a
 * stage on contiguous ranks, rank = stage x D + replica (Megatron's order:
 * pipeline outermost). Messages go over the transport's endpoints, which
 * connect every pair of ranks (init creates them eagerly), in its checked
 * frames (job id, source and destination rank, kind, step, micro, CRC), so
 * authentication and integrity are the transport's; nothing here opens a
 * connection of its own.
 *
 * Tags: kinds PZ_DP_KIND_* (below the transport's reserved range and apart
 * from the pipeline's kinds 1..5); step = the group's collective number
 * (every member counts its calls, so all members must call the group's
 * collectives in the same order); micro = the message's index within the
 * collective. Two groups running at once must not share a pair of ranks
 * (the layout's groups are disjoint).
 *
 * All-reduce algorithms (every member ends with the same bits: each element
 * is summed in one place and the result copied, or summed pairwise with a
 * commutative add):
 *  - ring: reduce-scatter then all-gather over D chunks, each step's chunk
 *    sent in segments, so a segment reduced at one step leaves for the next
 *    while later segments still arrive. Each rank sends and receives
 *    2(D-1)/D x N x 4 bytes: bandwidth-optimal.
 *  - recursive doubling: log2(P) exchanges of the whole vector with partner
 *    i xor 2^k (P = the largest power of two <= D; the other D - P ranks fold
 *    their vector into a neighbour first and get the result back after):
 *    latency-optimal, for small messages.
 * PZ_DP_AUTO picks recursive doubling up to small_bytes, the ring above.
 *  - shared memory: when every member maps one segment (all on this host),
 *    the ring's sums (each element added in the ring's order, so the same
 *    bits) through it, without the transport (runtime/dp/shm.h). The
 *    all-reduce takes it by itself for the ring, and for recursive doubling
 *    with D = 2 (the same bits); net_only turns it off.
 *
 * After an error the transport must be closed (pz_transport_close(t, 1)):
 * receives may still be posted into the caller's buffer.
 *
 * Failures are the transport's to detect: a killed member within a few
 * seconds, a frozen one after the peer timeout. The member that receives from
 * it names it; in a ring the members further along wait on a neighbour that
 * itself waits, and may time out on that neighbour at about the same moment
 * and name it instead: the earliest error names the culprit. */
#ifndef PZ_DP_GROUP_H
#define PZ_DP_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "runtime/net/transport.h"

/* tag kinds of the data-parallel messages (the others: PZ_KIND_* in transport.h) */
enum {
    PZ_DP_KIND_RING = 0x20,     /* ring reduce-scatter / all-gather segments */
    PZ_DP_KIND_RD = 0x21,       /* recursive doubling rounds */
    PZ_DP_KIND_CGATHER = 0x22,  /* compressed all-gather messages */
    PZ_DP_KIND_CPHASE1 = 0x23,  /* two-phase: chunks to their owners */
    PZ_DP_KIND_CPHASE2 = 0x24,  /* two-phase: re-encoded chunks from their owners */
    PZ_DP_KIND_HINTRA = 0x25,   /* hierarchical: inside a host */
    PZ_DP_KIND_CHECK = 0x26,    /* pz_dp_check_identical's digests, pz_dp_group_hosts' names */
    PZ_DP_KIND_BCAST = 0x27,    /* pz_dp_broadcast */
    PZ_DP_KIND_SHM = 0x28,      /* the shared-memory path's set-up (runtime/dp/shm.h) */
};

#define PZ_DP_MAX 256           /* members of a group (the tag's source field) */

typedef enum { PZ_DP_AUTO = 0, PZ_DP_RING = 1, PZ_DP_RDOUBLING = 2 } pz_dp_algo;

typedef struct {
    pz_transport *t;
    int n;                /* members (D) */
    int me;               /* this rank's index in ranks[] */
    int *ranks;           /* world ranks, in group order */
    uint32_t seq;         /* collectives called so far (the tags' step) */
    size_t small_bytes;   /* PZ_DP_AUTO: recursive doubling up to this size */
    size_t seg_bytes;     /* ring segment size */
    double spin_s;        /* each wait first polls this long without yielding
                           * the core (as MPI libraries do), then waits as the
                           * transport does (it spins 200 us, then yields and
                           * sleeps, so ranks that share cores let each other
                           * run); 0 = the transport's wait only */
    float *scratch;       /* receive space (grown on demand) */
    size_t scratch_n;
    uint64_t bytes_sent, bytes_recv;  /* payload bytes, for reports and tests (shared
                                       * memory: what the others read of what it wrote,
                                       * and it of theirs) */
    int net_only;         /* 1: never the shared-memory path (set on every member:
                           * tests, benchmarks; pz_dp_group_set_link sets it
                           * for a group that spans simulated hosts) */
    size_t shm_slot_bytes;     /* its piece per member (0: PZ_DP_SHM_SLOT_BYTES; the
                                * single copy's piece, 0: 1 MiB) */
    int shm_copy;              /* 1: the two-copy reduction even where the single
                                * copy works (set on every member: tests, benchmarks) */
    struct pz_dp_shm *shm;     /* its state (runtime/dp/shm.c) */
} pz_dp_group;

/* Defaults: 64 KiB (one exchange beats the ring's 2(D-1) latencies below it,
 * bench/bench_allreduce) and 1 MiB segments. */
#define PZ_DP_SMALL_BYTES ((size_t)64 << 10)
#define PZ_DP_SEG_BYTES ((size_t)1 << 20)
/* The shared-memory path's piece per member and round: a segment holds two
 * sets of D, 8 x D MiB of /dev/shm, touched only as far as the vector needs. */
#define PZ_DP_SHM_SLOT_BYTES ((size_t)4 << 20)

/* ranks: n distinct world ranks (0..255), my_rank one of them. The group
 * keeps a copy. t may be NULL for n = 1 (a process alone: nothing is sent).
 * Zero g before init; free is safe on a zeroed group. */
pz_status pz_dp_group_init(pz_dp_group *g, pz_transport *t, int my_rank, const int *ranks, int n);
void pz_dp_group_free(pz_dp_group *g);
/* The world ranks of stage `stage`'s group (of S stages and D replicas) into
 * ranks[D]: PZ_DP_LAYOUT_CONTIGUOUS (the default, Megatron's: pipeline
 * outermost) rank = stage x D + replica; PZ_DP_LAYOUT_STRIDED rank =
 * replica x S + stage (each replica's pipeline on contiguous ranks). */
typedef enum { PZ_DP_LAYOUT_CONTIGUOUS = 0, PZ_DP_LAYOUT_STRIDED = 1 } pz_dp_layout;
void pz_dp_layout_ranks(pz_dp_layout layout, int stage, int S, int D, int *ranks);
/* The stage a world rank holds in that layout. */
int pz_dp_layout_stage(pz_dp_layout layout, int rank, int S, int D);

/* Simulated links (pz_transport_set_link: the rate applies to this group's
 * messages as to any caller's, each direction its own link) to every member
 * on another host, the members forming `hosts` runs of consecutive members
 * (pz_dp_group_hosts' shape; hosts = 0, or not dividing n: every member its
 * own host; 1: all on one host, no link slowed). Members of one host share
 * memory, not a network link, so `--dp-hosts H` slows only the messages
 * between hosts. */
void pz_dp_group_set_link(pz_dp_group *g, int hosts, double mbps, double latency_ms);
/* --dp-link-mbps, --dp-link-latency-ms: a link on which one message of
 * `most` bytes would outlast the peer timeout (the receiver would end in
 * "peer frozen?") is refused, saying so first. */
pz_status pz_dp_check_link(double mbps, double latency_ms, size_t most, double timeout);

/* The largest message pz_dp_allreduce of n floats sends with algo (the
 * whole vector for recursive doubling, else a ring segment), in bytes: what
 * must cross a slow link within the peer timeout. */
size_t pz_dp_allreduce_max_message(const pz_dp_group *g, size_t n, pz_dp_algo algo);

/* In-place sum (mean = 1: then divided by D) of buf[0..n) over the group. */
pz_status pz_dp_allreduce(pz_dp_group *g, float *buf, size_t n, int mean, pz_dp_algo algo);
/* The mean of n floats at dev, backend memory (through a host copy where
 * the backend has no host memory). */
pz_status pz_dp_mean_dev(pz_dp_group *g, const pz_backend *be, float *dev, size_t n);

/* buf[0..n) of member `root` to every member (root sends to each; for the
 * few members of a host). */
pz_status pz_dp_broadcast(pz_dp_group *g, int root, float *buf, size_t n);
/* The same in two halves, for a broadcast in flight beside others
 * (hierarchical buckets, creduce.h): post this member's part of broadcast
 * number `seq` (a collective number the caller took from g->seq earlier;
 * the root's sends once buf holds the data, a member's receive at any time
 * before), rq a table of g->n requests, zeroed; test moves them on (block:
 * to the end) and says whether this member's part is done, checking the
 * length that arrived. */
pz_status pz_dp_broadcast_post(pz_dp_group *g, uint32_t seq, int root, float *buf, size_t n, pz_request **rq);
pz_status pz_dp_broadcast_test(pz_dp_group *g, uint32_t seq, int root, size_t n, pz_request **rq, int block,
                               int *done);

/* The same without blocking, so that buckets of a gradient travel while the
 * caller computes (and several are in flight at once): start posts the
 * first messages and returns; test does what has arrived (reduces segments,
 * passes them on) and says whether the all-reduce is done; wait finishes it.
 * The members start their all-reduces in the same order (the tags' step is
 * the group's count at start). buf belongs to the op until it is done; each
 * op has receive space of its own (2 chunks). Recursive doubling (small
 * messages, by PZ_DP_AUTO's rule) completes inside start. Data moves only
 * inside the transport's calls: call test (or pz_transport_progress) between
 * compute pieces. test and wait free the op when they return done or an
 * error. */
typedef struct pz_dp_op pz_dp_op;
pz_status pz_dp_allreduce_start(pz_dp_group *g, float *buf, size_t n, int mean, pz_dp_algo algo, pz_dp_op **op);
pz_status pz_dp_op_test(pz_dp_op *op, int *done);
pz_status pz_dp_op_wait(pz_dp_op *op);
/* What _start allocates for a ring all-reduce of n floats over D members
 * and holds until done (the op, its receive space, its request table). */
size_t pz_dp_op_bytes(size_t n, int D);

/* Waits for r as the group's spin_s says (the transport's wait; r freed). */
pz_status pz_dp_wait(pz_dp_group *g, pz_request *r, size_t *len);

/* One message of the group's collectives: a send to or a receive from
 * member `peer` (group index) of kind `kind` and index k (the tag's micro)
 * in the current collective (g->seq); the request as the transport's.
 * pz_dp_wait_recv waits for a receive and returns its length in *got. */
pz_status pz_dp_post(pz_dp_group *g, int is_send, int peer, unsigned kind, uint32_t k, void *buf, size_t bytes,
                     pz_request **req);
pz_status pz_dp_wait_recv(pz_dp_group *g, pz_request *r, size_t *got);
/* pz_dp_post in collective `seq` (one that started earlier and is still in
 * flight beside others: compressed buckets, creduce.h). */
pz_status pz_dp_post_at(pz_dp_group *g, uint32_t seq, int is_send, int peer, unsigned kind, uint32_t k, void *buf,
                        size_t bytes, pz_request **req);

/* Replicas must hold the same bits (parameters after a step, optimizer
 * state): every member sends the CRC-32C and length of data[0..bytes) to
 * every other, and all compare the table, so each member reports the same
 * outcome: PZ_ERR_PEER naming `what` and every member whose digest differs
 * from the first member's. The transport stays usable after that error (all
 * messages completed); other PZ_ERR_PEER are the transport's. */
pz_status pz_dp_check_identical(pz_dp_group *g, const void *data, size_t bytes, const char *what);
/* The same for n floats at dev (backend memory). */
pz_status pz_dp_check_identical_dev(pz_dp_group *g, const pz_backend *be, const float *dev, size_t n, const char *what);

/* The hosts the members run on, for the hierarchical reduction's H: every
 * member sends its host name (my_host, or gethostname() when NULL; at most 63
 * bytes) to every other; *hosts = H when the members form H runs of
 * consecutive members of equal length with distinct names (the default
 * layout's replicas of a stage on H hosts). Otherwise PZ_ERR_ARG naming the
 * first member out of place, the same on every member. */
pz_status pz_dp_group_hosts(pz_dp_group *g, const char *my_host, int *hosts);

/* Grows g->scratch to at least n floats. */
float *pz_dp_scratch(pz_dp_group *g, size_t n);
/* The element range [*lo, *hi) of chunk j when n elements are split into
 * parts chunks as evenly as possible (the first n % parts chunks one longer). */
void pz_dp_chunk(size_t n, int parts, int j, size_t *lo, size_t *hi);
/* The buckets of a gradient of n floats (runtime/dp/sync.h, creduce.h), in
 * start order: [hold, n) from the top down in pieces of at most bf floats,
 * then the held prefix [0, hold) the same way (bf 0: one bucket, [0, n)).
 * Writes them into lo[], hi[] (when not NULL); returns how many. */
int pz_dp_buckets(size_t n, size_t hold, size_t bf, size_t *lo, size_t *hi);

#endif
