#include <stdio.h>
/* cores.h: how many compute threads a rank runs, and on which cores.
 *
 * Every rank on a host used to take "all cores", so S stages on C cores ran
 * S*C threads: 2 stages on 2 cores took 20.5 s instead of 10.7 s for the same
 * 8 steps (issue 10). The default is now the cores this process may use
 * (sched_getaffinity) divided by the ranks on this host, at least 1, and each
 * local rank is pinned to its own slice of those cores when they divide
 * evenly. --threads N still overrides the count. */
#ifndef PZ_CORES_H
#define PZ_CORES_H

#include "base/status.h"

enum { PZ_BIND_NONE = 0, PZ_BIND_CORES = 1 };

typedef struct {
    int local_rank, local_ranks;  /* this rank's place among the ranks on this host */
    const char *local_source;     /* where local_ranks came from, for the start-up line */
    int cores;                    /* CPUs this process could use before any binding */
    int threads;                  /* compute threads to run */
    int bound;                    /* 1: pinned to cpus[] below */
    char cpus[128];               /* the CPU list it runs on, e.g. "0-3" or "0,2,4" */
    char why_unbound[96];         /* when not bound and binding was asked for: why */
} pz_cores;

/* The ranks on this host and this rank's index among them, from the
 * launcher's variables: LOCAL_WORLD_SIZE/LOCAL_RANK (pipezip's own launcher,
 * torchrun), OMPI_COMM_WORLD_LOCAL_SIZE/LOCAL_RANK (mpirun),
 * SLURM_NTASKS_PER_NODE/SLURM_LOCALID (srun). Without them, a pipeline whose
 * MASTER_ADDR is a loopback address runs all its ranks here; otherwise this
 * rank is taken as alone on its host. A malformed or inconsistent variable is
 * an error naming it. */
pz_status pz_cores_local_ranks(int rank, int world, const char *master_addr, pz_cores *c);

/* The plan for local rank c->local_rank of c->local_ranks, given the CPUs it
 * may use (cpus[0..ncpus), ascending), --threads (0 = default) and --bind.
 * `prebound` says another launcher already narrowed this process's mask to
 * its own slice (mpirun's default binding): then the mask is used as it is.
 * Pure: sets c->threads, c->bound, c->cpus; binds nothing. Returns in *first
 * the index in cpus[] of the slice to pin to when c->bound. */
void pz_cores_plan(pz_cores *c, const int *cpus, int ncpus, int threads_flag, int bind, int prebound, int *first);

/* Reads the environment and this process's affinity, plans, pins the calling
 * thread (and so the threads it starts later) when the plan binds, and sets
 * the CPU backend's thread count. Call before any OpenMP region runs. */
pz_status pz_cores_setup(int rank, int world, const char *master_addr, int threads_flag, int bind, pz_cores *c);

/* One start-up line, e.g. "rank 1: 1 thread on CPU 1 (2 CPUs for 2 local ranks, local launcher)". */
void pz_cores_print(FILE *f, int rank, const pz_cores *c);

/* --bind's value: "cores" or "none". */
pz_status pz_cores_parse_bind(const char *v, int *bind);

#endif
