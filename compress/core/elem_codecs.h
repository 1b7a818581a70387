/* elem_codecs.h: per-element math of the scaled codecs (q, sign, nuq, topk's
 * q8 values) and the canonical reductions, shared by the CPU codecs
 * (quant.c, sign.c, nuq.c, topk.c) and their GPU kernels (compress/cuda/).
 *
 * Everything here is static inline and PZ_HD (__host__ __device__ under
 * nvcc) and follows the rules of elem.h: integer and single-precision IEEE
 * arithmetic only, no dependence on the floating-point environment beyond
 * round-to-nearest-even, fused multiply-adds only where fmaf() is written
 * out (a product feeding a sum is written PZ_FADD(PZ_FMUL(..)), which device
 * code never fuses; the CUDA build also passes --fmad=false; gcc's -std=c11
 * implies -ffp-contract=off, and elem.h turns contraction off for clang;
 * double sums of exact products give the same bits fused or not). So the
 * function called on the CPU and in a kernel gives the same bits, and a GPU
 * message equals the CPU message byte for byte.
 *
 * Canonical reductions. A floating-point sum depends on its order, and a
 * compiler's vectorised reduction (omp simd reduction) picks an order of its
 * own; the codecs that send a sum (nuq's bucket norm, sign's mean |x|) use
 * one fixed order instead, which a warp of 32 GPU threads reproduces:
 *   lane l (0..31) adds, in double and in index order, the terms of the
 *   elements a+l, a+l+32, a+l+64, ... of the run [a, e); then the 32 lane
 *   sums are combined by a fixed tree: for w = 16, 8, 4, 2, 1:
 *   s[l] = s[l] + s[l + w] for l < w; the result is s[0].
 * Terms are exact in double (a float, or a float's square: 48 significant
 * bits), so only the additions round, each in a fixed place. */
#ifndef PZ_ELEM_CODECS_H
#define PZ_ELEM_CODECS_H

#include <stdint.h>
#include <math.h>

#include "compress/core/elem.h"

#define PZ_SUM_LANES 32

/* ---- canonical sums (host side; the kernels run the same order) ---- */
/* what a lane adds for element value v: v*v (sumsq) or |v| (sumabs) */
static inline PZ_HD double pz_term_sq(float v) { return (double)v * (double)v; }
static inline PZ_HD double pz_term_abs(float v) { return (double)fabsf(v); }

/* the fixed combination of 32 lane sums; s is overwritten */
static inline PZ_HD double pz_lanes_combine(double *s) {
    for (int w = PZ_SUM_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) s[l] = s[l] + s[l + w];
    return s[0];
}

/* the canonical sum of x's terms, |v| (absolute) or v*v; the callers below
 * pass a constant, so each inlined copy keeps one term */
static inline double pz_sum_canon(const float *x, size_t n, int absolute) {
    double s[PZ_SUM_LANES] = {0};
    size_t i = 0;
    for (; i + PZ_SUM_LANES <= n; i += PZ_SUM_LANES)
        for (int l = 0; l < PZ_SUM_LANES; l++) {
            float v = x[i + (size_t)l];
            s[l] = s[l] + (absolute ? pz_term_abs(v) : pz_term_sq(v));
        }
    for (int l = 0; i < n; i++, l++) s[l] = s[l] + (absolute ? pz_term_abs(x[i]) : pz_term_sq(x[i]));
    return pz_lanes_combine(s);
}
static inline double pz_sum_sq_canon(const float *x, size_t n) { return pz_sum_canon(x, n, 0); }
static inline double pz_sum_abs_canon(const float *x, size_t n) { return pz_sum_canon(x, n, 1); }

