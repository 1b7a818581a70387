/* wrappers.c: ef(), ef21() and aq() around an inner codec (see wrappers.h);
 * the object (compress/wrappers/wrapper_priv.h) is also hadamard()'s (hadamard.c).
 *
 * Each wrapper object keeps a sender state and a receiver state apart, so one
 * object may encode, decode, or both (loopback); an edge normally has one
 * object per side made from the same spec. Inner messages are complete
 * messages of the inner codec (its own header, shape and CRC), written and
 * read with pz_codec_encode/pz_codec_decode. Integers are little-endian.
 *
 * Nesting (ef(aq(q4)), ef(ef21(topk:0.1)), ...) is consistent: a sender
 * decodes every message it encodes exactly once, in order, so the receiver
 * role of its inner object mirrors the real receiver (at the cost of holding
 * that state twice on the sending side). Inside aq() the inner codec sees
 * (count, row dims) tensors whose count follows the mix of new and seen ids,
 * so an ef()/ef21() inside aq() fails with a shape error once the count
 * changes, and an aq() inside aq() gets no sample ids and fails.
 *
 * ef(C), flags = 0. Payload: one message of C for the whole tensor.
 *   Sender: e (numel floats) starts at zero on the first message, which also
 *   fixes the shape (a later shape is an error naming both). y = x + e; the
 *   payload is C(y); the sender decodes its own message to get C(y) and sets
 *   e = y - C(y) (so e is exactly what the receiver did not get).
 *   Receiver: a plain decode of C's message; it keeps no state.
 *   Random stream: ctx as given.
 *
 * ef21(C), flags = 0. Payload: one message of C for the whole tensor.
 *   Both sides keep g (numel floats, zero before the first message, whose
 *   shape is then fixed). Sender: payload = C(x - g); g += decode(payload).
 *   Receiver: g += decode(payload); the output is g, i.e. the receiver's
 *   ESTIMATE of x (not the decoded difference). Both add the same decoded
 *   floats in the same order, so the two g stay bitwise equal.
 *   Random stream: ctx as given.
 *
 * aq(C[,warmup=W][,mem=BYTES][,spill=DIR]): compress/wrappers/aq.c. */

#include "compress/wrappers/wrappers.h"
#include "compress/wrappers/aq_store.h"
#include "compress/wrappers/wrapper_priv.h"
#include "compress/core/codec_ext.h"
#include "compress/core/spec.h"
#include "compress/wrappers/wrap_elem.h"
#include "base/bytes.h"
#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------- */


/* Re-reports the last error with a prefix; inner SHAPE errors on a decode
 * path mean the outer message is inconsistent, so they become FORMAT. */
pz_status pz_wrap_rewrap(pz_status st, pz_status as_shape, const char *what) {
    char msg[768];
    snprintf(msg, sizeof msg, "%s", pz_last_error());
    if (st == PZ_ERR_SHAPE) st = as_shape;
    return pz_fail(st, "%s: %s", what, msg);
}

/* Checks ndim and dims and computes numel without overflow. */
pz_status pz_wrap_check_shape(const char *name, const pz_shape *s, size_t *numel) {
    if (!s || s->ndim < 1 || s->ndim > PZ_MAX_DIMS)
        return pz_fail(PZ_ERR_SHAPE, "%s: bad shape (ndim %d)", name, s ? s->ndim : 0);
    size_t n = 1;
    for (int i = 0; i < s->ndim; i++) {
        if (s->dims[i] < 0) return pz_fail(PZ_ERR_SHAPE, "%s: negative dimension", name);
        size_t d = (size_t)s->dims[i];
        if (d && n > SIZE_MAX / sizeof(float) / d)
            return pz_fail(PZ_ERR_SHAPE, "%s: shape too large", name);
        n *= d;
    }
    *numel = n;
    return PZ_OK;
}


pz_status pz_wrap_scratch(pz_wrapper *w, int k, size_t n, float **out) {
    if (w->f_cap[k] < n) {
        float *p = malloc(n * sizeof(float));
        if (!p) return pz_fail(PZ_ERR_NOMEM, "%s: cannot allocate %zu floats of scratch", w->name, n);
        free(w->f[k]);
        w->f[k] = p;
        w->f_cap[k] = n;
    }
    *out = w->f[k];
    return PZ_OK;
}

