/* cuda_common.h: includes and helpers of the GPU codecs (private to
 * compress/cuda/). The C headers of compress/ are included with C linkage;
 * the system headers they use come first, outside the extern "C" block. */
#ifndef PZ_CUDA_COMMON_H
#define PZ_CUDA_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

/* fast math would replace IEEE division and square root and flush
 * subnormals: the messages would no longer match the CPU's */
#ifdef __USE_FAST_MATH__
#error "compress/cuda must not be compiled with --use_fast_math"
#endif

extern "C" {
#include "compress/core/bitpack.h"
#include "compress/cuda/codec_cuda.h"
#include "compress/core/codec_ext.h"
#include "compress/core/elem_codecs.h"
#include "compress/codecs/qcommon.h"
}

/* Every CUDA call is checked: failure returns PZ_ERR_IO naming file:line,
 * the call and CUDA's error string. */
#define PZ_CU(call)                                                                         \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess)                                                              \
            return pz_fail(PZ_ERR_IO, "%s:%d: %s: %s", __FILE__, __LINE__, #call,          \
                           cudaGetErrorString(e_));                                         \
    } while (0)
/* after a kernel launch */
#define PZ_CU_LAUNCH() PZ_CU(cudaGetLastError())

#define PZ_FULL_MASK 0xffffffffu

/* blocks for `work` items at `per` items per block, capped (kernels loop) */
static inline unsigned pz_blocks(size_t work, size_t per) {
    size_t b = (work + per - 1) / per;
    if (b < 1) b = 1;
    if (b > 65535u * 16u) b = 65535u * 16u;
    return (unsigned)b;
}

#endif
