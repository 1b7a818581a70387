/* binsgdm.h: BinSGDM / Birder's update rule (docs/data-parallel.md,
 * "--optimizer binsgdm"), the parts that run on one replica. The 1-bit
 * exchange between replicas is runtime/dp's (runtime/dp/replica.c).
 *
 * Per element, with the gradient g already multiplied by the clip factor c:
 *   m = beta m + (1 - beta) g          momentum
 *   b = beta b + (1 - beta) |g|        momentum of |g| (the normaliser)
 *   u = m / b  (0 where b = 0)         in [-1, 1], since |m| <= b
 * then every replica sends a binary randomisation of u (E = u) and all apply
 *   p = p - lr (mean over replicas of the decoded u + wd p)
 * with wd only on the tensors AdamW decays. The state is m and b, kept in
 * pz_optim's m and v arrays, so checkpoints save them as AdamW's. */
#ifndef PZ_BINSGDM_H
#define PZ_BINSGDM_H

#include <stddef.h>
#include <stdint.h>

#include "stages/optim.h"

/* The codec of the replicas' 1-bit messages (compress/codecs/sign.c): bit = 1
 * with probability (1 + u/s)/2, decoded +-s, s = max |u| of the message
 * (<= 1, one fp32 per message). */
#define PZ_BINSGDM_SPEC "sign:stochastic,group=tensor"

/* The moments over n elements and u into `u` (u may be g: it is read first). */
void pz_binsgdm_moments(float *m, float *b, float *u, const float *g, size_t n, float beta, float gscale);
/* p = p - lr * (upd + wd * p) over n elements. */
void pz_binsgdm_apply(float *p, const float *upd, size_t n, float lr, float wd);

/* On a stage (host memory only): the moments of the whole stage, u written
 * over the gradients (s->grad_mem), ready for the exchange. */
void pz_binsgdm_prepare(pz_optim *o, pz_stage *s, float grad_scale);
/* The update from the exchanged mean at s->grad_mem, at the scheduled lr of
 * step o->t (then o->t + 1), weight decay by the tensors' mask. Returns the lr. */
float pz_binsgdm_step(pz_optim *o, pz_stage *s);

/* A replica's m and b as bytes (checkpoints keep each replica's: they
 * differ, each folds in its own gradients). Little-endian: u32 magic
 * "PZBS", u32 version 1, u64 n, n floats m, n floats b, u32 CRC-32C of all
 * before. *blob is malloc'ed. */
void pz_binsgdm_state_save(const pz_optim *o, uint8_t **blob, size_t *len);
/* Reads them back into o, refusing another format, a damaged file or
 * another size; `path` names the file in the messages. */
pz_status pz_binsgdm_state_load(pz_optim *o, const uint8_t *b, size_t len, const char *path);

#endif
