/* tokenize_cmd.h: `pipezip tokenize --tokenizer FILE|DIR` (flags parsed by
 * runtime/cli/cli.c): GPT-2 byte-level BPE (stages/bpe/bpe.h) of text files into
 * one llm.c token shard (stages/data.h).
 *
 * The files are encoded in parallel, one file per thread at a time, each
 * file on its own (a file boundary also ends a pre-token), and joined in the
 * order given, with <|endoftext|> between consecutive files when asked. An
 * id above 65535 (uint16 shards) is an error naming the file and the token,
 * never a truncation. The shard is written atomically, so an error leaves no
 * file. On success one JSON line goes to stdout: files, bytes, tokens,
 * seconds (wall, from the start: loading the tokenizer, reading, encoding,
 * writing) and mb_per_s (bytes over those seconds). */
#ifndef PZ_TOKENIZE_CMD_H
#define PZ_TOKENIZE_CMD_H

#include "base/status.h"

typedef struct {
    const char *tokenizer;   /* tokenizer.json, vocab.json or a directory */
    const char *out;         /* the shard */
    int eot_between_files;
    int threads;             /* 0: OpenMP's default (all cores) */
} pz_tokenize_bpe_opts;

pz_status pz_tokenize_bpe(const pz_tokenize_bpe_opts *o, const char *const *inputs, int ninputs);

#endif
