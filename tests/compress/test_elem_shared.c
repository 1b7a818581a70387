/* test_elem_shared.c: the per-element math shared by the CPU codecs and the
 * GPU kernels (compress/core/elem.h, compress/core/elem_codecs.h), checked without a GPU.
 *
 * For every base codec with a GPU path, a "kernel model" written here
 * rebuilds the payload the way the kernels of compress/cuda/ do: per-group range
 * statistics in any order, per-group scales with pz_scale_store, sums in the
 * warp's order (lane-strided partial sums, then shuffle-down steps 16, 8, 4,
 * 2, 1), every element's code with the elem_codecs.h function and
 * pz_uniform(key, i) of its own index (no chunking), packing of each group of
 * 8 codes on its own, topk's set by a plain sort (the selection is exact, so
 * any exact method must give it). The payload must equal the CPU codec's
 * byte for byte, and the CPU decoder's floats must equal the shared decode
 * functions bit for bit. So the CPU tests exercise the very formulas the
 * kernels use, and the kernels' structure (order of sums, per-element
 * randomness, per-group packing) is shown to reproduce the CPU messages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec.h"
#include "compress/core/codec_ext.h"
#include "compress/core/codec_impl.h"
#include "compress/core/elem.h"
#include "compress/core/elem_codecs.h"
#include "compress/codecs/qcommon.h"

#define CHECK_MAX_PRINTED 40
#include "tests/check.h"
#include "tests/compress/elem_specs.h"
#include "base/mem.h"
#include "base/rng.h"

static size_t hdr(int ndim) { return 48 + 8 * (size_t)ndim; }

/* inputs: Gaussian rows with a per-row scale over 12 orders of magnitude,
 * some exact zeros, ties and an all-zero row */
static float *make_input(size_t n, size_t C, uint64_t seed) {
    pz_rng r;
    pz_rng_seed(&r, seed);
    float *x = xmalloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) {
        size_t row = i / C;
        /* every 5th row near fp32's bottom (values ~1e-40, subnormals): q's and
         * nuq's 2^64 prescale of tiny groups */
        float sc = (float)ldexp(1.0, row % 5 == 4 ? -133 : (int)(row * 7 % 24) - 16);
        x[i] = pz_rng_normal(&r) * sc;
        if (pz_rng_below(&r, 17) == 0) x[i] = 0.0f;
        if (pz_rng_below(&r, 23) == 0) x[i] = 0.5f * sc;   /* ties for topk */
    }
    if (n / C > 2)
        for (size_t c = 0; c < C; c++) x[C + c] = 0.0f;
    return x;
}

/* the warp's canonical sum over [a, e) (compress/cuda/base_cuda.cu, k_canon_span) */
static double warp_sum(const float *x, size_t a, size_t e, int sq) {
    double lane[32];
    for (int l = 0; l < 32; l++) {
        double s = 0.0;
        for (size_t i = a + (size_t)l; i < e; i += 32) s = s + (sq ? pz_term_sq(x[i]) : pz_term_abs(x[i]));
        lane[l] = s;
    }
    for (int w = 16; w >= 1; w /= 2) {
        double nxt[32];
        for (int l = 0; l < 32; l++) nxt[l] = l < w ? lane[l] + lane[l + w] : lane[l];  /* shfl_down, lane < w adds */
        memcpy(lane, nxt, sizeof lane);
    }
    return lane[0];
}

static void pack8(const uint8_t *codes, size_t n, int b, uint8_t *out) {
    for (size_t t = 0; t < (n + 7) / 8; t++) {
        uint64_t w = 0;
        for (int j = 0; j < 8 && 8 * t + (size_t)j < n; j++) w |= (uint64_t)codes[8 * t + (size_t)j] << (j * b);
        for (int k = 0; k < b; k++) out[t * (size_t)b + (size_t)k] = (uint8_t)(w >> (8 * k));
    }
}

static size_t group_of(const pz_groups *g, size_t i) { return g->span ? i / g->span : i % g->C; }

/* ---- models of the kernels ---- */

