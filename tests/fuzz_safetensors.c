/* fuzz_safetensors.c: libFuzzer entry for the safetensors header parser and
 * the GPT-2 config derivation on top of it. Works from memory only.
 *
 * clang: built as fuzz_safetensors with -fsanitize=fuzzer (tests/meson.build).
 * Any compiler: linked with fuzz_replay.c into fuzz_safetensors_replay, which
 * replays files or runs a deterministic mutation smoke test. */
#include "runtime/checkpoint.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
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
    if (pz_ckpt_config_from_safetensors(&f, "fuzz", &cfg) == PZ_OK && pz_gpt2_config_validate(&cfg) != PZ_OK)
        abort();
    pz_st_close(&f);
    return 0;
}
