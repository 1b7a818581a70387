/* test_model.c: whole-model checks of stages/stage.c.
 *  1. finite-difference gradient check of a tiny GPT-2 (every tensor, sampled
 *     elements, in float with central differences);
 *  2. a model cut into two stages (embedding + block 0 | block 1 + head),
 *     chained by hand, gives the same loss, gradients and input gradient as
 *     the whole model in one stage;
 *  3. gradient accumulation: two micro-batches with dscale 1/(2N) give the
 *     mean of their single-batch gradients. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/stage.h"
#include "base/mem.h"
#include "base/rng.h"
#include "tests/check.h"

static const pz_gpt2_config CFG = {8, 37, 64, 2, 2, 16}; /* maxT V Vp L NH C */
enum { B = 2, T = 6, N = B * T };

static void random_params(pz_stage *s, uint64_t seed) {
    pz_gpt2_params_init(&s->params, seed);
    /* make LayerNorm and bias parameters non-trivial so every path is exercised */
    pz_rng r;
    pz_rng_seed(&r, seed + 1);
    int nt = pz_gpt2_params_tensors(&s->params, NULL);
    pz_tensor_info *ts = xcalloc((size_t)nt, sizeof *ts);
    pz_gpt2_params_tensors(&s->params, ts);
    for (int i = 0; i < nt; i++) {
        if (ts[i].ndim == 1)
            for (size_t k = 0; k < ts[i].numel; k++) ts[i].data[k] += 0.3f * pz_rng_normal(&r);
        else if (strcmp(ts[i].name, "wte.weight") != 0)
            for (size_t k = 0; k < ts[i].numel; k++) ts[i].data[k] *= 5.0f; /* larger signal */
    }
    free(ts);
}

static float loss_of(pz_stage *s, pz_acts *a, const int *inp, const int *tgt) {
    pz_stage_forward(s, a, inp, NULL, tgt, 0.0f);
    return a->loss;
}

static void test_gradcheck(const int *inp, const int *tgt) {
    pz_stage s;
    pz_stage_range r = pz_whole_model(&CFG);
    if (pz_stage_init(&s, pz_backend_cpu(), &CFG, &r, B, T) != PZ_OK) { CHECK(0, "init: %s", pz_last_error()); return; }
    random_params(&s, 11);
    pz_acts a;
    pz_acts_init(&a, &s);
    pz_stage_zero_grad(&s);
    pz_stage_forward(&s, &a, inp, NULL, tgt, 1.0f / N);
    pz_stage_backward(&s, &a, NULL, NULL);

    int nt = pz_gpt2_params_tensors(&s.params, NULL);
    pz_tensor_info *ts = xcalloc((size_t)nt, sizeof *ts);
    pz_gpt2_params_tensors(&s.params, ts);
    pz_rng r2;
    pz_rng_seed(&r2, 5);
    double worst = 0.0;
    const char *worst_name = "";
    for (int i = 0; i < nt; i++) {
        const float *g = s.grad_mem + ts[i].offset;
        size_t rows = ts[i].numel;
        if (strcmp(ts[i].name, "wte.weight") == 0) rows = (size_t)CFG.vocab_size * CFG.channels;
        float gmax = 0.0f;
        for (size_t k = 0; k < ts[i].numel; k++) gmax = fmaxf(gmax, fabsf(g[k]));
        for (int trial = 0; trial < 12; trial++) {
            size_t k = (size_t)pz_rng_below(&r2, rows);
            float *p = ts[i].data + k, save = *p, h = 1e-2f;
            *p = save + h; double lp = loss_of(&s, &a, inp, tgt);
            *p = save - h; double lm = loss_of(&s, &a, inp, tgt);
            *p = save;
            double fd = (lp - lm) / (2.0 * h);
            double err = fabs(fd - g[k]) / (1e-3 * gmax + 1e-4 + 2e-2 * fabs(fd));
            if (err > worst) { worst = err; worst_name = ts[i].name; }
            CHECK(err <= 1.0, "%s[%zu]: analytic %.6g vs finite difference %.6g", ts[i].name, k, g[k], fd);
        }
        if (strcmp(ts[i].name, "wte.weight") == 0)
            for (size_t k = rows; k < ts[i].numel; k++) CHECK(g[k] == 0.0f, "padded wte row gradient %zu nonzero", k);
    }
    printf("gradcheck: %d tensors x 12 elements, worst error %.3f of tolerance (%s)\n", nt, worst, worst_name);
    free(ts);
    pz_acts_free(&a, &s);
    pz_stage_free(&s);
}

