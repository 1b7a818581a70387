/* half.h: fp32 <-> fp16 and bf16, bit for bit as the hardware converts,
 * usable from C and CUDA (PZ_HD), with integer and single-precision
 * arithmetic only so a CPU and a GPU give the same bits.
 *  - fp16 (IEEE binary16): round to nearest, ties to even; overflow goes to
 *    +-inf (|x| >= 65520), subnormals are exact, NaN stays NaN (made quiet,
 *    payload bits kept), as F16C hardware does;
 *  - bf16: round to nearest, ties to even; NaN stays NaN (quiet). */
#ifndef PZ_BASE_HALF_H
#define PZ_BASE_HALF_H

#include <stdint.h>
#include <string.h>

#include "base/hd.h"

/* ---- bit casts ---- */
static inline PZ_HD uint32_t pz_f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline PZ_HD float pz_u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- fp16 ---- */
static inline PZ_HD uint16_t pz_f32_to_f16(float x) {
    uint32_t f = pz_f2u(x);
    uint32_t sign = (f >> 16) & 0x8000u;
    uint32_t a = f & 0x7fffffffu;
    uint32_t h;
    if (a >= 0x7f800000u) {                 /* inf or NaN */
        h = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0x7c00u;
    } else if (a >= 0x477ff000u) {          /* rounds to inf: >= 65520 */
        h = 0x7c00u;
    } else if (a < 0x38800000u) {           /* below 2^-14: subnormal half or zero */
        /* adding 0.5 puts the half's subnormal unit (2^-24) at the float's
         * last mantissa bit; the FPU rounds to nearest even for us */
        h = pz_f2u(pz_u2f(a) + 0.5f) - 0x3f000000u;
    } else {                                /* normal */
        uint32_t odd = (a >> 13) & 1u;
        h = (a + 0xc8000fffu + odd) >> 13;  /* rebias exponent (-112 << 23), round */
    }
    return (uint16_t)(sign | h);
}

static inline PZ_HD float pz_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    uint32_t f;
    if (e == 0x1fu) f = m ? 0x7fc00000u | (m << 13) : 0x7f800000u;  /* NaN made quiet */
    else if (e == 0) f = pz_f2u((float)m * 0x1p-24f);   /* exact */
    else f = ((e + 112u) << 23) | (m << 13);
    return pz_u2f(sign | f);
}

/* Directed rounding to fp16, for scales that must cover the data:
 * the smallest fp16 >= v and the largest fp16 <= v (v finite; the caller
 * keeps |v| <= 65504 or gets +-inf). */
static inline PZ_HD uint16_t pz_f32_to_f16_up(float v) {
    uint16_t h = pz_f32_to_f16(v);
    if (pz_f16_to_f32(h) < v) h = (h & 0x8000u) ? (h == 0x8000u ? (uint16_t)1 : (uint16_t)(h - 1)) : (uint16_t)(h + 1);
    return h;
}
static inline PZ_HD uint16_t pz_f32_to_f16_down(float v) { return (uint16_t)(pz_f32_to_f16_up(-v) ^ 0x8000u); }

/* ---- bf16 ---- */
static inline PZ_HD uint16_t pz_f32_to_bf16(float x) {
    uint32_t f = pz_f2u(x);
    if ((f & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((f >> 16) | 0x40u);
    return (uint16_t)((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}
static inline PZ_HD float pz_bf16_to_f32(uint16_t h) { return pz_u2f((uint32_t)h << 16); }

#endif
