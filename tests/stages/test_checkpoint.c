/* test_checkpoint.c: safetensors parser/writer and GPT-2 checkpoint I/O.
 *
 * Round trips in both formats (whole model and pipeline stages), the HF
 * layout of what we write, loading F32/BF16/F16 files written by an
 * independent HF-layout writer in this file, malformed files of every kind
 * (each must fail with the expected status and a message naming the
 * problem), and saves that fail without leaving a file behind.
 * Exits non-zero if any check fails. */
#include "base/half.h"
#include "stages/gpt2_checkpoint.h"
#include "base/io/file.h"
#include "base/mem.h"
#include "base/rng.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/check.h"

/* ------------------------------------------------------------ temp files */

static char tmpdir[64];

/* Path of `name` in the temp dir; the same name always gives the same
 * pointer, so a path stays valid for the whole test. */
static const char *tp(const char *name) {
    static char names[64][64], paths[64][600];
    static int n;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return paths[i];
    if (n == 64) pz_die("tp: too many temp names");
    snprintf(names[n], sizeof names[0], "%s", name);
    snprintf(paths[n], sizeof paths[0], "%s/%s", tmpdir, name);
    return paths[n++];
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* Files in the temp dir whose name contains ".tmp." (left-over atomic temporaries). */
static int count_tmp_leftovers(void) {
    DIR *d = opendir(tmpdir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

static void cleanup_tmpdir(void) {
    DIR *d = opendir(tmpdir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            char p[600];
            snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
            remove(p);
        }
    if (d) closedir(d);
    rmdir(tmpdir);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) pz_die("cannot write %s", path);
}

static uint8_t *read_bytes(const char *path, size_t *n) {
    uint8_t *b;
    if (pz_read_file(path, &b, n) != PZ_OK) pz_die("%s", pz_last_error());
    return b;
}

/* ---------------------------------------------------------------- models */

typedef struct {
    pz_gpt2_params p;
    float *mem;
} model;

/* A model over fresh memory: initialised from `seed`, or, with seed 0,
 * filled with NaN bytes so a load must overwrite every element. */
static void model_new(model *m, const pz_gpt2_config *c, pz_stage_range r, uint64_t seed) {
    size_t n = pz_stage_numel(c, &r);
    m->mem = xmalloc(n * sizeof(float));
    pz_gpt2_params_bind(&m->p, c, &r, m->mem);
    if (seed) pz_gpt2_params_init(&m->p, seed);
    else memset(m->mem, 0xFF, n * sizeof(float));
}

static void model_free(model *m) {
    pz_gpt2_params_unbind(&m->p);
    free(m->mem);
}

static pz_stage_range range(int l0, int l1, int embed, int head) {
    pz_stage_range r = {l0, l1, embed, head};
    return r;
}

static int config_eq(const pz_gpt2_config *a, const pz_gpt2_config *b) {
    return a->max_seq_len == b->max_seq_len && a->vocab_size == b->vocab_size
        && a->padded_vocab_size == b->padded_vocab_size && a->num_layers == b->num_layers
        && a->num_heads == b->num_heads && a->channels == b->channels;
}

static int bits_eq(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* Every tensor of stage s must equal the same-named tensor of whole w, bit for bit. */
static int same_as_whole(const model *s, const model *w) {
    int ns = pz_gpt2_params_tensors(&s->p, NULL), nw = pz_gpt2_params_tensors(&w->p, NULL);
    pz_tensor_info *ts = xcalloc((size_t)ns, sizeof *ts), *tw = xcalloc((size_t)nw, sizeof *tw);
    pz_gpt2_params_tensors(&s->p, ts);
    pz_gpt2_params_tensors(&w->p, tw);
    int ok = 1;
    for (int i = 0; i < ns; i++) {
        int found = 0;
        for (int j = 0; j < nw; j++)
            if (strcmp(ts[i].name, tw[j].name) == 0) {
                found = 1;
                if (ts[i].numel != tw[j].numel || !bits_eq(ts[i].data, tw[j].data, ts[i].numel)) {
                    fprintf(stderr, "  tensor %s differs\n", ts[i].name);
                    ok = 0;
                }
            }
        if (!found) { fprintf(stderr, "  tensor %s not in the whole model\n", ts[i].name); ok = 0; }
    }
    free(ts);
    free(tw);
    return ok;
}

/* ------------------------------------------- independent HF-layout writer */

/* Reference f16 decode, written differently from the library's on purpose. */
static float f16_ref(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(1024 + m), e - 25);
    return (h & 0x8000) ? -v : v;
}

typedef struct {
    const char *skip;        /* leave this tensor out */
    const char *extra;       /* add a (C) tensor with this name */
    const char *reshape;     /* write this tensor with its last dim one larger */
    const char *prefix;      /* prepend to every name ("transformer.") */
    int lm_head;             /* 1: add lm_head.weight equal to wte; 2: a different one */
    int buffers;             /* add h.i.attn.bias (1, 1, maxT, maxT) and h.i.attn.masked_bias () */
    int no_meta;             /* write no __metadata__ */
    const char *meta_key, *meta_val; /* one more (or overriding) metadata entry */
    int skip_layer;          /* leave out every tensor of block skip_layer - 1 (0: none) */
} hf_opts;

/* Writes p as HF GPT-2 safetensors, without the library's conversions:
 * elems holds p's elements in our layout (esz bytes each, parallel to
 * p->mem) and is rearranged here into the HF layout (wte unpadded, Conv1D
 * weights transposed to (in, out)). */
static pz_status save_hf(const char *path, const pz_gpt2_params *p, const void *elems, size_t esz,
                         pz_st_dtype dtype, const hf_opts *o) {
    const pz_gpt2_config *c = &p->cfg;
    int n = pz_gpt2_params_tensors(p, NULL);
    pz_tensor_info *ts = xcalloc((size_t)n, sizeof *ts);
    pz_gpt2_params_tensors(p, ts);
    int cap = n + 3 * c->num_layers + 4, nw = 0;
    pz_st_write_tensor *ws = xcalloc((size_t)cap, sizeof *ws);
    char (*names)[96] = xcalloc((size_t)cap, sizeof *names);
    void **bufs = xcalloc((size_t)cap, sizeof *bufs);
    const uint8_t *src = elems;
    for (int i = 0; i < n; i++) {
        pz_tensor_info *t = &ts[i];
        if (o->skip && strcmp(t->name, o->skip) == 0) continue;
        int layer = -1;
        if (sscanf(t->name, "h.%d.", &layer) == 1 && layer == o->skip_layer - 1) continue;
        pz_st_write_tensor *w = &ws[nw];
        snprintf(names[nw], sizeof names[0], "%s%s", o->prefix ? o->prefix : "", t->name);
        w->name = names[nw];
        w->dtype = dtype;
        w->ndim = t->ndim;
        size_t rows = (size_t)t->shape[0], cols = t->ndim == 2 ? (size_t)t->shape[1] : 1;
        if (strcmp(t->name, "wte.weight") == 0) rows = (size_t)c->vocab_size;
        size_t numel = rows * cols, extra = o->reshape && strcmp(t->name, o->reshape) == 0;
        uint8_t *b = xcalloc(extra ? 2 * numel : numel, esz); /* room for a grown last dim */
        const uint8_t *from = src + t->offset * esz;
        if (t->conv1d) {
            for (size_t r = 0; r < rows; r++)
                for (size_t k = 0; k < cols; k++)
                    memcpy(b + (k * rows + r) * esz, from + (r * cols + k) * esz, esz);
            w->shape[0] = cols;
            w->shape[1] = rows;
        } else {
            memcpy(b, from, numel * esz);
            w->shape[0] = rows;
            w->shape[1] = cols;
        }
        if (extra) w->shape[w->ndim - 1]++;
        w->data = bufs[nw] = b;
        nw++;
        if (strcmp(t->name, "wte.weight") == 0 && o->lm_head) {
            ws[nw] = *w;
            ws[nw].name = "lm_head.weight";
            uint8_t *h = xmalloc(numel * esz);
            memcpy(h, b, numel * esz);
            if (o->lm_head == 2) h[esz * 7] ^= 1;
            ws[nw].data = bufs[nw] = h;
            nw++;
        }
    }
    if (o->extra) {
        snprintf(names[nw], sizeof names[0], "%s", o->extra);
        ws[nw] = (pz_st_write_tensor){.name = names[nw], .dtype = dtype, .ndim = 1,
                                      .shape = {(uint64_t)c->channels}};
        ws[nw].data = bufs[nw] = xcalloc((size_t)c->channels, esz);
        nw++;
    }
    if (o->buffers) {
        size_t T = (size_t)c->max_seq_len;
        for (int l = 0; l < c->num_layers; l++) {
            snprintf(names[nw], sizeof names[0], "h.%d.attn.bias", l);
            ws[nw] = (pz_st_write_tensor){.name = names[nw], .dtype = PZ_ST_F32, .ndim = 4,
                                          .shape = {1, 1, T, T}};
            ws[nw].data = bufs[nw] = xcalloc(T * T, 4);
            nw++;
            snprintf(names[nw], sizeof names[0], "h.%d.attn.masked_bias", l);
            ws[nw] = (pz_st_write_tensor){.name = names[nw], .dtype = PZ_ST_F32, .ndim = 0};
            ws[nw].data = bufs[nw] = xcalloc(1, 4);
            nw++;
        }
    }
    char v[6][24];
    pz_st_meta meta[8];
    int nm = 0;
    if (!o->no_meta) {
        const char *keys[5] = {"n_head", "n_ctx", "vocab_size", "n_layer", "n_embd"};
        int vals[5] = {c->num_heads, c->max_seq_len, c->vocab_size, c->num_layers, c->channels};
        meta[nm++] = (pz_st_meta){"format", "pt"};
        for (int i = 0; i < 5; i++) {
            if (o->meta_key && strcmp(o->meta_key, keys[i]) == 0) continue;
            snprintf(v[i], sizeof v[i], "%d", vals[i]);
            meta[nm++] = (pz_st_meta){keys[i], v[i]};
        }
    }
    if (o->meta_key) meta[nm++] = (pz_st_meta){o->meta_key, o->meta_val};
    pz_status st = pz_st_write(path, ws, nw, meta, nm);
    for (int i = 0; i < nw; i++) free(bufs[i]);
    free(bufs);
    free(names);
    free(ws);
    free(ts);
    return st;
}

static const hf_opts no_opts = {0};

/* -------------------------------------------------------------- bf16 bits */

static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_bf16(void) {
    CHECK(pz_f32_to_bf16(1.0f) == 0x3F80, "1.0");
    CHECK(pz_f32_to_bf16(-2.0f) == 0xC000, "-2.0");
    CHECK(pz_f32_to_bf16(from_bits(0x3F808000)) == 0x3F80, "tie rounds to even (down)");
    CHECK(pz_f32_to_bf16(from_bits(0x3F818000)) == 0x3F82, "tie rounds to even (up)");
    CHECK(pz_f32_to_bf16(from_bits(0x3F808001)) == 0x3F81, "above half rounds up");
    CHECK(pz_f32_to_bf16(from_bits(0x3F807FFF)) == 0x3F80, "below half rounds down");
    CHECK(pz_f32_to_bf16(from_bits(0x7F7FFFFF)) == 0x7F80, "FLT_MAX rounds to inf");
    CHECK(pz_f32_to_bf16(INFINITY) == 0x7F80 && pz_f32_to_bf16(-INFINITY) == 0xFF80, "inf");
    CHECK(isnan(pz_bf16_to_f32(pz_f32_to_bf16(NAN))), "NaN stays NaN");
    CHECK(isnan(pz_bf16_to_f32(pz_f32_to_bf16(from_bits(0x7F800001)))), "NaN with low payload stays NaN");
    CHECK(isnan(pz_bf16_to_f32(pz_f32_to_bf16(from_bits(0xFFFFFFFF)))), "NaN near overflow stays NaN");
    CHECK(pz_bf16_to_f32(0x4049) == from_bits(0x40490000), "decode is a shift");
    for (uint32_t h = 0; h < 65536; h++) {
        float f = pz_bf16_to_f32((uint16_t)h);
        if (!isnan(f) && pz_f32_to_bf16(f) != h) { CHECK(0, "bf16 %04x does not round-trip", h); break; }
    }
}

/* ------------------------------------------------------------ round trips */

/* Saves a whole model a to path (version 0: safetensors; 3, 5: llm.c v3, v5),
 * checks the format and config read back (for llm.c also the file size the
 * header implies) and loads the file into b, a fresh model of NaN bytes. */
static void save_and_reload(const char *label, const model *a, const char *path, int version, model *b) {
    const pz_gpt2_config *c = &a->p.cfg;
    char what[96];
    if (version) snprintf(what, sizeof what, "%s: llm.c v%d", label, version);
    else snprintf(what, sizeof what, "%s: safetensors", label);
    pz_status st = version ? pz_ckpt_save_llmc(path, &a->p, version) : pz_ckpt_save_safetensors(path, &a->p);
    check_status_at(__FILE__, __LINE__, what, st, PZ_OK, NULL);
    long want_size = 1024 + (version == 5 ? 2 : 4) * (long)pz_gpt2_numel(c);
    CHECK(!version || file_size(path) == want_size, "%s: size %ld, want %ld", what, file_size(path), want_size);
    pz_gpt2_config rc;
    pz_ckpt_format fmt;
    check_status_at(__FILE__, __LINE__, what, pz_ckpt_read_config(path, &rc, &fmt), PZ_OK, NULL);
    CHECK(fmt == (version ? PZ_CKPT_LLMC : PZ_CKPT_SAFETENSORS) && config_eq(&rc, c), "%s: config", what);
    model_new(b, c, pz_whole_model(c), 0);
    check_status_at(__FILE__, __LINE__, what, pz_ckpt_load(path, &b->p), PZ_OK, NULL);
}

/* Save a model in one format, check the detected config, load it back. */
static void test_roundtrip(const char *label, const pz_gpt2_config *c) {
    model a, b;
    pz_gpt2_config rc;
    pz_ckpt_format fmt;
    pz_stage_range whole = pz_whole_model(c);
    size_t n = pz_gpt2_numel(c);
    model_new(&a, c, whole, 1234);

    /* safetensors: bit-exact */
    const char *st = tp("rt.safetensors");
    save_and_reload(label, &a, st, 0, &b);
    CHECK(bits_eq(a.mem, b.mem, n), "%s: safetensors round trip is not bit-exact", label);
    model_free(&b);

    /* llm.c v3: bit-exact, size as the header says */
    const char *v3 = tp("rt_v3.bin");
    save_and_reload(label, &a, v3, 3, &b);
    CHECK(bits_eq(a.mem, b.mem, n), "%s: llm.c v3 round trip is not bit-exact", label);
    model_free(&b);

    /* llm.c v5: every element is a's rounded to nearest-even bf16 */
    const char *v5 = tp("rt_v5.bin");
    save_and_reload(label, &a, v5, 5, &b);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = pz_bf16_to_f32(pz_f32_to_bf16(a.mem[i]));
        if (memcmp(&want, &b.mem[i], 4) != 0 || fabsf(b.mem[i] - a.mem[i]) > fabsf(a.mem[i]) / 256) bad++;
    }
    CHECK(bad == 0, "%s: llm.c v5: %zu elements not the bf16 rounding of the original", label, bad);
    model_free(&b);

    /* llm.c stores tensor-major: ln_1.weight of block 1 sits right after block 0's */
    if (c->num_layers >= 2) {
        size_t len;
        uint8_t *bytes = read_bytes(v3, &len);
        size_t C = (size_t)c->channels;
        size_t ln1 = 1024 + 4 * ((size_t)c->padded_vocab_size * C + (size_t)c->max_seq_len * C);
        CHECK(memcmp(bytes + ln1, a.p.blocks[0].ln1w, 4 * C) == 0
              && memcmp(bytes + ln1 + 4 * C, a.p.blocks[1].ln1w, 4 * C) == 0
              && memcmp(bytes + ln1 + 4 * C * (size_t)c->num_layers, a.p.blocks[0].ln1b, 4 * C) == 0,
              "%s: llm.c payload is not tensor-major", label);
        free(bytes);
    }

    /* pipeline stages: read their part of the whole files */
    pz_stage_range stages[3] = {range(0, 1, 1, 0), range(1, 2, 0, 0),
                                range(c->num_layers - 1, c->num_layers, 0, 1)};
    const char *files[3] = {st, v3, v5};
    for (int f = 0; f < 2; f++)
        for (int s = 0; s < 3; s++) {
            if (stages[s].l1 > c->num_layers) continue;
            model_new(&b, c, stages[s], 0);
            CHECK_STATUS(pz_ckpt_load(files[f], &b.p), PZ_OK, NULL);
            CHECK(same_as_whole(&b, &a), "%s: stage %d from %s differs", label, s, files[f]);
            model_free(&b);
        }
    (void)files[2];

    /* stage files: a stage saves and reloads just its part */
    for (int s = 0; s < 3; s++) {
        if (stages[s].l1 > c->num_layers) continue;
        model part, back;
        model_new(&part, c, stages[s], 0);
        CHECK_STATUS(pz_ckpt_load(st, &part.p), PZ_OK, NULL);
        const char *sf = tp("stage.safetensors");
        CHECK_STATUS(pz_ckpt_save_safetensors(sf, &part.p), PZ_OK, NULL);
        CHECK_STATUS(pz_ckpt_read_config(sf, &rc, &fmt), PZ_OK, NULL);
        CHECK(config_eq(&rc, c), "%s: stage file %d config", label, s);
        pz_st_file stf;
        CHECK_STATUS(pz_st_open(&stf, sf), PZ_OK, NULL);
        char want[32];
        snprintf(want, sizeof want, "%d-%d", stages[s].l0, stages[s].l1);
        const char *brv = pz_st_meta_get(&stf, "block_range");
        int whole_stage = stages[s].l0 == 0 && stages[s].l1 == c->num_layers
                       && stages[s].has_embed && stages[s].has_head;
        CHECK(whole_stage ? brv == NULL : (brv && strcmp(brv, want) == 0), "%s: block_range %s", label,
              brv ? brv : "(none)");
        CHECK((pz_st_find(&stf, "wte.weight") != NULL) == (stages[s].has_embed || stages[s].has_head)
              && (pz_st_find(&stf, "wpe.weight") != NULL) == stages[s].has_embed
              && (pz_st_find(&stf, "ln_f.bias") != NULL) == stages[s].has_head,
              "%s: stage file %d holds the wrong tensors", label, s);
        pz_st_close(&stf);
        model_new(&back, c, stages[s], 0);
        CHECK_STATUS(pz_ckpt_load(sf, &back.p), PZ_OK, NULL);
        CHECK(bits_eq(part.mem, back.mem, part.p.numel), "%s: stage file %d round trip", label, s);
        model_free(&back);
        if (!whole_stage) {
            model_new(&back, c, whole, 0);
            CHECK_STATUS(pz_ckpt_load(sf, &back.p), PZ_ERR_FORMAT, "missing tensor");
            model_free(&back);
            CHECK_STATUS(pz_ckpt_save_llmc(tp("stage.bin"), &part.p, 3), PZ_ERR_ARG, "whole model");
            CHECK(!exists(tp("stage.bin")), "refused llm.c save left a file");
        }
        model_free(&part);
    }

    model_free(&a);
    remove(st); remove(v3); remove(v5); remove(tp("stage.safetensors"));
}

/* What we write is HF GPT-2 layout: unpadded wte, Conv1D weights (in, out),
 * Rust writer order (h.10 before h.2), 8-byte aligned data, metadata first. */
static void test_written_layout(void) {
    pz_gpt2_config c = {8, 50, 128, 11, 2, 32};
    model a;
    model_new(&a, &c, pz_whole_model(&c), 7);
    const char *path = tp("layout.safetensors");
    CHECK_STATUS(pz_ckpt_save_safetensors(path, &a.p), PZ_OK, NULL);
    pz_st_file f;
    CHECK_STATUS(pz_st_open(&f, path), PZ_OK, NULL);
    CHECK(f.header_len % 8 == 0, "header length %llu not a multiple of 8", (unsigned long long)f.header_len);
    CHECK(f.ntensors == 4 + 12 * c.num_layers, "tensor count %d", f.ntensors);
    const uint8_t *hdr = f.buffer - f.header_len;
    CHECK(memcmp(hdr, "{\"__metadata__\":{\"format\":\"pt\"", 30) == 0, "header starts %.30s", (const char *)hdr);
    const pz_st_tensor *w = pz_st_find(&f, "wte.weight");
    CHECK(w && w->ndim == 2 && w->shape[0] == 50 && w->shape[1] == 32, "wte stored unpadded (V, C)");
    const pz_st_tensor *h10 = pz_st_find(&f, "h.10.ln_1.weight"), *h2 = pz_st_find(&f, "h.2.ln_1.weight");
    CHECK(h10 && h2 && h10->begin < h2->begin, "h.10 must come before h.2 (Rust writer order)");
    for (int i = 1; i < f.ntensors; i++)
        CHECK(f.tensors[i - 1].begin < f.tensors[i].begin, "data not in name order at %s", f.tensors[i].name);
    const pz_st_tensor *q = pz_st_find(&f, "h.3.attn.c_attn.weight");
    CHECK(q && q->ndim == 2 && q->shape[0] == 32 && q->shape[1] == 96, "c_attn stored (C, 3C)");
    int bad = 0;
    for (size_t k = 0; q && k < 32; k++)
        for (size_t r = 0; r < 96; r++) {
            float v;
            memcpy(&v, q->data + 4 * (k * 96 + r), 4);
            if (v != a.p.blocks[3].qkvw[r * 32 + k]) bad++;
        }
    CHECK(bad == 0, "c_attn is not the transpose of qkvw (%d elements)", bad);
    const pz_st_tensor *fp = pz_st_find(&f, "h.5.mlp.c_proj.weight");
    CHECK(fp && fp->shape[0] == 128 && fp->shape[1] == 32, "mlp.c_proj stored (4C, C)");
    float v;
    memcpy(&v, fp->data + 4 * (7 * 32 + 3), 4);
    CHECK(v == a.p.blocks[5].fcprojw[3 * 128 + 7], "mlp.c_proj element (7, 3)");
    CHECK(strcmp(pz_st_meta_get(&f, "n_layer"), "11") == 0 && strcmp(pz_st_meta_get(&f, "n_head"), "2") == 0
          && strcmp(pz_st_meta_get(&f, "padded_vocab_size"), "128") == 0, "metadata");
    pz_st_close(&f);
    remove(path);
    model_free(&a);
}

/* Loads path into a fresh model of config c, stage r (NaN bytes before): the
 * status must be want and an error's message must name needle. The model
 * goes to *out if out is not NULL, else it is freed. */
static void load_check(const char *what, const char *path, const pz_gpt2_config *c, pz_stage_range r, pz_status want,
                       const char *needle, model *out) {
    model b;
    model_new(&b, c, r, 0);
    check_status_at(__FILE__, __LINE__, what, pz_ckpt_load(path, &b.p), want, needle);
    if (out) *out = b;
    else model_free(&b);
}

/* An HF file of a's elements as 16-bit values h (BF16 or F16) must load as
 * decode(h), bit for bit. */
static void check_16bit_file(const char *name, const model *a, const char *path, const uint16_t *h, pz_st_dtype dtype,
                             float (*decode)(uint16_t)) {
    const pz_gpt2_config *c = &a->p.cfg;
    size_t n = pz_gpt2_numel(c), bad = 0;
    check_status_at(__FILE__, __LINE__, name, save_hf(path, &a->p, h, 2, dtype, &no_opts), PZ_OK, NULL);
    model b;
    load_check(name, path, c, pz_whole_model(c), PZ_OK, NULL, &b);
    for (size_t i = 0; i < n; i++) {
        float want = decode(h[i]);
        if (memcmp(&want, &b.mem[i], 4) != 0) bad++;
    }
    CHECK(bad == 0, "%s file: %zu elements wrong", name, bad);
    model_free(&b);
}

/* An HF file with one thing wrong (written by save_hf with o): reading its
 * config gives cfg, naming cfg_msg; if load, loading it as a whole model
 * gives load_st, naming load_msg. */
typedef struct {
    const char *what;
    hf_opts o;
    pz_status cfg;
    const char *cfg_msg;
    int load;
    pz_status load_st;
    const char *load_msg;
} hf_case;

static void check_hf_case(const model *a, const char *path, const hf_case *k) {
    char what[128];
    snprintf(what, sizeof what, "HF file %s", k->what);
    check_status_at(__FILE__, __LINE__, what, save_hf(path, &a->p, a->mem, 4, PZ_ST_F32, &k->o), PZ_OK, NULL);
    pz_gpt2_config rc;
    check_status_at(__FILE__, __LINE__, what, pz_ckpt_read_config(path, &rc, NULL), k->cfg, k->cfg_msg);
    if (k->load) load_check(what, path, &a->p.cfg, pz_whole_model(&a->p.cfg), k->load_st, k->load_msg, NULL);
}

static const hf_case hf_cases[] = {
    /* missing tensors */
    {"without h.1.mlp.c_fc.bias", {.skip = "h.1.mlp.c_fc.bias"}, PZ_ERR_FORMAT, "h.1.mlp.c_fc.bias",
     1, PZ_ERR_FORMAT, "h.1.mlp.c_fc.bias"},
    /* a gap in the blocks (no metadata, so L comes from the indices) */
    {"without block 0", {.skip_layer = 1, .no_meta = 1, .meta_key = "n_head", .meta_val = "4"}, PZ_ERR_FORMAT, "h.0",
     0, PZ_OK, NULL},
    /* extra tensors, named in the message */
    {"with h.0.attn.rotary.weight", {.extra = "h.0.attn.rotary.weight"}, PZ_ERR_FORMAT, "h.0.attn.rotary.weight",
     1, PZ_ERR_FORMAT, "h.0.attn.rotary.weight"},
    {"with a block past n_layer", {.extra = "h.2.ln_1.weight"}, PZ_ERR_FORMAT, "h.2", 1, PZ_ERR_FORMAT, "h.2"},
    {"with a non-canonical block index", {.extra = "h.01.ln_1.weight"}, PZ_ERR_FORMAT, "h.01.ln_1.weight",
     0, PZ_OK, NULL},
    /* wrong shapes; a wider wte makes C disagree with the metadata */
    {"with a wrong c_proj shape", {.reshape = "h.1.attn.c_proj.weight"}, PZ_ERR_SHAPE, "h.1.attn.c_proj.weight",
     1, PZ_ERR_SHAPE, "h.1.attn.c_proj.weight"},
    {"with a wrong wte shape", {.reshape = "wte.weight"}, PZ_ERR_FORMAT, "n_embd", 1, PZ_ERR_SHAPE, "wte.weight"},
    /* head count: C = 96 is not a multiple of 64, so without metadata it must
     * be asked for (loading works: nothing contradicts the model's own NH) */
    {"without metadata", {.no_meta = 1}, PZ_ERR_FORMAT, "n_head", 1, PZ_OK, NULL},
    {"with n_head 5", {.meta_key = "n_head", .meta_val = "5"}, PZ_ERR_FORMAT, "divide", 0, PZ_OK, NULL},
    {"with n_head four", {.meta_key = "n_head", .meta_val = "four"}, PZ_ERR_FORMAT, "n_head", 0, PZ_OK, NULL},
    {"with block_range 2-1", {.meta_key = "block_range", .meta_val = "2-1"}, PZ_ERR_FORMAT, "block_range",
     0, PZ_OK, NULL},
};

/* Files in HF layout written by save_hf: other dtypes, prefixes, tied heads,
 * buffers, and every way the tensor set can be wrong. */
static void test_hf_files(void) {
    pz_gpt2_config c;
    pz_gpt2_preset("tiny", &c);
    pz_stage_range whole = pz_whole_model(&c);
    size_t n = pz_gpt2_numel(&c);
    model a, b;
    pz_gpt2_config rc;
    model_new(&a, &c, whole, 99);
    const char *path = tp("hf.safetensors");

    /* plain F32 through the independent writer: checks the Conv1D direction */
    CHECK_STATUS(save_hf(path, &a.p, a.mem, 4, PZ_ST_F32, &no_opts), PZ_OK, NULL);
    load_check("HF F32 file", path, &c, whole, PZ_OK, NULL, &b);
    CHECK(bits_eq(a.mem, b.mem, n), "HF F32 file differs after load");
    model_free(&b);

    /* transformers' state_dict(): "transformer." prefix, tied lm_head, mask buffers */
    hf_opts state_dict = {.prefix = "transformer.", .lm_head = 1, .buffers = 1};
    CHECK_STATUS(save_hf(path, &a.p, a.mem, 4, PZ_ST_F32, &state_dict), PZ_OK, NULL);
    CHECK_STATUS(pz_ckpt_read_config(path, &rc, NULL), PZ_OK, NULL);
    CHECK(config_eq(&rc, &c), "prefixed file config");
    load_check("prefixed file", path, &c, whole, PZ_OK, NULL, &b);
    CHECK(bits_eq(a.mem, b.mem, n), "prefixed file differs after load");
    model_free(&b);

    CHECK_STATUS(save_hf(path, &a.p, a.mem, 4, PZ_ST_F32, &(hf_opts){.lm_head = 2}), PZ_OK, NULL);
    load_check("untied lm_head", path, &c, whole, PZ_ERR_FORMAT, "untied", NULL);

    /* BF16 file: loads as the bf16 rounding */
    uint16_t *h = xmalloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = pz_f32_to_bf16(a.mem[i]);
    check_16bit_file("BF16", &a, path, h, PZ_ST_BF16, pz_bf16_to_f32);

    /* F16 file: random finite half bit patterns (normals, subnormals, zeros) */
    pz_rng r;
    pz_rng_seed(&r, 5);
    for (size_t i = 0; i < n; i++) {
        uint16_t x;
        do x = (uint16_t)pz_rng_next(&r); while (((x >> 10) & 31) == 31);
        h[i] = x;
    }
    /* padded wte rows come back as zeros */
    memset(h + (size_t)c.vocab_size * (size_t)c.channels, 0,
           (size_t)(c.padded_vocab_size - c.vocab_size) * (size_t)c.channels * 2);
    check_16bit_file("F16", &a, path, h, PZ_ST_F16, f16_ref);
    free(h);

    /* missing tensor: a whole model cannot load; a stage that does not need it can */
    check_hf_case(&a, path, &(hf_case){"without ln_f.weight", {.skip = "ln_f.weight"}, PZ_ERR_FORMAT, "ln_f.weight",
                                       1, PZ_ERR_FORMAT, "missing tensor 'ln_f.weight'"});
    load_check("first stage without ln_f", path, &c, range(0, 1, 1, 0), PZ_OK, NULL, &b);
    CHECK(same_as_whole(&b, &a), "first stage from a file without ln_f");
    model_free(&b);
    for (size_t i = 0; i < sizeof hf_cases / sizeof hf_cases[0]; i++) check_hf_case(&a, path, &hf_cases[i]);

    /* a model whose config does not match the file */
    CHECK_STATUS(save_hf(path, &a.p, a.mem, 4, PZ_ST_F32, &no_opts), PZ_OK, NULL);
    pz_gpt2_config heads = c, seq = c, layers = c;
    heads.num_heads = 2;
    seq.max_seq_len = 32;
    layers.num_layers = 3;
    load_check("other n_head", path, &heads, pz_whole_model(&heads), PZ_ERR_SHAPE, "n_head", NULL);
    load_check("other max_seq_len", path, &seq, pz_whole_model(&seq), PZ_ERR_SHAPE, NULL, NULL);
    load_check("other num_layers", path, &layers, pz_whole_model(&layers), PZ_ERR_SHAPE, NULL, NULL);

    /* a non-GPT-2 dtype */
    int32_t *ints = xcalloc(n, 4);
    CHECK_STATUS(save_hf(path, &a.p, ints, 4, PZ_ST_I32, &no_opts), PZ_OK, NULL);
    CHECK_STATUS(pz_ckpt_read_config(path, &rc, NULL), PZ_ERR_FORMAT, "I32");
    free(ints);

    remove(path);
    model_free(&a);

    /* C a multiple of 64 but not a published GPT-2 width, no metadata, no
     * config.json: the head count is an error naming --heads and config.json
     * (it used to be guessed as C/64 = 1: a 2-head model evaluated wrong) */
    pz_gpt2_config c64 = {16, 300, 512, 2, 2, 64};
    model_new(&a, &c64, pz_whole_model(&c64), 3);
    CHECK_STATUS(save_hf(path, &a.p, a.mem, 4, PZ_ST_F32, &(hf_opts){.no_meta = 1}), PZ_OK, NULL);
    CHECK_STATUS(pz_ckpt_read_config(path, &rc, NULL), PZ_ERR_FORMAT, "--heads");
    CHECK_STATUS(pz_ckpt_read_config(path, &rc, NULL), PZ_ERR_FORMAT, "config.json");
    CHECK_STATUS(pz_ckpt_read_config_heads(path, 2, &rc, NULL), PZ_OK, NULL);   /* --heads 2: Vp = pad(V) */
    CHECK(rc.num_heads == 2 && rc.padded_vocab_size == 384 && rc.vocab_size == 300 && rc.num_layers == 2
          && rc.max_seq_len == 16 && rc.channels == 64, "derived config without metadata, --heads 2");
    CHECK_STATUS(pz_ckpt_read_config_heads(path, 3, &rc, NULL), PZ_ERR_FORMAT, "divide");
    /* our own save records padded_vocab_size, which wins over pad(V) */
    CHECK_STATUS(pz_ckpt_save_safetensors(path, &a.p), PZ_OK, NULL);
    CHECK_STATUS(pz_ckpt_read_config(path, &rc, NULL), PZ_OK, NULL);
    CHECK(config_eq(&rc, &c64), "padded_vocab_size from metadata");
    remove(path);
    model_free(&a);
}

/* --------------------------------------------------- malformed safetensors */

/* u64 N | json | buflen zero bytes; N is strlen(json) unless n_override. */
static void write_raw(const char *path, const char *json, uint64_t n_override, size_t buflen) {
    size_t jl = strlen(json);
    uint64_t n = n_override ? n_override : jl;
    uint8_t *b = xcalloc(8 + jl + buflen, 1);
    memcpy(b, &n, 8);
    memcpy(b + 8, json, jl);
    write_bytes(path, b, 8 + jl + buflen);
    free(b);
}

#define TA "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"
#define TB "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}"

static void expect_raw(int line, const char *json, size_t buflen, pz_status want, const char *sub) {
    pz_st_file f;
    write_raw(tp("raw.safetensors"), json, 0, buflen);
    pz_status st = pz_st_open(&f, tp("raw.safetensors"));
    check_status_at(__FILE__, line, json, st, want, sub);
    if (!st) pz_st_close(&f);
}
#define RAW_OK(json, buflen) expect_raw(__LINE__, json, buflen, PZ_OK, NULL)
#define RAW_BAD(json, buflen, sub) expect_raw(__LINE__, json, buflen, PZ_ERR_FORMAT, sub)

static void test_malformed_safetensors(void) {
    pz_st_file f;
    pz_gpt2_config rc;
    const char *raw = tp("raw.safetensors");

    /* accepted edge cases */
    RAW_OK("{" TA "," TB "}", 12);
    RAW_OK("{" TB "," TA "}   \n\t ", 12);
    RAW_OK("{}", 0);
    RAW_OK("{ }  ", 0);
    RAW_OK("{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4);
    RAW_OK("{\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[8,8]}," TA "}", 8);
    RAW_OK("{\"z\":{\"data_offsets\":[0,1],\"shape\":[2],\"dtype\":\"F4\"}}", 1);
    RAW_OK("{\"__metadata__\":{},\"z\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3);

    /* names and values with escapes decode to UTF-8 */
    write_raw(raw, "{\"__metadata__\":{\"k\\u00e9\":\"v\\n\\\"\"},"
                   "\"a\\u00e9\\ud83d\\ude00\\\"\\\\\\/\\t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 1);
    CHECK_STATUS(pz_st_open(&f, raw), PZ_OK, NULL);
    if (f.ntensors == 1) {
        CHECK(strcmp(f.tensors[0].name, "a\xc3\xa9\xf0\x9f\x98\x80\"\\/\t") == 0, "decoded name");
        CHECK(pz_st_meta_get(&f, "k\xc3\xa9") && strcmp(pz_st_meta_get(&f, "k\xc3\xa9"), "v\n\"") == 0,
              "decoded metadata");
        pz_st_close(&f);
    }

    /* the header length itself */
    write_bytes(raw, "", 0);
    CHECK_STATUS(pz_st_open(&f, raw), PZ_ERR_FORMAT, "too short");
    CHECK_STATUS(pz_ckpt_read_config(raw, &rc, NULL), PZ_ERR_FORMAT, raw);
    write_bytes(raw, "\x05\0\0\0\0", 5);
    CHECK_STATUS(pz_st_open(&f, raw), PZ_ERR_FORMAT, "too short");
    write_raw(raw, "{" TA "}", 100, 8);
    CHECK_STATUS(pz_st_open(&f, raw), PZ_ERR_FORMAT, "past the end");
    write_raw(raw, "{" TA "}", 100000001, 8);
    CHECK_STATUS(pz_st_open(&f, raw), PZ_ERR_FORMAT, "exceeds");
    write_raw(raw, "{" TA "}", UINT64_MAX, 8);
    CHECK_STATUS(pz_st_open(&f, raw), PZ_ERR_FORMAT, "exceeds");
    write_raw(raw, "{" TA "}", 10, 8); /* header cut in the middle of the JSON */
    CHECK_STATUS(pz_st_open(&f, raw), PZ_ERR_FORMAT, "unterminated string");
    write_raw(raw, "{" TA "}", 5, 8);
    CHECK_STATUS(pz_st_open(&f, raw), PZ_ERR_FORMAT, "unexpected end of JSON");

    /* a good file cut short anywhere in its header */
    pz_gpt2_config c;
    pz_gpt2_preset("tiny", &c);
    model a;
    model_new(&a, &c, pz_whole_model(&c), 1);
    CHECK_STATUS(pz_ckpt_save_safetensors(tp("good.safetensors"), &a.p), PZ_OK, NULL);
    size_t len;
    uint8_t *good = read_bytes(tp("good.safetensors"), &len);
    uint64_t hn;
    memcpy(&hn, good, 8);
    size_t cuts[] = {1, 7, 8, 9, 8 + (size_t)hn / 2, 8 + (size_t)hn - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_bytes(raw, good, cuts[i]);
        CHECK_STATUS(pz_st_open(&f, raw), PZ_ERR_FORMAT, NULL);
        CHECK_STATUS(pz_ckpt_read_config(raw, &rc, NULL), PZ_ERR_FORMAT, NULL);
    }
    /* ... or in its data: the tensors no longer fit the buffer */
    write_bytes(raw, good, len - 4);
    CHECK_STATUS(pz_st_open(&f, raw), PZ_ERR_FORMAT, "past the end");
    model b;
    model_new(&b, &c, pz_whole_model(&c), 0);
    CHECK_STATUS(pz_ckpt_load(raw, &b.p), PZ_ERR_FORMAT, raw);
    model_free(&b);
    free(good);
    model_free(&a);
    remove(tp("good.safetensors"));

    /* JSON syntax and the format's structure */
    RAW_BAD("[" TA "]", 8, "does not start with '{'");
    RAW_BAD(" {" TA "}", 8, "does not start with '{'");
    RAW_BAD("", 8, "does not start with '{'");
    RAW_BAD("{\"a\" {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "expected ':'");
    RAW_BAD("{" TA ",}", 8, "expected a string");
    RAW_BAD("{" TA "}x", 8, "only whitespace");
    RAW_BAD("{" TA "}}", 8, "only whitespace");
    RAW_BAD("{" TA " " TB "}", 12, "',' or '}'");
    RAW_BAD("{\"a", 8, "unterminated");
    RAW_BAD("{\"a\\q\":{}}", 8, "bad escape");
    RAW_BAD("{\"a\\u12g4\":{}}", 8, "bad escape");
    RAW_BAD("{\"a\\ud800\":{}}", 8, "surrogate");
    RAW_BAD("{\"a\\udc00\\ud800\":{}}", 8, "surrogate");
    RAW_BAD("{\"a\\u0000\":{}}", 8, "NUL");
    RAW_BAD("{\"a\xff\":{}}", 8, "UTF-8");
    RAW_BAD("{\"a\xc0\x80\":{}}", 8, "UTF-8");
    RAW_BAD("{\"a\xed\xa0\x80\":{}}", 8, "UTF-8");
    RAW_BAD("{\"a\nb\":{}}", 8, "printable");
    RAW_BAD("{\"\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "empty tensor name");
    RAW_BAD("{\"a\":[]}", 8, "'{' opening a tensor entry");
    RAW_BAD("{\"a\":{\"dtype\":{\"x\":\"F32\"},\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "a string");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[[2]],\"data_offsets\":[0,8]}}", 8, "integer");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,],\"data_offsets\":[0,8]}}", 8, "integer");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, "'['");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8, "leading zeros");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "non-negative");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "integers");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2e0],\"data_offsets\":[0,8]}}", 8, "integers");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,99999999999999999999]}}", 8,
            "overflows");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8, "expected 2");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "missing field 'data_offsets'");
    RAW_BAD("{\"a\":{}}", 8, "missing field 'dtype'");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "twice");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, "unknown field 'x'");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"offsets\":[0,8]}}", 8, "unknown field 'offsets'");
    RAW_BAD("{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype 'F33'");
    RAW_BAD("{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype");
    RAW_BAD("{" TA "," TA "}", 8, "duplicate tensor 'a'");
    RAW_BAD("{\"__metadata__\":{\"k\":1}," TA "}", 8, "must be strings");
    RAW_BAD("{\"__metadata__\":{\"k\":{\"x\":\"y\"}}," TA "}", 8, "must be strings");
    RAW_BAD("{\"__metadata__\":[]," TA "}", 8, "'{' opening __metadata__");
    RAW_BAD("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}," TA "}", 8, "duplicate __metadata__ key 'k'");
    RAW_BAD("{\"__metadata__\":{},\"__metadata__\":{}," TA "}", 8, "duplicate key '__metadata__'");

    /* sizes and tiling */
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "'a': data_offsets span 8 bytes");
    RAW_BAD("{" TA ",\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 12, "overlap");
    RAW_BAD("{" TA ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "overlap");
    RAW_BAD("{" TA ",\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}", 16, "'b': hole");
    RAW_BAD("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "hole");
    RAW_BAD("{" TA ",\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 8, "'b': data_offsets end 12 is past the end");
    RAW_BAD("{" TA "," TB "}", 16, "trailing");
    RAW_BAD("{}", 4, "trailing");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "reversed");
    RAW_BAD("{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, "whole number of bytes");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 8,
            "overflows");
    RAW_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}}", 8,
            "overflows");
    remove(raw);
}

