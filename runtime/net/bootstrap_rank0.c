/* bootstrap_rank0.c: rank 0's side of the rendezvous (bootstrap.h): it
 * listens, runs the handshake of every connection at once (non-blocking),
 * refuses strangers, and sends the table once every rank has joined.
 *
 * What strangers who reach rank 0's port can hold (issue 24: 150 threads
 * reconnecting, or 200 held connections, kept a job from starting): a
 * connection that has not joined yet ("half-open") has HANDSHAKE_S to
 * finish its handshake (a real rank needs two round trips; a slow loris
 * loses its slot). At most MAX_PENDING wait at once and at most PER_SOURCE
 * from one source address; a newcomer beyond either takes the slot of the
 * least advanced, oldest connection (of its own address when that holds
 * PER_SOURCE), so a flood cannot keep ranks on other addresses out. The
 * accept queue is long enough that a real rank's SYN is not dropped behind
 * a storm's. */
#include "runtime/net/bootstrap_private.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/mem.h"
#include "runtime/net/jobsecret.h"

#define HANDSHAKE_S 5.0
#define MAX_PENDING 64
#define PER_SOURCE 16
#define LISTEN_BACKLOG 1024
#define ACCEPT_BATCH (MAX_PENDING / 2)
#define MAX_LOGGED 20   /* rank 0 prints at most this many refusals (then counts them) */

enum { S_AUTH, S_PROOF, S_HELLO }; /* what a pending connection is to send next */

typedef struct {
    int fd;
    int state;
    double since;      /* when it was accepted */
    double until;      /* its handshake deadline */
    uint8_t src[16];   /* its source address (IPv4 as ::ffff:a.b.c.d), without the port */
    char peer[96];     /* where it connects from, for messages */
    uint8_t hdr[HDR_LEN];
    size_t have;       /* bytes of header + payload of the current frame read so far */
    uint8_t *payload;
    size_t len;        /* payload length once the header is complete */
    pz_boot_auth auth; /* its AUTH, from S_PROOF on */
    uint8_t nonce0[PZ_BOOT_NONCE];
} pending_conn;

typedef struct {
    pz_bootstrap *b;
    pending_conn pend[MAX_PENDING];
    int lfd;
    int refused;          /* connections refused so far */
    int flooded;          /* of them, dropped for a newcomer (every slot, or its address's share, taken) */
    char last_drop[400];  /* the latest refusal, for the deadline message */
} rank0;

static void drop_pending(pending_conn *pc) {
    boot_close_fd(&pc->fd);
    free(pc->payload);
    memset(pc, 0, sizeof *pc);
    pc->fd = -1;
}

/* Sends REJECT (best effort, until the deadline) to fd. */
static void reject(int fd, const char *reason, double deadline) {
    size_t n = strlen(reason);
    if (n > REJECT_MAX) n = REJECT_MAX;
    boot_send_frame(fd, F_REJECT, reason, n, deadline, "rank 0");
}

/* Refuses a pending connection: tells it why when `tell` is not NULL, says
 * so on stderr (the first MAX_LOGGED times) and frees its slot. */
