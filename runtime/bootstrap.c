/* bootstrap.c: see bootstrap.h. */
#include "runtime/bootstrap.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/mem.h"

#define BOOT_MAGIC 0x53425a50u /* "PZBS" as little-endian bytes */
#define BOOT_VERSION 1u
#define HDR_LEN 12u

enum { F_HELLO = 1, F_TABLE = 2, F_REJECT = 3, F_BYE = 4, F_ACK = 5 };

#define REJECT_MAX 512u
#define HELLO_FIXED 12u /* rank, world, blob length */


static size_t max_payload(unsigned type, int world) {
    switch (type) {
    case F_HELLO: return HELLO_FIXED + PZ_BOOT_MAX_BLOB;
    case F_TABLE: return 4 + (size_t)world * (4 + PZ_BOOT_MAX_BLOB);
    case F_REJECT: return REJECT_MAX;
    case F_BYE: case F_ACK: return 4;
    }
    return 0;
}

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

static void make_header(uint8_t *h, unsigned type, size_t len) {
    pz_put_u32(h, BOOT_MAGIC);
    pz_put_u16(h + 4, BOOT_VERSION);
    pz_put_u16(h + 6, (uint16_t)type);
    pz_put_u32(h + 8, (uint32_t)len);
}

static pz_status send_frame(int fd, unsigned type, const void *payload, size_t len, double deadline,
                            const char *who) {
    uint8_t h[HDR_LEN];
    make_header(h, type, len);
    pz_status st = write_all(fd, h, HDR_LEN, deadline, who);
    if (st == PZ_OK && len) st = write_all(fd, payload, len, deadline, who);
    return st;
}

/* Checks a frame header; on success *type and *len are set. */
static pz_status check_header(const uint8_t *h, int world, unsigned *type, size_t *len, const char *who) {
    if (pz_get_u32(h) != BOOT_MAGIC)
        return pz_fail(PZ_ERR_PEER, "%s: not a pipezip bootstrap message (bad magic)", who);
    if (pz_get_u16(h + 4) != BOOT_VERSION)
        return pz_fail(PZ_ERR_PEER, "%s: bootstrap protocol version %u, expected %u (mixed pipezip builds?)",
                       who, pz_get_u16(h + 4), BOOT_VERSION);
    unsigned t = pz_get_u16(h + 6);
    size_t n = pz_get_u32(h + 8), mx = max_payload(t, world);
    if (mx == 0) return pz_fail(PZ_ERR_PEER, "%s: unknown bootstrap message type %u", who, t);
    if (n > mx)
        return pz_fail(PZ_ERR_PEER, "%s: bootstrap message type %u of %zu bytes, limit %zu", who, t, n, mx);
    *type = t;
    *len = n;
    return PZ_OK;
}

