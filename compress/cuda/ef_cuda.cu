/* ef_cuda.cu: the ef and ef21 wrappers on the device (compress/wrappers/wrappers.c
 * is the CPU side): the state vector per side, and the per-element rules of
 * compress/wrappers/wrap_elem.h, the CPU's very formulas, so the messages match byte
 * for byte. */
#include "compress/cuda/codec_cuda_impl.h"
#include "compress/wrappers/wrap_elem.h"

#define TPB 256
#define GRID(work) pz_blocks((work), TPB), TPB, 0, stream

/* y = what the sender encodes: ef x + e, ef21 x - g */
__global__ void k_ef_input(int ef21, const float *x, const float *v, float *y, size_t n) {
    PZ_GRID_STRIDE(i, n) y[i] = ef21 ? pz_ef21_input(x[i], v[i]) : pz_ef_input(x[i], v[i]);
}
/* ef: e = y - C(y) */
__global__ void k_ef_residual(const float *y, const float *cy, float *e, size_t n) {
    PZ_GRID_STRIDE(i, n) e[i] = pz_ef_residual(y[i], cy[i]);
}
/* ef21: g += C(...); out (may be NULL) = g */
__global__ void k_ef21_update(float *g, const float *c, float *out, size_t n) {
    PZ_GRID_STRIDE(i, n) {
        g[i] = pz_ef21_update(g[i], c[i]);
        if (out) out[i] = g[i];
    }
}

/* the side's state: checks the shape fixed by its first message; with
 * commit, allocates it (zeros) and fixes the shape */
static pz_status vec_side(pz_cstate *cs, const char *name, int side, const pz_shape *s, size_t n, int commit,
                          cudaStream_t stream) {
    if (cs->have[side]) {
        if (pz_shape_equal(&cs->shape[side], s)) return PZ_OK;
        char a[96], b[96];
        pz_shape_format(s, a, sizeof a);
        pz_shape_format(&cs->shape[side], b, sizeof b);
        return pz_fail(PZ_ERR_SHAPE, "%s: shape %s differs from the shape %s fixed by the first message", name, a,
                       b);
    }
    if (commit) {
        PZ_CU(cudaMalloc(&cs->v[side], (n ? n : 1) * sizeof(float)));
        PZ_CU(cudaMemsetAsync(cs->v[side], 0, n * sizeof(float), stream));
        cs->shape[side] = *s;
        cs->have[side] = 1;
    }
    return PZ_OK;
}

pz_status pz_cuda_ef_encode_(pz_codec *c, const float *x, const pz_shape *s, const pz_codec_ctx *ctx,
                              uint8_t *pl, size_t cap, size_t *len, cudaStream_t stream) {
    pz_cstate *cs = pz_cstate_of_(c);
    pz_codec *inner = pz_codec_inner(c);
    const char *name = pz_codec_wrap(c)->name;
    int ef21 = pz_codec_wrap(c)->kind == PZ_WRAP_EF21;
    size_t n = pz_shape_numel(s);
    pz_status st = vec_side(cs, name, PZ_WRAP_SIDE_SENDER, s, n, 0, stream);
    void *vy, *vc;
    if (!st) st = pz_dgrow_(cs, PZ_DB_WRAP_Y, n * sizeof(float), &vy);
    if (!st) st = pz_dgrow_(cs, PZ_DB_WRAP_C, n * sizeof(float), &vc);
    if (st) return st;
    float *y = (float *)vy, *cd = (float *)vc, *v = cs->v[PZ_WRAP_SIDE_SENDER];
    if (!v) PZ_CU(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    else k_ef_input<<<GRID(n)>>>(ef21, x, v, y, n);
    PZ_CU_LAUNCH();
    st = pz_codec_encode_cuda(inner, y, s, ctx, pl, cap, len, stream);
    if (st) return pz_wrap_rewrap(st, PZ_ERR_SHAPE, name);
    st = pz_cuda_decode_exact_(inner, ef21 ? "ef21: own message" : "ef: own message", pl, *len, ctx, cd, s, stream);
    if (!st) st = vec_side(cs, name, PZ_WRAP_SIDE_SENDER, s, n, 1, stream);
    if (st) {
        *len = 0;
        return st;
    }
    float *e = cs->v[PZ_WRAP_SIDE_SENDER];
    if (ef21) k_ef21_update<<<GRID(n)>>>(e, cd, NULL, n);
    else k_ef_residual<<<GRID(n)>>>(y, cd, e, n);
    PZ_CU_LAUNCH();
    PZ_CU(cudaStreamSynchronize(stream));
    return PZ_OK;
}

pz_status pz_cuda_ef_decode_(pz_codec *c, const uint8_t *pl, size_t len, const pz_shape *s,
                              const pz_codec_ctx *ctx, float *out, cudaStream_t stream) {
    pz_codec *inner = pz_codec_inner(c);
    const char *name = pz_codec_wrap(c)->name;
    /* ef's receiver keeps no state: a plain decode */
    if (pz_codec_wrap(c)->kind == PZ_WRAP_EF)
        return pz_cuda_decode_exact_(inner, "ef: message", pl, len, ctx, out, s, stream);
    pz_cstate *cs = pz_cstate_of_(c);
    size_t n = pz_shape_numel(s);
    void *vc;
    pz_status st = vec_side(cs, name, PZ_WRAP_SIDE_RECEIVER, s, n, 0, stream);
    if (!st) st = pz_dgrow_(cs, PZ_DB_WRAP_C, n * sizeof(float), &vc);
    if (!st) st = pz_cuda_decode_exact_(inner, "ef21: message", pl, len, ctx, (float *)vc, s, stream);
    if (!st) st = vec_side(cs, name, PZ_WRAP_SIDE_RECEIVER, s, n, 1, stream);
    if (st) return st;
    k_ef21_update<<<GRID(n)>>>(cs->v[PZ_WRAP_SIDE_RECEIVER], (const float *)vc, out, n);
    PZ_CU_LAUNCH();
    PZ_CU(cudaStreamSynchronize(stream));
    return PZ_OK;
}
