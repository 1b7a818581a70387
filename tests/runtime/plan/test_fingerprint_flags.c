/* test_fingerprint_flags.c: every flag of `pipezip train` is either in the
 * ranks' fingerprint (runtime/plan/fingerprint.c) or listed here as one that
 * does not change what is computed, with the reason; each fingerprinted
 * flag, varied alone, must change the fingerprint, and those that make
 * another job (runtime/ckpt/job.h) the job's id too. The flags come from
 * `pipezip train --help` (the parser's own table), so a flag added later
 * without a fingerprint entry, or without a line here, fails this test.
 *   usage: test_fingerprint_flags PATH/TO/pipezip */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"
#include "runtime/ckpt/job.h"
#include "stages/data.h"
#include "runtime/plan/fingerprint.h"
#include "runtime/exec/pipeline.h"
#include "runtime/plan/train.h"
#include "tests/check.h"

typedef enum { T_INT, T_LONG, T_FLOAT, T_STR } field_type;
typedef enum { MATH, RANKS, NOT } role;   /* in the job's id; in the fingerprint only; in neither */

typedef struct {
    const char *flag;
    role r;
    field_type t;
    size_t off;          /* into pz_train_opts */
    const char *value;   /* the varied value; "@A" etc.: a file the test makes */
    const char *why;     /* RANKS and NOT: the reason */
} flag_case;

#define F(name, r, t, field, v, why) {name, r, t, offsetof(pz_train_opts, field), v, why}

