/* generate_cmd.h: `pipezip generate` (flags parsed by runtime/cli/cli.c):
 * text from a model, one process on the CPU, with a KV cache
 * (stages/generate.h).
 *
 * The prompt is --prompt TEXT, encoded with the tokenizer (--tokenizer, else
 * tokenizer.json / vocab.json in the model directory, else bytes for a model
 * of vocabulary 256), or --prompt-ids "1,2,3". Text streams to stdout as
 * tokens are produced (the prompt first): decoded with that tokenizer, as
 * bytes for a byte model, else as space-separated ids. The last line is JSON:
 * ids (prompt and generated), prompt_tokens, new_tokens, seconds (every
 * forward and draw, the prompt's included) and tok_s (new tokens over those
 * seconds). */
#ifndef PZ_GENERATE_CMD_H
#define PZ_GENERATE_CMD_H

#include <stdint.h>

#include "base/status.h"
#include "stages/generate.h"

typedef struct {
    const char *model;        /* file or HF directory */
    int heads;                /* --heads, 0 = from the model */
    const char *tokenizer;    /* NULL: the model directory's, if any */
    const char *prompt;       /* text, or NULL */
    const char *prompt_ids;   /* "1,2,3", or NULL */
    int max_new_tokens;
    pz_sampling sampling;
    uint64_t seed;
    int no_kv_cache;          /* recompute the whole prefix per token (tests) */
} pz_generate_opts;

pz_status pz_generate(const pz_generate_opts *o);

#endif
