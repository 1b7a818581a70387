/* test_boot_flood.c: strangers who flood rank 0's bootstrap port cannot keep
 * a job with a secret from starting (runtime/net/bootstrap.c's limits: at most
 * a few half-open connections per source address, a deadline per
 * connection, the oldest connection of the busiest address dropped when
 * every slot is taken). Loopback only: the attackers bind to 127.0.0.2 and
 * up, the job's ranks connect from 127.0.0.1, so "other addresses" can be
 * told apart on one machine.
 *
 * Each case starts an attacker process (threads) and rank 0 of a job of 3
 * ranks (pz_bootstrap_run, a secret, no UCX), lets the flood run on rank 0
 * for 0.5 s, then starts ranks 1 and 2 and measures how long they take to
 * join. Cases:
 *   storm    150 threads from one address reconnecting as fast as rank 0
 *            drops them (the flood that kept a job from starting in 60 s)
 *   held     200 connections from one address, opened once and held
 *            silent, with an 8 s deadline (as --peer-timeout 8, which the
 *            held connections made fail)
 *   spread   150 reconnecting threads, each from its own address
 *   slow     100 threads from 10 addresses sending an AUTH one byte per
 *            0.3 s (slow loris), reconnecting when dropped
 *   big      100 threads from 4 addresses announcing frames of 4 GB, and
 *            HELLOs before any AUTH
 *   auth     150 threads from 150 addresses sending a valid AUTH (it needs
 *            no secret), then holding until dropped, and again
 * A case passes when ranks 1 and 2 joined within 10 s of their start; the
 * attackers stop when the job has started (or at the case's limit).
 *   usage: test_boot_flood [CASE...]        (default: every case)
 *          test_boot_flood --attack CASE PORT SECONDS
 *                                          only the attack, against a real job */
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/clock.h"
#include "runtime/net/bootmsg.h"
#include "runtime/net/bootstrap.h"
#include "tests/check.h"
#include "tests/runtime/net/transport_util.h"

#define WORLD 3
#define START_LIMIT_S 10.0 /* the job must have started within this */

static const uint8_t k_secret[] = "the job secret of test_boot_flood 0123456789";

typedef struct {
    const char *name;
    int threads;   /* attacker threads, one connection each at a time */
    int addrs;     /* source addresses 127.0.0.2 .. 127.0.0.(1 + addrs) */
    int mode;      /* what each connection does */
    double deadline_s; /* the ranks' bootstrap deadline */
} flood_case;

enum { M_RECONNECT, M_HOLD, M_SLOW, M_BIG, M_AUTH };

static const flood_case k_cases[] = {
    {"storm", 150, 1, M_RECONNECT, 15},
    {"held", 200, 1, M_HOLD, 8},
    {"spread", 150, 150, M_RECONNECT, 15},
    {"slow", 100, 10, M_SLOW, 15},
    {"big", 100, 4, M_BIG, 15},
    {"auth", 150, 150, M_AUTH, 15},
};

/* shared between the parent, the attacker process and the ranks */
typedef struct {
    volatile int stop;
    volatile long conns;   /* connections the attackers opened */
    double took[WORLD];    /* each rank's time to join; < 0: failed */
} shared;

static shared *g;

typedef struct {
    const flood_case *c;
    int port, index;
    double until;
} attacker;

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* a connection from 127.0.0.(2 + a % addrs) to rank 0: fd, or -1 */
static int connect_from(const attacker *at, double until) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in src = {.sin_family = AF_INET,
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1 + (uint32_t)(at->index % at->c->addrs))};
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)at->port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0) { close(fd); return -1; }
    if (connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0 && errno != EINPROGRESS) { close(fd); return -1; }
    double left = until - pz_now();
    struct pollfd p = {fd, POLLOUT, 0};
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (left <= 0 || poll(&p, 1, left > 1 ? 1000 : (int)(left * 1000) + 1) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
        close(fd);
        return -1;
    }
    __atomic_add_fetch(&g->conns, 1, __ATOMIC_RELAXED);
    return fd;
}

/* Waits up to s seconds; 1 when rank 0 closed fd meanwhile. */
static int dropped_within(int fd, double s) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, (int)(s * 1000)) != 1) return 0;
    char buf[256];
    return recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0;
}

