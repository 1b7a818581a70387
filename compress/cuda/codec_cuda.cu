/* codec_cuda.cu: the codecs with the tensor in device memory (codec_cuda.h).
 *
 * The message framework of codec.c and message.c (header, +zstd, CRC) runs
 * on the host and calls back here for the payload (pz_codec_encode_with /
 * decode_with), so headers are the CPU's by construction. Payloads:
 *   fp32, fp16, bf16   device conversion, payload copied back.
 *   q<b>               device: per-group range (exact integer max/min, order
 *                      free), scales and grids per group, codes and packing;
 *   sign               device: max |x| or the canonical sum of |x| (a warp
 *                      per contiguous group, a thread per channel: the CPU's
 *                      order, elem_codecs.h), scales, bits;
 *   nuq<b>             device: bucket norms (canonical order, a warp per
 *                      bucket), codes; code=fixed packed on the device,
 *                      code=elias: codes copied back and the Elias stream
 *                      written on the host by nuq.c's own writer;
 *   topk               compress/cuda/topk_cuda.cu;
 *   ef(), ef21()       state on the device (below); aq(): aq_cuda.cu;
 *   jointsq, tah       the CPU codec on a host copy of the tensor.
 * The fp/q/sign/nuq kernels, encoders and decoders are in base_cuda.cu.
 * Decoders check scales, norms and padding on the host (G values and the
 * last packing group, with the CPU's formulas and messages), then expand on
 * the device; nuq code=elias, topk, jointsq and tah messages decode on the host and
 * the floats are copied to the device.
 * Every per-element formula is the PZ_HD function of compress/core/elem.h and
 * compress/core/elem_codecs.h that the CPU codec calls; nvcc runs with
 * --fmad=false and IEEE division and square root. */
#include "compress/cuda/cuda_common.h"
#include "compress/cuda/codec_cuda_impl.h"
#include "base/mem.h"

/* ================================================================ state */

void pz_cstate_free_(void *p) {
    pz_cstate *s = (pz_cstate *)p;
    if (!s) return;
    for (int k = 0; k < PZ_DB_COUNT; k++) cudaFree(s->d[k]);
    for (int r = 0; r < 2; r++) {
        cudaFree(s->v[r]);
        pz_cuda_aq_free_(&s->aq[r]);
    }
    cudaFree(s->st);
    free(s->h);
    free(s);
}

pz_cstate *pz_cstate_of_(pz_codec *c) {
    pz_cstate *s = (pz_cstate *)pz_codec_backend(c);
    if (!s) {
        s = (pz_cstate *)xcalloc(1, sizeof *s);
        pz_codec_set_backend(c, s, pz_cstate_free_);
    }
    return s;
}

pz_status pz_dgrow_(pz_cstate *s, int k, size_t bytes, void **out) {
    if (bytes == 0) bytes = 1;
    if (s->dcap[k] < bytes) {
        if (s->d[k]) PZ_CU(cudaFree(s->d[k]));
        s->d[k] = NULL;
        s->dcap[k] = 0;
        PZ_CU(cudaMalloc(&s->d[k], bytes));
        s->dcap[k] = bytes;
    }
    *out = s->d[k];
    return PZ_OK;
}

pz_status pz_hgrow_(pz_cstate *s, size_t bytes, void **out) {
    if (bytes == 0) bytes = 1;
    if (s->hcap < bytes) {
        void *p = malloc(bytes);
        if (!p) return pz_fail(PZ_ERR_NOMEM, "cuda codec: cannot allocate %zu bytes of host scratch", bytes);
        free(s->h);
        s->h = p;
        s->hcap = bytes;
    }
    *out = s->h;
    return PZ_OK;
}

