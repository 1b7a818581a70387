/* gpt2_params.c: views, tensor table and initialisation of a stage's parameters. */
#include "stages/gpt2_params.h"
#include "base/mem.h"
#include "base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

size_t pz_stage_numel(const pz_gpt2_config *c, const pz_stage_range *r) {
    size_t C = (size_t)c->channels, n = 0;
    if (r->has_embed || r->has_head) n += (size_t)c->padded_vocab_size * C;
    if (r->has_embed) n += (size_t)c->max_seq_len * C;
    n += (size_t)(r->l1 - r->l0) * pz_block_numel(c);
    if (r->has_head) n += 2 * C;
    return n;
}

pz_stage_range pz_whole_model(const pz_gpt2_config *c) {
    pz_stage_range r = {0, c->num_layers, 1, 1};
    return r;
}

void pz_gpt2_params_bind(pz_gpt2_params *p, const pz_gpt2_config *c,
                         const pz_stage_range *r, float *mem) {
    memset(p, 0, sizeof *p);
    p->cfg = *c;
    p->range = *r;
    p->mem = mem;
    p->numel = pz_stage_numel(c, r);
    size_t C = (size_t)c->channels;
    float *at = mem;
    if (r->has_embed || r->has_head) { p->wte = at; at += (size_t)c->padded_vocab_size * C; }
    if (r->has_embed) { p->wpe = at; at += (size_t)c->max_seq_len * C; }
    int nb = r->l1 - r->l0;
    p->blocks = xcalloc(nb > 0 ? (size_t)nb : 1, sizeof *p->blocks);
    for (int i = 0; i < nb; i++) {
        float **slots[PZ_BLOCK_NTENSORS] = {
            &p->blocks[i].ln1w, &p->blocks[i].ln1b, &p->blocks[i].qkvw, &p->blocks[i].qkvb,
            &p->blocks[i].attprojw, &p->blocks[i].attprojb, &p->blocks[i].ln2w, &p->blocks[i].ln2b,
            &p->blocks[i].fcw, &p->blocks[i].fcb, &p->blocks[i].fcprojw, &p->blocks[i].fcprojb};
        for (int t = 0; t < PZ_BLOCK_NTENSORS; t++) { *slots[t] = at; at += pz_block_tensor_numel(c, t); }
    }
    if (r->has_head) { p->lnfw = at; at += C; p->lnfb = at; at += C; }
}

void pz_gpt2_params_unbind(pz_gpt2_params *p) {
    free(p->blocks);
    p->blocks = NULL;
}

/* Per-block tensor names in HF GPT-2 naming, whether HF stores it as Conv1D
 * (transposed), and whether AdamW decays it. */
static const struct { const char *suffix; int conv1d, decay; } block_names[PZ_BLOCK_NTENSORS] = {
    {"ln_1.weight", 0, 0}, {"ln_1.bias", 0, 0},
    {"attn.c_attn.weight", 1, 1}, {"attn.c_attn.bias", 0, 0},
    {"attn.c_proj.weight", 1, 1}, {"attn.c_proj.bias", 0, 0},
    {"ln_2.weight", 0, 0}, {"ln_2.bias", 0, 0},
    {"mlp.c_fc.weight", 1, 1}, {"mlp.c_fc.bias", 0, 0},
    {"mlp.c_proj.weight", 1, 1}, {"mlp.c_proj.bias", 0, 0},
};

