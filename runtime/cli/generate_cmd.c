/* generate_cmd.c: see generate_cmd.h. */
#include "runtime/cli/generate_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/file.h"
#include "base/mem.h"
#include "base/parse.h"
#include "kernels/backend.h"
#include "stages/bpe.h"
#include "stages/gpt2_checkpoint.h"

/* "1,2,3" -> ids (malloc'ed), each in [0, V) */
static pz_status parse_ids(const char *s, int V, int **ids, int *n) {
    size_t cap = 1;
    for (const char *c = s; *c; c++) cap += *c == ',';
    int *v = xmalloc(cap * sizeof *v);
    int k = 0;
    const char *at = s;
    for (;;) {
        const char *end = strchr(at, ',');
        size_t len = end ? (size_t)(end - at) : strlen(at);
        char buf[32];
        if (len == 0 || len >= sizeof buf) {
            free(v);
            return pz_fail(PZ_ERR_ARG, "--prompt-ids: item %d is %s (expected comma-separated token ids)",
                           k + 1, len == 0 ? "empty" : "too long");
        }
        memcpy(buf, at, len);
        buf[len] = 0;
        long id;
        pz_status st = pz_parse_int(buf, 0, (long)V - 1, &id, "--prompt-ids");
        if (st != PZ_OK) {
            char why[256];   /* pz_fail overwrites the message it would read */
            snprintf(why, sizeof why, "%s", pz_last_error());
            free(v);
            return pz_fail(PZ_ERR_ARG, "%s (item %d; the model's vocabulary is [0, %d))", why, k + 1, V);
        }
        v[k++] = (int)id;
        if (!end) break;
        at = end + 1;
    }
    *ids = v;
    *n = k;
    return PZ_OK;
}

/* The tokenizer of --tokenizer, else of the model directory (NULL if none). */
static pz_status find_tokenizer(const pz_generate_opts *o, pz_bpe **b) {
    *b = NULL;
    if (o->tokenizer) return pz_bpe_load(o->tokenizer, b);
    struct stat sb;
    if (stat(o->model, &sb) != 0 || !S_ISDIR(sb.st_mode)) return PZ_OK;
    static const char *const names[] = {"tokenizer.json", "vocab.json"};
    for (int i = 0; i < 2; i++) {
        char *p = pz_path_join(o->model, names[i]);
        int there = pz_is_regular_file(p);
        free(p);
        if (there) return pz_bpe_load(o->model, b);
    }
    return PZ_OK;
}

typedef enum { OUT_BPE, OUT_BYTES, OUT_IDS } out_kind;

static void emit(out_kind k, const pz_bpe *b, int id) {
    if (k == OUT_BPE) {
        size_t n;
        const uint8_t *s = pz_bpe_token_bytes(b, (uint32_t)id, &n);
        if (s) fwrite(s, 1, n, stdout);
        else printf("<|id %d|>", id);   /* an id the tokenizer has no text for */
    } else if (k == OUT_BYTES) {
        putchar(id);
    } else {
        printf("%d ", id);
    }
    fflush(stdout);
}

