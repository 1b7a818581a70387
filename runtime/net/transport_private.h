/* transport_private.h: the transport's state, shared by transport.c (UCX,
 * requests, links, posting, waiting, collectives), transport_init.c (init
 * and close), transport_frame.c (frames) and
 * transport_thread.c (the progress thread); private to those files. */
#ifndef PZ_TRANSPORT_PRIVATE_H
#define PZ_TRANSPORT_PRIVATE_H

#include <pthread.h>
#include <ucp/api/ucp.h>

#include "runtime/net/bootstrap.h"
#include "runtime/net/frame.h"
#include "runtime/net/transport.h"

#define WHAT_MAX 128

typedef struct tp_peer {
    pz_transport *t;
    int rank;
    ucp_ep_h ep;         /* NULL once closed */
    void *close_req;     /* pending ucp_ep_close_nbx request */
    int failed;          /* lost: error callback, bootstrap EOF, or deadline */
    char reason[128];    /* why, for messages */
    double rate_Bps;     /* simulated link rate towards this peer, 0 = unlimited */
    double latency_s;    /* simulated one-way propagation delay towards this peer */
    double link_free_at; /* when the simulated link finishes its last message */
} tp_peer;

struct pz_request {
    pz_transport *t;
    pz_request *prev, *next; /* live list */
    void *ucp_req;           /* UCX request while in flight */
    int is_send, peer;
    int done;                /* UCX reported completion (status below) */
    int orphan;              /* the caller gave it up: free on completion */
    int queued;              /* a throttled send not yet handed to UCX */
    double release_at;       /* ... until this time */
    const void *buf;         /* ... from this buffer */
    ucs_status_t status;
    size_t len, cap;
    uint64_t tag;
    double start;
    double done_at;          /* when completion was seen (pz_now) */
    ucp_tag_recv_info_t info;
    char what[WHAT_MAX];
    uint8_t fhdr[PZ_FRAME_HDR];  /* the frame header sent, or received into */
    ucp_dt_iov_t iov[2];     /* the frame: header, then the caller's buffer */
    uint8_t *faulty;         /* PIPEZIP_FAULT_FLIP: the whole frame with a byte flipped */
};

/* A receive that completed, checked (CRC over the payload) by the waiting
 * caller after it let go of the lock. */
typedef struct {
    int pending;
    uint8_t hdr[PZ_FRAME_HDR];
    size_t got;              /* bytes that arrived, header included */
    const void *buf;
    pz_frame_id want;
    int peer;
    char what[WHAT_MAX];
} tp_arrival;

struct pz_transport {
    int rank, world;
    pz_rank_layout names;    /* how errors name a peer (pz_rank_name) */
    double peer_timeout_s, connect_timeout_s;
    ucp_context_h ctx;
    ucp_worker_h worker;
    tp_peer *peers;
    pz_bootstrap boot;
    pz_request *live;
    uint32_t coll_seq;
    int nqueued;             /* throttled sends waiting for their time */
    double next_check;
    int closing;
    uint64_t job;            /* job id (transport_frame.c), in every frame header */
    int fault_kind;          /* PIPEZIP_FAULT_FLIP (pz_transport_fault_flip); -1 = none */
    uint32_t fault_step;
    long fault_at;
    /* progress thread (pz_transport_opts.progress_thread): it and the
     * caller's thread take mu around every use of UCX and of the request
     * lists; UCX runs in UCS_THREAD_MODE_SERIALIZED. Recursive, because
     * collectives post and wait through the same locked primitives. */
    pthread_mutex_t mu;
    pthread_cond_t kick;     /* a post or close wakes the sleeping thread */
    pthread_t thread;
    int has_mu, has_thread, stop;
    unsigned long thread_rounds, thread_sleeps;   /* for pz_transport_thread_stats */
};

static inline void lock(pz_transport *t) {
    if (t->has_mu) pthread_mutex_lock(&t->mu);
}
static inline void unlock(pz_transport *t) {
    if (t->has_mu) pthread_mutex_unlock(&t->mu);
}

/* kinds >= KIND_RESERVED are the transport's own messages */
#define KIND_RESERVED 0xF0u
enum { K_HELLO = 0xF0, K_COLL_UP = 0xF1, K_COLL_DOWN = 0xF2 };
#define HELLO_MAGIC 0x5a50484cu

/* One round of progress: releases due throttled sends, drains UCX events
 * (bounded), checks for lost peers. Called with the lock held. */
unsigned tp_step(pz_transport *t);
unsigned tp_step_cb(void *t);   /* tp_step for a callback's signature */
/* transport.c, for init and close: requests, posting, waiting */
void tp_req_free(pz_request *r);       /* unlinks and frees (UCX must be done with it) */
void tp_req_release(pz_request *r);    /* the caller gives it up: freed now, or on completion */
void tp_ep_close(tp_peer *p, int force);
void tp_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t st);   /* UCX's error callback: records only */
pz_status tp_post_send(pz_transport *t, int peer, uint64_t tag, const void *buf, size_t len, const char *what,
                       pz_request **out, const uint8_t *sealed);
pz_status tp_post_recv(pz_transport *t, int peer, uint64_t tag, void *buf, size_t cap, const char *what,
                       pz_request **out);
/* Waits for r (progressing) for at most timeout_s; frees r on success. */
pz_status tp_wait_for(pz_transport *t, pz_request *r, size_t *len, double timeout_s, double *done_at);
/* seconds left until deadline (0 once past) */
double tp_left_until(double deadline);
/* transport_frame.c: the frames around every message (runtime/net/frame.h).
 * The job id every rank derives from the bootstrap's table. */
uint64_t tp_job_id(const pz_bootstrap *b);
/* The frame header of a send of buf[0..len) with tag to peer; reads only
 * what init set, so callers seal before taking the lock (the CRC of a big
 * payload then never holds up the progress thread). */
void tp_frame_seal(const pz_transport *t, int peer, uint64_t tag, const void *buf, size_t len,
                   uint8_t hdr[PZ_FRAME_HDR]);
/* Sets r->fhdr for the send r (a copy of `sealed`, or sealed here when NULL);
 * with a matching fault armed, also r->faulty. Called with the lock held. */
void tp_frame_send(pz_transport *t, pz_request *r, const uint8_t *sealed);
/* Checks an arrival (a->got bytes, header included); *len = payload bytes. */
pz_status tp_frame_verify(pz_transport *t, const tp_arrival *a, size_t *len);

/* transport_thread.c: start (after init's hello) and stop (first thing in
 * close) the progress thread. */
pz_status tp_thread_start(pz_transport *t);
void tp_thread_stop(pz_transport *t);

#endif