static void test_two_stages(const int *inp, const int *tgt) {
    pz_stage whole, s0, s1;
    pz_stage_range rw = pz_whole_model(&CFG), r0 = {0, 1, 1, 0}, r1 = {1, 2, 0, 1};
    pz_stage_init(&whole, pz_backend_cpu(), &CFG, &rw, B, T);
    pz_stage_init(&s0, pz_backend_cpu(), &CFG, &r0, B, T);
    pz_stage_init(&s1, pz_backend_cpu(), &CFG, &r1, B, T);
    random_params(&whole, 3);
    /* copy parameters by name: the split must not depend on memory layout */
    pz_stage *parts[2] = {&s0, &s1};
    int nw = pz_gpt2_params_tensors(&whole.params, NULL);
    pz_tensor_info *tw = xcalloc((size_t)nw, sizeof *tw);
    pz_gpt2_params_tensors(&whole.params, tw);
    for (int p = 0; p < 2; p++) {
        int n = pz_gpt2_params_tensors(&parts[p]->params, NULL);
        pz_tensor_info *t = xcalloc((size_t)n, sizeof *t);
        pz_gpt2_params_tensors(&parts[p]->params, t);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < nw; j++)
                if (strcmp(t[i].name, tw[j].name) == 0) memcpy(t[i].data, tw[j].data, t[i].numel * sizeof(float));
        free(t);
    }
    pz_acts aw, a0, a1;
    pz_acts_init(&aw, &whole); pz_acts_init(&a0, &s0); pz_acts_init(&a1, &s1);
    pz_stage_zero_grad(&whole); pz_stage_zero_grad(&s0); pz_stage_zero_grad(&s1);
    pz_stage_forward(&whole, &aw, inp, NULL, tgt, 1.0f / N);
    pz_stage_backward(&whole, &aw, NULL, NULL);
    const float *x = pz_stage_forward(&s0, &a0, inp, NULL, NULL, 0.0f);
    CHECK(x != NULL, "first stage returned no activation");
    pz_stage_forward(&s1, &a1, NULL, x, tgt, 1.0f / N);
    CHECK(a1.loss == aw.loss, "split loss %.9g != whole %.9g", a1.loss, aw.loss);
    float *dx = xmalloc((size_t)N * CFG.channels * sizeof(float));
    pz_stage_backward(&s1, &a1, NULL, dx);
    pz_stage_backward(&s0, &a0, dx, NULL);
    /* every tensor's gradient must match exactly (same ops in the same order),
     * except wte which the split holds twice: the two copies' gradients sum to the whole's */
    int mismatches = 0;
    for (int p = 0; p < 2; p++) {
        int n = pz_gpt2_params_tensors(&parts[p]->grads, NULL);
        pz_tensor_info *t = xcalloc((size_t)n, sizeof *t);
        pz_gpt2_params_tensors(&parts[p]->grads, t);
        for (int i = 0; i < n; i++) {
            if (strcmp(t[i].name, "wte.weight") == 0) continue;
            for (int j = 0; j < nw; j++)
                if (strcmp(t[i].name, tw[j].name) == 0 &&
                    memcmp(t[i].data, whole.grad_mem + tw[j].offset, t[i].numel * sizeof(float)) != 0) {
                    mismatches++;
                    /* fputs: gcc's format checker misreads the array under sanitizers */
                    fputs("split gradient differs: ", stdout);
                    puts(t[i].name);
                }
        }
        free(t);
    }
    double maxdiff = 0.0;
    for (size_t k = 0; k < (size_t)CFG.padded_vocab_size * CFG.channels; k++) {
        double d = fabs((double)s0.grads.wte[k] + s1.grads.wte[k] - whole.grads.wte[k]);
        if (d > maxdiff) maxdiff = d;
    }
    CHECK(maxdiff <= 1e-6, "tied wte gradient: stage sum differs from whole by %g", maxdiff);
    CHECK(mismatches == 0, "%d gradient tensors of the split differ from the whole's", mismatches);
    printf("two stages: loss %.6f equal, %d tensor mismatches, wte sum max diff %.2g\n", a1.loss, mismatches, maxdiff);
    free(dx); free(tw);
    pz_acts_free(&aw, &whole); pz_acts_free(&a0, &s0); pz_acts_free(&a1, &s1);
    pz_stage_free(&whole); pz_stage_free(&s0); pz_stage_free(&s1);
}

