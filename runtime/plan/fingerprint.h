/* fingerprint.h: the ranks of a job agree on what they compute.
 *
 * Every rank describes, as "key\tvalue" lines, everything that changes the
 * math: the model, every training flag that matters (shapes, optimizer,
 * schedule, seeds, the resolved per-edge policy and links, checkpointing),
 * and the identity of its files: each training and validation shard and
 * each file of --init (size plus a hash of its header and 16 sampled
 * blocks; paths are not compared, since hosts mount files in other places).
 * After the transport has authenticated them, every rank sends its lines to
 * rank 0, which compares them with its own and answers each rank; the first
 * difference is named on every rank:
 *   rank 1 does not agree with rank 0: --lr is 0.01 on rank 1, 0.001 on rank 0
 * A key only some ranks have (a middle stage reads no data) is compared
 * between the ranks that have it. Per-rank settings (--threads, --bind,
 * --trace, --metrics, --peer-timeout) are not part of it.
 *
 * With --replicas, ranks are named with their stage and replica (the
 * transport's names, runtime/net/transport.h), and each rank also sends its
 * share of every global batch (a line "@share", beside the fingerprint: not
 * part of the job's id): rank 0 refuses two replicas of a stage whose shares
 * overlap, naming both, as the others' flags. */
#ifndef PZ_FINGERPRINT_H
#define PZ_FINGERPRINT_H

#include <stddef.h>

#include "base/status.h"
#include "stages/data.h"
#include "runtime/edge/policy.h"
#include "runtime/plan/train.h"
#include "runtime/net/transport.h"
#include "stages/gpt2_config.h"

#define PZ_FINGERPRINT_MAX 65536   /* bytes of lines a rank may send */

/* This rank's lines (xmalloc'ed, NUL-terminated) from its options, model,
 * policy and the datasets it opened (NULL or unopened: none). */
char *pz_fingerprint_build(const pz_train_opts *o, const pz_gpt2_config *cfg, const pz_policy *pol,
                           const pz_dataset *train, const pz_dataset *val);

/* 1 and a message naming the first difference when `theirs` (rank r) and
 * `mine` (rank 0) disagree on a key both have; 0 when they agree. names:
 * how to name the ranks (NULL: "rank R"). */
int pz_fingerprint_differ(const char *mine, const char *theirs, const pz_rank_layout *names, int r, char *msg,
                          size_t cap);

/* A rank's share of every global batch: its replica trains on micro-batches
 * [first, first + count) of it, as stage `stage`. */
typedef struct {
    int stage, first, count;
} pz_fp_share;

/* 1 and a message naming both when two of the n ranks' shares (share[r]:
 * rank r's) hold the same stage and overlap; 0 otherwise. */
int pz_fingerprint_overlap(const pz_fp_share *share, int n, const pz_rank_layout *names, char *msg, size_t cap);

/* The exchange: every rank to rank 0 (its fingerprint and its share), rank
 * 0's verdict back. An error (PZ_ERR_ARG for a difference or an overlap) on
 * every rank when they disagree. */
pz_status pz_fingerprint_agree(pz_transport *t, int rank, int world, const char *mine, const pz_fp_share *share);

#endif
