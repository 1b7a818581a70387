/* base_cuda.cu: the base codecs with the tensor in device memory (fp32,
 * fp16, bf16, q<b>, sign, nuq<b>): their kernels, encoders and decoders,
 * called through codec_cuda_impl.h by codec_cuda.cu's entry points (which
 * describes each payload and the exactness rules: every per-element formula
 * is the PZ_HD function the CPU codec calls). */
#include "compress/cuda/cuda_common.h"
#include "compress/cuda/codec_cuda_impl.h"
#include "base/mem.h"

/* ================================================================ kernels */

/* fp16 and bf16 (bf = 1) payloads from and to floats */
__global__ void k_to_half(const float *x, size_t n, uint16_t *o, int bf) {
    PZ_GRID_STRIDE(i, n) o[i] = bf ? pz_f32_to_bf16(x[i]) : pz_f32_to_f16(x[i]);
}
__global__ void k_from_half(const uint16_t *h, size_t n, float *o, int bf) {
    PZ_GRID_STRIDE(i, n) o[i] = bf ? pz_bf16_to_f32(h[i]) : pz_f16_to_f32(h[i]);
}

/* per-group range statistics: am = max of |x| bits, mn/mx = min/max of the
 * order-preserving int of x's bits (minmax only). Integer max/min: exact in
 * any order. */
__global__ void k_stats_init(unsigned *am, int *mn, int *mx, size_t G, int minmax) {
    PZ_GRID_STRIDE(g, G) {
        am[g] = 0;
        if (minmax) {
            mn[g] = INT32_MAX;
            mx[g] = INT32_MIN;
        }
    }
}

__device__ static inline void stats_push(unsigned a, int lo, int hi, unsigned *am, int *mn, int *mx, size_t g,
                                         int minmax) {
    for (int o = 16; o; o >>= 1) {
        a = max(a, __shfl_xor_sync(PZ_FULL_MASK, a, o));
        if (minmax) {
            lo = min(lo, __shfl_xor_sync(PZ_FULL_MASK, lo, o));
            hi = max(hi, __shfl_xor_sync(PZ_FULL_MASK, hi, o));
        }
    }
    if ((threadIdx.x & 31) == 0) {
        atomicMax(am + g, a);
        if (minmax) {
            atomicMin(mn + g, lo);
            atomicMax(mx + g, hi);
        }
    }
}

/* contiguous groups of `span`: block b covers chunk b % cpg of group b / cpg */
#define PZ_STATS_CHUNK 16384
__global__ void k_stats_span(const float *x, size_t n, size_t span, size_t G, size_t cpg, unsigned *am, int *mn,
                             int *mx, int minmax) {
    for (size_t b = blockIdx.x; b < G * cpg; b += gridDim.x) {
        size_t g = b / cpg, c = b % cpg;
        size_t ga = g * span, ge = ga + span < n ? ga + span : n;
        size_t a = ga + c * (size_t)PZ_STATS_CHUNK, e = a + PZ_STATS_CHUNK < ge ? a + PZ_STATS_CHUNK : ge;
        unsigned m = 0;
        int lo = INT32_MAX, hi = INT32_MIN;
        for (size_t i = a + threadIdx.x; i < e; i += blockDim.x) {
            uint32_t u = pz_f2u(x[i]);
            m = max(m, u & 0x7fffffffu);
            int o = pz_ord32(u);
            lo = min(lo, o);
            hi = max(hi, o);
        }
        stats_push(m, lo, hi, am, mn, mx, g, minmax);
    }
}
/* short contiguous groups: a thread per group */
__global__ void k_stats_small(const float *x, size_t n, size_t span, size_t G, unsigned *am, int *mn, int *mx,
                              int minmax) {
    PZ_GRID_STRIDE(g, G) {
        size_t a = g * span, e = a + span < n ? a + span : n;
        unsigned m = 0;
        int lo = INT32_MAX, hi = INT32_MIN;
        for (size_t i = a; i < e; i++) {
            uint32_t u = pz_f2u(x[i]);
            m = max(m, u & 0x7fffffffu);
            int o = pz_ord32(u);
            lo = min(lo, o);
            hi = max(hi, o);
        }
        am[g] = m;
        if (minmax) {
            mn[g] = lo;
            mx[g] = hi;
        }
    }
}
/* channel groups: thread per column, blockIdx.y = chunk of rch rows */
#define PZ_ROWS_CHUNK 256
__global__ void k_stats_chan(const float *x, size_t R, size_t C, size_t rch, unsigned *am, int *mn, int *mx,
                             int minmax) {
    size_t r0 = (size_t)blockIdx.y * rch, r1 = r0 + rch < R ? r0 + rch : R;
    PZ_GRID_STRIDE(c, C) {
        unsigned m = 0;
        int lo = INT32_MAX, hi = INT32_MIN;
        for (size_t r = r0; r < r1; r++) {
            uint32_t u = pz_f2u(x[r * C + c]);
            m = max(m, u & 0x7fffffffu);
            int o = pz_ord32(u);
            lo = min(lo, o);
            hi = max(hi, o);
        }
        atomicMax(am + c, m);
        if (minmax) {
            atomicMin(mn + c, lo);
            atomicMax(mx + c, hi);
        }
    }
}

