/* hadamard_elem.h: the arithmetic of the hadamard() wrapper, one copy for
 * the CPU (compress/wrappers/hadamard.c) and the GPU (compress/cuda/hadamard_cuda.cu),
 * as wrap_elem.h is for ef/ef21/aq.
 *
 * Per row (token) of C channels and per block of N = 2^logn consecutive
 * channels (N divides C): y = H_N D x, with D = diag(s_c), s_c = +-1 the
 * sign of channel c, and H_N the Sylvester Hadamard matrix scaled by
 * 1/sqrt(N) (orthonormal, symmetric). Inverse: x = D H_N y.
 *
 * The order of operations is fixed so that every backend gives the same
 * bits for finite inputs:
 *   forward: v_c = x_c * s_c (exact); for h = 1, 2, 4, ..., N/2 every pair
 *            (i, i + h) with i mod 2h < h becomes (v_i + v_(i+h),
 *            v_i - v_(i+h)), one IEEE single add or subtract each; then
 *            v *= pz_hd_scale(logn) (one rounding).
 *   inverse: the same butterflies on y, then v *= pz_hd_scale(logn) * s_c
 *            (the product is exact, a sign flip of the scale).
 * Each butterfly output is a single add or subtract of two values that the
 * previous stage fixed, so the order in which pairs are visited (vector
 * lanes, threads) does not change the result. pz_hd_scale is 2^(-logn/2)
 * for even logn (exact) and the float nearest 1/sqrt(2) times a power of
 * two for odd logn.
 *
 * Signs: s_c is the top bit of pz_mix64(key ^ (c * 0x9e3779b97f4a7c15)),
 * key = pz_hd_key(ctx), a hash of (seed, edge, dir) only: the signs of an
 * edge's direction stay the same for every step and micro-batch, so state
 * that a wrapper inside hadamard() keeps across messages (ef's residual,
 * aq's buffers) lives in one fixed rotated basis; both sides derive them
 * from the ctx they already share, nothing is sent. */
#ifndef PZ_HADAMARD_ELEM_H
#define PZ_HADAMARD_ELEM_H

#include <math.h>
#include <stdint.h>

#include "compress/core/elem.h"

/* the signs' stream differs from stochastic rounding's (pz_ctx_key) */
#define PZ_HD_SALT 0x6861646d61726421ULL /* "hadmard!" */
/* the largest block: N <= 2^16; the default block is at most 2^8 */
#define PZ_HD_MAX_LOG 16
#define PZ_HD_DEFAULT_MAX_LOG 8

static inline PZ_HD uint64_t pz_hd_key(const pz_codec_ctx *ctx) {
    uint64_t h = pz_mix64(PZ_HD_SALT ^ (ctx ? ctx->seed : 0));
    if (ctx) h = pz_mix64(h ^ ((uint64_t)ctx->edge | ((uint64_t)ctx->dir << 32)));
    return pz_mix64(h);
}

/* s_c: +1 or -1 */
static inline PZ_HD float pz_hd_sign(uint64_t key, uint64_t c) {
    return (pz_mix64(key ^ (c * 0x9e3779b97f4a7c15ull)) >> 63) ? -1.0f : 1.0f;
}

/* 1/sqrt(2^logn) as a float, logn in 0..PZ_HD_MAX_LOG */
static inline PZ_HD float pz_hd_scale(int logn) {
    float p = ldexpf(1.0f, -(logn / 2));              /* exact power of two */
    return (logn & 1) ? p * 0x1.6a09e6p-1f : p;        /* exact: a power of two times a float */
}

/* The default block for C channels: the largest power of two dividing C,
 * at most 2^PZ_HD_DEFAULT_MAX_LOG (its log2). */
static inline PZ_HD int pz_hd_default_log(int64_t C) {
    int l = 0;
    while (l < PZ_HD_DEFAULT_MAX_LOG && C > 0 && ((C >> l) & 1) == 0) l++;
    return l;
}

#endif
