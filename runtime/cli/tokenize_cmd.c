/* tokenize_cmd.c: see tokenize_cmd.h. */
#include "runtime/cli/tokenize_cmd.h"

#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/io/file.h"
#include "base/mem.h"
#include "stages/data.h"
#include "stages/bpe/bpe.h"

#define SHARD_MAX_ID 65535u

/* the id's text for a message, printable and short */
static void token_text(const pz_bpe *b, uint32_t id, char *out, size_t cap) {
    size_t n, k = 0;
    const uint8_t *s = pz_bpe_token_bytes(b, id, &n);
    for (size_t i = 0; i < n && k + 5 < cap; i++) {
        if (s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' && s[i] != 0x7f) out[k++] = (char)s[i];
        else k += (size_t)snprintf(out + k, cap - k, "\\x%02x", s[i]);
    }
    out[k] = 0;
}

pz_status pz_tokenize_bpe(const pz_tokenize_bpe_opts *o, const char *const *inputs, int ninputs) {
    if (ninputs < 1) return pz_fail(PZ_ERR_ARG, "tokenize: no input files");
    /* every input readable before any work */
    for (int i = 0; i < ninputs; i++) {
        struct stat sb;
        if (stat(inputs[i], &sb) != 0) return pz_fail(PZ_ERR_IO, "%s: cannot read: %s", inputs[i], strerror(errno));
        if (S_ISDIR(sb.st_mode)) return pz_fail(PZ_ERR_IO, "%s: is a directory", inputs[i]);
    }
    double t0 = pz_now();
    pz_bpe *b = NULL;
    pz_status st = pz_bpe_load(o->tokenizer, &b);
    if (st) return st;
    long eot = -1;
    if (o->eot_between_files) {
        eot = pz_bpe_added_id(b, "<|endoftext|>");
        if (eot < 0) {
            pz_bpe_free(b);
            return pz_fail(PZ_ERR_ARG, "%s: no <|endoftext|> token, which --eot-between-files puts between files",
                           o->tokenizer);
        }
    }
    pz_bpe_ids *res = xcalloc((size_t)ninputs, sizeof *res);
    char **err = xcalloc((size_t)ninputs, sizeof *err);
    pz_status *fst = xcalloc((size_t)ninputs, sizeof *fst);
    size_t *bytes = xcalloc((size_t)ninputs, sizeof *bytes);
    int failed = 0;
    int nt = o->threads > 0 ? o->threads : omp_get_max_threads();
    if (nt > ninputs) nt = ninputs;
#pragma omp parallel num_threads(nt)
    {
        pz_bpe_enc *e = pz_bpe_enc_new(b);
#pragma omp for schedule(dynamic, 1)
        for (int i = 0; i < ninputs; i++) {
            int stop;
#pragma omp atomic read
            stop = failed;
            if (stop) continue;
            uint8_t *text = NULL;
            size_t len = 0;
            pz_status s = pz_read_file_max(inputs[i], (size_t)1 << 30, &text, &len);
            if (!s) s = pz_bpe_encode(e, (const char *)text, len, inputs[i], &res[i]);
            free(text);
            bytes[i] = len;
            if (s) {
                fst[i] = s;
                err[i] = xstrdup(pz_last_error());   /* messages are per thread */
#pragma omp atomic write
                failed = 1;
            }
        }
        pz_bpe_enc_free(e);
    }
    uint16_t *tok = NULL;
    size_t total = 0, nbytes = 0;
    for (int i = 0; i < ninputs && !st; i++)
        if (fst[i]) st = pz_fail(fst[i], "%s", err[i]);
    for (int i = 0; i < ninputs && !st; i++) {
        total += res[i].n + (eot >= 0 && i > 0);
        nbytes += bytes[i];
    }
    if (!st && total == 0) st = pz_fail(PZ_ERR_SHAPE, "tokenize: the inputs are empty");
    if (!st && eot > (long)SHARD_MAX_ID)
        st = pz_fail(PZ_ERR_SHAPE, "%s: <|endoftext|> has id %ld, above %u, the most llm.c's uint16 shards hold",
                     o->tokenizer, eot, SHARD_MAX_ID);
    if (!st) {
        tok = malloc(total * sizeof *tok);
        if (!tok) st = pz_fail(PZ_ERR_NOMEM, "tokenize: cannot hold %zu tokens", total);
    }
    size_t k = 0;
    for (int i = 0; i < ninputs && !st; i++) {
        if (eot >= 0 && i > 0) tok[k++] = (uint16_t)eot;
        for (size_t j = 0; j < res[i].n; j++) {
            uint32_t id = res[i].ids[j];
            if (id > SHARD_MAX_ID) {
                char t[64];
                token_text(b, id, t, sizeof t);
                st = pz_fail(PZ_ERR_SHAPE, "%s: token %zu is id %u (\"%s\"), above %u, the most llm.c's uint16 shards "
                             "hold (the tokenizer %s has %u ids)", inputs[i], j, id, t, SHARD_MAX_ID, o->tokenizer,
                             pz_bpe_n_vocab(b));
                break;
            }
            tok[k++] = (uint16_t)id;
        }
    }
    if (!st) st = pz_shard_write(o->out, tok, total);
    if (!st) {
        double dt = pz_now() - t0;
        printf("{\"files\":%d,\"bytes\":%zu,\"tokens\":%zu,\"seconds\":%.3f,\"mb_per_s\":%.1f}\n", ninputs, nbytes, total,
               dt, dt > 0 ? (double)nbytes / 1e6 / dt : 0.0);
    }
    for (int i = 0; i < ninputs; i++) {
        free(res[i].ids);
        free(err[i]);
    }
    free(res);
    free(err);
    free(fst);
    free(bytes);
    free(tok);
    pz_bpe_free(b);
    return st;
}
