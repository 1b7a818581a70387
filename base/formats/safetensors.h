/* safetensors.h: reader and writer of the safetensors container.
 *
 * Layout: u64 little-endian N | N bytes of JSON header | byte buffer.
 * The header is one JSON object mapping tensor names to
 *   {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}
 * (offsets in bytes relative to the buffer, end exclusive) plus an optional
 * "__metadata__" object of string -> string.
 *
 * The reader never trusts its input: every failure of the file to follow the
 * format (header length, JSON syntax, duplicate names, unknown dtypes, offsets
 * that do not tile the buffer, sizes that do not match the shapes) returns
 * PZ_ERR_FORMAT with a message naming the file and, where there is one, the
 * tensor. Allocations are bounded by the header length, which is itself
 * checked against the file size first. Nothing is converted: a parsed file
 * hands out pointers to the raw little-endian bytes. */
#ifndef PZ_SAFETENSORS_H
#define PZ_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest header the reference implementation accepts. */
#define PZ_ST_MAX_HEADER 100000000ull

typedef enum {
    PZ_ST_BOOL, PZ_ST_F4, PZ_ST_F6_E2M3, PZ_ST_F6_E3M2, PZ_ST_U8, PZ_ST_I8,
    PZ_ST_F8_E5M2, PZ_ST_F8_E4M3, PZ_ST_F8_E8M0, PZ_ST_F8_E4M3FNUZ, PZ_ST_F8_E5M2FNUZ,
    PZ_ST_I16, PZ_ST_U16, PZ_ST_F16, PZ_ST_BF16, PZ_ST_I32, PZ_ST_U32, PZ_ST_F32,
    PZ_ST_C64, PZ_ST_F64, PZ_ST_I64, PZ_ST_U64,
    PZ_ST_NDTYPES
} pz_st_dtype;

const char *pz_st_dtype_name(pz_st_dtype d);  /* "F32" */
int pz_st_dtype_bits(pz_st_dtype d);          /* 32 for F32, 4 for F4 */

typedef struct {
    const char *name;        /* decoded UTF-8, NUL-terminated (names with NUL are rejected) */
    pz_st_dtype dtype;
    int ndim;                /* 0 is a scalar */
    const uint64_t *shape;   /* (ndim) */
    uint64_t numel;          /* product of shape; 1 for a scalar */
    uint64_t begin, end;     /* byte range in the buffer, end exclusive */
    const uint8_t *data;     /* buffer + begin: raw little-endian, possibly unaligned */
} pz_st_tensor;

typedef struct {
    const char *key, *value; /* decoded UTF-8, NUL-terminated */
} pz_st_meta;

typedef struct {
    pz_st_tensor *tensors;   /* (ntensors) sorted by name (strcmp) for pz_st_find */
    int ntensors;
    pz_st_meta *meta;        /* (nmeta) "__metadata__" entries, file order; NULL if none */
    int nmeta;
    const uint8_t *buffer;   /* data buffer, after the header */
    uint64_t buffer_len;
    uint64_t header_len;     /* N */
    /* private */
    char *strings_;          /* decoded names, keys and values */
    uint64_t *dims_;         /* every tensor's shape, back to back */
    void *map_;              /* mmap of the file (pz_st_open), else NULL */
    size_t map_len_;
} pz_st_file;

/* Parses and validates a whole safetensors image held in memory: `bytes`
 * (len) must outlive f, whose tensors point into it. `what` names the source
 * in messages (a path). On failure f is left empty (safe to pz_st_close). */
pz_status pz_st_parse(pz_st_file *f, const uint8_t *bytes, size_t len, const char *what);
/* Maps `path` read-only and parses it. PZ_ERR_IO if it cannot be opened. */
pz_status pz_st_open(pz_st_file *f, const char *path);
void pz_st_close(pz_st_file *f);

/* Tensor by exact name, or NULL (binary search). */
const pz_st_tensor *pz_st_find(const pz_st_file *f, const char *name);
/* Metadata value, or NULL. */
const char *pz_st_meta_get(const pz_st_file *f, const char *key);

/* One tensor to write. If `transposed`, ndim must be 2 and data holds the
 * (shape[1], shape[0]) row-major matrix whose transpose is written: this lets
 * callers store Linear (out, in) weights as HF Conv1D (in, out) without a
 * whole-tensor copy. */
typedef struct {
    const char *name;
    pz_st_dtype dtype;       /* F32 only for now */
    int ndim;                /* 0..8 */
    uint64_t shape[8];
    const void *data;
    int transposed;
} pz_st_write_tensor;

/* Writes `ts` (n) and the metadata map (nmeta, may be 0) to `path` atomically
 * (temporary file + rename). Tensors are laid out like the Rust writer does:
 * sorted by dtype alignment (largest first) then by name; "__metadata__" comes
 * first in the header; the header is padded with spaces so the buffer starts
 * 8-byte aligned. Names must be unique and non-empty. */
pz_status pz_st_write(const char *path, const pz_st_write_tensor *ts, int n,
                      const pz_st_meta *meta, int nmeta);

#ifdef __cplusplus
}
#endif

#endif
