/* aq.c: the aq() wrapper, a buffer per sample id on both sides (see
 * wrappers.h; the object and the shared helpers are in wrappers.c).
 *
 * aq(C[,warmup=W][,mem=BYTES][,spill=DIR]). The shape is (B, row dims...):
 * dims[0] = B samples, each a row of R = numel / B floats, and ctx->sample_ids
 * holds B ids (NULL ctx or ids is an error). Ids within one message must be
 * distinct (a repeated id is an error: its second delta would have to be
 * taken against a buffer that the first one has not updated yet). The row
 * dims are fixed by the first message of each side; B may change.
 *   Per sample: an id the sender holds no buffer for is "warm-up": it goes
 *   in the warm-up message (codec W, default fp32, so the first sight of an
 *   id is exact) and m(id) = decoded value; any other id goes in the delta
 *   message as C(x - m(id)) and m(id) += decoded delta. The receiver applies
 *   the same updates and outputs m(id) for every sample. The sender updates
 *   its copy from its own decoded messages, so both copies stay bitwise equal.
 *   flags: bit 0 = a warm-up message is present, bit 1 = a delta message is
 *   present; the other bits are zero and flags != 0.
 *   Payload:
 *     bitmap       ceil(B/8) bytes, only when flags == 3: bit i (byte i/8,
 *                  bit i%8, LSB first) = 1 when sample i is warm-up; padding
 *                  bits are zero. With flags 1 (2) every sample is warm-up
 *                  (delta) and there is no bitmap.
 *     u64 Lw, warm-up message (Lw bytes)   when bit 0: shape (nw, row dims)
 *     u64 Ld, delta message (Ld bytes)     when bit 1: shape (nd, row dims)
 *   with the rows in sample order and nothing after the last message.
 *   Size: ceil(B/8)·[flags==3] + 8·(number of parts) + the inner messages;
 *   pz_wrapper_max_payload bounds it by ceil(B/8) + 16 + both codecs' maximum
 *   for the whole (B, row dims) tensor (inner sizes grow with the rows).
 *   Random streams: the delta message uses ctx as given (bitwise C's message
 *   for x - m), the warm-up message uses ctx with seed ^ PZ_AQ_WARMUP_SALT, so
 *   the two draw from different streams. Inner messages get sample_ids NULL.
 *   Decoding checks flags, bitmap (popcount, padding), lengths, trailing
 *   bytes, the inner messages (CRC, shape == (count, row dims)) and that every
 *   delta id has a buffer on the receiver, all before any buffer changes; the
 *   store then reserves room for the new ids (the only step that can fail
 *   for lack of memory or disk), and only then are buffers written.
 *   A warm-up row for an id the receiver already holds overwrites m(id): a
 *   restarted sender re-synchronises the receiver that way.
 *   Buffers: compress/wrappers/aq_store.h (memory up to mem, then a file in the spill
 *   directory, mapped with mmap). The add m + d is one IEEE float add per element on both sides, so
 *   no contraction or vectorisation can make the two copies differ. */
#include "compress/wrappers/wrappers.h"
#include "compress/wrappers/aq_store.h"
#include "compress/wrappers/wrapper_priv.h"
#include "compress/core/codec_ext.h"
#include "compress/core/spec.h"
#include "compress/wrappers/wrap_elem.h"
#include "base/bytes.h"
#include "base/mem.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- aq -------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

