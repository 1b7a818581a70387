/* aq_cuda.cu: aq() with its per-sample buffers in device memory.
 *
 * Same messages and checks as wrappers.c's aq (payload: bitmap when mixed,
 * u64 length + warm-up message, u64 length + delta message; warm-up stream
 * seeded with seed ^ PZ_AQ_WARMUP_SALT; ids from ctx->sample_ids, distinct
 * within a message; row shape fixed by each side's first message; every check
 * before any buffer changes). The id -> buffer table lives on the host (ids
 * come from the host), the buffers m(id) on the device: one IEEE add per
 * element m + d, as on the CPU, so a CPU and a GPU side of an edge keep
 * bitwise equal buffers. Device memory holds every buffer: the mem= and
 * spill= options (spilling to an mmap'ed file) apply to the CPU path only. */
#include "compress/cuda/codec_cuda_impl.h"
#include "compress/wrappers/wrap_elem.h"
#include "base/bytes.h"
#include "base/mem.h"

#define TPB 256

void pz_cuda_aq_free_(pz_aq_side *a) {
    free(a->key);
    free(a->slot);
    cudaFree(a->rows);
    memset(a, 0, sizeof *a);
}

static int64_t aq_find(const pz_aq_side *a, uint64_t id) {
    if (!a->hcap) return -1;
    for (size_t h = (size_t)pz_mix64(id) & (a->hcap - 1);; h = (h + 1) & (a->hcap - 1)) {
        if (a->slot[h] < 0) return -1;
        if (a->key[h] == id) return a->slot[h];
    }
}

static void aq_put(pz_aq_side *a, uint64_t id, int64_t slot) {
    size_t h = (size_t)pz_mix64(id) & (a->hcap - 1);
    while (a->slot[h] >= 0) h = (h + 1) & (a->hcap - 1);
    a->key[h] = id;
    a->slot[h] = slot;
}

/* room for n more ids: table and device rows (contents kept) */
static pz_status aq_reserve(pz_aq_side *a, size_t n, cudaStream_t stream) {
    size_t want = a->count + n;
    if (2 * want >= a->hcap) {
        size_t cap = a->hcap ? a->hcap : 64;
        while (2 * want >= cap) cap *= 2;
        uint64_t *key = (uint64_t *)malloc(cap * sizeof *key);
        int64_t *slot = (int64_t *)malloc(cap * sizeof *slot);
        if (!key || !slot) {
            free(key);
            free(slot);
            return pz_fail(PZ_ERR_NOMEM, "aq: cannot allocate the id table for %zu ids", want);
        }
        for (size_t i = 0; i < cap; i++) slot[i] = -1;
        pz_aq_side old = *a;
        a->key = key;
        a->slot = slot;
        a->hcap = cap;
        for (size_t i = 0; i < old.hcap; i++)
            if (old.slot[i] >= 0) aq_put(a, old.key[i], old.slot[i]);
        free(old.key);
        free(old.slot);
    }
    if (want > a->rows_cap) {
        size_t cap = a->rows_cap ? a->rows_cap : 16;
        while (cap < want) cap *= 2;
        float *rows = NULL;
        size_t nf = cap * a->row;
        PZ_CU(cudaMalloc((void **)&rows, (nf > 0 ? nf : 1) * sizeof(float)));
        if (a->count)
            PZ_CU(cudaMemcpyAsync(rows, a->rows, a->count * a->row * sizeof(float), cudaMemcpyDeviceToDevice, stream));
        PZ_CU(cudaStreamSynchronize(stream));
        if (a->rows) PZ_CU(cudaFree(a->rows));
        a->rows = rows;
        a->rows_cap = cap;
    }
    return PZ_OK;
}