/* ---- q<b> ---- */
/* A group's grid as both sides derive it from the stored range [lo, hi]
 * (compress/codecs/quant.c describes the grids): level k is (lo + k*step)*fd, and
 * the encoder's y = (x*fs)*inv + off is the position of x on the grid, up to
 * rounding. fs = 1 (fd = 1) unless the step would fall below 2^-126 (fp32's
 * smallest normal; 1/step could then overflow and a subnormal step loses
 * bits): then the grid is built for the range times fs = 2^64 and decoded
 * values are multiplied by fd = 2^-64 (both exact powers of two). */
typedef struct {
    float lo, step, inv, off, fs, fd;
} pz_qgrid;

/* The largest code: 2^b - 1, except absmax midtread (b >= 2), whose 2L + 1
 * levels leave code 2^b - 1 unused. */
static inline PZ_HD int32_t pz_q_kmax(int bits, int midtread, int minmax) {
    return (1 << bits) - 1 - (midtread && !minmax && bits >= 2 ? 1 : 0);
}

/* 0 when the range is not usable (not finite, lo > hi, or a step beyond fp32). */
static inline PZ_HD int pz_q_grid(float lo, float hi, int bits, int midtread, int minmax, pz_qgrid *g) {
    if (!(lo <= hi) || !isfinite(lo) || !isfinite(hi)) return 0;
    int32_t K = (1 << bits) - 1;
    /* zero-point layout: midtread (b >= 2) whose range holds 0 */
    int zl = midtread && bits >= 2 && lo <= 0.0f && hi >= 0.0f;
    float nint = (float)(zl ? K - 1 : K);     /* intervals spanned by [lo, hi] */
    float st = (hi - lo) / nint;
    if (!isfinite(st)) return 0;
    g->fs = g->fd = 1.0f;
    if (st > 0.0f && st < 0x1p-126f) {
        g->fs = 0x1p64f;
        g->fd = 0x1p-64f;
        lo = PZ_FMUL(lo, 0x1p64f);
        hi = PZ_FMUL(hi, 0x1p64f);
        st = (hi - lo) / nint;
    }
    if (!zl) {                                /* midrise: levels lo + k*step */
        g->lo = lo;
        g->step = st;
        g->inv = st > 0.0f ? 1.0f / st : 0.0f;
        g->off = -lo * g->inv;
        return 1;
    }
    /* midtread: levels (k - z)*step, z the zero code */
    int32_t z;
    if (!minmax) {
        z = K / 2;                            /* L = 2^(b-1) - 1: levels -L..L */
        if (PZ_FMUL((float)z, st) < hi) st = pz_u2f(pz_f2u(st) + 1u);   /* L*step >= s */
    } else if (st > 0.0f) {
        z = (int32_t)ceilf(-lo / st);         /* z*step >= -lo: 0 .. K-1 */
        z = z < K ? z : K;
        if (z < K && PZ_FMUL((float)z, st) < -lo) z++;
        if (PZ_FMUL((float)(K - z), st) < hi) st = pz_u2f(pz_f2u(st) + 1u);
    } else {
        z = 0;                                /* lo = hi = 0 */
    }
    g->step = st;
    g->lo = -PZ_FMUL((float)z, st);           /* so that code z decodes to 0 exactly */
    g->inv = st > 0.0f ? 1.0f / st : 0.0f;
    g->off = (float)z;
    return 1;
}
/* Stochastic, midrise: k = floor(y + u) (a tiny negative y truncates to 0, as
 * floor would), clamped to kmax; u = pz_uniform of the element; xs = x*fs. */
static inline PZ_HD uint8_t pz_q_code_stoch(float xs, float off, float inv, int32_t kmax, float u) {
    int32_t k = (int32_t)(fmaf(xs, inv, off) + u);
    return (uint8_t)(k < kmax ? k : kmax);
}
/* Stochastic, midtread: k = floor(y) + [u < y - floor(y)] (y - floor(y) is
 * exact, so a value on a level, zero included, always gets that level; floor
 * by truncation, as y >= 0 up to rounding and a tiny negative y gets 0),
 * clamped to [0, kmax]. */
