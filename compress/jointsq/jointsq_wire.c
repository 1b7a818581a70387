/* jointsq_wire.c: JointSQ's bytes on the encoding side: the Rice-coded map
 * of dropped runs and width classes and the packed value streams (the
 * format: compress/jointsq/jointsq.c; decode: compress/jointsq/jointsq_read.c). */
#include "compress/jointsq/jointsq_priv.h"

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
#elif defined(__AVX2__)
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    __m256i m1 = _mm256_setzero_si256(), m2 = m1, m3 = m1, n1 = m1, n2 = m1, n3 = m1;
    const __m256i c1 = _mm256_set1_epi32(1), c2 = _mm256_set1_epi32(2), c3 = _mm256_set1_epi32(3);
    for (; i + 8 <= ng; i += 8) {
        __m256i cv = pz_v8_load_bytes(cls + i);
        __m256i key = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(mag + i)), absm);
        __m256i k1 = _mm256_cmpeq_epi32(cv, c1), k2 = _mm256_cmpeq_epi32(cv, c2), k3 = _mm256_cmpeq_epi32(cv, c3);
        m1 = _mm256_max_epu32(m1, _mm256_and_si256(k1, key));
        m2 = _mm256_max_epu32(m2, _mm256_and_si256(k2, key));
        m3 = _mm256_max_epu32(m3, _mm256_and_si256(k3, key));
        n1 = _mm256_sub_epi32(n1, k1);                /* (-1 per lane of the class; < 2^31 / 8 vectors per call) */
        n2 = _mm256_sub_epi32(n2, k2);
        n3 = _mm256_sub_epi32(n3, k3);
        if ((i & ((1u << 28) - 8)) == (1u << 28) - 8) {
            cnt[1] += pz_v8_hsum_epi32(n1);
            cnt[2] += pz_v8_hsum_epi32(n2);
            cnt[3] += pz_v8_hsum_epi32(n3);
            n1 = n2 = n3 = _mm256_setzero_si256();
        }
    }
    cnt[1] += pz_v8_hsum_epi32(n1);
    cnt[2] += pz_v8_hsum_epi32(n2);
    cnt[3] += pz_v8_hsum_epi32(n3);
    uint32_t r1 = pz_v8_hmax_epu32(m1), r2 = pz_v8_hmax_epu32(m2), r3 = pz_v8_hmax_epu32(m3);
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
#if defined(__AVX2__)
    /* 32 groups a vector: the codes of pairs from a 16-entry byte table,
     * then pairs joined into fours, eights and sixteens by variable
     * shifts; the serial part appends the two sixteens */
    uint8_t pv8[16], pl8[16];
    for (int t = 0; t < 16; t++) {
        uint32_t v0, l0, v1, l1;
        int c0 = t & 3, c1 = t >> 2;
        v0 = c0 ? jsq_ccode[c0] << 1 : 1u;
        l0 = c0 ? 1u + (uint32_t)jsq_clen[c0] : 1u;
        v1 = c1 ? jsq_ccode[c1] << 1 : 1u;
        l1 = c1 ? 1u + (uint32_t)jsq_clen[c1] : 1u;
        pv8[t] = (uint8_t)(v0 | v1 << l0);
        pl8[t] = (uint8_t)(l0 + l1);
    }
    const __m256i tv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)pv8));
    const __m256i tl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)pl8));
    const __m256i w14 = _mm256_set1_epi16(0x0401), hi0 = _mm256_set1_epi16((short)0x8000);
    const __m256i lo16 = _mm256_set1_epi32(0xffff), lo32 = _mm256_set1_epi64x(0xffffffff);
    for (; i + 32 <= ng; i += 32) {
        __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(cls + i));
        /* c_even + 4 c_odd in each 16-bit lane; the high byte's index 0x80 gives 0 */
        __m256i p = _mm256_or_si256(_mm256_maddubs_epi16(c, w14), hi0);
        __m256i v = _mm256_shuffle_epi8(tv, p), l = _mm256_shuffle_epi8(tl, p);
        __m256i l4 = _mm256_and_si256(l, lo16);
        v = _mm256_or_si256(_mm256_and_si256(v, lo16), _mm256_sllv_epi32(_mm256_srli_epi32(v, 16), l4));
        l = _mm256_add_epi32(l4, _mm256_srli_epi32(l, 16));
        __m256i l8 = _mm256_and_si256(l, lo32);
        v = _mm256_or_si256(_mm256_and_si256(v, lo32), _mm256_sllv_epi64(_mm256_srli_epi64(v, 32), l8));
        l = _mm256_add_epi64(l8, _mm256_srli_epi64(l, 32));
        /* and sixteens (at most 48 bits) in the 64-bit lanes 0 and 2 */
        v = _mm256_or_si256(v, _mm256_sllv_epi64(_mm256_srli_si256(v, 8), l));
        l = _mm256_add_epi64(l, _mm256_srli_si256(l, 8));
        __m128i vh = _mm256_extracti128_si256(v, 1), lh = _mm256_extracti128_si256(l, 1);
        w = mw_put(w, (uint64_t)_mm_cvtsi128_si64(_mm256_castsi256_si128(v)),
                   (unsigned)_mm_cvtsi128_si64(_mm256_castsi256_si128(l)));
        w = mw_put(w, (uint64_t)_mm_cvtsi128_si64(vh), (unsigned)_mm_cvtsi128_si64(lh));
    }
