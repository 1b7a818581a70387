/* codec.c: the codec framework. Spec parsing, the message header (layout in
 * compress/README.md), the optional +zstd stage, and the dispatch to base
 * codecs and wrappers through their tables (codec_impl.h). */
#include "compress/codec.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec_impl.h"
#include "compress/codec_ext.h"
#include "base/crc32c.h"
#include "compress/spec.h"
#include "base/bytes.h"
#include "base/mem.h"
#include "base/parse.h"
#ifdef PZ_HAVE_ZSTD
#include <zstd.h>
#endif

/* ---------------------------------------------------------------- header */

#define MAGIC0 'P'
#define MAGIC1 'Z'
#define MAGIC2 'C'
#define MAGIC3 'M'
#define FORMAT_VERSION 1
#define HDR_FIXED 48          /* header bytes besides the dims */
#define PARAMS_BYTES 24
#define WRAP_ID(kind) (0x80 + (kind))
#define FLAG_ZSTD_ASKED 0x01
#define FLAG_ZSTD_USED 0x02
#define MAX_WRAP_DEPTH PZ_WRAP_MAX_DEPTH
#define ZSTD_LEVEL 1

static size_t header_size(int ndim) { return HDR_FIXED + 8 * (size_t)ndim; }


static void params_write(const pz_codec_params *p, uint8_t *o) {
    memset(o, 0, PARAMS_BYTES);
    pz_put_u16(o, p->id);
    o[2] = p->bits;
    o[3] = p->scale_mode;
    o[4] = p->group_mode;
    o[5] = p->round_mode;
    o[6] = p->scale_fp32;
    o[7] = p->value_mode;
    o[8] = p->per_row;
    o[9] = p->elias;
    o[10] = p->stochastic;
    o[11] = 0;
    pz_put_u32(o + 12, p->group_size);
    uint32_t u;
    memcpy(&u, &p->fraction, 4);
    pz_put_u32(o + 16, u);
    memcpy(&u, &p->budget, 4);
    pz_put_u32(o + 20, u);
}

static int params_read(pz_codec_params *p, const uint8_t *o) {
    memset(p, 0, sizeof *p);
    p->id = pz_get_u16(o);
    p->bits = o[2];
    p->scale_mode = o[3];
    p->group_mode = o[4];
    p->round_mode = o[5];
    p->scale_fp32 = o[6];
    p->value_mode = o[7];
    p->per_row = o[8];
    p->elias = o[9];
    p->stochastic = o[10];
    p->group_size = pz_get_u32(o + 12);
    uint32_t u = pz_get_u32(o + 16);
    memcpy(&p->fraction, &u, 4);
    u = pz_get_u32(o + 20);
    memcpy(&p->budget, &u, 4);
    return o[11] == 0;
}

/* At most 2^40 elements, so that every size formula fits in a size_t. */
#define MAX_NUMEL ((uint64_t)1 << 40)

int pz_shape_equal(const pz_shape *a, const pz_shape *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

void pz_shape_format(const pz_shape *s, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < s->ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ",%lld" : "%lld", (long long)s->dims[i]);
    if (n < cap) snprintf(buf + n, cap - n, ")");
}

size_t pz_shape_numel(const pz_shape *s) {
    if (!s || s->ndim < 1 || s->ndim > PZ_MAX_DIMS) return 0;
    uint64_t n = 1;
    for (int i = 0; i < s->ndim; i++) {
        if (s->dims[i] <= 0 || (uint64_t)s->dims[i] > MAX_NUMEL) return 0;
        n *= (uint64_t)s->dims[i];
        if (n > MAX_NUMEL || n > SIZE_MAX / 16) return 0;
    }
    return (size_t)n;
}

static pz_status check_shape(const pz_shape *s, const char *what) {
    if (!s || s->ndim < 1 || s->ndim > PZ_MAX_DIMS)
        return pz_fail(PZ_ERR_SHAPE, "%s: ndim %d must be 1..%d", what, s ? s->ndim : 0, PZ_MAX_DIMS);
    for (int i = 0; i < s->ndim; i++)
        if (s->dims[i] <= 0) return pz_fail(PZ_ERR_SHAPE, "%s: dim %d is %lld, must be > 0", what, i, (long long)s->dims[i]);
    if (!pz_shape_numel(s)) return pz_fail(PZ_ERR_SHAPE, "%s: more than 2^40 elements", what);
    return PZ_OK;
}

/* ---------------------------------------------------------------- spec helpers */

