/* creduce_state.c: the compressed reduction's error feedback as a blob
 * (pz_dp_creduce_save/load, creduce.h), for checkpoints. Little-endian:
 *   off  0 u32 magic "PZDE"      off  4 u8 version (2)
 *   off  5 u8  mode              off  6 u8 ef            off 7 u8 zero
 *   off  8 u16 group size D      off 10 u16 member index
 *   off 12 u16 hosts             off 14 u16 spec bytes S
 *   off 16 u64 n                 off 24 u64 worker-error floats (n or 0)
 *   off 32 u64 owner chunk start off 40 u64 owner-error floats
 *   off 48 u64 bucket floats     off 56 u64 held prefix  (the cut, creduce.h)
 *   off 64 the codec's canonical spec (S bytes), then the worker error,
 *   then the owner error (each bucket's part in bucket order; float32
 *   each), then u32 CRC-32C of all before. Version 1 (before buckets) had
 *   no cut fields and is read as one bucket.
 * A hierarchical member saves its leader reduction's state (none on the
 * other members). Load checks every field against the object before it
 * changes anything: a blob of another mode, codec, group, member or length
 * is refused with the difference named. */
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/crc32c.h"
#include "base/mem.h"
#include "runtime/dp/creduce_priv.h"

#define STATE_MAGIC 0x45445a50u /* "PZDE" */
#define STATE_HDR 64u
#define STATE_HDR_V1 48u

/* the object that holds the error feedback */
static const pz_dp_creduce *holder(const pz_dp_creduce *c) { return c->inner ? c->inner : c; }

static void put_floats(uint8_t *p, const float *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &v[i], 4);
        pz_put_u32(p + 4 * i, b);
    }
}

static void get_floats(float *v, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t b = pz_get_u32(p + 4 * i);
        memcpy(&v[i], &b, 4);
    }
}

pz_status pz_dp_creduce_save(const pz_dp_creduce *c, uint8_t **blob, size_t *len) {
    if (!c || !blob || !len) return pz_fail(PZ_ERR_ARG, "dp state save: NULL argument");
    const pz_dp_creduce *h = holder(c);
    size_t S = strlen(c->spec), nw = h->ew ? h->n : 0, ns = h->es ? h->es_len : 0;
    size_t total = STATE_HDR + S + 4 * (nw + ns) + 4;
    uint8_t *b = xcalloc(total, 1);
    pz_put_u32(b, STATE_MAGIC);
    b[4] = 2;
    b[5] = (uint8_t)c->o.mode;
    b[6] = (uint8_t)c->o.ef;
    pz_put_u16(b + 8, (uint16_t)c->g->n);
    pz_put_u16(b + 10, (uint16_t)c->g->me);
    pz_put_u16(b + 12, (uint16_t)c->o.hosts);
    pz_put_u16(b + 14, (uint16_t)S);
    pz_put_u64(b + 16, c->n);
    pz_put_u64(b + 24, nw);
    pz_put_u64(b + 32, h->es ? h->b[0].es_lo : 0);
    pz_put_u64(b + 40, ns);
    pz_put_u64(b + 48, c->o.bucket);
    pz_put_u64(b + 56, c->o.bucket ? c->o.hold : 0);
    memcpy(b + STATE_HDR, c->spec, S);
    put_floats(b + STATE_HDR + S, h->ew, nw);
    put_floats(b + STATE_HDR + S + 4 * nw, h->es, ns);
    pz_put_u32(b + total - 4, pz_crc32c(0, b, total - 4));
    *blob = b;
    *len = total;
    return PZ_OK;
}

static pz_status refuse(const char *field, unsigned long long got, unsigned long long want) {
    return pz_fail(PZ_ERR_FORMAT, "dp state: %s is %llu in the blob, %llu here", field, got, want);
}

pz_status pz_dp_creduce_load(pz_dp_creduce *c, const uint8_t *b, size_t len) {
    if (!c || (!b && len)) return pz_fail(PZ_ERR_ARG, "dp state load: NULL argument");
    if (len < STATE_HDR_V1 + 4) return pz_fail(PZ_ERR_FORMAT, "dp state: %zu bytes, shorter than its header", len);
    if (pz_get_u32(b) != STATE_MAGIC || (b[4] != 1 && b[4] != 2) || b[7] != 0)
        return pz_fail(PZ_ERR_FORMAT, "dp state: not a data-parallel error-feedback blob (magic or version)");
    if (pz_get_u32(b + len - 4) != pz_crc32c(0, b, len - 4))
        return pz_fail(PZ_ERR_FORMAT, "dp state: CRC mismatch (damaged blob)");
    pz_dp_creduce *h = c->inner ? c->inner : c;
    size_t S = strlen(c->spec), nw = h->ew ? h->n : 0, ns = h->es ? h->es_len : 0, H = b[4] == 1 ? STATE_HDR_V1 : STATE_HDR;
    if (len < H + 4) return pz_fail(PZ_ERR_FORMAT, "dp state: %zu bytes, shorter than its header", len);
    /* the cut: version 1 was one bucket */
    uint64_t bf = H == STATE_HDR ? pz_get_u64(b + 48) : 0, hold = H == STATE_HDR ? pz_get_u64(b + 56) : 0;
    if (bf != c->o.bucket || hold != (c->o.bucket ? c->o.hold : 0))
        return pz_fail(PZ_ERR_FORMAT, "dp state: written for buckets of %llu floats (held prefix %llu), this run cuts "
                       "%zu (%zu): --dp-bucket-mb must be the checkpoint's", (unsigned long long)bf,
                       (unsigned long long)hold, c->o.bucket, c->o.bucket ? c->o.hold : 0);
    if (b[5] != (uint8_t)c->o.mode) return refuse("mode", b[5], (unsigned)c->o.mode);
    if (b[6] != (uint8_t)c->o.ef) return refuse("error feedback", b[6], (unsigned)c->o.ef);
    if (pz_get_u16(b + 8) != c->g->n) return refuse("group size", pz_get_u16(b + 8), (unsigned)c->g->n);
    if (pz_get_u16(b + 10) != c->g->me) return refuse("member index", pz_get_u16(b + 10), (unsigned)c->g->me);
    if (pz_get_u16(b + 12) != c->o.hosts) return refuse("hosts", pz_get_u16(b + 12), (unsigned)c->o.hosts);
    if (pz_get_u64(b + 16) != c->n) return refuse("vector length", pz_get_u64(b + 16), c->n);
    if (pz_get_u16(b + 14) != S || H + S > len - 4 || memcmp(b + H, c->spec, S) != 0)
        return pz_fail(PZ_ERR_FORMAT, "dp state: written for another codec than %s", c->spec);
    if (pz_get_u64(b + 24) != nw) return refuse("worker-error length", pz_get_u64(b + 24), nw);
    if (pz_get_u64(b + 32) != (h->es ? h->b[0].es_lo : 0))
        return refuse("owner chunk start", pz_get_u64(b + 32), h->es ? h->b[0].es_lo : 0);
    if (pz_get_u64(b + 40) != ns) return refuse("owner-error length", pz_get_u64(b + 40), ns);
    if (len != H + S + 4 * (nw + ns) + 4)
        return pz_fail(PZ_ERR_FORMAT, "dp state: %zu bytes, expected %zu", len, H + S + 4 * (nw + ns) + 4);
    get_floats(h->ew, b + H + S, nw);
    get_floats(h->es, b + H + S + 4 * nw, ns);
    return PZ_OK;
}