/* canonical sums (elem_codecs.h): a warp per contiguous group, lane l adds
 * elements a+l, a+l+32, ... in order, then the fixed tree */
template <int SQ>
__global__ void k_canon_span(const float *x, size_t n, size_t span, size_t G, double *sum) {
    size_t warps = (size_t)gridDim.x * blockDim.x / 32;
    int lane = threadIdx.x & 31;
    for (size_t g = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32; g < G; g += warps) {
        size_t a = g * span, e = a + span < n ? a + span : n;
        double s = 0.0;
        for (size_t i = a + (size_t)lane; i < e; i += 32) s = s + (SQ ? pz_term_sq(x[i]) : pz_term_abs(x[i]));
        for (int w = PZ_SUM_LANES / 2; w >= 1; w /= 2) {
            double o = __shfl_down_sync(PZ_FULL_MASK, s, w);
            if (lane < w) s = s + o;
        }
        if (lane == 0) sum[g] = s;
    }
}
/* channel groups: a thread per column adds the rows in order (sign.c) */
__global__ void k_canon_chan_abs(const float *x, size_t R, size_t C, double *sum) {
    PZ_GRID_STRIDE(c, C) {
        double s = 0.0;
        for (size_t r = 0; r < R; r++) s = s + pz_term_abs(x[r * C + c]);
        sum[c] = s;
    }
}

/* q: scales as the receiver reads them, grids */
__global__ void k_q_scales(const unsigned *am, const int *mn, const int *mx, size_t G, int minmax, int fp32, int b,
                           int mt, uint8_t *pay, float *lo_o, float *hi_o, float *off, float *inv, float *fs,
                           pz_dstat *st) {
    PZ_GRID_STRIDE(g, G) {
        if (am[g] >= 0x7f800000u) atomicOr(&st->flags, 1u);
        float lo = minmax ? pz_u2f((uint32_t)pz_ord32((uint32_t)mn[g])) : 0.0f;
        float hi = pz_u2f(minmax ? (uint32_t)pz_ord32((uint32_t)mx[g]) : am[g]);
        pz_q_range_put(pay, g, minmax, fp32, &lo, &hi);
        lo_o[g] = lo;
        hi_o[g] = hi;
        pz_qgrid gr;
        if (!pz_q_grid(lo, hi, b, mt, minmax, &gr)) {
            atomicMin(&st->first_bad, (unsigned long long)g);
            gr.inv = gr.off = 0.0f;
            gr.fs = 1.0f;
        }
        inv[g] = gr.inv;
        off[g] = gr.off;
        fs[g] = gr.fs;
    }
}

__device__ static inline size_t group_of(size_t i, size_t span, size_t C) { return span ? i / span : i % C; }

/* The body of the packing kernels: a thread per packing group of 8 codes of
 * b bits (b bytes), code(i) of elements 8t .. 8t+7 below n at bits j*b of a
 * little-endian word, as compress/core/bitpack.c packs them. */
template <typename F>
__device__ static inline void pack_codes(size_t n, int b, uint8_t *out, F code) {
    size_t T = (n + 7) / 8;
    PZ_GRID_STRIDE(t, T) {
        uint64_t w = 0;
        for (int j = 0; j < 8; j++) {
            size_t i = 8 * t + (size_t)j;
            if (i >= n) break;
            w |= (uint64_t)code(i) << (j * b);
        }
        for (int k = 0; k < b; k++) out[t * (size_t)b + (size_t)k] = (uint8_t)(w >> (8 * k));
    }
}