pz_status pz_spec_fail(const char *spec, size_t off, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t slen = strlen(spec);
    if (off > slen) off = slen;
    char head[512];
    snprintf(head, sizeof head, "bad codec spec '%s': %s at offset %zu: ", spec, msg, off);
    return pz_fail_caret(PZ_ERR_ARG, head, "", spec, off);
}

int pz_spec_next_opt(const char *spec, size_t base, const char *list, size_t *pos, pz_spec_opt *o) {
    size_t i = *pos;
    if (!list[i]) {
        if (i == 0) {   /* "name:" with nothing after the ':' */
            pz_spec_fail(spec, base, "empty option");
            return -1;
        }
        return 0;
    }
    size_t start = i;
    while (list[i] && list[i] != ',') i++;
    size_t end = i;
    if (end == start) {
        pz_spec_fail(spec, base + start, "empty option");
        return -1;
    }
    if (list[i] == ',') {
        i++;
        if (!list[i]) {
            pz_spec_fail(spec, base + i, "empty option after ','");
            return -1;
        }
    }
    *pos = i;
    memset(o, 0, sizeof *o);
    o->key = list + start;
    o->off = base + start;
    const char *eq = memchr(list + start, '=', end - start);
    if (eq) {
        o->klen = (size_t)(eq - (list + start));
        o->val = eq + 1;
        o->vlen = (size_t)(list + end - (eq + 1));
        o->voff = base + (size_t)(eq + 1 - list);
        if (o->klen == 0) {
            pz_spec_fail(spec, o->off, "option name missing before '='");
            return -1;
        }
        if (o->vlen == 0) {
            pz_spec_fail(spec, o->voff, "value missing after '='");
            return -1;
        }
    } else {
        o->klen = end - start;
    }
    return 1;
}

int pz_spec_key_is(const pz_spec_opt *o, const char *key) {
    return strlen(key) == o->klen && memcmp(o->key, key, o->klen) == 0;
}
int pz_spec_val_is(const pz_spec_opt *o, const char *val) {
    return o->val && strlen(val) == o->vlen && memcmp(o->val, val, o->vlen) == 0;
}

pz_status pz_spec_uint(const char *spec, size_t off, const char *s, size_t n,
                       uint64_t lo, uint64_t hi, uint64_t *out, const char *what) {
    if (n == 0) return pz_spec_fail(spec, off, "%s: number expected", what);
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return pz_spec_fail(spec, off + i, "%s: not an integer", what);
        if (v > (UINT64_MAX - 9) / 10) return pz_spec_fail(spec, off, "%s: out of range", what);
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v < lo || v > hi)
        return pz_spec_fail(spec, off, "%s must be %llu..%llu", what, (unsigned long long)lo, (unsigned long long)hi);
    *out = v;
    return PZ_OK;
}

pz_status pz_spec_float(const char *spec, size_t off, const char *s, size_t n,
                        double lo, double hi, double *out, const char *what) {
    char buf[64];
    if (n == 0 || n >= sizeof buf) return pz_spec_fail(spec, off, "%s: number expected", what);
    memcpy(buf, s, n);
    buf[n] = 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789.eE+-", buf[i])) return pz_spec_fail(spec, off + i, "%s: not a number", what);
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (end != buf + n || errno || !isfinite(v)) return pz_spec_fail(spec, off, "%s: not a number", what);
    if (!(v >= lo && v <= hi)) return pz_spec_fail(spec, off, "%s must be in [%g, %g]", what, lo, hi);
    *out = v;
    return PZ_OK;
}

pz_status pz_spec_sdtype(const char *spec, const pz_spec_opt *o, pz_codec_params *p) {
    if (pz_spec_val_is(o, "fp32")) p->scale_fp32 = 1;
    else if (pz_spec_val_is(o, "fp16")) p->scale_fp32 = 0;
    else return pz_spec_fail(spec, o->voff, "sdtype must be fp16 or fp32");
    return PZ_OK;
}

pz_status pz_spec_group(const char *spec, const pz_spec_opt *o, pz_codec_params *p) {
    if (!o->val) return pz_spec_fail(spec, o->off, "group needs a value: channel, row, tensor or a block size");
    p->group_size = 0;
    if (pz_spec_val_is(o, "channel")) p->group_mode = PZ_GROUP_CHANNEL;
    else if (pz_spec_val_is(o, "row")) p->group_mode = PZ_GROUP_ROW;
    else if (pz_spec_val_is(o, "tensor")) p->group_mode = PZ_GROUP_TENSOR;
    else if (o->vlen && o->val[0] >= '0' && o->val[0] <= '9') {
        uint64_t v;
        pz_status st = pz_spec_uint(spec, o->voff, o->val, o->vlen, 1, (uint64_t)1 << 31, &v, "group size");
        if (st != PZ_OK) return st;
        p->group_mode = PZ_GROUP_BLOCK;
        p->group_size = (uint32_t)v;
    } else {
        return pz_spec_fail(spec, o->voff, "unknown group '%.*s' (channel, row, tensor or a block size)",
                            (int)o->vlen, o->val);
    }
    return PZ_OK;
}

