/* bytes.h: little-endian integers at unaligned byte addresses, the byte order
 * of every pipezip wire format and file header, whatever the host's order.
 * Host and device (PZ_HD) so the CUDA codecs read the same headers. */
#ifndef PZ_BASE_BYTES_H
#define PZ_BASE_BYTES_H

#include <stdint.h>

#include "base/hd.h"

static inline PZ_HD void pz_put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline PZ_HD void pz_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline PZ_HD void pz_put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline PZ_HD uint16_t pz_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline PZ_HD uint32_t pz_get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline PZ_HD uint64_t pz_get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

#endif
