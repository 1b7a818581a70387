/* gpt2_params.h: named views into one flat float array holding the parameters
 * (or gradients, or optimizer moments) of a stage: blocks [l0, l1), plus the
 * embeddings if the stage is first and the final LayerNorm (and a copy of wte,
 * tied) if it is last. The single-process model is the stage [0, L) with both.
 *
 * Layout of the flat array: wte | wpe (first only) | blocks l0..l1-1 | lnfw lnfb (last only).
 * wte is present when has_embed or has_head. */
#ifndef PZ_GPT2_PARAMS_H
#define PZ_GPT2_PARAMS_H

#include <stdint.h>
#include "stages/gpt2_config.h"

typedef struct {
    float *ln1w, *ln1b;         /* (C) (C) */
    float *qkvw, *qkvb;         /* (3C, C) (3C) */
    float *attprojw, *attprojb; /* (C, C) (C) */
    float *ln2w, *ln2b;         /* (C) (C) */
    float *fcw, *fcb;           /* (4C, C) (4C) */
    float *fcprojw, *fcprojb;   /* (C, 4C) (C) */
} pz_block_params;

typedef struct {
    int l0, l1;            /* blocks [l0, l1) */
    int has_embed;         /* holds wpe and uses wte as the token table */
    int has_head;          /* holds lnf and uses wte as the classifier */
} pz_stage_range;

typedef struct {
    pz_gpt2_config cfg;
    pz_stage_range range;
    size_t numel;          /* elements in mem */
    float *mem;            /* the flat array (not owned by the view) */
    float *wte;            /* (Vp, C) or NULL */
    float *wpe;            /* (maxT, C) or NULL */
    pz_block_params *blocks; /* blocks[i] is model block l0 + i; owned */
    float *lnfw, *lnfb;    /* (C) or NULL */
} pz_gpt2_params;

/* The tensor `which` (enum pz_block_tensor order) of a block. */
float *pz_block_params_tensor(const pz_block_params *b, int which);

/* Elements needed for a stage range. */
size_t pz_stage_numel(const pz_gpt2_config *c, const pz_stage_range *r);
/* Fill views over mem (which must hold pz_stage_numel floats). */
void pz_gpt2_params_bind(pz_gpt2_params *p, const pz_gpt2_config *c,
                         const pz_stage_range *r, float *mem);
void pz_gpt2_params_unbind(pz_gpt2_params *p);
pz_stage_range pz_whole_model(const pz_gpt2_config *c);

/* GPT-2 initialisation: weights N(0, 0.02), residual projections (attprojw,
 * fcprojw) N(0, 0.02/sqrt(2L)), biases 0, LayerNorm weights 1, padded wte rows 0.
 * Deterministic from the seed, and independent of the stage split: every
 * tensor draws from its own stream seeded by (seed, tensor name). */
void pz_gpt2_params_init(pz_gpt2_params *p, uint64_t seed);

/* One named tensor of a stage, with the HF GPT-2 name ("h.3.attn.c_attn.weight").
 * Used by checkpoint I/O, weight decay and tests. */
typedef struct {
    char name[64];
    float *data;           /* view into the bound array */
    size_t offset;         /* elements from mem */
    size_t numel;
    int ndim;
    int shape[2];          /* our layout: (OC, C) for Linear weights, (Vp, C) for wte */
    int conv1d;            /* HF stores it transposed, (C, OC) */
    int decay;             /* AdamW weight decay applies (2-D weights only) */
} pz_tensor_info;

/* Number of tensors of the stage; fills `out` if non-NULL (size from a first call). */
int pz_gpt2_params_tensors(const pz_gpt2_params *p, pz_tensor_info *out);

#endif
