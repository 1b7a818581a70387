/* frame.c: see frame.h. */
#include "runtime/net/frame.h"

#include <stdio.h>
#include <string.h>

#include "base/bytes.h"
#include "base/crc32c.h"

uint32_t pz_frame_crc(const uint8_t hdr[PZ_FRAME_HDR], const void *payload, size_t len) {
    uint32_t c = pz_crc32c(0, hdr, PZ_FRAME_CRC_AT);
    return len ? pz_crc32c(c, payload, len) : c;
}

void pz_frame_put(uint8_t hdr[PZ_FRAME_HDR], const pz_frame_id *id, const void *payload, size_t len) {
    memset(hdr, 0, PZ_FRAME_HDR);
    pz_put_u32(hdr, PZ_FRAME_MAGIC);
    hdr[4] = PZ_FRAME_VERSION;
    hdr[5] = id->kind;
    hdr[6] = id->src;
    hdr[7] = id->dst;
    pz_put_u64(hdr + 8, id->job);
    pz_put_u32(hdr + 16, id->step);
    pz_put_u16(hdr + 20, id->micro);
    pz_put_u64(hdr + 24, (uint64_t)len);
    pz_put_u32(hdr + PZ_FRAME_CRC_AT, pz_frame_crc(hdr, payload, len));
}

uint64_t pz_frame_job_id(int world, const uint8_t *const *blobs, const size_t *lens) {
    uint64_t h = 0xcbf29ce484222325ull;
    const uint64_t prime = 0x100000001b3ull;
    uint8_t w[4] = {(uint8_t)world, (uint8_t)(world >> 8), 0, 0};
    for (int i = 0; i < 4; i++) h = (h ^ w[i]) * prime;
    for (int r = 0; r < world; r++) {
        for (int i = 0; i < 8; i++) h = (h ^ (uint8_t)((uint64_t)lens[r] >> (8 * i))) * prime;
        for (size_t i = 0; i < lens[r]; i++) h = (h ^ blobs[r][i]) * prime;
    }
    return h;
}

const char *pz_frame_result_name(pz_frame_result r) {
    switch (r) {
    case PZ_FRAME_OK: return "ok";
    case PZ_FRAME_SHORT: return "short frame";
    case PZ_FRAME_MAGIC_BAD: return "not a frame";
    case PZ_FRAME_LENGTH: return "length mismatch";
    case PZ_FRAME_CRC: return "CRC mismatch";
    case PZ_FRAME_JOB: return "job mismatch";
    case PZ_FRAME_EDGE: return "edge mismatch";
    case PZ_FRAME_KIND: return "direction mismatch";
    case PZ_FRAME_STEP: return "step mismatch";
    case PZ_FRAME_MICRO: return "micro-batch mismatch";
    case PZ_FRAME_RESERVED: return "reserved field set";
    }
    return "?";
}

static pz_frame_result fail(pz_frame_result r, char *why, size_t cap, const char *fmt, unsigned long long got,
                            unsigned long long want) {
    if (why && cap) {
        char detail[128];
        snprintf(detail, sizeof detail, fmt, got, want);
        snprintf(why, cap, "%s (%s)", pz_frame_result_name(r), detail);
    }
    return r;
}

pz_frame_result pz_frame_check(const uint8_t *hdr, size_t hdr_len, const pz_frame_id *e, const void *payload,
                               size_t len, char *why, size_t cap) {
    if (why && cap) why[0] = '\0';
    if (hdr_len < PZ_FRAME_HDR)
        return fail(PZ_FRAME_SHORT, why, cap, "%llu bytes, a header has %llu", hdr_len, PZ_FRAME_HDR);
    uint32_t magic = pz_get_u32(hdr);
    if (magic != PZ_FRAME_MAGIC)
        return fail(PZ_FRAME_MAGIC_BAD, why, cap, "magic 0x%08llx, expected 0x%08llx", magic, PZ_FRAME_MAGIC);
    if (hdr[4] != PZ_FRAME_VERSION)
        return fail(PZ_FRAME_MAGIC_BAD, why, cap, "version %llu, expected %llu", hdr[4], PZ_FRAME_VERSION);
    uint64_t n = pz_get_u64(hdr + 24);
    if (n != (uint64_t)len)
        return fail(PZ_FRAME_LENGTH, why, cap, "header says %llu payload bytes, %llu arrived", n, len);
    /* a changed byte anywhere is reported as such, before any field is read */
    uint32_t crc = pz_get_u32(hdr + PZ_FRAME_CRC_AT), have = pz_frame_crc(hdr, payload, len);
    if (crc != have) return fail(PZ_FRAME_CRC, why, cap, "header 0x%08llx, computed 0x%08llx", crc, have);
    uint64_t job = pz_get_u64(hdr + 8);
    if (job != e->job) return fail(PZ_FRAME_JOB, why, cap, "job id %016llx, expected %016llx", job, e->job);
    if (hdr[6] != e->src || hdr[7] != e->dst) {
        if (why && cap)
            snprintf(why, cap, "%s (from rank %u to rank %u, expected %u to %u)", pz_frame_result_name(PZ_FRAME_EDGE),
                     hdr[6], hdr[7], e->src, e->dst);
        return PZ_FRAME_EDGE;
    }
    if (hdr[5] != e->kind) return fail(PZ_FRAME_KIND, why, cap, "kind %llu, expected %llu", hdr[5], e->kind);
    uint32_t step = pz_get_u32(hdr + 16);
    if (step != e->step) return fail(PZ_FRAME_STEP, why, cap, "step %llu, expected %llu", step, e->step);
    uint16_t micro = pz_get_u16(hdr + 20);
    if (micro != e->micro) return fail(PZ_FRAME_MICRO, why, cap, "micro-batch %llu, expected %llu", micro, e->micro);
    if (pz_get_u16(hdr + 22) != 0 || pz_get_u32(hdr + 36) != 0)
        return fail(PZ_FRAME_RESERVED, why, cap, "%llu, %llu", pz_get_u16(hdr + 22), pz_get_u32(hdr + 36));
    return PZ_FRAME_OK;
}
