/* hf_dir.h: a model given as a file or as a Hugging Face model directory.
 *
 * A directory holds model.safetensors, or model.safetensors.index.json with
 * the shards its "weight_map" names, or an llm.c model.bin; config.json
 * beside the weights (in the directory, or beside a weights file) gives the
 * architecture, which is checked against the tensor shapes. Everything read
 * here comes from outside and is validated: JSON strictly (syntax, types,
 * ranges, duplicate keys, 1 MiB at most), shard names must be plain file
 * names in the directory, every tensor must sit in the shard the index names
 * and in no other. */
#ifndef PZ_HF_DIR_H
#define PZ_HF_DIR_H

#include "base/formats/safetensors.h"
#include "stages/gpt2_config.h"

/* Parses a model.safetensors.index.json: the distinct shard names in order
 * of first appearance (each a plain file name) and, for each tensor, its
 * shard index. Exposed for the fuzzer. *names and *map are malloc'ed arrays
 * of malloc'ed strings / pairs; free with pz_hf_index_free. */
typedef struct {
    char **shard_names;
    int nshards;
    char **tensor_names;
    int *tensor_shard;
    int ntensors;
} pz_hf_index;
pz_status pz_hf_index_parse(const char *text, size_t len, const char *what, pz_hf_index *ix);
void pz_hf_index_free(pz_hf_index *ix);

/* The files of a model. */
typedef struct {
    char *weights;     /* the one weights file (safetensors or llm.c .bin), or NULL when sharded */
    char *index;       /* model.safetensors.index.json when sharded, else NULL */
    char **shards;     /* (nshards) shard paths, in the order the index first names them */
    int nshards;
    char *config;      /* config.json beside the weights, or NULL if there is none */
    pz_hf_index ix;    /* the parsed index when sharded (tensor -> shard) */
} pz_model_files;

/* Finds the files of `path` (a file or a directory; see above). A directory
 * without any known weights file is an error listing what was looked for.
 * For an index it reads and validates the index (the shard list). */
pz_status pz_model_files_find(const char *path, pz_model_files *mf);
void pz_model_files_free(pz_model_files *mf);   /* safe on a zeroed struct */

/* The safetensors tensors of a model, one file or all shards, as one
 * read-only pz_st_file `view` (tensors sorted by name; __metadata__ of the
 * single file, or none for shards). */
typedef struct {
    pz_st_file *files;
    int nfiles;
    pz_st_file view;
    pz_st_tensor *merged_;   /* private: the view's tensors when sharded */
} pz_st_set;
pz_status pz_st_set_open(pz_st_set *s, const pz_model_files *mf);
void pz_st_set_close(pz_st_set *s);             /* safe on a zeroed struct */

/* The GPT-2 keys of an HF config.json; -1 / 0 where absent. */
typedef struct {
    int n_layer, n_head, n_embd, n_positions, n_ctx, vocab_size;
    int n_inner;                  /* -1 absent, 0 null (= 4 n_embd), else the value */
    double layer_norm_epsilon;    /* < 0 when absent */
    char activation_function[32]; /* "" when absent */
    int scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn; /* -1 absent, else 0/1 */
} pz_hf_config;

/* Parses config.json text (len bytes; `what` names it in messages). */
pz_status pz_hf_config_parse(const char *text, size_t len, const char *what, pz_hf_config *hc);
pz_status pz_hf_config_read(const char *path, pz_hf_config *hc);
/* Checks hc against a config derived from the tensors (cfg->num_heads may be
 * 0 = unknown) and fills in num_heads; every disagreement, and any setting
 * the engine cannot honour (activation, epsilon, n_inner, attention scaling
 * variants), is an error naming the key, its value and what the tensors say. */
pz_status pz_hf_config_check(const pz_hf_config *hc, const char *what, pz_gpt2_config *cfg);
/* Writes config.json for cfg (HF GPT-2 keys), atomically. */
pz_status pz_hf_config_write(const char *path, const pz_gpt2_config *cfg);


#endif
