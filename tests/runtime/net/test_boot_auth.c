/* test_boot_auth.c: the bootstrap's proof of the job secret
 * (runtime/net/bootstrap.c, runtime/net/bootmsg.c), between forked processes, without
 * UCX (the blobs stand for worker addresses):
 *  - the same secret joins; no secret on every side joins (with rank 0's warning);
 *  - a wrong secret is refused on both sides, and rank 0 gives up at its deadline;
 *  - a secret on one side only is refused, with a message that says which side;
 *  - impostors that connect before the real rank 1 (no secret, a wrong one, a
 *    replayed proof, garbage, oversized and out-of-order frames, a forged HELLO,
 *    idle and half-sent connections) are refused and the real rank 1 still joins;
 *  - a fake rank 0 that reflects rank 1's proof, or makes one up, gets no address;
 *  - 70 idle connections do not lock the real rank out (it retries);
 *  - --job-secret-file checks (runtime/net/jobsecret.c).
 *   usage: test_boot_auth [CASE...]   (default: every case) */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/clock.h"
#include "runtime/net/bootstrap.h"
#include "runtime/net/jobsecret.h"
#include "tests/check.h"
#include "tests/runtime/net/boot_fake.h"
#include "tests/runtime/net/transport_util.h"

static const uint8_t k_secret[] = "the job secret of test_boot_auth 0123456789";
static const uint8_t k_other[] = "another job's secret, same length 0123456789";
#define SECRET k_secret, sizeof k_secret - 1
#define OTHER k_other, sizeof k_other - 1

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* a blob that stands for rank r's worker address */
static void blob_of(int r, uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(r * 31 + i);
}

/* Joins as `rank` and checks the table; 0 = joined */
static int join(int rank, int world, int port, double timeout_s, const uint8_t *secret, size_t slen, pz_status *st,
                double *took) {
    uint8_t blob[40];
    blob_of(rank, blob, sizeof blob);
    pz_bootstrap b;
    double t0 = pz_now();
    *st = pz_bootstrap_run(&b, rank, world, "127.0.0.1", port, blob, sizeof blob, pz_now() + timeout_s, secret, slen);
    *took = pz_now() - t0;
    if (*st != PZ_OK) return 1;
    for (int r = 0; r < world; r++) {
        uint8_t want[40];
        blob_of(r, want, sizeof want);
        CHECK(b.lens[r] == sizeof want && memcmp(b.blobs[r], want, sizeof want) == 0, "rank %d: table entry %d", rank,
              r);
    }
    pz_bootstrap_barrier(&b, pz_now() + 5.0, NULL, NULL);
    pz_bootstrap_close(&b);
    return 0;
}

/* rank 0 of a world of 2 with the secret, which must see rank 1 join */
static int rank0_joins(int port, double timeout_s) {
    pz_status st;
    double dt;
    int rc = join(0, 2, port, timeout_s, SECRET, &st, &dt);
    CHECK(rc == 0, "rank 0: %s", pz_last_error());
    return 0;
}

/* ---- cases: each runs in forked children, child k gets role k ------------- */

typedef int (*role_fn)(int role, int port);

static int same_secret(int role, int port) {
    pz_status st;
    double dt;
    int rc = join(role, 3, port, 10, SECRET, &st, &dt);
    CHECK(rc == 0, "rank %d: %s", role, pz_last_error());
    return 0;
}

static int no_secret_anywhere(int role, int port) {
    pz_status st;
    double dt;
    int rc = join(role, 2, port, 10, NULL, 0, &st, &dt);
    CHECK(rc == 0, "rank %d: %s", role, pz_last_error());
    return 0;
}

static int wrong_secret(int role, int port) {
    pz_status st;
    double dt;
    if (role == 0) {
        int rc = join(0, 2, port, 2.0, SECRET, &st, &dt);
        rank_say(0, "failed as expected after %.2f s: %s", dt, pz_last_error());
        CHECK(rc != 0 && st == PZ_ERR_PEER, "rank 0 accepted a wrong secret");
        CHECK(strstr(pz_last_error(), "only 1 of 2 ranks joined") && strstr(pz_last_error(), "127.0.0.1:") &&
              strstr(pz_last_error(), "claiming rank 1") && strstr(pz_last_error(), "proof of the job secret failed"),
              "rank 0's message: %s", pz_last_error());
        CHECK(dt >= 1.9 && dt < 4.0, "rank 0 gave up after %.2f s with a 2 s deadline", dt);
    } else {
        int rc = join(1, 2, port, 10, OTHER, &st, &dt);
        rank_say(1, "failed as expected after %.2f s: %s", dt, pz_last_error());
        CHECK(rc != 0, "rank 1 joined with a wrong secret");
        CHECK(strstr(pz_last_error(), "refused by rank 0") && strstr(pz_last_error(), "proof of the job secret is wrong"),
              "rank 1's message: %s", pz_last_error());
        CHECK(dt < 2.0, "rank 1 took %.2f s to be refused", dt);
    }
    return 0;
}

