/* transport.h: moving bytes between stage processes over UCX (UCP tag API).
 *
 * One UCP worker per process. Without a progress thread it is driven only
 * by the calling thread: progress happens inside pz_transport_progress/test/
 * wait, which the executor calls between compute pieces so communication
 * overlaps compute. With opts.progress_thread a thread of the transport
 * drives it whenever something is in flight (sleeping otherwise), so sends
 * leave and receives land while the caller computes without calling in;
 * the two threads take turns under one lock (UCS_THREAD_MODE_SERIALIZED).
 * All functions here may then be called from one caller thread. Every wait has
 * an application deadline (peer_timeout_s): UCX detects a killed peer but
 * never a frozen one, so a wait that passes the deadline force-closes the
 * endpoint and fails with a message naming the peer and the operation.
 *
 * Bootstrap: rank 0 listens on master_addr:master_port (TCP); every rank
 * connects, sends its UCX worker address, and receives everyone's; then each
 * rank creates endpoints to every peer (eagerly, so that a rank that only
 * receives from a peer still learns when it dies) and init exchanges a hello
 * with every peer. The bootstrap sockets stay open: shutdown barrier, and EOF
 * on them is a second detector of a dead process (rank 0 <-> others).
 *
 * Progress rules for the caller without a progress thread (measured, see
 * runtime/net/transport.c):
 *  - Data moves only inside progress/test/wait/collectives. A posted send
 *    of more than ~8 KiB (rendezvous) does not move while both sides compute
 *    without progress; call pz_transport_progress (or test) between compute
 *    pieces, roughly every millisecond, to overlap: each call moves a few MiB.
 *  - Keep progressing after a receive completed: on tcp and sysv the
 *    sender completes first (measured), but with RDMA transports (rendezvous
 *    GET) the sender's request needs the receiver's acknowledgement.
 *  - Post receives as early as possible (before the matching send).
 *  - After any PZ_ERR_PEER the peer stays lost (every later operation with
 *    it fails at once): close(t, 1) and exit non-zero.
 *  - Transport selection: UCX_* variables from the environment apply; by
 *    default same-host pairs use shared memory (sysv) and other pairs tcp.
 *    UCX_TLS=tcp forces tcp. PZ_TRANSPORT_INFO=1 prints the lanes. */
#ifndef PZ_TRANSPORT_H
#define PZ_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "base/status.h"

/* How messages name a rank of a job with data-parallel replicas: `train
 * --stages S --replicas D` runs S x D ranks, and "rank 5 was killed" leaves
 * the user to work out which stage of which replica that is, under either
 * layout. With D > 1 the launcher's and the transport's messages say "rank 5
 * (stage 2, replica 1)"; with one replica, "rank 5" as before. The layouts
 * are those of docs/data-parallel.md (runtime/dp/group.h computes the groups
 * from the same rule). Here, beside the transport that names its peers, for
 * the launcher (launcher.h) and the fingerprint exchange too. */
typedef struct {
    int stages, replicas;   /* replicas <= 1 (or a zeroed struct): a plain pipeline */
    int replica_major;      /* --layout replica-major: rank = replica x S + stage; else stage x D + replica */
} pz_rank_layout;

/* "rank R" or "rank R (stage s, replica r)" into buf[cap]; returns buf. */
const char *pz_rank_name(const pz_rank_layout *l, int rank, char *buf, size_t cap);

typedef struct {
    int rank, world;
    const char *master_addr;   /* e.g. "127.0.0.1" */
    int master_port;
    double peer_timeout_s;     /* deadline for any single wait (default 60) */
    double connect_timeout_s;  /* bootstrap deadline (default 60) */
    int progress_thread;       /* 1: a thread of the transport drives UCX (see below) */
    const uint8_t *secret;     /* the job secret every rank proves it holds (runtime/net/jobsecret.h); */
    size_t secret_len;         /* NULL/0: none, anyone who reaches the port may join (rank 0 warns) */
} pz_transport_opts;

typedef struct pz_transport pz_transport;
typedef struct pz_request pz_request;

/* Tags: what a message is, so receives match exactly; the sender's rank is
 * part of the tag because UCP matches tags across all senders.
 * Layout: src (8 bits) | kind (8) | micro (16) | step (32); src > 255,
 * micro > 65535 or kind > 255 abort (programming error). Kinds >=
 * PZ_TAG_KIND_RESERVED belong to the transport (hello, collectives):
 * send/recv refuse them, and refuse a tag whose src is not the sender. */
#define PZ_TAG_KIND_RESERVED 0xF0u
/* The kinds of the messages above the transport, in one list so that no two
 * users share one by accident (data-parallel groups use 0x20.., dp/group.h). */
enum {
    PZ_KIND_ACT = 1,          /* an activation across a boundary, forward: training, and generation's hidden rows */
    PZ_KIND_GRAD = 2,         /* its gradient, backward */
    PZ_KIND_TIED = 3,         /* the tied-embedding gradient, first and last rank */
    PZ_KIND_VAL = 4,          /* a validation activation */
    PZ_KIND_SAVE = 5,         /* parameters to rank 0 for --save */
    PZ_KIND_TOKEN = 6,        /* generation: the token the last rank drew, to rank 0 */
    PZ_KIND_FINGERPRINT = 8,  /* what a rank computes, to rank 0 (runtime/plan/fingerprint.h) */
    PZ_KIND_VERDICT = 9,      /* rank 0's verdict on the fingerprints */
};
uint64_t pz_tag(int src_rank, uint32_t step, uint32_t micro, uint32_t kind);