#endif
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

#if defined(JSQ_VEC) || defined(__AVX2__)
enum { JSQ_MB = 1024 };   /* groups per block of the vector map writer */

/* The kept groups of cls[i0 .. i0 + JSQ_MB): their positions to pos[1..],
 * their classes to cl[]; returns how many. */
static inline size_t jsq_kept_block(const uint8_t *cls, size_t i0, uint32_t *pos, uint32_t *cl) {
    size_t cnt = 0;
#if defined(JSQ_VEC)
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (size_t j = 0; j < JSQ_MB; j += 16) {
        __m128i c8 = _mm_loadu_si128((const __m128i *)(const void *)(cls + i0 + j));
        __mmask16 m = _mm_test_epi8_mask(c8, c8);
        __m512i p = _mm512_add_epi32(iota, _mm512_set1_epi32((int)(i0 + j)));
        _mm512_storeu_si512((void *)(pos + 1 + cnt), _mm512_maskz_compress_epi32(m, p));
        _mm512_storeu_si512((void *)(cl + cnt), _mm512_maskz_compress_epi32(m, _mm512_cvtepu8_epi32(c8)));
        cnt += (size_t)__builtin_popcount(m);
    }
#else
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (size_t j = 0; j < JSQ_MB; j += 8) {
        __m128i c8 = _mm_loadl_epi64((const __m128i *)(const void *)(cls + i0 + j));
        unsigned m = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(c8, _mm_setzero_si128())) & 0xffu;
        __m256i p = _mm256_add_epi32(iota, _mm256_set1_epi32((int)(i0 + j)));
        _mm256_storeu_si256((__m256i *)(void *)(pos + 1 + cnt), pz_v8_compress(m, p));
        _mm256_storeu_si256((__m256i *)(void *)(cl + cnt), pz_v8_compress(m, _mm256_cvtepu8_epi32(c8)));
        cnt += (size_t)__builtin_popcount(m);
    }
#endif
    return cnt;
}

/* The codes (value, length) of the cnt kept groups of a block (each after
 * its run: pos[e + 1] - pos[e] - 1 dropped groups), in pairs: pv[j] = code
 * 2j | code 2j+1 << its length, pl[j] = the lengths' sum, or 255 when either
 * code is longer than 24 bits (a long run: written the slow way). */
