/* bootstrap.c: see bootstrap.h. */
#include "runtime/net/bootstrap.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/mem.h"
#include "runtime/net/jobsecret.h"

#define HDR_LEN PZ_BOOT_HDR
#define REJECT_MAX PZ_BOOT_REJECT_MAX
enum { F_HELLO = PZ_F_HELLO, F_TABLE = PZ_F_TABLE, F_REJECT = PZ_F_REJECT, F_BYE = PZ_F_BYE, F_ACK = PZ_F_ACK,
       F_AUTH = PZ_F_AUTH, F_CHALLENGE = PZ_F_CHALLENGE, F_PROOF = PZ_F_PROOF, F_ACCEPT = PZ_F_ACCEPT };

/* What strangers who reach rank 0's port can hold (issue 24: 150 threads
 * reconnecting, or 200 held connections, kept a job from starting). A
 * connection that has not joined yet ("half-open") has HANDSHAKE_S to finish
 * its handshake (a real rank needs two round trips; a slow loris loses its
 * slot). At most MAX_PENDING wait at once and at most PER_SOURCE from one
 * source address; a newcomer beyond either takes the slot of the oldest,
 * least advanced connection of the address that holds the most (its own
 * when that is the busiest), so a flood from a few addresses cannot keep
 * ranks on other addresses out. The accept queue is long enough that a
 * real rank's SYN is not dropped behind a storm's. */
#define HANDSHAKE_S 5.0
#define MAX_PENDING 64
#define PER_SOURCE 16
#define LISTEN_BACKLOG 1024
#define ACCEPT_BATCH (MAX_PENDING / 2)
#define WAIT_NOTE_S 3.0   /* start-up says what it waits for after this long, then every 4x */
/* rank 0 prints at most this many refusals (then counts them) */
#define MAX_LOGGED 20

static void sleep_s(double s) {
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Waits for `events` on fd until the deadline: 1 ready, 0 timed out. */
static int wait_fd(int fd, short events, double deadline) {
    for (;;) {
        double left = deadline - pz_now();
        if (left <= 0) return 0;
        int ms = left > 1.0 ? 1000 : (int)(left * 1000) + 1;
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, ms);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return 1; /* let the read/write report it */
    }
}

static pz_status write_all(int fd, const void *buf, size_t n, double deadline, const char *who) {
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) { p += w; n -= (size_t)w; continue; }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!wait_fd(fd, POLLOUT, deadline))
                return pz_fail(PZ_ERR_PEER, "%s: timed out sending on the bootstrap connection", who);
            continue;
        }
        return pz_fail(PZ_ERR_PEER, "%s: bootstrap connection failed: %s", who,
                       w < 0 ? strerror(errno) : "short write");
    }
    return PZ_OK;
}

static pz_status read_all(int fd, void *buf, size_t n, double deadline, const char *who) {
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r > 0) { p += r; n -= (size_t)r; continue; }
        if (r == 0) return pz_fail(PZ_ERR_PEER, "%s: bootstrap connection closed by the other side", who);
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (!wait_fd(fd, POLLIN, deadline))
                return pz_fail(PZ_ERR_PEER, "%s: timed out waiting on the bootstrap connection", who);
            continue;
        }
        return pz_fail(PZ_ERR_PEER, "%s: bootstrap connection failed: %s", who, strerror(errno));
    }
    return PZ_OK;
}

static pz_status send_frame(int fd, unsigned type, const void *payload, size_t len, double deadline,
                            const char *who) {
    uint8_t h[HDR_LEN];
    pz_boot_header_put(h, type, len);
    pz_status st = write_all(fd, h, HDR_LEN, deadline, who);
    if (st == PZ_OK && len) st = write_all(fd, payload, len, deadline, who);
    return st;
}

