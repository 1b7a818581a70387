/* resume_meta.h: the two small texts of a checkpoint that say what it is,
 * parsed from memory (so they can be fuzzed): the manifest rank 0 writes
 * last, and the metadata of each rank's safetensors shard (runtime/resume.h
 * has the layout). Both come from disk, maybe from another version or a
 * hand edit, so every field is checked and a bad one is named. */
#ifndef PZ_RESUME_META_H
#define PZ_RESUME_META_H

#include <stddef.h>

#include "base/safetensors.h"
#include "base/status.h"

#define PZ_RESUME_FORMAT "pipezip-checkpoint-1"
#define PZ_RESUME_STEP_MAX 99999999
#define PZ_RESUME_MANIFEST_MAX 4096   /* bytes a manifest may have */

/* manifest.json: {"format": "pipezip-checkpoint-1", "step": N, "stages": S}
 * (strict JSON; other keys are skipped; each of these three exactly once) */
typedef struct {
    int step;     /* 0 .. PZ_RESUME_STEP_MAX */
    int stages;   /* 1 .. 4096 */
} pz_manifest;

pz_status pz_manifest_parse(const char *text, size_t len, const char *what, pz_manifest *m);

/* A shard's metadata (format, step, rank, stages, blocks, optimizer step,
 * loader position), each value an integer in its range. */
typedef struct {
    long step, rank, stages, block_first, block_end, optim_t, loader_epoch, loader_batch;
} pz_shard_meta;

pz_status pz_shard_meta_get(const pz_st_file *f, const char *path, pz_shard_meta *m);

#endif