static inline PZ_HD uint8_t pz_q_code_stoch_mt(float xs, float off, float inv, int32_t kmax, float u) {
    float y = fmaf(xs, inv, off);
    int32_t k = (int32_t)y;
    k += u < y - (float)k ? 1 : 0;
    k = k > 0 ? k : 0;
    return (uint8_t)(k < kmax ? k : kmax);
}
/* Nearest (ties to even), clamped to [0, kmax]. */
static inline PZ_HD uint8_t pz_q_code_near(float xs, float off, float inv, int32_t kmax) {
    int32_t k = (int32_t)rintf(fmaf(xs, inv, off));
    k = k > 0 ? k : 0;
    return (uint8_t)(k < kmax ? k : kmax);
}
/* Decoded value of code k (a code above kmax, which no encoder writes, decodes
 * as kmax); pz_q_value_lin is the same for fd = 1 (the multiplication by 1 is
 * exact, so both give the same bits there). */
static inline PZ_HD float pz_q_value_lin(uint8_t k, int32_t kmax, float lo, float step) {
    int32_t kk = k < kmax ? (int32_t)k : kmax;
    return PZ_FADD(lo, PZ_FMUL((float)kk, step));
}
static inline PZ_HD float pz_q_value(uint8_t k, int32_t kmax, float lo, float step, float fd) {
    return PZ_FMUL(pz_q_value_lin(k, kmax, lo, step), fd);
}

/* ---- sign ---- */
/* scaled: bit = (x >= 0) */
static inline PZ_HD uint8_t pz_sign_bit_scaled(float x) { return x >= 0.0f ? 1 : 0; }
/* stochastic: P(bit) = (1 + x/s)/2 = x*hinv + 1/2 with hinv = 1/(2s) */
static inline PZ_HD float pz_sign_hinv(float s) { return s > 0.0f ? 0.5f / s : 0.0f; }
static inline PZ_HD uint8_t pz_sign_bit_stoch(float x, float hinv, float u) {
    return u < fmaf(x, hinv, 0.5f) ? 1 : 0;
}
/* decoded: scale * (+-1) + 0 (no -0 from a zero scale) */
static inline PZ_HD float pz_sign_value(uint8_t bit, float scale) {
    float pm = (float)(int32_t)(((uint32_t)bit & 1u) * 2u) - 1.0f;
    return PZ_FADD(PZ_FMUL(pm, scale), 0.0f);
}
/* the scale from the canonical sum of |x| over cnt elements (scaled mode) */
static inline PZ_HD float pz_sign_mean(double sum_abs, size_t cnt) { return (float)(sum_abs / (double)cnt); }

/* ---- nuq<b> ---- */
static inline PZ_HD int pz_nuq_s(int bits) { return (1 << (bits - 1)) - 1; }
/* 1/l_1 = 2^(s-1) for b >= 2 */
static inline PZ_HD float pz_nuq_smallest_inv(int bits) {
    return bits >= 2 ? pz_u2f((uint32_t)(pz_nuq_s(bits) - 1 + 127) << 23) : 0.0f;
}
/* the bucket norm as sent: sqrt of the canonical sum of squares */
static inline PZ_HD float pz_nuq_norm(double sumsq) { return (float)sqrt(sumsq); }
static inline PZ_HD float pz_nuq_inv(float norm) { return norm > 0.0f ? 1.0f / norm : 0.0f; }
/* A bucket whose norm is below 2^-126 (1/norm may overflow, and a subnormal
 * norm has few bits) is coded at fs = 2^64 times its size: r = (|x|*fs) *
 * pz_nuq_inv(norm*fs), both products exact; fs = 1 for any other bucket. */
static inline PZ_HD float pz_nuq_fs(float norm) { return norm < 0x1p-126f ? 0x1p64f : 1.0f; }

