/* codec_state.c: a codec's training state as one blob, for checkpoints.
 *
 * Only wrappers hold state (ef: the sender's residual; ef21: g on both
 * sides; aq: a buffer per sample id on both sides, spilled ones included),
 * and a spec may nest them (aq(ef(q4))), so the blob walks the chain from
 * the outermost codec inwards. Layout, little-endian:
 *   "PZCS"  u32 version (1)  u32 levels
 *   per level: u8 wrapper kind, then for the sender and the receiver side:
 *     u8 have; if have: u8 ndim, ndim x u64 dims (aq: the row's, dims[0] = 1),
 *     ef/ef21: numel x f32;  aq: u64 count, count x (u64 id, numel x f32)
 *   u32 CRC-32C of everything before it
 * Loading checks all of it (magic, version, CRC, the codec's own chain of
 * wrappers, shapes, lengths) before it changes anything, and only into a
 * codec whose sides are all empty (a fresh one). */
#include "compress/core/codec.h"
#include "compress/core/codec_ext.h"
#include "compress/wrappers/wrappers.h"
#include "base/bytes.h"
#include "base/crc32c.h"
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

#define STATE_MAGIC "PZCS"
#define STATE_VERSION 1u

typedef struct {
    uint8_t *p;
    size_t len, cap;
} buf;

static uint8_t *grow(buf *b, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *q = xmalloc(cap);
        if (b->len) memcpy(q, b->p, b->len);
        free(b->p);
        b->p = q;
        b->cap = cap;
    }
    uint8_t *at = b->p + b->len;
    b->len += n;
    return at;
}

static void put8(buf *b, uint8_t v) { *grow(b, 1) = v; }
static void put32(buf *b, uint32_t v) { pz_put_u32(grow(b, 4), v); }
static void put64(buf *b, uint64_t v) { pz_put_u64(grow(b, 8), v); }
static void put_floats(buf *b, const float *x, size_t n) {
    uint8_t *at = grow(b, n * 4);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        pz_put_u32(at + 4 * i, u);
    }
}

static void put_shape(buf *b, const pz_shape *s) {
    put8(b, (uint8_t)s->ndim);
    for (int d = 0; d < s->ndim; d++) put64(b, (uint64_t)s->dims[d]);
}

pz_status pz_codec_state_save(pz_codec *c, uint8_t **blob, size_t *len) {
    *blob = NULL;
    *len = 0;
    buf b = {0};
    memcpy(grow(&b, 4), STATE_MAGIC, 4);
    put32(&b, STATE_VERSION);
    size_t levels_at = b.len;
    put32(&b, 0);
    uint32_t levels = 0;
    for (pz_codec *k = c; k && pz_codec_wrapper(k); k = pz_codec_inner(k), levels++) {
        const pz_wrapper *w = pz_codec_wrapper(k);
        const pz_wrap_impl *impl = pz_codec_wrap(k);
        put8(&b, (uint8_t)impl->kind);
        for (int role = 0; role < 2; role++) {
            const pz_shape *s = pz_wrapper_side_shape(w, (pz_wrap_role)role);
            put8(&b, s != NULL);
            if (!s) continue;
            put_shape(&b, s);
            if (impl->kind == PZ_WRAP_AQ) {
                size_t count = pz_wrapper_aq_count(w, (pz_wrap_role)role);
                put64(&b, count);
                for (size_t i = 0; i < count; i++) {
                    uint64_t id;
                    size_t row;
                    const float *r = pz_wrapper_aq_slot(w, (pz_wrap_role)role, i, &id, &row);
                    put64(&b, id);
                    put_floats(&b, r, row);
                }
            } else {
                size_t n;
                const float *v = pz_wrapper_vector(w, (pz_wrap_role)role, &n);
                put_floats(&b, v, n);
            }
        }
    }
    pz_put_u32(b.p + levels_at, levels);
    put32(&b, pz_crc32c(0, b.p, b.len));
    *blob = b.p;
    *len = b.len;
    return PZ_OK;
}

/* A bounded reader over the blob; any overrun is a format error. */
typedef struct {
    const uint8_t *p;
    size_t len, at;
    int bad;
} rd;

static const uint8_t *take(rd *r, size_t n) {
    if (r->bad || n > r->len - r->at) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *at = r->p + r->at;
    r->at += n;
    return at;
}
static uint8_t get8(rd *r) { const uint8_t *q = take(r, 1); return q ? q[0] : 0; }
static uint32_t get32(rd *r) { const uint8_t *q = take(r, 4); return q ? pz_get_u32(q) : 0; }
static uint64_t get64(rd *r) { const uint8_t *q = take(r, 8); return q ? pz_get_u64(q) : 0; }