/* Reads one whole frame; *payload is malloc'ed (NULL when empty). */
static pz_status recv_frame(int fd, int world, unsigned *type, uint8_t **payload, size_t *len,
                            double deadline, const char *who) {
    uint8_t h[HDR_LEN];
    *payload = NULL;
    pz_status st = read_all(fd, h, HDR_LEN, deadline, who);
    if (st != PZ_OK) return st;
    if ((st = check_header(h, world, type, len, who)) != PZ_OK) return st;
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

typedef struct {
    int fd;
    uint8_t hdr[HDR_LEN];
    size_t have;       /* bytes of header + payload read so far */
    uint8_t *payload;
    size_t len;        /* payload length once the header is complete */
} pending_conn;

static void drop_pending(pending_conn *pc) {
    close_fd(&pc->fd);
    free(pc->payload);
    memset(pc, 0, sizeof *pc);
    pc->fd = -1;
}

/* Sends REJECT (best effort, short deadline) to fd. */
static void reject(int fd, const char *reason) {
    size_t n = strlen(reason);
    if (n > REJECT_MAX) n = REJECT_MAX;
    send_frame(fd, F_REJECT, reason, n, pz_now() + 1.0, "rank 0");
}

/* A fatal rendezvous error found by rank 0: every rank that connected is told
 * why, then everything is closed. */
static pz_status fail_all(pz_bootstrap *b, pending_conn *pend, int npend, int listen_fd, const char *msg) {
    char saved[768];
    snprintf(saved, sizeof saved, "%s", msg);
    for (int r = 1; r < b->world; r++)
        if (b->fds[r] >= 0) reject(b->fds[r], saved);
    for (int i = 0; i < npend; i++)
        if (pend[i].fd >= 0) { reject(pend[i].fd, saved); drop_pending(&pend[i]); }
    if (listen_fd >= 0) close(listen_fd);
    pz_bootstrap_close(b);
    return pz_fail(PZ_ERR_PEER, "%s", saved);
}

static pz_status run_rank0(pz_bootstrap *b, const char *host, int port, double deadline) {
    struct addrinfo *res;
    pz_status st = resolve(host, port, 1, &res, "rank 0");
    if (st != PZ_OK) return st;
    int lfd = -1, err = 0;
    for (struct addrinfo *a = res; a && lfd < 0; a = a->ai_next) {
        lfd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (lfd < 0) { err = errno; continue; }
        int one = 1;
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(lfd, a->ai_addr, a->ai_addrlen) != 0 || listen(lfd, b->world + 16) != 0) {
            err = errno;
            close_fd(&lfd);
        }
    }
    freeaddrinfo(res);
    if (lfd < 0)
        return pz_fail(PZ_ERR_IO, "rank 0: cannot listen on %s:%d: %s", host, port, strerror(err));

    enum { MAX_PENDING = 64 };
    pending_conn pend[MAX_PENDING];
    for (int i = 0; i < MAX_PENDING; i++) { memset(&pend[i], 0, sizeof pend[i]); pend[i].fd = -1; }
    int joined = 1;
    char last_drop[256] = "";
    char msg[768];

    while (joined < b->world) {
        double left = deadline - pz_now();
        if (left <= 0) {
            int n = snprintf(msg, sizeof msg, "rank 0: only %d of %d ranks joined within the bootstrap deadline;"
                             " missing:", joined, b->world);
            for (int r = 1, shown = 0; r < b->world && n < (int)sizeof msg - 16; r++)
                if (b->fds[r] < 0 && shown++ < 16) n += snprintf(msg + n, sizeof msg - (size_t)n, " %d", r);
            if (last_drop[0] && n < (int)sizeof msg)
                snprintf(msg + n, sizeof msg - (size_t)n, " (last rejected connection: %s)", last_drop);
            return fail_all(b, pend, MAX_PENDING, lfd, msg);
        }
        struct pollfd pfd[MAX_PENDING + 1];
        int idx[MAX_PENDING + 1], np = 0;
        pfd[np] = (struct pollfd){lfd, POLLIN, 0};
        idx[np++] = -1;
        for (int i = 0; i < MAX_PENDING; i++)
            if (pend[i].fd >= 0) { pfd[np] = (struct pollfd){pend[i].fd, POLLIN, 0}; idx[np++] = i; }
        int ms = left > 0.5 ? 500 : (int)(left * 1000) + 1;
        int pr = poll(pfd, (nfds_t)np, ms);
        if (pr < 0 && errno != EINTR)
            return fail_all(b, pend, MAX_PENDING, lfd, "rank 0: poll failed during bootstrap");
        if (pr <= 0) continue;
        if (pfd[0].revents & POLLIN) {
            for (;;) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) break;
                int slot = -1;
                for (int i = 0; i < MAX_PENDING && slot < 0; i++)
                    if (pend[i].fd < 0) slot = i;
                if (slot < 0) { close(fd); continue; } /* flooded: the real ranks retry */
                set_socket_options(fd);
                pend[slot].fd = fd;
            }
        }
        for (int k = 1; k < np; k++) {
            if (!pfd[k].revents) continue;
            pending_conn *pc = &pend[idx[k]];
            /* read what is there: header first, then the payload */
            int dropped = 0;
            for (;;) {
                size_t want, got_before = pc->have;
                uint8_t *dst;
                if (pc->have < HDR_LEN) { dst = pc->hdr + pc->have; want = HDR_LEN - pc->have; }
                else { dst = pc->payload + (pc->have - HDR_LEN); want = HDR_LEN + pc->len - pc->have; }
                if (want == 0) break;
                ssize_t r = recv(pc->fd, dst, want, MSG_DONTWAIT);
                if (r < 0 && errno == EINTR) continue;
                if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
                if (r <= 0) {
                    snprintf(last_drop, sizeof last_drop, "connection closed before a complete HELLO");
                    drop_pending(pc);
                    dropped = 1;
                    break;
                }
                pc->have += (size_t)r;
                if (got_before < HDR_LEN && pc->have == HDR_LEN) {
                    unsigned type = 0;
                    size_t len = 0;
                    int hdr_ok = check_header(pc->hdr, b->world, &type, &len, "rank 0") == PZ_OK;
                    if (!hdr_ok || type != F_HELLO || len < HELLO_FIXED) {
                        /* A wrong version is a configuration error: fail fast. Other garbage may be
                         * a stray connection: drop it and keep waiting for the real ranks. */
                        if (pz_get_u32(pc->hdr) == BOOT_MAGIC && pz_get_u16(pc->hdr + 4) != BOOT_VERSION) {
                            snprintf(msg, sizeof msg, "%s", pz_last_error());
                            reject(pc->fd, msg);
                            drop_pending(pc);
                            return fail_all(b, pend, MAX_PENDING, lfd, msg);
                        }
                        snprintf(last_drop, sizeof last_drop, "%s",
                                 !hdr_ok ? pz_last_error() : type != F_HELLO ? "not a HELLO message"
                                                                              : "HELLO too short");
                        drop_pending(pc);
                        dropped = 1;
                        break;
                    }
                    pc->len = len;
                    pc->payload = xmalloc(len);
                }
            }
            if (dropped || pc->fd < 0 || pc->have < HDR_LEN || pc->have < HDR_LEN + pc->len) continue;

            /* a complete HELLO: validate it */
            const uint8_t *p = pc->payload;
            uint32_t rank = pz_get_u32(p), world = pz_get_u32(p + 4), blen = pz_get_u32(p + 8);
            const char *bad = NULL;
            char why[256];
            if (world != (uint32_t)b->world) {
                snprintf(why, sizeof why, "rank %u says the world size is %u, rank 0 has %d", rank, world,
                         b->world);
                bad = why;
            } else if (rank == 0 || rank >= (uint32_t)b->world) {
                snprintf(why, sizeof why, "a process claims rank %u, valid ranks are 1..%d", rank, b->world - 1);
                bad = why;
            } else if (b->fds[rank] >= 0) {
                snprintf(why, sizeof why, "two processes claim rank %u", rank);
                bad = why;
            } else if (blen == 0 || blen > PZ_BOOT_MAX_BLOB || (size_t)blen != pc->len - HELLO_FIXED) {
                snprintf(why, sizeof why, "rank %u sent a malformed HELLO (address of %u bytes in %zu)", rank,
                         blen, pc->len);
                bad = why;
            }
            if (bad) {
                snprintf(msg, sizeof msg, "rank 0: bootstrap rejected: %s", bad);
                reject(pc->fd, msg);
                drop_pending(pc);
                return fail_all(b, pend, MAX_PENDING, lfd, msg);
            }
            b->fds[rank] = pc->fd;
            b->lens[rank] = blen;
            b->blobs[rank] = xmalloc(blen);
            memcpy(b->blobs[rank], p + HELLO_FIXED, blen);
            free(pc->payload);
            memset(pc, 0, sizeof *pc);
            pc->fd = -1;
            joined++;
        }
    }
    for (int i = 0; i < MAX_PENDING; i++)
        if (pend[i].fd >= 0) drop_pending(&pend[i]);
    close(lfd);

    /* everyone is here: send the table */
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
    for (int r = 1; r < b->world; r++) {
        char who[64];
        snprintf(who, sizeof who, "rank 0 (sending the address table to rank %d)", r);
        st = send_frame(b->fds[r], F_TABLE, tab, tlen, deadline, who);
        if (st != PZ_OK) {
            free(tab);
            snprintf(msg, sizeof msg, "%s", pz_last_error());
            pz_bootstrap_close(b);
            return pz_fail(st, "%s", msg);
        }
    }
    free(tab);
    return PZ_OK;
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

