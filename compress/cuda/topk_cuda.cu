/* topk_cuda.cu: topk's encoder with the tensor on the device.
 *
 * The selection is exact (the k largest |x| of each segment, ties to the
 * lower index), so any exact method gives topk.c's set; here one thread block
 * per segment:
 *   1. radix select of T, the k-th largest magnitude key (|x| bits: -0 ==
 *      +0, inf above every finite value, NaN above inf, as kselect.h): four
 *      passes of 8 bits, a shared-memory histogram of the candidates that
 *      match the digits chosen so far, no sort; the same pass also finds the
 *      segment's largest key (q8's scale);
 *   2. one ordered pass over the segment in tiles of the block size with two
 *      block-wide prefix sums: keeps key > T and the first (k - #above) keys
 *      == T, writes index and value at their rank (ascending index order)
 *      and sets the bitmap bit;
 *   3. values converted (fp16: pz_f32_to_f16; q8: pz_topk_q8 with
 *      pz_topk_q8_inv of the segment's largest |x|, elem_codecs.h) and the
 *      varint length of every index gap summed.
 * The host chooses the index coding by topk's rule (varints iff shorter than
 * the bitmap), copies values and bitmap back, or the indices and writes the
 * varints itself with bitpack.c's writer. */
#include "compress/cuda/codec_cuda_impl.h"

#define TK_THREADS 512

/* block-wide exclusive prefix sum of v (blockDim.x = TK_THREADS); *total
 * gets the block's sum. sh holds TK_THREADS/32 + 1 ints. */
__device__ static unsigned block_scan(unsigned v, unsigned *sh, unsigned *total) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned inc = v;
    for (int o = 1; o < 32; o <<= 1) {
        unsigned t = __shfl_up_sync(PZ_FULL_MASK, inc, o);
        if (lane >= o) inc += t;
    }
    if (lane == 31) sh[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        unsigned w = lane < TK_THREADS / 32 ? sh[lane] : 0u;
        unsigned wi = w;
        for (int o = 1; o < 32; o <<= 1) {
            unsigned t = __shfl_up_sync(PZ_FULL_MASK, wi, o);
            if (lane >= o) wi += t;
        }
        if (lane < TK_THREADS / 32) sh[lane] = wi - w;   /* exclusive warp offsets */
        if (lane == TK_THREADS / 32 - 1) sh[TK_THREADS / 32] = wi;
    }
    __syncthreads();
    unsigned r = inc - v + sh[warp];
    *total = sh[TK_THREADS / 32];
    __syncthreads();
    return r;
}

__device__ static inline uint32_t abs_key(float f) { return pz_f2u(f) & 0x7fffffffu; }