/* wrappers.c's checks (shape, ids, row shape); slot[i] of every sample */
static pz_status aq_check(pz_aq_side *a, const pz_shape *s, const pz_codec_ctx *ctx, size_t *B, size_t *row,
                          int64_t **slots) {
    pz_status st = pz_aq_check_batch(s, pz_shape_numel(s), a->have ? &a->shape : NULL, ctx, B, row);
    if (st) return st;
    void *vi, *vs;   /* the sorted ids; slot, dst row, warm flag of each */
    if (!pz_calloc_pair(&vi, sizeof(uint64_t), &vs, 3 * sizeof(int64_t), *B))
        return pz_fail(PZ_ERR_NOMEM, "aq: cannot allocate scratch for %zu ids", *B);
    int64_t *sl = (int64_t *)vs;
    st = pz_aq_check_distinct(ctx, *B, (uint64_t *)vi);
    free(vi);
    if (st) {
        free(sl);
        return st;
    }
    for (size_t i = 0; i < *B; i++) sl[i] = a->have ? aq_find(a, ctx->sample_ids[i]) : -1;
    *slots = sl;
    return PZ_OK;
}

/* W rows: x of the warm-up samples; D rows: x - m(id) of the others */
__global__ void k_aq_gather(const float *x, size_t B, size_t row, const int64_t *slot, const int64_t *dst,
                            const int64_t *warm, const float *M, float *W, float *D) {
    size_t n = B * row;
    PZ_GRID_STRIDE(t, n) {
        size_t i = t / row, e = t % row;
        size_t o = (size_t)dst[i] * row + e;
        if (warm[i]) W[o] = x[t];
        else D[o] = pz_aq_delta(x[t], M[(size_t)slot[i] * row + e]);
    }
}

/* m(id) = W row (warm-up) or m(id) + D row; out (may be NULL) = m(id) */
__global__ void k_aq_apply(const float *W, const float *D, float *M, float *out, size_t B, size_t row,
                           const int64_t *slot, const int64_t *dst, const int64_t *warm) {
    size_t n = B * row;
    PZ_GRID_STRIDE(t, n) {
        size_t i = t / row, e = t % row;
        size_t o = (size_t)dst[i] * row + e;
        float *m = M + (size_t)slot[i] * row + e;
        float v = warm[i] ? W[o] : pz_aq_update(*m, D[o]);
        *m = v;
        if (out) out[t] = v;
    }
}

/* slots for the new warm-up ids (in sample order), the per-sample table to
 * the device, the buffers updated */
