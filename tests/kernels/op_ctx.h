/* op_ctx.h: the buffers of a matmul and of an attention call and their
 * forward and backward as callbacks on them, for the CPU op tests
 * (tests/kernels/test_ops.c) and benchmarks (bench/bench_ops.c). */
#ifndef PZ_TESTS_OP_CTX_H
#define PZ_TESTS_OP_CTX_H

#include "kernels/backend.h"

typedef void (*op_fn)(void *ctx);

/* out (N, OC) = inp (N, C) . w (OC, C)^T + bias (OC); dout is the gradient
 * of out the backward takes */
typedef struct {
    const pz_backend *be;
    int N, C, OC;
    float *inp, *w, *bias, *out, *dout, *dinp, *dw, *db;
} mm_ctx;

void mm_forward(void *mm);
void mm_backward(void *mm);

/* causal attention of qkv (B, T, 3C), NH heads, into out (B, T, C) and att
 * (B, NH, T, T); dout is the gradient of out the backward takes */
typedef struct {
    const pz_backend *be;
    int B, T, C, NH;
    float *qkv, *out, *att, *dout, *dqkv, *scratch;
} att_ctx;

void att_forward(void *att);
void att_backward(void *att);

#endif
