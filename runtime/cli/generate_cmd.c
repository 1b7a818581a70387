/* generate_cmd.c: see generate_cmd.h. */
#include "runtime/cli/generate_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/io/file.h"
#include "base/mem.h"
#include "base/parse.h"
#include "kernels/backend.h"
#include "runtime/plan/device.h"
#include "runtime/edge/edge.h"
#include "runtime/plan/partition.h"
#include "runtime/edge/policy.h"
#include "runtime/net/transport.h"
#include "stages/bpe/bpe.h"
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

/* The pipeline's part of a generation step for this rank: rank 0 gets the
 * tokens (n of them), later ranks the previous rank's hidden rows; the last
 * rank leaves logits in g. Edge ends: [0] for the prompt's n rows, [1] for
 * one row. */
typedef struct {
    pz_transport *tp;
    int rank, world, vocab;
    pz_edge_end tx[2], rx[2];
    uint8_t *wire;
    float *rows;
    size_t cap;
} gen_pipe;

static pz_status pipe_step(gen_pipe *gp, pz_gen *g, const int *tokens, int n, int k, uint64_t seed) {
    const int C = g->p->cfg.channels, first = gp->rank == 0, last = gp->rank == gp->world - 1, e = n > 1 ? 0 : 1;
    pz_status st = PZ_OK;
    uint64_t id = 0;
    size_t len = 0;
    if (first) {
        st = pz_gen_forward(g, tokens, n);
    } else {
        pz_request *r = NULL;
        char w[64];
        snprintf(w, sizeof w, "generation hidden state, edge %d-%d forward, step %d", gp->rank - 1, gp->rank, k);
        st = pz_transport_recv(gp->tp, gp->rank - 1, pz_tag(gp->rank - 1, (uint32_t)k, 0, PZ_KIND_ACT), gp->wire,
                               gp->cap, w, &r);
        if (st == PZ_OK) st = pz_transport_wait(gp->tp, r, &len);
        if (st == PZ_OK) st = pz_edge_decode(&gp->rx[e], gp->wire, len, seed, (uint64_t)k, 0, gp->rows, &id);
        if (st == PZ_OK) st = pz_gen_forward_hidden(g, gp->rows, n);
    }
    if (st != PZ_OK || last) return st;
    pz_request *r = NULL;
    char w[64];
    snprintf(w, sizeof w, "generation hidden state, edge %d-%d forward, step %d", gp->rank, gp->rank + 1, k);
    (void)C;
    pz_gen_hidden(g, gp->rows, n);   /* the received rows are used up: their buffer takes the output */
    st = pz_edge_encode(&gp->tx[e], gp->rows, &id, seed, (uint64_t)k, 0, gp->wire, &len);
    if (st == PZ_OK)
        st = pz_transport_send(gp->tp, gp->rank + 1, pz_tag(gp->rank, (uint32_t)k, 0, PZ_KIND_ACT), gp->wire, len, w,
                               &r);
    if (st == PZ_OK) st = pz_transport_wait(gp->tp, r, NULL);
    return st;
}

/* The token the last rank drew, to rank 0 (and its send on the last rank). */
static pz_status pipe_token(gen_pipe *gp, int *tok, int k) {
    pz_request *r = NULL;
    char w[64];
    snprintf(w, sizeof w, "generation token, rank %d to rank 0, step %d", gp->world - 1, k);
    const int last = gp->world - 1;
    pz_status st = PZ_OK;
    int32_t v = *tok;
    if (gp->rank == last) {
        st = pz_transport_send(gp->tp, 0, pz_tag(last, (uint32_t)k, 0, PZ_KIND_TOKEN), &v, 4, w, &r);
        if (st == PZ_OK) st = pz_transport_wait(gp->tp, r, NULL);
    } else if (gp->rank == 0) {
        size_t len = 0;
        st = pz_transport_recv(gp->tp, last, pz_tag(last, (uint32_t)k, 0, PZ_KIND_TOKEN), &v, 4, w, &r);
        if (st == PZ_OK) st = pz_transport_wait(gp->tp, r, &len);
        if (st == PZ_OK && (len != 4 || v < 0 || v >= gp->vocab))
            st = pz_fail(PZ_ERR_PEER, "generation step %d: rank %d sent a token of %zu bytes, id %d", k, last, len, v);
        *tok = v;
    }
    return st;
}

