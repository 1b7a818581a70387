/* test_options.c: the train flags' checks in one place
 * (runtime/plan/options.c): each combination the command line refuses, by
 * the message that names its flags, and what a good set turns into. */
#include <string.h>

#include "runtime/plan/options.h"
#include "tests/check.h"

typedef struct {
    const char *what;
    void (*set)(pz_train_opts *o, pz_train_words *w);
    const char *needle;   /* NULL: accepted */
} opt_case;

static void none(pz_train_opts *o, pz_train_words *w) { (void)o, (void)w; }
static void ev_bad(pz_train_opts *o, pz_train_words *w) { (void)o, w->eval_compress = "yes"; }
static void em_bad(pz_train_opts *o, pz_train_words *w) { (void)o, w->error_metrics = "maybe"; }
static void bind_bad(pz_train_opts *o, pz_train_words *w) { (void)o, w->bind = "sockets"; }
static void prog_bad(pz_train_opts *o, pz_train_words *w) { (void)o, w->progress = "poll"; }
static void ck_every(pz_train_opts *o, pz_train_words *w) { (void)w, o->ckpt.every = 5; }
static void restarts(pz_train_opts *o, pz_train_words *w) { (void)o, w->max_restarts = 2; }
static void resume_auto(pz_train_opts *o, pz_train_words *w) { (void)w, o->ckpt.resume = "auto"; }
static void no_data(pz_train_opts *o, pz_train_words *w) { (void)w, o->model.data = NULL; }
static void sched_bad(pz_train_opts *o, pz_train_words *w) { (void)w, o->sched.stages = 2, o->sched.name = "zigzag"; }
static void virt_plain(pz_train_opts *o, pz_train_words *w) { (void)w, o->sched.stages = 2, o->sched.virtual_stages = 2; }
static void virt_contra(pz_train_opts *o, pz_train_words *w) {
    (void)w, o->sched.stages = 2, o->model.micro = 2, o->sched.name = "interleaved:v=2", o->sched.virtual_stages = 3;
}
static void inter_no_v(pz_train_opts *o, pz_train_words *w) { (void)w, o->sched.stages = 2, o->sched.name = "interleaved"; }
static void inter_one(pz_train_opts *o, pz_train_words *w) { (void)w, o->sched.name = "interleaved:v=2"; }
static void inter_m(pz_train_opts *o, pz_train_words *w) {
    (void)w, o->sched.stages = 2, o->model.micro = 3, o->sched.name = "interleaved:v=2";
}
static void inter_split(pz_train_opts *o, pz_train_words *w) {
    (void)w, o->sched.stages = 2, o->model.micro = 2, o->sched.name = "interleaved:v=2", o->sched.split = "1,1";
}
static void dump_one(pz_train_opts *o, pz_train_words *w) { (void)w, o->observe.dump_edge = 1; }
static void dump_late(pz_train_opts *o, pz_train_words *w) { (void)w, o->sched.stages = 2, o->model.steps = 3, o->observe.dump_edge = 4; }
static void trace_one(pz_train_opts *o, pz_train_words *w) { (void)w, o->observe.trace = "t.json"; }
static void secret_one(pz_train_opts *o, pz_train_words *w) { (void)w, o->net.job_secret_file = "s"; }
static void device_bad(pz_train_opts *o, pz_train_words *w) { (void)w, o->host.device = "tpu"; }
static void bsgd_good(pz_train_opts *o, pz_train_words *w) {
    o->dp.replicas = 4, w->dp_reduce = "hierarchical", o->dp.hosts = 2, o->dp.warmup = 3, w->optimizer = "binsgdm";
}

/* --optimizer: what each combination must say (NULL: accepted) */
static const struct {
    const char *optimizer, *dp_compress, *device, *dp_reduce;
    int stages, replicas, hosts;
    const char *needle;
} opt_cases[] = {
    {"sgd", NULL, "cpu", NULL, 1, 1, 0, "--optimizer must be adamw or binsgdm, not 'sgd'"},
    {"binsgdm", "sign", "cpu", NULL, 1, 2, 0, "binsgdm sends its own 1-bit messages"},
    {"binsgdm", "ef(sign)", "cpu", NULL, 1, 2, 0, "--dp-compress 'ef(sign)' is the codec of AdamW's"},
    {"binsgdm", NULL, "cpu", NULL, 2, 2, 0, NULL},
    {"binsgdm", NULL, "cuda", NULL, 1, 1, 0, "binsgdm runs on --device cpu only"},
    {"binsgdm", NULL, "cpu", "hierarchical", 1, 4, 3, "--dp-reduce hierarchical needs --dp-hosts H dividing --replicas 4 (H = 3)"},
    {"binsgdm", NULL, "cpu", "hierarchical", 1, 4, 0, NULL},   /* the hosts from the ranks' host names */
    {"binsgdm", "none", "cpu", NULL, 1, 1, 0, NULL},
    {"binsgdm", NULL, "cpu", "twophase", 1, 3, 0, NULL},
};

