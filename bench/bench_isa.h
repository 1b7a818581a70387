/* bench_isa.h: one table per instruction-set level for the benchmarks. */
#ifndef PZ_BENCH_ISA_H
#define PZ_BENCH_ISA_H

#include "base/isa.h"

/* Runs this program again (same arguments) under PIPEZIP_ISA at every level
 * from the best this CPU and build run down to `lowest`, best first, each
 * after a "== PIPEZIP_ISA=<level> ==" line; setup (may be NULL) sets more of
 * the child's environment for its level before the exec (returning non-zero
 * if it set anything). The level is chosen once per process (base/isa.h),
 * hence a child per level. Returns non-zero if any run failed. */
int bench_each_isa(char **argv, pz_isa lowest, int (*setup)(pz_isa level));

/* With PIPEZIP_ISA set by the caller (one level, no children): gives this
 * process the environment bench_each_isa's child at that level gets, so
 * that both ways of asking for a level measure the same thing. setup runs
 * for the level in use; if it set anything, this program runs itself again
 * (same arguments), since libraries such as OpenBLAS read their variables
 * when loaded. Returns when there is nothing to set. */
void bench_isa_same_env(char **argv, int (*setup)(pz_isa level));

#endif