/* The generation loop of one rank of a pipeline (see pz_generate_rank). */
static pz_status generate_pipelined(const pz_generate_opts *o, pz_gen *g, int *ids, int np, int total, out_kind ok,
                                    const pz_bpe *bpe, int rank, int world, const char *addr, int port, void *scratch,
                                    pz_rng *rng) {
    const pz_gpt2_config *cfg = &g->p->cfg;
    const int C = cfg->channels;
    gen_pipe gp;
    memset(&gp, 0, sizeof gp);
    gp.rank = rank;
    gp.world = world;
    gp.vocab = cfg->vocab_size;
    pz_policy pol;
    pz_policy_init(&pol, world);
    pz_status st = o->compress ? pz_policy_parse(&pol, o->compress, "--compress") : PZ_OK;
    /* the edges' fwd codecs, without state: generation has no sample ids and
     * no training state to keep (as validation does) */
    char spec[2][512];
    const char *sp[2] = {NULL, NULL};   /* [0] the out edge, [1] the in edge */
    for (int side = 0; side < 2 && st == PZ_OK; side++) {
        int e = side == 0 ? rank : rank - 1;
        if (e < 0 || e >= world - 1) continue;
        const char *fs = pz_policy_codec(&pol, e, PZ_FWD);
        if (fs && (st = pz_policy_eval_spec(fs, spec[side], sizeof spec[side])) == PZ_OK) sp[side] = spec[side];
    }
    for (int k = 0; k < 2 && st == PZ_OK; k++) {
        int T = k == 0 ? np : 1;
        if (rank < world - 1 && (st = pz_edge_init(&gp.tx[k], rank, PZ_FWD, 1, sp[0], 1, T, C, 0)) != PZ_OK) break;
        if (rank > 0 && (st = pz_edge_init(&gp.rx[k], rank - 1, PZ_FWD, 0, sp[1], 1, T, C, 0)) != PZ_OK) break;
        size_t cap = gp.tx[k].cap > gp.rx[k].cap ? gp.tx[k].cap : gp.rx[k].cap;
        if (cap > gp.cap) gp.cap = cap;
    }
    if (st == PZ_OK && rank == 0)
        for (int e = 0; e < world - 1; e++) fputs("  ", stderr), pz_policy_print_edge(stderr, &pol, e);
    gp.wire = xaligned_alloc(gp.cap + 64);
    gp.rows = xmalloc((size_t)np * C * sizeof(float) + 64);
    pz_transport_opts to = {rank, world, addr, port, o->peer_timeout > 0 ? o->peer_timeout : 60.0,
                            o->peer_timeout > 0 ? o->peer_timeout : 60.0, 1,
                            o->job_secret, o->job_secret_len};
    if (st == PZ_OK) st = pz_transport_init(&gp.tp, &to);
    if (rank == 0)
        for (int i = 0; st == PZ_OK && i < np; i++) emit(ok, bpe, ids[i]);
    for (int n = np; st == PZ_OK && n < total; n++) {
        int k = n - np;
        /* step k: the prompt (k = 0) or the token drawn at step k-1 */
        st = k == 0 ? pipe_step(&gp, g, ids, np, 0, o->seed) : pipe_step(&gp, g, &ids[n - 1], 1, k, o->seed);
        int tok = 0;
        if (st == PZ_OK && rank == world - 1) tok = pz_sample(g->logits, cfg->vocab_size, &o->sampling, rng, scratch);
        if (st == PZ_OK) st = pipe_token(&gp, &tok, k);
        if (st == PZ_OK && rank == 0) {
            ids[n] = tok;
            emit(ok, bpe, tok);
        }
    }
    pz_transport_close(gp.tp, st != PZ_OK);
    for (int k = 0; k < 2; k++) {
        pz_edge_free(&gp.tx[k]);
        pz_edge_free(&gp.rx[k]);
    }
    free(gp.wire);
    free(gp.rows);
    pz_policy_free(&pol);
    return st;
}

pz_status pz_generate(const pz_generate_opts *o) { return pz_generate_rank(o, 0, 1, NULL, 0); }

/* A rank's part of the model: the whole of it, or its stage (print: the
 * partition table to stderr). */
