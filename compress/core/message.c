/* message.c: the codec message on the wire (message.h): header, CRC32C,
 * the +zstd stage, and the shapes a message may carry. Layout in
 * compress/README.md. */
#include "compress/core/message.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/crc32c.h"
#ifdef PZ_HAVE_ZSTD
#include <zstd.h>
#endif

#define MAGIC0 'P'
#define MAGIC1 'Z'
#define MAGIC2 'C'
#define MAGIC3 'M'
#define FORMAT_VERSION 1
#define HDR_FIXED 48          /* header bytes besides the dims */
#define PARAMS_BYTES 24
#define FLAG_ZSTD_ASKED 0x01
#define FLAG_ZSTD_USED 0x02
#define FLAG_FRAMED 0x04      /* no CRC of its own: the frame around it has the one (runtime/net/frame.h) */
#define ZSTD_LEVEL 1

size_t pz_msg_header_size(int ndim) { return HDR_FIXED + 8 * (size_t)ndim; }

/* ---------------------------------------------------------------- shapes */

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

/* ---------------------------------------------------------------- header */

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
    o[11] = p->grid;
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
    p->grid = o[11];
    p->group_size = pz_get_u32(o + 12);
    uint32_t u = pz_get_u32(o + 16);
    memcpy(&p->fraction, &u, 4);
    u = pz_get_u32(o + 20);
    memcpy(&p->budget, &u, 4);
    return o[11] == 0 || p->id == PZ_CODEC_Q;   /* q's grid; 0 for the others */
}

/* The chain on the wire: level l's low 2 bits in bits 2l..2l+1 of byte 8,
 * its high bit in bit l of byte 10 (message.h). */
static void chain_split(uint16_t chain, uint8_t *lo, uint8_t *hi) {
    *lo = *hi = 0;
    for (int l = 0; l < PZ_WRAP_MAX_DEPTH; l++) {
        unsigned k = (chain >> (PZ_MSG_CHAIN_BITS * l)) & PZ_MSG_CHAIN_MASK;
        *lo |= (uint8_t)((k & 3u) << (2 * l));
        *hi |= (uint8_t)(((k >> 2) & 1u) << l);
    }
}

static uint16_t chain_join(uint8_t lo, uint8_t hi) {
    uint16_t chain = 0;
    for (int l = 0; l < PZ_WRAP_MAX_DEPTH; l++) {
        unsigned k = ((lo >> (2 * l)) & 3u) | (((hi >> l) & 1u) << 2);
        chain |= (uint16_t)(k << (PZ_MSG_CHAIN_BITS * l));
    }
    return chain;
}

void pz_msg_write(uint8_t *out, uint8_t id, uint8_t zstd_flags, uint8_t wflags, uint16_t chain,
                  const pz_codec_params *p, const pz_shape *shape, size_t plen, int framed) {
    size_t H = pz_msg_header_size(shape->ndim);
    uint8_t *h = out;
    h[0] = MAGIC0;
    h[1] = MAGIC1;
    h[2] = MAGIC2;
    h[3] = MAGIC3;
    h[4] = FORMAT_VERSION;
    h[5] = id;
    h[6] = (uint8_t)(zstd_flags | (framed ? FLAG_FRAMED : 0));
    h[7] = wflags;
    chain_split(chain, &h[8], &h[10]);
    h[9] = (uint8_t)shape->ndim;
    h[11] = 0;
    params_write(p, h + 12);
    for (int i = 0; i < shape->ndim; i++) pz_put_u64(h + 36 + 8 * i, (uint64_t)shape->dims[i]);
    pz_put_u64(h + H - 12, (uint64_t)plen);
    /* a framed message's bytes are checked once, by its frame: no second pass here */
    pz_put_u32(h + H - 4, framed ? 0 : pz_crc32c(pz_crc32c(0, h, H - 4), out + H, plen));
}

