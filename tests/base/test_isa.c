/* test_isa.c: the x86-64-v3 and x86-64-v4 copies of the codecs and CPU ops
 * (base/isa.h) against the baseline x86-64 copies, on this CPU's levels.
 *  - codecs: one child process per level (the level is chosen once per
 *    process, from PIPEZIP_ISA) encodes and decodes a fixed set of specs and
 *    shapes and streams every message and decoded tensor to the parent, which
 *    requires them byte for byte equal to the baseline's (no FMA contraction,
 *    fixed reduction orders: compress/README.md);
 *  - ops: each op of every level's CPU table on the same inputs, within
 *    1e-5 relative of the baseline table (vector width changes the order of
 *    float sums; anything larger is a wrong kernel).
 * Also checks that a bad PIPEZIP_ISA is refused with a message naming it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/isa.h"
#include "compress/core/codec.h"
#include "kernels/backend.h"
#include "base/mem.h"
#include "base/rng.h"
#include "base/status.h"
#include "tests/check.h"
#include "tests/compress/codec_stream.h"

static const char *const specs[] = {
    CODEC_STREAM_BASE_SPECS,
    "q4+zstd", "ef(q2)", "ef21(sign)", "hadamard(fp32)", "ef(hadamard(q4))",
    /* width 3 still able to win where width 2 is allowed, in the x86-64-v3
     * pass over the groups (jointsq_pass.c) */
    "jointsq:8",
};
static const pz_shape shapes[] = {
    {3, {2, 37, 129}}, {3, {2, 64, 256}}, {2, {5, 1000}}, {3, {1, 3, 7}},
};
#define NSPECS (sizeof specs / sizeof specs[0])
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* two steps: ef's residual state too */
static void input(float *x, size_t n, size_t C, size_t k, size_t i, int step) {
    codec_stream_fill(x, n, C, 1000 * k + 10 * i + (size_t)step, 1);
}

/* writes (u64 length, bytes) records to the fd in arg: message, then decoded floats */
static int emit(void *arg, const uint8_t *msg, size_t len, const float *y, size_t n) {
    int fd = *(const int *)arg;
    uint64_t l1 = len, l2 = n * sizeof(float);
    return write(fd, &l1, 8) != 8 || write(fd, msg, len) != (ssize_t)len || write(fd, &l2, 8) != 8 ||
           write(fd, y, l2) != (ssize_t)l2;
}

/* tah on the shapes its budgets can hold */
static const char *const tah_specs[] = {CODEC_STREAM_TAH_SPECS};
static const pz_shape tah_shapes[] = {{3, {2, 64, 256}}, {2, {5, 1000}}};

/* lengths that are no multiple of a vector or of a group (the vector paths'
 * tails, a short last group), every codec once; then jointsq's groups on
 * runs of 4 that each hold the same 4 values in a random order: the groups'
 * error sums tie in exact arithmetic, so any other summation order at some
 * level (x86-64-v4's once, issue 26) breaks the ties another way and moves
 * a width to another group */
static const char *const uneven_specs[] = {
    CODEC_STREAM_BASE_SPECS,
    "jointsq:3,group=4", "jointsq:2,group=4", "jointsq:2,group=8", "jointsq:2,group=16",
    "jointsq:3,group=32", "jointsq:3,group=100", "jointsq:4,group=2", "jointsq:3,group=3",
};
#define NUNEVEN_BASE (sizeof (const char *const[]){CODEC_STREAM_BASE_SPECS} / sizeof(const char *))
static const pz_shape uneven_shapes[] = {
    {2, {1, 100009}}, {2, {1, 40013}}, {2, {1, 65547}}, {2, {1, 5}}, {2, {1, 17}}, {2, {1, 1023}},
};

static void uneven_input(float *x, size_t n, size_t C, size_t k, size_t i, int step) {
    if (i < NUNEVEN_BASE) {
        input(x, n, C, k, i, step);
        return;
    }
    static const float vals[4] = {0.83f, -0.27f, 0.51f, -0.119f};
    pz_rng r;
    pz_rng_seed(&r, 1000 * k + 10 * i + (size_t)step);
    for (size_t b = 0; b < n; b += 4) {
        float v[4] = {vals[0], vals[1], vals[2], vals[3]};
        for (int j = 3; j > 0; j--) {           /* Fisher-Yates */
            size_t t = (size_t)pz_rng_below(&r, (uint64_t)j + 1);
            float s = v[j];
            v[j] = v[t];
            v[t] = s;
        }
        for (size_t j = 0; j < 4 && b + j < n; j++) x[b + j] = v[j];
    }
}

