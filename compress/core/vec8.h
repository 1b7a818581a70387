/* vec8.h: 8-lane (AVX2) counterparts of the AVX-512 mask operations that the
 * codecs' hot loops use: compress (the selected lanes packed to the front)
 * and expand (the front lanes spread to the selected ones) through tables
 * indexed by an 8-bit lane mask, and the byte pack of 8 small integers.
 * x86-64-v3 has no compress/expand instruction; BMI2's pext would do, but
 * it takes hundreds of cycles on Zen 1/2 (microcoded), so the index comes
 * from a 2 KB table instead. Included only where __AVX2__ is defined. */
#ifndef PZ_COMPRESS_VEC8_H
#define PZ_COMPRESS_VEC8_H

#if defined(__AVX2__)
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* set bits of m below bit j (m < 256, j < 8), as a constant expression */
#define PZ_V8_BIT(m, b) (((m) >> (b)) & 1)
#define PZ_V8_POP(x)                                                                                         \
    (PZ_V8_BIT(x, 0) + PZ_V8_BIT(x, 1) + PZ_V8_BIT(x, 2) + PZ_V8_BIT(x, 3) + PZ_V8_BIT(x, 4) + PZ_V8_BIT(x, 5) + \
     PZ_V8_BIT(x, 6) + PZ_V8_BIT(x, 7))
#define PZ_V8_RANK(m, j) PZ_V8_POP((m) & ((1u << (j)) - 1))
/* compress: byte r = the lane j of the r-th set bit (0 past them) */
#define PZ_V8_C(m, j) ((uint64_t)PZ_V8_BIT(m, j) * (uint64_t)(j) << (8 * PZ_V8_RANK(m, j)))
#define PZ_V8_CE(m)                                                                                           \
    (PZ_V8_C(m, 1) | PZ_V8_C(m, 2) | PZ_V8_C(m, 3) | PZ_V8_C(m, 4) | PZ_V8_C(m, 5) | PZ_V8_C(m, 6) | PZ_V8_C(m, 7))
/* expand: byte j = the rank of lane j among the set bits, 0x80 (pshufb: a
 * zero) where bit j is clear */
#define PZ_V8_X(m, j) ((uint64_t)(PZ_V8_BIT(m, j) ? PZ_V8_RANK(m, j) : 0x80u) << (8 * (j)))
#define PZ_V8_XE(m)                                                                                           \
    (PZ_V8_X(m, 0) | PZ_V8_X(m, 1) | PZ_V8_X(m, 2) | PZ_V8_X(m, 3) | PZ_V8_X(m, 4) | PZ_V8_X(m, 5) |          \
     PZ_V8_X(m, 6) | PZ_V8_X(m, 7))
#define PZ_V8_R4(F, b) F(b), F((b) + 1), F((b) + 2), F((b) + 3)
#define PZ_V8_R16(F, b) PZ_V8_R4(F, b), PZ_V8_R4(F, (b) + 4), PZ_V8_R4(F, (b) + 8), PZ_V8_R4(F, (b) + 12)
#define PZ_V8_R64(F, b) PZ_V8_R16(F, b), PZ_V8_R16(F, (b) + 16), PZ_V8_R16(F, (b) + 32), PZ_V8_R16(F, (b) + 48)
#define PZ_V8_R256(F) PZ_V8_R64(F, 0u), PZ_V8_R64(F, 64u), PZ_V8_R64(F, 128u), PZ_V8_R64(F, 192u)

static const uint64_t pz_v8_ctab[256] = {PZ_V8_R256(PZ_V8_CE)};
static const uint64_t pz_v8_xtab[256] = {PZ_V8_R256(PZ_V8_XE)};

/* lane mask of a compare result (all-ones lanes) */
static inline unsigned pz_v8_mask(__m256i m) { return (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(m)); }

/* the lanes of v selected by m (8 bits) packed to the front; lanes past
 * them hold copies of others (stores of them land in slack or are
 * overwritten) */
static inline __m256i pz_v8_compress(unsigned m, __m256i v) {
    __m256i idx = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)pz_v8_ctab[m]));
    return _mm256_permutevar8x32_epi32(v, idx);
}

/* 8 bytes b: the ones selected by m packed to the front (the same caveat) */
static inline __m128i pz_v8_compress_b(unsigned m, __m128i b) {
    return _mm_shuffle_epi8(b, _mm_cvtsi64_si128((long long)pz_v8_ctab[m]));
}

/* 8 bytes: byte j = the next unused byte of b where m has bit j, 0 elsewhere */
static inline __m128i pz_v8_expand_b(unsigned m, __m128i b) {
    return _mm_shuffle_epi8(b, _mm_cvtsi64_si128((long long)pz_v8_xtab[m]));
}

/* the low bytes of 8 lanes holding 0..255, as 8 bytes at p */
static inline void pz_v8_store_bytes(uint8_t *p, __m256i v) {
    __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64((__m128i *)(void *)p, _mm_packus_epi16(w, w));
}

/* 8 bytes at p as 8 lanes */
static inline __m256i pz_v8_load_bytes(const uint8_t *p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
}

/* horizontal max of 8 unsigned lanes */
static inline uint32_t pz_v8_hmax_epu32(__m256i v) {
    __m128i m = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0x4E));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(m);
}

/* horizontal sum of 8 lanes (each < 2^32 / 8) */
static inline uint32_t pz_v8_hsum_epi32(__m256i v) {
    __m128i m = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_add_epi32(m, _mm_shuffle_epi32(m, 0x4E));
    m = _mm_add_epi32(m, _mm_shuffle_epi32(m, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(m);
}

/* uint32 lanes to float, rounded to nearest as a scalar (float)u does (AVX2
 * converts only signed lanes: the high and low halves are exact, their sum
 * rounds once) */
static inline __m256 pz_v8_cvtepu32_ps(__m256i u) {
    __m256 hi = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(u, 16)), _mm256_set1_ps(65536.0f));
    return _mm256_add_ps(hi, _mm256_cvtepi32_ps(_mm256_and_si256(u, _mm256_set1_epi32(0xffff))));
}

#endif
#endif
