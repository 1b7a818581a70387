/* codec.c: codec objects and the dispatch of messages to their codecs.
 *
 * An object is a base codec (its table entry and parameters) or the
 * outermost of a chain of wrappers (its table entry and state), plus the
 * +zstd stage and the state of another backend. The spec grammar (spec.c)
 * builds objects; the wire format (message.c) is written and checked
 * around the payload that a codec, or another backend's fn, computes. Every
 * codec is reached through its table entry (codec_impl.h), so this file
 * knows none by name. */
#include "compress/core/codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec_ext.h"
#include "compress/core/codec_impl.h"
#include "compress/core/message.h"
#include "base/mem.h"

struct pz_codec {
    const pz_codec_impl *impl;     /* base codec (innermost for wrappers) */
    pz_codec_params p;             /* innermost base parameters */
    const pz_wrap_impl *wrap;      /* outermost wrapper, NULL for a base codec */
    pz_wrapper *w;                 /* its state (it owns the inner codecs) */
    uint16_t chain;                /* wrapper kinds, PZ_MSG_CHAIN_BITS per level, outermost first */
    int zstd;                      /* the spec ends in +zstd */
    pz_zstd_stage z;
    char *spec;                    /* canonical */
    void *backend;                 /* state of another backend (the GPU path), or NULL */
    void (*backend_free)(void *);
    pz_scratch scratch;            /* a base codec's encode scratch (impl->encode_scratch) */
    int framed;                    /* its messages travel in checked frames (pz_codec_set_framed) */
};

/* ---------------------------------------------------------------- scratch */

void *pz_scratch_get(pz_scratch *s, int slot, size_t n) {
    if (s->buf[slot] && s->cap[slot] >= n) return s->buf[slot];
    free(s->buf[slot]);
    s->buf[slot] = NULL;
    s->cap[slot] = 0;
    void *p = pz_alloc_huge(n ? n : 1);
    s->buf[slot] = p;
    s->cap[slot] = n;
    return p;
}

void pz_scratch_release(pz_scratch *s) {
    for (int i = 0; i < PZ_SCRATCH_SLOTS; i++) free(s->buf[i]);
    memset(s, 0, sizeof *s);
}

size_t pz_scratch_bytes(const pz_scratch *s) {
    size_t b = 0;
    for (int i = 0; i < PZ_SCRATCH_SLOTS; i++) b += s->cap[i];
    return b;
}

/* ---------------------------------------------------------------- objects */

pz_codec *pz_codec_make_base(const pz_codec_impl *impl, const pz_codec_params *p) {
    pz_codec *c = xcalloc(1, sizeof *c);
    c->impl = impl;
    c->p = *p;
    char buf[512];
    impl->format(p, buf, sizeof buf);
    c->spec = xstrdup(buf);
    return c;
}

pz_status pz_codec_make_wrapper(const pz_wrap_impl *wrap, void *opts, pz_codec *inner, pz_codec **out) {
    pz_codec *c = xcalloc(1, sizeof *c);
    /* the header carries the innermost base codec's parameters and the
     * chain of wrapper kinds, so a message names its whole codec */
    c->impl = inner->impl;
    c->p = inner->p;
    c->chain = (uint16_t)(wrap->kind | (inner->chain << PZ_MSG_CHAIN_BITS));
    pz_status st = wrap->create(opts, inner, &c->w);
    if (st != PZ_OK) {
        pz_codec_free(c);
        return st;
    }
    c->wrap = wrap;
    c->spec = xstrdup(wrap->spec(c->w));
    *out = c;
    return PZ_OK;
}

void pz_codec_add_zstd(pz_codec *c) {
    c->zstd = 1;
    size_t l = strlen(c->spec);
    char *s = xmalloc(l + 6);
    memcpy(s, c->spec, l);
    memcpy(s + l, "+zstd", 6);
    free(c->spec);
    c->spec = s;
}

void pz_codec_free(pz_codec *c) {
    if (!c) return;
    if (c->backend && c->backend_free) c->backend_free(c->backend);
    if (c->wrap) c->wrap->free(c->w);
    pz_scratch_release(&c->scratch);
    pz_zstd_stage_free(&c->z);
    free(c->spec);
    free(c);
}

const char *pz_codec_spec(const pz_codec *c) { return c->spec; }

/* the encode scratch kept by c and the codecs it wraps */
static size_t scratch_bytes(pz_codec *c) {
    if (!c) return 0;
    if (!c->wrap) return pz_scratch_bytes(&c->scratch);
    return scratch_bytes(c->wrap->inner(c->w)) + (c->wrap->warmup ? scratch_bytes(c->wrap->warmup(c->w)) : 0);
}

