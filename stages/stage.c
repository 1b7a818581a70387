/* stage.c: forward and backward of a GPT-2 stage (embedding?, blocks, head?).
 *
 * The backward runs in place on one residual-gradient buffer `d`: every op's
 * backward accumulates into its input gradient, and a pre-LN block's residual
 * branches add into the stream, so after a block's backward `d` holds the
 * gradient of the block's input without any copy. */
#include "stages/stage.h"
#include "base/mem.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- activation slot layout ------------------------------------------- */

/* Points a's views into base (or only counts when base is NULL); returns floats used. */
static size_t acts_layout(pz_acts *a, const pz_stage *s, float *base, int defer) {
    size_t BT = (size_t)s->B * s->T, C = (size_t)s->cfg.channels;
    size_t att = (size_t)s->B * s->cfg.num_heads * s->T * s->T;
    size_t off = 0;
#define TAKE(field, n) do { (field) = base ? base + off : NULL; off += (n); } while (0)
    TAKE(a->input, BT * C);
    for (int i = 0; i < s->range.l1 - s->range.l0; i++) {
        pz_block_acts *b = &a->blocks[i];
        TAKE(b->ln1, BT * C); TAKE(b->ln1_mean, BT); TAKE(b->ln1_rstd, BT);
        TAKE(b->qkv, 3 * BT * C); TAKE(b->atty, BT * C); TAKE(b->att, att);
        TAKE(b->attproj, BT * C); TAKE(b->res2, BT * C);
        TAKE(b->ln2, BT * C); TAKE(b->ln2_mean, BT); TAKE(b->ln2_rstd, BT);
        TAKE(b->fch, 4 * BT * C); TAKE(b->fch_gelu, 4 * BT * C);
        TAKE(b->fcproj, BT * C); TAKE(b->res3, BT * C);
        if (defer) {
            TAKE(b->d_fcproj, BT * C); TAKE(b->d_fc, 4 * BT * C);
            TAKE(b->d_attproj, BT * C); TAKE(b->d_qkv, 3 * BT * C);
        }
    }
    if (s->range.has_head) {
        TAKE(a->lnf, BT * C); TAKE(a->lnf_mean, BT); TAKE(a->lnf_rstd, BT);
        TAKE(a->logits, BT * (size_t)s->cfg.padded_vocab_size);
        TAKE(a->losses, BT);
    }
#undef TAKE
    return off;
}

size_t pz_acts_slot_numel(const pz_gpt2_config *cfg, const pz_stage_range *r, int B, int T, int defer_weights) {
    pz_stage s;
    memset(&s, 0, sizeof s);
    s.cfg = *cfg;
    s.range = *r;
    s.B = B;
    s.T = T;
    s.defer_weights = defer_weights;
    pz_acts a;
    memset(&a, 0, sizeof a);
    pz_block_acts blocks[1];   /* acts_layout only counts with base NULL, but writes the views (NULL) */
    int nb = r->l1 - r->l0;
    a.blocks = nb <= 1 ? blocks : xcalloc((size_t)nb, sizeof *a.blocks);
    size_t n = acts_layout(&a, &s, NULL, defer_weights) + 2 * (size_t)B * T;   /* + tokens and targets (ints) */
    if (a.blocks != blocks) free(a.blocks);
    return n;
}

pz_status pz_acts_init(pz_acts *a, const pz_stage *s) { return pz_acts_init_split(a, s, s->defer_weights); }

pz_status pz_acts_init_split(pz_acts *a, const pz_stage *s, int defer) {
    memset(a, 0, sizeof *a);
    a->B = s->B;
    a->T = s->T;
    int nb = s->range.l1 - s->range.l0;
    a->blocks = xcalloc(nb > 0 ? (size_t)nb : 1, sizeof *a->blocks);
    a->numel = acts_layout(a, s, NULL, defer);
    a->mem = s->be->alloc(a->numel * sizeof(float));
    acts_layout(a, s, a->mem, defer);
    size_t BT = (size_t)s->B * s->T;
    a->tokens = s->be->alloc(2 * BT * sizeof(int));
    a->targets = a->tokens + BT;
    return PZ_OK;
}

void pz_acts_free(pz_acts *a, const pz_stage *s) {
    if (a->mem) s->be->free(a->mem);   /* not s->be: a stage whose init failed has none */
    if (a->tokens) s->be->free(a->tokens);
    free(a->blocks);
    memset(a, 0, sizeof *a);
}

/* ---- stage ------------------------------------------------------------ */

