/* test_memplan.c: each term of the memory plan (runtime/plan/memplan.c) against
 * what it stands for (issue 24: the AdamW term divided by 10 survived every
 * test, because the memory check's runs are dominated by activations).
 * Stages of the tiny preset are built for real and their allocations
 * counted: parameters and gradients (pz_stage_init), AdamW's moments
 * (pz_optim_init), one activation slot (pz_acts_init, plus the token and
 * target ids); the backward scratch and the buffers by their formulas,
 * written out here from the shapes they hold. */
#include <stdio.h>
#include <string.h>

#include "kernels/backend.h"
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
    return check_summary("memplan");
}