pz_status pz_wrap_scratch_ids(pz_wrapper *w, size_t n) {
    if (w->ids_cap >= n) return PZ_OK;
    void *ids, *slots;
    if (!pz_calloc_pair(&ids, sizeof *w->ids, &slots, sizeof *w->slots, n))
        return pz_fail(PZ_ERR_NOMEM, "%s: cannot allocate scratch for %zu ids", w->name, n);
    PZ_FREE_ALL(w->ids, w->slots);
    w->ids = ids;
    w->slots = slots;
    w->ids_cap = n;
    return PZ_OK;
}

pz_status pz_wrap_decoded(pz_status st, const char *what, const pz_shape *got, const pz_shape *want) {
    if (st) return pz_wrap_rewrap(st, PZ_ERR_FORMAT, what);
    if (!pz_shape_equal(got, want)) {
        char a[96], b[96];
        pz_shape_format(got, a, sizeof a);
        pz_shape_format(want, b, sizeof b);
        return pz_fail(PZ_ERR_FORMAT, "%s has shape %s, expected %s", what, a, b);
    }
    return PZ_OK;
}

/* Decodes an inner message into out (exactly the numel of want) and checks
 * its shape is want. Any failure is a malformed outer message. */
pz_status pz_wrap_decode_exact(pz_codec *c, const char *what, const uint8_t *msg, size_t len,
                              const pz_codec_ctx *ctx, float *out, const pz_shape *want) {
    pz_shape got = {0};
    pz_status st = pz_codec_decode(c, msg, len, ctx, out, pz_shape_numel(want), &got);
    return pz_wrap_decoded(st, what, &got, want);
}

/* ---- create / free / spec ------------------------------------------------ */

pz_status pz_wrapper_create(pz_wrap_kind kind, const pz_wrap_opts *opts, pz_codec *inner,
                            pz_wrapper **out) {
    *out = NULL;
    const pz_wrap_impl *impl = pz_wrap_impl_by_kind((unsigned)kind);
    pz_status st = PZ_OK;
    if (!impl) st = pz_fail(PZ_ERR_ARG, "wrapper: unknown kind %d", (int)kind);
    else if (!inner) st = pz_fail(PZ_ERR_ARG, "%s: no inner codec", impl->name);
    else if (kind != PZ_WRAP_AQ && opts &&
             (opts->warmup_spec || opts->spill_dir || (opts->mem_limit && opts->mem_limit != PZ_AQ_DEFAULT_MEM)))
        st = pz_fail(PZ_ERR_ARG, "%s: warmup=, mem= and spill= apply to aq() only", impl->name);
    if (st) {
        pz_codec_free(inner);
        return st;
    }
    const char *name = impl->name;
    pz_wrapper *w = xcalloc(1, sizeof *w);
    w->kind = kind;
    w->name = name;
    w->impl = impl;
    w->inner = inner;
    const char *inner_spec = pz_codec_spec(inner);
    size_t cap = strlen(inner_spec) + 16;
    if (kind == PZ_WRAP_AQ) {
        const char *ws = opts && opts->warmup_spec ? opts->warmup_spec : "fp32";
        st = pz_codec_create(ws, &w->warm);
        if (st) st = pz_wrap_rewrap(st, PZ_ERR_ARG, "aq: warm-up codec");
        else if (pz_codec_wrap(w->warm))
            st = pz_fail(PZ_ERR_ARG, "aq: the warm-up codec %s is a wrapper", pz_codec_spec(w->warm));
        if (st) {
            pz_wrapper_free(w);
            return st;
        }
        w->mem_limit = opts && opts->mem_limit ? opts->mem_limit : PZ_AQ_DEFAULT_MEM;
        w->spill_dir = opts && opts->spill_dir ? xstrdup(opts->spill_dir) : NULL;
        /* warm-up spelled out only when its canonical spec is not fp32's */
        pz_codec *fp32 = NULL;
        int warm_default = 0;
        if (!pz_codec_create("fp32", &fp32))
            warm_default = !strcmp(pz_codec_spec(fp32), pz_codec_spec(w->warm));
        pz_codec_free(fp32);
        const char *wspec = warm_default ? NULL : pz_codec_spec(w->warm);
        cap += (wspec ? strlen(wspec) + 8 : 0) + 32 + (w->spill_dir ? strlen(w->spill_dir) + 8 : 0);
        w->spec = xmalloc(cap);
        size_t n = (size_t)snprintf(w->spec, cap, "aq(%s", inner_spec);
        if (wspec) n += (size_t)snprintf(w->spec + n, cap - n, ",warmup=%s", wspec);
        if (w->mem_limit != PZ_AQ_DEFAULT_MEM) n += (size_t)snprintf(w->spec + n, cap - n, ",mem=%zu", w->mem_limit);
        if (w->spill_dir) n += (size_t)snprintf(w->spec + n, cap - n, ",spill=%s", w->spill_dir);
        snprintf(w->spec + n, cap - n, ")");
    } else {
        w->spec = xmalloc(cap);
        snprintf(w->spec, cap, "%s(%s)", name, inner_spec);
    }
    *out = w;
    return PZ_OK;
}

