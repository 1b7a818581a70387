/* transport.c: see transport.h. This file: tags, requests, peers and
 * failure detection, progress, test and wait, posting, the collectives;
 * init and close are in transport_init.c, the frames in transport_frame.c,
 * the progress thread in transport_thread.c.
 *
 * Structure
 *  - bootstrap.c does the TCP rendezvous: every rank gets every rank's UCX
 *    worker address, and keeps its socket to rank 0 (rank 0: to everyone) for
 *    the shutdown barrier and as a second failure detector (EOF = gone).
 *  - One UCP context (UCP_FEATURE_TAG only) and one UCS_THREAD_MODE_SINGLE
 *    worker. Endpoints are created eagerly to every peer from its worker
 *    address, with UCP_ERR_HANDLING_MODE_PEER and an error callback that only
 *    records (peer, status); the endpoint is force-closed later, outside UCX
 *    callbacks. Eager creation matters: a rank that only ever receives from a
 *    peer still holds an endpoint with an error callback, so it learns when
 *    that peer dies. init ends with an all-to-all hello so that every pair is
 *    wired up (and a bad UCX_TLS fails at init, naming the peer).
 *  - Requests are our own small structs (status, length, peer, `what`, tag,
 *    start time) given to UCX as user_data; UCX requests are freed in the
 *    completion callbacks. A request the caller gave up (error, close) stays
 *    on the live list as an orphan until UCX completes it.
 *  - Failure detection: the UCX error callback (killed peer, reset
 *    connection), EOF on a bootstrap socket (rank 0 <-> others), and the
 *    application deadline in wait (frozen peer: UCX never notices). A lost
 *    peer stays lost: later operations with it fail at once.
 *
 * Transport selection: UCX_TLS and every other UCX_* variable from the
 * environment apply. With error mode PEER, UCX 1.13 only uses transports that
 * can report a peer failure: tcp always; the shared-memory transports
 * (posix/sysv) only with MM_ERROR_HANDLING=y; cma and knem never. So unless
 * the environment says otherwise, init sets
 *   UCX_MM_ERROR_HANDLING=y    same-host pairs then run on sysv shared memory
 *                              (all lanes, bulk included; measured with
 *                              ucp_ep_print_info, see tests/runtime/net/test_transport.c)
 *   UCX_MM_FIFO_SIZE=1024      (default 64 x 8 KiB cells) how much a shared-
 *                              memory sender can push per progress call: with
 *                              progress called between 1 ms compute slices, a
 *                              64 MiB message needed ~450 slices at 64 and ~25
 *                              at 1024 (tcp: ~55); costs ~8 MiB of shared
 *                              memory per process
 *   UCX_KEEPALIVE_INTERVAL=1s  a shared-memory lane has no socket that breaks
 *                              when the peer dies; UCX's keepalive notices
 *                              (within ~2 s instead of tens of seconds)
 * UCX_TLS=tcp forces tcp (e.g. across network namespaces on one host);
 * UCX_TLS=sm alone works too (address exchange, not a listener), but only
 * between processes on one host.
 *
 * Progress: only this thread drives UCX, inside pz_transport_progress, test,
 * wait, the collectives and close. Nothing moves in between: a posted 64 MiB
 * send made no progress while both sides computed for 300 ms and then took
 * the whole transfer time in wait (tcp and sysv); with progress between 1 ms
 * compute slices it overlapped. On tcp and sysv (rendezvous over active
 * messages, no RDMA lanes) the sender completes before the receiver, but on
 * RDMA transports the sender needs the receiver's progress after its receive
 * completed, so keep progressing. */
#include "runtime/net/transport.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>

#include "runtime/net/bootstrap.h"
#include "runtime/net/transport_private.h"
#include "base/clock.h"
#include "base/mem.h"


/* ---- tags ---------------------------------------------------------------- */

uint64_t pz_tag(int src_rank, uint32_t step, uint32_t micro, uint32_t kind) {
    if (src_rank < 0 || src_rank > 255 || micro > 0xffffu || kind > 0xffu) {
        fprintf(stderr, "pz_tag: field out of range (src %d of 0..255, micro %u of 0..65535, kind %u of 0..255)\n",
                src_rank, micro, kind);
        abort();
    }
    return (uint64_t)src_rank << 56 | (uint64_t)kind << 48 | (uint64_t)micro << 32 | step;
}

