/* optim.c: AdamW, learning-rate schedule and gradient clipping. */
#include "stages/optim.h"
#include "base/mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void pz_optim_config_default(pz_optim_config *c) {
    c->kind = PZ_OPTIM_ADAMW;
    c->lr = 3e-4f;
    c->min_lr_frac = 0.1f;
    c->warmup_steps = 0;
    c->total_steps = 0;
    c->beta1 = 0.9f;
    c->beta2 = 0.95f;
    c->eps = 1e-8f;
    c->weight_decay = 0.1f;
    c->grad_clip = 1.0f;
}

pz_status pz_optim_init(pz_optim *o, const pz_stage *s, const pz_optim_config *cfg) {
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->numel = s->params.numel;
    o->m = s->be->alloc(o->numel * sizeof(float));
    o->v = s->be->alloc(o->numel * sizeof(float));
    o->ntensors = pz_gpt2_params_tensors(&s->params, NULL);
    o->tensors = xcalloc((size_t)o->ntensors, sizeof *o->tensors);
    pz_gpt2_params_tensors(&s->params, o->tensors);
    return PZ_OK;
}

void pz_optim_free(pz_optim *o, const pz_stage *s) {
    if (s->be) {   /* a stage whose init failed (say --seq past the position table) has no backend and no m, v */
        s->be->free(o->m);
        s->be->free(o->v);
    }
    free(o->tensors);
    memset(o, 0, sizeof *o);
}

float pz_lr_at(const pz_optim_config *c, int step) {
    if (c->warmup_steps > 0 && step < c->warmup_steps)
        return c->lr * (float)(step + 1) / (float)c->warmup_steps;
    if (c->total_steps <= c->warmup_steps) return c->lr;   /* no decay configured */
    double progress = (double)(step - c->warmup_steps) / (double)(c->total_steps - c->warmup_steps);
    if (progress > 1.0) progress = 1.0;
    double min_lr = (double)c->lr * c->min_lr_frac;
    return (float)(min_lr + 0.5 * (1.0 + cos(M_PI * progress)) * ((double)c->lr - min_lr));
}

double pz_grad_sumsq(const pz_stage *s) {
    return s->be->sumsq(s->grad_mem, s->grads.numel);
}

float pz_clip_scale(const pz_optim_config *c, double global_norm) {
    if (c->grad_clip <= 0.0f || !(global_norm > c->grad_clip)) return 1.0f;
    return (float)(c->grad_clip / global_norm);
}

float pz_optim_step(pz_optim *o, pz_stage *s, float grad_scale) {
    float lr = pz_lr_at(&o->cfg, o->t);
    o->t++;
    /* one call per tensor so the decay mask follows the tensor table; the
     * tensors tile the flat arrays, so m and v share the parameters' offsets */
    for (int i = 0; i < o->ntensors; i++) {
        const pz_tensor_info *t = &o->tensors[i];
        s->be->adamw_update(s->param_mem + t->offset, s->grad_mem + t->offset,
                            o->m + t->offset, o->v + t->offset, t->numel, lr,
                            o->cfg.beta1, o->cfg.beta2, o->cfg.eps,
                            t->decay ? o->cfg.weight_decay : 0.0f, grad_scale, o->t);
    }
    return lr;
}

void pz_onebit_momentum(float *m, const float *grad, size_t n, float beta1, float grad_scale) {
    const float a1 = 1.0f - beta1;
    for (size_t i = 0; i < n; i++) m[i] = beta1 * m[i] + a1 * (grad[i] * grad_scale);
}

void pz_onebit_frozen(float *p, const float *m, const float *v, size_t n, float lr, const pz_optim_config *c, float wd,
                      int t, int tf) {
    /* as the AdamW kernel: the corrections once, in double */
    const float inv_bc1 = (float)(1.0 / (1.0 - pow((double)c->beta1, (double)t)));
    const float inv_bc2 = (float)(1.0 / (1.0 - pow((double)c->beta2, (double)tf)));
    for (size_t i = 0; i < n; i++) {
        const float mhat = m[i] * inv_bc1, vhat = v[i] * inv_bc2;
        p[i] = p[i] - lr * (mhat / (sqrtf(vhat) + c->eps) + wd * p[i]);
    }
}

void pz_optim_momentum(pz_optim *o, const pz_stage *s, float grad_scale) {
    pz_onebit_momentum(o->m, s->grad_mem, o->numel, o->cfg.beta1, grad_scale);
}

float pz_optim_step_frozen(pz_optim *o, pz_stage *s, int tf) {
    float lr = pz_lr_at(&o->cfg, o->t);
    o->t++;
    for (int i = 0; i < o->ntensors; i++) {
        const pz_tensor_info *t = &o->tensors[i];
        pz_onebit_frozen(s->param_mem + t->offset, o->m + t->offset, o->v + t->offset, t->numel, lr, &o->cfg,
                         t->decay ? o->cfg.weight_decay : 0.0f, o->t, tf);
    }
    return lr;
}
