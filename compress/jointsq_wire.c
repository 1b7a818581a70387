/* jointsq_wire.c: JointSQ's bytes: the Rice-coded map of dropped runs and
 * width classes, the packed value streams, and decode (the format:
 * compress/jointsq.c). */
#include "compress/jointsq.h"

/* the run of one bits at the bottom of acc; 64 when every bit is one
 * (__builtin_ctzll(0) is undefined) */
static inline int ones_run(uint64_t acc) { return ~acc ? __builtin_ctzll(~acc) : 64; }

/* ---- bit writer for the map (LSB first, 32 bits at a time) ---- */

typedef struct {
    uint8_t *p;        /* byte holding the next bit */
    uint64_t acc;      /* the n < 8 pending bits (the low bits of *p) */
    unsigned n;
} mapw_;

/* Appends nb <= 56 bits; branch-free: stores 8 bytes every time (the buffer
 * has 8 bytes of slack past the end of the map). By value, so that the
 * state stays in registers. */
static inline mapw_ mw_put(mapw_ w, uint64_t v, unsigned nb) {
    w.acc |= v << w.n;
    w.n += nb;
    memcpy(w.p, &w.acc, 8);
    w.p += w.n >> 3;
    w.acc >>= w.n & ~7u;
    w.n &= 7;
    return w;
}

/* Class counts (groups) and maxima (bits of the max |x|) of cls[0..ng);
 * mag: |x| per group as floats (group maxima, or x itself when G == 1). */
void pz_jsq_class_stats(const uint8_t *cls, size_t ng, const float *mag, size_t cnt[4], uint32_t mx[4]) {
    size_t i = 0;
#if defined(__AVX512F__)
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512i m1 = _mm512_setzero_si512(), m2 = m1, m3 = m1;
    const __m512i c1 = _mm512_set1_epi32(1), c2 = _mm512_set1_epi32(2), c3 = _mm512_set1_epi32(3);
    for (; i + 16 <= ng; i += 16) {
        __m512i cv = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(cls + i)));
        __m512i key = _mm512_and_si512(_mm512_loadu_si512((const void *)(mag + i)), absm);
        __mmask16 k1 = _mm512_cmpeq_epi32_mask(cv, c1), k2 = _mm512_cmpeq_epi32_mask(cv, c2),
                  k3 = _mm512_cmpeq_epi32_mask(cv, c3);
        m1 = _mm512_mask_max_epu32(m1, k1, m1, key);
        m2 = _mm512_mask_max_epu32(m2, k2, m2, key);
        m3 = _mm512_mask_max_epu32(m3, k3, m3, key);
        cnt[1] += (size_t)__builtin_popcount(k1);
        cnt[2] += (size_t)__builtin_popcount(k2);
        cnt[3] += (size_t)__builtin_popcount(k3);
    }
    uint32_t r1 = _mm512_reduce_max_epu32(m1), r2 = _mm512_reduce_max_epu32(m2), r3 = _mm512_reduce_max_epu32(m3);
    mx[1] = r1 > mx[1] ? r1 : mx[1];
    mx[2] = r2 > mx[2] ? r2 : mx[2];
    mx[3] = r3 > mx[3] ? r3 : mx[3];
#endif
    for (; i < ng; i++) {
        int c = cls[i];
        uint32_t key = pz_abs_key(mag[i]);
        cnt[c]++;
        mx[c] = key > mx[c] ? key : mx[c];
    }
}

static const uint32_t jsq_ccode[4] = {0, 0x0, 0x1, 0x3};
static const int jsq_clen[4] = {0, 1, 2, 2};

/* one run of r dropped groups, then (c > 0) a kept group of class c */
static inline mapw_ mw_run(mapw_ w, uint64_t r, int k, int c) {
    uint64_t q = r >> k;
    while (q > 16) {
        w = mw_put(w, 0xffffu, 16);
        q -= 16;
    }
    uint32_t v = (uint32_t)((1u << q) - 1) | ((uint32_t)(r & ((1u << k) - 1)) << (q + 1));
    unsigned nb = (unsigned)q + 1 + (unsigned)k;
    v |= jsq_ccode[c] << nb;                      /* class 0 (the final run): no code */
    nb += (unsigned)jsq_clen[c];
    return mw_put(w, v, nb);
}

/* The map when k = 0, the usual case when most groups are kept: a run of r
 * dropped groups is then r one bits and a zero, so the map is one code per
 * group (dropped: the bit 1; kept: the bit 0, then its class code) and a
 * final zero bit: the same bits as the run-by-run writer below. Codes of 4
 * groups come from a table, 16 groups (at most 48 bits) go in one put. */