__global__ void k_topk_select(const float *x, size_t L, size_t k, uint32_t *kidx, float *kval, uint32_t *segmax,
                              uint32_t *bitmap) {
    __shared__ unsigned hist[256];
    __shared__ unsigned sh[TK_THREADS / 32 + 1];
    __shared__ uint32_t s_prefix, s_need, s_max;
    size_t sg = blockIdx.x;
    const float *xs = x + sg * L;
    if (threadIdx.x == 0) {
        s_prefix = 0;
        s_need = (uint32_t)k;
        s_max = 0;
    }
    uint32_t mask = 0;
    for (int pass = 0; pass < 4; pass++) {
        int shift = 24 - 8 * pass;
        for (int d = threadIdx.x; d < 256; d += blockDim.x) hist[d] = 0;
        __syncthreads();
        uint32_t prefix = s_prefix, m = 0;
        for (size_t i = threadIdx.x; i < L; i += blockDim.x) {
            uint32_t key = abs_key(xs[i]);
            if (pass == 0) m = max(m, key);
            if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
        }
        if (pass == 0) atomicMax(&s_max, m);
        __syncthreads();
        if (threadIdx.x == 0) {
            uint32_t need = s_need, cum = 0;
            int d = 255;
            for (; d > 0; d--) {
                if (cum + hist[d] >= need) break;
                cum += hist[d];
            }
            s_need = need - cum;   /* rank of T among the keys with this digit */
            s_prefix = prefix | ((uint32_t)d << shift);
        }
        mask |= 255u << shift;
        __syncthreads();
    }
    uint32_t T = s_prefix;
    unsigned ties = s_need;   /* keys == T to keep, lowest index first */
    if (threadIdx.x == 0) segmax[sg] = s_max;
    size_t out = sg * k;
    unsigned taken = 0, ties_seen = 0;
    for (size_t t0 = 0; t0 < L; t0 += blockDim.x) {
        size_t i = t0 + threadIdx.x;
        float v = 0.0f;
        uint32_t key = 0;
        unsigned gt = 0, eq = 0;
        if (i < L) {
            v = xs[i];
            key = abs_key(v);
            gt = key > T;
            eq = key == T;
        }
        unsigned teq, tgt;
        unsigned eq_before = block_scan(eq, sh, &teq);
        unsigned take = gt | (eq & (ties_seen + eq_before < ties ? 1u : 0u));
        unsigned pos = block_scan(take, sh, &tgt);
        if (take) {
            uint32_t gi = (uint32_t)(sg * L + i);
            kidx[out + taken + pos] = gi;
            kval[out + taken + pos] = v;
            atomicOr(bitmap + gi / 32, 1u << (gi % 32));
        }
        taken += tgt;
        ties_seen += teq;
        if (taken >= k) break;   /* uniform: every thread sees the same totals */
    }
}

