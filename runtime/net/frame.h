/* frame.h: the checked frame that wraps every message between ranks
 * (runtime/net/transport.c frames each one; pure functions on byte buffers, so a
 * unit test and a fuzzer reach the check, tests/runtime/net/test_frame.c and
 * tests/fuzz/fuzz_frame.c).
 *
 * A frame is a 40-byte header followed by the payload (the caller's bytes:
 * sample ids and a codec message or raw float32 on a pipeline edge, a
 * gradient for the tied embedding, doubles of a collective, ...). Integers
 * are little-endian:
 *   off  0  u32 magic "PZFR"
 *   off  4  u8  version (2: codec messages in the payload carry no CRC of
 *               their own, compress/core/codec.h pz_codec_set_framed; 1 had one)
 *   off  5  u8  kind     the tag's kind: activation, gradient, tied, ...
 *   off  6  u8  src      sending rank
 *   off  7  u8  dst      receiving rank
 *   off  8  u64 job id   every rank of a job agrees on it (see transport.c)
 *   off 16  u32 step     the tag's step (its low 32 bits)
 *   off 20  u16 micro    the tag's micro-batch
 *   off 22  u16 zero
 *   off 24  u64 payload length
 *   off 32  u32 CRC-32C  over bytes 0..31 of the header, then the payload
 *   off 36  u32 zero
 * On a pipeline edge src -> dst names the edge and kind the direction, so
 * the header binds the payload to its job, step, micro-batch, edge and
 * direction; the receiver expects each of them and refuses any difference. */
#ifndef PZ_FRAME_H
#define PZ_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define PZ_FRAME_MAGIC 0x52465a50u /* "PZFR" as little-endian bytes */
#define PZ_FRAME_VERSION 2u
#define PZ_FRAME_HDR 40u
#define PZ_FRAME_CRC_AT 32u

typedef struct {
    uint64_t job;
    uint32_t step;
    uint16_t micro;
    uint8_t kind, src, dst;
} pz_frame_id;

/* The outcomes of pz_frame_check, in the order it checks. */
typedef enum {
    PZ_FRAME_OK = 0,
    PZ_FRAME_SHORT,     /* fewer bytes than a header */
    PZ_FRAME_MAGIC_BAD, /* not a frame, or another version */
    PZ_FRAME_LENGTH,    /* the header's payload length is not what arrived */
    PZ_FRAME_CRC,       /* header or payload changed on the way */
    PZ_FRAME_JOB,       /* a message of another job */
    PZ_FRAME_EDGE,      /* other source or destination rank */
    PZ_FRAME_KIND,      /* other kind (direction on an edge) */
    PZ_FRAME_STEP,
    PZ_FRAME_MICRO,
    PZ_FRAME_RESERVED,  /* a reserved field is not zero */
} pz_frame_result;

/* Writes the header of a frame carrying payload[0..len) into hdr. */
void pz_frame_put(uint8_t hdr[PZ_FRAME_HDR], const pz_frame_id *id, const void *payload, size_t len);
/* The header only, with crc as its CRC (crc = pz_frame_crc of header and
 * payload); lets a caller checksum the payload elsewhere. */
uint32_t pz_frame_crc(const uint8_t hdr[PZ_FRAME_HDR], const void *payload, size_t len);
/* Checks the header hdr[0..hdr_len) of a frame whose payload
 * payload[0..len) arrived, against what the receiver expects. On anything
 * but PZ_FRAME_OK, why (cap bytes, may be NULL) says what differed, with the
 * numbers. Reads at most PZ_FRAME_HDR bytes of hdr and len of payload. */
pz_frame_result pz_frame_check(const uint8_t *hdr, size_t hdr_len, const pz_frame_id *expect, const void *payload,
                               size_t len, char *why, size_t cap);
/* A name for a result ("CRC mismatch", ...). */
const char *pz_frame_result_name(pz_frame_result r);

/* The job id of a bootstrap table: a 64-bit FNV-1a hash of the world size
 * and, for every rank, its address length and every byte of its address
 * (blobs[r][0..lens[r])). Each address holds its worker's random UUID, so
 * two jobs (or a restart of one) get different ids and every rank of a job
 * the same one (runtime/net/transport_frame.c). */
uint64_t pz_frame_job_id(int world, const uint8_t *const *blobs, const size_t *lens);

#endif