pz_status pz_transport_init(pz_transport **t, const pz_transport_opts *o);
/* failed == 0: cancel posted receives, let sends finish, flush-close the
 * endpoints, then a shutdown barrier over the bootstrap sockets (progressing
 * meanwhile) so that no rank exits while another still flushes towards it.
 * failed != 0: force-close endpoints without flushing, no barrier (after an
 * error). Either way every request still held by the caller is freed. */
void pz_transport_close(pz_transport *t, int failed);

/* Every message travels in a checked frame (runtime/net/frame.h): a 40-byte
 * header with the job id, source and destination rank, the tag's kind, step
 * and micro-batch, the length and a CRC-32C over header and payload. A
 * receive whose frame differs from what its tag, peer and job lead it to
 * expect fails in test/wait with PZ_ERR_PEER, naming `what` and the
 * difference; its data is never handed out as received. Lengths and
 * capacities here are the caller's bytes, without the header.
 *
 * Non-blocking send/receive; the buffer must stay valid until the request
 * completes. `what` names the operation for error messages
 * ("send activation step 3 micro 2"); it is copied. */
pz_status pz_transport_send(pz_transport *t, int peer, uint64_t tag, const void *buf, size_t len,
                            const char *what, pz_request **req);
pz_status pz_transport_recv(pz_transport *t, int peer, uint64_t tag, void *buf, size_t cap,
                            const char *what, pz_request **req);
/* Progress once; *done = 1 when req finished (then *len = bytes received,
 * and req is freed). Errors (peer failure, truncation) free req too.
 * test applies no deadline; only wait does (peer_timeout_s counted from the
 * start of the wait). */
pz_status pz_transport_test(pz_transport *t, pz_request *req, int *done, size_t *len);
/* Progress until req finishes, a peer fails, or the deadline passes
 * (then the peer's endpoint is force-closed and req cancelled). req is freed
 * in every case. len may be NULL. */
pz_status pz_transport_wait(pz_transport *t, pz_request *req, size_t *len);
/* pz_transport_wait, and *done_at = when the request completed (pz_now
 * seconds; with a progress thread, within its polling interval): a receive
 * that finished long before the wait says when its data arrived. */
pz_status pz_transport_wait_at(pz_transport *t, pz_request *req, size_t *len, double *done_at);
void pz_transport_progress(pz_transport *t);
/* opts.peer_timeout_s as init took it (the default for 0): the deadline
 * of waits done outside the transport (the data-parallel shared memory). */
double pz_transport_peer_timeout(const pz_transport *t);

/* Fault injection for the tests (PIPEZIP_FAULT_FLIP, runtime/ckpt/fault.h):
 * the first message of tag kind `kind` and step `step` this rank sends
 * leaves with one byte of its frame flipped: byte `at` (0..39 the header, 40
 * on the payload), or the middle of the payload when at < 0. Once. */
void pz_transport_fault_flip(pz_transport *t, unsigned kind, uint32_t step, long at);

/* Simulated link (for "what does compression buy on a 100 Mbit/s link with
 * 25 ms of delay?" on one machine): from now on, messages to `peer` leave at
 * `mbps` Mbit/s (0 = unlimited): each occupies the link for len / rate after
 * the messages before it (store and forward; each direction its own link),
 * then needs `latency_ms` more (one-way propagation delay), and is handed to
 * UCX (which moves it at memory speed) only then. The rate applies to the
 * caller's messages, not to the transport's own small collectives; the delay
 * to both. No loss. A sender's wait deadline counts from the release. This is
 * a simulation in the sender; tools/netns_pipeline.sh runs over real shaped
 * kernel links instead. */
void pz_transport_set_link(pz_transport *t, int peer, double mbps, double latency_ms);

/* How errors name a lost or frozen peer from now on (pz_rank_name: with
 * replicas, its stage and replica beside its rank). */
void pz_transport_set_names(pz_transport *t, const pz_rank_layout *names);
/* The names set (a zeroed layout before: "rank R"). */
const pz_rank_layout *pz_transport_names(const pz_transport *t);

/* The progress thread's CPU time (seconds since init), its polling rounds
 * and its sleeps; returns 0 (and sets nothing) without a progress thread. */
int pz_transport_thread_stats(pz_transport *t, double *cpu_s, unsigned long *rounds, unsigned long *sleeps);

/* Small collectives over the same transport (loss/grad-norm reporting):
 * gather to rank 0, sum in rank order, broadcast, so every rank gets the same
 * bits. All ranks must call them in the same order; peer_timeout_s bounds the
 * whole call. n = 0 is allowed (a barrier). */
pz_status pz_transport_allreduce_sum_f64(pz_transport *t, double *vals, int n);
pz_status pz_transport_barrier(pz_transport *t);

/* Prints UCX's lane selection (ucp_ep_print_info) for every endpoint: which
 * transports actually carry the traffic. Also printed to stderr at the end of
 * init when PZ_TRANSPORT_INFO=1. */
void pz_transport_print_info(pz_transport *t, FILE *f);

/* Whether this UCX build can send from and receive into CUDA device memory
 * (ucp_context_query's memory_types includes UCS_MEMORY_TYPE_CUDA). Debian's
 * UCX 1.13 cannot: it is built without CUDA support. */
int pz_transport_has_cuda_memory(pz_transport *t);

#endif
