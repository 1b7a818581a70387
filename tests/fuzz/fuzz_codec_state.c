/* fuzz_codec_state.c: libFuzzer entry for the codec-state blob reader
 * (compress/wrappers/codec_state.c), which checkpoints feed from files: every input is
 * loaded into fresh aq, ef21, nested aq(ef(...)) and hadamard-wrapped codecs. A blob is either
 * refused or loaded; a loaded one must save back to the same bytes.
 *
 * clang: fuzz_codec_state with -fsanitize=fuzzer (tests/meson.build). Any
 * compiler: with fuzz_codec_state_replay.c and fuzz_driver.c into
 * fuzz_codec_state_replay (seeds, replay, mutation smoke test). */
#include "compress/core/codec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const specs[] = {"aq(q4,mem=1K)", "ef21(q4)", "ef(q8)", "aq(ef(q4))", "q4",
                                        "hadamard(ef21(q4))", "aq(hadamard(q4))"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        pz_codec *c = NULL;
        if (pz_codec_create(specs[i], &c) != PZ_OK) abort();
        if (pz_codec_state_load(c, data, size) == PZ_OK) {
            uint8_t *back = NULL;
            size_t len = 0;
            if (pz_codec_state_save(c, &back, &len) != PZ_OK) abort();
            /* aq keeps rows in first-sight order, ef/ef21 one vector: the same bytes */
            if (len != size || memcmp(back, data, size) != 0) abort();
            free(back);
        }
        pz_codec_free(c);
    }
    return 0;
}
