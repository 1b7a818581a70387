/* aq_store.h: the per-sample buffers of aq() (private to compress/wrappers/wrappers.c).
 *
 * A store holds one row of `row_len` floats per sample id, addressed by a
 * slot number. Ids map to slots through an open-addressing hash table (linear
 * probing, load factor <= 1/2); slots are numbered 0, 1, 2, ... in order of
 * first insertion and are never freed or moved, so slot i's id is known too.
 *
 * Storage comes in chunks. The first floor(mem_limit / row bytes) slots live
 * in malloc'ed chunks; every further slot lives in a spill file created in
 * `spill_dir` (mkstemp, then unlinked at once so nothing is left behind,
 * grown with ftruncate plus posix_fallocate so that a full disk is an error
 * here rather than a SIGBUS later, and mapped with mmap one chunk at a time).
 * Chunks double with the number of slots held, from at least 64 KiB up to
 * 64 MiB (or one row when rows are larger), so a store of G gigabytes needs
 * about 16·G mappings and wastes at most half of its last chunk.
 *
 * Growth happens only in aq_store_reserve(), which either makes room for
 * n more ids or fails without changing the ids held; aq_store_insert() after
 * a successful reserve cannot fail. This is what lets aq() validate and
 * decode a whole message, reserve, and only then change any buffer. */
#ifndef PZ_AQ_STORE_H
#define PZ_AQ_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

typedef struct {
    float *base;         /* first float of the chunk (malloc'ed or mapped) */
    size_t first_slot;   /* slot number of its first row */
    size_t nslots;       /* rows it holds */
    size_t bytes;        /* allocated or mapped bytes */
    int in_file;
} aq_chunk;

typedef struct {
    size_t row_len;      /* floats per row */
    size_t row_bytes;
    size_t mem_slots;    /* slots that may live in memory: mem_limit / row_bytes */
    char *spill_dir;     /* owned */
    /* id -> slot map: keys[i], vals[i] = slot + 1 (0 = empty) */
    uint64_t *keys;
    uint64_t *vals;
    size_t map_cap;      /* power of two, or 0 */
    size_t count;        /* ids held = slots used */
    uint64_t *slot_ids;  /* slot -> id, slot_ids_cap entries */
    size_t slot_ids_cap;
    /* storage */
    aq_chunk *chunks;
    size_t nchunks, chunks_cap;
    size_t slot_cap;     /* slots backed by chunks */
    size_t mem_bytes;    /* bytes of memory chunks */
    int fd;              /* spill file, -1 until needed */
    size_t file_bytes;   /* length of the spill file */
} aq_store;

/* Sets up an empty store (allocates nothing, creates no file). row_len >= 1;
 * spill_dir NULL means $TMPDIR, else /tmp. */
void aq_store_init(aq_store *s, size_t row_len, size_t mem_limit, const char *spill_dir);
/* Frees memory chunks, unmaps and closes the spill file. */
void aq_store_free(aq_store *s);

/* Slot of id, or -1 when the id was never inserted. */
int64_t aq_store_find(const aq_store *s, uint64_t id);
/* Makes room for n more ids (map and storage). On failure (PZ_ERR_IO for the
 * spill file, PZ_ERR_NOMEM for memory) the ids and rows held are unchanged. */
pz_status aq_store_reserve(aq_store *s, size_t n);
/* Inserts an id that is not held yet; needs a successful reserve for it.
 * Returns its slot; the row's contents are unspecified until written. */
size_t aq_store_insert(aq_store *s, uint64_t id);
/* Row of a slot (slot < count). */
float *aq_store_row(const aq_store *s, size_t slot);
static inline uint64_t aq_store_slot_id(const aq_store *s, size_t slot) { return s->slot_ids[slot]; }

/* Bytes held in memory (chunks, map, slot table) and, in *file_bytes, the
 * length of the spill file. */
size_t aq_store_bytes(const aq_store *s, size_t *file_bytes);

#endif
