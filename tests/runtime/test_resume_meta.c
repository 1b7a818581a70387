/* test_resume_meta.c: a checkpoint's manifest and shard metadata
 * (runtime/resume_meta.c): what they accept, and that each bad field is
 * refused with a message naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/resume_meta.h"
#include "tests/check.h"

static pz_status manifest(const char *text, pz_manifest *m) { return pz_manifest_parse(text, strlen(text), "m", m); }

static void test_manifest(void) {
    pz_manifest m;
    CHECK_STATUS(manifest("{\"format\": \"pipezip-checkpoint-1\", \"step\": 40, \"stages\": 3}\n", &m), PZ_OK, NULL);
    CHECK(m.step == 40 && m.stages == 3, "step %d stages %d", m.step, m.stages);
    CHECK_STATUS(manifest("{\"stages\": 1, \"extra\": [1, 2], \"step\": 0, \"format\": \"pipezip-checkpoint-1\"}", &m),
                 PZ_OK, NULL);
    CHECK_STATUS(manifest("{\"format\": \"pipezip-checkpoint-1\", \"step\": 40}", &m), PZ_ERR_FORMAT, "no \"stages\"");
    CHECK_STATUS(manifest("{\"format\": \"pipezip-checkpoint-2\", \"step\": 4, \"stages\": 2}", &m), PZ_ERR_FORMAT,
                 "expected 'pipezip-checkpoint-1'");
    CHECK_STATUS(manifest("{\"format\": \"pipezip-checkpoint-1\", \"step\": 4.5, \"stages\": 2}", &m), PZ_ERR_FORMAT,
                 "\"step\" must be an integer");
    CHECK_STATUS(manifest("{\"format\": \"pipezip-checkpoint-1\", \"step\": -1, \"stages\": 2}", &m), PZ_ERR_FORMAT,
                 "\"step\" must be an integer");
    CHECK_STATUS(manifest("{\"format\": \"pipezip-checkpoint-1\", \"step\": 4, \"stages\": 0}", &m), PZ_ERR_FORMAT,
                 "\"stages\" must be an integer in [1, 4096]");
    CHECK_STATUS(manifest("{\"format\": \"pipezip-checkpoint-1\", \"step\": 4, \"step\": 5, \"stages\": 2}", &m),
                 PZ_ERR_FORMAT, "duplicate key");
    CHECK_STATUS(manifest("{\"format\": \"pipezip-checkpoint-1\", \"step\": 4, \"stages\": 2} x", &m), PZ_ERR_FORMAT,
                 "bad JSON");
    CHECK_STATUS(manifest("{\"format\": 1, \"step\": 4, \"stages\": 2}", &m), PZ_ERR_FORMAT, "must be a string");
    /* the old reader found "\"stages\": " anywhere in the text */
    CHECK_STATUS(manifest("{\"format\": \"pipezip-checkpoint-1\", \"step\": 4, \"note\": \"\\\"stages\\\": 2\"}", &m),
                 PZ_ERR_FORMAT, "no \"stages\"");
    char big[PZ_RESUME_MANIFEST_MAX + 2];
    memset(big, ' ', sizeof big);
    big[sizeof big - 1] = 0;
    CHECK_STATUS(manifest(big, &m), PZ_ERR_FORMAT, "more than a manifest has");
}

/* a one-tensor shard with meta, parsed back */
static pz_status shard(const char *rank, const char *stages, const char *epoch, const char *first, pz_shard_meta *sm) {
    char path[] = "/tmp/test_resume_meta_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return PZ_ERR_IO;
    close(fd);
    const float x[2] = {1, 2};
    pz_st_write_tensor t = {"params/wte", PZ_ST_F32, 1, {2}, x, 0};
    pz_st_meta meta[] = {
        {"format", PZ_RESUME_FORMAT}, {"step", "7"},      {"rank", rank},   {"stages", stages},
        {"block_first", first},       {"block_end", "3"}, {"numel", "2"},   {"optim_t", "7"},
        {"loader_epoch", epoch},      {"loader_batch", "1"},
    };
    pz_st_file f;
    pz_status st = pz_st_write(path, &t, 1, meta, 10);
    if (st == PZ_OK) st = pz_st_open(&f, path);
    if (st == PZ_OK) {
        st = pz_shard_meta_get(&f, path, sm);
        pz_st_close(&f);
    }
    unlink(path);
    return st;
}

static void test_shard_meta(void) {
    pz_shard_meta sm;
    CHECK_STATUS(shard("1", "2", "0", "0", &sm), PZ_OK, NULL);
    CHECK(sm.rank == 1 && sm.stages == 2 && sm.step == 7 && sm.block_end == 3 && sm.loader_batch == 1, "values");
    CHECK_STATUS(shard("1", "2", "-1", "0", &sm), PZ_OK, NULL);
    CHECK_STATUS(shard("2", "2", "0", "0", &sm), PZ_ERR_FORMAT, "rank 2 of 2 stages");
    CHECK_STATUS(shard("0", "2", "0", "4", &sm), PZ_ERR_FORMAT, "blocks [4, 3)");
    CHECK_STATUS(shard("0", "2", "-2", "0", &sm), PZ_ERR_FORMAT, "\"loader_epoch\" is '-2'");
    CHECK_STATUS(shard("x", "2", "0", "0", &sm), PZ_ERR_FORMAT, "\"rank\" is 'x'");
    CHECK_STATUS(shard("0", "99999", "0", "0", &sm), PZ_ERR_FORMAT, "\"stages\"");
}

int main(void) {
    test_manifest();
    test_shard_meta();
    return check_summary("resume_meta");
}
