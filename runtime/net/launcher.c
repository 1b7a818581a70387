/* launcher.c: see launcher.h. */
#include "runtime/net/launcher.h"
#include "base/rng.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/status.h"
#include "runtime/net/jobsecret.h"

/* A free TCP port on the loopback interface (the OS picks one). */
/* Whether a TCP listener could bind port on 127.0.0.1 now. */
static int port_free(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int pz_pick_port(void) {
    /* outside the kernel's ephemeral range, which outgoing connections (UCX's
     * among them) draw from: a port found free there could be taken by one
     * before rank 0 binds it */
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768, hi = 60999;
        fclose(f);
    }
    int first = 10000, last = lo - 1;
    if (last - first < 1000) first = hi + 1, last = 65535;
    if (last - first >= 1000) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        pz_rng r;
        pz_rng_seed(&r, (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32));
        for (int i = 0; i < 64; i++) {
            int port = first + (int)pz_rng_below(&r, (uint64_t)(last - first + 1));
            if (port_free(port)) return port;
        }
    }
    /* no room outside it: any port the kernel gives */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

typedef struct {
    pid_t pid;
    int out_fd, err_fd;        /* read ends, -1 when closed */
    char out_buf[8192], err_buf[8192];
    size_t out_len, err_len;
    int done, status;
    int stopped_seen;          /* found stopped at the last check (after another rank exited) */
} child;

/* Writes complete lines from buf; keeps a partial tail (or flushes it when full or at EOF). */
static void forward(int fd, char *buf, size_t *len, int rank, FILE *dst, int prefix, int eof) {
    (void)fd;
    size_t start = 0;
    for (size_t i = 0; i < *len; i++) {
        if (buf[i] != '\n') continue;
        if (prefix) fprintf(dst, "[rank %d] ", rank);
        fwrite(buf + start, 1, i + 1 - start, dst);
        start = i + 1;
    }
    if (start < *len && (eof || (start == 0 && *len == 8192))) {
        if (prefix) fprintf(dst, "[rank %d] ", rank);
        fwrite(buf + start, 1, *len - start, dst);
        fputc('\n', dst);
        start = *len;
    }
    memmove(buf, buf + start, *len - start);
    *len -= start;
    fflush(dst);
}

static void drain(child *c, int rank, int which) {
    int *fd = which ? &c->err_fd : &c->out_fd;
    char *buf = which ? c->err_buf : c->out_buf;
    size_t *len = which ? &c->err_len : &c->out_len;
    ssize_t n = read(*fd, buf + *len, sizeof c->out_buf - *len);
    if (n > 0) {
        *len += (size_t)n;
        forward(*fd, buf, len, rank, which ? stderr : stdout, which, 0);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        forward(*fd, buf, len, rank, which ? stderr : stdout, which, 1);
        close(*fd);
        *fd = -1;
    }
}

/* The state letter of /proc/PID/stat ('R', 'S', 'T' stopped, 't' traced,
 * 'Z', ...), or 0 when it cannot be read. */
static char proc_state(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *close_paren = strrchr(buf, ')');   /* the name may hold spaces and parentheses */
    return close_paren && close_paren[1] == ' ' ? close_paren[2] : 0;
}

/* When a rank fails because a peer stopped answering, the peer it names may
 * itself be waiting for the rank that froze (ranks time out in a race).
 * Before the others are stopped, name any rank the kernel holds stopped:
 * that one is the cause. */
static void name_stopped(const child *cs, int world, const pz_rank_layout *names) {
    for (int k = 0; k < world; k++) {
        if (cs[k].done) continue;
        char state = proc_state(cs[k].pid), name[64];
        if (state == 'T' || state == 't')
            fprintf(stderr, "pipezip: %s is stopped (state %c: SIGSTOP, or held by a debugger); the ranks "
                    "waiting for it time out\n", pz_rank_name(names, k, name, sizeof name), state);
    }
}

static volatile sig_atomic_t interrupted = 0;
static void on_signal(int sig) { interrupted = sig; }

/* Starts the ranks: each gets RANK, WORLD_SIZE, MASTER_ADDR/PORT and the
 * job's secret in its environment (never in argv, which ps shows), its
 * stdout and stderr through pipes the launcher reads. */
