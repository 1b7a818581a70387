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
 * Tensors are stored by their HF names ("params/h.3.attn.c_attn.weight",
 * "adam_m/...", "adam_v/..."), so a run with another stage count or split
 * resumes too: each rank takes its blocks' tensors from whichever shards hold
 * them (re-partitioned by block; wte is in the first and the last shard,
 * identical). The same layout reads only its own shard.
 *
 * Codec state (ef/ef21 residuals, aq buffers, spilled ones too) goes to a
 * file of its own per rank (below); it is restored when the layout is the
 * same, and dropped with a warning when it is not (aq then starts its first
 * epoch again). The learning-rate schedule, the loader's order and the codecs' random numbers
 * are functions of (seed, step, micro-batch), so nothing else is needed for
 * the resumed run to repeat the uninterrupted one exactly. */
#ifndef PZ_RESUME_H
#define PZ_RESUME_H

#include "compress/core/codec.h"
#include "runtime/ckpt/job.h"
#include "stages/data.h"
#include "stages/optim.h"
#include "runtime/ckpt/resume_meta.h"
#include "stages/stage.h"


/* Writes this rank's shard of `step` (steps done) under dir, with the job's
 * id and each tensor's CRC-32C; first checks that the directory's lock is
 * still this run's (job.h). */
pz_status pz_resume_write_shard(const char *dir, int step, int rank, int world, const pz_stage *s,
                                const pz_optim *o, const pz_loader *l, const pz_ckpt_job *job);
/* Rank 0, once every shard of `step` is durable: the manifest (naming the
 * job), then pruning down to `keep` complete checkpoints of this job. Other
 * jobs' checkpoints are left alone, and only files pipezip writes are
 * removed (pz_resume_remove_step). */
pz_status pz_resume_commit(const char *dir, int step, int world, int keep, const pz_ckpt_job *job);

/* A checkpoint of step that failed to be written (why: this rank's error,
 * or PZ_OK when another rank's failed), once every rank knows: each rank
 * removes its files of it (rank -1: rank 0 alone, every file pipezip wrote
 * there, after the manifest failed), and the step directory goes when
 * nothing else is in it; rank 0 names the last good checkpoint. The run
 * goes on (a full disk must not cost the --save at the end): PZ_OK; at the
 * last step without --save, see pz_resume_final_lost. */
pz_status pz_resume_abandon(const char *dir, int step, int rank, const pz_ckpt_job *job, pz_status why);
/* st (an error) with "; the last good checkpoint is DIR/step-N" added. */
pz_status pz_resume_note_last_good(pz_status st, const char *dir, const pz_ckpt_job *job);
/* The checkpoint of the run's last step was abandoned and there is no
 * --save: the trained model would be kept nowhere, so the run fails (exit 0
 * would claim it was). An error naming the last good checkpoint. */
pz_status pz_resume_final_lost(const char *dir, int step, const pz_ckpt_job *job);

/* The complete checkpoints in dir, newest first: step, format version, job
 * and its description (version 2). A manifest that cannot be read is warned
 * about and skipped; dir missing is an error unless allow_missing. */
typedef struct {
    int step, version;
    uint64_t job;
    char *desc;
} pz_ckpt_entry;
pz_status pz_resume_scan(const char *dir, int allow_missing, pz_ckpt_entry **out, int *n);
void pz_resume_scan_free(pz_ckpt_entry *es, int n);

/* Whether a file name in a step directory is one pipezip writes. */
int pz_resume_is_own_file(const char *name);
/* Removes pipezip's files of step's directory, and the directory when
 * nothing else is in it. */
void pz_resume_remove_step(const char *dir, int step);

/* --resume, on every rank (the collective of the executors): rank 0 picks
 * the checkpoints to try, newest first (--resume auto: this job's in
 * --checkpoint-dir; --resume DIR: the newest one's job, which may differ
 * from this run's only in layout, steps or learning rate, said on stderr),
 * and every rank of world loads each with load(ctx, dir, step) until one loads on
 * every rank; a damaged one is named and the next older tried. *start =
 * the steps done (-1: none, --resume auto starts fresh); *dir where. */
typedef pz_status (*pz_resume_load_fn)(void *ctx, const char *dir, int step);
pz_status pz_resume_start(pz_transport *tp, const pz_ckpt_opts *c, int rank, int world, const pz_ckpt_job *job,
                          pz_resume_load_fn load, void *ctx, int *start, const char **dir);

/* Loads this rank's part of the checkpoint of `step` into the stage, the
 * optimizer and the loader: by tensor name from the checkpoint's shards, of
 * any stage count or split; a missing tensor or another size (another
 * model) is an error naming it. */
pz_status pz_resume_read_shard(const char *dir, int step, int rank, int world, pz_stage *s, pz_optim *o,
                               pz_loader *l, int *same_layout);

/* Codec state (ef, ef21, aq; compress/core/codec.h pz_codec_state_save): one
 * file per rank, step-N/rank-R.codecs, of named blobs (names say edge,
 * direction and role), written atomically before the ranks meet for the
 * manifest. Reading loads each named blob into the codec of that name; a
 * stateful codec without one is an error; blobs of codecs this run lacks
 * are skipped. */
/* "DIR/step-N/rank-R<ext>" (malloc'ed): a file of this rank's beside its shard */
char *pz_resume_rank_path(const char *dir, int step, int rank, const char *ext);
/* A replica's own state of chunk g beside replica 0's shards (--dp-compress's
 * error feedback, binsgdm's m and b): DIR/step-N/rank-G.<kind>R, written
 * atomically, the step's directory made first (replica 0's shards may not
 * have made it yet). */
pz_status pz_resume_write_side(const char *dir, int step, int g, const char *kind, int replica, const uint8_t *blob,
                               size_t len);
/* Reads it back (*blob malloc'ed); a missing one is refused, saying it
 * should hold `holds`. *path (malloc'ed, for the caller's messages) names it. */
pz_status pz_resume_read_side(const char *dir, int step, int g, const char *kind, int replica, const char *holds,
                              uint8_t **blob, size_t *len, char **path);
pz_status pz_resume_write_codecs(const char *dir, int step, int rank, const char *const *names, pz_codec *const *cs,
                                 int n);
pz_status pz_resume_read_codecs(const char *dir, int step, int rank, const char *const *names, pz_codec *const *cs,
                                int n);

#endif
