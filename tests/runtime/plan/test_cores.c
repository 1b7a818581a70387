/* test_cores.c: threads per rank and core binding (runtime/plan/cores.c):
 * where the count of ranks on this host comes from, and the plan for each
 * (threads, pinned CPUs, why not pinned). */
#include <stdlib.h>
#include <string.h>

#include "runtime/plan/cores.h"
#include "tests/check.h"

static const char *const launcher_vars[] = {
    "LOCAL_WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_NTASKS_PER_NODE", "SLURM_LOCALID",
};

static void clear_env(void) {
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++) unsetenv(launcher_vars[i]);
}

/* local ranks from the environment: returns the status, fills c */
static pz_status local(int rank, int world, const char *addr, pz_cores *c) {
    memset(c, 0, sizeof *c);
    return pz_cores_local_ranks(rank, world, addr, c);
}

static void test_local_ranks(void) {
    pz_cores c;
    clear_env();
    CHECK(local(3, 4, "127.0.0.1", &c) == PZ_OK && c.local_ranks == 4 && c.local_rank == 3,
          "loopback master: all ranks here (got %d of %d)", c.local_rank, c.local_ranks);
    CHECK(local(3, 4, "10.0.0.7", &c) == PZ_OK && c.local_ranks == 1 && c.local_rank == 0,
          "remote master, no variables: alone here (got %d of %d)", c.local_rank, c.local_ranks);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    CHECK(local(5, 8, "10.0.0.7", &c) == PZ_OK && c.local_ranks == 2 && c.local_rank == 1 &&
          strcmp(c.local_source, "mpirun") == 0, "mpirun variables (got %d of %d)", c.local_rank, c.local_ranks);
    setenv("LOCAL_WORLD_SIZE", "3", 1);
    setenv("LOCAL_RANK", "2", 1);
    CHECK(local(5, 8, "10.0.0.7", &c) == PZ_OK && c.local_ranks == 3 && c.local_rank == 2,
          "LOCAL_WORLD_SIZE comes first (got %d of %d)", c.local_rank, c.local_ranks);
    clear_env();
    setenv("SLURM_NTASKS_PER_NODE", "4", 1);
    setenv("SLURM_LOCALID", "3", 1);
    CHECK(local(0, 8, "10.0.0.7", &c) == PZ_OK && c.local_ranks == 4 && c.local_rank == 3 &&
          strcmp(c.local_source, "srun") == 0, "srun variables (got %d of %d)", c.local_rank, c.local_ranks);
    setenv("SLURM_LOCALID", "4", 1);
    CHECK(local(0, 8, "10.0.0.7", &c) == PZ_ERR_ARG && strstr(pz_last_error(), "SLURM_LOCALID"),
          "local rank not below the local size is an error naming it: %s", pz_last_error());
    unsetenv("SLURM_LOCALID");
    CHECK(local(0, 8, "10.0.0.7", &c) == PZ_ERR_ARG && strstr(pz_last_error(), "SLURM_LOCALID"),
          "size without index is an error naming the index: %s", pz_last_error());
    clear_env();
    setenv("LOCAL_WORLD_SIZE", "two", 1);
    setenv("LOCAL_RANK", "0", 1);
    CHECK(local(0, 2, "127.0.0.1", &c) == PZ_ERR_ARG && strstr(pz_last_error(), "LOCAL_WORLD_SIZE"),
          "malformed variable is an error naming it: %s", pz_last_error());
    setenv("LOCAL_WORLD_SIZE", "0", 1);
    CHECK(local(0, 2, "127.0.0.1", &c) == PZ_ERR_ARG, "LOCAL_WORLD_SIZE=0 is refused");
    clear_env();
}

/* plan for local rank lr of ln over cpus; returns c */
static pz_cores plan(int lr, int ln, const int *cpus, int n, int threads, int bind, int prebound) {
    pz_cores c;
    memset(&c, 0, sizeof c);
    c.local_rank = lr;
    c.local_ranks = ln;
    c.local_source = "test";
    int first;
    pz_cores_plan(&c, cpus, n, threads, bind, prebound, &first);
    return c;
}