pz_status pz_aq_check_batch(const pz_shape *s, size_t n, const pz_shape *rows, const pz_codec_ctx *ctx,
                            size_t *B, size_t *row) {
    if (s->dims[0] < 1 || n == 0)
        return pz_fail(PZ_ERR_SHAPE, "aq: empty tensor (the first dimension counts samples)");
    *B = (size_t)s->dims[0];
    *row = n / *B;
    if (!ctx || !ctx->sample_ids)
        return pz_fail(PZ_ERR_ARG, "aq: needs ctx->sample_ids (one dataset id per sample, dims[0] = %zu)", *B);
    if (rows) {
        pz_shape r = *s;
        r.dims[0] = 1;
        if (!pz_shape_equal(&r, rows)) {
            char a[96], b[96];
            pz_shape_format(s, a, sizeof a);
            pz_shape_format(rows, b, sizeof b);
            return pz_fail(PZ_ERR_SHAPE, "aq: shape %s does not have the row shape %s (dims[0] = 1) "
                           "of the buffers", a, b);
        }
    }
    return PZ_OK;
}

pz_status pz_aq_check_distinct(const pz_codec_ctx *ctx, size_t B, uint64_t *ids) {
    memcpy(ids, ctx->sample_ids, B * sizeof *ids);
    qsort(ids, B, sizeof *ids, cmp_u64);
    for (size_t i = 1; i < B; i++)
        if (ids[i] == ids[i - 1])
            return pz_fail(PZ_ERR_ARG, "aq: sample id %llu appears twice in one message",
                           (unsigned long long)ids[i]);
    return PZ_OK;
}

/* Checks shape, ids and row dims for one side; *B samples of *row floats.
 * Leaves the slot of every id (or -1) in w->slots. */
static pz_status aq_check(pz_wrapper *w, wrap_side *s, const pz_shape *shape, const pz_codec_ctx *ctx,
                          size_t *B, size_t *row) {
    size_t n;
    pz_status st = pz_wrap_check_shape("aq", shape, &n);
    if (st) return st;
    if ((st = pz_aq_check_batch(shape, n, s->have ? &s->shape : NULL, ctx, B, row))) return st;
    if ((st = pz_wrap_scratch_ids(w, *B))) return st;
    if ((st = pz_aq_check_distinct(ctx, *B, w->ids))) return st;
    for (size_t i = 0; i < *B; i++) w->slots[i] = s->have ? aq_store_find(&s->store, ctx->sample_ids[i]) : -1;
    return PZ_OK;
}

/* Reserves room for n_new ids, creating the store on the side's first use.
 * On failure the side is as before. */
static pz_status aq_reserve(pz_wrapper *w, wrap_side *s, const pz_shape *shape, size_t row, size_t n_new) {
    int fresh = !s->have;
    if (fresh) {
        aq_store_init(&s->store, row, w->mem_limit, w->spill_dir);
        s->shape = *shape;
        s->shape.dims[0] = 1;
        s->have = 1;
    }
    pz_status st = aq_store_reserve(&s->store, n_new);
    if (st && fresh) {
        aq_store_free(&s->store);
        s->have = 0;
    }
    return st;
}

void pz_aq_parts(const pz_codec_ctx *ctx, const pz_shape *shape, size_t nw, size_t nd, pz_codec_ctx *cw,
                 pz_codec_ctx *cd, pz_shape *sw, pz_shape *sd) {
    *cw = *ctx;
    cw->seed ^= PZ_AQ_WARMUP_SALT;
    cw->sample_ids = NULL;
    *cd = *ctx;
    cd->sample_ids = NULL;
    *sw = *shape;
    *sd = *shape;
    sw->dims[0] = (int64_t)nw;
    sd->dims[0] = (int64_t)nd;
}

/* Decodes the warm-up part into W and the delta part into D (either may be
 * absent: 0 samples); own: the sender checking its own message. */
static pz_status aq_decode_parts(pz_wrapper *w, int own, const uint8_t *payload, const size_t at[2],
                                 const size_t ln[2], const pz_codec_ctx *cw, float *W, const pz_shape *sw,
                                 const pz_codec_ctx *cd, float *D, const pz_shape *sd) {
    pz_status st = PZ_OK;
    if (sw->dims[0] && (st = pz_wrap_decode_exact(w->warm, own ? "aq: own warm-up message" : "aq: warm-up message",
                                          payload + at[0], ln[0], cw, W, sw)))
        return st;
    if (sd->dims[0])
        st = pz_wrap_decode_exact(w->inner, own ? "aq: own delta message" : "aq: delta message", payload + at[1], ln[1], cd,
                          D, sd);
    return st;
}

