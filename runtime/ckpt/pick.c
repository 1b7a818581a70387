/* pick.c: which checkpoint --resume continues from (runtime/ckpt/resume.h,
 * pz_resume_start): this job's, newest first, falling back past one that
 * does not load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "runtime/ckpt/resume.h"

/* Rank 0: the steps to try, newest first (*n of them; malloc'ed). */
static pz_status candidates(const pz_ckpt_job *job, const char *dir, int is_auto, int **out,
                            int *n) {
    pz_ckpt_entry *es = NULL;
    int ne = 0;
    *out = NULL;
    *n = 0;
    pz_status st = pz_resume_scan(dir, is_auto, &es, &ne);
    if (st != PZ_OK) return st;
    int *steps = xcalloc((size_t)ne + 1, sizeof *steps);
    uint64_t want = job->id;
    if (!is_auto) {   /* the user named the directory: its newest checkpoint's job */
        if (ne == 0)
            st = pz_fail(PZ_ERR_ARG, "--resume %s: no complete checkpoint there (use --resume auto to start fresh "
                         "when there is none)", dir);
        else if (es[0].version != 2)
            st = pz_fail(PZ_ERR_FORMAT, "--resume %s: its checkpoint of step %d has format '%s', written by an older "
                         "pipezip (no job id, no checksums); this one reads '%s' only: resume it with the pipezip that "
                         "wrote it", dir, es[0].step, PZ_RESUME_FORMAT_OLD, PZ_RESUME_FORMAT);
        else {
            char diff[1024], theirs[17];
            int how = pz_job_compare(job->desc, es[0].desc, diff, sizeof diff);
            pz_job_hex(es[0].job, theirs);
            if (how == 2)
                st = pz_fail(PZ_ERR_ARG, "--resume %s: its checkpoint of step %d is of another job (job %s; this run "
                             "is job %s): %s. --resume continues a job with another layout, --steps or learning rate "
                             "only", dir, es[0].step, theirs, job->hex, diff);
            else if (how == 1)
                fprintf(stderr, "pipezip train: --resume %s: continuing job %s (step %d) as job %s: %s\n", dir, theirs,
                        es[0].step, job->hex, diff);
            want = es[0].job;
        }
    }
    for (int i = 0; st == PZ_OK && i < ne; i++)
        if (es[i].version == 2 && es[i].job == want) steps[(*n)++] = es[i].step;
    pz_resume_scan_free(es, ne);
    if (st != PZ_OK) {
        free(steps);
        return st;
    }
    *out = steps;
    return PZ_OK;
}

static pz_status allreduce(pz_transport *tp, double *v, int n) {
    return tp ? pz_transport_allreduce_sum_f64(tp, v, n) : PZ_OK;
}

pz_status pz_resume_start(pz_transport *tp, const pz_ckpt_opts *c, int rank, int world, const pz_ckpt_job *job,
                          pz_resume_load_fn load, void *ctx, int *start, const char **dir) {
    int is_auto = strcmp(c->resume, "auto") == 0;
    *dir = is_auto ? c->dir : c->resume;
    *start = -1;
    int *steps = NULL, n = 0;
    pz_status st = rank == 0 ? candidates(job, *dir, is_auto, &steps, &n) : PZ_OK;
    char first[600] = "";
    int tried = 0;
    for (;;) {
        double v[2] = {rank == 0 && st == PZ_OK && tried < n ? steps[tried] + 1.0 : 0.0, st != PZ_OK};
        pz_status st2 = allreduce(tp, v, 2);
        if (st2 != PZ_OK) {
            if (st == PZ_OK) st = st2;
            break;
        }
        if (v[1] > 0) {   /* every rank names the reason: the launcher may stop rank 0 before it prints */
            st = pz_ckpt_share_refusal(tp, rank, world, st);
            break;
        }
        if (v[0] < 1.0) break;   /* none (left) */
        int step = (int)v[0] - 1;
        pz_status ls = load(ctx, *dir, step);
        if (ls != PZ_OK) {
            fprintf(stderr, "pipezip train: rank %d: warning: the checkpoint of step %d does not load: %s\n", rank,
                    step, pz_last_error());
            if (!first[0]) snprintf(first, sizeof first, "%s", pz_last_error());
        }
        double bad = ls != PZ_OK;
        if ((st = allreduce(tp, &bad, 1)) != PZ_OK) break;
        tried++;
        if (bad == 0.0) {
            *start = step;
            break;
        }
        if (rank == 0)
            fprintf(stderr, "pipezip train: the checkpoint of step %d in %s does not load (see above)%s\n", step,
                    *dir, tried < n ? "; falling back to the next older one of this job" : "");
    }
    free(steps);
    if (st != PZ_OK) return st;
    if (*start < 0 && tried > 0)
        return first[0] ? pz_fail(PZ_ERR_FORMAT, "--resume %s: none of its %d checkpoint%s of this job loads; the "
                                  "newest: %s", *dir, tried, tried == 1 ? "" : "s", first)
                        : pz_fail(PZ_ERR_FORMAT, "rank %d: --resume %s: none of its checkpoints loads on every rank",
                                  rank, *dir);
    if (*start < 0 && rank == 0)
        fprintf(stderr, "pipezip train: --resume auto: no checkpoint of this job in %s, starting fresh\n", *dir);
    return PZ_OK;
}
