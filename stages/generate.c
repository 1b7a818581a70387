/* generate.c: see generate.h. */
#include "stages/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Points g's views into base (or only counts when base is NULL); returns floats used. */
static size_t gen_layout(pz_gen *g, const pz_gpt2_config *c, int rows, float *base) {
    size_t R = (size_t)rows, C = (size_t)c->channels;
    size_t cache = (size_t)c->num_layers * c->max_seq_len * C;
    size_t off = 0;
#define TAKE(field, n) do { (field) = base ? base + off : NULL; off += (n); } while (0)
    TAKE(g->kcache, cache); TAKE(g->vcache, cache);
    TAKE(g->x, R * C); TAKE(g->ln, R * C); TAKE(g->mean, R); TAKE(g->rstd, R);
    TAKE(g->qkv, 3 * R * C); TAKE(g->atty, R * C); TAKE(g->proj, R * C);
    TAKE(g->res2, R * C); TAKE(g->fch, 4 * R * C); TAKE(g->fchg, 4 * R * C);
    TAKE(g->scores, (size_t)c->max_seq_len);
    TAKE(g->logits, (size_t)c->padded_vocab_size);
#undef TAKE
    return off;
}

pz_status pz_gen_init(pz_gen *g, const pz_backend *be, const pz_gpt2_params *p, int rows) {
    memset(g, 0, sizeof *g);
    const pz_gpt2_config *c = &p->cfg;
    if (!be->host_memory)
        return pz_fail(PZ_ERR_ARG, "generation runs on the CPU backend only, not %s", be->name);
    if (!p->range.has_embed || !p->range.has_head || p->range.l0 != 0 || p->range.l1 != c->num_layers)
        return pz_fail(PZ_ERR_ARG, "generation needs the whole model, not a stage's part");
    if (rows < 1 || rows > c->max_seq_len)
        return pz_fail(PZ_ERR_ARG, "generation rows %d out of range [1, %d]", rows, c->max_seq_len);
    g->be = be;
    g->p = p;
    g->rows = rows;
    g->mem = be->alloc(gen_layout(g, c, rows, NULL) * sizeof(float));
    gen_layout(g, c, rows, g->mem);
    return PZ_OK;
}

void pz_gen_free(pz_gen *g) {
    if (g->mem) g->be->free(g->mem);
    memset(g, 0, sizeof *g);
}

void pz_gen_reset(pz_gen *g) { g->pos = 0; }

void pz_attention_cached_forward(float *out, float *kcache, float *vcache, float *scores,
                                 const float *qkv, int pos0, int n, int C, int NH) {
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int i = 0; i < n; i++) {
        memcpy(kcache + (size_t)(pos0 + i) * C, qkv + (size_t)i * 3 * C + C, (size_t)C * sizeof(float));
        memcpy(vcache + (size_t)(pos0 + i) * C, qkv + (size_t)i * 3 * C + 2 * C, (size_t)C * sizeof(float));
    }
    for (int i = 0; i < n; i++) {
        const int len = pos0 + i + 1;   /* keys 0 .. pos0+i */
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)i * 3 * C + (size_t)h * hs;
            float mx = -INFINITY;
            for (int t = 0; t < len; t++) {
                const float *k = kcache + (size_t)t * C + (size_t)h * hs;
                float dot = 0.0f;
                for (int j = 0; j < hs; j++) dot += q[j] * k[j];
                scores[t] = dot * scale;
                if (scores[t] > mx) mx = scores[t];
            }
            float sum = 0.0f;
            for (int t = 0; t < len; t++) {
                scores[t] = expf(scores[t] - mx);
                sum += scores[t];
            }
            const float inv = 1.0f / sum;
            float *o = out + (size_t)i * C + (size_t)h * hs;
            for (int j = 0; j < hs; j++) o[j] = 0.0f;
            for (int t = 0; t < len; t++) {
                const float a = scores[t] * inv;
                const float *v = vcache + (size_t)t * C + (size_t)h * hs;
                for (int j = 0; j < hs; j++) o[j] += a * v[j];
            }
        }
    }
}

pz_status pz_gen_forward(pz_gen *g, const int *tokens, int n) {
    const pz_backend *be = g->be;
    const pz_gpt2_params *p = g->p;
    const pz_gpt2_config *c = &p->cfg;
    const int C = c->channels, NH = c->num_heads, maxT = c->max_seq_len;
    if (n < 1 || n > g->rows)
        return pz_fail(PZ_ERR_ARG, "generation step of %d positions out of range [1, %d]", n, g->rows);
    if (g->pos + n > maxT)
        return pz_fail(PZ_ERR_ARG, "%d positions do not fit the model's context of %d", g->pos + n, maxT);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return pz_fail(PZ_ERR_ARG, "token id %d is outside the model's vocabulary [0, %d)",
                           tokens[i], c->vocab_size);
    const size_t NC = (size_t)n * C;
    for (int i = 0; i < n; i++) {
        const float *te = p->wte + (size_t)tokens[i] * C, *pe = p->wpe + (size_t)(g->pos + i) * C;
        float *x = g->x + (size_t)i * C;
        for (int j = 0; j < C; j++) x[j] = te[j] + pe[j];
    }
    for (int l = 0; l < c->num_layers; l++) {
        const pz_block_params *w = &p->blocks[l];
        const size_t co = (size_t)l * maxT * C;
        be->layernorm_forward(g->ln, g->mean, g->rstd, g->x, w->ln1w, w->ln1b, n, C);
        be->matmul_forward(g->qkv, g->ln, w->qkvw, w->qkvb, n, C, 3 * C);
        pz_attention_cached_forward(g->atty, g->kcache + co, g->vcache + co, g->scores, g->qkv,
                                    g->pos, n, C, NH);
        be->matmul_forward(g->proj, g->atty, w->attprojw, w->attprojb, n, C, C);
        be->residual_forward(g->res2, g->x, g->proj, NC);
        be->layernorm_forward(g->ln, g->mean, g->rstd, g->res2, w->ln2w, w->ln2b, n, C);
        be->matmul_forward(g->fch, g->ln, w->fcw, w->fcb, n, C, 4 * C);
        be->gelu_forward(g->fchg, g->fch, 4 * NC);
        be->matmul_forward(g->proj, g->fchg, w->fcprojw, w->fcprojb, n, 4 * C, C);
        be->residual_forward(g->x, g->res2, g->proj, NC);
    }
    g->pos += n;
    /* the head, for the last position only */
    const float *last = g->x + (size_t)(n - 1) * C;
    be->layernorm_forward(g->ln, g->mean, g->rstd, last, p->lnfw, p->lnfb, 1, C);
    be->matmul_forward(g->logits, g->ln, p->wte, NULL, 1, C, c->padded_vocab_size);
    return PZ_OK;
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