static void put(pz_tensor_info *out, int *n, const pz_gpt2_params *p, const char *name,
                float *data, int d0, int d1, int conv1d, int decay) {
    if (out) {
        pz_tensor_info *t = &out[*n];
        memset(t, 0, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", name);
        t->data = data;
        t->offset = (size_t)(data - p->mem);
        t->ndim = d1 > 0 ? 2 : 1;
        t->shape[0] = d0;
        t->shape[1] = d1 > 0 ? d1 : 0;
        t->numel = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
        t->conv1d = conv1d;
        t->decay = decay;
    }
    (*n)++;
}

int pz_gpt2_params_tensors(const pz_gpt2_params *p, pz_tensor_info *out) {
    const pz_gpt2_config *c = &p->cfg;
    int C = c->channels, n = 0;
    if (p->wte) put(out, &n, p, "wte.weight", p->wte, c->padded_vocab_size, C, 0, 1);
    if (p->wpe) put(out, &n, p, "wpe.weight", p->wpe, c->max_seq_len, C, 0, 1);
    for (int i = 0; i < p->range.l1 - p->range.l0; i++) {
        const pz_block_params *b = &p->blocks[i];
        float *data[PZ_BLOCK_NTENSORS] = {b->ln1w, b->ln1b, b->qkvw, b->qkvb, b->attprojw, b->attprojb,
                                          b->ln2w, b->ln2b, b->fcw, b->fcb, b->fcprojw, b->fcprojb};
        int rows[PZ_BLOCK_NTENSORS] = {C, C, 3 * C, 3 * C, C, C, C, C, 4 * C, 4 * C, C, C};
        int cols[PZ_BLOCK_NTENSORS] = {0, 0, C, 0, C, 0, 0, 0, C, 0, 4 * C, 0};
        for (int t = 0; t < PZ_BLOCK_NTENSORS; t++) {
            char name[64];
            snprintf(name, sizeof name, "h.%d.%s", p->range.l0 + i, block_names[t].suffix);
            put(out, &n, p, name, data[t], rows[t], cols[t], block_names[t].conv1d, block_names[t].decay);
        }
    }
    if (p->lnfw) {
        put(out, &n, p, "ln_f.weight", p->lnfw, C, 0, 0, 0);
        put(out, &n, p, "ln_f.bias", p->lnfb, C, 0, 0, 0);
    }
    return n;
}

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 1099511628211ull; }
    return h;
}

void pz_gpt2_params_init(pz_gpt2_params *p, uint64_t seed) {
    int n = pz_gpt2_params_tensors(p, NULL);
    pz_tensor_info *ts = xcalloc((size_t)n, sizeof *ts);
    pz_gpt2_params_tensors(p, ts);
    float resid_std = 0.02f / sqrtf(2.0f * (float)p->cfg.num_layers);
    for (int i = 0; i < n; i++) {
        pz_tensor_info *t = &ts[i];
        const char *nm = t->name;
        size_t len = strlen(nm);
        int is_bias = len > 5 && strcmp(nm + len - 5, ".bias") == 0;
        int is_ln = strstr(nm, "ln_") != NULL;
        if (is_ln && !is_bias) { for (size_t k = 0; k < t->numel; k++) t->data[k] = 1.0f; continue; }
        if (is_bias) { memset(t->data, 0, t->numel * sizeof(float)); continue; }
        float std = (strstr(nm, "c_proj.weight") != NULL) ? resid_std : 0.02f;
        pz_rng r;
        pz_rng_seed(&r, seed ^ name_hash(nm));
        size_t rows_used = t->numel;
        if (strcmp(nm, "wte.weight") == 0) rows_used = (size_t)p->cfg.vocab_size * (size_t)t->shape[1];
        for (size_t k = 0; k < rows_used; k++) t->data[k] = std * pz_rng_normal(&r);
        for (size_t k = rows_used; k < t->numel; k++) t->data[k] = 0.0f; /* padded rows */
    }
    free(ts);
}

float *pz_block_params_tensor(const pz_block_params *b, int which) {
    float *const ptrs[PZ_BLOCK_NTENSORS] = {b->ln1w, b->ln1b, b->qkvw, b->qkvb, b->attprojw, b->attprojb,
                                            b->ln2w, b->ln2b, b->fcw, b->fcb, b->fcprojw, b->fcprojb};
    return ptrs[which];
}
