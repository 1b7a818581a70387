/* npy.c: .npy reader and writer for float32 tensors (see npy.h). */
#include "compress/core/npy.h"
#include "base/io/file.h"
#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADER (1u << 20)

typedef struct {
    const char *s;
    size_t n, i;
    const char *name;
} lexer;

static void skip_ws(lexer *l) {
    while (l->i < l->n && (l->s[l->i] == ' ' || l->s[l->i] == '\t' || l->s[l->i] == '\n' || l->s[l->i] == '\r')) l->i++;
}

static int expect(lexer *l, char c) {
    skip_ws(l);
    if (l->i < l->n && l->s[l->i] == c) {
        l->i++;
        return 1;
    }
    return 0;
}

static pz_status bad(const lexer *l, const char *what) {
    return pz_fail(PZ_ERR_FORMAT, "%s: .npy header: %s at byte %zu of the header", l->name, what, l->i);
}

/* a quoted string without escapes; returns its span */
static pz_status read_str(lexer *l, const char **s, size_t *n) {
    skip_ws(l);
    if (l->i >= l->n || (l->s[l->i] != '\'' && l->s[l->i] != '"')) return bad(l, "string expected");
    char q = l->s[l->i++];
    size_t b = l->i;
    while (l->i < l->n && l->s[l->i] != q) {
        if (l->s[l->i] == '\\' || (unsigned char)l->s[l->i] < 0x20) return bad(l, "unsupported character in a string");
        l->i++;
    }
    if (l->i >= l->n) return bad(l, "unterminated string");
    *s = l->s + b;
    *n = l->i - b;
    l->i++;
    return PZ_OK;
}

static int word(lexer *l, const char *w) {
    skip_ws(l);
    size_t n = strlen(w);
    if (l->n - l->i >= n && memcmp(l->s + l->i, w, n) == 0) {
        l->i += n;
        return 1;
    }
    return 0;
}

static pz_status read_shape(lexer *l, pz_shape *shape) {
    if (!expect(l, '(')) return bad(l, "shape must be a tuple");
    int nd = 0;
    for (;;) {
        skip_ws(l);
        if (expect(l, ')')) break;
        if (l->i >= l->n || l->s[l->i] < '0' || l->s[l->i] > '9') return bad(l, "integer expected in shape");
        uint64_t v = 0;
        while (l->i < l->n && l->s[l->i] >= '0' && l->s[l->i] <= '9') {
            if (v > ((uint64_t)1 << 50)) return bad(l, "dimension too large");
            v = v * 10 + (uint64_t)(l->s[l->i++] - '0');
        }
        if (nd >= PZ_MAX_DIMS)
            return pz_fail(PZ_ERR_SHAPE, "%s: .npy shape has more than %d dims", l->name, PZ_MAX_DIMS);
        if (v == 0) return pz_fail(PZ_ERR_SHAPE, "%s: .npy shape has a zero dimension", l->name);
        shape->dims[nd++] = (int64_t)v;
        if (expect(l, ',')) continue;
        if (expect(l, ')')) break;
        return bad(l, "',' or ')' expected in shape");
    }
    if (nd == 0) return pz_fail(PZ_ERR_SHAPE, "%s: .npy holds a 0-d scalar; need 1..%d dims", l->name, PZ_MAX_DIMS);
    shape->ndim = nd;
    for (int i = nd; i < PZ_MAX_DIMS; i++) shape->dims[i] = 0;
    return PZ_OK;
}

