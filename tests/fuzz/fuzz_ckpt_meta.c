/* fuzz_ckpt_meta.c: libFuzzer entry for what a checkpoint says about itself
 * (runtime/ckpt/resume_meta.c): the manifest's JSON and a shard's safetensors
 * metadata, both read back from a directory that may hold anything.
 *
 * Input: one byte (even: the rest is a manifest; odd: the rest is a whole
 * safetensors image whose metadata is checked as a shard's, with each
 * tensor's recorded CRC-32C). Aborts when a parse succeeds with a value
 * outside the ranges resume_meta.h promises, or a format-2 manifest whose
 * job is not the id of its description.
 *
 * clang: built as fuzz_ckpt_meta with -fsanitize=fuzzer (tests/meson.build).
 * With FUZZ_REPLAY_MAIN (any compiler) this file is also the replay program
 * fuzz_ckpt_meta_replay (tests/fuzz/replay/fuzz_driver.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/job.h"
#include "runtime/ckpt/resume_meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!(data[0] & 1)) {
        pz_manifest m;
        if (pz_manifest_parse((const char *)data + 1, size - 1, "fuzz", &m) == PZ_OK) {
            if (m.step < 0 || m.step > PZ_RESUME_STEP_MAX || m.stages < 1 || m.stages > 4096) abort();
            if (m.version == 2 && (!m.desc || pz_job_id(m.desc) != m.job || strlen(m.desc) >= PZ_JOB_DESC_MAX)) abort();
            if (m.version != 2 && (m.version != 1 || m.desc)) abort();
            pz_manifest_free(&m);
        } else if (m.desc) {
            abort();   /* a failed parse frees what it made */
        }
        return 0;
    }
    pz_st_file f;
    if (pz_st_parse(&f, data + 1, size - 1, "fuzz") == PZ_OK) {
        pz_shard_meta sm;
        if (pz_shard_meta_get(&f, "fuzz", &sm) == PZ_OK &&
            (sm.rank < 0 || sm.rank >= sm.stages || sm.block_first > sm.block_end || sm.loader_epoch < -1 ||
             sm.step < 0 || sm.optim_t < 0 || sm.loader_batch < 0))
            abort();
        for (int i = 0; i < f.ntensors; i++) {
            uint32_t crc = 0;
            (void)pz_shard_tensor_crc(&f, "fuzz", f.tensors[i].name, &crc);
        }
    }
    pz_st_close(&f);
    return 0;
}

#ifdef FUZZ_REPLAY_MAIN
#include <stdio.h>
#include <unistd.h>

#include "base/io/file.h"
#include "base/mem.h"
#include "tests/fuzz/replay/fuzz_driver.h"

static fuzz_image text_seed(const char *text) {
    size_t n = strlen(text);
    uint8_t *b = xmalloc(n + 1);
    b[0] = 0;
    memcpy(b + 1, text, n);
    return (fuzz_image){b, n + 1};
}

/* a shard as pz_resume_write_shard writes it (one small tensor) */
static fuzz_image shard_seed(const char *rank, const char *epoch) {
    char path[] = "/tmp/fuzz_ckpt_meta_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) pz_die("mkstemp");
    close(fd);
    const float x[4] = {1, 2, 3, 4};
    pz_st_write_tensor t = {"params/wte", PZ_ST_F32, 2, {2, 2}, x, 0};
    pz_st_meta meta[] = {
        {"format", PZ_RESUME_FORMAT}, {"step", "12"},        {"rank", rank},   {"stages", "2"},
        {"block_first", "0"},         {"block_end", "3"},     {"numel", "4"},  {"optim_t", "12"},
        {"loader_epoch", epoch},      {"loader_batch", "5"},  {"job", "0123456789abcdef"},
        {"crc32c:params/wte", "1a2b3c4d"},
    };
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (pz_st_write(path, &t, 1, meta, 12) != PZ_OK || pz_read_file(path, &bytes, &len) != PZ_OK)
        pz_die("fuzz_ckpt_meta: %s", pz_last_error());
    unlink(path);
    uint8_t *b = xmalloc(len + 1);
    b[0] = 1;
    memcpy(b + 1, bytes, len);
    free(bytes);
    return (fuzz_image){b, len + 1};
}

/* a format-2 manifest as pz_resume_commit writes it */
static fuzz_image manifest2_seed(void) {
    const char *desc = "model\tL=2 NH=4 C=96 V=256 maxT=64\n--seed\t1\n--lr\t0.0003\n--compress\tedge 0-1 fwd=q4,bwd=q8\n";
    char hex[17], text[1024];
    pz_job_hex(pz_job_id(desc), hex);
    snprintf(text, sizeof text, "{\"format\": \"%s\", \"step\": 4, \"stages\": 2, \"job\": \"%s\",\n \"job_flags\": {\n"
             "  \"model\": \"L=2 NH=4 C=96 V=256 maxT=64\",\n  \"--seed\": \"1\",\n  \"--lr\": \"0.0003\",\n"
             "  \"--compress\": \"edge 0-1 fwd=q4,bwd=q8\"}}\n", PZ_RESUME_FORMAT, hex);
    return text_seed(text);
}

static int make_seeds(fuzz_image *s) {
    int n = 0;
    s[n++] = manifest2_seed();
    s[n++] = text_seed("{\"format\": \"pipezip-checkpoint-1\", \"step\": 40, \"stages\": 2}\n");
    s[n++] = text_seed("{\"stages\": 4096, \"format\": \"pipezip-checkpoint-1\", \"step\": 0, \"x\": [1, {\"y\": null}]}");
    s[n++] = shard_seed("1", "0");
    s[n++] = shard_seed("0", "-1");
    return n;
}

static const char *const words[] = {"\"format\"", "\"step\"", "\"stages\"", "\"rank\"", "\"loader_epoch\"", ": ", ", ",
                                    "\"job\"", "\"job_flags\"", "crc32c:", "\"pipezip-checkpoint-2\"", "\\t", "ffffffff",
                                    "{", "}", "[", "]", "\"", "\\u0000", "-1", "1e9", "99999999", "0.5", "null"};

static void mutate(pz_rng *r, uint8_t *b, size_t *len, size_t cap) {
    size_t n = *len - 1;
    fuzz_mutate_words(r, b + 1, &n, cap - 1, words, (int)(sizeof words / sizeof words[0]));
    *len = n + 1;
}

int main(int argc, char **argv) {
    static const fuzz_target t = {"ckpt_meta", ".pzckm", 100000, 20261125, make_seeds, mutate, NULL};
    return fuzz_main(&t, argc, argv);
}
#endif
