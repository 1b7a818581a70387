/* fuzz_dpmsg_replay.c: the data-parallel header's fuzz entry (fuzz_dpmsg.c)
 * without libFuzzer, through tests/fuzz/replay/fuzz_driver.c:
 *
 *   fuzz_dpmsg_replay FILE...     replay inputs (crash reproducers, corpus)
 *   fuzz_dpmsg_replay --seed DIR  write seed inputs for a libFuzzer corpus
 *   fuzz_dpmsg_replay [N]         mutation smoke test: N (default 200000)
 *                                 deterministic mutations of the seeds
 * The seeds are valid messages for each expectation with 0 to 5000 bytes
 * after the header; the mutator also rewrites single fields and keeps the
 * length field consistent, so every check is reached. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/mem.h"
#include "base/rng.h"
#include "runtime/dp/dpmsg.h"
#include "tests/fuzz/replay/fuzz_driver.h"
#include "tests/fuzz/fuzz_dpmsg.h"

static fuzz_image message(size_t n) {
    size_t len = PZ_DPMSG_HDR + n;
    uint8_t *b = xcalloc(len + 1, 1);
    for (size_t i = 0; i < n; i++) b[PZ_DPMSG_HDR + i] = (uint8_t)(i * 37 + n);
    pz_dpmsg h = fuzz_dpmsg_expect(len);
    h.msg_len = n;
    pz_dpmsg_put(b, &h);
    return (fuzz_image){b, len};
}

/* valid messages for each expectation (the length picks it) */
static int make_seeds(fuzz_image *seeds) {
    static const size_t sizes[] = {0, 8, 100, 4096, 5000};
    int n = 0;
    for (size_t pick = 0; pick < 4; pick++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) seeds[n++] = message(sizes[i] + pick);
    seeds[n++] = (fuzz_image){xcalloc(1, 1), 0};
    return n;
}

static void fix_length(uint8_t *b, size_t len) {
    if (len >= PZ_DPMSG_HDR) pz_put_u64(b + 32, len - PZ_DPMSG_HDR);
}

int main(int argc, char **argv) {
    static const fuzz_header h = {PZ_DPMSG_HDR, 32, 5, 27, fix_length};   /* bytes 5..31: after the magic */
    static const fuzz_target t = {"dpmsg", ".pzdpmsg", 200000, 20261128, make_seeds, NULL, &h};
    return fuzz_main(&t, argc, argv);
}
