/* fuzz_reason.h: the promise of a message check that fills a reason buffer
 * (the frame's and the data-parallel message's), which their fuzz entries
 * test: the result is one of the enum's, the reason is empty exactly when
 * the result is OK, and it is printable and terminated. Aborts when broken. */
#ifndef PZ_TESTS_FUZZ_REASON_H
#define PZ_TESTS_FUZZ_REASON_H

#include <stdlib.h>
#include <string.h>

/* result r of a check whose results are 0 (OK) .. last; why: cap bytes */
static inline void fuzz_check_reason(int r, int last, const char *why, size_t cap) {
    if (r < 0 || r > last) abort();
    size_t n = strnlen(why, cap);
    if (n == cap) abort();
    if ((r == 0) != (n == 0)) abort();
    for (size_t i = 0; i < n; i++)
        if (why[i] < 32 || why[i] > 126) abort();
}

#endif
