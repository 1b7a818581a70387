/* fuzz_dpmsg.c: libFuzzer entry for the data-parallel message header check
 * (runtime/dp/dpmsg.c), which reads every compressed data-parallel message
 * a peer sends before the codec sees it.
 *
 * Input: one message (header and codec message). Its length modulo 4 picks
 * which of four expectations the receiver holds. Aborts on a broken promise:
 * a result outside the enum, OK with a reason or another result without one,
 * an unprintable or unterminated reason, or an accepted message whose header
 * differs from the one pz_dpmsg_put writes for the expectation and that
 * length (an accepted header must be exactly what the sender would write).
 *
 * clang: built as fuzz_dpmsg with -fsanitize=fuzzer (tests/meson.build).
 * Any compiler: linked with fuzz_dpmsg_replay.c and fuzz_driver.c into
 * fuzz_dpmsg_replay (replay files, or a deterministic mutation smoke test). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/dp/dpmsg.h"
#include "tests/fuzz/fuzz_dpmsg.h"
#include "tests/fuzz/fuzz_reason.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pz_dpmsg want = fuzz_dpmsg_expect(size);
    uint8_t *buf = malloc(size ? size : 1);   /* an exact-size copy: ASan sees reads past the end */
    memcpy(buf, data, size);
    char why[160];
    memset(why, 'x', sizeof why);
    pz_dpmsg_result r = pz_dpmsg_check(buf, size, &want, why, sizeof why);
    fuzz_check_reason((int)r, PZ_DPMSG_RANGE, why, sizeof why);
    if (r == PZ_DPMSG_OK) {
        uint8_t again[PZ_DPMSG_HDR];
        want.msg_len = size - PZ_DPMSG_HDR;
        pz_dpmsg_put(again, &want);
        if (memcmp(again, buf, PZ_DPMSG_HDR) != 0) abort();
    }
    free(buf);
    return 0;
}
