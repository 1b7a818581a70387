/* binsgdm.c: see binsgdm.h. Plain loops over host memory: the rule costs a
 * few flops per element next to a stage's backward, and the build has
 * -ffp-contract=off, so tests/runtime/dp/binsgdm_model.py rebuilds these
 * float32 results bit for bit. */
#include "stages/binsgdm.h"

#include <math.h>
#include <string.h>

#include "base/bytes.h"
#include "base/crc32c.h"
#include "base/mem.h"

void pz_binsgdm_moments(float *m, float *b, float *u, const float *g, size_t n, float beta, float gscale) {
    const float omb = 1.0f - beta;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gscale;
        float mi = beta * m[i] + omb * gi;
        float bi = beta * b[i] + omb * fabsf(gi);
        m[i] = mi;
        b[i] = bi;
        /* |m| <= b holds in float too (rounding is monotone); b = 0 only
         * where every gradient so far was 0: nothing to move */
        u[i] = bi > 0.0f ? mi / bi : 0.0f;
    }
}

void pz_binsgdm_apply(float *p, const float *upd, size_t n, float lr, float wd) {
    for (size_t i = 0; i < n; i++) p[i] = p[i] - lr * (upd[i] + wd * p[i]);
}

void pz_binsgdm_prepare(pz_optim *o, pz_stage *s, float grad_scale) {
    pz_binsgdm_moments(o->m, o->v, s->grad_mem, s->grad_mem, o->numel, o->cfg.beta1, grad_scale);
}

float pz_binsgdm_step(pz_optim *o, pz_stage *s) {
    float lr = pz_lr_at(&o->cfg, o->t);
    o->t++;
    for (int i = 0; i < o->ntensors; i++) {
        const pz_tensor_info *t = &o->tensors[i];
        pz_binsgdm_apply(s->param_mem + t->offset, s->grad_mem + t->offset, t->numel, lr,
                         t->decay ? o->cfg.weight_decay : 0.0f);
    }
    return lr;
}

#define BSGD_MAGIC 0x53425a50u /* "PZBS" */

void pz_binsgdm_state_save(const pz_optim *o, uint8_t **blob, size_t *len) {
    size_t n = o->numel;
    *len = 16 + 8 * n + 4;
    uint8_t *b = *blob = xmalloc(*len);
    pz_put_u32(b, BSGD_MAGIC);
    pz_put_u32(b + 4, 1);
    pz_put_u64(b + 8, n);
    for (size_t i = 0; i < 2 * n; i++) {
        uint32_t w;
        memcpy(&w, i < n ? &o->m[i] : &o->v[i - n], 4);
        pz_put_u32(b + 16 + 4 * i, w);
    }
    pz_put_u32(b + *len - 4, pz_crc32c(0, b, *len - 4));
}

pz_status pz_binsgdm_state_load(pz_optim *o, const uint8_t *b, size_t len, const char *path) {
    size_t n = o->numel;
    if (len < 20 || pz_get_u32(b) != BSGD_MAGIC || pz_get_u32(b + 4) != 1)
        return pz_fail(PZ_ERR_FORMAT, "--resume: %s is not a binsgdm state file (magic or version)", path);
    if (pz_get_u32(b + len - 4) != pz_crc32c(0, b, len - 4))
        return pz_fail(PZ_ERR_FORMAT, "--resume: %s: CRC mismatch (damaged)", path);
    if (pz_get_u64(b + 8) != n || len != 16 + 8 * n + 4)
        return pz_fail(PZ_ERR_FORMAT, "--resume: %s holds %llu elements, this chunk has %zu", path,
                       (unsigned long long)pz_get_u64(b + 8), n);
    for (size_t i = 0; i < 2 * n; i++) {
        uint32_t w = pz_get_u32(b + 16 + 4 * i);
        memcpy(i < n ? &o->m[i] : &o->v[i - n], &w, 4);
    }
    return PZ_OK;
}
