/* crc32c.h: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial
 * value and final xor 0xFFFFFFFF), as in iSCSI/ext4. crc32c("123456789") =
 * 0xE3069283. Chained: pz_crc32c(pz_crc32c(0, a, n), b, m) = crc of a||b.
 * Uses the SSE4.2 crc32 instruction (three interleaved streams) when the
 * build targets it, else a slicing-by-8 table; both give the same values. */
#ifndef PZ_CRC32C_H
#define PZ_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint32_t pz_crc32c(uint32_t crc, const void *buf, size_t n);
/* The portable table version (for tests that compare the two). */
uint32_t pz_crc32c_sw(uint32_t crc, const void *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
