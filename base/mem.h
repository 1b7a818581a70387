/* mem.h: allocation that cannot fail silently: out of memory aborts with the
 * caller's file and line (an allocation whose size comes from outside is
 * checked by the caller first and reported as PZ_ERR_NOMEM instead). */
#ifndef PZ_BASE_MEM_H
#define PZ_BASE_MEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *xmalloc_at(size_t n, const char *file, int line);
void *xcalloc_at(size_t n, size_t size, const char *file, int line);
/* 64-byte aligned, for SIMD loads and to keep tensors on their own cache lines */
void *xaligned_alloc_at(size_t n, const char *file, int line);
#define xmalloc(n) xmalloc_at((n), __FILE__, __LINE__)
#define xcalloc(n, s) xcalloc_at((n), (s), __FILE__, __LINE__)
#define xaligned_alloc(n) xaligned_alloc_at((n), __FILE__, __LINE__)
char *xstrdup(const char *s);

/* Two parallel arrays of n elements (asize and bsize bytes each), zeroed, or
 * neither: returns 0 with *a and *b NULL when either allocation fails, for
 * tables whose size comes from outside (the caller reports PZ_ERR_NOMEM). */
int pz_calloc_pair(void **a, size_t asize, void **b, size_t bsize, size_t n);

/* free() of each of n pointers (NULL ones too): the body of PZ_FREE_ALL. */
void pz_free_each(void *const *ptrs, size_t n);
/* PZ_FREE_ALL(a, b, c) frees a, b and c, for the free functions of structs
 * that own several buffers. C only: it builds a compound literal. */
#define PZ_FREE_ALL(...) \
    pz_free_each((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

/* Scratch of megabytes: each fresh 4 KiB page costs a fault, so from 2 MiB
 * up the buffer is 2 MiB aligned and asks for transparent huge pages where
 * the kernel offers them on request; smaller ones are plain xmalloc. Free
 * with free(). */
void *pz_alloc_huge(size_t n);

#ifdef __cplusplus
}
#endif

#endif