/* Applies decoded rows: W (warm-up rows in sample order), D (delta rows).
 * warm(i) tells the kind of sample i; out (may be NULL) gets m(id). */
static void aq_apply(pz_wrapper *w, wrap_side *s, const uint64_t *ids, size_t B, size_t row,
                     const uint8_t *bitmap, unsigned flags, const float *W, const float *D, float *out) {
    size_t j = 0, k = 0;
    for (size_t i = 0; i < B; i++) {
        int warm = pz_aq_is_warmup(flags, bitmap, i);
        int64_t slot = w->slots[i];
        if (warm && slot < 0) slot = (int64_t)aq_store_insert(&s->store, ids[i]);
        float *m = aq_store_row(&s->store, (size_t)slot);
        float *o = out ? out + i * row : NULL;
        if (warm) {
            memcpy(m, W + j * row, row * sizeof(float));
            if (o) memcpy(o, W + j * row, row * sizeof(float));
            j++;
        } else {
            const float *d = D + k * row;
            if (o)
                for (size_t e = 0; e < row; e++) o[e] = m[e] = pz_aq_update(m[e], d[e]);
            else
                for (size_t e = 0; e < row; e++) m[e] = pz_aq_update(m[e], d[e]);
            k++;
        }
    }
}

static pz_status aq_encode(pz_wrapper *w, const float *x, const pz_shape *shape, const pz_codec_ctx *ctx,
                           uint8_t *payload, size_t cap, size_t *len, uint8_t *flags) {
    *len = 0;
    *flags = 0;
    wrap_side *s = &w->side[PZ_WRAP_SENDER];
    size_t B = 0, row = 0;
    pz_status st = aq_check(w, s, shape, ctx, &B, &row);
    if (st) return st;
    size_t nw = 0;
    for (size_t i = 0; i < B; i++) nw += w->slots[i] < 0;
    size_t nd = B - nw;
    float *W = NULL, *D = NULL;
    if ((st = pz_wrap_scratch(w, 0, nw * row, &W)) || (st = pz_wrap_scratch(w, 1, nd * row, &D))) return st;
    for (size_t i = 0, j = 0, k = 0; i < B; i++) {
        const float *xi = x + i * row;
        if (w->slots[i] < 0) {
            memcpy(W + j++ * row, xi, row * sizeof(float));
        } else {
            const float *m = aq_store_row(&s->store, (size_t)w->slots[i]);
            float *d = D + k++ * row;
            for (size_t e = 0; e < row; e++) d[e] = pz_aq_delta(xi[e], m[e]);
        }
    }
    unsigned fl = (nw ? PZ_AQ_HAS_WARMUP : 0) | (nd ? PZ_AQ_HAS_DELTA : 0);
    size_t pos = 0;
    uint8_t *bitmap = NULL;
    if (fl == PZ_AQ_MIXED) {
        size_t nb = (B + 7) / 8;
        if (cap < nb) return pz_fail(PZ_ERR_SHAPE, "aq: output buffer of %zu bytes is too small", cap);
        bitmap = payload;
        memset(bitmap, 0, nb);
        for (size_t i = 0; i < B; i++)
            if (w->slots[i] < 0) pz_aq_mark_warmup(bitmap, i);
        pos = nb;
    }
    pz_codec_ctx cw, cd;
    pz_shape sw, sd;
    pz_aq_parts(ctx, shape, nw, nd, &cw, &cd, &sw, &sd);
    size_t at[2] = {0, 0}, ln[2] = {0, 0};
    for (int part = 0; part < 2; part++) {
        if (!(fl & (1 << part))) continue;
        if (cap - pos < 8) return pz_fail(PZ_ERR_SHAPE, "aq: output buffer of %zu bytes is too small", cap);
        at[part] = pos + 8;
        st = part == 0 ? pz_codec_encode(w->warm, W, &sw, &cw, payload + at[part], cap - at[part], &ln[part])
                       : pz_codec_encode(w->inner, D, &sd, &cd, payload + at[part], cap - at[part], &ln[part]);
        if (st) return pz_wrap_rewrap(st, PZ_ERR_SHAPE, part == 0 ? "aq: warm-up message" : "aq: delta message");
        pz_put_u64(payload + pos, ln[part]);
        pos = at[part] + ln[part];
    }
    /* what the receiver will decode, decoded in place of the inputs */
    if ((st = aq_decode_parts(w, 1, payload, at, ln, &cw, W, &sw, &cd, D, &sd))) return st;
    if ((st = aq_reserve(w, s, shape, row, nw))) return st;
    aq_apply(w, s, ctx->sample_ids, B, row, bitmap, fl, W, D, NULL);
    *len = pos;
    *flags = (uint8_t)fl;
    return PZ_OK;
}

