/* hadamard_cuda.cu: the hadamard() wrapper on the device (compress/wrappers/hadamard.c
 * is the CPU side). The rotation follows compress/wrappers/hadamard_elem.h step for
 * step: signs (exact), one kernel per butterfly stage h = 1, 2, ..., N/2
 * (each output one IEEE add or subtract of two values the previous stage
 * fixed), then the scale (one rounding; forward: also the inf/NaN check),
 * so for finite inputs the device's y and its decoded output are bitwise
 * the CPU's, and so are the messages whenever the inner codec's are. The
 * signs are derived per element from the same hash the CPU caches. */
#include "compress/cuda/codec_cuda_impl.h"

extern "C" {
#include "compress/wrappers/hadamard.h"
#include "compress/wrappers/hadamard_elem.h"
}

#define TPB 256
#define GRID(work) pz_blocks((work), TPB), TPB, 0, stream

/* y = x * s_c, c = the channel of element i */
__global__ void k_hd_signs(const float *x, float *y, size_t n, size_t C, uint64_t key) {
    PZ_GRID_STRIDE(i, n) y[i] = __fmul_rn(x[i], pz_hd_sign(key, i % C));
}

/* one butterfly stage: pair p of n/2 is (i, i + h), i = (p / h) * 2h + p % h
 * (blocks of 2h tile every row, as N divides C) */
__global__ void k_hd_stage(float *v, size_t half, size_t h) {
    PZ_GRID_STRIDE(p, half) {
        size_t i = (p / h) * 2 * h + p % h, j = i + h;
        float a = v[i], b = v[j];
        v[i] = __fadd_rn(a, b);
        v[j] = __fsub_rn(a, b);
    }
}

/* forward: v *= sc, flags bit 0 when a result is inf or NaN */
__global__ void k_hd_scale(float *v, size_t n, float sc, pz_dstat *st) {
    PZ_GRID_STRIDE(i, n) {
        float t = __fmul_rn(v[i], sc);
        v[i] = t;
        if (!isfinite(t)) atomicOr(&st->flags, 1u);
    }
}

/* inverse: v *= sc * s_c (the product is exact) */
__global__ void k_hd_unscale(float *v, size_t n, size_t C, float sc, uint64_t key) {
    PZ_GRID_STRIDE(i, n) v[i] = __fmul_rn(v[i], sc * pz_hd_sign(key, i % C));
}

static pz_status stages(float *v, size_t n, int logn, cudaStream_t stream) {
    for (int l = 0; l < logn; l++) {
        k_hd_stage<<<GRID(n / 2)>>>(v, n / 2, (size_t)1 << l);
        PZ_CU_LAUNCH();
    }
    return PZ_OK;
}

pz_status pz_cuda_hd_encode_(pz_codec *c, const float *x, const pz_shape *s, const pz_codec_ctx *ctx, uint8_t *pl,
                             size_t cap, size_t *len, uint8_t *wflags, cudaStream_t stream) {
    *len = 0;
    *wflags = 0;
    int logn = 0;
    pz_status st = pz_hadamard_block(c, s, &logn);
    if (st) return st;
    size_t n = pz_shape_numel(s), C = (size_t)s->dims[s->ndim - 1];
    pz_cstate *cs = pz_cstate_of_(c);
    void *vy;
    if ((st = pz_dgrow_(cs, PZ_DB_WRAP_Y, n * sizeof(float), &vy))) return st;
    if ((st = pz_stat_reset_(cs, stream))) return st;
    float *y = (float *)vy;
    uint64_t key = pz_hadamard_key(ctx);
    k_hd_signs<<<GRID(n)>>>(x, y, n, C, key);
    PZ_CU_LAUNCH();
    if ((st = stages(y, n, logn, stream))) return st;
    k_hd_scale<<<GRID(n)>>>(y, n, pz_hd_scale(logn), cs->st);
    PZ_CU_LAUNCH();
    pz_dstat ds;
    if ((st = pz_stat_get_(cs, stream, &ds))) return st;
    if (ds.flags & 1u) return pz_fail(PZ_ERR_ARG, "hadamard encode: input holds inf or NaN (or its rotation overflows)");
    st = pz_codec_encode_cuda(pz_codec_inner(c), y, s, ctx, pl, cap, len, stream);
    if (st) return pz_wrap_rewrap(st, PZ_ERR_SHAPE, "hadamard");
    *wflags = (uint8_t)logn;
    return PZ_OK;
}

pz_status pz_cuda_hd_decode_(pz_codec *c, uint8_t flags, const uint8_t *pl, size_t len, const pz_shape *s,
                             const pz_codec_ctx *ctx, float *out, cudaStream_t stream) {
    int logn = 0;
    pz_status st = pz_hadamard_check_flags(c, flags, s, &logn);
    if (st) return st;
    if ((st = pz_cuda_decode_exact_(pz_codec_inner(c), "hadamard: message", pl, len, ctx, out, s, stream))) return st;
    size_t n = pz_shape_numel(s), C = (size_t)s->dims[s->ndim - 1];
    if ((st = stages(out, n, logn, stream))) return st;
    k_hd_unscale<<<GRID(n)>>>(out, n, C, pz_hd_scale(logn), pz_hadamard_key(ctx));
    PZ_CU_LAUNCH();
    PZ_CU(cudaStreamSynchronize(stream));
    return PZ_OK;
}
