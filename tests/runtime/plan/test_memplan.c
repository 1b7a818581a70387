/* test_memplan.c: each term of the memory plan (runtime/plan/memplan.c) against
 * what it stands for (issue 24: the AdamW term divided by 10 survived every
 * test, because the memory check's runs are dominated by activations).
 * Stages of the tiny preset are built for real and their allocations
 * counted: parameters and gradients (pz_stage_init), AdamW's moments
 * (pz_optim_init), one activation slot (pz_acts_init, plus the token and
 * target ids); the backward scratch and the buffers by their formulas,
 * written out here from the shapes they hold. With replicas: the error
 * feedback of compressed reductions created for real (on a group that
 * never sends: creating one sends nothing), the buckets of a real sync, and
 * the data-parallel term in the rank's total. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "kernels/backend.h"
#include "runtime/dp/sync.h"
#include "runtime/plan/memplan.h"
#include "stages/optim.h"
#include "stages/gpt2_config.h"
#include "stages/stage.h"
#include "tests/check.h"

#define F 4.0   /* bytes of a float */

static void check_stage(const pz_gpt2_config *cfg, pz_stage_range r, int B, int T, int defer, int slots, int micro) {
    const int first = r.has_embed, last = r.has_head;
    pz_stage s;
    pz_optim opt;
    pz_acts a;
    memset(&opt, 0, sizeof opt);
    memset(&a, 0, sizeof a);
    CHECK_STATUS(pz_stage_init(&s, pz_backend_cpu(), cfg, &r, B, T), PZ_OK, NULL);
    s.defer_weights = defer;
    pz_optim_config oc;
    pz_optim_config_default(&oc);
    oc.total_steps = 10;
    CHECK_STATUS(pz_optim_init(&opt, &s, &oc), PZ_OK, NULL);
    CHECK_STATUS(pz_acts_init(&a, &s), PZ_OK, NULL);
    const double codec = 12345.0;
    pz_mem_need n = pz_mem_need_of(cfg, &r, B, T, defer, slots, micro, first, last, codec);

    const double BT = (double)B * T, C = cfg->channels, act = BT * C * F;
    /* parameters and gradients as pz_stage_init allocates them */
    double want = ((double)s.params.numel + (double)s.grads.numel) * F;
    CHECK(n.model == want, "blocks [%d, %d): model %.0f, allocated %.0f", r.l0, r.l1, n.model, want);
    /* AdamW: m and v, one float per parameter each */
    want = 2.0 * (double)opt.numel * F;
    CHECK(opt.numel == s.params.numel, "AdamW holds %zu moments per kind for %zu parameters", opt.numel, s.params.numel);
    CHECK(n.optim == want, "blocks [%d, %d): AdamW %.0f, allocated %.0f", r.l0, r.l1, n.optim, want);
    /* backward scratch: dres, dres2, dln (B,T,C each), dqkv (B,T,3C), datty
     * (B,T,C), datt (B,NH,T,T), dfch and dfch_gelu (B,T,4C each) */
    want = (BT * C * (2 + 1 + 3 + 1 + 8) + (double)B * cfg->num_heads * T * T) * F;
    CHECK(n.scratch == want, "blocks [%d, %d): scratch %.0f, formula %.0f", r.l0, r.l1, n.scratch, want);
    /* activation slots: what pz_acts_init allocates, with the ids */
    want = slots * ((double)a.numel + 2 * BT) * F;
    CHECK(n.slots == slots && n.acts == want, "blocks [%d, %d): %d slots of activations %.0f, allocated %.0f", r.l0,
          r.l1, n.slots, n.acts, want);
    /* buffers: per slot d(input) and a received activation's message (not
     * on the first stage) and a received gradient's message (not on the
     * last); one decoded activation and gradient; a send ring of
     * min(slots + 2, micro) messages each way */
    int ring = slots + 2 < micro ? slots + 2 : micro;
    want = slots * ((first ? 0 : 2) + (last ? 0 : 1)) * act + (ring + 1) * ((first ? 0 : 1) + (last ? 0 : 1)) * act;
    CHECK(n.buffers == want, "blocks [%d, %d): buffers %.0f, formula %.0f", r.l0, r.l1, n.buffers, want);
    CHECK(n.codec == codec, "codec state %.0f, given %.0f", n.codec, codec);
    want = n.model + n.optim + n.scratch + n.acts + n.buffers + n.codec;
    CHECK(n.total == want, "total %.0f, the terms add to %.0f", n.total, want);
    pz_acts_free(&a, &s);
    pz_optim_free(&opt, &s);
    pz_stage_free(&s);
}

