/* elem.h: per-element math shared by every codec, usable from C and CUDA.
 *
 * All functions are static inline and marked PZ_HD (__host__ __device__ under
 * nvcc), use only integer and IEEE-754 single-precision arithmetic, and never
 * depend on the floating-point environment except for the default
 * round-to-nearest-even mode, so a CPU and a GPU produce the same bits.
 *
 *  - fp32 <-> fp16 and bf16: base/half.h.
 *  - pz_uniform(key, i): the uniform number of element i in [0, 1), a multiple
 *    of 2^-24, from a counter-based hash (no state, any order, any thread).
 *    key = pz_ctx_key(ctx) hashes (seed, step, edge, dir, micro).
 *  - rounding: pz_round_stoch(y, u) = floor(y) + (u < y - floor(y)), which is
 *    unbiased: E = y up to the 2^-24 granularity of u;
 *    pz_round_near(y) = nearest integer, ties to even.
 */
#ifndef PZ_ELEM_H
#define PZ_ELEM_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#include "base/half.h"
#include "compress/core/codec.h"

/* No contraction of a*b + c into an fma behind our back: the same formula
 * must round the same on every compiler and on the GPU (gcc's -std=c11
 * already implies -ffp-contract=off; nvcc gets --fmad=false). */
#if defined(__clang__) && !defined(__CUDACC__)
#pragma STDC FP_CONTRACT OFF
#endif
/* A product that a sum uses, never fused into an fma whatever the compiler
 * flags (device code: the _rn intrinsics are never contracted). */
#if defined(__CUDA_ARCH__)
#define PZ_FMUL(a, b) __fmul_rn((a), (b))
#define PZ_FADD(a, b) __fadd_rn((a), (b))
#else
#define PZ_FMUL(a, b) ((a) * (b))
#define PZ_FADD(a, b) ((a) + (b))
#endif

/* ---- counter-based uniforms ---- */
static inline PZ_HD uint64_t pz_mix64(uint64_t z) {      /* splitmix64 finaliser */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline PZ_HD uint32_t pz_mix32(uint32_t h) {      /* 32-bit avalanche */
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}

/* Key of one message's random stream. */
static inline PZ_HD uint64_t pz_ctx_key(const pz_codec_ctx *ctx) {
    uint64_t h = pz_mix64(0x9e3779b97f4a7c15ull ^ (ctx ? ctx->seed : 0));
    if (ctx) {
        h = pz_mix64(h ^ ctx->step);
        h = pz_mix64(h ^ ((uint64_t)ctx->edge | ((uint64_t)ctx->dir << 32)));
        h = pz_mix64(h ^ ctx->micro);
    } else {
        h = pz_mix64(h);
    }
    return h;
}

/* The 32-bit words that the uniform of element i uses: lo = low half of the
 * key, hi = high half of the key mixed with the high half of i. The hash is
 * mix32(lo32(i) ^ lo) ^ hi: a bijection of the element index for one message,
 * decorrelated across messages by both key halves. Hot loops compute the
 * words once per 2^32 elements and call pz_uniform2. */
typedef struct { uint32_t lo, hi; } pz_ukey;
static inline PZ_HD pz_ukey pz_ukey_at(uint64_t key, uint64_t i) {
    pz_ukey k;
    k.lo = (uint32_t)key;
    k.hi = (uint32_t)(key >> 32) ^ ((uint32_t)(i >> 32) * 0x9e3779b9u);
    return k;
}
static inline PZ_HD uint32_t pz_uhash2(uint32_t klo, uint32_t khi, uint32_t ilo) {
    return pz_mix32(ilo ^ klo) ^ khi;
}
/* [0, 1), multiple of 2^-24; hot loops copy k.lo and k.hi into locals */
static inline PZ_HD float pz_uniform2(uint32_t klo, uint32_t khi, uint32_t ilo) {
    return (float)(int32_t)(pz_uhash2(klo, khi, ilo) >> 8) * 0x1p-24f;
}
static inline PZ_HD float pz_uniform_w(pz_ukey k, uint32_t ilo) { return pz_uniform2(k.lo, k.hi, ilo); }
static inline PZ_HD float pz_uniform(uint64_t key, uint64_t i) {
    return pz_uniform_w(pz_ukey_at(key, i), (uint32_t)i);
}

/* ---- rounding ---- */
/* floor(y) + Bernoulli(y - floor(y)) with u uniform in [0, 1): unbiased.
 * y must be finite and |y| < 2^23. */
static inline PZ_HD float pz_round_stoch(float y, float u) {
    float f = floorf(y);
    return f + (u < y - f ? 1.0f : 0.0f);
}
/* The same for 0 <= y < 2^31, by truncation (vectorizes where floorf does
 * not, e.g. gcc with -ftrapping-math). */
static inline PZ_HD float pz_round_stoch_pos(float y, float u) {
    float f = (float)(int32_t)y;
    return f + (u < y - f ? 1.0f : 0.0f);
}
/* nearest integer, ties to even */
static inline PZ_HD float pz_round_near(float y) { return rintf(y); }

/* Clamp to [lo, hi]; NaN goes to lo. */
static inline PZ_HD float pz_clampf(float v, float lo, float hi) {
    return v > lo ? (v < hi ? v : hi) : lo;
}

#endif
