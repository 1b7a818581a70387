/* hadamard.h: the hadamard() wrapper's transform and block rules (private
 * to compress/; compress/wrappers/hadamard.c, used by the GPU wrapper and tests).
 * Arithmetic and sign rules: compress/wrappers/hadamard_elem.h. */
#ifndef PZ_HADAMARD_H
#define PZ_HADAMARD_H

#include "compress/core/codec_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* compress/wrappers/fwht.c: y = H_N D x on rows x C floats (N = 2^logn divides C;
 * signs: C floats of +-1); x and y must not overlap. Returns 0 when y holds
 * inf or NaN (x did, or a block's sums overflow), else 1. */
int pz_hadamard_forward(const float *x, float *y, size_t rows, size_t C, int logn, const float *signs);
/* v = D H_N v in place, the inverse of pz_hadamard_forward. */
void pz_hadamard_inverse(float *v, size_t rows, size_t C, int logn, const float *signs);
/* compress/wrappers/hadamard.c: the signs of channels 0..C-1 for a key (pz_hadamard_key). */
void pz_hadamard_signs(uint64_t key, float *signs, size_t C);
uint64_t pz_hadamard_key(const pz_codec_ctx *ctx);
/* Whether v[0..n) holds no inf or NaN. */
int pz_hadamard_all_finite(const float *v, size_t n);
/* c is a hadamard() codec: log2 of its block for shape s (PZ_ERR_SHAPE when
 * block= does not divide the last dim). */
pz_status pz_hadamard_block(pz_codec *c, const pz_shape *s, int *logn);
/* The decoder's check of a message's flags byte against that block
 * (PZ_ERR_FORMAT); *logn = the block's log2. */
pz_status pz_hadamard_check_flags(pz_codec *c, uint8_t flags, const pz_shape *s, int *logn);

#ifdef __cplusplus
}
#endif

#endif