static pz_status aq_commit(pz_cstate *cs, pz_aq_side *a, const pz_shape *s, size_t B, size_t row,
                           const uint64_t *ids, int64_t *sl, size_t n_new, const float *W, const float *D,
                           float *out, cudaStream_t stream) {
    int fresh = !a->have;
    if (fresh) {
        a->row = row;
        a->shape = *s;
        a->shape.dims[0] = 1;
    }
    pz_status st = aq_reserve(a, n_new, stream);
    if (st) {
        if (fresh) pz_cuda_aq_free_(a);
        return st;
    }
    a->have = 1;
    int64_t *slot = sl, *warm = sl + 2 * B;
    for (size_t i = 0; i < B; i++)
        if (warm[i] && slot[i] < 0) {
            slot[i] = (int64_t)a->count;
            aq_put(a, ids[i], slot[i]);
            a->count++;
        }
    void *dd;
    if ((st = pz_dgrow_(cs, PZ_DB_TOPK_B, B * 3 * sizeof(int64_t), &dd))) return st;
    int64_t *d = (int64_t *)dd;
    PZ_CU(cudaMemcpyAsync(d, sl, B * 3 * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
    k_aq_apply<<<pz_blocks(B * row, TPB), TPB, 0, stream>>>(W, D, a->rows, out, B, row, d, d + B, d + 2 * B);
    PZ_CU_LAUNCH();
    PZ_CU(cudaStreamSynchronize(stream));
    return PZ_OK;
}


/* device scratch for the W and D rows */
static pz_status aq_scratch(pz_cstate *cs, size_t nw, size_t nd, size_t row, float **W, float **D) {
    void *vw, *vd;
    pz_status st = pz_dgrow_(cs, PZ_DB_WRAP_Y, nw * row * sizeof(float), &vw);
    if (!st) st = pz_dgrow_(cs, PZ_DB_WRAP_C, nd * row * sizeof(float), &vd);
    if (st) return st;
    *W = (float *)vw;
    *D = (float *)vd;
    return PZ_OK;
}

pz_status pz_cuda_aq_encode_(pz_codec *c, const float *x, const pz_shape *s, const pz_codec_ctx *ctx, uint8_t *pl,
                             size_t cap, size_t *len, uint8_t *flags, cudaStream_t stream) {
    pz_cstate *cs = pz_cstate_of_(c);
    pz_aq_side *a = &cs->aq[PZ_WRAP_SIDE_SENDER];
    pz_codec *warm_c = pz_codec_warm(c), *inner = pz_codec_inner(c);
    size_t B, row;
    int64_t *sl = NULL;
    pz_status st = aq_check(a, s, ctx, &B, &row, &sl);
    if (st) return st;
    size_t nw = 0;
    for (size_t i = 0; i < B; i++) {
        int w = sl[i] < 0;
        sl[B + i] = (int64_t)(w ? nw : i - nw);   /* row in W or D */
        sl[2 * B + i] = w;
        nw += (size_t)w;
    }
    size_t nd = B - nw;
    float *W, *D;
    void *dd;
    if ((st = aq_scratch(cs, nw, nd, row, &W, &D)) || (st = pz_dgrow_(cs, PZ_DB_TOPK_B, B * 3 * 8, &dd))) {
        free(sl);
        return st;
    }
    int64_t *d = (int64_t *)dd;
#define AQ_CU(call)                                                                                  \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            free(sl);                                                                                \
            return pz_fail(PZ_ERR_IO, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
        }                                                                                            \
    } while (0)
    AQ_CU(cudaMemcpyAsync(d, sl, B * 3 * 8, cudaMemcpyHostToDevice, stream));
    k_aq_gather<<<pz_blocks(B * row, TPB), TPB, 0, stream>>>(x, B, row, d, d + B, d + 2 * B, a->rows, W, D);
    AQ_CU(cudaGetLastError());
    unsigned fl = (nw ? PZ_AQ_HAS_WARMUP : 0) | (nd ? PZ_AQ_HAS_DELTA : 0);
    size_t pos = 0;
    if (fl == PZ_AQ_MIXED) {
        size_t nb = (B + 7) / 8;
        if (cap < nb) {
            free(sl);
            return pz_fail(PZ_ERR_SHAPE, "aq: output buffer of %zu bytes is too small", cap);
        }
        memset(pl, 0, nb);
        for (size_t i = 0; i < B; i++)
            if (sl[2 * B + i]) pz_aq_mark_warmup(pl, i);
        pos = nb;
    }
    pz_codec_ctx cw, cd;
    pz_shape sw, sd;
    pz_aq_parts(ctx, s, nw, nd, &cw, &cd, &sw, &sd);
    size_t at[2] = {0, 0}, ln[2] = {0, 0};
    for (int part = 0; part < 2 && !st; part++) {
        if (!(fl & (1 << part))) continue;
        if (cap - pos < 8) {
            st = pz_fail(PZ_ERR_SHAPE, "aq: output buffer of %zu bytes is too small", cap);
            break;
        }
        at[part] = pos + 8;
        st = part == 0 ? pz_codec_encode_cuda(warm_c, W, &sw, &cw, pl + at[part], cap - at[part], &ln[part], stream)
                       : pz_codec_encode_cuda(inner, D, &sd, &cd, pl + at[part], cap - at[part], &ln[part], stream);
        if (st) st = pz_wrap_rewrap(st, PZ_ERR_SHAPE, part == 0 ? "aq: warm-up message" : "aq: delta message");
        else {
            pz_put_u64(pl + pos, ln[part]);
            pos = at[part] + ln[part];
        }
    }
    /* what the receiver will decode, decoded in place of the inputs */
    if (!st && nw) st = pz_cuda_decode_exact_(warm_c, "aq: own warm-up message", pl + at[0], ln[0], &cw, W, &sw, stream);
    if (!st && nd) st = pz_cuda_decode_exact_(inner, "aq: own delta message", pl + at[1], ln[1], &cd, D, &sd, stream);
    if (!st) st = aq_commit(cs, a, s, B, row, ctx->sample_ids, sl, nw, W, D, NULL, stream);
    free(sl);
    if (st) return st;
    *len = pos;
    *flags = (uint8_t)fl;
    return PZ_OK;
#undef AQ_CU
}

pz_status pz_cuda_aq_decode_(pz_codec *c, uint8_t flags, const uint8_t *pl, size_t len, const pz_shape *s,
                             const pz_codec_ctx *ctx, float *out, cudaStream_t stream) {
    pz_cstate *cs = pz_cstate_of_(c);
    pz_aq_side *a = &cs->aq[PZ_WRAP_SIDE_RECEIVER];
    pz_codec *warm_c = pz_codec_warm(c), *inner = pz_codec_inner(c);
    size_t B, row;
    int64_t *sl = NULL;
    pz_status st = aq_check(a, s, ctx, &B, &row, &sl);
    if (st) return st;
    size_t pos = 0, nw = 0;
    const uint8_t *bitmap = NULL;
    if (flags == 0 || flags > PZ_AQ_MIXED) st = pz_fail(PZ_ERR_FORMAT, "aq: bad flags 0x%02x", flags);
    if (!st && flags == PZ_AQ_MIXED) {
        size_t nb = (B + 7) / 8;
        if (len < nb) {
            st = pz_fail(PZ_ERR_FORMAT, "aq: truncated payload (%zu bytes, bitmap needs %zu)", len, nb);
        } else {
            bitmap = pl;
            for (size_t i = 0; i < B; i++) nw += (bitmap[i / 8] >> (i % 8)) & 1;
            if (B % 8 && bitmap[nb - 1] >> (B % 8)) st = pz_fail(PZ_ERR_FORMAT, "aq: bitmap padding bits are set");
            else if (nw == 0 || nw == B)
                st = pz_fail(PZ_ERR_FORMAT, "aq: bitmap marks %zu of %zu samples warm-up with flags 3", nw, B);
            pos = nb;
        }
    }
    if (!st && flags == PZ_AQ_HAS_WARMUP) nw = B;
    size_t nd = B - nw;
    size_t at[2] = {0, 0}, ln[2] = {0, 0};
    for (int part = 0; part < 2 && !st; part++) {
        if (!(flags & (1 << part))) continue;
        if (len - pos < 8) {
            st = pz_fail(PZ_ERR_FORMAT, "aq: truncated payload (%zu bytes)", len);
            break;
        }
        uint64_t l = pz_get_u64(pl + pos);
        if (l > len - pos - 8) {
            st = pz_fail(PZ_ERR_FORMAT, "aq: %s message of %llu bytes overruns the payload (%zu bytes)",
                         part ? "delta" : "warm-up", (unsigned long long)l, len);
            break;
        }
        at[part] = pos + 8;
        ln[part] = (size_t)l;
        pos = at[part] + ln[part];
    }
    if (!st && pos != len) st = pz_fail(PZ_ERR_FORMAT, "aq: %zu trailing bytes after the last message", len - pos);
    size_t n_new = 0;
    for (size_t i = 0, j = 0, k = 0; i < B && !st; i++) {
        int w = pz_aq_is_warmup(flags, bitmap, i);
        sl[B + i] = (int64_t)(w ? j++ : k++);
        sl[2 * B + i] = w;
        if (w) n_new += sl[i] < 0;
        else if (sl[i] < 0)
            st = pz_fail(PZ_ERR_FORMAT, "aq: sample %zu (id %llu) is sent as a delta but the receiver "
                         "holds no buffer for it (sender and receiver out of sync)", i,
                         (unsigned long long)ctx->sample_ids[i]);
    }
    float *W = NULL, *D = NULL;
    if (!st) st = aq_scratch(cs, nw, nd, row, &W, &D);
    pz_codec_ctx cw, cd;
    pz_shape sw, sd;
    pz_aq_parts(ctx, s, nw, nd, &cw, &cd, &sw, &sd);
    if (!st && nw) st = pz_cuda_decode_exact_(warm_c, "aq: warm-up message", pl + at[0], ln[0], &cw, W, &sw, stream);
    if (!st && nd) st = pz_cuda_decode_exact_(inner, "aq: delta message", pl + at[1], ln[1], &cd, D, &sd, stream);
    if (!st) st = aq_commit(cs, a, s, B, row, ctx->sample_ids, sl, n_new, W, D, out, stream);
    free(sl);
    return st;
}
