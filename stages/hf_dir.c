/* hf_dir.c: see hf_dir.h. */
#include "stages/hf_dir.h"
#include "base/io/file.h"
#include "base/formats/json.h"
#include "base/mem.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdio.h>

#define MAX_JSON (1u << 20)   /* config.json is ~1 kB, an index ~30 kB for 100 shards */
/* ---------------------------------------------------------------- config.json */

static pz_status int_key(pz_json *p, const char *key, int *out, int allow_null) {
    if (allow_null && pz_json_lit(p, "null")) { *out = 0; return PZ_OK; }
    double v;
    int is_int;
    if (p->i >= p->n || !(p->s[p->i] == '-' || (p->s[p->i] >= '0' && p->s[p->i] <= '9')))
        return pz_fail(PZ_ERR_FORMAT, "%s: \"%s\" must be a whole number%s", p->what, key, allow_null ? " or null" : "");
    pz_status st = pz_json_number(p, &v, &is_int);
    if (st) return st;
    if (!is_int || !(v >= 1 && v <= (1 << 24)))
        return pz_fail(PZ_ERR_FORMAT, "%s: \"%s\" must be a whole number from 1 to %d", p->what, key, 1 << 24);
    *out = (int)v;
    return PZ_OK;
}

static pz_status bool_key(pz_json *p, const char *key, int *out) {
    if (pz_json_lit(p, "true")) *out = 1;
    else if (pz_json_lit(p, "false")) *out = 0;
    else return pz_fail(PZ_ERR_FORMAT, "%s: \"%s\" must be true or false", p->what, key);
    return PZ_OK;
}

static pz_status config_key(pz_json *p, const char *key, void *ctx) {
    pz_hf_config *hc = ctx;
    if (strcmp(key, "n_layer") == 0) return int_key(p, key, &hc->n_layer, 0);
    if (strcmp(key, "n_head") == 0) return int_key(p, key, &hc->n_head, 0);
    if (strcmp(key, "n_embd") == 0) return int_key(p, key, &hc->n_embd, 0);
    if (strcmp(key, "n_positions") == 0) return int_key(p, key, &hc->n_positions, 0);
    if (strcmp(key, "n_ctx") == 0) return int_key(p, key, &hc->n_ctx, 0);
    if (strcmp(key, "vocab_size") == 0) return int_key(p, key, &hc->vocab_size, 0);
    if (strcmp(key, "n_inner") == 0) return int_key(p, key, &hc->n_inner, 1);
    if (strcmp(key, "scale_attn_by_inverse_layer_idx") == 0) return bool_key(p, key, &hc->scale_attn_by_inverse_layer_idx);
    if (strcmp(key, "reorder_and_upcast_attn") == 0) return bool_key(p, key, &hc->reorder_and_upcast_attn);
    if (strcmp(key, "layer_norm_epsilon") == 0) {
        double v;
        int is_int;
        pz_status st = pz_json_number(p, &v, &is_int);
        if (st) return pz_fail(PZ_ERR_FORMAT, "%s: \"layer_norm_epsilon\" must be a number", p->what);
        if (!(v > 0 && v < 1)) return pz_fail(PZ_ERR_FORMAT, "%s: \"layer_norm_epsilon\" %g is not in (0, 1)", p->what, v);
        hc->layer_norm_epsilon = v;
        return PZ_OK;
    }
    if (strcmp(key, "activation_function") == 0) {
        if (p->i >= p->n || p->s[p->i] != '"')
            return pz_fail(PZ_ERR_FORMAT, "%s: \"activation_function\" must be a string", p->what);
        return pz_json_string(p, hc->activation_function, sizeof hc->activation_function, NULL);
    }
    return pz_json_skip(p);   /* the many keys that do not change the computation */
}

pz_status pz_hf_config_parse(const char *text, size_t len, const char *what, pz_hf_config *hc) {
    memset(hc, 0, sizeof *hc);
    hc->n_layer = hc->n_head = hc->n_embd = hc->n_positions = hc->n_ctx = hc->vocab_size = hc->n_inner = -1;
    hc->layer_norm_epsilon = -1.0;
    hc->scale_attn_by_inverse_layer_idx = hc->reorder_and_upcast_attn = -1;
    if (len > MAX_JSON) return pz_fail(PZ_ERR_FORMAT, "%s: %zu bytes, more than a config.json can be (%u)", what, len, MAX_JSON);
    pz_json p = pz_json_at(text, len, what);
    return pz_json_object(&p, config_key, hc, 1);
}

static pz_status read_small(const char *path, char **text, size_t *len) {
    uint8_t *b = NULL;
    pz_status st = pz_read_file_max(path, (size_t)64 << 20, &b, len);
    if (st) return st;
    if (*len > MAX_JSON) {
        free(b);
        return pz_fail(PZ_ERR_FORMAT, "%s: %zu bytes, more than %u", path, *len, MAX_JSON);
    }
    *text = (char *)b;
    return PZ_OK;
}

