/* bootstrap.c: see bootstrap.h. Runs rank 0's side of the rendezvous
 * (bootstrap_rank0.c) or a joining rank's (bootstrap_join.c), and holds what
 * they share, the socket and frame helpers (bootstrap_private.h), and what
 * comes after the rendezvous: the dead-peer poll and the shutdown barrier. */
#include "runtime/net/bootstrap_private.h"

#include <errno.h>
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
#include "runtime/net/jobsecret.h"

/* ---- socket and frame helpers (bootstrap_private.h) ---------------------- */

void boot_sleep(double s) {
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Waits for `events` on fd until the deadline: 1 ready, 0 timed out. */
int boot_wait_fd(int fd, short events, double deadline) {
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
            if (!boot_wait_fd(fd, POLLOUT, deadline))
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
            if (!boot_wait_fd(fd, POLLIN, deadline))
                return pz_fail(PZ_ERR_PEER, "%s: timed out waiting on the bootstrap connection", who);
            continue;
        }
        return pz_fail(PZ_ERR_PEER, "%s: bootstrap connection failed: %s", who, strerror(errno));
    }
    return PZ_OK;
}

pz_status boot_send_frame(int fd, unsigned type, const void *payload, size_t len, double deadline,
                          const char *who) {
    uint8_t h[HDR_LEN];
    pz_boot_header_put(h, type, len);
    pz_status st = write_all(fd, h, HDR_LEN, deadline, who);
    if (st == PZ_OK && len) st = write_all(fd, payload, len, deadline, who);
    return st;
}

/* Reads one whole frame; *payload is malloc'ed (NULL when empty). */
pz_status boot_recv_frame(int fd, int world, unsigned *type, uint8_t **payload, size_t *len,
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

void boot_socket_options(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
}

void boot_close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

pz_status boot_resolve(const char *host, int port, int passive, struct addrinfo **res, const char *who) {
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

/* ---- the rendezvous and after it ------------------------------------------ */

void pz_bootstrap_close(pz_bootstrap *b) {
    if (b->fds)
        for (int r = 0; r < b->world; r++) boot_close_fd(&b->fds[r]);
    if (b->blobs)
        for (int r = 0; r < b->world; r++) free(b->blobs[r]);
    free(b->fds);
    free(b->bye);
    free(b->blobs);
    free(b->lens);
    memset(b, 0, sizeof *b);
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
        if (world > 1) st = boot_run_rank0(b, master_addr, master_port, deadline);
    } else {
        st = boot_run_joining(b, master_addr, master_port, blob, blob_len, deadline);
    }
    b->secret = NULL; /* not kept: the caller owns it */
    b->secret_len = 0;
    if (st == PZ_OK) return PZ_OK;
    /* a failed rendezvous releases everything (the message kept first) */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", pz_last_error());
    pz_bootstrap_close(b);
    return pz_fail(st, "%s", msg);
}

/* ---- after the rendezvous ------------------------------------------------ */

/* rank 0: reads one frame from rank r expecting BYE. 1 = BYE, 0 = failure. */
static int read_bye(pz_bootstrap *b, int r) {
    unsigned type;
    uint8_t *pl;
    size_t len;
    if (boot_recv_frame(b->fds[r], b->world, &type, &pl, &len, pz_now() + 1.0, "rank 0") != PZ_OK) return 0;
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
        boot_close_fd(&b->fds[r]);
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
        pz_status st = boot_send_frame(b->fds[0], F_BYE, pl, 4, deadline, who);
        if (st != PZ_OK) return st;
        for (;;) {
            unsigned work = progress ? progress(arg) : 0;
            struct pollfd p = {b->fds[0], POLLIN, 0};
            if (poll(&p, 1, 0) > 0 && p.revents) {
                unsigned type;
                uint8_t *ack;
                size_t len;
                st = boot_recv_frame(b->fds[0], b->world, &type, &ack, &len, deadline, who);
                free(ack);
                if (st != PZ_OK) return st;
                if (type != F_ACK)
                    return pz_fail(PZ_ERR_PEER, "%s: shutdown barrier: unexpected message type %u", who, type);
                return PZ_OK;
            }
            if (pz_now() > deadline)
                return pz_fail(PZ_ERR_PEER, "%s: shutdown barrier: no answer from rank 0", who);
            if (!work) boot_sleep(100e-6);
        }
    }
    for (;;) {
        int missing = 0;
        unsigned work = progress ? progress(arg) : 0;
        for (int r = 1; r < b->world; r++) {
            if (b->fds[r] < 0 || b->bye[r]) continue;
            struct pollfd p = {b->fds[r], POLLIN, 0};
            if (poll(&p, 1, 0) > 0 && p.revents) {
                if (!read_bye(b, r)) boot_close_fd(&b->fds[r]); /* gone or garbage: don't wait for it */
                continue;
            }
            missing++;
        }
        if (!missing) break;
        if (pz_now() > deadline) {
            /* release those that did arrive, then report */
            for (int r = 1; r < b->world; r++)
                if (b->fds[r] >= 0 && b->bye[r]) boot_send_frame(b->fds[r], F_ACK, "\0\0\0\0", 4, pz_now() + 1.0, who);
            return pz_fail(PZ_ERR_PEER, "%s: shutdown barrier: %d rank(s) never said goodbye", who, missing);
        }
        if (!work) boot_sleep(100e-6);
    }
    pz_status res = PZ_OK;
    for (int r = 1; r < b->world; r++)
        if (b->fds[r] >= 0 && boot_send_frame(b->fds[r], F_ACK, "\0\0\0\0", 4, deadline, who) != PZ_OK) res = PZ_ERR_PEER;
    return res;
}