/* resets the device status block (flags 0, first_bad = all ones) */
pz_status pz_stat_reset_(pz_cstate *s, cudaStream_t st) {
    if (!s->st) PZ_CU(cudaMalloc(&s->st, sizeof(pz_dstat)));
    PZ_CU(cudaMemsetAsync(s->st, 0, sizeof(unsigned), st));
    PZ_CU(cudaMemsetAsync(&s->st->first_bad, 0xff, sizeof(unsigned long long), st));
    return PZ_OK;
}
pz_status pz_stat_get_(pz_cstate *s, cudaStream_t st, pz_dstat *h) {
    PZ_CU(cudaMemcpyAsync(h, s->st, sizeof *h, cudaMemcpyDeviceToHost, st));
    PZ_CU(cudaStreamSynchronize(st));
    return PZ_OK;
}
/* ================================================================ ef(), ef21() on the device */

pz_status pz_cuda_decode_exact_(pz_codec *inner, const char *what, const uint8_t *msg, size_t len,
                                const pz_codec_ctx *ctx, float *out, const pz_shape *want, cudaStream_t stream) {
    pz_shape got;
    memset(&got, 0, sizeof got);
    pz_status st = pz_codec_decode_cuda(inner, msg, len, ctx, out, pz_shape_numel(want), &got, stream);
    return pz_wrap_decoded(st, what, &got, want);
}

/* ================================================================ API */

typedef struct {
    const float *x;
    float *out;
    cudaStream_t stream;
} gpu_arg;

static pz_status gpu_payload(void *arg, pz_codec *c, const pz_shape *s, const pz_codec_ctx *ctx, uint8_t *pl,
                             size_t cap, size_t *len, uint8_t *wflags) {
    gpu_arg *a = (gpu_arg *)arg;
    *wflags = 0;
    const pz_wrap_impl *w = pz_codec_wrap(c);
    if (!w) return pz_cuda_base_encode_(c, pz_codec_base_params(c), a->x, s, ctx, pl, cap, len, a->stream);
    if (w->kind == PZ_WRAP_AQ) return pz_cuda_aq_encode_(c, a->x, s, ctx, pl, cap, len, wflags, a->stream);
    if (w->kind == PZ_WRAP_HADAMARD) return pz_cuda_hd_encode_(c, a->x, s, ctx, pl, cap, len, wflags, a->stream);
    return pz_cuda_ef_encode_(c, a->x, s, ctx, pl, cap, len, a->stream);
}

static pz_status gpu_decode(void *arg, pz_codec *c, const pz_codec_params *p, uint8_t wflags, const uint8_t *pl,
                            size_t len, const pz_shape *s, const pz_codec_ctx *ctx) {
    gpu_arg *a = (gpu_arg *)arg;
    const pz_wrap_impl *w = pz_codec_wrap(c);
    if (!w) return pz_cuda_base_decode_(c, p, pl, len, s, a->out, a->stream);
    if (w->kind == PZ_WRAP_AQ) return pz_cuda_aq_decode_(c, wflags, pl, len, s, ctx, a->out, a->stream);
    if (w->kind == PZ_WRAP_HADAMARD) return pz_cuda_hd_decode_(c, wflags, pl, len, s, ctx, a->out, a->stream);
    if (wflags) return pz_fail(PZ_ERR_FORMAT, "%s: bad flags 0x%02x (expected 0)", w->name, wflags);
    return pz_cuda_ef_decode_(c, pl, len, s, ctx, a->out, a->stream);
}

static int base_encodes_on_device(const pz_codec_params *p) {
    switch (p->id) {
    case PZ_CODEC_FP32: case PZ_CODEC_FP16: case PZ_CODEC_BF16: case PZ_CODEC_Q: case PZ_CODEC_SIGN:
    case PZ_CODEC_NUQ: case PZ_CODEC_TOPK:
        return 1;
    default: return 0;
    }
}

/* Whether the codec object runs through the device path: base codecs with a
 * device encoder, and every wrapper (its state lives on the device; its
 * inner and warm-up codecs route themselves: a base codec without a device
 * encoder runs the CPU codec on a host copy). A base codec without a device
 * encoder takes the host route as a whole. */
