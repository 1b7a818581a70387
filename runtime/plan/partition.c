/* partition.c: see partition.h. */
#include "runtime/plan/partition.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>

double pz_block_cost(const pz_gpt2_config *c, int T) {
    double C = c->channels;
    /* 6 * params per token for the GEMMs (12 C^2 params) plus attention's
     * QK^T and AV products (about 6 * C * T per token for forward+backward) */
    return 6.0 * 12.0 * C * C + 6.0 * C * T;
}

double pz_head_cost(const pz_gpt2_config *c) {
    /* the classifier GEMM over the padded vocabulary, forward and backward,
     * plus the softmax, which is memory-bound: counted as ~5 flops a logit */
    return 6.0 * c->channels * (double)c->padded_vocab_size + 5.0 * c->padded_vocab_size;
}

double pz_embed_cost(const pz_gpt2_config *c) { return 4.0 * c->channels; }

static double stage_cost(const pz_gpt2_config *c, int T, const pz_stage_range *r) {
    double cost = (r->l1 - r->l0) * pz_block_cost(c, T);
    if (r->has_embed) cost += pz_embed_cost(c);
    if (r->has_head) cost += pz_head_cost(c);
    return cost;
}

/* Greedy fill under a cost cap: can S stages cover all blocks? */
static int fits(const pz_gpt2_config *c, int T, int S, double cap, pz_stage_range *out) {
    int L = c->num_layers, l = 0;
    for (int s = 0; s < S; s++) {
        pz_stage_range r = {l, l, s == 0, s == S - 1};
        if (stage_cost(c, T, &r) > cap) return 0;
        /* the last stage takes whatever is left */
        if (s == S - 1) r.l1 = L;
        else
            while (r.l1 < L) {
                pz_stage_range t = r;
                t.l1++;
                if (stage_cost(c, T, &t) > cap) break;
                r = t;
            }
        if (stage_cost(c, T, &r) > cap) return 0;
        if (out) out[s] = r;
        l = r.l1;
    }
    return l == L;
}

/* S pieces: the stages, or with V > 1 the chunks of the interleaved
 * schedule (V per stage, S / V stages), which the messages name as the user
 * gave them */
static pz_status cut(const pz_gpt2_config *c, int T, int S, int V, const char *spec, pz_stage_range *ranges) {
    int L = c->num_layers;
    if (S < 1) return pz_fail(PZ_ERR_ARG, "--stages %d: need at least 1 stage", S);
    const char *unit = V > 1 ? "chunk" : "stage";
    char who[96];
    if (V > 1) snprintf(who, sizeof who, "--stages %d with %d model chunks per stage (%d chunks)", S / V, V, S);
    else snprintf(who, sizeof who, "--stages %d", S);
    if (spec) {
        const char *p = spec;
        int s = 0, l = 0;
        while (*p) {
            char *end;
            long n = strtol(p, &end, 10);
            if (end == p || n < 0 || n > L)
                return pz_fail(PZ_ERR_ARG, "--split '%s': expected block counts like 3,3,3,3 at '%s'", spec, p);
            if (s >= S)
                return pz_fail(PZ_ERR_ARG, "--split '%s' names more than %d %ss", spec, S, unit);
            pz_stage_range r = {l, l + (int)n, s == 0, s == S - 1};
            if (r.l1 > L)
                return pz_fail(PZ_ERR_ARG, "--split '%s' gives more than the model's %d blocks", spec, L);
            ranges[s++] = r;
            l = r.l1;
            if (*end == ',') end++;
            else if (*end) return pz_fail(PZ_ERR_ARG, "--split '%s': unexpected '%c'", spec, *end);
            p = end;
        }
        if (s != S) return pz_fail(PZ_ERR_ARG, "--split '%s' names %d %ss, %s needs %d", spec, s, unit, who, S);
        if (l != L) return pz_fail(PZ_ERR_ARG, "--split '%s' covers %d of the model's %d blocks", spec, l, L);
        for (int i = 0; i < S; i++)
            if (ranges[i].l0 == ranges[i].l1 && !ranges[i].has_embed && !ranges[i].has_head)
                return pz_fail(PZ_ERR_ARG, "--split '%s': %s %d would own nothing", spec, unit, i);
        return PZ_OK;
    }
    if (S > L + 2)
        return pz_fail(PZ_ERR_ARG, "%s: a model of %d blocks can be cut into at most %d %ss", who, L, L + 2, unit);
    /* binary search the smallest bottleneck the greedy fill achieves */
    pz_stage_range all = {0, L, 1, 1};
    double lo = 0.0, hi = stage_cost(c, T, &all);
    for (int it = 0; it < 100; it++) {
        double mid = 0.5 * (lo + hi);
        if (fits(c, T, S, mid, NULL)) hi = mid; else lo = mid;
    }
    if (!fits(c, T, S, hi, ranges))
        return pz_fail(PZ_ERR_ARG, "%s: no balanced split of %d blocks found", who, L);
    for (int i = 0; i < S; i++)
        if (ranges[i].l0 == ranges[i].l1 && !ranges[i].has_embed && !ranges[i].has_head)
            return pz_fail(PZ_ERR_ARG, "%s: a model of %d blocks leaves %s %d empty", who, L, unit, i);
    return PZ_OK;
}

pz_status pz_partition(const pz_gpt2_config *c, int T, int S, const char *spec, pz_stage_range *ranges) {
    return cut(c, T, S, 1, spec, ranges);
}

pz_status pz_partition_chunks(const pz_gpt2_config *c, int T, int S, int V, const char *spec, pz_stage_range *ranges) {
    return cut(c, T, S * V, V, spec, ranges);
}

void pz_partition_print(FILE *f, const pz_gpt2_config *c, int T, int S, const pz_stage_range *ranges) {
    double total = 0.0;
    for (int s = 0; s < S; s++) total += stage_cost(c, T, &ranges[s]);
    for (int s = 0; s < S; s++) {
        const pz_stage_range *r = &ranges[s];
        fprintf(f, "stage %d: blocks [%d, %d)%s%s, %.1f%% of the compute\n", s, r->l0, r->l1,
                r->has_embed ? " + embedding" : "", r->has_head ? " + final norm, head and loss" : "",
                100.0 * stage_cost(c, T, r) / total);
    }
}
