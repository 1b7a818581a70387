/* rng.c: see rng.h. */
#include "base/rng.h"

#include <math.h>

#define GOLDEN64 0x9E3779B97F4A7C15ull

uint64_t pz_splitmix64(uint64_t x) {
    uint64_t z = x + GOLDEN64;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* the splitmix64 sequence from seed: its i-th output mixes seed + i steps */
void pz_rng_seed(pz_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = pz_splitmix64(seed + (uint64_t)i * GOLDEN64);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t pz_rng_next(pz_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float pz_rng_uniform(pz_rng *r) { return (float)(pz_rng_next(r) >> 40) * (1.0f / 16777216.0f); }

float pz_rng_normal(pz_rng *r) {
    /* Box-Muller; u1 in (0, 1] so log is finite */
    double u1 = ((double)(pz_rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(pz_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint64_t pz_rng_below(pz_rng *r, uint64_t n) {
    /* rejection sampling: drop the top partial range so every value is equally likely */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = pz_rng_next(r); while (x >= limit);
    return x % n;
}
