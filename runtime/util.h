/* util.h: checked allocation and file wrappers, error codes, atomic writes.
 *
 * Two kinds of failure, two mechanisms:
 *  - programming or resource failures (out of memory, a write that fails on a
 *    file we already opened) abort through xmalloc/xfwrite with file and line;
 *  - bad input from outside (files, flags, peers) is reported with a pz_status
 *    returned up the stack and a message kept in pz_last_error(), so the caller
 *    decides how to fail (the CLI prints it and exits non-zero). */
#ifndef PZ_UTIL_H
#define PZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    PZ_OK = 0,
    PZ_ERR_IO,      /* open/read/write failed, file truncated */
    PZ_ERR_FORMAT,  /* bad magic, version, header, JSON */
    PZ_ERR_SHAPE,   /* sizes that do not fit together */
    PZ_ERR_ARG,     /* bad command-line or API argument */
    PZ_ERR_NOMEM,   /* an allocation asked for by input was refused */
    PZ_ERR_PEER,    /* a remote process failed or sent garbage */
} pz_status;

const char *pz_status_name(pz_status s);

/* Records a formatted message for the current thread and returns `s`, so
 * library code can write `return pz_fail(PZ_ERR_FORMAT, "%s: bad magic", p);` */
pz_status pz_fail(pz_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *pz_last_error(void);

/* Print "pipezip: error: ..." and exit(1). */
_Noreturn void pz_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void *xmalloc_at(size_t n, const char *file, int line);
void *xcalloc_at(size_t n, size_t size, const char *file, int line);
/* 64-byte aligned, for SIMD loads and to keep tensors on their own cache lines */
void *xaligned_alloc_at(size_t n, const char *file, int line);
#define xmalloc(n) xmalloc_at((n), __FILE__, __LINE__)
#define xcalloc(n, s) xcalloc_at((n), (s), __FILE__, __LINE__)
#define xaligned_alloc(n) xaligned_alloc_at((n), __FILE__, __LINE__)
char *xstrdup(const char *s);

/* Write-all helpers that abort with file and line on a write error. */
void xfwrite_at(const void *p, size_t size, size_t n, FILE *f, const char *file, int line);
#define xfwrite(p, s, n, f) xfwrite_at((p), (s), (n), (f), __FILE__, __LINE__)

/* Read a whole file (or fail with a message). *out is malloc'ed. */
pz_status pz_read_file(const char *path, uint8_t **out, size_t *len);

/* Atomic file write: data goes to "<path>.tmp.<pid>", and pz_atomic_commit
 * flushes, fsyncs and renames it over <path>. pz_atomic_abort removes the
 * temporary, so a failed save never leaves a half-written file at <path>. */
typedef struct {
    FILE *f;
    char *path;
    char *tmp;
} pz_atomic_file;
pz_status pz_atomic_open(pz_atomic_file *af, const char *path);
pz_status pz_atomic_commit(pz_atomic_file *af);
void pz_atomic_abort(pz_atomic_file *af);

/* Monotonic wall clock in seconds. */
double pz_now(void);

/* Small deterministic RNG (splitmix64 seeding a xoshiro256**), used for
 * initialisation, shuffling and, later, stochastic rounding. */
typedef struct { uint64_t s[4]; } pz_rng;
void pz_rng_seed(pz_rng *r, uint64_t seed);
uint64_t pz_rng_next(pz_rng *r);
float pz_rng_uniform(pz_rng *r);          /* [0, 1) with 24 random bits */
float pz_rng_normal(pz_rng *r);           /* standard normal, Box-Muller */
uint64_t pz_rng_below(pz_rng *r, uint64_t n); /* uniform in [0, n), unbiased */

/* Parse helpers for the command line: whole string must be a number in range. */
pz_status pz_parse_int(const char *s, long lo, long hi, long *out, const char *what);
pz_status pz_parse_float(const char *s, double lo, double hi, double *out, const char *what);

#endif
