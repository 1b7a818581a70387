/* fuzz_driver.h: the main of a fuzz entry's replay program, which runs
 * LLVMFuzzerTestOneInput without libFuzzer (any compiler):
 *
 *   PROG FILE...     replay inputs (crash reproducers, a corpus)
 *   PROG --seed DIR  write the target's seed inputs for a libFuzzer corpus
 *   PROG [N]         mutation smoke test: N deterministic mutations of the
 *                    seeds, each fed as an exact-size copy so that ASan sees
 *                    reads past the end
 * Meant to run under ASan/UBSan in ordinary (gcc) builds. A target supplies
 * its seeds and its mutator (tests/fuzz/replay/fuzz_replay.c, tests/fuzz/replay/fuzz_codec_replay.c). */
#ifndef PZ_TESTS_FUZZ_DRIVER_H
#define PZ_TESTS_FUZZ_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/rng.h"

#define FUZZ_MAX_SEEDS 64

typedef struct {
    uint8_t *data;
    size_t len;
} fuzz_image;

/* A message behind a fixed header of `size` bytes that holds its payload's
 * length as a u64 at len_at (the frame, the data-parallel message): its
 * mutator also flips a bit of header bytes [field_at, field_at + nfield)
 * and re-seals (a mislabelled message), re-seals alone, or sets the length
 * field to a nudged or extreme value. */
typedef struct {
    size_t size, len_at, field_at, nfield;
    void (*seal)(uint8_t *b, size_t len);   /* makes the header consistent with len bytes */
} fuzz_header;

typedef struct {
    const char *name;       /* names the smoke test's closing line */
    const char *seed_ext;   /* file name ending of the seeds --seed writes */
    long default_iters;     /* mutations when N is not given */
    uint64_t rng_seed;      /* of the mutation stream */
    /* fills seeds (at most FUZZ_MAX_SEEDS, xmalloc'ed data); returns how many */
    int (*make_seeds)(fuzz_image *seeds);
    /* mutates b[0..*len) in place; b has room for cap bytes */
    void (*mutate)(pz_rng *r, uint8_t *b, size_t *len, size_t cap);
    /* or, with mutate NULL, the mutator of a fixed-header message: up to 3
     * steps of fuzz_byte_step and the header's */
    const fuzz_header *header;
} fuzz_target;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int fuzz_main(const fuzz_target *t, int argc, char **argv);

/* mutation steps both mutators use, at b[at] (at < *len):
 * removes 1..8 bytes (fewer at the end); returns how many */
size_t fuzz_delete_run(pz_rng *r, uint8_t *b, size_t *len, size_t at);
/* inserts the byte v; the caller checks *len < cap first */
void fuzz_insert_byte(uint8_t *b, size_t *len, size_t at, uint8_t v);

/* step < FUZZ_BYTE_STEPS of the mutations every mutator shares, at b[at]:
 * 0 a byte set, 1 a bit flipped, 2 a run deleted, 3 a byte inserted (when
 * *len < cap), 4 a truncation */
#define FUZZ_BYTE_STEPS 5
void fuzz_byte_step(pz_rng *r, uint8_t *b, size_t *len, size_t cap, size_t at, unsigned step);
/* The mutator most targets use: 1..max_steps steps while *len > 0, each at a
 * random offset, of a kind below `kinds`: a byte step (fuzz_byte_step) or,
 * for kind >= FUZZ_BYTE_STEPS, the target's own extra(..., kind) */
typedef void (*fuzz_extra_step)(pz_rng *r, uint8_t *b, size_t *len, size_t cap, size_t at, unsigned kind);
void fuzz_mutate_steps(pz_rng *r, uint8_t *b, size_t *len, size_t cap, unsigned max_steps, unsigned kinds,
                       fuzz_extra_step extra);
/* 1..4 steps: a byte set, a bit flipped, a run deleted, a byte inserted,
 * a truncation, or one of words inserted (for text grammars) */
void fuzz_mutate_words(pz_rng *r, uint8_t *b, size_t *len, size_t cap, const char *const *words, int nwords);

#endif
