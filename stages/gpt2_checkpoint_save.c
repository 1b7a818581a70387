/* gpt2_checkpoint_save.c: writes a stage's parameters as safetensors (HF
 * names and layouts, any stage) or as an llm.c model file (whole models
 * only), see gpt2_checkpoint.h; loading is gpt2_checkpoint.c. Both go
 * through an atomic file: a failed save leaves the old file as it was. */
#include "stages/gpt2_checkpoint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "base/half.h"
#include "base/io/file.h"
#include "base/mem.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint files are little-endian; this code writes them from memory"
#endif

static int is_whole_model(const pz_gpt2_params *p) {
    return p->range.l0 == 0 && p->range.l1 == p->cfg.num_layers && p->range.has_embed && p->range.has_head;
}

pz_status pz_ckpt_save_safetensors(const char *path, const pz_gpt2_params *p) {
    const pz_gpt2_config *c = &p->cfg;
    int n = pz_gpt2_params_tensors(p, NULL);
    pz_tensor_info *ts = xcalloc((size_t)n, sizeof *ts);
    pz_st_write_tensor *ws = xcalloc((size_t)n, sizeof *ws);
    pz_gpt2_params_tensors(p, ts);
    for (int i = 0; i < n; i++) {
        pz_tensor_info *t = &ts[i];
        pz_st_write_tensor *w = &ws[i];
        w->name = t->name;
        w->dtype = PZ_ST_F32;
        w->data = t->data;
        w->ndim = t->ndim;
        w->shape[0] = (uint64_t)t->shape[0];
        w->shape[1] = (uint64_t)t->shape[1];
        if (strcmp(t->name, "wte.weight") == 0) {
            w->shape[0] = (uint64_t)c->vocab_size; /* HF stores wte unpadded: the first V rows */
        } else if (t->conv1d) {
            w->shape[0] = (uint64_t)t->shape[1]; /* (in, out) */
            w->shape[1] = (uint64_t)t->shape[0];
            w->transposed = 1;
        }
    }
    char val[7][24];
    pz_st_meta meta[8];
    int nm = 0;
    meta[nm++] = (pz_st_meta){"format", "pt"};
    const char *keys[6] = {"n_head", "n_ctx", "vocab_size", "padded_vocab_size", "n_layer", "n_embd"};
    int vals[6] = {c->num_heads, c->max_seq_len, c->vocab_size, c->padded_vocab_size, c->num_layers, c->channels};
    for (int i = 0; i < 6; i++) {
        snprintf(val[i], sizeof val[i], "%d", vals[i]);
        meta[nm++] = (pz_st_meta){keys[i], val[i]};
    }
    if (!is_whole_model(p)) {
        snprintf(val[6], sizeof val[6], "%d-%d", p->range.l0, p->range.l1);
        meta[nm++] = (pz_st_meta){"block_range", val[6]};
    }
    pz_status st = pz_st_write(path, ws, n, meta, nm);
    free(ws);
    free(ts);
    return st;
}

static pz_status write_bytes(pz_atomic_file *af, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, af->f) != n)
        return pz_fail(PZ_ERR_IO, "%s: write failed: %s", af->tmp, strerror(errno));
    return PZ_OK;
}

/* x (n) as fp32 (version 3) or bf16 (version 5). */
static pz_status write_floats(pz_atomic_file *af, const float *x, size_t n, int version) {
    if (version == 3) return write_bytes(af, x, n * sizeof *x);
    enum { CHUNK = 1 << 16 };
    uint16_t *tmp = xmalloc(CHUNK * sizeof *tmp);
    pz_status st = PZ_OK;
    for (size_t i = 0; i < n && !st; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        for (size_t j = 0; j < k; j++) tmp[j] = pz_f32_to_bf16(x[i + j]);
        st = write_bytes(af, tmp, k * sizeof *tmp);
    }
    free(tmp);
    return st;
}

pz_status pz_ckpt_save_llmc(const char *path, const pz_gpt2_params *p, int version) {
    const pz_gpt2_config *c = &p->cfg;
    if (version != 3 && version != 5)
        return pz_fail(PZ_ERR_ARG, "%s: llm.c model version %d cannot be written (3 = fp32, 5 = bf16)",
                       path, version);
    if (!is_whole_model(p))
        return pz_fail(PZ_ERR_ARG, "%s: the llm.c format holds a whole model; this stage holds blocks "
                       "[%d, %d)%s%s of %d (save stages as safetensors)", path, p->range.l0, p->range.l1,
                       p->range.has_embed ? " + embeddings" : "", p->range.has_head ? " + head" : "",
                       c->num_layers);
    int32_t h[PZ_LLMC_HEADER_INTS] = {PZ_LLMC_MODEL_MAGIC, version, c->max_seq_len, c->vocab_size,
                                   c->num_layers, c->num_heads, c->channels, c->padded_vocab_size};
    pz_atomic_file af;
    pz_status st = pz_atomic_open(&af, path);
    if (st) return st;
    size_t C = (size_t)c->channels;
    st = write_bytes(&af, h, sizeof h);
    if (!st) st = write_floats(&af, p->wte, (size_t)c->padded_vocab_size * C, version);
    if (!st) st = write_floats(&af, p->wpe, (size_t)c->max_seq_len * C, version);
    /* our memory is block-major; llm.c stacks each tensor over the layers */
    for (int t = 0; !st && t < PZ_BLOCK_NTENSORS; t++)
        for (int l = 0; !st && l < c->num_layers; l++)
            st = write_floats(&af, pz_block_params_tensor(&p->blocks[l], t), pz_block_tensor_numel(c, t), version);
    if (!st) st = write_floats(&af, p->lnfw, C, version);
    if (!st) st = write_floats(&af, p->lnfb, C, version);
    if (st) { pz_atomic_abort(&af); return st; }
    return pz_atomic_commit(&af);
}

pz_status pz_ckpt_save(const char *path, const pz_gpt2_params *p, pz_ckpt_format fmt) {
    if (fmt == PZ_CKPT_AUTO) {
        size_t n = strlen(path);
        fmt = n >= 4 && strcmp(path + n - 4, ".bin") == 0 ? PZ_CKPT_LLMC : PZ_CKPT_SAFETENSORS;
    }
    return fmt == PZ_CKPT_LLMC ? pz_ckpt_save_llmc(path, p, 3) : pz_ckpt_save_safetensors(path, p);
}
