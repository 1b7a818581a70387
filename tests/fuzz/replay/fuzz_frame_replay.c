/* fuzz_frame_replay.c: the frame check's fuzz entry (fuzz_frame.c) without
 * libFuzzer, through tests/fuzz/replay/fuzz_driver.c:
 *
 *   fuzz_frame_replay FILE...     replay inputs (crash reproducers, corpus)
 *   fuzz_frame_replay --seed DIR  write seed inputs for a libFuzzer corpus
 *   fuzz_frame_replay [N]         mutation smoke test: N (default 200000)
 *                                 deterministic mutations of the seeds
 * The seeds are valid frames for each expectation, with payloads of 0 to
 * 5000 bytes; the mutator also rewrites fields and re-seals the CRC, so that
 * the checks behind the CRC (job, edge, kind, step, micro) are reached. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/mem.h"
#include "base/rng.h"
#include "runtime/net/frame.h"
#include "tests/fuzz/replay/fuzz_driver.h"
#include "tests/fuzz/fuzz_frame.h"

static fuzz_image frame(size_t n) {
    uint8_t *b = xcalloc(PZ_FRAME_HDR + n + 1, 1);
    for (size_t i = 0; i < n; i++) b[PZ_FRAME_HDR + i] = (uint8_t)(i * 37 + n);
    pz_frame_id id = fuzz_frame_expect(n);
    pz_frame_put(b, &id, b + PZ_FRAME_HDR, n);
    return (fuzz_image){b, PZ_FRAME_HDR + n};
}

/* valid frames for each expectation (the payload length picks it) */
static int make_seeds(fuzz_image *seeds) {
    static const size_t sizes[] = {0, 8, 100, 4096, 5000};
    int n = 0;
    for (size_t pick = 0; pick < 4; pick++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) seeds[n++] = frame(sizes[i] + pick);
    /* a version 1 frame, sealed (a build whose codec messages had their own CRC): refused */
    seeds[n] = frame(100);
    seeds[n].data[4] = 1;
    pz_put_u32(seeds[n].data + PZ_FRAME_CRC_AT, pz_frame_crc(seeds[n].data, seeds[n].data + PZ_FRAME_HDR, 100));
    n++;
    seeds[n++] = (fuzz_image){xcalloc(1, 1), 0};
    return n;
}

static void reseal(uint8_t *b, size_t len) {
    if (len < PZ_FRAME_HDR) return;
    pz_put_u64(b + 24, len - PZ_FRAME_HDR);
    pz_put_u32(b + PZ_FRAME_CRC_AT, pz_frame_crc(b, b + PZ_FRAME_HDR, len - PZ_FRAME_HDR));
}

int main(int argc, char **argv) {
    static const fuzz_header h = {PZ_FRAME_HDR, 24, 4, 20, reseal};   /* bytes 4..23: version .. micro */
    static const fuzz_target t = {"frame", ".pzframe", 200000, 20261125, make_seeds, NULL, &h};
    return fuzz_main(&t, argc, argv);
}
