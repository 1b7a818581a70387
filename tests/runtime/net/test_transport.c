/* test_transport.c: the UCX transport between real processes on 127.0.0.1.
 *
 * The parent never touches UCX: each scenario forks W children (the ranks),
 * each child sets its UCX environment, runs the transport and exits 0 when
 * everything it checked held. The parent waits with a deadline, kills and
 * reaps whatever is left, and checks the exit statuses. A global alarm()
 * kills everything if the whole test ever runs too long.
 *
 * Scenarios, for each UCX configuration (tcp, shared memory):
 *   basic W=2 and W=3: ping-pong 0..64 MiB with content checks, receive posted
 *     before and after the send, many outstanding requests, allreduce,
 *     barrier, truncation, flipped bytes refused by the frame check,
 *     argument errors, clean close;
 *   kill W=3 (twice, see child_kill): a rank SIGKILLs itself mid-stream; the
 *     two others must fail with PZ_ERR_PEER naming it within 10 s;
 *   stop W=3: rank 1 SIGSTOPs itself mid-stream; ranks 0 and 2 must fail
 *     after the 2 s peer timeout naming rank 1.
 * Plus basic W=2 with no UCX variable set at all (the transport's defaults).
 * In basic, every lane UCX chose (ucp_ep_print_info) must be on the
 * configuration's transport (tcp/ resp. sysv/).
 * Bootstrap (tcp only): stray connections ignored, a wrong world size or a
 * duplicate rank refused, rank 0 absent -> connect timeout; world 1.
 *
 * Usage: test_transport [tcp|shm|default|boot|probe]... (default: all but
 * probe).
 * "probe" runs basic W=2 with the inherited environment and
 * PZ_TRANSPORT_INFO=1 (prints UCX's lane selection). */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/net/transport.h"
#include "base/bytes.h"
#include "runtime/net/bootmsg.h"
#include "tests/runtime/net/boot_fake.h"
#include "base/clock.h"
#include "base/mem.h"
#include "base/rng.h"
#include "tests/check.h"
#include "tests/runtime/net/transport_util.h"

static int g_rank = -1;

