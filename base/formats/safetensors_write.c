/* safetensors_write.c: the safetensors writer (pz_st_write, see
 * safetensors.h); the reader and the dtype table are in safetensors.c. The
 * header is built as one JSON string, then the tensors follow in the
 * Rust writer's order, through an atomic file: nothing half-written. */
#include "base/formats/safetensors.h"
#include "base/io/file.h"
#include "base/mem.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this code writes it from memory"
#endif

typedef struct { char *s; size_t n, cap; } sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns) pz_die("out of memory writing a safetensors header (%zu bytes)", nc);
        b->s = ns;
        b->cap = nc;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_u64(sbuf *b, uint64_t v) {
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%" PRIu64, v);
    sb_put(b, tmp, (size_t)n);
}

/* JSON string literal; bytes >= 0x80 pass through (callers give UTF-8). */
static void sb_json_string(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { char e[2] = {'\\', (char)c}; sb_put(b, e, 2); }
        else if (c < 0x20) { char e[8]; snprintf(e, sizeof e, "\\u%04x", c); sb_put(b, e, 6); }
        else sb_put(b, (const char *)&c, 1);
    }
    sb_put(b, "\"", 1);
}

/* Sort key of a tensor to write; self-contained so qsort needs no global
 * (stages may save from several threads at once). */
typedef struct { int bits; const char *name; int index; } write_key;

/* Rust writer order: larger dtype first, then name. */
static int cmp_write_order(const void *a, const void *b) {
    const write_key *x = a, *y = b;
    if (x->bits != y->bits) return x->bits > y->bits ? -1 : 1;
    return strcmp(x->name, y->name);
}

static pz_status write_all(pz_atomic_file *af, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, af->f) != n)
        return pz_fail(PZ_ERR_IO, "%s: write failed: %s", af->tmp, strerror(errno));
    return PZ_OK;
}

/* Writes the transpose of src (R, K) row-major, i.e. K rows of R elements of
 * esz bytes, a band of output rows at a time. */
static pz_status write_transposed(pz_atomic_file *af, const uint8_t *src, uint64_t R, uint64_t K,
                                  size_t esz) {
    const uint64_t band = 64;
    uint8_t *buf = xmalloc((size_t)(band * R) * esz);
    pz_status st = PZ_OK;
    for (uint64_t k0 = 0; k0 < K && !st; k0 += band) {
        uint64_t kb = K - k0 < band ? K - k0 : band;
        for (uint64_t r = 0; r < R; r++)
            for (uint64_t k = 0; k < kb; k++)
                memcpy(buf + (k * R + r) * esz, src + (r * K + k0 + k) * esz, esz);
        st = write_all(af, buf, (size_t)(kb * R) * esz);
    }
    free(buf);
    return st;
}

pz_status pz_st_write(const char *path, const pz_st_write_tensor *ts, int n,
                      const pz_st_meta *meta, int nmeta) {
    /* Check the arguments before anything touches the disk. */
    uint64_t *nbytes = xcalloc(n > 0 ? (size_t)n : 1, sizeof *nbytes);
    write_key *order = xcalloc(n > 0 ? (size_t)n : 1, sizeof *order);
    pz_status st = PZ_OK;
    for (int i = 0; i < n && !st; i++) {
        const pz_st_write_tensor *t = &ts[i];
        if (!t->name || !t->name[0] || strcmp(t->name, "__metadata__") == 0)
            st = pz_fail(PZ_ERR_ARG, "%s: tensor %d: bad name", path, i);
        else if ((unsigned)t->dtype >= PZ_ST_NDTYPES || pz_st_dtype_bits(t->dtype) % 8 != 0)
            st = pz_fail(PZ_ERR_ARG, "%s: tensor '%s': cannot write dtype %d", path, t->name, (int)t->dtype);
        else if (t->ndim < 0 || t->ndim > 8 || (t->transposed && t->ndim != 2))
            st = pz_fail(PZ_ERR_ARG, "%s: tensor '%s': bad rank %d", path, t->name, t->ndim);
        uint64_t numel = 1;
        for (int d = 0; !st && d < t->ndim; d++) numel *= t->shape[d];
        if (st) break;
        nbytes[i] = numel * (uint64_t)(pz_st_dtype_bits(t->dtype) / 8);
        if (nbytes[i] && !t->data)
            st = pz_fail(PZ_ERR_ARG, "%s: tensor '%s': no data", path, t->name);
        order[i] = (write_key){pz_st_dtype_bits(t->dtype), t->name, i};
    }
    if (!st) qsort(order, (size_t)n, sizeof *order, cmp_write_order);
    for (int i = 1; i < n && !st; i++)
        if (strcmp(order[i - 1].name, order[i].name) == 0)
            st = pz_fail(PZ_ERR_ARG, "%s: tensor '%s' given twice", path, order[i].name);
    if (st) { free(nbytes); free(order); return st; }

    sbuf h = {0};
    sb_str(&h, "{");
    if (nmeta > 0) {
        sb_str(&h, "\"__metadata__\":{");
        for (int i = 0; i < nmeta; i++) {
            if (i) sb_str(&h, ",");
            sb_json_string(&h, meta[i].key);
            sb_str(&h, ":");
            sb_json_string(&h, meta[i].value);
        }
        sb_str(&h, "}");
    }
    uint64_t at = 0;
    for (int j = 0; j < n; j++) {
        const pz_st_write_tensor *t = &ts[order[j].index];
        if (j || nmeta > 0) sb_str(&h, ",");
        sb_json_string(&h, t->name);
        sb_str(&h, ":{\"dtype\":\"");
        sb_str(&h, pz_st_dtype_name(t->dtype));
        sb_str(&h, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            if (d) sb_str(&h, ",");
            sb_u64(&h, t->shape[d]);
        }
        sb_str(&h, "],\"data_offsets\":[");
        sb_u64(&h, at);
        sb_str(&h, ",");
        at += nbytes[order[j].index];
        sb_u64(&h, at);
        sb_str(&h, "]}");
    }
    sb_str(&h, "}");
    while (h.n % 8 != 0) sb_str(&h, " "); /* 8 + N is then a multiple of 8 */

    pz_atomic_file af;
    st = pz_atomic_open(&af, path);
    if (!st) {
        uint64_t hn = h.n;
        st = write_all(&af, &hn, 8);
        if (!st) st = write_all(&af, h.s, h.n);
        for (int j = 0; j < n && !st; j++) {
            const pz_st_write_tensor *t = &ts[order[j].index];
            size_t esz = (size_t)pz_st_dtype_bits(t->dtype) / 8;
            if (t->transposed)
                st = write_transposed(&af, t->data, t->shape[1], t->shape[0], esz);
            else
                st = write_all(&af, t->data, (size_t)nbytes[order[j].index]);
        }
        if (st) pz_atomic_abort(&af);
        else st = pz_atomic_commit(&af);
    }
    free(h.s);
    free(nbytes);
    free(order);
    return st;
}