/* Level index of r in [0, 1], given as its bits rb, with u24 uniform in
 * [0, 2^24). Between l_j = 2^E and 2^(E+1) the probability of going up is
 * the mantissa fraction (23 bits, compared with 23 uniform bits); below l_1
 * it is r/l_1 (to 2^-24). */
static inline PZ_HD uint32_t pz_nuq_index(uint32_t rb, int s, float smallest_inv, uint32_t u24) {
    int32_t j0 = (int32_t)(rb >> 23) - 127 + s;
    uint32_t up_hi = (u24 >> 1) < (rb & 0x7fffffu) ? 1u : 0u;
    uint32_t pb = pz_f2u(pz_u2f(rb) * smallest_inv);   /* r / l_1, only used when < 1 */
    pb = pb < 0x3f800000u ? pb : 0x3f800000u;
    uint32_t p24 = (uint32_t)(int32_t)(pz_u2f(pb) * 0x1p24f);
    uint32_t up_lo = u24 < p24 ? 1u : 0u;
    return j0 >= 1 ? (uint32_t)j0 + up_hi : up_lo;
}
static inline PZ_HD float pz_nuq_level(uint32_t j, int s) {
    return j ? pz_u2f((uint32_t)((int32_t)j - s + 127) << 23) : 0.0f;
}
/* The b-bit code of x (b >= 2): (sign << (b-1)) | j; h = pz_uhash2 of the
 * element (u24 = h >> 8); fs and inv = pz_nuq_inv(norm*fs) of its bucket. */
static inline PZ_HD uint8_t pz_nuq_code(float x, float fs, float inv, int b, int s, float smallest_inv, uint32_t h) {
    uint32_t u24 = h >> 8;
    uint32_t rb = pz_f2u(PZ_FMUL(fabsf(x), fs) * inv);
    rb = rb < 0x3f800000u ? rb : 0x3f800000u;   /* r <= 1 */
    uint32_t jx = pz_nuq_index(rb, s, smallest_inv, u24);
    uint32_t neg = (pz_f2u(x) >> 31) & (jx != 0);
    return (uint8_t)(jx | (neg ? (1u << (b - 1)) : 0u));
}
/* b = 1: code 1 (= +|v|) with probability (1 + x/|v|)/2; u = pz_uniform */
static inline PZ_HD uint8_t pz_nuq_code1(float x, float fs, float inv, float u) {
    return u < fmaf(PZ_FMUL(x, fs), 0.5f * inv, 0.5f) ? 1 : 0;
}
static inline PZ_HD float pz_nuq_value(uint8_t code, float norm, int b, int s) {
    if (b == 1) return code ? norm : -norm;
    uint32_t jmask = (1u << (b - 1)) - 1;
    float v = norm * pz_nuq_level(code & jmask, s);
    return (code >> (b - 1)) ? -v : v;
}
/* Elias-gamma(j + 1) then, for j > 0, the sign bit, for a b-bit code:
 * returns the bit count and puts the bits (MSB first, right-aligned) in *bits. */
static inline PZ_HD int pz_nuq_elias(uint8_t code, int b, uint32_t *bits) {
    uint32_t jx = code & ((1u << (b - 1)) - 1), v = jx + 1;
    int L = 0;
    while ((v >> L) > 1u) L++;
    L++;                                        /* bit length of v */
    if (jx) {
        *bits = (v << 1) | (uint32_t)(code >> (b - 1));
        return 2 * L;
    }
    *bits = 1;
    return 1;
}

/* ---- topk values=q8 ---- */
/* inv = 127/s (0 for s = 0); q = rne(x*inv) clamped to [-127, 127] */
static inline PZ_HD float pz_topk_q8_inv(float s) { return s > 0 ? 127.0f / s : 0.0f; }
static inline PZ_HD int8_t pz_topk_q8(float x, float inv) {
    float r = pz_clampf(pz_round_near(x * inv), -127.0f, 127.0f);
    return (int8_t)(int)r;
}

#endif
