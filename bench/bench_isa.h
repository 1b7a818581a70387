/* bench_isa.h: one table per instruction-set level for the benchmarks. */
#ifndef PZ_BENCH_ISA_H
#define PZ_BENCH_ISA_H

#include "base/isa.h"

/* Runs this program again (same arguments) under PIPEZIP_ISA at every level
 * from the best this CPU and build run down to `lowest`, best first, each
 * after a "== PIPEZIP_ISA=<level> ==" line; setup (may be NULL) sets more of
 * the child's environment for its level before the exec. The level is
 * chosen once per process (base/isa.h), hence a child per level. Returns
 * non-zero if any run failed. */
int bench_each_isa(char **argv, pz_isa lowest, void (*setup)(pz_isa level));

#endif
