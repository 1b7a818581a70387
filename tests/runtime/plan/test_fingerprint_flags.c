/* test_fingerprint_flags.c: every flag of `pipezip train` is either in the
 * ranks' fingerprint (runtime/plan/fingerprint.c) or listed here as one that
 * does not change what is computed, with the reason. Each flag is varied
 * alone through train's own parser: a fingerprinted one must change the
 * fingerprint, one that makes another job (runtime/ckpt/job.h) the job's id
 * too, and a per-rank one neither. The flags come from
 * `pipezip train --help` (the parser's own table), so a flag added later
 * without a fingerprint entry, or without a line here, fails this test.
 * Also (check_replicas): with replicas, a difference names both ranks with
 * their stage and replica, and two replicas of a stage whose shares of the
 * global batch overlap are refused, naming both.
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
#include "runtime/plan/options.h"
#include "runtime/plan/train.h"
#include "tests/check.h"

typedef enum { MATH, RANKS, NOT } role;   /* in the job's id; in the fingerprint only; in neither */

/* Each flag, parsed by train's own parser (runtime/plan/options.c) from the
 * base command line plus `extra` (both runs) and then "FLAG base" (the
 * first run, if any) or "FLAG value" (the second). */
typedef struct {
    const char *flag;
    role r;
    const char *base, *value;   /* "@data2" etc.: a file the test makes */
    const char *extra;          /* space-separated */
    const char *why;            /* RANKS and NOT: the reason */
} flag_case;

