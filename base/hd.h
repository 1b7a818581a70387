/* hd.h: PZ_HD marks a static inline function that C and CUDA both compile
 * (__host__ __device__ under nvcc), so a formula has one copy for the CPU
 * and the GPU. */
#ifndef PZ_BASE_HD_H
#define PZ_BASE_HD_H

#ifdef __CUDACC__
#define PZ_HD __host__ __device__
/* A kernel's grid-stride loop: i (size_t) takes this thread's indices in
 * [0, n), so any grid size covers any n. */
#define PZ_GRID_STRIDE(i, n)                                                   \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);    \
         i += (size_t)gridDim.x * blockDim.x)
#else
#define PZ_HD
#endif

#endif
