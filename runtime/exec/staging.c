/* staging.c: host <-> device hops of the pipeline's transfers (staging.h). */
#include "runtime/exec/staging.h"
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

float *pz_host_buffer(const pz_backend *be, size_t bytes) {
    return be->host_memory ? xaligned_alloc(bytes) : be->host_alloc(bytes);
}

void pz_host_buffer_free(const pz_backend *be, void *p) {
    if (!p) return;
    if (be->host_memory) free(p);
    else be->host_free(p);
}

void pz_staging_init(pz_staging *s, const pz_backend *be, size_t bytes, int nslots) {
    memset(s, 0, sizeof *s);
    s->be = be;
    s->on_device = !be->host_memory;
    s->bytes = bytes;
    s->nslots = nslots;
    if (!s->on_device) return;
    s->rx = be->alloc(bytes);
    s->dx = be->alloc(bytes);
    s->tx = xcalloc((size_t)nslots, sizeof *s->tx);
    for (int k = 0; k < nslots; k++) s->tx[k] = be->host_alloc(bytes);
}

void pz_staging_free(pz_staging *s) {
    if (!s->be) return;
    if (s->on_device) {
        s->be->free(s->rx);
        s->be->free(s->dx);
        for (int k = 0; k < s->nslots; k++) s->be->host_free(s->tx[k]);
        free(s->tx);
    }
    memset(s, 0, sizeof *s);
}

const float *pz_staging_in(pz_staging *s, const float *host) {
    if (!s->on_device) return host;
    s->be->from_host(s->rx, host, s->bytes);
    return s->rx;
}

const float *pz_staging_out(pz_staging *s, int slot, const float *src) {
    if (!s->on_device) return src;
    s->be->to_host(s->tx[slot], src, s->bytes);
    return s->tx[slot];
}

float *pz_staging_dx(pz_staging *s, float *host) { return s->on_device ? s->dx : host; }

void pz_staging_dx_done(pz_staging *s, float *host) {
    if (s->on_device) s->be->to_host(host, s->dx, s->bytes);
}

float *pz_staging_view(pz_staging *s, float *mem, size_t n) {
    if (!s->on_device) return mem;
    float *v = xmalloc(n * sizeof(float));
    s->be->to_host(v, mem, n * sizeof(float));
    return v;
}

void pz_staging_view_done(pz_staging *s, float *mem, float *view, size_t n) {
    if (!s->on_device) return;
    s->be->from_host(mem, view, n * sizeof(float));
    free(view);
}

void pz_staging_report(const pz_staging *s, pz_transport *tp, int rank) {
    if (!s->on_device) return;
    /* with a CUDA-aware UCX the raw tensors could go device to device, but
     * the codecs run on host bytes, so the edges stage through the host anyway */
    fprintf(stderr, "pipezip train: stage %d runs on %s; UCX memory types (ucp_context_query) %s CUDA, "
            "edge tensors go through pinned host buffers\n", rank, s->be->name,
            pz_transport_has_cuda_memory(tp) ? "include" : "do not include");
}
