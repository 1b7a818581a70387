/* spec.c: the codec spec grammar (compress/README.md) and the helpers that
 * base codecs and wrappers use to parse their own arguments (spec.h).
 *
 *   spec    := wrapped ['+zstd']
 *   wrapped := NAME '(' wrapped [',' options] ')' | base
 *
 * A wrapper's NAME and options come from the wrapper table, a base codec's
 * name and arguments from the base codec table (codec_impl.h): the grammar
 * only splits the text, builds the objects (codec.c) and makes every error
 * point at the offending character of the whole spec. */
#include "compress/core/spec.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/parse.h"

/* ---------------------------------------------------------------- helpers */

/* the longest spec an error message echoes whole */
#define SPEC_ECHO 120

pz_status pz_spec_fail(const char *spec, size_t off, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t slen = strlen(spec);
    if (off > slen) off = slen;
    char head[512];
    if (slen <= SPEC_ECHO) {
        snprintf(head, sizeof head, "bad codec spec '%s': %s at offset %zu: ", spec, msg, off);
        return pz_fail_caret(PZ_ERR_ARG, head, "", spec, off);
    }
    /* a long spec whole would push the reason past the message's bounds:
     * its start quoted, and a window around the offset under the caret */
    snprintf(head, sizeof head, "bad codec spec '%.40s...' (%zu characters): %s at offset %zu: ", spec, slen, msg, off);
    size_t from = off > SPEC_ECHO / 2 ? off - SPEC_ECHO / 2 : 0;
    char window[SPEC_ECHO + 1];
    snprintf(window, sizeof window, "%s", spec + from);
    return pz_fail_caret(PZ_ERR_ARG, head, from ? "..." : "", window, off - from);
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

pz_status pz_spec_unknown(const char *spec, const pz_spec_opt *o, const char *codec, const char *known) {
    return pz_spec_fail(spec, o->off, "unknown %s option '%.*s' (%s)", codec, (int)o->klen, o->key, known);
}

pz_status pz_spec_list_after(const char *spec, size_t where, const char *args, size_t *pos) {
    if (args[*pos] == ',') {
        ++*pos;
        if (!args[*pos]) return pz_spec_fail(spec, where + *pos, "empty option after ','");
    } else if (args[*pos]) {
        return pz_spec_fail(spec, where + *pos, "',' expected");
    }
    return PZ_OK;
}

pz_status pz_spec_parse_lead(const char *spec, size_t where, const char *args, const pz_spec_lead *L, float *v,
                             pz_codec_params *p) {
    memcpy(p, &L->init, sizeof *p);   /* padding too: L is static, so it is 0 */
    if (args[0] != ':') return pz_spec_fail(spec, where, "%s", L->needs);
    size_t n = strcspn(args + 1, ","), pos = 1 + n;
    double d;
    pz_status st = pz_spec_float(spec, where + 1, args + 1, n, L->lo, L->hi, &d, L->what);
    if (st != PZ_OK) return st;
    if (!((float)d > L->above)) return pz_spec_fail(spec, where + 1, "%s", L->low);
    *v = (float)d;
    if ((st = pz_spec_list_after(spec, where, args, &pos)) != PZ_OK) return st;
    pz_spec_opt o;
    int r;
    while ((r = pz_spec_next_opt(spec, where, args, &pos, &o)) > 0) {
        if (!L->take(spec, &o, p, &st)) return pz_spec_unknown(spec, &o, L->codec, L->known);
        if (st != PZ_OK) return st;
    }
    return r < 0 ? PZ_ERR_ARG : PZ_OK;
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

pz_status pz_spec_bits(const char *spec, size_t where, const char *args, const char *codec, size_t *len,
                       pz_codec_params *p) {
    size_t i = 0;
    while (args[i] >= '0' && args[i] <= '9') i++;
    if (i == 0) return pz_spec_fail(spec, where, "bits missing: write %s1..%s8", codec, codec);
    uint64_t bits;
    pz_status st = pz_spec_uint(spec, where, args, i, 1, 8, &bits, "bits");
    if (st != PZ_OK) return st;
    p->bits = (uint8_t)bits;
    *len = i;
    return PZ_OK;
}

int pz_spec_scale_opt(const char *spec, const pz_spec_opt *o, pz_codec_params *p, pz_status *st) {
    if (!o->val) return 0;
    if (pz_spec_key_is(o, "group")) *st = pz_spec_group(spec, o, p);
    else if (pz_spec_key_is(o, "sdtype")) *st = pz_spec_sdtype(spec, o, p);
    else return 0;
    return 1;
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

/* ---------------------------------------------------------------- grammar */

/* Base codec from spec[b..e): a name, then the codec's own arguments. */
static pz_status parse_base(const char *spec, size_t b, size_t e, int use, pz_codec **out) {
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
    /* q left round= to us: the default of what the codec carries */
    if (p.round_mode == PZ_ROUND_UNSET)
        p.round_mode = use == PZ_USE_GRADIENT ? PZ_ROUND_STOCHASTIC : PZ_ROUND_NEAREST;
    if (impl->validate(&p) != PZ_OK)
        return pz_spec_fail(spec, b, "invalid parameters: %s", pz_last_error());
    *out = pz_codec_make_base(impl, &p);
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
static pz_status parse_wrapper(const char *spec, size_t b, size_t e, int depth, int use, const pz_wrap_impl *wrap,
                               size_t open, pz_codec **out) {
    size_t close = match_paren(spec, open, e);
    if (close == SIZE_MAX) return pz_spec_fail(spec, e, "missing ')'");
    if (close != e - 1) return pz_spec_fail(spec, close + 1, "unexpected text after ')'");
    if (depth >= PZ_WRAP_MAX_DEPTH) return pz_spec_fail(spec, b, "wrappers nested more than %d deep", PZ_WRAP_MAX_DEPTH);
    size_t ib = open + 1, ie = close;
    size_t opts = wrap->opt_keys ? pz_spec_find_opt(spec, ib, ie, wrap->opt_keys) : ie;
    void *o = NULL;
    pz_status st = opts < ie ? wrap->parse_opts(spec, opts, ie, &o) : PZ_OK;
    if (st != PZ_OK) return st;
    pz_codec *inner = NULL;
    st = pz_spec_parse_codec(spec, ib, opts, depth + 1, use, &inner);
    if (st != PZ_OK) {
        if (o) wrap->free_opts(o);
        return st;
    }
    if (pz_codec_make_wrapper(wrap, o, inner, out) != PZ_OK) return pz_spec_fail(spec, b, "%s", pz_last_error());
    return PZ_OK;
}

pz_status pz_spec_parse_codec(const char *spec, size_t b, size_t e, int depth, int use, pz_codec **out) {
    if (b >= e) return pz_spec_fail(spec, b, "codec expected");
    size_t t = b;
    while (t < e && (isalnum((unsigned char)spec[t]) || spec[t] == '_')) t++;
    if (t < e && spec[t] == '(') {   /* a wrapper: "name(" */
        const pz_wrap_impl *w = pz_wrap_impl_by_name(spec + b, t - b);
        if (w) return parse_wrapper(spec, b, e, depth, use, w, t, out);
        char names[64];
        size_t n = 0;
        for (size_t i = 0; (w = pz_wrap_impl_at(i)) && n < sizeof names; i++)
            n += (size_t)snprintf(names + n, sizeof names - n, i ? ", %s" : "%s", w->name);
        return pz_spec_fail(spec, b, "unknown wrapper '%.*s' (%s)", (int)(t - b), spec + b, names);
    }
    return parse_base(spec, b, e, use, out);
}

pz_status pz_codec_create(const char *spec, pz_codec **out) {
    return pz_codec_create_for(spec, PZ_USE_ACTIVATION, out);
}

pz_status pz_codec_create_for(const char *spec, int use, pz_codec **out) {
    *out = NULL;
    if (use != PZ_USE_ACTIVATION && use != PZ_USE_GRADIENT) return pz_fail(PZ_ERR_ARG, "codec use %d unknown", use);
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
    pz_status st = pz_spec_parse_codec(spec, 0, n, 0, use, &c);
    if (st != PZ_OK) return st;
    if (zstd) pz_codec_add_zstd(c);
    *out = c;
    return PZ_OK;
}


void pz_spec_format_float(float v, char out[64]) {
    int ok = 0;
    for (int prec = 1; prec <= 9 && !ok; prec++) {
        snprintf(out, 64, "%.*g", prec, (double)v);
        ok = !strchr(out, 'e') && strtof(out, NULL) == v;
    }
    for (int dec = 1; dec <= 45 && !ok; dec++) {
        snprintf(out, 64, "%.*f", dec, (double)v);
        ok = strtof(out, NULL) == v;
    }
}
