/* hf_dir.c: see hf_dir.h. */
#include "stages/hf_dir.h"
#include "base/file.h"
#include "base/mem.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdio.h>

#define MAX_JSON (1u << 20)   /* config.json is ~1 kB, an index ~30 kB for 100 shards */
#define MAX_DEPTH 64

/* ---------------------------------------------------------------- JSON */

typedef struct {
    const char *s;
    size_t n, i;
    const char *what;
    int depth;
} jp;

static pz_status jfail(jp *p, const char *msg) {
    return pz_fail(PZ_ERR_FORMAT, "%s: bad JSON at byte %zu: %s", p->what, p->i, msg);
}

static void ws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A string at p->i (the opening quote); decoded UTF-8 into out (cap bytes,
 * NUL-terminated) when out is not NULL. A string longer than cap - 1 bytes
 * or holding a NUL is refused when out is given. */
static pz_status jstring(jp *p, char *out, size_t cap) {
    if (p->i >= p->n || p->s[p->i] != '"') return jfail(p, "expected a string");
    p->i++;
    size_t k = 0;
    for (;;) {
        if (p->i >= p->n) return jfail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->i++];
        unsigned long cp;
        if (c == '"') break;
        if (c < 0x20) return jfail(p, "control character in a string");
        if (c != '\\') {
            cp = c;   /* a byte of UTF-8, copied as is */
        } else {
            if (p->i >= p->n) return jfail(p, "unterminated escape");
            char e = p->s[p->i++];
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u': {
                if (p->i + 4 > p->n) return jfail(p, "short \\u escape");
                cp = 0;
                for (int d = 0; d < 4; d++) {
                    int h = hexval(p->s[p->i++]);
                    if (h < 0) return jfail(p, "bad hex digit in \\u escape");
                    cp = cp * 16 + (unsigned long)h;
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {   /* a surrogate pair */
                    if (p->i + 6 > p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
                        return jfail(p, "lone high surrogate");
                    p->i += 2;
                    unsigned long lo = 0;
                    for (int d = 0; d < 4; d++) {
                        int h = hexval(p->s[p->i++]);
                        if (h < 0) return jfail(p, "bad hex digit in \\u escape");
                        lo = lo * 16 + (unsigned long)h;
                    }
                    if (lo < 0xDC00 || lo > 0xDFFF) return jfail(p, "bad low surrogate");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return jfail(p, "lone low surrogate");
                }
                break;
            }
            default: return jfail(p, "unknown escape");
            }
            if (cp == 0 && out) return jfail(p, "NUL in a string");
        }
        if (!out) continue;
        /* UTF-8 encode cp (escapes) or copy the byte */
        unsigned char buf[4];
        int m;
        if (c != '\\' || cp < 0x80) { buf[0] = (unsigned char)cp; m = 1; }
        else if (cp < 0x800) { buf[0] = (unsigned char)(0xC0 | (cp >> 6)); buf[1] = (unsigned char)(0x80 | (cp & 63)); m = 2; }
        else if (cp < 0x10000) {
            buf[0] = (unsigned char)(0xE0 | (cp >> 12)); buf[1] = (unsigned char)(0x80 | ((cp >> 6) & 63));
            buf[2] = (unsigned char)(0x80 | (cp & 63)); m = 3;
        } else {
            buf[0] = (unsigned char)(0xF0 | (cp >> 18)); buf[1] = (unsigned char)(0x80 | ((cp >> 12) & 63));
            buf[2] = (unsigned char)(0x80 | ((cp >> 6) & 63)); buf[3] = (unsigned char)(0x80 | (cp & 63)); m = 4;
        }
        if (k + (size_t)m >= cap) return jfail(p, "string too long");
        memcpy(out + k, buf, (size_t)m);
        k += (size_t)m;
    }
    if (out) out[k] = 0;
    return PZ_OK;
}

/* A number (JSON grammar exactly); *is_int when it has no fraction or exponent. */
static pz_status jnumber(jp *p, double *v, int *is_int) {
    size_t b = p->i;
    if (p->i < p->n && p->s[p->i] == '-') p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return jfail(p, "expected a number");
    if (p->s[p->i] == '0') p->i++;
    else while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    *is_int = 1;
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        *is_int = 0;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return jfail(p, "digit expected after '.'");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        *is_int = 0;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return jfail(p, "digit expected in exponent");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    char buf[64];
    size_t len = p->i - b;
    if (len >= sizeof buf) { *v = HUGE_VAL; return PZ_OK; }   /* out of every range we accept */
    memcpy(buf, p->s + b, len);
    buf[len] = 0;
    *v = strtod(buf, NULL);
    return PZ_OK;
}