static uint64_t jsq_write_map_k0(const uint8_t *cls, size_t ng, uint8_t *out) {
    uint32_t tab[256];                           /* bits (low 16) and length (high 16) of 4 groups */
    for (uint32_t t = 0; t < 256; t++) {
        uint32_t v = 0, len = 0;
        for (int g = 0; g < 4; g++) {
            int c = (int)(t >> (2 * g)) & 3;
            v |= (c ? jsq_ccode[c] << 1 : 1u) << len;
            len += c ? 1u + (uint32_t)jsq_clen[c] : 1u;
        }
        tab[t] = v | len << 16;
    }
    mapw_ w = {out, 0, 0};
    size_t i = 0;
    for (; i + 16 <= ng; i += 16) {
        uint64_t a, b;
        memcpy(&a, cls + i, 8);
        memcpy(&b, cls + i + 8, 8);
        /* the 2-bit classes of 4 bytes side by side: the table's index */
        a |= a >> 6 | a >> 12 | a >> 18;
        b |= b >> 6 | b >> 12 | b >> 18;
        uint32_t t0 = tab[a & 255], t1 = tab[(a >> 32) & 255], t2 = tab[b & 255], t3 = tab[(b >> 32) & 255];
        unsigned l0 = t0 >> 16, l1 = t1 >> 16, l2 = t2 >> 16, l3 = t3 >> 16;
        uint64_t v = (uint64_t)(t0 & 0xffff) | (uint64_t)(t1 & 0xffff) << l0 |
                     (uint64_t)(t2 & 0xffff) << (l0 + l1) | (uint64_t)(t3 & 0xffff) << (l0 + l1 + l2);
        w = mw_put(w, v, l0 + l1 + l2 + l3);
    }
    for (; i < ng; i++) {
        int c = cls[i];
        w = mw_put(w, c ? jsq_ccode[c] << 1 : 1u, c ? 1u + (unsigned)jsq_clen[c] : 1u);
    }
    w = mw_put(w, 0, 1);                         /* the final run's zero */
    return (uint64_t)(w.p - out) * 8 + w.n;
}

/* Writes the map of cls[0..ng) with Rice parameter k at out (8 bytes of
 * slack past its end); returns its length in bits. With AVX-512 the kept
 * groups of 1024 at a time are gathered and their codes (value, length)
 * computed 16 at a time; the serial part only appends them. */
uint64_t pz_jsq_write_map(const uint8_t *cls, size_t ng, int k, uint8_t *out) {
    if (k == 0) return jsq_write_map_k0(cls, ng, out);
    mapw_ w = {out, 0, 0};
    size_t last = 0, i0 = 0;
#if defined(JSQ_VEC)
    enum { MB = 1024 };
    uint32_t pos[MB + 32], cl[MB + 32];
    uint64_t pv[MB / 2 + 16], pl[MB / 2 + 16];
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    /* per class: code << k and 1 + k + code length */
    const __m512i ctab = _mm512_setr_epi32(0, (int)(jsq_ccode[1] << k), (int)(jsq_ccode[2] << k),
                                           (int)(jsq_ccode[3] << k), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i ltab = _mm512_setr_epi32(1 + k, 1 + k + jsq_clen[1], 1 + k + jsq_clen[2], 1 + k + jsq_clen[3], 0,
                                           0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    /* codes of at most 24 bits go in pairs (<= 48 bits); longer ones (long runs) the slow way */
    const __m512i kv = _mm512_set1_epi32(k), rmask = _mm512_set1_epi32((1 << k) - 1), one = _mm512_set1_epi32(1),
                  nbmax = _mm512_set1_epi32(24), lo32 = _mm512_set1_epi64(0xffffffff);
    for (; i0 + MB <= ng; i0 += MB) {
        /* kept positions of the block and their classes */
        size_t cnt = 0;
        pos[0] = (uint32_t)last - 1;                 /* the previous kept group (wraps at 0: fine) */
        for (size_t j = 0; j < MB; j += 16) {
            __m128i c8 = _mm_loadu_si128((const __m128i *)(const void *)(cls + i0 + j));
            __mmask16 m = _mm_test_epi8_mask(c8, c8);
            __m512i p = _mm512_add_epi32(iota, _mm512_set1_epi32((int)(i0 + j)));
            _mm512_storeu_si512((void *)(pos + 1 + cnt), _mm512_maskz_compress_epi32(m, p));
            _mm512_storeu_si512((void *)(cl + cnt), _mm512_maskz_compress_epi32(m, _mm512_cvtepu8_epi32(c8)));
            cnt += (size_t)__builtin_popcount(m);
        }
        for (size_t j = 0; j < cnt; j += 16) {
            __mmask16 live = cnt - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cnt - j)) - 1);
            __m512i p = _mm512_loadu_si512((const void *)(pos + 1 + j)), pp = _mm512_loadu_si512((const void *)(pos + j));
            __m512i c = _mm512_maskz_mov_epi32(live, _mm512_loadu_si512((const void *)(cl + j)));
            __m512i r = _mm512_sub_epi32(_mm512_sub_epi32(p, pp), one);
            __m512i q = _mm512_srlv_epi32(r, kv);
            __m512i t = _mm512_or_si512(_mm512_permutexvar_epi32(c, ctab), _mm512_and_si512(r, rmask));
            __m512i v = _mm512_or_si512(_mm512_sllv_epi32(t, _mm512_add_epi32(q, one)),
                                        _mm512_sub_epi32(_mm512_sllv_epi32(one, q), one));
            __m512i nb = _mm512_add_epi32(q, _mm512_permutexvar_epi32(c, ltab));
            __mmask16 slow = _mm512_mask_cmpgt_epu32_mask(live, nb, nbmax);
            v = _mm512_maskz_mov_epi32(live, v);
            nb = _mm512_maskz_mov_epi32(live, nb);
            /* pairs: even | odd << len(even) */
            __m512i pvv = _mm512_or_si512(_mm512_and_si512(v, lo32),
                                          _mm512_sllv_epi64(_mm512_srli_epi64(v, 32), _mm512_and_si512(nb, lo32)));
            __m512i plv = _mm512_add_epi64(_mm512_and_si512(nb, lo32), _mm512_srli_epi64(nb, 32));
            /* a pair holding a slow code: length 255 */
            __mmask8 sp = (__mmask8)_pext_u32(slow | (slow >> 1), 0x5555u);
            plv = _mm512_mask_mov_epi64(plv, sp, _mm512_set1_epi64(255));
            _mm512_storeu_si512((void *)(pv + j / 2), pvv);
            _mm512_storeu_si512((void *)(pl + j / 2), plv);
        }
        size_t npair = (cnt + 1) / 2;
        for (size_t j = 0; j < npair; j++) {
            /* two pairs at once when they fit in one put (the usual case) */
            if (j + 1 < npair && pl[j] + pl[j + 1] <= 56) {
                w = mw_put(w, pv[j] | pv[j + 1] << pl[j], (unsigned)(pl[j] + pl[j + 1]));
                j++;
            } else if (pl[j] != 255) {
                w = mw_put(w, pv[j], (unsigned)pl[j]);
            } else {
                /* the run in 32 bits, as in the vectors above: pos[0] is
                 * 2^32 - 1 before the first kept group (last = 0), and in
                 * 64 bits the first run came out near 2^64 (a write far
                 * past the map when that run was a slow code) */
                for (size_t e = 2 * j; e < 2 * j + 2 && e < cnt; e++)
                    w = mw_run(w, (uint32_t)(pos[1 + e] - pos[e] - 1u), k, (int)cl[e]);
            }
        }
        if (cnt) last = pos[cnt] + 1;
    }
