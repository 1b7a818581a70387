/* gpt2_checkpoint.c: see gpt2_checkpoint.h. Format detection, config
 * derivation and loading; saving is gpt2_checkpoint_save.c.
 *
 * Both loaders fill only the tensors of the stage they are given and read
 * only those bytes (safetensors through a read-only mmap, llm.c through
 * pread), so every pipeline stage can load its part of one big file. */
#include "stages/gpt2_checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>

#include "base/half.h"
#include "base/io/file.h"
#include "base/mem.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint files are little-endian; this code reads and writes them in place"
#endif

#define LLMC_HEADER_BYTES (PZ_LLMC_HEADER_INTS * 4)
#define MAX_LAYERS 1024 /* pz_gpt2_config_validate's bound; keeps layer indices small */

static int loadable_dtype(pz_st_dtype d) {
    return d == PZ_ST_F32 || d == PZ_ST_BF16 || d == PZ_ST_F16;
}

/* dst (n) <- n elements of dtype dt at src (unaligned little-endian bytes). */
static void decode(float *dst, const uint8_t *src, size_t n, pz_st_dtype dt) {
    if (dt == PZ_ST_F32) { memcpy(dst, src, n * 4); return; }
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        dst[i] = dt == PZ_ST_BF16 ? pz_bf16_to_f32(h) : pz_f16_to_f32(h);
    }
}

/* dst (R, K) <- transpose of src (K, R): HF Conv1D (in, out) to Linear
 * (out, in). 32x32 tiles keep both sides in cache. */
static void decode_transposed(float *dst, const uint8_t *src, size_t K, size_t R, pz_st_dtype dt) {
    size_t esz = (size_t)pz_st_dtype_bits(dt) / 8;
    float tmp[32];
    for (size_t k0 = 0; k0 < K; k0 += 32) {
        size_t kn = K - k0 < 32 ? K - k0 : 32;
        for (size_t r0 = 0; r0 < R; r0 += 32) {
            size_t rn = R - r0 < 32 ? R - r0 : 32;
            for (size_t k = k0; k < k0 + kn; k++) {
                decode(tmp, src + (k * R + r0) * esz, rn, dt);
                for (size_t j = 0; j < rn; j++) dst[(r0 + j) * K + k] = tmp[j];
            }
        }
    }
}

/* --------------------------------------------------------------- names */

/* HF names of the block tensors, in pz_block_tensor order. */
static const char *const block_suffix[PZ_BLOCK_NTENSORS] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
    "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias",
};

/* HF shape of each block tensor in units of C: {ndim, d0/C, d1/C}. The 2-D
 * ones are exactly the Conv1D weights, stored (in, out). */
static const int block_hf_shape[PZ_BLOCK_NTENSORS][3] = {
    {1, 1, 0}, {1, 1, 0}, {2, 1, 3}, {1, 3, 0}, {2, 1, 1}, {1, 1, 0},
    {1, 1, 0}, {1, 1, 0}, {2, 1, 4}, {1, 4, 0}, {2, 4, 1}, {1, 1, 0},
};

enum { N_WTE, N_WPE, N_LNFW, N_LNFB, N_LMHEAD, N_BLOCK, N_BUFFER, N_UNKNOWN };

/* Kind of a tensor name; for N_BLOCK / N_BUFFER *layer, for N_BLOCK *which. */
static int classify(const char *name, int *layer, int *which) {
    if (strcmp(name, "lm_head.weight") == 0) return N_LMHEAD;
    if (strncmp(name, "transformer.", 12) == 0) name += 12; /* transformers' state_dict() */
    if (strcmp(name, "wte.weight") == 0) return N_WTE;
    if (strcmp(name, "wpe.weight") == 0) return N_WPE;
    if (strcmp(name, "ln_f.weight") == 0) return N_LNFW;
    if (strcmp(name, "ln_f.bias") == 0) return N_LNFB;
    if (strncmp(name, "h.", 2) != 0) return N_UNKNOWN;
    const char *s = name + 2;
    int v = 0, nd = 0;
    while (*s >= '0' && *s <= '9' && nd < 5) { v = v * 10 + (*s - '0'); s++; nd++; }
    if (nd == 0 || (nd > 1 && name[2] == '0') || *s != '.' || v >= MAX_LAYERS) return N_UNKNOWN;
    s++;
    *layer = v;
    for (int t = 0; t < PZ_BLOCK_NTENSORS; t++)
        if (strcmp(s, block_suffix[t]) == 0) { *which = t; return N_BLOCK; }
    /* the causal-mask buffers some exports keep; not parameters */
    if (strcmp(s, "attn.bias") == 0 || strcmp(s, "attn.masked_bias") == 0) return N_BUFFER;
    return N_UNKNOWN;
}

