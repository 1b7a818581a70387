/* aq_store.c: see aq_store.h. */
#include "compress/wrappers/aq_store.h"
#include "base/mem.h"
#include "compress/core/elem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>

#define AQ_CHUNK_MIN_BYTES ((size_t)64 << 10)
#define AQ_CHUNK_MAX_BYTES ((size_t)64 << 20)

void aq_store_init(aq_store *s, size_t row_len, size_t mem_limit, const char *spill_dir) {
    memset(s, 0, sizeof *s);
    s->row_len = row_len;
    s->row_bytes = row_len * sizeof(float);
    s->mem_slots = mem_limit / s->row_bytes;
    s->spill_dir = spill_dir ? xstrdup(spill_dir) : NULL;
    s->fd = -1;
}

void aq_store_free(aq_store *s) {
    for (size_t i = 0; i < s->nchunks; i++) {
        aq_chunk *c = &s->chunks[i];
        if (c->in_file) munmap(c->base, c->bytes);
        else free(c->base);
    }
    if (s->fd >= 0) close(s->fd);
    PZ_FREE_ALL(s->chunks, s->keys, s->vals, s->slot_ids, s->spill_dir);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}

int64_t aq_store_find(const aq_store *s, uint64_t id) {
    if (!s->map_cap) return -1;
    size_t mask = s->map_cap - 1;
    for (size_t i = (size_t)pz_mix64(id) & mask;; i = (i + 1) & mask) {
        if (!s->vals[i]) return -1;
        if (s->keys[i] == id) return (int64_t)(s->vals[i] - 1);
    }
}

static void map_put(uint64_t *keys, uint64_t *vals, size_t cap, uint64_t id, uint64_t slot) {
    size_t mask = cap - 1;
    size_t i = (size_t)pz_mix64(id) & mask;
    while (vals[i]) i = (i + 1) & mask;
    keys[i] = id;
    vals[i] = slot + 1;
}

static pz_status grow_map(aq_store *s, size_t want) {
    if (want > SIZE_MAX / 4) return pz_fail(PZ_ERR_NOMEM, "aq: too many sample ids (%zu)", want);
    if (s->map_cap >= 2 * want && s->map_cap) return PZ_OK;
    size_t cap = s->map_cap ? s->map_cap : 16;
    while (cap < 2 * want) cap *= 2;
    void *k, *v;
    if (!pz_calloc_pair(&k, sizeof *s->keys, &v, sizeof *s->vals, cap))
        return pz_fail(PZ_ERR_NOMEM, "aq: cannot grow the sample id table to %zu entries", cap);
    uint64_t *keys = k, *vals = v;
    for (size_t i = 0; i < s->map_cap; i++)
        if (s->vals[i]) map_put(keys, vals, cap, s->keys[i], s->vals[i] - 1);
    PZ_FREE_ALL(s->keys, s->vals);
    s->keys = keys;
    s->vals = vals;
    s->map_cap = cap;
    return PZ_OK;
}

static pz_status grow_slot_ids(aq_store *s, size_t want) {
    if (s->slot_ids_cap >= want) return PZ_OK;
    size_t cap = s->slot_ids_cap ? s->slot_ids_cap : 16;
    while (cap < want) cap *= 2;
    uint64_t *p = realloc(s->slot_ids, cap * sizeof *p);
    if (!p) return pz_fail(PZ_ERR_NOMEM, "aq: cannot grow the slot table to %zu entries", cap);
    s->slot_ids = p;
    s->slot_ids_cap = cap;
    return PZ_OK;
}

static pz_status open_spill(aq_store *s) {
    const char *dir = s->spill_dir;
    if (!dir || !*dir) dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    size_t n = strlen(dir) + 32;
    char *path = xmalloc(n);
    snprintf(path, n, "%s/pipezip-aq-XXXXXX", dir);
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
        pz_status st = pz_fail(PZ_ERR_IO, "aq: cannot create a spill file in %s: %s", dir, strerror(errno));
        free(path);
        return st;
    }
    unlink(path); /* the file lives as long as fd and the mappings */
    free(path);
    s->fd = fd;
    s->file_bytes = 0;
    return PZ_OK;
}