/* one attacker connection's life, by mode */
static void attack_once(const attacker *at, int fd) {
    uint8_t h[PZ_BOOT_HDR];
    if (at->c->mode == M_RECONNECT) {
        while (!g->stop && pz_now() < at->until && !dropped_within(fd, 0.05)) {
        }   /* held until rank 0 lets go, then at once again */
    } else if (at->c->mode == M_HOLD) {
        while (!g->stop && pz_now() < at->until) sleep_s(0.05);   /* held silent, never again */
    } else if (at->c->mode == M_AUTH) {
        /* a valid AUTH (it needs no secret), then silence until dropped */
        uint8_t m[PZ_BOOT_HDR + PZ_BOOT_AUTH_LEN];
        pz_boot_auth a = {1, WORLD, PZ_BOOT_FLAG_SECRET, {0}};
        pz_boot_header_put(m, PZ_F_AUTH, PZ_BOOT_AUTH_LEN);
        pz_boot_auth_put(m + PZ_BOOT_HDR, &a);
        if (send(fd, m, sizeof m, MSG_NOSIGNAL) == (ssize_t)sizeof m)
            while (!g->stop && pz_now() < at->until && !dropped_within(fd, 0.05)) {
            }
    } else if (at->c->mode == M_SLOW) {
        /* a well-formed AUTH, one byte at a time */
        uint8_t m[PZ_BOOT_HDR + PZ_BOOT_AUTH_LEN];
        pz_boot_header_put(m, PZ_F_AUTH, PZ_BOOT_AUTH_LEN);
        memset(m + PZ_BOOT_HDR, 0, PZ_BOOT_AUTH_LEN);
        for (size_t i = 0; i < sizeof m && !g->stop && pz_now() < at->until; i++) {
            if (send(fd, m + i, 1, MSG_NOSIGNAL) != 1 || dropped_within(fd, 0.3)) break;
        }
    } else {
        /* a 4 GB frame announced, or a HELLO out of turn; then wait to be dropped */
        pz_boot_header_put(h, at->index % 2 ? PZ_F_HELLO : PZ_F_AUTH, 0);
        pz_put_u32(h + 8, at->index % 2 ? PZ_BOOT_HELLO_FIXED + 100 : 0xffffffffu);
        if (send(fd, h, sizeof h, MSG_NOSIGNAL) == (ssize_t)sizeof h) dropped_within(fd, 0.5);
    }
}

static void *attack_thread(void *arg) {
    const attacker *at = arg;
    int held = 0;
    while (!g->stop && pz_now() < at->until && !held) {
        int fd = connect_from(at, at->until);
        if (fd < 0) { sleep_s(0.01); continue; }   /* rank 0 not listening yet */
        attack_once(at, fd);
        held = at->c->mode == M_HOLD;
        close(fd);
    }
    return NULL;
}

/* The attacker process: c->threads threads until g->stop or `seconds`. */
static int attack(const flood_case *c, int port, double seconds) {
    attacker *at = calloc((size_t)c->threads, sizeof *at);
    pthread_t *th = calloc((size_t)c->threads, sizeof *th);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    double until = pz_now() + seconds;
    int n = 0;
    for (int i = 0; i < c->threads; i++) {
        at[i] = (attacker){c, port, i, until};
        if (pthread_create(&th[n], &attr, attack_thread, &at[i]) == 0) n++;
    }
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    pthread_attr_destroy(&attr);
    free(at);
    free(th);
    return n == c->threads ? 0 : 1;
}

static void blob_of(int r, uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(r * 29 + i);
}