#define OK(expr)                                                                           \
    do {                                                                                   \
        pz_status s_ = (expr);                                                             \
        CHECK(s_ == PZ_OK, "%s -> %s: %s", #expr, pz_status_name(s_), pz_last_error());   \
    } while (0)

#define say(...) rank_say(g_rank, __VA_ARGS__)

/* ---- UCX configurations ------------------------------------------------- */

typedef struct {
    const char *name;
    const char *env[4]; /* NAME=VALUE, set in the child before init */
    const char *lanes;  /* every lane must be on this UCX transport */
    int full;           /* run the W=3 and failure scenarios too */
} ucx_config;

static const ucx_config configs[] = {
    {"tcp", {"UCX_TLS=tcp", NULL}, "tcp/", 1},
    /* shared memory: the transport sets UCX_MM_ERROR_HANDLING=y by default
     * (posix/sysv are not eligible in error mode PEER without it), so the
     * same-host lanes must all be sysv although tcp is allowed too. */
    {"shm", {"UCX_TLS=sm,tcp", NULL}, "sysv/", 1},
    /* nothing set (UCX_TLS unset in the child): same-host pairs on sysv too */
    {"default", {"UCX_TLS=", NULL}, "sysv/", 0},
};
static const ucx_config *g_cfg;

/* ---- helpers ------------------------------------------------------------ */

static void fill(void *buf, size_t n, uint64_t seed) {
    uint8_t *p = buf;
    size_t w = n / 8;
    for (size_t i = 0; i < w; i++) {
        uint64_t v = pz_splitmix64(seed * 0x100000001b3ull + i);
        memcpy(p + 8 * i, &v, 8);
    }
    uint64_t v = pz_splitmix64(seed ^ 0xabcdefull);
    for (size_t i = 8 * w; i < n; i++) p[i] = (uint8_t)(v >> (8 * (i % 8)));
}

/* index of the first wrong byte, or (size_t)-1 */
static size_t verify(const void *buf, size_t n, uint64_t seed) {
    const uint8_t *p = buf;
    size_t w = n / 8;
    for (size_t i = 0; i < w; i++) {
        uint64_t v = pz_splitmix64(seed * 0x100000001b3ull + i), got;
        memcpy(&got, p + 8 * i, 8);
        if (got != v) return 8 * i;
    }
    uint64_t v = pz_splitmix64(seed ^ 0xabcdefull);
    for (size_t i = 8 * w; i < n; i++)
        if (p[i] != (uint8_t)(v >> (8 * (i % 8)))) return i;
    return (size_t)-1;
}

static int g_thread;   /* the scenario runs with the transport's progress thread */
/* every rank of these tests holds this job secret (runtime/net/jobsecret.h) */
static const uint8_t k_secret[] = "test_transport job secret 0123456789";

static pz_transport_opts make_opts(int rank, int world, int port, double peer_timeout) {
    pz_transport_opts o = {rank, world, "127.0.0.1", port, peer_timeout, 20.0, g_thread, k_secret, sizeof k_secret - 1};
    return o;
}

static pz_transport *start(int rank, int world, int port, double peer_timeout) {
    pz_transport_opts o = make_opts(rank, world, port, peer_timeout);
    pz_transport *t = NULL;
    OK(pz_transport_init(&t, &o));
    return t;
}

static void send_wait(pz_transport *t, int peer, uint64_t tag, const void *buf, size_t n, const char *what) {
    pz_request *r;
    OK(pz_transport_send(t, peer, tag, buf, n, what, &r));
    size_t len = 0;
    OK(pz_transport_wait(t, r, &len));
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- basic: functional checks --------------------------------------------- */

enum { KIND_PING = 1, KIND_PONG = 2, KIND_MANY = 3, KIND_TRUNC = 4, KIND_POLL = 5, KIND_FLIP = 6 };

static const size_t sizes[] = {0, 8, 100, 4096, 8185, 8193, 65536, 1u << 20, 8u << 20, 64u << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* A sends n bytes to B; B posts its receive before (mode 0) or after (mode 1)
 * A posts the send; the barriers in between are taken by every rank. */
static void one_way(pz_transport *t, int A, int B, size_t n, int mode, uint32_t step, int kind, uint8_t *buf) {
    int me = g_rank;
    uint64_t tag = pz_tag(A, step, 0, (uint32_t)kind), seed = step * 1000003ull + (uint64_t)kind * 7 + n;
    char what[96];
    pz_request *r = NULL;
    if (me == A) {
        fill(buf, n, seed);
        snprintf(what, sizeof what, "send %zu bytes to rank %d step %u", n, B, step);
    } else if (me == B) {
        memset(buf, 0xEE, n);
        snprintf(what, sizeof what, "recv %zu bytes from rank %d step %u", n, A, step);
    }
    if (mode == 0 && me == B) OK(pz_transport_recv(t, A, tag, buf, n, what, &r));
    if (mode == 1 && me == A) OK(pz_transport_send(t, B, tag, buf, n, what, &r));
    OK(pz_transport_barrier(t));
    if (mode == 0 && me == A) OK(pz_transport_send(t, B, tag, buf, n, what, &r));
    if (mode == 1 && me == B) OK(pz_transport_recv(t, A, tag, buf, n, what, &r));
    if (r) {
        size_t len = 123456789;
        OK(pz_transport_wait(t, r, &len));
        CHECK(len == n, "%s: length %zu", what, len);
    }
    if (me == B) {
        size_t bad = verify(buf, n, seed);
        CHECK(bad == (size_t)-1, "%s (mode %d): wrong byte at offset %zu", what, mode, bad);
    }
}

static void test_pingpong(pz_transport *t, int world) {
    uint8_t *buf = xmalloc(64u << 20);
    uint32_t step = 1;
    for (int peer = 1; peer < world; peer++)
        for (size_t k = 0; k < NSIZES; k++)
            for (int mode = 0; mode < 2; mode++, step++) {
                one_way(t, 0, peer, sizes[k], mode, step, KIND_PING, buf);
                one_way(t, peer, 0, sizes[k], mode, step, KIND_PONG, buf);
            }
    free(buf);
    if (g_rank == 0) say("ping-pong 0 B .. 64 MiB, both posting orders: ok");
}

/* Every rank exchanges N messages with every peer, all in flight at once;
 * receives posted in reverse tag order and completed in a mixed order. */
static void test_many(pz_transport *t, int world) {
    enum { N = 160 };
    int me = g_rank;
    size_t *sz = xmalloc(sizeof(size_t) * N);
    for (int i = 0; i < N; i++) sz[i] = i % 40 == 0 ? (1u << 20) + (size_t)i : ((size_t)i * 7919u) % 70000u;
    uint8_t ***in = xcalloc((size_t)world, sizeof *in), ***out = xcalloc((size_t)world, sizeof *out);
    pz_request ***rr = xcalloc((size_t)world, sizeof *rr), ***sr = xcalloc((size_t)world, sizeof *sr);
    for (int p = 0; p < world; p++) {
        if (p == me) continue;
        in[p] = xcalloc(N, sizeof(uint8_t *));
        out[p] = xcalloc(N, sizeof(uint8_t *));
        rr[p] = xcalloc(N, sizeof(pz_request *));
        sr[p] = xcalloc(N, sizeof(pz_request *));
        for (int i = N - 1; i >= 0; i--) {
            in[p][i] = xmalloc(sz[i] + 1);
            OK(pz_transport_recv(t, p, pz_tag(p, 99, (uint32_t)i, KIND_MANY), in[p][i], sz[i], "many recv", &rr[p][i]));
        }
    }
    for (int i = 0; i < N; i++)
        for (int p = 0; p < world; p++) {
            if (p == me) continue;
            out[p][i] = xmalloc(sz[i] + 1);
            fill(out[p][i], sz[i], (uint64_t)me * 100000 + (uint64_t)p * 1000 + (uint64_t)i);
            OK(pz_transport_send(t, p, pz_tag(me, 99, (uint32_t)i, KIND_MANY), out[p][i], sz[i], "many send", &sr[p][i]));
        }
    /* complete: odd receives by polling test(), even ones by wait, then sends */
    for (int p = 0; p < world; p++) {
        if (p == me) continue;
        for (int i = 0; i < N; i++) {
            int j = (i * 37) % N; /* 37 is coprime with N: a permutation */
            size_t len = 0;
            if (j % 2) {
                int done = 0;
                double t0 = pz_now();
                while (!done) {
                    OK(pz_transport_test(t, rr[p][j], &done, &len));
                    CHECK(pz_now() - t0 < 30, "test() never completed");
                }
            } else {
                OK(pz_transport_wait(t, rr[p][j], &len));
            }
            CHECK(len == sz[j], "many: message %d from rank %d has %zu bytes, expected %zu", j, p, len, sz[j]);
            size_t bad = verify(in[p][j], sz[j], (uint64_t)p * 100000 + (uint64_t)me * 1000 + (uint64_t)j);
            CHECK(bad == (size_t)-1, "many: message %d from rank %d wrong at %zu", j, p, bad);
        }
        for (int i = 0; i < N; i++) OK(pz_transport_wait(t, sr[p][i], NULL));
    }
    for (int p = 0; p < world; p++) {
        if (p == me) continue;
        for (int i = 0; i < N; i++) { free(in[p][i]); free(out[p][i]); }
        free(in[p]); free(out[p]); free(rr[p]); free(sr[p]);
    }
    free(in); free(out); free(rr); free(sr); free(sz);
    OK(pz_transport_barrier(t));
    if (me == 0) say("%d outstanding messages per direction and peer: ok", N);
}

static void test_collectives(pz_transport *t, int world) {
    for (int round = 0; round < 5; round++) {
        int n = round == 0 ? 0 : round == 1 ? 1 : 1000;
        double *v = xmalloc(sizeof(double) * (size_t)(n ? n : 1));
        for (int i = 0; i < n; i++) v[i] = g_rank * 1000.0 + i * 0.5 + round;
        OK(pz_transport_allreduce_sum_f64(t, v, n));
        for (int i = 0; i < n; i++) {
            double want = 0;
            for (int r = 0; r < world; r++) want += r * 1000.0 + i * 0.5 + round;
            CHECK(v[i] == want, "allreduce round %d [%d] = %g, expected %g", round, i, v[i], want);
        }
        free(v);
        OK(pz_transport_barrier(t));
    }
    /* the result is bitwise identical everywhere: check with values whose sum depends on order */
    double x = g_rank == 0 ? 1e16 : g_rank == 1 ? 1.0 : -1e16;
    OK(pz_transport_allreduce_sum_f64(t, &x, 1));
    double all[3] = {x, 0, 0};
    /* gather every rank's result to everyone through a second allreduce of one-hot slots */
    double slots[3] = {0, 0, 0};
    slots[g_rank] = x;
    OK(pz_transport_allreduce_sum_f64(t, slots, world));
    for (int r = 0; r < world; r++) CHECK(slots[r] == all[0], "allreduce results differ between ranks");
    if (g_rank == 0) say("allreduce and barrier: ok");
}

static void test_truncation(pz_transport *t) {
    uint8_t small[16], big[4096];
    pz_request *r;
    if (g_rank == 1) {
        fill(big, 100, 5);
        send_wait(t, 0, pz_tag(1, 1, 0, KIND_TRUNC), big, 100, "send 100 bytes into 10");
        /* a rendezvous-size message into a small buffer: the send must end (ok or error), not hang */
        uint8_t *huge = xmalloc(1u << 20);
        fill(huge, 1u << 20, 6);
        OK(pz_transport_send(t, 0, pz_tag(1, 2, 0, KIND_TRUNC), huge, 1u << 20, "send 1 MiB into 4 KiB", &r));
        pz_status st = pz_transport_wait(t, r, NULL);
        say("truncated 1 MiB send ended with: %s%s%s", pz_status_name(st), st ? ": " : "",
            st ? pz_last_error() : "");
        free(huge);
    } else if (g_rank == 0) {
        OK(pz_transport_recv(t, 1, pz_tag(1, 1, 0, KIND_TRUNC), small, 10, "recv into 10 bytes", &r));
        pz_status st = pz_transport_wait(t, r, NULL);
        CHECK(st == PZ_ERR_PEER && strstr(pz_last_error(), "larger than the receive buffer of 10 bytes"),
              "truncation: %s: %s", pz_status_name(st), pz_last_error());
        say("truncation detected: %s", pz_last_error());
        OK(pz_transport_recv(t, 1, pz_tag(1, 2, 0, KIND_TRUNC), big, sizeof big, "recv 4 KiB", &r));
        st = pz_transport_wait(t, r, NULL);
        CHECK(st == PZ_ERR_PEER && strstr(pz_last_error(), "larger than the receive buffer of 4096 bytes"),
              "truncation (rndv): %s: %s", pz_status_name(st), pz_last_error());
    }
    /* the connection still works afterwards */
    OK(pz_transport_barrier(t));
}

/* Checked frames (runtime/net/frame.h): rank 1 flips a byte of three messages
 * (pz_transport_fault_flip): the payload of a rendezvous-size one, the header
 * of an eager one, and the only byte an empty message can lose (the frame's
 * reserved tail). Rank 0's waits must fail naming the operation and the
 * check, and a clean message afterwards must arrive whole: a refused frame
 * does not cost the peer. */
static void test_flip(pz_transport *t) {
    enum { BIG = 1 << 20 };
    uint8_t *buf = xmalloc(BIG);
    pz_request *r;
    if (g_rank == 1) {
        fill(buf, BIG, 11);
        pz_transport_fault_flip(t, KIND_FLIP, 3, -1);
        send_wait(t, 0, pz_tag(1, 3, 0, KIND_FLIP), buf, BIG, "flipped payload");
        pz_transport_fault_flip(t, KIND_FLIP, 4, 16);
        send_wait(t, 0, pz_tag(1, 4, 1, KIND_FLIP), buf, 100, "flipped header");
        pz_transport_fault_flip(t, KIND_FLIP, 5, -1);
        send_wait(t, 0, pz_tag(1, 5, 0, KIND_FLIP), buf, 0, "flipped empty message");
        send_wait(t, 0, pz_tag(1, 6, 0, KIND_FLIP), buf, BIG, "clean");
    } else if (g_rank == 0) {
        static const struct { uint32_t step, micro; const char *what, *why; } cases[] = {
            {3, 0, "recv step 3 (payload flipped)", "fails its frame check: CRC mismatch"},
            {4, 1, "recv step 4 (header flipped)", "fails its frame check: CRC mismatch"},
            {5, 0, "recv step 5 (empty)", "fails its frame check: reserved field set"},
        };
        for (int i = 0; i < 3; i++) {
            OK(pz_transport_recv(t, 1, pz_tag(1, cases[i].step, cases[i].micro, KIND_FLIP), buf, BIG, cases[i].what, &r));
            size_t got = 12345;
            pz_status st = pz_transport_wait(t, r, &got);
            CHECK(st == PZ_ERR_PEER && strstr(pz_last_error(), cases[i].what) && strstr(pz_last_error(), cases[i].why) &&
                      strstr(pz_last_error(), "from rank 1"),
                  "%s: %s: %s", cases[i].what, pz_status_name(st), pz_last_error());
            if (i == 0) say("flipped frame refused: %s", pz_last_error());
        }
        memset(buf, 0, BIG);
        OK(pz_transport_recv(t, 1, pz_tag(1, 6, 0, KIND_FLIP), buf, BIG, "clean recv", &r));
        size_t got = 0;
        OK(pz_transport_wait(t, r, &got));
        CHECK(got == BIG && verify(buf, BIG, 11) == (size_t)-1, "clean message after refused ones: %zu bytes", got);
    }
    free(buf);
    OK(pz_transport_barrier(t));
}

static void test_args(pz_transport *t, int world) {
    pz_request *r = (pz_request *)&r;
    char b[8] = {0};
    int me = g_rank, peer = (me + 1) % world;
    CHECK(pz_transport_send(t, me, pz_tag(me, 0, 0, 1), b, 8, "self", &r) == PZ_ERR_ARG && r == NULL, "send to self");
    CHECK(pz_transport_send(t, world, pz_tag(me, 0, 0, 1), b, 8, "x", &r) == PZ_ERR_ARG, "send to rank out of range");
    CHECK(pz_transport_send(t, peer, pz_tag(peer, 0, 0, 1), b, 8, "x", &r) == PZ_ERR_ARG, "send with the peer's src");
    CHECK(pz_transport_recv(t, peer, pz_tag(me, 0, 0, 1), b, 8, "x", &r) == PZ_ERR_ARG, "recv with own src");
    CHECK(pz_transport_send(t, peer, pz_tag(me, 0, 0, PZ_TAG_KIND_RESERVED), b, 8, "x", &r) == PZ_ERR_ARG,
          "reserved kind");
    CHECK(pz_transport_send(t, peer, pz_tag(me, 0, 0, 1), NULL, 8, "x", &r) == PZ_ERR_ARG, "NULL buffer");
    CHECK(pz_tag(255, 0xffffffffu, 0xffff, 0xff) == ~0ull, "tag packing");
    CHECK(pz_tag(1, 2, 3, 4) == (1ull << 56 | 4ull << 48 | 3ull << 32 | 2ull), "tag layout");
}

/* Leaves a posted receive and an unwaited send behind: close must cancel
 * the one, flush the other and free both. */
static void test_leftovers(pz_transport *t, int world) {
    static uint8_t b[64], in[64];
    pz_request *r;
    int next = (g_rank + 1) % world, prev = (g_rank + world - 1) % world;
    OK(pz_transport_recv(t, next, pz_tag(next, 5, 5, 9), b, sizeof b, "never matched", &r));
    OK(pz_transport_send(t, next, pz_tag(g_rank, 6, 6, 9), b, sizeof b, "not waited for", &r));
    OK(pz_transport_recv(t, prev, pz_tag(prev, 6, 6, 9), in, sizeof in, "the other side", &r));
    OK(pz_transport_wait(t, r, NULL));
}

/* The lanes UCX chose (ucp_ep_print_info) must all be on the expected
 * transport: proof that the configuration really runs where it claims. */
static void check_lanes(pz_transport *t) {
    char *txt = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&txt, &n);
    CHECK(f, "open_memstream");
    pz_transport_print_info(t, f);
    fclose(f);
    int lanes = 0;
    for (char *line = strtok(txt, "\n"); line; line = strtok(NULL, "\n")) {
        char *l = strstr(line, "lane[");
        if (!l) continue;
        lanes++;
        if (g_rank == 0 && lanes == 1) say("[%s] first lane%s", g_cfg ? g_cfg->name : "-", strchr(l, ']') + 1);
        if (g_cfg) CHECK(strstr(l, g_cfg->lanes), "config %s: lane not on %s: %s", g_cfg->name, g_cfg->lanes, l);
    }
    CHECK(lanes > 0, "no lanes printed");
    free(txt);
}

static int child_basic(int rank, int world, int port) {
    double t0 = pz_now();
    pz_transport *t = start(rank, world, port, 20.0);
    if (rank == 0) say("init (W=%d) took %.3f s", world, pz_now() - t0);
    check_lanes(t);
    test_args(t, world);
    test_pingpong(t, world);
    test_many(t, world);
    test_collectives(t, world);
    test_truncation(t);
    test_flip(t);
    OK(pz_transport_barrier(t));
    test_leftovers(t, world);
    pz_transport_close(t, 0);
    return 0;
}

/* Busy for ms milliseconds without calling into the transport (a forward). */
static void compute_ms(double ms) {
    volatile double x = 0.0;
    double t0 = pz_now();
    while ((pz_now() - t0) * 1e3 < ms) x += 1.0;
    (void)x;
}

/* With the progress thread, messages move while both ranks compute without
 * calling in: an 8 MiB send posted before 300 ms of compute has arrived
 * after it (without the thread it does not move at all, see the top of
 * transport.c). And the simulated link: 1 MiB at 80 Mbit/s with 100 ms of
 * one-way delay leaves after 0.1 s + 0.1 s, not before. */
static int child_thread(int rank, int world, int port) {
    pz_transport *t = start(rank, world, port, 20.0);
    const size_t n = 8u << 20;
    uint8_t *buf = xmalloc(n);
    pz_request *r;
    int done = 0;
    size_t len = 0;
    if (rank == 0) fill(buf, n, 11);
    else memset(buf, 0, n);
    OK(pz_transport_barrier(t));
    if (rank == 0) OK(pz_transport_send(t, 1, pz_tag(0, 1, 0, 1), buf, n, "big send", &r));
    else OK(pz_transport_recv(t, 0, pz_tag(0, 1, 0, 1), buf, n, "big recv", &r));
    compute_ms(300);
    double t0 = pz_now();
    OK(pz_transport_test(t, r, &done, &len));
    CHECK(done, "8 MiB not moved during 300 ms of compute with the progress thread");
    if (!done) OK(pz_transport_wait(t, r, &len));
    if (rank == 0 && done) say("8 MiB moved while computing (test after 300 ms: %.1f ms)", 1e3 * (pz_now() - t0));
    if (rank == 1) CHECK(verify(buf, n, 11) == (size_t)-1, "received bytes differ");
    OK(pz_transport_barrier(t));

    const size_t m = 1u << 20;
    if (rank == 0) {
        pz_transport_set_link(t, 1, 80.0, 100.0);
        t0 = pz_now();
        OK(pz_transport_send(t, 1, pz_tag(0, 2, 0, 1), buf, m, "delayed send", &r));
        OK(pz_transport_wait(t, r, NULL));
        double s = pz_now() - t0;
        /* 1 MiB at 10 MB/s is 0.105 s, plus 0.1 s of delay */
        CHECK(s >= 0.2 && s < 1.0, "1 MiB at 80 Mbit/s + 100 ms left after %.3f s, want 0.205", s);
        say("1 MiB at 80 Mbit/s with 100 ms one-way delay: sent after %.3f s (model 0.205)", s);
        pz_transport_set_link(t, 1, 0.0, 0.0);
    } else {
        OK(pz_transport_recv(t, 0, pz_tag(0, 2, 0, 1), buf, m, "delayed recv", &r));
        OK(pz_transport_wait(t, r, &len));
        CHECK(len == m, "delayed message of %zu bytes", len);
    }
    double cpu = 0.0;
    unsigned long rounds = 0, sleeps = 0;
    CHECK(pz_transport_thread_stats(t, &cpu, &rounds, &sleeps) == 1 && rounds > 0, "no progress thread statistics");
    OK(pz_transport_barrier(t));
    pz_transport_close(t, 0);
    free(buf);
    return 0;
}

/* transport.h: a throttled sender's wait deadline counts from the message's
 * release onto the link. Four 400 KB messages at 8 Mbit/s (0.4 s each) with a
 * 1 s peer timeout: the last leaves after 1.6 s, and waiting for it first
 * must not declare the healthy receiver frozen. */
static int child_throttle(int rank, int world, int port) {
    pz_transport *t = start(rank, world, port, 1.0);
    const size_t n = 400000;
    uint8_t *buf = xmalloc(4 * n);
    pz_request *r[4];
    OK(pz_transport_barrier(t));
    double t0 = pz_now();
    if (rank == 0) {
        pz_transport_set_link(t, 1, 8.0, 0.0);
        for (int i = 0; i < 4; i++) OK(pz_transport_send(t, 1, pz_tag(0, 7, (uint32_t)i, 1), buf + i * n, n, "throttled", &r[i]));
        OK(pz_transport_wait(t, r[3], NULL));   /* the last first: 1.6 s, past the 1 s timeout */
        for (int i = 0; i < 3; i++) OK(pz_transport_wait(t, r[i], NULL));
        double s = pz_now() - t0;
        CHECK(s >= 1.55, "4 x 400 KB at 8 Mbit/s left after %.2f s, want 1.6", s);
        say("4 x 400 KB at 8 Mbit/s, 1 s peer timeout: the last left after %.2f s without a timeout", s);
        pz_transport_set_link(t, 1, 0.0, 0.0);
    } else {
        for (int i = 0; i < 4; i++) OK(pz_transport_recv(t, 0, pz_tag(0, 7, (uint32_t)i, 1), buf + i * n, n, "throttled", &r[i]));
        for (int i = 0; i < 4; i++) OK(pz_transport_wait(t, r[i], NULL));
    }
    OK(pz_transport_barrier(t));
    pz_transport_close(t, 0);
    free(buf);
    return 0;
}

/* ---- failures ------------------------------------------------------------- */

#define BIG (64u << 20)

/* The victim streams 64 MiB messages to `target` and SIGKILLs itself while
 * the 4th is in flight; the third rank waits on a receive from the victim
 * that never comes (victim 1) or on a 64 MiB send the victim never receives
 * (victim 2). With victim 1 -> target 2, rank 2 must notice through
 * UCX (mid-stream) and rank 0 may notice through its bootstrap socket; with
 * victim 2 -> target 0, rank 1 has no bootstrap socket to the victim and no
 * traffic with it: only UCX's keepalive can tell it. */
static int child_kill(int rank, int world, int port, int victim, int target) {
    pz_transport *t = start(rank, world, port, 20.0);
    uint8_t *buf = xmalloc(BIG);
    fill(buf, BIG, 1);
    pz_request *r;
    OK(pz_transport_barrier(t));
    if (rank == victim) {
        for (uint32_t i = 0;; i++) {
            OK(pz_transport_send(t, target, pz_tag(victim, i, 0, 1), buf, BIG, "stream", &r));
            if (i == 3) {
                double t0 = pz_now();
                while (pz_now() - t0 < 0.005) pz_transport_progress(t);
                raise(SIGKILL);
            }
            OK(pz_transport_wait(t, r, NULL));
        }
    }
    double t0 = pz_now();
    pz_status st = PZ_OK;
    for (uint32_t i = 0; st == PZ_OK; i++) {
        char what[64];
        if (rank == target) {
            snprintf(what, sizeof what, "recv activation step %u micro 0", i);
            OK(pz_transport_recv(t, victim, pz_tag(victim, i, 0, 1), buf, BIG, what, &r));
            t0 = pz_now();
            st = pz_transport_wait(t, r, NULL);
            /* the 4th (i == 3) may or may not have fully arrived before the kill; no 5th is ever sent */
            CHECK(st != PZ_OK || i <= 3, "received message %u that was never sent", i);
        } else if (victim == 1) {
            OK(pz_transport_recv(t, victim, pz_tag(victim, 1000, 0, 1), buf, 8, "recv gradient step 1000 micro 0",
                                 &r));
            st = pz_transport_wait(t, r, NULL);
            CHECK(st != PZ_OK, "a message from rank %d that was never sent", victim);
        } else {
            /* a rendezvous send the victim never matches: it can only end with the loss */
            OK(pz_transport_send(t, victim, pz_tag(rank, 1000, 0, 1), buf, BIG, "send gradient step 1000 micro 0",
                                 &r));
            st = pz_transport_wait(t, r, NULL);
            CHECK(st != PZ_OK, "a send to rank %d that was never received completed", victim);
        }
    }
    double dt = pz_now() - t0;
    say("failed after %.2f s as expected: %s", dt, pz_last_error());
    char lost[32];
    snprintf(lost, sizeof lost, "lost rank %d", victim);
    CHECK(st == PZ_ERR_PEER, "status %s", pz_status_name(st));
    CHECK(strstr(pz_last_error(), lost), "message does not name rank %d: %s", victim, pz_last_error());
    CHECK(dt < 10.0, "took %.1f s to notice the dead rank", dt);
    /* the peer stays lost: new operations fail at once */
    st = pz_transport_send(t, victim, pz_tag(rank, 0, 0, 1), buf, 8, "send after the loss", &r);
    CHECK(st == PZ_ERR_PEER && strstr(pz_last_error(), lost), "send after loss: %s", pz_last_error());
    free(buf);
    pz_transport_close(t, 1);
    return 0;
}

/* rank 1 starts receiving a 64 MiB message from rank 0 and SIGSTOPs itself;
 * rank 0 (send) and rank 2 (receive) must give up after the 2 s peer timeout.
 * Rank 2 names its peers as the replicas of one stage (pz_rank_name): its
 * error says which replica froze; rank 0's says "rank 1" alone. */
static int child_stop(int rank, int world, int port) {
    const double timeout = 2.0;
    pz_transport *t = start(rank, world, port, timeout);
    uint8_t *buf = xmalloc(BIG);
    fill(buf, BIG, 2);
    pz_request *r;
    OK(pz_transport_barrier(t));
    if (rank == 1) {
        OK(pz_transport_recv(t, 0, pz_tag(0, 0, 0, 1), buf, BIG, "recv big", &r));
        OK(pz_transport_wait(t, r, NULL));
        OK(pz_transport_recv(t, 0, pz_tag(0, 1, 0, 1), buf, BIG, "recv big", &r));
        double t0 = pz_now();
        while (pz_now() - t0 < 0.003) pz_transport_progress(t);
        raise(SIGSTOP);
        for (;;) pause(); /* never continued: the parent kills it */
    }
    pz_status st;
    double t0;
    if (rank == 2) pz_transport_set_names(t, &(pz_rank_layout){1, 3, 0});
    if (rank == 0) {
        send_wait(t, 1, pz_tag(0, 0, 0, 1), buf, BIG, "send big 0");
        OK(pz_transport_send(t, 1, pz_tag(0, 1, 0, 1), buf, BIG, "send activation step 1 micro 0", &r));
        t0 = pz_now();
        st = pz_transport_wait(t, r, NULL);
    } else {
        OK(pz_transport_recv(t, 1, pz_tag(1, 1000, 0, 1), buf, 8, "recv gradient step 1 micro 0", &r));
        t0 = pz_now();
        st = pz_transport_wait(t, r, NULL);
    }
    double dt = pz_now() - t0;
    say("gave up after %.2f s as expected: %s", dt, pz_last_error());
    CHECK(st == PZ_ERR_PEER, "status %s", pz_status_name(st));
    CHECK(strstr(pz_last_error(), rank == 2 ? "no answer from rank 1 (stage 0, replica 1) for" : "no answer from rank 1 for") &&
          strstr(pz_last_error(), "peer frozen?"), "message: %s", pz_last_error());
    CHECK(dt >= timeout * 0.95 && dt < timeout + 3.0, "gave up after %.2f s with a %.1f s timeout", dt, timeout);
    st = pz_transport_send(t, 1, pz_tag(rank, 7, 0, 1), buf, 8, "send after the timeout", &r);
    CHECK(st == PZ_ERR_PEER && strstr(pz_last_error(), rank == 2 ? "lost rank 1 (stage 0, replica 1)" : "lost rank 1"),
          "send after timeout: %s", pz_last_error());
    free(buf);
    pz_transport_close(t, 1);
    return 0;
}

/* ---- bootstrap --------------------------------------------------------------- */

/* sends a HELLO claiming rank of world (a 16-byte address) on fd, after the
 * handshake; rank 0 must answer with a REJECT frame, whose reason is logged */
static void hello_refused(int fd, uint32_t rank, uint32_t world, const char *who) {
    uint8_t hello[PZ_BOOT_HELLO_FIXED + 16], reply[PZ_BOOT_REJECT_MAX + 1];
    pz_put_u32(hello, rank);
    pz_put_u32(hello + 4, world);
    pz_put_u32(hello + 8, 16);
    memset(hello + PZ_BOOT_HELLO_FIXED, 0x5a, 16);
    CHECK(fake_send(fd, PZ_F_HELLO, hello, sizeof hello), "%s: send HELLO", who);
    unsigned type = 0;
    size_t len = 0;
    CHECK(fake_recv(fd, 5.0, &type, reply, sizeof reply - 1, &len) && type == PZ_F_REJECT,
          "%s: expected a REJECT frame, got type %u", who, type);
    reply[len] = 0;
    say("%s was refused: %s", who, (char *)reply);
}

/* fake rank: a stray connection with garbage, one announcing a 1 GB frame,
 * then (bad == 1) a rank that holds the job secret but has the wrong world size. */
static int child_fake(int rank, int world, int port, int bad) {
    (void)rank;
    (void)world;
    int g = fake_connect(port);
    CHECK(g >= 0 && write(g, "GET / HTTP/1.0\r\n\r\n", 18) == 18, "write");
    int h = fake_connect(port);
    uint8_t f[PZ_BOOT_HDR];
    pz_boot_header_put(f, PZ_F_AUTH, 0x40000000u);
    CHECK(h >= 0 && write(h, f, sizeof f) == (ssize_t)sizeof f, "write");
    if (bad == 1) {
        int fd = fake_connect(port);
        fake_join j = {.rank = 1, .world = 3, .secret = k_secret, .secret_len = sizeof k_secret - 1, .claim_secret = 1};
        CHECK(fake_handshake(fd, &j) == 1, "the handshake failed: %s", j.reason);
        hello_refused(fd, 1, 3, "fake rank");
        close(fd);
    } else {
        sleep_ms(3000); /* keep the stray connections open while the real ranks meet */
    }
    close(g);
    close(h);
    return 0;
}

/* Without a job secret anyone may complete the handshake: stray HELLOs
 * claiming rank 5, another world size, then rank 1 (taken by then? no: the
 * real rank 1 waits 1 s) must be refused one by one while rank 0 keeps
 * listening, so the real ranks still meet (before, the first one stopped
 * rank 0: a denial of service by one message). */
static int child_fake_nosecret(int port) {
    static const uint32_t claims[2][2] = {{5, 2}, {1, 3}};   /* rank, world */
    for (int i = 0; i < 2; i++) {
        int fd = fake_connect(port);
        fake_join j = {.rank = (int)claims[i][0], .world = (int)claims[i][1]};
        CHECK(fd >= 0 && fake_handshake(fd, &j) == 1, "no-secret handshake: %s", j.reason);
        char who[32];
        snprintf(who, sizeof who, "stray HELLO %d", i);
        hello_refused(fd, claims[i][0], claims[i][1], who);
        close(fd);
    }
    return 0;
}

/* mode 0: real ranks must meet despite stray connections (rank 2 is the fake);
 * mode 1: rank 0 must refuse a wrong world size (rank 1 is the fake);
 * mode 2: two processes claim rank 1: both and rank 0 fail (ranks 1 and 2 are rank 1);
 * mode 3: no rank 0 at all: rank 1 gives up after its connect timeout;
 * mode 4: no job secret, stray well-formed HELLOs (rank 2 is the fake): the
 *         real ranks still meet. */
static int child_boot(int rank, int world, int port, int mode) {
    if ((mode == 0 && rank == 2) || (mode == 1 && rank == 1)) return child_fake(rank, world, port, mode);
    if (mode == 4 && rank == 2) return child_fake_nosecret(port);
    pz_transport_opts o = make_opts(rank, mode == 0 || mode == 4 ? 2 : world, port, 5.0);
    if (mode == 4) o.secret = NULL, o.secret_len = 0;
    if (mode == 2 && rank == 2) o.rank = 1;
    if ((mode == 0 || mode == 4) && rank == 1) sleep_ms(1000); /* let the fake's connections reach rank 0 first */
    if (mode == 3) o.connect_timeout_s = 1.0;
    else o.connect_timeout_s = 8.0;
    pz_transport *t = NULL;
    double t0 = pz_now();
    pz_status st = pz_transport_init(&t, &o);
    double dt = pz_now() - t0;
    if (mode == 0 || mode == 4) {
        CHECK(st == PZ_OK, "init: %s", pz_last_error());
        OK(pz_transport_barrier(t));
        pz_transport_close(t, 0);
        return 0;
    }
    say("init failed as expected after %.2f s: %s", dt, pz_last_error());
    CHECK(st != PZ_OK && t == NULL, "init succeeded");
    if (mode == 1) CHECK(strstr(pz_last_error(), "world size is 3"), "message: %s", pz_last_error());
    if (mode == 2) CHECK(strstr(pz_last_error(), "two processes claim rank 1"), "message: %s", pz_last_error());
    if (mode == 3) {
        CHECK(strstr(pz_last_error(), "cannot reach rank 0"), "message: %s", pz_last_error());
        CHECK(dt < 3.0, "connect timeout of 1 s took %.1f s", dt);
    }
    return 0;
}

/* world 1 needs neither an address nor a port, and the collectives are no-ops */
static int child_solo(void) {
    pz_transport_opts o = {0, 1, NULL, 0, 5.0, 5.0, 0, NULL, 0};
    pz_transport *t = NULL;
    OK(pz_transport_init(&t, &o));
    double v[2] = {1.5, -2.0};
    OK(pz_transport_allreduce_sum_f64(t, v, 2));
    CHECK(v[0] == 1.5 && v[1] == -2.0, "allreduce on one rank changed the values");
    OK(pz_transport_barrier(t));
    pz_request *r;
    CHECK(pz_transport_send(t, 0, pz_tag(0, 0, 0, 1), v, 8, "self", &r) == PZ_ERR_ARG, "send to self");
    pz_transport_close(t, 0);
    return 0;
}

/* ---- the parent ----------------------------------------------------------------- */

#define MAXW 8
static pid_t g_kids[MAXW];
static int g_nkids;

static void kill_all(void) {
    for (int i = 0; i < g_nkids; i++)
        if (g_kids[i] > 0) kill(g_kids[i], SIGKILL);
}

static void on_alarm(int sig) {
    (void)sig;
    static const char m[] = "test_transport: global time limit reached, killing every child\n";
    kill_all();
    if (write(2, m, sizeof m - 1) < 0) { /* nothing to do */ }
    _exit(2);
}

typedef enum { S_BASIC, S_THREAD, S_THROTTLE, S_KILL_A, S_KILL_B, S_STOP, S_BOOT0, S_BOOT1, S_BOOT2, S_BOOT3, S_BOOT4, S_SOLO } scenario;

static int run_child(scenario s, int rank, int world, int port) {
    switch (s) {
    case S_BASIC: return child_basic(rank, world, port);
    case S_THREAD: return child_thread(rank, world, port);
    case S_THROTTLE: return child_throttle(rank, world, port);
    case S_KILL_A: return child_kill(rank, world, port, 1, 2);
    case S_KILL_B: return child_kill(rank, world, port, 2, 0);
    case S_STOP: return child_stop(rank, world, port);
    case S_BOOT0: return child_boot(rank, world, port, 0);
    case S_BOOT1: return child_boot(rank, world, port, 1);
    case S_BOOT2: return child_boot(rank, world, port, 2);
    case S_BOOT3: return child_boot(rank, world, port, 3);
    case S_BOOT4: return child_boot(rank, world, port, 4);
    case S_SOLO: return child_solo();
    }
    return 1;
}

/* Forks `world` children, waits up to limit_s, kills and reaps the rest.
 * `victim`: the rank expected to die by SIGKILL (-1: none). */
static void run(const char *name, const ucx_config *cfg, scenario s, int world, int victim, double limit_s,
                int first_rank) {
    int port = free_port();
    double t0 = pz_now();
    fflush(NULL);
    g_nkids = 0;
    for (int r = first_rank; r < world; r++) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); kill_all(); exit(1); }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            alarm((unsigned)limit_s + 5);
            g_rank = r;
            /* a child exits 1 at its first failed check: its later steps build on each one */
            static char tag[32];
            snprintf(tag, sizeof tag, "[rank %d] ", r);
            check_tag = tag;
            check_fatal = 1;
            g_cfg = cfg;
            apply_env(cfg ? cfg->env : NULL);
            fflush(NULL);
            exit(run_child(s, r, world, port)); /* exit, not _exit: LeakSanitizer checks at exit */
        }
        g_kids[g_nkids++] = pid;
    }
    int status[MAXW], reaped[MAXW] = {0}, left = g_nkids, timed_out = 0;
    while (left > 0) {
        /* once every expected survivor is done, the victim (stopped) is killed */
        int survivors_left = 0;
        for (int i = 0; i < g_nkids; i++)
            if (!reaped[i] && i + first_rank != victim) survivors_left++;
        if (!survivors_left || pz_now() - t0 > limit_s) {
            if (survivors_left) timed_out = 1;
            kill_all();
        }
        for (int i = 0; i < g_nkids; i++) {
            if (reaped[i]) continue;
            pid_t p = waitpid(g_kids[i], &status[i], WNOHANG);
            if (p == g_kids[i]) { reaped[i] = 1; g_kids[i] = -1; left--; }
        }
        if (left) sleep_ms(5);
    }
    int ok = !timed_out;
    for (int i = 0; i < g_nkids; i++) ok &= rank_ended_ok(i + first_rank, status[i], i + first_rank == victim);
    g_nkids = 0;
    printf("%s - %s [%s] W=%d (%.2f s)%s\n", ok ? "ok" : "FAIL", name, cfg ? cfg->name : "-", world, pz_now() - t0,
           timed_out ? " TIMED OUT" : "");
    fflush(stdout);
    CHECK(ok, "%s [%s] W=%d", name, cfg ? cfg->name : "-", world);
}

