/* dump.c: see dump.h. */
#include "runtime/observe/dump.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "compress/core/npy.h"

pz_status pz_dump_edge(const char *dir, uint64_t step, int edge, int bwd, int micro, size_t B, size_t T, size_t C,
                       const float *src) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return pz_fail(PZ_ERR_IO, "--dump-dir %s: %s", dir, strerror(errno));
    char path[4200];
    snprintf(path, sizeof path, "%s/step%llu-edge%d-%d-%s-micro%d.npy", dir, (unsigned long long)step, edge, edge + 1,
             bwd ? "bwd" : "fwd", micro);
    pz_shape sh = {3, {B, T, C}};
    pz_status st = pz_npy_write(path, &sh, src);
    if (st != PZ_OK) return pz_fail(st, "--dump-edge: %s", pz_last_error());
    return PZ_OK;
}
