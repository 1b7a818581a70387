/* kselect.h: exact k-th largest magnitude by radix selection (private to compress/).
 *
 * The magnitude key of a float is its bit pattern with the sign cleared; for
 * non-negative floats the integer order of keys is the numeric order, -0 and
 * +0 are equal, +inf is above every finite value and NaN above +inf. The
 * selection runs a most-significant-digit radix select on the keys (digits of
 * 11/10/10 bits for long inputs, 8/8/8/7 for short ones): a histogram of the
 * current digit over the candidates, the bucket holding rank k from the top,
 * then the candidates of that bucket only. O(n) in the worst case, no sort,
 * no sampling: the result is exact. */
#ifndef PZ_KSELECT_H
#define PZ_KSELECT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t pz_abs_key(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u & 0x7fffffffu;
}

/* For 1 <= k <= n: returns T, the k-th largest key of x[0..n), and sets
 * *above to the number of keys > T (so k - *above keys equal to T belong to
 * the top k). scratch holds n uint32. */
uint32_t pz_kth_largest_abs(const float *x, size_t n, size_t k, uint32_t *scratch, size_t *above);

/* The same over keys already computed: for 1 <= k <= m, returns the k-th
 * largest of key[0..m) and sets *above to the number of keys greater than it.
 * key[] is overwritten (used as scratch). Radix selection on the keys' actual
 * range [min, max] with up to 256 buckets per level (each level divides the
 * range by 256), then an insertion sort once 16 or fewer candidates remain:
 * O(m) and fast for the small candidate sets of topk. */
uint32_t pz_kth_largest_key(uint32_t *key, size_t m, size_t k, size_t *above);

#endif