static int tag_src(uint64_t tag) { return (int)(tag >> 56); }
static unsigned tag_kind(uint64_t tag) { return (unsigned)(tag >> 48) & 0xffu; }

/* ---- requests -------------------------------------------------------------- */

static pz_request *req_new(pz_transport *t, int is_send, int peer, uint64_t tag, size_t len, const char *what) {
    pz_request *r = xcalloc(1, sizeof *r);
    r->t = t;
    r->is_send = is_send;
    r->peer = peer;
    r->tag = tag;
    r->cap = len;
    r->start = pz_now();
    snprintf(r->what, sizeof r->what, "%s", what ? what : "?");
    r->next = t->live;
    if (t->live) t->live->prev = r;
    t->live = r;
    return r;
}

void tp_req_free(pz_request *r) {
    pz_transport *t = r->t;
    if (r->queued) t->nqueued--;
    if (r->prev) r->prev->next = r->next;
    else t->live = r->next;
    if (r->next) r->next->prev = r->prev;
    free(r->faulty);
    free(r);
}

static void req_complete(pz_request *r, void *ucp_req, ucs_status_t st, size_t len) {
    r->done = 1;
    r->done_at = pz_now();
    r->status = st;
    r->len = len;
    if (ucp_req) ucp_request_free(ucp_req);
    r->ucp_req = NULL;
    if (r->orphan) tp_req_free(r);
}

static void on_send(void *ucp_req, ucs_status_t st, void *ud) {
    pz_request *r = ud;
    req_complete(r, ucp_req, st, r->cap);
}

static void on_recv(void *ucp_req, ucs_status_t st, const ucp_tag_recv_info_t *info, void *ud) {
    pz_request *r = ud;
    if (info) r->info = *info;
    req_complete(r, ucp_req, st, st == UCS_OK && info ? info->length : 0);
}

/* The caller is done with r: free it, or leave it to the completion callback
 * when UCX still owns it (a posted receive is cancelled first). */
void tp_req_release(pz_request *r) {
    if (r->done || !r->ucp_req) { tp_req_free(r); return; }
    r->orphan = 1;
    if (!r->is_send) ucp_request_cancel(r->t->worker, r->ucp_req); /* may complete (and free) r now */
}

/* ---- peers and failure detection ----------------------------------------- */

void tp_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t st) {
    (void)ep;
    tp_peer *p = arg;
    if (!p->failed) {
        p->failed = 1;
        snprintf(p->reason, sizeof p->reason, "%s", ucs_status_string(st));
    }
}

static void mark_failed(tp_peer *p, const char *reason) {
    if (p->failed) return;
    p->failed = 1;
    snprintf(p->reason, sizeof p->reason, "%s", reason);
}

void tp_ep_close(tp_peer *p, int force) {
    if (!p->ep) return;
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof prm);
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void *r = ucp_ep_close_nbx(p->ep, &prm);
    p->ep = NULL;
    if (UCS_PTR_IS_PTR(r)) p->close_req = r;
}

/* Force-close endpoints of lost peers; collect finished close requests. */
static void reap(pz_transport *t) {
    for (int i = 0; i < t->world; i++) {
        tp_peer *p = &t->peers[i];
        if (p->failed && p->ep) tp_ep_close(p, 1);
        if (p->close_req && ucp_request_check_status(p->close_req) != UCS_INPROGRESS) {
            ucp_request_free(p->close_req);
            p->close_req = NULL;
        }
    }
}

static void check_bootstrap(pz_transport *t) {
    double now = pz_now();
    if (now < t->next_check) return;
    t->next_check = now + 0.05;
    const char *why = NULL;
    int r;
    while ((r = pz_bootstrap_poll_dead(&t->boot, &why)) >= 0)
        if (!t->closing) mark_failed(&t->peers[r], why);
}

static void start_send(pz_transport *t, pz_request *r);

