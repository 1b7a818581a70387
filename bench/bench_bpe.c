/* bench_bpe.c: GPT-2 byte-level BPE encoding speed (stages/bpe/bpe.c), one core.
 *
 *   bench_bpe TOKENIZER TEXT [RUNS]
 * Encodes the whole of TEXT RUNS times (default 7), each with a fresh
 * encoder (so its piece cache starts empty, as for each file `pipezip
 * tokenize` reads), and prints each run's MB/s (10^6 bytes of text per
 * second, the tokenizer already loaded) and their median as one JSON line,
 * by the wall clock and by the thread's CPU clock: on a machine shared with
 * other jobs the CPU clock leaves out the time the thread waited for a core. */
#include "stages/bpe/bpe.h"
#include "base/clock.h"
#include "base/io/file.h"
#include "bench/bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: bench_bpe TOKENIZER TEXT [RUNS]\n");
        return 2;
    }
    int runs = argc == 4 ? atoi(argv[3]) : 7;
    if (runs < 1 || runs > 1000) { fprintf(stderr, "bench_bpe: RUNS must be 1..1000\n"); return 2; }
    pz_bpe *b = NULL;
    uint8_t *text = NULL;
    size_t len = 0;
    if (pz_bpe_load(argv[1], &b) || pz_read_file(argv[2], &text, &len)) {
        fprintf(stderr, "bench_bpe: %s\n", pz_last_error());
        return 1;
    }
    double *mbs = calloc((size_t)runs, sizeof *mbs), *cpu = calloc((size_t)runs, sizeof *cpu);
    size_t ntok = 0;
    for (int r = 0; r < runs; r++) {
        pz_bpe_enc *e = pz_bpe_enc_new(b);
        pz_bpe_ids ids = {0};
        double t0 = pz_now(), c0 = bench_thread_cpu_now();
        if (pz_bpe_encode(e, (const char *)text, len, argv[2], &ids)) {
            fprintf(stderr, "bench_bpe: %s\n", pz_last_error());
            return 1;
        }
        double dt = pz_now() - t0, dc = bench_thread_cpu_now() - c0;
        mbs[r] = (double)len / 1e6 / dt;
        cpu[r] = (double)len / 1e6 / dc;
        ntok = ids.n;
        fprintf(stderr, "run %d: %.1f MB/s (wall), %.1f MB/s (CPU)\n", r + 1, mbs[r], cpu[r]);
        free(ids.ids);
        pz_bpe_enc_free(e);
    }
    qsort(mbs, (size_t)runs, sizeof *mbs, bench_cmp_double);
    qsort(cpu, (size_t)runs, sizeof *cpu, bench_cmp_double);
    printf("{\"bytes\":%zu,\"tokens\":%zu,\"runs\":%d,\"median_mb_per_s\":%.1f,\"min_mb_per_s\":%.1f,\"max_mb_per_s\":%.1f,"
           "\"median_cpu_mb_per_s\":%.1f}\n",
           len, ntok, runs, mbs[runs / 2], mbs[0], mbs[runs - 1], cpu[runs / 2]);
    free(mbs);
    free(cpu);
    free(text);
    pz_bpe_free(b);
    return 0;
}
