/* boot_fake.c: see boot_fake.h. */
#include "tests/runtime/net/boot_fake.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/clock.h"
#include "runtime/net/bootmsg.h"

int fake_connect(int port) {
    double t0 = pz_now();
    while (pz_now() - t0 < 10) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
        if (fd >= 0) close(fd);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

int fake_listen(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 8) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

static int write_all(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return 0;
        b += w;
        n -= (size_t)w;
    }
    return 1;
}

static int read_all(int fd, void *p, size_t n, double until) {
    uint8_t *b = p;
    while (n > 0) {
        double left = until - pz_now();
        if (left <= 0) return 0;
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, (int)(left * 1000) + 1) <= 0) continue;
        ssize_t r = recv(fd, b, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        b += r;
        n -= (size_t)r;
    }
    return 1;
}

int fake_send(int fd, unsigned type, const void *payload, size_t n) {
    uint8_t h[PZ_BOOT_HDR];
    pz_boot_header_put(h, type, n);
    return write_all(fd, h, sizeof h) && (n == 0 || write_all(fd, payload, n));
}

int fake_recv(int fd, double timeout_s, unsigned *type, uint8_t *buf, size_t cap, size_t *len) {
    double until = pz_now() + timeout_s;
    uint8_t h[PZ_BOOT_HDR];
    if (!read_all(fd, h, sizeof h, until)) return 0;
    if (pz_get_u32(h) != PZ_BOOT_MAGIC || pz_get_u16(h + 4) != PZ_BOOT_VERSION) return 0;
    *type = pz_get_u16(h + 6);
    *len = pz_get_u32(h + 8);
    if (*len > cap) return 0;
    return *len == 0 || read_all(fd, buf, *len, until);
}

int fake_handshake(int fd, fake_join *j) {
    pz_boot_auth a = {(uint32_t)j->rank, (uint32_t)j->world, j->claim_secret ? PZ_BOOT_FLAG_SECRET : 0, {0}};
    if (j->nonce) memcpy(a.nonce, j->nonce, sizeof a.nonce);
    else pz_boot_random(a.nonce, sizeof a.nonce);
    memcpy(j->nonce_sent, a.nonce, sizeof a.nonce);
    uint8_t buf[PZ_BOOT_REJECT_MAX + 64];
    size_t len;
    unsigned type;
    j->reason[0] = 0;
    pz_boot_auth_put(buf, &a);
    if (!fake_send(fd, PZ_F_AUTH, buf, PZ_BOOT_AUTH_LEN)) { snprintf(j->reason, sizeof j->reason, "send failed"); return -1; }
    for (int step = 0; step < 2; step++) {
        if (!fake_recv(fd, 5.0, &type, buf, sizeof buf - 1, &len)) {
            snprintf(j->reason, sizeof j->reason, "no answer (step %d)", step);
            return -1;
        }
        if (type == PZ_F_REJECT) {
            pz_boot_reason(buf, len, j->reason, sizeof j->reason);
            return 0;
        }
        if (step == 0) {
            pz_boot_challenge c;
            if (type != PZ_F_CHALLENGE || pz_boot_challenge_get(buf, len, &c) != PZ_OK) {
                snprintf(j->reason, sizeof j->reason, "expected CHALLENGE, got type %u", type);
                return -1;
            }
            memset(j->mac_sent, 0, sizeof j->mac_sent);
            if (j->mac) memcpy(j->mac_sent, j->mac, sizeof j->mac_sent);
            else if (j->secret)
                pz_boot_mac(j->secret, j->secret_len, PZ_BOOT_ROLE_JOINING, a.nonce, c.nonce, a.rank, a.world,
                            c.world, j->mac_sent);
            if (!fake_send(fd, PZ_F_PROOF, j->mac_sent, sizeof j->mac_sent)) {
                snprintf(j->reason, sizeof j->reason, "send failed");
                return -1;
            }
        } else if (type != PZ_F_ACCEPT) {
            snprintf(j->reason, sizeof j->reason, "expected ACCEPT, got type %u", type);
            return -1;
        }
    }
    return 1;
}