static void spawn_ranks(child *cs, int world, char **argv, int port, const char *secret) {
    for (int r = 0; r < world; r++) {
        int out[2], err[2];
        if (pipe(out) != 0 || pipe(err) != 0) pz_die("pipe: %s", strerror(errno));
        pid_t pid = fork();
        if (pid < 0) pz_die("fork: %s", strerror(errno));
        if (pid == 0) {
            char buf[32];
            dup2(out[1], 1);
            dup2(err[1], 2);
            close(out[0]); close(out[1]); close(err[0]); close(err[1]);
            for (int k = 0; k < r; k++) { close(cs[k].out_fd); close(cs[k].err_fd); }
            snprintf(buf, sizeof buf, "%d", r); setenv("RANK", buf, 1); setenv("LOCAL_RANK", buf, 1);
            snprintf(buf, sizeof buf, "%d", world); setenv("WORLD_SIZE", buf, 1); setenv("LOCAL_WORLD_SIZE", buf, 1);
            snprintf(buf, sizeof buf, "%d", port); setenv("MASTER_PORT", buf, 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            setenv("PZ_LAUNCHED", "1", 1);   /* this launcher restarts; see --max-restarts */
            if (secret[0]) setenv(PZ_JOB_SECRET_ENV, secret, 1);
            execv("/proc/self/exe", argv);
            fprintf(stderr, "exec failed: %s\n", strerror(errno));
            _exit(127);
        }
        close(out[1]);
        close(err[1]);
        cs[r].pid = pid;
        cs[r].out_fd = out[0];
        cs[r].err_fd = err[0];
    }
}

/* What one attempt knows about its ranks while it waits for them. */
typedef struct {
    child *cs;
    const pz_rank_layout *names;   /* how messages name a rank (pz_rank_name; NULL: "rank R") */
    int world, alive;
    int failed_rank;          /* the rank whose end stops the others; -1 while none */
    int refused;              /* it exited PZ_EXIT_REFUSED */
    int first_signal;         /* the SIGINT/SIGTERM forwarded to the ranks, 0 if none */
    double kill_at;           /* when to escalate to SIGKILL after a failure */
    double next_stop_check;
} run_state;

/* SIGTERM to every rank still running, and SIGCONT: a frozen (stopped)
 * rank acts on SIGTERM only once continued; SIGKILL follows in 3 s. */
static void stop_others(run_state *s) {
    for (int k = 0; k < s->world; k++)
        if (!s->cs[k].done) { kill(s->cs[k].pid, SIGTERM); kill(s->cs[k].pid, SIGCONT); }
    s->kill_at = pz_now() + 3.0;
}

/* Reaps the ranks that ended, then judges them: a rank killed by a signal
 * is the cause rather than one that failed on its own, and that one rather
 * than a rank that exited because it lost a peer (PZ_EXIT_PEER). */
static int reap_ended(run_state *s, int *reaped, int nreaped) {
    for (int r = 0; r < s->world && nreaped < 64; r++) {
        if (s->cs[r].done) continue;
        int st;
        if (waitpid(s->cs[r].pid, &st, WNOHANG) != s->cs[r].pid) continue;
        s->cs[r].done = 1;
        s->cs[r].status = st;
        s->alive--;
        reaped[nreaped++] = r;
    }
    return nreaped;
}

/* whether some reaped rank lost a peer and none ended otherwise badly */
static int only_peer_losses(const run_state *s, const int *reaped, int n) {
    int peer = 0;
    for (int i = 0; i < n; i++) {
        int st = s->cs[reaped[i]].status;
        if (WIFEXITED(st) && WEXITSTATUS(st) == PZ_EXIT_PEER) peer = 1;
        else if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) return 0;
    }
    return peer;
}

static void reap(run_state *s) {
    int reaped[64], nreaped = reap_ended(s, reaped, 0);
    /* A rank that lost its peer can end before the peer that failed is
     * reaped (its exit still tearing down): wait up to a second for the
     * cause, so the cause, not the rank that lost it, is named. */
    for (double until = pz_now() + 1.0; s->failed_rank < 0 && !s->first_signal && s->alive > 0 &&
                                        only_peer_losses(s, reaped, nreaped) && pz_now() < until;) {
        usleep(10000);
        nreaped = reap_ended(s, reaped, nreaped);
    }
    for (int pass = 0; pass < 3 && s->failed_rank < 0; pass++)
        for (int i = 0; i < nreaped && s->failed_rank < 0; i++) {
            int r = reaped[i], st = s->cs[r].status;
            int lost_peer = WIFEXITED(st) && WEXITSTATUS(st) == PZ_EXIT_PEER;
            if ((pass == 0 && !WIFSIGNALED(st)) || (pass == 1 && lost_peer)) continue;
            /* a rank stopped by the signal we forwarded exits 128 + it */
            int bad = !(WIFEXITED(st) &&
                        (WEXITSTATUS(st) == 0 || (s->first_signal && WEXITSTATUS(st) == 128 + s->first_signal)));
            if (!bad) continue;
            s->failed_rank = r;
            s->refused = WIFEXITED(st) && WEXITSTATUS(st) == PZ_EXIT_REFUSED;
            char name[64];
            pz_rank_name(s->names, r, name, sizeof name);
            if (WIFSIGNALED(st))
                fprintf(stderr, "pipezip: %s was killed by signal %d (%s); stopping the other ranks\n", name,
                        WTERMSIG(st), strsignal(WTERMSIG(st)));
            else
                fprintf(stderr, "pipezip: %s exited with status %d%s; stopping the other ranks\n", name,
                        WEXITSTATUS(st), lost_peer ? " (because of a peer)" : "");
            name_stopped(s->cs, s->world, s->names);
            stop_others(s);
        }
}

