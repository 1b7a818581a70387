/* gather.h: --save of a pipeline writes one whole-model checkpoint, whatever
 * the split: every rank sends its parameters to rank 0, which assembles them
 * by tensor name and saves them (stages/gpt2_checkpoint.h formats). */
#ifndef PZ_GATHER_H
#define PZ_GATHER_H

#include <stdint.h>

#include "runtime/transport.h"
#include "stages/stage.h"

/* Collective over the world ranks (tp may be NULL when world is 1); `kind`
 * is the message kind of pz_tag. Rank 0 writes `path` and reports it. */
pz_status pz_gather_save(pz_transport *tp, int rank, int world, const pz_stage *stage, const pz_stage_range *ranges,
                         uint32_t kind, const char *path);

#endif
