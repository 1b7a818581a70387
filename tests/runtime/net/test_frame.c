/* test_frame: the checked frame around every message between ranks
 * (runtime/net/frame.c): its byte layout, round trips, every kind of mismatch
 * (short, magic, version, length, CRC, job, edge, direction, step, micro,
 * reserved) with a message that gives the numbers, and that every single-bit
 * flip of a frame (header or payload) is refused; and that the job id
 * (pz_frame_job_id) changes with any one byte of the bootstrap table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/crc32c.h"
#include "runtime/net/frame.h"
#include "tests/check.h"

static const pz_frame_id base_id = {0x1122334455667788ull, 7, 3, 1, 0, 1};

/* checks hdr/payload against want; the result must be `res` and, when not
 * OK, the explanation must contain needle */
static void expect(const uint8_t *hdr, size_t hl, const pz_frame_id *want, const void *p, size_t n,
                   pz_frame_result res, const char *needle, const char *what) {
    char why[256];
    pz_frame_result got = pz_frame_check(hdr, hl, want, p, n, why, sizeof why);
    CHECK(got == res, "%s: got %s (%s), want %s", what, pz_frame_result_name(got), why, pz_frame_result_name(res));
    if (res != PZ_FRAME_OK && needle) CHECK(strstr(why, needle) != NULL, "%s: '%s' lacks '%s'", what, why, needle);
    if (res == PZ_FRAME_OK) CHECK(why[0] == '\0', "%s: OK with a reason '%s'", what, why);
}

static void layout(void) {
    uint8_t hdr[PZ_FRAME_HDR], p[5] = {1, 2, 3, 4, 5};
    pz_frame_put(hdr, &base_id, p, sizeof p);
    CHECK(memcmp(hdr, "PZFR", 4) == 0, "magic");
    /* version 2: codec messages in the payload no longer carry a CRC of their own */
    CHECK(hdr[4] == 2 && hdr[5] == 1 && hdr[6] == 0 && hdr[7] == 1, "version, kind, src, dst");
    CHECK(pz_get_u64(hdr + 8) == base_id.job, "job id");
    CHECK(pz_get_u32(hdr + 16) == 7 && pz_get_u16(hdr + 20) == 3 && pz_get_u16(hdr + 22) == 0, "step, micro");
    CHECK(pz_get_u64(hdr + 24) == 5 && pz_get_u32(hdr + 36) == 0, "length");
    uint32_t crc = pz_crc32c(pz_crc32c(0, hdr, 32), p, sizeof p);
    CHECK(pz_get_u32(hdr + 32) == crc, "CRC-32C over header bytes 0..31 and the payload");
    expect(hdr, sizeof hdr, &base_id, p, sizeof p, PZ_FRAME_OK, NULL, "round trip");
    /* an empty payload (a barrier) */
    pz_frame_put(hdr, &base_id, NULL, 0);
    expect(hdr, sizeof hdr, &base_id, NULL, 0, PZ_FRAME_OK, NULL, "empty payload");
    /* a larger one, through the 3-stream hardware path of crc32c */
    size_t big = 3 * 4096 * 3 + 17;
    uint8_t *b = malloc(big);
    for (size_t i = 0; i < big; i++) b[i] = (uint8_t)(i * 31 + 7);
    pz_frame_put(hdr, &base_id, b, big);
    expect(hdr, sizeof hdr, &base_id, b, big, PZ_FRAME_OK, NULL, "36 KiB payload");
    b[big / 2] ^= 1;
    expect(hdr, sizeof hdr, &base_id, b, big, PZ_FRAME_CRC, "computed", "36 KiB payload, one bit flipped");
    free(b);
}

/* a frame built for `sent`, checked against base_id */
static void mismatch(pz_frame_id sent, pz_frame_result res, const char *needle, const char *what) {
    uint8_t hdr[PZ_FRAME_HDR], p[64];
    for (int i = 0; i < 64; i++) p[i] = (uint8_t)i;
    pz_frame_put(hdr, &sent, p, sizeof p);
    expect(hdr, sizeof hdr, &base_id, p, sizeof p, res, needle, what);
}