const char *pz_spec_group_name(const pz_codec_params *p, char *buf, size_t cap) {
    switch (p->group_mode) {
    case PZ_GROUP_CHANNEL: return "channel";
    case PZ_GROUP_ROW: return "row";
    case PZ_GROUP_TENSOR: return "tensor";
    default: snprintf(buf, cap, "%u", (unsigned)p->group_size); return buf;
    }
}

size_t pz_group_count(const pz_codec_params *p, const pz_shape *s) {
    size_t n = pz_shape_numel(s);
    if (!n) return 0;
    size_t C = (size_t)s->dims[s->ndim - 1];
    switch (p->group_mode) {
    case PZ_GROUP_CHANNEL: return C;
    case PZ_GROUP_ROW: return n / C;
    case PZ_GROUP_TENSOR: return 1;
    case PZ_GROUP_BLOCK: return p->group_size ? n / p->group_size + (n % p->group_size != 0) : 0;
    default: return 0;
    }
}

/* ---------------------------------------------------------------- codec object */

struct pz_codec {
    const pz_codec_impl *impl;     /* base codec (innermost for wrappers) */
    pz_codec_params p;             /* innermost base parameters */
    const pz_wrap_impl *wrap;      /* outermost wrapper, NULL for a base codec */
    pz_wrapper *w;                 /* its state (it owns the inner codecs) */
    uint8_t chain;                 /* wrapper kinds, 2 bits per level, outermost first */
    int zstd;
    char *spec;                    /* canonical */
    uint8_t *scratch;              /* zstd staging */
    size_t scratch_cap;
    void *backend;                 /* state of another backend (the GPU path), or NULL */
    void (*backend_free)(void *);
#ifdef PZ_HAVE_ZSTD
    ZSTD_CCtx *zc;
    ZSTD_DCtx *zd;
#endif
};

/* Fixed-size payloads: the length must equal max_payload exactly. */
static int fixed_size(const pz_codec_params *p) {
    switch (p->id) {
    case PZ_CODEC_FP32: case PZ_CODEC_FP16: case PZ_CODEC_BF16: case PZ_CODEC_Q: case PZ_CODEC_SIGN:
        return 1;
    case PZ_CODEC_NUQ: return !p->elias;
    default: return 0;
    }
}

void pz_codec_free(pz_codec *c) {
    if (!c) return;
    if (c->backend && c->backend_free) c->backend_free(c->backend);
    if (c->wrap) c->wrap->free(c->w);
#ifdef PZ_HAVE_ZSTD
    if (c->zc) ZSTD_freeCCtx(c->zc);
    if (c->zd) ZSTD_freeDCtx(c->zd);
#endif
    free(c->spec);
    free(c->scratch);
    free(c);
}

const char *pz_codec_spec(const pz_codec *c) { return c->spec; }

size_t pz_codec_state_bytes(const pz_codec *c, size_t *file_bytes) {
    if (file_bytes) *file_bytes = 0;
    if (c->wrap) return c->wrap->state_bytes(c->w, file_bytes) + c->scratch_cap;
    return c->scratch_cap;
}

int pz_codec_is_stateful_decoder(const pz_codec *c) {
    for (int l = 0; l < MAX_WRAP_DEPTH; l++) {
        const pz_wrap_impl *w = pz_wrap_impl_by_kind((c->chain >> (2 * l)) & 3);
        if (w && w->stateful_decoder) return 1;
    }
    return 0;
}

