/* safetensors.c: see safetensors.h. The reader and the dtype table; the
 * writer is safetensors_write.c.
 *
 * The header parser is not a general JSON parser: it accepts exactly the
 * shape of a safetensors header (an object of tensor-info objects and one
 * string map) and rejects anything else, so there is no recursion and no
 * input-driven nesting. Strings, dims and entries are collected into growing
 * pools whose total size is bounded by the header length, itself checked
 * against the file size before anything is allocated. */
#include "base/formats/safetensors.h"
#include "base/io/file.h"
#include "base/mem.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this code reads it in place"
#endif

static const struct { const char *name; int bits; } dtypes[PZ_ST_NDTYPES] = {
    [PZ_ST_BOOL] = {"BOOL", 8}, [PZ_ST_F4] = {"F4", 4},
    [PZ_ST_F6_E2M3] = {"F6_E2M3", 6}, [PZ_ST_F6_E3M2] = {"F6_E3M2", 6},
    [PZ_ST_U8] = {"U8", 8}, [PZ_ST_I8] = {"I8", 8},
    [PZ_ST_F8_E5M2] = {"F8_E5M2", 8}, [PZ_ST_F8_E4M3] = {"F8_E4M3", 8},
    [PZ_ST_F8_E8M0] = {"F8_E8M0", 8}, [PZ_ST_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8},
    [PZ_ST_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8},
    [PZ_ST_I16] = {"I16", 16}, [PZ_ST_U16] = {"U16", 16}, [PZ_ST_F16] = {"F16", 16},
    [PZ_ST_BF16] = {"BF16", 16}, [PZ_ST_I32] = {"I32", 32}, [PZ_ST_U32] = {"U32", 32},
    [PZ_ST_F32] = {"F32", 32}, [PZ_ST_C64] = {"C64", 64}, [PZ_ST_F64] = {"F64", 64},
    [PZ_ST_I64] = {"I64", 64}, [PZ_ST_U64] = {"U64", 64},
};

const char *pz_st_dtype_name(pz_st_dtype d) {
    return (unsigned)d < PZ_ST_NDTYPES ? dtypes[d].name : "?";
}

int pz_st_dtype_bits(pz_st_dtype d) {
    return (unsigned)d < PZ_ST_NDTYPES ? dtypes[d].bits : 0;
}

/* ---------------------------------------------------------------- parser */

/* A tensor entry while parsing: names and dims are offsets into the pools,
 * which may move when they grow. */
typedef struct {
    size_t name;     /* offset in strings */
    size_t dims;     /* offset in dims */
    int ndim;
    pz_st_dtype dtype;
    uint64_t begin, end;
} raw_tensor;

typedef struct { size_t key, value; } raw_meta;

typedef struct {
    const char *what;          /* file name for messages */
    const uint8_t *start, *p, *end; /* header bytes */
    char *str; size_t nstr, capstr;
    uint64_t *dims; size_t ndims, capdims;
    raw_tensor *rt; size_t nrt, caprt;
    raw_meta *rm; size_t nrm, caprm;
    int have_meta;
} parser;

/* Grows *buf (elements of `size`) so that it holds at least `need`. */
static void grow(void **buf, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *nb = realloc(*buf, nc * size);
    if (!nb) pz_die("out of memory parsing a safetensors header (%zu x %zu bytes)", nc, size);
    *buf = nb;
    *cap = nc;
}

static pz_status syntax(parser *ps, const char *expected) {
    if (ps->p >= ps->end)
        return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header: unexpected end of JSON, expected %s",
                       ps->what, expected);
    unsigned char c = *ps->p;
    if (c >= 0x20 && c < 0x7f)
        return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header: byte %zu: expected %s, found '%c'",
                       ps->what, (size_t)(ps->p - ps->start), expected, c);
    return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header: byte %zu: expected %s, found byte 0x%02x",
                   ps->what, (size_t)(ps->p - ps->start), expected, c);
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

/* Consumes `c` after optional whitespace. */
static pz_status expect(parser *ps, char c, const char *what) {
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != (unsigned char)c) return syntax(ps, what);
    ps->p++;
    return PZ_OK;
}

static void put_char(parser *ps, char c) {
    grow((void **)&ps->str, &ps->capstr, ps->nstr + 1, 1);
    ps->str[ps->nstr++] = c;
}