static const flag_case cases[] = {
    {"--preset", MATH, NULL, "demo", NULL, NULL},
    {"--init", MATH, NULL, "@init", NULL, NULL},   /* instead of --preset */
    {"--data", MATH, NULL, "@data2", NULL, NULL},
    {"--batch", MATH, NULL, "3", NULL, NULL},
    {"--seq", MATH, NULL, "16", NULL, NULL},
    {"--steps", MATH, NULL, "11", NULL, NULL},
    {"--micro-batches", MATH, NULL, "2", NULL, NULL},
    {"--lr", MATH, NULL, "0.002", NULL, NULL},
    {"--min-lr-frac", MATH, NULL, "0.2", NULL, NULL},
    {"--warmup", MATH, NULL, "7", NULL, NULL},
    {"--weight-decay", MATH, NULL, "0.05", NULL, NULL},
    {"--beta1", MATH, NULL, "0.8", NULL, NULL},
    {"--beta2", MATH, NULL, "0.9", NULL, NULL},
    {"--grad-clip", MATH, NULL, "0.5", NULL, NULL},
    {"--optimizer", MATH, "adamw", "binsgdm", "--stages 1", NULL},
    {"--seed", MATH, NULL, "12", NULL, NULL},
    {"--device", MATH, NULL, "cuda", NULL, NULL},
    {"--stages", MATH, NULL, "3", NULL, NULL},
    {"--replicas", MATH, NULL, "2", NULL, NULL},
    {"--layout", MATH, "stage-major", "replica-major", "--replicas 2", NULL},
    {"--dp-compress", MATH, NULL, "sign", "--replicas 2", NULL},
    {"--dp-reduce", MATH, "allgather", "twophase", "--replicas 2 --dp-compress sign", NULL},
    {"--dp-warmup", MATH, NULL, "3", "--replicas 2 --dp-compress sign", NULL},
    {"--dp-compress-what", MATH, "grad", "momentum", "--stages 1 --replicas 2 --dp-compress sign --dp-warmup 3", NULL},
    {"--dp-compress-what", MATH, "grad", "grad-frozen-v", "--replicas 2 --dp-compress sign --dp-warmup 3", NULL},
    {"--dp-variance", RANKS, NULL, "on", "--replicas 2 --dp-compress sign", "a measurement beside the sync (an extra all-reduce every member must join)"},
    {"--dp-hosts", MATH, "1", "2", "--replicas 2 --dp-compress sign --dp-reduce hierarchical", NULL},
    {"--split", MATH, NULL, "0,2", NULL, NULL},
    {"--schedule", MATH, NULL, "gpipe", NULL, NULL},
    {"--virtual-stages", MATH, "1", "2", "--schedule interleaved --micro-batches 2", NULL},
    {"--compress", MATH, NULL, "fwd=q8", NULL, NULL},
    {"--policy-file", MATH, NULL, "@policy", NULL, NULL},
    {"--compress-tied", MATH, NULL, "q8", NULL, NULL},
    {"--dp-bucket-mb", RANKS, NULL, "0.5", "--replicas 2", "the replicas' buckets must line up; the sum's order only"},
    {"--val-data", RANKS, NULL, "@data2", NULL, "validation reads it; training does not"},
    {"--val-every", RANKS, NULL, "3", NULL, "validation only"},
    {"--val-batches", RANKS, NULL, "2", NULL, "validation only"},
    {"--eval-compress", RANKS, NULL, "off", NULL, "validation only"},
    {"--link-mbps", RANKS, NULL, "100", NULL, "a simulated network; auto's decisions travel in checkpoints"},
    {"--link-latency-ms", RANKS, NULL, "5", NULL, "a simulated network, as --link-mbps"},
    {"--dp-link-mbps", RANKS, NULL, "100", "--replicas 2", "a simulated network between replicas, as --link-mbps"},
    {"--dp-link-latency-ms", RANKS, NULL, "5", "--replicas 2", "a simulated network, as --link-mbps"},
    {"--checkpoint-every", RANKS, NULL, "3", NULL, "when to checkpoint, not what is trained"},
    {"--resume", RANKS, NULL, "auto", NULL, "restarts add --resume auto to the same job"},
    /* not varied: refused with a preset, ignored when --init says; else the model line (NH=) has it */
    {"--heads", NOT, NULL, NULL, NULL, "the model line's NH= when it counts"},
    {"--save", NOT, NULL, "x.safetensors", NULL, "an output"},
    {"--threads", NOT, NULL, "3", NULL, "per rank"},
    {"--bind", NOT, NULL, "none", NULL, "per rank"},
    {"--peer-timeout", NOT, NULL, "7", NULL, "per rank"},
    {"--job-secret-file", NOT, NULL, "@policy", NULL, "authentication, before the fingerprint"},
    {"--trace", NOT, NULL, "x.json", NULL, "an output"},
    {"--metrics", NOT, NULL, "x", NULL, "an output"},
    {"--dump-edge", NOT, NULL, "2", NULL, "an output"},
    {"--dump-dir", NOT, NULL, "x", NULL, "an output"},
    {"--error-metrics", NOT, NULL, "off", NULL, "measures, changes nothing"},
    {"--progress", NOT, NULL, "inline", NULL, "how messages move, not what they hold"},
    {"--checkpoint-dir", NOT, NULL, "ck2", NULL, "where checkpoints go; the job check reads it"},
    {"--keep-checkpoints", NOT, NULL, "5", NULL, "how many checkpoints stay"},
    {"--max-restarts", NOT, NULL, "1", NULL, "the launcher's, not the ranks'"},
    {"--check", NOT, NULL, NULL, NULL, "validates the command line and exits: no rank runs"},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static char files[4][256];   /* data, data2, init, policy */

static const char *value_of(const char *v) {
    if (!strcmp(v, "@data2")) return files[1];
    if (!strcmp(v, "@init")) return files[2];
    if (!strcmp(v, "@policy")) return files[3];
    return v;
}

/* o from the base command line, c's extra flags and "c->flag v" (v NULL:
 * none), through train's parser; 0 when it refused them */
static int parse(const flag_case *c, const char *v, pz_train_opts *o) {
    static char words[512];
    char *av[64];
    int ac = 0;
    if (strcmp(c->flag, "--init") != 0 || !v) av[ac++] = "--preset", av[ac++] = "tiny";
    const char *base[] = {"--data", files[0], "--batch", "2", "--seq", "32", "--steps", "10", "--stages", "2",
                          "--checkpoint-dir", "ck"};
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) av[ac++] = (char *)base[i];
    snprintf(words, sizeof words, "%s", c->extra ? c->extra : "");
    for (char *save = NULL, *t = strtok_r(words, " ", &save); t; t = strtok_r(NULL, " ", &save)) av[ac++] = t;
    if (v) av[ac++] = (char *)c->flag, av[ac++] = (char *)value_of(v);
    pz_train_words w;
    int r = pz_train_parse(ac, av, o, &w);
    CHECK(r == 0, "%s %s: train's parser refused it", c->flag, v ? value_of(v) : "(base)");
    return r == 0;
}

