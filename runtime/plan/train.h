/* train.h: the single-process training loop and evaluation. */
#ifndef PZ_TRAIN_H
#define PZ_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "runtime/edge/policy.h"
#include "stages/data.h"
#include "stages/optim.h"
#include "stages/stage.h"

/* ranks a job may have: the transport tags name the sender in 8 bits */
#define PZ_TRAIN_MAX_WORLD 255

/* The train flags, split by who needs them (issue 23): a module that needs
 * one part takes a pointer to that part. runtime/plan/options.c parses and
 * checks all of them once. */

/* the model, its data and its optimization: what every rank computes */
typedef struct {
    const char *preset;     /* random init from a preset, or */
    const char *init;       /* a checkpoint: file or HF model directory */
    int heads;              /* --heads: head count where the checkpoint does not tell (0 = none) */
    const char *data;       /* training shards */
    const char *val_data;   /* validation shards (optional) */
    const char *save;       /* checkpoint written at the end (optional) */
    int batch, seq, steps;
    int micro;              /* micro-batches per optimizer step (gradient accumulation) */
    int val_every, val_batches;
    long seed;
    pz_optim_config optim;
    int warmup_given;       /* whether --warmup was set (else a default fraction) */
} pz_model_opts;

/* where a rank computes (runtime/plan/cores.h, runtime/plan/device.h) */
typedef struct {
    int threads;            /* --threads: 0 = this host's share (runtime/plan/cores.h) */
    int bind;               /* --bind: PZ_BIND_CORES or PZ_BIND_NONE */
    const char *device;     /* --device: cpu, cuda, cuda:tf32, or one per stage (runtime/plan/device.h) */
} pz_host_opts;

/* the pipeline and its schedule (runtime/exec/, schedules/schedule.h) */
typedef struct {
    int stages;             /* 1 = this process trains the whole model */
    const char *split;      /* "--split 3,3": blocks per stage, or NULL = balanced */
    const char *name;       /* --schedule: "1f1b", "1f1b:warmup=K|auto", "gpipe", ... (schedules/schedule.h) */
    int virtual_stages;     /* --virtual-stages V (0 = not given): model chunks per rank, interleaved only */
} pz_sched_opts;

/* data-parallel replicas of the pipeline (runtime/dp/) */
typedef struct {
    int replicas;           /* --replicas D: data-parallel copies of the pipeline (world = stages x D) */
    const char *compress;   /* --dp-compress SPEC: the replicas' gradient codec (NULL: uncompressed) */
    int reduce;             /* --dp-reduce: pz_dp_mode (1 allgather, 2 twophase, 3 hierarchical) */
    int warmup;             /* --dp-warmup N: the first N steps uncompressed */
    int momentum;           /* --dp-compress-what momentum: 1-bit Adam (AdamW's v frozen after the warm-up, the
                             * replicas' momentum through the codec; runtime/dp/onebit.c) */
    int freeze_v;           /* AdamW's v frozen after the warm-up: momentum, or grad-frozen-v (the gradient
                             * average through the codec, then AdamW with v frozen; onebit.c) */
    int hosts;              /* --dp-hosts H: hierarchical's hosts (simulated), dividing D */
    float bucket_mb;        /* --dp-bucket-mb: MiB per bucket of the uncompressed average (runtime/dp/sync.h) */
    int variance;           /* --dp-variance on: measure the average's error against the exact mean */
    int layout;             /* --layout: pz_dp_layout (0 = rank = stage x D + replica, 1 = replica x S + stage) */
    float link_mbps;        /* --dp-link-mbps: simulated rate of the links between replicas (0 = unlimited) */
    float link_latency_ms;  /* --dp-link-latency-ms: their simulated one-way delay */
} pz_dp_opts;

/* the ranks' connections (runtime/net/) */
typedef struct {
    int progress_inline;    /* --progress inline: no progress thread (UCX driven between blocks) */
    float peer_timeout;     /* seconds a stage waits for a peer before giving up */
    const char *job_secret_file; /* --job-secret-file (runtime/net/jobsecret.h), or NULL */
    const uint8_t *job_secret;   /* the loaded secret (job_secret_len bytes; NULL = none) */
    size_t job_secret_len;
} pz_net_opts;

/* compression of what crosses the edges, and the simulated links
 * (runtime/edge/policy.h, runtime/edge/edge.h) */
typedef struct {
    const char *compress;   /* --compress policy text, or NULL */
    const char *policy_file;/* --policy-file, applied before --compress */
    const char *mbps;       /* --link-mbps: simulated link rates, or NULL */
    const char *latency_ms; /* --link-latency-ms: simulated one-way delays, or NULL */
    const char *compress_tied; /* --compress-tied: codec of the tied-embedding exchange (runtime/edge/tied.h), or NULL */
    int eval_compress;      /* validation through the fwd codecs (1) or raw (0) */
} pz_link_opts;