/* A rank held stopped after another has exited cleanly would keep the job
 * waiting forever (nothing times out on it any more): seen stopped twice,
 * a second apart, it is the failure. */
static void check_frozen(run_state *s) {
    if (s->failed_rank >= 0 || s->alive == s->world || s->alive == 0 || pz_now() < s->next_stop_check) return;
    s->next_stop_check = pz_now() + 1.0;
    for (int k = 0; k < s->world && s->failed_rank < 0; k++) {
        char state = s->cs[k].done ? 0 : proc_state(s->cs[k].pid);
        int stopped = state == 'T' || state == 't';
        if (stopped && s->cs[k].stopped_seen) {
            s->failed_rank = k;
            char name[64];
            fprintf(stderr, "pipezip: %s is stopped (state %c: SIGSTOP, or held by a debugger) while "
                    "other ranks have finished; stopping it\n", pz_rank_name(s->names, k, name, sizeof name), state);
            stop_others(s);
        }
        s->cs[k].stopped_seen = stopped;
    }
}

/* SIGINT/SIGTERM to the launcher: the ranks stop together at the next step
 * boundary, after a checkpoint when --checkpoint-dir is set; a second
 * signal, or PZ_STOP_GRACE seconds (default 120), kills them. */
static void forward_signals(run_state *s) {
    if (interrupted && s->kill_at == 0.0) {
        const char *g = getenv("PZ_STOP_GRACE");
        double grace = g && atof(g) > 0 ? atof(g) : 120.0;
        fprintf(stderr, "pipezip: %s: stopping all ranks at the next step boundary (again to kill them now)\n",
                strsignal(interrupted));
        for (int k = 0; k < s->world; k++)
            if (!s->cs[k].done) kill(s->cs[k].pid, interrupted);
        s->first_signal = interrupted;
        interrupted = 0;
        s->kill_at = pz_now() + grace;
    } else if (interrupted && s->first_signal) {
        fprintf(stderr, "pipezip: %s again: killing all ranks\n", strsignal(interrupted));
        for (int k = 0; k < s->world; k++)
            if (!s->cs[k].done) kill(s->cs[k].pid, SIGKILL);
        interrupted = 0;
    }
    if (s->kill_at > 0.0 && pz_now() > s->kill_at) {
        for (int k = 0; k < s->world; k++)
            if (!s->cs[k].done) kill(s->cs[k].pid, SIGKILL);
        s->kill_at = pz_now() + 3600.0;
    }
}

/* One attempt: spawns the ranks and waits. Returns 0, 1 (a rank failed) or
 * 128 + the signal that stopped the run. */
