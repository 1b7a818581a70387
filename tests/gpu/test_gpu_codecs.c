/* test_gpu_codecs.c: the GPU codecs (compress/cuda/codec_cuda.h) against the CPU
 * codecs, byte for byte (suite 'gpu'; exit 77 = skipped without a GPU).
 *
 * For every spec, shape and seed: the message of pz_codec_encode_cuda on the
 * device copy of x must equal pz_codec_encode's on the host copy, byte for
 * byte (header, CRC, payload; +zstd included); pz_codec_decode_cuda of it must
 * give the floats of pz_codec_decode bit for bit, and so must the GPU decode
 * of the CPU message (a CPU stage talking to a GPU stage). ef() and ef21()
 * run 5 steps with the state on the device, comparing every message and the
 * receiver's output with the CPU wrapper's; so do hadamard() alone and
 * nested with ef, ef21 and aq (the device rotation is bitwise the CPU's).
 * Inputs with inf or NaN must fail with the CPU's status. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "compress/core/codec.h"
#include "compress/cuda/codec_cuda.h"

#define CHECK_MAX_PRINTED 50
#include "tests/check.h"
#include "tests/compress/elem_specs.h"
#include "base/mem.h"
#include "base/rng.h"

#define CU(call)                                                                          \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static float *make_input(size_t n, size_t C, uint64_t seed) {
    pz_rng r;
    pz_rng_seed(&r, seed);
    float *x = xmalloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) {
        /* every 5th row near fp32's bottom (~1e-40, subnormals): tiny q groups and nuq buckets */
        float sc = (float)ldexp(1.0, (i / C) % 5 == 4 ? -133 : (int)((i / C) * 7 % 24) - 16);
        x[i] = pz_rng_normal(&r) * sc;
        if (pz_rng_below(&r, 17) == 0) x[i] = 0.0f;
        if (pz_rng_below(&r, 23) == 0) x[i] = 0.5f * sc;
    }
    return x;
}

static size_t first_diff(const uint8_t *a, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return i;
    return SIZE_MAX;
}

static size_t float_diffs(const float *a, const float *b, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(a + i, b + i, 4) != 0;
    return d;
}

/* A CPU and a GPU sender (cc, gc) and receiver (cr, gr) of one spec and
 * shape, with host buffers for the CPU's and the GPU's message (m1, m2) and
 * decoded floats (o1, o2), and device buffers for the input and the GPU
 * receiver's output (dx, dout). */
typedef struct {
    pz_codec *cc, *gc, *cr, *gr;
    size_t n, cap;
    uint8_t *m1, *m2;
    float *o1, *o2, *dx, *dout;
} endpoints;

static int endpoints_open(endpoints *e, const char *spec, const pz_shape *s) {
    memset(e, 0, sizeof *e);
    if (pz_codec_create(spec, &e->cc) || pz_codec_create(spec, &e->gc) || pz_codec_create(spec, &e->cr) ||
        pz_codec_create(spec, &e->gr)) {
        CHECK(0, "create %s: %s", spec, pz_last_error());
        pz_codec_free(e->cc);
        pz_codec_free(e->gc);
        pz_codec_free(e->cr);
        return 0;
    }
    e->n = pz_shape_numel(s);
    e->cap = pz_codec_max_encoded_size(e->cc, s);
    e->m1 = malloc(e->cap);
    e->m2 = malloc(e->cap);
    e->o1 = malloc(e->n * 4);
    e->o2 = malloc(e->n * 4);
    CU(cudaMalloc((void **)&e->dx, e->n * 4));
    CU(cudaMalloc((void **)&e->dout, e->n * 4));
    return 1;
}

static void endpoints_close(endpoints *e) {
    free(e->m1);
    free(e->m2);
    free(e->o1);
    free(e->o2);
    CU(cudaFree(e->dx));
    CU(cudaFree(e->dout));
    pz_codec_free(e->cc);
    pz_codec_free(e->gc);
    pz_codec_free(e->cr);
    pz_codec_free(e->gr);
}

