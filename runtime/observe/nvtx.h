/* nvtx.h: named ranges for Nsight Systems (NVTX3, header-only, shipped with
 * the CUDA toolkit). Without NVTX (a build without CUDA) they compile to
 * nothing and their arguments are not evaluated.
 *
 *   PZ_RANGE_PUSH("F step %d micro %d", step, micro);  ...  PZ_RANGE_POP();
 *
 * Pushes and pops nest per thread. With NVTX built in but no profiler
 * attached, nvtxRangePushA returns at once; the name is still formatted
 * (one snprintf), which is why ranges sit around whole stage passes, sends
 * and optimizer steps, never inside ops. */
#ifndef PZ_NVTX_H
#define PZ_NVTX_H

#ifdef PZ_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#define PZ_RANGE_PUSH(...)                                               \
    do {                                                                 \
        char pz_range_name_[96];                                         \
        snprintf(pz_range_name_, sizeof pz_range_name_, __VA_ARGS__);    \
        nvtxRangePushA(pz_range_name_);                                  \
    } while (0)
#define PZ_RANGE_POP() ((void)nvtxRangePop())
#else
#define PZ_RANGE_PUSH(...) ((void)0)
#define PZ_RANGE_POP() ((void)0)
#endif

#endif
