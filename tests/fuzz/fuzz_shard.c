/* fuzz_shard.c: libFuzzer entry for token shards (stages/data.c,
 * pz_shard_check): the llm.c header (magic, version, token count) and the
 * tokens, as mapped from a file anyone may hand to --data.
 *
 * Input: two bytes (the vocabulary size, 1..65536), then the file. The
 * file is copied to an aligned buffer, as mmap gives one. Aborts when a
 * shard is accepted with a count that disagrees with its length or a
 * token outside the vocabulary.
 *
 * clang: built as fuzz_shard with -fsanitize=fuzzer (tests/meson.build).
 * With FUZZ_REPLAY_MAIN (any compiler) this file is also the replay program
 * fuzz_shard_replay (tests/fuzz/replay/fuzz_driver.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stages/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const int vocab = 1 + (data[0] | data[1] << 8);
    const size_t len = size - 2;
    uint8_t *file = aligned_alloc(64, (len + 63) / 64 * 64 + 64);
    memcpy(file, data + 2, len);
    size_t n = 0;
    if (pz_shard_check(file, len, "fuzz", vocab, &n) == PZ_OK) {
        if (len != 1024 + 2 * n) abort();
        const uint16_t *tok = (const uint16_t *)(file + 1024);
        for (size_t i = 0; i < n; i++)
            if (tok[i] >= vocab) abort();
    }
    free(file);
    return 0;
}

#ifdef FUZZ_REPLAY_MAIN
#include "base/bytes.h"
#include "base/mem.h"
#include "tests/fuzz/replay/fuzz_driver.h"

static fuzz_image shard(int vocab, int ntok, int32_t magic, int32_t version) {
    size_t len = 2 + 1024 + 2 * (size_t)ntok;
    uint8_t *b = xcalloc(len, 1);
    b[0] = (uint8_t)((vocab - 1) & 255);
    b[1] = (uint8_t)((vocab - 1) >> 8);
    pz_put_u32(b + 2, (uint32_t)magic);
    pz_put_u32(b + 6, (uint32_t)version);
    pz_put_u32(b + 10, (uint32_t)ntok);
    for (int i = 0; i < ntok; i++) {
        uint16_t t = (uint16_t)((i * 37) % vocab);
        b[2 + 1024 + 2 * i] = (uint8_t)(t & 255);
        b[2 + 1024 + 2 * i + 1] = (uint8_t)(t >> 8);
    }
    return (fuzz_image){b, len};
}

static int make_seeds(fuzz_image *s) {
    int n = 0;
    s[n++] = shard(256, 40, PZ_SHARD_MAGIC, PZ_SHARD_VERSION);
    s[n++] = shard(50257, 17, PZ_SHARD_MAGIC, PZ_SHARD_VERSION);
    s[n++] = shard(65536, 0, PZ_SHARD_MAGIC, PZ_SHARD_VERSION);
    s[n++] = shard(256, 3, PZ_SHARD_MAGIC, 2);
    return n;
}

static void mutate(pz_rng *r, uint8_t *b, size_t *len, size_t cap) {
    switch (pz_rng_below(r, 4)) {
    case 0: {   /* the token count: nudged or extreme */
        if (*len < 14) break;
        uint32_t c = pz_get_u32(b + 10);
        pz_put_u32(b + 10, pz_rng_below(r, 3) == 0 ? (uint32_t)pz_rng_next(r) : c + (uint32_t)pz_rng_below(r, 5) - 2);
        break;
    }
    case 1:   /* a token */
        if (*len > 1026) b[1026 + pz_rng_below(r, *len - 1026)] = (uint8_t)pz_rng_next(r);
        break;
    default: {
        static const char *const words[] = {"\xff\xff", "\x7f", "\x01"};
        fuzz_mutate_words(r, b, len, cap, words, 3);
    }
    }
}

int main(int argc, char **argv) {
    static const fuzz_target t = {"shard", ".pzshard", 100000, 20261125, make_seeds, mutate, NULL};
    return fuzz_main(&t, argc, argv);
}
#endif