static size_t model_q(const pz_codec_params *p, const float *x, const pz_shape *s, uint64_t key, uint8_t *pl,
                      float *dec) {
    pz_groups g;
    pz_groups_init(&g, p, s);
    int minmax = p->scale_mode == PZ_SCALE_MINMAX, fp32 = p->scale_fp32, b = p->bits;
    int mt = p->grid == PZ_GRID_MIDTREAD;
    int32_t kmax = pz_q_kmax(b, mt, minmax);
    pz_qgrid *gr = xcalloc(g.G, sizeof *gr);
    uint32_t *am = xcalloc(g.G, 4);
    int32_t *mn = xmalloc(g.G * 4), *mx = xmalloc(g.G * 4);
    for (size_t i = 0; i < g.G; i++) { mn[i] = INT32_MAX; mx[i] = INT32_MIN; }
    for (size_t i = g.n; i-- > 0;) {    /* any order: exact */
        size_t gi = group_of(&g, i);
        uint32_t u = pz_f2u(x[i]);
        am[gi] = (u & 0x7fffffffu) > am[gi] ? (u & 0x7fffffffu) : am[gi];
        int32_t o = pz_ord32(u);
        mn[gi] = o < mn[gi] ? o : mn[gi];
        mx[gi] = o > mx[gi] ? o : mx[gi];
    }
    for (size_t gi = 0; gi < g.G; gi++) {
        float l = minmax ? pz_u2f((uint32_t)pz_ord32((uint32_t)mn[gi])) : 0.0f;
        float h = pz_u2f(minmax ? (uint32_t)pz_ord32((uint32_t)mx[gi]) : am[gi]);
        pz_q_range_put(pl, gi, minmax, fp32, &l, &h);
        if (!pz_q_grid(l, h, b, mt, minmax, &gr[gi])) memset(&gr[gi], 0, sizeof gr[gi]);
    }
    size_t sb = g.G * (minmax ? 2 : 1) * (fp32 ? 4 : 2);
    uint8_t *codes = xmalloc(g.n);
    for (size_t i = 0; i < g.n; i++) {
        size_t gi = group_of(&g, i);
        float xs = x[i] * gr[gi].fs;
        codes[i] = p->round_mode == PZ_ROUND_NEAREST ? pz_q_code_near(xs, gr[gi].off, gr[gi].inv, kmax)
                   : mt ? pz_q_code_stoch_mt(xs, gr[gi].off, gr[gi].inv, kmax, pz_uniform(key, i))
                        : pz_q_code_stoch(xs, gr[gi].off, gr[gi].inv, kmax, pz_uniform(key, i));
        dec[i] = pz_q_value(codes[i], kmax, gr[gi].lo, gr[gi].step, gr[gi].fd);
    }
    pack8(codes, g.n, b, pl + sb);
    free(codes);
    free(gr);
    free(am);
    free(mn);
    free(mx);
    return sb + (g.n + 7) / 8 * (size_t)b;
}

static size_t model_sign(const pz_codec_params *p, const float *x, const pz_shape *s, uint64_t key, uint8_t *pl,
                         float *dec) {
    pz_groups g;
    pz_groups_init(&g, p, s);
    int fp32 = p->scale_fp32, stoch = p->stochastic;
    float *sc = xmalloc(g.G * 4);
    uint32_t *am = xcalloc(g.G, 4);
    for (size_t i = 0; i < g.n; i++) {
        size_t gi = group_of(&g, i);
        uint32_t a = pz_f2u(x[i]) & 0x7fffffffu;
        am[gi] = a > am[gi] ? a : am[gi];
    }
    size_t R = g.n / g.C;
    for (size_t gi = 0; gi < g.G; gi++) {
        float v;
        if (stoch) {
            v = pz_u2f(am[gi]);
        } else if (g.span) {
            size_t a = gi * g.span, e = a + g.span < g.n ? a + g.span : g.n;
            v = pz_sign_mean(warp_sum(x, a, e, 0), e - a);
        } else {
            double sum = 0.0;   /* a thread per channel, rows in order */
            for (size_t r = 0; r < R; r++) sum = sum + pz_term_abs(x[r * g.C + gi]);
            v = pz_sign_mean(sum, R);
        }
        sc[gi] = pz_scale_store(v, fp32, stoch ? +1 : 0);
        pz_scale_put(pl, gi, sc[gi], fp32);
    }
    size_t sb = g.G * (fp32 ? 4 : 2);
    uint8_t *codes = xmalloc(g.n);
    for (size_t i = 0; i < g.n; i++) {
        size_t gi = group_of(&g, i);
        codes[i] = stoch ? pz_sign_bit_stoch(x[i], pz_sign_hinv(sc[gi]), pz_uniform(key, i)) : pz_sign_bit_scaled(x[i]);
        dec[i] = pz_sign_value(codes[i], sc[gi]);
    }
    pack8(codes, g.n, 1, pl + sb);
    free(codes);
    free(sc);
    free(am);
    return sb + (g.n + 7) / 8;
}

