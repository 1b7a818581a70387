/* test_golden.c: every codec's bytes against committed golden files.
 *
 * Each spec encodes three rounds of fixed tensors (fixed seed and context)
 * into messages that another codec object decodes; every message and every
 * decoded tensor goes into one stream, compared byte for byte with
 * tests/fixtures/golden/codecs.bin. Three rounds carry the wrappers' state:
 * ef/ef21 residuals shape rounds 2 and 3, and aq's per-sample buffers (what
 * its decoder holds after a round is exactly the decoded tensor, which the
 * stream records). Codec bytes are identical at every ISA level (test isa),
 * so the file holds on any x86-64 CPU. Without PIPEZIP_ISA the comparison
 * runs once per level this CPU and build can run (issue 26: golden-codecs at
 * every level), each in a child under PIPEZIP_ISA, since a process picks its
 * level once: on an AVX-512 machine a broken AVX2 path fails here too.
 *
 * The golden file was written before the code was reorganised (issue 11):
 * a refactor must leave it unchanged. The tah specs (issue 14) came later
 * and are appended: the same stream for them follows the first one's end. A deliberate format change rewrites it
 * with `test_golden --write FILE` and says so in its commit.
 *
 * The stream has four parts, each shape-major: the specs of the original
 * file (their q specs spell grid=midrise, the grid of every q message before
 * grid= existed, so that part is byte for byte the original file), then the
 * codecs and options added later, each appended so that what came before
 * stays a prefix: tah, hadamard (on midrise q, as written), then q's
 * midtread default.
 *
 *   test_golden FILE           compare (exit 1 on the first difference)
 *   test_golden --write FILE   (re)write */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec.h"
#include "base/io/file.h"
#include "base/isa.h"
#include "base/mem.h"
#include "base/rng.h"
#include "base/status.h"
#include "bench/bench_isa.h"
#include "tests/check.h"
#include "tests/compress/codec_stream.h"

static const char *const specs[] = {
    CODEC_STREAM_BASE_SPECS,
    "q4:round=stochastic,grid=midrise+zstd", "topk:0.1+zstd", "ef(q2:round=stochastic,grid=midrise)", "ef(topk:0.05)", "ef21(sign)",
    "ef21(q4:round=stochastic,grid=midrise)", "aq(q4:round=stochastic,grid=midrise)", "aq(q2:round=stochastic,grid=midrise,warmup=fp16)", "aq(sign)",
    "ef(aq(q4:round=stochastic,grid=midrise))",
};
/* appended after the stream above (every shape, spec and round of it) */
static const char *const tah_specs[] = {CODEC_STREAM_TAH_SPECS};
/* appended after tah's: the hadamard wrapper (its q specs spell the grid they
 * were written with) */
static const char *const specs_had[] = {
    "hadamard(q4:round=stochastic,grid=midrise)", "hadamard(q4:group=row,round=nearest,grid=midrise)", "hadamard(fp16,block=2)",
    "aq(hadamard(q4:round=stochastic,grid=midrise))", "hadamard(aq(q2:round=stochastic,grid=midrise))", "ef(hadamard(q2:round=stochastic,grid=midrise))",
    "hadamard(ef21(q4:round=stochastic,grid=midrise))+zstd",
};
/* appended after hadamard's: grid=midtread, q's default (the q specs of every
 * part spell round=stochastic, q's default when they were written) */
static const char *const specs_mt[] = {
    "q1:round=stochastic", "q2:round=stochastic", "q3:round=stochastic", "q4:round=stochastic",
    "q5:round=stochastic", "q8:round=stochastic", "q4:round=nearest", "q2:round=nearest,group=row",
    "q4:scale=minmax,group=row,round=stochastic", "q3:scale=minmax,group=256,round=nearest",
    "q8:sdtype=fp16,round=stochastic", "q2:scale=minmax,sdtype=fp16,group=5,round=stochastic",
    "q4:round=stochastic+zstd", "ef(q2:round=stochastic)", "ef21(q4:round=stochastic)", "aq(q4:round=stochastic)",
    "aq(q2:round=stochastic,warmup=fp16)", "ef(aq(q4:round=stochastic))",
};
static const struct {
    const char *const *specs;
    size_t n;
} parts[] = {{specs, sizeof specs / sizeof specs[0]}, {tah_specs, sizeof tah_specs / sizeof tah_specs[0]},
               {specs_had, sizeof specs_had / sizeof specs_had[0]}, {specs_mt, sizeof specs_mt / sizeof specs_mt[0]}};