/* checkpoints to resume from (runtime/ckpt/resume.h) */
typedef struct {
    const char *dir;        /* --checkpoint-dir, or NULL */
    int every;              /* --checkpoint-every: steps between checkpoints; 0 = only after the last step */
    int keep;               /* --keep-checkpoints: complete checkpoints kept (default 2) */
    const char *resume;     /* --resume DIR or "auto" (the checkpoint dir, empty = fresh) */
} pz_ckpt_opts;

/* what a run reports beyond its JSON lines (runtime/observe/) */
typedef struct {
    const char *trace;      /* Chrome/Perfetto trace JSON to write, or NULL */
    const char *metrics;    /* --metrics PREFIX: PREFIX.jsonl and PREFIX.csv */
    int error_metrics;      /* senders measure ||x - x'|| / ||x|| */
    int dump_edge;          /* --dump-edge STEP: what the senders encode at that step, as .npy (0 = off) */
    const char *dump_dir;   /* --dump-dir: where (default edge-dump) */
} pz_observe_opts;

typedef struct {
    pz_model_opts model;
    pz_host_opts host;
    pz_sched_opts sched;
    pz_dp_opts dp;
    pz_net_opts net;
    pz_link_opts link;
    pz_ckpt_opts ckpt;
    pz_observe_opts observe;
} pz_train_opts;

void pz_train_opts_default(pz_train_opts *o);

/* Mean next-token loss over the first nbatches batches of d in file order
 * (all of them if nbatches <= 0 or larger than available). */
pz_status pz_eval_loss(pz_stage *s, pz_acts *a, const pz_dataset *d, int nbatches,
                       double *loss, int *batches_used);

/* The model config from --preset or --init (exactly one must be given). */
pz_status pz_model_config(const char *preset, const char *init, int heads, pz_gpt2_config *cfg);
/* A stage's part of the model: random init from seed (init == NULL) or
 * loaded from the checkpoint init. */
pz_status pz_model_create_stage(pz_stage *s, const pz_backend *be, const pz_gpt2_config *cfg,
                                const pz_stage_range *r, const char *init, uint64_t seed, int B, int T);
/* The whole model from --preset or --init (host-side load). */
pz_status pz_model_create(pz_stage *s, const pz_backend *be, const char *preset,
                          const char *init, int heads, uint64_t seed, int B, int T);
/* Every file and directory a training run writes, checked before it starts
 * (base/io/iocheck.h): writable, of the right kind, and none of them an input
 * (--data and --val-data shards, --init and the files of an --init
 * directory, --policy-file, --job-secret-file). writes_rank0: also what only
 * rank 0 or the launcher writes (--save, --trace, --metrics); the checkpoint
 * and dump directories every rank writes. The launcher calls it before it
 * starts the ranks, and the executor in every rank before it builds
 * anything (under mpirun the ranks may be on other hosts). */
pz_status pz_train_check_io(const pz_train_opts *o, int writes_rank0);
/* Saves the stage's parameters: to a directory (an existing one, or a path
 * ending in '/') as an HF model directory, model.safetensors plus config.json;
 * else ".bin" -> llm.c v3, anything else -> safetensors. */
pz_status pz_model_save(const pz_stage *s, const char *path);
/* The same for parameters on the host (the pipeline's gathered model). */
pz_status pz_params_save(const pz_gpt2_params *p, const char *path);
/* Whether --save PATH names a directory (see pz_model_save). */
int pz_save_is_dir(const char *path);

/* The run's first lines on f (rank 0): replicas, the model or the
 * pipeline, the schedule, what warmup=auto measures first. */
void pz_train_print_start(FILE *f, const pz_train_opts *o, const pz_gpt2_config *cfg, int S, int V, int D,
                          size_t samples, int threads, int warmup_auto);
/* A pipeline's compression policy on f: every edge (between chunks with V
 * > 1), the tied exchange's codec (tied: NULL = exact), validation's way. */
void pz_train_print_policy(FILE *f, const pz_link_opts *l, const pz_policy *pol, int V, const char *tied);

/* The error of a 1-based step whose loss or norm is not finite: the rank
 * whose weights are not finite (-1: none; bad: the first such value where
 * known), from the starting model or not; else the learning rate's fault. */
pz_status pz_train_diverged(int step, double loss, double norm, int rank, const char *bad, int from_start);

/* Whether the stage's parameters hold a NaN or an infinity; the first one
 * ("h.0.attn.c_attn.weight[12] = nan") goes to name. */
int pz_params_nonfinite(const pz_stage *s, char *name, size_t cap);

#endif
