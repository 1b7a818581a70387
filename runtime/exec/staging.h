/* staging.h: the host side of a pipeline edge when a stage runs on a device.
 *
 * The transport (UCX) and the codecs work on host bytes: Debian's UCX has no
 * CUDA memory support (pz_transport_has_cuda_memory says which at run time),
 * and the codecs are host code. So with a device backend every tensor that
 * crosses an edge hops through host buffers: device -> host before it is
 * sent (and encoded), host -> device after it is received (and decoded).
 * The pipeline's receive and send buffers come from pz_host_buffer, pinned
 * on a device backend, so those hops are DMA copies.
 *
 * On a host backend (cpu) every function here hands back the pointer it was
 * given and copies nothing, so the CPU pipeline runs exactly as before. */
#ifndef PZ_STAGING_H
#define PZ_STAGING_H

#include "kernels/backend.h"
#include "runtime/net/transport.h"

typedef struct {
    const pz_backend *be;
    int on_device;     /* !be->host_memory */
    size_t bytes;      /* one edge tensor (B*T*C floats) */
    int nslots;
    float *rx;         /* device: the tensor just received; the stage copies it at once */
    float *dx;         /* device: d(input) that backward writes */
    float **tx;        /* host, per slot: stage output staged for sending */
} pz_staging;

void pz_staging_init(pz_staging *s, const pz_backend *be, size_t bytes, int nslots);
void pz_staging_free(pz_staging *s);

/* Host buffers for the transport: pinned on a device backend, zero-filled. */
float *pz_host_buffer(const pz_backend *be, size_t bytes);
void pz_host_buffer_free(const pz_backend *be, void *p);

/* received host bytes -> the pointer a stage reads (a device copy) */
const float *pz_staging_in(pz_staging *s, const float *host);
/* a stage output in backend memory -> host bytes to send; they stay valid
 * until the next call for the same slot (wait for that slot's send first) */
const float *pz_staging_out(pz_staging *s, int slot, const float *src);
/* where backward writes d(input); then pz_staging_dx_done copies it to host */
float *pz_staging_dx(pz_staging *s, float *host);
void pz_staging_dx_done(pz_staging *s, float *host);
/* A host view of n floats of backend memory, for host-side arithmetic (the
 * tied-embedding gradient exchange); _done copies it back and frees it. */
float *pz_staging_view(pz_staging *s, float *mem, size_t n);
void pz_staging_view_done(pz_staging *s, float *mem, float *view, size_t n);

/* One stderr line on a device rank: the backend, and whether UCX could have
 * taken device memory (the edges stage through host memory either way). */
void pz_staging_report(const pz_staging *s, pz_transport *tp, int rank);

#endif
