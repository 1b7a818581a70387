/* gpt2_config.h: GPT-2 hyperparameters, presets and the per-block parameter layout.
 *
 * Parameters are stored block by block (all tensors of block 0, then block 1, ...)
 * so that a pipeline stage owning blocks [l0, l1) owns one contiguous range and can
 * save or load just that part. Order of the whole model:
 *   wte (Vp, C) | wpe (maxT, C) | block 0 | ... | block L-1 | lnfw (C) | lnfb (C)
 * Order inside a block (pz_block_tensor):
 *   ln1w ln1b qkvw(3C,C) qkvb attprojw(C,C) attprojb ln2w ln2b fcw(4C,C) fcb fcprojw(C,4C) fcprojb
 * Weights are (OC, C) like nn.Linear (HF Conv1D stores the transpose). */
#ifndef PZ_GPT2_CONFIG_H
#define PZ_GPT2_CONFIG_H

#include <stddef.h>
#include "base/status.h"

typedef struct {
    int max_seq_len;       /* maxT: rows of the position table */
    int vocab_size;        /* V: real tokens */
    int padded_vocab_size; /* Vp >= V: rows of wte; logits V..Vp-1 are never predicted */
    int num_layers;        /* L */
    int num_heads;         /* NH */
    int channels;          /* C */
} pz_gpt2_config;

/* "gpt2" (124M), "demo" (~10M, bytes), "tiny" (~250k, bytes). */
pz_status pz_gpt2_preset(const char *name, pz_gpt2_config *out);
const char *pz_gpt2_preset_names(void); /* for --help */
/* Checks every field and their relations (heads divide channels, Vp >= V, ...). */
pz_status pz_gpt2_config_validate(const pz_gpt2_config *c);
/* V rounded up to a multiple of 128 (GPT-2: 50257 -> 50304). */
int pz_pad_vocab(int V);

enum pz_block_tensor {
    PZ_LN1W, PZ_LN1B, PZ_QKVW, PZ_QKVB, PZ_ATTPROJW, PZ_ATTPROJB,
    PZ_LN2W, PZ_LN2B, PZ_FCW, PZ_FCB, PZ_FCPROJW, PZ_FCPROJB,
    PZ_BLOCK_NTENSORS
};

/* Elements of one block tensor and of a whole block. */
size_t pz_block_tensor_numel(const pz_gpt2_config *c, int which);
size_t pz_block_numel(const pz_gpt2_config *c);
/* Elements of the whole model (with padded wte). */
size_t pz_gpt2_numel(const pz_gpt2_config *c);

#endif
