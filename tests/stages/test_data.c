/* test_data.c: token shards, sample ids, the batch loader and the byte
 * tokenizer (stages/data.c). Every case works in a fresh mkdtemp directory
 * under /tmp, removed at the end; the binary exits 1 if any check failed. */
#include "stages/data.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"

static char tmpdir[64];

static char *tpath(const char *name) {
    static char buf[8][256];
    static int k = 0;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
    return p;
}

static void write_raw(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(2); }
    if (n && fwrite(p, 1, n, f) != n) { perror(path); exit(2); }
    fclose(f);
}

static void write_text(const char *path, const char *s) { write_raw(path, s, strlen(s)); }

/* A shard built by hand, not by pz_shard_write, so header mistakes can be
 * injected: count in the header and tokens in the file may disagree. */
static void write_shard_raw(const char *path, int32_t magic, int32_t version, int32_t count,
                            const uint16_t *tok, size_t ntok_in_file) {
    int32_t h[256] = {0};
    h[0] = magic; h[1] = version; h[2] = count;
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(2); }
    fwrite(h, sizeof h, 1, f);
    if (ntok_in_file) fwrite(tok, 2, ntok_in_file, f);
    fclose(f);
}

static uint16_t *ramp(size_t n, unsigned start, unsigned mod) {
    uint16_t *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = (uint16_t)((start + i) % mod);
    return t;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

/* ------------------------------------------------------------------------ */

static void test_round_trip(void) {
    size_t n = 1000;
    uint16_t *tok = ramp(n, 7, 50257);
    tok[3] = 50256; /* the largest GPT-2 token must survive */
    const char *p = tpath("rt.bin");
    CHECK_STATUS(pz_shard_write(p, tok, n), PZ_OK, NULL);

    /* bytes on disk: the llm.c layout exactly */
    FILE *f = fopen(p, "rb");
    CHECK(f != NULL, "cannot open the written shard %s", p);
    if (f) {
        fseek(f, 0, SEEK_END);
        CHECK(ftell(f) == (long)(1024 + 2 * n), "shard of %zu tokens is %ld bytes", n, ftell(f));
        fseek(f, 0, SEEK_SET);
        int32_t h[256];
        CHECK(fread(h, sizeof h, 1, f) == 1, "cannot read the shard header");
        CHECK(h[0] == 20240520 && h[1] == 1 && h[2] == (int32_t)n, "header magic %d version %d count %d", h[0], h[1],
              h[2]);
        int zero = 1;
        for (int i = 3; i < 256; i++) zero &= h[i] == 0;
        CHECK(zero, "header words 3..255 are not zero");
        fclose(f);
    }
    CHECK(access(tpath("rt.bin.tmp"), F_OK) != 0, "the temporary rt.bin.tmp was left behind");

    pz_dataset d;
    CHECK_STATUS(pz_dataset_open(&d, p, 16, 50257), PZ_OK, NULL);
    CHECK(d.nshards == 1, "%d shards, want 1", d.nshards);
    CHECK(d.ntok[0] == n, "%zu tokens read, %zu written", d.ntok[0], n);
    CHECK(memcmp(d.tokens[0], tok, n * 2) == 0, "tokens read differ from those written");
    CHECK(pz_dataset_num_samples(&d) == (n - 1) / 16, "%zu samples of T=16", pz_dataset_num_samples(&d));
    pz_dataset_close(&d);
    CHECK(d.nshards == 0 && d.paths == NULL, "close left %d shards", d.nshards);

    /* the count field is an int32: one more than it holds is refused before
     * anything is read from the (here bogus) token pointer */
    CHECK_STATUS(pz_shard_write(tpath("big.bin"), tok, (size_t)1 << 31), PZ_ERR_ARG, "big.bin");
    CHECK(access(tpath("big.bin"), F_OK) != 0, "refused write left big.bin");
    free(tok);
}

static void test_sample_ids(void) {
    const int T = 4;
    /* shard a: 23 tokens -> floor(22/4) = 5 samples; shard b: 9 -> 2 */
    uint16_t *a = ramp(23, 0, 1000), *b = ramp(9, 500, 1000);
    CHECK_STATUS(pz_shard_write(tpath("ids_a.bin"), a, 23), PZ_OK, NULL);
    CHECK_STATUS(pz_shard_write(tpath("ids_b.bin"), b, 9), PZ_OK, NULL);

    /* listed b first: the dataset takes its shards in sorted order */
    char spec[600];
    snprintf(spec, sizeof spec, "%s,%s", tpath("ids_b.bin"), tpath("ids_a.bin"));
    pz_dataset d;
    CHECK_STATUS(pz_dataset_open(&d, spec, T, 1000), PZ_OK, NULL);
    CHECK(d.nshards == 2, "%d shards, want 2", d.nshards);
    CHECK(strcmp(d.paths[0], tpath("ids_a.bin")) == 0, "first shard %s, want ids_a.bin (sorted)", d.paths[0]);
    CHECK(pz_dataset_num_samples(&d) == 7, "%zu samples, want 5 + 2", pz_dataset_num_samples(&d));
    CHECK(d.first_id[0] == 0 && d.first_id[1] == 5 && d.first_id[2] == 7, "first ids %zu %zu %zu, want 0 5 7",
          d.first_id[0], d.first_id[1], d.first_id[2]);

    int inp[4], tgt[4];
    for (size_t id = 0; id < 7; id++) {
        pz_dataset_sample(&d, id, inp, tgt);
        const uint16_t *src = id < 5 ? a + id * T : b + (id - 5) * T;
        int ok = 1;
        for (int t = 0; t < T; t++) ok &= inp[t] == src[t] && tgt[t] == src[t + 1];
        CHECK(ok, "sample %zu: wrong tokens", id);
    }
    /* the last sample of a ends at token 20: tokens 21, 22 are never used,
     * and the first sample of b starts at b's first token, not a's leftovers */
    pz_dataset_sample(&d, 4, inp, tgt);
    CHECK(inp[0] == 16 && tgt[3] == 20, "last sample of a: input from %d, last target %d", inp[0], tgt[3]);
    pz_dataset_sample(&d, 5, inp, tgt);
    CHECK(inp[0] == 500 && tgt[0] == 501, "first sample of b: %d -> %d", inp[0], tgt[0]);
    pz_dataset_close(&d);

    /* the same two shards by glob give the same ids */
    CHECK_STATUS(pz_dataset_open(&d, tpath("ids_*.bin"), T, 1000), PZ_OK, NULL);
    CHECK(d.nshards == 2 && pz_dataset_num_samples(&d) == 7, "glob: %d shards, %zu samples", d.nshards,
          pz_dataset_num_samples(&d));
    pz_dataset_sample(&d, 6, inp, tgt);
    CHECK(inp[0] == 504 && tgt[3] == 508, "glob: sample 6 from %d, last target %d", inp[0], tgt[3]);
    pz_dataset_close(&d);

    /* a shard named twice would shift every later id: refused */
    snprintf(spec, sizeof spec, "%s,%s", tpath("ids_*.bin"), tpath("ids_a.bin"));
    CHECK_STATUS(pz_dataset_open(&d, spec, T, 1000), PZ_ERR_ARG, "more than once");
    snprintf(spec, sizeof spec, "%s,", tpath("ids_a.bin"));
    CHECK_STATUS(pz_dataset_open(&d, spec, T, 1000), PZ_ERR_ARG, "empty entry");
    free(a);
    free(b);
}

static void test_unshuffled(void) {
    const int T = 8, B = 3;
    /* 10 samples need 81 tokens; 7 extra make a partial sample, and 10 % 3
     * leaves one whole sample as the dropped tail */
    size_t n = 10 * T + 1 + 7;
    uint16_t *tok = ramp(n, 0, 60000);
    CHECK_STATUS(pz_shard_write(tpath("flat.bin"), tok, n), PZ_OK, NULL);
    pz_dataset d;
    CHECK_STATUS(pz_dataset_open(&d, tpath("flat.bin"), T, 60000), PZ_OK, NULL);
    pz_loader l;
    CHECK_STATUS(pz_loader_init(&l, &d, B, 0, 1234), PZ_OK, NULL);
    CHECK(pz_loader_batches_per_epoch(&l) == 3, "%zu batches per epoch, want 3", pz_loader_batches_per_epoch(&l));

    int inp[24], tgt[24];
    size_t ids[3];
    for (int round = 0; round < 2; round++) {
        for (size_t k = 0; k < 3; k++) {
            CHECK(l.epoch == round, "epoch %d in round %d", l.epoch, round);
            pz_loader_next(&l, inp, tgt, ids);
            /* batch k is tokens [k*B*T, (k+1)*B*T], targets shifted by one,
             * the llm.c positions */
            int ok = 1;
            for (int i = 0; i < B * T; i++)
                ok &= inp[i] == tok[k * B * T + (size_t)i] && tgt[i] == tok[k * B * T + (size_t)i + 1];
            CHECK(ok, "round %d batch %zu: wrong tokens", round, k);
            for (int b = 0; b < B; b++) CHECK(ids[b] == k * B + (size_t)b, "batch %zu: id %zu at %d", k, ids[b], b);
        }
    }
    /* sample 9 (the tail) was never served; the third epoch starts at 0 */
    CHECK(l.epoch == 2 && l.pos == 0, "after two epochs: epoch %d pos %zu", l.epoch, l.pos);
    pz_loader_next(&l, inp, tgt, NULL);
    CHECK(inp[0] == 0 && tgt[0] == 1, "third epoch starts %d -> %d", inp[0], tgt[0]);
    pz_loader_reset(&l);
    CHECK(l.epoch == 0 && l.pos == 0, "after reset: epoch %d pos %zu", l.epoch, l.pos);
    pz_loader_free(&l);

    CHECK_STATUS(pz_loader_init(&l, &d, 0, 0, 0), PZ_ERR_ARG, "B");
    CHECK_STATUS(pz_loader_init(&l, &d, 11, 0, 0), PZ_ERR_SHAPE, "10 samples");
    pz_dataset_close(&d);
    free(tok);
}

/* B divides the sample count (issue 24: a wrap that dropped the last batch
 * of each epoch survived, because the other tests leave a tail): every
 * epoch serves all n / B batches, the last one too, then wraps. */
static void test_batch_divides(void) {
    const int T = 4, B = 4;
    const size_t n = 12 * T + 1;   /* 12 samples, 3 batches, no tail */
    uint16_t *tok = ramp(n, 0, 50000);
    CHECK_STATUS(pz_shard_write(tpath("div.bin"), tok, n), PZ_OK, NULL);
    pz_dataset d;
    CHECK_STATUS(pz_dataset_open(&d, tpath("div.bin"), T, 50000), PZ_OK, NULL);
    CHECK(pz_dataset_num_samples(&d) == 12, "%zu samples, want 12", pz_dataset_num_samples(&d));
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        pz_loader l;
        CHECK_STATUS(pz_loader_init(&l, &d, B, shuffle, 7), PZ_OK, NULL);
        CHECK(pz_loader_batches_per_epoch(&l) == 3, "%zu batches per epoch, want 3", pz_loader_batches_per_epoch(&l));
        int inp[16], tgt[16];
        size_t ids[4];
        for (int epoch = 0; epoch < 3; epoch++) {
            int seen[12] = {0};
            for (size_t k = 0; k < 3; k++) {
                CHECK(l.epoch == epoch && l.pos == k * B, "shuffle %d: before batch %zu of epoch %d: epoch %d pos %zu",
                      shuffle, k, epoch, l.epoch, l.pos);
                pz_loader_next(&l, inp, tgt, ids);
                for (int b = 0; b < B; b++) {
                    if (ids[b] < 12) seen[ids[b]]++;
                    if (!shuffle) CHECK(ids[b] == k * B + (size_t)b, "batch %zu: id %zu at %d", k, ids[b], b);
                }
            }
            for (int i = 0; i < 12; i++)
                CHECK(seen[i] == 1, "shuffle %d epoch %d: sample %d served %d times", shuffle, epoch, i, seen[i]);
        }
        /* resume at the last batch of an epoch: it is served, then the next epoch */
        CHECK_STATUS(pz_loader_seek(&l, 1, 2), PZ_OK, NULL);
        pz_loader_next(&l, inp, tgt, ids);
        CHECK(l.epoch == 2 && l.pos == 0, "after the last batch of epoch 1: epoch %d pos %zu", l.epoch, l.pos);
        if (!shuffle) CHECK(ids[0] == 8 && ids[3] == 11, "the last batch holds ids %zu..%zu, want 8..11", ids[0], ids[3]);
        pz_loader_free(&l);
    }
    pz_dataset_close(&d);
    free(tok);
}

