/* gather.h: --save of a pipeline: the whole model from its ranks' chunks. */
#ifndef PZ_RUNTIME_CKPT_GATHER_H
#define PZ_RUNTIME_CKPT_GATHER_H

#include "kernels/backend.h"
#include "runtime/net/transport.h"
#include "stages/gpt2_params.h"

/* The model is cut into G = S*V chunks (all: their ranges); stage `rank`
 * of S holds chunks c*S + rank, c < V, with their parameters at
 * params[c] (backend memory). wranks[s] is the transport rank of stage s.
 * Every stage sends its chunks to stage 0, which assembles them by tensor
 * name, whatever the split, and saves them to path (pz_params_save). */
pz_status pz_gather_save(pz_transport *tp, const pz_backend *be, const pz_gpt2_config *cfg, const pz_stage_range *all,
                         int S, int V, int rank, const int *wranks, float *const *params, const char *path);

#endif