/* Hands throttled sends whose time has come to UCX. */
static unsigned release_due(pz_transport *t) {
    unsigned n = 0;
    double now = pz_now();
    for (pz_request *r = t->live, *nx; r && t->nqueued; r = nx) {
        nx = r->next;   /* start_send may complete r at once, but never frees it */
        if (r->queued && r->release_at <= now) {
            r->queued = 0;
            t->nqueued--;
            start_send(t, r);
            n++;
        }
    }
    return n;
}

/* One round of progress: drains UCX events (bounded), then failure checks. */
unsigned tp_step(pz_transport *t) {
    unsigned n = t->nqueued ? release_due(t) : 0, k;
    for (int i = 0; i < 32 && (k = ucp_worker_progress(t->worker)) != 0; i++) n += k;
    check_bootstrap(t);
    reap(t);
    return n;
}

unsigned tp_step_cb(void *arg) { return tp_step(arg); }

/* Backs off when nothing happens so that oversubscribed ranks share cores:
 * spin for 200 us, then yield, then sleep 50 us per round after 2 ms. */
static void idle_backoff(unsigned work, double *idle_since) {
#ifdef PZ_TRANSPORT_SPIN /* build-time switch for benchmarks on dedicated cores */
    (void)work;
    (void)idle_since;
    return;
#endif
    double now = pz_now();
    if (work) { *idle_since = now; return; }
    double idle = now - *idle_since;
    if (idle < 200e-6) return;
    if (idle < 2e-3) { sched_yield(); return; }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

void pz_transport_progress(pz_transport *t) {
    lock(t);
    tp_step(t);
    unlock(t);
}

/* ---- test and wait --------------------------------------------------------- */

static pz_status lost_error(pz_transport *t, int peer, const char *what) {
    char name[64];
    return pz_fail(PZ_ERR_PEER, "rank %d: lost %s (%s) while \"%s\"", t->rank,
                   pz_rank_name(&t->names, peer, name, sizeof name), t->peers[peer].reason, what);
}

/* Looks at r without progressing. Sets *done and returns the outcome; r is
 * released whenever the caller gets *done = 1 or an error. */
static pz_status check(pz_transport *t, pz_request *r, int *done, size_t *len, double *done_at, tp_arrival *a) {
    *done = 0;
    a->pending = 0;
    if (r->done) {
        ucs_status_t st = r->status;
        size_t n = r->len;
        pz_status res = PZ_OK;
        if (st == UCS_OK) {
            *done = 1;
            if (len) *len = n;
            if (!r->is_send) {   /* the frame is checked by the caller, unlocked */
                a->pending = 1;
                memcpy(a->hdr, r->fhdr, PZ_FRAME_HDR);
                a->got = n;
                a->buf = r->buf;
                a->want = (pz_frame_id){t->job, (uint32_t)r->tag, (uint16_t)(r->tag >> 32), (uint8_t)tag_kind(r->tag),
                                        (uint8_t)r->peer, (uint8_t)t->rank};
                a->peer = r->peer;
                memcpy(a->what, r->what, WHAT_MAX);
            }
            /* completed inside a post (eager): then; else when a progress call saw it */
            if (done_at) *done_at = r->done_at > 0 ? r->done_at : pz_now();
        } else if (st == UCS_ERR_MESSAGE_TRUNCATED) {
            res = pz_fail(PZ_ERR_PEER,
                          "rank %d: \"%s\": the message from rank %d is larger than the receive buffer of %zu bytes",
                          t->rank, r->what, r->peer, r->cap);
        } else if (t->peers[r->peer].failed) {
            res = lost_error(t, r->peer, r->what);
        } else {
            res = pz_fail(PZ_ERR_PEER, "rank %d: \"%s\" with rank %d failed: %s", t->rank, r->what, r->peer,
                          ucs_status_string(st));
        }
        tp_req_free(r);
        return res;
    }
    if (t->peers[r->peer].failed) {
        pz_status res = lost_error(t, r->peer, r->what);
        tp_req_release(r);
        return res;
    }
    return PZ_OK;
}

pz_status pz_transport_test(pz_transport *t, pz_request *req, int *done, size_t *len) {
    tp_arrival a;
    lock(t);
    tp_step(t);
    pz_status st = check(t, req, done, len, NULL, &a);
    unlock(t);
    if (st == PZ_OK && a.pending) st = tp_frame_verify(t, &a, len);
    return st;
}

/* Waits for r at most timeout_s; past it the peer is declared frozen: its
 * endpoint is force-closed and r is cancelled. */
pz_status tp_wait_for(pz_transport *t, pz_request *r, size_t *len, double timeout_s, double *done_at) {
    double start = pz_now(), idle_since = start;
    tp_arrival a;
    for (;;) {
        lock(t);
        unsigned work = tp_step(t);
        int done;
        pz_status st = check(t, r, &done, len, done_at, &a);
        if (st != PZ_OK || done) {
            unlock(t);
            return st == PZ_OK && a.pending ? tp_frame_verify(t, &a, len) : st;
        }
        double now = pz_now();
        if (r->queued) start = now;   /* a throttled send's deadline starts when it leaves */
        if (now - start > timeout_s) {
            tp_peer *p = &t->peers[r->peer];
            char why[128], name[64];
            snprintf(why, sizeof why, "no answer for %.1f s; endpoint force-closed", now - start);
            pz_status res = pz_fail(PZ_ERR_PEER,
                                    "rank %d: no answer from %s for %.1f s while waiting for \"%s\" (peer frozen?)",
                                    t->rank, pz_rank_name(&t->names, p->rank, name, sizeof name), now - start, r->what);
            mark_failed(p, why);
            reap(t);       /* force-closes the endpoint: a pending send completes (cancelled) */
            tp_req_release(r); /* a receive is cancelled; r may be freed right here */
            unlock(t);
            return res;
        }
        unlock(t);
        idle_backoff(work, &idle_since);
    }
}

pz_status pz_transport_wait(pz_transport *t, pz_request *req, size_t *len) {
    return tp_wait_for(t, req, len, t->peer_timeout_s, NULL);
}

pz_status pz_transport_wait_at(pz_transport *t, pz_request *req, size_t *len, double *done_at) {
    return tp_wait_for(t, req, len, t->peer_timeout_s, done_at);
}

/* ---- posting ----------------------------------------------------------------- */

/* Hands r to UCX. A failure to start is kept in r (done, with the status)
 * and reported by test/wait like any other failure. */
static void start_send(pz_transport *t, pz_request *r) {
    tp_peer *p = &t->peers[r->peer];
    if (p->failed || !p->ep) {
        r->done = 1;
        r->status = UCS_ERR_CONNECTION_RESET;
        return;
    }
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof prm);
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
    prm.cb.send = on_send;
    prm.user_data = r;
    /* the frame: header and payload in one message (runtime/net/frame.h) */
    const void *data = r->faulty;
    size_t count = PZ_FRAME_HDR + r->cap;
    prm.datatype = ucp_dt_make_contig(1);
    if (!r->faulty) {
        r->iov[0] = (ucp_dt_iov_t){r->fhdr, PZ_FRAME_HDR};
        r->iov[1] = (ucp_dt_iov_t){(void *)r->buf, r->cap};
        data = r->iov;
        count = r->cap ? 2 : 1;
        prm.datatype = ucp_dt_make_iov();
    }
    void *s = ucp_tag_send_nbx(p->ep, data, count, r->tag, &prm);
    if (s == NULL) {
        r->done = 1;
        r->status = UCS_OK;
        r->len = r->cap;
    } else if (UCS_PTR_IS_ERR(s)) {
        r->done = 1;
        r->status = UCS_PTR_STATUS(s);
    } else if (!r->done) {
        r->ucp_req = s;
    }
}