/* Reads one whole frame; *payload is malloc'ed (NULL when empty). */
static pz_status recv_frame(int fd, int world, unsigned *type, uint8_t **payload, size_t *len,
                            double deadline, const char *who) {
    uint8_t h[HDR_LEN];
    *payload = NULL;
    pz_status st = read_all(fd, h, HDR_LEN, deadline, who);
    if (st != PZ_OK) return st;
    if ((st = pz_boot_header_get(h, world, type, len, who)) != PZ_OK) return st;
    if (*len == 0) return PZ_OK;
    *payload = xmalloc(*len);
    st = read_all(fd, *payload, *len, deadline, who);
    if (st != PZ_OK) { free(*payload); *payload = NULL; }
    return st;
}

static void set_socket_options(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
}

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

void pz_bootstrap_close(pz_bootstrap *b) {
    if (b->fds)
        for (int r = 0; r < b->world; r++) close_fd(&b->fds[r]);
    if (b->blobs)
        for (int r = 0; r < b->world; r++) free(b->blobs[r]);
    free(b->fds);
    free(b->bye);
    free(b->blobs);
    free(b->lens);
    memset(b, 0, sizeof *b);
}

static pz_status resolve(const char *host, int port, int passive, struct addrinfo **res, const char *who) {
    char svc[16];
    snprintf(svc, sizeof svc, "%d", port);
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    int rc = getaddrinfo(host, svc, &hints, res);
    if (rc != 0)
        return pz_fail(PZ_ERR_ARG, "%s: cannot resolve master address %s:%d: %s", who, host, port,
                       gai_strerror(rc));
    return PZ_OK;
}

/* ---- rank 0 ------------------------------------------------------------- */

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
    close_fd(&pc->fd);
    free(pc->payload);
    memset(pc, 0, sizeof *pc);
    pc->fd = -1;
}

/* Sends REJECT (best effort, until the deadline) to fd. */
static void reject(int fd, const char *reason, double deadline) {
    size_t n = strlen(reason);
    if (n > REJECT_MAX) n = REJECT_MAX;
    send_frame(fd, F_REJECT, reason, n, deadline, "rank 0");
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

/* Acts on a complete frame of a pending connection: 0 = go on, 1 = it joined
 * (its slot is free again), -1 = refused, 2 = a fatal error (message set). */
static int on_frame(rank0 *z, pending_conn *pc, char *msg, size_t msg_cap) {
    pz_bootstrap *b = z->b;
    unsigned type = pz_get_u16(pc->hdr + 6);
    const uint8_t *p = pc->payload;
    size_t n = pc->len;
    int secret = b->secret_len > 0;
    if (type == F_REJECT) {
        char reason[REJECT_MAX + 1];
        pz_boot_reason(p, n, reason, sizeof reason);
        refuse(z, pc, NULL, "it refused rank 0: %s", reason);
        return -1;
    }
    if (pc->state == S_AUTH) {
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
        if (send_frame(pc->fd, F_CHALLENGE, buf, sizeof buf, until < pc->until ? until : pc->until, "rank 0") != PZ_OK) {
            refuse(z, pc, NULL, "cannot send it the challenge: %s", pz_last_error());
            return -1;
        }
        next_frame(pc);
        return 0;
    }
    if (pc->state == S_PROOF) {
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
        if (send_frame(pc->fd, F_ACCEPT, mac, sizeof mac, until < pc->until ? until : pc->until, "rank 0") != PZ_OK) {
            refuse(z, pc, NULL, "cannot send it rank 0's proof: %s", pz_last_error());
            return -1;
        }
        pc->state = S_HELLO;
        next_frame(pc);
        return 0;
    }
    /* S_HELLO: the peer has proven itself (or there is no secret) */
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
        set_socket_options(fd);
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
    pz_status st = resolve(host, port, 1, &res, "rank 0");
    if (st != PZ_OK) return st;
    int lfd = -1, err = 0;
    for (struct addrinfo *a = res; a && lfd < 0; a = a->ai_next) {
        lfd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (lfd < 0) { err = errno; continue; }
        int one = 1;
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(lfd, a->ai_addr, a->ai_addrlen) != 0 || listen(lfd, LISTEN_BACKLOG) != 0) {
            err = errno;
            close_fd(&lfd);
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
        st = send_frame(b->fds[r], F_TABLE, tab, tlen, deadline, who);
    }
    free(tab);
    if (st == PZ_OK) return PZ_OK;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", pz_last_error());
    pz_bootstrap_close(b);
    return pz_fail(st, "%s", msg);
}

static pz_status run_rank0(pz_bootstrap *b, const char *host, int port, double deadline) {
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
    close_fd(&z->lfd);
    free(z);
    return send_table(b, deadline);
}

/* ---- ranks 1.. ---------------------------------------------------------- */

/* One non-blocking connect attempt bounded by `until`: fd or -1 (errno set). */
static int try_connect(const struct addrinfo *a, double until) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) return -1;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) return fd;
    if (errno != EINPROGRESS) { int e = errno; close(fd); errno = e; return -1; }
    if (!wait_fd(fd, POLLOUT, until)) { close(fd); errno = ETIMEDOUT; return -1; }
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0) soerr = errno;
    if (soerr != 0) { close(fd); errno = soerr; return -1; }
    return fd;
}

