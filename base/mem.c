/* mem.c: see mem.h. */
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/status.h"

void *xmalloc_at(size_t n, const char *file, int line) {
    void *p = malloc(n ? n : 1);
    if (!p) pz_die("%s:%d: out of memory allocating %zu bytes", file, line, n);
    return p;
}

void *xcalloc_at(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) pz_die("%s:%d: out of memory allocating %zu x %zu bytes", file, line, n, size);
    return p;
}

void *xaligned_alloc_at(size_t n, const char *file, int line) {
    size_t rounded = (n + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) pz_die("%s:%d: out of memory allocating %zu aligned bytes", file, line, n);
    return p;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = xmalloc(n);
    memcpy(p, s, n);
    return p;
}

int pz_calloc_pair(void **a, size_t asize, void **b, size_t bsize, size_t n) {
    *a = calloc(n, asize);
    *b = calloc(n, bsize);
    if (*a && *b) return 1;
    free(*a);
    free(*b);
    *a = *b = NULL;
    return 0;
}

void pz_free_each(void *const *ptrs, size_t n) {
    for (size_t i = 0; i < n; i++) free(ptrs[i]);
}

void *pz_alloc_huge(size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t huge = (size_t)1 << 21;
    if (n >= huge) {
        size_t r = (n + huge - 1) & ~(huge - 1);
        void *p = aligned_alloc(huge, r);
        if (p) {
            (void)madvise(p, r, MADV_HUGEPAGE);
            return p;
        }
    }
#endif
    return xmalloc(n);
}