pz_status pz_generate(const pz_generate_opts *o) {
    if ((o->prompt == NULL) == (o->prompt_ids == NULL))
        return pz_fail(PZ_ERR_ARG, "give exactly one of --prompt TEXT or --prompt-ids 1,2,3");
    const pz_backend *be = pz_backend_cpu();
    pz_gpt2_config cfg;
    pz_ckpt_format fmt;
    pz_status st = pz_ckpt_read_config_heads(o->model, o->heads, &cfg, &fmt);
    if (st) return st;
    const int V = cfg.vocab_size, maxT = cfg.max_seq_len;

    pz_bpe *bpe = NULL;
    if ((st = find_tokenizer(o, &bpe))) return st;
    out_kind ok = bpe ? OUT_BPE : V == 256 ? OUT_BYTES : OUT_IDS;
    if (bpe && pz_bpe_n_vocab(bpe) > (uint32_t)V)
        fprintf(stderr, "pipezip generate: warning: the tokenizer has %u ids, the model %d; "
                "a prompt token above %d is an error\n", pz_bpe_n_vocab(bpe), V, V - 1);

    int *ids = NULL, np = 0;
    if (o->prompt_ids) {
        st = parse_ids(o->prompt_ids, V, &ids, &np);
    } else if (ok == OUT_IDS) {
        st = pz_fail(PZ_ERR_ARG, "--prompt needs a tokenizer (--tokenizer, or tokenizer files in the model directory) "
                     "for a model of vocabulary %d; or give --prompt-ids", V);
    } else if (ok == OUT_BYTES) {
        np = (int)(strlen(o->prompt) < (size_t)maxT + 1 ? strlen(o->prompt) : (size_t)maxT + 1);
        ids = xmalloc(((size_t)np + 1) * sizeof *ids);
        for (int i = 0; i < np; i++) ids[i] = (unsigned char)o->prompt[i];
    } else {
        pz_bpe_enc *e = pz_bpe_enc_new(bpe);
        pz_bpe_ids enc = {0};
        st = pz_bpe_encode(e, o->prompt, strlen(o->prompt), "--prompt", &enc);
        pz_bpe_enc_free(e);
        ids = xmalloc((enc.n + 1) * sizeof *ids);
        for (size_t i = 0; st == PZ_OK && i < enc.n; i++) {
            if (enc.ids[i] >= (uint32_t)V)
                st = pz_fail(PZ_ERR_ARG, "--prompt: token %zu has id %u, outside the model's vocabulary [0, %d)",
                             i, enc.ids[i], V);
            ids[i] = (int)enc.ids[i];
        }
        np = (int)(enc.n < (size_t)maxT + 1 ? enc.n : (size_t)maxT + 1);
        free(enc.ids);
    }
    if (st == PZ_OK && np == 0) st = pz_fail(PZ_ERR_ARG, "the prompt is empty (it needs at least one token)");
    if (st == PZ_OK && np + o->max_new_tokens > maxT)
        st = pz_fail(PZ_ERR_ARG, "the prompt's %s%d tokens plus --max-new-tokens %d exceed the model's context of %d positions",
                     np > maxT ? "more than " : "", np > maxT ? maxT : np, o->max_new_tokens, maxT);
    if (st) {
        free(ids);
        pz_bpe_free(bpe);
        return st;
    }

    /* the model, on the host */
    pz_stage_range range = pz_whole_model(&cfg);
    float *mem = be->alloc(pz_stage_numel(&cfg, &range) * sizeof(float));
    pz_gpt2_params p;
    pz_gpt2_params_bind(&p, &cfg, &range, mem);
    st = pz_ckpt_load(o->model, &p);
    const int total = np + o->max_new_tokens;
    pz_gen g;
    if (st == PZ_OK) st = pz_gen_init(&g, be, &p, o->no_kv_cache ? total : np);
    if (st) {
        pz_gpt2_params_unbind(&p);
        be->free(mem);
        free(ids);
        pz_bpe_free(bpe);
        return st;
    }
    int *all = xmalloc((size_t)total * sizeof *all);
    memcpy(all, ids, (size_t)np * sizeof *ids);
    free(ids);
    ids = all;
    void *scratch = xmalloc(pz_sample_scratch_bytes(V));
    pz_rng rng;
    pz_rng_seed(&rng, o->seed);

    for (int i = 0; i < np; i++) emit(ok, bpe, ids[i]);
    double t0 = pz_now();
    st = pz_gen_forward(&g, ids, np);
    for (int n = np; st == PZ_OK && n < total; n++) {
        ids[n] = pz_sample(g.logits, V, &o->sampling, &rng, scratch);
        emit(ok, bpe, ids[n]);
        if (n + 1 == total) break;
        if (o->no_kv_cache) {
            pz_gen_reset(&g);
            st = pz_gen_forward(&g, ids, n + 1);
        } else {
            st = pz_gen_forward(&g, &ids[n], 1);
        }
    }
    double secs = pz_now() - t0;
    if (st == PZ_OK) {
        printf("\n{\"ids\":[");
        for (int i = 0; i < total; i++) printf(i ? ",%d" : "%d", ids[i]);
        printf("],\"prompt_tokens\":%d,\"new_tokens\":%d,\"kv_cache\":%s,\"seconds\":%.6f,\"tok_s\":%.2f}\n",
               np, o->max_new_tokens, o->no_kv_cache ? "false" : "true", secs,
               secs > 0 ? o->max_new_tokens / secs : 0.0);
        fflush(stdout);
    }
    free(scratch);
    pz_gen_free(&g);
    pz_gpt2_params_unbind(&p);
    be->free(mem);
    free(ids);
    pz_bpe_free(bpe);
    return st;
}
