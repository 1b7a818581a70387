/* slurp.h: the C tests that print into a tmpfile read it back whole. */
#ifndef PZ_TESTS_SLURP_H
#define PZ_TESTS_SLURP_H

#include <stdio.h>
#include <stdlib.h>

/* What was written to f, from its start to the current position, as a
 * malloc'ed NUL-terminated string (f is read to that position again). */
static inline char *slurp(FILE *f) {
    long len = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)len + 1);
    size_t got = fread(buf, 1, (size_t)len, f);
    buf[got] = 0;
    return buf;
}

#endif
