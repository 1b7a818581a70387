/* gather.c: see gather.h. */
#include "runtime/ckpt/gather.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "runtime/plan/train.h"

/* Copies every tensor of `from` into the tensor of the same name in `to`. */
static void copy_by_name(pz_gpt2_params *to, const pz_gpt2_params *from) {
    int nt = pz_gpt2_params_tensors(to, NULL), nf = pz_gpt2_params_tensors(from, NULL);
    pz_tensor_info *tt = xcalloc((size_t)nt, sizeof *tt), *tf = xcalloc((size_t)nf, sizeof *tf);
    pz_gpt2_params_tensors(to, tt);
    pz_gpt2_params_tensors(from, tf);
    for (int i = 0; i < nf; i++)
        for (int j = 0; j < nt; j++)
            if (strcmp(tf[i].name, tt[j].name) == 0) memcpy(tt[j].data, tf[i].data, tf[i].numel * sizeof(float));
    free(tt);
    free(tf);
}

static const char *const what = "parameters for --save, to rank 0";

/* a stage other than 0: its chunks to stage 0 */
static pz_status send_chunks(pz_transport *tp, const pz_backend *be, const pz_gpt2_config *cfg,
                             const pz_stage_range *all, int S, int V, int rank, const int *wranks,
                             float *const *params) {
    pz_status st = PZ_OK;
    for (int cc = 0; cc < V && st == PZ_OK; cc++) {
        size_t bytes = pz_stage_numel(cfg, &all[cc * S + rank]) * sizeof(float);
        float *host = xmalloc(bytes);
        be->to_host(host, params[cc], bytes);
        pz_request *r = NULL;
        st = pz_transport_send(tp, wranks[0], pz_tag(wranks[rank], 0, (uint32_t)cc, PZ_KIND_SAVE), host, bytes, what, &r);
        if (st == PZ_OK) st = pz_transport_wait(tp, r, NULL);
        free(host);
    }
    return st;
}

pz_status pz_gather_save(pz_transport *tp, const pz_backend *be, const pz_gpt2_config *cfg, const pz_stage_range *all,
                         int S, int V, int rank, const int *wranks, float *const *params, const char *path) {
    if (rank != 0) return send_chunks(tp, be, cfg, all, S, V, rank, wranks, params);
    pz_status st = PZ_OK;
    pz_stage_range whole = pz_whole_model(cfg);
    float *mem = xmalloc(pz_stage_numel(cfg, &whole) * sizeof(float));
    pz_gpt2_params full;
    pz_gpt2_params_bind(&full, cfg, &whole, mem);
    for (int g = 0; g < S * V && st == PZ_OK; g++) {
        int r = g % S, cc = g / S;
        size_t n = pz_stage_numel(cfg, &all[g]);
        float *part = xmalloc(n * sizeof(float));
        if (r == 0) be->to_host(part, params[cc], n * sizeof(float));
        else {
            pz_request *req = NULL;
            st = pz_transport_recv(tp, wranks[r], pz_tag(wranks[r], 0, (uint32_t)cc, PZ_KIND_SAVE), part,
                                   n * sizeof(float), what, &req);
            if (st == PZ_OK) st = pz_transport_wait(tp, req, NULL);
        }
        if (st == PZ_OK) {
            pz_gpt2_params p;
            pz_gpt2_params_bind(&p, cfg, &all[g], part);
            copy_by_name(&full, &p);
            pz_gpt2_params_unbind(&p);
        }
        free(part);
    }
    if (st == PZ_OK && (st = pz_params_save(&full, path)) == PZ_OK) fprintf(stderr, "pipezip train: saved %s\n", path);
    pz_gpt2_params_unbind(&full);
    free(mem);
    return st;
}