#endif
    for (; i0 < ng; i0++) {
        if (!cls[i0]) continue;
        w = mw_run(w, i0 - last, k, cls[i0]);
        last = i0 + 1;
    }
    w = mw_run(w, ng - last, k, 0);
    return (uint64_t)(w.p - out) * 8 + w.n;
}

/* ---- value streams ---- */

/* Packs cnt codes (w bits each, LSB first) to out; writes ceil(w cnt / 8) bytes. */
size_t pz_jsq_pack(const uint8_t *c, size_t cnt, int w, uint8_t *out) {
    size_t nbytes = (cnt * (size_t)w + 7) / 8;
    if (w == 8) {
        memcpy(out, c, cnt);
    } else if (w == 4) {
        size_t full = cnt / 2;
#pragma omp simd
        for (size_t j = 0; j < full; j++) out[j] = (uint8_t)(c[2 * j] | c[2 * j + 1] << 4);
        if (cnt & 1) out[full] = c[cnt - 1];
    } else {
        size_t full = cnt / 4;
#pragma omp simd
        for (size_t j = 0; j < full; j++)
            out[j] = (uint8_t)(c[4 * j] | c[4 * j + 1] << 2 | c[4 * j + 2] << 4 | c[4 * j + 3] << 6);
        if (cnt & 3) {
            uint8_t b = 0;
            for (size_t j = 0; j < (cnt & 3); j++) b |= (uint8_t)(c[4 * full + j] << (2 * j));
            out[full] = b;
        }
    }
    return nbytes;
}

/* Unpacks cnt codes starting at code index `at` of a w-bit stream (at a
 * multiple of 8 / w codes... at is a multiple of 8) into c; returns non-zero
 * when a code is the invalid 2^w - 1. */
static int jsq_unpack(const uint8_t *in, size_t at, size_t cnt, int w, uint8_t *c) {
    const uint8_t *p = in + at * (size_t)w / 8;
    uint8_t bad = (uint8_t)((1u << w) - 1), any = 0;
    if (w == 8) {
        memcpy(c, p, cnt);
    } else if (w == 4) {
        size_t full = cnt / 2;
#pragma omp simd
        for (size_t j = 0; j < full; j++) {
            c[2 * j] = p[j] & 15;
            c[2 * j + 1] = (uint8_t)(p[j] >> 4);
        }
        if (cnt & 1) c[cnt - 1] = p[full] & 15;
    } else {
        size_t full = cnt / 4;
#pragma omp simd
        for (size_t j = 0; j < full; j++) {
            c[4 * j] = p[j] & 3;
            c[4 * j + 1] = (p[j] >> 2) & 3;
            c[4 * j + 2] = (p[j] >> 4) & 3;
            c[4 * j + 3] = (uint8_t)(p[j] >> 6);
        }
        for (size_t j = 0; j < (cnt & 3); j++) c[4 * full + j] = (p[full] >> (2 * j)) & 3;
    }
#pragma omp simd reduction(| : any)
    for (size_t j = 0; j < cnt; j++) any |= (uint8_t)(c[j] == bad);
    return any;
}