/* floats of the backward scratch of a (B, T) micro-batch */
static size_t scratch_numel(const pz_gpt2_config *cfg, int B, int T) {
    size_t BT = (size_t)B * T, C = (size_t)cfg->channels;
    size_t att = (size_t)B * cfg->num_heads * T * T;
    return 2 * BT * C /* dres, dres2 */ + BT * C /* dln */ + 3 * BT * C /* dqkv */
         + BT * C /* datty */ + att /* datt */ + 8 * BT * C /* dfch, dfch_gelu */;
}

size_t pz_stage_fixed_numel(const pz_gpt2_config *cfg, const pz_stage_range *r, int B, int T) {
    return 2 * pz_stage_numel(cfg, r) + scratch_numel(cfg, B, T);
}

pz_status pz_stage_init(pz_stage *s, const pz_backend *be, const pz_gpt2_config *cfg,
                        const pz_stage_range *range, int B, int T) {
    memset(s, 0, sizeof *s);
    pz_status st = pz_gpt2_config_validate(cfg);
    if (st != PZ_OK) return st;
    if (range->l0 < 0 || range->l1 > cfg->num_layers || range->l0 > range->l1)
        return pz_fail(PZ_ERR_ARG, "stage block range [%d, %d) is not inside [0, %d)",
                       range->l0, range->l1, cfg->num_layers);
    if (range->l0 == range->l1 && !range->has_embed && !range->has_head)
        return pz_fail(PZ_ERR_ARG, "stage owns nothing (no blocks, no embedding, no head)");
    if (B < 1 || B > 1 << 20)
        return pz_fail(PZ_ERR_ARG, "batch size %d out of range [1, 2^20]", B);
    if (T < 1 || T > cfg->max_seq_len)
        return pz_fail(PZ_ERR_ARG, "sequence length %d must be in [1, %d] (the position table)",
                       T, cfg->max_seq_len);
    s->be = be;
    s->cfg = *cfg;
    s->range = *range;
    s->B = B;
    s->T = T;
    size_t n = pz_stage_numel(cfg, range);
    s->param_mem = be->alloc(n * sizeof(float));
    s->grad_mem = be->alloc(n * sizeof(float));
    pz_gpt2_params_bind(&s->params, cfg, range, s->param_mem);
    pz_gpt2_params_bind(&s->grads, cfg, range, s->grad_mem);

    size_t BT = (size_t)B * T, C = (size_t)cfg->channels;
    size_t att = (size_t)B * cfg->num_heads * T * T;
    size_t scratch = scratch_numel(cfg, B, T);
    s->scratch = be->alloc(scratch * sizeof(float));
    float *at = s->scratch;
    s->dres = at; at += BT * C;
    s->dres2 = at; at += BT * C;
    s->dln = at; at += BT * C;
    s->dqkv = at; at += 3 * BT * C;
    s->datty = at; at += BT * C;
    s->datt = at; at += att;
    s->dfch = at; at += 4 * BT * C;
    s->dfch_gelu = at; at += 4 * BT * C;
    assert((size_t)(at - s->scratch) == scratch);
    return PZ_OK;
}

void pz_stage_free(pz_stage *s) {
    if (!s->be) return;
    pz_gpt2_params_unbind(&s->params);
    pz_gpt2_params_unbind(&s->grads);
    s->be->free(s->param_mem);
    s->be->free(s->grad_mem);
    s->be->free(s->scratch);
    memset(s, 0, sizeof *s);
}

void pz_stage_zero_grad(pz_stage *s) {
    s->be->zero(s->grad_mem, s->grads.numel * sizeof(float));
}

/* x (B,T,C) -> res3 (B,T,C) through one pre-LN block */
static void block_forward(const pz_stage *s, const pz_block_params *w, pz_block_acts *a, const float *x) {
    const pz_backend *be = s->be;
    int B = s->B, T = s->T, C = s->cfg.channels, NH = s->cfg.num_heads, N = B * T;
    size_t NC = (size_t)N * C;
    be->layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, w->ln1w, w->ln1b, N, C);
    be->matmul_forward(a->qkv, a->ln1, w->qkvw, w->qkvb, N, C, 3 * C);
    be->attention_forward(a->atty, a->att, a->qkv, B, T, C, NH);
    be->matmul_forward(a->attproj, a->atty, w->attprojw, w->attprojb, N, C, C);
    be->residual_forward(a->res2, x, a->attproj, NC);
    be->layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w->ln2w, w->ln2b, N, C);
    be->matmul_forward(a->fch, a->ln2, w->fcw, w->fcb, N, C, 4 * C);
    be->gelu_forward(a->fch_gelu, a->fch, 4 * NC);
    be->matmul_forward(a->fcproj, a->fch_gelu, w->fcprojw, w->fcprojb, N, 4 * C, C);
    be->residual_forward(a->res3, a->res2, a->fcproj, NC);
}

