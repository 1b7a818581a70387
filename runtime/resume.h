/* resume.h: training checkpoints a run can resume from, bit for bit.
 *
 * Layout of --checkpoint-dir DIR:
 *   DIR/step-00000100/rank-0.safetensors ... rank-(S-1).safetensors
 *   DIR/step-00000100/manifest.json
 * Each rank writes its own shard: its parameters ("params"), the AdamW
 * moments ("adam_m", "adam_v"), all F32 of the stage's numel, and metadata
 * (format, step, rank, stages, the stage's block range and numel, the
 * optimizer's step count, the loader's epoch and batch). A shard is written
 * to a temporary file, fsynced and renamed. Only when every rank's shard is
 * durable (the ranks meet in a collective) does rank 0 write the manifest the
 * same way; a directory without a manifest is not a checkpoint (a run killed
 * while writing leaves the previous one as the newest). Then rank 0 removes
 * the oldest complete checkpoints beyond --keep-checkpoints, and any
 * incomplete one older than the newest.
 *
 * Codec state (ef/ef21 residuals, aq buffers) is not saved yet: a policy
 * with such a wrapper cannot be checkpointed (pz_train refuses it). The
 * learning-rate schedule, the loader's order and the codecs' random numbers
 * are functions of (seed, step, micro-batch), so nothing else is needed for
 * the resumed run to repeat the uninterrupted one exactly. */
#ifndef PZ_RESUME_H
#define PZ_RESUME_H

#include "runtime/data.h"
#include "runtime/optim.h"
#include "stages/stage.h"

#define PZ_RESUME_FORMAT "pipezip-checkpoint-1"

/* Writes this rank's shard of `step` (steps done) under dir. */
pz_status pz_resume_write_shard(const char *dir, int step, int rank, int world, const pz_stage *s,
                                const pz_optim *o, const pz_loader *l);
/* Rank 0, once every shard of `step` is durable: the manifest, then pruning
 * down to `keep` complete checkpoints. */
pz_status pz_resume_commit(const char *dir, int step, int world, int keep);
/* The newest complete checkpoint in dir: *step = its step, or -1 when dir
 * holds none (dir missing is an error unless allow_missing). */
pz_status pz_resume_find(const char *dir, int allow_missing, int *step);
/* Loads this rank's shard of `step` into the stage, the optimizer and the
 * loader, after checking that it belongs to this layout (stages, block
 * range, sizes); any mismatch is an error naming both sides. */
pz_status pz_resume_read_shard(const char *dir, int step, int rank, int world, pz_stage *s, pz_optim *o,
                               pz_loader *l);

#endif