/* Codes of elements x[0..cnt) (element indices i0 + j) with per-element
 * classes ec, appended to the staging buffers st[1..3] (counts ns[]). */
void pz_jsq_codes(const float *x, const uint8_t *ec, size_t cnt, uint32_t i0, pz_ukey uk, const float inv[4],
                       uint8_t *st[4], size_t ns[4]) {
    size_t j = 0;
#if defined(JSQ_VEC)
    const __m512 invt = _mm512_setr_ps(inv[0], inv[1], inv[2], inv[3], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512 Lt = _mm512_setr_ps(0.0f, 1.0f, 7.0f, 127.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i klo = _mm512_set1_epi32((int)uk.lo), khi = _mm512_set1_epi32((int)uk.hi);
    const __m512i m1 = _mm512_set1_epi32(0x7feb352d), m2 = _mm512_set1_epi32((int)0x846ca68bu);
    const __m512 one = _mm512_set1_ps(1.0f), u24 = _mm512_set1_ps(0x1p-24f);
    for (; j + 64 <= cnt; j += 64) {
        __m512i cv = _mm512_loadu_si512((const void *)(ec + j));
        uint8_t cb[64];
        for (int q = 0; q < 4; q++) {
            __m512i c32 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(ec + j + 16 * q)));
            __m512 iv = _mm512_permutexvar_ps(c32, invt), Lf = _mm512_permutexvar_ps(c32, Lt);
            __m512 y = _mm512_mul_ps(_mm512_loadu_ps(x + j + 16 * q), iv);
            __m512 f = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
            __m512i h = _mm512_xor_si512(_mm512_add_epi32(_mm512_set1_epi32((int)(i0 + (uint32_t)(j + 16 * q))), iota), klo);
            h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
            h = _mm512_mullo_epi32(h, m1);
            h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 15));
            h = _mm512_mullo_epi32(h, m2);
            h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
            h = _mm512_xor_si512(h, khi);
            __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(h, 8)), u24);
            __mmask16 up = _mm512_cmp_ps_mask(u, _mm512_sub_ps(y, f), _CMP_LT_OQ);
            __m512 qv = _mm512_mask_add_ps(f, up, f, one);
            qv = _mm512_min_ps(_mm512_max_ps(qv, _mm512_sub_ps(_mm512_setzero_ps(), Lf)), Lf);
            __m512i code = _mm512_cvtps_epi32(_mm512_add_ps(qv, Lf));
            _mm_storeu_si128((__m128i *)(void *)(cb + 16 * q), _mm512_cvtepi32_epi8(code));
        }
        __m512i codes = _mm512_loadu_si512((const void *)cb);
        for (int c = 1; c < 4; c++) {
            __mmask64 m = _mm512_cmpeq_epi8_mask(cv, _mm512_set1_epi8((char)c));
            _mm512_storeu_si512((void *)(st[c] + ns[c]), _mm512_maskz_compress_epi8(m, codes));
            ns[c] += (size_t)__builtin_popcountll(m);
        }
    }