/* q codes */
__global__ void k_q_codes(const float *x, size_t n, size_t span, size_t C, const float *off, const float *inv,
                          const float *fs, int kmax, int b, int stoch, int mt, uint64_t key, uint8_t *out) {
    pack_codes(n, b, out, [&](size_t i) {
        size_t g = group_of(i, span, C);
        float xs = PZ_FMUL(x[i], fs[g]);
        if (!stoch) return pz_q_code_near(xs, off[g], inv[g], kmax);
        return mt ? pz_q_code_stoch_mt(xs, off[g], inv[g], kmax, pz_uniform(key, i))
                  : pz_q_code_stoch(xs, off[g], inv[g], kmax, pz_uniform(key, i));
    });
}

__device__ static inline uint32_t code_at(const uint8_t *codes, size_t i, int b) {
    const uint8_t *p = codes + (i / 8) * (size_t)b;
    uint64_t w = 0;
    for (int k = 0; k < b; k++) w |= (uint64_t)p[k] << (8 * k);
    return (uint32_t)(w >> ((i % 8) * (size_t)b)) & ((1u << b) - 1);
}

__global__ void k_q_decode(const uint8_t *codes, size_t n, int b, int kmax, size_t span, size_t C, const float *lo,
                           const float *step, const float *fd, float *out) {
    PZ_GRID_STRIDE(i, n) {
        size_t g = group_of(i, span, C);
        out[i] = pz_q_value((uint8_t)code_at(codes, i, b), kmax, lo[g], step[g], fd[g]);
    }
}

/* sign: scales (mean |x| or max |x|) as stored, 1/(2s) */
__global__ void k_sign_scales(const unsigned *am, const double *sum, size_t G, size_t span, size_t n, size_t R,
                              int stoch, int fp32, uint8_t *pay, float *hinv, pz_dstat *st) {
    PZ_GRID_STRIDE(g, G) {
        if (am[g] >= 0x7f800000u) atomicOr(&st->flags, 1u);
        float sc;
        if (stoch) {
            sc = pz_u2f(am[g]);
        } else {
            size_t cnt = R;
            if (span) {
                size_t a = g * span, e = a + span < n ? a + span : n;
                cnt = e - a;
            }
            sc = pz_sign_mean(sum[g], cnt);
        }
        sc = pz_scale_store(sc, fp32, stoch ? +1 : 0);
        if (!isfinite(sc)) atomicMin(&st->first_bad, (unsigned long long)g);
        pz_scale_put(pay, g, sc, fp32);
        hinv[g] = pz_sign_hinv(sc);
    }
}

__global__ void k_sign_bits(const float *x, size_t n, size_t span, size_t C, const float *hinv, int stoch,
                            uint64_t key, uint8_t *out) {
    pack_codes(n, 1, out, [&](size_t i) {
        return stoch ? pz_sign_bit_stoch(x[i], hinv[group_of(i, span, C)], pz_uniform(key, i))
                     : pz_sign_bit_scaled(x[i]);
    });
}

__global__ void k_sign_decode(const uint8_t *bits, size_t n, size_t span, size_t C, const float *sc, float *out) {
    PZ_GRID_STRIDE(i, n)
        out[i] = pz_sign_value((uint8_t)((bits[i / 8] >> (i % 8)) & 1u), sc[group_of(i, span, C)]);
}

/* nuq: norms from the canonical sums, written as the payload's fp32 norms */
__global__ void k_nuq_norms(const double *sum, size_t G, float *norm, pz_dstat *st) {
    PZ_GRID_STRIDE(g, G) {
        double acc = sum[g];
        float v = pz_nuq_norm(acc);
        if (!isfinite(acc) || !isfinite(v)) atomicOr(&st->flags, 1u);
        norm[g] = v;
    }
}

