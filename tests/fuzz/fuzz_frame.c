/* fuzz_frame.c: libFuzzer entry for the frame check (runtime/net/frame.c), which
 * reads every message a peer sends before anything else looks at it.
 *
 * Input: one message as the transport receives it: its first 40 bytes (or
 * fewer) land in the header buffer, the rest is the payload. The payload's
 * length modulo 4 picks which of four expectations (job, ranks, kind, step,
 * micro) the receiver holds. Aborts on a broken promise: a result outside the
 * enum, OK with a reason or another result without one, an unprintable or
 * unterminated reason, or an accepted frame whose header differs from the
 * one pz_frame_put writes for the expected id and that payload (an accepted
 * frame must be exactly what the sender would have sent: since frame
 * version 2 its CRC is the only one over a codec message on the wire, so
 * any byte changed on the way must be refused here), or an accepted frame
 * of another version than PZ_FRAME_VERSION.
 *
 * clang: built as fuzz_frame with -fsanitize=fuzzer (tests/meson.build).
 * Any compiler: linked with fuzz_frame_replay.c and fuzz_driver.c into
 * fuzz_frame_replay (replay files, or a deterministic mutation smoke test). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/net/frame.h"
#include "tests/fuzz/fuzz_frame.h"
#include "tests/fuzz/fuzz_reason.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t hl = size < PZ_FRAME_HDR ? size : PZ_FRAME_HDR;
    pz_frame_id want = fuzz_frame_expect(size - hl);
    /* separate buffers of exact sizes, as the transport's IOV receive fills them */
    uint8_t *hdr = malloc(hl ? hl : 1), *pay = malloc(size - hl ? size - hl : 1);
    memcpy(hdr, data, hl);
    memcpy(pay, data + hl, size - hl);
    char why[160];
    memset(why, 'x', sizeof why);
    pz_frame_result r = pz_frame_check(hdr, hl, &want, pay, size - hl, why, sizeof why);
    fuzz_check_reason((int)r, PZ_FRAME_RESERVED, why, sizeof why);
    if (r == PZ_FRAME_OK) {
        uint8_t again[PZ_FRAME_HDR];
        pz_frame_put(again, &want, pay, size - hl);
        if (hl != PZ_FRAME_HDR || memcmp(again, hdr, PZ_FRAME_HDR) != 0) abort();
        if (hdr[4] != PZ_FRAME_VERSION) abort();
    }
    free(hdr);
    free(pay);
    return 0;
}
