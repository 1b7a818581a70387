/* device.c: `--device` to a backend table (see device.h). */
#include "runtime/plan/device.h"

#include <string.h>

#ifdef PZ_HAVE_CUDA
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "base/io/file.h"

/* The CUDA backend lives in a module (meson.build: pipezip-cuda.so) so that
 * pipezip starts without the CUDA libraries and a CPU run never maps them.
 * It is looked for next to the executable (the build tree), then in the
 * install directory. Returns pz_backend_cuda_init from it, or NULL with the
 * loader's reasons in err. */
typedef const pz_backend *(*cuda_init_fn)(int ordinal, int tf32, char *err, size_t errlen);

static cuda_init_fn load_cuda_module(char *err, size_t errlen) {
    static cuda_init_fn init;   /* one device per process: loaded once */
    if (init) return init;
    char dir[PATH_MAX], path[PATH_MAX + 32];
    char *slash = pz_self_exe(dir, sizeof dir) == 0 ? strrchr(dir, '/') : NULL;
    if (slash) *slash = 0;
    const char *dirs[2] = {slash ? dir : ".", PZ_CUDA_MODULE_DIR};
    size_t used = (size_t)snprintf(err, errlen, "cannot load the CUDA backend module");
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/pipezip-cuda.so", dirs[i]);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        const char *why = NULL;
        int opened = h != NULL;
        if (opened) {
            init = (cuda_init_fn)(uintptr_t)dlsym(h, "pz_backend_cuda_init");
            if (init) return init;
            why = "it has no pz_backend_cuda_init";
            dlclose(h);
        } else {
            why = dlerror();
        }
        if (used < errlen)   /* dlerror names the file; ours does not */
            used += (size_t)snprintf(err + used, errlen - used, "%s %s%s%s", i ? ";" : ":",
                                     opened ? path : "", opened ? ": " : "", why ? why : "dlopen failed");
    }
    return NULL;
}
#endif

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
    char err[1024];
    cuda_init_fn init = load_cuda_module(err, sizeof err);
    const pz_backend *be = init ? init(rank, strcmp(name, "cuda:tf32") == 0, err, sizeof err) : NULL;
    if (!be) *st = pz_fail(PZ_ERR_ARG, "--device %s: %s", name, err);
    return be;
#else
    *st = pz_fail(PZ_ERR_ARG, "--device %s: this pipezip was built without the CUDA backend "
                  "(rebuild with nvcc on PATH and meson setup -Dcuda=enabled)", name);
    return NULL;
#endif
}
