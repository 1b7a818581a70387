/* data.h: token shards, samples with stable ids, and the batch loader.
 *
 * A shard is llm.c's format: 256 int32 header (magic 20240520, version 1,
 * token count), then uint16 tokens; file size must be 1024 + 2*count.
 * A dataset is one shard or several (a glob pattern or comma-separated list,
 * taken in sorted order). With sequence length T, shard j is cut into
 * floor((count_j - 1) / T) samples: sample k of a shard is the T+1 tokens
 * starting at k*T (inputs are the first T, targets the last T). Sample ids
 * number the samples of all shards in order, so an id names the same tokens
 * as long as the files and T are the same: later features (AQ-SGD buffers,
 * resume) key on them.
 *
 * Unshuffled batch k is samples k*B .. k*B+B-1, i.e. tokens [k*B*T, (k+1)*B*T]
 * of a single shard: the same positions llm.c's loader reads. */
#ifndef PZ_DATA_H
#define PZ_DATA_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

#define PZ_SHARD_MAGIC 20240520
#define PZ_SHARD_VERSION 1

typedef struct {
    int nshards;
    char **paths;
    uint16_t **tokens;     /* per shard, mmapped payload */
    size_t *ntok;          /* per shard */
    void **maps;           /* mmap base per shard */
    size_t *map_len;
    size_t *first_id;      /* id of each shard's first sample; first_id[nshards] = total */
    int T;
} pz_dataset;

/* Validates the bytes of one shard (len bytes at base, as mapped from path):
 * magic, version, token count against the length, every token <
 * vocab_size; *ntok = the token count. Errors name path and the field. */
pz_status pz_shard_check(const void *base, size_t len, const char *path, int vocab_size, size_t *ntok);

/* Opens and validates every shard (header, size, every token < vocab_size).
 * Fails with a message naming the file and what is wrong. */
pz_status pz_dataset_open(pz_dataset *d, const char *spec, int T, int vocab_size);
void pz_dataset_close(pz_dataset *d);
/* The shard files of a spec, as pz_dataset_open takes them (sorted; each
 * and the array malloc'ed), without opening them. */
pz_status pz_dataset_paths(const char *spec, char ***paths, size_t *n);
size_t pz_dataset_num_samples(const pz_dataset *d);
/* inp and tgt get T ints each; id < num_samples (asserted). */
void pz_dataset_sample(const pz_dataset *d, size_t id, int *inp, int *tgt);

typedef struct {
    const pz_dataset *d;
    int B;
    int shuffle;
    uint64_t seed;
    size_t *order;         /* permutation of sample ids for the current epoch */
    size_t pos;            /* next index into order */
    int epoch;
} pz_loader;

/* Batches of B samples. With shuffle, each epoch uses a permutation drawn
 * from (seed, epoch), so runs are reproducible; without, file order. A batch
 * never straddles epochs: the tail that does not fill a batch is skipped. */
pz_status pz_loader_init(pz_loader *l, const pz_dataset *d, int B, int shuffle, uint64_t seed);
void pz_loader_free(pz_loader *l);
/* inp, tgt: B*T ints; ids: B sample ids (may be NULL). */
void pz_loader_next(pz_loader *l, int *inp, int *tgt, size_t *ids);
void pz_loader_reset(pz_loader *l);
size_t pz_loader_batches_per_epoch(const pz_loader *l);
/* Positions the loader at batch `batch` of epoch `epoch` (for resume). */
pz_status pz_loader_seek(pz_loader *l, int epoch, size_t batch);

/* Writes a shard atomically. n must be < 2^31. */
pz_status pz_shard_write(const char *path, const uint16_t *tokens, size_t n);

/* Byte-level tokenizer (vocab 256): reads text files (a list), concatenates
 * them in the given order, and writes a train shard and, if val_path is set,
 * a validation shard made of the last val_fraction of the bytes (cut at a
 * newline boundary when one is near). */
pz_status pz_tokenize_bytes(const char *const *inputs, int ninputs, const char *train_path,
                            const char *val_path, double val_fraction);

#endif