/* Base codec from spec[b..e): a name, then the codec's own arguments. */
static pz_status parse_base(const char *spec, size_t b, size_t e, pz_codec **out) {
    if (b >= e) return pz_spec_fail(spec, b, "codec name expected");
    for (size_t i = b; i < e; i++)
        if (spec[i] == '(' || spec[i] == ')' || isspace((unsigned char)spec[i]))
            return pz_spec_fail(spec, i, "unexpected '%c'", spec[i]);
    size_t t = b;
    while (t < e && (isalnum((unsigned char)spec[t]) || spec[t] == '_')) t++;
    if (t == b) return pz_spec_fail(spec, b, "codec name expected");
    /* the whole token ("fp16"), else the token without trailing digits ("q" of "q4") */
    const pz_codec_impl *impl = pz_codec_impl_by_name(spec + b, t - b);
    size_t nend = t;
    if (!impl) {
        nend = t;
        while (nend > b && isdigit((unsigned char)spec[nend - 1])) nend--;
        if (nend > b && nend < t) impl = pz_codec_impl_by_name(spec + b, nend - b);
        if (!impl) return pz_spec_fail(spec, b, "unknown codec '%.*s'", (int)(t - b), spec + b);
    }
    size_t alen = e - nend;
    char *args = xmalloc(alen + 1);
    memcpy(args, spec + nend, alen);
    args[alen] = 0;
    pz_codec_params p;
    memset(&p, 0, sizeof p);
    p.id = impl->id;
    pz_status st = impl->parse(&p, args, spec, nend);
    free(args);
    if (st != PZ_OK) return st;
    p.id = impl->id;
    if (impl->validate(&p) != PZ_OK)
        return pz_spec_fail(spec, b, "invalid parameters: %s", pz_last_error());
    pz_codec *c = xcalloc(1, sizeof *c);
    c->impl = impl;
    c->p = p;
    char buf[512];
    impl->format(&p, buf, sizeof buf);
    c->spec = xstrdup(buf);
    *out = c;
    return PZ_OK;
}

int pz_spec_starts_with(const char *s, size_t b, size_t e, const char *w) {
    size_t n = strlen(w);
    return e - b >= n && memcmp(s + b, w, n) == 0;
}

/* Index of the ')' matching the '(' at open, or SIZE_MAX. */
static size_t match_paren(const char *s, size_t open, size_t e) {
    int depth = 0;
    for (size_t i = open; i < e; i++) {
        if (s[i] == '(') depth++;
        else if (s[i] == ')' && --depth == 0) return i;
    }
    return SIZE_MAX;
}

size_t pz_spec_find_opt(const char *s, size_t b, size_t e, const char *const *keys) {
    int depth = 0;
    for (size_t i = b; i < e; i++) {
        if (s[i] == '(') depth++;
        else if (s[i] == ')') depth--;
        else if (s[i] == ',' && depth == 0)
            for (size_t k = 0; keys[k]; k++)
                if (pz_spec_starts_with(s, i + 1, e, keys[k])) return i;
    }
    return e;
}

/* "name(inner[,options])" in spec[b..e) with the '(' at open: the options
 * first (the wrapper parses them), then the inner codec, then the wrapper. */
static pz_status parse_wrapper(const char *spec, size_t b, size_t e, int depth, const pz_wrap_impl *wrap,
                               size_t open, pz_codec **out) {
    size_t close = match_paren(spec, open, e);
    if (close == SIZE_MAX) return pz_spec_fail(spec, e, "missing ')'");
    if (close != e - 1) return pz_spec_fail(spec, close + 1, "unexpected text after ')'");
    if (depth >= MAX_WRAP_DEPTH) return pz_spec_fail(spec, b, "wrappers nested more than %d deep", MAX_WRAP_DEPTH);
    size_t ib = open + 1, ie = close;
    size_t opts = wrap->opt_keys ? pz_spec_find_opt(spec, ib, ie, wrap->opt_keys) : ie;
    void *o = NULL;
    pz_status st = opts < ie ? wrap->parse_opts(spec, opts, ie, &o) : PZ_OK;
    if (st != PZ_OK) return st;
    pz_codec *inner = NULL;
    st = pz_spec_parse_codec(spec, ib, opts, depth + 1, &inner);
    if (st != PZ_OK) {
        if (o) wrap->free_opts(o);
        return st;
    }
    pz_codec *c = xcalloc(1, sizeof *c);
    c->wrap = wrap;
    c->impl = inner->impl;
    c->p = inner->p;
    c->chain = (uint8_t)(wrap->kind | (inner->chain << 2));
    st = wrap->create(o, inner, &c->w);
    if (st != PZ_OK) {
        c->wrap = NULL;
        pz_codec_free(c);
        return pz_spec_fail(spec, b, "%s", pz_last_error());
    }
    c->spec = xstrdup(wrap->spec(c->w));
    *out = c;
    return PZ_OK;
}

