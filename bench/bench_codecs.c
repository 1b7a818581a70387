/* bench_codecs.c: encode and decode throughput of every codec on one thread.
 *
 *   bench_codecs [--runs N] [--clock wall|cpu] [SPEC...]
 *
 * Input: a (8, 512, 1024) float32 tensor (4M floats, 16 MiB) that looks like
 * activations: Gaussian, with 1% of the channels scaled up 10x and heavy
 * tailed. For each codec: median over N runs (default 9) of the time to encode
 * the whole tensor into a message and to decode it, as GB/s of float input
 * (16 MiB / time) and as a ratio to memcpy of the same 16 MiB, timed in the
 * same loop as the codec's runs (so a busy machine slows both alike); plus the compression ratio (input bytes / wire bytes) and the
 * relative L2 error of the decoded tensor. Targets (issue 3, one core): fp16,
 * bf16, q<b>, sign >= 0.5x memcpy; topk:0.1 >= 0.2x; jointsq >= 0.15x;
 * (issue 14) nuq<b>:code=elias >= 0.1x; each line says whether its target
 * is met (both ways: encode and decode). Exit status 0 (a benchmark reports).
 * --clock cpu times with the thread's CPU clock instead of the wall clock: on
 * a machine shared with other jobs it leaves out the time the thread waits
 * for a core (both memcpy and the codecs are timed the same way).
 * One table per instruction-set level this CPU and build can run (base/isa.h:
 * x86-64-v4+vbmi2, x86-64-v3, x86-64-v2, x86-64), best first, each from a
 * child process started with PIPEZIP_ISA set (the level is chosen once per
 * process), so an AVX-512 machine measures the AVX2 paths too; with
 * PIPEZIP_ISA set, only that level's table. The targets hold at x86-64-v3
 * and above (issue 26); the lower levels' tables say what speed they reach. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "base/isa.h"
#include "bench/bench_isa.h"
#include "compress/core/codec.h"
#include "base/clock.h"
#include "base/mem.h"
#include "base/rng.h"
#include "bench/bench_util.h"

static int use_cpu_clock = 0;

static double now(void) {
    if (!use_cpu_clock) return pz_now();
    return bench_thread_cpu_now();
}

static const char *const default_specs[] = {
    "fp32", "fp16", "bf16",
    "q8", "q4", "q2", "q1",
    "q8:round=nearest", "q4:round=nearest", "q4:group=row", "q4:scale=minmax,group=row",
    "q4:group=256,sdtype=fp16", "q2:group=row,round=nearest",
    "sign", "sign:stochastic", "sign:group=channel",
    "nuq4", "nuq8", "nuq4:code=elias", "nuq2:code=elias",
    "topk:0.1", "topk:0.01",
    "jointsq:1.5", "jointsq:0.5",
    "q8+zstd",
    "hadamard(fp32)", "hadamard(q4:group=row,round=nearest)",
};

/* target ratio to memcpy for a spec, or 0 when the issue sets none */
static double target_of(const char *spec) {
    if (strchr(spec, '(') || strstr(spec, "+zstd")) return 0.0;
    if (!strncmp(spec, "fp16", 4) || !strncmp(spec, "bf16", 4) || !strncmp(spec, "sign", 4)) return 0.5;
    if (spec[0] == 'q' && spec[1] >= '1' && spec[1] <= '8') return 0.5;
    if (!strncmp(spec, "topk:0.1", 8) && (spec[8] == 0 || spec[8] == ',')) return 0.2;
    if (!strncmp(spec, "jointsq", 7)) return 0.15;
    if (!strncmp(spec, "nuq", 3) && strstr(spec, "code=elias")) return 0.1;
    return 0.0;
}

/* The benchmark's tensor: normal values, with heavy-tailed outlier channels
 * (one in 97) of C channels. */
static void fill_input(float *x, size_t n, size_t C) {
    pz_rng r;
    pz_rng_seed(&r, 1234);
    for (size_t i = 0; i < n; i++) {
        size_t c = i % C;
        float z = pz_rng_normal(&r);
        if (c % 97 == 3) z = 10.0f * z * (1.0f + 0.1f * z * z);   /* heavy-tailed outlier channels */
        x[i] = z;
    }
}

/* The options before the first codec spec; returns that spec's index (argc:
 * none, every codec). --help and an unknown option end the process here. */
static int parse_options(int argc, char **argv, int *runs) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
            *runs = atoi(argv[++i]);
            if (*runs < 1 || *runs > 1000) pz_die("--runs must be 1..1000");
        } else if (!strcmp(argv[i], "--clock") && i + 1 < argc) {
            i++;
            if (!strcmp(argv[i], "cpu")) use_cpu_clock = 1;
            else if (strcmp(argv[i], "wall")) pz_die("--clock must be wall or cpu");
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench_codecs [--runs N] [--clock wall|cpu] [SPEC...]\n"
                   "  encode/decode speed of each codec SPEC (default: every codec) against memcpy,\n"
                   "  one table per instruction-set level this CPU runs (PIPEZIP_ISA=LEVEL: only that one)\n");
            exit(0);
        } else if (argv[i][0] == '-') {
            /* A mistyped option would otherwise be taken as a codec spec and
             * "skipped" in every table, exiting 0. */
            fprintf(stderr, "bench_codecs: unknown option '%s' (see --help)\n", argv[i]);
            exit(2);
        } else {
            return i;
        }
    }
    return argc;
}