__device__ static inline uint8_t nuq_code_at(const float *x, size_t i, const float *norm, size_t bucket, int b,
                                             int s, float sinv, uint64_t key) {
    float nv = norm[i / bucket], fs = pz_nuq_fs(nv), inv = pz_nuq_inv(PZ_FMUL(nv, fs));
    if (b == 1) return pz_nuq_code1(x[i], fs, inv, pz_uniform(key, i));
    pz_ukey k = pz_ukey_at(key, i);
    return pz_nuq_code(x[i], fs, inv, b, s, sinv, pz_uhash2(k.lo, k.hi, (uint32_t)i));
}

__global__ void k_nuq_pack(const float *x, size_t n, const float *norm, size_t bucket, int b, int s, float sinv,
                           uint64_t key, uint8_t *out) {
    pack_codes(n, b, out, [&](size_t i) { return nuq_code_at(x, i, norm, bucket, b, s, sinv, key); });
}
__global__ void k_nuq_codes(const float *x, size_t n, const float *norm, size_t bucket, int b, int s, float sinv,
                            uint64_t key, uint8_t *codes) {
    PZ_GRID_STRIDE(i, n)
        codes[i] = nuq_code_at(x, i, norm, bucket, b, s, sinv, key);
}
__global__ void k_nuq_decode(const uint8_t *codes, size_t n, int b, size_t bucket, int s, const float *norm,
                             float *out) {
    PZ_GRID_STRIDE(i, n)
        out[i] = pz_nuq_value((uint8_t)code_at(codes, i, b), norm[i / bucket], b, s);
}

#define TPB 256
#define GRID(work) pz_blocks((work), TPB), TPB, 0, stream

/* ================================================================ base encoders */

/* per-group range statistics into am (and mn, mx) */
static pz_status group_stats(const pz_groups *g, const float *x, int minmax, unsigned *am, int *mn, int *mx,
                             cudaStream_t stream) {
    k_stats_init<<<GRID(g->G)>>>(am, mn, mx, g->G, minmax);
    PZ_CU_LAUNCH();
    if (g->span == 0) {
        size_t R = g->n / g->C, rch = PZ_ROWS_CHUNK;
        if ((R + rch - 1) / rch > 65535) rch = (R + 65534) / 65535;   /* gridDim.y <= 65535 */
        dim3 grid(pz_blocks(g->C, TPB), (unsigned)((R + rch - 1) / rch));
        k_stats_chan<<<grid, TPB, 0, stream>>>(x, R, g->C, rch, am, mn, mx, minmax);
    } else if (g->span < 256) {
        k_stats_small<<<GRID(g->G)>>>(x, g->n, g->span, g->G, am, mn, mx, minmax);
    } else {
        size_t cpg = (g->span + PZ_STATS_CHUNK - 1) / PZ_STATS_CHUNK;
        k_stats_span<<<pz_blocks(g->G * cpg, 1), TPB, 0, stream>>>(x, g->n, g->span, g->G, cpg, am, mn, mx, minmax);
    }
    PZ_CU_LAUNCH();
    return PZ_OK;
}

/* The start of a grouped encoder: p's groups on s, per_group bytes of device
 * scratch for each group at *vs, and the stat block reset. */
static pz_status groups_begin(pz_cstate *cs, const pz_codec_params *p, const pz_shape *s, size_t per_group,
                              pz_groups *g, void **vs, cudaStream_t stream) {
    pz_groups_init(g, p, s);
    pz_status st = pz_dgrow_(cs, PZ_DB_GROUP, g->G * per_group, vs);
    if (st) return st;
    return pz_stat_reset_(cs, stream);
}

/* The stat block after the scale kernels into *ds; an error when the input
 * held inf or NaN, in the CPU encoder's words. */
static pz_status stats_finite(pz_cstate *cs, const char *codec, pz_dstat *ds, cudaStream_t stream) {
    pz_status st = pz_stat_get_(cs, stream, ds);
    if (st) return st;
    if (ds->flags & 1u) return pz_fail(PZ_ERR_ARG, "%s encode: input holds inf or NaN", codec);
    return PZ_OK;
}