static void test_accumulation(const int *inp, const int *tgt, const int *inp2, const int *tgt2) {
    pz_stage s;
    pz_stage_range r = pz_whole_model(&CFG);
    pz_stage_init(&s, pz_backend_cpu(), &CFG, &r, B, T);
    random_params(&s, 9);
    pz_acts a;
    pz_acts_init(&a, &s);
    size_t n = s.grads.numel;
    float *g1 = xmalloc(n * sizeof(float)), *g2 = xmalloc(n * sizeof(float));
    pz_stage_zero_grad(&s);
    pz_stage_forward(&s, &a, inp, NULL, tgt, 1.0f / N);
    pz_stage_backward(&s, &a, NULL, NULL);
    memcpy(g1, s.grad_mem, n * sizeof(float));
    pz_stage_zero_grad(&s);
    pz_stage_forward(&s, &a, inp2, NULL, tgt2, 1.0f / N);
    pz_stage_backward(&s, &a, NULL, NULL);
    memcpy(g2, s.grad_mem, n * sizeof(float));
    pz_stage_zero_grad(&s);
    pz_stage_forward(&s, &a, inp, NULL, tgt, 0.5f / N);
    pz_stage_backward(&s, &a, NULL, NULL);
    pz_stage_forward(&s, &a, inp2, NULL, tgt2, 0.5f / N);
    pz_stage_backward(&s, &a, NULL, NULL);
    double worst = 0.0;
    for (size_t k = 0; k < n; k++) {
        double want = 0.5 * ((double)g1[k] + g2[k]);
        double err = fabs(s.grad_mem[k] - want) / (1e-6 + 1e-5 * fabs(want));
        if (err > worst) worst = err;
    }
    CHECK(worst <= 1.0, "accumulated gradient differs from the mean: %.3g of tolerance", worst);
    printf("accumulation: worst %.3f of tolerance\n", worst);
    free(g1); free(g2);
    pz_acts_free(&a, &s);
    pz_stage_free(&s);
}

int main(void) {
    pz_backend_cpu_set_threads(2);
    int inp[N], tgt[N], inp2[N], tgt2[N];
    pz_rng r;
    pz_rng_seed(&r, 1);
    for (int i = 0; i < N; i++) {
        inp[i] = (int)pz_rng_below(&r, CFG.vocab_size); tgt[i] = (int)pz_rng_below(&r, CFG.vocab_size);
        inp2[i] = (int)pz_rng_below(&r, CFG.vocab_size); tgt2[i] = (int)pz_rng_below(&r, CFG.vocab_size);
    }
    test_gradcheck(inp, tgt);
    test_two_stages(inp, tgt);
    test_accumulation(inp, tgt, inp2, tgt2);
    return check_summary("test_model");
}
