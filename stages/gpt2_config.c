/* gpt2_config.c: presets, validation and element counts. */
#include "stages/gpt2_config.h"

#include <string.h>

typedef struct { const char *name; pz_gpt2_config cfg; } preset;

/* gpt2: the published 124M model. demo: ~10.8M parameters on bytes, small
 * enough to train for a few hundred steps on 2 cores in minutes. tiny:
 * ~250k parameters for tests. */
static const preset presets[] = {
    {"gpt2", {1024, 50257, 50304, 12, 12, 768}},
    {"demo", {256, 256, 256, 6, 6, 384}},
    {"tiny", {64, 256, 256, 2, 4, 96}},
};

const char *pz_gpt2_preset_names(void) { return "gpt2, demo, tiny"; }

int pz_pad_vocab(int V) { return (V + 127) / 128 * 128; }

pz_status pz_gpt2_preset(const char *name, pz_gpt2_config *out) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(name, presets[i].name) == 0) { *out = presets[i].cfg; return PZ_OK; }
    return pz_fail(PZ_ERR_ARG, "unknown preset '%s' (known: %s)", name, pz_gpt2_preset_names());
}

pz_status pz_gpt2_config_validate(const pz_gpt2_config *c) {
    /* bounds keep every product below in size_t and every index in int */
    if (c->max_seq_len < 1 || c->max_seq_len > 65536)
        return pz_fail(PZ_ERR_SHAPE, "max_seq_len %d out of range [1, 65536]", c->max_seq_len);
    if (c->vocab_size < 1 || c->vocab_size > 65536)
        return pz_fail(PZ_ERR_SHAPE, "vocab_size %d out of range [1, 65536] (tokens are uint16)", c->vocab_size);
    if (c->padded_vocab_size < c->vocab_size || c->padded_vocab_size > 1 << 20)
        return pz_fail(PZ_ERR_SHAPE, "padded_vocab_size %d must be in [vocab_size=%d, 2^20]",
                       c->padded_vocab_size, c->vocab_size);
    if (c->num_layers < 1 || c->num_layers > 1024)
        return pz_fail(PZ_ERR_SHAPE, "num_layers %d out of range [1, 1024]", c->num_layers);
    if (c->channels < 1 || c->channels > 65536)
        return pz_fail(PZ_ERR_SHAPE, "channels %d out of range [1, 65536]", c->channels);
    if (c->num_heads < 1 || c->num_heads > c->channels)
        return pz_fail(PZ_ERR_SHAPE, "num_heads %d out of range [1, channels=%d]", c->num_heads, c->channels);
    if (c->channels % c->num_heads != 0)
        return pz_fail(PZ_ERR_SHAPE, "num_heads %d does not divide channels %d", c->num_heads, c->channels);
    return PZ_OK;
}

size_t pz_block_tensor_numel(const pz_gpt2_config *c, int which) {
    size_t C = (size_t)c->channels;
    switch (which) {
    case PZ_LN1W: case PZ_LN1B: case PZ_LN2W: case PZ_LN2B:
    case PZ_ATTPROJB: case PZ_FCPROJB: return C;
    case PZ_QKVW: return 3 * C * C;
    case PZ_QKVB: return 3 * C;
    case PZ_ATTPROJW: return C * C;
    case PZ_FCW: case PZ_FCPROJW: return 4 * C * C;
    case PZ_FCB: return 4 * C;
    }
    return 0;
}

size_t pz_block_numel(const pz_gpt2_config *c) {
    size_t n = 0;
    for (int i = 0; i < PZ_BLOCK_NTENSORS; i++) n += pz_block_tensor_numel(c, i);
    return n;
}

size_t pz_gpt2_numel(const pz_gpt2_config *c) {
    size_t C = (size_t)c->channels;
    return (size_t)c->padded_vocab_size * C + (size_t)c->max_seq_len * C
         + (size_t)c->num_layers * pz_block_numel(c) + 2 * C;
}