/* d (B,T,C): on entry the gradient of res3, on exit the gradient of x */
/* A block's backward. defer: the matmuls compute only their input gradients
 * and their output gradients are saved in a (for block_backward_weight). */
static void block_backward(pz_stage *s, const pz_block_params *w, pz_block_params *g, pz_block_acts *a,
                           const float *x, float *d, int defer) {
    const pz_backend *be = s->be;
    int B = s->B, T = s->T, C = s->cfg.channels, NH = s->cfg.num_heads, N = B * T;
    size_t NC = (size_t)N * C;
    /* with defer, the weight half is skipped here (NULL) and its dout kept */
#define WGT(p) (defer ? NULL : (p))
#define KEEP(dst, src, n) do { if (defer) be->copy((dst), (src), (n) * sizeof(float)); } while (0)
    /* MLP branch: res3 = res2 + fcproj(gelu(fc(ln2(res2)))) */
    KEEP(a->d_fcproj, d, NC);
    be->zero(s->dfch_gelu, 4 * NC * sizeof(float));
    be->matmul_backward(s->dfch_gelu, WGT(g->fcprojw), WGT(g->fcprojb), d, a->fch_gelu, w->fcprojw, N, 4 * C, C);
    be->zero(s->dfch, 4 * NC * sizeof(float));
    be->gelu_backward(s->dfch, a->fch, s->dfch_gelu, 4 * NC);
    KEEP(a->d_fc, s->dfch, 4 * NC);
    be->zero(s->dln, NC * sizeof(float));
    be->matmul_backward(s->dln, WGT(g->fcw), WGT(g->fcb), s->dfch, a->ln2, w->fcw, N, C, 4 * C);
    /* the identity path already left d(res3) in d; the branch adds to it: d = d(res2) */
    be->layernorm_backward(d, g->ln2w, g->ln2b, s->dln, a->res2, w->ln2w, a->ln2_mean, a->ln2_rstd, N, C);
    /* attention branch: res2 = x + attproj(attn(qkv(ln1(x)))) */
    KEEP(a->d_attproj, d, NC);
    be->zero(s->datty, NC * sizeof(float));
    be->matmul_backward(s->datty, WGT(g->attprojw), WGT(g->attprojb), d, a->atty, w->attprojw, N, C, C);
    be->zero(s->dqkv, 3 * NC * sizeof(float));
    be->attention_backward(s->dqkv, s->datt, s->datty, a->qkv, a->att, B, T, C, NH);
    KEEP(a->d_qkv, s->dqkv, 3 * NC);
    be->zero(s->dln, NC * sizeof(float));
    be->matmul_backward(s->dln, WGT(g->qkvw), WGT(g->qkvb), s->dqkv, a->ln1, w->qkvw, N, C, 3 * C);
    be->layernorm_backward(d, g->ln1w, g->ln1b, s->dln, x, w->ln1w, a->ln1_mean, a->ln1_rstd, N, C);
#undef WGT
#undef KEEP
}

/* The weight half of a deferred block backward: each matmul's dweight and
 * dbias from its saved output gradient, exactly as the whole call adds them. */
static void block_backward_weight(pz_stage *s, const pz_block_params *w, pz_block_params *g,
                                  const pz_block_acts *a) {
    const pz_backend *be = s->be;
    int C = s->cfg.channels, N = s->B * s->T;
    be->matmul_backward(NULL, g->fcprojw, g->fcprojb, a->d_fcproj, a->fch_gelu, w->fcprojw, N, 4 * C, C);
    be->matmul_backward(NULL, g->fcw, g->fcb, a->d_fc, a->ln2, w->fcw, N, C, 4 * C);
    be->matmul_backward(NULL, g->attprojw, g->attprojb, a->d_attproj, a->atty, w->attprojw, N, C, C);
    be->matmul_backward(NULL, g->qkvw, g->qkvb, a->d_qkv, a->ln1, w->qkvw, N, C, 3 * C);
}

static const float *block_input(const pz_acts *a, int i) {
    return i == 0 ? a->input : a->blocks[i - 1].res3;
}

