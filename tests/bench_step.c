/* bench_step.c: see bench_step.h. */
#include "tests/bench_step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/optim.h"
#include "stages/stage.h"
#include "base/clock.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/rng.h"

int bench_int_option(int argc, char **argv, int *i, const char *name, long lo, long hi, int *out) {
    if (strcmp(argv[*i], name) != 0 || *i + 1 >= argc) return 0;
    long v;
    if (pz_parse_int(argv[++*i], lo, hi, &v, name) != PZ_OK) pz_die("%s", pz_last_error());
    *out = (int)v;
    return 1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void wait_device(const bench_step_opts *o) {
    if (o->sync) o->sync();
}

void bench_train_steps(const pz_backend *be, const char *preset, int B, int T, int steps, double peak,
                       const bench_step_opts *o) {
    pz_gpt2_config cfg;
    if (pz_gpt2_preset(preset, &cfg) != PZ_OK) pz_die("%s", pz_last_error());
    if (T > cfg.max_seq_len) T = cfg.max_seq_len;
    pz_stage s;
    pz_stage_range r = pz_whole_model(&cfg);
    if (pz_stage_init(&s, be, &cfg, &r, B, T) != PZ_OK) pz_die("%s", pz_last_error());
    if (o->device_params) {   /* initialise on the host, copy to the device */
        float *host = xmalloc(s.params.numel * sizeof(float));
        pz_gpt2_params hp;
        pz_gpt2_params_bind(&hp, &cfg, &r, host);
        pz_gpt2_params_init(&hp, 42);
        be->from_host(s.param_mem, host, s.params.numel * sizeof(float));
        pz_gpt2_params_unbind(&hp);
        free(host);
    } else {
        pz_gpt2_params_init(&s.params, 42);
    }
    pz_acts a;
    pz_acts_init(&a, &s);
    pz_optim_config oc;
    pz_optim_config_default(&oc);
    pz_optim opt;
    pz_optim_init(&opt, &s, &oc);
    int N = B * T;
    int *inp = xmalloc((size_t)N * sizeof(int)), *tgt = xmalloc((size_t)N * sizeof(int));
    pz_rng rng;
    pz_rng_seed(&rng, 7);
    for (int i = 0; i < N; i++) {
        inp[i] = (int)pz_rng_below(&rng, (uint64_t)cfg.vocab_size);
        tgt[i] = (int)pz_rng_below(&rng, (uint64_t)cfg.vocab_size);
    }
    double *ms = xmalloc((size_t)steps * sizeof(double)), *fwd = xmalloc((size_t)steps * sizeof(double));
    double *bwd = xmalloc((size_t)steps * sizeof(double)), *upd = xmalloc((size_t)steps * sizeof(double));
    float loss = 0.0f;
    for (int k = -1; k < steps; k++) { /* k = -1: warm-up step, not timed */
        wait_device(o);
        double t0 = pz_now();
        pz_stage_zero_grad(&s);
        pz_stage_forward(&s, &a, inp, NULL, tgt, 1.0f / (float)N); /* ends with a copy of the losses: synced */
        double t1 = pz_now();
        pz_stage_backward(&s, &a, NULL, NULL);
        wait_device(o);
        double t2 = pz_now();
        double norm = sqrt(pz_grad_sumsq(&s));
        pz_optim_step(&opt, &s, pz_clip_scale(&opt.cfg, norm));
        wait_device(o);
        double t3 = pz_now();
        loss = a.loss;
        if (k >= 0) {
            ms[k] = 1e3 * (t3 - t0);
            fwd[k] = 1e3 * (t1 - t0);
            bwd[k] = 1e3 * (t2 - t1);
            upd[k] = 1e3 * (t3 - t2);
        }
    }
    double step_ms = bench_median(ms, steps);
    double nparams = (double)pz_gpt2_numel(&cfg);
    double flops_tok = 6.0 * nparams + 6.0 * cfg.num_layers * cfg.channels * T;
    double gflops = flops_tok * N / (step_ms * 1e-3) * 1e-9;
    int d = o->ms_digits;
    char loss_text[32] = "";
    if (o->show_loss) snprintf(loss_text, sizeof loss_text, "loss %.4f, ", (double)loss);
    printf("%-5s B=%d T=%d params=%.1fM: step %.*f ms (fwd %.*f, zero+bwd %.*f, clip+adamw %.*f; median of %d), "
           "%s%.0f tok/s, %.*f GFLOP/s = %.1f%% of %s\n",
           preset, B, T, nparams / 1e6, d, step_ms, d, bench_median(fwd, steps), d, bench_median(bwd, steps), d,
           bench_median(upd, steps), steps, loss_text, N / (step_ms * 1e-3), o->gflops_digits, gflops,
           100.0 * gflops / peak, o->peak_name);
    free(ms); free(fwd); free(bwd); free(upd); free(inp); free(tgt);
    pz_optim_free(&opt, &s);
    pz_acts_free(&a, &s);
    pz_stage_free(&s);
}