#elif defined(__AVX2__)
    /* x86-64-v3: the same arithmetic 8 elements at a time; each class's
     * codes of 8 elements leave through one byte shuffle (compress/vec8.h) */
    const __m256 invt = _mm256_setr_ps(inv[0], inv[1], inv[2], inv[3], 0, 0, 0, 0);
    const __m256 Lt = _mm256_setr_ps(0.0f, 1.0f, 7.0f, 127.0f, 0, 0, 0, 0);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i klo = _mm256_set1_epi32((int)uk.lo), khi = _mm256_set1_epi32((int)uk.hi);
    const __m256i m1 = _mm256_set1_epi32(0x7feb352d), m2 = _mm256_set1_epi32((int)0x846ca68bu);
    const __m256 one = _mm256_set1_ps(1.0f), u24 = _mm256_set1_ps(0x1p-24f);
    for (; j + 8 <= cnt; j += 8) {
        __m128i c8 = _mm_loadl_epi64((const __m128i *)(const void *)(ec + j));
        __m256i c32 = _mm256_cvtepu8_epi32(c8);
        __m256 iv = _mm256_permutevar8x32_ps(invt, c32), Lf = _mm256_permutevar8x32_ps(Lt, c32);
        __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + j), iv);
        __m256 f = _mm256_round_ps(y, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        __m256i h = _mm256_xor_si256(_mm256_add_epi32(_mm256_set1_epi32((int)(i0 + (uint32_t)j)), iota), klo);
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
        h = _mm256_mullo_epi32(h, m1);
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 15));
        h = _mm256_mullo_epi32(h, m2);
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
        h = _mm256_xor_si256(h, khi);
        __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)), u24);
        __m256 up = _mm256_cmp_ps(u, _mm256_sub_ps(y, f), _CMP_LT_OQ);
        __m256 qv = _mm256_add_ps(f, _mm256_and_ps(up, one));
        qv = _mm256_min_ps(_mm256_max_ps(qv, _mm256_sub_ps(_mm256_setzero_ps(), Lf)), Lf);
        __m256i code = _mm256_cvtps_epi32(_mm256_add_ps(qv, Lf));
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(code), _mm256_extracti128_si256(code, 1));
        __m128i cb = _mm_packus_epi16(w, w);
        for (int c = 1; c < 4; c++) {
            unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(c8, _mm_set1_epi8((char)c))) & 0xffu;
            _mm_storel_epi64((__m128i *)(void *)(st[c] + ns[c]), pz_v8_compress_b(m, cb));
            ns[c] += (size_t)__builtin_popcount(m);
        }
    }
#endif
    static const float Lt_s[4] = {0.0f, 1.0f, 7.0f, 127.0f};
    for (; j < cnt; j++) {
        int c = ec[j];
        float u = pz_uniform_w(uk, i0 + (uint32_t)j);
        float q = pz_clampf(pz_round_stoch(x[j] * inv[c], u), -Lt_s[c], Lt_s[c]);
        st[c][ns[c]] = (uint8_t)((int)q + jsq_L[c]);
        ns[c] += c != 0;
    }
}

/* Per-element classes of elements [i0, i0 + cnt) into ec (groups of G). */
void pz_jsq_expand_cls(const uint8_t *cls, size_t G, size_t i0, size_t cnt, uint8_t *ec) {
    size_t i = 0;
    if (G <= 8 && i0 % G == 0) {                 /* 8-byte stores (ec has 8 bytes of slack) */
        for (size_t gi = i0 / G; i < cnt; i += G, gi++) {
            uint64_t v = cls[gi] * 0x0101010101010101ull;
            memcpy(ec + i, &v, 8);
        }
        return;
    }
    while (i < cnt) {
        size_t gi = (i0 + i) / G, end = (gi + 1) * G - i0;
        if (end > cnt) end = cnt;
        memset(ec + i, cls[gi], end - i);
        i = end;
    }
}

/* ---- decode ---- */

typedef struct {
    const uint8_t *p, *end, *start;
    uint64_t acc;      /* next bits, LSB first; bits above n are zero */
    int n;
} mapr_;

static inline void mr_refill(mapr_ *r) {
    if (r->end - r->p >= 8) {
        uint64_t w;
        memcpy(&w, r->p, 8);
        r->acc |= w << r->n;
        int adv = (63 - r->n) >> 3;
        r->p += adv;
        r->n += adv * 8;
        r->acc &= (1ull << r->n) - 1;          /* keep the bits above n zero */
    } else {
        while (r->n <= 56 && r->p < r->end) {
            r->acc |= (uint64_t)*r->p++ << r->n;
            r->n += 8;
        }
    }
}
static inline uint32_t mr_take(mapr_ *r, int nb) {    /* nb <= n, nb < 32 */
    uint32_t v = (uint32_t)(r->acc & ((1ull << nb) - 1));
    r->acc >>= nb;
    r->n -= nb;
    return v;
}

/* k = 0: a dropped group is the bit 1, a kept one the bit 0 and its class
 * code (see jsq_write_map_k0), so the map can be read group by group. The
 * table maps the next JSQ_TBITS bits to the classes of the whole group
 * codes they hold (at most 8: one byte each, written with one 8-byte
 * store), how many, the bits they take and their count per class. */
#define JSQ_TBITS 10

typedef struct {
    uint64_t cls;     /* classes of the groups, byte j = group j (0 past them) */
    uint32_t meta;    /* groups (bits 0-3), bits used (4-7), kept of class 1, 2, 3 (8-11, 12-15, 16-19) */
    uint32_t pad;
} jsq_k0ent;

