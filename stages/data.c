/* data.c: token shards (llm.c format), samples with stable ids, the batch
 * loader and the byte-level tokenizer. See data.h for the contract.
 *
 * Shards are mmapped read-only and used in place: the payload is uint16
 * little-endian, which is the host order on every machine we build for (the
 * check below makes a big-endian build fail loudly instead of reading
 * byte-swapped tokens). */
#include "stages/data.h"
#include "base/io/file.h"
#include "base/mem.h"
#include "base/rng.h"

#include <assert.h>
#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdio.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "data.c maps little-endian shard payloads directly; add byte swapping for this host"
#endif

#define HEADER_INTS 256
#define HEADER_BYTES (HEADER_INTS * 4)
/* the header keeps the count in an int32, so this is the format's limit */
#define MAX_SHARD_TOKENS ((size_t)INT32_MAX)
/* how far back the tokenizer looks for a newline to cut the val split at */
#define VAL_CUT_WINDOW 4096

/* ---- shard list: spec -> sorted paths ---------------------------------- */

typedef struct {
    char **v;
    size_t n, cap;
} strlist;

static void strlist_push(strlist *l, const char *s) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        char **nv = realloc(l->v, l->cap * sizeof *nv);
        if (!nv) pz_die("%s:%d: out of memory", __FILE__, __LINE__);
        l->v = nv;
    }
    l->v[l->n++] = xstrdup(s);
}

static void strlist_free(strlist *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_glob_chars(const char *s) { return strpbrk(s, "*?[") != NULL; }

/* Adds one element of the spec: a glob pattern is expanded (no match is an
 * error, since a silently empty dataset would only fail much later), a plain
 * path is taken as is so that a missing file is reported by open(). */
static pz_status expand_one(strlist *out, const char *item) {
    if (!has_glob_chars(item)) {
        strlist_push(out, item);
        return PZ_OK;
    }
    glob_t g;
    int rc = glob(item, 0, NULL, &g);
    if (rc == GLOB_NOMATCH) {
        globfree(&g);
        return pz_fail(PZ_ERR_IO, "%s: no file matches this pattern", item);
    }
    if (rc != 0) {
        globfree(&g);
        return pz_fail(PZ_ERR_IO, "%s: cannot expand pattern (%s)", item,
                       rc == GLOB_NOSPACE ? "out of memory" : "read error");
    }
    for (size_t i = 0; i < g.gl_pathc; i++) strlist_push(out, g.gl_pathv[i]);
    globfree(&g);
    return PZ_OK;
}

/* Sorting with strcmp (not glob's locale order) keeps sample ids identical
 * across machines and locales; duplicates are refused because a shard listed
 * twice would silently double its weight and shift every later id. */
static pz_status expand_spec(strlist *out, const char *spec) {
    if (!spec || !*spec) return pz_fail(PZ_ERR_ARG, "dataset: empty path");
    char *copy = xstrdup(spec);
    pz_status st = PZ_OK;
    char *p = copy;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        if (!*p) {
            st = pz_fail(PZ_ERR_ARG, "dataset '%s': empty entry in comma-separated list", spec);
            break;
        }
        if ((st = expand_one(out, p)) != PZ_OK) break;
        if (!comma) break;
        p = comma + 1;
    }
    free(copy);
    if (st != PZ_OK) return st;
    qsort(out->v, out->n, sizeof *out->v, cmp_str);
    for (size_t i = 1; i < out->n; i++)
        if (strcmp(out->v[i - 1], out->v[i]) == 0)
            return pz_fail(PZ_ERR_ARG, "dataset '%s': %s is listed more than once", spec, out->v[i]);
    return PZ_OK;
}

pz_status pz_dataset_paths(const char *spec, char ***paths, size_t *n) {
    strlist l = {0};
    pz_status st = expand_spec(&l, spec);
    if (st != PZ_OK) strlist_free(&l);
    *paths = l.v;
    *n = l.n;
    return st;
}