/* The GPT-2 tensors of a safetensors file, by role. */
typedef struct {
    const pz_st_tensor *wte, *wpe, *lnfw, *lnfb, *lm_head;
    const pz_st_tensor **blk;  /* (nslots, PZ_BLOCK_NTENSORS), NULL where absent */
    unsigned char *present;    /* (nslots) some tensor or buffer of h.i is there */
    int nslots;                /* 1 + highest h.i index, 0 if none */
} st_index;

static void index_free(st_index *ix) {
    free(ix->blk);
    free(ix->present);
    memset(ix, 0, sizeof *ix);
}

static pz_status index_build(st_index *ix, const pz_st_file *f, const char *what) {
    memset(ix, 0, sizeof *ix);
    int layer = 0, which = 0;
    for (int i = 0; i < f->ntensors; i++) {
        int k = classify(f->tensors[i].name, &layer, &which);
        if (k == N_UNKNOWN)
            return pz_fail(PZ_ERR_FORMAT, "%s: unexpected tensor '%s' (not a GPT-2 parameter)",
                           what, f->tensors[i].name);
        if ((k == N_BLOCK || k == N_BUFFER) && layer + 1 > ix->nslots) ix->nslots = layer + 1;
    }
    ix->blk = xcalloc((size_t)(ix->nslots ? ix->nslots : 1) * PZ_BLOCK_NTENSORS, sizeof *ix->blk);
    ix->present = xcalloc((size_t)(ix->nslots ? ix->nslots : 1), 1);
    for (int i = 0; i < f->ntensors; i++) {
        const pz_st_tensor *t = &f->tensors[i];
        const pz_st_tensor **slot = NULL;
        switch (classify(t->name, &layer, &which)) {
        case N_WTE: slot = &ix->wte; break;
        case N_WPE: slot = &ix->wpe; break;
        case N_LNFW: slot = &ix->lnfw; break;
        case N_LNFB: slot = &ix->lnfb; break;
        case N_LMHEAD: slot = &ix->lm_head; break;
        case N_BLOCK: slot = &ix->blk[layer * PZ_BLOCK_NTENSORS + which]; ix->present[layer] = 1; break;
        case N_BUFFER: ix->present[layer] = 1; continue;
        }
        if (*slot) {
            pz_status st = pz_fail(PZ_ERR_FORMAT, "%s: tensors '%s' and '%s' are the same parameter "
                                   "(with and without the 'transformer.' prefix)", what, (*slot)->name, t->name);
            index_free(ix);
            return st;
        }
        *slot = t;
    }
    return PZ_OK;
}

/* "[a, b, ...]" for messages. */
static const char *shape_str(char *buf, size_t n, int ndim, const uint64_t *dims) {
    size_t at = 0;
    at += (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && at < n; d++)
        at += (size_t)snprintf(buf + at, n - at, d ? ", %" PRIu64 : "%" PRIu64, dims[d]);
    if (at < n) snprintf(buf + at, n - at, "]");
    return buf;
}

/* Checks t's dtype is loadable and its shape is (d0) or (d0, d1). */
static pz_status check_tensor(const pz_st_tensor *t, const char *what, int ndim, int d0, int d1) {
    char got[128], want[64];
    uint64_t w[2] = {(uint64_t)d0, (uint64_t)d1};
    if (!loadable_dtype(t->dtype))
        return pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s' has dtype %s; supported: F32, BF16, F16",
                       what, t->name, pz_st_dtype_name(t->dtype));
    if (t->ndim != ndim || t->shape[0] != w[0] || (ndim == 2 && t->shape[1] != w[1]))
        return pz_fail(PZ_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %s", what, t->name,
                       shape_str(got, sizeof got, t->ndim, t->shape), shape_str(want, sizeof want, ndim, w));
    return PZ_OK;
}

/* Every GPT-2 tensor present in the file against cfg. lm_head must look
 * like wte (its contents are compared by the loader). */