/* --dp-compress-what momentum (1-bit Adam): a warm-up, one stage, a codec */
static void mom(pz_train_opts *o, pz_train_words *w) {
    o->dp.replicas = 2, o->dp.compress = "sign", o->dp.warmup = 3, w->dp_what = "momentum";
}
static void mom_nowarm(pz_train_opts *o, pz_train_words *w) { mom(o, w), o->dp.warmup = 0; }
static void mom_stages(pz_train_opts *o, pz_train_words *w) { mom(o, w), o->sched.stages = 2; }
static void mom_nocodec(pz_train_opts *o, pz_train_words *w) { mom(o, w), o->dp.compress = NULL, o->dp.warmup = 0; }
static void mom_bsgd(pz_train_opts *o, pz_train_words *w) { mom_nocodec(o, w), w->optimizer = "binsgdm"; }
static void what_bad(pz_train_opts *o, pz_train_words *w) { mom(o, w), w->dp_what = "m"; }
/* grad-frozen-v: a warm-up too (v freezes when it ends); any --stages (the gradient path's tied sum) */
static void gfv(pz_train_opts *o, pz_train_words *w) { mom_stages(o, w), w->dp_what = "grad-frozen-v"; }
static void gfv_nowarm(pz_train_opts *o, pz_train_words *w) { gfv(o, w), o->dp.warmup = 0; }

static void check_optimizers(void) {
    for (size_t i = 0; i < sizeof opt_cases / sizeof opt_cases[0]; i++) {
        pz_train_opts o;
        pz_train_words w;
        pz_train_opts_default(&o);
        pz_train_words_default(&w);
        o.model.preset = "tiny", o.model.data = "d.bin";
        w.optimizer = opt_cases[i].optimizer, o.dp.compress = opt_cases[i].dp_compress;
        o.host.device = opt_cases[i].device, w.dp_reduce = opt_cases[i].dp_reduce;
        o.sched.stages = opt_cases[i].stages, o.dp.replicas = opt_cases[i].replicas, o.dp.hosts = opt_cases[i].hosts;
        pz_sched_spec sp;
        pz_status st = pz_train_opts_check(&o, &w, &sp);
        check_status_at(__FILE__, __LINE__, opt_cases[i].needle ? opt_cases[i].needle : "accepted", st,
                        opt_cases[i].needle ? PZ_ERR_ARG : PZ_OK, opt_cases[i].needle);
    }
}

static void good_pipe(pz_train_opts *o, pz_train_words *w) {
    o->sched.stages = 2, o->model.micro = 4, o->sched.name = "interleaved", o->sched.virtual_stages = 2, o->observe.trace = "t.json";
    w->eval_compress = "off", w->progress = "inline", w->bind = "none", w->max_restarts = 1;
    o->ckpt.dir = "ck", o->ckpt.resume = "auto", o->observe.dump_edge = 2, o->model.steps = 2;
}

static const opt_case cases[] = {
    {"defaults", none, NULL},
    {"--eval-compress yes", ev_bad, "--eval-compress: expected on or off, got 'yes'"},
    {"--error-metrics maybe", em_bad, "--error-metrics: expected on or off"},
    {"--bind sockets", bind_bad, "sockets"},
    {"--progress poll", prog_bad, "--progress must be thread or inline, not 'poll'"},
    {"--checkpoint-every alone", ck_every, "--checkpoint-every needs --checkpoint-dir"},
    {"--max-restarts alone", restarts, "--max-restarts needs --checkpoint-dir"},
    {"--resume auto alone", resume_auto, "--resume auto looks in --checkpoint-dir"},
    {"no --data", no_data, "--data is required"},
    {"unknown schedule", sched_bad, "zigzag"},
    {"--virtual-stages without interleaved", virt_plain, "--virtual-stages 2 needs --schedule interleaved, not auto"},
    {"--virtual-stages against v=", virt_contra, "--virtual-stages 3 contradicts --schedule interleaved:v=2"},
    {"interleaved without V", inter_no_v, "needs the model chunks per stage"},
    {"interleaved on one stage", inter_one, "interleaving needs --stages 2 or more"},
    {"interleaved, M not a multiple of S", inter_m, "--micro-batches 3 must be a multiple of --stages 2"},
    {"interleaved --split counts chunks", inter_split, "cuts the model into 4 chunks"},
    {"--dump-edge on one stage", dump_one, "--dump-edge writes what crosses the pipeline's edges"},
    {"--dump-edge after the last step", dump_late, "--dump-edge 4: the run has only 3 steps"},
    {"--trace on one stage", trace_one, "--trace needs --stages 2 or more"},
    {"--job-secret-file on one stage", secret_one, "--job-secret-file needs --stages 2 or more"},
    {"unknown device", device_bad, "tpu"},
    {"a good pipeline", good_pipe, NULL},
    {"binsgdm hierarchical, warm-up", bsgd_good, NULL},
    {"1-bit Adam", mom, NULL},
    {"1-bit Adam without a warm-up", mom_nowarm, "--dp-compress-what momentum needs --dp-warmup N >= 1"},
    {"1-bit Adam on 2 stages", mom_stages, "--dp-compress-what momentum needs --stages 1"},
    {"1-bit Adam without a codec", mom_nocodec, "--dp-compress-what momentum needs --dp-compress SPEC"},
    {"1-bit Adam under binsgdm", mom_bsgd, "--dp-compress-what momentum needs --dp-compress SPEC (and --optimizer adamw)"},
    {"--dp-compress-what m", what_bad, "--dp-compress-what must be grad, grad-frozen-v or momentum, not 'm'"},
    {"grad-frozen-v on 2 stages", gfv, NULL},
    {"grad-frozen-v without a warm-up", gfv_nowarm, "--dp-compress-what grad-frozen-v needs --dp-warmup N >= 1"},
};

