#include <stdio.h>
/* partition.h: which contiguous blocks each pipeline stage owns.
 *
 * Stage 0 also owns the embedding and the last stage the final LayerNorm and
 * the tied head + loss; those count as extra cost. The automatic split
 * minimises the most expensive stage (the pipeline runs at the pace of its
 * slowest stage) by trying every contiguous split's bottleneck with a
 * binary search over the answer, in block order. */
#ifndef PZ_PARTITION_H
#define PZ_PARTITION_H

#include "stages/gpt2_params.h"

/* Relative FLOP cost per token of one block, the embedding and the head
 * (forward + backward), for sequence length T. */
double pz_block_cost(const pz_gpt2_config *c, int T);
double pz_head_cost(const pz_gpt2_config *c);
double pz_embed_cost(const pz_gpt2_config *c);

/* Fills ranges[0..S-1]. spec: NULL for automatic, or "3,3,3,3" (blocks per
 * stage, all >= 0, summing to L; a stage may own no blocks only if it owns
 * the embedding or the head, i.e. it is first or last). */
pz_status pz_partition(const pz_gpt2_config *c, int T, int S, const char *spec,
                       pz_stage_range *ranges);
/* The same for the interleaved schedule: S stages of V chunks each, S * V
 * ranges in chunk order; messages name --stages S and the V chunks per
 * stage (V = 1 is pz_partition). */
pz_status pz_partition_chunks(const pz_gpt2_config *c, int T, int S, int V, const char *spec,
                              pz_stage_range *ranges);
/* One line per stage: blocks, extras and share of the cost. */
void pz_partition_print(FILE *f, const pz_gpt2_config *c, int T, int S, const pz_stage_range *ranges);

#endif