/* With a simulated link rate, a message occupies the link for len / rate
 * seconds after the previous one towards that peer has left it, and is
 * handed to UCX (which then moves it at memory speed) only when it would
 * have finished arriving: a store-and-forward link without propagation
 * delay. Each direction of an edge has its own link (full duplex). */
pz_status tp_post_send(pz_transport *t, int peer, uint64_t tag, const void *buf, size_t len, const char *what,
                       pz_request **req, const uint8_t *sealed) {
    tp_peer *p = &t->peers[peer];
    if (p->failed || !p->ep) return lost_error(t, peer, what);
    pz_request *r = req_new(t, 1, peer, tag, len, what);
    r->buf = buf;
    tp_frame_send(t, r, sealed);
    unsigned kind = tag_kind(tag);
    int rated = p->rate_Bps > 0 && kind < KIND_RESERVED;
    /* latency delays every message but the init hello, the collectives too:
     * a real wide-area link charges them as well */
    int delayed = p->latency_s > 0 && kind != K_HELLO;
    if (rated || delayed) {
        double now = pz_now(), begin = p->link_free_at > now ? p->link_free_at : now;
        if (rated) p->link_free_at = begin + (double)len / p->rate_Bps;
        /* the link is busy while it serializes the message; the message then
         * needs latency_s more to arrive. Equal delays keep the order. */
        r->release_at = (rated ? p->link_free_at : now) + p->latency_s;
        r->queued = 1;
        t->nqueued++;
        *req = r;
        if (t->has_thread) pthread_cond_signal(&t->kick);
        return PZ_OK;
    }
    start_send(t, r);
    if (r->done && r->status != UCS_OK) {
        ucs_status_t st = r->status;
        tp_req_free(r);
        if (p->failed) return lost_error(t, peer, what);
        return pz_fail(PZ_ERR_PEER, "rank %d: cannot start \"%s\" to rank %d: %s", t->rank, what, peer,
                       ucs_status_string(st));
    }
    *req = r;
    if (t->has_thread) pthread_cond_signal(&t->kick);
    return PZ_OK;
}