int main(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pz_train_opts o;
        pz_train_words w;
        pz_train_opts_default(&o);
        pz_train_words_default(&w);
        o.model.preset = "tiny";
        o.model.data = "d.bin";
        cases[i].set(&o, &w);
        pz_sched_spec sp;
        pz_status st = pz_train_opts_check(&o, &w, &sp);
        check_status_at(__FILE__, __LINE__, cases[i].what, st, cases[i].needle ? PZ_ERR_ARG : PZ_OK, cases[i].needle);
    }
    /* what the checks turn words into, and the schedule they hand on */
    pz_train_opts o;
    pz_train_words w;
    pz_train_opts_default(&o);
    pz_train_words_default(&w);
    o.model.data = "d.bin";
    good_pipe(&o, &w);
    pz_sched_spec sp;
    CHECK_STATUS(pz_train_opts_check(&o, &w, &sp), PZ_OK, NULL);
    CHECK(o.link.eval_compress == 0 && o.observe.error_metrics == 1 && o.net.progress_inline == 1 && o.host.bind == 0,
          "words: eval_compress %d error_metrics %d inline %d bind %d", o.link.eval_compress, o.observe.error_metrics,
          o.net.progress_inline, o.host.bind);
    CHECK(sp.kind == PZ_SCHED_INTERLEAVED && sp.virtual_stages == 2 && pz_sched_chunks(&sp) == 2,
          "schedule kind %d v %d", (int)sp.kind, sp.virtual_stages);
    CHECK(pz_train_nchunks(&o.sched) == 4, "%d pieces, want 2 stages x 2 chunks", pz_train_nchunks(&o.sched));
    /* `pipezip schedule` shares the schedule's part */
    CHECK_STATUS(pz_sched_of_flags("gpipe", 2, &sp), PZ_ERR_ARG, "--virtual-stages 2 needs --schedule interleaved");
    CHECK_STATUS(pz_sched_of_flags("interleaved", 3, &sp), PZ_OK, NULL);
    CHECK(sp.virtual_stages == 3, "v %d from --virtual-stages", sp.virtual_stages);
    /* --optimizer: refusals, the kind, and binsgdm's exchange mode without --dp-compress */
    check_optimizers();
    CHECK(o.model.optim.kind == PZ_OPTIM_ADAMW, "default optimizer %d", (int)o.model.optim.kind);
    pz_train_opts_default(&o);
    pz_train_words_default(&w);
    o.model.data = "d.bin";
    bsgd_good(&o, &w);
    CHECK_STATUS(pz_train_opts_check(&o, &w, &sp), PZ_OK, NULL);
    CHECK(o.model.optim.kind == PZ_OPTIM_BINSGDM && o.dp.reduce == 3 && !o.dp.compress, "binsgdm: kind %d mode %d",
          (int)o.model.optim.kind, o.dp.reduce);
    pz_train_opts_default(&o);
    pz_train_words_default(&w);
    o.model.data = "d.bin";
    mom(&o, &w);
    CHECK_STATUS(pz_train_opts_check(&o, &w, &sp), PZ_OK, NULL);
    CHECK(o.dp.momentum == 1 && o.dp.freeze_v == 1, "--dp-compress-what momentum: %d %d", o.dp.momentum, o.dp.freeze_v);
    gfv(&o, &w);
    CHECK_STATUS(pz_train_opts_check(&o, &w, &sp), PZ_OK, NULL);
    CHECK(o.dp.momentum == 0 && o.dp.freeze_v == 1, "grad-frozen-v: %d %d", o.dp.momentum, o.dp.freeze_v);
    return check_summary("options");
}
