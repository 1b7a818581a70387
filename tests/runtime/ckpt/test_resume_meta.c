/* test_resume_meta.c: a checkpoint's manifest and shard metadata
 * (runtime/ckpt/resume_meta.c): what they accept, and that each bad field is
 * refused with a message naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/ckpt/job.h"
#include "runtime/ckpt/resume.h"
#include "runtime/ckpt/resume_meta.h"
#include "tests/check.h"

static pz_status manifest(const char *text, pz_manifest *m) { return pz_manifest_parse(text, strlen(text), "m", m); }

/* a format-2 manifest of desc's job, with `flags` as its "job_flags" and
 * job (NULL: desc's id) */
static pz_status manifest2(const char *flags, const char *desc, const char *job, pz_manifest *m) {
    char hex[17], text[2048];
    pz_job_hex(pz_job_id(desc), hex);
    snprintf(text, sizeof text, "{\"format\": \"%s\", \"step\": 6, \"stages\": 2, \"job\": \"%s\", "
             "\"job_flags\": %s}", PZ_RESUME_FORMAT, job ? job : hex, flags);
    return manifest(text, m);
}

static void test_manifest_job(void) {
    pz_manifest m;
    const char *desc = "model\tL=2 NH=2\n--lr\t0.001\n--compress\tfwd=\"q\"\n";
    CHECK_STATUS(manifest2("{\"model\": \"L=2 NH=2\", \"--lr\": \"0.001\", \"--compress\": \"fwd=\\\"q\\\"\"}", desc, NULL, &m),
                 PZ_OK, NULL);
    CHECK(m.version == 2 && m.desc && !strcmp(m.desc, desc) && m.job == pz_job_id(desc), "version %d desc [%s]",
          m.version, m.desc ? m.desc : "");
    pz_manifest_free(&m);
    CHECK_STATUS(manifest2("{\"model\": \"L=2 NH=2\", \"--lr\": \"0.002\", \"--compress\": \"fwd=\\\"q\\\"\"}", desc, NULL, &m),
                 PZ_ERR_FORMAT, "is not the id of its \"job_flags\"");
    CHECK_STATUS(manifest2("{\"model\": \"L=2\"}", desc, "0123456789ABCDEF", &m), PZ_ERR_FORMAT, "16 lower-case hex");
    CHECK_STATUS(manifest2("{\"model\": 2}", desc, NULL, &m), PZ_ERR_FORMAT, "must have a string value");
    CHECK_STATUS(manifest2("{\"model\": \"a\\tb\"}", desc, NULL, &m), PZ_ERR_FORMAT, "control byte");
    CHECK_STATUS(manifest2("{}", desc, NULL, &m), PZ_ERR_FORMAT, "\"job_flags\" is empty");
    CHECK_STATUS(manifest2("[1]", desc, NULL, &m), PZ_ERR_FORMAT, "must be an object");
    CHECK_STATUS(manifest2("{\"a\": \"1\", \"a\": \"1\"}", desc, NULL, &m), PZ_ERR_FORMAT, "duplicate key");
}

/* a job's description and comparison (runtime/ckpt/job.c) */
static void test_job(void) {
    const char *fp = "model\tL=2\n--seed\t1\n--lr\t0.001\n--steps\t10\n--resume\tauto\n--val-every\t5\n"
                     "--data\t2 shards\n--data shard 0\t100 bytes, sampled hash 1\n--data shard 1\t200 bytes\n";
    char *d = pz_job_desc(fp);
    CHECK(!strcmp(d, "model\tL=2\n--seed\t1\n--lr\t0.001\n--steps\t10\n--data\t2 shards; shard 0 100 bytes, "
                     "sampled hash 1; shard 1 200 bytes\n"), "desc [%s]", d);
    char msg[512];
    CHECK(pz_job_compare(d, d, msg, sizeof msg) == 0 && !msg[0], "equal: [%s]", msg);
    char *other = pz_job_desc("model\tL=2\n--seed\t99\n--lr\t0.002\n--steps\t10\n--data\t2 shards\n");
    CHECK(pz_job_compare(d, other, msg, sizeof msg) == 2 && strstr(msg, "--seed is 1 here, 99 there") == msg &&
          strstr(msg, "--lr is 0.001 here, 0.002 there"), "seed: [%s]", msg);
    free(other);
    other = pz_job_desc("model\tL=2\n--seed\t1\n--lr\t0.002\n--steps\t20\n--resume\t(none)\n--data\t2 shards\n"
                        "--data shard 0\t100 bytes, sampled hash 1\n--data shard 1\t200 bytes\n--stages\t2\n");
    CHECK(pz_job_compare(d, other, msg, sizeof msg) == 1 && strstr(msg, "--stages is (none) here, 2 there"),
          "lr, steps, stages: [%s]", msg);
    CHECK(pz_job_id(d) != pz_job_id(other), "ids");
    free(other);
    free(d);
    /* --dp-reduce is kept as a number and named in the message (it said "is 2 here, 1 there") */
    d = pz_job_desc("--replicas\t2\n--dp-reduce\t1\n");
    other = pz_job_desc("--replicas\t3\n--dp-reduce\t2\n");
    CHECK(pz_job_compare(other, d, msg, sizeof msg) == 2 && strstr(msg, "--dp-reduce is twophase here, allgather there"),
          "dp-reduce: [%s]", msg);
    free(other);
    free(d);
    /* a long value is hashed, so a description stays small */
    char big[1200] = "--data\t";
    memset(big + 7, 'x', 1000);
    big[1007] = 0;
    d = pz_job_desc(big);
    CHECK(strlen(d) < 100 && strstr(d, "hash "), "long value [%s]", d);
    free(d);
    uint64_t id;
    char hex[17];
    pz_job_hex(0x0123456789abcdefull, hex);
    CHECK(!strcmp(hex, "0123456789abcdef") && pz_job_parse_hex(hex, &id) && id == 0x0123456789abcdefull, "hex");
    CHECK(!pz_job_parse_hex("0123456789abcde", &id) && !pz_job_parse_hex("0123456789abcdeg", &id), "bad hex");
}