static int lit(jp *p, const char *w) {
    size_t l = strlen(w);
    if (p->i + l > p->n || memcmp(p->s + p->i, w, l) != 0) return 0;
    p->i += l;
    return 1;
}

/* Any value, validated and skipped. */
static pz_status jskip(jp *p) {
    ws(p);
    if (p->i >= p->n) return jfail(p, "value expected");
    char c = p->s[p->i];
    pz_status st;
    if (c == '"') return jstring(p, NULL, 0);
    if (c == '{' || c == '[') {
        if (++p->depth > MAX_DEPTH) return jfail(p, "nested too deeply");
        char close = c == '{' ? '}' : ']';
        p->i++;
        ws(p);
        if (p->i < p->n && p->s[p->i] == close) { p->i++; p->depth--; return PZ_OK; }
        for (;;) {
            ws(p);
            if (c == '{') {
                if ((st = jstring(p, NULL, 0))) return st;
                ws(p);
                if (p->i >= p->n || p->s[p->i] != ':') return jfail(p, "':' expected");
                p->i++;
            }
            if ((st = jskip(p))) return st;
            ws(p);
            if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
            if (p->i < p->n && p->s[p->i] == close) { p->i++; p->depth--; return PZ_OK; }
            return jfail(p, c == '{' ? "',' or '}' expected" : "',' or ']' expected");
        }
    }
    if (lit(p, "true") || lit(p, "false") || lit(p, "null")) return PZ_OK;
    double v;
    int is_int;
    return jnumber(p, &v, &is_int);
}

/* Walks the top-level object, calling on_key(p, key, ctx) with p->i at the
 * value; the callback consumes the value. Duplicate top-level keys are refused. */
typedef pz_status (*key_fn)(jp *p, const char *key, void *ctx);

static pz_status jobject(jp *p, key_fn on_key, void *ctx, int check_dups) {
    pz_status st = PZ_OK;
    char (*seen)[128] = NULL;
    int nseen = 0, capseen = 0;
    ws(p);
    if (p->i >= p->n || p->s[p->i] != '{') return jfail(p, "the top level must be an object");
    p->i++;
    ws(p);
    if (p->i < p->n && p->s[p->i] == '}') { p->i++; goto end; }
    for (;;) {
        char key[128];
        ws(p);
        if ((st = jstring(p, key, sizeof key))) goto cleanup;
        if (check_dups) {
            for (int k = 0; k < nseen; k++)
                if (strcmp(seen[k], key) == 0) { st = jfail(p, "duplicate key"); goto cleanup; }
            if (nseen == capseen) {
                capseen = capseen ? 2 * capseen : 32;
                seen = realloc(seen, (size_t)capseen * sizeof *seen);
                if (!seen) pz_die("out of memory");
            }
            memcpy(seen[nseen++], key, sizeof key);
        }
        ws(p);
        if (p->i >= p->n || p->s[p->i] != ':') { st = jfail(p, "':' expected"); goto cleanup; }
        p->i++;
        ws(p);
        if ((st = on_key(p, key, ctx))) goto cleanup;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
        if (p->i < p->n && p->s[p->i] == '}') { p->i++; break; }
        st = jfail(p, "',' or '}' expected");
        goto cleanup;
    }
end:
    ws(p);
    if (p->i != p->n) st = jfail(p, "text after the top-level object");
cleanup:
    free(seen);
    return st;
}

/* ---------------------------------------------------------------- config.json */

static pz_status int_key(jp *p, const char *key, int *out, int allow_null) {
    if (allow_null && lit(p, "null")) { *out = 0; return PZ_OK; }
    double v;
    int is_int;
    if (p->i >= p->n || !(p->s[p->i] == '-' || (p->s[p->i] >= '0' && p->s[p->i] <= '9')))
        return pz_fail(PZ_ERR_FORMAT, "%s: \"%s\" must be a whole number%s", p->what, key, allow_null ? " or null" : "");
    pz_status st = jnumber(p, &v, &is_int);
    if (st) return st;
    if (!is_int || !(v >= 1 && v <= (1 << 24)))
        return pz_fail(PZ_ERR_FORMAT, "%s: \"%s\" must be a whole number from 1 to %d", p->what, key, 1 << 24);
    *out = (int)v;
    return PZ_OK;
}

static pz_status bool_key(jp *p, const char *key, int *out) {
    if (lit(p, "true")) *out = 1;
    else if (lit(p, "false")) *out = 0;
    else return pz_fail(PZ_ERR_FORMAT, "%s: \"%s\" must be true or false", p->what, key);
    return PZ_OK;
}