/* Tells rank 0 why this rank gives up on it (best effort). */
static void client_refuses(int fd, const char *who, const char *why) {
    char m[REJECT_MAX];
    snprintf(m, sizeof m, "%s: %s", who, why);
    send_frame(fd, F_REJECT, m, strlen(m), pz_now() + 0.5, who);
}

/* Whether the last failure was the connection's, not the protocol's: rank 0
 * closed it before the table (flooded by strangers, it dropped this one for
 * a newer connection; or a restart): try again. A REJECT or a malformed
 * answer is final. */
static int connection_lost(void) {
    const char *e = pz_last_error();
    return strstr(e, "closed by the other side") || strstr(e, "connection failed");
}

/* A send of the handshake failed with st: may it be tried again? */
static pz_status failed_send(pz_status st, int *retry) {
    *retry = connection_lost();
    return st;
}

/* Receives the answer to a handshake step: PZ_OK with *pl (freed by the
 * caller) when it is of type `want`; *retry set as connection_lost says. */
static pz_status client_recv(pz_bootstrap *b, unsigned want, uint8_t **pl, size_t *len, double deadline,
                             const char *who, const char *where, int *retry) {
    unsigned type;
    pz_status st = recv_frame(b->fds[0], b->world, &type, pl, len, deadline, who);
    if (st != PZ_OK) {
        *retry = connection_lost();
        return st;
    }
    if (type == F_REJECT) {
        char reason[REJECT_MAX + 1];
        pz_boot_reason(*pl, *len, reason, sizeof reason);
        free(*pl);
        *pl = NULL;
        return pz_fail(PZ_ERR_PEER, "%s: refused by rank 0 at %s: %s", who, where, reason);
    }
    if (type != want) {
        free(*pl);
        *pl = NULL;
        return pz_fail(PZ_ERR_PEER, "%s: rank 0 at %s sent an unexpected bootstrap message (type %u, %zu bytes)",
                       who, where, type, *len);
    }
    return PZ_OK;
}

