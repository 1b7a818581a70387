/* isa.c: see isa.h. */
#include "base/isa.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[PZ_ISA_LEVELS] = {"x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4+vbmi2"};

pz_isa pz_isa_built(void) {
#if defined(PZ_ISA_MULTI)
    return PZ_ISA_AVX512;
#else
    return PZ_ISA_BASELINE;
#endif
}

pz_isa pz_isa_cpu(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt") &&
          __builtin_cpu_supports("ssse3")))
        return PZ_ISA_BASELINE;
    /* clang 14's __builtin_cpu_supports has no "f16c": CPUID leaf 1, ECX bit 29
     * (the OS saving AVX state is covered by the "avx" check) */
    unsigned a, b, c, d;
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c &&
          __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("avx")))
        return PZ_ISA_SSE42;
    if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi2")))
        return PZ_ISA_AVX2;
    return PZ_ISA_AVX512;
#else
    return PZ_ISA_BASELINE;
#endif
}

static pz_isa chosen;
static char described[160];

static void choose(void) {
    pz_isa cpu = pz_isa_cpu(), lvl = cpu;
    const char *env = getenv("PIPEZIP_ISA");
#if !defined(PZ_ISA_MULTI) && defined(PZ_ISA_NATIVE)
    /* everything was compiled for the build host: there is nothing to choose */
    if (env && *env)
        fprintf(stderr, "pipezip: note: PIPEZIP_ISA=%s ignored: this build is -Dnative=true (no variants)\n", env);
    snprintf(described, sizeof described, "native (-Dnative=true; CPU: %s)", names[cpu]);
    chosen = cpu;
    return;
#endif
    if (env && *env) {
        int want = -1;
        for (int i = 0; i < PZ_ISA_LEVELS; i++)
            if (strcmp(env, names[i]) == 0) want = i;
        if (want < 0) {
            fprintf(stderr, "pipezip: error: PIPEZIP_ISA=%s: expected x86-64, x86-64-v2, x86-64-v3 or x86-64-v4+vbmi2\n",
                    env);
            exit(1);
        }
        if ((pz_isa)want > cpu) {
            fprintf(stderr, "pipezip: error: PIPEZIP_ISA=%s: this CPU supports up to %s\n", env, names[cpu]);
            exit(1);
        }
        lvl = (pz_isa)want;
    }
    chosen = lvl;
    snprintf(described, sizeof described, "%s (CPU: %s; %s%s)", names[lvl], names[cpu],
             env && *env ? "PIPEZIP_ISA=" : "PIPEZIP_ISA unset", env && *env ? env : "");
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

pz_isa pz_isa_level(void) {
    pthread_once(&once, choose);
    return chosen;
}

const char *pz_isa_name(pz_isa level) {
#if !defined(PZ_ISA_MULTI) && defined(PZ_ISA_NATIVE)
    (void)level;
    return "native";
#else
    return (unsigned)level < PZ_ISA_LEVELS ? names[level] : "?";
#endif
}

const char *pz_isa_describe(void) {
    pthread_once(&once, choose);
    return described;
}