static pz_status q_encode_dev(pz_cstate *cs, const pz_codec_params *p, const float *x, const pz_shape *s,
                              uint64_t key, uint8_t *pay, cudaStream_t stream) {
    int minmax = p->scale_mode == PZ_SCALE_MINMAX, fp32 = p->scale_fp32, b = p->bits;
    int mt = p->grid == PZ_GRID_MIDTREAD, kmax = pz_q_kmax(b, mt, minmax);
    pz_groups g;
    void *vs;
    pz_status st = groups_begin(cs, p, s, 8 * 4, &g, &vs, stream);
    if (st) return st;
    unsigned *am = (unsigned *)vs;
    int *mn = (int *)(am + g.G), *mx = mn + g.G;
    float *lo = (float *)(mx + g.G), *hi = lo + g.G, *off = hi + g.G, *inv = off + g.G, *fs = inv + g.G;
    if ((st = group_stats(&g, x, minmax, am, mn, mx, stream))) return st;
    k_q_scales<<<GRID(g.G)>>>(am, mn, mx, g.G, minmax, fp32, b, mt, pay, lo, hi, off, inv, fs, cs->st);
    PZ_CU_LAUNCH();
    pz_dstat ds;
    if ((st = stats_finite(cs, "q", &ds, stream))) return st;
    if (ds.first_bad != ~0ull) {
        float l, h;
        PZ_CU(cudaMemcpy(&l, lo + ds.first_bad, 4, cudaMemcpyDeviceToHost));
        PZ_CU(cudaMemcpy(&h, hi + ds.first_bad, 4, cudaMemcpyDeviceToHost));
        return pz_fail(PZ_ERR_ARG, "q encode: group %zu spans [%g, %g], beyond the range of %s scales",
                       (size_t)ds.first_bad, (double)l, (double)h, fp32 ? "fp32" : "fp16 (use sdtype=fp32)");
    }
    size_t sbytes = g.G * (minmax ? 2 : 1) * (fp32 ? 4 : 2);
    k_q_codes<<<GRID((g.n + 7) / 8)>>>(x, g.n, g.span, g.C, off, inv, fs, kmax, b,
                                       p->round_mode == PZ_ROUND_STOCHASTIC, mt, key, pay + sbytes);
    PZ_CU_LAUNCH();
    return PZ_OK;
}

static pz_status sign_encode_dev(pz_cstate *cs, const pz_codec_params *p, const float *x, const pz_shape *s,
                                 uint64_t key, uint8_t *pay, cudaStream_t stream) {
    int fp32 = p->scale_fp32, stoch = p->stochastic;
    pz_groups g;
    void *vs;
    pz_status st = groups_begin(cs, p, s, 2 * 4 + 8 + 4, &g, &vs, stream);
    if (st) return st;
    double *sum = (double *)vs;   /* first: 8-byte aligned */
    unsigned *am = (unsigned *)(sum + g.G);
    float *hinv = (float *)(am + g.G);
    if ((st = group_stats(&g, x, 0, am, NULL, NULL, stream))) return st;
    if (!stoch) {
        if (g.span) k_canon_span<0><<<GRID(g.G * 32)>>>(x, g.n, g.span, g.G, sum);
        else k_canon_chan_abs<<<GRID(g.C)>>>(x, g.n / g.C, g.C, sum);
        PZ_CU_LAUNCH();
    }
    k_sign_scales<<<GRID(g.G)>>>(am, sum, g.G, g.span, g.n, g.n / g.C, stoch, fp32, pay, hinv, cs->st);
    PZ_CU_LAUNCH();
    pz_dstat ds;
    if ((st = stats_finite(cs, "sign", &ds, stream))) return st;
    if (ds.first_bad != ~0ull)
        return pz_fail(PZ_ERR_ARG, "sign encode: scale of group %zu beyond the fp16 range (use sdtype=fp32)",
                       (size_t)ds.first_bad);
    k_sign_bits<<<GRID((g.n + 7) / 8)>>>(x, g.n, g.span, g.C, hinv, stoch, key, pay + g.G * (fp32 ? 4 : 2));
    PZ_CU_LAUNCH();
    return PZ_OK;
}

/* nuq: the norms and, for code=fixed, the packed codes go to pay (device);
 * for code=elias the codes go to *d_codes for the host's stream writer */