/* Collects the ids of one epoch from a shuffled loader, checking that every
 * batch's tokens are the tokens of the ids it reports. */
static void epoch_ids(pz_loader *l, size_t *out) {
    const int T = l->d->T, B = l->B;
    int *inp = malloc(sizeof(int) * (size_t)(B * T)), *tgt = malloc(sizeof(int) * (size_t)(B * T));
    int *ri = malloc(sizeof(int) * (size_t)T), *rt = malloc(sizeof(int) * (size_t)T);
    size_t nb = pz_loader_batches_per_epoch(l);
    int ok = 1;
    for (size_t k = 0; k < nb; k++) {
        pz_loader_next(l, inp, tgt, out + k * (size_t)B);
        for (int b = 0; b < B; b++) {
            pz_dataset_sample(l->d, out[k * (size_t)B + (size_t)b], ri, rt);
            ok &= memcmp(ri, inp + b * T, sizeof(int) * (size_t)T) == 0;
            ok &= memcmp(rt, tgt + b * T, sizeof(int) * (size_t)T) == 0;
        }
    }
    CHECK(ok, "a batch's tokens are not those of the ids it reports");
    free(inp); free(tgt); free(ri); free(rt);
}

static void test_shuffle(void) {
    const int T = 4, B = 5;
    /* two shards, 30 + 22 = 52 samples: 10 batches, 2 samples dropped */
    uint16_t *a = ramp(30 * T + 1, 0, 50000), *b = ramp(22 * T + 3, 20000, 50000);
    CHECK_STATUS(pz_shard_write(tpath("sh_0.bin"), a, 30 * T + 1), PZ_OK, NULL);
    CHECK_STATUS(pz_shard_write(tpath("sh_1.bin"), b, 22 * T + 3), PZ_OK, NULL);
    pz_dataset d;
    CHECK_STATUS(pz_dataset_open(&d, tpath("sh_*.bin"), T, 50000), PZ_OK, NULL);
    CHECK(pz_dataset_num_samples(&d) == 52, "%zu samples, want 30 + 22", pz_dataset_num_samples(&d));

    pz_loader l1, l2, l3;
    CHECK_STATUS(pz_loader_init(&l1, &d, B, 1, 42), PZ_OK, NULL);
    CHECK_STATUS(pz_loader_init(&l2, &d, B, 1, 42), PZ_OK, NULL);
    CHECK_STATUS(pz_loader_init(&l3, &d, B, 1, 43), PZ_OK, NULL);
    CHECK(pz_loader_batches_per_epoch(&l1) == 10, "%zu batches per epoch, want 10", pz_loader_batches_per_epoch(&l1));

    size_t e0[50], e1[50], again[50], other[50];
    epoch_ids(&l1, e0);
    CHECK(l1.epoch == 1 && l1.pos == 0, "after an epoch: epoch %d pos %zu", l1.epoch, l1.pos);
    epoch_ids(&l1, e1);
    epoch_ids(&l2, again);
    epoch_ids(&l3, other);

    /* a permutation: 50 distinct ids out of 52 */
    int seen[52] = {0}, distinct = 1;
    for (int i = 0; i < 50; i++) {
        CHECK(e0[i] < 52, "id %zu out of range", e0[i]);
        if (e0[i] < 52) distinct &= seen[e0[i]]++ == 0;
    }
    CHECK(distinct, "an epoch serves some id twice");
    /* shuffled at all: the identity order has every id in place */
    int in_place = 0;
    for (int i = 0; i < 50; i++) in_place += e0[i] == (size_t)i;
    CHECK(in_place < 50, "not shuffled: every id in place");
    CHECK(memcmp(e0, again, sizeof e0) == 0, "same seed, another order");
    CHECK(memcmp(e0, other, sizeof e0) != 0, "another seed, the same order");
    CHECK(memcmp(e0, e1, sizeof e0) != 0, "another epoch, the same order");

    /* reset and seek rebuild an epoch's order from (seed, epoch) alone, which
     * is what resuming from a checkpoint relies on */
    pz_loader_reset(&l1);
    epoch_ids(&l1, again);
    CHECK(memcmp(e0, again, sizeof e0) == 0, "reset: not the first epoch's order");
    CHECK_STATUS(pz_loader_seek(&l2, 1, 4), PZ_OK, NULL);
    size_t ids[5];
    int inp[20], tgt[20];
    pz_loader_next(&l2, inp, tgt, ids);
    CHECK(memcmp(ids, e1 + 4 * B, sizeof ids) == 0, "seek(1, 4): not batch 4 of epoch 1");
    CHECK_STATUS(pz_loader_seek(&l2, 0, 10), PZ_ERR_ARG, "10 batches");

    pz_loader_free(&l1);
    pz_loader_free(&l2);
    pz_loader_free(&l3);
    pz_dataset_close(&d);
    free(a);
    free(b);
}

