/* bitpack.c: b-bit code packing (CGX layout), LEB128 varints, Elias codes. */

/* hot loops are throughput-bound: let gcc use 512-bit vectors where the
 * build targets AVX-512 (it defaults to 256 bits) */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif
#include "compress/core/bitpack.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* ---- b-bit codes ---- */

/* Specialised per b so the inner loops have constant shifts. */
#define PACK_LOOP(B)                                                       \
    for (size_t g = 0; g < full; g++) {                                    \
        const uint8_t *c = codes + g * 8;                                  \
        uint64_t w = 0;                                                    \
        for (int j = 0; j < 8; j++) w |= (uint64_t)(c[j] & ((1u << B) - 1)) << (j * B); \
        uint8_t *o = out + g * B;                                          \
        for (int k = 0; k < B; k++) o[k] = (uint8_t)(w >> (8 * k));        \
    }

void pz_pack_codes(const uint8_t *codes, size_t n, int b, uint8_t *out) {
    size_t full = n / 8;
    switch (b) {
    case 1: /* the same layout, byte-wise loops that vectorize */
        for (size_t k = 0; k < full; k++) {
            const uint8_t *c = codes + 8 * k;
            out[k] = (uint8_t)((c[0] & 1) | (c[1] & 1) << 1 | (c[2] & 1) << 2 | (c[3] & 1) << 3 |
                               (c[4] & 1) << 4 | (c[5] & 1) << 5 | (c[6] & 1) << 6 | (c[7] & 1) << 7);
        }
        break;
    case 2:
        for (size_t k = 0; k < 2 * full; k++) {
            const uint8_t *c = codes + 4 * k;
            out[k] = (uint8_t)((c[0] & 3) | (c[1] & 3) << 2 | (c[2] & 3) << 4 | (c[3] & 3) << 6);
        }
        break;
    case 3: PACK_LOOP(3) break;
    case 4:
        for (size_t k = 0; k < 4 * full; k++) out[k] = (uint8_t)((codes[2 * k] & 15) | (codes[2 * k + 1] & 15) << 4);
        break;
    case 5: PACK_LOOP(5) break;
    case 6: PACK_LOOP(6) break;
    case 7: PACK_LOOP(7) break;
    case 8: memcpy(out, codes, full * 8); break;
    default: return;
    }
    size_t rem = n % 8;
    if (rem) {
        uint8_t c[8] = {0};
        uint8_t mask = (uint8_t)((1u << b) - 1);
        for (size_t j = 0; j < rem; j++) c[j] = codes[full * 8 + j] & mask;
        pz_pack8(c, b, out + full * (size_t)b);
    }
}

#define UNPACK_LOOP(B)                                                     \
    for (size_t g = 0; g < full; g++) {                                    \
        const uint8_t *i = in + g * B;                                     \
        uint64_t w = 0;                                                    \
        for (int k = 0; k < B; k++) w |= (uint64_t)i[k] << (8 * k);        \
        uint8_t *c = codes + g * 8;                                        \
        for (int j = 0; j < 8; j++) c[j] = (uint8_t)((w >> (j * B)) & ((1u << B) - 1)); \
    }

pz_status pz_unpack_codes(const uint8_t *in, size_t len, size_t n, int b, uint8_t *codes) {
    if (b < 1 || b > 8 || len != pz_pack_bytes(n, b)) return PZ_ERR_FORMAT;
    size_t full = n / 8;
    switch (b) {
    case 1:
        for (size_t k = 0; k < full; k++)
            for (int j = 0; j < 8; j++) codes[8 * k + (size_t)j] = (uint8_t)((in[k] >> j) & 1);
        break;
    case 2:
        for (size_t k = 0; k < 2 * full; k++)
            for (int j = 0; j < 4; j++) codes[4 * k + (size_t)j] = (uint8_t)((in[k] >> (2 * j)) & 3);
        break;
    case 3: UNPACK_LOOP(3) break;
    case 4:
        for (size_t k = 0; k < 4 * full; k++) {
            codes[2 * k] = in[k] & 15;
            codes[2 * k + 1] = (uint8_t)(in[k] >> 4);
        }
        break;
    case 5: UNPACK_LOOP(5) break;
    case 6: UNPACK_LOOP(6) break;
    case 7: UNPACK_LOOP(7) break;
    case 8: memcpy(codes, in, full * 8); break;
    }
    size_t rem = n % 8;
    if (rem) {
        uint8_t c[8];
        pz_unpack8(in + full * (size_t)b, b, c);
        for (size_t j = rem; j < 8; j++)
            if (c[j]) return PZ_ERR_FORMAT;
        memcpy(codes + full * 8, c, rem);
    }
    return PZ_OK;
}

