/* bench_step.h: the timed training steps bench/bench_train.c (CPU) and
 * tests/gpu/bench_gpu.c (CUDA) share. */
#ifndef PZ_TESTS_BENCH_STEP_H
#define PZ_TESTS_BENCH_STEP_H

#include "kernels/backend.h"

/* If argv[*i] is `name` and a value follows: parses it as an integer in
 * [lo, hi] into *out (dies with the parser's message if it is not), moves *i
 * past it and returns 1; else returns 0. */
int bench_int_option(int argc, char **argv, int *i, const char *name, long lo, long hi, int *out);

/* median of v[0..n) (sorts v) */
double bench_median(double *v, int n);

typedef struct {
    int device_params;    /* parameters live on the device: initialise a host copy and upload it */
    void (*sync)(void);   /* waits for the device before a time stamp (NULL: nothing to wait for) */
    int ms_digits, gflops_digits;
    int show_loss;
    const char *peak_name;   /* what the GFLOP/s are a share of, in the printed line */
} bench_step_opts;

/* One warm-up step, then `steps` timed training steps (zero_grad + forward,
 * backward, clip + AdamW) of the whole GPT-2 `preset` at B x T (T at most the
 * preset's context) on backend be, inputs and targets fixed; prints the
 * medians, tokens/s and the model GFLOP/s (llm.c's estimate: 6 * params +
 * 6 * L * C * T per token) as a share of peak GFLOP/s. */
void bench_train_steps(const pz_backend *be, const char *preset, int B, int T, int steps, double peak,
                       const bench_step_opts *o);

#endif
