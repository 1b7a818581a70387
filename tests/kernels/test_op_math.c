/* test_op_math.c: the shared per-element formulas of kernels/op_math.h (the
 * ones the CUDA kernels run) against the CPU backend, on the host, so the
 * GPU's arithmetic is checked on machines without a GPU.
 * GELU and its derivative over [-12, 12] and the tails; AdamW over random
 * states for several steps. The CPU backend uses its own vectorized expf, so
 * the bound is a few ulp, not bitwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/backend.h"
#include "kernels/op_math.h"
#include "base/mem.h"
#include "base/rng.h"

static int fails;

static void expect_close(const char *what, size_t i, float want, float got, float atol, float rtol) {
    if (fabsf(got - want) <= atol + rtol * fabsf(want)) return;
    if (fails++ < 10) printf("FAIL %s at %zu: cpu %.9g shared %.9g\n", what, i, (double)want, (double)got);
}

int main(void) {
    const pz_backend *cpu = pz_backend_cpu();
    enum { n = 200001 };
    float *x = xmalloc(n * sizeof(float)), *y = xmalloc(n * sizeof(float));
    float *d = xmalloc(n * sizeof(float)), *g = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        x[i] = -12.0f + 24.0f * (float)i / (float)(n - 1);
        d[i] = 1.0f;
        g[i] = 0.0f;
    }
    x[0] = -100.0f; x[1] = 100.0f; x[2] = 0.0f; x[3] = -1e-30f;
    cpu->gelu_forward(y, x, n);
    cpu->gelu_backward(g, x, d, n);
    for (size_t i = 0; i < n; i++) {
        expect_close("gelu", i, y[i], pz_gelu(x[i]), 1e-30f, 4e-7f);
        expect_close("gelu_grad", i, g[i], pz_gelu_grad(x[i]), 1e-7f, 4e-7f);
    }

    pz_rng rng;
    pz_rng_seed(&rng, 5);
    float *p = xmalloc(n * sizeof(float)), *m = xmalloc(n * sizeof(float)), *v = xmalloc(n * sizeof(float));
    float *p2 = xmalloc(n * sizeof(float)), *m2 = xmalloc(n * sizeof(float)), *v2 = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        g[i] = pz_rng_normal(&rng);
        p[i] = p2[i] = pz_rng_normal(&rng);
        m[i] = m2[i] = 0.1f * pz_rng_normal(&rng);
        v[i] = v2[i] = 0.01f * pz_rng_uniform(&rng);
    }
    for (int t = 1; t <= 5; t++) {
        const float b1 = 0.9f, b2 = 0.95f;
        cpu->adamw_update(p, g, m, v, n, 3e-4f, b1, b2, 1e-8f, 0.1f, 0.7f, t);
        const float ib1 = (float)(1.0 / (1.0 - pow(b1, t))), ib2 = (float)(1.0 / (1.0 - pow(b2, t)));
        for (size_t i = 0; i < n; i++)
            pz_adamw_elem(&p2[i], &m2[i], &v2[i], g[i], 3e-4f, b1, b2, 1e-8f, 0.1f, 0.7f, ib1, ib2);
    }
    for (size_t i = 0; i < n; i++) {
        expect_close("adamw param", i, p[i], p2[i], 1e-7f, 1e-6f);
        expect_close("adamw m", i, m[i], m2[i], 1e-8f, 1e-6f);
        expect_close("adamw v", i, v[i], v2[i], 1e-10f, 1e-6f);
    }
    printf("%s: %d failure(s) over %d GELU points and %d AdamW elements x 5 steps\n",
           fails ? "FAIL" : "ok", fails, n, n);
    free(x); free(y); free(d); free(g); free(p); free(m); free(v); free(p2); free(m2); free(v2);
    return fails ? 1 : 0;
}
