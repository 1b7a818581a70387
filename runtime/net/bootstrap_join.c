/* bootstrap_join.c: a joining rank's side of the rendezvous
 * (bootstrap.h): it connects to rank 0 (retrying until the deadline, and
 * again when rank 0 drops it before the table: flooded by strangers, or a
 * restart), proves the job secret, checks rank 0's proof, and only then
 * sends its address and takes the table. */
#include "runtime/net/bootstrap_private.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/mem.h"

/* One non-blocking connect attempt bounded by `until`: fd or -1 (errno set). */
static int try_connect(const struct addrinfo *a, double until) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) return -1;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) return fd;
    if (errno != EINPROGRESS) { int e = errno; close(fd); errno = e; return -1; }
    if (!boot_wait_fd(fd, POLLOUT, until)) { close(fd); errno = ETIMEDOUT; return -1; }
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
    boot_send_frame(fd, F_REJECT, m, strlen(m), pz_now() + 0.5, who);
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
    pz_status st = boot_recv_frame(b->fds[0], b->world, &type, pl, len, deadline, who);
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
    pz_status st = boot_send_frame(fd, F_AUTH, buf, sizeof buf, deadline, who);
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
    if ((st = boot_send_frame(fd, F_PROOF, mac, sizeof mac, deadline, who)) != PZ_OK) return failed_send(st, retry);
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
    st = boot_send_frame(fd, F_HELLO, hello, hlen, deadline, who);
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

pz_status boot_run_joining(pz_bootstrap *b, const char *host, int port, const void *blob, size_t blen,
                           double deadline) {
    char who[64], where[300];
    snprintf(who, sizeof who, "rank %d", b->rank);
    snprintf(where, sizeof where, "%s:%d", host, port);
    struct addrinfo *res;
    pz_status st = boot_resolve(host, port, 0, &res, who);
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
            boot_sleep(left < 0.1 ? left : 0.1);
        }
        boot_socket_options(fd);
        b->fds[0] = fd;
        int retry = 0;
        st = client_handshake(b, blob, blen, deadline, who, where, &retry);
        if (st == PZ_OK) break;
        double left = deadline - pz_now();
        if (!retry || left <= backoff) break;
        /* rank 0 dropped us before the table: flooded by strangers, or a restart; try again */
        boot_close_fd(&b->fds[0]);
        boot_sleep(backoff);
        backoff = backoff < 1.0 ? backoff * 2 : 1.0;
    }
    freeaddrinfo(res);
    return st;
}