/* ---- dataset ----------------------------------------------------------- */

static int32_t header_int(const void *base, int slot) {
    int32_t v;
    memcpy(&v, (const char *)base + 4 * slot, sizeof v);
    return v;
}

pz_status pz_shard_check(const void *base, size_t len, const char *path, int vocab_size, size_t *ntok) {
    *ntok = 0;
    long long fsize = (long long)len;
    if (fsize < HEADER_BYTES)
        return pz_fail(PZ_ERR_IO, "%s: truncated: %lld bytes, shorter than the %d-byte header", path, fsize,
                       HEADER_BYTES);
    int32_t magic = header_int(base, 0), version = header_int(base, 1), count = header_int(base, 2);
    if (magic != PZ_SHARD_MAGIC)
        return pz_fail(PZ_ERR_FORMAT, "%s: bad magic in header slot 0: expected %d, found %d (not a token shard)",
                       path, PZ_SHARD_MAGIC, (int)magic);
    if (version != PZ_SHARD_VERSION)
        return pz_fail(PZ_ERR_FORMAT, "%s: unsupported version in header slot 1: expected %d, found %d",
                       path, PZ_SHARD_VERSION, (int)version);
    if (count < 0)
        return pz_fail(PZ_ERR_FORMAT, "%s: negative token count %d in header slot 2", path, (int)count);
    long long expect = HEADER_BYTES + 2LL * count;
    if (fsize < expect)
        return pz_fail(PZ_ERR_IO, "%s: truncated: header slot 2 says %d tokens, so %lld bytes, but the file has %lld",
                       path, (int)count, expect, fsize);
    if (fsize > expect)
        return pz_fail(PZ_ERR_FORMAT, "%s: size mismatch: header slot 2 says %d tokens, so %lld bytes, but the file has %lld",
                       path, (int)count, expect, fsize);

    size_t n = (size_t)count;
    const uint16_t *tok = (const uint16_t *)((const char *)base + HEADER_BYTES);
    /* A branch-free max over the payload vectorises; only when it is out of
     * range do we walk again to name the first offending position. */
    uint16_t mx = 0;
    for (size_t k = 0; k < n; k++) mx = tok[k] > mx ? tok[k] : mx;
    if ((int)mx >= vocab_size) {
        for (size_t k = 0; k < n; k++)
            if ((int)tok[k] >= vocab_size)
                return pz_fail(PZ_ERR_FORMAT, "%s: token %u at position %zu is out of range for vocab size %d",
                               path, (unsigned)tok[k], k, vocab_size);
    }
    *ntok = n;
    return PZ_OK;
}

/* Maps shard i of d and validates it (pz_shard_check) for samples of T+1 tokens. */
static pz_status open_shard(pz_dataset *d, int i, int T, int vocab_size) {
    const char *path = d->paths[i];
    const void *base;
    size_t len, n;
    pz_status st = pz_map_file(path, &base, &len);
    if (st != PZ_OK) return st;
    d->maps[i] = (void *)base;   /* the dataset unmaps it (pz_dataset_close) */
    d->map_len[i] = len;
    if ((st = pz_shard_check(base, len, path, vocab_size, &n)) != PZ_OK) return st;
    if (n < (size_t)T + 1)
        return pz_fail(PZ_ERR_SHAPE, "%s: has %zu tokens, but one sample of T+1 = %d tokens needs at least %d",
                       path, n, T + 1, T + 1);
    d->tokens[i] = (uint16_t *)((const char *)base + HEADER_BYTES);
    d->ntok[i] = n;
    return PZ_OK;
}

