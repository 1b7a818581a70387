/* dpmsg.c: see dpmsg.h. */
#include "runtime/dp/dpmsg.h"

#include <stdio.h>
#include <string.h>

#include "base/bytes.h"

void pz_dpmsg_put(uint8_t hdr[PZ_DPMSG_HDR], const pz_dpmsg *h) {
    memset(hdr, 0, PZ_DPMSG_HDR);
    pz_put_u32(hdr, PZ_DPMSG_MAGIC);
    hdr[4] = PZ_DPMSG_VERSION;
    hdr[5] = h->phase;
    pz_put_u16(hdr + 6, h->group);
    pz_put_u16(hdr + 8, h->src);
    pz_put_u16(hdr + 10, h->chunk);
    pz_put_u32(hdr + 12, h->seq);
    pz_put_u64(hdr + 16, h->offset);
    pz_put_u64(hdr + 24, h->count);
    pz_put_u64(hdr + 32, h->msg_len);
}

static pz_dpmsg_result fail(pz_dpmsg_result r, char *why, size_t cap, const char *field, unsigned long long got,
                            unsigned long long want) {
    if (why && cap)
        snprintf(why, cap, "%s: %s %llu, expected %llu", pz_dpmsg_result_name(r), field, got, want);
    return r;
}

pz_dpmsg_result pz_dpmsg_check(const uint8_t *buf, size_t len, const pz_dpmsg *want, char *why, size_t cap) {
    if (why && cap) why[0] = 0;
    if (!buf || len < PZ_DPMSG_HDR) return fail(PZ_DPMSG_SHORT, why, cap, "bytes", len, PZ_DPMSG_HDR);
    if (pz_get_u32(buf) != PZ_DPMSG_MAGIC) return fail(PZ_DPMSG_MAGIC_BAD, why, cap, "magic", pz_get_u32(buf), PZ_DPMSG_MAGIC);
    if (buf[4] != PZ_DPMSG_VERSION) return fail(PZ_DPMSG_MAGIC_BAD, why, cap, "version", buf[4], PZ_DPMSG_VERSION);
    uint64_t ml = pz_get_u64(buf + 32);
    if (ml != len - PZ_DPMSG_HDR) return fail(PZ_DPMSG_LENGTH, why, cap, "codec message bytes", ml, len - PZ_DPMSG_HDR);
    if (buf[5] != want->phase) return fail(PZ_DPMSG_PHASE, why, cap, "phase", buf[5], want->phase);
    if (pz_get_u16(buf + 6) != want->group)
        return fail(PZ_DPMSG_GROUP, why, cap, "group size", pz_get_u16(buf + 6), want->group);
    if (pz_get_u16(buf + 8) != want->src) return fail(PZ_DPMSG_SRC, why, cap, "sender", pz_get_u16(buf + 8), want->src);
    if (pz_get_u16(buf + 10) != want->chunk)
        return fail(PZ_DPMSG_CHUNK, why, cap, "chunk", pz_get_u16(buf + 10), want->chunk);
    if (pz_get_u32(buf + 12) != want->seq) return fail(PZ_DPMSG_SEQ, why, cap, "collective", pz_get_u32(buf + 12), want->seq);
    if (pz_get_u64(buf + 16) != want->offset)
        return fail(PZ_DPMSG_RANGE, why, cap, "first element", pz_get_u64(buf + 16), want->offset);
    if (pz_get_u64(buf + 24) != want->count)
        return fail(PZ_DPMSG_RANGE, why, cap, "elements", pz_get_u64(buf + 24), want->count);
    return PZ_DPMSG_OK;
}

const char *pz_dpmsg_result_name(pz_dpmsg_result r) {
    switch (r) {
    case PZ_DPMSG_OK: return "ok";
    case PZ_DPMSG_SHORT: return "shorter than a data-parallel header";
    case PZ_DPMSG_MAGIC_BAD: return "not a data-parallel message";
    case PZ_DPMSG_LENGTH: return "length mismatch";
    case PZ_DPMSG_PHASE: return "another phase";
    case PZ_DPMSG_GROUP: return "another group size";
    case PZ_DPMSG_SRC: return "another sender";
    case PZ_DPMSG_CHUNK: return "another chunk";
    case PZ_DPMSG_SEQ: return "another collective";
    case PZ_DPMSG_RANGE: return "another chunk range (vector length differs between replicas?)";
    }
    return "?";
}
