/* test_golden.c: every codec's bytes against committed golden files.
 *
 * Each spec encodes three rounds of fixed tensors (fixed seed and context)
 * into messages that another codec object decodes; every message and every
 * decoded tensor goes into one stream, compared byte for byte with
 * tests/fixtures/golden/codecs.bin. Three rounds carry the wrappers' state:
 * ef/ef21 residuals shape rounds 2 and 3, and aq's per-sample buffers (what
 * its decoder holds after a round is exactly the decoded tensor, which the
 * stream records). Codec bytes are identical at every ISA level (test isa),
 * so the file holds on any x86-64 CPU.
 *
 * The golden file was written before the code was reorganised (issue 11):
 * a refactor must leave it unchanged. A deliberate format change rewrites it
 * with `test_golden --write FILE` and says so in its commit.
 *
 *   test_golden FILE           compare (exit 1 on the first difference)
 *   test_golden --write FILE   (re)write */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"
#include "runtime/util.h"
#include "tests/check.h"

static const char *const specs[] = {
    "fp32", "fp16", "bf16",
    "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8",
    "q4:round=nearest", "q2:round=nearest,group=row", "q4:scale=minmax,group=row", "q4:group=256",
    "q8:sdtype=fp16", "q4:scale=minmax,group=256,round=nearest",
    "nuq4", "nuq8", "nuq4:code=elias", "nuq2:bucket=64",
    "sign", "sign:stochastic", "sign:group=channel",
    "topk:0.1", "topk:0.01", "topk:0.3,values=fp16", "topk:0.1,values=q8", "topk:0.05,scope=tensor",
    "jointsq:1.5", "jointsq:0.5", "jointsq:3",
    "q4+zstd", "topk:0.1+zstd", "ef(q2)", "ef(topk:0.05)", "ef21(sign)", "ef21(q4)",
    "aq(q4)", "aq(q2,warmup=fp16)", "aq(sign)", "ef(aq(q4))",
};
static const pz_shape shapes[] = {{3, {2, 6, 96}}, {2, {3, 70}}};
#define NSPECS (sizeof specs / sizeof specs[0])
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

/* heavy-tailed data with zeros, an outlier channel and tiny values */
static void fill(float *x, size_t n, size_t C, uint64_t seed) {
    pz_rng r;
    pz_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        float v = pz_rng_normal(&r);
        if (i % C == 3) v *= 40.0f;
        if (i % 97 == 0) v = 0.0f;
        if (i % 89 == 0) v *= 1e-6f;
        x[i] = v;
    }
}

/* the stream: per shape, spec and round: u64 length + message, then the
 * decoded floats */
static int produce(buf *out) {
    for (size_t k = 0; k < NSHAPES; k++) {
        const pz_shape *s = &shapes[k];
        size_t n = pz_shape_numel(s), C = (size_t)s->dims[s->ndim - 1];
        float *x = xmalloc(n * sizeof(float)), *y = xmalloc(n * sizeof(float));
        uint64_t ids[8];
        for (int i = 0; i < s->dims[0]; i++) ids[i] = 100 + (uint64_t)i;
        for (size_t i = 0; i < NSPECS; i++) {
            pz_codec *c = NULL, *d = NULL;
            if (pz_codec_create(specs[i], &c) != PZ_OK || pz_codec_create(specs[i], &d) != PZ_OK) {
                printf("FAIL %s: %s\n", specs[i], pz_last_error());
                return 1;
            }
            size_t cap = pz_codec_max_encoded_size(c, s);
            uint8_t *msg = xmalloc(cap);
            for (uint64_t round = 0; round < ROUNDS; round++) {
                /* rounds move slowly, as activations of one sample do between epochs */
                fill(x, n, C, 1000 * k + 10 * i);
                for (size_t e = 0; e < n; e++) x[e] += 0.1f * (float)round * (float)((int)(e % 7) - 3);
                pz_codec_ctx ctx = {.seed = 7, .step = round, .edge = 1, .dir = 0, .micro = 3, .sample_ids = ids};
                size_t len = 0;
                pz_shape got;
                if (pz_codec_encode(c, x, s, &ctx, msg, cap, &len) != PZ_OK ||
                    pz_codec_decode(d, msg, len, &ctx, y, n, &got) != PZ_OK) {
                    printf("FAIL %s: %s\n", specs[i], pz_last_error());
                    return 1;
                }
                uint64_t l = len;
                put(out, &l, 8);
                put(out, msg, len);
                put(out, y, n * sizeof(float));
            }
            free(msg);
            pz_codec_free(c);
            pz_codec_free(d);
        }
        free(x);
        free(y);
    }
    return 0;
}

/* which spec, shape and round byte `at` of the stream belongs to */
static void locate(const buf *b, size_t at) {
    size_t pos = 0;
    for (size_t k = 0; k < NSHAPES; k++) {
        size_t n = pz_shape_numel(&shapes[k]);
        for (size_t i = 0; i < NSPECS; i++)
            for (int r = 0; r < ROUNDS; r++) {
                uint64_t l;
                if (pos + 8 > b->len) return;
                memcpy(&l, b->p + pos, 8);
                size_t end = pos + 8 + l + n * sizeof(float);
                if (at < end) {
                    printf("  first difference in %s, shape %zu, round %d, %s\n", specs[i], k, r,
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
    const char *path = argv[argc - 1];
    buf got = {0};
    if (produce(&got) != 0) return 1;
    if (write_mode) {
        pz_atomic_file af;
        if (pz_atomic_open(&af, path) != PZ_OK) pz_die("%s", pz_last_error());
        xfwrite(got.p, 1, got.len, af.f);
        if (pz_atomic_commit(&af) != PZ_OK) pz_die("%s", pz_last_error());
        printf("wrote %s: %zu bytes (%zu specs, %zu shapes, %d rounds)\n", path, got.len, NSPECS, NSHAPES, ROUNDS);
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
    else printf("golden codecs: %zu specs x %zu shapes x %d rounds, %zu bytes equal to %s\n", NSPECS, NSHAPES, ROUNDS,
                got.len, path);
    free(want);
    free(got.p);
    return check_summary("test_golden");
}
