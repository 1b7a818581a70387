/* bench_allreduce.c: bus bandwidth of the data-parallel all-reduce
 * (runtime/dp/group.c, over pipezip's transport) against Open MPI's
 * MPI_Allreduce, on the same processes and sizes (buffers of their own, both
 * 2 MiB-aligned and touched before), in the same run.
 * A printout, not an assertion.
 *
 *   mpirun --allow-run-as-root -np 2 bench_allreduce [--runs N] [--algo auto|ring|rd]
 *          [--seg BYTES] [--small BYTES] [--spin SECONDS] [--min BYTES] [--max BYTES] [--batch-ms MS] [--mean]
 *          [--net] [--shm-slot BYTES] [--shm-copy] [--best N]
 *
 * For every size (x4 from --min 4 KiB to --max 64 MiB) and run, each side
 * does a timed batch of all-reduces (enough for --batch-ms of MPI, default
 * 50, at least 3) after a warm-up of each, the two alternating run by run
 * (and which goes first alternating too) so that both see the same load;
 * a batch's time is the slowest rank's (MPI_MAX). Reported: medians over the
 * runs of busbw = size x 2(D-1)/D / time (the OSU and nccl-tests
 * convention), and ours / MPI. Each size's result is also compared with
 * MPI's (bit for bit at D = 2, where both add the same two numbers).
 * --mean times the average instead (pz_dp_allreduce's mean, what training
 * runs; MPI's sum followed by the division, as an MPI user averages).
 * --best N adds, per size, the best of N single calls of each side
 * (alternating, each the slowest rank's): on a loaded machine the calls in
 * which both ranks held a core, what a quiet machine would give.
 * The ranks share a host, so ours goes through shared memory (runtime/dp/shm.h);
 * --net keeps it on the transport (the group's net_only), as across hosts;
 * --shm-slot sets its piece per member and round (the group's shm_slot_bytes;
 * with the single copy, its read-sum-write piece); --shm-copy keeps it on the
 * two-copy reduction where the single copy works (shm_copy). The last line
 * says which one ran.
 * Rank 0 picks the transport's port and broadcasts it with MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/mem.h"
#include "bench/bench_util.h"
#include "runtime/dp/group.h"
#include "runtime/dp/shm.h"
#include "runtime/net/launcher.h"

#define MAX_RUNS 64

static int g_rank, g_world;
static int g_mean;   /* --mean: the average (what training runs), MPI's sum then divided by D */

static void die_on(pz_status st) {
    if (st == PZ_OK) return;
    fprintf(stderr, "rank %d: %s\n", g_rank, pz_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static float *big_alloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 2u << 20, n * sizeof(float) + 64) != 0) { perror("posix_memalign"); exit(1); }
    madvise(p, n * sizeof(float) + 64, MADV_HUGEPAGE);
    memset(p, 0, n * sizeof(float) + 64);
    return p;
}

static void fill(float *x, size_t n, int rank, int it) {
    for (size_t i = 0; i < n; i++) x[i] = (float)((i * 7 + (size_t)rank * 13 + (size_t)it) % 1000) * 0.001f - 0.5f;
}

/* one all-reduce of x[0..n), ours or MPI's */
static void allreduce(int ours, pz_dp_group *g, float *x, size_t n, pz_dp_algo algo) {
    if (ours) {
        die_on(pz_dp_allreduce(g, x, n, g_mean, algo));
        return;
    }
    MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (g_mean)
        for (size_t i = 0; i < n; i++) x[i] /= (float)g_world;
}

/* seconds per all-reduce over `iters` calls, the slowest rank's */
static double time_batch(int ours, pz_dp_group *g, float *x, size_t n, int iters, pz_dp_algo algo) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = pz_now();
    for (int i = 0; i < iters; i++) allreduce(ours, g, x, n, algo);
    double dt = (pz_now() - t0) / iters, mx;
    MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return mx;
}

/* --best: the fastest of `calls` single calls of each side, alternating */
static void best_of(pz_dp_group *g, float *x, float *y, size_t n, size_t bytes, int calls, pz_dp_algo algo,
                    double factor) {
    double bo = 1e30, bm = 1e30;
    for (int i = 0; i < calls; i++) {
        double to = time_batch(1, g, x, n, 1, algo), tm = time_batch(0, g, y, n, 1, algo);
        if (to < bo) bo = to;
        if (tm < bm) bm = tm;
    }
    if (g_rank == 0)
        printf("%10zu best of %d calls: ours %.3f GB/s, MPI %.3f GB/s, %.2fx\n", bytes, calls,
               (double)bytes * factor / bo / 1e9, (double)bytes * factor / bm / 1e9, bm / bo);
}