static jsq_k0ent *jsq_map_table_k0(void) {
    jsq_k0ent *tab = xmalloc(sizeof *tab << JSQ_TBITS);
    for (uint32_t w = 0; w < (1u << JSQ_TBITS); w++) {
        uint64_t cls = 0;
        unsigned bits = 0, g = 0, cnt[4] = {0, 0, 0, 0};
        while (g < 8) {
            unsigned c, len;
            if ((w >> bits) & 1) {
                c = 0;
                len = 1;
            } else if (bits + 2 <= JSQ_TBITS && !((w >> (bits + 1)) & 1)) {
                c = 1;
                len = 2;
            } else if (bits + 3 <= JSQ_TBITS) {
                c = 2 + ((w >> (bits + 2)) & 1);
                len = 3;
            } else {
                break;                               /* the next code does not fit */
            }
            cls |= (uint64_t)c << (8 * g);
            cnt[c]++;
            bits += len;
            g++;
        }
        tab[w].cls = cls;
        tab[w].meta = g | bits << 4 | cnt[1] << 8 | cnt[2] << 12 | cnt[3] << 16;
        tab[w].pad = 0;
    }
    return tab;
}

/* A kept group after its run (the run took `used` bits): its class code,
 * "0" = 2-bit, "10" = 4-bit, "11" = 8-bit, into *cls; counts[0..2] count the
 * kept groups, those of 4 or 8 bits, and those of 8 bits. */
static inline void mr_kept(mapr_ *mr, int used, uint8_t *cls, size_t counts[3]) {
    unsigned b = (unsigned)(mr->acc >> used) & 3u;
    used += 1 + (int)(b & 1);
    mr->acc >>= used;
    mr->n -= used;
    *cls = (uint8_t)((b & 1) ? 2 + (b >> 1) : 1);
    counts[0]++;
    counts[1] += b & 1;
    counts[2] += b == 3;
}

/* Reads the width map (Rice runs and class codes) into cls[] (zeroed);
 * counts the groups per class. Returns non-zero on a malformed map; *state
 * is the reader after the map (for its end and padding). */
static __attribute__((noinline)) int jsq_read_map(mapr_ *state, size_t ng, int k, uint8_t *cls, size_t gcount[4]) {
    mapr_ mr = *state;
    int err = 0;
    size_t pos = 0;
    uint64_t maxq = (uint64_t)(mr.end - mr.start + 1) * 8;
    const uint64_t kmask = ((uint64_t)1 << k) - 1;
    size_t cnt3[3] = {0, 0, 0};   /* kept groups; of them 4- or 8-bit; 8-bit */
    /* table path (k = 0, the short codes of large budgets): up to 8 groups
     * per look-up, while at least JSQ_TBITS bits of data are left and the
     * map is more than 8 groups from its end (the end and the final run go
     * the per-code way below, which may start in the middle of a run: with
     * k = 0 each 1 bit of a run is one dropped group) */
    if (ng >= 16384 && k == 0) {
        jsq_k0ent *tab = jsq_map_table_k0();
        uint64_t packed = 0;                        /* kept per class, 16 bits each, emptied every 4096 look-ups */
        unsigned since = 0;
        for (;;) {
            if (mr.n < 48) mr_refill(&mr);
            if (ng - pos <= 8 || mr.n < JSQ_TBITS) break;
            const jsq_k0ent *e = &tab[mr.acc & ((1u << JSQ_TBITS) - 1)];
            uint32_t m = e->meta;
            memcpy(cls + pos, &e->cls, 8);
            pos += m & 15u;
            mr.acc >>= (m >> 4) & 15u;
            mr.n -= (int)((m >> 4) & 15u);
            packed += (uint64_t)(m >> 8 & 15u) | (uint64_t)(m >> 12 & 15u) << 16 | (uint64_t)(m >> 16 & 15u) << 32;
            if (++since == 4096) {
                cnt3[0] += (packed & 0xffff) + (packed >> 16 & 0xffff) + (packed >> 32 & 0xffff);
                cnt3[1] += (packed >> 16 & 0xffff) + (packed >> 32 & 0xffff);
                cnt3[2] += packed >> 32 & 0xffff;
                packed = 0;
                since = 0;
            }
        }
        cnt3[0] += (packed & 0xffff) + (packed >> 16 & 0xffff) + (packed >> 32 & 0xffff);
        cnt3[1] += (packed >> 16 & 0xffff) + (packed >> 32 & 0xffff);
        cnt3[2] += packed >> 32 & 0xffff;
        free(tab);
    }
    for (;;) {
        /* fast path: the whole code is in the bit buffer */
        if (mr.n < 48) mr_refill(&mr);
        int ones = ones_run(mr.acc);                 /* <= n: bits above n are zero */
        if (ones + 3 + k <= mr.n) {
            uint64_t r = ((uint64_t)ones << k) | ((mr.acc >> (ones + 1)) & kmask);
            int used = ones + 1 + k;
            if (r >= ng - pos) {
                if (r != ng - pos) { err = 1; break; }
                mr.acc >>= used;
                mr.n -= used;
                break;                                       /* final run */
            }
            pos += (size_t)r;
            mr_kept(&mr, used, &cls[pos], cnt3);
            pos++;
            continue;
        }
        /* slow path: long runs, the end of the data */
        uint64_t q = 0;
        for (;;) {
            if (mr.n < 57) mr_refill(&mr);
            if (mr.n == 0) { err = 1; break; }
            ones = ones_run(mr.acc);
            if (ones < mr.n) {
                q += (uint64_t)ones;
                mr.acc >>= ones;
                mr.acc >>= 1;
                mr.n -= ones + 1;
                break;
            }
            q += (uint64_t)mr.n;
            mr.acc = 0;
            mr.n = 0;
            if (q > maxq) { err = 1; break; }
        }
        if (err) break;
        if (mr.n < k + 2) mr_refill(&mr);
        if (mr.n < k) { err = 1; break; }
        uint64_t r = k ? mr_take(&mr, k) : 0;
        r |= q << k;
        if (r > ng - pos) { err = 1; break; }
        pos += (size_t)r;
        if (pos == ng) break;                              /* final run */
        if (mr.n < 1) { err = 1; break; }
        int c = 1;
        if (mr_take(&mr, 1)) {
            if (mr.n < 1) { err = 1; break; }
            c = 2 + (int)mr_take(&mr, 1);
        }
        cls[pos] = (uint8_t)c;
        cnt3[1] += c >= 2;
        cnt3[2] += c == 3;
        cnt3[0]++;
        pos++;
    }
    gcount[3] = cnt3[2];
    gcount[2] = cnt3[1] - cnt3[2];
    gcount[1] = cnt3[0] - cnt3[1];
    *state = mr;
    return err;
}

