/* pipeline_binsgdm.c: --optimizer binsgdm's step on a rank (stages/binsgdm.h
 * has the rule; docs/data-parallel.md what was taken from the paper).
 *
 * The gradients are not averaged before the step (exec_dp_sync leaves them):
 * each replica folds its own gradient into its own m and b, writes u = m/b
 * over the gradient buffer, and the stage's replicas exchange u through the
 * chunk's compressed reduction (exec_dp_init made it with the codec
 * PZ_BINSGDM_SPEC and no error feedback: the binary randomisation is
 * unbiased, E[dec] = u). allgather sends each replica's 1-bit message to the
 * others; twophase and hierarchical re-randomise the owners' (hosts') means,
 * which stay in [-1, 1]. Every replica decodes the same messages, so the
 * applied mean, and the parameters, are identical; m and b are each
 * replica's own. The messages' random bits come from (--seed, step, member),
 * so a resumed run draws the same bits. One replica: the same codec round
 * trip on its own u (a group of one). With S > 1 the tied wte, which the
 * first and the last rank both hold and update, goes in messages of its
 * own with a random stream of its own, the same on both ends, so both
 * copies apply the same update (exec_dp_init). */
#include "runtime/exec/pipeline_exec.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "runtime/ckpt/resume.h"
#include "stages/binsgdm.h"

size_t exec_bsgd_tied(const exec *x, const pz_chunk *c) {
    return c == tied_chunk(x) ? (size_t)c->stage.cfg.padded_vocab_size * c->stage.cfg.channels : 0;
}

/* u's n floats over the stage's replicas, 1-bit after --dp-warmup (dp_fig: what it took) */
static pz_status exchange(exec *x, pz_dp_creduce *r, float *u, size_t n, int step) {
    return pz_dp_creduce_exchange(r, &x->dp, u, n, (uint64_t)step, step >= x->o->dp.warmup, x->dp_fig);
}

pz_status exec_bsgd_step(exec *x, int step, double norm, float *lr) {
    pz_status st = PZ_OK;
    /* this step's exchange; it runs after the step's reduction, so whoever
     * reports dp_fig with that reduction shows it one step later */
    memset(x->dp_fig, 0, sizeof x->dp_fig);
    for (int cc = 0; cc < x->V && st == PZ_OK; cc++) {
        pz_chunk *c = &x->ch[cc];
        pz_stage *s = &c->stage;
        /* the tied wte leads the chunk's buffers on both ends (stages/gpt2_params.c):
         * both hold the same sum of gradients, so the same m, b and u */
        size_t w = exec_bsgd_tied(x, c), n = s->grads.numel;
        pz_binsgdm_prepare(&c->opt, s, pz_clip_scale(&c->opt.cfg, norm));
        if (w) st = exchange(x, x->crw, s->grad_mem, w, step);
        if (st == PZ_OK) st = exchange(x, x->cr[cc], s->grad_mem + w, n - w, step);
        if (st == PZ_OK) *lr = pz_binsgdm_step(&c->opt, s);
    }
    return st;
}

/* with replicas: each replica's m and b (replica 0's are also in the
 * shard, as AdamW's m and v; stages/binsgdm.h has the format) */
pz_status exec_bsgd_save(exec *x, const char *dir, int step) {
    pz_status st = PZ_OK;
    for (int cc = 0; x->D > 1 && cc < x->V && st == PZ_OK; cc++) {
        uint8_t *b = NULL;
        size_t len = 0;
        pz_binsgdm_state_save(&x->ch[cc].opt, &b, &len);
        st = pz_resume_write_side(dir, step, x->ch[cc].g, "bsgd", x->replica, b, len);
        free(b);
    }
    return st;
}

pz_status exec_bsgd_load(exec *x, const char *dir, int step) {
    pz_status st = PZ_OK;
    for (int cc = 0; x->D > 1 && cc < x->V && st == PZ_OK; cc++) {
        char *path = NULL;
        uint8_t *blob = NULL;
        size_t len = 0;
        if ((st = pz_resume_read_side(dir, step, x->ch[cc].g, "bsgd", x->replica, "binsgdm state (m, b)", &blob, &len,
                                      &path)) == PZ_OK)
            st = pz_binsgdm_state_load(&x->ch[cc].opt, blob, len, path);
        free(blob);
        free(path);
    }
    return st;
}