double pz_transport_peer_timeout(const pz_transport *t) { return t->peer_timeout_s; }

void pz_transport_set_link(pz_transport *t, int peer, double mbps, double latency_ms) {
    if (!t || peer < 0 || peer >= t->world || peer == t->rank) return;
    lock(t);
    t->peers[peer].rate_Bps = mbps > 0 ? mbps * 1e6 / 8.0 : 0.0;
    t->peers[peer].latency_s = latency_ms > 0 ? latency_ms * 1e-3 : 0.0;
    unlock(t);
}

void pz_transport_set_names(pz_transport *t, const pz_rank_layout *names) {
    lock(t);
    t->names = *names;
    unlock(t);
}

const pz_rank_layout *pz_transport_names(const pz_transport *t) { return &t->names; }

const char *pz_rank_name(const pz_rank_layout *l, int rank, char *buf, size_t cap) {
    if (!l || l->replicas <= 1 || l->stages < 1 || rank < 0 || rank >= l->stages * l->replicas) {
        snprintf(buf, cap, "rank %d", rank);
        return buf;
    }
    int stage = l->replica_major ? rank % l->stages : rank / l->replicas;
    int replica = l->replica_major ? rank / l->stages : rank % l->replicas;
    snprintf(buf, cap, "rank %d (stage %d, replica %d)", rank, stage, replica);
    return buf;
}

pz_status tp_post_recv(pz_transport *t, int peer, uint64_t tag, void *buf, size_t cap, const char *what,
                       pz_request **req) {
    pz_request *r = req_new(t, 0, peer, tag, cap, what);
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof prm);
    /* NO_IMM_CMPL: UCX 1.13.1 does not fill recv_info on immediate completion
     * (the length would be lost), so completion always goes through on_recv,
     * possibly before ucp_tag_recv_nbx returns. */
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_RECV_INFO |
                       UCP_OP_ATTR_FLAG_NO_IMM_CMPL | UCP_OP_ATTR_FIELD_DATATYPE;
    prm.cb.recv = on_recv;
    prm.user_data = r;
    prm.recv_info.tag_info = &r->info;
    prm.datatype = ucp_dt_make_iov();
    r->buf = buf;   /* the frame's payload lands here, its header in r->fhdr */
    r->iov[0] = (ucp_dt_iov_t){r->fhdr, PZ_FRAME_HDR};
    r->iov[1] = (ucp_dt_iov_t){buf, cap};
    void *s = ucp_tag_recv_nbx(t->worker, r->iov, cap ? 2 : 1, tag, ~(ucp_tag_t)0, &prm);
    if (s == NULL) {
        r->done = 1;
        r->status = UCS_OK;
        r->len = r->info.length;
    } else if (UCS_PTR_IS_ERR(s)) {
        ucs_status_t st = UCS_PTR_STATUS(s);
        r->done = 1;
        r->status = st;
        if (st != UCS_ERR_MESSAGE_TRUNCATED) {
            tp_req_free(r);
            return pz_fail(PZ_ERR_PEER, "rank %d: cannot post \"%s\" from rank %d: %s", t->rank, what, peer,
                           ucs_status_string(st));
        }
        /* reported by test/wait like any truncation */
    } else if (!r->done) {
        r->ucp_req = s;
    }
    *req = r;
    return PZ_OK;
}

