/* pipeline_chunks_io.c: what the interleaved executor (pipeline_chunks.c)
 * reads and writes: --save (rank 0 gathers every chunk by tensor name), and
 * checkpoints with --resume (runtime/resume.h), one shard per global chunk
 * as if each chunk were a stage of a G-stage pipeline. */
#include "runtime/pipeline_chunks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "runtime/resume.h"

/* --save: rank 0 gathers every rank's chunks by tensor name. */
pz_status ichunk_gather_save(iexec *x, const pz_stage_range *all, const char *path) {
    const pz_gpt2_config *cfg = &x->ch[0].stage.cfg;
    pz_status st = PZ_OK;
    char w[64];
    snprintf(w, sizeof w, "parameters for --save");
    if (x->rank != 0) {
        for (int cc = 0; cc < x->V && st == PZ_OK; cc++) {
            pz_stage *s = &x->ch[cc].stage;
            size_t bytes = s->params.numel * sizeof(float);
            float *host = xmalloc(bytes);
            x->be->to_host(host, s->param_mem, bytes);
            pz_request *r = NULL;
            st = pz_transport_send(x->tp, 0, pz_tag(x->rank, 0, (uint32_t)cc, KIND_SAVE), host, bytes, w, &r);
            if (st == PZ_OK) st = pz_transport_wait(x->tp, r, NULL);
            free(host);
        }
        return st;
    }
    pz_stage_range whole = pz_whole_model(cfg);
    float *mem = xmalloc(pz_stage_numel(cfg, &whole) * sizeof(float));
    pz_gpt2_params full;
    pz_gpt2_params_bind(&full, cfg, &whole, mem);
    int nt = pz_gpt2_params_tensors(&full, NULL);
    pz_tensor_info *tt = xcalloc((size_t)nt, sizeof *tt);
    pz_gpt2_params_tensors(&full, tt);
    for (int g = 0; g < x->G && st == PZ_OK; g++) {
        int r = g % x->S, cc = g / x->S;
        size_t n = pz_stage_numel(cfg, &all[g]);
        float *part = xmalloc(n * sizeof(float));
        if (r == 0) x->be->to_host(part, x->ch[cc].stage.param_mem, n * sizeof(float));
        else {
            pz_request *req = NULL;
            st = pz_transport_recv(x->tp, r, pz_tag(r, 0, (uint32_t)cc, KIND_SAVE), part, n * sizeof(float), w, &req);
            if (st == PZ_OK) st = pz_transport_wait(x->tp, req, NULL);
        }
        if (st == PZ_OK) {
            pz_gpt2_params p;
            pz_gpt2_params_bind(&p, cfg, &all[g], part);
            int nf = pz_gpt2_params_tensors(&p, NULL);
            pz_tensor_info *tf = xcalloc((size_t)nf, sizeof *tf);
            pz_gpt2_params_tensors(&p, tf);
            for (int a = 0; a < nf; a++)
                for (int b = 0; b < nt; b++)
                    if (strcmp(tf[a].name, tt[b].name) == 0) memcpy(tt[b].data, tf[a].data, tf[a].numel * sizeof(float));
            free(tf);
            pz_gpt2_params_unbind(&p);
        }
        free(part);
    }
    free(tt);
    if (st == PZ_OK && (st = pz_params_save(&full, path)) == PZ_OK) fprintf(stderr, "pipezip train: saved %s\n", path);
    pz_gpt2_params_unbind(&full);
    free(mem);
    return st;
}

/* The codecs of chunk c's edge ends, named as pipeline_ckpt.c names a stage's. */
static int chunk_codecs(chunk *c, const char **names, pz_codec **cs) {
    static const char *const tag[4][2] = {{"out.fwd.send", "out.fwd.send.twin"}, {"out.bwd.recv", "out.bwd.recv.twin"},
                                          {"in.fwd.recv", "in.fwd.recv.twin"},   {"in.bwd.send", "in.bwd.send.twin"}};
    pz_edge_end *ends[4] = {&c->fwd_tx, &c->bwd_rx, &c->fwd_rx, &c->bwd_tx};
    int n = 0;
    for (int k = 0; k < 4; k++) {
        pz_codec *e[2] = {ends[k]->codec, ends[k]->shadow};
        for (int j = 0; j < 2; j++)
            if (e[j]) names[n] = tag[k][j], cs[n++] = e[j];
    }
    return n;
}

/* One shard per global chunk, then (all durable) rank 0's manifest of G stages. */
pz_status ichunk_checkpoint(iexec *x, int step) {
    const char *dir = x->o->checkpoint_dir;
    pz_status st = PZ_OK;
    for (int cc = 0; cc < x->V && st == PZ_OK; cc++) {
        chunk *c = &x->ch[cc];
        const char *names[8];
        pz_codec *cs[8];
        int n = chunk_codecs(c, names, cs);
        st = pz_resume_write_shard(dir, step, c->g, x->G, &c->stage, &c->opt, &x->loader);
        if (st == PZ_OK) st = pz_resume_write_codecs(dir, step, c->g, names, cs, n);
    }
    exec_fault_point("checkpoint", step, x->rank);
    double bad = st != PZ_OK;
    pz_status st2 = pz_transport_allreduce_sum_f64(x->tp, &bad, 1);
    if (st != PZ_OK) return st;
    if (st2 != PZ_OK) return st2;
    if (bad > 0)
        return pz_fail(PZ_ERR_IO, "rank %d: another rank could not write its checkpoint shards of step %d (the "
                       "previous checkpoint stays the newest)", x->rank, step);
    if (x->rank == 0 && (st = pz_resume_commit(dir, step, x->G, x->o->keep_checkpoints)) == PZ_OK)
        fprintf(stderr, "pipezip train: checkpoint of step %d in %s\n", step, dir);
    return st;
}

/* --resume: rank 0 finds the step, every chunk loads its part by tensor name. */
pz_status ichunk_resume(iexec *x, int *start) {
    const char *dir;
    pz_status st = exec_resume_step(x->tp, x->o, x->rank, start, &dir);
    if (st != PZ_OK || *start < 0) {
        *start = 0;
        return st;
    }
    for (int cc = 0; cc < x->V && st == PZ_OK; cc++) {
        chunk *c = &x->ch[cc];
        int same = 0;
        st = pz_resume_read_shard(dir, *start, c->g, x->G, &c->stage, &c->opt, &x->loader, &same);
        const char *names[8];
        pz_codec *cs[8];
        int n = chunk_codecs(c, names, cs);
        if (st == PZ_OK && same) st = pz_resume_read_codecs(dir, *start, c->g, names, cs, n);
        for (int i = 0; st == PZ_OK && !same && i < n; i++)
            if (pz_codec_keeps_state(cs[i]))
                fprintf(stderr, "pipezip train: rank %d: warning: another layout than the checkpoint's: chunk %d's %s "
                        "(%s) starts with empty state (aq: its first epoch again)\n", x->rank, c->g, names[i],
                        pz_codec_spec(cs[i]));
    }
    double bad = st != PZ_OK;
    pz_status st2 = pz_transport_allreduce_sum_f64(x->tp, &bad, 1);
    if (st == PZ_OK && st2 == PZ_OK && bad > 0)
        st = pz_fail(PZ_ERR_PEER, "rank %d: another rank could not load its shards of the checkpoint", x->rank);
    if (st == PZ_OK && x->rank == 0) fprintf(stderr, "pipezip train: resumed from %s, step %d\n", dir, *start);
    return st == PZ_OK ? st2 : st;
}
