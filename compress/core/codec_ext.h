/* codec_ext.h: hooks for other backends of the codecs (private to compress/).
 *
 * The GPU path (compress/cuda/) computes payloads on the device but must write
 * the very message the CPU writes: header, +zstd stage and CRC come from the
 * same code in codec.c and message.c, which call back for the payload only. */
#ifndef PZ_CODEC_EXT_H
#define PZ_CODEC_EXT_H

#include "compress/core/codec_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the payload of c's message for this shape: a base codec's payload,
 * or a wrapper's payload and its header flags byte (*wflags, 0 for base
 * codecs) into payload[0..cap); sets *len. */
typedef pz_status (*pz_payload_encode_fn)(void *arg, pz_codec *c, const pz_shape *shape,
                                          const pz_codec_ctx *ctx, uint8_t *payload, size_t cap,
                                          size_t *len, uint8_t *wflags);
/* pz_codec_encode with the payload from fn (shape checks, header, +zstd, CRC
 * as pz_codec_encode). */
pz_status pz_codec_encode_with(pz_codec *c, const pz_shape *shape, const pz_codec_ctx *ctx, uint8_t *out,
                               size_t cap, size_t *len, pz_payload_encode_fn fn, void *arg);

/* Decodes a payload that every framework check passed (header, CRC, ids,
 * parameters, dims, out_cap, zstd frame, exact or maximum size): p = the
 * base parameters of the message, wflags = its wrapper flags byte. */
typedef pz_status (*pz_payload_decode_fn)(void *arg, pz_codec *c, const pz_codec_params *p, uint8_t wflags,
                                          const uint8_t *payload, size_t len, const pz_shape *shape,
                                          const pz_codec_ctx *ctx);
/* pz_codec_decode with the payload decoded by fn. */
pz_status pz_codec_decode_with(pz_codec *c, const uint8_t *msg, size_t len, const pz_codec_ctx *ctx,
                               size_t out_cap, pz_shape *shape, pz_payload_decode_fn fn, void *arg);

/* The outermost wrapper's table entry (its kind, name, ops), NULL for a
 * base codec. */
const pz_wrap_impl *pz_codec_wrap(const pz_codec *c);

/* Wrappers (compress/wrappers/wrappers.c; the GPU wrappers use them too): re-reports
 * the last error as "what: message", an inner SHAPE error as as_shape; and
 * after an inner decode, a failure or a shape other than want is a
 * malformed outer message named what. */
pz_status pz_wrap_rewrap(pz_status st, pz_status as_shape, const char *what);
pz_status pz_wrap_decoded(pz_status st, const char *what, const pz_shape *got, const pz_shape *want);
/* aq()'s checks of a message's batch, before any buffer changes: n floats
 * of shape s are dims[0] samples (*B rows of *row floats), ctx has their
 * sample ids, and the row shape is rows' (NULL before the side's first
 * message). Then the ids, sorted into ids[0..B), are distinct. */
pz_status pz_aq_check_batch(const pz_shape *s, size_t n, const pz_shape *rows, const pz_codec_ctx *ctx,
                            size_t *B, size_t *row);
pz_status pz_aq_check_distinct(const pz_codec_ctx *ctx, size_t B, uint64_t *ids);
/* aq(): the two messages of a payload, warm-up samples (their own random
 * stream, seed ^ PZ_AQ_WARMUP_SALT) and deltas: ctx and shape of each, with
 * sample_ids NULL and the sample count (nw, nd) as dims[0]. */
void pz_aq_parts(const pz_codec_ctx *ctx, const pz_shape *shape, size_t nw, size_t nd, pz_codec_ctx *cw,
                 pz_codec_ctx *cd, pz_shape *sw, pz_shape *sd);
/* Parameters of the (innermost) base codec. */
const pz_codec_params *pz_codec_base_params(const pz_codec *c);
/* Whether the spec ends in +zstd. */
int pz_codec_has_zstd(const pz_codec *c);
/* A wrapper's inner codec (NULL for base codecs). */
pz_codec *pz_codec_inner(pz_codec *c);
/* A wrapper codec's wrapper object (NULL for base codecs). */
pz_wrapper *pz_codec_wrapper(pz_codec *c);
/* aq(): the warm-up codec (NULL otherwise); its random stream is the ctx's
 * with seed ^ PZ_AQ_WARMUP_SALT (compress/wrappers/wrap_elem.h). */
pz_codec *pz_codec_warm(pz_codec *c);

/* State of another backend kept with the codec object (freed with it by
 * free_fn); NULL until set. */
void *pz_codec_backend(const pz_codec *c);
void pz_codec_set_backend(pz_codec *c, void *state, void (*free_fn)(void *));

/* nuq.c: the Elias stream of n b-bit nuq codes, as nuq's encoder writes it
 * after the norms; returns the bytes written (out holds the payload bound). */
size_t pz_nuq_elias_stream(const uint8_t *codes, size_t n, int b, uint8_t *out);

/* topk.c: segments, segment length and elements kept per segment for this
 * shape (errors as topk's encoder reports them). */
pz_status pz_topk_geometry(const pz_codec_params *p, const pz_shape *s, size_t *nseg, size_t *L, size_t *k);

#ifdef __cplusplus
}
#endif

#endif