static int routed_to_device(const pz_codec *c) {
    if (pz_codec_wrap(c)) return 1;
    return base_encodes_on_device(pz_codec_base_params(c));
}

/* every base codec the object uses encodes (or decodes) on the device */
static int all_bases(const pz_codec *c, int decode) {
    const pz_codec_params *p = pz_codec_base_params(c);
    if (!(decode ? pz_cuda_base_decodes_on_device_(p) : base_encodes_on_device(p))) return 0;
    pz_codec *w = pz_codec_warm((pz_codec *)c);
    if (w && !all_bases(w, decode)) return 0;
    pz_codec *in = pz_codec_inner((pz_codec *)c);
    return in ? all_bases(in, decode) : 1;
}

extern "C" pz_cuda_path pz_codec_cuda_encode_path(const pz_codec *c) {
    return all_bases(c, 0) ? PZ_CUDA_DEVICE : PZ_CUDA_HOST;
}
extern "C" pz_cuda_path pz_codec_cuda_decode_path(const pz_codec *c) {
    return all_bases(c, 1) ? PZ_CUDA_DEVICE : PZ_CUDA_HOST;
}
extern "C" int pz_codec_has_cuda(const pz_codec *c) {
    return pz_codec_cuda_encode_path(c) == PZ_CUDA_DEVICE && pz_codec_cuda_decode_path(c) == PZ_CUDA_DEVICE;
}

extern "C" int pz_codec_spec_has_cuda(const char *spec) {
    pz_codec *c;
    if (pz_codec_create(spec, &c) != PZ_OK) return -1;
    int r = pz_codec_has_cuda(c);
    pz_codec_free(c);
    return r;
}

extern "C" pz_status pz_codec_encode_cuda(pz_codec *c, const float *d_x, const pz_shape *shape,
                                          const pz_codec_ctx *ctx, uint8_t *out, size_t cap, size_t *len,
                                          cudaStream_t stream) {
    *len = 0;
    if (!routed_to_device(c)) {
        /* the CPU codec on a host copy */
        size_t n = pz_shape_numel(shape);
        if (!n) return pz_codec_encode(c, NULL, shape, ctx, out, cap, len);   /* reports the shape */
        pz_cstate *cs = pz_cstate_of_(c);
        void *h;
        pz_status st = pz_hgrow_(cs, n * sizeof(float), &h);
        if (st) return st;
        PZ_CU(cudaMemcpyAsync(h, d_x, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
        PZ_CU(cudaStreamSynchronize(stream));
        return pz_codec_encode(c, (const float *)h, shape, ctx, out, cap, len);
    }
    gpu_arg a = {d_x, NULL, stream};
    return pz_codec_encode_with(c, shape, ctx, out, cap, len, gpu_payload, &a);
}

extern "C" pz_status pz_codec_decode_cuda(pz_codec *c, const uint8_t *msg, size_t len, const pz_codec_ctx *ctx,
                                          float *d_out, size_t out_cap, pz_shape *shape, cudaStream_t stream) {
    if (!routed_to_device(c)) {
        pz_shape s;
        pz_status st = pz_codec_peek(msg, len, NULL, 0, &s);
        if (st) return st;
        size_t n = pz_shape_numel(&s);
        pz_cstate *cs = pz_cstate_of_(c);
        void *h;
        if ((st = pz_hgrow_(cs, n * sizeof(float), &h))) return st;
        st = pz_codec_decode(c, msg, len, ctx, (float *)h, out_cap, &s);
        if (st) return st;
        PZ_CU(cudaMemcpyAsync(d_out, h, n * sizeof(float), cudaMemcpyHostToDevice, stream));
        PZ_CU(cudaStreamSynchronize(stream));
        if (shape) *shape = s;
        return PZ_OK;
    }
    gpu_arg a = {NULL, d_out, stream};
    return pz_codec_decode_with(c, msg, len, ctx, out_cap, shape, gpu_decode, &a);
}

extern "C" int pz_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}