pz_status pz_msg_read(const uint8_t *msg, size_t len, pz_msg_header *m, int framed) {
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
    size_t H = pz_msg_header_size(ndim);
    if (len < H) return pz_fail(PZ_ERR_FORMAT, "codec message: truncated header (%zu of %zu bytes)", len, H);
    uint64_t plen = pz_get_u64(msg + H - 12);
    if (plen != len - H)
        return pz_fail(PZ_ERR_FORMAT, "codec message: payload length %llu does not match the %zu bytes after the header",
                       (unsigned long long)plen, len - H);
    if (msg[6] & FLAG_FRAMED) {
        if (!framed)
            return pz_fail(PZ_ERR_FORMAT, "codec message without its own CRC: it was sent inside a checked frame "
                           "between ranks and is not a stored message");
        if (pz_get_u32(msg + H - 4) != 0)
            return pz_fail(PZ_ERR_FORMAT, "codec message: CRC field of a framed message not zero");
    } else {
        uint32_t crc = pz_crc32c(pz_crc32c(0, msg, H - 4), msg + H, (size_t)plen);
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION   /* the fuzzer target skips the CRC to reach the decoders */
        if (crc != pz_get_u32(msg + H - 4)) return pz_fail(PZ_ERR_FORMAT, "codec message: CRC32C mismatch (corrupted)");
#else
        (void)crc;
#endif
    }
    /* the CRC matched (or the frame's did); still check every field, a peer may be buggy or hostile */
    m->id = msg[5];
    m->flags = msg[6] & (uint8_t)~FLAG_FRAMED;
    m->wflags = msg[7];
    /* byte 10: the chain's high bits, one per level (bits 4-7 reserved) */
    if ((msg[10] >> PZ_WRAP_MAX_DEPTH) || msg[11])
        return pz_fail(PZ_ERR_FORMAT, "codec message: reserved header bits not zero");
    m->chain = chain_join(msg[8], msg[10]);
    if (m->flags & ~(FLAG_ZSTD_ASKED | FLAG_ZSTD_USED) || ((m->flags & FLAG_ZSTD_USED) && !(m->flags & FLAG_ZSTD_ASKED)))
        return pz_fail(PZ_ERR_FORMAT, "codec message: bad flags 0x%02x", m->flags);
    if (!params_read(&m->p, msg + 12)) return pz_fail(PZ_ERR_FORMAT, "codec message: reserved parameter byte (q's grid) not zero");
    m->impl = pz_codec_impl_by_id(m->p.id);
    if (!m->impl) return pz_fail(PZ_ERR_FORMAT, "codec message: unknown base codec id %u", m->p.id);
    if (m->id < PZ_MSG_WRAP_ID(0)) {
        if (m->id != m->p.id) return pz_fail(PZ_ERR_FORMAT, "codec message: codec id %u but parameters of id %u", m->id, m->p.id);
        if (m->chain || m->wflags) return pz_fail(PZ_ERR_FORMAT, "codec message: wrapper fields set on a base codec message");
    } else {
        int kind = m->id - PZ_MSG_WRAP_ID(0);
        if (!pz_wrap_impl_by_kind((unsigned)kind)) return pz_fail(PZ_ERR_FORMAT, "codec message: unknown codec id 0x%02x", m->id);
        if ((m->chain & PZ_MSG_CHAIN_MASK) != kind) return pz_fail(PZ_ERR_FORMAT, "codec message: wrapper chain does not start with the codec id");
        int ended = 0;
        for (int l = 0; l < PZ_WRAP_MAX_DEPTH; l++) {
            int k = (m->chain >> (PZ_MSG_CHAIN_BITS * l)) & PZ_MSG_CHAIN_MASK;
            if (!k) ended = 1;
            else if (ended || !pz_wrap_impl_by_kind((unsigned)k))
                return pz_fail(PZ_ERR_FORMAT, "codec message: malformed wrapper chain 0x%02x 0x%02x", msg[8], msg[10]);
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
    const pz_wrap_impl *outer = m->chain ? pz_wrap_impl_by_kind(m->chain & PZ_MSG_CHAIN_MASK) : NULL;
    char o[64];
    if (outer && outer->msg_opts && !outer->msg_opts(m->wflags, &m->shape, o, sizeof o))
        return pz_fail(PZ_ERR_FORMAT, "codec message: bad %s flags 0x%02x for this shape", outer->name, m->wflags);
    m->hsize = H;
    m->plen = (size_t)plen;
    m->payload = msg + H;
    return PZ_OK;
}

void pz_msg_spec(const pz_msg_header *m, char *buf, size_t cap) {
    char base[512], tmp[700];
    m->impl->format(&m->p, base, sizeof base);
    int levels = 0;
    size_t pos = 0;
    for (int l = 0; l < PZ_WRAP_MAX_DEPTH; l++) {
        int k = (m->chain >> (PZ_MSG_CHAIN_BITS * l)) & PZ_MSG_CHAIN_MASK;
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
    for (int l = levels - 1; l >= 0; l--) {
        /* options that the header's flags byte tells for the outermost level */
        const pz_wrap_impl *wi = pz_wrap_impl_by_kind(m->chain & PZ_MSG_CHAIN_MASK);
        if (l == 0 && wi && wi->msg_opts) {
            char o[64];
            if (!wi->msg_opts(m->wflags, &m->shape, o, sizeof o)) o[0] = 0;
            memcpy(tmp + pos, o, strlen(o));
            pos += strlen(o);
        }
        tmp[pos++] = ')';
    }
    if (m->flags & FLAG_ZSTD_ASKED) {
        memcpy(tmp + pos, "+zstd", 5);
        pos += 5;
    }
    tmp[pos] = 0;
    snprintf(buf, cap, "%s", tmp);
}

static pz_status peek(const uint8_t *msg, size_t len, char *spec, size_t spec_cap, pz_shape *shape, int framed) {
    pz_msg_header m;
    pz_status st = pz_msg_read(msg, len, &m, framed);
    if (st != PZ_OK) return st;
    if (spec && spec_cap) pz_msg_spec(&m, spec, spec_cap);
    if (shape) *shape = m.shape;
    return PZ_OK;
}

pz_status pz_codec_peek(const uint8_t *msg, size_t len, char *spec, size_t spec_cap, pz_shape *shape) {
    return peek(msg, len, spec, spec_cap, shape, 0);
}

pz_status pz_codec_peek_framed(const uint8_t *msg, size_t len, char *spec, size_t spec_cap, pz_shape *shape) {
    return peek(msg, len, spec, spec_cap, shape, 1);
}

/* ---------------------------------------------------------------- +zstd */

#ifdef PZ_HAVE_ZSTD
/* the staging buffer, shared by packing and unpacking: one message at a time */
static int stage_reserve(pz_zstd_stage *z, size_t n) {
    if (z->cap >= n) return 1;
    free(z->buf);
    z->buf = malloc(n ? n : 1);
    z->cap = z->buf ? n : 0;
    return z->buf != NULL;
}

pz_status pz_zstd_pack(pz_zstd_stage *z, uint8_t *payload, size_t *len, uint8_t *flags) {
    *flags = FLAG_ZSTD_ASKED;   /* asked, so that the decoder's spec says +zstd even when not used */
    size_t bound = ZSTD_compressBound(*len);
    if (!z->cctx) z->cctx = ZSTD_createCCtx();
    if (!z->cctx || !stage_reserve(z, bound)) return pz_fail(PZ_ERR_NOMEM, "encode: zstd: out of memory");
    size_t n = ZSTD_compressCCtx(z->cctx, z->buf, bound, payload, *len, ZSTD_LEVEL);
    if (!ZSTD_isError(n) && n < *len) {
        memcpy(payload, z->buf, n);
        *len = n;
        *flags |= FLAG_ZSTD_USED;
    }
    return PZ_OK;
}

pz_status pz_zstd_unpack(pz_zstd_stage *z, const pz_msg_header *m, size_t bound, const uint8_t **payload,
                         size_t *len) {
    const uint8_t *pl = m->payload;
    size_t plen = m->plen;
    *payload = pl;
    *len = plen;
    if (!(m->flags & FLAG_ZSTD_USED)) return PZ_OK;
    /* the frame's declared size first: never allocate what the shape rules out */
    unsigned long long raw = ZSTD_getFrameContentSize(pl, plen);
    if (raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN)
        return pz_fail(PZ_ERR_FORMAT, "codec message: bad zstd frame");
    if (raw > bound || raw <= plen)
        return pz_fail(PZ_ERR_FORMAT, "codec message: zstd frame of %llu bytes, expected at most %zu (and more than %zu)",
                       raw, bound, plen);
    if (!z->dctx) z->dctx = ZSTD_createDCtx();
    if (!z->dctx || !stage_reserve(z, (size_t)raw)) return pz_fail(PZ_ERR_NOMEM, "decode: zstd: out of memory");
    size_t got = ZSTD_decompressDCtx(z->dctx, z->buf, (size_t)raw, pl, plen);
    if (ZSTD_isError(got) || got != raw)
        return pz_fail(PZ_ERR_FORMAT, "codec message: zstd: %s", ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short frame");
    *payload = z->buf;
    *len = got;
    return PZ_OK;
}

void pz_zstd_stage_free(pz_zstd_stage *z) {
    ZSTD_freeCCtx(z->cctx); /* both take NULL */
    ZSTD_freeDCtx(z->dctx);
    free(z->buf);
    memset(z, 0, sizeof *z);
}
#else
/* Without libzstd no codec object has +zstd (pz_codec_create refuses it),
 * so nothing is packed; a compressed message cannot be read. */
pz_status pz_zstd_pack(pz_zstd_stage *z, uint8_t *payload, size_t *len, uint8_t *flags) {
    (void)z;
    (void)payload;
    (void)len;
    *flags = 0;
    return PZ_OK;
}

pz_status pz_zstd_unpack(pz_zstd_stage *z, const pz_msg_header *m, size_t bound, const uint8_t **payload,
                         size_t *len) {
    (void)z;
    (void)bound;
    *payload = m->payload;
    *len = m->plen;
    if (m->flags & FLAG_ZSTD_USED)
        return pz_fail(PZ_ERR_FORMAT, "codec message is zstd-compressed and this binary was built without libzstd");
    return PZ_OK;
}

void pz_zstd_stage_free(pz_zstd_stage *z) {
    free(z->buf);
    memset(z, 0, sizeof *z);
}
#endif
