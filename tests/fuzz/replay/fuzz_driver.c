/* fuzz_driver.c: see fuzz_driver.h. */
#include "tests/fuzz/replay/fuzz_driver.h"
#include "base/bytes.h"
#include "base/io/file.h"
#include "base/mem.h"
#include "base/rng.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

size_t fuzz_delete_run(pz_rng *r, uint8_t *b, size_t *len, size_t at) {
    size_t d = 1 + (size_t)pz_rng_below(r, 8);
    if (at + d > *len) d = *len - at;
    memmove(b + at, b + at + d, *len - at - d);
    *len -= d;
    return d;
}

void fuzz_insert_byte(uint8_t *b, size_t *len, size_t at, uint8_t v) {
    memmove(b + at + 1, b + at, *len - at);
    b[at] = v;
    (*len)++;
}

void fuzz_byte_step(pz_rng *r, uint8_t *b, size_t *len, size_t cap, size_t at, unsigned step) {
    switch (step) {
    case 0: if (*len) b[at] = (uint8_t)pz_rng_next(r); break;
    case 1: if (*len) b[at] ^= (uint8_t)(1u << pz_rng_below(r, 8)); break;
    case 2: if (*len) fuzz_delete_run(r, b, len, at); break;
    case 3: if (*len < cap) fuzz_insert_byte(b, len, at, (uint8_t)pz_rng_next(r)); break;
    case 4: *len = (size_t)pz_rng_below(r, *len + 1); break;
    default: break;
    }
}

void fuzz_mutate_steps(pz_rng *r, uint8_t *b, size_t *len, size_t cap, unsigned max_steps, unsigned kinds,
                       fuzz_extra_step extra) {
    int k = 1 + (int)pz_rng_below(r, max_steps);
    for (int i = 0; i < k && *len > 0; i++) {
        size_t at = (size_t)pz_rng_below(r, *len);
        unsigned step = (unsigned)pz_rng_below(r, kinds);
        if (step < FUZZ_BYTE_STEPS) fuzz_byte_step(r, b, len, cap, at, step);
        else extra(r, b, len, cap, at, step);
    }
}

void fuzz_mutate_words(pz_rng *r, uint8_t *b, size_t *len, size_t cap, const char *const *words, int nwords) {
    int k = 1 + (int)pz_rng_below(r, 4);
    for (int i = 0; i < k; i++) {
        size_t at = *len ? (size_t)pz_rng_below(r, *len) : 0;
        unsigned step = (unsigned)pz_rng_below(r, 6);
        if (step < FUZZ_BYTE_STEPS) {
            fuzz_byte_step(r, b, len, cap, at, step);
            continue;
        }
        const char *w = words[pz_rng_below(r, (uint64_t)nwords)];   /* a word of the grammar */
        size_t n = strlen(w);
        if (*len + n > cap) continue;
        memmove(b + at + n, b + at, *len - at);
        memcpy(b + at, w, n);
        *len += n;
    }
}

static int write_seeds(const fuzz_target *t, const char *dir) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) pz_die("cannot create %s", dir);
    fuzz_image s[FUZZ_MAX_SEEDS];
    int n = t->make_seeds(s);
    for (int i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/seed%02d%s", dir, i, t->seed_ext);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(s[i].data, 1, s[i].len, f) != s[i].len || fclose(f) != 0) pz_die("cannot write %s", path);
        free(s[i].data);
    }
    return 0;
}

static int replay_files(int nfiles, char **files) {
    for (int i = 0; i < nfiles; i++) {
        uint8_t *b;
        size_t len;
        if (pz_read_file(files[i], &b, &len) != PZ_OK) pz_die("%s", pz_last_error());
        LLVMFuzzerTestOneInput(b, len);
        free(b);
        printf("%s: ok\n", files[i]);
    }
    return 0;
}

/* the header of the target being run (fuzz_extra_step has no context) */
static const fuzz_header *g_header;

static void header_step(pz_rng *r, uint8_t *b, size_t *len, size_t cap, size_t at, unsigned kind) {
    const fuzz_header *h = g_header;
    (void)cap, (void)at;
    if (*len < h->size) return;
    if (kind == 5) {
        b[h->field_at + pz_rng_below(r, h->nfield)] ^= (uint8_t)(1u << pz_rng_below(r, 8));
        h->seal(b, *len);
    } else if (kind == 6) {
        h->seal(b, *len);
    } else {
        uint64_t v = pz_get_u64(b + h->len_at);
        pz_put_u64(b + h->len_at, pz_rng_below(r, 4) == 0 ? ~0ull : v + pz_rng_below(r, 9) - 4);
    }
}

static void mutate_header(pz_rng *r, uint8_t *b, size_t *len, size_t cap) {
    fuzz_mutate_steps(r, b, len, cap, 3, 8, header_step);
}

static int smoke(const fuzz_target *t, long iters) {
    fuzz_image s[FUZZ_MAX_SEEDS];
    int ns = t->make_seeds(s);
    size_t cap = 0;
    for (int i = 0; i < ns; i++) {
        LLVMFuzzerTestOneInput(s[i].data, s[i].len);
        if (s[i].len + 64 > cap) cap = s[i].len + 64;
    }
    uint8_t *buf = xmalloc(cap);
    pz_rng r;
    pz_rng_seed(&r, t->rng_seed);
    for (long it = 0; it < iters; it++) {
        const fuzz_image *seed = &s[it % ns];
        size_t len = seed->len;
        memcpy(buf, seed->data, len);
        if (t->mutate) t->mutate(&r, buf, &len, cap);
        else mutate_header(&r, buf, &len, cap);
        uint8_t *exact = xmalloc(len ? len : 1);   /* exact size: ASan sees reads past the end */
        memcpy(exact, buf, len);
        LLVMFuzzerTestOneInput(exact, len);
        free(exact);
    }
    free(buf);
    for (int i = 0; i < ns; i++) free(s[i].data);
    printf("%s fuzz smoke: %ld mutated inputs of %d seeds, no crash\n", t->name, iters, ns);
    return 0;
}

int fuzz_main(const fuzz_target *t, int argc, char **argv) {
    g_header = t->header;
    if (argc == 3 && strcmp(argv[1], "--seed") == 0) return write_seeds(t, argv[2]);
    if (argc >= 2 && strspn(argv[1], "0123456789") != strlen(argv[1])) return replay_files(argc - 1, argv + 1);
    return smoke(t, argc >= 2 ? atol(argv[1]) : t->default_iters);
}