static pz_status aq_decode(pz_wrapper *w, uint8_t flags, const uint8_t *payload, size_t len,
                           const pz_shape *shape, const pz_codec_ctx *ctx, float *out) {
    wrap_side *s = &w->side[PZ_WRAP_RECEIVER];
    size_t B = 0, row = 0;
    pz_status st = aq_check(w, s, shape, ctx, &B, &row);
    if (st) return st;
    if (flags == 0 || flags > PZ_AQ_MIXED) return pz_fail(PZ_ERR_FORMAT, "aq: bad flags 0x%02x", flags);
    /* framing */
    size_t pos = 0, nw = flags == PZ_AQ_HAS_WARMUP ? B : 0;
    const uint8_t *bitmap = NULL;
    if (flags == PZ_AQ_MIXED) {
        size_t nb = (B + 7) / 8;
        if (len < nb) return pz_fail(PZ_ERR_FORMAT, "aq: truncated payload (%zu bytes, bitmap needs %zu)", len, nb);
        bitmap = payload;
        for (size_t i = 0; i < B; i++) nw += (bitmap[i / 8] >> (i % 8)) & 1;
        if (B % 8 && bitmap[nb - 1] >> (B % 8))
            return pz_fail(PZ_ERR_FORMAT, "aq: bitmap padding bits are set");
        if (nw == 0 || nw == B)
            return pz_fail(PZ_ERR_FORMAT, "aq: bitmap marks %zu of %zu samples warm-up with flags 3", nw, B);
        pos = nb;
    }
    size_t nd = B - nw;
    size_t at[2] = {0, 0}, ln[2] = {0, 0};
    for (int part = 0; part < 2; part++) {
        if (!(flags & (1 << part))) continue;
        if (len - pos < 8) return pz_fail(PZ_ERR_FORMAT, "aq: truncated payload (%zu bytes)", len);
        uint64_t l = pz_get_u64(payload + pos);
        if (l > len - pos - 8)
            return pz_fail(PZ_ERR_FORMAT, "aq: %s message of %llu bytes overruns the payload (%zu bytes)",
                           part ? "delta" : "warm-up", (unsigned long long)l, len);
        at[part] = pos + 8;
        ln[part] = (size_t)l;
        pos = at[part] + ln[part];
    }
    if (pos != len) return pz_fail(PZ_ERR_FORMAT, "aq: %zu trailing bytes after the last message", len - pos);
    /* every delta needs a buffer; count the ids that are new here */
    size_t n_new = 0;
    for (size_t i = 0; i < B; i++) {
        int warm = pz_aq_is_warmup(flags, bitmap, i);
        if (warm) n_new += w->slots[i] < 0;
        else if (w->slots[i] < 0)
            return pz_fail(PZ_ERR_FORMAT, "aq: sample %zu (id %llu) is sent as a delta but the receiver "
                           "holds no buffer for it (sender and receiver out of sync)", i,
                           (unsigned long long)ctx->sample_ids[i]);
    }
    float *W = NULL, *D = NULL;
    if ((st = pz_wrap_scratch(w, 0, nw * row, &W)) || (st = pz_wrap_scratch(w, 1, nd * row, &D))) return st;
    pz_codec_ctx cw, cd;
    pz_shape sw, sd;
    pz_aq_parts(ctx, shape, nw, nd, &cw, &cd, &sw, &sd);
    if ((st = aq_decode_parts(w, 0, payload, at, ln, &cw, W, &sw, &cd, D, &sd))) return st;
    /* validated: make room, then change the buffers */
    if ((st = aq_reserve(w, s, shape, row, n_new))) return st;
    aq_apply(w, s, ctx->sample_ids, B, row, bitmap, flags, W, D, out);
    return PZ_OK;
}

