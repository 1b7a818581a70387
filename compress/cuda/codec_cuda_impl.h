/* codec_cuda_impl.h: state and helpers shared by the GPU codec sources
 * (private to compress/cuda/). */
#ifndef PZ_CODEC_CUDA_IMPL_H
#define PZ_CODEC_CUDA_IMPL_H

#include "compress/cuda/cuda_common.h"

/* device scratch slots of one codec object */
enum { PZ_DB_PAYLOAD, PZ_DB_GROUP, PZ_DB_CODES, PZ_DB_WRAP_Y, PZ_DB_WRAP_C, PZ_DB_TOPK_A, PZ_DB_TOPK_B,
       PZ_DB_COUNT };
enum { PZ_WRAP_SIDE_SENDER = 0, PZ_WRAP_SIDE_RECEIVER = 1 };

/* status a kernel reports: flags bit 0 = input holds inf or NaN; first_bad =
 * the lowest failing group index (all ones: none) */
typedef struct {
    unsigned flags;
    unsigned pad_;
    unsigned long long first_bad;
} pz_dstat;

/* aq(): one side's buffers on the device, ids on the host */
typedef struct {
    int have;
    pz_shape shape;      /* row shape: dims[0] = 1 */
    size_t row;          /* floats per buffer */
    uint64_t *key;       /* id -> slot: open addressing, slot -1 = empty */
    int64_t *slot;
    size_t hcap, count;
    float *rows;         /* device: rows_cap buffers of `row` floats */
    size_t rows_cap;
} pz_aq_side;

/* per codec object (pz_codec_backend): device and host scratch, the device
 * state of ef() (e, sender) and ef21() (g, either side) */
typedef struct {
    void *d[PZ_DB_COUNT];
    size_t dcap[PZ_DB_COUNT];
    void *h;
    size_t hcap;
    pz_dstat *st;
    int have[2];
    pz_shape shape[2];
    float *v[2];
    pz_aq_side aq[2];
} pz_cstate;

pz_cstate *pz_cstate_of_(pz_codec *c);
void pz_cstate_free_(void *p);
pz_status pz_dgrow_(pz_cstate *s, int k, size_t bytes, void **out);
pz_status pz_hgrow_(pz_cstate *s, size_t bytes, void **out);
pz_status pz_stat_reset_(pz_cstate *s, cudaStream_t st);
pz_status pz_stat_get_(pz_cstate *s, cudaStream_t st, pz_dstat *h);

pz_status pz_cuda_base_encode_(pz_codec *c, const pz_codec_params *p, const float *x, const pz_shape *s,
                               const pz_codec_ctx *ctx, uint8_t *pl, size_t cap, size_t *len, cudaStream_t stream);
pz_status pz_cuda_base_decode_(pz_codec *c, const pz_codec_params *p, const uint8_t *pl, size_t len,
                               const pz_shape *s, float *out, cudaStream_t stream);
int pz_cuda_base_decodes_on_device_(const pz_codec_params *p);
/* decodes an inner message on the device and checks its shape (as wrappers.c) */
pz_status pz_cuda_decode_exact_(pz_codec *inner, const char *what, const uint8_t *msg, size_t len,
                                const pz_codec_ctx *ctx, float *out, const pz_shape *want, cudaStream_t stream);
/* ef_cuda.cu: c's outermost wrapper is ef or ef21 */
pz_status pz_cuda_ef_encode_(pz_codec *c, const float *x, const pz_shape *s, const pz_codec_ctx *ctx,
                             uint8_t *pl, size_t cap, size_t *len, cudaStream_t stream);
pz_status pz_cuda_ef_decode_(pz_codec *c, const uint8_t *pl, size_t len, const pz_shape *s,
                             const pz_codec_ctx *ctx, float *out, cudaStream_t stream);
/* hadamard_cuda.cu: c's outermost wrapper is hadamard */
pz_status pz_cuda_hd_encode_(pz_codec *c, const float *x, const pz_shape *s, const pz_codec_ctx *ctx, uint8_t *pl,
                             size_t cap, size_t *len, uint8_t *wflags, cudaStream_t stream);
pz_status pz_cuda_hd_decode_(pz_codec *c, uint8_t flags, const uint8_t *pl, size_t len, const pz_shape *s,
                             const pz_codec_ctx *ctx, float *out, cudaStream_t stream);
/* aq_cuda.cu */
pz_status pz_cuda_aq_encode_(pz_codec *c, const float *x, const pz_shape *s, const pz_codec_ctx *ctx, uint8_t *pl,
                             size_t cap, size_t *len, uint8_t *flags, cudaStream_t stream);
pz_status pz_cuda_aq_decode_(pz_codec *c, uint8_t flags, const uint8_t *pl, size_t len, const pz_shape *s,
                             const pz_codec_ctx *ctx, float *out, cudaStream_t stream);
void pz_cuda_aq_free_(pz_aq_side *a);
/* topk_cuda.cu */
pz_status pz_cuda_topk_encode_(pz_codec *c, const pz_codec_params *p, const float *x, const pz_shape *s,
                               uint8_t *pl, size_t cap, size_t *len, cudaStream_t stream);

#endif