pz_status pz_dataset_open(pz_dataset *d, const char *spec, int T, int vocab_size) {
    memset(d, 0, sizeof *d);
    if (T < 1 || T >= INT32_MAX) return pz_fail(PZ_ERR_ARG, "dataset: sequence length T = %d must be >= 1", T);
    /* tokens are uint16, so a larger vocabulary could never be addressed */
    if (vocab_size < 1 || vocab_size > 65536)
        return pz_fail(PZ_ERR_ARG, "dataset: vocab size %d must be in [1, 65536] for uint16 tokens", vocab_size);
    strlist paths = {0};
    pz_status st = expand_spec(&paths, spec);
    if (st != PZ_OK) { strlist_free(&paths); return st; }
    if (paths.n > (size_t)INT32_MAX) {
        strlist_free(&paths);
        return pz_fail(PZ_ERR_ARG, "dataset '%s': too many shards", spec);
    }

    int ns = (int)paths.n;
    d->nshards = ns;
    d->T = T;
    d->paths = paths.v; /* ownership moves to d */
    d->tokens = xcalloc((size_t)ns, sizeof *d->tokens);
    d->ntok = xcalloc((size_t)ns, sizeof *d->ntok);
    d->maps = xcalloc((size_t)ns, sizeof *d->maps);
    d->map_len = xcalloc((size_t)ns, sizeof *d->map_len);
    d->first_id = xcalloc((size_t)ns + 1, sizeof *d->first_id);
    for (int i = 0; i < ns; i++) {
        if ((st = open_shard(d, i, T, vocab_size)) != PZ_OK) {
            pz_dataset_close(d);
            return st;
        }
        d->first_id[i + 1] = d->first_id[i] + (d->ntok[i] - 1) / (size_t)T;
    }
    return PZ_OK;
}

void pz_dataset_close(pz_dataset *d) {
    for (int i = 0; i < d->nshards; i++) {
        if (d->maps) pz_unmap_file(d->maps[i], d->map_len[i]);
        if (d->paths) free(d->paths[i]);
    }
    PZ_FREE_ALL(d->paths, d->tokens, d->ntok, d->maps, d->map_len, d->first_id);
    memset(d, 0, sizeof *d);
}

size_t pz_dataset_num_samples(const pz_dataset *d) {
    return d->first_id ? d->first_id[d->nshards] : 0;
}

void pz_dataset_sample(const pz_dataset *d, size_t id, int *inp, int *tgt) {
    assert(id < pz_dataset_num_samples(d));
    /* binary search for the last shard whose first id is <= id; shards all
     * hold at least one sample, so first_id is strictly increasing */
    int lo = 0, hi = d->nshards - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (d->first_id[mid] <= id) lo = mid; else hi = mid - 1;
    }
    size_t T = (size_t)d->T;
    const uint16_t *src = d->tokens[lo] + (id - d->first_id[lo]) * T;
    for (size_t t = 0; t < T; t++) {
        inp[t] = src[t];
        tgt[t] = src[t + 1];
    }
}

/* ---- loader ------------------------------------------------------------ */

/* splitmix64's finaliser: a bijection on 64 bits with good avalanche */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The permutation of an epoch depends only on (seed, epoch), so a resumed
 * run can rebuild it without saving it. Seeding with mix64(seed) + epoch
 * rather than seed + epoch keeps epochs' generator states unrelated (seeding
 * is itself a splitmix stream, and nearby seeds would give shifted copies of
 * one stream). */
static void build_order(pz_loader *l) {
    size_t n = pz_dataset_num_samples(l->d);
    for (size_t i = 0; i < n; i++) l->order[i] = i;
    if (!l->shuffle) return;
    pz_rng r;
    pz_rng_seed(&r, mix64(mix64(l->seed) + (uint64_t)(uint32_t)l->epoch));
    for (size_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        size_t j = (size_t)pz_rng_below(&r, (uint64_t)i + 1);
        size_t t = l->order[i];
        l->order[i] = l->order[j];
        l->order[j] = t;
    }
}

