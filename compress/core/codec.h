/* codec.h: compressors for what crosses a pipeline edge.
 *
 * A codec turns a float32 tensor into one self-describing message (bytes)
 * and back. A codec object is made from a spec string such as
 *     "fp16"  "q4:scale=minmax,group=row,round=stochastic"  "topk:0.1"
 *     "jointsq:1.5"  "ef(topk:0.1)"  "aq(q4)"  "q8+zstd"
 * (grammar in compress/README.md) and may keep state across calls: error
 * feedback residuals on the sender, AQ-SGD per-sample buffers on both sides.
 * So each side of an edge owns its own pz_codec made from the same spec.
 *
 * Every message carries a header (magic, version, codec id and parameters,
 * shape, payload length, CRC32C of header and payload, unless the message
 * travels in a checked frame: pz_codec_set_framed). Decoding never trusts
 * its input: a truncated, oversized, inconsistent or corrupted message returns
 * PZ_ERR_FORMAT (or PZ_ERR_SHAPE when it does not fit the caller's buffer)
 * with a message, never crashes, never reads or writes out of bounds and never
 * allocates more than the caller's buffer sizes imply. */
#ifndef PZ_CODEC_H
#define PZ_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

#define PZ_MAX_DIMS 4

/* Shape of the tensor: dims[ndim-1] is the hidden channel ("column");
 * the product of the others is the number of rows (tokens). For an edge of a
 * GPT stage the shape is (B, T, C) and rows are tokens; the first dimension
 * is the sample (batch) dimension, used by AQ-SGD's per-sample buffers. */
typedef struct {
    int ndim;                   /* 1..PZ_MAX_DIMS */
    int64_t dims[PZ_MAX_DIMS];
} pz_shape;

size_t pz_shape_numel(const pz_shape *s);
int pz_shape_equal(const pz_shape *a, const pz_shape *b);
/* "(d0,d1,...)" into buf */
void pz_shape_format(const pz_shape *s, char *buf, size_t cap);

/* Per-call context: what makes a message's randomness and state unique.
 * Stochastic rounding draws element i's uniform number from a counter-based
 * hash of (seed, step, edge, dir, micro, i), so the same inputs give the same
 * bytes on any backend and in any thread order. */
typedef struct {
    uint64_t seed;
    uint64_t step;
    uint32_t edge, dir, micro;
    const uint64_t *sample_ids; /* AQ: one id per sample (dims[0]); else NULL */
} pz_codec_ctx;

typedef struct pz_codec pz_codec;

/* Parses a spec; on error the message points at the offending text. */
pz_status pz_codec_create(const char *spec, pz_codec **out);
/* What a codec carries, where a default depends on it: q's round= defaults
 * to nearest for activations (the lower error, and a forward pass has no
 * average for an unbiased estimate to pay off in) and to stochastic for
 * gradients (unbiased, so the optimizer's sum over steps sees no drift:
 * the sweep measured bwd=q2 at +7.9% validation loss with nearest, +0.2%
 * with stochastic). A spec that names round= gets what it names. aq()'s
 * warmup= codec keeps the activation default. */
enum pz_codec_use { PZ_USE_ACTIVATION = 0, PZ_USE_GRADIENT = 1 };
/* pz_codec_create with the defaults of use (pz_codec_create: activation). */
pz_status pz_codec_create_for(const char *spec, int use, pz_codec **out);
void pz_codec_free(pz_codec *c);
/* Canonical spec with every parameter spelled out (for logs and policies). */
const char *pz_codec_spec(const pz_codec *c);
/* Whether decoding needs state built by earlier messages (AQ). */
int pz_codec_is_stateful_decoder(const pz_codec *c);
/* The most bytes of state and scratch c may come to hold in memory for
 * tensors of shape s (an upper bound for memory estimates; aq counts its
 * mem= limit, beyond which it spills to a file). */
size_t pz_codec_state_bound(const pz_codec *c, const pz_shape *s);

/* Bytes of state the codec holds (error-feedback residuals, AQ-SGD buffers,
 * scratch) in memory; *file_bytes (may be NULL) gets AQ's spill file size. */
size_t pz_codec_state_bytes(const pz_codec *c, size_t *file_bytes);
/* Training state for checkpoints (compress/wrappers/codec_state.c): every wrapper
 * level's state (ef, ef21 vectors; aq buffers, spilled ones too; both
 * roles) as one self-checking blob (malloc'ed), and back into a fresh codec
 * of the same spec; a blob that does not fit is refused before anything
 * changes. Base codecs give a blob with no levels. */
pz_status pz_codec_state_save(pz_codec *c, uint8_t **blob, size_t *len);
pz_status pz_codec_state_load(pz_codec *c, const uint8_t *blob, size_t len);
/* Whether c has a wrapper level, whose blob pz_codec_state_save writes
 * (hadamard()'s holds nothing, but has its level). */
int pz_codec_has_state(const pz_codec *c);
/* Whether one of c's levels keeps state across messages (ef, ef21, aq):
 * what a codec that two ends must switch or share freely may not have. */
int pz_codec_keeps_state(const pz_codec *c);
/* The name of the outermost such level ("ef", "ef21" or "aq"), or NULL:
 * for messages that name what a caller cannot take. */
const char *pz_codec_state_wrapper(const pz_codec *c);

/* Marks c, and the codecs it wraps, as one whose messages travel between
 * ranks inside a checked frame (runtime/net/frame.h), whose CRC-32C covers them:
 * it writes them without a CRC of its own (a header flag says so, the CRC
 * field is zero) and reads them as well as stored ones, so the payload is
 * checksummed once on the wire. A codec not so marked (the default: what
 * `pipezip codec --out` writes, files) writes and requires the CRC, and
 * refuses a framed message. */
void pz_codec_set_framed(pz_codec *c, int framed);

/* Upper bound of an encoded message for this shape, for preallocation. */
size_t pz_codec_max_encoded_size(const pz_codec *c, const pz_shape *shape);

/* Encodes x (numel(shape) floats). Writes at most cap bytes to out. */
pz_status pz_codec_encode(pz_codec *c, const float *x, const pz_shape *shape,
                          const pz_codec_ctx *ctx, uint8_t *out, size_t cap, size_t *len);
/* Decodes msg into out (out_cap floats). The shape is read from the message
 * and returned in *shape; it must fit out_cap. ctx supplies sample ids for AQ. */
pz_status pz_codec_decode(pz_codec *c, const uint8_t *msg, size_t len,
                          const pz_codec_ctx *ctx, float *out, size_t out_cap, pz_shape *shape);

/* Reads only the header of a message (validated, CRC checked) without a codec
 * object: spec of the codec that wrote it and the shape. */
pz_status pz_codec_peek(const uint8_t *msg, size_t len, char *spec, size_t spec_cap, pz_shape *shape);
/* pz_codec_peek for a message that came in a checked frame: one without its
 * own CRC (pz_codec_set_framed) is read too. */
pz_status pz_codec_peek_framed(const uint8_t *msg, size_t len, char *spec, size_t spec_cap, pz_shape *shape);

#endif