/* base_id with one field set to value, sent, then checked against base_id */
#define MISMATCH(field, value, res, needle, what)                \
    do {                                                         \
        pz_frame_id id_ = base_id;                               \
        id_.field = value;                                       \
        mismatch(id_, res, needle, what);                        \
    } while (0)

static void mismatches(void) {
    MISMATCH(job, base_id.job ^ 1, PZ_FRAME_JOB, "job id 1122334455667789, expected 1122334455667788", "other job");
    MISMATCH(src, 2, PZ_FRAME_EDGE, "from rank 2 to rank 1, expected 0 to 1", "other source rank");
    MISMATCH(dst, 3, PZ_FRAME_EDGE, "from rank 0 to rank 3", "other destination rank");
    MISMATCH(kind, 2, PZ_FRAME_KIND, "kind 2, expected 1", "other direction");
    MISMATCH(step, 8, PZ_FRAME_STEP, "step 8, expected 7", "other step");
    MISMATCH(micro, 0, PZ_FRAME_MICRO, "micro-batch 0, expected 3", "other micro-batch");

    uint8_t hdr[PZ_FRAME_HDR], p[64] = {0};
    pz_frame_put(hdr, &base_id, p, sizeof p);
    expect(hdr, PZ_FRAME_HDR - 1, &base_id, p, sizeof p, PZ_FRAME_SHORT, "39 bytes", "short header");
    expect(hdr, 0, &base_id, p, 0, PZ_FRAME_SHORT, "0 bytes", "nothing");
    expect(hdr, sizeof hdr, &base_id, p, 63, PZ_FRAME_LENGTH, "header says 64 payload bytes, 63 arrived",
           "a byte missing");
    expect(hdr, sizeof hdr, &base_id, p, 0, PZ_FRAME_LENGTH, "0 arrived", "the payload missing");

    uint8_t h2[PZ_FRAME_HDR];
    memcpy(h2, hdr, sizeof h2);
    h2[0] ^= 0x20;
    expect(h2, sizeof h2, &base_id, p, sizeof p, PZ_FRAME_MAGIC_BAD, "magic", "bad magic");
    memcpy(h2, hdr, sizeof h2);
    h2[4] = 1;   /* a build whose codec messages carried their own CRC */
    expect(h2, sizeof h2, &base_id, p, sizeof p, PZ_FRAME_MAGIC_BAD, "version 1, expected 2", "older version");
    h2[4] = 3;
    expect(h2, sizeof h2, &base_id, p, sizeof p, PZ_FRAME_MAGIC_BAD, "version 3, expected 2", "newer version");
    memcpy(h2, hdr, sizeof h2);
    h2[16] ^= 1;   /* the step, without a new CRC: corruption, not a mislabelled message */
    expect(h2, sizeof h2, &base_id, p, sizeof p, PZ_FRAME_CRC, "CRC mismatch", "step byte flipped");
    memcpy(h2, hdr, sizeof h2);
    h2[33] ^= 0x80;
    expect(h2, sizeof h2, &base_id, p, sizeof p, PZ_FRAME_CRC, "header 0x", "CRC byte flipped");
    memcpy(h2, hdr, sizeof h2);
    h2[36] = 1;    /* outside the CRC: still refused */
    expect(h2, sizeof h2, &base_id, p, sizeof p, PZ_FRAME_RESERVED, "reserved", "reserved tail set");
    /* the reserved u16 after micro, with a CRC that matches */
    memcpy(h2, hdr, sizeof h2);
    h2[22] = 5;
    pz_put_u32(h2 + 32, pz_frame_crc(h2, p, sizeof p));
    expect(h2, sizeof h2, &base_id, p, sizeof p, PZ_FRAME_RESERVED, "reserved", "reserved u16 set");
    /* no reason buffer: the result alone */
    CHECK(pz_frame_check(h2, sizeof h2, &base_id, p, sizeof p, NULL, 0) == PZ_FRAME_RESERVED, "NULL reason buffer");
}