static pz_status run_client(pz_bootstrap *b, const char *host, int port, const void *blob, size_t blen,
                            double deadline) {
    char who[64];
    snprintf(who, sizeof who, "rank %d", b->rank);
    struct addrinfo *res;
    pz_status st = resolve(host, port, 0, &res, who);
    if (st != PZ_OK) return st;
    int fd = -1, err = 0;
    double start = pz_now();
    while (fd < 0) {
        for (const struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
            double until = pz_now() + 2.0;
            fd = try_connect(a, until < deadline ? until : deadline);
            if (fd < 0 && (errno != ETIMEDOUT || err == 0)) err = errno; /* keep "refused" over our own cut-off */
        }
        if (fd >= 0) break;
        double left = deadline - pz_now();
        if (left <= 0) {
            freeaddrinfo(res);
            return pz_fail(PZ_ERR_PEER, "%s: cannot reach rank 0 at %s:%d within %.1f s: %s", who, host, port,
                           pz_now() - start, strerror(err));
        }
        sleep_s(left < 0.1 ? left : 0.1);
    }
    freeaddrinfo(res);
    set_socket_options(fd);
    b->fds[0] = fd;

    size_t hlen = HELLO_FIXED + blen;
    uint8_t *hello = xmalloc(hlen);
    pz_put_u32(hello, (uint32_t)b->rank);
    pz_put_u32(hello + 4, (uint32_t)b->world);
    pz_put_u32(hello + 8, (uint32_t)blen);
    memcpy(hello + HELLO_FIXED, blob, blen);
    st = send_frame(fd, F_HELLO, hello, hlen, deadline, who);
    free(hello);
    if (st != PZ_OK) goto fail;

    unsigned type;
    uint8_t *pl;
    size_t len;
    st = recv_frame(fd, b->world, &type, &pl, &len, deadline, who);
    if (st != PZ_OK) goto fail;
    if (type == F_REJECT) {
        char reason[REJECT_MAX + 1];
        if (len) memcpy(reason, pl, len);
        reason[len] = 0;
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)reason[i] < 32 || (unsigned char)reason[i] > 126) reason[i] = '?';
        free(pl);
        st = pz_fail(PZ_ERR_PEER, "%s: rank 0 refused to start: %s", who, reason);
        goto fail;
    }
    if (type != F_TABLE || len < 4 || pz_get_u32(pl) != (uint32_t)b->world) {
        free(pl);
        st = pz_fail(PZ_ERR_PEER, "%s: rank 0 sent an unexpected bootstrap answer (type %u, %zu bytes)", who,
                     type, len);
        goto fail;
    }
    size_t off = 4;
    for (int r = 0; r < b->world; r++) {
        uint32_t n = len - off >= 4 ? pz_get_u32(pl + off) : 0;
        if (len - off < 4 || n == 0 || n > PZ_BOOT_MAX_BLOB || len - off - 4 < n) {
            free(pl);
            st = pz_fail(PZ_ERR_PEER, "%s: malformed address table from rank 0 (entry %d)", who, r);
            goto fail;
        }
        b->blobs[r] = xmalloc(n);
        b->lens[r] = n;
        memcpy(b->blobs[r], pl + off + 4, n);
        off += 4 + n;
    }
    int own_ok = b->lens[b->rank] == blen && memcmp(b->blobs[b->rank], blob, blen) == 0;
    free(pl);
    if (off != len || !own_ok) {
        st = pz_fail(PZ_ERR_PEER, "%s: inconsistent address table from rank 0", who);
        goto fail;
    }
    return PZ_OK;