static void put_utf8(parser *ps, uint32_t cp) {
    if (cp < 0x80) {
        put_char(ps, (char)cp);
    } else if (cp < 0x800) {
        put_char(ps, (char)(0xC0 | (cp >> 6)));
        put_char(ps, (char)(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        put_char(ps, (char)(0xE0 | (cp >> 12)));
        put_char(ps, (char)(0x80 | ((cp >> 6) & 0x3F)));
        put_char(ps, (char)(0x80 | (cp & 0x3F)));
    } else {
        put_char(ps, (char)(0xF0 | (cp >> 18)));
        put_char(ps, (char)(0x80 | ((cp >> 12) & 0x3F)));
        put_char(ps, (char)(0x80 | ((cp >> 6) & 0x3F)));
        put_char(ps, (char)(0x80 | (cp & 0x3F)));
    }
}

static int hex4(const uint8_t *s, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0.
 * Rejects overlong forms, surrogates and code points past U+10FFFF. */
static size_t utf8_len(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* Parses a JSON string (after whitespace) into the string pool; *off gets
 * the offset of its NUL-terminated decoded form. */
static pz_status parse_string(parser *ps, size_t *off) {
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != '"') return syntax(ps, "a string");
    const uint8_t *open = ps->p++;
    *off = ps->nstr;
    for (;;) {
        if (ps->p >= ps->end) {
            ps->p = open;
            return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header: byte %zu: unterminated string",
                           ps->what, (size_t)(open - ps->start));
        }
        uint8_t c = *ps->p;
        if (c == '"') { ps->p++; break; }
        if (c < 0x20) return syntax(ps, "a printable character in a string");
        if (c != '\\') {
            size_t n = utf8_len(ps->p, (size_t)(ps->end - ps->p));
            if (n == 0)
                return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header: byte %zu: invalid UTF-8",
                               ps->what, (size_t)(ps->p - ps->start));
            for (size_t i = 0; i < n; i++) put_char(ps, (char)ps->p[i]);
            ps->p += n;
            continue;
        }
        if (ps->end - ps->p < 2) { ps->p = ps->end; return syntax(ps, "an escape"); }
        uint8_t e = ps->p[1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != 0 && simple) {
            static const char out[] = "\"\\/\b\f\n\r\t";
            put_char(ps, out[simple - "\"\\/bfnrt"]);
            ps->p += 2;
            continue;
        }
        uint32_t cp, lo;
        if (e != 'u' || ps->end - ps->p < 6 || !hex4(ps->p + 2, &cp))
            return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header: byte %zu: bad escape sequence",
                           ps->what, (size_t)(ps->p - ps->start));
        const uint8_t *esc = ps->p;
        ps->p += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            /* a high surrogate must be followed by an escaped low one */
            if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' || !hex4(ps->p + 2, &lo)
                || lo < 0xDC00 || lo > 0xDFFF)
                return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header: byte %zu: unpaired surrogate",
                               ps->what, (size_t)(esc - ps->start));
            ps->p += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header: byte %zu: unpaired surrogate",
                           ps->what, (size_t)(esc - ps->start));
        } else if (cp == 0) {
            /* names and values are C strings here */
            return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header: byte %zu: NUL character in a string",
                           ps->what, (size_t)(esc - ps->start));
        }
        put_utf8(ps, cp);
    }
    put_char(ps, '\0');
    return PZ_OK;
}

/* A JSON number that must be a non-negative integer fitting in u64. */
static pz_status parse_u64(parser *ps, uint64_t *out, const char *field, const char *tensor) {
    skip_ws(ps);
    const uint8_t *s = ps->p;
    if (s >= ps->end || *s < '0' || *s > '9') {
        if (s < ps->end && (*s == '-' || *s == '.'))
            return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': %s must hold non-negative integers",
                           ps->what, tensor, field);
        return syntax(ps, "a non-negative integer");
    }
    uint64_t v = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        unsigned d = (unsigned)(*ps->p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': %s value overflows 64 bits",
                           ps->what, tensor, field);
        v = v * 10 + d;
        ps->p++;
    }
    if (*s == '0' && ps->p - s > 1) { ps->p = s; return syntax(ps, "a number without leading zeros"); }
    if (ps->p < ps->end && (*ps->p == '.' || *ps->p == 'e' || *ps->p == 'E'))
        return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': %s must hold integers", ps->what, tensor, field);
    *out = v;
    return PZ_OK;
}