pz_status pz_loader_init(pz_loader *l, const pz_dataset *d, int B, int shuffle, uint64_t seed) {
    memset(l, 0, sizeof *l);
    if (B < 1) return pz_fail(PZ_ERR_ARG, "loader: batch size B = %d must be >= 1", B);
    size_t n = pz_dataset_num_samples(d);
    if (n < (size_t)B)
        return pz_fail(PZ_ERR_SHAPE, "loader: the dataset has %zu samples of T+1 = %d tokens, fewer than one batch of B = %d",
                       n, d->T + 1, B);
    l->d = d;
    l->B = B;
    l->shuffle = shuffle != 0;
    l->seed = seed;
    l->order = xmalloc(n * sizeof *l->order);
    build_order(l);
    return PZ_OK;
}

void pz_loader_free(pz_loader *l) {
    free(l->order);
    memset(l, 0, sizeof *l);
}

size_t pz_loader_batches_per_epoch(const pz_loader *l) {
    return pz_dataset_num_samples(l->d) / (size_t)l->B;
}

void pz_loader_next(pz_loader *l, int *inp, int *tgt, size_t *ids) {
    size_t T = (size_t)l->d->T;
    for (int b = 0; b < l->B; b++) {
        size_t id = l->order[l->pos + (size_t)b];
        pz_dataset_sample(l->d, id, inp + (size_t)b * T, tgt + (size_t)b * T);
        if (ids) ids[b] = id;
    }
    l->pos += (size_t)l->B;
    /* Advance eagerly once the rest cannot fill a batch, so (epoch, pos)
     * always names the next batch: that is the state a checkpoint saves. */
    if (l->pos + (size_t)l->B > pz_dataset_num_samples(l->d)) {
        l->epoch++;
        l->pos = 0;
        build_order(l);
    }
}

void pz_loader_reset(pz_loader *l) {
    l->epoch = 0;
    l->pos = 0;
    build_order(l);
}

pz_status pz_loader_seek(pz_loader *l, int epoch, size_t batch) {
    size_t nb = pz_loader_batches_per_epoch(l);
    if (epoch < 0 || batch >= nb)
        return pz_fail(PZ_ERR_ARG, "loader: cannot seek to epoch %d batch %zu (an epoch has %zu batches)",
                       epoch, batch, nb);
    l->epoch = epoch;
    l->pos = batch * (size_t)l->B;
    build_order(l);
    return PZ_OK;
}

/* ---- writing shards and the byte tokenizer ----------------------------- */

