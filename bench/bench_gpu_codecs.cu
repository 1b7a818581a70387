/* bench_gpu_codecs: throughput of the GPU codecs (compress/cuda/codec_cuda.h)
 * against device memcpy measured in the same run.
 *
 *   bench_gpu_codecs [--numel N] [--runs R] [SPEC...]
 *
 * For each spec: encode = pz_codec_encode_cuda from a device tensor to a host
 * message (everything included: kernels, the copy of the payload to the host,
 * header and CRC on the host, host steps of the codec), decode =
 * pz_codec_decode_cuda back into device memory; GB/s = tensor bytes (4n) per
 * second, median of R runs after one warm-up. The reference lines are
 * cudaMemcpy of the same 4n bytes device-to-device and device-to-host
 * (pageable memory, as the messages). Without a CUDA device it says so and
 * exits 77. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

extern "C" {
#include "compress/core/codec.h"
#include "compress/cuda/codec_cuda.h"
#include "base/clock.h"
#include "base/rng.h"
#include "bench/bench_util.h"
}

/* every CUDA call is checked: a failure names file:line and the call, and exits */
static void cu_check(cudaError_t e, const char *call, const char *file, int line) {
    if (e == cudaSuccess) return;
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, call, cudaGetErrorString(e));
    exit(1);
}
#define CU(call) cu_check((call), #call, __FILE__, __LINE__)

/* median seconds of an async copy of `bytes` on st, over runs after a
 * warm-up (t: room for runs times) */
static double memcpy_time(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t st, double *t,
                          int runs) {
    for (int k = 0; k <= runs; k++) {
        double t0 = pz_now();
        CU(cudaMemcpyAsync(dst, src, bytes, kind, st));
        CU(cudaStreamSynchronize(st));
        if (k) t[k - 1] = pz_now() - t0;
    }
    return bench_median(t, runs);
}

int main(int argc, char **argv) {
    size_t n = (size_t)1 << 24;
    int runs = 10;
    const char *defaults[] = {"fp16", "bf16", "q8", "q4", "q2:group=row", "q4:scale=minmax,group=128", "sign",
                              "sign:stochastic", "nuq4", "nuq4:code=elias", "topk:0.01", "topk:0.01,values=q8",
                              "ef(q4)", "ef21(sign)", "jointsq:2", "hadamard(q4:group=row,round=nearest)"};
    const char **specs = defaults;
    int nspec = (int)(sizeof defaults / sizeof defaults[0]);
    const char **argspecs = (const char **)calloc((size_t)argc, sizeof *argspecs);
    int na = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--numel") && i + 1 < argc) n = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else argspecs[na++] = argv[i];
    }
    if (na) {
        specs = argspecs;
        nspec = na;
    }
    if (runs < 1) runs = 1;
    if (pz_cuda_device_count() < 1) {
        printf("bench_gpu_codecs: no CUDA device (or no driver) on this machine: nothing measured\n");
        return 77;
    }
    cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    size_t C = 768;
    if (n % C) n = (n / C + 1) * C;
    pz_shape s = {2, {(int64_t)(n / C), (int64_t)C, 0, 0}};
    float *hx = (float *)malloc(n * 4), *dx, *dy;
    pz_rng r;
    pz_rng_seed(&r, 1);
    for (size_t i = 0; i < n; i++) hx[i] = pz_rng_normal(&r);
    CU(cudaMalloc((void **)&dx, n * 4));
    CU(cudaMalloc((void **)&dy, n * 4));
    CU(cudaMemcpy(dx, hx, n * 4, cudaMemcpyHostToDevice));
    cudaStream_t st;
    CU(cudaStreamCreate(&st));
    double *t = (double *)malloc(sizeof(double) * (size_t)runs);
    double gb = (double)n * 4 / 1e9;
    printf("device: %s; tensor (%zu, %zu) fp32 = %.1f MB; median of %d runs\n", prop.name, n / C, C, gb * 1e3, runs);
    double d2d = gb / memcpy_time(dy, dx, n * 4, cudaMemcpyDeviceToDevice, st, t, runs);
    double d2h = gb / memcpy_time(hx, dx, n * 4, cudaMemcpyDeviceToHost, st, t, runs);
    printf("%-34s %10s %10s %9s %12s %12s\n", "spec", "enc GB/s", "dec GB/s", "bits/el", "enc/d2d", "enc/d2h");
    printf("%-34s %10.1f %10s %9s\n", "memcpy device->device", d2d, "", "");
    printf("%-34s %10.1f %10s %9s\n", "memcpy device->host (pageable)", d2h, "", "");
    for (int i = 0; i < nspec; i++) {
        pz_codec *enc, *dec;
        if (pz_codec_create(specs[i], &enc) || pz_codec_create(specs[i], &dec)) {
            printf("%-34s error: %s\n", specs[i], pz_last_error());
            continue;
        }
        size_t cap = pz_codec_max_encoded_size(enc, &s), len = 0;
        uint8_t *msg = (uint8_t *)malloc(cap);
        pz_status e = PZ_OK;
        for (int k = 0; k <= runs && !e; k++) {
            pz_codec_ctx ctx = {1, (uint64_t)k, 0, 0, 0, NULL};
            double t0 = pz_now();
            e = pz_codec_encode_cuda(enc, dx, &s, &ctx, msg, cap, &len, st);
            if (k) t[k - 1] = pz_now() - t0;
        }
        if (e) {
            printf("%-34s error: %s\n", specs[i], pz_last_error());
            free(msg);
            continue;
        }
        double enc_gbs = gb / bench_median(t, runs);
        pz_shape got;
        for (int k = 0; k <= runs && !e; k++) {
            pz_codec_ctx ctx = {1, (uint64_t)k, 0, 0, 0, NULL};
            double t0 = pz_now();
            e = pz_codec_decode_cuda(dec, msg, len, &ctx, dy, n, &got, st);
            if (k) t[k - 1] = pz_now() - t0;
        }
        double dec_gbs = e ? NAN : gb / bench_median(t, runs);
        const char *path = pz_codec_has_cuda(enc) ? "" : pz_codec_cuda_encode_path(enc) == PZ_CUDA_DEVICE
                                                             ? " (decode on host)"
                                                             : " (host codec)";
        char name[96];
        snprintf(name, sizeof name, "%s%s", specs[i], path);
        printf("%-34s %10.1f %10.1f %9.3f %12.3f %12.3f\n", name, enc_gbs, dec_gbs, 8.0 * (double)len / (double)n,
               enc_gbs / d2d, enc_gbs / d2h);
        free(msg);
        pz_codec_free(enc);
        pz_codec_free(dec);
    }
    CU(cudaFree(dx));
    CU(cudaFree(dy));
    CU(cudaStreamDestroy(st));
    free(hx);
    free(t);
    free(argspecs);
    return 0;
}
