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
 * --trace, --metrics, --peer-timeout) are not part of it. */
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
 * `mine` (rank 0) disagree on a key both have; 0 when they agree. */
int pz_fingerprint_differ(const char *mine, const char *theirs, int r, char *msg, size_t cap);

/* The exchange: every rank to rank 0, rank 0's verdict back. An error
 * (PZ_ERR_ARG for a difference) on every rank when they disagree. */
pz_status pz_fingerprint_agree(pz_transport *t, int rank, int world, const char *mine);

#endif