/* "[u64, ...]": appends to the dims pool; *count gets the number parsed. */
static pz_status parse_u64_array(parser *ps, int *count, const char *field, const char *tensor) {
    pz_status st;
    if ((st = expect(ps, '[', "'['"))) return st;
    *count = 0;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') { ps->p++; return PZ_OK; }
    for (;;) {
        uint64_t v = 0;
        if ((st = parse_u64(ps, &v, field, tensor))) return st;
        if (*count == 1 << 20)
            return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': too many dimensions", ps->what, tensor);
        grow((void **)&ps->dims, &ps->capdims, ps->ndims + 1, sizeof *ps->dims);
        ps->dims[ps->ndims++] = v;
        (*count)++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') { ps->p++; continue; }
        if (ps->p < ps->end && *ps->p == ']') { ps->p++; return PZ_OK; }
        return syntax(ps, "',' or ']'");
    }
}

/* The members of an object whose '{' is consumed; *first starts at 1.
 * Before each member's value: *key set, *more = 1; after the closing '}':
 * *more = 0. sep_what names what a syntax error expected between members. */
static pz_status next_member(parser *ps, int *first, size_t *key, int *more, const char *sep_what) {
    pz_status st;
    *more = 0;
    skip_ws(ps);
    if (*first) {
        *first = 0;
        if (ps->p < ps->end && *ps->p == '}') { ps->p++; return PZ_OK; }
    } else if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
    } else if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return PZ_OK;
    } else {
        return syntax(ps, sep_what);
    }
    if ((st = parse_string(ps, key))) return st;
    if ((st = expect(ps, ':', "':'"))) return st;
    *more = 1;
    return PZ_OK;
}

/* {"dtype": "..", "shape": [..], "data_offsets": [b, e]} in any order, each once. */
static pz_status parse_tensor_info(parser *ps, size_t name) {
    pz_status st;
    raw_tensor t = {.name = name};
    int seen_dtype = 0, seen_shape = 0, seen_offsets = 0;
    if ((st = expect(ps, '{', "'{' opening a tensor entry"))) return st;
    int first = 1, more;
    size_t key;
    while (!(st = next_member(ps, &first, &key, &more, "',' or '}' in a tensor entry")) && more) {
        /* pool pointers are re-read after every append: it may move */
        const char *k = ps->str + key;
        if (strcmp(k, "dtype") == 0) {
            if (seen_dtype++) goto dup;
            size_t v;
            if ((st = parse_string(ps, &v))) return st;
            const char *dn = ps->str + v;
            int found = -1;
            for (int i = 0; i < PZ_ST_NDTYPES; i++)
                if (strcmp(dn, dtypes[i].name) == 0) found = i;
            if (found < 0)
                return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'",
                               ps->what, ps->str + name, dn);
            t.dtype = (pz_st_dtype)found;
        } else if (strcmp(k, "shape") == 0) {
            if (seen_shape++) goto dup;
            t.dims = ps->ndims;
            if ((st = parse_u64_array(ps, &t.ndim, "shape", ps->str + name))) return st;
        } else if (strcmp(k, "data_offsets") == 0) {
            if (seen_offsets++) goto dup;
            int n;
            size_t at = ps->ndims;
            if ((st = parse_u64_array(ps, &n, "data_offsets", ps->str + name))) return st;
            if (n != 2)
                return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': data_offsets has %d values, expected 2",
                               ps->what, ps->str + name, n);
            t.begin = ps->dims[at];
            t.end = ps->dims[at + 1];
            ps->ndims = at; /* offsets borrowed the dims pool */
        } else {
            return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': unknown field '%s'",
                           ps->what, ps->str + name, k);
        }
        ps->nstr = key; /* neither the field name nor a dtype string is kept */
    }
    if (st) return st;
    if (!seen_dtype || !seen_shape || !seen_offsets)
        return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': missing field '%s'", ps->what, ps->str + name,
                       !seen_dtype ? "dtype" : !seen_shape ? "shape" : "data_offsets");
    grow((void **)&ps->rt, &ps->caprt, ps->nrt + 1, sizeof *ps->rt);
    ps->rt[ps->nrt++] = t;
    return PZ_OK;
dup:
    return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': field given twice", ps->what, ps->str + name);
}

/* "__metadata__": {"key": "value", ...}, strings only. */
static pz_status parse_metadata(parser *ps) {
    pz_status st;
    if (ps->have_meta++)
        return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header: duplicate key '__metadata__'", ps->what);
    if ((st = expect(ps, '{', "'{' opening __metadata__"))) return st;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') { ps->p++; return PZ_OK; }
    for (;;) {
        raw_meta m;
        if ((st = parse_string(ps, &m.key))) return st;
        if ((st = expect(ps, ':', "':'"))) return st;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p != '"')
            return pz_fail(PZ_ERR_FORMAT, "%s: __metadata__ key '%s': values must be strings",
                           ps->what, ps->str + m.key);
        if ((st = parse_string(ps, &m.value))) return st;
        grow((void **)&ps->rm, &ps->caprm, ps->nrm + 1, sizeof *ps->rm);
        ps->rm[ps->nrm++] = m;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') { ps->p++; continue; }
        if (ps->p < ps->end && *ps->p == '}') { ps->p++; return PZ_OK; }
        return syntax(ps, "',' or '}' in __metadata__");
    }
}