static size_t model_nuq(const pz_codec_params *p, const float *x, const pz_shape *s, uint64_t key, uint8_t *pl,
                        float *dec) {
    size_t n = pz_shape_numel(s), G = pz_group_count(p, s), bucket = p->group_size;
    int b = p->bits, sl = b >= 2 ? pz_nuq_s(b) : 0;
    float sinv = pz_nuq_smallest_inv(b);
    float *norm = xmalloc(G * 4);
    for (size_t gi = 0; gi < G; gi++) {
        size_t a = gi * bucket, e = a + bucket < n ? a + bucket : n;
        norm[gi] = pz_nuq_norm(warp_sum(x, a, e, 1));
        memcpy(pl + 4 * gi, &norm[gi], 4);
    }
    uint8_t *codes = xmalloc(n);
    for (size_t i = 0; i < n; i++) {
        float nv = norm[i / bucket], fs = pz_nuq_fs(nv), inv = pz_nuq_inv(nv * fs);
        if (b == 1) {
            codes[i] = pz_nuq_code1(x[i], fs, inv, pz_uniform(key, i));
        } else {
            pz_ukey k = pz_ukey_at(key, i);
            codes[i] = pz_nuq_code(x[i], fs, inv, b, sl, sinv, pz_uhash2(k.lo, k.hi, (uint32_t)i));
        }
        dec[i] = pz_nuq_value(codes[i], nv, b, sl);
    }
    size_t len;
    if (p->elias) {   /* MSB-first bit stream, one bit at a time */
        uint8_t *o = pl + 4 * G;
        uint64_t bit = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t v;
            int nb = pz_nuq_elias(codes[i], b, &v);
            for (int k = nb - 1; k >= 0; k--, bit++) {
                if (bit % 8 == 0) o[bit / 8] = 0;
                o[bit / 8] |= (uint8_t)(((v >> k) & 1u) << (7 - bit % 8));
            }
        }
        len = 4 * G + (size_t)((bit + 7) / 8);
    } else {
        pack8(codes, n, b, pl + 4 * G);
        len = 4 * G + (n + 7) / 8 * (size_t)b;
    }
    free(codes);
    free(norm);
    return len;
}

static size_t model_fp(const pz_codec_params *p, const float *x, size_t n, uint8_t *pl, float *dec) {
    for (size_t i = 0; i < n; i++) {
        uint16_t h = p->id == PZ_CODEC_FP16 ? pz_f32_to_f16(x[i]) : pz_f32_to_bf16(x[i]);
        memcpy(pl + 2 * i, &h, 2);
        dec[i] = p->id == PZ_CODEC_FP16 ? pz_f16_to_f32(h) : pz_bf16_to_f32(h);
    }
    return 2 * n;
}

static const float *sort_x;
static int by_key_then_index(const void *a, const void *b) {
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    uint32_t ki = pz_f2u(sort_x[i]) & 0x7fffffffu, kj = pz_f2u(sort_x[j]) & 0x7fffffffu;
    if (ki != kj) return ki > kj ? -1 : 1;
    return i < j ? -1 : i > j;
}
static int by_index(const void *a, const void *b) {
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    return i < j ? -1 : i > j;
}

/* topk values and index set (the kernel's steps 1-3; the index coding is
 * checked by decoding the CPU message) */