/* one spec, one shape, `steps` messages (stateful wrappers carry state) */
static void run(const char *spec, const pz_shape *s, uint64_t seed, int steps, cudaStream_t stream) {
    endpoints e;
    if (!endpoints_open(&e, spec, s)) return;
    size_t C = (size_t)s->dims[s->ndim - 1];
    float *x = NULL;
    for (int step = 0; step < steps; step++) {
        free(x);
        x = make_input(e.n, C, seed * 131 + (uint64_t)step);
        CU(cudaMemcpy(e.dx, x, e.n * 4, cudaMemcpyHostToDevice));
        pz_codec_ctx ctx = {seed, (uint64_t)step, 1, 0, 3, NULL};
        size_t l1 = 0, l2 = 0;
        pz_status s1 = pz_codec_encode(e.cc, x, s, &ctx, e.m1, e.cap, &l1);
        pz_status s2 = pz_codec_encode_cuda(e.gc, e.dx, s, &ctx, e.m2, e.cap, &l2, stream);
        CHECK(s1 == PZ_OK && s2 == PZ_OK, "%s step %d: encode cpu %d gpu %d: %s", spec, step, s1, s2, pz_last_error());
        if (s1 || s2) break;
        CHECK(l1 == l2, "%s step %d: message of %zu bytes on the GPU, %zu on the CPU", spec, step, l2, l1);
        size_t d = first_diff(e.m1, e.m2, l1 < l2 ? l1 : l2);
        CHECK(d == SIZE_MAX, "%s step %d: messages differ at byte %zu of %zu", spec, step, d, l1);
        /* decode: the GPU decoder on the CPU message, the CPU decoder on the same */
        pz_shape g1, g2;
        s1 = pz_codec_decode(e.cr, e.m1, l1, &ctx, e.o1, e.n, &g1);
        s2 = pz_codec_decode_cuda(e.gr, e.m1, l1, &ctx, e.dout, e.n, &g2, stream);
        CHECK(s1 == PZ_OK && s2 == PZ_OK, "%s step %d: decode cpu %d gpu %d: %s", spec, step, s1, s2, pz_last_error());
        CU(cudaMemcpy(e.o2, e.dout, e.n * 4, cudaMemcpyDeviceToHost));
        size_t fd = float_diffs(e.o1, e.o2, e.n);
        CHECK(fd == 0, "%s step %d: %zu decoded floats differ", spec, step, fd);
    }
    /* a stateless GPU decoder on the GPU message (base codecs and ef) */
    if (!pz_codec_is_stateful_decoder(e.cc)) {
        pz_codec *gd;
        pz_shape g;
        if (!pz_codec_create(spec, &gd)) {
            size_t l2 = 0;
            pz_codec_ctx ctx = {seed, 99, 1, 0, 3, NULL};
            pz_codec *fresh;
            if (!pz_codec_create(spec, &fresh)) {
                CHECK(pz_codec_encode_cuda(fresh, e.dx, s, &ctx, e.m2, e.cap, &l2, stream) == PZ_OK, "%s: encode",
                      spec);
                CHECK(pz_codec_decode(gd, e.m2, l2, &ctx, e.o1, e.n, &g) == PZ_OK,
                      "%s: CPU decodes the GPU message: %s", spec, pz_last_error());
                pz_codec_free(fresh);
            }
            pz_codec_free(gd);
        }
    }
    free(x);
    endpoints_close(&e);
}

/* aq(): samples drawn from a pool of ids, so messages mix warm-up and
 * delta samples; CPU and GPU senders and receivers must agree bitwise */
