/* bpe.h: GPT-2's byte-level BPE tokenizer (encode and decode).
 *
 * Files: a Hugging Face tokenizer.json (model "BPE" with a ByteLevel
 * pre-tokenizer), or a vocab.json with merges.txt beside it, or a directory
 * holding either (tokenizer.json first). Everything read is validated, and
 * every failure is PZ_ERR_FORMAT (PZ_ERR_IO for unreadable files) with a
 * message naming the file and the problem: bad JSON, a missing vocabulary
 * or merge list, a merge naming a token the vocabulary lacks (or whose
 * result it lacks), two tokens with one id, one token twice, a vocabulary
 * entry that is not byte-level text, settings this tokenizer does not
 * implement (normalizers, dropout, prefixes/suffixes, add_prefix_space...).
 *
 * Encoding, as HF `tokenizers` and GPT-2's encoder.py do:
 *  1. the added tokens of tokenizer.json (special tokens such as
 *     <|endoftext|>; for vocab.json, <|endoftext|> when the vocabulary has
 *     it) are cut out of the text where they occur literally, leftmost and
 *     then longest first, and become their ids;
 *  2. the text between them is split by GPT-2's pattern (PCRE2, UTF and
 *     Unicode properties, JIT-compiled)
 *       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *     with \s as Unicode's White_Space, as GPT-2's Python `regex` and HF's
 *     Oniguruma read it (PCRE2's own \s also takes U+180E);
 *  3. each piece's bytes are merged by BPE: repeatedly the adjacent pair of
 *     lowest merge rank (leftmost first) becomes one token; results are kept
 *     in a per-encoder cache of pieces.
 * The text must be valid UTF-8 (an error names the byte offset otherwise).
 * Token ids are below 2^24. A pz_bpe is read-only once loaded, so threads
 * share it; each thread encodes with its own pz_bpe_enc. */
#ifndef PZ_STAGES_BPE_H
#define PZ_STAGES_BPE_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

typedef struct pz_bpe pz_bpe;
typedef struct pz_bpe_enc pz_bpe_enc;

#define PZ_BPE_MAX_ID ((1u << 24) - 1)

/* Loads a tokenizer.json, a vocab.json (merges.txt beside it), a merges.txt
 * (vocab.json beside it) or a directory holding tokenizer.json or vocab.json
 * and merges.txt. A file is recognised by its content, whatever its name: a
 * JSON object mapping tokens to numbers is a vocab.json, another JSON object
 * a tokenizer.json, a text of "a b" lines a merges.txt. The file beside it:
 * PREFIXmerges.txt for PREFIXvocab.json (gpt2-merges.txt beside
 * gpt2-vocab.json) when there, else merges.txt (and the same the other way). */
pz_status pz_bpe_load(const char *path, pz_bpe **out);
/* The files pz_bpe_load(path) reads: either *json, or *vocab and *merges
 * (malloc'ed; the others NULL). A directory without them fails; a file
 * whose partner is missing is listed anyway (the loader reports it). */
pz_status pz_bpe_files(const char *path, char **json, char **vocab, char **merges);
/* The same from memory: a tokenizer.json text, or a vocab.json and a
 * merges.txt text; `what` (and `what_merges`) name them in messages. */
pz_status pz_bpe_from_tokenizer_json(const char *text, size_t len, const char *what, pz_bpe **out);
pz_status pz_bpe_from_vocab_merges(const char *vocab, size_t vlen, const char *what,
                                   const char *merges, size_t mlen, const char *what_merges, pz_bpe **out);
void pz_bpe_free(pz_bpe *b);   /* NULL is fine */

/* Largest id + 1 (vocabulary and added tokens). */
uint32_t pz_bpe_n_vocab(const pz_bpe *b);
/* The id of an added or special token by its text (e.g. "<|endoftext|>"), or -1. */
long pz_bpe_added_id(const pz_bpe *b, const char *text);
/* The bytes of token `id` (NULL, *len 0 for an id no token has). */
const uint8_t *pz_bpe_token_bytes(const pz_bpe *b, uint32_t id, size_t *len);

/* Growable id array that encoding appends to. Free ids with free(). */
typedef struct {
    uint32_t *ids;
    size_t n, cap;
} pz_bpe_ids;
void pz_bpe_ids_push(pz_bpe_ids *v, uint32_t id);

pz_bpe_enc *pz_bpe_enc_new(const pz_bpe *b);
void pz_bpe_enc_free(pz_bpe_enc *e);   /* NULL is fine */
/* Tests: merge every piece by the quadratic scan that short pieces use, the
 * reference for the heap that pieces over 48 bytes go through. */
void pz_bpe_enc_force_scan(pz_bpe_enc *e, int on);
/* Appends the ids of text (len bytes) to out. `what` names the text in
 * messages (a path). On failure out keeps what was appended so far. */
pz_status pz_bpe_encode(pz_bpe_enc *e, const char *text, size_t len, const char *what, pz_bpe_ids *out);
/* Decodes ids to text: *text is malloc'ed (NUL-terminated; *len without
 * it). An id no token has is an error naming its position. */
pz_status pz_bpe_decode(const pz_bpe *b, const uint32_t *ids, size_t n, char **text, size_t *len);

#endif
