/* fuzz_safetensors.c: libFuzzer entry for the safetensors header parser and
 * the GPT-2 config derivation on top of it, and for the JSON of an HF model
 * directory (config.json, model.safetensors.index.json; stages/hf_dir.c),
 * fed the input as it is and without a safetensors length prefix, so the
 * seeds' JSON headers reach it. Works from memory only.
 *
 * clang: built as fuzz_safetensors with -fsanitize=fuzzer (tests/meson.build).
 * Any compiler: linked with fuzz_replay.c and fuzz_driver.c into fuzz_safetensors_replay, which
 * replays files or runs a deterministic mutation smoke test. */
#include "stages/gpt2_checkpoint.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* invariants of the HF JSON parsers on text */
static void hf_json(const char *text, size_t len) {
    pz_hf_config hc;
    if (pz_hf_config_parse(text, len, "fuzz", &hc) == PZ_OK) {
        if (hc.n_head == 0 || hc.n_head > (1 << 24) || hc.n_embd == 0) abort();
        if (strlen(hc.activation_function) >= sizeof hc.activation_function) abort();
        pz_gpt2_config c = {16, 50, 64, 2, 0, 32};
        (void)pz_hf_config_check(&hc, "fuzz", &c);
    }
    pz_hf_index ix;
    if (pz_hf_index_parse(text, len, "fuzz", &ix) == PZ_OK) {
        if (ix.nshards < 1 || ix.ntensors < 1) abort();
        for (int i = 0; i < ix.nshards; i++)
            if (!ix.shard_names[i][0] || strchr(ix.shard_names[i], '/') || strcmp(ix.shard_names[i], "..") == 0) abort();
        for (int i = 0; i < ix.ntensors; i++)
            if (ix.tensor_shard[i] < 0 || ix.tensor_shard[i] >= ix.nshards) abort();
        pz_hf_index_free(&ix);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hf_json((const char *)data, size);
    if (size > 8) hf_json((const char *)data + 8, size - 8);
    pz_st_file f;
    if (pz_st_parse(&f, data, size, "fuzz") != PZ_OK) return 0;
    /* invariants a successful parse promises */
    uint64_t covered = 0;
    for (int i = 0; i < f.ntensors; i++) {
        const pz_st_tensor *t = &f.tensors[i];
        if (pz_st_find(&f, t->name) != t) abort();
        if (t->begin > t->end || t->end > f.buffer_len || t->data != f.buffer + t->begin) abort();
        if (i > 0 && strcmp(f.tensors[i - 1].name, t->name) >= 0) abort();
        covered += t->end - t->begin;
        if (t->end > t->begin) {
            volatile uint8_t first = t->data[0], last = t->data[t->end - t->begin - 1];
            (void)first;
            (void)last;
        }
    }
    if (covered != f.buffer_len) abort();
    if (f.buffer + f.buffer_len != data + size) abort();
    for (int i = 0; i < f.nmeta; i++)
        if (!pz_st_meta_get(&f, f.meta[i].key)) abort();
    pz_gpt2_config cfg;
    if (pz_ckpt_config_from_safetensors(&f, "fuzz", 0, NULL, &cfg) == PZ_OK && pz_gpt2_config_validate(&cfg) != PZ_OK)
        abort();
    pz_st_close(&f);
    return 0;
}