static pz_status parse_header(parser *ps) {
    pz_status st;
    if (ps->p >= ps->end || *ps->p != '{')
        return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header does not start with '{'", ps->what);
    ps->p++;
    int first = 1, more;
    size_t key;
    while (!(st = next_member(ps, &first, &key, &more, "',' or '}'")) && more) {
        if (strcmp(ps->str + key, "__metadata__") == 0) {
            ps->nstr = key;
            if ((st = parse_metadata(ps))) return st;
        } else {
            if (ps->str[key] == '\0')
                return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header: empty tensor name", ps->what);
            if ((st = parse_tensor_info(ps, key))) return st;
        }
    }
    if (st) return st;
    skip_ws(ps);
    if (ps->p != ps->end)
        return syntax(ps, "only whitespace after the header object");
    return PZ_OK;
}

/* ------------------------------------------------------------ validation */

static int cmp_by_name(const void *a, const void *b) {
    return strcmp(((const pz_st_tensor *)a)->name, ((const pz_st_tensor *)b)->name);
}

static int cmp_by_offset(const void *a, const void *b) {
    const pz_st_tensor *x = *(const pz_st_tensor *const *)a, *y = *(const pz_st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_meta_key(const void *a, const void *b) {
    return strcmp((*(const pz_st_meta *const *)a)->key, (*(const pz_st_meta *const *)b)->key);
}

/* Sizes, duplicates and tiling of the finished table. */
static pz_status validate(pz_st_file *f, const char *what) {
    for (int i = 0; i < f->ntensors; i++) {
        pz_st_tensor *t = &f->tensors[i];
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] != 0 && numel > UINT64_MAX / t->shape[d])
                return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': shape overflows 64 bits", what, t->name);
            numel *= t->shape[d];
        }
        t->numel = numel;
        uint64_t bits = (uint64_t)dtypes[t->dtype].bits;
        if (numel > UINT64_MAX / bits)
            return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': byte size overflows 64 bits", what, t->name);
        if (numel * bits % 8 != 0)
            return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': %" PRIu64 " elements of %s are not a whole "
                           "number of bytes", what, t->name, numel, dtypes[t->dtype].name);
        uint64_t nbytes = numel * bits / 8;
        if (t->begin > t->end)
            return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] are "
                           "reversed", what, t->name, t->begin, t->end);
        if (t->end > f->buffer_len)
            return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': data_offsets end %" PRIu64 " is past the end "
                           "of the %" PRIu64 "-byte buffer", what, t->name, t->end, f->buffer_len);
        if (t->end - t->begin != nbytes)
            return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': data_offsets span %" PRIu64 " bytes but "
                           "%" PRIu64 " elements of %s need %" PRIu64, what, t->name,
                           t->end - t->begin, numel, dtypes[t->dtype].name, nbytes);
        t->data = f->buffer + t->begin;
    }
    qsort(f->tensors, (size_t)f->ntensors, sizeof *f->tensors, cmp_by_name);
    for (int i = 1; i < f->ntensors; i++)
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0)
            return pz_fail(PZ_ERR_FORMAT, "%s: duplicate tensor '%s'", what, f->tensors[i].name);

    pz_status st = PZ_OK;
    if (f->nmeta > 1) {
        const pz_st_meta **mk = xmalloc((size_t)f->nmeta * sizeof *mk);
        for (int i = 0; i < f->nmeta; i++) mk[i] = &f->meta[i];
        qsort(mk, (size_t)f->nmeta, sizeof *mk, cmp_meta_key);
        for (int i = 1; i < f->nmeta && !st; i++)
            if (strcmp(mk[i - 1]->key, mk[i]->key) == 0)
                st = pz_fail(PZ_ERR_FORMAT, "%s: duplicate __metadata__ key '%s'", what, mk[i]->key);
        free(mk);
        if (st) return st;
    }

    /* Sorted by offset, each tensor must start where the previous ended. */
    const pz_st_tensor **by = xmalloc(((size_t)f->ntensors + 1) * sizeof *by);
    for (int i = 0; i < f->ntensors; i++) by[i] = &f->tensors[i];
    qsort(by, (size_t)f->ntensors, sizeof *by, cmp_by_offset);
    uint64_t at = 0;
    for (int i = 0; i < f->ntensors && !st; i++) {
        if (by[i]->begin > at)
            st = pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': hole in the buffer: bytes [%" PRIu64 ", %" PRIu64
                         ") belong to no tensor", what, by[i]->name, at, by[i]->begin);
        else if (by[i]->begin < at)
            st = pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 ") overlap "
                         "tensor '%s'", what, by[i]->name, by[i]->begin, by[i]->end, by[i - 1]->name);
        at = by[i]->end;
    }
    free(by);
    if (!st && at != f->buffer_len)
        st = pz_fail(PZ_ERR_FORMAT, "%s: tensors cover %" PRIu64 " bytes of a %" PRIu64 "-byte buffer "
                     "(trailing bytes belong to no tensor)", what, at, f->buffer_len);
    return st;
}

