/* npy.h: NumPy .npy files of float32 tensors (for `pipezip codec`).
 *
 * Reads format versions 1.0, 2.0 and 3.0 with dtype '<f4' (little-endian
 * float32), C order (fortran_order False) and 1..4 dims, each > 0;
 * the file must hold exactly numel*4 bytes of data after the header. Every
 * field is checked: magic, version, header length, the header dict (Python
 * literal with keys descr, fortran_order, shape, no others, no duplicates),
 * and the data size. Writes version 1.0 with the header padded to a multiple
 * of 64 bytes, atomically (pz_atomic_*). */
#ifndef PZ_NPY_H
#define PZ_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "compress/core/codec.h"

/* Parses an .npy image in memory; *data_off is where the floats start.
 * `name` names the file in error messages. */
pz_status pz_npy_parse(const uint8_t *buf, size_t len, const char *name, pz_shape *shape, size_t *data_off);
/* Reads a whole file; *data is malloc'ed (numel floats). */
pz_status pz_npy_read(const char *path, pz_shape *shape, float **data);
/* Writes a float32 tensor (atomic: a failed write leaves no file). */
pz_status pz_npy_write(const char *path, const pz_shape *shape, const float *data);
/* The bytes of an .npy image (header + data) into a malloc'ed buffer. */
pz_status pz_npy_image(const pz_shape *shape, const float *data, uint8_t **out, size_t *len);

#endif
