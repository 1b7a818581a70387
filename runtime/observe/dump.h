/* dump.h: --dump-edge STEP, what crosses the edges as .npy files. */
#ifndef PZ_RUNTIME_OBSERVE_DUMP_H
#define PZ_RUNTIME_OBSERVE_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* At step STEP (1-based, as the step lines count), each sender writes the
 * tensor it is about to encode, before any codec touches it, as float32
 * .npy of shape (B, T, C):
 *   DIR/step<S>-edge<e>-<e+1>-fwd-micro<m>.npy   activations, by chunk e
 *   DIR/step<S>-edge<e>-<e+1>-bwd-micro<m>.npy   their gradients, by chunk e+1
 * (replicas: m counts the global batch, replica r's micro-batches from r x M)
 * so codecs can be studied on real tensors (`pipezip codec --in`, the
 * sweep). DIR is created. */
pz_status pz_dump_edge(const char *dir, uint64_t step, int edge, int bwd, int micro, size_t B, size_t T, size_t C,
                       const float *src);

#endif
