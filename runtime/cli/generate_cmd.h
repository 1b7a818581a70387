/* generate_cmd.h: `pipezip generate` (flags parsed by runtime/cli/cli.c):
 * text from a model, with a KV cache (stages/generate.h), in one process
 * or over the pipeline, on the CPU or (--device cuda) a GPU.
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
    /* --stages S: over the pipeline launcher and transport, one stage per rank */
    int stages;
    const char *split;        /* --split, or NULL (balanced) */
    const char *compress;     /* --compress: fwd codecs per edge (their stateless inner codec) */
    float peer_timeout;
    const char *device;       /* --device (runtime/plan/device.h), NULL = cpu */
    int threads;              /* CPU threads (the host side of a GPU stage too) */
    const uint8_t *job_secret;   /* runtime/net/jobsecret.h; NULL: none */
    size_t job_secret_len;
} pz_generate_opts;

/* One process (world 1), or rank `rank` of a pipeline of `world` stages:
 * every rank reads the prompt; rank 0 embeds the tokens and prints, each
 * rank runs its blocks with its own KV cache and passes one position's hidden
 * state (the prompt's at first) to the next through the edge's fwd codec,
 * and the last rank samples and sends the token back to rank 0. */
pz_status pz_generate(const pz_generate_opts *o);
/* What the launcher checks before it starts --stages processes: the model's
 * config and its cut into the stages (a bad --stages or --split fails once,
 * not in every rank). */
pz_status pz_generate_check(const pz_generate_opts *o);
pz_status pz_generate_rank(const pz_generate_opts *o, int rank, int world, const char *addr, int port);

#endif