pz_status pz_spec_parse_codec(const char *spec, size_t b, size_t e, int depth, pz_codec **out) {
    if (b >= e) return pz_spec_fail(spec, b, "codec expected");
    size_t t = b;
    while (t < e && (isalnum((unsigned char)spec[t]) || spec[t] == '_')) t++;
    if (t < e && spec[t] == '(') {   /* a wrapper: "name(" */
        const pz_wrap_impl *w = pz_wrap_impl_by_name(spec + b, t - b);
        if (w) return parse_wrapper(spec, b, e, depth, w, t, out);
        char names[64];
        size_t n = 0;
        for (size_t i = 0; (w = pz_wrap_impl_at(i)) && n < sizeof names; i++)
            n += (size_t)snprintf(names + n, sizeof names - n, i ? ", %s" : "%s", w->name);
        return pz_spec_fail(spec, b, "unknown wrapper '%.*s' (%s)", (int)(t - b), spec + b, names);
    }
    return parse_base(spec, b, e, out);
}

pz_status pz_codec_create(const char *spec, pz_codec **out) {
    *out = NULL;
    if (!spec) return pz_fail(PZ_ERR_ARG, "no codec spec");
    size_t n = strlen(spec);
    if (n > 4096) return pz_fail(PZ_ERR_ARG, "codec spec longer than 4096 characters");
    int zstd = 0;
    if (n >= 5 && strcmp(spec + n - 5, "+zstd") == 0) {
        zstd = 1;
        n -= 5;
    }
    for (size_t i = 0; i < n; i++)
        if (spec[i] == '+') return pz_spec_fail(spec, i, "'+' only in a trailing '+zstd'");
    if (n == 0) return pz_spec_fail(spec, 0, "empty codec spec");
#ifndef PZ_HAVE_ZSTD
    if (zstd) return pz_spec_fail(spec, n, "+zstd: this binary was built without libzstd");
#endif
    pz_codec *c = NULL;
    pz_status st = pz_spec_parse_codec(spec, 0, n, 0, &c);
    if (st != PZ_OK) return st;
    if (zstd) {
        c->zstd = 1;
        size_t l = strlen(c->spec);
        char *s = xmalloc(l + 6);
        memcpy(s, c->spec, l);
        memcpy(s + l, "+zstd", 6);
        free(c->spec);
        c->spec = s;
    }
    *out = c;
    return PZ_OK;
}

/* ---------------------------------------------------------------- sizes */

static size_t payload_max(const pz_codec *c, const pz_shape *s) {
    if (c->wrap) return c->wrap->max_payload(c->w, s);
    return c->impl->max_payload(&c->p, s);
}

size_t pz_codec_max_encoded_size(const pz_codec *c, const pz_shape *shape) {
    if (!pz_shape_numel(shape)) return 0;
    return header_size(shape->ndim) + payload_max(c, shape);
}

#ifdef PZ_HAVE_ZSTD
static int ensure_scratch(pz_codec *c, size_t n) {
    if (c->scratch_cap >= n) return 1;
    free(c->scratch);
    c->scratch = malloc(n ? n : 1);
    c->scratch_cap = c->scratch ? n : 0;
    return c->scratch != NULL;
}
#endif

/* ---------------------------------------------------------------- encode */

/* the CPU payload of pz_codec_encode */
static pz_status cpu_payload_(void *arg, pz_codec *c, const pz_shape *shape, const pz_codec_ctx *ctx,
                              uint8_t *pl, size_t cap, size_t *plen, uint8_t *wflags) {
    const float *x = arg;
    *wflags = 0;
    if (c->wrap) return c->wrap->encode(c->w, x, shape, ctx, pl, cap, plen, wflags);
    return c->impl->encode(&c->p, x, shape, ctx, pl, cap, plen);
}

pz_status pz_codec_encode(pz_codec *c, const float *x, const pz_shape *shape,
                          const pz_codec_ctx *ctx, uint8_t *out, size_t cap, size_t *len) {
    return pz_codec_encode_with(c, shape, ctx, out, cap, len, cpu_payload_, (void *)x);
}

