/* crc32c.c: CRC-32C, hardware (SSE4.2) and table versions.
 *
 * Every message is checksummed, so on a build for baseline x86-64 the table
 * version capped every codec at ~2 GB/s (bench_codecs, AMD EPYC: fp32 at
 * 0.11x memcpy). On x86-64 the hardware version is therefore compiled with a
 * target attribute whatever -march says, and chosen at run time when the
 * CPU has SSE4.2 (every x86-64 CPU since 2008; PIPEZIP_ISA=baseline turns
 * it off with the rest, base/isa.h). */
#include "base/crc32c.h"

#include <pthread.h>
#include <string.h>

#include "base/isa.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PZ_CRC_HW 1
#include <nmmintrin.h>
#define HW_TARGET __attribute__((target("sse4.2")))
#endif

#define POLY 0x82f63b78u

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

/* register update without the initial/final inversion */
static uint32_t sw_update(uint32_t r, const uint8_t *p, size_t n) {
    pthread_once(&table_once, table_init);
    while (n && ((uintptr_t)p & 7)) {
        r = (r >> 8) ^ table[0][(r ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= r;   /* little-endian: low 4 bytes meet the register */
        r = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
            table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
            table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) r = (r >> 8) ^ table[0][(r ^ *p++) & 0xff];
    return r;
}

uint32_t pz_crc32c_sw(uint32_t crc, const void *buf, size_t n) {
    return ~sw_update(~crc, (const uint8_t *)buf, n);
}

#ifdef PZ_CRC_HW
/* a * b mod P in the reflected representation (bit 31 = x^0) */
static uint32_t gf_mul(uint32_t a, uint32_t b) {
    uint32_t p = 0;
    for (int i = 0; i < 32; i++) {
        if (a & 0x80000000u) p ^= b;
        a <<= 1;
        b = (b & 1) ? (b >> 1) ^ POLY : b >> 1;
    }
    return p;
}

/* x^(8n) mod P: the effect on the register of n zero bytes */
static uint32_t x_pow_8n(size_t n) {
    uint32_t r = 0x80000000u, sq = 0x00800000u;  /* x^0, x^8 */
    while (n) {
        if (n & 1) r = gf_mul(r, sq);
        sq = gf_mul(sq, sq);
        n >>= 1;
    }
    return r;
}

#define STRIPE 4096   /* bytes per stream per block */

HW_TARGET static uint32_t hw_update(uint32_t r, const uint8_t *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        r = _mm_crc32_u8(r, *p++);
        n--;
    }
    if (n >= 3 * STRIPE) {
        uint32_t k1 = x_pow_8n(STRIPE), k2 = x_pow_8n(2 * STRIPE);
        while (n >= 3 * STRIPE) {
            uint64_t a = r, b = 0, c = 0;
            for (size_t i = 0; i < STRIPE; i += 8) {
                uint64_t wa, wb, wc;
                memcpy(&wa, p + i, 8);
                memcpy(&wb, p + STRIPE + i, 8);
                memcpy(&wc, p + 2 * STRIPE + i, 8);
                a = _mm_crc32_u64(a, wa);
                b = _mm_crc32_u64(b, wb);
                c = _mm_crc32_u64(c, wc);
            }
            r = gf_mul(k2, (uint32_t)a) ^ gf_mul(k1, (uint32_t)b) ^ (uint32_t)c;
            p += 3 * STRIPE;
            n -= 3 * STRIPE;
        }
    }
    uint64_t r64 = r;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        r64 = _mm_crc32_u64(r64, w);
        p += 8;
        n -= 8;
    }
    r = (uint32_t)r64;
    while (n--) r = _mm_crc32_u8(r, *p++);
    return r;
}

static int use_hw = -1;   /* set once; -1 until then */
static void choose(void) { use_hw = pz_isa_level() >= PZ_ISA_SSE42; }

uint32_t pz_crc32c(uint32_t crc, const void *buf, size_t n) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, choose);
    if (use_hw) return ~hw_update(~crc, (const uint8_t *)buf, n);
    return pz_crc32c_sw(crc, buf, n);
}
#else
uint32_t pz_crc32c(uint32_t crc, const void *buf, size_t n) { return pz_crc32c_sw(crc, buf, n); }
#endif