static inline void jsq_pair_codes(const uint32_t *pos, const uint32_t *cl, size_t cnt, int k, uint64_t *pv,
                                  uint64_t *pl) {
#if defined(JSQ_VEC)
    /* per class: code << k and 1 + k + code length */
    const __m512i ctab = _mm512_setr_epi32(0, (int)(jsq_ccode[1] << k), (int)(jsq_ccode[2] << k),
                                           (int)(jsq_ccode[3] << k), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i ltab = _mm512_setr_epi32(1 + k, 1 + k + jsq_clen[1], 1 + k + jsq_clen[2], 1 + k + jsq_clen[3], 0,
                                           0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i kv = _mm512_set1_epi32(k), rmask = _mm512_set1_epi32((1 << k) - 1), one = _mm512_set1_epi32(1),
                  nbmax = _mm512_set1_epi32(24), lo32 = _mm512_set1_epi64(0xffffffff);
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
#else
    const __m256i ctab = _mm256_setr_epi32(0, (int)(jsq_ccode[1] << k), (int)(jsq_ccode[2] << k),
                                           (int)(jsq_ccode[3] << k), 0, 0, 0, 0);
    const __m256i ltab = _mm256_setr_epi32(1 + k, 1 + k + jsq_clen[1], 1 + k + jsq_clen[2], 1 + k + jsq_clen[3], 0,
                                           0, 0, 0);
    const __m256i kv = _mm256_set1_epi32(k), rmask = _mm256_set1_epi32((1 << k) - 1), one = _mm256_set1_epi32(1),
                  nb25 = _mm256_set1_epi32(25), lo32 = _mm256_set1_epi64x(0xffffffff),
                  iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (size_t j = 0; j < cnt; j += 8) {
        __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(cnt - j < 8 ? cnt - j : 8)), iota);
        __m256i p = _mm256_loadu_si256((const __m256i *)(const void *)(pos + 1 + j));
        __m256i pp = _mm256_loadu_si256((const __m256i *)(const void *)(pos + j));
        __m256i c = _mm256_and_si256(live, _mm256_loadu_si256((const __m256i *)(const void *)(cl + j)));
        __m256i r = _mm256_sub_epi32(_mm256_sub_epi32(p, pp), one);
        __m256i q = _mm256_srlv_epi32(r, kv);
        __m256i t = _mm256_or_si256(_mm256_permutevar8x32_epi32(ctab, c), _mm256_and_si256(r, rmask));
        __m256i v = _mm256_or_si256(_mm256_sllv_epi32(t, _mm256_add_epi32(q, one)),
                                    _mm256_sub_epi32(_mm256_sllv_epi32(one, q), one));
        __m256i nb = _mm256_add_epi32(q, _mm256_permutevar8x32_epi32(ltab, c));
        /* nb > 24, unsigned: max(nb, 25) == nb */
        __m256i slow = _mm256_and_si256(live, _mm256_cmpeq_epi32(_mm256_max_epu32(nb, nb25), nb));
        v = _mm256_and_si256(live, v);
        nb = _mm256_and_si256(live, nb);
        __m256i pvv = _mm256_or_si256(_mm256_and_si256(v, lo32),
                                      _mm256_sllv_epi64(_mm256_srli_epi64(v, 32), _mm256_and_si256(nb, lo32)));
        __m256i plv = _mm256_add_epi64(_mm256_and_si256(nb, lo32), _mm256_srli_epi64(nb, 32));
        /* a pair holding a slow code: both halves of its 64-bit lane set */
        __m256i sp = _mm256_or_si256(slow, _mm256_or_si256(_mm256_slli_epi64(slow, 32), _mm256_srli_epi64(slow, 32)));
        plv = _mm256_blendv_epi8(plv, _mm256_set1_epi64x(255), sp);
        _mm256_storeu_si256((__m256i *)(void *)(pv + j / 2), pvv);
        _mm256_storeu_si256((__m256i *)(void *)(pl + j / 2), plv);
    }
#endif
}

/* Appends the codes of cnt kept groups (jsq_pair_codes' pairs pv, pl; the
 * runs' ends pos, classes cl for the long runs) to the map. */