/* Every single-bit flip anywhere in a frame is refused (CRC-32C finds every
 * error of up to 3 bits in messages this short; one is enough here), and a
 * flip in the length field is a length error. */
static void every_bit(void) {
    enum { N = 100 };
    uint8_t frame[PZ_FRAME_HDR + N];
    for (int i = 0; i < N; i++) frame[PZ_FRAME_HDR + i] = (uint8_t)(i * 13 + 1);
    pz_frame_put(frame, &base_id, frame + PZ_FRAME_HDR, N);
    int missed = 0;
    for (size_t at = 0; at < sizeof frame; at++)
        for (int bit = 0; bit < 8; bit++) {
            frame[at] ^= (uint8_t)(1u << bit);
            pz_frame_result r = pz_frame_check(frame, PZ_FRAME_HDR, &base_id, frame + PZ_FRAME_HDR, N, NULL, 0);
            frame[at] ^= (uint8_t)(1u << bit);
            missed += r == PZ_FRAME_OK;
            if (at >= 24 && at < 32) CHECK(r == PZ_FRAME_LENGTH, "length byte %zu bit %d: %s", at, bit, pz_frame_result_name(r));
        }
    CHECK(missed == 0, "%d single-bit flips of a %zu-byte frame passed the check", missed, sizeof frame);
    CHECK(pz_frame_check(frame, PZ_FRAME_HDR, &base_id, frame + PZ_FRAME_HDR, N, NULL, 0) == PZ_FRAME_OK, "unflipped");
}

/* The job id covers the world size and every address length and byte: two
 * tables that differ in any one of them get different ids (a hash that left
 * the address bytes out survived the release suite once). */
static void job_ids(void) {
    enum { W = 3, L = 24 };
    uint8_t a[W][L], b[W][L];
    const uint8_t *pa[W] = {a[0], a[1], a[2]}, *pb[W] = {b[0], b[1], b[2]};
    size_t la[W] = {L, L - 4, L}, lb[W];
    for (int r = 0; r < W; r++)
        for (int i = 0; i < L; i++) a[r][i] = (uint8_t)(r * 41 + i * 7 + 1);
    uint64_t id = pz_frame_job_id(W, pa, la);
    CHECK(id == pz_frame_job_id(W, pa, la), "the same table gives the same id");
    int same = 0, tried = 0;
    for (int r = 0; r < W; r++)
        for (size_t i = 0; i < la[r]; i++)
            for (int bit = 0; bit < 8; bit += 3) {
                memcpy(b, a, sizeof a);
                memcpy(lb, la, sizeof la);
                b[r][i] ^= (uint8_t)(1u << bit);
                tried++;
                if (pz_frame_job_id(W, pb, lb) == id) {
                    same++;
                    CHECK(0, "rank %d address byte %zu bit %d flipped: same job id %016llx", r, i, bit,
                          (unsigned long long)id);
                }
            }
    CHECK(same == 0 && tried > 100, "%d of %d one-byte changes kept the job id", same, tried);
    /* bytes past an address's length are not part of it */
    memcpy(b, a, sizeof a);
    b[1][L - 1] ^= 1;
    CHECK(pz_frame_job_id(W, pb, la) == id, "a byte past rank 1's address changed the id");
    /* one byte moved from one address to the next: same bytes, other table */
    memcpy(lb, la, sizeof la);
    lb[0]--;
    lb[1]++;
    memcpy(b, a, sizeof a);
    memmove(b[1] + 1, b[1], la[1]);
    b[1][0] = a[0][L - 1];
    CHECK(pz_frame_job_id(W, pb, lb) != pz_frame_job_id(W, pa, la), "a byte moved between addresses kept the id");
    CHECK(pz_frame_job_id(W - 1, pa, la) != id, "another world size kept the id");
    memcpy(lb, la, sizeof la);
    lb[2]--;
    CHECK(pz_frame_job_id(W, pa, lb) != id, "a shorter address kept the id");
}

int main(void) {
    job_ids();
    layout();
    mismatches();
    every_bit();
    return check_summary("frame");
}