static pz_status config_key(jp *p, const char *key, void *ctx) {
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
        pz_status st = jnumber(p, &v, &is_int);
        if (st) return pz_fail(PZ_ERR_FORMAT, "%s: \"layer_norm_epsilon\" must be a number", p->what);
        if (!(v > 0 && v < 1)) return pz_fail(PZ_ERR_FORMAT, "%s: \"layer_norm_epsilon\" %g is not in (0, 1)", p->what, v);
        hc->layer_norm_epsilon = v;
        return PZ_OK;
    }
    if (strcmp(key, "activation_function") == 0) {
        if (p->i >= p->n || p->s[p->i] != '"')
            return pz_fail(PZ_ERR_FORMAT, "%s: \"activation_function\" must be a string", p->what);
        return jstring(p, hc->activation_function, sizeof hc->activation_function);
    }
    return jskip(p);   /* the many keys that do not change the computation */
}

pz_status pz_hf_config_parse(const char *text, size_t len, const char *what, pz_hf_config *hc) {
    memset(hc, 0, sizeof *hc);
    hc->n_layer = hc->n_head = hc->n_embd = hc->n_positions = hc->n_ctx = hc->vocab_size = hc->n_inner = -1;
    hc->layer_norm_epsilon = -1.0;
    hc->scale_attn_by_inverse_layer_idx = hc->reorder_and_upcast_attn = -1;
    if (len > MAX_JSON) return pz_fail(PZ_ERR_FORMAT, "%s: %zu bytes, more than a config.json can be (%u)", what, len, MAX_JSON);
    jp p = {text, len, 0, what, 0};
    return jobject(&p, config_key, hc, 1);
}

static pz_status read_small(const char *path, char **text, size_t *len) {
    uint8_t *b = NULL;
    pz_status st = pz_read_file(path, &b, len);
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

static pz_status weight_map_entry(jp *p, const char *key, void *vctx) {
    index_ctx *c = vctx;
    pz_hf_index *ix = c->ix;
    char shard[256];
    if (p->i >= p->n || p->s[p->i] != '"')
        return pz_fail(PZ_ERR_FORMAT, "%s: weight_map[\"%s\"] must be a shard file name", p->what, key);
    pz_status st = jstring(p, shard, sizeof shard);
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

static pz_status index_key(jp *p, const char *key, void *vctx) {
    index_ctx *c = vctx;
    if (strcmp(key, "weight_map") != 0) return jskip(p);
    c->saw_map = 1;
    /* a nested object: walk it with the same object reader on a sub-range */
    size_t start = p->i;
    pz_status st = jskip(p);
    if (st) return st;
    jp sub = {p->s + start, p->i - start, 0, p->what, 0};
    return jobject(&sub, weight_map_entry, c, 1);
}

pz_status pz_hf_index_parse(const char *text, size_t len, const char *what, pz_hf_index *ix) {
    memset(ix, 0, sizeof *ix);
    if (len > MAX_JSON) return pz_fail(PZ_ERR_FORMAT, "%s: %zu bytes, more than an index can be (%u)", what, len, MAX_JSON);
    index_ctx c = {ix, 0, 0, 0};
    jp p = {text, len, 0, what, 0};
    pz_status st = jobject(&p, index_key, &c, 1);
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

static char *join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *s = xmalloc(a + b + 2);
    memcpy(s, dir, a);
    s[a] = '/';
    memcpy(s + a + 1, name, b + 1);
    return s;
}

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

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
    for (int k = 0; k < ix.nshards; k++) mf->shards[k] = join(dir, ix.shard_names[k]);
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
        char *single = join(dir, "model.safetensors"), *index = join(dir, "model.safetensors.index.json");
        if (is_file(single)) {
            mf->weights = single;
            single = NULL;
        } else if (is_file(index)) {
            st = use_index(mf, dir, index);
        } else {
            char *pickle = join(dir, "pytorch_model.bin");
            st = pz_fail(PZ_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json in this directory%s",
                         path, is_file(pickle) ? " (pytorch_model.bin is a PyTorch pickle, which pipezip does not "
                                                 "read: convert it to safetensors)" : "");
            free(pickle);
        }
        free(single);
        free(index);
    } else {
        const char *slash = strrchr(path, '/');
        dir = slash ? (slash == path ? xstrdup("/") : strndup(path, (size_t)(slash - path))) : xstrdup(".");
        if (!dir) pz_die("out of memory");
        if (ends_with(path, ".index.json")) st = use_index(mf, dir, path);
        else mf->weights = xstrdup(path);
    }
    if (st == PZ_OK) {
        char *cfg = join(dir, "config.json");
        if (is_file(cfg)) mf->config = cfg;
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
