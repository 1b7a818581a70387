/* isa.h: which x86-64 instruction-set level the hot paths run at.
 *
 * The default build targets baseline x86-64 so that one binary runs on every
 * host of a job (a -march=native binary on a shared filesystem dies with
 * SIGILL on an older CPU). The hot translation units of compress/ and
 * kernels/cpu/ are compiled again for x86-64-v3 (AVX2, FMA, F16C) and
 * x86-64-v4 plus AVX512-VBMI2 (Ice Lake, Zen 4 and later: jointsq's and the
 * knapsack's compress/expand paths need VBMI2; without it, an AVX-512 CPU
 * such as Cascade Lake runs the x86-64-v3 code), with an ISA suffix on their symbols
 * (a header tools/isa_rename.py generates); the codec registry and
 * the CPU backend table pick the best level this CPU has, once.
 * PIPEZIP_ISA=x86-64|x86-64-v2|x86-64-v3|x86-64-v4+vbmi2 caps the level (for
 * tests and benchmarks); a value this CPU or this build cannot honour is an
 * error, never a silent fallback. With -Dnative=true there are no variants:
 * everything is compiled for the build host and the level reads "native".
 *
 * Base layer: includes nothing else of pipezip's. */
#ifndef PZ_BASE_ISA_H
#define PZ_BASE_ISA_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PZ_ISA_BASELINE = 0,  /* x86-64 (SSE2), or any non-x86 CPU */
    PZ_ISA_SSE42 = 1,     /* x86-64-v2: SSE4.2 (hardware CRC-32C), POPCNT */
    PZ_ISA_AVX2 = 2,      /* x86-64-v3: AVX2, FMA, F16C, BMI1/2 */
    PZ_ISA_AVX512 = 3,    /* x86-64-v4 (AVX-512 F, BW, CD, DQ, VL) + AVX512-VBMI2 */
    PZ_ISA_LEVELS = 4
} pz_isa;

/* The level in use: the best this CPU supports among those this build
 * has, capped by PIPEZIP_ISA. Chosen on the first call (thread-safe). An
 * invalid PIPEZIP_ISA prints an error naming the variable and its values
 * and exits with status 1. */
pz_isa pz_isa_level(void);
/* "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4+vbmi2"; with -Dnative=true, "native". */
const char *pz_isa_name(pz_isa level);
/* What this CPU supports (regardless of the build and PIPEZIP_ISA). */
pz_isa pz_isa_cpu(void);
/* The highest level with compiled variants in this build. */
pz_isa pz_isa_built(void);
/* One line for start-up messages and benchmarks, e.g.
 * "x86-64-v4 (CPU: x86-64-v4; PIPEZIP_ISA unset)". Static buffer. */
const char *pz_isa_describe(void);

#ifdef __cplusplus
}
#endif

#endif
