/* codec_cuda.h: the codecs with the tensor on a CUDA device (built with
 * -Dcuda=enabled; PZ_HAVE_CUDA is defined then).
 *
 * The same pz_codec objects, specs and messages as compress/core/codec.h: the
 * encoder reads the tensor from device memory and writes the message to host
 * memory; the decoder reads a message from host memory and writes the tensor
 * to device memory. Messages are byte-identical to pz_codec_encode's for the
 * same input and ctx (stochastic rounding draws the same counter-based
 * uniforms, compress/core/elem.h), so a CPU stage and a GPU stage can share an
 * edge. Which steps run on the device: compress/README.md, "GPU codecs".
 *
 * hadamard() rotates on the device (compress/cuda/hadamard_cuda.cu).
 * Stateful wrappers ef(), ef21() and aq() keep their state on the device
 * (aq's mem= and spill= apply to the CPU path only); a codec object must be
 * used through one API only (CPU or CUDA), since the two keep separate
 * state. jointsq runs its CPU code on a host copy of the tensor; the nuq
 * Elias, topk and jointsq decoders run on the host (README, "GPU codecs").
 * Calls are synchronous with respect to the host (the message is complete on
 * return); device work is queued on `stream` and finished before returning.
 * Failures of CUDA calls return PZ_ERR_IO with "file:line: call: error". */
#ifndef PZ_CODEC_CUDA_H
#define PZ_CODEC_CUDA_H

#include <cuda_runtime_api.h>

#include "compress/core/codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where the work of a codec runs under this API. */
typedef enum {
    PZ_CUDA_HOST = 0,    /* the CPU codec, the tensor copied between device and host */
    PZ_CUDA_DEVICE = 1,  /* kernels on the device (a few small steps may run on the host) */
} pz_cuda_path;

pz_cuda_path pz_codec_cuda_encode_path(const pz_codec *c);
pz_cuda_path pz_codec_cuda_decode_path(const pz_codec *c);
/* 1 when both directions have a device path. */
int pz_codec_has_cuda(const pz_codec *c);
/* The same for a spec string: 1 both directions on the device, 0 not (or
 * at least one on the host), -1 the spec does not parse (pz_last_error()). */
int pz_codec_spec_has_cuda(const char *spec);

/* As pz_codec_encode, with d_x = numel(shape) floats in device memory. */
pz_status pz_codec_encode_cuda(pz_codec *c, const float *d_x, const pz_shape *shape, const pz_codec_ctx *ctx,
                               uint8_t *out, size_t cap, size_t *len, cudaStream_t stream);
/* As pz_codec_decode, with d_out = out_cap floats in device memory. */
pz_status pz_codec_decode_cuda(pz_codec *c, const uint8_t *msg, size_t len, const pz_codec_ctx *ctx,
                               float *d_out, size_t out_cap, pz_shape *shape, cudaStream_t stream);

/* Number of usable CUDA devices; 0 (not an error) without a driver or GPU. */
int pz_cuda_device_count(void);

#ifdef __cplusplus
}
#endif

#endif