pz_status pz_jsq_decode(const pz_codec_params *p, const uint8_t *payload, size_t len,
                            const pz_shape *s, float *out) {
    jsq_geom g;
    pz_status st = pz_jsq_geom(p, s, &g);
    if (st != PZ_OK) return st;
    if (len == 0) {
        memset(out, 0, g.n * sizeof *out);
        return PZ_OK;
    }
    if (len > g.pmax) return pz_fail(PZ_ERR_FORMAT, "jointsq: payload of %zu bytes over the budget of %zu", len, g.pmax);
    int k = payload[0];
    if (k > JSQ_MAX_K) return pz_fail(PZ_ERR_FORMAT, "jointsq: bad Rice parameter %d", k);
    const size_t G = g.G, ng = g.ng;
    /* the classes: for G = 1 in the last n bytes of out (writing out[i]
     * later only overwrites classes of elements <= i, already read), else
     * in a buffer */
    uint8_t *cls, *clsb = NULL;
    if (G == 1) {
        cls = (uint8_t *)(void *)out + 3 * g.n;
        memset(cls, 0, ng);
    } else {
        cls = clsb = xcalloc(ng + 64, 1);
    }
    int err = 0;
    size_t gcount[4] = {0, 0, 0, 0}, mcount[4] = {0, 0, 0, 0};
    mapr_ mr = {payload + 1, payload + len, payload + 1, 0, 0};
    err = jsq_read_map(&mr, ng, k, cls, gcount);
    size_t kept = gcount[1] + gcount[2] + gcount[3];
    size_t off_sc = 0;
    if (!err) {
        uint64_t bitpos = (uint64_t)(mr.p - mr.start) * 8 - (uint64_t)mr.n;
        int pad = (int)((8 - bitpos % 8) % 8);
        if (pad > mr.n || (mr.acc & ((1ull << pad) - 1)) != 0) err = 1;   /* padding must be zero */
        off_sc = 1 + (size_t)((bitpos + 7) / 8);
    }
    if (err || kept == 0) {
        free(clsb);
        return pz_fail(PZ_ERR_FORMAT, "jointsq: corrupt width map");
    }
    for (int c = 1; c < 4; c++) mcount[c] = gcount[c] * G;
    if (g.n % G && cls[ng - 1]) mcount[cls[ng - 1]] -= G - g.n % G;
    size_t nsc = 0;
    for (int c = 1; c < 4; c++) nsc += gcount[c] > 0;
    size_t off[4] = {0, 0, 0, 0}, total = off_sc + 4 * nsc;
    for (int c = 1; c < 4; c++) {
        off[c] = total;
        total += (mcount[c] * (size_t)jsq_width[c] + 7) / 8;
    }
    if (total != len) {
        free(clsb);
        return pz_fail(PZ_ERR_FORMAT, "jointsq: payload of %zu bytes, the width map implies %zu", len, total);
    }
    float step[4] = {0, 0, 0, 0};
    size_t so = off_sc;
    for (int c = 1; c < 4; c++) {
        if (!gcount[c]) continue;
        float sv;
        memcpy(&sv, payload + so, 4);
        so += 4;
        if (!(sv > 0.0f) || !isfinite(sv)) {
            free(clsb);
            return pz_fail(PZ_ERR_FORMAT, "jointsq: bad scale for the %d-bit class", jsq_width[c]);
        }
        step[c] = sv / (float)jsq_L[c];
    }
    /* padding bits of each value stream must be zero */
    for (int c = 1; c < 4; c++) {
        size_t bits = mcount[c] * (size_t)jsq_width[c];
        if (bits % 8 && (payload[off[c] + bits / 8] >> (bits % 8)) != 0) err = 1;
    }
    /* values: codes unpacked per class into staging buffers, JSQ_CH at a time */
    uint8_t *stb = xcalloc(4 * (2 * JSQ_CH + 128), 1), *ecb = G > 1 ? xmalloc(JSQ_CH + 64) : NULL;
    uint8_t *stg[4];
    size_t sp[4] = {0, 0, 0, 0}, sa[4] = {0, 0, 0, 0}, rd[4] = {0, 0, 0, 0};
    for (int c = 0; c < 4; c++) stg[c] = stb + (size_t)c * (2 * JSQ_CH + 128);
    static const int Li[4] = {0, 1, 7, 127};
#if defined(JSQ_VEC)
    const __m512i Lt = _mm512_setr_epi32(0, 1, 7, 127, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512 St = _mm512_setr_ps(step[0], step[1], step[2], step[3], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
#elif defined(__AVX2__)
    const __m256i Lt = _mm256_setr_epi32(0, 1, 7, 127, 0, 0, 0, 0);
    const __m256 St = _mm256_setr_ps(step[0], step[1], step[2], step[3], 0, 0, 0, 0);
#endif
    for (size_t i0 = 0; i0 < g.n && !err; i0 += JSQ_CH) {
        size_t cnt = g.n - i0 < JSQ_CH ? g.n - i0 : JSQ_CH;
        const uint8_t *ec = cls + i0;
        if (G > 1) {
            pz_jsq_expand_cls(cls, G, i0, cnt, ecb);
            ec = ecb;
        }
        /* enough codes staged for this chunk: at most cnt per class */
        for (int c = 1; c < 4 && !err; c++) {
            size_t have = sa[c] - sp[c];
            if (have >= cnt || rd[c] == mcount[c]) continue;
            memmove(stg[c], stg[c] + sp[c], have);
            sp[c] = 0;
            size_t want = (2 * JSQ_CH - have) & ~(size_t)7;
            if (want > mcount[c] - rd[c]) want = mcount[c] - rd[c];
            err |= jsq_unpack(payload + off[c], rd[c], want, jsq_width[c], stg[c] + have);
            rd[c] += want;
            sa[c] = have + want;
        }
        size_t j = 0;
#if defined(JSQ_VEC)
        for (; j + 64 <= cnt; j += 64) {
            __m512i cv = _mm512_loadu_si512((const void *)(ec + j));
            __m512i codes = _mm512_setzero_si512();
            for (int c = 1; c < 4; c++) {
                __mmask64 m = _mm512_cmpeq_epi8_mask(cv, _mm512_set1_epi8((char)c));
                codes = _mm512_mask_expand_epi8(codes, m, _mm512_loadu_si512((const void *)(stg[c] + sp[c])));
                sp[c] += (size_t)__builtin_popcountll(m);
            }
            uint8_t cb[64];
            _mm512_storeu_si512((void *)cb, codes);
            for (int q = 0; q < 4; q++) {
                __m512i c32 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(ec + j + 16 * q)));
                __m512i v32 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(cb + 16 * q)));
                __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(v32, _mm512_permutexvar_epi32(c32, Lt)));
                _mm512_storeu_ps(out + i0 + j + 16 * q, _mm512_mul_ps(v, _mm512_permutexvar_ps(c32, St)));
            }
        }