/* a tensor large enough that the x86-64-v3 pass over the groups
 * (jointsq_pass.c) finds candidates among the lanes above the smallest
 * scale (its second list, merged in element order) */
static const char *const big_specs[] = {"jointsq:3", "jointsq:0.5"};
static const pz_shape big_shapes[] = {{2, {512, 1024}}};

/* heavy tails (cubes of normals): many lanes above the smallest scale */
static void big_input(float *x, size_t n, size_t C, size_t k, size_t i, int step) {
    (void)C;
    pz_rng r;
    pz_rng_seed(&r, 1000 * k + 10 * i + (size_t)step);
    for (size_t j = 0; j < n; j++) {
        float z = pz_rng_normal(&r);
        x[j] = z * z * z;
    }
}

/* child: encode and decode everything at the level PIPEZIP_ISA names, to fd */
static int produce(int fd) {
    codec_stream cs = {specs, NSPECS, shapes, NSHAPES, 2, 0, input, emit, &fd};
    codec_stream ct = {tah_specs, sizeof tah_specs / sizeof tah_specs[0], tah_shapes, 2, 2, 0, input, emit, &fd};
    codec_stream cu = {uneven_specs, sizeof uneven_specs / sizeof uneven_specs[0], uneven_shapes,
                       sizeof uneven_shapes / sizeof uneven_shapes[0], 1, 0, uneven_input, emit, &fd};
    codec_stream cb = {big_specs, sizeof big_specs / sizeof big_specs[0], big_shapes, 1, 1, 0, big_input, emit, &fd};
    return codec_stream_run(&cs) || codec_stream_run(&ct) || codec_stream_run(&cu) || codec_stream_run(&cb);
}

/* runs produce() in a child at `level`; returns its whole output (malloc'ed) */
static uint8_t *run_level(const char *level, size_t *len) {
    char path[] = "/tmp/pz_test_isa_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    unlink(path);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {   /* a fresh process: the level is chosen once per process */
        setenv("PIPEZIP_ISA", level, 1);
        dup2(fd, 1);
        execl("/proc/self/exe", "test_isa", "--produce", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    uint8_t *out = NULL;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        off_t end = lseek(fd, 0, SEEK_END);
        out = xmalloc((size_t)end + 1);
        *len = (size_t)end;
        if (pread(fd, out, (size_t)end, 0) != end) { free(out); out = NULL; }
    }
    close(fd);
    return out;
}

static void test_codecs(void) {
    size_t blen = 0;
    uint8_t *base = run_level("x86-64", &blen);
    CHECK(base != NULL, "baseline codec run failed");
    if (!base) return;
    for (int l = PZ_ISA_SSE42; l <= (int)pz_isa_cpu(); l++) {
        size_t len = 0;
        uint8_t *got = run_level(pz_isa_name((pz_isa)l), &len);
        CHECK(got != NULL, "%s: codec run failed", pz_isa_name((pz_isa)l));
        if (!got) continue;
        size_t first = 0;
        while (first < len && first < blen && got[first] == base[first]) first++;
        CHECK(len == blen && first == len, "%s: messages or decodes differ from x86-64's from byte %zu (%zu vs %zu bytes)",
              pz_isa_name((pz_isa)l), first, len, blen);
        printf("codecs at %s: %zu bytes of messages and decodes, %s x86-64's\n", pz_isa_name((pz_isa)l), len,
               len == blen && first == len ? "equal to" : "NOT equal to");
        free(got);
    }
    free(base);
}

/* max |a-b| / max(max|b|, 1e-30) */
static double rel(const float *a, const float *b, size_t n) {
    double d = 0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / m;
}

static float *rnd(size_t n, uint64_t seed) {
    float *x = xmalloc(n * sizeof(float));
    pz_rng r;
    pz_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = pz_rng_normal(&r);
    return x;
}

/* every op of table t against the baseline table b at sizes B, T, C, NH, OC;
 * tolerance tol */