/* "model name" of /proc/cpuinfo, for the printout */
static void cpu_name(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && c) {
            c += 1 + (c[1] == ' ');
            c[strcspn(c, "\n")] = 0;
            snprintf(buf, cap, "%s", c);
            break;
        }
    }
    fclose(f);
}

static size_t parse_size(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k') v *= 1024;
    else if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
    return v > 0 ? (size_t)v : 0;
}

/* One size: the same inputs through both (the check column), then runs of
 * alternating batches of ours and MPI's, and the medians' bus bandwidth. */
static void bench_size(pz_dp_group *g, float *x, float *y, size_t bytes, int runs, double batch_ms, int best,
                       pz_dp_algo algo, double factor) {
    size_t n = bytes / sizeof(float);
    /* correctness: the same inputs through both */
    fill(x, n, g_rank, 0);
    memcpy(y, x, n * sizeof *x);
    allreduce(1, g, x, n, algo);
    allreduce(0, g, y, n, algo);
    double maxdiff = 0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] > y[i] ? x[i] - y[i] : y[i] - x[i];
        if (d > maxdiff) maxdiff = d;
    }
    double md;
    MPI_Allreduce(&maxdiff, &md, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    /* batch size: ~batch_ms of MPI at this size (longer batches average
     * out more of a loaded machine's scheduling), at least 3 */
    double one = time_batch(0, g, y, n, 2, algo);
    int iters = one > 0 ? (int)(batch_ms * 1e-3 / one) : 1000;
    if (iters < 3) iters = 3;
    if (iters > 20000) iters = 20000;
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    time_batch(1, g, x, n, 2, algo); /* warm-up */
    double ours[MAX_RUNS], mpi[MAX_RUNS];
    for (int r = 0; r < runs; r++) {   /* who goes first alternates: a trend in the load hits both alike */
        int ours_first = r % 2 == 0;
        if (ours_first) ours[r] = time_batch(1, g, x, n, iters, algo);
        mpi[r] = time_batch(0, g, y, n, iters, algo);
        if (!ours_first) ours[r] = time_batch(1, g, x, n, iters, algo);
    }
    double to = bench_median(ours, runs), tm = bench_median(mpi, runs);
    double bo = (double)bytes * factor / to / 1e9, bm = (double)bytes * factor / tm / 1e9;
    if (g_rank == 0) {
        printf("%10zu %9.3f GB/s %9.3f GB/s %9.3f GB/s %6.2fx %s\n", bytes, bo, bm, (double)bytes / to / 1e9,
               bo / bm, md == 0 ? "same bits as MPI" : "");
        if (md != 0) printf("%10s max |ours - MPI| = %g\n", "", md);
        fflush(stdout);
    }
    if (best > 0) best_of(g, x, y, n, bytes, best, algo, factor);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int world;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    g_world = world;
    int runs = 7, net = 0, shm_copy = 0, best = 0;
    pz_dp_algo algo = PZ_DP_AUTO;
    double spin = 0, batch_ms = 50;
    size_t seg = PZ_DP_SEG_BYTES, small = PZ_DP_SMALL_BYTES, lo = 4 << 10, hi = 64 << 20, shm_slot = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--runs") && v) runs = atoi(argv[++i]);
        else if (!strcmp(a, "--algo") && v) {
            algo = !strcmp(v, "ring") ? PZ_DP_RING : !strcmp(v, "rd") ? PZ_DP_RDOUBLING : PZ_DP_AUTO;
            if (algo == PZ_DP_AUTO && strcmp(v, "auto")) { fprintf(stderr, "--algo auto|ring|rd\n"); return 2; }
            i++;
        } else if (!strcmp(a, "--seg") && v) seg = parse_size(argv[++i]);
        else if (!strcmp(a, "--small") && v) small = parse_size(argv[++i]);
        else if (!strcmp(a, "--spin") && v) spin = atof(argv[++i]);
        else if (!strcmp(a, "--batch-ms") && v) batch_ms = atof(argv[++i]);
        else if (!strcmp(a, "--mean")) g_mean = 1;
        else if (!strcmp(a, "--net")) net = 1;
        else if (!strcmp(a, "--shm-slot") && v) shm_slot = parse_size(argv[++i]);
        else if (!strcmp(a, "--shm-copy")) shm_copy = 1;
        else if (!strcmp(a, "--best") && v) best = atoi(argv[++i]);
        else if (!strcmp(a, "--min") && v) lo = parse_size(argv[++i]);
        else if (!strcmp(a, "--max") && v) hi = parse_size(argv[++i]);
        else {
            if (g_rank == 0) fprintf(stderr, "bench_allreduce: unknown or incomplete option %s\n", a);
            MPI_Finalize();
            return 2;
        }
    }
    if (runs < 1 || runs > MAX_RUNS || best < 0 || seg < 4 || lo < 4 || hi < lo || world > PZ_DP_MAX || !(batch_ms >= 1 && batch_ms <= 60000)) {
        if (g_rank == 0)
            fprintf(stderr, "bench_allreduce: bad option values (runs 1..%d, sizes >= 4 bytes, batch-ms 1..60000)\n", MAX_RUNS);
        MPI_Finalize();
        return 2;
    }
    int port = g_rank == 0 ? pz_pick_port() : 0;
    MPI_Bcast(&port, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (port < 0) { fprintf(stderr, "no free port\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
    /* a job secret of rank 0's, handed to the others over MPI */
    uint8_t secret[32] = {0};
    if (g_rank == 0) {
        FILE *f = fopen("/dev/urandom", "rb");
        if (!f || fread(secret, 1, sizeof secret, f) != sizeof secret) { perror("/dev/urandom"); MPI_Abort(MPI_COMM_WORLD, 1); }
        fclose(f);
    }
    MPI_Bcast(secret, (int)sizeof secret, MPI_BYTE, 0, MPI_COMM_WORLD);
    pz_transport_opts o = {g_rank, world, "127.0.0.1", port, 60.0, 60.0, 0, secret, sizeof secret};
    pz_transport *t = NULL;
    die_on(pz_transport_init(&t, &o));
    int *ranks = xmalloc((size_t)world * sizeof *ranks);
    for (int r = 0; r < world; r++) ranks[r] = r;
    pz_dp_group g = {0};
    die_on(pz_dp_group_init(&g, t, g_rank, ranks, world));
    g.seg_bytes = seg;
    g.small_bytes = small;
    g.spin_s = spin;
    g.net_only = net;
    g.shm_slot_bytes = shm_slot;
    g.shm_copy = shm_copy;
    size_t maxn = hi / sizeof(float);
    float *x = big_alloc(maxn), *y = big_alloc(maxn);
    if (g_rank == 0) {
        char cpu[128];
        cpu_name(cpu, sizeof cpu);
        printf("CPU: %s, %ld online\n", cpu, sysconf(_SC_NPROCESSORS_ONLN));
        printf("bench_allreduce: D = %d ranks, %d runs per size (medians), algo %s, segments %zu B, recursive doubling up to %zu B, spin %g s, batches of %g ms, %s, %s\n",
               world, runs, algo == PZ_DP_RING ? "ring" : algo == PZ_DP_RDOUBLING ? "rd" : "auto", seg, small, spin,
               batch_ms, g_mean ? "mean (MPI: sum, then / D)" : "sum", net ? "the transport only (--net)" : "shared memory where all map it");
        printf("%10s %12s %12s %12s %7s %s\n", "bytes", "ours busbw", "MPI busbw", "ours algbw", "ratio", "check");
    }
    double factor = world > 1 ? 2.0 * (world - 1) / world : 1.0;
    for (size_t bytes = lo; bytes <= hi; bytes *= 4) bench_size(&g, x, y, bytes, runs, batch_ms, best, algo, factor);
    if (g_rank == 0) printf("ours: %s\n", net ? "the transport" : pz_dp_shm_mode(&g));
    pz_dp_group_free(&g);
    free(ranks);
    free(x);
    free(y);
    MPI_Barrier(MPI_COMM_WORLD);
    pz_transport_close(t, 0);
    MPI_Finalize();
    return 0;
}
