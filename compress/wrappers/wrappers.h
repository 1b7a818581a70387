/* wrappers.h: stateful codecs around a base codec (private to compress/).
 *
 *  ef(C)   error feedback (sender state): y = x + e; send C(y); e = y - C(y).
 *          The receiver decodes C's message as is.
 *  ef21(C) EF21 (state on both sides): both keep g; send C(x - g);
 *          both set g += decode(msg); the receiver outputs g.
 *  aq(C)   AQ-SGD (state on both sides): a buffer m(id) per sample id, one
 *          row of numel/dims[0] floats. First time an id is seen: send it at
 *          full precision (or the warm-up codec) and set m(id) = that value;
 *          afterwards send C(x - m(id)) and both set m(id) += decode(msg),
 *          outputting m(id). Buffers live in memory up to a limit, then in a
 *          file mapped with mmap. Sender and receiver buffers stay bitwise
 *          equal because both add the same decoded values in the same order.
 *
 * (hadamard(C), a stateless rotation, is compress/wrappers/hadamard.c; it shares the
 * wrapper object, compress/wrappers/wrapper_priv.h, and these functions.)
 * Each is an entry of the wrapper table (codec_impl.h, pz_wrap_ef/ef21/aq):
 * the framework (codec.c) parses "name(inner[,options])" through it and
 * writes the message header around the wrapper's payload; the payload is one
 * or more complete inner messages, and `flags` (one byte in the header)
 * tells the decoder how to read them. The functions below are the same
 * objects made without a spec (tests, introspection). */
#ifndef PZ_WRAPPERS_H
#define PZ_WRAPPERS_H

#include "compress/core/codec_impl.h"   /* pz_wrap_kind, pz_wrapper */

typedef struct {
    /* aq: codec spec for the first sight of an id (default "fp32"),
     * bytes of buffers kept in memory before spilling to a file (default 1 GiB),
     * directory for the spill file (default $TMPDIR or /tmp) */
    const char *warmup_spec;
    size_t mem_limit;
    const char *spill_dir;
} pz_wrap_opts;

/* Takes ownership of inner, also when it fails (inner is then freed).
 * opts may be NULL (defaults); mem_limit 0 means the default. ef and ef21
 * take no options (mem_limit may be 0 or the default). */
pz_status pz_wrapper_create(pz_wrap_kind kind, const pz_wrap_opts *opts, pz_codec *inner,
                            pz_wrapper **out);
void pz_wrapper_free(pz_wrapper *w);
/* Canonical spec, e.g. "aq(q4:...)" with non-default options spelled out. */
const char *pz_wrapper_spec(const pz_wrapper *w);
/* The inner codec (owned by the wrapper). */
pz_codec *pz_wrapper_inner(pz_wrapper *w);
/* aq: the warm-up codec (owned by the wrapper); NULL for ef, ef21. */
pz_codec *pz_wrapper_warm(pz_wrapper *w);

size_t pz_wrapper_max_payload(const pz_wrapper *w, const pz_shape *shape);
pz_status pz_wrapper_encode(pz_wrapper *w, const float *x, const pz_shape *shape,
                            const pz_codec_ctx *ctx, uint8_t *payload, size_t cap,
                            size_t *len, uint8_t *flags);
pz_status pz_wrapper_decode(pz_wrapper *w, uint8_t flags, const uint8_t *payload, size_t len,
                            const pz_shape *shape, const pz_codec_ctx *ctx, float *out);
/* Bytes held, for the memory report: returns the bytes in memory (state,
 * aq's id table and chunk table, scratch buffers); *file_bytes (if not NULL)
 * gets the length of aq's spill file (0 for ef, ef21). */
size_t pz_wrapper_state_bytes(const pz_wrapper *w, size_t *file_bytes);

/* ---- introspection (tests, debugging, sync checks) ----------------------
 * One wrapper object keeps its sender state and its receiver state apart, so
 * the same object may encode, decode, or both (a loopback such as the CLI). */
typedef enum { PZ_WRAP_SENDER = 0, PZ_WRAP_RECEIVER = 1 } pz_wrap_role;
/* ef: the sender's residual e (the receiver has none); ef21: that side's g;
 * *n floats, NULL (and *n = 0) before the first message. aq: NULL, *n = 0. */
const float *pz_wrapper_vector(const pz_wrapper *w, pz_wrap_role role, size_t *n);
/* aq: number of sample ids that side holds a buffer for (0 for ef, ef21). */
size_t pz_wrapper_aq_count(const pz_wrapper *w, pz_wrap_role role);
/* aq: the i-th buffer (0 <= i < count, in order of first sight), its id and
 * row length; NULL when i is out of range. */
const float *pz_wrapper_aq_slot(const pz_wrapper *w, pz_wrap_role role, size_t i, uint64_t *id,
                                size_t *row_len);
/* aq: the buffer m(id), or NULL when that side never saw id. */
const float *pz_wrapper_aq_find(const pz_wrapper *w, pz_wrap_role role, uint64_t id);
/* A 64-bit digest of one side's state (ef, ef21: the vector; aq: every
 * (id, m(id)) pair, independent of slot order). Sender and receiver digests
 * are equal exactly when their states are bitwise equal (up to hash
 * collisions): a cheap check that the two ends of an edge are in sync. */
uint64_t pz_wrapper_state_digest(const pz_wrapper *w, pz_wrap_role role);

/* ---- restoring state (checkpoints) ---------------------------------------- */
/* The shape a side fixed with its first message (aq: the row's, dims[0] =
 * 1), NULL before it. */
const pz_shape *pz_wrapper_side_shape(const pz_wrapper *w, pz_wrap_role role);
/* ef, ef21: sets an empty side's vector (shape and data, as saved). */
pz_status pz_wrapper_restore_vector(pz_wrapper *w, pz_wrap_role role, const pz_shape *shape, const float *data);
/* aq: adds the buffer m(id) = row to a side (row_shape has dims[0] = 1 and
 * must match the side's); an id already held is an error. */
pz_status pz_wrapper_restore_aq(pz_wrapper *w, pz_wrap_role role, const pz_shape *row_shape, uint64_t id,
                                const float *row);

#endif