static void test_manifest(void) {
    pz_manifest m;
    CHECK_STATUS(manifest("{\"format\": \"pipezip-checkpoint-1\", \"step\": 40, \"stages\": 3}\n", &m), PZ_OK, NULL);
    CHECK(m.step == 40 && m.stages == 3 && m.version == 1 && !m.desc, "step %d stages %d version %d", m.step, m.stages,
          m.version);
    CHECK_STATUS(manifest("{\"stages\": 1, \"extra\": [1, 2], \"step\": 0, \"format\": \"pipezip-checkpoint-1\"}", &m),
                 PZ_OK, NULL);
    CHECK_STATUS(manifest("{\"format\": \"pipezip-checkpoint-1\", \"step\": 40}", &m), PZ_ERR_FORMAT, "no \"stages\"");
    CHECK_STATUS(manifest("{\"format\": \"pipezip-checkpoint-3\", \"step\": 4, \"stages\": 2}", &m), PZ_ERR_FORMAT,
                 "expected 'pipezip-checkpoint-2'");
    CHECK_STATUS(manifest("{\"format\": \"pipezip-checkpoint-2\", \"step\": 4, \"stages\": 2}", &m), PZ_ERR_FORMAT,
                 "no \"job\"");
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
    test_manifest_job();
    char big[PZ_RESUME_MANIFEST_MAX + 2];
    memset(big, ' ', sizeof big);
    big[sizeof big - 1] = 0;
    CHECK_STATUS(manifest(big, &m), PZ_ERR_FORMAT, "more than a manifest has");
}

/* a one-tensor shard with meta, parsed back */
static pz_status shard_job(const char *rank, const char *stages, const char *epoch, const char *first, const char *job,
                           const char *crc, pz_shard_meta *sm, uint32_t *crc_out) {
    char path[] = "/tmp/test_resume_meta_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return PZ_ERR_IO;
    close(fd);
    const float x[2] = {1, 2};
    pz_st_write_tensor t = {"params/wte", PZ_ST_F32, 1, {2}, x, 0};
    pz_st_meta meta[] = {
        {"format", PZ_RESUME_FORMAT}, {"step", "7"},      {"rank", rank},   {"stages", stages},
        {"block_first", first},       {"block_end", "3"}, {"numel", "2"},   {"optim_t", "7"},
        {"loader_epoch", epoch},      {"loader_batch", "1"}, {"job", job}, {"crc32c:params/wte", crc},
    };
    pz_st_file f;
    pz_status st = pz_st_write(path, &t, 1, meta, 12);
    if (st == PZ_OK) st = pz_st_open(&f, path);
    if (st == PZ_OK) {
        st = pz_shard_meta_get(&f, path, sm);
        if (st == PZ_OK && crc_out) st = pz_shard_tensor_crc(&f, path, "params/wte", crc_out);
        pz_st_close(&f);
    }
    unlink(path);
    return st;
}

static pz_status shard(const char *rank, const char *stages, const char *epoch, const char *first, pz_shard_meta *sm) {
    return shard_job(rank, stages, epoch, first, "00000000000000ab", "0badf00d", sm, NULL);
}