/* The shuffle is uniform: over 2400 seeds, the 24 orders of 4 samples each
 * appear 100 times on average; a chi-square over 23 degrees of freedom stays
 * below 60 (p ~ 3e-5) for a uniform shuffle. Sattolo's variant of
 * Fisher-Yates (j < i instead of j <= i) yields only the 6 cyclic orders and
 * never leaves a sample in place, and fails this. */
static void test_shuffle_uniform(void) {
    const int T = 2, N = 4, SEEDS = 2400;
    uint16_t *a = ramp((size_t)N * T + 1, 0, 50000);
    CHECK_STATUS(pz_shard_write(tpath("uni.bin"), a, (size_t)N * T + 1), PZ_OK, NULL);
    pz_dataset d;
    CHECK_STATUS(pz_dataset_open(&d, tpath("uni.bin"), T, 50000), PZ_OK, NULL);
    int count[24] = {0}, fixed = 0;
    for (int s = 0; s < SEEDS; s++) {
        pz_loader l;
        CHECK_STATUS(pz_loader_init(&l, &d, N, 1, (uint64_t)s), PZ_OK, NULL);
        int inp[8], tgt[8];
        size_t ids[4];
        pz_loader_next(&l, inp, tgt, ids);
        /* the order's index among the 24 permutations (Lehmer code) */
        int code = 0, used[4] = {0};
        for (int i = 0; i < N; i++) {
            int smaller = 0;
            for (size_t v = 0; v < ids[i]; v++) smaller += !used[v];
            used[ids[i]] = 1;
            code = code * (N - i) + smaller;
            fixed += ids[i] == (size_t)i;
        }
        count[code]++;
        pz_loader_free(&l);
    }
    double chi2 = 0.0, want = SEEDS / 24.0;
    int orders = 0;
    for (int k = 0; k < 24; k++) {
        chi2 += (count[k] - want) * (count[k] - want) / want;
        orders += count[k] > 0;
    }
    CHECK(orders == 24 && chi2 < 60.0 && fixed > SEEDS / 2,
          "shuffle not uniform over %d seeds: %d of 24 orders, chi-square %.1f, %d samples left in place", SEEDS,
          orders, chi2, fixed);
    printf("ok: shuffle of 4 samples over %d seeds: %d of 24 orders, chi-square %.1f (23 d.o.f.)\n", SEEDS, orders,
           chi2);
    pz_dataset_close(&d);
    free(a);
}