size_t pz_codec_state_bytes(const pz_codec *c, size_t *file_bytes) {
    if (file_bytes) *file_bytes = 0;
    /* (inner and warmup are reached through the wrapper, which owns them) */
    size_t sb = scratch_bytes((pz_codec *)c);
    if (c->wrap) return c->wrap->state_bytes(c->w, file_bytes) + c->z.cap + sb;
    return c->z.cap + sb;
}

size_t pz_codec_state_bound(const pz_codec *c, const pz_shape *s) {
    size_t b = c->zstd ? pz_codec_max_encoded_size(c, s) : 0;   /* the zstd stage's buffer */
    if (!c->wrap) return b + (c->impl->scratch_bound ? c->impl->scratch_bound(&c->p, s) : 0);
    if (c->wrap->state_bound) b += c->wrap->state_bound(c->w, s);
    b += pz_codec_state_bound(c->wrap->inner(c->w), s);
    const pz_codec *warm = c->wrap->warmup ? c->wrap->warmup(c->w) : NULL;
    return warm ? b + pz_codec_state_bound(warm, s) : b;
}

int pz_codec_is_stateful_decoder(const pz_codec *c) {
    if (!c->wrap) return 0;
    return c->wrap->stateful_decoder || pz_codec_is_stateful_decoder(c->wrap->inner(c->w));
}

/* ---------------------------------------------------------------- sizes */

static size_t payload_max(const pz_codec *c, const pz_shape *s) {
    if (c->wrap) return c->wrap->max_payload(c->w, s);
    return c->impl->max_payload(&c->p, s);
}

size_t pz_codec_max_encoded_size(const pz_codec *c, const pz_shape *shape) {
    if (!pz_shape_numel(shape)) return 0;
    return pz_msg_header_size(shape->ndim) + payload_max(c, shape);
}

/* Fixed-size payloads: the length must equal max_payload exactly. */
static int fixed_size(const pz_codec_params *p) {
    switch (p->id) {
    case PZ_CODEC_FP32: case PZ_CODEC_FP16: case PZ_CODEC_BF16: case PZ_CODEC_Q: case PZ_CODEC_SIGN:
        return 1;
    case PZ_CODEC_NUQ: return !p->elias;
    default: return 0;
    }
}

/* ---------------------------------------------------------------- encode */

static pz_status check_shape(const pz_shape *s, const char *what) {
    if (!s || s->ndim < 1 || s->ndim > PZ_MAX_DIMS)
        return pz_fail(PZ_ERR_SHAPE, "%s: ndim %d must be 1..%d", what, s ? s->ndim : 0, PZ_MAX_DIMS);
    for (int i = 0; i < s->ndim; i++)
        if (s->dims[i] <= 0) return pz_fail(PZ_ERR_SHAPE, "%s: dim %d is %lld, must be > 0", what, i, (long long)s->dims[i]);
    if (!pz_shape_numel(s)) return pz_fail(PZ_ERR_SHAPE, "%s: more than 2^40 elements", what);
    return PZ_OK;
}

/* the CPU payload of pz_codec_encode */
static pz_status cpu_payload(void *arg, pz_codec *c, const pz_shape *shape, const pz_codec_ctx *ctx,
                             uint8_t *pl, size_t cap, size_t *plen, uint8_t *wflags) {
    const float *x = arg;
    *wflags = 0;
    if (c->wrap) return c->wrap->encode(c->w, x, shape, ctx, pl, cap, plen, wflags);
    if (c->impl->encode_scratch) return c->impl->encode_scratch(&c->p, x, shape, ctx, pl, cap, plen, &c->scratch);
    return c->impl->encode(&c->p, x, shape, ctx, pl, cap, plen);
}

pz_status pz_codec_encode(pz_codec *c, const float *x, const pz_shape *shape,
                          const pz_codec_ctx *ctx, uint8_t *out, size_t cap, size_t *len) {
    return pz_codec_encode_with(c, shape, ctx, out, cap, len, cpu_payload, (void *)x);
}

