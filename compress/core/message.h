/* message.h: the codec message on the wire (private to compress/).
 *
 * A message is a header (magic, version, codec id, flags, wrapper chain,
 * the base codec's parameters, shape, payload length, CRC32C of header and
 * payload; layout in compress/README.md) and a payload, optionally through
 * the +zstd stage. A framed message (one that travels between ranks inside
 * a checked frame, runtime/net/frame.h, whose CRC covers it) has flag 0x04 set
 * and a zero CRC field: one CRC pass per payload on the wire. This layer knows bytes only: codec.c asks the codecs for
 * the payload and puts message and payload together with these functions,
 * and pz_codec_peek reads a header without a codec object. */
#ifndef PZ_MESSAGE_H
#define PZ_MESSAGE_H

#include "compress/core/codec_impl.h"

/* The codec id byte of a wrapper's message: 0x80 + the outermost wrapper's
 * kind (base codecs use their own id, below 0x80). */
#define PZ_MSG_WRAP_ID(kind) (0x80 + (kind))

/* The wrapper chain as codec objects and pz_msg_header hold it: each level's
 * wrapper kind in PZ_MSG_CHAIN_BITS bits, outermost in the lowest; 0 ends
 * the chain. On the wire level l's low 2 bits are bits 2l..2l+1 of the
 * chain byte (header byte 8) and its high bit is bit l of header byte 10,
 * so chains of ef, ef21 and aq (codes 1..3) keep byte 10 zero. */
#define PZ_MSG_CHAIN_BITS 3
#define PZ_MSG_CHAIN_MASK 7

/* Bytes of the header of an ndim-dimensional tensor's message. */
size_t pz_msg_header_size(int ndim);

/* A header that pz_msg_read checked field by field. */
typedef struct {
    uint8_t id, flags, wflags;          /* codec id, zstd flags, wrapper flags */
    uint16_t chain;                     /* wrapper chain, PZ_MSG_CHAIN_BITS a level */
    pz_codec_params p;                  /* the base codec's (innermost for wrappers) */
    const pz_codec_impl *impl;          /* the base codec of p.id */
    pz_shape shape;
    size_t hsize, plen;                 /* header and payload bytes */
    const uint8_t *payload;             /* as on the wire (maybe zstd-compressed) */
} pz_msg_header;

/* Writes the header in front of the payload, out[header size..+plen), and
 * the CRC over both (none when framed). zstd_flags: from pz_zstd_pack (0
 * without +zstd). */
void pz_msg_write(uint8_t *out, uint8_t id, uint8_t zstd_flags, uint8_t wflags, uint16_t chain,
                  const pz_codec_params *p, const pz_shape *shape, size_t plen, int framed);
/* Reads and checks the header of msg[0..len) (untrusted): PZ_ERR_FORMAT with
 * a message for anything out of place. A message with a CRC has it checked;
 * one without (framed) is accepted only when framed is set (its frame was
 * checked). m->flags holds the zstd flags. */
pz_status pz_msg_read(const uint8_t *msg, size_t len, pz_msg_header *m, int framed);
/* The spec of the codec that wrote the message: wrapper chain, base codec
 * with its parameters, "+zstd". */
void pz_msg_spec(const pz_msg_header *m, char *buf, size_t cap);

/* The +zstd stage: libzstd level 1 over the whole payload (a wrapper's
 * too), kept only when it is smaller. Its contexts and staging buffer live
 * with a codec object and are reused from message to message. */
typedef struct {
    struct ZSTD_CCtx_s *cctx;
    struct ZSTD_DCtx_s *dctx;
    uint8_t *buf;
    size_t cap;
} pz_zstd_stage;

/* Compresses payload[0..*len) in place when that makes it smaller, and sets
 * the header's zstd flags to write. */
pz_status pz_zstd_pack(pz_zstd_stage *z, uint8_t *payload, size_t *len, uint8_t *flags);
/* The payload of m as the codec wrote it: m's own bytes, or when zstd was
 * used the frame decompressed into the stage's buffer (checked against
 * bound, the most this shape allows, before it is decompressed). */
pz_status pz_zstd_unpack(pz_zstd_stage *z, const pz_msg_header *m, size_t bound, const uint8_t **payload,
                         size_t *len);
void pz_zstd_stage_free(pz_zstd_stage *z);

#endif