/* The handshake and HELLO/TABLE over the connected b->fds[0]. */
static pz_status client_handshake(pz_bootstrap *b, const void *blob, size_t blen, double deadline, const char *who,
                                  const char *where, int *retry) {
    int fd = b->fds[0], secret = b->secret_len > 0;
    pz_boot_auth a = {(uint32_t)b->rank, (uint32_t)b->world, secret ? PZ_BOOT_FLAG_SECRET : 0, {0}};
    pz_boot_random(a.nonce, PZ_BOOT_NONCE);
    uint8_t buf[PZ_BOOT_AUTH_LEN], mac[PZ_BOOT_MAC];
    pz_boot_auth_put(buf, &a);
    pz_status st = send_frame(fd, F_AUTH, buf, sizeof buf, deadline, who);
    if (st != PZ_OK) return failed_send(st, retry);
    uint8_t *pl;
    size_t len;
    if ((st = client_recv(b, F_CHALLENGE, &pl, &len, deadline, who, where, retry)) != PZ_OK) return st;
    pz_boot_challenge c;
    st = pz_boot_challenge_get(pl, len, &c);
    free(pl);
    if (st != PZ_OK) return pz_fail(PZ_ERR_PEER, "%s: rank 0 at %s: %s", who, where, pz_last_error());
    if (c.world != (uint32_t)b->world) {
        client_refuses(fd, who, "another world size");
        return pz_fail(PZ_ERR_PEER, "%s: rank 0 at %s has a world of %u ranks, this rank %d", who, where, c.world,
                       b->world);
    }
    if (secret && !(c.flags & PZ_BOOT_FLAG_SECRET)) {
        client_refuses(fd, who, "this rank holds a job secret and rank 0 has none");
        return pz_fail(PZ_ERR_PEER, "%s: rank 0 at %s has no job secret and this rank has one; refusing to join "
                       "(give every rank the same secret)", who, where);
    }
    memset(mac, 0, sizeof mac);
    if (secret)
        pz_boot_mac(b->secret, b->secret_len, PZ_BOOT_ROLE_JOINING, a.nonce, c.nonce, a.rank, a.world, c.world, mac);
    if ((st = send_frame(fd, F_PROOF, mac, sizeof mac, deadline, who)) != PZ_OK) return failed_send(st, retry);
    if ((st = client_recv(b, F_ACCEPT, &pl, &len, deadline, who, where, retry)) != PZ_OK) return st;
    int proven = len == PZ_BOOT_MAC;
    if (proven && secret) {
        pz_boot_mac(b->secret, b->secret_len, PZ_BOOT_ROLE_RANK0, a.nonce, c.nonce, a.rank, a.world, c.world, mac);
        proven = pz_boot_mac_equal(mac, pl);
    }
    free(pl);
    if (!proven) {
        client_refuses(fd, who, "rank 0's proof of the job secret is wrong");
        return pz_fail(PZ_ERR_PEER, "%s: rank 0 at %s failed to prove that it knows the job secret (not the real "
                       "rank 0?); not sending it this rank's address", who, where);
    }

    /* rank 0 is who it claims to be: now the address */
    size_t hlen = PZ_BOOT_HELLO_FIXED + blen;
    uint8_t *hello = xmalloc(hlen);
    pz_put_u32(hello, (uint32_t)b->rank);
    pz_put_u32(hello + 4, (uint32_t)b->world);
    pz_put_u32(hello + 8, (uint32_t)blen);
    memcpy(hello + PZ_BOOT_HELLO_FIXED, blob, blen);
    st = send_frame(fd, F_HELLO, hello, hlen, deadline, who);
    free(hello);
    if (st != PZ_OK) return failed_send(st, retry);
    /* rank 0 holds this rank as joined now, and drops it only with a REJECT: a close is final */
    int final = 0;
    if ((st = client_recv(b, F_TABLE, &pl, &len, deadline, who, where, &final)) != PZ_OK) return st;
    st = pz_boot_table_get(pl, len, b->world, b->blobs, b->lens);
    free(pl);
    if (st != PZ_OK) return pz_fail(PZ_ERR_PEER, "%s: from rank 0: %s", who, pz_last_error());
    if (b->lens[b->rank] != blen || memcmp(b->blobs[b->rank], blob, blen) != 0)
        return pz_fail(PZ_ERR_PEER, "%s: inconsistent address table from rank 0", who);
    return PZ_OK;
}