static void parser_free(parser *ps) {
    free(ps->str); free(ps->dims); free(ps->rt); free(ps->rm);
}

pz_status pz_st_parse(pz_st_file *f, const uint8_t *bytes, size_t len, const char *what) {
    memset(f, 0, sizeof *f);
    if (len < 8)
        return pz_fail(PZ_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors file (8-byte "
                       "header length missing)", what, len);
    uint64_t n;
    memcpy(&n, bytes, 8);
    if (n > PZ_ST_MAX_HEADER)
        return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header length %" PRIu64 " exceeds the limit %llu "
                       "(not a safetensors file?)", what, n, PZ_ST_MAX_HEADER);
    if (n > len - 8)
        return pz_fail(PZ_ERR_FORMAT, "%s: safetensors header length %" PRIu64 " runs past the end of the "
                       "%zu-byte file (truncated?)", what, n, len);
    parser ps = {.what = what, .start = bytes + 8, .p = bytes + 8, .end = bytes + 8 + n};
    f->header_len = n;
    f->buffer = bytes + 8 + n;
    f->buffer_len = len - 8 - n;
    pz_status st = parse_header(&ps);
    if (st) { parser_free(&ps); memset(f, 0, sizeof *f); return st; }

    /* Pools are final: turn offsets into pointers. */
    f->strings_ = ps.str;
    f->dims_ = ps.dims;
    f->ntensors = (int)ps.nrt;
    f->tensors = xcalloc(ps.nrt ? ps.nrt : 1, sizeof *f->tensors);
    for (size_t i = 0; i < ps.nrt; i++) {
        pz_st_tensor *t = &f->tensors[i];
        t->name = ps.str + ps.rt[i].name;
        t->dtype = ps.rt[i].dtype;
        t->ndim = ps.rt[i].ndim;
        t->shape = ps.dims ? ps.dims + ps.rt[i].dims : NULL;
        t->begin = ps.rt[i].begin;
        t->end = ps.rt[i].end;
    }
    if (ps.nrm) {
        f->nmeta = (int)ps.nrm;
        f->meta = xcalloc(ps.nrm, sizeof *f->meta);
        for (size_t i = 0; i < ps.nrm; i++) {
            f->meta[i].key = ps.str + ps.rm[i].key;
            f->meta[i].value = ps.str + ps.rm[i].value;
        }
    }
    free(ps.rt);
    free(ps.rm);
    st = validate(f, what);
    if (st) pz_st_close(f);
    return st;
}

pz_status pz_st_open(pz_st_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    const void *map;
    size_t len;
    pz_status st = pz_map_file(path, &map, &len);
    if (st != PZ_OK) return st;
    if (len < 8) {   /* too short for the header length: the parser says so */
        pz_unmap_file(map, len);
        return pz_st_parse(f, (const uint8_t *)"", len, path);
    }
    st = pz_st_parse(f, map, len, path);
    if (st) { pz_unmap_file(map, len); return st; }
    f->map_ = (void *)map;   /* pz_st_close unmaps it */
    f->map_len_ = len;
    return PZ_OK;
}

void pz_st_close(pz_st_file *f) {
    free(f->tensors);
    free(f->meta);
    free(f->strings_);
    free(f->dims_);
    pz_unmap_file(f->map_, f->map_len_);
    memset(f, 0, sizeof *f);
}

const pz_st_tensor *pz_st_find(const pz_st_file *f, const char *name) {
    int lo = 0, hi = f->ntensors;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[mid].name, name);
        if (c == 0) return &f->tensors[mid];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return NULL;
}

const char *pz_st_meta_get(const pz_st_file *f, const char *key) {
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}