static pz_status nuq_encode_dev(pz_cstate *cs, const pz_codec_params *p, const float *x, const pz_shape *s,
                                uint64_t key, uint8_t *pay, uint8_t **d_codes, cudaStream_t stream) {
    size_t n = pz_shape_numel(s), G = pz_group_count(p, s), bucket = p->group_size;
    int b = p->bits, sl = b >= 2 ? pz_nuq_s(b) : 0;
    float sinv = pz_nuq_smallest_inv(b);
    void *vs;
    pz_status st = pz_dgrow_(cs, PZ_DB_GROUP, G * 8, &vs);
    if (st) return st;
    double *sum = (double *)vs;
    float *norm = (float *)pay;
    if ((st = pz_stat_reset_(cs, stream))) return st;
    k_canon_span<1><<<GRID(G * 32)>>>(x, n, bucket, G, sum);
    PZ_CU_LAUNCH();
    k_nuq_norms<<<GRID(G)>>>(sum, G, norm, cs->st);
    PZ_CU_LAUNCH();
    pz_dstat ds;
    if ((st = stats_finite(cs, "nuq", &ds, stream))) return st;
    if (p->elias) {
        void *vc;
        if ((st = pz_dgrow_(cs, PZ_DB_CODES, n, &vc))) return st;
        *d_codes = (uint8_t *)vc;
        k_nuq_codes<<<GRID(n)>>>(x, n, norm, bucket, b, sl, sinv, key, *d_codes);
    } else {
        k_nuq_pack<<<GRID((n + 7) / 8)>>>(x, n, norm, bucket, b, sl, sinv, key, pay + 4 * G);
    }
    PZ_CU_LAUNCH();
    return PZ_OK;
}

pz_status pz_cuda_base_encode_(pz_codec *c, const pz_codec_params *p, const float *x, const pz_shape *s,
                               const pz_codec_ctx *ctx, uint8_t *pl, size_t cap, size_t *len, cudaStream_t stream) {
    const pz_codec_impl *impl = pz_codec_impl_by_id(p->id);
    size_t n = pz_shape_numel(s), need = impl->max_payload(p, s);
    if (p->id == PZ_CODEC_TOPK) return pz_cuda_topk_encode_(c, p, x, s, pl, cap, len, stream);
    if (cap < need) {
        if (p->id == PZ_CODEC_NUQ)
            return pz_fail(PZ_ERR_SHAPE, "nuq encode: %zu bytes of room, payload needs up to %zu", cap, need);
        return pz_fail(PZ_ERR_SHAPE, "%s%sencode: %zu bytes of room, payload needs %zu",
                       p->id <= PZ_CODEC_BF16 ? "" : impl->name, p->id <= PZ_CODEC_BF16 ? "" : " ", cap, need);
    }
    pz_cstate *cs = pz_cstate_of_(c);
    if (p->id == PZ_CODEC_FP32) {
        PZ_CU(cudaMemcpyAsync(pl, x, need, cudaMemcpyDeviceToHost, stream));
        PZ_CU(cudaStreamSynchronize(stream));
        *len = need;
        return PZ_OK;
    }
    void *vp;
    pz_status st = pz_dgrow_(cs, PZ_DB_PAYLOAD, need, &vp);
    if (st) return st;
    uint8_t *pay = (uint8_t *)vp;
    uint64_t key = pz_ctx_key(ctx);
    uint8_t *d_codes = NULL;
    switch (p->id) {
    case PZ_CODEC_FP16:
    case PZ_CODEC_BF16:
        k_to_half<<<GRID(n)>>>(x, n, (uint16_t *)pay, p->id == PZ_CODEC_BF16);
        PZ_CU_LAUNCH();
        break;
    case PZ_CODEC_Q: st = q_encode_dev(cs, p, x, s, key, pay, stream); break;
    case PZ_CODEC_SIGN: st = sign_encode_dev(cs, p, x, s, key, pay, stream); break;
    case PZ_CODEC_NUQ: st = nuq_encode_dev(cs, p, x, s, key, pay, &d_codes, stream); break;
    default: return pz_fail(PZ_ERR_ARG, "cuda codec: no device encoder for %s", impl->name);
    }
    if (st) return st;
    if (p->id == PZ_CODEC_NUQ && p->elias) {
        size_t G = pz_group_count(p, s);
        void *hc;
        if ((st = pz_hgrow_(cs, n, &hc))) return st;
        PZ_CU(cudaMemcpyAsync(pl, pay, 4 * G, cudaMemcpyDeviceToHost, stream));
        PZ_CU(cudaMemcpyAsync(hc, d_codes, n, cudaMemcpyDeviceToHost, stream));
        PZ_CU(cudaStreamSynchronize(stream));
        size_t used = pz_nuq_elias_stream((const uint8_t *)hc, n, p->bits, pl + 4 * G);
        if (4 * G + used > need) return pz_fail(PZ_ERR_SHAPE, "nuq encode: Elias stream overran its bound");
        *len = 4 * G + used;
        return PZ_OK;
    }
    PZ_CU(cudaMemcpyAsync(pl, pay, need, cudaMemcpyDeviceToHost, stream));
    PZ_CU(cudaStreamSynchronize(stream));
    *len = need;
    return PZ_OK;
}