const float *pz_stage_forward(pz_stage *s, pz_acts *a, const int *tokens,
                              const float *x_in, const int *targets, float dscale) {
    const pz_backend *be = s->be;
    const pz_gpt2_config *c = &s->cfg;
    int B = s->B, T = s->T, C = c->channels, N = B * T;
    size_t NC = (size_t)N * C;
    assert(a->B == B && a->T == T);
    if (s->range.has_embed) {
        for (int i = 0; i < N; i++) assert(tokens[i] >= 0 && tokens[i] < c->vocab_size);
        be->from_host(a->tokens, tokens, (size_t)N * sizeof(int));
        be->encoder_forward(a->input, a->tokens, s->params.wte, s->params.wpe, B, T, C);
    } else {
        be->copy(a->input, x_in, NC * sizeof(float));
    }
    int nb = s->range.l1 - s->range.l0;
    for (int i = 0; i < nb; i++) {
        block_forward(s, &s->params.blocks[i], &a->blocks[i], block_input(a, i));
        if (s->between_blocks) s->between_blocks(s->between_blocks_ctx);
    }
    const float *out = block_input(a, nb);
    if (!s->range.has_head) return out;

    for (int i = 0; i < N; i++) assert(targets[i] >= 0 && targets[i] < c->vocab_size);
    be->from_host(a->targets, targets, (size_t)N * sizeof(int));
    be->layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, out, s->params.lnfw, s->params.lnfb, N, C);
    be->matmul_forward(a->logits, a->lnf, s->params.wte, NULL, N, C, c->padded_vocab_size);
    be->crossentropy_forward(a->losses, a->logits, a->targets, N, c->vocab_size,
                             c->padded_vocab_size, dscale);
    float *losses = xmalloc((size_t)N * sizeof(float));
    be->to_host(losses, a->losses, (size_t)N * sizeof(float));
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += losses[i];
    free(losses);
    a->loss = (float)(sum / N);
    return NULL;
}

/* grad_mem[from - grad_mem, numel) is final (stage.h) */
static void grads_final(pz_stage *s, const float *from) {
    if (s->grads_final) s->grads_final(s->grads_final_ctx, (size_t)(from - s->grad_mem));
}

static void stage_backward(pz_stage *s, pz_acts *a, const float *dout, float *dx_in, int defer) {
    const pz_backend *be = s->be;
    const pz_gpt2_config *c = &s->cfg;
    int B = s->B, T = s->T, C = c->channels, N = B * T;
    size_t NC = (size_t)N * C;
    int nb = s->range.l1 - s->range.l0;
    /* the residual-stream gradient is carried in dx_in when the caller wants it */
    float *d = dx_in ? dx_in : s->dres;
    if (s->range.has_head) {
        be->zero(s->dln, NC * sizeof(float));
        be->matmul_backward(s->dln, s->grads.wte, NULL, a->logits, a->lnf, s->params.wte,
                            N, C, c->padded_vocab_size);
        be->zero(d, NC * sizeof(float));
        be->layernorm_backward(d, s->grads.lnfw, s->grads.lnfb, s->dln, block_input(a, nb),
                               s->params.lnfw, a->lnf_mean, a->lnf_rstd, N, C);
        grads_final(s, s->grads.lnfw);
    } else {
        be->copy(d, dout, NC * sizeof(float));
    }
    for (int i = nb - 1; i >= 0; i--) {
        block_backward(s, &s->params.blocks[i], &s->grads.blocks[i], &a->blocks[i], block_input(a, i), d, defer);
        if (!defer) grads_final(s, s->grads.blocks[i].ln1w);   /* deferred: the weight half finishes the block */
        if (s->between_blocks) s->between_blocks(s->between_blocks_ctx);
    }
    if (s->range.has_embed)
        be->encoder_backward(s->grads.wte, s->grads.wpe, d, a->tokens, B, T, C);
    if (!defer) grads_final(s, s->grad_mem);
}

void pz_stage_backward(pz_stage *s, pz_acts *a, const float *dout, float *dx_in) {
    stage_backward(s, a, dout, dx_in, 0);
}

void pz_stage_backward_input(pz_stage *s, pz_acts *a, const float *dout, float *dx_in) {
    assert(s->range.l1 == s->range.l0 || a->blocks[0].d_qkv);
    stage_backward(s, a, dout, dx_in, 1);
}

void pz_stage_backward_weight(pz_stage *s, pz_acts *a) {
    assert(s->range.l1 == s->range.l0 || a->blocks[0].d_qkv);
    for (int i = s->range.l1 - s->range.l0 - 1; i >= 0; i--) {
        block_backward_weight(s, &s->params.blocks[i], &s->grads.blocks[i], &a->blocks[i]);
        grads_final(s, s->grads.blocks[i].ln1w);
        if (s->between_blocks) s->between_blocks(s->between_blocks_ctx);
    }
    grads_final(s, s->grad_mem);   /* the input half did the rest (embeddings, head) */
}
