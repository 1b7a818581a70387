/* clock.h: the monotonic clock. */
#ifndef PZ_BASE_CLOCK_H
#define PZ_BASE_CLOCK_H

#ifdef __cplusplus
extern "C" {
#endif

/* Monotonic wall clock in seconds. */
double pz_now(void);

#ifdef __cplusplus
}
#endif

#endif