static pz_status check_shapes(const st_index *ix, const pz_gpt2_config *c, const char *what) {
    pz_status st;
    int C = c->channels;
    if (ix->wte && (st = check_tensor(ix->wte, what, 2, c->vocab_size, C))) return st;
    if (ix->wpe && (st = check_tensor(ix->wpe, what, 2, c->max_seq_len, C))) return st;
    if (ix->lnfw && (st = check_tensor(ix->lnfw, what, 1, C, 0))) return st;
    if (ix->lnfb && (st = check_tensor(ix->lnfb, what, 1, C, 0))) return st;
    if (ix->lm_head) {
        if (!ix->wte || ix->lm_head->dtype != ix->wte->dtype || ix->lm_head->ndim != 2
            || ix->lm_head->shape[0] != ix->wte->shape[0] || ix->lm_head->shape[1] != ix->wte->shape[1])
            return pz_fail(PZ_ERR_FORMAT, "%s: lm_head.weight is not a copy of wte.weight: untied output "
                           "heads are not supported", what);
    }
    for (int l = 0; l < ix->nslots; l++)
        for (int t = 0; t < PZ_BLOCK_NTENSORS; t++) {
            const pz_st_tensor *x = ix->blk[l * PZ_BLOCK_NTENSORS + t];
            const int *s = block_hf_shape[t];
            if (x && (st = check_tensor(x, what, s[0], s[1] * C, s[2] * C))) return st;
        }
    return PZ_OK;
}

/* Optional non-negative integer metadata; *v unchanged if absent. */
static pz_status meta_int(const pz_st_file *f, const char *what, const char *key, int *v, int *present) {
    const char *s = pz_st_meta_get(f, key);
    *present = s != NULL;
    if (!s) return PZ_OK;
    long x = 0;
    int nd = 0;
    for (; *s >= '0' && *s <= '9' && nd < 10; s++, nd++) x = x * 10 + (*s - '0');
    if (nd == 0 || *s || x > INT_MAX)
        return pz_fail(PZ_ERR_FORMAT, "%s: __metadata__ \"%s\": \"%s\" is not a non-negative integer",
                       what, key, pz_st_meta_get(f, key));
    *v = (int)x;
    return PZ_OK;
}

/* Reads a dimension into an int, or fails naming the tensor. */
static pz_status dim_int(const pz_st_tensor *t, int d, int ndim, const char *what, int *out) {
    char got[128];
    if (t->ndim != ndim)
        return pz_fail(PZ_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %d dimensions", what, t->name,
                       shape_str(got, sizeof got, t->ndim, t->shape), ndim);
    if (t->shape[d] > INT_MAX)
        return pz_fail(PZ_ERR_SHAPE, "%s: tensor '%s': dimension %" PRIu64 " is too large",
                       what, t->name, t->shape[d]);
    *out = (int)t->shape[d];
    return PZ_OK;
}

/* Metadata key `key`, when present, must agree with the value `v` read from `from`. */
static pz_status agree(const char *what, const char *key, int present, int m, int v, const char *from) {
    if (present && v >= 0 && m != v)
        return pz_fail(PZ_ERR_FORMAT, "%s: __metadata__ %s=%d disagrees with %s (%d)", what, key, m, from, v);
    return PZ_OK;
}

/* The published GPT-2 widths, whose head size is 64 (124M, 355M, 774M, 1.5B):
 * the only case where a head count missing from every source may be assumed. */
static int published_width(int C) { return C == 768 || C == 1024 || C == 1280 || C == 1600; }

