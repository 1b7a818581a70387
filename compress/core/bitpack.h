/* bitpack.h: packing of small codes, varints and Elias codes.
 *
 * b-bit codes (b = 1..8), CGX layout: codes go in groups of 8; code j of a
 * group sits at bit offset j*b of a little-endian 64-bit word of which only
 * the low 8*b bits are used, stored as exactly b bytes. n codes take
 * ceil(n/8)*b bytes; the tail group is padded with zero codes, and the
 * unpacker rejects non-zero padding so every payload has one spelling.
 *
 * Varints: unsigned LEB128 (7 bits per byte, least significant group first,
 * high bit = more). At most 10 bytes for 64 bits; the reader rejects
 * truncation, overflow past 64 bits and overlong (non-minimal) encodings.
 *
 * Bit streams for Elias codes: MSB-first, i.e. bit k of the stream is bit
 * (7 - k%8) of byte k/8; the tail of the last byte is zero. Elias codes of
 * n >= 1 (write n+1 for a value that may be 0):
 *   gamma: floor(log2 n) zeros, then n in binary;
 *   delta: gamma(bit length of n), then n without its leading 1;
 *   omega: groups "1xxx" built recursively (n in binary, then n <- bitlen-1
 *          while n > 1), written outermost first, then a final "0".
 * Writers never write past their capacity (they set an overflow flag);
 * readers never read past their length (they set an error flag and return 0).
 */
#ifndef PZ_BITPACK_H
#define PZ_BITPACK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/status.h"

/* ---- b-bit codes, CGX layout ---- */
static inline size_t pz_pack_bytes(size_t n, int b) { return (n / 8 + (n % 8 != 0)) * (size_t)b; }

/* one group of 8 codes (each < 2^b) -> b bytes */
static inline void pz_pack8(const uint8_t *c, int b, uint8_t *out) {
    uint64_t w = 0;
    for (int j = 0; j < 8; j++) w |= (uint64_t)c[j] << (j * b);
    for (int k = 0; k < b; k++) out[k] = (uint8_t)(w >> (8 * k));
}
static inline void pz_unpack8(const uint8_t *in, int b, uint8_t *c) {
    uint64_t w = 0;
    for (int k = 0; k < b; k++) w |= (uint64_t)in[k] << (8 * k);
    uint64_t mask = (1u << b) - 1;
    for (int j = 0; j < 8; j++) c[j] = (uint8_t)((w >> (j * b)) & mask);
}

/* Packs n codes; bits above b in each code are ignored. Writes exactly
 * pz_pack_bytes(n, b) bytes. */
void pz_pack_codes(const uint8_t *codes, size_t n, int b, uint8_t *out);
/* Unpacks n codes from in[0..len). Fails (PZ_ERR_FORMAT) unless
 * len == pz_pack_bytes(n, b) and the tail padding is zero. */
pz_status pz_unpack_codes(const uint8_t *in, size_t len, size_t n, int b, uint8_t *codes);

/* Bits (CGX layout, b = 1: element i is bit i%8 of byte i/8) to floats:
 * out[i] = bit ? +1.0f : -1.0f for i < n. */
void pz_bits_to_pm1(const uint8_t *bits, size_t n, float *out);

/* ---- LEB128 varints ---- */
#define PZ_VARINT_MAX 10
/* Writes v at out (room for PZ_VARINT_MAX bytes); returns bytes written. */
size_t pz_varint_put(uint8_t *out, uint64_t v);
static inline size_t pz_varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}
/* Reads one varint from in[*pos..len), advancing *pos. PZ_ERR_FORMAT on
 * truncation, overflow or an overlong encoding (nothing is recorded with
 * pz_fail: hot loops call this; the caller reports). */
pz_status pz_varint_get(const uint8_t *in, size_t len, size_t *pos, uint64_t *v);

/* ---- bit writer / reader (MSB-first) ---- */
typedef struct {
    uint8_t *buf;
    size_t cap;      /* bytes */
    size_t pos;      /* bytes written */
    uint64_t acc;    /* pending bits, right-aligned */
    int nacc;        /* 0..7 after each put */
    int overflow;
} pz_bitw;

typedef struct {
    const uint8_t *buf;
    size_t len;      /* bytes */
    uint64_t bit;    /* next bit to read */
    int err;
} pz_bitr;

void pz_bitw_init(pz_bitw *w, uint8_t *buf, size_t cap);
/* Appends the n low bits of v (n = 0..64), most significant first. */
void pz_bitw_put(pz_bitw *w, uint64_t v, int n);
/* Pads the last byte with zeros; returns bytes used, or SIZE_MAX on overflow. */
size_t pz_bitw_finish(pz_bitw *w);
/* bits written so far */
static inline uint64_t pz_bitw_bits(const pz_bitw *w) { return (uint64_t)w->pos * 8 + (uint64_t)w->nacc; }

void pz_bitr_init(pz_bitr *r, const uint8_t *buf, size_t len);
/* Reads n bits (0..64) as an unsigned number; on running out sets err, returns 0. */
uint64_t pz_bitr_get(pz_bitr *r, int n);
static inline uint64_t pz_bitr_left(const pz_bitr *r) {
    return r->bit <= (uint64_t)r->len * 8 ? (uint64_t)r->len * 8 - r->bit : 0;
}

/* Elias codes of n >= 1 (n = 0 sets the writer's overflow flag). */
void pz_elias_gamma_put(pz_bitw *w, uint64_t n);
void pz_elias_delta_put(pz_bitw *w, uint64_t n);
void pz_elias_omega_put(pz_bitw *w, uint64_t n);
/* Code lengths in bits, for size formulas. */
int pz_elias_gamma_bits(uint64_t n);
int pz_elias_delta_bits(uint64_t n);
int pz_elias_omega_bits(uint64_t n);
/* Readers: return n >= 1, or 0 with r->err set on a truncated, overflowing or
 * malformed code. */
uint64_t pz_elias_gamma_get(pz_bitr *r);
uint64_t pz_elias_delta_get(pz_bitr *r);
uint64_t pz_elias_omega_get(pz_bitr *r);

/* bit length of v >= 1 (floor(log2 v) + 1); 0 for v = 0 */
static inline int pz_bitlen64(uint64_t v) { return v ? 64 - __builtin_clzll(v) : 0; }

#endif
