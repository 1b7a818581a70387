/* fuzz_replay.c: the safetensors/HF-JSON fuzz entry (fuzz_safetensors.c)
 * without libFuzzer, through tests/fuzz/replay/fuzz_driver.c:
 *
 *   fuzz_safetensors_replay FILE...     replay inputs (crash reproducers, corpus)
 *   fuzz_safetensors_replay --seed DIR  write seed inputs for a libFuzzer corpus
 *   fuzz_safetensors_replay [N]         mutation smoke test: N (default 20000)
 *                                       deterministic mutations of seed images
 * The smoke test is meant to run under ASan/UBSan in ordinary (gcc) builds. */
#include "stages/gpt2_checkpoint.h"
#include "base/io/file.h"
#include "base/mem.h"
#include "base/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fuzz/replay/fuzz_driver.h"

/* A small but complete GPT-2 file saved by the library, so mutations reach
 * the config derivation; plus a hand-written header with escapes and metadata. */
static int make_seeds(fuzz_image *seeds) {
    pz_gpt2_config c = {4, 3, 3, 2, 1, 2};
    pz_stage_range r = pz_whole_model(&c);
    float *mem = xcalloc(pz_stage_numel(&c, &r), sizeof(float));
    pz_gpt2_params p;
    pz_gpt2_params_bind(&p, &c, &r, mem);
    pz_gpt2_params_init(&p, 1);
    char path[] = "/tmp/pz_fuzz_seed_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) pz_die("mkstemp failed");
    close(fd);
    if (pz_ckpt_save_safetensors(path, &p) != PZ_OK || pz_read_file(path, &seeds[0].data, &seeds[0].len) != PZ_OK)
        pz_die("%s", pz_last_error());
    remove(path);
    pz_gpt2_params_unbind(&p);
    free(mem);

    const char *json = "{\"__metadata__\":{\"k\\u00e9\":\"v\\n\",\"n_head\":\"1\"},"
                       "\"a\\ud83d\\ude00\":{\"dtype\":\"BF16\",\"shape\":[2,1],\"data_offsets\":[0,4]},"
                       "\"z\":{\"dtype\":\"F4\",\"shape\":[0],\"data_offsets\":[4,4]}}  ";
    size_t jl = strlen(json);
    seeds[1].len = 8 + jl + 4;
    seeds[1].data = xcalloc(seeds[1].len, 1);
    uint64_t n = jl;
    memcpy(seeds[1].data, &n, 8);
    memcpy(seeds[1].data + 8, json, jl);
    return 2;
}

static void mutate(pz_rng *r, uint8_t *b, size_t *len, size_t cap) {
    static const char alphabet[] = "{}[]\":,0123456789-.eE \\u\"__metadata__F32BF16h.0.ln_1.weight";
    int k = 1 + (int)pz_rng_below(r, 4);
    for (int i = 0; i < k && *len > 0; i++) {
        uint64_t hn = 0;
        if (*len >= 8) memcpy(&hn, b, 8);
        size_t hend = *len < 8 ? *len : 8 + (hn < *len - 8 ? (size_t)hn : *len - 8);
        /* mostly inside the JSON header, where the parser lives */
        size_t at = hend > 8 && pz_rng_below(r, 8) ? 8 + (size_t)pz_rng_below(r, hend - 8)
                                                   : (size_t)pz_rng_below(r, *len);
        switch (pz_rng_below(r, 7)) {
        case 0: b[at] = (uint8_t)pz_rng_next(r); break;
        case 1: case 2: b[at] = (uint8_t)alphabet[pz_rng_below(r, sizeof alphabet - 1)]; break;
        case 3: { /* delete a run, keeping N in step half the time */
            size_t d = fuzz_delete_run(r, b, len, at);
            if (at >= 8 && at < hend && pz_rng_below(r, 2) && hn >= d) { hn -= d; memcpy(b, &hn, 8); }
            break;
        }
        case 4: { /* insert a byte */
            if (*len >= cap) break;
            fuzz_insert_byte(b, len, at, (uint8_t)alphabet[pz_rng_below(r, sizeof alphabet - 1)]);
            if (at >= 8 && at < hend && pz_rng_below(r, 2)) { hn++; memcpy(b, &hn, 8); }
            break;
        }
        case 5: *len = (size_t)pz_rng_below(r, *len + 1); break; /* truncate */
        case 6: if (*len >= 8) { /* nudge N */
                hn += (uint64_t)pz_rng_below(r, 17) - 8;
                memcpy(b, &hn, 8);
            }
            break;
        }
    }
}

int main(int argc, char **argv) {
    static const fuzz_target t = {"safetensors", ".safetensors", 20000, 20240326, make_seeds, mutate, NULL};
    return fuzz_main(&t, argc, argv);
}
