/* dpmsg.h: the header in front of every compressed data-parallel message
 * (runtime/dp/creduce.c), pure functions on bytes so that a unit test and a
 * fuzzer reach the check (tests/fuzz/fuzz_dpmsg.c).
 *
 * The transport's frame already binds a message to its job, ranks, step and
 * kind; this header binds the codec message inside to the reduction's
 * geometry, so a replica that runs with another group size, vector length
 * or chunking is refused with the difference named instead of decoding a
 * chunk into the wrong place. Integers little-endian:
 *   off  0  u32 magic "PZDC"
 *   off  4  u8  version (1)
 *   off  5  u8  phase    1 all-gather, 2 two-phase to the owner, 3 two-phase
 *                        from the owner
 *   off  6  u16 group size D
 *   off  8  u16 sender's index in the group
 *   off 10  u16 chunk index
 *   off 12  u32 the group's collective number
 *   off 16  u64 first element of the chunk
 *   off 24  u64 elements in the chunk
 *   off 32  u64 bytes of the codec message that follows the header
 * Then the codec message (compress/core/codec.h: its own header and shape; no CRC
 * of its own, the frame around it has the one: pz_codec_set_framed). */
#ifndef PZ_DP_DPMSG_H
#define PZ_DP_DPMSG_H

#include <stddef.h>
#include <stdint.h>

#define PZ_DPMSG_MAGIC 0x43445a50u /* "PZDC" as little-endian bytes */
#define PZ_DPMSG_VERSION 1u
#define PZ_DPMSG_HDR 40u

enum { PZ_DPMSG_ALLGATHER = 1, PZ_DPMSG_TO_OWNER = 2, PZ_DPMSG_FROM_OWNER = 3 };

typedef struct {
    uint8_t phase;
    uint16_t group, src, chunk;
    uint32_t seq;
    uint64_t offset, count, msg_len;
} pz_dpmsg;

typedef enum {
    PZ_DPMSG_OK = 0,
    PZ_DPMSG_SHORT,       /* fewer bytes than a header */
    PZ_DPMSG_MAGIC_BAD,   /* not a data-parallel message, or another version */
    PZ_DPMSG_LENGTH,      /* the header's message length is not what arrived */
    PZ_DPMSG_PHASE,
    PZ_DPMSG_GROUP,       /* another group size */
    PZ_DPMSG_SRC,
    PZ_DPMSG_CHUNK,
    PZ_DPMSG_SEQ,
    PZ_DPMSG_RANGE,       /* another offset or element count: another vector length */
} pz_dpmsg_result;

void pz_dpmsg_put(uint8_t hdr[PZ_DPMSG_HDR], const pz_dpmsg *h);
/* Checks buf[0..len) (header and codec message) against what the receiver
 * expects (every field; want->msg_len is ignored, the header's must equal
 * len - PZ_DPMSG_HDR). On anything but OK, why (cap bytes, may be NULL) says
 * what differed, with the numbers. Reads at most len bytes. */
pz_dpmsg_result pz_dpmsg_check(const uint8_t *buf, size_t len, const pz_dpmsg *want, char *why, size_t cap);
const char *pz_dpmsg_result_name(pz_dpmsg_result r);

#endif
