/* options.h: the train flags, parsed and checked once (issue 23).
 *
 * pz_train_parse holds `pipezip train`'s flag table (base/flags.h: each
 * flag's text into its field of pz_train_opts, with the flag's range; --help
 * comes from the same table) and then pz_train_opts_check, which checks
 * everything that needs more than one flag, or a word turned into a
 * setting, once. `pipezip schedule` shares the schedule's part
 * (pz_sched_of_flags), and the executor reads the checked result through
 * pz_train_schedule instead of checking again. What needs files (the
 * model, the policy file, the outputs) is checked by the launcher's
 * pre-flight (runtime/cli/cli.c) and pz_train_check_io (runtime/plan/train.h).
 * pz_train_opts is split by who needs what (runtime/plan/train.h). */
#ifndef PZ_RUNTIME_PLAN_OPTIONS_H
#define PZ_RUNTIME_PLAN_OPTIONS_H

#include "runtime/edge/policy.h"
#include "runtime/plan/train.h"
#include "schedules/schedule.h"

/* The train flags the command line keeps as words, and the launcher's own. */
typedef struct {
    const char *eval_compress;   /* --eval-compress on|off */
    const char *error_metrics;   /* --error-metrics on|off */
    const char *bind;            /* --bind cores|none */
    const char *progress;        /* --progress thread|inline */
    int max_restarts;            /* --max-restarts K (the local launcher's) */
    const char *layout;          /* --layout stage-major|replica-major */
    const char *dp_reduce;       /* --dp-reduce allgather|twophase|hierarchical (NULL: by D) */
    const char *optimizer;       /* --optimizer adamw|binsgdm */
    int dp_bucket_given;         /* --dp-bucket-mb appeared */
    const char *dp_variance;     /* --dp-variance on|off */
    const char *dp_what;         /* --dp-compress-what grad|grad-frozen-v|momentum */
    int check;                   /* --check: validate the command line, then exit */
} pz_train_words;

void pz_train_words_default(pz_train_words *w);

/* `pipezip train`'s flags (argc/argv after "train"): defaults, then the
 * table that parses each flag with its range (and prints --help from the
 * same table), then pz_train_opts_check. Returns 0, 1 after printing the
 * error, 2 after printing --help. */
int pz_train_parse(int argc, char **argv, pz_train_opts *o, pz_train_words *w);

/* Every check of the train flags that reads no file: the words into o's
 * fields, flags that need another (--checkpoint-every, --max-restarts and
 * --resume auto need --checkpoint-dir; --dump-edge needs a pipeline and a
 * step that comes), flags only a pipeline uses, the schedule with
 * --virtual-stages, --stages, --micro-batches and --split, the devices.
 * *sched (may be NULL) gets the schedule. The message names the flags. */
pz_status pz_train_opts_check(pz_train_opts *o, const pz_train_words *w, pz_sched_spec *sched);

/* The schedule of --schedule NAME and --virtual-stages V (0: not given):
 * interleaved takes V from either, and they must agree; V without
 * interleaved is refused. `pipezip train` and `pipezip schedule` both. */
pz_status pz_sched_of_flags(const char *schedule, int virtual_stages, pz_sched_spec *sp);

/* Model chunks per rank: V for interleaved:v=V, else 1. */
int pz_sched_chunks(const pz_sched_spec *sp);
/* pz_sched_of_flags for the schedule's flags. */
pz_status pz_train_sched(const pz_sched_opts *s, pz_sched_spec *sp);
/* Pieces the model is cut into: --stages, or stages x V for interleaved
 * (the policy's edges and --split count these). */
int pz_train_nchunks(const pz_sched_opts *s);
/* The policy of --policy-file, --compress, --link-mbps and
 * --link-latency-ms, per boundary between the model's nchunks chunks
 * (pz_train_nchunks) (validated; the launcher calls it too, to fail once,
 * early). */
pz_status pz_train_policy(const pz_link_opts *l, int nchunks, pz_policy *p);
/* The combinations of the schedule and the train flags the executor cannot
 * run, refused with the reason. */
pz_status pz_train_check(const pz_train_opts *o, const pz_sched_spec *sp);
/* The executor's one call: pz_train_sched, then pz_train_check (a rank
 * started without the command line's checks, by a test or an embedder,
 * still refuses what it cannot run). */
pz_status pz_train_schedule(const pz_train_opts *o, pz_sched_spec *sp);

#endif
