/* stage.h: a pipeline stage of a GPT-2: a contiguous range of blocks, plus the
 * embedding if it is first and the final norm + tied head + loss if it is last.
 * The single-process model is one stage owning everything.
 *
 * One micro-batch's saved activations live in a pz_acts slot (one allocation,
 * named views); a schedule that keeps k micro-batches in flight allocates k slots.
 * Backward scratch is shared by all slots, since one backward runs at a time. */
#ifndef PZ_STAGE_H
#define PZ_STAGE_H

#include "kernels/backend.h"
#include "stages/gpt2_params.h"

typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd; /* (B,T,C) (B,T) (B,T) */
    float *qkv;                        /* (B,T,3C) */
    float *atty;                       /* (B,T,C) attention output before projection */
    float *att;                        /* (B,NH,T,T) softmax probabilities */
    float *attproj;                    /* (B,T,C) */
    float *res2;                       /* (B,T,C) residual after attention */
    float *ln2, *ln2_mean, *ln2_rstd;  /* (B,T,C) (B,T) (B,T) */
    float *fch;                        /* (B,T,4C) */
    float *fch_gelu;                   /* (B,T,4C) */
    float *fcproj;                     /* (B,T,C) */
    float *res3;                       /* (B,T,C) block output */
    /* with defer_weights: the output gradients of the block's four matmuls,
     * saved by the input-gradient backward for the weight-gradient one */
    float *d_fcproj, *d_fc, *d_attproj, *d_qkv; /* (B,T,C) (B,T,4C) (B,T,C) (B,T,3C) */
} pz_block_acts;

typedef struct {
    int B, T;
    size_t numel;           /* floats in mem */
    float *mem;             /* one backend allocation */
    float *input;           /* (B,T,C): the embedding output (first stage) or the received activation */
    pz_block_acts *blocks;  /* one per owned block */
    float *lnf, *lnf_mean, *lnf_rstd; /* (B,T,C) (B,T) (B,T), last stage */
    float *logits;          /* (B,T,Vp), last stage; holds dlogits after a training forward */
    float *losses;          /* (B,T), last stage */
    int *tokens;            /* (B,T) inputs, first stage (backend memory) */
    int *targets;           /* (B,T) targets, last stage (backend memory) */
    float loss;             /* mean loss of the micro-batch (last stage, after forward) */
} pz_acts;

typedef struct {
    const pz_backend *be;
    pz_gpt2_config cfg;
    pz_stage_range range;
    int B, T;               /* micro-batch shape the buffers are sized for */
    float *param_mem, *grad_mem; /* backend allocations of numel floats */
    pz_gpt2_params params, grads;
    float *scratch;         /* backward scratch, one block's worth */
    float *dres, *dres2;    /* (B,T,C) gradient flowing along the residual stream */
    float *dln, *dqkv, *datty, *datt, *dfch, *dfch_gelu; /* views into scratch */
    /* Called between blocks in forward and backward (may be NULL): the
     * pipeline drives its transport here so transfers overlap compute. */
    void (*between_blocks)(void *ctx);
    void *between_blocks_ctx;
    /* Called in backward (may be NULL) when grad_mem[lo, numel) holds this
     * micro-batch's last contribution: the backward fills the flat buffer
     * from its top (final LayerNorm, then the blocks from the last) down to
     * the embeddings at 0, so lo only falls. The data-parallel sync starts
     * its buckets from here (runtime/dp/sync.h). */
    void (*grads_final)(void *ctx, size_t lo);
    void *grads_final_ctx;
    /* Set before pz_acts_init to run backward in two halves (zero-bubble
     * schedules): slots then also hold each block's matmul output gradients. */
    int defer_weights;
} pz_stage;

/* Allocates parameters (zeroed), gradients (zeroed) and the backward scratch. */
pz_status pz_stage_init(pz_stage *s, const pz_backend *be, const pz_gpt2_config *cfg,
                        const pz_stage_range *range, int B, int T);
void pz_stage_free(pz_stage *s);

pz_status pz_acts_init(pz_acts *a, const pz_stage *s);
/* The same slot, with (defer != 0) or without room for the matmuls' output
 * gradients whatever s->defer_weights says: a schedule that splits only one
 * micro-batch's backward (schedule.h, pz_sched_splits_last) gives one slot. */
pz_status pz_acts_init_split(pz_acts *a, const pz_stage *s, int defer);

/* What those allocate, in floats, without allocating (memory estimates):
 * a stage's parameters, gradients and backward scratch; one activation
 * slot (with its token and target ids). */
size_t pz_stage_fixed_numel(const pz_gpt2_config *cfg, const pz_stage_range *r, int B, int T);
size_t pz_acts_slot_numel(const pz_gpt2_config *cfg, const pz_stage_range *r, int B, int T, int defer_weights);
void pz_acts_free(pz_acts *a, const pz_stage *s);

/* Forward one micro-batch.
 *  first stage: tokens (B,T) host ints in [0,V), copied to a->tokens; x_in ignored.
 *  other stages: x_in (B,T,C) backend memory, copied to a->input.
 *  last stage: targets (B,T) host ints in [0,V); sets a->loss (mean over B*T).
 *     If dscale != 0 the logits are replaced by dlogits * dscale, ready for
 *     backward (use 1/(B*T*micro_batches) for an accumulated mean).
 * Returns a pointer to the stage output (B,T,C) (not last stage) or NULL. */
const float *pz_stage_forward(pz_stage *s, pz_acts *a, const int *tokens,
                              const float *x_in, const int *targets, float dscale);

/* Backward one micro-batch whose forward filled `a`. dout (B,T,C) is the
 * gradient of the stage output (ignored on the last stage, which starts from
 * its dlogits). Parameter gradients accumulate into s->grads. If dx_in is
 * non-NULL (not first stage) it receives the gradient of the stage input
 * (overwritten, not accumulated). */
void pz_stage_backward(pz_stage *s, pz_acts *a, const float *dout, float *dx_in);

/* The same backward in two halves (on a slot made with the room for them:
 * s->defer_weights set before pz_acts_init, or pz_acts_init_split). _input computes dx_in and every gradient except the blocks'
 * matmul weights and biases, whose output gradients it saves in `a`;
 * _weight then accumulates those, and nothing waits for it. Together they
 * add to s->grads exactly (bit for bit) what pz_stage_backward adds. */
void pz_stage_backward_input(pz_stage *s, pz_acts *a, const float *dout, float *dx_in);
void pz_stage_backward_weight(pz_stage *s, pz_acts *a);

void pz_stage_zero_grad(pz_stage *s);

#endif