static void test_plan(void) {
    const int two[] = {0, 1}, eight[] = {0, 1, 2, 3, 4, 5, 6, 7}, three[] = {0, 1, 2}, odd[] = {1, 3, 5, 7};
    pz_cores c = plan(1, 2, two, 2, 0, PZ_BIND_CORES, 0);
    CHECK(c.threads == 1 && c.bound && strcmp(c.cpus, "1") == 0, "2 CPUs, 2 ranks: rank 1 gets CPU 1 (%d %d %s)",
          c.threads, c.bound, c.cpus);
    c = plan(1, 2, eight, 8, 0, PZ_BIND_CORES, 0);
    CHECK(c.threads == 4 && c.bound && strcmp(c.cpus, "4-7") == 0, "8 CPUs, 2 ranks: 4 threads on 4-7 (%d %s)",
          c.threads, c.cpus);
    c = plan(0, 2, odd, 4, 0, PZ_BIND_CORES, 0);
    CHECK(c.threads == 2 && c.bound && strcmp(c.cpus, "1,3") == 0, "a sparse mask is sliced in order (%s)", c.cpus);
    c = plan(1, 2, three, 3, 0, PZ_BIND_CORES, 0);
    CHECK(c.threads == 1 && !c.bound && strstr(c.why_unbound, "cannot divide"),
          "3 CPUs, 2 ranks: 1 thread, not pinned, says why (%d %d '%s')", c.threads, c.bound, c.why_unbound);
    c = plan(0, 4, two, 2, 0, PZ_BIND_CORES, 0);
    CHECK(c.threads == 1 && !c.bound, "more ranks than CPUs: at least 1 thread (%d)", c.threads);
    c = plan(0, 2, two, 2, 3, PZ_BIND_CORES, 0);
    CHECK(c.threads == 3 && !c.bound && strstr(c.why_unbound, "do not fit"),
          "--threads 3 overrides and is not squeezed onto one CPU (%d %d '%s')", c.threads, c.bound, c.why_unbound);
    c = plan(1, 2, eight, 8, 2, PZ_BIND_CORES, 0);
    CHECK(c.threads == 2 && c.bound && strcmp(c.cpus, "4-7") == 0, "--threads 2 within a 4-CPU slice stays pinned");
    c = plan(1, 2, eight, 8, 0, PZ_BIND_NONE, 0);
    CHECK(c.threads == 4 && !c.bound && !c.why_unbound[0] && strcmp(c.cpus, "0-7") == 0,
          "--bind none: same count, no pinning (%d %s)", c.threads, c.cpus);
    c = plan(0, 1, eight, 8, 0, PZ_BIND_CORES, 0);
    CHECK(c.threads == 8 && !c.bound, "alone on the host: every CPU (%d)", c.threads);
    const int one[] = {5};
    c = plan(1, 2, one, 1, 0, PZ_BIND_CORES, 1);
    CHECK(c.threads == 1 && !c.bound && strcmp(c.cpus, "5") == 0,
          "bound by mpirun: the mask is this rank's own, not divided again (%d %s)", c.threads, c.cpus);
    const int four[] = {2, 3, 4, 5};
    c = plan(0, 2, four, 4, 0, PZ_BIND_CORES, 1);
    CHECK(c.threads == 4 && !c.bound, "bound by mpirun to 4 CPUs: 4 threads (%d)", c.threads);
}

static void test_bind_flag(void) {
    int b = -1;
    CHECK(pz_cores_parse_bind("cores", &b) == PZ_OK && b == PZ_BIND_CORES, "cores");
    CHECK(pz_cores_parse_bind("none", &b) == PZ_OK && b == PZ_BIND_NONE, "none");
    CHECK(pz_cores_parse_bind("sockets", &b) == PZ_ERR_ARG && strstr(pz_last_error(), "--bind"),
          "unknown --bind value is an error naming the flag");
}

int main(void) {
    test_local_ranks();
    test_plan();
    test_bind_flag();
    return check_summary("cores");
}
