/* heavy_tail.h: issue 14's heavy-tailed activations, one generator for the
 * codec tests (test_qgrid, test_hadamard, test_quant_error): rows x C Student-t
 * noise with 12 channels scaled by 40. */
#ifndef PZ_TESTS_HEAVY_TAIL_H
#define PZ_TESTS_HEAVY_TAIL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"

/* Student-t with df degrees of freedom: Z / sqrt(V / df), V = chi-square(df)
 * from df more normals (float arithmetic, in this order). */
static inline float heavy_student_t(pz_rng *r, int df) {
    float z = pz_rng_normal(r), v = 0.0f;
    for (int k = 0; k < df; k++) {
        float g = pz_rng_normal(r);
        v += g * g;
    }
    return z / sqrtf(v / (float)df);
}

/* x[rows * C]: Student-t(df) noise from seed, then channels ch[0..11] of
 * every row times 40; ch NULL: 12 distinct channels drawn from the same
 * generator after the noise (written to drawn[] when it is not NULL). */
static inline void heavy_tail_fill(float *x, size_t rows, size_t C, int df, uint64_t seed, const size_t *ch,
                                   size_t *drawn) {
    pz_rng r;
    pz_rng_seed(&r, seed);
    size_t n = rows * C, pick[12];
    for (size_t i = 0; i < n; i++) x[i] = heavy_student_t(&r, df);
    if (!ch) {
        for (int k = 0; k < 12; k++) {
            int fresh;
            do {
                pick[k] = (size_t)pz_rng_below(&r, C);
                fresh = 1;
                for (int j = 0; j < k; j++) fresh &= pick[j] != pick[k];
            } while (!fresh);
        }
        ch = pick;
    }
    for (size_t row = 0; row < rows; row++)
        for (int k = 0; k < 12; k++) x[row * C + ch[k]] *= 40.0f;
    if (drawn)
        for (int k = 0; k < 12; k++) drawn[k] = ch[k];
}

/* The two tensors of the tests (8 x 512 x 1024, df 3): test_qgrid's (seed
 * 14, fixed channels) and test_hadamard's (seed 20261125, drawn channels). */
#define HEAVY_QGRID_SEED 14
#define HEAVY_HADAMARD_SEED 20261125
static const size_t __attribute__((unused)) heavy_qgrid_channels[12] = {3, 77, 140, 255, 301, 402, 511, 600, 733, 850, 901, 1020};

#endif