int main(int argc, char **argv) {
    int runs = 9;
    int first_spec = parse_options(argc, argv, &runs);
    const char *env = getenv("PIPEZIP_ISA");
    if (!(env && *env) && pz_isa_built() > PZ_ISA_BASELINE) return bench_each_isa(argv, PZ_ISA_BASELINE, NULL);
    omp_set_num_threads(1);
    const char *const *specs = default_specs;
    int nspecs = (int)(sizeof default_specs / sizeof default_specs[0]);
    if (first_spec < argc) {
        specs = (const char *const *)(argv + first_spec);
        nspecs = argc - first_spec;
    }

    pz_shape shape = {3, {8, 512, 1024, 0}};
    size_t n = pz_shape_numel(&shape), bytes = n * sizeof(float);
    float *x = xaligned_alloc(bytes), *y = xaligned_alloc(bytes), *tmp = xaligned_alloc(bytes);
    fill_input(x, n, (size_t)shape.dims[2]);
    /* memcpy bandwidth of the same 16 MiB */
    double *t = xmalloc(sizeof(double) * (size_t)(runs > 9 ? runs : 9) * 3);
    memcpy(tmp, x, bytes);
    for (int k = 0; k < 9; k++) {
        double t0 = now();
        memcpy(tmp, x, bytes);
        t[k] = now() - t0;
        x[k] += 0.0f;
    }
    double memcpy_gbps = (double)bytes / bench_median(t, 9) * 1e-9;
    printf("bench_codecs: tensor (8, 512, 1024) float32 = %zu bytes, one thread, median of %d runs, %s clock\n", bytes,
           runs, use_cpu_clock ? "thread CPU" : "wall");
    printf("memcpy at start: %.2f GB/s; each line's ratios use memcpy timed in the same runs (cpy GB/s)\n",
           memcpy_gbps);
    printf("codecs compiled for: %s\n", pz_isa_describe());
    if (pz_isa_level() < PZ_ISA_AVX2 && pz_isa_built() > PZ_ISA_BASELINE)
        printf("(the targets are set for x86-64-v3 and above: below, this table says what speed the level reaches)\n");
    printf("\n");
    printf("%-52s %8s %9s %8s %9s %8s %8s %9s %7s  %s\n", "codec", "ratio", "enc GB/s", "enc/cpy", "dec GB/s", "dec/cpy",
           "cpy GB/s", "rel err", "target", "met");
    int misses = 0;
    for (int s = 0; s < nspecs; s++) {
        pz_codec *enc = NULL, *dec = NULL;
        if (pz_codec_create(specs[s], &enc) != PZ_OK || pz_codec_create(specs[s], &dec) != PZ_OK) {
            printf("%-52s skipped: %s\n", specs[s], pz_last_error());
            pz_codec_free(enc);
            continue;
        }
        size_t cap = pz_codec_max_encoded_size(enc, &shape), len = 0;
        uint8_t *msg = xaligned_alloc(cap);
        uint64_t ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        pz_codec_ctx ctx = {1, 0, 0, 0, 0, ids};
        double *te = t, *td = t + runs, *tm = t + 2 * runs;
        int ok = 1;
        for (int k = 0; k < runs && ok; k++) {
            ctx.step = (uint64_t)k;
            double t0 = now();
            memcpy(tmp, x, bytes);   /* memcpy under the same conditions as the codec */
            tm[k] = now() - t0;
            t0 = now();
            ok = pz_codec_encode(enc, x, &shape, &ctx, msg, cap, &len) == PZ_OK;
            te[k] = now() - t0;
            pz_shape got;
            t0 = now();
            ok = ok && pz_codec_decode(dec, msg, len, &ctx, y, n, &got) == PZ_OK;
            td[k] = now() - t0;
        }
        if (!ok) {
            printf("%-52s failed: %s\n", specs[s], pz_last_error());
        } else {
            double num = 0, den = 0;
            for (size_t i = 0; i < n; i++) {
                double d = (double)x[i] - (double)y[i];
                num += d * d;
                den += (double)x[i] * (double)x[i];
            }
            double eg = (double)bytes / bench_median(te, runs) * 1e-9, dg = (double)bytes / bench_median(td, runs) * 1e-9;
            memcpy_gbps = (double)bytes / bench_median(tm, runs) * 1e-9;
            double target = target_of(specs[s]);
            const char *met = "";
            if (target > 0) {
                int m = eg / memcpy_gbps >= target && dg / memcpy_gbps >= target;
                met = m ? "yes" : "NO";
                misses += !m;
            }
            char tg[16] = "-";
            if (target > 0) snprintf(tg, sizeof tg, "%.2fx", target);
            printf("%-52.52s %8.2f %9.2f %8.2f %9.2f %8.2f %8.2f %9.2e %7s  %s\n", pz_codec_spec(enc),
                   (double)bytes / (double)len, eg, eg / memcpy_gbps, dg, dg / memcpy_gbps, memcpy_gbps, sqrt(num / den),
                   tg, met);
        }
        free(msg);
        pz_codec_free(enc);
        pz_codec_free(dec);
    }
    printf("\n%d codec(s) below their target\n", misses);
    free(t);
    free(x);
    free(y);
    free(tmp);
    return 0;
}
