/* generate.c: see generate.h. */
#include "stages/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Points g's views into base (or only counts when base is NULL); returns floats used. */
static size_t gen_layout(pz_gen *g, const pz_gpt2_config *c, const pz_stage_range *r, int rows, float *base) {
    size_t R = (size_t)rows, C = (size_t)c->channels;
    size_t cache = (size_t)(r->l1 - r->l0) * c->max_seq_len * C;
    size_t off = 0;
#define TAKE(field, n) do { (field) = base ? base + off : NULL; off += (n); } while (0)
    TAKE(g->kcache, cache); TAKE(g->vcache, cache);
    TAKE(g->x, R * C); TAKE(g->ln, R * C); TAKE(g->mean, R); TAKE(g->rstd, R);
    TAKE(g->qkv, 3 * R * C); TAKE(g->atty, R * C); TAKE(g->proj, R * C);
    TAKE(g->res2, R * C); TAKE(g->fch, 4 * R * C); TAKE(g->fchg, 4 * R * C);
    TAKE(g->scores, R * c->num_heads * c->max_seq_len);
    TAKE(g->dlogits, (size_t)c->padded_vocab_size);
#undef TAKE
    g->tok = base ? (int *)(void *)(base + off) : NULL;   /* ints are float-sized: same allocation */
    return off + R;
}

pz_status pz_gen_init(pz_gen *g, const pz_backend *be, const pz_gpt2_params *p, int rows) {
    memset(g, 0, sizeof *g);
    const pz_gpt2_config *c = &p->cfg;
    if (p->range.l0 < 0 || p->range.l1 > c->num_layers || p->range.l0 > p->range.l1)
        return pz_fail(PZ_ERR_ARG, "generation: block range [%d, %d) outside [0, %d)", p->range.l0, p->range.l1,
                       c->num_layers);
    if (rows < 1 || rows > c->max_seq_len)
        return pz_fail(PZ_ERR_ARG, "generation rows %d out of range [1, %d]", rows, c->max_seq_len);
    _Static_assert(sizeof(int) == sizeof(float), "token ids share the float allocation");
    g->be = be;
    g->p = p;
    g->rows = rows;
    g->mem = be->alloc(gen_layout(g, c, &p->range, rows, NULL) * sizeof(float));
    gen_layout(g, c, &p->range, rows, g->mem);
    g->logits = be->host_memory ? g->dlogits : be->host_alloc((size_t)c->padded_vocab_size * sizeof(float));
    return PZ_OK;
}

void pz_gen_free(pz_gen *g) {
    if (g->logits && g->logits != g->dlogits) g->be->host_free(g->logits);
    if (g->mem) g->be->free(g->mem);   /* a zeroed pz_gen has no backend */
    memset(g, 0, sizeof *g);
}

void pz_gen_reset(pz_gen *g) { g->pos = 0; }

void pz_gen_hidden(const pz_gen *g, float *dst, int n) {
    g->be->to_host(dst, g->x, (size_t)n * g->p->cfg.channels * sizeof(float));
}

/* The stage's forward of n new positions: from tokens (first stage) or from
 * the previous stage's hidden rows x_in (n, C); ends with the logits of the
 * last position (last stage) or the hidden rows in g->x. */
