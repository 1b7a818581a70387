/* gather.c: see gather.h. */
#include "runtime/gather.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "runtime/train.h"

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

pz_status pz_gather_save(pz_transport *tp, int rank, int world, const pz_stage *stage, const pz_stage_range *ranges,
                         uint32_t kind, const char *path) {
    const pz_gpt2_config *c = &stage->cfg;
    pz_status st = PZ_OK;
    size_t mine = stage->params.numel * sizeof(float);
    char w[64];
    snprintf(w, sizeof w, "parameters for --save, to rank 0");
    if (rank != 0) {
        float *host = xmalloc(mine);
        stage->be->to_host(host, stage->param_mem, mine);
        pz_request *r = NULL;
        st = pz_transport_send(tp, 0, pz_tag(rank, 0, 0, kind), host, mine, w, &r);
        if (st == PZ_OK) st = pz_transport_wait(tp, r, NULL);
        free(host);
        return st;
    }
    pz_stage_range whole = pz_whole_model(c);
    float *all = xmalloc(pz_stage_numel(c, &whole) * sizeof(float));
    pz_gpt2_params full;
    pz_gpt2_params_bind(&full, c, &whole, all);
    for (int r = 0; r < world && st == PZ_OK; r++) {
        size_t n = pz_stage_numel(c, &ranges[r]);
        float *part = xmalloc(n * sizeof(float));
        if (r == 0) stage->be->to_host(part, stage->param_mem, n * sizeof(float));
        else {
            pz_request *req = NULL;
            st = pz_transport_recv(tp, r, pz_tag(r, 0, 0, kind), part, n * sizeof(float), w, &req);
            if (st == PZ_OK) st = pz_transport_wait(tp, req, NULL);
        }
        if (st == PZ_OK) {
            pz_gpt2_params p;
            pz_gpt2_params_bind(&p, c, &ranges[r], part);
            copy_by_name(&full, &p);
            pz_gpt2_params_unbind(&p);
        }
        free(part);
    }
    if (st == PZ_OK) {
        st = pz_params_save(&full, path);
        if (st == PZ_OK) fprintf(stderr, "pipezip train: saved %s\n", path);
    }
    pz_gpt2_params_unbind(&full);
    free(all);
    return st;
}
