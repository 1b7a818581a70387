/* transport_frame.c: the checked frame around every message of the
 * transport (runtime/net/frame.h has the header): the job id, the header of a
 * send, the check of an arrival, and the fault injection that tests it.
 *
 * The job id is a 64-bit hash (FNV-1a, pz_frame_job_id) of the bootstrap's
 * table: the world size and every rank's UCX worker address, which rank 0
 * sends to every rank over the authenticated bootstrap connection. Each
 * address holds its
 * worker's random 64-bit UUID and its listening ports, so two jobs (or a
 * restart of one) get different ids, and every rank of one job the same one
 * without another message.
 *
 * Cost: the sender checksums the payload when it posts the send, the
 * receiver when its wait sees the message complete; both outside the
 * transport's lock, so a progress thread keeps moving other messages
 * meanwhile, and both with the SSE4.2 CRC-32C of base/crc32c.c. The header travels in the same UCX
 * message as the payload (an IOV of two pieces, no copy). */
#include "runtime/net/transport_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

uint64_t tp_job_id(const pz_bootstrap *b) {
    return pz_frame_job_id(b->world, (const uint8_t *const *)b->blobs, b->lens);
}

void tp_frame_seal(const pz_transport *t, int peer, uint64_t tag, const void *buf, size_t len,
                   uint8_t hdr[PZ_FRAME_HDR]) {
    pz_frame_id id = {t->job, (uint32_t)tag, (uint16_t)(tag >> 32), (uint8_t)(tag >> 48), (uint8_t)t->rank,
                      (uint8_t)peer};
    pz_frame_put(hdr, &id, buf, len);
}

void tp_frame_send(pz_transport *t, pz_request *r, const uint8_t *sealed) {
    if (sealed) memcpy(r->fhdr, sealed, PZ_FRAME_HDR);
    else tp_frame_seal(t, r->peer, r->tag, r->buf, r->cap, r->fhdr);
    unsigned kind = (unsigned)(r->tag >> 48) & 0xffu;
    if (t->fault_kind < 0 || kind != (unsigned)t->fault_kind || (uint32_t)r->tag != t->fault_step) return;
    t->fault_kind = -1;   /* once: the first such message (micro-batch 0 of a step) */
    size_t n = PZ_FRAME_HDR + r->cap;
    r->faulty = xmalloc(n);
    memcpy(r->faulty, r->fhdr, PZ_FRAME_HDR);
    if (r->cap) memcpy(r->faulty + PZ_FRAME_HDR, r->buf, r->cap);
    size_t at = t->fault_at >= 0 ? (size_t)t->fault_at : PZ_FRAME_HDR + r->cap / 2;
    if (at >= n) at = n - 1;
    r->faulty[at] ^= 0x10;
    fprintf(stderr, "rank %d: PIPEZIP_FAULT_FLIP: flipped byte %zu of the %zu-byte frame of \"%s\" (%s)\n", t->rank,
            at, n, r->what, at < PZ_FRAME_HDR ? "header" : "payload");
}

void pz_transport_fault_flip(pz_transport *t, unsigned kind, uint32_t step, long at) {
    if (!t) return;
    lock(t);
    t->fault_kind = (int)(kind & 0xffu);
    t->fault_step = step;
    t->fault_at = at;
    unlock(t);
}

pz_status tp_frame_verify(pz_transport *t, const tp_arrival *a, size_t *len) {
    char why[200];
    size_t hl = a->got < PZ_FRAME_HDR ? a->got : PZ_FRAME_HDR, n = a->got - hl;
    pz_frame_result res = pz_frame_check(a->hdr, hl, &a->want, a->buf, n, why, sizeof why);
    if (res != PZ_FRAME_OK)
        return pz_fail(PZ_ERR_PEER, "rank %d: \"%s\": the message from rank %d fails its frame check: %s", t->rank,
                       a->what, a->peer, why);
    if (len) *len = n;
    return PZ_OK;
}