static pz_status config_from_index(const pz_st_file *f, const st_index *ix, const char *what, int heads,
                                   const pz_hf_config *hc, pz_gpt2_config *cfg) {
    pz_status st;
    enum { M_HEAD, M_CTX, M_VOCAB, M_PVOCAB, M_LAYER, M_EMBD, M_N };
    static const char *const keys[M_N] = {"n_head", "n_ctx", "vocab_size", "padded_vocab_size",
                                          "n_layer", "n_embd"};
    int m[M_N] = {0}, has[M_N];
    for (int i = 0; i < M_N; i++)
        if ((st = meta_int(f, what, keys[i], &m[i], &has[i]))) return st;

    /* block_range "a-b": a stage file holding blocks [a, b) */
    const char *br = pz_st_meta_get(f, "block_range");
    int a = 0, b = 0;
    if (br) {
        const char *s = br;
        int nd = 0;
        for (; *s >= '0' && *s <= '9' && nd < 5; s++, nd++) a = a * 10 + (*s - '0');
        int ok = nd > 0 && *s == '-';
        nd = 0;
        if (ok) for (s++; *s >= '0' && *s <= '9' && nd < 5; s++, nd++) b = b * 10 + (*s - '0');
        if (!ok || nd == 0 || *s || a > b || b > MAX_LAYERS)
            return pz_fail(PZ_ERR_FORMAT, "%s: __metadata__ \"block_range\": \"%s\" is not \"l0-l1\" with "
                           "l0 <= l1", what, br);
    }

    int V = -1, C = -1, T = -1;
    if (ix->wte) {
        if ((st = dim_int(ix->wte, 0, 2, what, &V)) || (st = dim_int(ix->wte, 1, 2, what, &C))) return st;
    }
    if (ix->wpe) {
        if ((st = dim_int(ix->wpe, 0, 2, what, &T))) return st;
        if (C < 0 && (st = dim_int(ix->wpe, 1, 2, what, &C))) return st;
    }
    if (C < 0 && ix->lnfw && (st = dim_int(ix->lnfw, 0, 1, what, &C))) return st;
    for (int l = 0; C < 0 && l < ix->nslots; l++) {
        const pz_st_tensor *ln = ix->blk[l * PZ_BLOCK_NTENSORS + PZ_LN1W];
        if (ln && (st = dim_int(ln, 0, 1, what, &C))) return st;
    }
    if ((st = agree(what, "n_embd", has[M_EMBD], m[M_EMBD], C, "the tensor shapes"))) return st;
    if ((st = agree(what, "vocab_size", has[M_VOCAB], m[M_VOCAB], V, "wte.weight"))) return st;
    if ((st = agree(what, "n_ctx", has[M_CTX], m[M_CTX], T, "wpe.weight"))) return st;
    if (C < 0 && has[M_EMBD]) C = m[M_EMBD];
    if (V < 0 && has[M_VOCAB]) V = m[M_VOCAB];
    if (T < 0 && has[M_CTX]) T = m[M_CTX];
    if (C < 0) return pz_fail(PZ_ERR_FORMAT, "%s: cannot tell the channel count: no wte.weight, wpe.weight "
                              "or LayerNorm, and no __metadata__ n_embd", what);
    if (V < 0) return pz_fail(PZ_ERR_FORMAT, "%s: cannot tell the vocabulary size: no wte.weight and no "
                              "__metadata__ vocab_size", what);
    if (T < 0) return pz_fail(PZ_ERR_FORMAT, "%s: cannot tell the context length: no wpe.weight and no "
                              "__metadata__ n_ctx", what);

    /* Layers: a whole-model file holds h.0 .. h.L-1; a stage file exactly its range. */
    int lo = br ? a : 0, hi;
    if (br) {
        if (!has[M_LAYER])
            return pz_fail(PZ_ERR_FORMAT, "%s: a stage file (block_range %s) needs __metadata__ n_layer", what, br);
        hi = b;
    } else {
        hi = ix->nslots;
        if (hi == 0) return pz_fail(PZ_ERR_FORMAT, "%s: no transformer blocks (h.N.*)", what);
    }
    int L = has[M_LAYER] ? m[M_LAYER] : hi;
    if (hi > L)
        return pz_fail(PZ_ERR_FORMAT, "%s: holds blocks up to h.%d but __metadata__ n_layer is %d",
                       what, hi - 1, L);
    for (int l = 0; l < ix->nslots; l++)
        if (ix->present[l] && (l < lo || l >= hi))
            return pz_fail(PZ_ERR_FORMAT, "%s: block h.%d is outside the file's block range [%d, %d)",
                           what, l, lo, hi);
    for (int l = lo; l < hi; l++) {
        if (l >= ix->nslots || !ix->present[l])
            return pz_fail(PZ_ERR_FORMAT, "%s: block h.%d is missing (blocks must be %d..%d with no gap)",
                           what, l, lo, hi - 1);
        for (int t = 0; t < PZ_BLOCK_NTENSORS; t++)
            if (!ix->blk[l * PZ_BLOCK_NTENSORS + t])
                return pz_fail(PZ_ERR_FORMAT, "%s: block h.%d is incomplete: missing tensor 'h.%d.%s'",
                               what, l, l, block_suffix[t]);
    }
    if (!br) {
        const char *missing = !ix->wte ? "wte.weight" : !ix->wpe ? "wpe.weight"
                            : !ix->lnfw ? "ln_f.weight" : !ix->lnfb ? "ln_f.bias" : NULL;
        if (missing) return pz_fail(PZ_ERR_FORMAT, "%s: missing tensor '%s'", what, missing);
    }

    /* The head count is not in any tensor shape: it comes from __metadata__,
     * config.json or --heads, which must agree. Guessing C/64 for any other
     * width loaded a 4-head C=64 model as 1 head and evaluated it 1.2e-3 off
     * PyTorch without a word (issue 10). */
    pz_gpt2_config c = {T, V, has[M_PVOCAB] ? m[M_PVOCAB] : pz_pad_vocab(V), L, has[M_HEAD] ? m[M_HEAD] : 0, C};
    if (hc && (st = pz_hf_config_check(hc, what, &c))) return st;
    if (heads > 0) {
        if (c.num_heads && c.num_heads != heads)
            return pz_fail(PZ_ERR_ARG, "%s: --heads %d, but the model's %s says n_head %d", what, heads,
                           hc && hc->n_head > 0 ? "config.json" : "__metadata__", c.num_heads);
        c.num_heads = heads;
    }
    if (!c.num_heads) {
        if (!published_width(C))
            return pz_fail(PZ_ERR_FORMAT, "%s: the head count cannot be told from the tensor shapes (n_embd %d): "
                           "give --heads N, or put the model's config.json (with n_head) beside the weights", what, C);
        c.num_heads = C / 64;
        fprintf(stderr, "pipezip: %s: no n_head in __metadata__, config.json or --heads: assuming GPT-2's head "
                "size 64 for n_embd %d, so %d heads\n", what, C, c.num_heads);
    }
    if (pz_gpt2_config_validate(&c) != PZ_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", pz_last_error());
        return pz_fail(PZ_ERR_FORMAT, "%s: config from the file is invalid: %s", what, msg);
    }
    if ((st = check_shapes(ix, &c, what))) return st;
    *cfg = c;
    return PZ_OK;
}