static pz_status run_client(pz_bootstrap *b, const char *host, int port, const void *blob, size_t blen,
                            double deadline) {
    char who[64], where[300];
    snprintf(who, sizeof who, "rank %d", b->rank);
    snprintf(where, sizeof where, "%s:%d", host, port);
    struct addrinfo *res;
    pz_status st = resolve(host, port, 0, &res, who);
    if (st != PZ_OK) return st;
    double start = pz_now(), backoff = 0.1, note = start + WAIT_NOTE_S;
    for (;;) {
        int fd = -1, err = 0;
        while (fd < 0) {
            for (const struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
                double until = pz_now() + 2.0;
                fd = try_connect(a, until < deadline ? until : deadline);
                if (fd < 0 && (errno != ETIMEDOUT || err == 0)) err = errno; /* keep "refused" over our own cut-off */
            }
            if (fd >= 0) break;
            double left = deadline - pz_now();
            if (pz_now() >= note) {
                fprintf(stderr, "pipezip: %s: waiting for rank 0 at %s (%s; %.0f s so far; giving up after %.0f s, "
                        "--peer-timeout)\n", who, where, strerror(err), pz_now() - start, deadline - start);
                note = pz_now() + 4 * WAIT_NOTE_S;
            }
            if (left <= 0) {
                freeaddrinfo(res);
                return pz_fail(PZ_ERR_PEER, "%s: cannot reach rank 0 at %s within %.1f s: %s", who, where,
                               pz_now() - start, strerror(err));
            }
            sleep_s(left < 0.1 ? left : 0.1);
        }
        set_socket_options(fd);
        b->fds[0] = fd;
        int retry = 0;
        st = client_handshake(b, blob, blen, deadline, who, where, &retry);
        if (st == PZ_OK) break;
        double left = deadline - pz_now();
        if (!retry || left <= backoff) break;
        /* rank 0 dropped us before the table: flooded by strangers, or a restart; try again */
        close_fd(&b->fds[0]);
        sleep_s(backoff);
        backoff = backoff < 1.0 ? backoff * 2 : 1.0;
    }
    freeaddrinfo(res);
    if (st == PZ_OK) return PZ_OK;
    char msg[768];
    snprintf(msg, sizeof msg, "%s", pz_last_error());
    pz_bootstrap_close(b);
    return pz_fail(st, "%s", msg);
}

pz_status pz_bootstrap_run(pz_bootstrap *b, int rank, int world, const char *master_addr, int master_port,
                           const void *blob, size_t blob_len, double deadline, const uint8_t *secret,
                           size_t secret_len) {
    memset(b, 0, sizeof *b);
    if (world < 1 || world > PZ_BOOT_MAX_WORLD)
        return pz_fail(PZ_ERR_ARG, "world size %d out of range 1..%d", world, PZ_BOOT_MAX_WORLD);
    if (rank < 0 || rank >= world) return pz_fail(PZ_ERR_ARG, "rank %d out of range 0..%d", rank, world - 1);
    if (world > 1 && (master_port < 1 || master_port > 65535))
        return pz_fail(PZ_ERR_ARG, "master port %d out of range 1..65535", master_port);
    if (world > 1 && (!master_addr || !*master_addr)) return pz_fail(PZ_ERR_ARG, "no master address");
    if (blob_len == 0 || blob_len > PZ_BOOT_MAX_BLOB)
        return pz_fail(PZ_ERR_ARG, "worker address of %zu bytes (limit %d)", blob_len, PZ_BOOT_MAX_BLOB);
    if (secret_len > PZ_JOB_SECRET_MAX || (secret_len && !secret))
        return pz_fail(PZ_ERR_ARG, "job secret of %zu bytes (limit %d)", secret_len, PZ_JOB_SECRET_MAX);
    b->rank = rank;
    b->world = world;
    b->secret = secret;
    b->secret_len = secret_len;
    b->fds = xmalloc(sizeof(int) * (size_t)world);
    for (int r = 0; r < world; r++) b->fds[r] = -1;
    b->bye = xcalloc((size_t)world, sizeof(int));
    b->blobs = xcalloc((size_t)world, sizeof(uint8_t *));
    b->lens = xcalloc((size_t)world, sizeof(size_t));
    pz_status st = PZ_OK;
    if (rank == 0) {
        b->blobs[0] = xmalloc(blob_len);
        memcpy(b->blobs[0], blob, blob_len);
        b->lens[0] = blob_len;
        if (world > 1) st = run_rank0(b, master_addr, master_port, deadline);
    } else {
        st = run_client(b, master_addr, master_port, blob, blob_len, deadline);
    }
    b->secret = NULL; /* not kept: the caller owns it */
    b->secret_len = 0;
    return st;
}