static inline mapw_ jsq_put_pairs(mapw_ w, const uint32_t *pos, const uint32_t *cl, size_t cnt, int k, const uint64_t *pv,
                           const uint64_t *pl) {
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
    return w;
}
#endif

static inline mapw_ mw_of(const jsq_mapst *m) {
    mapw_ w = {m->p, m->acc, m->n};
    return w;
}

static inline void mw_save(jsq_mapst *m, mapw_ w) {
    m->p = w.p;
    m->acc = w.acc;
    m->n = w.n;
}

/* Appends the codes of the groups [i0, end) of cls (Rice parameter k > 0;
 * *lastp: the group after the last kept one before i0, then after i0).
 * With vectors (AVX-512, AVX2) the kept groups of JSQ_MB at a time are
 * gathered and their codes (value, length) computed a vector at a time;
 * the serial part only appends them. */
static mapw_ jsq_map_range(mapw_ w, const uint8_t *cls, size_t i0, size_t end, int k, size_t *lastp) {
    size_t last = *lastp;
#if defined(JSQ_VEC) || defined(__AVX2__)
    uint32_t pos[JSQ_MB + 32], cl[JSQ_MB + 32];
    uint64_t pv[JSQ_MB / 2 + 16], pl[JSQ_MB / 2 + 16];
    for (; i0 + JSQ_MB <= end; i0 += JSQ_MB) {
        pos[0] = (uint32_t)last - 1;                 /* the previous kept group (wraps at 0: fine) */
        size_t cnt = jsq_kept_block(cls, i0, pos, cl);
        jsq_pair_codes(pos, cl, cnt, k, pv, pl);
        w = jsq_put_pairs(w, pos, cl, cnt, k, pv, pl);
        if (cnt) last = pos[cnt] + 1;
    }
#endif
    for (; i0 < end; i0++) {
        if (!cls[i0]) continue;
        w = mw_run(w, i0 - last, k, cls[i0]);
        last = i0 + 1;
    }
    *lastp = last;
    return w;
}

/* Writes the map of cls[0..ng) with Rice parameter k at out (8 bytes of
 * slack past its end); returns its length in bits. */
uint64_t pz_jsq_write_map(const uint8_t *cls, size_t ng, int k, uint8_t *out) {
    if (k == 0) return jsq_write_map_k0(cls, ng, out);
    jsq_mapst ms = {out, 0, 0, k, 0};
    mw_save(&ms, jsq_map_range(mw_of(&ms), cls, 0, ng, k, &ms.last));
    return pz_jsq_map_finish(&ms, ng, out);
}

/* The map's end: the final run of dropped groups; returns the map's length
 * in bits from out. */
uint64_t pz_jsq_map_finish(jsq_mapst *ms, size_t ng, const uint8_t *out) {
    mapw_ w = mw_run(mw_of(ms), ng - ms->last, ms->k, 0);
    mw_save(ms, w);
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

#if defined(__AVX2__) && !defined(JSQ_VEC)
/* The codes of 8 elements xv with classes c8 (32-bit lanes, to be packed
 * with signed then unsigned saturation): the arithmetic of
 * the scalar loop below (and AVX-512's) in fewer vector operations (the
 * loop is bound by the vector pipes). hx: element index ^ key, the hash's
 * first step. The clamp to [-L, L] is min(L, y) before the rounding (y
 * above L rounds to L either way; y = L has no fraction, so no round up)
 * and the packs' saturation after it: a code under 0 packs to 0, as
 * max(q, -L) gave, and so does a NaN lane (0 * inf: a class of zeros;
 * minps returns its second operand when one is NaN, so it stays NaN and
 * converts to INT_MIN). */
static inline __m256i jsq_code8(__m256 xv, __m128i c8, __m256i hx, pz_ukey uk, __m256 invt) {
    const __m256 Lt = _mm256_setr_ps(0.0f, 1.0f, 7.0f, 127.0f, 0, 0, 0, 0);
    __m256i c32 = _mm256_cvtepu8_epi32(c8);
    __m256 iv = _mm256_permutevar8x32_ps(invt, c32), Lf = _mm256_permutevar8x32_ps(Lt, c32);
    __m256 y = _mm256_min_ps(Lf, _mm256_mul_ps(xv, iv));
    __m256 f = _mm256_round_ps(y, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m256i h = _mm256_xor_si256(hx, _mm256_srli_epi32(hx, 16));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32(0x7feb352d));
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 15));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32((int)0x846ca68bu));
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
    h = _mm256_xor_si256(h, _mm256_set1_epi32((int)uk.hi));
    __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)), _mm256_set1_ps(0x1p-24f));
    __m256i up = _mm256_castps_si256(_mm256_cmp_ps(u, _mm256_sub_ps(y, f), _CMP_LT_OQ));
    return _mm256_sub_epi32(_mm256_cvtps_epi32(_mm256_add_ps(f, Lf)), up);   /* (up: -1 or 0) */
}

