/* bench_frame.c: the cost of the checked frame (runtime/net/frame.h) on one
 * thread: GB/s of writing a frame header (CRC-32C of the payload) and of
 * checking one, next to memcpy of the same bytes timed in the same loop (so
 * a busy machine slows both alike), for messages from 4 KiB to 64 MiB. The
 * sender pays one put per message, the receiver one check; a raw float32
 * edge had neither before, nor a copy (the transport sends from and
 * receives into the caller's buffers). A printout; exit status 0.
 *
 *   bench_frame [RUNS (default 9)] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "bench/bench_util.h"
#include "runtime/net/frame.h"

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 9;
    if (runs < 1) runs = 1;
    const size_t max = (size_t)64 << 20;
    uint8_t *src = xaligned_alloc(max), *dst = xaligned_alloc(max), hdr[PZ_FRAME_HDR];
    for (size_t i = 0; i < max; i++) src[i] = (uint8_t)(i * 2654435761u >> 13);
    memset(dst, 0, max);
    pz_frame_id id = {0x0123456789abcdefull, 3, 1, 1, 0, 1};
    double *tm = xmalloc((size_t)runs * sizeof *tm), *tp = xmalloc((size_t)runs * sizeof *tp),
           *tc = xmalloc((size_t)runs * sizeof *tc);
    printf("%10s %10s %10s %10s %12s\n", "bytes", "memcpy", "put(CRC)", "check", "put/memcpy");
    for (size_t n = 4096; n <= max; n *= 4) {
        int reps = (int)(((size_t)256 << 20) / n);   /* ~256 MiB per timing */
        if (reps < 1) reps = 1;
        int bad = 0;
        for (int r = 0; r < runs; r++) {
            double t0 = pz_now();
            for (int k = 0; k < reps; k++) memcpy(dst, src, n);
            double t1 = pz_now();
            for (int k = 0; k < reps; k++) pz_frame_put(hdr, &id, src, n);
            double t2 = pz_now();
            for (int k = 0; k < reps; k++) bad += pz_frame_check(hdr, sizeof hdr, &id, src, n, NULL, 0) != PZ_FRAME_OK;
            double t3 = pz_now();
            tm[r] = (t1 - t0) / reps;
            tp[r] = (t2 - t1) / reps;
            tc[r] = (t3 - t2) / reps;
        }
        qsort(tm, (size_t)runs, sizeof *tm, bench_cmp_double);
        qsort(tp, (size_t)runs, sizeof *tp, bench_cmp_double);
        qsort(tc, (size_t)runs, sizeof *tc, bench_cmp_double);
        double m = tm[runs / 2], p = tp[runs / 2], c = tc[runs / 2];
        printf("%10zu %8.2f GB/s %6.2f GB/s %6.2f GB/s %10.2fx%s\n", n, n / m * 1e-9, n / p * 1e-9, n / c * 1e-9, m / p,
               bad ? "  CHECK FAILED" : "");
        if (dst[n / 2] != src[n / 2]) printf("memcpy lost\n");
    }
    free(src);
    free(dst);
    free(tm);
    free(tp);
    free(tc);
    return 0;
}