/* role 0: rank 0 with (variant 0) or without (1) a secret; role 1 the other way */
static int one_sided(int role, int port, int variant) {
    pz_status st;
    double dt;
    int has = (role == 0) == (variant == 0);
    int rc = join(role, 2, port, role == 0 ? 2.0 : 10, has ? k_secret : NULL, has ? sizeof k_secret - 1 : 0, &st, &dt);
    CHECK(rc != 0, "rank %d joined", role);
    rank_say(role, "failed as expected: %s", pz_last_error());
    if (role == 1)
        CHECK(strstr(pz_last_error(), "refused by rank 0 at 127.0.0.1:") &&
              strstr(pz_last_error(), variant == 0 ? "needs the job secret" : "rank 0 has no job secret but this rank has one"),
              "message: %s", pz_last_error());
    else
        CHECK(strstr(pz_last_error(), variant == 0 ? "it has no job secret" : "it holds a job secret and rank 0 has none"),
              "message: %s", pz_last_error());
    return 0;
}
static int secret_on_rank0_only(int role, int port) { return one_sided(role, port, 0); }
static int secret_on_rank1_only(int role, int port) { return one_sided(role, port, 1); }

/* Expects fd to be refused: a REJECT (whose text must contain `needle`, if
 * given) or a closed connection (needle NULL). */
static void expect_refused(int fd, const char *what, const char *needle) {
    uint8_t buf[PZ_BOOT_REJECT_MAX + 1];
    unsigned type = 0;
    size_t len = 0;
    int got = fake_recv(fd, 12.0, &type, buf, sizeof buf - 1, &len);
    if (got && type == PZ_F_REJECT) {
        buf[len] = 0;
        rank_say(1, "%s: refused: %s", what, (char *)buf);
        CHECK(!needle || strstr((char *)buf, needle), "%s: reason [%s] lacks '%s'", what, (char *)buf, needle);
    } else {
        CHECK(!got && !needle, "%s: expected a REJECT%s, got %s type %u", what, needle ? "" : " or the end",
              got ? "a frame of" : "nothing,", type);
        rank_say(1, "%s: connection closed", what);
    }
}