static void compare_ops(const pz_backend *t, const pz_backend *b, const char *name, double tol,
                        int B, int T, int C, int NH, int OC) {
    enum { V = 101, Vp = 128 };
    const size_t N = (size_t)B * T;
    const int failed_before = failures;
    float *inp = rnd(N * C, 1), *w = rnd((size_t)OC * C, 2), *bias = rnd(OC, 3), *dout = rnd(N * OC, 4);
    float *o1 = xmalloc(N * 3 * C * sizeof(float)), *o2 = xmalloc(N * 3 * C * sizeof(float));
    float *m1 = xmalloc(N * sizeof(float)), *m2 = xmalloc(N * sizeof(float));
    float *r1 = xmalloc(N * sizeof(float)), *r2 = xmalloc(N * sizeof(float));
    double e;
#define RUN2(call1, call2, out1, out2, count, what)                                    \
    do {                                                                               \
        call1;                                                                         \
        call2;                                                                         \
        e = rel(out1, out2, count);                                                    \
        CHECK(e <= tol, "%s %s: %.3g relative to x86-64 (tolerance %.1g)", name, what, e, tol); \
    } while (0)
    RUN2(t->matmul_forward(o1, inp, w, bias, (int)N, C, OC), b->matmul_forward(o2, inp, w, bias, (int)N, C, OC), o1, o2,
         N * OC, "matmul_forward");
    float *lw = rnd(C, 5), *lb = rnd(C, 6);
    RUN2(t->layernorm_forward(o1, m1, r1, inp, lw, lb, (int)N, C),
         b->layernorm_forward(o2, m2, r2, inp, lw, lb, (int)N, C), o1, o2, N * C, "layernorm_forward");
    e = rel(r1, r2, N);
    CHECK(e <= tol, "%s layernorm rstd: %.3g", name, e);
    {
        float *dw1 = calloc(C, 4), *dw2 = calloc(C, 4), *db1 = calloc(C, 4), *db2 = calloc(C, 4);
        float *di1 = calloc(N * C, 4), *di2 = calloc(N * C, 4), *g = rnd(N * C, 7);
        t->layernorm_backward(di1, dw1, db1, g, inp, lw, m2, r2, (int)N, C);
        b->layernorm_backward(di2, dw2, db2, g, inp, lw, m2, r2, (int)N, C);
        e = fmax(rel(di1, di2, N * C), fmax(rel(dw1, dw2, C), rel(db1, db2, C)));
        CHECK(e <= tol, "%s layernorm_backward: %.3g", name, e);
        free(dw1); free(dw2); free(db1); free(db2); free(di1); free(di2); free(g);
    }
    {
        float *qkv = rnd(N * 3 * C, 8), *a1 = xmalloc((size_t)B * NH * T * T * 4), *a2 = xmalloc((size_t)B * NH * T * T * 4);
        RUN2(t->attention_forward(o1, a1, qkv, B, T, C, NH), b->attention_forward(o2, a2, qkv, B, T, C, NH), o1, o2,
             N * C, "attention_forward");
        e = rel(a1, a2, (size_t)B * NH * T * T);
        CHECK(e <= tol, "%s attention probabilities: %.3g", name, e);
        float *g = rnd(N * C, 9), *d1 = calloc(N * 3 * C, 4), *d2 = calloc(N * 3 * C, 4);
        float *s1 = xmalloc((size_t)B * NH * T * T * 4), *s2 = xmalloc((size_t)B * NH * T * T * 4);
        t->attention_backward(d1, s1, g, qkv, a2, B, T, C, NH);
        b->attention_backward(d2, s2, g, qkv, a2, B, T, C, NH);
        e = rel(d1, d2, N * 3 * C);
        CHECK(e <= tol, "%s attention_backward: %.3g", name, e);
        free(qkv); free(a1); free(a2); free(g); free(d1); free(d2); free(s1); free(s2);
    }
    RUN2(t->gelu_forward(o1, inp, N * C), b->gelu_forward(o2, inp, N * C), o1, o2, N * C, "gelu_forward");
    {
        float *g = rnd(N * C, 10);
        memset(o1, 0, N * C * 4);   /* backward ops accumulate */
        memset(o2, 0, N * C * 4);
        RUN2(t->gelu_backward(o1, inp, g, N * C), b->gelu_backward(o2, inp, g, N * C), o1, o2, N * C, "gelu_backward");
        RUN2(t->residual_forward(o1, inp, g, N * C), b->residual_forward(o2, inp, g, N * C), o1, o2, N * C,
             "residual_forward");
        free(g);
    }
    {
        float *l1 = rnd(N * Vp, 11), *l2 = xmalloc(N * Vp * 4), *ls1 = xmalloc(N * 4), *ls2 = xmalloc(N * 4);
        memcpy(l2, l1, N * Vp * 4);
        int *tg = xmalloc(N * sizeof(int));
        for (size_t i = 0; i < N; i++) tg[i] = (int)((i * 37) % V);
        t->crossentropy_forward(ls1, l1, tg, (int)N, V, Vp, 0.01f);
        b->crossentropy_forward(ls2, l2, tg, (int)N, V, Vp, 0.01f);
        e = fmax(rel(ls1, ls2, N), rel(l1, l2, N * Vp));
        CHECK(e <= tol, "%s crossentropy: %.3g", name, e);
        free(l1); free(l2); free(ls1); free(ls2); free(tg);
    }
    {
        double s1 = t->sumsq(inp, N * C), s2 = b->sumsq(inp, N * C);
        CHECK(fabs(s1 - s2) <= tol * s2, "%s sumsq: %.17g vs %.17g", name, s1, s2);
        float *p1 = rnd(N * C, 12), *p2 = xmalloc(N * C * 4), *mm1 = calloc(N * C, 4), *mm2 = calloc(N * C, 4);
        float *v1 = calloc(N * C, 4), *v2 = calloc(N * C, 4);
        memcpy(p2, p1, N * C * 4);
        for (int step = 1; step <= 3; step++) {
            t->adamw_update(p1, inp, mm1, v1, N * C, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, step);
            b->adamw_update(p2, inp, mm2, v2, N * C, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, step);
        }
        e = rel(p1, p2, N * C);
        CHECK(e <= tol, "%s adamw: %.3g", name, e);
        free(p1); free(p2); free(mm1); free(mm2); free(v1); free(v2);
    }
    {
        int *ids = xmalloc(N * sizeof(int));
        for (size_t i = 0; i < N; i++) ids[i] = (int)((i * 13) % V);
        float *wte = rnd((size_t)Vp * C, 13), *wpe = rnd((size_t)T * C, 14);
        RUN2(t->encoder_forward(o1, ids, wte, wpe, B, T, C), b->encoder_forward(o2, ids, wte, wpe, B, T, C), o1, o2,
             N * C, "encoder_forward");
        free(ids); free(wte); free(wpe);
    }
    if (failures == failed_before)
        printf("ops at %s, C=%d NH=%d OC=%d: every op within %.0e of x86-64's\n", name, C, NH, OC, tol);
    else
        printf("ops at %s, C=%d NH=%d OC=%d: %d check(s) beyond %.0e of x86-64's\n", name, C, NH, OC,
               failures - failed_before, tol);
    free(inp); free(w); free(bias); free(dout); free(o1); free(o2); free(m1); free(m2); free(r1); free(r2);
    free(lw); free(lb);
}