pz_status pz_codec_encode_with(pz_codec *c, const pz_shape *shape, const pz_codec_ctx *ctx, uint8_t *out,
                               size_t cap, size_t *len, pz_payload_encode_fn fn, void *arg) {
    *len = 0;
    pz_status st = check_shape(shape, "encode");
    if (st != PZ_OK) return st;
    size_t H = header_size(shape->ndim);
    if (cap < H) return pz_fail(PZ_ERR_SHAPE, "encode: output buffer of %zu bytes is smaller than the header", cap);
    uint8_t *pl = out + H;
    size_t plen = 0;
    uint8_t wflags = 0;
    uint8_t id = c->wrap ? (uint8_t)WRAP_ID(c->wrap->kind) : (uint8_t)c->p.id;
    st = fn(arg, c, shape, ctx, pl, cap - H, &plen, &wflags);
    if (st != PZ_OK) return st;
    if (plen > cap - H) return pz_fail(PZ_ERR_SHAPE, "encode: payload overran the buffer");
    uint8_t flags = 0;
#ifdef PZ_HAVE_ZSTD
    if (c->zstd) {
        flags |= FLAG_ZSTD_ASKED;
        size_t bound = ZSTD_compressBound(plen);
        if (!c->zc) c->zc = ZSTD_createCCtx();
        if (!c->zc || !ensure_scratch(c, bound)) return pz_fail(PZ_ERR_NOMEM, "encode: zstd: out of memory");
        size_t z = ZSTD_compressCCtx(c->zc, c->scratch, bound, pl, plen, ZSTD_LEVEL);
        if (!ZSTD_isError(z) && z < plen) {
            memcpy(pl, c->scratch, z);
            plen = z;
            flags |= FLAG_ZSTD_USED;
        }
    }
#endif
    uint8_t *h = out;
    h[0] = MAGIC0;
    h[1] = MAGIC1;
    h[2] = MAGIC2;
    h[3] = MAGIC3;
    h[4] = FORMAT_VERSION;
    h[5] = id;
    h[6] = flags;
    h[7] = wflags;
    h[8] = c->chain;
    h[9] = (uint8_t)shape->ndim;
    h[10] = h[11] = 0;
    params_write(&c->p, h + 12);
    for (int i = 0; i < shape->ndim; i++) pz_put_u64(h + 36 + 8 * i, (uint64_t)shape->dims[i]);
    pz_put_u64(h + H - 12, (uint64_t)plen);
    uint32_t crc = pz_crc32c(0, h, H - 4);
    crc = pz_crc32c(crc, pl, plen);
    pz_put_u32(h + H - 4, crc);
    *len = H + plen;
    return PZ_OK;
}

/* ---------------------------------------------------------------- header parse */

typedef struct {
    uint8_t id, flags, wflags, chain;
    pz_codec_params p;
    const pz_codec_impl *impl;
    pz_shape shape;
    size_t hsize, plen;
    const uint8_t *payload;
} msg_header;

