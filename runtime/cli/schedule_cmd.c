/* schedule_cmd.c: `pipezip schedule`, prints a schedule's table or one
 * stage's instruction list. */
#include "runtime/cli/schedule_cmd.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/plan/options.h"
#include "schedules/schedule.h"
#include "base/parse.h"

static const char usage[] =
    "usage: pipezip schedule --stages S --micro-batches M [--schedule NAME] [--virtual-stages V]\n"
    "                        [--stage K]\n"
    "\n"
    "Prints the pipeline schedule that the executor runs with S stages and M micro-batches:\n"
    "one column per stage and one row per time slot (F3 / B3 = forward / backward of\n"
    "micro-batch 3), then each stage's warm-up, steady and cool-down counts, its peak\n"
    "number of micro-batches in flight, and the bubble fraction ((S-1)/(M+S-1); zb-h1,\n"
    "with F = B = W one slot each: (S-1)/(3M+S-1); interleaved with V model chunks per\n"
    "stage, one slot per chunk's forward or backward: (S-1)/(MV+S-1)).\n"
    "With --stage K, prints stage K's instruction list instead (what its executor runs,\n"
    "receives and sends included). The table is limited to S x 2(MV+S-1) <= %ld cells.\n"
    "\n"
    "flags:\n"
    "  --stages S          pipeline stages, 1..%d (required)\n"
    "  --micro-batches M   micro-batches per optimizer step, 1..%d (required)\n"
    "  --schedule NAME     1f1b (default), 1f1b:warmup=K (K extra warm-up forwards per\n"
    "                      downstream stage, to cover a slow link's round trip), zb-h1\n"
    "                      (zero-bubble H1: weight gradients W deferred into the bubbles),\n"
    "                      gpipe, or interleaved:v=V (Megatron's interleaved 1F1B: each\n"
    "                      stage holds V model chunks, stage s the chunks s, s+S, ...;\n"
    "                      M must be a multiple of S; cells Fi.c / Bi.c name the chunk c);\n"
    "                      warmup=auto (and auto, train's default) is chosen by\n"
    "                      'pipezip train' from measured times.\n"
    "                      'pipezip train' runs them all (interleaved: --stages 2 or more)\n"
    "  --virtual-stages V  model chunks per stage, 1..%d: the same as\n"
    "                      --schedule interleaved:v=V (with --schedule interleaved)\n"
    "  --stage K           print the instruction list of stage K (0-based)\n";

__attribute__((format(printf, 1, 2))) static int err(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pipezip schedule: error: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int pz_cmd_schedule(int argc, char **argv) {
    const char *stages_s = NULL, *micro_s = NULL, *sched_s = "1f1b", *stage_s = NULL, *virt_s = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf(usage, PZ_SCHED_MAX_TABLE, PZ_SCHED_MAX_STAGES, PZ_SCHED_MAX_MICRO, PZ_SCHED_MAX_VIRTUAL);
            return 0;
        }
        if (strncmp(a, "--", 2) != 0) return err("unexpected argument '%s' (see --help)", a);
        /* --flag value or --flag=value */
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        const char **dst = NULL;
        if (nlen == 8 && strncmp(a, "--stages", nlen) == 0) dst = &stages_s;
        else if (nlen == 15 && strncmp(a, "--micro-batches", nlen) == 0) dst = &micro_s;
        else if (nlen == 10 && strncmp(a, "--schedule", nlen) == 0) dst = &sched_s;
        else if (nlen == 7 && strncmp(a, "--stage", nlen) == 0) dst = &stage_s;
        else if (nlen == 16 && strncmp(a, "--virtual-stages", nlen) == 0) dst = &virt_s;
        if (!dst) return err("unknown flag '%.*s' (see --help)", (int)nlen, a);
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) return err("%s needs a value", a);
        if (!*val) return err("%.*s: empty value", (int)nlen, a);
        *dst = val;
    }
    if (!stages_s) return err("--stages is required (see --help)");
    if (!micro_s) return err("--micro-batches is required (see --help)");
    long stages, micro, stage = -1, v = 0;
    pz_sched_spec sp;
    /* the schedule's flags as `pipezip train` checks them (runtime/plan/options.c) */
    if (pz_parse_int(stages_s, 1, PZ_SCHED_MAX_STAGES, &stages, "--stages") != PZ_OK ||
        pz_parse_int(micro_s, 1, PZ_SCHED_MAX_MICRO, &micro, "--micro-batches") != PZ_OK ||
        (virt_s && pz_parse_int(virt_s, 1, PZ_SCHED_MAX_VIRTUAL, &v, "--virtual-stages") != PZ_OK) ||
        pz_sched_of_flags(sched_s, (int)v, &sp) != PZ_OK)
        return err("%s", pz_last_error());
    if (sp.warmup_auto)
        return err("--schedule %s: 'auto' is chosen by 'pipezip train' from the compute and link times it "
                   "measures; give warmup=K here", sched_s);
    if (stage_s && pz_parse_int(stage_s, 0, stages - 1, &stage, "--stage") != PZ_OK)
        return err("%s", pz_last_error());

    pz_status st;
    if (stage >= 0) {
        pz_schedule s;
        if ((st = pz_schedule_build(&s, &sp, (int)stage, (int)stages, (int)micro)) == PZ_OK) {
            pz_schedule_print_list(stdout, &s);
            pz_schedule_free(&s);
        }
    } else {
        st = pz_schedule_print_table(stdout, &sp, (int)stages, (int)micro);
    }
    if (st != PZ_OK) return err("%s", pz_last_error());
    return 0;
}