static void run_aq(const char *spec, int64_t B, int64_t T, int64_t C, int steps, cudaStream_t stream) {
    pz_shape s = {3, {B, T, C, 0}};
    endpoints e;
    if (!endpoints_open(&e, spec, &s)) return;
    uint64_t *ids = malloc((size_t)B * 8);
    pz_rng r;
    pz_rng_seed(&r, 4242);
    for (int step = 0; step < steps; step++) {
        for (int64_t i = 0; i < B; i++) {   /* distinct ids from a pool of 3B */
            uint64_t id;
            int dup;
            do {
                id = pz_rng_below(&r, (uint64_t)(3 * B)) * 1000003u;
                dup = 0;
                for (int64_t j = 0; j < i; j++) dup |= ids[j] == id;
            } while (dup);
            ids[i] = id;
        }
        float *x = make_input(e.n, (size_t)C, 77 + (uint64_t)step);
        CU(cudaMemcpy(e.dx, x, e.n * 4, cudaMemcpyHostToDevice));
        pz_codec_ctx ctx = {9, (uint64_t)step, 2, 1, 0, ids};
        size_t l1 = 0, l2 = 0;
        pz_status s1 = pz_codec_encode(e.cc, x, &s, &ctx, e.m1, e.cap, &l1);
        pz_status s2 = pz_codec_encode_cuda(e.gc, e.dx, &s, &ctx, e.m2, e.cap, &l2, stream);
        free(x);
        CHECK(s1 == PZ_OK && s2 == PZ_OK, "%s step %d: encode cpu %d gpu %d: %s", spec, step, s1, s2, pz_last_error());
        if (s1 || s2) break;
        CHECK(l1 == l2 && first_diff(e.m1, e.m2, l1) == SIZE_MAX, "%s step %d: messages differ (%zu vs %zu bytes)",
              spec, step, l1, l2);
        pz_shape g;
        s1 = pz_codec_decode(e.cr, e.m1, l1, &ctx, e.o1, e.n, &g);
        s2 = pz_codec_decode_cuda(e.gr, e.m1, l1, &ctx, e.dout, e.n, &g, stream);
        CHECK(s1 == PZ_OK && s2 == PZ_OK, "%s step %d: decode cpu %d gpu %d: %s", spec, step, s1, s2, pz_last_error());
        CU(cudaMemcpy(e.o2, e.dout, e.n * 4, cudaMemcpyDeviceToHost));
        CHECK(float_diffs(e.o1, e.o2, e.n) == 0, "%s step %d: receivers differ", spec, step);
    }
    free(ids);
    endpoints_close(&e);
}

/* inputs the encoders refuse: inf and NaN (big = 0), or values beyond fp16
 * scales (big = 1) */
static void refused(const char *spec, int big, cudaStream_t stream) {
    pz_codec *cc, *gc;
    if (pz_codec_create(spec, &cc) || pz_codec_create(spec, &gc)) return;
    pz_shape s = {2, {8, 40, 0, 0}};
    size_t n = 320, cap = pz_codec_max_encoded_size(cc, &s), l1, l2;
    float *x = make_input(n, 40, 5), *dx;
    if (big) {
        x[77] = 1e6f;
    } else {
        x[77] = INFINITY;
        x[201] = NAN;
    }
    uint8_t *m1 = malloc(cap), *m2 = malloc(cap);
    CU(cudaMalloc((void **)&dx, n * 4));
    CU(cudaMemcpy(dx, x, n * 4, cudaMemcpyHostToDevice));
    pz_codec_ctx ctx = {1, 2, 3, 0, 0, NULL};
    pz_status s1 = pz_codec_encode(cc, x, &s, &ctx, m1, cap, &l1);
    pz_status s2 = pz_codec_encode_cuda(gc, dx, &s, &ctx, m2, cap, &l2, stream);
    CHECK(s1 == s2, "%s with inf/NaN: CPU status %d, GPU %d", spec, s1, s2);
    if (s1 == PZ_OK && s2 == PZ_OK) CHECK(l1 == l2 && !memcmp(m1, m2, l1), "%s with inf/NaN: messages differ", spec);
    free(x);
    free(m1);
    free(m2);
    CU(cudaFree(dx));
    pz_codec_free(cc);
    pz_codec_free(gc);
}

/* which specs claim a device path (holds without a GPU too) */
static void paths(void) {
    CHECK(pz_codec_spec_has_cuda("q4") == 1 && pz_codec_spec_has_cuda("sign:stochastic") == 1 &&
          pz_codec_spec_has_cuda("nuq4") == 1 && pz_codec_spec_has_cuda("fp16") == 1 &&
          pz_codec_spec_has_cuda("ef(q4)") == 1 && pz_codec_spec_has_cuda("ef21(sign)+zstd") == 1 &&
          pz_codec_spec_has_cuda("aq(q4)") == 1 && pz_codec_spec_has_cuda("aq(sign,warmup=bf16)") == 1 &&
          pz_codec_spec_has_cuda("hadamard(q4)") == 1 && pz_codec_spec_has_cuda("aq(hadamard(q4))") == 1 &&
          pz_codec_spec_has_cuda("hadamard(ef(q2),block=8)") == 1,
          "device paths");
    CHECK(pz_codec_spec_has_cuda("jointsq:2") == 0 && pz_codec_spec_has_cuda("aq(jointsq:2)") == 0 &&
          pz_codec_spec_has_cuda("ef(jointsq:2)") == 0 && pz_codec_spec_has_cuda("aq(q4,warmup=jointsq:4)") == 0 &&
          pz_codec_spec_has_cuda("topk:0.1") == 0 && pz_codec_spec_has_cuda("nuq4:code=elias") == 0 &&
          pz_codec_spec_has_cuda("tah:4") == 0 && pz_codec_spec_has_cuda("ef(tah:4,alloc=token)") == 0,
          "host paths (topk and nuq elias decode on the host; jointsq and tah have no device code)");
    CHECK(pz_codec_spec_has_cuda("q9") == -1, "bad spec");
}