void pz_bits_to_pm1(const uint8_t *bits, size_t n, float *out) {
    size_t i = 0;
#if defined(__AVX512F__)
    const __m512 pos = _mm512_set1_ps(1.0f), neg = _mm512_set1_ps(-1.0f);
    for (; i + 16 <= n; i += 16) {
        uint16_t m;
        memcpy(&m, bits + i / 8, 2);
        _mm512_storeu_ps(out + i, _mm512_mask_blend_ps((__mmask16)m, neg, pos));
    }
#elif defined(__AVX2__)
    /* no mask registers: the byte in every lane, lane j keeps its bit j,
     * and a compare with that bit picks +1 or -1 */
    const __m256 pos = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-1.0f);
    const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    for (; i + 8 <= n; i += 8) {
        __m256i b = _mm256_and_si256(_mm256_set1_epi32(bits[i / 8]), lane_bit);
        __m256 set = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, lane_bit));
        _mm256_storeu_ps(out + i, _mm256_blendv_ps(neg, pos, set));
    }
#endif
    for (; i + 8 <= n; i += 8) {
        uint32_t b = bits[i / 8];
        for (int j = 0; j < 8; j++) out[i + (size_t)j] = (float)(int32_t)(((b >> j) & 1u) * 2u) - 1.0f;
    }
    if (i < n) {
        uint32_t b = bits[i / 8];
        for (size_t j = 0; i + j < n; j++) out[i + j] = (float)(int32_t)(((b >> j) & 1u) * 2u) - 1.0f;
    }
}

/* ---- varints ---- */