/* Reads n floats (into out when not NULL: the second, applying pass). */
static void get_floats(rd *r, float *out, size_t n) {
    if (n > (r->len - r->at) / 4) {
        r->bad = 1;
        return;
    }
    const uint8_t *q = take(r, n * 4);
    for (size_t i = 0; q && out && i < n; i++) {
        uint32_t u = pz_get_u32(q + 4 * i);
        memcpy(&out[i], &u, 4);
    }
}

/* One pass over the blob: apply = 0 checks everything, apply = 1 restores. */
static pz_status walk(pz_codec *c, const uint8_t *blob, size_t len, int apply) {
    rd r = {blob, len - 4, 0, 0};
    const uint8_t *magic = take(&r, 4);
    if (!magic || memcmp(magic, STATE_MAGIC, 4) != 0) return pz_fail(PZ_ERR_FORMAT, "codec state: not a state blob");
    uint32_t ver = get32(&r), levels = get32(&r);
    if (ver != STATE_VERSION) return pz_fail(PZ_ERR_FORMAT, "codec state: version %u, expected %u", ver, STATE_VERSION);
    pz_codec *k = c;
    float *row = NULL;
    pz_status st = PZ_OK;
    for (uint32_t lv = 0; lv < levels && st == PZ_OK; lv++, k = pz_codec_inner(k)) {
        pz_wrapper *w = k ? pz_codec_wrapper(k) : NULL;
        uint8_t kind = get8(&r);
        if (!w || (uint8_t)pz_codec_wrap(k)->kind != kind) {
            st = pz_fail(PZ_ERR_FORMAT, "codec state: wrapper %u of the blob (kind %u) is not this codec's (%s)", lv,
                         kind, k ? pz_codec_spec(k) : "none");
            break;
        }
        for (int role = 0; role < 2 && st == PZ_OK && !r.bad; role++) {
            uint8_t have = get8(&r);
            if (have > 1) r.bad = 1;
            if (!have || r.bad) continue;
            if (!apply && pz_wrapper_side_shape(w, (pz_wrap_role)role)) {
                st = pz_fail(PZ_ERR_ARG, "codec state: %s already holds state", pz_codec_spec(k));
                break;
            }
            pz_shape s = {0, {0}};
            s.ndim = get8(&r);
            if (s.ndim < 1 || s.ndim > PZ_MAX_DIMS) {
                r.bad = 1;
                break;
            }
            size_t n = 1;
            for (int d = 0; d < s.ndim; d++) {
                uint64_t v = get64(&r);
                if (v == 0 || v > (1ull << 40) || n > ((size_t)1 << 40) / v) r.bad = 1;
                s.dims[d] = (int64_t)v;
                n *= (size_t)v;
            }
            if (r.bad || n > (r.len - r.at) / 4 + 1) {
                r.bad = 1;
                break;
            }
            free(row);
            row = apply ? xmalloc(n * sizeof(float)) : NULL;
            if (kind == PZ_WRAP_AQ) {
                uint64_t count = get64(&r);
                if (s.dims[0] != 1 || count > (r.len - r.at) / (8 + 4 * n)) {
                    r.bad = 1;
                    break;
                }
                for (uint64_t i = 0; i < count && st == PZ_OK && !r.bad; i++) {
                    uint64_t id = get64(&r);
                    get_floats(&r, row, n);
                    if (apply && !r.bad) st = pz_wrapper_restore_aq(w, (pz_wrap_role)role, &s, id, row);
                }
            } else {
                get_floats(&r, row, n);
                if (apply && !r.bad) st = pz_wrapper_restore_vector(w, (pz_wrap_role)role, &s, row);
            }
        }
    }
    free(row);
    if (st == PZ_OK && (r.bad || r.at != r.len))
        st = pz_fail(PZ_ERR_FORMAT, "codec state: truncated, inconsistent or trailing bytes (at byte %zu of %zu)",
                     r.at, r.len);
    if (st == PZ_OK && k && pz_codec_wrapper(k))
        st = pz_fail(PZ_ERR_FORMAT, "codec state: the blob has %u wrapper level%s, %s has more", levels,
                     levels == 1 ? "" : "s", pz_codec_spec(c));
    return st;
}

pz_status pz_codec_state_load(pz_codec *c, const uint8_t *blob, size_t len) {
    if (!blob || len < 16) return pz_fail(PZ_ERR_FORMAT, "codec state: %zu bytes is too short", len);
    uint32_t crc = pz_get_u32(blob + len - 4);
    if (crc != pz_crc32c(0, blob, len - 4)) return pz_fail(PZ_ERR_FORMAT, "codec state: CRC mismatch (damaged)");
    pz_status st = walk(c, blob, len, 0);
    return st == PZ_OK ? walk(c, blob, len, 1) : st;
}
