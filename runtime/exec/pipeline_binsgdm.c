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
 * trip on its own u (a group of one). */
#include "runtime/exec/pipeline_exec.h"

#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/crc32c.h"
#include "base/mem.h"
#include "stages/binsgdm.h"

pz_status exec_bsgd_step(exec *x, int step, double norm, float *lr) {
    pz_status st = PZ_OK;
    for (int cc = 0; cc < x->V && st == PZ_OK; cc++) {
        pz_chunk *c = &x->ch[cc];
        pz_stage *s = &c->stage;
        pz_binsgdm_prepare(&c->opt, s, pz_clip_scale(&c->opt.cfg, norm));
        if (step >= x->o->dp.warmup) st = pz_dp_creduce_run(x->cr[cc], s->grad_mem, s->grad_mem, (uint64_t)step);
        else if (x->D > 1)   /* --dp-warmup: the replicas' mean of u, uncompressed */
            st = pz_dp_allreduce(&x->dp, s->grad_mem, s->grads.numel, 1, PZ_DP_AUTO);
        if (st == PZ_OK) *lr = pz_binsgdm_step(&c->opt, s);
    }
    return st;
}

/* A replica's m and b (replica 0's are also in the shard, as AdamW's m and
 * v; the others' differ: each folds in its own gradients). Little-endian:
 * u32 magic "PZBS", u32 version 1, u64 n, n floats m, n floats b, u32
 * CRC-32C of all before. */
#define BSGD_MAGIC 0x53425a50u /* "PZBS" */

pz_status exec_bsgd_save(exec *x, const char *dir, int step) {
    pz_status st = PZ_OK;
    for (int cc = 0; x->D > 1 && cc < x->V && st == PZ_OK; cc++) {
        const pz_optim *o = &x->ch[cc].opt;
        size_t n = o->numel, len = 16 + 8 * n + 4;
        uint8_t *b = xmalloc(len);
        pz_put_u32(b, BSGD_MAGIC);
        pz_put_u32(b + 4, 1);
        pz_put_u64(b + 8, n);
        for (size_t i = 0; i < 2 * n; i++) {
            uint32_t w;
            memcpy(&w, i < n ? &o->m[i] : &o->v[i - n], 4);
            pz_put_u32(b + 16 + 4 * i, w);
        }
        pz_put_u32(b + len - 4, pz_crc32c(0, b, len - 4));
        char *path = exec_side_path(x, dir, step, x->ch[cc].g, "bsgd");
        st = exec_write_blob(path, b, len);
        free(path);
        free(b);
    }
    return st;
}

static pz_status bsgd_parse(pz_optim *o, const uint8_t *b, size_t len, const char *path) {
    size_t n = o->numel;
    if (len < 20 || pz_get_u32(b) != BSGD_MAGIC || pz_get_u32(b + 4) != 1)
        return pz_fail(PZ_ERR_FORMAT, "--resume: %s is not a binsgdm state file (magic or version)", path);
    if (pz_get_u32(b + len - 4) != pz_crc32c(0, b, len - 4))
        return pz_fail(PZ_ERR_FORMAT, "--resume: %s: CRC mismatch (damaged)", path);
    if (pz_get_u64(b + 8) != n || len != 16 + 8 * n + 4)
        return pz_fail(PZ_ERR_FORMAT, "--resume: %s holds %llu elements, this chunk has %zu", path,
                       (unsigned long long)pz_get_u64(b + 8), n);
    for (size_t i = 0; i < 2 * n; i++) {
        uint32_t w = pz_get_u32(b + 16 + 4 * i);
        memcpy(i < n ? &o->m[i] : &o->v[i - n], &w, 4);
    }
    return PZ_OK;
}

pz_status exec_bsgd_load(exec *x, const char *dir, int step) {
    pz_status st = PZ_OK;
    for (int cc = 0; x->D > 1 && cc < x->V && st == PZ_OK; cc++) {
        char *path = exec_side_path(x, dir, step, x->ch[cc].g, "bsgd");
        uint8_t *blob = NULL;
        size_t len = 0;
        if ((st = exec_read_side(x, path, "binsgdm state (m, b)", &blob, &len)) == PZ_OK)
            st = bsgd_parse(&x->ch[cc].opt, blob, len, path);
        free(blob);
        free(path);
    }
    return st;
}