static pz_status check_args(pz_transport *t, int peer, uint64_t tag, int src, const void *buf, size_t len,
                            pz_request **req, const char *op) {
    if (req) *req = NULL;
    if (!t || !req) return pz_fail(PZ_ERR_ARG, "pz_transport_%s: no transport or request pointer", op);
    if (peer < 0 || peer >= t->world || peer == t->rank)
        return pz_fail(PZ_ERR_ARG, "rank %d: %s with rank %d: not a peer (world %d)", t->rank, op, peer, t->world);
    if (tag_src(tag) != src)
        return pz_fail(PZ_ERR_ARG, "rank %d: %s with rank %d: tag 0x%016llx names source rank %d, expected %d",
                       t->rank, op, peer, (unsigned long long)tag, tag_src(tag), src);
    if (tag_kind(tag) >= KIND_RESERVED)
        return pz_fail(PZ_ERR_ARG, "rank %d: %s: tag kind %u is reserved for the transport (use < %u)", t->rank,
                       op, tag_kind(tag), KIND_RESERVED);
    if (!buf && len) return pz_fail(PZ_ERR_ARG, "rank %d: %s: NULL buffer of %zu bytes", t->rank, op, len);
    return PZ_OK;
}

pz_status pz_transport_send(pz_transport *t, int peer, uint64_t tag, const void *buf, size_t len,
                            const char *what, pz_request **req) {
    pz_status st = check_args(t, peer, tag, t ? t->rank : -1, buf, len, req, "send");
    if (st != PZ_OK) return st;
    uint8_t hdr[PZ_FRAME_HDR];
    tp_frame_seal(t, peer, tag, buf, len, hdr);   /* the payload's CRC, unlocked */
    lock(t);
    st = tp_post_send(t, peer, tag, buf, len, what, req, hdr);
    unlock(t);
    return st;
}

pz_status pz_transport_recv(pz_transport *t, int peer, uint64_t tag, void *buf, size_t cap, const char *what,
                            pz_request **req) {
    pz_status st = check_args(t, peer, tag, peer, buf, cap, req, "recv");
    if (st != PZ_OK) return st;
    lock(t);
    st = tp_post_recv(t, peer, tag, buf, cap, what, req);
    unlock(t);
    return st;
}

/* ---- collectives: a sum of doubles over all ranks (gather to rank 0, sum in
 * rank order, broadcast: every rank gets the same bits), the barrier ------- */

double tp_left_until(double deadline) {
    double l = deadline - pz_now();
    return l > 0 ? l : 0;
}

/* Gather n doubles to rank 0, sum in rank order (so every rank gets the
 * same bits), broadcast the result. n = 0 is a barrier. */