#elif defined(__AVX2__)
        for (; j + 8 <= cnt; j += 8) {
            __m128i c8 = _mm_loadl_epi64((const __m128i *)(const void *)(ec + j)), codes = _mm_setzero_si128();
            for (int c = 1; c < 4; c++) {
                unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(c8, _mm_set1_epi8((char)c))) & 0xffu;
                __m128i src = _mm_loadl_epi64((const __m128i *)(const void *)(stg[c] + sp[c]));
                codes = _mm_or_si128(codes, pz_v8_expand_b(m, src));
                sp[c] += (size_t)__builtin_popcount(m);
            }
            __m256i c32 = _mm256_cvtepu8_epi32(c8), v32 = _mm256_cvtepu8_epi32(codes);
            __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(v32, _mm256_permutevar8x32_epi32(Lt, c32)));
            _mm256_storeu_ps(out + i0 + j, _mm256_mul_ps(v, _mm256_permutevar8x32_ps(St, c32)));
        }
#endif
        for (; j < cnt; j++) {
            int c = ec[j];
            uint8_t v = stg[c][sp[c]];
            sp[c] += c != 0;
            out[i0 + j] = (float)((int)v - Li[c]) * step[c];
        }
        for (int c = 1; c < 4; c++) err |= sp[c] > sa[c];
    }
    for (int c = 1; c < 4 && !err; c++) err |= rd[c] != mcount[c] || sp[c] != sa[c];
    free(stb);
    free(ecb);
    free(clsb);
    if (err) return pz_fail(PZ_ERR_FORMAT, "jointsq: corrupt value codes");
    return PZ_OK;
}