#define NPARTS (sizeof parts / sizeof parts[0])
static const pz_shape shapes[] = {{3, {2, 6, 96}}, {2, {3, 70}}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])
#define ROUNDS 3

typedef struct {
    uint8_t *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        uint8_t *q = realloc(b->p, b->cap);
        if (!q) pz_die("out of memory");
        b->p = q;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

/* rounds move slowly, as activations of one sample do between epochs */
static void input(float *x, size_t n, size_t C, size_t k, size_t i, int round) {
    codec_stream_fill(x, n, C, 1000 * k + 10 * i, 0);
    for (size_t e = 0; e < n; e++) x[e] += 0.1f * (float)round * (float)((int)(e % 7) - 3);
}

/* the stream: per shape, spec and round: u64 length + message, then the
 * decoded floats */
static int emit(void *arg, const uint8_t *msg, size_t len, const float *y, size_t n) {
    buf *out = arg;
    uint64_t l = len;
    put(out, &l, 8);
    put(out, msg, len);
    put(out, y, n * sizeof(float));
    return 0;
}

/* which spec, shape and round byte `at` of the stream belongs to */
static void locate(const buf *b, size_t at) {
    size_t pos = 0;
    for (size_t pa = 0; pa < NPARTS; pa++)
        for (size_t k = 0; k < NSHAPES; k++) {
            size_t n = pz_shape_numel(&shapes[k]);
            for (size_t i = 0; i < parts[pa].n; i++)
                for (int r = 0; r < ROUNDS; r++) {
                    uint64_t l;
                    if (pos + 8 > b->len) return;
                    memcpy(&l, b->p + pos, 8);
                    size_t end = pos + 8 + l + n * sizeof(float);
                    if (at < end) {
                        printf("  first difference in %s, shape %zu, round %d, %s\n", parts[pa].specs[i], k, r,
                               at < pos + 8 + l ? "message" : "decoded tensor");
                        return;
                    }
                    pos = end;
                }
        }
}

int main(int argc, char **argv) {
    int write_mode = argc == 3 && strcmp(argv[1], "--write") == 0;
    if (!write_mode && argc != 2) {
        fprintf(stderr, "usage: test_golden [--write] FILE\n");
        return 2;
    }
    const char *isa = getenv("PIPEZIP_ISA");
    if (!write_mode && !(isa && *isa) && pz_isa_built() > PZ_ISA_BASELINE) return bench_each_isa(argv, PZ_ISA_BASELINE, NULL);
    const char *path = argv[argc - 1];
    buf got = {0};
    size_t nspecs = 0;
    for (size_t pa = 0; pa < NPARTS; pa++) {
        codec_stream cs = {parts[pa].specs, parts[pa].n, shapes, NSHAPES, ROUNDS, 1, input, emit, &got};
        if (codec_stream_run(&cs) != 0) return 1;
        nspecs += parts[pa].n;
    }
    if (write_mode) {
        pz_atomic_file af;
        if (pz_atomic_open(&af, path) != PZ_OK) pz_die("%s", pz_last_error());
        xfwrite(got.p, 1, got.len, af.f);
        if (pz_atomic_commit(&af) != PZ_OK) pz_die("%s", pz_last_error());
        printf("wrote %s: %zu bytes (%zu specs, %zu shapes, %d rounds)\n", path, got.len, nspecs, NSHAPES, ROUNDS);
        return 0;
    }
    uint8_t *want = NULL;
    size_t want_len = 0;
    if (pz_read_file(path, &want, &want_len) != PZ_OK) {
        printf("FAIL %s\n", pz_last_error());
        return 1;
    }
    size_t first = 0;
    while (first < got.len && first < want_len && got.p[first] == want[first]) first++;
    CHECK(got.len == want_len && first == got.len, "codec stream differs from %s at byte %zu (%zu vs %zu bytes)", path,
          first, got.len, want_len);
    if (failures) locate(&got, first);
    else printf("golden codecs: %zu specs x %zu shapes x %d rounds, %zu bytes equal to %s\n", nspecs, NSHAPES, ROUNDS,
                got.len, path);
    free(want);
    free(got.p);
    return check_summary("test_golden");
}