static void refuse(rank0 *z, pending_conn *pc, const char *tell, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void refuse(rank0 *z, pending_conn *pc, const char *tell, const char *fmt, ...) {
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (pc->state != S_AUTH)
        snprintf(z->last_drop, sizeof z->last_drop, "%s claiming rank %u: %s", pc->peer, pc->auth.rank, why);
    else
        snprintf(z->last_drop, sizeof z->last_drop, "%s: %s", pc->peer, why);
    int logged = z->refused - z->flooded; /* flooded ones are not logged one by one */
    if (logged < MAX_LOGGED)
        fprintf(stderr, "pipezip: rank 0: refused the connection from %s\n", z->last_drop);
    else if (logged == MAX_LOGGED)
        fprintf(stderr, "pipezip: rank 0: refused %d connections; further refusals are counted, not shown\n",
                MAX_LOGGED + 1);
    z->refused++;
    if (tell) {
        char msg[REJECT_MAX];
        snprintf(msg, sizeof msg, "rank 0 refused this connection: %s", tell);
        reject(pc->fd, msg, pz_now() + 0.2);
    }
    drop_pending(pc);
}

/* A fatal rendezvous error found by rank 0: every rank that connected is told
 * why, then everything is closed. */
static pz_status fail_all(rank0 *z, const char *msg) {
    char saved[768];
    snprintf(saved, sizeof saved, "%s", msg);
    pz_bootstrap *b = z->b;
    for (int r = 1; r < b->world; r++)
        if (b->fds[r] >= 0) reject(b->fds[r], saved, pz_now() + 1.0);
    for (int i = 0; i < MAX_PENDING; i++)
        if (z->pend[i].fd >= 0) { reject(z->pend[i].fd, saved, pz_now() + 0.2); drop_pending(&z->pend[i]); }
    if (z->lfd >= 0) close(z->lfd);
    z->lfd = -1;
    pz_bootstrap_close(b);
    return pz_fail(PZ_ERR_PEER, "%s", saved);
}

/* The frame types a pending connection may send in its state. */
static int expected(int state, unsigned type) {
    switch (state) {
    case S_AUTH: return type == F_AUTH;
    case S_PROOF: return type == F_PROOF || type == F_REJECT;
    case S_HELLO: return type == F_HELLO || type == F_REJECT;
    }
    return 0;
}

/* Reads what is there of the current frame: 1 = complete, 0 = not yet,
 * -1 = refused (the connection is gone). */
static int read_frame_nb(rank0 *z, pending_conn *pc, unsigned *type) {
    for (;;) {
        size_t want, got_before = pc->have;
        uint8_t *dst;
        if (pc->have < HDR_LEN) { dst = pc->hdr + pc->have; want = HDR_LEN - pc->have; }
        else { dst = pc->payload + (pc->have - HDR_LEN); want = HDR_LEN + pc->len - pc->have; }
        if (want == 0) return 1;
        ssize_t r = recv(pc->fd, dst, want, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (r <= 0) {
            refuse(z, pc, NULL, "connection %s before the handshake was complete",
                   r == 0 ? "closed" : "failed");
            return -1;
        }
        pc->have += (size_t)r;
        if (got_before < HDR_LEN && pc->have == HDR_LEN) {
            size_t len = 0;
            if (pz_boot_header_get(pc->hdr, z->b->world, type, &len, "bootstrap") != PZ_OK) {
                char why[256];
                snprintf(why, sizeof why, "%s", pz_last_error() + strlen("bootstrap: "));
                refuse(z, pc, why, "%s", why);
                return -1;
            }
            if (!expected(pc->state, *type)) {
                char why[96];
                snprintf(why, sizeof why, "message type %u out of order in the handshake", *type);
                refuse(z, pc, why, "%s", why);
                return -1;
            }
            pc->len = len;
            pc->payload = len ? xmalloc(len) : NULL;
        }
    }
}

static void next_frame(pending_conn *pc) {
    free(pc->payload);
    pc->payload = NULL;
    pc->have = pc->len = 0;
}

/* The handlers of a pending connection's complete frame, by its state:
 * 0 = go on, 1 = it joined (its slot is free again), -1 = refused, 2 = a
 * fatal error (message in msg). */

/* AUTH: the claimed rank and world, whether it holds a secret, its nonce;
 * answered with the CHALLENGE. */
static int on_auth(rank0 *z, pending_conn *pc) {
    pz_bootstrap *b = z->b;
    const uint8_t *p = pc->payload;
    size_t n = pc->len;
    int secret = b->secret_len > 0;
    if (pz_boot_auth_get(p, n, &pc->auth) != PZ_OK) {
        refuse(z, pc, "malformed AUTH message", "%s", pz_last_error());
        return -1;
    }
    int has = (pc->auth.flags & PZ_BOOT_FLAG_SECRET) != 0;
    pc->state = S_PROOF; /* messages name the claimed rank from here on */
    if (secret && !has) {
        refuse(z, pc, "this job needs the job secret (" PZ_JOB_SECRET_ENV " or --job-secret-file), "
               "and this process has none", "it has no job secret");
        return -1;
    }
    if (!secret && has) {
        refuse(z, pc, "rank 0 has no job secret but this rank has one; give every rank the same secret",
               "it holds a job secret and rank 0 has none");
        return -1;
    }
    pz_boot_challenge c = {(uint32_t)b->world, secret ? PZ_BOOT_FLAG_SECRET : 0, {0}};
    pz_boot_random(pc->nonce0, PZ_BOOT_NONCE);
    memcpy(c.nonce, pc->nonce0, PZ_BOOT_NONCE);
    uint8_t buf[PZ_BOOT_CHALLENGE_LEN];
    pz_boot_challenge_put(buf, &c);
    double until = pz_now() + 0.5;
    if (boot_send_frame(pc->fd, F_CHALLENGE, buf, sizeof buf, until < pc->until ? until : pc->until, "rank 0") != PZ_OK) {
        refuse(z, pc, NULL, "cannot send it the challenge: %s", pz_last_error());
        return -1;
    }
    next_frame(pc);
    return 0;
}

/* PROOF: checked (with a secret) before rank 0 sends its own in ACCEPT. */
static int on_proof(rank0 *z, pending_conn *pc) {
    pz_bootstrap *b = z->b;
    const uint8_t *p = pc->payload;
    size_t n = pc->len;
    int secret = b->secret_len > 0;
    uint8_t mac[PZ_BOOT_MAC];
    memset(mac, 0, sizeof mac);
    if (n != PZ_BOOT_MAC) {
        refuse(z, pc, "malformed PROOF message", "PROOF message of %zu bytes", n);
        return -1;
    }
    if (secret) {
        pz_boot_mac(b->secret, b->secret_len, PZ_BOOT_ROLE_JOINING, pc->auth.nonce, pc->nonce0, pc->auth.rank,
                    pc->auth.world, (uint32_t)b->world, mac);
        if (!pz_boot_mac_equal(mac, p)) {
            refuse(z, pc, "its proof of the job secret is wrong (a different secret?)",
                   "its proof of the job secret failed (a different secret, or not a rank of this job)");
            return -1;
        }
        pz_boot_mac(b->secret, b->secret_len, PZ_BOOT_ROLE_RANK0, pc->auth.nonce, pc->nonce0, pc->auth.rank,
                    pc->auth.world, (uint32_t)b->world, mac);
    }
    double until = pz_now() + 0.5;
    if (boot_send_frame(pc->fd, F_ACCEPT, mac, sizeof mac, until < pc->until ? until : pc->until, "rank 0") != PZ_OK) {
        refuse(z, pc, NULL, "cannot send it rank 0's proof: %s", pz_last_error());
        return -1;
    }
    pc->state = S_HELLO;
    next_frame(pc);
    return 0;
}

/* HELLO: the peer has proven itself (or there is no secret); its rank and
 * address join the table. */
static int on_hello(rank0 *z, pending_conn *pc, char *msg, size_t msg_cap) {
    pz_bootstrap *b = z->b;
    const uint8_t *p = pc->payload;
    size_t n = pc->len;
    int secret = b->secret_len > 0;
    uint32_t rank, world;
    const uint8_t *blob;
    size_t blen;
    if (pz_boot_hello_get(p, n, &rank, &world, &blob, &blen) != PZ_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", pz_last_error());
        refuse(z, pc, why, "%s", why);
        return -1;
    }
    if (rank != pc->auth.rank || world != pc->auth.world) {
        refuse(z, pc, "HELLO does not match AUTH", "its HELLO (rank %u, world %u) does not match its AUTH", rank,
               world);
        return -1;
    }
    const char *bad = NULL;
    char why[256];
    if (world != (uint32_t)b->world) {
        snprintf(why, sizeof why, "rank %u says the world size is %u, rank 0 has %d", rank, world, b->world);
        bad = why;
    } else if (rank == 0 || rank >= (uint32_t)b->world) {
        snprintf(why, sizeof why, "a process claims rank %u, valid ranks are 1..%d", rank, b->world - 1);
        bad = why;
    } else if (b->fds[rank] >= 0) {
        snprintf(why, sizeof why, "two processes claim rank %u", rank);
        bad = why;
    }
    if (bad && !secret) {   /* anyone can send this: drop it and keep listening */
        refuse(z, pc, bad, "%s", bad);
        return -1;
    }
    if (bad) {   /* an authenticated rank with another configuration: nobody can start */
        snprintf(msg, msg_cap, "rank 0: bootstrap rejected: %s", bad);
        reject(pc->fd, msg, pz_now() + 1.0);
        drop_pending(pc);
        return 2;
    }
    b->fds[rank] = pc->fd;
    b->lens[rank] = blen;
    b->blobs[rank] = xmalloc(blen);
    memcpy(b->blobs[rank], blob, blen);
    free(pc->payload);
    memset(pc, 0, sizeof *pc);
    pc->fd = -1;
    return 1;
}

static int on_frame(rank0 *z, pending_conn *pc, char *msg, size_t msg_cap) {
    if (pz_get_u16(pc->hdr + 6) == F_REJECT) {
        char reason[REJECT_MAX + 1];
        pz_boot_reason(pc->payload, pc->len, reason, sizeof reason);
        refuse(z, pc, NULL, "it refused rank 0: %s", reason);
        return -1;
    }
    if (pc->state == S_AUTH) return on_auth(z, pc);
    if (pc->state == S_PROOF) return on_proof(z, pc);
    return on_hello(z, pc, msg, msg_cap);
}

static void peer_name(const struct sockaddr_storage *ss, socklen_t sl, char *out, size_t cap) {
    char host[64], serv[16]; /* numeric: an IPv6 address with a scope fits */
    if (getnameinfo((const struct sockaddr *)ss, sl, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        snprintf(out, cap, "an unknown address");
    else if (ss->ss_family == AF_INET6)
        snprintf(out, cap, "[%s]:%s", host, serv);
    else
        snprintf(out, cap, "%s:%s", host, serv);
}

/* The source address of a connection without its port: what one sender is
 * counted by. IPv4 is kept as ::ffff:a.b.c.d, as an IPv6 socket sees it. */
static void source_key(const struct sockaddr_storage *ss, uint8_t key[16]) {
    memset(key, 0, 16);
    if (ss->ss_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    }
}

/* how many waiting connections come from src */
static int count_source(const rank0 *z, const uint8_t *src) {
    int n = 0;
    for (int i = 0; i < MAX_PENDING; i++)
        if (z->pend[i].fd >= 0 && memcmp(z->pend[i].src, src, 16) == 0) n++;
    return n;
}

/* The slot for a newcomer from src: a free one, or that of the connection
 * dropped for it: when src holds PER_SOURCE already, one of src's; when
 * every slot is taken, any. The least advanced goes first (one that has
 * proven nothing yet), then the oldest: a real rank has its AUTH read as it
 * is accepted and is through its handshake in a few milliseconds. */
static int take_slot(rank0 *z, const uint8_t *src) {
    int own = count_source(z, src) >= PER_SOURCE, victim = -1;
    for (int i = 0; i < MAX_PENDING && !own; i++)
        if (z->pend[i].fd < 0) return i;
    for (int i = 0; i < MAX_PENDING; i++) {
        const pending_conn *pc = &z->pend[i], *v = victim >= 0 ? &z->pend[victim] : NULL;
        if (pc->fd < 0 || (own && memcmp(pc->src, src, 16) != 0)) continue;
        if (!v || pc->state < v->state || (pc->state == v->state && pc->since < v->since)) victim = i;
    }
    if (victim < 0) return -1;
    pending_conn *v = &z->pend[victim];
    snprintf(z->last_drop, sizeof z->last_drop, "%s: dropped for a newer connection (%d waiting from its address)",
             v->peer, count_source(z, v->src));
    if (z->flooded++ == 0)
        fprintf(stderr, "pipezip: rank 0: %s; while strangers flood the port, the oldest, least advanced connection "
                "makes room (at most %d from one address, %d in all; the real ranks retry)\n", z->last_drop,
                PER_SOURCE, MAX_PENDING);
    z->refused++;
    drop_pending(v);
    return victim;
}

/* Reads and acts on what a waiting connection sent: 1 = it joined, 0 = not
 * yet (or it was refused), 2 = a fatal error (message in msg). */
static int serve(rank0 *z, pending_conn *pc, char *msg, size_t cap) {
    int joined = 0;
    /* every complete frame that is there (a peer may send several at once) */
    while (pc->fd >= 0) {
        unsigned type = 0;
        int r = read_frame_nb(z, pc, &type);
        if (r <= 0) break;
        r = on_frame(z, pc, msg, cap);
        if (r == 1) joined = 1;
        if (r == 2) return 2;
        if (r != 0) break;
    }
    return joined;
}

/* Accepts the connections waiting in the listen queue, at most
 * ACCEPT_BATCH (a storm that reconnects as fast as rank 0 drops it never
 * empties the queue, and the connections that wait must be served between
 * batches), and reads what each sent already (a real rank's AUTH is there:
 * it is then ahead of a silent stranger's connection). Returns how many
 * joined, or -1 on a fatal error (message in msg). */
static int accept_some(rank0 *z, double deadline, char *msg, size_t cap) {
    int joined = 0;
    for (int k = 0; k < ACCEPT_BATCH; k++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(z->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        uint8_t src[16];
        source_key(&ss, src);
        int slot = take_slot(z, src);
        if (slot < 0) { /* cannot happen: a newcomer always finds or makes a slot */
            close(fd);
            continue;
        }
        boot_socket_options(fd);
        pending_conn *pc = &z->pend[slot];
        pc->fd = fd;
        pc->state = S_AUTH;
        pc->since = pz_now();
        pc->until = pc->since + HANDSHAKE_S;
        if (pc->until > deadline) pc->until = deadline;
        memcpy(pc->src, src, 16);
        peer_name(&ss, sl, pc->peer, sizeof pc->peer);
        int r = serve(z, pc, msg, cap);
        if (r == 2) return -1;
        joined += r;
    }
    return joined;
}

/* "waiting for ranks 2 5 ..." (the first 16 missing ones) into msg */
static int list_missing(const pz_bootstrap *b, char *msg, size_t cap, int n) {
    for (int r = 1, shown = 0; r < b->world && n < (int)cap - 16; r++)
        if (b->fds[r] < 0 && shown++ < 16) n += snprintf(msg + n, cap - (size_t)n, " %d", r);
    return n;
}

static pz_status open_listener(const char *host, int port, int *lfd_out) {
    struct addrinfo *res;
    pz_status st = boot_resolve(host, port, 1, &res, "rank 0");
    if (st != PZ_OK) return st;
    int lfd = -1, err = 0;
    for (struct addrinfo *a = res; a && lfd < 0; a = a->ai_next) {
        lfd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (lfd < 0) { err = errno; continue; }
        int one = 1;
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(lfd, a->ai_addr, a->ai_addrlen) != 0 || listen(lfd, LISTEN_BACKLOG) != 0) {
            err = errno;
            boot_close_fd(&lfd);
        }
    }
    freeaddrinfo(res);
    if (lfd < 0) return pz_fail(PZ_ERR_IO, "rank 0: cannot listen on %s:%d: %s", host, port, strerror(err));
    *lfd_out = lfd;
    return PZ_OK;
}

/* Waits for every rank's HELLO: PZ_OK, or everything closed and a message. */
static pz_status gather_hellos(rank0 *z, const char *host, int port, double deadline) {
    pz_bootstrap *b = z->b;
    int joined = 1;
    char msg[1024];
    const double start = pz_now();
    double note = start + WAIT_NOTE_S;
    while (joined < b->world) {
        double now = pz_now(), left = deadline - now;
        if (now >= note) {   /* say what start-up is waiting for */
            int n = snprintf(msg, sizeof msg, "pipezip: rank 0: waiting for rank%s", b->world - joined > 1 ? "s" : "");
            list_missing(b, msg, sizeof msg, n);
            fprintf(stderr, "%s to join at %s:%d (%.0f s so far; giving up after %.0f s, --peer-timeout)\n", msg, host,
                    port, now - start, deadline - start);
            note = now + 4 * WAIT_NOTE_S;
        }
        if (left <= 0) {
            int n = snprintf(msg, sizeof msg, "rank 0: only %d of %d ranks joined within the bootstrap deadline;"
                             " missing:", joined, b->world);
            n = list_missing(b, msg, sizeof msg, n);
            if (z->refused && n < (int)sizeof msg)
                snprintf(msg + n, sizeof msg - (size_t)n, " (%d connection%s refused, the last: %s)", z->refused,
                         z->refused == 1 ? "" : "s", z->last_drop);
            return fail_all(z, msg);
        }
        for (int i = 0; i < MAX_PENDING; i++)
            if (z->pend[i].fd >= 0 && now > z->pend[i].until)
                refuse(z, &z->pend[i], "the handshake took too long", "no complete handshake within %.0f s",
                       HANDSHAKE_S);
        struct pollfd pfd[MAX_PENDING + 1];
        int idx[MAX_PENDING + 1], np = 0;
        pfd[np] = (struct pollfd){z->lfd, POLLIN, 0};
        idx[np++] = -1;
        for (int i = 0; i < MAX_PENDING; i++)
            if (z->pend[i].fd >= 0) { pfd[np] = (struct pollfd){z->pend[i].fd, POLLIN, 0}; idx[np++] = i; }
        int ms = left > 0.5 ? 500 : (int)(left * 1000) + 1;
        int pr = poll(pfd, (nfds_t)np, ms);
        if (pr < 0 && errno != EINTR) return fail_all(z, "rank 0: poll failed during bootstrap");
        if (pr <= 0) continue;
        /* the waiting ones first: a newcomer may take the slot of one whose answer is already there */
        for (int k = 1; k < np; k++) {
            if (!pfd[k].revents) continue;
            int r = serve(z, &z->pend[idx[k]], msg, sizeof msg);
            if (r == 2) return fail_all(z, msg);
            joined += r;
        }
        if (pfd[0].revents & POLLIN) {
            int r = accept_some(z, deadline, msg, sizeof msg);
            if (r < 0) return fail_all(z, msg);
            joined += r;
        }
    }
    return PZ_OK;
}

/* Sends the table of every rank's address to every rank. */
static pz_status send_table(pz_bootstrap *b, double deadline) {
    size_t tlen = 4;
    for (int r = 0; r < b->world; r++) tlen += 4 + b->lens[r];
    uint8_t *tab = xmalloc(tlen), *q = tab;
    pz_put_u32(q, (uint32_t)b->world);
    q += 4;
    for (int r = 0; r < b->world; r++) {
        pz_put_u32(q, (uint32_t)b->lens[r]);
        memcpy(q + 4, b->blobs[r], b->lens[r]);
        q += 4 + b->lens[r];
    }
    pz_status st = PZ_OK;
    for (int r = 1; r < b->world && st == PZ_OK; r++) {
        char who[64];
        snprintf(who, sizeof who, "rank 0 (sending the address table to rank %d)", r);
        st = boot_send_frame(b->fds[r], F_TABLE, tab, tlen, deadline, who);
    }
    free(tab);
    return st;
}

pz_status boot_run_rank0(pz_bootstrap *b, const char *host, int port, double deadline) {
    int lfd = -1;
    pz_status st = open_listener(host, port, &lfd);
    if (st != PZ_OK) return st;
    if (b->secret_len == 0)
        fprintf(stderr, "pipezip: warning: rank 0: no job secret (" PZ_JOB_SECRET_ENV " or --job-secret-file): "
                "any process that can reach %s:%d may join this job as a rank and read or change its "
                "activations\n", host, port);
    rank0 *z = xcalloc(1, sizeof *z);
    z->b = b;
    z->lfd = lfd;
    for (int i = 0; i < MAX_PENDING; i++) z->pend[i].fd = -1;
    st = gather_hellos(z, host, port, deadline);
    if (st != PZ_OK) { /* fail_all closed everything */
        free(z);
        return st;
    }
    for (int i = 0; i < MAX_PENDING; i++)
        if (z->pend[i].fd >= 0) drop_pending(&z->pend[i]);
    if (z->refused > MAX_LOGGED || z->flooded)
        fprintf(stderr, "pipezip: rank 0: refused %d connections in all (%d dropped for newer ones)\n", z->refused,
                z->flooded);
    boot_close_fd(&z->lfd);
    free(z);
    return send_table(b, deadline);
}