int main(void) {
    paths();
    if (failures) {
        printf("test_gpu_codecs: %d failures in the path table\n", failures);
        return 1;
    }
    if (pz_cuda_device_count() < 1) {
        printf("test_gpu_codecs: SKIP: no CUDA device (or no driver) on this machine\n");
        return 77;
    }
    cudaStream_t stream;
    CU(cudaStreamCreate(&stream));
    static const char *specs[] = {
        "fp32", PZ_TEST_ELEM_SPECS, "q4:group=70000", "topk:0.001", "jointsq:2", "jointsq:1.5,group=64",
        "q4+zstd", "sign+zstd", "topk:0.1+zstd",
    };
    static const char *wrapped[] = {
        "ef(q4)", "ef(sign)", "ef(topk:0.05)", "ef(nuq4:code=elias)", "ef21(q2:round=nearest)", "ef21(sign:stochastic)",
        "ef21(topk:0.1,values=q8)", "ef(ef21(q4))", "ef(q4)+zstd", "ef(jointsq:2)",
        "hadamard(fp32)", "hadamard(q4)", "hadamard(q4:group=row,round=nearest)", "hadamard(sign)",
        "hadamard(nuq4:code=elias)", "ef(hadamard(q2))", "hadamard(ef(q2))", "hadamard(ef21(q4))+zstd",
        "hadamard(topk:0.1)",
    };
    pz_shape shapes[] = {
        {2, {64, 96, 0, 0}}, {3, {3, 5, 77, 0}}, {1, {1001, 0, 0, 0}}, {2, {9, 4096, 0, 0}}, {2, {1, 1, 0, 0}},
        {3, {4, 256, 768, 0}}, {2, {3, 100003, 0, 0}},
    };
    size_t nshape = sizeof shapes / sizeof shapes[0];
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        for (size_t h = 0; h < nshape; h++)
            for (uint64_t seed = 1; seed <= 2; seed++) run(specs[i], &shapes[h], seed * 7919 + h, 1, stream);
    for (size_t i = 0; i < sizeof wrapped / sizeof wrapped[0]; i++)
        for (size_t h = 0; h < nshape; h++) run(wrapped[i], &shapes[h], 17 + h, 5, stream);
    /* tah (host route): shapes its budget can hold */
    run("tah:4", &shapes[0], 31, 1, stream);
    run("tah:4.5,alloc=token", &shapes[5], 32, 1, stream);
    run("ef(tah:4)", &shapes[5], 33, 5, stream);
    static const char *aqs[] = {"aq(q4)", "aq(sign:stochastic,warmup=fp16)", "aq(topk:0.1,warmup=q8)",
                                "aq(nuq4:code=elias)", "ef(aq(q4))", "aq(jointsq:2)", "aq(hadamard(q4))",
                                "hadamard(aq(q4))", "hadamard(aq(sign:stochastic,warmup=fp16))"};
    for (size_t i = 0; i < sizeof aqs / sizeof aqs[0]; i++) {
        run_aq(aqs[i], 8, 16, 96, 6, stream);
        run_aq(aqs[i], 3, 1, 1001, 4, stream);
    }
    static const char *nf[] = {"q4", "q4:scale=minmax", "sign", "sign:stochastic", "nuq4", "topk:0.1,values=q8",
                               "topk:0.1", "fp16", "bf16", "hadamard(fp32)", "hadamard(q4)"};
    for (size_t i = 0; i < sizeof nf / sizeof nf[0]; i++) refused(nf[i], 0, stream);
    static const char *big[] = {"q4:sdtype=fp16", "q4:scale=minmax,sdtype=fp16", "sign:sdtype=fp16",
                                "sign:stochastic,sdtype=fp16"};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) refused(big[i], 1, stream);
    CU(cudaStreamDestroy(stream));
    return check_summary("test_gpu_codecs");
}
