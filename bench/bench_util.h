/* bench_util.h: what the C benchmarks share: sorting and medians of
 * timings, and a thread's CPU clock. */
#ifndef PZ_BENCH_UTIL_H
#define PZ_BENCH_UTIL_H

#ifdef __cplusplus
extern "C" {
#endif

/* qsort's comparison for doubles, ascending */
int bench_cmp_double(const void *a, const void *b);

/* The median of v[0..n) (n >= 1; the mean of the two middle values when n is
 * even). Sorts v in place, so v[0] and v[n - 1] are then the min and max. */
double bench_median(double *v, int n);

/* Seconds of CPU time this thread has used: on a loaded machine it counts
 * the work done, not the time spent waiting for a core. */
double bench_thread_cpu_now(void);

#ifdef __cplusplus
}
#endif

#endif
