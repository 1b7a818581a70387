/* hd.h: PZ_HD marks a static inline function that C and CUDA both compile
 * (__host__ __device__ under nvcc), so a formula has one copy for the CPU
 * and the GPU. */
#ifndef PZ_BASE_HD_H
#define PZ_BASE_HD_H

#ifdef __CUDACC__
#define PZ_HD __host__ __device__
#else
#define PZ_HD
#endif

#endif