/* role 1: impostors, then the real rank 1 */
static int impostors(int role, int port) {
    if (role == 0) return rank0_joins(port, 30);
    pz_status st;
    double dt;
    int idle[3];
    for (int i = 0; i < 3; i++) CHECK((idle[i] = fake_connect(port)) >= 0, "connect");
    /* half a header, then silence */
    CHECK(write(idle[2], "PZBS\x02", 5) == 5, "write");

    int fd = fake_connect(port);
    fake_join j = {.rank = 1, .world = 2};
    CHECK(fake_handshake(fd, &j) == 0 && strstr(j.reason, "needs the job secret"), "no secret: %s", j.reason);
    rank_say(1, "no secret: refused: %s", j.reason);
    close(fd);

    fd = fake_connect(port);
    j = (fake_join){.rank = 1, .world = 2, .secret = OTHER, .claim_secret = 1};
    CHECK(fake_handshake(fd, &j) == 0 && strstr(j.reason, "proof of the job secret is wrong"), "wrong secret: %s",
          j.reason);
    rank_say(1, "wrong secret: refused: %s", j.reason);
    close(fd);

    /* a proof guessed at random, claiming other ranks and worlds */
    for (int k = 0; k < 3; k++) {
        uint8_t mac[32];
        for (int i = 0; i < 32; i++) mac[i] = (uint8_t)(k * 77 + i);
        fd = fake_connect(port);
        j = (fake_join){.rank = k == 0 ? 0 : k == 1 ? 5 : 1, .world = k == 2 ? 7 : 2, .claim_secret = 1, .mac = mac};
        CHECK(fake_handshake(fd, &j) == 0 && strstr(j.reason, "proof of the job secret is wrong"),
              "guessed proof as rank %d of %d: %s", j.rank, j.world, j.reason);
        close(fd);
    }

    /* a recorded exchange of the real rank 1 (here: made with the secret, then
     * abandoned before HELLO, which takes no slot), replayed without it */
    fd = fake_connect(port);
    fake_join rec = {.rank = 1, .world = 2, .secret = SECRET, .claim_secret = 1};
    CHECK(fake_handshake(fd, &rec) == 1, "recording: %s", rec.reason);
    close(fd);
    fd = fake_connect(port);
    j = (fake_join){.rank = 1, .world = 2, .claim_secret = 1, .nonce = rec.nonce_sent, .mac = rec.mac_sent};
    CHECK(fake_handshake(fd, &j) == 0 && strstr(j.reason, "proof of the job secret is wrong"), "replay: %s", j.reason);
    rank_say(1, "replayed proof: refused: %s", j.reason);
    close(fd);

    /* the forged start-up message of the issue: a valid HELLO header and 200
     * random bytes as the address, with no handshake */
    uint8_t forged[PZ_BOOT_HELLO_FIXED + 200];
    pz_put_u32(forged, 1);
    pz_put_u32(forged + 4, 2);
    pz_put_u32(forged + 8, 200);
    pz_boot_random(forged + PZ_BOOT_HELLO_FIXED, 200);
    fd = fake_connect(port);
    CHECK(fake_send(fd, PZ_F_HELLO, forged, sizeof forged), "send");
    expect_refused(fd, "forged HELLO", "out of order");
    close(fd);

    /* oversized frames: refused from the header, before any allocation */
    unsigned types[] = {PZ_F_AUTH, PZ_F_HELLO, PZ_F_TABLE, 0x7777};
    for (int k = 0; k < 4; k++) {
        uint8_t h[PZ_BOOT_HDR];
        pz_boot_header_put(h, types[k], 0xfffffff0u);
        fd = fake_connect(port);
        CHECK(write(fd, h, sizeof h) == (ssize_t)sizeof h, "write");
        expect_refused(fd, "oversized frame", k < 3 ? "limit" : "unknown");
        close(fd);
    }
    /* a wrong protocol version, and garbage */
    fd = fake_connect(port);
    uint8_t h1[PZ_BOOT_HDR];
    pz_boot_header_put(h1, PZ_F_AUTH, PZ_BOOT_AUTH_LEN);
    h1[4] = 1;
    CHECK(write(fd, h1, sizeof h1) == (ssize_t)sizeof h1, "write");
    expect_refused(fd, "version 1", "version 1, expected 2");
    close(fd);
    fd = fake_connect(port);
    uint8_t junk[300];
    pz_boot_random(junk, sizeof junk);
    memcpy(junk, "GARB", 4);
    CHECK(write(fd, junk, sizeof junk) == (ssize_t)sizeof junk, "write");
    expect_refused(fd, "garbage", "bad magic");
    close(fd);
    /* a frame that is short of its fixed size */
    fd = fake_connect(port);
    CHECK(fake_send(fd, PZ_F_AUTH, junk, 10), "send");
    expect_refused(fd, "short AUTH", "malformed AUTH");
    close(fd);
    /* an authenticated-looking flow that skips PROOF */
    fd = fake_connect(port);
    pz_boot_auth a = {1, 2, PZ_BOOT_FLAG_SECRET, {0}};
    uint8_t ab[PZ_BOOT_AUTH_LEN];
    pz_boot_auth_put(ab, &a);
    CHECK(fake_send(fd, PZ_F_AUTH, ab, sizeof ab) && fake_send(fd, PZ_F_HELLO, forged, sizeof forged), "send");
    uint8_t cbuf[64];
    unsigned type = 0;
    size_t len = 0;
    CHECK(fake_recv(fd, 5, &type, cbuf, sizeof cbuf, &len) && type == PZ_F_CHALLENGE, "no CHALLENGE");
    expect_refused(fd, "HELLO instead of PROOF", "out of order");
    close(fd);

    /* the real rank 1, with the idle connections still open */
    int rc = join(1, 2, port, 20, SECRET, &st, &dt);
    CHECK(rc == 0, "the real rank 1 did not join: %s", pz_last_error());
    rank_say(1, "the real rank 1 joined after the impostors");
    for (int i = 0; i < 3; i++) close(idle[i]);
    return 0;
}