static const flag_case cases[] = {
    F("--preset", MATH, T_STR, preset, "demo", NULL),
    F("--init", MATH, T_STR, init, "@init", NULL),
    F("--data", MATH, T_STR, data, "@data2", NULL),
    F("--batch", MATH, T_INT, batch, "3", NULL),
    F("--seq", MATH, T_INT, seq, "16", NULL),
    F("--steps", MATH, T_INT, steps, "11", NULL),
    F("--micro-batches", MATH, T_INT, micro, "2", NULL),
    F("--lr", MATH, T_FLOAT, optim.lr, "0.002", NULL),
    F("--min-lr-frac", MATH, T_FLOAT, optim.min_lr_frac, "0.2", NULL),
    F("--warmup", MATH, T_INT, optim.warmup_steps, "7", NULL),
    F("--weight-decay", MATH, T_FLOAT, optim.weight_decay, "0.05", NULL),
    F("--beta1", MATH, T_FLOAT, optim.beta1, "0.8", NULL),
    F("--beta2", MATH, T_FLOAT, optim.beta2, "0.9", NULL),
    F("--grad-clip", MATH, T_FLOAT, optim.grad_clip, "0.5", NULL),
    F("--seed", MATH, T_LONG, seed, "12", NULL),
    F("--device", MATH, T_STR, device, "cuda", NULL),
    F("--stages", MATH, T_INT, stages, "3", NULL),
    F("--split", MATH, T_STR, split, "0,2", NULL),
    F("--schedule", MATH, T_STR, schedule, "gpipe", NULL),
    F("--virtual-stages", MATH, T_INT, virtual_stages, "2", NULL),
    F("--compress", MATH, T_STR, compress, "fwd=q8", NULL),
    F("--policy-file", MATH, T_STR, policy_file, "@policy", NULL),
    F("--compress-tied", MATH, T_STR, compress_tied, "q8", NULL),
    F("--val-data", RANKS, T_STR, val_data, "@data2", "validation reads it; training does not"),
    F("--val-every", RANKS, T_INT, val_every, "3", "validation only"),
    F("--val-batches", RANKS, T_INT, val_batches, "2", "validation only"),
    F("--eval-compress", RANKS, T_INT, eval_compress, "0", "validation only"),
    F("--link-mbps", RANKS, T_STR, link_mbps, "100", "a simulated network; auto's decisions travel in checkpoints"),
    F("--link-latency-ms", RANKS, T_STR, link_latency, "5", "a simulated network, as --link-mbps"),
    F("--checkpoint-every", RANKS, T_INT, checkpoint_every, "3", "when to checkpoint, not what is trained"),
    F("--resume", RANKS, T_STR, resume, "auto", "restarts add --resume auto to the same job"),
    F("--heads", NOT, T_INT, heads, "4", "read only when --init does not say; then the model line (NH=) has it"),
    F("--save", NOT, T_STR, save, "x", "an output"),
    F("--threads", NOT, T_INT, threads, "3", "per rank"),
    F("--bind", NOT, T_INT, bind, "0", "per rank"),
    F("--peer-timeout", NOT, T_FLOAT, peer_timeout, "7", "per rank"),
    F("--job-secret-file", NOT, T_STR, job_secret_file, "x", "authentication, before the fingerprint"),
    F("--trace", NOT, T_STR, trace, "x", "an output"),
    F("--metrics", NOT, T_STR, metrics, "x", "an output"),
    F("--dump-edge", NOT, T_INT, dump_edge, "2", "an output"),
    F("--dump-dir", NOT, T_STR, dump_dir, "x", "an output"),
    F("--error-metrics", NOT, T_INT, error_metrics, "0", "measures, changes nothing"),
    F("--progress", NOT, T_INT, progress_inline, "1", "how messages move, not what they hold"),
    F("--checkpoint-dir", NOT, T_STR, checkpoint_dir, "x", "where checkpoints go; the job check reads it"),
    F("--keep-checkpoints", NOT, T_INT, keep_checkpoints, "5", "how many checkpoints stay"),
    {"--max-restarts", NOT, T_INT, 0, NULL, "the launcher's, not the ranks'"},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static char files[4][256];   /* data, data2, init, policy */

static const char *value_of(const char *v) {
    if (!strcmp(v, "@data2")) return files[1];
    if (!strcmp(v, "@init")) return files[2];
    if (!strcmp(v, "@policy")) return files[3];
    return v;
}

static void set(pz_train_opts *o, const flag_case *c) {
    char *p = (char *)o + c->off;
    const char *v = value_of(c->value);
    switch (c->t) {
    case T_INT: *(int *)p = atoi(v); break;
    case T_LONG: *(long *)p = atol(v); break;
    case T_FLOAT: *(float *)p = strtof(v, NULL); break;
    case T_STR: *(const char **)p = v; break;
    }
    if (!strcmp(c->flag, "--warmup")) o->warmup_given = 1;
    if (!strcmp(c->flag, "--init")) o->preset = NULL;   /* one or the other */
}

/* the fingerprint of o, as rank 0 builds it (NULL: o is not a valid run) */
static char *fingerprint(const pz_train_opts *o) {
    pz_gpt2_config cfg;
    pz_policy pol;
    if (pz_model_config(o->preset, o->init, o->heads, &cfg) != PZ_OK) return NULL;
    if (pz_pipeline_policy(o, &pol) != PZ_OK) return NULL;
    pz_dataset tr, va;
    memset(&tr, 0, sizeof tr);
    memset(&va, 0, sizeof va);
    char *fp = NULL;
    if (pz_dataset_open(&tr, o->data, o->seq, cfg.vocab_size) == PZ_OK &&
        (!o->val_data || pz_dataset_open(&va, o->val_data, o->seq, cfg.vocab_size) == PZ_OK))
        fp = pz_fingerprint_build(o, &cfg, &pol, &tr, o->val_data ? &va : NULL);
    pz_dataset_close(&tr);
    pz_dataset_close(&va);
    pz_policy_free(&pol);
    return fp;
}

static void base_opts(pz_train_opts *o) {
    pz_train_opts_default(o);
    o->preset = "tiny";
    o->data = files[0];
    o->batch = 2;
    o->seq = 32;
    o->steps = 10;
    o->stages = 2;
    o->checkpoint_dir = "ck";   /* so that --checkpoint-every counts */
}

static int run(const char *cmd) {   /* a shell command that must succeed */
    int rc = system(cmd);
    CHECK(rc == 0, "%s: status %d", cmd, rc);
    return rc == 0;
}

/* the flags `pipezip train --help` lists */
static int help_flags(const char *pz, char names[][64], int cap) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "%s train --help", pz);
    FILE *f = popen(cmd, "r");
    int n = 0;
    char line[4096];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "  --", 4) && n < cap) sscanf(line + 2, "%63s", names[n++]);
    if (f) pclose(f);
    return n;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH/TO/pipezip\n", argv[0]);
        return 2;
    }
    char pz[4096];
    if (!realpath(argv[1], pz)) {
        fprintf(stderr, "%s: %s: not found\n", argv[0], argv[1]);
        return 1;
    }
    char tmp[] = "/tmp/test_fingerprint_flags_XXXXXX";
    if (!mkdtemp(tmp)) return 1;
    snprintf(files[0], sizeof files[0], "%s/a.bin", tmp);
    snprintf(files[1], sizeof files[1], "%s/b.bin", tmp);
    snprintf(files[2], sizeof files[2], "%s/init.safetensors", tmp);
    snprintf(files[3], sizeof files[3], "%s/policy.txt", tmp);
    static char cmd[4 * 4096 + 1024];
    snprintf(cmd, sizeof cmd, "cd %s && seq 1 3000 > a.txt && seq 2 3001 > b.txt && '%s' tokenize --out a.bin a.txt "
             ">/dev/null && '%s' tokenize --out b.bin b.txt >/dev/null && echo 'fwd=q4' > policy.txt && '%s' train "
             "--preset tiny --data a.bin --steps 1 --batch 1 --seq 8 --val-every 0 --save init.safetensors "
             ">/dev/null 2>&1", tmp, pz, pz, pz);
    if (!run(cmd)) return check_summary("fingerprint_flags");

    /* every flag of the parser is in the table, and every one there is a flag */
    char names[128][64];
    int nf = help_flags(pz, names, 128);
    CHECK(nf > 30, "pipezip train --help listed %d flags", nf);
    for (int i = 0; i < nf; i++) {
        int k = 0;
        while (k < NCASES && strcmp(cases[k].flag, names[i])) k++;
        CHECK(k < NCASES, "train flag %s is new: add it to the fingerprint (runtime/plan/fingerprint.c) if it changes "
              "what the ranks compute, and to this table either way", names[i]);
    }
    for (int k = 0; k < NCASES; k++) {
        int i = 0;
        while (i < nf && strcmp(cases[k].flag, names[i])) i++;
        CHECK(i < nf, "%s is in this table but not a train flag", cases[k].flag);
    }

    /* each flag varied alone */
    pz_train_opts o;
    base_opts(&o);
    char *fp0 = fingerprint(&o);
    CHECK(fp0 != NULL, "base fingerprint: %s", pz_last_error());
    if (!fp0) return check_summary("fingerprint_flags");
    char *d0 = pz_job_desc(fp0);
    uint64_t id0 = pz_job_id(d0);
    for (int k = 0; k < NCASES; k++) {
        const flag_case *c = &cases[k];
        if (c->r == NOT || !c->value) continue;
        base_opts(&o);
        set(&o, c);
        char *fp = fingerprint(&o);
        CHECK(fp != NULL, "%s %s: %s", c->flag, value_of(c->value), pz_last_error());
        if (!fp) continue;
        CHECK(strcmp(fp, fp0) != 0, "%s %s does not change the ranks' fingerprint", c->flag, value_of(c->value));
        char *d = pz_job_desc(fp);
        uint64_t id = pz_job_id(d);
        if (c->r == MATH) {
            CHECK(id != id0, "%s %s does not change the job's id", c->flag, value_of(c->value));
            char msg[1024];
            pz_job_compare(d, d0, msg, sizeof msg);
            /* the message names the flag (a policy file's clauses are --compress's; a preset's its model) */
            const char *named = !strcmp(c->flag, "--policy-file") ? "--compress" : c->flag;
            CHECK(strstr(msg, named) != NULL, "%s: the difference reads [%s]", c->flag, msg);
        } else {
            CHECK(id == id0, "%s %s changes the job's id (%s)", c->flag, value_of(c->value), c->why);
        }
        free(d);
        free(fp);
    }
    free(d0);
    free(fp0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    run(cmd);
    return check_summary("fingerprint_flags");
}
