/* train.h: the single-process training loop and evaluation. */
#ifndef PZ_TRAIN_H
#define PZ_TRAIN_H

#include <stdint.h>
#include "runtime/data.h"
#include "runtime/optim.h"
#include "stages/stage.h"

typedef struct {
    const char *preset;     /* random init from a preset, or */
    const char *init;       /* a checkpoint (safetensors or llm.c .bin) */
    const char *data;       /* training shards */
    const char *val_data;   /* validation shards (optional) */
    const char *save;       /* checkpoint written at the end (optional) */
    int batch, seq, steps, accum;
    int threads;
    int val_every, val_batches;
    long seed;
    pz_optim_config optim;
    int warmup_given;       /* whether --warmup was set (else a default fraction) */
} pz_train_opts;

void pz_train_opts_default(pz_train_opts *o);
/* Runs the whole job; prints JSON lines on stdout. */
pz_status pz_train_run(const pz_train_opts *o);

/* Mean next-token loss over the first nbatches batches of d in file order
 * (all of them if nbatches <= 0 or larger than available). */
pz_status pz_eval_loss(pz_stage *s, pz_acts *a, const pz_dataset *d, int nbatches,
                       double *loss, int *batches_used);

/* Builds the model of a stage from --preset or --init (host-side load). */
pz_status pz_model_create(pz_stage *s, const pz_backend *be, const char *preset,
                          const char *init, uint64_t seed, int B, int T);
/* Saves the stage's parameters: ".bin" -> llm.c v3, anything else -> safetensors. */
pz_status pz_model_save(const pz_stage *s, const char *path);

#endif