pz_status pz_shard_write(const char *path, const uint16_t *tokens, size_t n) {
    if (n > MAX_SHARD_TOKENS)
        return pz_fail(PZ_ERR_ARG, "%s: %zu tokens do not fit a shard (at most %zu)", path, n, MAX_SHARD_TOKENS);
    int32_t header[HEADER_INTS] = {0};
    header[0] = PZ_SHARD_MAGIC;
    header[1] = PZ_SHARD_VERSION;
    header[2] = (int32_t)n;
    pz_atomic_file af;
    pz_status st = pz_atomic_open(&af, path);
    if (st != PZ_OK) return st;
    /* a failed write (disk full) is the caller's input problem, not a bug,
     * so it is returned rather than aborting like xfwrite */
    if (fwrite(header, sizeof header, 1, af.f) != 1 || (n && fwrite(tokens, 2, n, af.f) != n)) {
        int e = errno;
        pz_atomic_abort(&af);
        return pz_fail(PZ_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    return pz_atomic_commit(&af);
}

static pz_status write_bytes_as_shard(const char *path, const uint8_t *bytes, size_t n) {
    uint16_t *tok = xmalloc(n * sizeof *tok);
    for (size_t i = 0; i < n; i++) tok[i] = bytes[i];
    pz_status st = pz_shard_write(path, tok, n);
    free(tok);
    return st;
}

pz_status pz_tokenize_bytes(const char *const *inputs, int ninputs, const char *train_path,
                            const char *val_path, double val_fraction) {
    if (ninputs < 1) return pz_fail(PZ_ERR_ARG, "tokenize: no input files");
    if (!train_path) return pz_fail(PZ_ERR_ARG, "tokenize: no output path for the train shard");
    if (!(val_fraction >= 0.0 && val_fraction < 1.0)) /* also rejects NaN */
        return pz_fail(PZ_ERR_ARG, "tokenize: validation fraction %g must be in [0, 1)", val_fraction);
    /* Either combination that mixes up "no val" with "some val" would put
     * data the user meant to hold out into training, or write nothing. */
    if (!val_path && val_fraction > 0.0)
        return pz_fail(PZ_ERR_ARG, "tokenize: validation fraction %g given without a validation output", val_fraction);
    if (val_path && val_fraction == 0.0)
        return pz_fail(PZ_ERR_ARG, "tokenize: a validation output needs a validation fraction > 0");

    /* Sizes first, so an over-long corpus or an unreadable file is reported
     * before gigabytes are read. */
    size_t total = 0;
    for (int i = 0; i < ninputs; i++) {
        struct stat sb;
        if (stat(inputs[i], &sb) != 0)
            return pz_fail(PZ_ERR_IO, "%s: cannot read: %s", inputs[i], strerror(errno));
        if (S_ISDIR(sb.st_mode)) return pz_fail(PZ_ERR_IO, "%s: is a directory", inputs[i]);
        if (S_ISREG(sb.st_mode)) {
            total += (size_t)sb.st_size;
            if (total > MAX_SHARD_TOKENS)
                return pz_fail(PZ_ERR_SHAPE, "tokenize: inputs up to %s hold more than %zu bytes, the most one shard can take",
                               inputs[i], MAX_SHARD_TOKENS);
        }
    }

    uint8_t *all = NULL;
    size_t n = 0, cap = 0;
    pz_status st = PZ_OK;
    for (int i = 0; i < ninputs; i++) {
        uint8_t *buf;
        size_t len;
        if ((st = pz_read_file_max(inputs[i], (size_t)1 << 30, &buf, &len)) != PZ_OK) goto out;
        /* re-checked: a file may have grown since the stat, or be a pipe */
        if (len > MAX_SHARD_TOKENS - n) {
            free(buf);
            st = pz_fail(PZ_ERR_SHAPE, "tokenize: inputs up to %s hold more than %zu bytes, the most one shard can take",
                         inputs[i], MAX_SHARD_TOKENS);
            goto out;
        }
        if (n + len > cap) {
            cap = n + len > 2 * cap ? n + len : 2 * cap;
            uint8_t *na = realloc(all, cap);
            if (!na) { free(buf); st = pz_fail(PZ_ERR_NOMEM, "tokenize: cannot hold %zu bytes", cap); goto out; }
            all = na;
        }
        if (len) memcpy(all + n, buf, len);
        n += len;
        free(buf);
    }
    if (n == 0) { st = pz_fail(PZ_ERR_SHAPE, "tokenize: the inputs are empty"); goto out; }

    size_t cut = n;
    if (val_path) {
        size_t nval = (size_t)((double)n * val_fraction);
        if (nval == 0 || nval >= n) {
            st = pz_fail(PZ_ERR_SHAPE, "tokenize: %zu bytes with validation fraction %g leave an empty %s split",
                         n, val_fraction, nval == 0 ? "validation" : "train");
            goto out;
        }
        cut = n - nval;
        /* Start the val split at the beginning of a line when a newline is
         * close, so neither split opens or ends mid-line; far away, keep the
         * exact fraction instead of moving the cut by an arbitrary amount. */
        size_t lo = cut > VAL_CUT_WINDOW ? cut - VAL_CUT_WINDOW : 0;
        for (size_t k = cut; k > lo; k--) {
            if (all[k - 1] == '\n') { cut = k; break; }
        }
    }
    if ((st = write_bytes_as_shard(train_path, all, cut)) != PZ_OK) goto out;
    if (val_path) st = write_bytes_as_shard(val_path, all + cut, n - cut);
out:
    free(all);
    return st;
}
