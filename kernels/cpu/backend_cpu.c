/* backend_cpu.c: the CPU pz_backend table, its memory functions and its
 * thread setting.
 *
 * "Device" memory is host memory here, so to_host/from_host/copy are memcpy.
 *
 * Threads: there is one pool, OpenMP's. Every OpenMP region in kernels/cpu/
 * names pz_cpu_nt() threads, and the sgemm calls (matmul.c, attention.c) are
 * made by those threads on disjoint slices, with OpenBLAS itself set to one
 * thread. Letting OpenBLAS's own pthread pool (Debian's default build) run
 * the matmuls instead made its spinning workers and libgomp's fight over the
 * cores (matmul.c has the numbers). So pz_backend_cpu_set_threads(n) means n
 * threads in all, not n for OpenMP plus n for BLAS. The Debian OpenBLAS
 * pthread build is safe to call from several threads at once when it runs
 * single-threaded (its buffer pool is locked; at most MAX_THREADS=64 callers);
 * the OpenMP build (libopenblas0-openmp) also runs single-threaded inside
 * a parallel region, so this file works unchanged with either. */
#include "kernels/backend.h"
#include "base/isa.h"
#include "kernels/cpu/cpu_ops.h"
#include "base/mem.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* set by pz_backend_cpu_set_threads; 0 until then */
static int nthreads_set = 0;

/* The count set by pz_backend_cpu_set_threads, or OpenMP's default (which
 * honours OMP_NUM_THREADS) if it was never called. */
int pz_cpu_nt(void) {
    return nthreads_set > 0 ? nthreads_set : omp_get_max_threads();
}

/* OpenBLAS must run single-threaded inside our regions (see above) */
static void blas_single_thread_(void) { openblas_set_num_threads(1); }

void pz_backend_cpu_set_threads(int n) {
    if (n <= 0) n = omp_get_num_procs();
    nthreads_set = n;
    omp_set_num_threads(n); /* for OpenMP code outside this backend */
    blas_single_thread_();
}

int pz_backend_cpu_threads(void) { return pz_cpu_nt(); }

/* Clear `bytes` at p. Large buffers are cleared by all threads: on a fresh
 * allocation this is also where the kernel faults the pages in, and that
 * work (page clearing was 11% of llm.c's CPU profile) spreads over cores. */
static void cpu_zero(void *p, size_t bytes) {
    const size_t par_min = (size_t)1 << 20;
    if (bytes < par_min) {
        memset(p, 0, bytes);
        return;
    }
    const int nt = pz_cpu_nt();
    #pragma omp parallel num_threads(nt)
    {
        const int n = omp_get_num_threads(), i = omp_get_thread_num();
        /* 4 KiB-aligned slices so no page is touched by two threads */
        const size_t pages = (bytes + 4095) / 4096;
        const size_t lo = pages * (size_t)i / (size_t)n * 4096;
        size_t hi = pages * (size_t)(i + 1) / (size_t)n * 4096;
        if (hi > bytes) hi = bytes;
        if (hi > lo) memset((char *)p + lo, 0, hi - lo);
    }
}

/* 64-byte aligned (a cache line, an AVX-512 vector) and zero-filled, as the
 * backend contract promises; xaligned_alloc aborts with file and line. */
static void *cpu_alloc(size_t bytes) {
    void *p = xaligned_alloc(bytes);
    cpu_zero(p, bytes);
    return p;
}

static void cpu_free(void *p) { free(p); }

static void cpu_copy(void *dst, const void *src, size_t bytes) {
    if (bytes) memcpy(dst, src, bytes);
}

static void *cpu_host_alloc(size_t bytes) { return cpu_alloc(bytes); }

/* One op table per instruction-set level: with PZ_ISA_MULTI the op files are
 * also compiled for x86-64-v3 and x86-64-v4 under suffixed names
 * (tools/isa_rename.py); pz_backend_cpu() hands out the level base/isa.h chose. */
