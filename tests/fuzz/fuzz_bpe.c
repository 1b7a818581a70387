/* fuzz_bpe.c: libFuzzer entry for the tokenizer-file parsers of stages/bpe/bpe_files.c
 * (tokenizer.json; vocab.json + merges.txt, the input cut at its first NUL
 * byte) and for the base/formats/json.c reader under them. A file that loads must
 * encode text, including the input itself when it is UTF-8, to ids that
 * decode back to that text. Works from memory only.
 *
 * clang: built as fuzz_bpe with -fsanitize=fuzzer (tests/meson.build).
 * Any compiler: linked with fuzz_bpe_replay.c and fuzz_driver.c into
 * fuzz_bpe_replay, which replays files or runs a deterministic mutation
 * smoke test. */
#include "stages/bpe/bpe.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* encode, decode, compare; an encoding error (bytes without a token, text
 * that is not UTF-8) is fine, a wrong round trip is not */
static void round_trip(const pz_bpe *b, pz_bpe_enc *e, const char *text, size_t len) {
    pz_bpe_ids ids = {0};
    if (pz_bpe_encode(e, text, len, "fuzz", &ids) == PZ_OK) {
        for (size_t i = 0; i < ids.n; i++)
            if (ids.ids[i] >= pz_bpe_n_vocab(b)) abort();
        char *back = NULL;
        size_t bl = 0;
        if (pz_bpe_decode(b, ids.ids, ids.n, &back, &bl) != PZ_OK) abort();
        if (bl != len || memcmp(back, text, len) != 0) abort();
        free(back);
    }
    free(ids.ids);
}

static void check(pz_bpe *b, const uint8_t *data, size_t size) {
    if (pz_bpe_n_vocab(b) < 1 || pz_bpe_n_vocab(b) > PZ_BPE_MAX_ID + 1) abort();
    pz_bpe_enc *e = pz_bpe_enc_new(b);
    static const char text[] = "Hello world's 12 caf\xc3\xa9s  \t\n\n \xe6\x9d\xb1\xe4\xba\xac<|endoftext|>ab";
    round_trip(b, e, text, sizeof text - 1);
    round_trip(b, e, (const char *)data, size < 4096 ? size : 4096);
    pz_bpe_enc_free(e);
    pz_bpe_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pz_bpe *b = NULL;
    if (pz_bpe_from_tokenizer_json((const char *)data, size, "fuzz", &b) == PZ_OK) check(b, data, size);
    else if (b) abort();   /* a failure leaves nothing */
    const uint8_t *nul = memchr(data, 0, size);
    if (nul) {
        size_t vl = (size_t)(nul - data);
        b = NULL;
        if (pz_bpe_from_vocab_merges((const char *)data, vl, "fuzz", (const char *)nul + 1, size - vl - 1, "fuzz-merges",
                                     &b) == PZ_OK)
            check(b, data, vl);
        else if (b) abort();
    }
    return 0;
}