static void test_malformed(void) {
    uint16_t tok[64];
    for (int i = 0; i < 64; i++) tok[i] = (uint16_t)i;
    pz_dataset d;

    write_shard_raw(tpath("magic.bin"), 20240326, 1, 64, tok, 64);
    CHECK_STATUS(pz_dataset_open(&d, tpath("magic.bin"), 8, 256), PZ_ERR_FORMAT, "magic.bin: bad magic");
    CHECK(d.nshards == 0 && d.paths == NULL, "a failed open left %d shards", d.nshards);

    write_shard_raw(tpath("version.bin"), 20240520, 7, 64, tok, 64);
    CHECK_STATUS(pz_dataset_open(&d, tpath("version.bin"), 8, 256), PZ_ERR_FORMAT, "found 7");

    /* shorter than the header itself */
    write_raw(tpath("tiny_shard.bin"), tok, 100);
    CHECK_STATUS(pz_dataset_open(&d, tpath("tiny_shard.bin"), 8, 256), PZ_ERR_IO, "truncated");

    /* header promises 64 tokens, file holds 40 */
    write_shard_raw(tpath("trunc.bin"), 20240520, 1, 64, tok, 40);
    CHECK_STATUS(pz_dataset_open(&d, tpath("trunc.bin"), 8, 256), PZ_ERR_IO, "truncated");

    /* header says 40, file holds 64: trailing bytes are a format error */
    write_shard_raw(tpath("size.bin"), 20240520, 1, 40, tok, 64);
    CHECK_STATUS(pz_dataset_open(&d, tpath("size.bin"), 8, 256), PZ_ERR_FORMAT, "size mismatch");

    write_shard_raw(tpath("neg.bin"), 20240520, 1, -5, tok, 0);
    CHECK_STATUS(pz_dataset_open(&d, tpath("neg.bin"), 8, 256), PZ_ERR_FORMAT, "negative");

    /* 64 tokens 0..63 against vocab 50: first bad one is 50 at position 50 */
    CHECK_STATUS(pz_shard_write(tpath("vocab.bin"), tok, 64), PZ_OK, NULL);
    CHECK_STATUS(pz_dataset_open(&d, tpath("vocab.bin"), 8, 50), PZ_ERR_FORMAT,
                 "vocab.bin: token 50 at position 50");
    CHECK_STATUS(pz_dataset_open(&d, tpath("vocab.bin"), 8, 64), PZ_OK, NULL);
    pz_dataset_close(&d);

    /* 64 tokens cannot hold one sample of T+1 = 65 */
    CHECK_STATUS(pz_dataset_open(&d, tpath("vocab.bin"), 64, 256), PZ_ERR_SHAPE, "has 64 tokens");
    CHECK_STATUS(pz_dataset_open(&d, tpath("vocab.bin"), 63, 256), PZ_OK, NULL);
    CHECK(pz_dataset_num_samples(&d) == 1, "%zu samples of T=63 in 64 tokens", pz_dataset_num_samples(&d));
    pz_dataset_close(&d);
    CHECK_STATUS(pz_shard_write(tpath("empty.bin"), tok, 0), PZ_OK, NULL);
    CHECK_STATUS(pz_dataset_open(&d, tpath("empty.bin"), 1, 256), PZ_ERR_SHAPE, "has 0 tokens");

    CHECK_STATUS(pz_dataset_open(&d, tpath("missing.bin"), 8, 256), PZ_ERR_IO, "missing.bin");
    CHECK_STATUS(pz_dataset_open(&d, tpath("nothing_*.bin"), 8, 256), PZ_ERR_IO, "nothing_*.bin");
    CHECK_STATUS(pz_dataset_open(&d, tmpdir, 8, 256), PZ_ERR_IO, "not a regular file");

    /* one bad shard in a list fails the whole dataset, naming that shard */
    char spec[600];
    snprintf(spec, sizeof spec, "%s,%s", tpath("vocab.bin"), tpath("version.bin"));
    CHECK_STATUS(pz_dataset_open(&d, spec, 8, 256), PZ_ERR_FORMAT, "version.bin");
    CHECK(d.nshards == 0, "a failed list left %d shards", d.nshards);

    CHECK_STATUS(pz_dataset_open(&d, tpath("vocab.bin"), 0, 256), PZ_ERR_ARG, NULL);
    CHECK_STATUS(pz_dataset_open(&d, tpath("vocab.bin"), 8, 0), PZ_ERR_ARG, NULL);
    CHECK_STATUS(pz_dataset_open(&d, tpath("vocab.bin"), 8, 65537), PZ_ERR_ARG, NULL);
    CHECK_STATUS(pz_dataset_open(&d, "", 8, 256), PZ_ERR_ARG, NULL);
}