/* The error feedback the plan counts against a reduction created for real:
 * member me of D, n elements, each mode. */
static void check_ef(pz_dp_mode mode, int D, int hosts, size_t n) {
    static char no_transport;   /* create sends nothing: the group only needs a transport to name */
    int ranks[PZ_DP_MAX];
    for (int i = 0; i < D; i++) ranks[i] = 10 + i;
    for (int me = 0; me < D; me++) {
        pz_dp_group g;
        CHECK_STATUS(pz_dp_group_init(&g, (pz_transport *)&no_transport, ranks[me], ranks, D), PZ_OK, NULL);
        pz_dp_copts co = {mode, 1, 7, hosts, 0, 0};
        pz_dp_creduce *c = NULL;
        CHECK_STATUS(pz_dp_creduce_create(&c, &g, "sign", &co, n), PZ_OK, NULL);
        size_t w = 0, s = 0, wl = 0, sl = 0, lo = 0;
        const float *we = c ? pz_dp_creduce_worker_error(c, &wl) : NULL, *se = c ? pz_dp_creduce_server_error(c, &lo, &sl) : NULL;
        pz_dp_creduce_ef_floats(&co, n, D, me, &w, &s);
        CHECK(w == wl && s == sl && (wl == 0) == (we == NULL) && (sl == 0) == (se == NULL),
              "mode %d, member %d of %d: plan worker %zu server %zu floats, created %zu and %zu", (int)mode, me, D, w, s,
              wl, sl);
        CHECK(pz_dp_plan_bytes(n, 0, 0, D, me, &co) == (wl + sl) * sizeof(float), "mode %d: plan bytes", (int)mode);
        pz_dp_creduce_free(c);
        pz_dp_group_free(&g);
    }
}

/* The buckets the plan counts against a sync cut for real, and the term in
 * a rank's total (pz_mem_rank_need with a data-parallel figure). */
static size_t plan_n, plan_hold;
static double dp_of(const pz_mem_job *j, int r) {   /* as the executor's: the stage's chunks, the tied prefix held */
    return pz_dp_plan_stage(j->cfg, j->ranges, j->world, 1, r, 1000, 3, 1, NULL);
}

