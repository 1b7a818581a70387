/* backend.h: the table of numeric ops a stage runs on.
 *
 * stages/ calls ops only through this table, so a CUDA backend (kernels/cuda/)
 * can implement the same entries and be tested against the CPU one. Every op
 * comes as a forward/backward pair over float arrays: outputs first, then
 * inputs, then sizes. Backward ops ACCUMULATE (+=) into parameter and input
 * gradients, so residual branches and micro-batch accumulation need no extra
 * code. Size letters: B batch, T time, C channels, OC output channels,
 * NH heads, V real vocab, Vp padded vocab, N = B*T rows. */
#ifndef PZ_BACKEND_H
#define PZ_BACKEND_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pz_backend {
    const char *name;
    int host_memory;   /* 1: buffers are host memory (cpu); 0: device memory */

    /* memory: device buffers (host memory on the CPU backend) */
    void *(*alloc)(size_t bytes);          /* zero-filled, aborts on failure */
    void (*free)(void *p);                 /* NULL is fine, as with free() */
    void (*zero)(void *p, size_t bytes);
    void (*to_host)(void *dst_host, const void *src, size_t bytes);
    void (*from_host)(void *dst, const void *src_host, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes); /* within the backend */
    /* host memory for transfers to and from the backend: pinned (page-locked)
     * on a device backend so copies run at full bus speed; zero-filled */
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *p);

    /* out (B,T,C) = wte[inp[b,t]] + wpe[t]; inp (B,T) holds ids in [0, V) */
    void (*encoder_forward)(float *out, const int *inp, const float *wte,
                            const float *wpe, int B, int T, int C);
    /* dwte, dwpe += scatter of dout (B,T,C) */
    void (*encoder_backward)(float *dwte, float *dwpe, const float *dout,
                             const int *inp, int B, int T, int C);

    /* out (N,C) = (inp - mean) * rstd * weight + bias; saves mean, rstd (N) */
    void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *inp,
                              const float *weight, const float *bias, int N, int C);
    void (*layernorm_backward)(float *dinp, float *dweight, float *dbias,
                               const float *dout, const float *inp, const float *weight,
                               const float *mean, const float *rstd, int N, int C);

    /* out (N,OC) = inp (N,C) . weight (OC,C)^T + bias (OC); bias may be NULL */
    void (*matmul_forward)(float *out, const float *inp, const float *weight,
                           const float *bias, int N, int C, int OC);
    /* dinp (N,C) += dout.weight; dweight (OC,C) += dout^T.inp; dbias += colsum(dout).
     * dinp and dbias may be NULL (not needed). dweight may be NULL too (dbias
     * then skipped): with dweight and dbias NULL it is the input-gradient
     * half (zero-bubble B), with dinp NULL the weight-gradient half (W); the
     * halves compute bit for bit what the whole call does. */
    void (*matmul_backward)(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int N, int C, int OC);

    /* Causal multi-head attention. qkv (B,T,3C) is [q | k | v] per position,
     * head h at columns h*hs..h*hs+hs-1 of each. out (B,T,C); att (B,NH,T,T)
     * holds the softmax probabilities, kept for backward. */
    void (*attention_forward)(float *out, float *att, const float *qkv,
                              int B, int T, int C, int NH);
    /* dqkv (B,T,3C) += ...; scratch (B,NH,T,T) is overwritten. */
    void (*attention_backward)(float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att,
                               int B, int T, int C, int NH);
    /* Attention of n new positions pos0..pos0+n-1 of one sequence against a
     * KV cache (generation): writes their keys and values (from qkv (n,3C))
     * into kcache/vcache (maxT,C) rows pos0.., then out (n,C) row i attends
     * over cache rows 0..pos0+i, as attention_forward's row pos0+i would.
     * scores is scratch of n*NH*(pos0+n) floats. */
    void (*attention_cached_forward)(float *out, float *kcache, float *vcache, float *scores,
                                     const float *qkv, int pos0, int n, int C, int NH);

    /* GELU, tanh approximation, elementwise over n */
    void (*gelu_forward)(float *out, const float *inp, size_t n);
    void (*gelu_backward)(float *dinp, const float *inp, const float *dout, size_t n);

    /* out = a + b */
    void (*residual_forward)(float *out, const float *a, const float *b, size_t n);
    /* da += dout; db += dout */
    void (*residual_backward)(float *da, float *db, const float *dout, size_t n);

    /* Softmax cross-entropy over the first V of Vp logits per row, fused with
     * its backward: losses (N) = -log p[target]; if dscale != 0, logits (N,Vp)
     * are OVERWRITTEN with dlogits = (p - onehot) * dscale (0 in padded columns).
     * Targets must be in [0, V). */
    void (*crossentropy_forward)(float *losses, float *logits, const int *targets,
                                 int N, int V, int Vp, float dscale);

    /* sum of squares (for the global gradient norm), in double */
    double (*sumsq)(const float *x, size_t n);

    /* AdamW with decoupled weight decay and bias correction, on n elements:
     * g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
     * param -= lr * (mhat / (sqrt(vhat) + eps) + wd * param). t is the 1-based step. */
    void (*adamw_update)(float *param, const float *grad, float *m, float *v, size_t n,
                         float lr, float beta1, float beta2, float eps, float wd,
                         float grad_scale, int t);
} pz_backend;

const pz_backend *pz_backend_cpu(void);
/* The CPU table compiled for an instruction-set level (base/isa.h), for
 * tests and benchmarks that compare levels; NULL when this build or this CPU
 * has no such level. pz_backend_cpu() is pz_backend_cpu_at(pz_isa_level()). */
const pz_backend *pz_backend_cpu_at(int level);
/* Threads for the CPU backend's loops and its BLAS (0 = all cores). */
void pz_backend_cpu_set_threads(int n);
int pz_backend_cpu_threads(void);

/* The CUDA backend (kernels/cuda/, built with -Dcuda): selects GPU `ordinal`
 * (modulo the device count), creates its cuBLAS handle and returns the table,
 * or returns NULL with a message in err (no driver, no GPU, ...). tf32 != 0
 * lets cuBLAS use TF32 tensor cores for fp32 products. One device per process;
 * a second call returns the same table (its arguments are ignored). */
const pz_backend *pz_backend_cuda_init(int ordinal, int tf32, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
