/* fuzz_bpe_replay.c: the tokenizer-file fuzz entry (fuzz_bpe.c) without
 * libFuzzer, through tests/fuzz/replay/fuzz_driver.c:
 *
 *   fuzz_bpe_replay FILE...     replay inputs (crash reproducers, corpus)
 *   fuzz_bpe_replay --seed DIR  write seed inputs for a libFuzzer corpus
 *   fuzz_bpe_replay [N]         mutation smoke test: N (default 20000)
 *                               deterministic mutations of the seeds
 * The smoke test is meant to run under ASan/UBSan in ordinary (gcc) builds. */
#include "base/mem.h"
#include "base/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/replay/fuzz_driver.h"

static void seed(fuzz_image *s, const char *text, size_t len) {
    s->len = len;
    s->data = xmalloc(len + 1);
    memcpy(s->data, text, len);
}

/* small tokenizers that load: every byte of the text below is covered in the
 * first, so mutations reach the merges and the encoder */
static int make_seeds(fuzz_image *seeds) {
    char vocab[8192];
    size_t k = 0;
    k += (size_t)snprintf(vocab + k, sizeof vocab - k, "{");
    /* the printable ASCII bytes and Ġ Ċ ĉ stand for themselves / space, newline, tab */
    for (int c = '!'; c <= '~'; c++) {
        if (c == '"' || c == '\\') k += (size_t)snprintf(vocab + k, sizeof vocab - k, "\"\\%c\": %d, ", c, c);
        else k += (size_t)snprintf(vocab + k, sizeof vocab - k, "\"%c\": %d, ", c, c);
    }
    k += (size_t)snprintf(vocab + k, sizeof vocab - k,
                          "\"\\u0120\": 200, \"\\u010a\": 201, \"\\u0109\": 202, \"\\u0120t\": 203, \"he\": 204, "
                          "\"\\u0120the\": 205, \"\\u0120\\u0120\": 206, \"<|endoftext|>\": 207}");
    char json[16384];
    int n = snprintf(json, sizeof json,
                     "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": [{\"id\": 207, "
                     "\"content\": \"<|endoftext|>\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                     "\"normalized\": false, \"special\": true}], \"normalizer\": null, \"pre_tokenizer\": {\"type\": "
                     "\"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}, "
                     "\"post_processor\": null, \"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", "
                     "\"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": null, \"end_of_word_suffix\": "
                     "null, \"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": false, \"vocab\": %s, "
                     "\"merges\": [\"\\u0120 t\", [\"h\", \"e\"], \"\\u0120t he\", \"\\u0120 \\u0120\"]}}",
                     vocab);
    seed(&seeds[0], json, (size_t)n);
    static const char small[] = "{\"added_tokens\": [{\"id\": 3, \"content\": \"<s>\"}], \"model\": {\"vocab\": "
                                "{\"a\": 0, \"b\": 1, \"ab\": 2, \"\\u00e9\": 4}, \"merges\": [\"a b\"]}}";
    seed(&seeds[1], small, sizeof small - 1);
    /* vocab.json NUL merges.txt */
    char two[8192 + 64];
    size_t vl = strlen(vocab);
    memcpy(two, vocab, vl);
    static const char merges[] = "#version: 0.2\n\xc4\xa0 t\nh e\n\xc4\xa0t he\n";
    two[vl] = 0;
    memcpy(two + vl + 1, merges, sizeof merges - 1);
    seed(&seeds[2], two, vl + 1 + sizeof merges - 1);
    return 3;
}

static void mutate(pz_rng *r, uint8_t *b, size_t *len, size_t cap) {
    static const char alphabet[] = "{}[]\":, 0123456789-.e\\u\"ab\xc4\xa0\n#<|>vocabmergesidcontentBPEByteLeveltruenull";
    int k = 1 + (int)pz_rng_below(r, 4);
    for (int i = 0; i < k && *len > 0; i++) {
        size_t at = (size_t)pz_rng_below(r, *len);
        switch (pz_rng_below(r, 6)) {
        case 0: b[at] = (uint8_t)pz_rng_next(r); break;
        case 1: case 2: b[at] = (uint8_t)alphabet[pz_rng_below(r, sizeof alphabet - 1)]; break;
        case 3: fuzz_delete_run(r, b, len, at); break;
        case 4:
            if (*len < cap) fuzz_insert_byte(b, len, at, (uint8_t)alphabet[pz_rng_below(r, sizeof alphabet - 1)]);
            break;
        case 5: *len = (size_t)pz_rng_below(r, *len + 1); break;   /* truncate */
        }
    }
}

int main(int argc, char **argv) {
    static const fuzz_target t = {"bpe", ".json", 20000, 20251125, make_seeds, mutate, NULL};
    return fuzz_main(&t, argc, argv);
}