/* compress/core/vec8.h's compress table for the second 8 bytes of a
 * 16-byte vector: each index plus 8 */
#define JSQ_V8_CEH(m) (PZ_V8_CE(m) + 0x0808080808080808ull)
static const uint64_t jsq_ctab_hi[256] = {PZ_V8_R256(JSQ_V8_CEH)};

/* Lanes a block of the AVX2 code loop below gathers at a time. */
enum { JSQ_DB = 256 };

/* A block's kept elements (class > 0): values, offsets in the block and
 * classes, gathered 8 at a time by the table compress of
 * compress/core/vec8.h (the offsets as bytes, JSQ_DB <= 256: one byte
 * shuffle per 8 lanes where 32-bit indices took a broadcast, an add and
 * a lane permute). */
typedef struct {
    float x[JSQ_DB + 16];
    uint8_t o[JSQ_DB + 16];
    uint8_t c[JSQ_DB + 16];
} jsq_kept8;

_Static_assert(JSQ_DB <= 256 && JSQ_DB % 16 == 0, "block offsets are bytes; the gather takes 16 lanes at a time");

static size_t jsq_gather8(const float *x, const uint8_t *ec, jsq_kept8 *g) {
    /* 16 lanes an iteration: one compare and movemask for both 8s, and
     * the offsets and classes of both in one 16-byte vector each */
    __m128i ob = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    size_t nk = 0;
    for (size_t b = 0; b < JSQ_DB; b += 16) {
        __m128i c16 = _mm_loadu_si128((const __m128i *)(const void *)(ec + b));
        unsigned m = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(c16, _mm_setzero_si128())) & 0xffffu;
        unsigned m0 = m & 0xffu, m1 = m >> 8;
        size_t n0 = (size_t)__builtin_popcount(m0);
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(x + b));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(x + b + 8));
        _mm256_storeu_si256((__m256i *)(void *)(g->x + nk), pz_v8_compress(m0, x0));
        _mm256_storeu_si256((__m256i *)(void *)(g->x + nk + n0), pz_v8_compress(m1, x1));
        __m128i i1 = _mm_cvtsi64_si128((long long)jsq_ctab_hi[m1]);
        _mm_storel_epi64((__m128i *)(void *)(g->o + nk), pz_v8_compress_b(m0, ob));
        _mm_storel_epi64((__m128i *)(void *)(g->o + nk + n0), _mm_shuffle_epi8(ob, i1));
        _mm_storel_epi64((__m128i *)(void *)(g->c + nk), pz_v8_compress_b(m0, c16));
        _mm_storel_epi64((__m128i *)(void *)(g->c + nk + n0), _mm_shuffle_epi8(c16, i1));
        nk += n0 + (size_t)__builtin_popcount(m1);
        ob = _mm_add_epi8(ob, _mm_set1_epi8(16));
    }
    return nk;
}

