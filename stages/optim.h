/* optim.h: AdamW over a stage's parameters (or BinSGDM's state, see
 * stages/binsgdm.h), learning-rate schedule and global-norm gradient clipping. Weight decay is applied only to tensors
 * marked decay (2-D weights, embeddings), never to biases and LayerNorm. */
#ifndef PZ_OPTIM_H
#define PZ_OPTIM_H

#include "stages/stage.h"

/* --optimizer: AdamW, or BinSGDM (its m and b live in pz_optim's m and v) */
typedef enum { PZ_OPTIM_ADAMW = 0, PZ_OPTIM_BINSGDM = 1 } pz_optim_kind;

typedef struct {
    pz_optim_kind kind;
    float lr;            /* peak learning rate */
    float min_lr_frac;   /* cosine decays to lr * min_lr_frac */
    int warmup_steps;    /* linear warm-up from lr/warmup to lr */
    int total_steps;     /* cosine ends here */
    float beta1, beta2, eps;   /* binsgdm: beta1 is its beta, beta2 and eps unused */
    float weight_decay;
    float grad_clip;     /* max global L2 norm; <= 0 disables */
} pz_optim_config;

void pz_optim_config_default(pz_optim_config *c);

typedef struct {
    pz_optim_config cfg;
    float *m, *v;        /* backend memory, numel each */
    size_t numel;
    int t;               /* steps taken */
    int ntensors;
    pz_tensor_info *tensors; /* of the stage's params, for the decay mask */
} pz_optim;

pz_status pz_optim_init(pz_optim *o, const pz_stage *s, const pz_optim_config *cfg);
void pz_optim_free(pz_optim *o, const pz_stage *s);
/* Learning rate at 0-based step. */
float pz_lr_at(const pz_optim_config *c, int step);
/* Sum of squares of the stage's gradients (pipeline stages add theirs). */
double pz_grad_sumsq(const pz_stage *s);
/* Clip factor for a global norm: min(1, clip / norm). */
float pz_clip_scale(const pz_optim_config *c, double global_norm);
/* One AdamW step at the scheduled lr for step o->t, gradients multiplied by
 * grad_scale first. Returns the lr used. */
float pz_optim_step(pz_optim *o, pz_stage *s, float grad_scale);

/* 1-bit Adam's steps after the warm-up (--dp-compress-what momentum,
 * runtime/dp/onebit.c), host memory only. The replicas exchange
 * the momentum, not the gradient, and v stays as AdamW left it:
 *   momentum: m = b1 m + (1 - b1) g, g = grad * grad_scale (this replica's);
 *   then, with m replaced by the replicas' compressed mean,
 *   frozen:   p -= lr (mhat / (sqrt(vhat) + eps) + wd p),
 *             mhat = m / (1 - b1^t), vhat = v / (1 - b2^tf)
 * t the 1-based step, tf the steps v took (the warm-up's): AdamW's own
 * update (kernels/cpu/adamw.c) with v no longer moving, so the switch keeps
 * the step's scale. Plain multiplies and adds (no fma; the build has
 * -ffp-contract=off), so tests/runtime/dp/onebit_model.py rebuilds them bit
 * for bit. The frozen step returns the lr (of step o->t, then o->t + 1). */
void pz_optim_momentum(pz_optim *o, const pz_stage *s, float grad_scale);
float pz_optim_step_frozen(pz_optim *o, pz_stage *s, int tf);
/* the same on n elements (the model test's entry points) */
void pz_onebit_momentum(float *m, const float *grad, size_t n, float beta1, float grad_scale);
void pz_onebit_frozen(float *p, const float *m, const float *v, size_t n, float lr, const pz_optim_config *c, float wd,
                      int t, int tf);

#endif