/* ------------------------------------------------------ malformed llm.c */

static void test_malformed_llmc(void) {
    pz_gpt2_config c, rc;
    pz_gpt2_preset("tiny", &c);
    model a, b;
    model_new(&a, &c, pz_whole_model(&c), 11);
    const char *good = tp("good.bin"), *bad = tp("bad.bin");
    CHECK_STATUS(pz_ckpt_save_llmc(good, &a.p, 3), PZ_OK, NULL);
    size_t len;
    uint8_t *bytes = read_bytes(good, &len);
    int32_t *hdr = (int32_t *)(void *)bytes;

    /* missing file */
    CHECK_STATUS(pz_ckpt_read_config(tp("nope.bin"), &rc, NULL), PZ_ERR_IO, "nope.bin");
    model_new(&b, &c, pz_whole_model(&c), 0);
    CHECK_STATUS(pz_ckpt_load(tp("nope.bin"), &b.p), PZ_ERR_IO, "cannot open");

    /* wrong magic: another llm.c file, or no llm.c file at all */
    hdr[0] = 20240327;
    write_bytes(bad, bytes, len);
    CHECK_STATUS(pz_ckpt_read_config(bad, &rc, NULL), PZ_ERR_FORMAT, "debug state");
    CHECK_STATUS(pz_ckpt_load(bad, &b.p), PZ_ERR_FORMAT, "not a model");
    hdr[0] = 20240325;
    write_bytes(bad, bytes, len);
    CHECK_STATUS(pz_ckpt_read_config(bad, &rc, NULL), PZ_ERR_FORMAT, "not a model checkpoint");
    CHECK_STATUS(pz_ckpt_load(bad, &b.p), PZ_ERR_FORMAT, "20240326");
    hdr[0] = PZ_LLMC_MODEL_MAGIC;

    /* versions */
    int retired[3] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        hdr[1] = retired[i];
        write_bytes(bad, bytes, len);
        char want[32];
        snprintf(want, sizeof want, "version %d", retired[i]);
        CHECK_STATUS(pz_ckpt_read_config(bad, &rc, NULL), PZ_ERR_FORMAT, want);
        CHECK_STATUS(pz_ckpt_load(bad, &b.p), PZ_ERR_FORMAT, "retired");
    }
    hdr[1] = 6;
    write_bytes(bad, bytes, len);
    CHECK_STATUS(pz_ckpt_read_config(bad, &rc, NULL), PZ_ERR_FORMAT, "unknown llm.c model version 6");
    hdr[1] = 5; /* a v3 payload under a v5 header is twice too long */
    write_bytes(bad, bytes, len);
    CHECK_STATUS(pz_ckpt_read_config(bad, &rc, NULL), PZ_ERR_FORMAT, "unexpected bytes");
    hdr[1] = 3;

    /* truncated: in the payload, in the header, trailing bytes */
    write_bytes(bad, bytes, len - 4);
    CHECK_STATUS(pz_ckpt_read_config(bad, &rc, NULL), PZ_ERR_IO, "truncated");
    CHECK_STATUS(pz_ckpt_load(bad, &b.p), PZ_ERR_IO, "truncated");
    write_bytes(bad, bytes, 600);
    CHECK_STATUS(pz_ckpt_read_config(bad, &rc, NULL), PZ_ERR_IO, "truncated");
    write_bytes(bad, bytes, 3);
    CHECK_STATUS(pz_ckpt_read_config(bad, &rc, NULL), PZ_ERR_FORMAT, "too short");
    uint8_t *longer = xcalloc(len + 8, 1);
    memcpy(longer, bytes, len);
    write_bytes(bad, longer, len + 8);
    CHECK_STATUS(pz_ckpt_read_config(bad, &rc, NULL), PZ_ERR_FORMAT, "unexpected bytes");
    free(longer);

    /* header fields that do not fit together */
    hdr[5] = 5; /* heads do not divide channels 96 */
    write_bytes(bad, bytes, len);
    CHECK_STATUS(pz_ckpt_read_config(bad, &rc, NULL), PZ_ERR_FORMAT, "does not divide");
    CHECK_STATUS(pz_ckpt_load(bad, &b.p), PZ_ERR_FORMAT, bad);
    hdr[5] = c.num_heads;
    hdr[7] = c.vocab_size - 1; /* Vp < V */
    write_bytes(bad, bytes, len);
    CHECK_STATUS(pz_ckpt_read_config(bad, &rc, NULL), PZ_ERR_FORMAT, "padded_vocab_size");
    hdr[7] = c.padded_vocab_size;
    hdr[6] = -96;
    write_bytes(bad, bytes, len);
    CHECK_STATUS(pz_ckpt_read_config(bad, &rc, NULL), PZ_ERR_FORMAT, "channels");
    hdr[6] = 1 << 30;
    write_bytes(bad, bytes, len);
    CHECK_STATUS(pz_ckpt_read_config(bad, &rc, NULL), PZ_ERR_FORMAT, NULL);
    hdr[6] = c.channels;

    /* a good file into a model of another shape */
    pz_gpt2_config other = c;
    other.padded_vocab_size = 384;
    model o;
    model_new(&o, &other, pz_whole_model(&other), 0);
    CHECK_STATUS(pz_ckpt_load(good, &o.p), PZ_ERR_SHAPE, "padded_vocab_size");
    model_free(&o);

    /* bad calls */
    CHECK_STATUS(pz_ckpt_save_llmc(bad, &a.p, 4), PZ_ERR_ARG, "version 4");
    CHECK_STATUS(pz_ckpt_save_llmc(bad, &a.p, 1), PZ_ERR_ARG, "version 1");

    model_free(&b);
    model_free(&a);
    free(bytes);
    remove(good);
    remove(bad);
}

