/* job.h: which job a checkpoint belongs to, and the lock that keeps one job
 * at a time writing a checkpoint directory.
 *
 * A job is what makes the numbers: the model, the math-changing flags and
 * the identity of the training data, i.e. rank 0's fingerprint
 * (runtime/plan/fingerprint.h) less what does not change training (validation,
 * checkpoint cadence, --resume, the simulated link rate and latency). Its description is one "flag\tvalue" line
 * per flag (the fingerprint's per-shard and per-edge lines joined under their
 * flag, a long value replaced by its hash, so it fits a manifest), and its id
 * is a 64-bit hash of that text, written as 16 hex digits in every manifest
 * and shard. Two checkpoints of one job have the same id; when the ids
 * differ, comparing the descriptions names the flag.
 *
 * --resume DIR may continue another job only where that is what resuming is
 * for: another layout (--stages, --split, --schedule, --virtual-stages,
 * --device and the per-edge --compress and --compress-tied),
 * more or fewer --steps (and --warmup), or the learning rate (--lr,
 * --min-lr-frac). Any other difference (seed, data, batch, model, optimizer)
 * is another job and is refused.
 *
 * The lock: rank 0 holds flock(LOCK_EX) on DIR/pipezip.lock for the run's
 * life and writes there the job id, a random token of this run, its pid and
 * host. The other ranks learn the token from rank 0 at start (the collective
 * of pz_ckpt_job_start) and, before each shard they write, read the lock
 * file: a token that is not theirs means another run holds the directory
 * (rank 0 died and another job took it), and they refuse. */
#ifndef PZ_CKPT_JOB_H
#define PZ_CKPT_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "runtime/plan/train.h"
#include "runtime/net/transport.h"

#define PZ_JOB_LOCK_NAME "pipezip.lock"
#define PZ_JOB_DESC_MAX 12288   /* bytes of a job's description */
#define PZ_JOB_VALUE_MAX 160    /* a longer value is replaced by its hash */

typedef struct {
    uint64_t id;
    char hex[17];   /* id as 16 hex digits */
    char *desc;     /* rank 0: "flag\tvalue\n" lines; other ranks NULL */
    uint64_t token; /* this run's, as the lock file names it */
    int lock_fd;    /* rank 0 with --checkpoint-dir: the held lock, else -1 */
    int newest_own; /* rank 0: newest complete checkpoint of this job in --checkpoint-dir, or -1 */
} pz_ckpt_job;

/* The job's description from a fingerprint (malloc'ed, NUL-terminated). */
char *pz_job_desc(const char *fingerprint);
uint64_t pz_job_id(const char *desc);
void pz_job_hex(uint64_t id, char hex[17]);
/* 1 if hex is 16 lower-case hex digits; the value in *id. */
int pz_job_parse_hex(const char *hex, uint64_t *id);

/* Compares two descriptions (this run's, a checkpoint's): 0 when equal;
 * 1 when every difference is one --resume DIR may make (layout, steps,
 * learning rate); 2 otherwise. msg gets the differences, the disallowed
 * first: "--seed is 1 here, 99 there; --lr ...". */
int pz_job_compare(const char *mine, const char *theirs, char *msg, size_t cap);

/* Every rank, before step 1 (after the fingerprint agreement): rank 0
 * derives the job from its fingerprint, takes the lock of --checkpoint-dir
 * (creating the directory), and refuses when that directory holds another
 * job's checkpoints and this run would not resume its own from there; then
 * every rank gets the id, the token and the verdict. rank is of world, all
 * the job's ranks (stages x replicas). tp NULL: one process. */
pz_status pz_ckpt_job_start(pz_transport *tp, const pz_ckpt_opts *c, int rank, int world, const char *fingerprint,
                            pz_ckpt_job *job);
/* A refusal rank 0 decided (mine: its error; others PZ_OK) and every rank
 * learnt of, sent to every rank so that each names the reason: returns the
 * error each rank reports. tp NULL: mine. */
pz_status pz_ckpt_share_refusal(pz_transport *tp, int rank, int world, pz_status mine);
/* Whether pz_ckpt_job_start refused this process's job (its verdict, not a
 * transport failure): the launcher then does not restart it. */
int pz_ckpt_refused(void);
/* Releases the lock (rank 0). Safe on a zeroed struct. */
void pz_ckpt_job_free(pz_ckpt_job *job);

/* The lock of dir, taken by rank 0 (creates the file): an error naming dir
 * and the holder when another process has it. */
pz_status pz_ckpt_lock(const char *dir, pz_ckpt_job *job);
/* Whether the lock file of dir names this run's token (any rank, before
 * writing into dir). */
pz_status pz_ckpt_lock_check(const char *dir, const pz_ckpt_job *job);

#endif