#define CPU_TABLE(S)                                         \
    {                                                        \
        .name = "cpu",                                       \
        .host_memory = 1,                                    \
        .alloc = cpu_alloc,                                  \
        .free = cpu_free,                                    \
        .zero = cpu_zero,                                    \
        .to_host = cpu_copy,                                 \
        .from_host = cpu_copy,                               \
        .copy = cpu_copy,                                    \
        .host_alloc = cpu_host_alloc,                        \
        .host_free = cpu_free,                               \
        .encoder_forward = pz_cpu_encoder_forward##S,        \
        .encoder_backward = pz_cpu_encoder_backward##S,      \
        .layernorm_forward = pz_cpu_layernorm_forward##S,    \
        .layernorm_backward = pz_cpu_layernorm_backward##S,  \
        .matmul_forward = pz_cpu_matmul_forward##S,          \
        .matmul_backward = pz_cpu_matmul_backward##S,        \
        .attention_forward = pz_cpu_attention_forward##S,    \
        .attention_backward = pz_cpu_attention_backward##S,  \
        .attention_cached_forward = pz_cpu_attention_cached_forward##S, \
        .gelu_forward = pz_cpu_gelu_forward##S,              \
        .gelu_backward = pz_cpu_gelu_backward##S,            \
        .residual_forward = pz_cpu_residual_forward##S,      \
        .residual_backward = pz_cpu_residual_backward##S,    \
        .crossentropy_forward = pz_cpu_crossentropy_forward##S, \
        .sumsq = pz_cpu_sumsq##S,                            \
        .adamw_update = pz_cpu_adamw_update##S,              \
    }

#ifdef PZ_ISA_MULTI
/* the suffixed copies have the prototypes of the baseline ops */
#define DECLARE_OPS(S)                                                                               \
    extern __typeof__(pz_cpu_encoder_forward) pz_cpu_encoder_forward##S;                            \
    extern __typeof__(pz_cpu_encoder_backward) pz_cpu_encoder_backward##S;                          \
    extern __typeof__(pz_cpu_layernorm_forward) pz_cpu_layernorm_forward##S;                        \
    extern __typeof__(pz_cpu_layernorm_backward) pz_cpu_layernorm_backward##S;                      \
    extern __typeof__(pz_cpu_matmul_forward) pz_cpu_matmul_forward##S;                              \
    extern __typeof__(pz_cpu_matmul_backward) pz_cpu_matmul_backward##S;                            \
    extern __typeof__(pz_cpu_attention_forward) pz_cpu_attention_forward##S;                        \
    extern __typeof__(pz_cpu_attention_backward) pz_cpu_attention_backward##S;                      \
    extern __typeof__(pz_cpu_attention_cached_forward) pz_cpu_attention_cached_forward##S;          \
    extern __typeof__(pz_cpu_gelu_forward) pz_cpu_gelu_forward##S;                                  \
    extern __typeof__(pz_cpu_gelu_backward) pz_cpu_gelu_backward##S;                                \
    extern __typeof__(pz_cpu_residual_forward) pz_cpu_residual_forward##S;                          \
    extern __typeof__(pz_cpu_residual_backward) pz_cpu_residual_backward##S;                        \
    extern __typeof__(pz_cpu_crossentropy_forward) pz_cpu_crossentropy_forward##S;                  \
    extern __typeof__(pz_cpu_sumsq) pz_cpu_sumsq##S;                                                \
    extern __typeof__(pz_cpu_adamw_update) pz_cpu_adamw_update##S;
DECLARE_OPS(_v3)
DECLARE_OPS(_v4)
static const pz_backend cpu_backends[3] = {CPU_TABLE(), CPU_TABLE(_v3), CPU_TABLE(_v4)};
#else
static const pz_backend cpu_backends[1] = {CPU_TABLE()};
#endif

const pz_backend *pz_backend_cpu_at(int level) {
#ifdef PZ_ISA_MULTI
    if (level < 0 || level > (int)pz_isa_cpu()) return NULL;   /* would fault with an illegal instruction */
    return &cpu_backends[level >= PZ_ISA_AVX512 ? 2 : level >= PZ_ISA_AVX2 ? 1 : 0];
#else
    return level == (int)pz_isa_level() ? &cpu_backends[0] : NULL;
#endif
}

/* The table of the chosen level. The first call also puts OpenBLAS in
 * single-thread mode, for callers that never call pz_backend_cpu_set_threads. */
const pz_backend *pz_backend_cpu(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, blas_single_thread_);
    return pz_backend_cpu_at(pz_isa_level());
}