static pz_status parse_header(const uint8_t *msg, size_t len, msg_header *m) {
    memset(m, 0, sizeof *m);
    if (!msg || len < HDR_FIXED + 8)
        return pz_fail(PZ_ERR_FORMAT, "codec message: %zu bytes is shorter than any header", len);
    if (msg[0] != MAGIC0 || msg[1] != MAGIC1 || msg[2] != MAGIC2 || msg[3] != MAGIC3)
        return pz_fail(PZ_ERR_FORMAT, "codec message: bad magic");
    if (msg[4] != FORMAT_VERSION)
        return pz_fail(PZ_ERR_FORMAT, "codec message: format version %u, this build reads %d", msg[4], FORMAT_VERSION);
    int ndim = msg[9];
    if (ndim < 1 || ndim > PZ_MAX_DIMS)
        return pz_fail(PZ_ERR_FORMAT, "codec message: ndim %d must be 1..%d", ndim, PZ_MAX_DIMS);
    size_t H = header_size(ndim);
    if (len < H) return pz_fail(PZ_ERR_FORMAT, "codec message: truncated header (%zu of %zu bytes)", len, H);
    uint64_t plen = pz_get_u64(msg + H - 12);
    if (plen != len - H)
        return pz_fail(PZ_ERR_FORMAT, "codec message: payload length %llu does not match the %zu bytes after the header",
                       (unsigned long long)plen, len - H);
    uint32_t crc = pz_crc32c(pz_crc32c(0, msg, H - 4), msg + H, (size_t)plen);
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION   /* the fuzzer target skips the CRC to reach the decoders */
    if (crc != pz_get_u32(msg + H - 4)) return pz_fail(PZ_ERR_FORMAT, "codec message: CRC32C mismatch (corrupted)");
#else
    (void)crc;
#endif
    /* the CRC matched; still check every field, a peer may be buggy or hostile */
    m->id = msg[5];
    m->flags = msg[6];
    m->wflags = msg[7];
    m->chain = msg[8];
    if (msg[10] || msg[11]) return pz_fail(PZ_ERR_FORMAT, "codec message: reserved header bytes not zero");
    if (m->flags & ~(FLAG_ZSTD_ASKED | FLAG_ZSTD_USED) || ((m->flags & FLAG_ZSTD_USED) && !(m->flags & FLAG_ZSTD_ASKED)))
        return pz_fail(PZ_ERR_FORMAT, "codec message: bad flags 0x%02x", m->flags);
    if (!params_read(&m->p, msg + 12)) return pz_fail(PZ_ERR_FORMAT, "codec message: reserved parameter byte not zero");
    m->impl = pz_codec_impl_by_id(m->p.id);
    if (!m->impl) return pz_fail(PZ_ERR_FORMAT, "codec message: unknown base codec id %u", m->p.id);
    if (m->id < 0x80) {
        if (m->id != m->p.id) return pz_fail(PZ_ERR_FORMAT, "codec message: codec id %u but parameters of id %u", m->id, m->p.id);
        if (m->chain || m->wflags) return pz_fail(PZ_ERR_FORMAT, "codec message: wrapper fields set on a base codec message");
    } else {
        int kind = m->id - 0x80;
        if (!pz_wrap_impl_by_kind((unsigned)kind)) return pz_fail(PZ_ERR_FORMAT, "codec message: unknown codec id 0x%02x", m->id);
        if ((m->chain & 3) != kind) return pz_fail(PZ_ERR_FORMAT, "codec message: wrapper chain does not start with the codec id");
        int ended = 0;
        for (int l = 0; l < MAX_WRAP_DEPTH; l++) {
            int k = (m->chain >> (2 * l)) & 3;
            if (!k) ended = 1;
            else if (ended) return pz_fail(PZ_ERR_FORMAT, "codec message: malformed wrapper chain 0x%02x", m->chain);
        }
    }
    if (m->impl->validate(&m->p) != PZ_OK)
        return pz_fail(PZ_ERR_FORMAT, "codec message: bad %s parameters: %s", m->impl->name, pz_last_error());
    m->shape.ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        uint64_t d = pz_get_u64(msg + 36 + 8 * i);
        if (d == 0 || d > (uint64_t)INT64_MAX) return pz_fail(PZ_ERR_FORMAT, "codec message: dim %d is %llu", i, (unsigned long long)d);
        m->shape.dims[i] = (int64_t)d;
    }
    for (int i = ndim; i < PZ_MAX_DIMS; i++) m->shape.dims[i] = 0;
    if (!pz_shape_numel(&m->shape)) return pz_fail(PZ_ERR_FORMAT, "codec message: more than 2^40 elements");
    m->hsize = H;
    m->plen = (size_t)plen;
    m->payload = msg + H;
    return PZ_OK;
}

static void format_spec(const msg_header *m, char *buf, size_t cap) {
    char base[512], tmp[700];
    m->impl->format(&m->p, base, sizeof base);
    int levels = 0;
    size_t pos = 0;
    for (int l = 0; l < MAX_WRAP_DEPTH; l++) {
        int k = (m->chain >> (2 * l)) & 3;
        if (!k) break;
        const pz_wrap_impl *wi = pz_wrap_impl_by_kind((unsigned)k);
        const char *w = wi ? wi->name : "?";
        memcpy(tmp + pos, w, strlen(w));
        pos += strlen(w);
        tmp[pos++] = '(';
        levels++;
    }
    size_t bl = strlen(base);
    memcpy(tmp + pos, base, bl);
    pos += bl;
    for (int l = 0; l < levels; l++) tmp[pos++] = ')';
    if (m->flags & FLAG_ZSTD_ASKED) {
        memcpy(tmp + pos, "+zstd", 5);
        pos += 5;
    }
    tmp[pos] = 0;
    snprintf(buf, cap, "%s", tmp);
}

pz_status pz_codec_peek(const uint8_t *msg, size_t len, char *spec, size_t spec_cap, pz_shape *shape) {
    msg_header m;
    pz_status st = parse_header(msg, len, &m);
    if (st != PZ_OK) return st;
    if (spec && spec_cap) format_spec(&m, spec, spec_cap);
    if (shape) *shape = m.shape;
    return PZ_OK;
}

/* ---------------------------------------------------------------- decode */

/* the CPU payload decoder of pz_codec_decode */
static pz_status cpu_decode_(void *arg, pz_codec *c, const pz_codec_params *p, uint8_t wflags,
                             const uint8_t *pl, size_t plen, const pz_shape *shape, const pz_codec_ctx *ctx) {
    float *out = arg;
    if (c->wrap) return c->wrap->decode(c->w, wflags, pl, plen, shape, ctx, out);
    (void)wflags;
    (void)ctx;
    return pz_codec_impl_by_id(p->id)->decode(p, pl, plen, shape, out);
}