/* ----------------------------------------------------------- failed saves */

static void test_failed_saves(void) {
    pz_gpt2_config c;
    pz_gpt2_preset("tiny", &c);
    model a;
    model_new(&a, &c, pz_whole_model(&c), 2);

    /* into a directory that does not exist */
    char nodir[600];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/m.safetensors", tmpdir);
    CHECK_STATUS(pz_ckpt_save_safetensors(nodir, &a.p), PZ_ERR_IO, "no/such/dir");
    CHECK(!exists(nodir), "failed save left %s", nodir);
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/m.bin", tmpdir);
    CHECK_STATUS(pz_ckpt_save_llmc(nodir, &a.p, 3), PZ_ERR_IO, NULL);
    CHECK_STATUS(pz_ckpt_save(nodir, &a.p, PZ_CKPT_AUTO), PZ_ERR_IO, NULL);
    CHECK(!exists(nodir), "failed save left %s", nodir);

    /* a write that fails half way (file size limit): the old file survives
     * untouched and no temporary is left behind */
    const char *dst = tp("keep.safetensors"), *dstb = tp("keep.bin");
    write_bytes(dst, "old", 3);
    write_bytes(dstb, "old", 3);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN); /* get EFBIG instead of a signal */
    lim = old;
    lim.rlim_cur = 64 * 1024;
    if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
        CHECK_STATUS(pz_ckpt_save_safetensors(dst, &a.p), PZ_ERR_IO, NULL);
        CHECK_STATUS(pz_ckpt_save_llmc(dstb, &a.p, 3), PZ_ERR_IO, NULL);
        CHECK_STATUS(pz_ckpt_save_llmc(dstb, &a.p, 5), PZ_ERR_IO, NULL);
        setrlimit(RLIMIT_FSIZE, &old);
        CHECK(file_size(dst) == 3 && file_size(dstb) == 3, "a failed save replaced the old file");
    } else {
        fprintf(stderr, "note: cannot lower RLIMIT_FSIZE, skipping the half-written save check\n");
    }
    signal(SIGXFSZ, prev);

    /* a good save replaces the old file */
    CHECK_STATUS(pz_ckpt_save(dst, &a.p, PZ_CKPT_AUTO), PZ_OK, NULL);
    CHECK_STATUS(pz_ckpt_save(dstb, &a.p, PZ_CKPT_AUTO), PZ_OK, NULL);
    pz_ckpt_format fmt;
    pz_gpt2_config rc;
    CHECK_STATUS(pz_ckpt_read_config(dst, &rc, &fmt), PZ_OK, NULL);
    CHECK(fmt == PZ_CKPT_SAFETENSORS, "auto format for .safetensors");
    CHECK_STATUS(pz_ckpt_read_config(dstb, &rc, &fmt), PZ_OK, NULL);
    CHECK(fmt == PZ_CKPT_LLMC, "auto format for .bin");
    CHECK(count_tmp_leftovers() == 0, "temporary files left in %s", tmpdir);

    /* the writer refuses bad tensor lists before touching the disk */
    float x[2] = {1, 2};
    pz_st_write_tensor ws[2] = {{.name = "x", .dtype = PZ_ST_F32, .ndim = 1, .shape = {2}, .data = x},
                                {.name = "x", .dtype = PZ_ST_F32, .ndim = 1, .shape = {2}, .data = x}};
    CHECK_STATUS(pz_st_write(tp("w.safetensors"), ws, 2, NULL, 0), PZ_ERR_ARG, "twice");
    ws[1].name = "__metadata__";
    CHECK_STATUS(pz_st_write(tp("w.safetensors"), ws, 2, NULL, 0), PZ_ERR_ARG, NULL);
    ws[1].name = "y";
    ws[1].dtype = PZ_ST_F4;
    CHECK_STATUS(pz_st_write(tp("w.safetensors"), ws, 2, NULL, 0), PZ_ERR_ARG, NULL);
    CHECK(!exists(tp("w.safetensors")), "refused write left a file");
    ws[1].dtype = PZ_ST_F32;
    /* metadata that needs escaping survives the round trip */
    pz_st_meta meta[1] = {{"k\"\\", "line\nbreak\x01"}};
    CHECK_STATUS(pz_st_write(tp("w.safetensors"), ws, 2, meta, 1), PZ_OK, NULL);
    pz_st_file f;
    CHECK_STATUS(pz_st_open(&f, tp("w.safetensors")), PZ_OK, NULL);
    const char *v = f.nmeta ? pz_st_meta_get(&f, "k\"\\") : NULL;
    CHECK(v && strcmp(v, "line\nbreak\x01") == 0, "escaped metadata round trip");
    pz_st_close(&f);

    remove(dst); remove(dstb); remove(tp("w.safetensors"));
    model_free(&a);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pz_test_ckpt_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }

    test_bf16();
    pz_gpt2_config tiny, padded = {16, 300, 384, 3, 2, 64};
    pz_gpt2_preset("tiny", &tiny);
    test_roundtrip("tiny", &tiny);
    test_roundtrip("V=300", &padded);
    test_written_layout();
    test_hf_files();
    test_malformed_safetensors();
    test_malformed_llmc();
    test_failed_saves();
    CHECK(count_tmp_leftovers() == 0, "temporary files left in %s", tmpdir);

    cleanup_tmpdir();
    return check_summary("test_checkpoint");
}
