/* util.c: see util.h. */
#include "runtime/util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char last_error[1024];

const char *pz_status_name(pz_status s) {
    switch (s) {
    case PZ_OK: return "ok";
    case PZ_ERR_IO: return "i/o error";
    case PZ_ERR_FORMAT: return "format error";
    case PZ_ERR_SHAPE: return "shape error";
    case PZ_ERR_ARG: return "bad argument";
    case PZ_ERR_NOMEM: return "out of memory";
    case PZ_ERR_PEER: return "peer error";
    }
    return "unknown error";
}

pz_status pz_fail(pz_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

const char *pz_last_error(void) { return last_error[0] ? last_error : "(no message)"; }

void pz_die(const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fputs("pipezip: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

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

void xfwrite_at(const void *p, size_t size, size_t n, FILE *f, const char *file, int line) {
    if (n && fwrite(p, size, n, f) != n)
        pz_die("%s:%d: write failed: %s", file, line, strerror(errno));
}

pz_status pz_read_file(const char *path, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return pz_fail(PZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = xmalloc(cap);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return pz_fail(PZ_ERR_NOMEM, "%s: file too large to read", path); }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) { free(buf); return pz_fail(PZ_ERR_IO, "%s: read error", path); }
    *out = buf;
    *len = n;
    return PZ_OK;
}

pz_status pz_atomic_open(pz_atomic_file *af, const char *path) {
    memset(af, 0, sizeof *af);
    size_t n = strlen(path) + 32;
    af->path = xstrdup(path);
    af->tmp = xmalloc(n);
    snprintf(af->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) {
        pz_status st = pz_fail(PZ_ERR_IO, "%s: cannot create: %s", af->tmp, strerror(errno));
        free(af->path); free(af->tmp);
        memset(af, 0, sizeof *af);
        return st;
    }
    return PZ_OK;
}

pz_status pz_atomic_commit(pz_atomic_file *af) {
    pz_status st = PZ_OK;
    if (fflush(af->f) != 0 || ferror(af->f) || fsync(fileno(af->f)) != 0)
        st = pz_fail(PZ_ERR_IO, "%s: write failed: %s", af->tmp, strerror(errno));
    if (fclose(af->f) != 0 && st == PZ_OK)
        st = pz_fail(PZ_ERR_IO, "%s: close failed: %s", af->tmp, strerror(errno));
    af->f = NULL;
    if (st == PZ_OK && rename(af->tmp, af->path) != 0)
        st = pz_fail(PZ_ERR_IO, "%s: cannot rename to %s: %s", af->tmp, af->path, strerror(errno));
    if (st != PZ_OK) remove(af->tmp);
    free(af->path); free(af->tmp);
    memset(af, 0, sizeof *af);
    return st;
}

void pz_atomic_abort(pz_atomic_file *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) remove(af->tmp);
    free(af->path); free(af->tmp);
    memset(af, 0, sizeof *af);
}

double pz_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void pz_rng_seed(pz_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
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

pz_status pz_parse_int(const char *s, long lo, long hi, long *out, const char *what) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno)
        return pz_fail(PZ_ERR_ARG, "%s: '%s' is not an integer", what, s);
    if (v < lo || v > hi)
        return pz_fail(PZ_ERR_ARG, "%s: %ld is out of range [%ld, %ld]", what, v, lo, hi);
    *out = v;
    return PZ_OK;
}

pz_status pz_parse_float(const char *s, double lo, double hi, double *out, const char *what) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v))
        return pz_fail(PZ_ERR_ARG, "%s: '%s' is not a finite number", what, s);
    if (v < lo || v > hi)
        return pz_fail(PZ_ERR_ARG, "%s: %g is out of range [%g, %g]", what, v, lo, hi);
    *out = v;
    return PZ_OK;
}