/* role 0 is a fake rank 0 that reflects rank 1's proof as its own (variant
 * 0) or makes one up (1); role 1 is the real rank 1 */
static int fake_rank0(int role, int port) {
    if (role == 1) {
        sleep_ms(200);
        for (int v = 0; v < 2; v++) {
            pz_status st;
            double dt;
            int rc = join(1, 2, port, 10, SECRET, &st, &dt);
            CHECK(rc != 0 && strstr(pz_last_error(), "failed to prove that it knows the job secret"),
                  "rank 1 with a fake rank 0: %s", rc ? pz_last_error() : "joined");
            rank_say(1, "refused the fake rank 0: %s", pz_last_error());
        }
        return 0;
    }
    int lfd = fake_listen(port);
    CHECK(lfd >= 0, "listen");
    for (int v = 0; v < 2; v++) {
        int fd = accept(lfd, NULL, NULL);
        CHECK(fd >= 0, "accept");
        uint8_t buf[PZ_BOOT_REJECT_MAX + 1];
        unsigned type;
        size_t len;
        pz_boot_auth a;
        CHECK(fake_recv(fd, 5, &type, buf, sizeof buf, &len) && type == PZ_F_AUTH && pz_boot_auth_get(buf, len, &a) == PZ_OK,
              "no AUTH");
        pz_boot_challenge c = {2, PZ_BOOT_FLAG_SECRET, {0}};
        pz_boot_random(c.nonce, sizeof c.nonce);
        pz_boot_challenge_put(buf, &c);
        CHECK(fake_send(fd, PZ_F_CHALLENGE, buf, PZ_BOOT_CHALLENGE_LEN), "send");
        CHECK(fake_recv(fd, 5, &type, buf, sizeof buf, &len) && type == PZ_F_PROOF && len == 32, "no PROOF");
        if (v == 1) pz_boot_random(buf, 32);
        CHECK(fake_send(fd, PZ_F_ACCEPT, buf, 32), "send");
        /* rank 1 must say why and never send its address */
        CHECK(fake_recv(fd, 5, &type, buf, sizeof buf - 1, &len) && type == PZ_F_REJECT,
              "rank 1 sent type %u to a fake rank 0", type);
        close(fd);
    }
    close(lfd);
    return 0;
}

/* 70 idle connections fill rank 0's 64 slots: the real rank 1 is dropped,
 * retries, and joins once the idle ones reach their handshake deadline. */
static int flood(int role, int port) {
    if (role == 0) return rank0_joins(port, 40);
    pz_status st;
    double dt;
    int fds[70];
    for (int i = 0; i < 70; i++) fds[i] = fake_connect(port);
    sleep_ms(300);
    int rc = join(1, 2, port, 30, SECRET, &st, &dt);
    CHECK(rc == 0, "rank 1 after a flood: %s", pz_last_error());
    rank_say(1, "joined after %.1f s despite 70 idle connections", dt);
    for (int i = 0; i < 70; i++)
        if (fds[i] >= 0) close(fds[i]);
    return 0;
}

/* ---- the parent ------------------------------------------------------------ */

static void run(const char *name, role_fn fn, int roles, double limit_s) {
    int port = free_port();
    pid_t kids[8];
    double t0 = pz_now();
    fflush(NULL);
    for (int r = 0; r < roles; r++) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); exit(1); }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            alarm((unsigned)limit_s + 5);
            static char tag[32];
            snprintf(tag, sizeof tag, "[role %d] ", r);
            check_tag = tag;
            check_fatal = 1;
            exit(fn(r, port));
        }
        kids[r] = pid;
    }
    int ok = 1, left = roles, done[8] = {0};
    while (left > 0) {
        if (pz_now() - t0 > limit_s) {
            for (int r = 0; r < roles; r++)
                if (!done[r]) kill(kids[r], SIGKILL);
            ok = 0;
        }
        for (int r = 0; r < roles; r++) {
            int st;
            if (done[r] || waitpid(kids[r], &st, WNOHANG) != kids[r]) continue;
            done[r] = 1;
            left--;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                printf("  role %d ended with status 0x%x\n", r, st);
                ok = 0;
            }
        }
        if (left) sleep_ms(5);
    }
    printf("%s - %s (%.2f s)\n", ok ? "ok" : "FAIL", name, pz_now() - t0);
    fflush(stdout);
    CHECK(ok, "%s", name);
}

