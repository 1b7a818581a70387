/* op_ctx.c: see op_ctx.h. */
#include "tests/kernels/op_ctx.h"

void mm_forward(void *p) { mm_ctx *c = p; c->be->matmul_forward(c->out, c->inp, c->w, c->bias, c->N, c->C, c->OC); }

void mm_backward(void *p) {
    mm_ctx *c = p;
    c->be->matmul_backward(c->dinp, c->dw, c->db, c->dout, c->inp, c->w, c->N, c->C, c->OC);
}

void att_forward(void *p) { att_ctx *c = p; c->be->attention_forward(c->out, c->att, c->qkv, c->B, c->T, c->C, c->NH); }

void att_backward(void *p) {
    att_ctx *c = p;
    c->be->attention_backward(c->dqkv, c->scratch, c->dout, c->qkv, c->att, c->B, c->T, c->C, c->NH);
}