static int want(int argc, char **argv, const char *what) {
    if (argc < 2) return strcmp(what, "probe") != 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], what)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    signal(SIGALRM, on_alarm);
    alarm(110);
    signal(SIGPIPE, SIG_IGN);
    if (want(argc, argv, "probe")) {
        setenv("PZ_TRANSPORT_INFO", "1", 1);
        run("basic (inherited UCX environment)", NULL, S_BASIC, 2, -1, 60, 0);
        unsetenv("PZ_TRANSPORT_INFO");
    }
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        const ucx_config *cfg = &configs[c];
        if (!want(argc, argv, cfg->name)) continue;
        run("basic", cfg, S_BASIC, 2, -1, 40, 0);
        g_thread = 1;   /* the same with the progress thread, and what it is for */
        run("basic, progress thread", cfg, S_BASIC, 2, -1, 40, 0);
        run("progress thread moves data during compute; link delay", cfg, S_THREAD, 2, -1, 40, 0);
        g_thread = 0;
        if (cfg == &configs[0]) run("throttled sender's deadline counts from the release", cfg, S_THROTTLE, 2, -1, 30, 0);
        if (!cfg->full) continue;
        run("basic", cfg, S_BASIC, 3, -1, 40, 0);
        run("SIGKILL mid-stream (1 -> 2, 0 idle)", cfg, S_KILL_A, 3, 1, 20, 0);
        run("SIGKILL mid-stream (2 -> 0, 1 idle)", cfg, S_KILL_B, 3, 2, 20, 0);
        run("SIGSTOP mid-stream", cfg, S_STOP, 3, 1, 20, 0);
    }
    if (want(argc, argv, "boot")) {
        const ucx_config *tcp = &configs[0];
        run("bootstrap ignores stray connections", tcp, S_BOOT0, 3, -1, 20, 0);
        run("bootstrap refuses a wrong world size", tcp, S_BOOT1, 2, -1, 20, 0);
        run("bootstrap refuses a duplicate rank", tcp, S_BOOT2, 3, -1, 20, 0);
        run("bootstrap connect timeout", tcp, S_BOOT3, 2, -1, 20, 1);
        run("bootstrap without a secret survives stray HELLOs", tcp, S_BOOT4, 3, -1, 20, 0);
        run("a single rank", tcp, S_SOLO, 1, -1, 20, 0);
    }
    alarm(0);
    return check_summary("test_transport");
}