pz_status pz_ckpt_config_from_safetensors(const pz_st_file *f, const char *what, int heads,
                                          const pz_hf_config *hc, pz_gpt2_config *cfg) {
    st_index ix;
    pz_status st = index_build(&ix, f, what);
    if (st) return st;
    st = config_from_index(f, &ix, what, heads, hc, cfg);
    index_free(&ix);
    return st;
}

/* ---------------------------------------------------------------- llm.c */

static pz_status pread_all(int fd, void *buf, size_t n, uint64_t off, const char *path) {
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = pread(fd, p, n, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return pz_fail(PZ_ERR_IO, "%s: read failed at byte %" PRIu64 ": %s", path, off, strerror(errno));
        if (got == 0)
            return pz_fail(PZ_ERR_IO, "%s: unexpected end of file at byte %" PRIu64 " (truncated?)", path, off);
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return PZ_OK;
}

/* Validates an llm.c model header (h, 256 int32) against the file size
 * and returns its config and version. */
static pz_status llmc_header(const char *path, const int32_t *h, uint64_t fsize,
                             pz_gpt2_config *cfg, int *version) {
    if (h[0] != PZ_LLMC_MODEL_MAGIC)
        return pz_fail(PZ_ERR_FORMAT, "%s: bad magic %" PRId32 " in header slot 0, expected %d (llm.c model)",
                       path, h[0], PZ_LLMC_MODEL_MAGIC);
    switch (h[1]) {
    case 3: case 5: break;
    case 1: case 2: case 4: {
        static const char *const why[] = {"", "fp32 with an unpadded vocab", "bf16 with an unpadded vocab",
                                          "", "bf16 with older layernorm handling"};
        return pz_fail(PZ_ERR_FORMAT, "%s: llm.c model version %" PRId32 " (%s) is retired; re-export it "
                       "with current llm.c (version 3 = fp32 or 5 = bf16, padded vocab)", path, h[1], why[h[1]]);
    }
    default:
        return pz_fail(PZ_ERR_FORMAT, "%s: unknown llm.c model version %" PRId32 " in header slot 1 "
                       "(supported: 3 = fp32, 5 = bf16)", path, h[1]);
    }
    pz_gpt2_config c = {h[2], h[3], h[7], h[4], h[5], h[6]};
    if (pz_gpt2_config_validate(&c) != PZ_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", pz_last_error());
        return pz_fail(PZ_ERR_FORMAT, "%s: llm.c header slots 2..7: %s", path, msg);
    }
    uint64_t esz = h[1] == 3 ? 4 : 2;
    uint64_t want = LLMC_HEADER_BYTES + (uint64_t)pz_gpt2_numel(&c) * esz;
    if (fsize < want)
        return pz_fail(PZ_ERR_IO, "%s: truncated: the header (V=%d Vp=%d L=%d C=%d maxT=%d, %s) needs %" PRIu64
                       " bytes, the file has %" PRIu64, path, c.vocab_size, c.padded_vocab_size, c.num_layers,
                       c.channels, c.max_seq_len, esz == 4 ? "fp32" : "bf16", want, fsize);
    if (fsize > want)
        return pz_fail(PZ_ERR_FORMAT, "%s: %" PRIu64 " unexpected bytes after the %" PRIu64 " the header "
                       "describes", path, fsize - want, want);
    *cfg = c;
    *version = h[1];
    return PZ_OK;
}

/* Opens an llm.c model file and validates its header; *fd stays open on success. */
static pz_status llmc_open(const char *path, int *fd, pz_gpt2_config *cfg, int *version) {
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0) return pz_fail(PZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    int32_t h[PZ_LLMC_HEADER_INTS];
    pz_status st = PZ_OK;
    if (fstat(*fd, &sb) != 0) st = pz_fail(PZ_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if ((uint64_t)sb.st_size < LLMC_HEADER_BYTES)
        st = pz_fail(PZ_ERR_IO, "%s: truncated: %" PRIu64 " bytes, an llm.c header alone is %d",
                     path, (uint64_t)sb.st_size, LLMC_HEADER_BYTES);
    else if (!(st = pread_all(*fd, h, LLMC_HEADER_BYTES, 0, path)))
        st = llmc_header(path, h, (uint64_t)sb.st_size, cfg, version);
    if (st) { close(*fd); *fd = -1; }
    return st;
}

/* dst (n) <- n elements starting at element `elem` of the payload. */
static pz_status llmc_read(int fd, const char *path, int version, uint64_t elem, float *dst, size_t n) {
    if (version == 3) return pread_all(fd, dst, n * 4, LLMC_HEADER_BYTES + elem * 4, path);
    enum { CHUNK = 1 << 16 };
    uint16_t *tmp = xmalloc(CHUNK * sizeof *tmp);
    pz_status st = PZ_OK;
    for (size_t i = 0; i < n && !st; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        st = pread_all(fd, tmp, k * 2, LLMC_HEADER_BYTES + (elem + i) * 2, path);
        for (size_t j = 0; !st && j < k; j++) dst[i + j] = pz_bf16_to_f32(tmp[j]);
    }
    free(tmp);
    return st;
}

static pz_status config_mismatch(const char *path, const pz_gpt2_config *f, const pz_gpt2_config *m) {
    const char *names[6] = {"max_seq_len", "vocab_size", "padded_vocab_size", "num_layers", "num_heads",
                            "channels"};
    int fv[6] = {f->max_seq_len, f->vocab_size, f->padded_vocab_size, f->num_layers, f->num_heads, f->channels};
    int mv[6] = {m->max_seq_len, m->vocab_size, m->padded_vocab_size, m->num_layers, m->num_heads, m->channels};
    for (int i = 0; i < 6; i++)
        if (fv[i] != mv[i])
            return pz_fail(PZ_ERR_SHAPE, "%s: the file has %s=%d, the model %d", path, names[i], fv[i], mv[i]);
    return PZ_OK;
}

/* Element offsets of the llm.c payload: tensor-major, every per-layer
 * tensor stacked over the L layers. */
typedef struct { uint64_t wte, wpe, blk[PZ_BLOCK_NTENSORS], lnfw, lnfb; } llmc_offsets;

static llmc_offsets llmc_layout(const pz_gpt2_config *c) {
    llmc_offsets o;
    uint64_t C = (uint64_t)c->channels, at = 0;
    o.wte = at; at += (uint64_t)c->padded_vocab_size * C;
    o.wpe = at; at += (uint64_t)c->max_seq_len * C;
    for (int t = 0; t < PZ_BLOCK_NTENSORS; t++) {
        o.blk[t] = at;
        at += (uint64_t)c->num_layers * pz_block_tensor_numel(c, t);
    }
    o.lnfw = at; at += C;
    o.lnfb = at;
    return o;
}

static pz_status load_llmc(const char *path, pz_gpt2_params *p) {
    int fd, version;
    pz_gpt2_config fc;
    pz_status st = llmc_open(path, &fd, &fc, &version);
    if (st) return st;
    st = config_mismatch(path, &fc, &p->cfg);
    llmc_offsets o = llmc_layout(&fc);
    size_t C = (size_t)fc.channels;
    if (!st && p->wte) st = llmc_read(fd, path, version, o.wte, p->wte, (size_t)fc.padded_vocab_size * C);
    if (!st && p->wpe) st = llmc_read(fd, path, version, o.wpe, p->wpe, (size_t)fc.max_seq_len * C);
    for (int i = 0; !st && i < p->range.l1 - p->range.l0; i++) {
        uint64_t l = (uint64_t)(p->range.l0 + i);
        for (int t = 0; !st && t < PZ_BLOCK_NTENSORS; t++) {
            size_t n = pz_block_tensor_numel(&fc, t);
            st = llmc_read(fd, path, version, o.blk[t] + l * n, pz_block_params_tensor(&p->blocks[i], t), n);
        }
    }
    if (!st && p->lnfw) st = llmc_read(fd, path, version, o.lnfw, p->lnfw, C);
    if (!st && p->lnfb) st = llmc_read(fd, path, version, o.lnfb, p->lnfb, C);
    close(fd);
    return st;
}

/* ------------------------------------------------------------ detection */

/* llm.c model magic in the first int32, else safetensors; a few obvious
 * wrong files (other llm.c files, implausible header lengths) get their
 * own message instead of a safetensors parse error. */
static pz_status detect(const char *path, pz_ckpt_format *fmt) {
    /* before opening: a FIFO would wait for a writer forever */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) return pz_fail(PZ_ERR_IO, "%s: not a regular file", path);
    FILE *f = fopen(path, "rb");
    if (!f) return pz_fail(PZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t head[8] = {0};
    size_t got = fread(head, 1, 8, f);
    int err = ferror(f);
    fclose(f);
    if (err) return pz_fail(PZ_ERR_IO, "%s: read error", path);
    if (got < 4)
        return pz_fail(PZ_ERR_FORMAT, "%s: %zu bytes is too short to be a model checkpoint", path, got);
    int32_t first;
    uint64_t n;
    memcpy(&first, head, 4);
    memcpy(&n, head, 8);
    if (first == PZ_LLMC_MODEL_MAGIC) { *fmt = PZ_CKPT_LLMC; return PZ_OK; }
    static const struct { int32_t magic; const char *what; } other[] = {
        {20240327, "a debug state"}, {20240328, "a tokenizer"}, {20240520, "a token shard"},
        {20240522, "an eval set"}, {20240527, "a training state"}, {20240801, "a llama-3 token shard"},
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if (first == other[i].magic)
            return pz_fail(PZ_ERR_FORMAT, "%s: magic %d marks %s file from llm.c, not a model (magic %d)",
                           path, first, other[i].what, PZ_LLMC_MODEL_MAGIC);
    if (got == 8 && n > PZ_ST_MAX_HEADER)
        return pz_fail(PZ_ERR_FORMAT, "%s: not a model checkpoint: the first int32 %d is not the llm.c magic "
                       "%d and the first u64 %" PRIu64 " is no safetensors header length", path, first,
                       PZ_LLMC_MODEL_MAGIC, n);
    *fmt = PZ_CKPT_SAFETENSORS;
    return PZ_OK;
}

pz_status pz_ckpt_read_config(const char *path, pz_gpt2_config *cfg, pz_ckpt_format *fmt) {
    return pz_ckpt_read_config_heads(path, 0, cfg, fmt);
}

pz_status pz_ckpt_read_config_heads(const char *path, int heads, pz_gpt2_config *cfg, pz_ckpt_format *fmt) {
    pz_model_files mf;
    pz_st_set set;
    pz_hf_config hc;
    pz_ckpt_format got = PZ_CKPT_SAFETENSORS;
    memset(&set, 0, sizeof set);
    pz_status st = pz_model_files_find(path, &mf);
    if (st) return st;
    if (mf.weights && (st = detect(mf.weights, &got))) goto cleanup;
    if (fmt) *fmt = got;
    if (got == PZ_CKPT_LLMC) {
        int fd, version;
        if ((st = llmc_open(mf.weights, &fd, cfg, &version))) goto cleanup;
        close(fd);
        if (heads > 0 && heads != cfg->num_heads)
            st = pz_fail(PZ_ERR_ARG, "%s: --heads %d, but the llm.c header says %d", path, heads, cfg->num_heads);
        goto cleanup;
    }
    if (mf.config && (st = pz_hf_config_read(mf.config, &hc))) goto cleanup;
    if ((st = pz_st_set_open(&set, &mf))) goto cleanup;
    st = pz_ckpt_config_from_safetensors(&set.view, path, heads, mf.config ? &hc : NULL, cfg);
cleanup:
    pz_st_set_close(&set);
    pz_model_files_free(&mf);
    return st;
}

/* ---------------------------------------------------- safetensors load */

static pz_status load_safetensors(const char *path, const pz_model_files *mf, pz_gpt2_params *p) {
    const pz_gpt2_config *c = &p->cfg;
    pz_st_set set;
    st_index ix;
    pz_status st = pz_st_set_open(&set, mf);
    if (st) return st;
    const pz_st_file f = set.view;
    if ((st = index_build(&ix, &f, path))) { pz_st_set_close(&set); return st; }

    /* metadata that contradicts the model is an error even when the
     * shapes cannot show it (n_head, n_layer); padded_vocab_size is ours
     * to choose since the file stores wte unpadded */
    static const char *const keys[5] = {"n_head", "n_ctx", "vocab_size", "n_layer", "n_embd"};
    int want[5] = {c->num_heads, c->max_seq_len, c->vocab_size, c->num_layers, c->channels};
    for (int i = 0; i < 5 && !st; i++) {
        int v = 0, has = 0;
        if ((st = meta_int(&f, path, keys[i], &v, &has))) break;
        if (has && v != want[i])
            st = pz_fail(PZ_ERR_SHAPE, "%s: __metadata__ %s=%d but the model has %d", path, keys[i], v, want[i]);
    }
    if (!st && ix.nslots > c->num_layers)
        st = pz_fail(PZ_ERR_FORMAT, "%s: unexpected block h.%d: the model has %d layers",
                     path, ix.nslots - 1, c->num_layers);
    if (!st) st = check_shapes(&ix, c, path);
    if (!st && ix.lm_head && p->wte
        && memcmp(ix.lm_head->data, ix.wte->data, (size_t)(ix.wte->end - ix.wte->begin)) != 0)
        st = pz_fail(PZ_ERR_FORMAT, "%s: lm_head.weight differs from wte.weight: untied output heads are "
                     "not supported", path);

    int n = pz_gpt2_params_tensors(p, NULL);
    pz_tensor_info *ts = xcalloc((size_t)n, sizeof *ts);
    pz_gpt2_params_tensors(p, ts);
    for (int i = 0; i < n && !st; i++) {
        pz_tensor_info *t = &ts[i];
        int layer = 0, which = 0;
        const pz_st_tensor *src = NULL;
        switch (classify(t->name, &layer, &which)) {
        case N_WTE: src = ix.wte; break;
        case N_WPE: src = ix.wpe; break;
        case N_LNFW: src = ix.lnfw; break;
        case N_LNFB: src = ix.lnfb; break;
        case N_BLOCK: if (layer < ix.nslots) src = ix.blk[layer * PZ_BLOCK_NTENSORS + which]; break;
        }
        if (!src) { st = pz_fail(PZ_ERR_FORMAT, "%s: missing tensor '%s'", path, t->name); break; }
        /* shapes were checked against cfg above */
        if (t->conv1d) {
            decode_transposed(t->data, src->data, (size_t)t->shape[1], (size_t)t->shape[0], src->dtype);
        } else if (src == ix.wte) {
            size_t have = (size_t)c->vocab_size * (size_t)c->channels;
            decode(t->data, src->data, have, src->dtype);
            memset(t->data + have, 0, (t->numel - have) * sizeof(float)); /* padded rows */
        } else {
            decode(t->data, src->data, t->numel, src->dtype);
        }
    }
    free(ts);
    index_free(&ix);
    pz_st_set_close(&set);
    return st;
}

pz_status pz_ckpt_load(const char *path, pz_gpt2_params *p) {
    const pz_stage_range *r = &p->range;
    if (r->l0 < 0 || r->l0 > r->l1 || r->l1 > p->cfg.num_layers)
        return pz_fail(PZ_ERR_ARG, "%s: bad stage range [%d, %d) for %d layers", path, r->l0, r->l1,
                       p->cfg.num_layers);
    pz_model_files mf;
    pz_ckpt_format fmt = PZ_CKPT_SAFETENSORS;
    pz_status st = pz_model_files_find(path, &mf);
    if (st) return st;
    if (mf.weights) st = detect(mf.weights, &fmt);
    if (!st) st = fmt == PZ_CKPT_LLMC ? load_llmc(mf.weights, p) : load_safetensors(path, &mf, p);
    pz_model_files_free(&mf);
    return st;
}