/* --job-secret-file and PIPEZIP_JOB_SECRET */
static void secret_sources(void) {
    char dir[] = "/tmp/pz_secret_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[128];
    snprintf(path, sizeof path, "%s/s", dir);
    pz_job_secret *s = calloc(1, sizeof *s);
    CHECK_STATUS(pz_job_secret_read_file(path, s), PZ_ERR_IO, "No such file");
    FILE *f = fopen(path, "w");
    fclose(f);
    chmod(path, 0600);
    CHECK_STATUS(pz_job_secret_read_file(path, s), PZ_ERR_ARG, "is empty");
    f = fopen(path, "w");
    fputs("  \n", f);
    fclose(f);
    CHECK_STATUS(pz_job_secret_read_file(path, s), PZ_ERR_ARG, "only white space");
    f = fopen(path, "w");
    fputs("0123456789abcdef0123456789abcdef\n", f);
    fclose(f);
    CHECK_STATUS(pz_job_secret_read_file(path, s), PZ_OK, NULL);
    CHECK(s->len == 32 && memcmp(s->key, "0123456789abcdef", 16) == 0, "secret of %zu bytes", s->len);
    chmod(path, 0644);
    CHECK_STATUS(pz_job_secret_read_file(path, s), PZ_ERR_ARG, "chmod 600");
    CHECK(s->len == 0, "a refused secret was kept");
    chmod(path, 0640); /* group-readable: a shared group of a cluster is allowed */
    CHECK_STATUS(pz_job_secret_read_file(path, s), PZ_OK, NULL);
    f = fopen(path, "w");
    for (int i = 0; i < PZ_JOB_SECRET_MAX + 1; i++) fputc('x', f);
    fclose(f);
    CHECK_STATUS(pz_job_secret_read_file(path, s), PZ_ERR_ARG, "at most");
    CHECK_STATUS(pz_job_secret_read_file(dir, s), PZ_ERR_ARG, "not a regular file");
    CHECK_STATUS(pz_job_secret_read_file("/dev/zero", s), PZ_ERR_ARG, "not a regular file");
    remove(path);
    rmdir(dir);

    unsetenv(PZ_JOB_SECRET_ENV);
    CHECK_STATUS(pz_job_secret_load(NULL, s), PZ_OK, NULL);
    CHECK(s->len == 0, "a secret from nowhere");
    setenv(PZ_JOB_SECRET_ENV, "", 1);
    CHECK_STATUS(pz_job_secret_load(NULL, s), PZ_ERR_ARG, "empty");
    setenv(PZ_JOB_SECRET_ENV, "from the environment, long enough", 1);
    CHECK_STATUS(pz_job_secret_load(NULL, s), PZ_OK, NULL);
    CHECK(s->len == 33 && !strcmp(s->source, PZ_JOB_SECRET_ENV), "env secret of %zu bytes", s->len);
    unsetenv(PZ_JOB_SECRET_ENV);

    char a[65], b[65];
    pz_job_secret_make(a, sizeof a);
    pz_job_secret_make(b, sizeof b);
    CHECK(strlen(a) == 64 && strspn(a, "0123456789abcdef") == 64 && strcmp(a, b) != 0, "made %s and %s", a, b);
    pz_job_secret_clear(s);
    free(s);
    printf("ok - job secret sources\n");
}

static int want(int argc, char **argv, const char *what) {
    if (argc < 2) return 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], what)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (want(argc, argv, "sources")) secret_sources();
    if (want(argc, argv, "same")) run("the same secret joins (3 ranks)", same_secret, 3, 20);
    if (want(argc, argv, "none")) run("no secret anywhere joins", no_secret_anywhere, 2, 20);
    if (want(argc, argv, "wrong")) run("a wrong secret is refused on both sides", wrong_secret, 2, 20);
    if (want(argc, argv, "one-sided")) {
        run("a secret on rank 0 only", secret_on_rank0_only, 2, 20);
        run("a secret on rank 1 only", secret_on_rank1_only, 2, 20);
    }
    if (want(argc, argv, "impostors")) run("impostors before the real rank 1", impostors, 2, 40);
    if (want(argc, argv, "fake-rank0")) run("a fake rank 0 gets no address", fake_rank0, 2, 20);
    if (want(argc, argv, "flood")) run("70 idle connections", flood, 2, 45);
    return check_summary("test_boot_auth");
}