/* ================================================================ base decoders */

/* copies host bytes to the device scratch k */
static pz_status upload(pz_cstate *cs, int k, const void *h, size_t bytes, void **d, cudaStream_t stream) {
    pz_status st = pz_dgrow_(cs, k, bytes, d);
    if (st) return st;
    if (bytes) PZ_CU(cudaMemcpyAsync(*d, h, bytes, cudaMemcpyHostToDevice, stream));
    return PZ_OK;
}

/* host decode with the CPU codec, then the floats to the device */
static pz_status host_decode(pz_cstate *cs, const pz_codec_params *p, const uint8_t *pl, size_t len,
                             const pz_shape *s, float *out, cudaStream_t stream) {
    size_t n = pz_shape_numel(s);
    void *h;
    pz_status st = pz_hgrow_(cs, n * sizeof(float), &h);
    if (st) return st;
    st = pz_codec_impl_by_id(p->id)->decode(p, pl, len, s, (float *)h);
    if (st) return st;
    PZ_CU(cudaMemcpyAsync(out, h, n * sizeof(float), cudaMemcpyHostToDevice, stream));
    PZ_CU(cudaStreamSynchronize(stream));
    return PZ_OK;
}

int pz_cuda_base_decodes_on_device_(const pz_codec_params *p) {
    switch (p->id) {
    case PZ_CODEC_FP32: case PZ_CODEC_FP16: case PZ_CODEC_BF16: case PZ_CODEC_Q: case PZ_CODEC_SIGN:
        return 1;
    case PZ_CODEC_NUQ: return !p->elias;
    default: return 0;
    }
}

/* the padding codes of the last packing group must be zero */
static int padding_ok(const uint8_t *codes, size_t n, int b) {
    size_t rem = n % 8;
    if (!rem) return 1;
    uint8_t c[8];
    return pz_unpack_codes(codes + (n / 8) * (size_t)b, (size_t)b, rem, b, c) == PZ_OK;
}

