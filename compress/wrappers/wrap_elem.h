/* wrap_elem.h: the per-element rules of the stateful wrappers ef(), ef21()
 * and aq(), one copy for the CPU (compress/wrappers/wrappers.c) and the GPU
 * (compress/cuda/ef_cuda.cu, aq_cuda.cu), as elem.h is for quantization.
 *
 * Why one copy: a CPU sender and a GPU receiver (or the reverse) must keep
 * bitwise equal state, and the sender's bytes must not depend on the
 * backend. Each rule is a single IEEE-754 single-precision add or subtract
 * (round to nearest even), which has nothing to contract into an fma and
 * rounds the same on every compiler and device.
 *
 * Also here: what the two sides must agree on besides arithmetic, the aq
 * payload's flags bits and the warm-up message's random stream. */
#ifndef PZ_WRAP_ELEM_H
#define PZ_WRAP_ELEM_H

#include <stddef.h>
#include <stdint.h>

#include "base/hd.h"

/* ef (sender): y = x + e, the input plus what earlier messages lost */
PZ_HD static inline float pz_ef_input(float x, float e) { return x + e; }
/* ef (sender): e = y - C(y), what this message loses */
PZ_HD static inline float pz_ef_residual(float y, float cy) { return y - cy; }
/* ef21 (sender): what is sent, x - g */
PZ_HD static inline float pz_ef21_input(float x, float g) { return x - g; }
/* ef21 (both sides): g += decoded message */
PZ_HD static inline float pz_ef21_update(float g, float c) { return g + c; }
/* aq (sender): the delta row sent for a seen id, x - m(id) */
PZ_HD static inline float pz_aq_delta(float x, float m) { return x - m; }
/* aq (both sides): m(id) += decoded delta */
PZ_HD static inline float pz_aq_update(float m, float d) { return m + d; }

/* aq payload flags: a warm-up message is present, a delta message is
 * present; both: a bitmap says which samples are warm-up */
#define PZ_AQ_HAS_WARMUP 1u
#define PZ_AQ_HAS_DELTA 2u
#define PZ_AQ_MIXED (PZ_AQ_HAS_WARMUP | PZ_AQ_HAS_DELTA)

/* aq: the bitmap of a mixed message marks the warm-up samples, sample i
 * in bit i%8 of byte i/8, LSB first. The sender sets the bits of a zeroed
 * bitmap; the receiver reads them (without a bitmap the flags say it all). */
PZ_HD static inline void pz_aq_mark_warmup(uint8_t *bitmap, size_t i) { bitmap[i / 8] |= (uint8_t)(1u << (i % 8)); }
PZ_HD static inline int pz_aq_is_warmup(unsigned flags, const uint8_t *bitmap, size_t i) {
    return flags == PZ_AQ_MIXED ? (bitmap[i / 8] >> (i % 8)) & 1 : flags == PZ_AQ_HAS_WARMUP;
}

/* aq: the warm-up message draws from the ctx's stream with seed ^ this, so
 * that it and the delta message use different random numbers */
#define PZ_AQ_WARMUP_SALT 0x61717761726d7570ULL /* "aqwarmup" */

#endif