/* jsq_code8 of the gathered elements k .. k + 7 (hb: the block's first
 * index ^ the key, see below) */
static inline __m256i jsq_code8_at(const jsq_kept8 *g, size_t k, __m256i hb, pz_ukey uk, __m256 invt) {
    __m128i c8 = _mm_loadl_epi64((const __m128i *)(const void *)(g->c + k));
    return jsq_code8(_mm256_loadu_ps(g->x + k), c8, _mm256_xor_si256(hb, pz_v8_load_bytes(g->o + k)), uk, invt);
}

/* 16 code bytes cb (classes c16, 0: none) appended to their classes'
 * staging buffers *s1, *s2, *s3, each 8 through one byte shuffle
 * (compress/core/vec8.h); the buffers have room for 8 bytes past the codes. */
static inline void jsq_put16(__m128i cb, __m128i c16, uint8_t **s1, uint8_t **s2, uint8_t **s3) {
    /* the class masks from the classes' two bits (1, 2, 3), shifted to
     * the bytes' top bits (a bit crossing into the next byte lands in its
     * bit 0 or 1, not 7): two movemasks for three compares */
    unsigned b0 = (unsigned)_mm_movemask_epi8(_mm_slli_epi16(c16, 7));
    unsigned b1 = (unsigned)_mm_movemask_epi8(_mm_slli_epi16(c16, 6));
    unsigned m[3] = {b0 & ~b1, b1 & ~b0, b0 & b1};
    uint8_t **sp[3] = {s1, s2, s3};
    for (int c = 0; c < 3; c++) {
        uint8_t *p = *sp[c];
        unsigned lo = m[c] & 0xffu, hi = m[c] >> 8;
        _mm_storel_epi64((__m128i *)(void *)p, pz_v8_compress_b(lo, cb));
        p += __builtin_popcount(lo);
        _mm_storel_epi64((__m128i *)(void *)p, _mm_shuffle_epi8(cb, _mm_cvtsi64_si128((long long)jsq_ctab_hi[hi])));
        *sp[c] = p + __builtin_popcount(hi);
    }
}

/* The codes of nk gathered elements (class 0 past them, to a multiple of
 * 16) appended to their classes' staging buffers, 16 at a time: the two
 * 8s' 32-bit codes packed together (two packs and a lane permute for 16
 * bytes where each 8 took an extract and two packs). (The pointers in
 * locals: through st and ns the byte stores would reload them.) */
static void jsq_codes_kept8(const jsq_kept8 *g, size_t nk, uint32_t i0, pz_ukey uk, __m256 invt, uint8_t *st[4],
                            size_t ns[4]) {
    uint8_t *s1 = st[1] + ns[1], *s2 = st[2] + ns[2], *s3 = st[3] + ns[3];
    const uint8_t *e1 = s1, *e2 = s2, *e3 = s3;
    /* i0 is a multiple of 256 (JSQ_DB): the index i0 + o is i0 | o, so
     * (i0 + o) ^ key = (i0 ^ key) ^ o, one operation per 8 lanes */
    const __m256i base = _mm256_set1_epi32((int)(i0 ^ uk.lo));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (size_t k = 0; k < nk; k += 16) {
        __m256i a = jsq_code8_at(g, k, base, uk, invt);
        __m256i b = k + 8 < nk ? jsq_code8_at(g, k + 8, base, uk, invt) : a;   /* (past nk: class 0) */
        /* words a0-3 b0-3 | a4-7 b4-7, bytes the same twice: the 4-byte
         * pieces a0-3, a4-7, b0-3, b4-7 are lanes 0, 4, 1, 5 */
        __m256i w = _mm256_packs_epi32(a, b);
        w = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w, w), order);
        jsq_put16(_mm256_castsi256_si128(w), _mm_loadu_si128((const __m128i *)(const void *)(g->c + k)), &s1, &s2, &s3);
    }
    ns[1] += (size_t)(s1 - e1);
    ns[2] += (size_t)(s2 - e2);
    ns[3] += (size_t)(s3 - e3);
}