static pz_status gen_run(pz_gen *g, const int *tokens, const float *x_in, int n) {
    const pz_backend *be = g->be;
    const pz_gpt2_params *p = g->p;
    const pz_gpt2_config *c = &p->cfg;
    const int C = c->channels, NH = c->num_heads, maxT = c->max_seq_len;
    if (n < 1 || n > g->rows)
        return pz_fail(PZ_ERR_ARG, "generation step of %d positions out of range [1, %d]", n, g->rows);
    if (g->pos + n > maxT)
        return pz_fail(PZ_ERR_ARG, "%d positions do not fit the model's context of %d", g->pos + n, maxT);
    for (int i = 0; tokens && i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return pz_fail(PZ_ERR_ARG, "token id %d is outside the model's vocabulary [0, %d)",
                           tokens[i], c->vocab_size);
    if (!p->range.has_embed == !x_in)
        return pz_fail(PZ_ERR_ARG, "generation: a %s stage takes %s", p->range.has_embed ? "first" : "later",
                       p->range.has_embed ? "tokens" : "the previous stage's hidden rows");
    const size_t NC = (size_t)n * C;
    if (tokens) {
        /* positions pos..pos+n-1: the encoder of a (1, n) batch over wpe's rows from pos */
        be->from_host(g->tok, tokens, (size_t)n * sizeof(int));
        be->encoder_forward(g->x, g->tok, p->wte, p->wpe + (size_t)g->pos * C, 1, n, C);
    } else {
        be->from_host(g->x, x_in, NC * sizeof(float));
    }
    for (int l = 0; l < p->range.l1 - p->range.l0; l++) {
        const pz_block_params *w = &p->blocks[l];
        const size_t co = (size_t)l * maxT * C;
        be->layernorm_forward(g->ln, g->mean, g->rstd, g->x, w->ln1w, w->ln1b, n, C);
        be->matmul_forward(g->qkv, g->ln, w->qkvw, w->qkvb, n, C, 3 * C);
        be->attention_cached_forward(g->atty, g->kcache + co, g->vcache + co, g->scores, g->qkv, g->pos, n, C, NH);
        be->matmul_forward(g->proj, g->atty, w->attprojw, w->attprojb, n, C, C);
        be->residual_forward(g->res2, g->x, g->proj, NC);
        be->layernorm_forward(g->ln, g->mean, g->rstd, g->res2, w->ln2w, w->ln2b, n, C);
        be->matmul_forward(g->fch, g->ln, w->fcw, w->fcb, n, C, 4 * C);
        be->gelu_forward(g->fchg, g->fch, 4 * NC);
        be->matmul_forward(g->proj, g->fchg, w->fcprojw, w->fcprojb, n, 4 * C, C);
        be->residual_forward(g->x, g->res2, g->proj, NC);
    }
    g->pos += n;
    if (!p->range.has_head) return PZ_OK;
    /* the head, for the last position only */
    const float *last = g->x + (size_t)(n - 1) * C;
    be->layernorm_forward(g->ln, g->mean, g->rstd, last, p->lnfw, p->lnfb, 1, C);
    be->matmul_forward(g->dlogits, g->ln, p->wte, NULL, 1, C, c->padded_vocab_size);
    if (g->logits != g->dlogits)
        be->to_host(g->logits, g->dlogits, (size_t)c->padded_vocab_size * sizeof(float));
    return PZ_OK;
}

pz_status pz_gen_forward(pz_gen *g, const int *tokens, int n) {
    if (!tokens) return pz_fail(PZ_ERR_ARG, "generation: no tokens");
    return gen_run(g, tokens, NULL, n);
}

pz_status pz_gen_forward_hidden(pz_gen *g, const float *x_in, int n) {
    if (!x_in) return pz_fail(PZ_ERR_ARG, "generation: no hidden rows");
    return gen_run(g, NULL, x_in, n);
}

/* ---- sampling ---------------------------------------------------------- */

typedef struct {
    double p;
    int id;
} prob_entry;

size_t pz_sample_scratch_bytes(int V) { return (size_t)V * sizeof(prob_entry); }

/* most likely first; equal ones by id, so the order is total and qsort's
 * instability cannot change a draw */
static int by_prob_desc(const void *a, const void *b) {
    const prob_entry *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

int pz_sample(const float *logits, int V, const pz_sampling *s, pz_rng *r, void *scratch) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (s->temperature <= 0.0f) return best;
    prob_entry *e = scratch;
    const double mx = logits[best], inv_t = 1.0 / s->temperature;
    double total = 0.0;
    for (int i = 0; i < V; i++) {
        e[i].p = exp(((double)logits[i] - mx) * inv_t);
        e[i].id = i;
        total += e[i].p;
    }
    int keep = V;
    if ((s->top_k > 0 && s->top_k < V) || s->top_p < 1.0f) {
        qsort(e, (size_t)V, sizeof *e, by_prob_desc);
        if (s->top_k > 0 && s->top_k < V) keep = s->top_k;
        if (s->top_p < 1.0f) {
            double kept = 0.0;
            for (int i = 0; i < keep; i++) kept += e[i].p;
            double cum = 0.0;
            int n = 0;
            while (n < keep) {
                cum += e[n++].p;
                if (cum >= s->top_p * kept) break;
            }
            keep = n;
        }
        total = 0.0;
        for (int i = 0; i < keep; i++) total += e[i].p;
    }
    const double u = (double)pz_rng_uniform(r) * total;
    double cum = 0.0;
    for (int i = 0; i < keep; i++) {
        cum += e[i].p;
        if (u < cum) return e[i].id;
    }
    return e[keep - 1].id;   /* rounding left u at the very top */
}