static void model_topk(const pz_codec_params *p, const float *x, size_t nseg, size_t L, size_t k, uint8_t *vals,
                       float *scales, uint32_t *kept) {
    uint32_t *ord = xmalloc(L * 4);
    size_t vb = p->value_mode == PZ_VALUES_FP32 ? 4 : p->value_mode == PZ_VALUES_FP16 ? 2 : 1;
    for (size_t sg = 0; sg < nseg; sg++) {
        for (size_t i = 0; i < L; i++) ord[i] = (uint32_t)(sg * L + i);
        sort_x = x;
        qsort(ord, L, 4, by_key_then_index);
        uint32_t mk = pz_f2u(x[ord[0]]) & 0x7fffffffu;
        qsort(ord, k, 4, by_index);
        scales[sg] = pz_u2f(mk);
        for (size_t j = 0; j < k; j++) {
            float v = x[ord[j]];
            uint8_t *o = vals + (sg * k + j) * vb;
            kept[sg * k + j] = ord[j];
            if (vb == 4) memcpy(o, &v, 4);
            else if (vb == 2) {
                uint16_t h = pz_f32_to_f16(v);
                memcpy(o, &h, 2);
            } else {
                int8_t q = pz_topk_q8(v, pz_topk_q8_inv(scales[sg]));
                memcpy(o, &q, 1);
            }
        }
    }
    free(ord);
}

/* ---- driver ---- */

static void run_spec(const char *spec, const pz_shape *s, uint64_t seed) {
    pz_codec *c;
    if (pz_codec_create(spec, &c) != PZ_OK) {
        CHECK(0, "create %s: %s", spec, pz_last_error());
        return;
    }
    size_t n = pz_shape_numel(s), C = (size_t)s->dims[s->ndim - 1];
    float *x = make_input(n, C, seed);
    pz_codec_ctx ctx = {seed * 7 + 1, seed, 3, 1, 2, NULL};
    size_t cap = pz_codec_max_encoded_size(c, s), len = 0, H = hdr(s->ndim);
    uint8_t *msg = xmalloc(cap), *pl = xcalloc(cap + 64, 1);
    float *dec = xmalloc(n * 4 + 4), *ref = xmalloc(n * 4 + 4);
    pz_status st = pz_codec_encode(c, x, s, &ctx, msg, cap, &len);
    CHECK(st == PZ_OK, "%s: encode: %s", spec, pz_last_error());
    if (st != PZ_OK) goto out;
    pz_shape got;
    CHECK(pz_codec_decode(c, msg, len, NULL, dec, n, &got) == PZ_OK, "%s: decode: %s", spec, pz_last_error());
    const pz_codec_params *p = NULL;
    char canon[256];
    snprintf(canon, sizeof canon, "%s", pz_codec_spec(c));
    /* the parameters as the header carries them */
    pz_codec_params P;
    memset(&P, 0, sizeof P);
    P.id = (uint16_t)(msg[12] | msg[13] << 8);
    P.bits = msg[14];
    P.scale_mode = msg[15];
    P.group_mode = msg[16];
    P.round_mode = msg[17];
    P.scale_fp32 = msg[18];
    P.value_mode = msg[19];
    P.per_row = msg[20];
    P.elias = msg[21];
    P.stochastic = msg[22];
    P.grid = msg[23];
    memcpy(&P.group_size, msg + 24, 4);
    memcpy(&P.fraction, msg + 28, 4);
    p = &P;
    uint64_t key = pz_ctx_key(&ctx);
    size_t mlen = 0;
    int bitwise_dec = 1;
    switch (p->id) {
    case PZ_CODEC_FP16: case PZ_CODEC_BF16: mlen = model_fp(p, x, n, pl, ref); break;
    case PZ_CODEC_Q: mlen = model_q(p, x, s, key, pl, ref); break;
    case PZ_CODEC_SIGN: mlen = model_sign(p, x, s, key, pl, ref); break;
    case PZ_CODEC_NUQ: mlen = model_nuq(p, x, s, key, pl, ref); break;
    case PZ_CODEC_TOPK: {
        size_t L, nseg, k;
        CHECK(pz_topk_geometry(p, s, &nseg, &L, &k) == PZ_OK, "%s: topk geometry", spec);
        size_t vb = p->value_mode == PZ_VALUES_FP32 ? 4 : p->value_mode == PZ_VALUES_FP16 ? 2 : 1;
        size_t nscale = p->value_mode == PZ_VALUES_Q8 ? nseg : 0;
        uint8_t *vals = xmalloc(nseg * k * vb + 1);
        float *scales = xmalloc(nseg * 4 + 4);
        uint32_t *kept = xmalloc(nseg * k * 4 + 4);
        model_topk(p, x, nseg, L, k, vals, scales, kept);
        const uint8_t *cp = msg + H;
        CHECK(len >= H + 1 + 4 * nscale + nseg * k * vb, "%s: topk payload too short", spec);
        if (nscale) CHECK(memcmp(cp + 1, scales, 4 * nscale) == 0, "%s: topk q8 scales differ", spec);
        CHECK(memcmp(cp + 1 + 4 * nscale, vals, nseg * k * vb) == 0, "%s: topk values differ", spec);
        /* the kept set: exactly the elements the CPU decoder made non-zero or kept */
        uint8_t *mark = xcalloc(n, 1);
        for (size_t j = 0; j < nseg * k; j++) mark[kept[j]] = 1;
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            if (!mark[i] && dec[i] != 0.0f) bad++;
        CHECK(bad == 0, "%s: %zu elements outside the model's top k decoded non-zero", spec, bad);
        free(mark);
        free(vals);
        free(scales);
        free(kept);
        bitwise_dec = 0;
        mlen = len - H;
        memcpy(pl, msg + H, mlen);
        break;
    }
    default: bitwise_dec = 0; mlen = len - H; memcpy(pl, msg + H, mlen); break;
    }
    CHECK(mlen == len - H, "%s: model payload %zu bytes, CPU %zu", spec, mlen, len - H);
    if (mlen == len - H) {
        size_t first = SIZE_MAX;
        for (size_t i = 0; i < mlen && first == SIZE_MAX; i++)
            if (pl[i] != msg[H + i]) first = i;
        CHECK(first == SIZE_MAX, "%s (%s): model payload differs from the CPU's at byte %zu", spec, canon, first);
    }
    if (bitwise_dec) {
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += pz_f2u(dec[i]) != pz_f2u(ref[i]);
        CHECK(bad == 0, "%s: %zu decoded floats differ from the shared decode functions", spec, bad);
    }
out:
    free(x);
    free(msg);
    free(pl);
    free(dec);
    free(ref);
    pz_codec_free(c);
}