void pz_wrapper_free(pz_wrapper *w) {
    if (!w) return;
    for (int r = 0; r < 2; r++) {
        free(w->side[r].v);
        if (w->kind == PZ_WRAP_AQ && w->side[r].have) aq_store_free(&w->side[r].store);
    }
    if (w->inner) pz_codec_free(w->inner);
    if (w->warm) pz_codec_free(w->warm);
    free(w->spill_dir);
    free(w->hd_signs);
    free(w->spec);
    free(w->f[0]);
    free(w->f[1]);
    free(w->ids);
    free(w->slots);
    free(w);
}

const char *pz_wrapper_spec(const pz_wrapper *w) { return w->spec; }

pz_codec *pz_wrapper_inner(pz_wrapper *w) { return w->inner; }
pz_codec *pz_wrapper_warm(pz_wrapper *w) { return w->warm; }

size_t pz_wrapper_max_payload(const pz_wrapper *w, const pz_shape *shape) {
    size_t inner = pz_codec_max_encoded_size(w->inner, shape);
    if (w->kind != PZ_WRAP_AQ) return inner;
    /* both parts at full size bound any split (sizes grow with the rows) */
    size_t B = shape->ndim >= 1 && shape->dims[0] > 0 ? (size_t)shape->dims[0] : 0;
    return (B + 7) / 8 + 16 + inner + pz_codec_max_encoded_size(w->warm, shape);
}

/* ---- ef / ef21 ------------------------------------------------------------- */

/* Fixes the shape on the first message, else checks it; allocates v (zeros). */
static pz_status vec_side(pz_wrapper *w, wrap_side *s, const pz_shape *shape, size_t numel, int commit) {
    if (s->have) {
        if (pz_shape_equal(&s->shape, shape)) return PZ_OK;
        char a[96], b[96];
        pz_shape_format(shape, a, sizeof a);
        pz_shape_format(&s->shape, b, sizeof b);
        return pz_fail(PZ_ERR_SHAPE, "%s: shape %s differs from the shape %s fixed by the first message",
                       w->name, a, b);
    }
    if (commit) {
        s->v = calloc(numel ? numel : 1, sizeof(float));
        if (!s->v) return pz_fail(PZ_ERR_NOMEM, "%s: cannot allocate %zu floats of state", w->name, numel);
        s->shape = *shape;
        s->have = 1;
    }
    return PZ_OK;
}