/* a rank of the job: joins, checks the table, records its time */
static int rank_main(int rank, int port, double deadline_s) {
    uint8_t blob[48];
    blob_of(rank, blob, sizeof blob);
    pz_bootstrap b;
    double t0 = pz_now();
    pz_status st = pz_bootstrap_run(&b, rank, WORLD, "127.0.0.1", port, blob, sizeof blob, t0 + deadline_s, k_secret,
                                    sizeof k_secret - 1);
    double dt = pz_now() - t0;
    if (st != PZ_OK) {
        fprintf(stderr, "  [rank %d] failed after %.2f s: %s\n", rank, dt, pz_last_error());
        g->took[rank] = -dt;
        return 1;
    }
    int ok = 1;
    for (int r = 0; r < WORLD; r++) {
        uint8_t want[48];
        blob_of(r, want, sizeof want);
        ok &= b.lens[r] == sizeof want && memcmp(b.blobs[r], want, sizeof want) == 0;
    }
    g->took[rank] = ok ? dt : -dt;
    pz_bootstrap_barrier(&b, pz_now() + 5.0, NULL, NULL);
    pz_bootstrap_close(&b);
    return ok ? 0 : 1;
}

static pid_t spawn(int (*fn)(const flood_case *, int, int, double), const flood_case *c, int arg, int port,
                   double limit) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(1); }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm((unsigned)limit + 5);
        exit(fn(c, arg, port, limit));
    }
    return pid;
}

static int attacker_main(const flood_case *c, int unused, int port, double limit) {
    (void)unused;
    return attack(c, port, limit);
}

static int rank_child(const flood_case *c, int rank, int port, double limit) {
    (void)limit;
    return rank_main(rank, port, c->deadline_s);
}

static int wait_ok(pid_t pid) {
    int st;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void run_case(const flood_case *c) {
    int port = free_port();
    memset((void *)g, 0, sizeof *g);
    double limit = c->deadline_s + 5;
    pid_t ranks[WORLD];
    pid_t att = spawn(attacker_main, c, 0, port, limit);
    ranks[0] = spawn(rank_child, c, 0, port, limit);
    sleep_s(0.5);   /* the flood is on rank 0 before the other ranks start */
    long before = g->conns;
    double t0 = pz_now();
    for (int r = 1; r < WORLD; r++) ranks[r] = spawn(rank_child, c, r, port, limit);
    int ok = 1;
    for (int r = 0; r < WORLD; r++) ok &= wait_ok(ranks[r]);
    double started = pz_now() - t0;
    long during = g->conns - before;
    g->stop = 1;
    ok &= wait_ok(att);
    double worst = 0;
    for (int r = 1; r < WORLD; r++) {
        double t = g->took[r] < 0 ? 1e9 : g->took[r];   /* a failed rank never started */
        if (t > worst) worst = t;
    }
    char t[WORLD][40];
    for (int r = 0; r < WORLD; r++)
        snprintf(t[r], sizeof t[r], g->took[r] < 0 ? "failed after %.2f s" : "%.2f s", fabs(g->took[r]));
    printf("%s - %s: %d threads from %d address%s; ranks 1 and 2 joined in %s and %s (the job started %.2f s "
           "after them; rank 0: %s after it began; %ld attacker connections meanwhile)\n",
           ok && worst <= START_LIMIT_S ? "ok" : "FAIL", c->name, c->threads, c->addrs, c->addrs == 1 ? "" : "es",
           t[1], t[2], started, t[0], during);
    fflush(stdout);
    CHECK(ok, "%s: a rank failed to join (or the attackers did not run)", c->name);
    CHECK(worst <= START_LIMIT_S, "%s: the job took %.2f s to start, more than %.0f s", c->name, worst,
          START_LIMIT_S);
}

static const flood_case *case_named(const char *name) {
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
        if (!strcmp(k_cases[i].name, name)) return &k_cases[i];
    fprintf(stderr, "test_boot_flood: no case %s\n", name);
    exit(2);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g == MAP_FAILED) { perror("mmap"); return 1; }
    if (argc == 5 && !strcmp(argv[1], "--attack")) {
        const flood_case *c = case_named(argv[2]);
        double s = atof(argv[4]);
        if (s <= 0 || s > 600) { fprintf(stderr, "test_boot_flood: SECONDS must be in (0, 600]\n"); return 2; }
        int rc = attack(c, atoi(argv[3]), s);
        printf("%s: %ld connections in %.0f s\n", c->name, g->conns, s);
        return rc;
    }
    if (argc > 1)
        for (int i = 1; i < argc; i++) run_case(case_named(argv[i]));
    else
        for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) run_case(&k_cases[i]);
    return check_summary("test_boot_flood");
}