static pz_status model_range(const pz_generate_opts *o, const pz_gpt2_config *cfg, int rank, int world, int print,
                             pz_stage_range *range) {
    *range = pz_whole_model(cfg);
    if (world == 1) return PZ_OK;
    if (o->no_kv_cache) return pz_fail(PZ_ERR_ARG, "--no-kv-cache is for one process only");
    pz_stage_range *ranges = xcalloc((size_t)world, sizeof *ranges);
    pz_status st = pz_partition(cfg, cfg->max_seq_len, world, o->split, ranges);
    if (st == PZ_OK) *range = ranges[rank];
    if (st == PZ_OK && print) pz_partition_print(stderr, cfg, cfg->max_seq_len, world, ranges);
    free(ranges);
    return st;
}

pz_status pz_generate_check(const pz_generate_opts *o) {
    pz_gpt2_config cfg;
    pz_ckpt_format fmt;
    pz_stage_range range;
    pz_status st = pz_ckpt_read_config_heads(o->model, o->heads, &cfg, &fmt);
    return st == PZ_OK ? model_range(o, &cfg, 0, o->stages, 0, &range) : st;
}

/* The prompt as token ids (from --prompt-ids, the bytes of --prompt, or
 * --prompt through the tokenizer), checked against the model's vocabulary V
 * and context maxT. *ids is set even on failure: the caller frees it. */
static pz_status prompt_tokens(const pz_generate_opts *o, pz_bpe *bpe, out_kind ok, int V, int maxT,
                               int **ids_out, int *np_out) {
    int *ids = NULL, np = 0;
    pz_status st = PZ_OK;
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
    *ids_out = ids;
    *np_out = np;
    return st;
}

pz_status pz_generate_rank(const pz_generate_opts *o, int rank, int world, const char *addr, int port) {
    if ((o->prompt == NULL) == (o->prompt_ids == NULL))
        return pz_fail(PZ_ERR_ARG, "give exactly one of --prompt TEXT or --prompt-ids 1,2,3");
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
    st = prompt_tokens(o, bpe, ok, V, maxT, &ids, &np);
    if (st) {
        free(ids);
        pz_bpe_free(bpe);
        return st;
    }

    /* the model, on the host: the whole of it, or this rank's stage */
    pz_stage_range range;
    if ((st = model_range(o, &cfg, rank, world, rank == 0, &range)) != PZ_OK) {
        free(ids);
        pz_bpe_free(bpe);
        return st;
    }
    const pz_backend *be = pz_backend_for(o->device ? o->device : "cpu", rank, o->threads, &st);
    if (!be) {
        free(ids);
        pz_bpe_free(bpe);
        return st;
    }
    /* read on the host, then copied into the backend's memory */
    const size_t numel = pz_stage_numel(&cfg, &range);
    float *mem = be->alloc(numel * sizeof(float)), *host = xmalloc(numel * sizeof(float));
    pz_gpt2_params p;
    pz_gpt2_params_bind(&p, &cfg, &range, host);
    st = pz_ckpt_load(o->model, &p);
    pz_gpt2_params_unbind(&p);
    if (st == PZ_OK) be->from_host(mem, host, numel * sizeof(float));
    free(host);
    pz_gpt2_params_bind(&p, &cfg, &range, mem);
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

    if (world > 1) {
        double t0 = pz_now();
        st = generate_pipelined(o, &g, ids, np, total, ok, bpe, rank, world, addr, port, scratch, &rng);
        double secs = pz_now() - t0;
        if (st == PZ_OK && rank == 0) {
            printf("\n{\"ids\":[");
            for (int i = 0; i < total; i++) printf(i ? ",%d" : "%d", ids[i]);
            printf("],\"prompt_tokens\":%d,\"new_tokens\":%d,\"kv_cache\":true,\"stages\":%d,\"seconds\":%.6f,"
                   "\"tok_s\":%.2f}\n", np, o->max_new_tokens, world, secs, secs > 0 ? o->max_new_tokens / secs : 0.0);
            fflush(stdout);
        }
        goto done;
    }
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
done:
    free(scratch);
    pz_gen_free(&g);
    pz_gpt2_params_unbind(&p);
    be->free(mem);
    free(ids);
    pz_bpe_free(bpe);
    return st;
}