/* The map's codes of a gathered block's kept elements (element i0 + o,
 * class c: groups of 1), appended to the map of ms. */
static void jsq_map_kept8(jsq_mapst *ms, const jsq_kept8 *g, size_t nk, uint32_t i0) {
    uint32_t pos[JSQ_DB + 16], cl[JSQ_DB + 16];
    uint64_t pv[JSQ_DB / 2 + 8], pl[JSQ_DB / 2 + 8];
    const __m256i base = _mm256_set1_epi32((int)i0);
    pos[0] = (uint32_t)ms->last - 1;                 /* as jsq_map_range's */
    for (size_t e = 0; e < nk; e += 8) {
        _mm256_storeu_si256((__m256i *)(void *)(pos + 1 + e), _mm256_add_epi32(base, pz_v8_load_bytes(g->o + e)));
        _mm256_storeu_si256((__m256i *)(void *)(cl + e), pz_v8_load_bytes(g->c + e));
    }
    jsq_pair_codes(pos, cl, nk, ms->k, pv, pl);
    mw_save(ms, jsq_put_pairs(mw_of(ms), pos, cl, nk, ms->k, pv, pl));
    if (nk) ms->last = pos[nk] + 1;
}
#endif

/* the scalar form of one element's code (class c > 0, element index i) */
static inline void jsq_code1(float x, int c, uint32_t i, pz_ukey uk, const float inv[4], uint8_t *st[4],
                             size_t ns[4]) {
    static const float Lt_s[4] = {0.0f, 1.0f, 7.0f, 127.0f};
    float u = pz_uniform_w(uk, i);
    float q = pz_clampf(pz_round_stoch(x * inv[c], u), -Lt_s[c], Lt_s[c]);
    st[c][ns[c]] = (uint8_t)((int)q + jsq_L[c]);
    ns[c] += c != 0;
}

/* Codes of elements x[0..cnt) (element indices i0 + j) with per-element
 * classes ec, appended to the staging buffers st[1..3] (counts ns[]; 8
 * bytes of slack past them); with ms (groups of 1: ec is then the classes
 * from group i0 on), the map's codes of the same groups appended too. */
void pz_jsq_codes(const float *x, const uint8_t *ec, size_t cnt, uint32_t i0, pz_ukey uk, const float inv[4],
                       uint8_t *st[4], size_t ns[4], jsq_mapst *ms) {
    size_t j = 0, jm = 0;                            /* jm: the map written for [0, jm) */
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
    /* x86-64-v3: the same arithmetic 8 elements at a time, on a block's
     * kept elements gathered first (jointsq:4 drops about half, :2 three
     * quarters); a class 0 lane padding the last 8 codes nothing */
    const __m256 invt = _mm256_setr_ps(inv[0], inv[1], inv[2], inv[3], 0, 0, 0, 0);
    jsq_kept8 g;
    for (; i0 % JSQ_DB == 0 && j + JSQ_DB <= cnt; j += JSQ_DB) {   /* (jsq_codes_kept8's index trick) */
        size_t nk = jsq_gather8(x + j, ec + j, &g);
        _mm256_storeu_ps(g.x + nk, _mm256_setzero_ps());
        _mm256_storeu_ps(g.x + nk + 8, _mm256_setzero_ps());
        memset(g.o + nk, 0, 16);
        memset(g.c + nk, 0, 16);
        if (ms) jsq_map_kept8(ms, &g, nk, i0 + (uint32_t)j);
        jsq_codes_kept8(&g, nk, i0 + (uint32_t)j, uk, invt, st, ns);
    }
    jm = j;
#endif
    if (ms) mw_save(ms, jsq_map_range(mw_of(ms), ec - i0, i0 + jm, i0 + cnt, ms->k, &ms->last));
    for (; j < cnt; j++) jsq_code1(x[j], ec[j], i0 + (uint32_t)j, uk, inv, st, ns);
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
