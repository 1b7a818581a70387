/* memplan.h: the memory a training rank will allocate, estimated before it
 * allocates anything, against what the process may use.
 *
 * A rank holds its stage's parameters and gradients, AdamW's two moments,
 * the backward scratch, one activation slot per micro-batch the schedule
 * keeps in flight (pz_schedule_in_flight_bound), the host buffers of those
 * slots (received activations and gradients, wire messages) and a ring of
 * send buffers, and the codec state of its edges. Ranks that share a host
 * (runtime/plan/cores.h: the local launcher's, or mpirun's and srun's local
 * rank variables, placed by consecutive ranks) share its memory, so their
 * needs are added. With replicas the executor adds each stage's
 * data-parallel buckets and error feedback (pz_mem_job.dp_bytes). The limit is MemAvailable (/proc/meminfo), lowered to the
 * cgroup's memory.max less its usage when that is smaller. On a device
 * backend only the host buffers and codec state count (the device's memory
 * is the CUDA allocator's to refuse). */
#ifndef PZ_MEMPLAN_H
#define PZ_MEMPLAN_H

#include <stddef.h>
#include <stdio.h>

#include "base/status.h"
#include "runtime/edge/policy.h"
#include "schedules/schedule.h"
#include "stages/gpt2_params.h"

typedef struct {
    double model;     /* parameters + gradients */
    double optim;     /* AdamW m and v */
    double scratch;   /* backward scratch */
    double acts;      /* activation slots (slots of them) */
    double buffers;   /* host buffers of the slots, send ring */
    double codec;     /* codec state (aq buffers, ef residuals): an upper bound */
    double dp;        /* --replicas: the gradient average's buckets in flight, its error feedback */
    int slots;
    double total;
} pz_mem_need;

/* One rank's need: stage r of a (B, T) micro-batch, `slots` in flight,
 * `first`/`last` stage, codec_bytes of codec state. On a device backend
 * (host = 0) the model, optimizer, scratch and slots live in device memory
 * and only the buffers and codec state count against the host. */
pz_mem_need pz_mem_need_of(const pz_gpt2_config *cfg, const pz_stage_range *r, int B, int T, int defer_weights,
                           int slots, int micro, int first, int last, double codec_bytes);

/* Bytes this process may still use (MemAvailable, cgroup limit); *source
 * names where the figure came from. PIPEZIP_MEM_AVAILABLE=BYTES overrides
 * both (tests). 0 if nothing could be read. */
double pz_mem_available(const char **source);

/* The most bytes of codec state rank `rank` may hold for the policy's
 * codecs on its edges, for (B, T, C) tensors. */
double pz_mem_codec_bound(const pz_policy *pol, int rank, int world, int B, int T, int C);

/* What a training run asks of each rank, for the check below. */
typedef struct pz_mem_job {
    const pz_gpt2_config *cfg;
    const pz_stage_range *ranges;   /* (world; interleaved with V > 1: world x V, by global chunk) */
    const pz_sched_spec *spec;
    const pz_policy *pol;
    int world, B, T, micro;
    int host_memory;                /* the backend's buffers are host memory */
    /* --replicas: the bytes of stage r's data-parallel average (in host
     * memory), given by the executor (runtime/dp/sync.h: pz_dp_plan_bytes
     * per chunk); NULL: none */
    double (*dp_bytes)(const struct pz_mem_job *j, int r);
    const void *dp_ctx;
} pz_mem_job;

/* Prints this rank's estimate (one line, prefix first) and refuses
 * (PZ_ERR_ARG, with the figures and the flags that lower them) when the
 * ranks local_first .. local_first+local_count-1 on this host need more
 * than is available. PIPEZIP_MEM_CHECK=0 skips the refusal. */
pz_status pz_mem_check(const pz_mem_job *j, int rank, int local_first, int local_count, const char *prefix);

/* `pipezip eval`'s need: the whole model at (B, T) on the host, one
 * micro-batch (pz_mem_need_of's model, scratch and one activation slot; no
 * optimizer, no transport buffers), refused like pz_mem_check (--batch and
 * --seq named, PIPEZIP_MEM_CHECK=0 skips) before anything is allocated. */
pz_status pz_mem_check_eval(const pz_gpt2_config *cfg, int B, int T);

/* The largest extra warm-up K <= kmax (1f1b:warmup=K) whose micro-batches
 * in flight still fit this host's ranks; kmax when nothing limits it. */
int pz_mem_max_warmup(const pz_mem_job *j, int local_first, int local_count, int kmax);

/* Stage r's need in that run (pz_mem_need_of per chunk, the data-parallel
 * term added). */
pz_mem_need pz_mem_rank_need(const pz_mem_job *j, int r);

/* Prints "about X GiB: ..." for one rank. */
void pz_mem_need_print(FILE *f, const pz_mem_need *n);

#endif