/* aq's options: warmup=SPEC (up to the next ",mem=" / ",spill="),
 * mem=N[K|M|G], spill=DIR. */
static const char *const aq_keys_[] = {"warmup=", "mem=", "spill=", NULL};

typedef struct {
    pz_wrap_opts o;   /* points at the strings below */
    char *warmup, *spill;
} aq_opts;

static void aq_opts_free(void *opts) {
    aq_opts *a = opts;
    if (!a) return;
    free(a->warmup);
    free(a->spill);
    free(a);
}

static char *substr(const char *s, size_t b, size_t e) {
    char *r = xmalloc(e - b + 1);
    memcpy(r, s + b, e - b);
    r[e - b] = 0;
    return r;
}

static pz_status parse_size(const char *spec, size_t off, const char *v, size_t n, size_t *out) {
    uint64_t mult = 1;
    if (n > 0) {
        char u = (char)toupper((unsigned char)v[n - 1]);
        if (u == 'K') mult = 1ull << 10;
        else if (u == 'M') mult = 1ull << 20;
        else if (u == 'G') mult = 1ull << 30;
        if (mult != 1) n--;
    }
    uint64_t x;
    pz_status st = pz_spec_uint(spec, off, v, n, 0, (1ull << 50) / mult, &x, "mem");
    if (st == PZ_OK) *out = (size_t)(x * mult);
    return st;
}

static pz_status aq_parse_opts(const char *spec, size_t b, size_t e, void **out) {
    aq_opts *a = xcalloc(1, sizeof *a);
    a->o.mem_limit = PZ_AQ_DEFAULT_MEM;
    pz_status st = PZ_OK;
    for (size_t i = b; st == PZ_OK && i < e;) {
        size_t kb = i + 1;                                    /* after the ',' */
        size_t ve = pz_spec_find_opt(spec, kb, e, aq_keys_); /* the value ends at the next option */
        if (pz_spec_starts_with(spec, kb, ve, "warmup=")) {
            size_t vb = kb + 7;
            if (vb >= ve) {
                st = pz_spec_fail(spec, vb, "warmup needs a codec spec");
                break;
            }
            /* parse it here, so that errors point into the whole spec; at
             * the deepest level, so that a wrapper is refused */
            pz_codec *tmp = NULL;
            st = pz_spec_parse_codec(spec, vb, ve, PZ_WRAP_MAX_DEPTH, PZ_USE_ACTIVATION, &tmp);
            if (st != PZ_OK) break;
            pz_codec_free(tmp);
            free(a->warmup);
            a->warmup = substr(spec, vb, ve);
        } else if (pz_spec_starts_with(spec, kb, ve, "mem=")) {
            st = parse_size(spec, kb + 4, spec + kb + 4, ve - kb - 4, &a->o.mem_limit);
            /* 0 would silently mean the default (pz_wrap_opts); say so instead */
            if (st == PZ_OK && a->o.mem_limit == 0)
                st = pz_spec_fail(spec, kb + 4, "mem=0 would mean the default (1G) without saying so; to keep every "
                                  "buffer in the spill file give mem=1");
        } else if (pz_spec_starts_with(spec, kb, ve, "spill=")) {
            size_t vb = kb + 6;
            if (vb >= ve) {
                st = pz_spec_fail(spec, vb, "spill needs a directory");
                break;
            }
            free(a->spill);
            a->spill = substr(spec, vb, ve);
        }
        i = ve;
    }
    if (st != PZ_OK) {
        aq_opts_free(a);
        return st;
    }
    a->o.warmup_spec = a->warmup;
    a->o.spill_dir = a->spill;
    *out = a;
    return PZ_OK;
}

