/* pipeline.h: one rank of a pipeline: V >= 1 chunks of the model in this
 * process, running its schedule's instruction list every step and
 * exchanging activations and gradients with its peers over the transport. */
#ifndef PZ_PIPELINE_H
#define PZ_PIPELINE_H

#include "runtime/edge/policy.h"
#include "runtime/plan/train.h"
#include "schedules/schedule.h"

/* Runs rank `rank` of `world` (= o->sched.stages x o->dp.replicas). Rank 0
 * prints the JSON lines. SIGTERM or SIGINT (to any rank; the launcher forwards its own) stops every
 * rank at the same step boundary, after a checkpoint when --checkpoint-dir is
 * set; the run then returns PZ_OK and pz_pipeline_stopped_by says which
 * signal, so the command exits 128 + it (143, 130). */
pz_status pz_pipeline_run_rank(const pz_train_opts *o, int rank, int world,
                               const char *master_addr, int master_port);
int pz_pipeline_stopped_by(void);

/* The schedule, the pieces, the policy and the checks of the flags:
 * runtime/plan/options.h. */

#endif