static pz_status vec_encode(pz_wrapper *w, const float *x, const pz_shape *shape, const pz_codec_ctx *ctx,
                            uint8_t *payload, size_t cap, size_t *len, uint8_t *flags) {
    *len = 0;
    *flags = 0;
    size_t n;
    pz_status st = pz_wrap_check_shape(w->name, shape, &n);
    wrap_side *s = &w->side[PZ_WRAP_SENDER];
    if (!st) st = vec_side(w, s, shape, n, 0);
    float *y = NULL, *c = NULL;
    if (!st) st = pz_wrap_scratch(w, 0, n, &y);
    if (!st) st = pz_wrap_scratch(w, 1, n, &c);
    if (st) return st;
    const float *v = s->v; /* NULL before the first message: zeros */
    if (!v) memcpy(y, x, n * sizeof(float));
    else if (w->kind == PZ_WRAP_EF)
        for (size_t i = 0; i < n; i++) y[i] = pz_ef_input(x[i], v[i]);
    else
        for (size_t i = 0; i < n; i++) y[i] = pz_ef21_input(x[i], v[i]);
    st = pz_codec_encode(w->inner, y, shape, ctx, payload, cap, len);
    if (st) return pz_wrap_rewrap(st, PZ_ERR_SHAPE, w->name);
    st = pz_wrap_decode_exact(w->inner, w->kind == PZ_WRAP_EF ? "ef: own message" : "ef21: own message", payload,
                      *len, ctx, c, shape);
    if (!st) st = vec_side(w, s, shape, n, 1); /* the first message fixes the shape now */
    if (st) {
        *len = 0;
        return st;
    }
    float *e = s->v;
    if (w->kind == PZ_WRAP_EF)
        for (size_t i = 0; i < n; i++) e[i] = pz_ef_residual(y[i], c[i]);
    else
        for (size_t i = 0; i < n; i++) e[i] = pz_ef21_update(e[i], c[i]);
    return PZ_OK;
}

static pz_status vec_decode(pz_wrapper *w, uint8_t flags, const uint8_t *payload, size_t len,
                            const pz_shape *shape, const pz_codec_ctx *ctx, float *out) {
    if (flags) return pz_fail(PZ_ERR_FORMAT, "%s: bad flags 0x%02x (expected 0)", w->name, flags);
    size_t n;
    pz_status st = pz_wrap_check_shape(w->name, shape, &n);
    if (st) return st;
    if (w->kind == PZ_WRAP_EF)
        return pz_wrap_decode_exact(w->inner, "ef: message", payload, len, ctx, out, shape);
    wrap_side *s = &w->side[PZ_WRAP_RECEIVER];
    float *c = NULL;
    st = vec_side(w, s, shape, n, 0);
    if (!st) st = pz_wrap_scratch(w, 0, n, &c);
    if (!st) st = pz_wrap_decode_exact(w->inner, "ef21: message", payload, len, ctx, c, shape);
    if (!st) st = vec_side(w, s, shape, n, 1); /* only now allocate and fix the shape */
    if (st) return st;
    float *g = s->v;
    for (size_t i = 0; i < n; i++) {
        g[i] = pz_ef21_update(g[i], c[i]);
        out[i] = g[i];
    }
    return PZ_OK;
}

/* ---- public entry points ----------------------------------------------------- */

pz_status pz_wrapper_encode(pz_wrapper *w, const float *x, const pz_shape *shape, const pz_codec_ctx *ctx,
                            uint8_t *payload, size_t cap, size_t *len, uint8_t *flags) {
    return w->impl->encode(w, x, shape, ctx, payload, cap, len, flags);
}

pz_status pz_wrapper_decode(pz_wrapper *w, uint8_t flags, const uint8_t *payload, size_t len,
                            const pz_shape *shape, const pz_codec_ctx *ctx, float *out) {
    return w->impl->decode(w, flags, payload, len, shape, ctx, out);
}

size_t pz_wrapper_state_bytes(const pz_wrapper *w, size_t *file_bytes) {
    size_t mem = (w->f_cap[0] + w->f_cap[1] + w->hd_signs_n) * sizeof(float) + w->ids_cap * 16, file = 0;
    for (int r = 0; r < 2; r++) {
        const wrap_side *s = &w->side[r];
        if (!s->have) continue;
        if (w->kind == PZ_WRAP_AQ) {
            size_t fb;
            mem += aq_store_bytes(&s->store, &fb);
            file += fb;
        } else {
            mem += pz_shape_numel(&s->shape) * sizeof(float);
        }
    }
    if (file_bytes) *file_bytes = file;
    return mem;
}

/* ef, ef21: the state vector and two scratch tensors; aq: its in-memory
 * rows (mem=, the rest spills to a file) and the same scratch */