pz_status pz_npy_parse(const uint8_t *buf, size_t len, const char *name, pz_shape *shape, size_t *data_off) {
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) return pz_fail(PZ_ERR_FORMAT, "%s: not an .npy file (bad magic)", name);
    int major = buf[6], minor = buf[7];
    size_t hl, hstart;
    if (major == 1 && minor == 0) {
        hl = (size_t)buf[8] | ((size_t)buf[9] << 8);
        hstart = 10;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (len < 12) return pz_fail(PZ_ERR_FORMAT, "%s: truncated .npy header", name);
        hl = (size_t)buf[8] | ((size_t)buf[9] << 8) | ((size_t)buf[10] << 16) | ((size_t)buf[11] << 24);
        hstart = 12;
    } else {
        return pz_fail(PZ_ERR_FORMAT, "%s: unsupported .npy version %d.%d", name, major, minor);
    }
    if (hl > MAX_HEADER) return pz_fail(PZ_ERR_FORMAT, "%s: .npy header length %zu is implausible", name, hl);
    if (len - hstart < hl) return pz_fail(PZ_ERR_FORMAT, "%s: truncated .npy header (%zu of %zu bytes)", name, len - hstart, hl);
    lexer l = {(const char *)buf + hstart, hl, 0, name};
    if (hl == 0 || l.s[hl - 1] != '\n') return bad(&l, "header does not end with a newline");
    if (!expect(&l, '{')) return bad(&l, "'{' expected");
    int have_descr = 0, have_order = 0, have_shape = 0;
    pz_status st;
    for (;;) {
        if (expect(&l, '}')) break;
        const char *k;
        size_t kn;
        if ((st = read_str(&l, &k, &kn)) != PZ_OK) return st;
        if (!expect(&l, ':')) return bad(&l, "':' expected");
        if (kn == 5 && memcmp(k, "descr", 5) == 0) {
            if (have_descr++) return bad(&l, "duplicate key 'descr'");
            const char *v;
            size_t vn;
            if ((st = read_str(&l, &v, &vn)) != PZ_OK) return st;
            if (!(vn == 3 && memcmp(v, "<f4", 3) == 0))
                return pz_fail(PZ_ERR_FORMAT, "%s: .npy dtype '%.*s' is not little-endian float32 ('<f4')", name,
                               (int)(vn > 32 ? 32 : vn), v);
        } else if (kn == 13 && memcmp(k, "fortran_order", 13) == 0) {
            if (have_order++) return bad(&l, "duplicate key 'fortran_order'");
            if (word(&l, "True")) return pz_fail(PZ_ERR_FORMAT, "%s: .npy array is in Fortran order; need C order", name);
            if (!word(&l, "False")) return bad(&l, "fortran_order must be True or False");
        } else if (kn == 5 && memcmp(k, "shape", 5) == 0) {
            if (have_shape++) return bad(&l, "duplicate key 'shape'");
            if ((st = read_shape(&l, shape)) != PZ_OK) return st;
        } else {
            return bad(&l, "unknown key");
        }
        if (expect(&l, ',')) continue;
        if (expect(&l, '}')) break;
        return bad(&l, "',' or '}' expected");
    }
    skip_ws(&l);
    if (l.i != l.n) return bad(&l, "text after the dict");
    if (!have_descr || !have_order || !have_shape) return bad(&l, "descr, fortran_order and shape are all required");
    size_t numel = pz_shape_numel(shape);
    if (!numel) return pz_fail(PZ_ERR_SHAPE, "%s: .npy shape too large", name);
    size_t off = hstart + hl;
    if (len - off != numel * 4)
        return pz_fail(PZ_ERR_FORMAT, "%s: .npy data is %zu bytes, shape needs %zu", name, len - off, numel * 4);
    *data_off = off;
    return PZ_OK;
}

pz_status pz_npy_read(const char *path, pz_shape *shape, float **data) {
    *data = NULL;
    uint8_t *buf;
    size_t len, off;
    pz_status st = pz_read_file_max(path, (size_t)1 << 30, &buf, &len);
    if (st != PZ_OK) return st;
    st = pz_npy_parse(buf, len, path, shape, &off);
    if (st == PZ_OK) {
        size_t n = len - off;
        float *d = xmalloc(n ? n : 1);
        memcpy(d, buf + off, n);
        *data = d;
    }
    free(buf);
    return st;
}

pz_status pz_npy_image(const pz_shape *shape, const float *data, uint8_t **out, size_t *len) {
    size_t numel = pz_shape_numel(shape);
    if (!numel) return pz_fail(PZ_ERR_SHAPE, "npy: bad shape");
    char dict[256];
    int k = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < shape->ndim; i++)
        k += snprintf(dict + k, sizeof dict - (size_t)k, "%lld,%s", (long long)shape->dims[i],
                      i + 1 < shape->ndim ? " " : "");
    k += snprintf(dict + k, sizeof dict - (size_t)k, "), }");
    size_t total = 10 + (size_t)k + 1;
    size_t padded = (total + 63) / 64 * 64;
    size_t hl = padded - 10;
    *len = padded + numel * 4;
    uint8_t *b = xmalloc(*len);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)hl;
    b[9] = (uint8_t)(hl >> 8);
    memcpy(b + 10, dict, (size_t)k);
    memset(b + 10 + k, ' ', hl - (size_t)k - 1);
    b[padded - 1] = '\n';
    memcpy(b + padded, data, numel * 4);
    *out = b;
    return PZ_OK;
}

pz_status pz_npy_write(const char *path, const pz_shape *shape, const float *data) {
    uint8_t *img;
    size_t len;
    pz_status st = pz_npy_image(shape, data, &img, &len);
    if (st != PZ_OK) return st;
    pz_atomic_file af;
    if ((st = pz_atomic_open(&af, path)) != PZ_OK) {
        free(img);
        return st;
    }
    if (fwrite(img, 1, len, af.f) != len) {
        pz_atomic_abort(&af);
        free(img);
        return pz_fail(PZ_ERR_IO, "%s: write failed", path);
    }
    free(img);
    return pz_atomic_commit(&af);
}
