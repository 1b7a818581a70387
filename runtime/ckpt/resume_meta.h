/* resume_meta.h: the two small texts of a checkpoint that say what it is,
 * parsed from memory (so they can be fuzzed): the manifest rank 0 writes
 * last, and the metadata of each rank's safetensors shard (runtime/ckpt/resume.h
 * has the layout). Both come from disk, maybe from another version or a
 * hand edit, so every field is checked and a bad one is named. */
#ifndef PZ_RESUME_META_H
#define PZ_RESUME_META_H

#include <stddef.h>
#include <stdint.h>

#include "base/formats/safetensors.h"
#include "base/status.h"

/* Format 2 adds the job (runtime/ckpt/job.h) to the manifest and the shards,
 * and a CRC-32C of each tensor to the shards. Format 1 (no job, no
 * checksums) is recognised, to be refused by name: which job wrote it
 * cannot be told. */
#define PZ_RESUME_FORMAT "pipezip-checkpoint-2"
#define PZ_RESUME_FORMAT_OLD "pipezip-checkpoint-1"
#define PZ_RESUME_STEP_MAX 99999999
#define PZ_RESUME_MANIFEST_MAX 32768   /* bytes a manifest may have */

/* manifest.json: {"format": "pipezip-checkpoint-2", "step": N, "stages": S,
 * "job": "16 hex digits", "job_flags": {"model": "...", "--lr": "0.001", ...}}
 * (strict JSON; other keys are skipped; each of these exactly once; "job"
 * must be the hash of the job's description that "job_flags" spells out,
 * runtime/ckpt/job.h). Format 1 has the first three only. */
typedef struct {
    int step;       /* 0 .. PZ_RESUME_STEP_MAX */
    int stages;     /* 1 .. 4096 */
    int version;    /* 2, or 1: PZ_RESUME_FORMAT_OLD */
    uint64_t job;   /* version 2: the job's id */
    char *desc;     /* version 2: its description, "flag\tvalue\n" lines (malloc'ed) */
} pz_manifest;

pz_status pz_manifest_parse(const char *text, size_t len, const char *what, pz_manifest *m);
void pz_manifest_free(pz_manifest *m);   /* safe on a zeroed one */

/* A shard's metadata (format, step, rank, stages, blocks, optimizer step,
 * loader position), each value an integer in its range, and the job ("job":
 * 16 hex digits). An older format is refused by name. */
typedef struct {
    long step, rank, stages, block_first, block_end, optim_t, loader_epoch, loader_batch;
    uint64_t job;
} pz_shard_meta;

pz_status pz_shard_meta_get(const pz_st_file *f, const char *path, pz_shard_meta *m);

/* A tensor's CRC-32C as its shard records it: metadata "crc32c:NAME" = 8
 * lower-case hex digits of the CRC of its bytes. */
#define PZ_SHARD_CRC_PREFIX "crc32c:"
pz_status pz_shard_tensor_crc(const pz_st_file *f, const char *path, const char *tensor, uint32_t *crc);

#endif