/* The canonical sum: the CPU loop and the warp model agree on every length. */
static void test_canonical_sums(void) {
    float *x = make_input(5000, 5000, 99);
    for (size_t len = 0; len < 300; len++) {
        double a = pz_sum_sq_canon(x, len), b = warp_sum(x, 0, len, 1);
        double c = pz_sum_abs_canon(x + 7, len), d = warp_sum(x + 7, 0, len, 0);
        CHECK(memcmp(&a, &b, 8) == 0 && memcmp(&c, &d, 8) == 0, "canonical sum of %zu elements", len);
    }
    double a = pz_sum_sq_canon(x, 5000), b = warp_sum(x, 0, 5000, 1);
    CHECK(memcmp(&a, &b, 8) == 0, "canonical sum of 5000 elements");
    free(x);
}

int main(void) {
    test_canonical_sums();
    static const char *specs[] = {PZ_TEST_ELEM_SPECS};
    pz_shape shapes[] = {
        {2, {64, 96, 0, 0}}, {3, {3, 5, 77, 0}}, {1, {1001, 0, 0, 0}}, {2, {9, 4096, 0, 0}}, {2, {1, 1, 0, 0}},
    };
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++)
        for (size_t h = 0; h < sizeof shapes / sizeof shapes[0]; h++)
            for (uint64_t seed = 1; seed <= 2; seed++) run_spec(specs[si], &shapes[h], seed * 1000 + h);
    return check_summary("test_elem_shared");
}