/* Adds one chunk of about `want` slots (memory while mem_slots allows, else file). */
static pz_status add_chunk(aq_store *s, size_t want) {
    if (s->nchunks == s->chunks_cap) {
        size_t cap = s->chunks_cap ? 2 * s->chunks_cap : 8;
        aq_chunk *p = realloc(s->chunks, cap * sizeof *p);
        if (!p) return pz_fail(PZ_ERR_NOMEM, "aq: cannot grow the chunk table");
        s->chunks = p;
        s->chunks_cap = cap;
    }
    aq_chunk c = {.first_slot = s->slot_cap};
    if (s->slot_cap < s->mem_slots) {
        size_t room = s->mem_slots - s->slot_cap;
        c.nslots = want < room ? want : room;
        c.bytes = c.nslots * s->row_bytes;
        c.base = malloc(c.bytes);
        if (!c.base)
            return pz_fail(PZ_ERR_NOMEM, "aq: cannot allocate %zu bytes of sample buffers", c.bytes);
        s->mem_bytes += c.bytes;
    } else {
        if (s->fd < 0) {
            pz_status st = open_spill(s);
            if (st) return st;
        }
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t bytes = want * s->row_bytes;
        bytes = (bytes + page - 1) / page * page; /* keeps every chunk's offset page aligned */
        off_t off = (off_t)s->file_bytes;
        if (ftruncate(s->fd, off + (off_t)bytes) != 0)
            return pz_fail(PZ_ERR_IO, "aq: cannot grow the spill file to %zu bytes: %s",
                           s->file_bytes + bytes, strerror(errno));
        int err = posix_fallocate(s->fd, off, (off_t)bytes);
        void *p = MAP_FAILED;
        if (!err) {
            p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, off);
            if (p == MAP_FAILED) err = errno;
        }
        if (err) {
            if (ftruncate(s->fd, off) != 0) { /* best effort; the length is reported either way */ }
            return pz_fail(PZ_ERR_IO, "aq: cannot extend the spill file by %zu bytes: %s", bytes,
                           strerror(err));
        }
        c.base = p;
        c.bytes = bytes;
        c.nslots = bytes / s->row_bytes;
        c.in_file = 1;
        s->file_bytes += bytes;
    }
    s->chunks[s->nchunks++] = c;
    s->slot_cap += c.nslots;
    return PZ_OK;
}

pz_status aq_store_reserve(aq_store *s, size_t n) {
    if (n > SIZE_MAX / 4 - s->count) return pz_fail(PZ_ERR_NOMEM, "aq: too many sample ids");
    size_t need = s->count + n;
    pz_status st = grow_map(s, need);
    if (!st) st = grow_slot_ids(s, need);
    size_t min_slots = AQ_CHUNK_MIN_BYTES / s->row_bytes, max_slots = AQ_CHUNK_MAX_BYTES / s->row_bytes;
    if (min_slots < 1) min_slots = 1;
    if (max_slots < 1) max_slots = 1;
    while (!st && s->slot_cap < need) {
        size_t want = s->slot_cap; /* doubling */
        if (want < need - s->slot_cap) want = need - s->slot_cap;
        if (want < min_slots) want = min_slots;
        if (want > max_slots) want = max_slots;
        st = add_chunk(s, want);
    }
    return st;
}

size_t aq_store_insert(aq_store *s, uint64_t id) {
    size_t slot = s->count++;
    map_put(s->keys, s->vals, s->map_cap, id, slot);
    s->slot_ids[slot] = id;
    return slot;
}

float *aq_store_row(const aq_store *s, size_t slot) {
    size_t lo = 0, hi = s->nchunks; /* last chunk with first_slot <= slot */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->chunks[mid].first_slot <= slot) lo = mid;
        else hi = mid;
    }
    const aq_chunk *c = &s->chunks[lo];
    return c->base + (slot - c->first_slot) * s->row_len;
}

size_t aq_store_bytes(const aq_store *s, size_t *file_bytes) {
    if (file_bytes) *file_bytes = s->file_bytes;
    return s->mem_bytes + s->map_cap * 2 * sizeof(uint64_t) + s->slot_ids_cap * sizeof(uint64_t) +
           s->chunks_cap * sizeof(aq_chunk);
}
