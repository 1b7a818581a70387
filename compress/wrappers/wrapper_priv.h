/* wrapper_priv.h: the wrapper object that compress/wrappers/wrappers.c (ef, ef21,
 * aq) and compress/wrappers/hadamard.c share (private to those files and
 * codec_state.c's callers through wrappers.h). */
#ifndef PZ_WRAPPER_PRIV_H
#define PZ_WRAPPER_PRIV_H

#include "compress/wrappers/aq_store.h"
#include "compress/core/codec_impl.h"

typedef struct {
    int have;         /* shape fixed by a first successful message */
    pz_shape shape;   /* ef, ef21: the tensor's; aq: dims[0] = 1, the row's */
    float *v;         /* ef (sender): e; ef21: g */
    aq_store store;   /* aq */
} wrap_side;

struct pz_wrapper {
    pz_wrap_kind kind;
    const char *name;
    const pz_wrap_impl *impl;
    pz_codec *inner;
    pz_codec *warm;   /* aq */
    size_t mem_limit; /* aq */
    char *spill_dir;  /* aq, NULL = default */
    char *spec;
    wrap_side side[2];
    /* scratch, reused across calls */
    float *f[2];
    size_t f_cap[2];
    uint64_t *ids;
    int64_t *slots;
    size_t ids_cap;
    /* hadamard: block= (0: the default for the shape) and the cached signs
     * of hd_signs_n channels for the stream key hd_key */
    uint32_t hd_block;
    float *hd_signs;
    size_t hd_signs_n;
    uint64_t hd_key;
};

/* wrappers.c, for hadamard.c too: the shape's numel with its checks;
 * scratch buffer k (0 or 1) of n floats, reused across calls; an inner
 * message decoded into out (numel(want) floats) whose shape must be want,
 * any failure a malformed outer message named what. */
pz_status pz_wrap_check_shape(const char *name, const pz_shape *s, size_t *numel);
pz_status pz_wrap_scratch(pz_wrapper *w, int k, size_t n, float **out);
/* w->ids and w->slots with room for n entries (aq.c) */
pz_status pz_wrap_scratch_ids(pz_wrapper *w, size_t n);
/* Bytes of state and scratch a wrapper may hold for one tensor of shape
 * (ef, ef21: the state vector and two scratch tensors; aq: its in-memory
 * rows, mem=, and the same scratch) */
size_t pz_wrapper_state_bound(const pz_wrapper *w, const pz_shape *shape);
/* aq's mem= when none is given */
#define PZ_AQ_DEFAULT_MEM ((size_t)1 << 30)
/* the table entries every wrapper of wrappers.c and aq.c shares */
#define PZ_WRAP_COMMON_OPS                                                                                 \
    .free = pz_wrapper_free, .spec = pz_wrapper_spec, .inner = pz_wrapper_inner, .warmup = pz_wrapper_warm, \
    .max_payload = pz_wrapper_max_payload, .state_bytes = pz_wrapper_state_bytes, .state_bound = pz_wrapper_state_bound
pz_status pz_wrap_decode_exact(pz_codec *c, const char *what, const uint8_t *msg, size_t len,
                               const pz_codec_ctx *ctx, float *out, const pz_shape *want);

#endif