pz_status pz_codec_decode(pz_codec *c, const uint8_t *msg, size_t len,
                          const pz_codec_ctx *ctx, float *out, size_t out_cap, pz_shape *shape) {
    return pz_codec_decode_with(c, msg, len, ctx, out_cap, shape, cpu_decode_, out);
}

pz_status pz_codec_decode_with(pz_codec *c, const uint8_t *msg, size_t len, const pz_codec_ctx *ctx,
                               size_t out_cap, pz_shape *shape, pz_payload_decode_fn fn, void *arg) {
    msg_header m;
    pz_status st = parse_header(msg, len, &m);
    if (st != PZ_OK) return st;
    if (c->wrap) {
        if (m.id != WRAP_ID(c->wrap->kind) || m.chain != c->chain) {
            char got[600];
            format_spec(&m, got, sizeof got);
            return pz_fail(PZ_ERR_FORMAT, "codec message was written by '%s', this decoder is '%s'", got, c->spec);
        }
    } else if (m.id >= 0x80) {
        char got[600];
        format_spec(&m, got, sizeof got);
        return pz_fail(PZ_ERR_FORMAT, "codec message was written by '%s' (stateful), this decoder is '%s'", got, c->spec);
    }
    size_t n = pz_shape_numel(&m.shape);
    if (n > out_cap)
        return pz_fail(PZ_ERR_SHAPE, "codec message holds %zu elements, the output buffer %zu", n, out_cap);
    size_t bound;
    if (c->wrap) bound = c->wrap->max_payload(c->w, &m.shape);
    else
        bound = m.impl->max_payload(&m.p, &m.shape);
    const uint8_t *pl = m.payload;
    size_t plen = m.plen;
    if (m.flags & FLAG_ZSTD_USED) {
#ifdef PZ_HAVE_ZSTD
        unsigned long long raw = ZSTD_getFrameContentSize(pl, plen);
        if (raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN)
            return pz_fail(PZ_ERR_FORMAT, "codec message: bad zstd frame");
        if (raw > bound || raw <= plen)
            return pz_fail(PZ_ERR_FORMAT, "codec message: zstd frame of %llu bytes, expected at most %zu (and more than %zu)",
                           raw, bound, plen);
        if (!c->zd) c->zd = ZSTD_createDCtx();
        if (!c->zd || !ensure_scratch(c, (size_t)raw)) return pz_fail(PZ_ERR_NOMEM, "decode: zstd: out of memory");
        size_t got = ZSTD_decompressDCtx(c->zd, c->scratch, (size_t)raw, pl, plen);
        if (ZSTD_isError(got) || got != raw)
            return pz_fail(PZ_ERR_FORMAT, "codec message: zstd: %s", ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short frame");
        pl = c->scratch;
        plen = got;
#else
        return pz_fail(PZ_ERR_FORMAT, "codec message is zstd-compressed and this binary was built without libzstd");
#endif
    }
    if (plen > bound)
        return pz_fail(PZ_ERR_FORMAT, "codec message: payload of %zu bytes exceeds the %zu this shape allows", plen, bound);
    if (!c->wrap && fixed_size(&m.p) && plen != bound)
        return pz_fail(PZ_ERR_FORMAT, "codec message: %s payload of %zu bytes, this shape needs exactly %zu",
                       m.impl->name, plen, bound);
    st = fn(arg, c, &m.p, m.wflags, pl, plen, &m.shape, ctx);
    if (st != PZ_OK) return st;
    if (shape) *shape = m.shape;
    return PZ_OK;
}

/* ---------------------------------------------------------------- backend hooks */

const pz_wrap_impl *pz_codec_wrap(const pz_codec *c) { return c->wrap; }
const pz_codec_params *pz_codec_base_params(const pz_codec *c) { return &c->p; }
int pz_codec_has_zstd(const pz_codec *c) { return c->zstd; }
pz_codec *pz_codec_warm(pz_codec *c) {
    return c->wrap ? c->wrap->warmup(c->w) : NULL;
}

pz_codec *pz_codec_inner(pz_codec *c) {
    return c->wrap ? c->wrap->inner(c->w) : NULL;
}

void *pz_codec_backend(const pz_codec *c) { return c->backend; }
void pz_codec_set_backend(pz_codec *c, void *state, void (*free_fn)(void *)) {
    c->backend = state;
    c->backend_free = free_fn;
}