pz_status pz_hf_config_read(const char *path, pz_hf_config *hc) {
    char *text = NULL;
    size_t len = 0;
    pz_status st = read_small(path, &text, &len);
    if (st) return st;
    st = pz_hf_config_parse(text, len, path, hc);
    free(text);
    return st;
}

/* the published GPT-2's LayerNorm epsilon, which kernels/ use (LN_EPS) */
#define GPT2_LN_EPS 1e-5

pz_status pz_hf_config_check(const pz_hf_config *hc, const char *what, pz_gpt2_config *cfg) {
    const struct { const char *key; int v, got; const char *from; } ks[] = {
        {"n_embd", hc->n_embd, cfg->channels, "the tensor shapes"},
        {"vocab_size", hc->vocab_size, cfg->vocab_size, "wte.weight"},
        {"n_positions", hc->n_positions, cfg->max_seq_len, "wpe.weight"},
        {"n_ctx", hc->n_ctx, cfg->max_seq_len, "wpe.weight"},
        {"n_layer", hc->n_layer, cfg->num_layers, "the blocks h.N"},
        {"n_head", hc->n_head, cfg->num_heads ? cfg->num_heads : hc->n_head, "__metadata__ n_head"},
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (ks[i].v >= 0 && ks[i].v != ks[i].got)
            return pz_fail(PZ_ERR_SHAPE, "%s: config.json \"%s\" is %d, but %s: %d", what, ks[i].key, ks[i].v,
                           ks[i].from, ks[i].got);
    if (hc->n_inner > 0 && hc->n_inner != 4 * cfg->channels)
        return pz_fail(PZ_ERR_SHAPE, "%s: \"n_inner\": %d, but GPT-2's MLP (and the tensors) have 4 x n_embd = %d",
                       what, hc->n_inner, 4 * cfg->channels);
    if (hc->layer_norm_epsilon >= 0 && fabs(hc->layer_norm_epsilon - GPT2_LN_EPS) > 1e-12)
        return pz_fail(PZ_ERR_FORMAT, "%s: \"layer_norm_epsilon\": %g, but pipezip's LayerNorm uses %g", what,
                       hc->layer_norm_epsilon, GPT2_LN_EPS);
    if (hc->activation_function[0] && strcmp(hc->activation_function, "gelu_new") != 0 &&
        strcmp(hc->activation_function, "gelu_pytorch_tanh") != 0)
        return pz_fail(PZ_ERR_FORMAT, "%s: \"activation_function\": \"%s\", but pipezip computes GPT-2's tanh GELU "
                       "(\"gelu_new\")", what, hc->activation_function);
    if (hc->scale_attn_by_inverse_layer_idx == 1 || hc->reorder_and_upcast_attn == 1)
        return pz_fail(PZ_ERR_FORMAT, "%s: \"%s\": true is not supported (GPT-2 attention scaling only)", what,
                       hc->scale_attn_by_inverse_layer_idx == 1 ? "scale_attn_by_inverse_layer_idx"
                                                                : "reorder_and_upcast_attn");
    if (hc->n_head > 0) cfg->num_heads = hc->n_head;
    return PZ_OK;
}

pz_status pz_hf_config_write(const char *path, const pz_gpt2_config *c) {
    pz_atomic_file af;
    pz_status st = pz_atomic_open(&af, path);
    if (st) return st;
    fprintf(af.f,
            "{\n  \"model_type\": \"gpt2\",\n  \"architectures\": [\"GPT2LMHeadModel\"],\n"
            "  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_embd\": %d,\n  \"n_positions\": %d,\n  \"n_ctx\": %d,\n"
            "  \"vocab_size\": %d,\n  \"n_inner\": null,\n  \"layer_norm_epsilon\": 1e-05,\n"
            "  \"activation_function\": \"gelu_new\",\n  \"scale_attn_weights\": true,\n"
            "  \"tie_word_embeddings\": true,\n  \"torch_dtype\": \"float32\"\n}\n",
            c->num_layers, c->num_heads, c->channels, c->max_seq_len, c->max_seq_len, c->vocab_size);
    return pz_atomic_commit(&af);
}

/* ---------------------------------------------------------------- index.json */

typedef struct {
    pz_hf_index *ix;
    int caps, capt, saw_map;
} index_ctx;

static pz_status weight_map_entry(pz_json *p, const char *key, void *vctx) {
    index_ctx *c = vctx;
    pz_hf_index *ix = c->ix;
    char shard[256];
    if (p->i >= p->n || p->s[p->i] != '"')
        return pz_fail(PZ_ERR_FORMAT, "%s: weight_map[\"%s\"] must be a shard file name", p->what, key);
    pz_status st = pz_json_string(p, shard, sizeof shard, NULL);
    if (st) return st;
    if (!shard[0] || strchr(shard, '/') || strcmp(shard, ".") == 0 || strcmp(shard, "..") == 0)
        return pz_fail(PZ_ERR_FORMAT, "%s: weight_map[\"%s\"] = \"%s\" is not a plain file name in the model "
                       "directory", p->what, key, shard);
    int s = -1;
    for (int k = 0; k < ix->nshards; k++)
        if (strcmp(ix->shard_names[k], shard) == 0) s = k;
    if (s < 0) {
        if (ix->nshards == c->caps) {
            c->caps = c->caps ? 2 * c->caps : 8;
            ix->shard_names = realloc(ix->shard_names, (size_t)c->caps * sizeof *ix->shard_names);
            if (!ix->shard_names) pz_die("out of memory");
        }
        s = ix->nshards++;
        ix->shard_names[s] = xstrdup(shard);
    }
    if (ix->ntensors == c->capt) {
        c->capt = c->capt ? 2 * c->capt : 64;
        ix->tensor_names = realloc(ix->tensor_names, (size_t)c->capt * sizeof *ix->tensor_names);
        ix->tensor_shard = realloc(ix->tensor_shard, (size_t)c->capt * sizeof *ix->tensor_shard);
        if (!ix->tensor_names || !ix->tensor_shard) pz_die("out of memory");
    }
    ix->tensor_names[ix->ntensors] = xstrdup(key);
    ix->tensor_shard[ix->ntensors++] = s;
    return PZ_OK;
}

static pz_status index_key(pz_json *p, const char *key, void *vctx) {
    index_ctx *c = vctx;
    if (strcmp(key, "weight_map") != 0) return pz_json_skip(p);
    c->saw_map = 1;
    /* a nested object: walk it with the same object reader on a sub-range */
    size_t start = p->i;
    pz_status st = pz_json_skip(p);
    if (st) return st;
    pz_json sub = pz_json_at(p->s + start, p->i - start, p->what);
    return pz_json_object(&sub, weight_map_entry, c, 1);
}

pz_status pz_hf_index_parse(const char *text, size_t len, const char *what, pz_hf_index *ix) {
    memset(ix, 0, sizeof *ix);
    if (len > MAX_JSON) return pz_fail(PZ_ERR_FORMAT, "%s: %zu bytes, more than an index can be (%u)", what, len, MAX_JSON);
    index_ctx c = {ix, 0, 0, 0};
    pz_json p = pz_json_at(text, len, what);
    pz_status st = pz_json_object(&p, index_key, &c, 1);
    if (!st && !c.saw_map) st = pz_fail(PZ_ERR_FORMAT, "%s: no \"weight_map\"", what);
    if (!st && ix->ntensors == 0) st = pz_fail(PZ_ERR_FORMAT, "%s: \"weight_map\" is empty", what);
    if (st) pz_hf_index_free(ix);
    return st;
}

void pz_hf_index_free(pz_hf_index *ix) {
    for (int k = 0; k < ix->nshards; k++) free(ix->shard_names[k]);
    for (int k = 0; k < ix->ntensors; k++) free(ix->tensor_names[k]);
    free(ix->shard_names);
    free(ix->tensor_names);
    free(ix->tensor_shard);
    memset(ix, 0, sizeof *ix);
}

/* ---------------------------------------------------------------- files */

static pz_status use_index(pz_model_files *mf, const char *dir, const char *index) {
    char *text = NULL;
    size_t len = 0;
    pz_hf_index ix;
    pz_status st = read_small(index, &text, &len);
    if (st) return st;
    st = pz_hf_index_parse(text, len, index, &ix);
    free(text);
    if (st) return st;
    mf->index = xstrdup(index);
    mf->nshards = ix.nshards;
    mf->shards = xcalloc((size_t)ix.nshards, sizeof *mf->shards);
    for (int k = 0; k < ix.nshards; k++) mf->shards[k] = pz_path_join(dir, ix.shard_names[k]);
    mf->ix = ix;   /* kept for pz_st_set_open's tensor -> shard checks */
    return PZ_OK;
}

pz_status pz_model_files_find(const char *path, pz_model_files *mf) {
    memset(mf, 0, sizeof *mf);
    struct stat sb;
    if (stat(path, &sb) != 0) return pz_fail(PZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    pz_status st = PZ_OK;
    char *dir = NULL;
    if (S_ISDIR(sb.st_mode)) {
        dir = xstrdup(path);
        char *single = pz_path_join(dir, "model.safetensors"), *index = pz_path_join(dir, "model.safetensors.index.json");
        if (pz_is_regular_file(single)) {
            mf->weights = single;
            single = NULL;
        } else if (pz_is_regular_file(index)) {
            st = use_index(mf, dir, index);
        } else {
            char *pickle = pz_path_join(dir, "pytorch_model.bin");
            st = pz_fail(PZ_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json in this directory%s",
                         path, pz_is_regular_file(pickle) ? " (pytorch_model.bin is a PyTorch pickle, which pipezip does not "
                                                 "read: convert it to safetensors)" : "");
            free(pickle);
        }
        free(single);
        free(index);
    } else {
        const char *slash = strrchr(path, '/');
        dir = slash ? (slash == path ? xstrdup("/") : strndup(path, (size_t)(slash - path))) : xstrdup(".");
        if (!dir) pz_die("out of memory");
        if (pz_ends_with(path, ".index.json")) st = use_index(mf, dir, path);
        else mf->weights = xstrdup(path);
    }
    if (st == PZ_OK) {
        char *cfg = pz_path_join(dir, "config.json");
        if (pz_is_regular_file(cfg)) mf->config = cfg;
        else free(cfg);
    } else {
        pz_model_files_free(mf);
    }
    free(dir);
    return st;
}

void pz_model_files_free(pz_model_files *mf) {
    free(mf->weights);
    free(mf->index);
    for (int k = 0; k < mf->nshards; k++) free(mf->shards[k]);
    free(mf->shards);
    free(mf->config);
    pz_hf_index_free(&mf->ix);
    memset(mf, 0, sizeof *mf);
}

/* ---------------------------------------------------------------- shards as one file */

static int by_name(const void *a, const void *b) {
    return strcmp(((const pz_st_tensor *)a)->name, ((const pz_st_tensor *)b)->name);
}

pz_status pz_st_set_open(pz_st_set *s, const pz_model_files *mf) {
    memset(s, 0, sizeof *s);
    pz_status st;
    if (mf->weights) {
        s->files = xcalloc(1, sizeof *s->files);
        if ((st = pz_st_open(&s->files[0], mf->weights))) { pz_st_set_close(s); return st; }
        s->nfiles = 1;
        s->view = s->files[0];
        return PZ_OK;
    }
    const pz_hf_index *ix = &mf->ix;
    st = PZ_OK;
    s->files = xcalloc((size_t)mf->nshards, sizeof *s->files);
    size_t total = 0;
    for (int k = 0; k < mf->nshards && !st; k++) {
        if ((st = pz_st_open(&s->files[k], mf->shards[k]))) break;
        s->nfiles = k + 1;
        total += (size_t)s->files[k].ntensors;
    }
    if (!st) {
        s->merged_ = xcalloc(total ? total : 1, sizeof *s->merged_);
        size_t at = 0;
        for (int k = 0; k < s->nfiles; k++)
            for (int t = 0; t < s->files[k].ntensors; t++) s->merged_[at++] = s->files[k].tensors[t];
        qsort(s->merged_, total, sizeof *s->merged_, by_name);
        for (size_t t = 1; t < total && !st; t++)
            if (strcmp(s->merged_[t - 1].name, s->merged_[t].name) == 0)
                st = pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s' is in two shards", mf->index, s->merged_[t].name);
        /* every tensor where the index says, and nothing the index does not name */
        for (int i = 0; i < ix->ntensors && !st; i++) {
            const pz_st_tensor *t = pz_st_find(&s->files[ix->tensor_shard[i]], ix->tensor_names[i]);
            if (!t)
                st = pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s' is not in %s, where the index puts it", mf->index,
                             ix->tensor_names[i], mf->shards[ix->tensor_shard[i]]);
        }
        if (!st && total != (size_t)ix->ntensors) {
            for (size_t t = 0; t < total && !st; t++) {
                int named = 0;
                for (int i = 0; i < ix->ntensors && !named; i++) named = strcmp(ix->tensor_names[i], s->merged_[t].name) == 0;
                if (!named)
                    st = pz_fail(PZ_ERR_FORMAT, "%s: tensor '%s' is in a shard but not in the index", mf->index,
                                 s->merged_[t].name);
            }
            if (!st) st = pz_fail(PZ_ERR_FORMAT, "%s: the index names %d tensors, the shards hold %zu", mf->index,
                                  ix->ntensors, total);
        }
        s->view.tensors = s->merged_;
        s->view.ntensors = (int)total;
    }
    if (st) pz_st_set_close(s);
    return st;
}

void pz_st_set_close(pz_st_set *s) {
    for (int k = 0; k < s->nfiles; k++) pz_st_close(&s->files[k]);
    free(s->files);
    free(s->merged_);
    memset(s, 0, sizeof *s);
}
