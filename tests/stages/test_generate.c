/* test_generate.c: the KV-cache forward (stages/generate.c) against the
 * training forward (stages/stage.c) of the same random model, position by
 * position and with the prompt in chunks; its argument checks; and the
 * sampler's greedy, temperature, top-k and top-p draws. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/mem.h"
#include "stages/generate.h"
#include "stages/stage.h"
#include "tests/check.h"

static float max_rel_diff(const float *a, const float *b, int n) {
    float scale = 0.0f, d = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(b[i]) > scale) scale = fabsf(b[i]);
        if (fabsf(a[i] - b[i]) > d) d = fabsf(a[i] - b[i]);
    }
    return d / (scale > 0 ? scale : 1);
}

static void test_cache_matches_training_forward(void) {
    const pz_backend *be = pz_backend_cpu();
    pz_gpt2_config cfg = {32, 100, 128, 3, 4, 48};
    const int T = 20;
    pz_stage_range r = pz_whole_model(&cfg);
    pz_stage s;
    CHECK_STATUS(pz_stage_init(&s, be, &cfg, &r, 1, T), PZ_OK, NULL);
    pz_gpt2_params_init(&s.params, 7);
    pz_acts a;
    pz_acts_init(&a, &s);
    int tok[20], tgt[20];
    for (int t = 0; t < T; t++) { tok[t] = (t * 37 + 11) % cfg.vocab_size; tgt[t] = tok[t]; }
    pz_stage_forward(&s, &a, tok, NULL, tgt, 0.0f);   /* dscale 0 keeps the logits */
    const int Vp = cfg.padded_vocab_size;

    pz_gen g;
    CHECK_STATUS(pz_gen_init(&g, be, &s.params, 6), PZ_OK, NULL);
    /* one position at a time */
    float worst = 0.0f;
    for (int t = 0; t < T; t++) {
        CHECK_STATUS(pz_gen_forward(&g, &tok[t], 1), PZ_OK, NULL);
        float d = max_rel_diff(g.logits, a.logits + (size_t)t * Vp, cfg.vocab_size);
        if (d > worst) worst = d;
    }
    CHECK(worst < 1e-5f, "cached logits differ from the training forward's by %g", (double)worst);
    /* a prompt of 6, then 5, then single positions */
    pz_gen_reset(&g);
    int at = 0;
    worst = 0.0f;
    for (int n = 6; at < T; at += n, n = n > 1 ? n - 1 : 1) {
        if (at + n > T) n = T - at;
        CHECK_STATUS(pz_gen_forward(&g, &tok[at], n), PZ_OK, NULL);
        float d = max_rel_diff(g.logits, a.logits + (size_t)(at + n - 1) * Vp, cfg.vocab_size);
        if (d > worst) worst = d;
    }
    CHECK(worst < 1e-5f, "chunked logits differ from the training forward's by %g", (double)worst);
    CHECK(g.pos == T, "cache holds %d positions, expected %d", g.pos, T);
    /* arguments */
    int bad = 100;
    CHECK_STATUS(pz_gen_forward(&g, tok, 7), PZ_ERR_ARG, "out of range [1, 6]");
    pz_gen_reset(&g);
    CHECK_STATUS(pz_gen_forward(&g, &bad, 1), PZ_ERR_ARG, "outside the model's vocabulary [0, 100)");
    for (int t = 0; t < 32; t += 4) CHECK_STATUS(pz_gen_forward(&g, tok, 4), PZ_OK, NULL);
    CHECK_STATUS(pz_gen_forward(&g, tok, 1), PZ_ERR_ARG, "context of 32");
    pz_gen_free(&g);
    pz_gen g2;
    CHECK_STATUS(pz_gen_init(&g2, be, &s.params, 33), PZ_ERR_ARG, "out of range [1, 32]");
    pz_acts_free(&a, &s);
    pz_stage_free(&s);
}

static void test_sampler(void) {
    /* probabilities 0.5, 0.25, 0.15, 0.1 */
    const double pr[4] = {0.5, 0.25, 0.15, 0.1};
    float logits[4];
    for (int i = 0; i < 4; i++) logits[i] = (float)log(pr[i]) + 3.0f;
    void *scratch = xmalloc(pz_sample_scratch_bytes(4));
    pz_rng rng;
    pz_rng_seed(&rng, 42);
    pz_sampling greedy = {0.0f, 0, 1.0f};
    CHECK(pz_sample(logits, 4, &greedy, &rng, scratch) == 0, "greedy is not the argmax");
    float tie[3] = {1.0f, 2.0f, 2.0f};
    CHECK(pz_sample(tie, 3, &greedy, &rng, scratch) == 1, "greedy breaks a tie away from the first");
    const struct { pz_sampling s; double want[4]; } cases[] = {
        {{1.0f, 0, 1.0f}, {0.5, 0.25, 0.15, 0.1}},
        {{1.0f, 2, 1.0f}, {2.0 / 3, 1.0 / 3, 0, 0}},
        {{1.0f, 0, 0.7f}, {2.0 / 3, 1.0 / 3, 0, 0}},    /* 0.5 < 0.7 <= 0.75 */
        {{1.0f, 0, 0.5f}, {1, 0, 0, 0}},
        /* top-p applies to the top-k tokens renormalised (0.9 of probability):
         * 0.8 of it takes two (0.75 / 0.9 = 0.83), 0.9 of it three */
        {{1.0f, 3, 0.8f}, {2.0 / 3, 1.0 / 3, 0, 0}},
        {{1.0f, 3, 0.9f}, {0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0}},
        {{2.0f, 0, 1.0f}, {0, 0, 0, 0}},                /* filled below: p^(1/2) normalised */
    };
    const int n = 40000;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double want[4], z = 0;
        for (int i = 0; i < 4; i++) want[i] = cases[c].want[i];
        if (cases[c].s.temperature == 2.0f) {
            for (int i = 0; i < 4; i++) z += sqrt(pr[i]);
            for (int i = 0; i < 4; i++) want[i] = sqrt(pr[i]) / z;
        }
        int count[4] = {0};
        for (int k = 0; k < n; k++) count[pz_sample(logits, 4, &cases[c].s, &rng, scratch)]++;
        for (int i = 0; i < 4; i++) {
            double f = (double)count[i] / n;
            CHECK(fabs(f - want[i]) < 0.015 && (want[i] > 0 || count[i] == 0),
                  "case %zu: token %d drawn %.4f of the time, expected %.4f", c, i, f, want[i]);
        }
    }
    free(scratch);
}

int main(void) {
    test_cache_matches_training_forward();
    test_sampler();
    return check_summary("generate");
}