static void test_shard_meta(void) {
    pz_shard_meta sm;
    CHECK_STATUS(shard("1", "2", "0", "0", &sm), PZ_OK, NULL);   /* (format 2: job and CRC below) */
    CHECK(sm.rank == 1 && sm.stages == 2 && sm.step == 7 && sm.block_end == 3 && sm.loader_batch == 1, "values");
    CHECK_STATUS(shard("1", "2", "-1", "0", &sm), PZ_OK, NULL);
    CHECK_STATUS(shard("2", "2", "0", "0", &sm), PZ_ERR_FORMAT, "rank 2 of 2 stages");
    CHECK_STATUS(shard("0", "2", "0", "4", &sm), PZ_ERR_FORMAT, "blocks [4, 3)");
    CHECK_STATUS(shard("0", "2", "-2", "0", &sm), PZ_ERR_FORMAT, "\"loader_epoch\" is '-2'");
    CHECK_STATUS(shard("x", "2", "0", "0", &sm), PZ_ERR_FORMAT, "\"rank\" is 'x'");
    CHECK_STATUS(shard("0", "99999", "0", "0", &sm), PZ_ERR_FORMAT, "\"stages\"");
    uint32_t crc = 0;
    CHECK_STATUS(shard_job("0", "2", "0", "0", "00000000000000ab", "0badf00d", &sm, &crc), PZ_OK, NULL);
    CHECK(sm.job == 0xab && crc == 0x0badf00d, "job %llx crc %08x", (unsigned long long)sm.job, (unsigned)crc);
    CHECK_STATUS(shard_job("0", "2", "0", "0", "ab", "0badf00d", &sm, NULL), PZ_ERR_FORMAT, "\"job\"");
    CHECK_STATUS(shard_job("0", "2", "0", "0", "00000000000000ab", "0BADF00D", &sm, &crc), PZ_ERR_FORMAT,
                 "\"crc32c:params/wte\" is '0BADF00D'");
    CHECK_STATUS(shard_job("0", "2", "0", "0", "00000000000000ab", "badf00d", &sm, &crc), PZ_ERR_FORMAT,
                 "not 8 lower-case hex digits");
}

/* the names pruning may remove (runtime/ckpt/resume.c) */
static void test_own_files(void) {
    static const char *const own[] = {"manifest.json", "rank-0.safetensors", "rank-12.codecs", "rank-3.auto",
                                      "rank-1.safetensors.tmp.4242", "manifest.json.tmp.7",
                                      "rank-0.dpef0", "rank-2.dpef17.tmp.9"};
    static const char *const other[] = {"notes.txt", "rank-.safetensors", "rank-1.safetensors.bak", "rank-x.auto",
                                        "manifest.json.tmp.", "manifest.json.tmp.1a", "rank-12345.codecs", ".hidden",
                                        "rank-0.dpef", "rank-0.dpefx", "rank-0.dpef1234"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) CHECK(pz_resume_is_own_file(own[i]), "%s", own[i]);
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) CHECK(!pz_resume_is_own_file(other[i]), "%s", other[i]);
}

/* the checkpoint directory's lock (runtime/ckpt/lock.c): a second holder is
 * refused, naming the first; a rank whose run does not hold it is refused */
static void test_lock(void) {
    char dir[] = "/tmp/test_resume_lock_XXXXXX";
    if (!mkdtemp(dir)) return;
    pz_ckpt_job a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.lock_fd = b.lock_fd = -1;
    a.token = 0x1111;
    b.token = 0x2222;
    pz_job_hex(0xaaaa, a.hex);
    pz_job_hex(0xbbbb, b.hex);
    CHECK_STATUS(pz_ckpt_lock(dir, &a), PZ_OK, NULL);
    CHECK_STATUS(pz_ckpt_lock_check(dir, &a), PZ_OK, NULL);
    CHECK_STATUS(pz_ckpt_lock_check(dir, &b), PZ_ERR_ARG, "is not held by this run's rank 0");
    char want[64];
    snprintf(want, sizeof want, "pid %ld on host", (long)getpid());
    CHECK_STATUS(pz_ckpt_lock(dir, &b), PZ_ERR_ARG, want);   /* flock: another open file, the same process */
    CHECK_STATUS(pz_ckpt_lock(dir, &b), PZ_ERR_ARG, "job 000000000000aaaa");
    pz_ckpt_job_free(&a);   /* released */
    CHECK_STATUS(pz_ckpt_lock(dir, &b), PZ_OK, NULL);
    CHECK_STATUS(pz_ckpt_lock_check(dir, &b), PZ_OK, NULL);
    pz_ckpt_job_free(&b);
    pz_ckpt_job z;   /* free is safe on a zeroed one */
    memset(&z, 0, sizeof z);
    pz_ckpt_job_free(&z);
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, PZ_JOB_LOCK_NAME);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    test_manifest();
    test_shard_meta();
    test_job();
    test_own_files();
    test_lock();
    return check_summary("resume_meta");
}
