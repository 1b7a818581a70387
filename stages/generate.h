/* generate.h: incremental GPT-2 forward with a KV cache, and token sampling.
 *
 * pz_gen runs the whole model on a host-memory backend (the CPU one): each
 * call to pz_gen_forward appends n positions, computing only those rows; the
 * attention of a new position reads the keys and values of every earlier
 * position from the cache (one (L, maxT, C) array each for K and V) instead
 * of recomputing the prefix. Only the last position's logits are computed.
 * The arithmetic is the training forward's (stages/stage.c) row by row:
 * the same layernorm, matmul, GELU and residual ops of the backend table,
 * and attention as in kernels/cpu/attention.c (scores scaled by 1/sqrt(hs),
 * max-shifted softmax) for one query at a time. */
#ifndef PZ_STAGES_GENERATE_H
#define PZ_STAGES_GENERATE_H

#include "base/rng.h"
#include "base/status.h"
#include "kernels/backend.h"
#include "stages/gpt2_params.h"

typedef struct {
    const pz_backend *be;          /* host memory */
    const pz_gpt2_params *p;       /* the whole model */
    int rows;                      /* positions one forward may append */
    int pos;                       /* positions in the cache */
    float *mem;                    /* one allocation for everything below */
    float *kcache, *vcache;        /* (L, maxT, C) */
    float *x, *ln, *mean, *rstd;   /* (rows,C) (rows,C) (rows) (rows) */
    float *qkv, *atty, *proj;      /* (rows,3C) (rows,C) (rows,C) */
    float *res2, *fch, *fchg;      /* (rows,C) (rows,4C) (rows,4C) */
    float *scores;                 /* (maxT) attention row */
    float *logits;                 /* (Vp) of the last position of the last forward */
} pz_gen;

/* p must be a whole model (pz_whole_model) bound over be's memory; rows in
 * [1, maxT] bounds n of pz_gen_forward. */
pz_status pz_gen_init(pz_gen *g, const pz_backend *be, const pz_gpt2_params *p, int rows);
void pz_gen_free(pz_gen *g);
/* Empties the cache (the next forward starts at position 0). */
void pz_gen_reset(pz_gen *g);
/* Appends tokens[0..n) at positions pos..pos+n-1 and leaves the logits of
 * the last one in g->logits. Errors (PZ_ERR_ARG): n outside [1, rows], the
 * positions past the model's context, a token outside [0, V). */
pz_status pz_gen_forward(pz_gen *g, const int *tokens, int n);

/* Causal attention of n new positions pos0..pos0+n-1 against a cache:
 * writes their keys and values (from qkv (n,3C), [q | k | v] per row) into
 * kcache/vcache (maxT, C) rows pos0.., then out (n,C) row i attends over
 * cache rows 0..pos0+i. scores is scratch of pos0+n floats. */
void pz_attention_cached_forward(float *out, float *kcache, float *vcache, float *scores,
                                 const float *qkv, int pos0, int n, int C, int NH);

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
