/* generate.h: incremental GPT-2 forward with a KV cache, and token sampling.
 *
 * pz_gen runs a model (or a pipeline stage's part of one) on any backend:
 * each call to pz_gen_forward appends n positions, computing only those rows;
 * the attention of a new position reads the keys and values of every earlier
 * position from the cache (one (L, maxT, C) array each for K and V, in the
 * backend's memory) instead of recomputing the prefix. Only the last
 * position's logits are computed, and copied to the host for sampling.
 * The arithmetic is the training forward's (stages/stage.c) row by row: the
 * same encoder, layernorm, matmul, GELU and residual ops of the backend
 * table, and the table's attention_cached_forward for the new queries. */
#ifndef PZ_STAGES_GENERATE_H
#define PZ_STAGES_GENERATE_H

#include "base/rng.h"
#include "base/status.h"
#include "kernels/backend.h"
#include "stages/gpt2_params.h"

typedef struct {
    const pz_backend *be;
    const pz_gpt2_params *p;       /* the model's part, in be's memory */
    int rows;                      /* positions one forward may append */
    int pos;                       /* positions in the cache */
    float *mem;                    /* one backend allocation for the views below */
    float *kcache, *vcache;        /* (L, maxT, C) */
    float *x, *ln, *mean, *rstd;   /* (rows,C) (rows,C) (rows) (rows) */
    float *qkv, *atty, *proj;      /* (rows,3C) (rows,C) (rows,C) */
    float *res2, *fch, *fchg;      /* (rows,C) (rows,4C) (rows,4C) */
    float *scores;                 /* (rows, NH, maxT) attention rows */
    int *tok;                      /* (rows) token ids in be's memory */
    float *dlogits;                /* (Vp) last position's logits, in be's memory */
    float *logits;                 /* (Vp) the same on the host (= dlogits on the CPU) */
} pz_gen;

/* p is the whole model (pz_whole_model) or a pipeline stage's part, bound
 * over be's memory; the cache covers the stage's blocks. rows in [1, maxT]
 * bounds n of a forward. */
pz_status pz_gen_init(pz_gen *g, const pz_backend *be, const pz_gpt2_params *p, int rows);
void pz_gen_free(pz_gen *g);
/* Empties the cache (the next forward starts at position 0). */
void pz_gen_reset(pz_gen *g);
/* Appends tokens[0..n) at positions pos..pos+n-1 and leaves the logits of
 * the last one in g->logits. Errors (PZ_ERR_ARG): n outside [1, rows], the
 * positions past the model's context, a token outside [0, V). */
pz_status pz_gen_forward(pz_gen *g, const int *tokens, int n);
/* A later stage's forward: n hidden rows x_in (n, C, host memory) from the
 * previous stage. The stage's output is then g->logits (last stage) or n
 * rows for the next stage, which pz_gen_hidden copies out. */
pz_status pz_gen_forward_hidden(pz_gen *g, const float *x_in, int n);
/* The last forward's n output rows (n, C) into host memory. */
void pz_gen_hidden(const pz_gen *g, float *dst, int n);

/* Sampling settings: temperature 0 is greedy (the first largest logit);
 * top_k 0 and top_p 1 keep every token. */
typedef struct {
    float temperature;
    int top_k;
    float top_p;
} pz_sampling;

/* Picks a token from logits[0..V): softmax(logits / temperature) restricted
 * to the top_k most likely tokens, then to the smallest set of most likely
 * tokens whose probability reaches top_p, renormalised, drawn with r.
 * scratch holds V ints and V doubles' worth (pz_sample_scratch_bytes). */
size_t pz_sample_scratch_bytes(int V);
int pz_sample(const float *logits, int V, const pz_sampling *s, pz_rng *r, void *scratch);

#endif
