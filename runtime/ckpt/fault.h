/* fault.h: the fault injection the tests kill and corrupt ranks with, to
 * check checkpoints, restarts and the frame checks. Inert unless the
 * variables are set, and never in a resumed run (restarts resume), so that a
 * restarted job is not faulted again. */
#ifndef PZ_RUNTIME_CKPT_FAULT_H
#define PZ_RUNTIME_CKPT_FAULT_H

#include "runtime/net/transport.h"

/* Whether pz_fault_point acts in this process (0 in a resumed run). */
void pz_fault_arm(int armed);

/* PIPEZIP_FAULT=WHAT:STEP:RANK: this rank exits with status 3 at that point,
 * as a killed process would stop there. WHAT is "step" (after the step's
 * optimizer update and checkpoint), "checkpoint" (its shard written,
 * before the ranks meet for the manifest) or, with replicas, "sync" (in the
 * middle of step STEP, its backward done, before the gradient average the
 * other replicas already wait in); "end" (STEP 0) stops the rank
 * with SIGSTOP once it has finished, so that the launcher must notice a rank
 * frozen after the others exited. */
void pz_fault_point(const char *what, int step, int rank);

/* PIPEZIP_FAULT_FLIP=WHAT:STEP:RANK[:AT]: rank RANK (this one is `rank`)
 * flips one byte of the first message of kind WHAT ("activation",
 * "gradient" or "tied") it sends at step STEP (numbered from 0, as the
 * messages name steps). AT: "payload" (default, the middle of it), "header"
 * (the step field) or a byte offset into the frame (runtime/net/frame.h).
 * The receiver must refuse it, naming edge, direction and step. */
void pz_fault_flip(pz_transport *tp, int rank, int armed);

#endif
