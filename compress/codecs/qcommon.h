/* qcommon.h: pieces shared by the scaled codecs q, sign and nuq (private).
 *
 * Groups (a scale per group) of a tensor whose last dim C is the channel:
 *   channel: column c = elements c, c+C, c+2C, ...   (C groups, strided)
 *   row:     elements [r*C, (r+1)*C)                 (numel/C groups)
 *   <N>:     elements [g*N, min((g+1)*N, numel))    (ceil(numel/N) groups)
 *   tensor:  all elements                            (1 group)
 * Codes are always laid out in flat (row-major) element order. */
#ifndef PZ_QCOMMON_H
#define PZ_QCOMMON_H

#include <string.h>

#include "compress/core/codec_impl.h"
#include "compress/core/elem.h"
#include "compress/core/elem_codecs.h"
#include "compress/core/spec.h"

/* elements per chunk of the encode/decode loops: a multiple of 8 (whole
 * packing groups) that divides 2^32 (one pz_ukey per chunk) */
#define PZ_CHUNK 4096

typedef struct {
    size_t n;       /* elements */
    size_t C;       /* last dim */
    size_t G;       /* groups */
    size_t span;    /* elements per contiguous group; 0 for channel groups */
} pz_groups;

static inline void pz_groups_init(pz_groups *g, const pz_codec_params *p, const pz_shape *s) {
    g->n = pz_shape_numel(s);
    g->C = (size_t)s->dims[s->ndim - 1];
    g->G = pz_group_count(p, s);
    switch (p->group_mode) {
    case PZ_GROUP_CHANNEL: g->span = 0; break;
    case PZ_GROUP_ROW: g->span = g->C; break;
    case PZ_GROUP_BLOCK: g->span = p->group_size; break;
    default: g->span = g->n; break;
    }
}

/* Group of element i, and the end of the run of elements from i (< e) that
 * share the group's parameters in a simple pattern: for contiguous groups the
 * run has one group; for channel groups the run is the rest of the row and
 * element i+j belongs to group (i % C) + j. */
static inline size_t pz_group_run(const pz_groups *g, size_t i, size_t e, size_t *first) {
    size_t end;
    if (g->span) {
        *first = i / g->span;
        end = (*first + 1) * g->span;
    } else {
        *first = i % g->C;
        end = i - *first + g->C;
    }
    return end < e ? end : e;
}

/* The encode walk of q and sign: x's n elements in chunks of PZ_CHUNK, each
 * with its own counter key (klo, khi: the stochastic codes' randomness), and
 * each chunk in runs of pz_group_run (elements i..re, m of them, the first in
 * group gi). RUN (a statement) writes the run's m codes to cd[0..m); the
 * chunk's codes are then packed b bits each into out. A macro, not a function
 * with a callback, so that each RUN's `omp simd` loop is compiled in place. */
#define PZ_ENCODE_RUNS(g, key, b, out, ...)                                              \
    do {                                                                                 \
        uint8_t codes_[PZ_CHUNK];                                                        \
        for (size_t a_ = 0; a_ < (g).n; a_ += PZ_CHUNK) {                                \
            size_t e_ = a_ + PZ_CHUNK < (g).n ? a_ + PZ_CHUNK : (g).n;                   \
            pz_ukey k_ = pz_ukey_at((key), a_);                                          \
            uint32_t klo = k_.lo, khi = k_.hi;                                           \
            for (size_t i = a_; i < e_;) {                                               \
                size_t gi, re = pz_group_run(&(g), i, e_, &gi);                          \
                uint8_t *cd = codes_ + (i - a_);                                         \
                size_t m = re - i;                                                       \
                uint32_t i32 = (uint32_t)i;                                              \
                __VA_ARGS__;                                                             \
                i = re;                                                                  \
            }                                                                            \
            pz_pack_codes(codes_, e_ - a_, (b), (out) + (a_ / 8) * (size_t)(b));         \
        }                                                                                \
    } while (0)

/* Order-preserving map of float bits to int32 (and back: same function). */
static inline PZ_HD int32_t pz_ord32(uint32_t b) { return (int32_t)(b ^ ((uint32_t)((int32_t)b >> 31) >> 1)); }

/* Scales on the wire: fp32 or fp16, little-endian. dir: +1 round up, -1 round
 * down, 0 nearest. Returns the value as the receiver will read it. */
static inline PZ_HD float pz_scale_store(float v, int fp32, int dir) {
    if (fp32) return v;
    uint16_t h = dir > 0 ? pz_f32_to_f16_up(v) : dir < 0 ? pz_f32_to_f16_down(v) : pz_f32_to_f16(v);
    return pz_f16_to_f32(h);
}
static inline PZ_HD void pz_scale_put(uint8_t *out, size_t i, float stored, int fp32) {
    if (fp32) {
        memcpy(out + 4 * i, &stored, 4);
    } else {
        uint16_t h = pz_f32_to_f16(stored);   /* exact: stored is an fp16 value */
        memcpy(out + 2 * i, &h, 2);
    }
}
static inline PZ_HD float pz_scale_get(const uint8_t *in, size_t i, int fp32) {
    if (fp32) {
        float v;
        memcpy(&v, in + 4 * i, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, in + 2 * i, 2);
    return pz_f16_to_f32(h);
}
/* q's group gi on the wire: its range [*lo, *hi] (absmax: [-*hi, *hi], *lo
 * unused) rounded outward to what the scales can hold and written as the
 * payload's scales; *lo and *hi become what the receiver reads. With fp16
 * scales, a range whose ends both round to 0 in fp16 (|lo|, |hi| <= 2^-25:
 * the scale underflows) is sent as [0, 0]: the group decodes to zeros
 * instead of sitting on a grid up to 10^30 times too coarse. */
static inline PZ_HD void pz_q_range_put(uint8_t *out, size_t gi, int minmax, int fp32, float *lo, float *hi) {
    if (!fp32 && (pz_f32_to_f16(*hi) & 0x7fffu) == 0 && (!minmax || (pz_f32_to_f16(*lo) & 0x7fffu) == 0)) {
        *lo = 0.0f;
        *hi = 0.0f;
    }
    if (minmax) {
        *lo = pz_scale_store(*lo, fp32, -1);
        *hi = pz_scale_store(*hi, fp32, +1);
        pz_scale_put(out, 2 * gi, *lo, fp32);
        pz_scale_put(out, 2 * gi + 1, *hi, fp32);
    } else {
        *hi = pz_scale_store(*hi, fp32, +1);
        *lo = -*hi;
        pz_scale_put(out, gi, *hi, fp32);
    }
}
/* q's range [*lo, *hi] of group gi as the payload's scales give it: minmax
 * stores lo and hi, absmax stores s for [-s, s]. */
static inline PZ_HD void pz_q_range_get(const uint8_t *in, size_t gi, int minmax, int fp32, float *lo, float *hi) {
    if (minmax) {
        *lo = pz_scale_get(in, 2 * gi, fp32);
        *hi = pz_scale_get(in, 2 * gi + 1, fp32);
    } else {
        *hi = pz_scale_get(in, gi, fp32);
        *lo = -*hi;
    }
}

#endif
