/* rel_l2.h: ||x - y|| / ||x|| in double (||x - y|| when x is all zeros),
 * the error measure of the codec tests (and of `pipezip codec`). */
#ifndef PZ_TESTS_REL_L2_H
#define PZ_TESTS_REL_L2_H

#include <math.h>
#include <stddef.h>

static inline double rel_l2(const float *x, const float *y, size_t n) {
    double e = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        double v = (double)x[i] - (double)y[i];
        e += v * v;
        d += (double)x[i] * (double)x[i];
    }
    return d > 0 ? sqrt(e / d) : sqrt(e);
}

#endif