size_t pz_wrapper_state_bound(const pz_wrapper *w, const pz_shape *shape) {
    size_t n = pz_shape_numel(shape) * sizeof(float);
    return 2 * n + (w->kind == PZ_WRAP_AQ ? w->mem_limit : n);
}

/* ---- table entries (compress/core/registry.c) ----------------------------------------
 * The codec framework parses "name(inner[,options])" and reaches a wrapper
 * only through these entries; each owns its options and its state. */

/* ef and ef21 take no options (their opt_keys are NULL), so opts is NULL */
static pz_status ef_create(void *opts, pz_codec *inner, pz_wrapper **out) {
    (void)opts;
    return pz_wrapper_create(PZ_WRAP_EF, NULL, inner, out);
}

static pz_status ef21_create(void *opts, pz_codec *inner, pz_wrapper **out) {
    (void)opts;
    return pz_wrapper_create(PZ_WRAP_EF21, NULL, inner, out);
}


const pz_wrap_impl pz_wrap_ef = {.name = "ef", .kind = PZ_WRAP_EF, .stateful_decoder = 0, .create = ef_create,
                                 .encode = vec_encode, .decode = vec_decode, PZ_WRAP_COMMON_OPS};
const pz_wrap_impl pz_wrap_ef21 = {.name = "ef21", .kind = PZ_WRAP_EF21, .stateful_decoder = 1,
                                   .create = ef21_create, .encode = vec_encode, .decode = vec_decode, PZ_WRAP_COMMON_OPS};

/* ---- introspection ------------------------------------------------------------ */

const float *pz_wrapper_vector(const pz_wrapper *w, pz_wrap_role role, size_t *n) {
    const wrap_side *s = &w->side[role == PZ_WRAP_RECEIVER];
    *n = 0;
    if (w->kind == PZ_WRAP_AQ || !s->have) return NULL;
    *n = pz_shape_numel(&s->shape);
    return s->v;
}

/* FNV-1a over bytes, then a splitmix64 finish */
static uint64_t digest_bytes(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t pz_wrapper_state_digest(const pz_wrapper *w, pz_wrap_role role) {
    const wrap_side *s = &w->side[role == PZ_WRAP_RECEIVER];
    uint64_t h = 0xcbf29ce484222325ULL;
    if (!s->have) return mix64(h);
    if (w->kind != PZ_WRAP_AQ) {
        h = digest_bytes(h, &s->shape.ndim, sizeof s->shape.ndim);
        h = digest_bytes(h, s->shape.dims, (size_t)s->shape.ndim * sizeof s->shape.dims[0]);
        return mix64(digest_bytes(h, s->v, pz_shape_numel(&s->shape) * sizeof(float)));
    }
    /* sum of per-id digests: independent of the order ids were inserted in */
    uint64_t sum = mix64(s->store.count);
    for (size_t i = 0; i < s->store.count; i++) {
        uint64_t id = aq_store_slot_id(&s->store, i);
        uint64_t hi = digest_bytes(h, &id, sizeof id);
        hi = digest_bytes(hi, aq_store_row(&s->store, i), s->store.row_bytes);
        sum += mix64(hi);
    }
    return sum;
}

/* ---- restoring state (checkpoints: compress/wrappers/codec_state.c) ------------------- */

const pz_shape *pz_wrapper_side_shape(const pz_wrapper *w, pz_wrap_role role) {
    const wrap_side *s = &w->side[role];
    return s->have ? &s->shape : NULL;
}

pz_status pz_wrapper_restore_vector(pz_wrapper *w, pz_wrap_role role, const pz_shape *shape, const float *data) {
    wrap_side *s = &w->side[role];
    size_t n;
    pz_status st = pz_wrap_check_shape(w->name, shape, &n);
    if (st) return st;
    if ((w->kind != PZ_WRAP_EF && w->kind != PZ_WRAP_EF21) || s->have)
        return pz_fail(PZ_ERR_ARG, "%s: cannot restore a vector into %s state", w->name,
                       s->have ? "existing" : w->kind == PZ_WRAP_AQ ? "aq's" : "a stateless wrapper's");
    if ((st = vec_side(w, s, shape, n, 1)) != PZ_OK) return st;
    memcpy(s->v, data, n * sizeof(float));
    return PZ_OK;
}