/* the fingerprint of o, as rank 0 builds it (NULL: o is not a valid run) */
static char *fingerprint(const pz_train_opts *o) {
    pz_gpt2_config cfg;
    pz_policy pol;
    if (pz_model_config(o->model.preset, o->model.init, o->model.heads, &cfg) != PZ_OK) return NULL;
    if (pz_train_policy(&o->link, pz_train_nchunks(&o->sched), &pol) != PZ_OK) return NULL;
    pz_dataset tr, va;
    memset(&tr, 0, sizeof tr);
    memset(&va, 0, sizeof va);
    char *fp = NULL;
    if (pz_dataset_open(&tr, o->model.data, o->model.seq, cfg.vocab_size) == PZ_OK &&
        (!o->model.val_data || pz_dataset_open(&va, o->model.val_data, o->model.seq, cfg.vocab_size) == PZ_OK))
        fp = pz_fingerprint_build(o, &cfg, &pol, &tr, o->model.val_data ? &va : NULL);
    pz_dataset_close(&tr);
    pz_dataset_close(&va);
    pz_policy_free(&pol);
    return fp;
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

/* S=2 x D=2, stage-major: ranks 0, 1 are stage 0's replicas, 2, 3 stage 1's */
static void check_replicas(void) {
    const pz_rank_layout names = {2, 2, 0};
    char msg[512] = "";
    CHECK(pz_fingerprint_differ("--lr\t0.001\n@share\t0 0 2\n", "--lr\t0.01\n@share\t1 2 2\n", &names, 3, msg,
                                sizeof msg) == 1 &&
              !strcmp(msg, "rank 3 (stage 1, replica 1) does not agree with rank 0 (stage 0, replica 0): --lr is 0.01 on "
                           "rank 3, 0.001 on rank 0"), "differ: %s", msg);
    CHECK(pz_fingerprint_differ("--lr\t0.001\n@share\t0 0 2\n", "--lr\t0.001\n@share\t1 2 2\n", &names, 3, msg,
                                sizeof msg) == 0, "a rank's own share is not compared");
    pz_fp_share ok[4] = {{0, 0, 2}, {0, 2, 2}, {1, 0, 2}, {1, 2, 2}};
    CHECK(pz_fingerprint_overlap(ok, 4, &names, msg, sizeof msg) == 0, "disjoint shares refused: %s", msg);
    pz_fp_share bad[4] = {{0, 0, 2}, {0, 2, 2}, {1, 0, 2}, {1, 1, 2}};
    CHECK(pz_fingerprint_overlap(bad, 4, &names, msg, sizeof msg) == 1 &&
              strstr(msg, "rank 3 (stage 1, replica 1) and rank 2 (stage 1, replica 0) would train on the same data") &&
              strstr(msg, "overlap from micro-batch 1"), "overlap: %s", msg);
}

int main(int argc, char **argv) {
    check_replicas();
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

    /* each flag varied alone, from its case's base */
    for (int k = 0; k < NCASES; k++) {
        const flag_case *c = &cases[k];
        pz_train_opts o0, o1;
        if (!c->value) continue;
        if (!parse(c, c->base, &o0) || !parse(c, c->value, &o1)) continue;
        char *fp0 = fingerprint(&o0), *fp1 = fingerprint(&o1);
        CHECK(fp0 && fp1, "%s: no fingerprint: %s", c->flag, pz_last_error());
        if (fp0 && fp1) {
            char *d0 = pz_job_desc(fp0), *d1 = pz_job_desc(fp1);
            int fp_differs = strcmp(fp0, fp1) != 0, id_differs = pz_job_id(d0) != pz_job_id(d1);
            if (c->r == NOT) {
                CHECK(!fp_differs, "%s %s changes the ranks' fingerprint (%s)", c->flag, value_of(c->value), c->why);
            } else {
                CHECK(fp_differs, "%s %s does not change the ranks' fingerprint", c->flag, value_of(c->value));
            }
            if (c->r == MATH) {
                CHECK(id_differs, "%s %s does not change the job's id", c->flag, value_of(c->value));
                char msg[1024];
                pz_job_compare(d1, d0, msg, sizeof msg);
                /* the message names the flag (a policy file's clauses are --compress's) */
                const char *named = !strcmp(c->flag, "--policy-file") ? "--compress" : c->flag;
                CHECK(strstr(msg, named) != NULL, "%s: the difference reads [%s]", c->flag, msg);
            } else {
                CHECK(!id_differs, "%s %s changes the job's id (%s)", c->flag, value_of(c->value), c->why);
            }
            free(d0);
            free(d1);
        }
        free(fp0);
        free(fp1);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    run(cmd);
    return check_summary("fingerprint_flags");
}
