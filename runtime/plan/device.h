/* device.h: `--device` to a backend table.
 *
 * A device spec is "cpu", "cuda" or "cuda:tf32" (cuBLAS may use TF32 tensor
 * cores for fp32 products), or a comma-separated list with one entry per
 * pipeline stage ("cpu,cuda": stage 0 on the CPU, stage 1 on a GPU). A
 * single entry applies to every stage. A CUDA stage uses GPU (rank modulo
 * the GPU count). */
#ifndef PZ_DEVICE_H
#define PZ_DEVICE_H

#include "kernels/backend.h"
#include "base/status.h"

/* Checks the spec's syntax and its entry count against `stages` (no device
 * is touched), so a bad spec fails once, before any stage process starts. */
pz_status pz_device_check(const char *device, int stages);

/* The backend for `rank`'s entry of the spec; sets the CPU backend's threads
 * (the host side of any backend uses them too). On failure returns NULL and
 * sets *st, with a message such as
 *   --device cuda: no usable CUDA GPU (cudaGetDeviceCount: ...). */
const pz_backend *pz_backend_for(const char *device, int rank, int threads, pz_status *st);

#endif