/* ---- after the rendezvous ------------------------------------------------ */

/* rank 0: reads one frame from rank r expecting BYE. 1 = BYE, 0 = failure. */
static int read_bye(pz_bootstrap *b, int r) {
    unsigned type;
    uint8_t *pl;
    size_t len;
    if (recv_frame(b->fds[r], b->world, &type, &pl, &len, pz_now() + 1.0, "rank 0") != PZ_OK) return 0;
    int ok = type == F_BYE && len == 4 && pl && pz_get_u32(pl) == (uint32_t)r;
    free(pl);
    if (ok) b->bye[r] = 1;
    return ok;
}

int pz_bootstrap_poll_dead(pz_bootstrap *b, const char **why) {
    if (!b->fds) return -1;
    for (int r = 0; r < b->world; r++) {
        int fd = b->fds[r];
        if (fd < 0) continue;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 0) <= 0 || !p.revents) continue;
        char c;
        ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0) {
            if (b->rank != 0 || b->bye[r]) continue; /* not ours to read now */
            if (read_bye(b, r)) continue;
            *why = "sent garbage on the bootstrap connection";
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            continue;
        } else {
            *why = "bootstrap connection closed: process gone";
        }
        close_fd(&b->fds[r]);
        return r;
    }
    return -1;
}

pz_status pz_bootstrap_barrier(pz_bootstrap *b, double deadline, unsigned (*progress)(void *), void *arg) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", b->rank);
    if (!b->fds || b->world == 1) return PZ_OK;
    if (b->rank != 0) {
        if (b->fds[0] < 0) return pz_fail(PZ_ERR_PEER, "%s: shutdown barrier: rank 0 is gone", who);
        uint8_t pl[4];
        pz_put_u32(pl, (uint32_t)b->rank);
        pz_status st = send_frame(b->fds[0], F_BYE, pl, 4, deadline, who);
        if (st != PZ_OK) return st;
        for (;;) {
            unsigned work = progress ? progress(arg) : 0;
            struct pollfd p = {b->fds[0], POLLIN, 0};
            if (poll(&p, 1, 0) > 0 && p.revents) {
                unsigned type;
                uint8_t *ack;
                size_t len;
                st = recv_frame(b->fds[0], b->world, &type, &ack, &len, deadline, who);
                free(ack);
                if (st != PZ_OK) return st;
                if (type != F_ACK)
                    return pz_fail(PZ_ERR_PEER, "%s: shutdown barrier: unexpected message type %u", who, type);
                return PZ_OK;
            }
            if (pz_now() > deadline)
                return pz_fail(PZ_ERR_PEER, "%s: shutdown barrier: no answer from rank 0", who);
            if (!work) sleep_s(100e-6);
        }
    }
    for (;;) {
        int missing = 0;
        unsigned work = progress ? progress(arg) : 0;
        for (int r = 1; r < b->world; r++) {
            if (b->fds[r] < 0 || b->bye[r]) continue;
            struct pollfd p = {b->fds[r], POLLIN, 0};
            if (poll(&p, 1, 0) > 0 && p.revents) {
                if (!read_bye(b, r)) close_fd(&b->fds[r]); /* gone or garbage: don't wait for it */
                continue;
            }
            missing++;
        }
        if (!missing) break;
        if (pz_now() > deadline) {
            /* release those that did arrive, then report */
            for (int r = 1; r < b->world; r++)
                if (b->fds[r] >= 0 && b->bye[r]) send_frame(b->fds[r], F_ACK, "\0\0\0\0", 4, pz_now() + 1.0, who);
            return pz_fail(PZ_ERR_PEER, "%s: shutdown barrier: %d rank(s) never said goodbye", who, missing);
        }
        if (!work) sleep_s(100e-6);
    }
    pz_status res = PZ_OK;
    for (int r = 1; r < b->world; r++)
        if (b->fds[r] >= 0 && send_frame(b->fds[r], F_ACK, "\0\0\0\0", 4, deadline, who) != PZ_OK) res = PZ_ERR_PEER;
    return res;
}