static void test_ops(void) {
    const pz_backend *b = pz_backend_cpu_at(PZ_ISA_BASELINE);
    if (!b) {   /* -Dnative=true: one table, nothing to compare */
        printf("ops: this build has no per-level tables (-Dnative=true)\n");
        return;
    }
    for (int l = PZ_ISA_AVX2; l <= (int)pz_isa_cpu(); l++) {
        const pz_backend *t = pz_backend_cpu_at(l);
        CHECK(t != NULL, "no CPU table at %s", pz_isa_name((pz_isa)l));
        /* C=96: whole vectors; C=100, head size 25, OC=37 and N*C = 3300: the
         * scalar tails that follow the 8- and 16-wide vector loops */
        if (t) compare_ops(t, b, pz_isa_name((pz_isa)l), 1e-5, 2, 33, 96, 4, 72);
        if (t) compare_ops(t, b, pz_isa_name((pz_isa)l), 1e-5, 1, 33, 100, 4, 37);
    }
    /* the check can fail: a table against a wrong kernel's output */
    CHECK(pz_backend_cpu_at((int)pz_isa_cpu() + 1) == NULL || pz_isa_cpu() == PZ_ISA_AVX512,
          "a level above this CPU's must not be handed out");
}

static void test_bad_env(void) {
    fflush(NULL);
    int pipefd[2];
    if (pipe(pipefd) != 0) return;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 2);
        setenv("PIPEZIP_ISA", "avx9000", 1);
        execl("/proc/self/exe", "test_isa", "--produce", (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    char buf[512] = {0};
    ssize_t n = read(pipefd[0], buf, sizeof buf - 1);
    (void)n;
    close(pipefd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(buf, "PIPEZIP_ISA=avx9000") && strstr(buf, "x86-64-v3"),
          "bad PIPEZIP_ISA: exit %d, message '%s'", WIFEXITED(st) ? WEXITSTATUS(st) : -1, buf);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--produce") == 0) {
        /* child: say which level runs (stderr), then stream to stdout */
        fprintf(stderr, "  child at %s\n", pz_isa_describe());
        return produce(1);
    }
    printf("CPU level %s; build: %s\n", pz_isa_name(pz_isa_cpu()), pz_isa_describe());
    if (pz_isa_built() == PZ_ISA_BASELINE) {
        printf("test_isa: this build has no per-level copies (-Dnative=true or not x86-64): nothing to compare\n");
        return 0;
    }
    test_codecs();
    test_ops();
    test_bad_env();
    return check_summary("test_isa");
}