size_t pz_varint_put(uint8_t *out, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

pz_status pz_varint_get(const uint8_t *in, size_t len, size_t *pos, uint64_t *v) {
    uint64_t x = 0;
    size_t p = *pos;
    for (int k = 0; k < PZ_VARINT_MAX; k++) {
        if (p >= len) return PZ_ERR_FORMAT;              /* truncated */
        uint8_t byte = in[p++];
        if (k == 9 && byte > 1) return PZ_ERR_FORMAT;    /* more than 64 bits */
        x |= (uint64_t)(byte & 0x7f) << (7 * k);
        if (!(byte & 0x80)) {
            if (byte == 0 && k > 0) return PZ_ERR_FORMAT; /* overlong */
            *v = x;
            *pos = p;
            return PZ_OK;
        }
    }
    return PZ_ERR_FORMAT;
}

/* ---- bit writer / reader ---- */

void pz_bitw_init(pz_bitw *w, uint8_t *buf, size_t cap) {
    w->buf = buf;
    w->cap = cap;
    w->pos = 0;
    w->acc = 0;
    w->nacc = 0;
    w->overflow = 0;
}

static void bitw_put32(pz_bitw *w, uint32_t v, int n) {  /* n <= 32 */
    if (n == 0) return;
    w->acc = (w->acc << n) | (n == 32 ? v : (v & ((1u << n) - 1)));
    w->nacc += n;
    while (w->nacc >= 8) {
        w->nacc -= 8;
        if (w->pos < w->cap) w->buf[w->pos] = (uint8_t)(w->acc >> w->nacc);
        else w->overflow = 1;
        w->pos++;
    }
    w->acc &= (1u << w->nacc) - 1;
}

void pz_bitw_put(pz_bitw *w, uint64_t v, int n) {
    if (n > 32) {
        bitw_put32(w, (uint32_t)(v >> 32), n - 32);
        n = 32;
    }
    bitw_put32(w, (uint32_t)v, n);
}

size_t pz_bitw_finish(pz_bitw *w) {
    if (w->nacc > 0) bitw_put32(w, 0, 8 - w->nacc);
    if (w->overflow || w->pos > w->cap) return SIZE_MAX;
    return w->pos;
}

void pz_bitr_init(pz_bitr *r, const uint8_t *buf, size_t len) {
    r->buf = buf;
    r->len = len;
    r->bit = 0;
    r->err = 0;
}

uint64_t pz_bitr_get(pz_bitr *r, int n) {
    if (n == 0) return 0;
    if (r->err || (uint64_t)n > pz_bitr_left(r)) {
        r->err = 1;
        return 0;
    }
    uint64_t v = 0;
    while (n > 0) {
        size_t byte = (size_t)(r->bit >> 3);
        int off = (int)(r->bit & 7);          /* bits already consumed in this byte */
        int avail = 8 - off;
        int take = n < avail ? n : avail;
        uint32_t bits = ((uint32_t)r->buf[byte] >> (avail - take)) & ((1u << take) - 1);
        v = (v << take) | bits;
        r->bit += (uint64_t)take;
        n -= take;
    }
    return v;
}

/* ---- Elias codes ---- */

int pz_elias_gamma_bits(uint64_t n) { return n ? 2 * pz_bitlen64(n) - 1 : 0; }
int pz_elias_delta_bits(uint64_t n) {
    if (!n) return 0;
    int L = pz_bitlen64(n);
    return pz_elias_gamma_bits((uint64_t)L) + L - 1;
}
int pz_elias_omega_bits(uint64_t n) {
    if (!n) return 0;
    int bits = 1;
    while (n > 1) {
        int L = pz_bitlen64(n);
        bits += L;
        n = (uint64_t)(L - 1);
    }
    return bits;
}

void pz_elias_gamma_put(pz_bitw *w, uint64_t n) {
    if (!n) { w->overflow = 1; return; }
    int L = pz_bitlen64(n);
    pz_bitw_put(w, 0, L - 1);
    pz_bitw_put(w, n, L);
}

void pz_elias_delta_put(pz_bitw *w, uint64_t n) {
    if (!n) { w->overflow = 1; return; }
    int L = pz_bitlen64(n);
    pz_elias_gamma_put(w, (uint64_t)L);
    pz_bitw_put(w, n, L - 1);                /* without the leading 1 */
}

void pz_elias_omega_put(pz_bitw *w, uint64_t n) {
    if (!n) { w->overflow = 1; return; }
    uint64_t groups[8];
    int lens[8], k = 0;
    while (n > 1) {
        int L = pz_bitlen64(n);
        groups[k] = n;
        lens[k] = L;
        k++;
        n = (uint64_t)(L - 1);
    }
    while (k > 0) {
        k--;
        pz_bitw_put(w, groups[k], lens[k]);
    }
    pz_bitw_put(w, 0, 1);
}

uint64_t pz_elias_gamma_get(pz_bitr *r) {
    int zeros = 0;
    while (!r->err && pz_bitr_get(r, 1) == 0) {
        if (r->err) return 0;
        if (++zeros > 63) { r->err = 1; return 0; }
    }
    if (r->err) return 0;
    uint64_t rest = pz_bitr_get(r, zeros);
    if (r->err) return 0;
    return zeros == 64 ? 0 : ((uint64_t)1 << zeros) | rest;
}

uint64_t pz_elias_delta_get(pz_bitr *r) {
    uint64_t L = pz_elias_gamma_get(r);
    if (r->err) return 0;
    if (L > 64) { r->err = 1; return 0; }
    uint64_t rest = pz_bitr_get(r, (int)L - 1);
    if (r->err) return 0;
    return L == 64 ? ((uint64_t)1 << 63) | rest : ((uint64_t)1 << (L - 1)) | rest;
}

uint64_t pz_elias_omega_get(pz_bitr *r) {
    uint64_t n = 1;
    for (;;) {
        uint64_t bit = pz_bitr_get(r, 1);
        if (r->err) return 0;
        if (!bit) return n;
        if (n > 63) { r->err = 1; return 0; }   /* n+1 bits would exceed 64 */
        uint64_t rest = pz_bitr_get(r, (int)n);
        if (r->err) return 0;
        n = ((uint64_t)1 << n) | rest;
    }
}