pz_status pz_codec_encode_with(pz_codec *c, const pz_shape *shape, const pz_codec_ctx *ctx, uint8_t *out,
                               size_t cap, size_t *len, pz_payload_encode_fn fn, void *arg) {
    *len = 0;
    pz_status st = check_shape(shape, "encode");
    if (st != PZ_OK) return st;
    size_t H = pz_msg_header_size(shape->ndim);
    if (cap < H) return pz_fail(PZ_ERR_SHAPE, "encode: output buffer of %zu bytes is smaller than the header", cap);
    uint8_t *pl = out + H;
    size_t plen = 0;
    uint8_t wflags = 0;
    uint8_t id = c->wrap ? (uint8_t)PZ_MSG_WRAP_ID(c->wrap->kind) : (uint8_t)c->p.id;
    st = fn(arg, c, shape, ctx, pl, cap - H, &plen, &wflags);
    if (st != PZ_OK) return st;
    if (plen > cap - H) return pz_fail(PZ_ERR_SHAPE, "encode: payload overran the buffer");
    uint8_t zflags = 0;
    if (c->zstd && (st = pz_zstd_pack(&c->z, pl, &plen, &zflags)) != PZ_OK) return st;
    pz_msg_write(out, id, zflags, wflags, c->chain, &c->p, shape, plen, c->framed);
    *len = H + plen;
    return PZ_OK;
}

/* ---------------------------------------------------------------- decode */

/* the CPU payload decoder of pz_codec_decode */
static pz_status cpu_decode(void *arg, pz_codec *c, const pz_codec_params *p, uint8_t wflags,
                            const uint8_t *pl, size_t plen, const pz_shape *shape, const pz_codec_ctx *ctx) {
    float *out = arg;
    if (c->wrap) return c->wrap->decode(c->w, wflags, pl, plen, shape, ctx, out);
    (void)wflags;
    (void)ctx;
    return pz_codec_impl_by_id(p->id)->decode(p, pl, plen, shape, out);
}

pz_status pz_codec_decode(pz_codec *c, const uint8_t *msg, size_t len,
                          const pz_codec_ctx *ctx, float *out, size_t out_cap, pz_shape *shape) {
    return pz_codec_decode_with(c, msg, len, ctx, out_cap, shape, cpu_decode, out);
}

pz_status pz_codec_decode_with(pz_codec *c, const uint8_t *msg, size_t len, const pz_codec_ctx *ctx,
                               size_t out_cap, pz_shape *shape, pz_payload_decode_fn fn, void *arg) {
    pz_msg_header m;
    pz_status st = pz_msg_read(msg, len, &m, c->framed);
    if (st != PZ_OK) return st;
    /* a wrapper's state only makes sense for messages of the same chain */
    if (c->wrap) {
        if (m.id != PZ_MSG_WRAP_ID(c->wrap->kind) || m.chain != c->chain) {
            char got[600];
            pz_msg_spec(&m, got, sizeof got);
            return pz_fail(PZ_ERR_FORMAT, "codec message was written by '%s', this decoder is '%s'", got, c->spec);
        }
    } else if (m.id >= PZ_MSG_WRAP_ID(0)) {
        char got[600];
        pz_msg_spec(&m, got, sizeof got);
        return pz_fail(PZ_ERR_FORMAT, "codec message was written by '%s' (a wrapper), this decoder is '%s'", got, c->spec);
    }
    size_t n = pz_shape_numel(&m.shape);
    if (n > out_cap)
        return pz_fail(PZ_ERR_SHAPE, "codec message holds %zu elements, the output buffer %zu", n, out_cap);
    size_t bound;
    if (c->wrap) bound = c->wrap->max_payload(c->w, &m.shape);
    else
        bound = m.impl->max_payload(&m.p, &m.shape);
    const uint8_t *pl;
    size_t plen;
    if ((st = pz_zstd_unpack(&c->z, &m, bound, &pl, &plen)) != PZ_OK) return st;
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

pz_wrapper *pz_codec_wrapper(pz_codec *c) { return c->wrap ? c->w : NULL; }

void pz_codec_set_framed(pz_codec *c, int framed) {
    /* every level writes its own header (a wrapper's payload holds its inner codecs' messages) */
    for (; c; c = pz_codec_inner(c)) {
        c->framed = framed != 0;
        pz_codec *warm = c->wrap && c->wrap->warmup ? c->wrap->warmup(c->w) : NULL;
        if (warm) pz_codec_set_framed(warm, framed);
    }
}

int pz_codec_has_state(const pz_codec *c) { return c->wrap != NULL; }

const char *pz_codec_state_wrapper(const pz_codec *c) {
    if (!c->wrap) return NULL;
    switch (c->wrap->kind) {
    case PZ_WRAP_EF: return "ef";
    case PZ_WRAP_EF21: return "ef21";
    case PZ_WRAP_AQ: return "aq";
    default: return pz_codec_state_wrapper(c->wrap->inner(c->w));   /* hadamard(): none of its own */
    }
}

int pz_codec_keeps_state(const pz_codec *c) { return pz_codec_state_wrapper(c) != NULL; }

void *pz_codec_backend(const pz_codec *c) { return c->backend; }
void pz_codec_set_backend(pz_codec *c, void *state, void (*free_fn)(void *)) {
    c->backend = state;
    c->backend_free = free_fn;
}