pz_status pz_cuda_base_decode_(pz_codec *c, const pz_codec_params *p, const uint8_t *pl, size_t len,
                               const pz_shape *s, float *out, cudaStream_t stream) {
    pz_cstate *cs = pz_cstate_of_(c);
    if (!pz_cuda_base_decodes_on_device_(p)) return host_decode(cs, p, pl, len, s, out, stream);
    const pz_codec_impl *impl = pz_codec_impl_by_id(p->id);
    size_t n = pz_shape_numel(s), need = impl->max_payload(p, s);
    /* the framework checked the exact size already; the messages are the CPU decoders' */
    if (len != need) return pz_fail(PZ_ERR_FORMAT, "%s: payload of %zu bytes, expected %zu", impl->name, len, need);
    pz_status st = PZ_OK;
    void *d;
    switch (p->id) {
    case PZ_CODEC_FP32:
        PZ_CU(cudaMemcpyAsync(out, pl, need, cudaMemcpyHostToDevice, stream));
        break;
    case PZ_CODEC_FP16:
    case PZ_CODEC_BF16:
        if ((st = upload(cs, PZ_DB_PAYLOAD, pl, len, &d, stream))) return st;
        k_from_half<<<GRID(n)>>>((const uint16_t *)d, n, out, p->id == PZ_CODEC_BF16);
        PZ_CU_LAUNCH();
        break;
    case PZ_CODEC_Q: {
        pz_groups g;
        pz_groups_init(&g, p, s);
        int fp32 = p->scale_fp32, minmax = p->scale_mode == PZ_SCALE_MINMAX, mt = p->grid == PZ_GRID_MIDTREAD;
        int kmax = pz_q_kmax(p->bits, mt, minmax);
        void *h;
        if ((st = pz_hgrow_(cs, g.G * 12, &h))) return st;
        float *lo = (float *)h, *step = lo + g.G, *fd = step + g.G;
        for (size_t gi = 0; gi < g.G; gi++) {
            float l, hh;
            pz_qgrid gr;
            pz_q_range_get(pl, gi, minmax, fp32, &l, &hh);
            if (!pz_q_grid(l, hh, p->bits, mt, minmax, &gr))
                return pz_fail(PZ_ERR_FORMAT, "q: group %zu has a bad scale", gi);
            lo[gi] = gr.lo;
            step[gi] = gr.step;
            fd[gi] = gr.fd;
        }
        size_t sb = g.G * (minmax ? 2 : 1) * (fp32 ? 4 : 2);
        if (!padding_ok(pl + sb, n, p->bits)) return pz_fail(PZ_ERR_FORMAT, "q: non-zero padding after the last code");
        void *dg, *dc;
        if ((st = upload(cs, PZ_DB_GROUP, h, g.G * 12, &dg, stream))) return st;
        if ((st = upload(cs, PZ_DB_PAYLOAD, pl + sb, len - sb, &dc, stream))) return st;
        k_q_decode<<<GRID(n)>>>((const uint8_t *)dc, n, p->bits, kmax, g.span, g.C, (const float *)dg,
                                (const float *)dg + g.G, (const float *)dg + 2 * g.G, out);
        PZ_CU_LAUNCH();
        break;
    }
    case PZ_CODEC_SIGN: {
        pz_groups g;
        pz_groups_init(&g, p, s);
        void *h;
        if ((st = pz_hgrow_(cs, g.G * 4, &h))) return st;
        float *sc = (float *)h;
        for (size_t gi = 0; gi < g.G; gi++) {
            sc[gi] = pz_scale_get(pl, gi, p->scale_fp32);
            if (!(sc[gi] >= 0.0f) || !isfinite(sc[gi]))
                return pz_fail(PZ_ERR_FORMAT, "sign: group %zu has a bad scale", gi);
        }
        size_t sb = g.G * (p->scale_fp32 ? 4 : 2);
        const uint8_t *bits = pl + sb;
        if (g.n % 8 && (bits[g.n / 8] >> (g.n % 8)))
            return pz_fail(PZ_ERR_FORMAT, "sign: non-zero padding after the last bit");
        void *dg, *dc;
        if ((st = upload(cs, PZ_DB_GROUP, h, g.G * 4, &dg, stream))) return st;
        if ((st = upload(cs, PZ_DB_PAYLOAD, bits, len - sb, &dc, stream))) return st;
        k_sign_decode<<<GRID(n)>>>((const uint8_t *)dc, n, g.span, g.C, (const float *)dg, out);
        PZ_CU_LAUNCH();
        break;
    }
    case PZ_CODEC_NUQ: {
        size_t G = pz_group_count(p, s);
        int b = p->bits, sl = b >= 2 ? pz_nuq_s(b) : 0;
        for (size_t gi = 0; gi < G; gi++) {
            float v;
            memcpy(&v, pl + 4 * gi, 4);
            if (!(v >= 0.0f) || !isfinite(v)) return pz_fail(PZ_ERR_FORMAT, "nuq: bucket %zu has a bad norm", gi);
        }
        if (!padding_ok(pl + 4 * G, n, b)) return pz_fail(PZ_ERR_FORMAT, "nuq: non-zero padding after the last code");
        if ((st = upload(cs, PZ_DB_PAYLOAD, pl, len, &d, stream))) return st;
        const uint8_t *dp = (const uint8_t *)d;
        k_nuq_decode<<<GRID(n)>>>(dp + 4 * G, n, b, p->group_size, sl, (const float *)dp, out);
        PZ_CU_LAUNCH();
        break;
    }
    default: return pz_fail(PZ_ERR_ARG, "cuda codec: no device decoder for %s", impl->name);
    }
    PZ_CU(cudaStreamSynchronize(stream));
    return PZ_OK;
}