static void check_buckets(const pz_gpt2_config *cfg) {
    pz_stage_range r = {1, 2, 0, 1};   /* a last stage: its wte is held for the tied add */
    plan_n = pz_stage_numel(cfg, &r), plan_hold = (size_t)cfg->padded_vocab_size * cfg->channels;
    float *grad = xcalloc(plan_n, sizeof *grad);
    pz_dp_group g = {.n = 3, .me = 1};
    pz_dp_sync s;
    CHECK_STATUS(pz_dp_sync_init(&s, &g, grad, plan_n, plan_hold, 1000), PZ_OK, NULL);
    size_t want = (size_t)s.nb * sizeof(pz_dp_bucket);   /* its table and every bucket's op in flight at once */
    for (int i = 0; i < s.nb; i++) want += pz_dp_op_bytes(s.b[i].hi - s.b[i].lo, 3);
    CHECK(pz_dp_plan_bytes(plan_n, plan_hold, 1000, 3, 1, NULL) == want && s.nb > 2,
          "buckets: plan %zu bytes, the sync's %d buckets %zu", pz_dp_plan_bytes(plan_n, plan_hold, 1000, 3, 1, NULL),
          s.nb, want);
    pz_dp_sync_free(&s);
    free(grad);
    pz_sched_spec sp = pz_sched_plain(PZ_SCHED_1F1B);
    pz_stage_range all[2] = {{0, 1, 1, 0}, r};
    pz_policy pol;
    memset(&pol, 0, sizeof pol);
    pz_mem_job j = {cfg, all, &sp, &pol, 2, 2, 16, 4, 1, NULL, NULL};
    pz_mem_need a = pz_mem_rank_need(&j, 1);
    /* --schedule auto: on the last stage every backward is split and its
     * weight half deferred by one backward (pz_sched_defers): one slot more
     * than 1f1b's one, each keeping the matmuls' output gradients; on the
     * first stage only the last micro-batch's slot keeps them */
    pz_sched_spec au = sp;
    au.warmup_auto = PZ_SCHED_NAMED_AUTO;
    j.spec = &au;
    pz_mem_need c = pz_mem_rank_need(&j, 1), c0 = pz_mem_rank_need(&j, 0);
    j.spec = &sp;
    pz_mem_need a0 = pz_mem_rank_need(&j, 0);
    const double whole = sizeof(float) * (double)pz_acts_slot_numel(cfg, &r, j.B, j.T, 0),
                 split = sizeof(float) * (double)pz_acts_slot_numel(cfg, &r, j.B, j.T, 1);
    CHECK(split > whole && a.slots == 1 && a.acts == whole && c.slots == 2 && c.acts == 2 * split &&
              c.buffers > a.buffers,
          "auto's deferred weight halves, last stage: %d slots, acts %.0f (1f1b: %d, %.0f; one %.0f / %.0f)",
          c.slots, c.acts, a.slots, a.acts, whole, split);
    const double more0 = sizeof(float) * ((double)pz_acts_slot_numel(cfg, &all[0], j.B, j.T, 1) -
                                          (double)pz_acts_slot_numel(cfg, &all[0], j.B, j.T, 0));
    CHECK(more0 > 0 && c0.slots == a0.slots && c0.acts == a0.acts + more0 && c0.total == a0.total + more0,
          "auto's split slot, first stage: acts %.0f vs %.0f + %.0f", c0.acts, a0.acts, more0);
    j.dp_bytes = dp_of;
    pz_mem_need b = pz_mem_rank_need(&j, 1);
    CHECK(b.dp == (double)want && b.total == a.total + b.dp && a.dp == 0, "rank need: dp %.0f, total %.0f vs %.0f",
          b.dp, b.total, a.total);
}

int main(void) {
    pz_gpt2_config cfg;
    if (pz_gpt2_preset("tiny", &cfg) != PZ_OK) {
        printf("no tiny preset: %s\n", pz_last_error());
        return 1;
    }
    /* first, middle and last stage; one that is all of it; zero bubble's
     * deferred weight gradients; a ring cut short by few micro-batches */
    check_stage(&cfg, (pz_stage_range){0, 1, 1, 0}, 2, 16, 0, 3, 8);
    check_stage(&cfg, (pz_stage_range){1, 2, 0, 0}, 2, 16, 0, 2, 8);
    check_stage(&cfg, (pz_stage_range){2, 2, 0, 1}, 3, 8, 0, 1, 4);
    check_stage(&cfg, (pz_stage_range){0, 2, 1, 1}, 1, 32, 0, 1, 1);
    check_stage(&cfg, (pz_stage_range){1, 2, 0, 1}, 2, 16, 1, 4, 3);
    /* replicas: error feedback of every mode (hierarchical: leaders only), buckets */
    check_ef(PZ_DP_ALLGATHER, 2, 0, 1001);
    check_ef(PZ_DP_TWOPHASE, 3, 0, 1001);
    check_ef(PZ_DP_HIERARCHICAL, 4, 2, 1001);
    check_buckets(&cfg);
    return check_summary("memplan");
}