static int run_once(int world, char **argv, const pz_rank_layout *names) {
    int port = pz_pick_port();
    if (port < 0) { fprintf(stderr, "pipezip: error: cannot find a free TCP port on 127.0.0.1\n"); return 1; }
    /* the job's secret: the user's (environment, or --job-secret-file, which the
     * ranks read themselves and prefer), else a fresh random one for this run */
    char secret[65] = "";
    if (!getenv(PZ_JOB_SECRET_ENV)) pz_job_secret_make(secret, sizeof secret);
    child *cs = xcalloc((size_t)world, sizeof *cs);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    fflush(stdout);
    fflush(stderr);
    spawn_ranks(cs, world, argv, port, secret);
    run_state s = {cs, names, world, world, -1, 0, 0, 0.0, 0.0};
    while (s.alive > 0) {
        struct pollfd pf[2 * 64];
        int np = 0, map[2 * 64];
        for (int r = 0; r < world && np < 2 * 64 - 1; r++) {
            if (cs[r].out_fd >= 0) { pf[np] = (struct pollfd){cs[r].out_fd, POLLIN, 0}; map[np++] = 2 * r; }
            if (cs[r].err_fd >= 0) { pf[np] = (struct pollfd){cs[r].err_fd, POLLIN, 0}; map[np++] = 2 * r + 1; }
        }
        int n = np ? poll(pf, (nfds_t)np, 200) : (usleep(200000), 0);
        for (int i = 0; n > 0 && i < np; i++)
            if (pf[i].revents) drain(&cs[map[i] / 2], map[i] / 2, map[i] % 2);
        reap(&s);
        check_frozen(&s);
        forward_signals(&s);
    }
    /* whatever output is still buffered */
    for (int r = 0; r < world; r++) {
        while (cs[r].out_fd >= 0) drain(&cs[r], r, 0);
        while (cs[r].err_fd >= 0) drain(&cs[r], r, 1);
    }
    /* stopped by a signal: 128 + it (143 for SIGTERM, 130 for SIGINT), as a
     * shell reports it, unless a rank failed for another reason */
    int rc = s.failed_rank >= 0 ? (s.refused ? PZ_EXIT_REFUSED : 1) : s.first_signal ? 128 + s.first_signal : 0;
    explicit_bzero(secret, sizeof secret);
    free(cs);
    return rc;
}

int pz_launch_local(int world, int argc, char **argv, int max_restarts, const pz_rank_layout *names) {
    int rc = run_once(world, argv, names);
    if (rc == PZ_EXIT_REFUSED) {   /* the job itself was refused: a restart would be refused again */
        if (max_restarts > 0) fprintf(stderr, "pipezip: the job was refused at start: no restart\n");
        return 1;
    }
    if (rc != 1 || max_restarts <= 0) return rc;
    /* restarts continue from the newest checkpoint: the same command with
     * --resume auto (unless it names a --resume of its own) */
    int has_resume = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--resume") || !strncmp(argv[i], "--resume=", 9)) has_resume = 1;
    char **av = xcalloc((size_t)argc + 3, sizeof *av);
    memcpy(av, argv, (size_t)argc * sizeof *av);
    if (!has_resume) {
        av[argc] = (char *)"--resume";
        av[argc + 1] = (char *)"auto";
    }
    for (int k = 1; k <= max_restarts && rc == 1; k++) {
        int wait_s = 1 << (k - 1 < 5 ? k - 1 : 5);   /* 1, 2, 4 ... 32 s */
        fprintf(stderr, "pipezip: restart %d of %d in %d s: every rank again, from the newest checkpoint%s\n", k,
                max_restarts, wait_s, has_resume ? " (the command's --resume)" : " (--resume auto)");
        for (int s = 0; s < wait_s * 10 && !interrupted; s++) usleep(100000);
        if (interrupted) break;
        rc = run_once(world, av, names);
        if (rc == PZ_EXIT_REFUSED) {
            fprintf(stderr, "pipezip: restart %d was refused at start: no further restart\n", k);
            free(av);
            return 1;
        }
    }
    if (rc == 1) fprintf(stderr, "pipezip: giving up after %d restart%s\n", max_restarts, max_restarts == 1 ? "" : "s");
    free(av);
    return rc;
}

void pz_name_process(int rank) {
    /* exec'ing /proc/self/exe names the process "exe"; ps -e and top show
     * this name instead (at most 15 bytes, so "pipezip r12345" fits) */
    char name[16];
    snprintf(name, sizeof name, "pipezip r%d", rank);
    prctl(PR_SET_NAME, name, 0, 0, 0);
}

static int env_int(const char *name, int *out) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    long x;
    if (pz_parse_int(v, 0, 1 << 20, &x, name) != PZ_OK) pz_die("environment %s", pz_last_error());
    *out = (int)x;
    return 1;
}

int pz_env_rank(int *rank, int *world, const char **master_addr, int *master_port) {
    int found = (env_int("RANK", rank) && env_int("WORLD_SIZE", world)) ||
                (env_int("OMPI_COMM_WORLD_RANK", rank) && env_int("OMPI_COMM_WORLD_SIZE", world)) ||
                (env_int("PMI_RANK", rank) && env_int("PMI_SIZE", world)) ||
                (env_int("SLURM_PROCID", rank) && env_int("SLURM_NTASKS", world));
    if (!found) return 0;
    if (*rank >= *world) pz_die("environment: rank %d is not below world size %d", *rank, *world);
    *master_addr = getenv("MASTER_ADDR");
    if (!*master_addr || !**master_addr) *master_addr = "127.0.0.1";
    if (!env_int("MASTER_PORT", master_port)) *master_port = 29500;
    return 1;
}