/* values into the payload, and the varint length of every index gap */
__global__ void k_topk_values(const uint32_t *kidx, const float *kval, size_t K, size_t k, int mode,
                              const uint32_t *segmax, uint8_t *vals, unsigned long long *V, pz_dstat *st) {
    unsigned long long acc = 0;
    PZ_GRID_STRIDE(j, K) {
        float v = kval[j];
        if (mode == PZ_VALUES_FP32) {
            memcpy(vals + 4 * j, &v, 4);
        } else if (mode == PZ_VALUES_FP16) {
            uint16_t h = pz_f32_to_f16(v);
            memcpy(vals + 2 * j, &h, 2);
        } else {
            uint32_t mk = segmax[j / k];
            if (mk >= 0x7f800000u) atomicOr(&st->flags, 1u);
            int8_t q = pz_topk_q8(v, pz_topk_q8_inv(pz_u2f(mk)));
            vals[j] = (uint8_t)q;
        }
        uint32_t d = j ? kidx[j] - kidx[j - 1] - 1 : kidx[0];
        acc += 1u + (d >= (1u << 7)) + (d >= (1u << 14)) + (d >= (1u << 21)) + (d >= (1u << 28));
    }
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(PZ_FULL_MASK, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(V, acc);
}

pz_status pz_cuda_topk_encode_(pz_codec *c, const pz_codec_params *p, const float *x, const pz_shape *s,
                               uint8_t *pl, size_t cap, size_t *len, cudaStream_t stream) {
    size_t nseg, L, k;
    pz_status st = pz_topk_geometry(p, s, &nseg, &L, &k);
    if (st) return st;
    size_t n = nseg * L, K = nseg * k, bitmap = (n + 7) / 8;
    size_t vb = p->value_mode == PZ_VALUES_FP32 ? 4 : p->value_mode == PZ_VALUES_FP16 ? 2 : 1;
    size_t nscale = (p->value_mode == PZ_VALUES_Q8 && K > 0) ? nseg : 0;
    size_t fixed = 1 + 4 * nscale + K * vb;
    if (cap < fixed) return pz_fail(PZ_ERR_ARG, "topk: payload buffer of %zu bytes too small", cap);
    if (K == 0) {
        if (cap < 1 + bitmap) return pz_fail(PZ_ERR_ARG, "topk: payload buffer too small");
        pl[0] = 0;
        memset(pl + 1, 0, bitmap);
        *len = 1 + bitmap;
        return PZ_OK;
    }
    if (nseg > 0x7fffffffu) return pz_fail(PZ_ERR_SHAPE, "topk (cuda): %zu segments, at most 2^31-1", nseg);
    pz_cstate *cs = pz_cstate_of_(c);
    void *va, *vp;
    size_t words = (n + 31) / 32;
    /* A: kidx (K u32), kval (K f32), segmax (nseg u32), V (u64) */
    if ((st = pz_dgrow_(cs, PZ_DB_TOPK_A, 8 * K + 4 * nseg + 16, &va))) return st;
    /* payload staging: scales and values, then the bitmap as u32 words */
    size_t vbytes = 4 * nscale + K * vb, voff = (vbytes + 15) / 16 * 16;
    if ((st = pz_dgrow_(cs, PZ_DB_PAYLOAD, voff + 4 * words, &vp))) return st;
    uint32_t *kidx = (uint32_t *)va;
    float *kval = (float *)(kidx + K);
    uint32_t *segmax = (uint32_t *)(kval + K);
    unsigned long long *V = (unsigned long long *)((uint8_t *)va + (8 * K + 4 * nseg + 7) / 8 * 8);
    uint8_t *pay = (uint8_t *)vp;
    uint32_t *bm = (uint32_t *)(pay + voff);
    if ((st = pz_stat_reset_(cs, stream))) return st;
    PZ_CU(cudaMemsetAsync(bm, 0, 4 * words, stream));
    PZ_CU(cudaMemsetAsync(V, 0, sizeof *V, stream));
    k_topk_select<<<(unsigned)nseg, TK_THREADS, 0, stream>>>(x, L, k, kidx, kval, segmax, bm);
    PZ_CU_LAUNCH();
    k_topk_values<<<pz_blocks(K, 256), 256, 0, stream>>>(kidx, kval, K, k, p->value_mode, segmax, pay + 4 * nscale,
                                                         V, cs->st);
    PZ_CU_LAUNCH();
    pz_dstat ds;
    unsigned long long hV = 0;
    PZ_CU(cudaMemcpyAsync(&hV, V, sizeof hV, cudaMemcpyDeviceToHost, stream));
    if ((st = pz_stat_get_(cs, stream, &ds))) return st;
    if (ds.flags & 1u) return pz_fail(PZ_ERR_ARG, "topk: non-finite value with values=q8");
    int varints = hV < bitmap;
    size_t total = fixed + (varints ? (size_t)hV : bitmap);
    if (total > cap)
        return pz_fail(PZ_ERR_ARG, "topk: payload buffer of %zu bytes too small (up to %zu needed)", cap,
                       fixed + bitmap);
    pl[0] = (uint8_t)varints;
    if (nscale) {
        /* q8 scales: the segments' largest |x| as fp32 */
        PZ_CU(cudaMemcpyAsync(pl + 1, segmax, 4 * nseg, cudaMemcpyDeviceToHost, stream));
    }
    PZ_CU(cudaMemcpyAsync(pl + 1 + 4 * nscale, pay + 4 * nscale, K * vb, cudaMemcpyDeviceToHost, stream));
    if (varints) {
        void *h;
        if ((st = pz_hgrow_(cs, 4 * K, &h))) return st;
        PZ_CU(cudaMemcpyAsync(h, kidx, 4 * K, cudaMemcpyDeviceToHost, stream));
        PZ_CU(cudaStreamSynchronize(stream));
        const uint32_t *idx = (const uint32_t *)h;
        uint8_t *o = pl + fixed;
        uint32_t prev = 0;
        for (size_t j = 0; j < K; j++) {
            o += pz_varint_put(o, idx[j] - prev);
            prev = idx[j] + 1;
        }
    } else {
        /* little-endian u32 words: bit i%32 of word i/32 is bit i%8 of byte i/8 */
        PZ_CU(cudaMemcpyAsync(pl + fixed, bm, bitmap, cudaMemcpyDeviceToHost, stream));
        PZ_CU(cudaStreamSynchronize(stream));
    }
    *len = total;
    return PZ_OK;
}
