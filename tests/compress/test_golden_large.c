/* test_golden_large.c: jointsq on tensors large enough for the paths that
 * test_golden's shapes never reach: more than 16384 groups take the sampled
 * scale search, the one pass over all groups with the exact solver on the
 * candidates, and (k = 0) the map tables of the writer and the reader. Each
 * spec's message and decoded tensor are compared with committed CRC-32C
 * values (not bytes: megabytes each).
 *
 * The values are those of the code before the speed work of 2026-11-27
 * (commit 98fe451), which changed no byte. Codec bytes are the same at
 * every ISA level (test isa), so they hold on any x86-64 CPU; the inputs
 * come from codec_stream_fill, as test_golden's. A deliberate format change
 * prints the new table (`test_golden_large --print`) and says so in its
 * commit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/mem.h"
#include "base/status.h"
#include "compress/core/codec.h"
#include "tests/check.h"
#include "tests/compress/codec_stream.h"

typedef struct {
    const char *spec;
    size_t rows;             /* x 1024 */
    uint64_t len;            /* message bytes */
    uint32_t crc_msg, crc_out;
} golden;

static const golden table[] = {
    {"jointsq:4", 1024, 524351, 0xae391175u, 0x8fd4e863u},
    {"jointsq:2", 1024, 256120, 0x4286ac73u, 0x9fd907e0u},
    {"jointsq:0.5", 1024, 63437, 0x021f8795u, 0x65975a81u},
    {"jointsq:6", 1024, 786495, 0x21869e44u, 0x3da1a8c4u},
    {"jointsq:3,group=4", 1024, 393276, 0x4c3c719eu, 0xe915201eu},
    {"jointsq:1.5,group=32", 1024, 196376, 0xef593b48u, 0x449ce7a2u},
    {"jointsq:4", 33, 16959, 0x05d4302du, 0x642f4196u},
};
#define NT (sizeof table / sizeof table[0])

int main(int argc, char **argv) {
    int print = argc == 2 && !strcmp(argv[1], "--print");
    if (!print && argc != 1) {
        fprintf(stderr, "usage: test_golden_large [--print]\n");
        return 2;
    }
    const size_t C = 1024;
    for (size_t t = 0; t < NT; t++) {
        size_t n = table[t].rows * C;
        pz_shape s = {2, {(int64_t)table[t].rows, (int64_t)C}};
        float *x = xmalloc(n * sizeof *x), *y = xmalloc(n * sizeof *y);
        codec_stream_fill(x, n, C, 2026 + t, 0);
        pz_codec *c = NULL;
        CHECK_STATUS(pz_codec_create(table[t].spec, &c), PZ_OK, NULL);
        if (!c) continue;
        size_t cap = pz_codec_max_encoded_size(c, &s), len = 0;
        uint8_t *m = xmalloc(cap);
        pz_codec_ctx ctx = {.seed = 7, .step = 3};
        pz_status st = pz_codec_encode(c, x, &s, &ctx, m, cap, &len);
        CHECK(st == PZ_OK, "%s: encode: %s", table[t].spec, pz_last_error());
        if (st == PZ_OK) st = pz_codec_decode(c, m, len, &ctx, y, n, NULL);
        CHECK(st == PZ_OK, "%s: decode: %s", table[t].spec, pz_last_error());
        uint32_t cm = pz_crc32c(0, m, len), co = pz_crc32c(0, y, n * sizeof *y);
        if (print) {
            printf("    {\"%s\", %zu, %zu, 0x%08xu, 0x%08xu},\n", table[t].spec, table[t].rows, len, cm, co);
        } else if (st == PZ_OK) {
            CHECK(len == table[t].len && cm == table[t].crc_msg, "%s on %zu x %zu: message of %zu bytes, crc %08x (golden: %llu bytes, %08x)",
                  table[t].spec, table[t].rows, C, len, cm, (unsigned long long)table[t].len, table[t].crc_msg);
            CHECK(co == table[t].crc_out, "%s on %zu x %zu: decoded crc %08x (golden %08x)", table[t].spec, table[t].rows, C,
                  co, table[t].crc_out);
        }
        free(m);
        free(x);
        free(y);
        pz_codec_free(c);
    }
    if (print) return 0;
    printf("golden large: %zu jointsq messages and decoded tensors compared\n", NT);
    return check_summary("test_golden_large");
}
