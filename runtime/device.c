/* device.c: `--device` to a backend table (see device.h). */
#include "runtime/device.h"

#include <string.h>

/* Copies entry `rank` of the comma list (or its only entry) into out;
 * returns the number of entries, or -1 if out is too small. */
static int entry_of(const char *spec, int rank, char *out, size_t outlen) {
    int n = 0;
    const char *p = spec;
    out[0] = 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (n == rank || (n == 0 && !comma)) {
            if (len >= outlen) return -1;
            memcpy(out, p, len);
            out[len] = 0;
        }
        n++;
        if (!comma) break;
        p = comma + 1;
    }
    return n;
}

static int known(const char *name) {
    return strcmp(name, "cpu") == 0 || strcmp(name, "cuda") == 0 || strcmp(name, "cuda:tf32") == 0;
}

pz_status pz_device_check(const char *device, int stages) {
    char name[32];
    int n = entry_of(device, 0, name, sizeof name);
    if (n > 1 && n != stages)
        return pz_fail(PZ_ERR_ARG, "--device %s: %d entries for %d stage%s (give one, or one per stage)",
                       device, n, stages, stages == 1 ? "" : "s");
    for (int r = 0; r < n; r++) {
        if (entry_of(device, r, name, sizeof name) < 0 || !known(name))
            return pz_fail(PZ_ERR_ARG, "--device %s: unknown device '%s' (cpu, cuda or cuda:tf32)",
                           device, n > 1 ? name : device);
    }
    return PZ_OK;
}

const pz_backend *pz_backend_for(const char *device, int rank, int threads, pz_status *st) {
    char name[32];
    if (!device) device = "cpu";
    int n = entry_of(device, rank, name, sizeof name);
    *st = PZ_OK;
    if (n < 0 || (n > 1 && rank >= n) || !known(name)) {
        *st = pz_device_check(device, n > 1 ? n : 1);
        if (*st == PZ_OK) *st = pz_fail(PZ_ERR_ARG, "--device %s: no entry for stage %d", device, rank);
        return NULL;
    }
    /* the host side of every backend (data, codecs, checks) uses these threads */
    pz_backend_cpu_set_threads(threads);
    if (strcmp(name, "cpu") == 0) return pz_backend_cpu();
#ifdef PZ_HAVE_CUDA
    char err[512];
    const pz_backend *be = pz_backend_cuda_init(rank, strcmp(name, "cuda:tf32") == 0, err, sizeof err);
    if (!be) *st = pz_fail(PZ_ERR_ARG, "--device %s: %s", name, err);
    return be;
#else
    *st = pz_fail(PZ_ERR_ARG, "--device %s: this pipezip was built without the CUDA backend "
                  "(rebuild with nvcc on PATH and meson setup -Dcuda=enabled)", name);
    return NULL;
#endif
}