static pz_status aq_create(void *opts, pz_codec *inner, pz_wrapper **out) {
    aq_opts *a = opts;
    pz_status st = pz_wrapper_create(PZ_WRAP_AQ, a ? &a->o : NULL, inner, out);
    aq_opts_free(a);
    return st;
}

/* ---- introspection and restoring (checkpoints: compress/wrappers/codec_state.c) ---- */

size_t pz_wrapper_aq_count(const pz_wrapper *w, pz_wrap_role role) {
    const wrap_side *s = &w->side[role == PZ_WRAP_RECEIVER];
    return w->kind == PZ_WRAP_AQ && s->have ? s->store.count : 0;
}

const float *pz_wrapper_aq_slot(const pz_wrapper *w, pz_wrap_role role, size_t i, uint64_t *id,
                                size_t *row_len) {
    const wrap_side *s = &w->side[role == PZ_WRAP_RECEIVER];
    if (i >= pz_wrapper_aq_count(w, role)) return NULL;
    if (id) *id = aq_store_slot_id(&s->store, i);
    if (row_len) *row_len = s->store.row_len;
    return aq_store_row(&s->store, i);
}

const float *pz_wrapper_aq_find(const pz_wrapper *w, pz_wrap_role role, uint64_t id) {
    const wrap_side *s = &w->side[role == PZ_WRAP_RECEIVER];
    if (w->kind != PZ_WRAP_AQ || !s->have) return NULL;
    int64_t slot = aq_store_find(&s->store, id);
    return slot < 0 ? NULL : aq_store_row(&s->store, (size_t)slot);
}

pz_status pz_wrapper_restore_aq(pz_wrapper *w, pz_wrap_role role, const pz_shape *row_shape, uint64_t id,
                                const float *row) {
    wrap_side *s = &w->side[role];
    size_t n;
    pz_status st = pz_wrap_check_shape("aq", row_shape, &n);
    if (st) return st;
    if (w->kind != PZ_WRAP_AQ || row_shape->dims[0] != 1)
        return pz_fail(PZ_ERR_ARG, "%s: an aq buffer needs aq and a row shape with dims[0] = 1", w->name);
    if (s->have && !pz_shape_equal(&s->shape, row_shape))
        return pz_fail(PZ_ERR_SHAPE, "aq: restored rows of two shapes");
    if (s->have && aq_store_find(&s->store, id) >= 0)
        return pz_fail(PZ_ERR_ARG, "aq: sample id %llu restored twice", (unsigned long long)id);
    if ((st = aq_reserve(w, s, row_shape, n, 1)) != PZ_OK) return st;
    size_t slot = aq_store_insert(&s->store, id);
    memcpy(aq_store_row(&s->store, slot), row, n * sizeof(float));
    return PZ_OK;
}

const pz_wrap_impl pz_wrap_aq = {.name = "aq", .kind = PZ_WRAP_AQ, .stateful_decoder = 1, .opt_keys = aq_keys_,
                                 .parse_opts = aq_parse_opts, .free_opts = aq_opts_free, .create = aq_create, .encode = aq_encode,
                                 .decode = aq_decode, PZ_WRAP_COMMON_OPS};