static pz_status gather_sum_bcast(pz_transport *t, double *vals, int n, const char *name) {
    if (n < 0 || n > (1 << 24)) return pz_fail(PZ_ERR_ARG, "rank %d: %s of %d values", t->rank, name, n);
    if (n > 0 && !vals) return pz_fail(PZ_ERR_ARG, "rank %d: %s: NULL values", t->rank, name);
    if (t->world == 1) return PZ_OK;
    uint32_t seq = t->coll_seq++;
    size_t bytes = (size_t)n * sizeof(double);
    /* Rank 0 waits on every rank directly, so it is the one that can name a
     * frozen rank; the others wait on rank 0 only and get twice as long, or
     * they would time out at the same moment and blame rank 0. */
    double deadline = pz_now() + (t->rank == 0 ? 1.0 : 2.0) * t->peer_timeout_s;
    char what[WHAT_MAX];
    pz_status st = PZ_OK;
    if (t->rank != 0) {
        double *res = n ? xmalloc(bytes) : NULL;
        pz_request *rr = NULL, *sr = NULL;
        size_t got = 0;
        snprintf(what, sizeof what, "%s #%u: result from rank 0", name, seq);
        st = tp_post_recv(t, 0, pz_tag(0, seq, 0, K_COLL_DOWN), res, bytes, what, &rr);
        snprintf(what, sizeof what, "%s #%u: contribution to rank 0", name, seq);
        if (st == PZ_OK) st = tp_post_send(t, 0, pz_tag(t->rank, seq, 0, K_COLL_UP), vals, bytes, what, &sr, NULL);
        if (st == PZ_OK) { st = tp_wait_for(t, sr, NULL, tp_left_until(deadline), NULL); sr = NULL; }
        if (st == PZ_OK) { st = tp_wait_for(t, rr, &got, tp_left_until(deadline), NULL); rr = NULL; }
        if (st == PZ_OK && got != bytes)
            st = pz_fail(PZ_ERR_PEER, "rank %d: %s #%u: rank 0 sent %zu bytes, expected %zu (mismatched calls?)",
                         t->rank, name, seq, got, bytes);
        if (st == PZ_OK && n) memcpy(vals, res, bytes);
        if (sr) tp_req_release(sr);
        if (rr) tp_req_release(rr);
        free(res);
        return st;
    }
    int W = t->world;
    double *in = n ? xmalloc(bytes * (size_t)(W - 1)) : NULL;
    pz_request **rq = xcalloc((size_t)W, sizeof *rq);
    for (int r = 1; r < W && st == PZ_OK; r++) {
        snprintf(what, sizeof what, "%s #%u: contribution from rank %d", name, seq, r);
        st = tp_post_recv(t, r, pz_tag(r, seq, 0, K_COLL_UP), in ? in + (size_t)(r - 1) * (size_t)n : NULL, bytes,
                       what, &rq[r]);
    }
    for (int r = 1; r < W && st == PZ_OK; r++) {
        size_t got = 0;
        st = tp_wait_for(t, rq[r], &got, tp_left_until(deadline), NULL);
        rq[r] = NULL;
        if (st == PZ_OK && got != bytes)
            st = pz_fail(PZ_ERR_PEER, "rank 0: %s #%u: rank %d sent %zu bytes, expected %zu (mismatched calls?)",
                         name, seq, r, got, bytes);
    }
    if (st == PZ_OK)
        for (int i = 0; i < n; i++) {
            double acc = vals[i];
            for (int r = 1; r < W; r++) acc += in[(size_t)(r - 1) * (size_t)n + (size_t)i];
            vals[i] = acc;
        }
    for (int r = 1; r < W && st == PZ_OK; r++) {
        snprintf(what, sizeof what, "%s #%u: result to rank %d", name, seq, r);
        st = tp_post_send(t, r, pz_tag(0, seq, 0, K_COLL_DOWN), vals, bytes, what, &rq[r], NULL);
    }
    for (int r = 1; r < W && st == PZ_OK; r++) {
        st = tp_wait_for(t, rq[r], NULL, tp_left_until(deadline), NULL);
        rq[r] = NULL;
    }
    for (int r = 1; r < W; r++)
        if (rq[r]) tp_req_release(rq[r]);
    free(rq);
    free(in);
    return st;
}

/* The collectives hold the lock throughout (the caller's thread progresses
 * in their waits); the progress thread waits meanwhile. */
pz_status pz_transport_allreduce_sum_f64(pz_transport *t, double *vals, int n) {
    lock(t);
    pz_status st = gather_sum_bcast(t, vals, n, "allreduce");
    unlock(t);
    return st;
}

pz_status pz_transport_barrier(pz_transport *t) {
    lock(t);
    pz_status st = gather_sum_bcast(t, NULL, 0, "barrier");
    unlock(t);
    return st;
}