fail: {
        char msg[768];
        snprintf(msg, sizeof msg, "%s", pz_last_error());
        pz_bootstrap_close(b);
        return pz_fail(st, "%s", msg);
    }
}

pz_status pz_bootstrap_run(pz_bootstrap *b, int rank, int world, const char *master_addr, int master_port,
                           const void *blob, size_t blob_len, double deadline) {
    memset(b, 0, sizeof *b);
    if (world < 1 || world > PZ_BOOT_MAX_WORLD)
        return pz_fail(PZ_ERR_ARG, "world size %d out of range 1..%d", world, PZ_BOOT_MAX_WORLD);
    if (rank < 0 || rank >= world) return pz_fail(PZ_ERR_ARG, "rank %d out of range 0..%d", rank, world - 1);
    if (world > 1 && (master_port < 1 || master_port > 65535))
        return pz_fail(PZ_ERR_ARG, "master port %d out of range 1..65535", master_port);
    if (world > 1 && (!master_addr || !*master_addr)) return pz_fail(PZ_ERR_ARG, "no master address");
    if (blob_len == 0 || blob_len > PZ_BOOT_MAX_BLOB)
        return pz_fail(PZ_ERR_ARG, "worker address of %zu bytes (limit %d)", blob_len, PZ_BOOT_MAX_BLOB);
    b->rank = rank;
    b->world = world;
    b->fds = xmalloc(sizeof(int) * (size_t)world);
    for (int r = 0; r < world; r++) b->fds[r] = -1;
    b->bye = xcalloc((size_t)world, sizeof(int));
    b->blobs = xcalloc((size_t)world, sizeof(uint8_t *));
    b->lens = xcalloc((size_t)world, sizeof(size_t));
    if (rank == 0) {
        b->blobs[0] = xmalloc(blob_len);
        memcpy(b->blobs[0], blob, blob_len);
        b->lens[0] = blob_len;
        if (world == 1) return PZ_OK;
        return run_rank0(b, master_addr, master_port, deadline);
    }
    return run_client(b, master_addr, master_port, blob, blob_len, deadline);
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
