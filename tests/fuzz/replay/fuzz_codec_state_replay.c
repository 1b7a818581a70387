/* fuzz_codec_state_replay.c: the codec-state fuzz entry
 * (fuzz_codec_state.c) without libFuzzer, through tests/fuzz/replay/fuzz_driver.c:
 * replay files, write seeds (--seed DIR), or a deterministic mutation smoke
 * test (N, default 20000), meant to run under ASan/UBSan. */
#include "compress/core/codec.h"
#include "base/bytes.h"
#include "base/crc32c.h"
#include "base/mem.h"
#include "base/rng.h"

#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/replay/fuzz_driver.h"

/* Real blobs: the state of codecs after a few messages (aq with two rows
 * per message over 3 ids, ef21, aq(ef) nested), saved by the library. */
static int make_seeds(fuzz_image *seeds) {
    static const char *const specs[] = {"aq(q4,mem=1K)", "ef21(q4)", "ef(q8)", "aq(ef(q4))", "q4",
                                        "hadamard(ef21(q4))", "aq(hadamard(q4))"};
    int n = 0;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        pz_codec *tx = NULL, *rx = NULL;
        if (pz_codec_create(specs[i], &tx) != PZ_OK || pz_codec_create(specs[i], &rx) != PZ_OK) pz_die("codec");
        float x[2 * 6], y[2 * 6];
        uint8_t msg[4096];
        for (int step = 0; step < 3; step++) {
            uint64_t ids[2] = {(uint64_t)step, (uint64_t)step + 1};
            for (int k = 0; k < 12; k++) x[k] = (float)((k * 7 + step * 3) % 11) - 5.0f;
            pz_shape sh = {2, {2, 6}};
            pz_codec_ctx ctx;
            memset(&ctx, 0, sizeof ctx);
            ctx.seed = 1;
            ctx.step = (uint64_t)step;
            ctx.sample_ids = ids;
            size_t len = 0;
            pz_shape got;
            if (pz_codec_encode(tx, x, &sh, &ctx, msg, sizeof msg, &len) != PZ_OK ||
                pz_codec_decode(rx, msg, len, &ctx, y, 12, &got) != PZ_OK)
                pz_die("%s: %s", specs[i], pz_last_error());
        }
        for (int side = 0; side < 2; side++)
            if (pz_codec_state_save(side ? rx : tx, &seeds[n].data, &seeds[n].len) == PZ_OK) n++;
        pz_codec_free(tx);
        pz_codec_free(rx);
    }
    return n;
}

static void mutate(pz_rng *r, uint8_t *b, size_t *len, size_t cap) {
    fuzz_mutate_steps(r, b, len, cap, 3, FUZZ_BYTE_STEPS, NULL);   /* byte steps only */
    /* most of the time a valid CRC, so that mutations reach the parser */
    if (*len >= 4 && pz_rng_below(r, 4)) pz_put_u32(b + *len - 4, pz_crc32c(0, b, *len - 4));
}

int main(int argc, char **argv) {
    static const fuzz_target t = {"codec-state", ".pzcs", 20000, 20261125, make_seeds, mutate, NULL};
    return fuzz_main(&t, argc, argv);
}
