/* rng.h: the deterministic random numbers of initialisation and shuffling. */
#ifndef PZ_BASE_RNG_H
#define PZ_BASE_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Small deterministic RNG (splitmix64 seeding a xoshiro256**), used for
 * initialisation, shuffling and, later, stochastic rounding. */
typedef struct { uint64_t s[4]; } pz_rng;
void pz_rng_seed(pz_rng *r, uint64_t seed);
uint64_t pz_rng_next(pz_rng *r);
float pz_rng_uniform(pz_rng *r);          /* [0, 1) with 24 random bits */
float pz_rng_normal(pz_rng *r);           /* standard normal, Box-Muller */
uint64_t pz_rng_below(pz_rng *r, uint64_t n); /* uniform in [0, n), unbiased */

/* One splitmix64 output from state x (x advanced by its constant, then
 * mixed): a stateless hash of a counter, e.g. for test data by index. */
uint64_t pz_splitmix64(uint64_t x);

#ifdef __cplusplus
}
#endif

#endif
