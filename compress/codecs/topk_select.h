/* topk_select.h: topk's selection loops (compress/codecs/topk.c's encode, steps 2
 * to 4 of its comment): gather the candidates above a threshold, filter them
 * to the exact top k, or keep the top k of a segment directly. AVX-512 packs
 * 16 lanes with vpcompressd, AVX2 (x86-64-v3) 8 through compress/core/vec8.h's
 * table; the scalar loops finish every vector loop and run alone below v3.
 * Included by topk.c only (static functions, compiled per ISA level with it). */
#ifndef PZ_COMPRESS_TOPK_SELECT_H
#define PZ_COMPRESS_TOPK_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "compress/core/kselect.h"
#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif
#if defined(__AVX2__) && !defined(__AVX512F__)
#include "compress/core/vec8.h"
#endif

#define TOPK_SLACK 16              /* spare slots after vector stores */

/* Keeps the top k of x[0..L) (threshold T, `above` keys > T): writes their
 * indices (base + i) and values, returns how many (k). idx/val need one slot
 * of slack after the k written. */
static size_t compact(const float *x, size_t L, size_t base, uint32_t T, size_t ties,
                      uint32_t *idx, float *val) {
    size_t m = 0;
    for (size_t i = 0; i < L; i++) {
        uint32_t key = pz_abs_key(x[i]);
        size_t eq = key == T;
        size_t take = (key > T) | (eq & (ties > 0));
        ties -= eq & take;
        idx[m] = (uint32_t)(base + i);
        val[m] = x[i];
        m += take;
    }
    return m;
}

/* Gathers the elements of x[0..L) with key >= t (indices base + i, values):
 * returns how many, or SIZE_MAX as soon as there are more than cap. idx/val
 * hold cap + TOPK_SLACK. */
static size_t gather_ge(const float *x, size_t L, uint32_t t, uint32_t base, size_t cap,
                        uint32_t *idx, float *val) {
    size_t m = 0, i = 0;
#if defined(__AVX512F__)
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), tv = _mm512_set1_epi32((int)t);
    const __m512i step = _mm512_set1_epi32(16);
    __m512i iv = _mm512_add_epi32(_mm512_set1_epi32((int)base),
                                  _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    for (; i + 16 <= L; i += 16) {
        __m512i v = _mm512_loadu_si512((const void *)(x + i));
        __mmask16 mk = _mm512_cmpge_epu32_mask(_mm512_and_si512(v, absm), tv);
        _mm512_storeu_si512((void *)(idx + m), _mm512_maskz_compress_epi32(mk, iv));
        _mm512_storeu_si512((void *)(val + m), _mm512_maskz_compress_epi32(mk, v));
        m += (size_t)__builtin_popcount(mk);
        if (m > cap) return SIZE_MAX;
        iv = _mm512_add_epi32(iv, step);
    }
#elif defined(__AVX2__)
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), tv = _mm256_set1_epi32((int)t);
    const __m256i step = _mm256_set1_epi32(8);
    __m256i iv = _mm256_add_epi32(_mm256_set1_epi32((int)base), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (; i + 8 <= L; i += 8) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(x + i)), key = _mm256_and_si256(v, absm);
        unsigned mk = pz_v8_mask(_mm256_cmpeq_epi32(_mm256_max_epu32(key, tv), key));   /* key >= t */
        _mm256_storeu_si256((__m256i *)(void *)(idx + m), pz_v8_compress(mk, iv));
        _mm256_storeu_si256((__m256i *)(void *)(val + m), pz_v8_compress(mk, v));
        m += (size_t)__builtin_popcount(mk);
        if (m > cap) return SIZE_MAX;
        iv = _mm256_add_epi32(iv, step);
    }
#endif
    for (; i < L; i++) {
        idx[m] = base + (uint32_t)i;
        val[m] = x[i];
        m += pz_abs_key(x[i]) >= t;
        if (m > cap) return SIZE_MAX;
    }
    return m;
}

/* Of the m candidates (ascending indices), keeps key > T and the first `ties`
 * with key == T; returns how many were written to kidx/kval (which hold
 * that many + TOPK_SLACK). */
static size_t filter(const uint32_t *idx, const float *val, size_t m, uint32_t T, size_t ties,
                     uint32_t *kidx, float *kval) {
    size_t o = 0, j = 0;
#if defined(__AVX512F__)
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), tv = _mm512_set1_epi32((int)T);
    for (; j + 16 <= m; j += 16) {
        __m512i v = _mm512_loadu_si512((const void *)(val + j));
        __m512i key = _mm512_and_si512(v, absm);
        unsigned keep = _mm512_cmpgt_epu32_mask(key, tv);
        unsigned eq = _mm512_cmpeq_epu32_mask(key, tv);
        while (eq && ties) {
            keep |= eq & (0u - eq);
            eq &= eq - 1;
            ties--;
        }
        __m512i iv = _mm512_loadu_si512((const void *)(idx + j));
        _mm512_storeu_si512((void *)(kidx + o), _mm512_maskz_compress_epi32((__mmask16)keep, iv));
        _mm512_storeu_si512((void *)(kval + o), _mm512_maskz_compress_epi32((__mmask16)keep, v));
        o += (size_t)__builtin_popcount(keep);
    }
#elif defined(__AVX2__)
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), tv = _mm256_set1_epi32((int)T);
    for (; j + 8 <= m; j += 8) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(val + j)), key = _mm256_and_si256(v, absm);
        __m256i eqv = _mm256_cmpeq_epi32(key, tv);
        unsigned eq = pz_v8_mask(eqv);
        unsigned keep = pz_v8_mask(_mm256_cmpeq_epi32(_mm256_max_epu32(key, tv), key)) & ~eq;   /* key > T */
        while (eq && ties) {
            keep |= eq & (0u - eq);
            eq &= eq - 1;
            ties--;
        }
        __m256i iv = _mm256_loadu_si256((const __m256i *)(const void *)(idx + j));
        _mm256_storeu_si256((__m256i *)(void *)(kidx + o), pz_v8_compress(keep, iv));
        _mm256_storeu_si256((__m256i *)(void *)(kval + o), pz_v8_compress(keep, v));
        o += (size_t)__builtin_popcount(keep);
    }
#endif
    for (; j < m; j++) {
        uint32_t key = pz_abs_key(val[j]);
        size_t eq = key == T;
        size_t take = (key > T) | (eq & (ties > 0));
        ties -= eq & take;
        kidx[o] = idx[j];
        kval[o] = val[j];
        o += take;
    }
    return o;
}

#endif