/* Reads back a byte-tokenized shard as a string (tokens must be bytes). */
static char *read_byte_shard(const char *path, size_t *n) {
    pz_dataset d;
    *n = 0;
    if (pz_dataset_open(&d, path, 1, 256) != PZ_OK) {
        fprintf(stderr, "cannot reopen %s: %s\n", path, pz_last_error());
        return NULL;
    }
    char *s = malloc(d.ntok[0] + 1);
    for (size_t i = 0; i < d.ntok[0]; i++) s[i] = (char)d.tokens[0][i];
    s[d.ntok[0]] = '\0';
    *n = d.ntok[0];
    pz_dataset_close(&d);
    return s;
}

static void test_tokenizer(void) {
    /* 1000 bytes in two files; lines of 10 bytes ("abcdefghi\n") */
    char text[1001];
    for (int i = 0; i < 1000; i++) text[i] = i % 10 == 9 ? '\n' : (char)('a' + i % 10);
    text[1000] = '\0';
    text[5] = (char)0xff; /* a high byte must become token 255, not -1 */
    write_raw(tpath("t1.txt"), text, 300);
    write_raw(tpath("t2.txt"), text + 300, 700);
    const char *in[] = {tpath("t1.txt"), tpath("t2.txt")};
    char tr[256], va[256];
    snprintf(tr, sizeof tr, "%s", tpath("tr.bin"));
    snprintf(va, sizeof va, "%s", tpath("va.bin"));

    /* 10% = 100 bytes; the cut at 900 is right after a newline (byte 899) */
    CHECK_STATUS(pz_tokenize_bytes(in, 2, tr, va, 0.1), PZ_OK, NULL);
    size_t nt, nv;
    char *st = read_byte_shard(tr, &nt), *sv = read_byte_shard(va, &nv);
    CHECK(st && sv && nt == 900 && nv == 100, "10%%: %zu + %zu bytes, want 900 + 100", nt, nv);
    if (st && sv) {
        CHECK(memcmp(st, text, 900) == 0 && memcmp(sv, text + 900, 100) == 0, "10%%: bytes differ from the input");
        CHECK((unsigned char)st[5] == 0xff, "byte 0xff became token %d", st[5]);
    }
    free(st); free(sv);

    /* 13.5% = 135 bytes: cut 865 moves back to 860, just after the newline */
    CHECK_STATUS(pz_tokenize_bytes(in, 2, tr, va, 0.135), PZ_OK, NULL);
    st = read_byte_shard(tr, &nt);
    sv = read_byte_shard(va, &nv);
    CHECK(nt == 860 && nv == 140, "13.5%%: %zu + %zu bytes, want 860 + 140", nt, nv);
    if (sv) CHECK(sv[0] == 'a' && st[nt - 1] == '\n', "13.5%%: the cut is not after a newline");
    free(st); free(sv);

    /* inputs concatenate in the order given, not sorted */
    const char *rev[] = {tpath("t2.txt"), tpath("t1.txt")};
    CHECK_STATUS(pz_tokenize_bytes(rev, 2, tr, NULL, 0.0), PZ_OK, NULL);
    st = read_byte_shard(tr, &nt);
    CHECK(nt == 1000, "%zu bytes, want 1000", nt);
    if (st)
        CHECK(memcmp(st, text + 300, 700) == 0 && memcmp(st + 700, text, 300) == 0, "inputs not in the order given");
    free(st);

    /* a newline more than 4 KiB before the cut is not used: 10000 bytes with
     * a single newline at 100, 10% -> the cut stays at exactly 9000 */
    char *big = malloc(10000);
    memset(big, 'x', 10000);
    big[100] = '\n';
    write_raw(tpath("far.txt"), big, 10000);
    const char *far[] = {tpath("far.txt")};
    CHECK_STATUS(pz_tokenize_bytes(far, 1, tr, va, 0.1), PZ_OK, NULL);
    st = read_byte_shard(tr, &nt);
    free(st);
    CHECK(nt == 9000, "far newline: cut at %zu, want 9000", nt);
    /* ...but one 4096 bytes before is (the newline is byte 4904, cut 4905) */
    big[100] = 'x';
    big[9000 - 4096] = '\n';
    write_raw(tpath("far.txt"), big, 10000);
    CHECK_STATUS(pz_tokenize_bytes(far, 1, tr, va, 0.1), PZ_OK, NULL);
    st = read_byte_shard(tr, &nt);
    free(st);
    CHECK(nt == 9000 - 4096 + 1, "newline 4096 bytes back: cut at %zu, want 4905", nt);
    free(big);

    /* errors */
    const char *missing[] = {tpath("t1.txt"), tpath("nope.txt")};
    CHECK_STATUS(pz_tokenize_bytes(missing, 2, tr, va, 0.1), PZ_ERR_IO, "nope.txt");
    const char *dir[] = {tmpdir};
    CHECK_STATUS(pz_tokenize_bytes(dir, 1, tr, va, 0.1), PZ_ERR_IO, "directory");
    write_text(tpath("empty.txt"), "");
    const char *empty[] = {tpath("empty.txt"), tpath("empty.txt")};
    CHECK_STATUS(pz_tokenize_bytes(empty, 2, tr, NULL, 0.0), PZ_ERR_SHAPE, "empty");
    write_text(tpath("tiny.txt"), "hello");
    const char *tiny[] = {tpath("tiny.txt")};
    CHECK_STATUS(pz_tokenize_bytes(tiny, 1, tr, va, 0.1), PZ_ERR_SHAPE, "empty validation");
    CHECK_STATUS(pz_tokenize_bytes(in, 2, tr, va, 1.0), PZ_ERR_ARG, NULL);
    CHECK_STATUS(pz_tokenize_bytes(in, 2, tr, va, -0.1), PZ_ERR_ARG, NULL);
    CHECK_STATUS(pz_tokenize_bytes(in, 2, tr, va, 0.0), PZ_ERR_ARG, NULL);
    CHECK_STATUS(pz_tokenize_bytes(in, 2, tr, NULL, 0.1), PZ_ERR_ARG, NULL);
    CHECK_STATUS(pz_tokenize_bytes(in, 0, tr, va, 0.1), PZ_ERR_ARG, NULL);
    /* more than 2^31-1 bytes: a sparse 2 GiB file costs no disk, and the size
     * check happens before anything is read */
    FILE *f = fopen(tpath("huge.txt"), "wb");
    CHECK(f != NULL, "cannot create huge.txt");
    if (f) {
        CHECK(ftruncate(fileno(f), (off_t)1 << 31) == 0, "cannot make huge.txt 2 GiB");
        fclose(f);
        const char *huge[] = {tpath("huge.txt")};
        CHECK_STATUS(pz_tokenize_bytes(huge, 1, tr, va, 0.1), PZ_ERR_SHAPE, "huge.txt");
    }
    /* the failures above did not clobber the last good output */
    st = read_byte_shard(tr, &nt);
    free(st);
    CHECK(nt == 9000 - 4096 + 1, "failed calls clobbered the output: %zu bytes", nt);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pz_test_data_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }

    test_round_trip();
    test_sample_ids();
    test_unshuffled();
    test_batch_divides();
    test_shuffle();
    test_shuffle_uniform();
    test_malformed();
    test_tokenizer();

    /* leftovers named *.tmp.* would mean an atomic write leaked its temporary */
    char cmd_pattern[128];
    snprintf(cmd_pattern, sizeof cmd_pattern, "%s/*.tmp.*", tmpdir);
    pz_dataset d;
    CHECK_STATUS(pz_dataset_open(&d, cmd_pattern, 1, 256), PZ_ERR_IO, "no file matches");

    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_summary("test_data");
}
