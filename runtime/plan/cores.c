/* cores.c: see cores.h. */
#include "runtime/plan/cores.h"

#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>

#include "base/isa.h"
#include "kernels/backend.h"
#include "base/parse.h"

/* Reads an integer variable into *out; 0 if unset, -1 (with pz_fail) if malformed. */
static int env_count(const char *name, long lo, long *out) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    if (pz_parse_int(v, lo, 1 << 20, out, name) != PZ_OK) {
        char why[256];   /* pz_fail must not read the buffer it writes */
        snprintf(why, sizeof why, "%s", pz_last_error());
        pz_fail(PZ_ERR_ARG, "environment: %s", why);
        return -1;
    }
    return 1;
}

static int is_loopback(const char *addr) {
    return !addr || strcmp(addr, "localhost") == 0 || strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0;
}

pz_status pz_cores_local_ranks(int rank, int world, const char *master_addr, pz_cores *c) {
    /* pairs of (ranks on this host, index here), in the order launchers are tried */
    static const char *const vars[][3] = {
        {"LOCAL_WORLD_SIZE", "LOCAL_RANK", "local launcher"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun"},
        {"SLURM_NTASKS_PER_NODE", "SLURM_LOCALID", "srun"},
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        long size, idx;
        int hs = env_count(vars[i][0], 1, &size);
        if (hs < 0) return PZ_ERR_ARG;
        if (hs == 0) continue;
        int hi = env_count(vars[i][1], 0, &idx);
        if (hi < 0) return PZ_ERR_ARG;
        if (hi == 0)
            return pz_fail(PZ_ERR_ARG, "environment: %s=%ld is set but %s is not", vars[i][0], size, vars[i][1]);
        if (idx >= size)
            return pz_fail(PZ_ERR_ARG, "environment: %s=%ld is not below %s=%ld", vars[i][1], idx, vars[i][0], size);
        c->local_ranks = (int)size;
        c->local_rank = (int)idx;
        c->local_source = vars[i][2];
        return PZ_OK;
    }
    if (is_loopback(master_addr)) {
        c->local_ranks = world;
        c->local_rank = rank;
        c->local_source = "all ranks on this host: MASTER_ADDR is loopback";
    } else {
        c->local_ranks = 1;
        c->local_rank = 0;
        c->local_source = "no LOCAL_WORLD_SIZE: taken as alone on this host";
    }
    return PZ_OK;
}

/* "0-3,6,8-9" from an ascending list */
static void format_cpus(char *buf, size_t cap, const int *cpus, int n) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n && len < cap;) {
        int j = i;
        while (j + 1 < n && cpus[j + 1] == cpus[j] + 1) j++;
        int w = j > i ? snprintf(buf + len, cap - len, "%s%d-%d", len ? "," : "", cpus[i], cpus[j])
                      : snprintf(buf + len, cap - len, "%s%d", len ? "," : "", cpus[i]);
        if (w < 0 || (size_t)w >= cap - len) {   /* too long to show: say how many */
            snprintf(buf, cap, "%d CPUs from %d to %d", n, cpus[0], cpus[n - 1]);
            return;
        }
        len += (size_t)w;
        i = j + 1;
    }
}

void pz_cores_plan(pz_cores *c, const int *cpus, int ncpus, int threads_flag, int bind, int prebound, int *first) {
    assert(ncpus >= 1 && c->local_ranks >= 1 && c->local_rank < c->local_ranks);
    c->cores = ncpus;
    c->bound = 0;
    c->why_unbound[0] = 0;
    *first = 0;
    int share = prebound ? ncpus : ncpus / c->local_ranks;   /* whole CPUs per local rank */
    c->threads = threads_flag > 0 ? threads_flag : (share > 0 ? share : 1);
    format_cpus(c->cpus, sizeof c->cpus, cpus, ncpus);
    if (bind != PZ_BIND_CORES || c->local_ranks == 1 || prebound) return;
    if (ncpus % c->local_ranks != 0)
        snprintf(c->why_unbound, sizeof c->why_unbound, "cannot divide %d CPU%s among %d local ranks", ncpus,
                 ncpus == 1 ? "" : "s", c->local_ranks);
    else if (c->threads > share)
        snprintf(c->why_unbound, sizeof c->why_unbound, "%d threads do not fit %d CPU%s per rank", c->threads, share,
                 share == 1 ? "" : "s");
    if (c->why_unbound[0]) return;
    *first = c->local_rank * share;
    c->bound = 1;
    format_cpus(c->cpus, sizeof c->cpus, cpus + *first, share);
}

pz_status pz_cores_setup(int rank, int world, const char *master_addr, int threads_flag, int bind, pz_cores *c) {
    memset(c, 0, sizeof *c);
    pz_status st = pz_cores_local_ranks(rank, world, master_addr, c);
    if (st != PZ_OK) return st;
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask) != 0)
        return pz_fail(PZ_ERR_IO, "sched_getaffinity: %s", strerror(errno));
    int cpus[CPU_SETSIZE], n = 0;
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &mask)) cpus[n++] = i;
    if (n == 0) return pz_fail(PZ_ERR_IO, "sched_getaffinity: no CPU in this process's mask");
    /* mpirun and srun usually bind each rank already (Open MPI: to a core
     * for 2 ranks or fewer). A mask narrower than the CPUs online then is
     * this rank's slice, not the host's, and must not be divided again. */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int external = strcmp(c->local_source, "mpirun") == 0 || strcmp(c->local_source, "srun") == 0;
    int prebound = external && online > 0 && n < online;
    int first;
    pz_cores_plan(c, cpus, n, threads_flag, bind, prebound, &first);
    if (prebound)
        c->local_source = strcmp(c->local_source, "mpirun") == 0 ? "mpirun, which bound this rank"
                                                                 : "srun, which bound this rank";
    if (c->bound) {
        cpu_set_t mine;
        CPU_ZERO(&mine);
        for (int i = first; i < first + c->cores / c->local_ranks; i++) CPU_SET(cpus[i], &mine);
        /* threads started later (OpenMP's pool) inherit this mask */
        if (sched_setaffinity(0, sizeof mine, &mine) != 0)
            return pz_fail(PZ_ERR_IO, "sched_setaffinity to CPUs %s: %s", c->cpus, strerror(errno));
    }
    pz_backend_cpu_set_threads(c->threads);
    return PZ_OK;
}

void pz_cores_print(FILE *f, int rank, const pz_cores *c) {
    fprintf(f, "rank %d: %d thread%s on CPU%s %s%s (%d CPU%s for %d local rank%s: %s)%s%s; code for %s\n", rank,
            c->threads, c->threads == 1 ? "" : "s", strpbrk(c->cpus, ",-") ? "s" : "", c->cpus,
            c->bound ? ", pinned" : "", c->cores, c->cores == 1 ? "" : "s", c->local_ranks,
            c->local_ranks == 1 ? "" : "s", c->local_source, c->why_unbound[0] ? "; not pinned: " : "",
            c->why_unbound, pz_isa_name(pz_isa_level()));
}

pz_status pz_cores_parse_bind(const char *v, int *bind) {
    if (strcmp(v, "cores") == 0) *bind = PZ_BIND_CORES;
    else if (strcmp(v, "none") == 0) *bind = PZ_BIND_NONE;
    else return pz_fail(PZ_ERR_ARG, "--bind: expected cores or none, got '%s'", v);
    return PZ_OK;
}
