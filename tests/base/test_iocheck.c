/* test_iocheck.c: base/io/iocheck.c, the outputs of a command checked before it
 * starts (issue 24): an output that is an input (by name, through a symbolic
 * link, through a hard link), two outputs on one file, outputs that are
 * devices or of the wrong kind, directories that are missing, under a
 * regular file or not writable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/io/iocheck.h"
#include "tests/check.h"

static char dir[] = "/tmp/pz_iocheck_XXXXXX";

static char *at(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void touch(const char *path) {
    FILE *f = fopen(path, "w");
    CHECK(f && fputs("x", f) >= 0 && fclose(f) == 0, "cannot write %s", path);
}

/* one output against one input */
static pz_status pair(pz_io_kind out_kind, const char *out, const char *in) {
    pz_io_set io = {0};
    pz_io_add(&io, PZ_IO_IN, "--data", in);
    pz_io_add(&io, out_kind, "--save", out);
    pz_status st = pz_io_check(&io);
    pz_io_free(&io);
    return st;
}

static pz_status one(pz_io_kind kind, const char *flag, const char *path) {
    pz_io_set io = {0};
    pz_io_add(&io, kind, flag, path);
    pz_status st = pz_io_check(&io);
    pz_io_free(&io);
    return st;
}

static void test_inputs(void) {
    touch(at("d.bin"));
    CHECK(symlink("d.bin", at("sym.bin")) == 0, "symlink");
    CHECK(link(at("d.bin"), at("hard.bin")) == 0, "link");
    CHECK(mkdir(at("sub"), 0755) == 0, "mkdir");
    CHECK_STATUS(pair(PZ_IO_OUT_FILE, at("d.bin"), at("d.bin")), PZ_ERR_ARG, "is the same file as --data");
    CHECK_STATUS(pair(PZ_IO_OUT_FILE, at("sub/../d.bin"), at("d.bin")), PZ_ERR_ARG, "the output would replace");
    CHECK_STATUS(pair(PZ_IO_OUT_FILE, at("sym.bin"), at("d.bin")), PZ_ERR_ARG, "sym.bin is the same file");
    CHECK_STATUS(pair(PZ_IO_OUT_FILE, at("d.bin"), at("sym.bin")), PZ_ERR_ARG, "is the same file as --data");
    CHECK_STATUS(pair(PZ_IO_OUT_FILE, at("hard.bin"), at("d.bin")), PZ_ERR_ARG, "hard.bin is the same file");
    CHECK_STATUS(pair(PZ_IO_OUT_DIR, at("sub/"), at("sub")), PZ_ERR_ARG, "is the same file as --data");
    /* an output that does not exist yet cannot be an input; another file is fine */
    CHECK_STATUS(pair(PZ_IO_OUT_FILE, at("new.bin"), at("d.bin")), PZ_OK, NULL);
    touch(at("other.bin"));
    CHECK_STATUS(pair(PZ_IO_OUT_FILE, at("other.bin"), at("d.bin")), PZ_OK, NULL);
    CHECK_STATUS(pair(PZ_IO_OUT_FILE, at("new.bin"), at("missing.bin")), PZ_OK, NULL);
    /* two outputs on one name, existing or not */
    pz_io_set io = {0};
    pz_io_add(&io, PZ_IO_OUT_FILE, "--out", at("v.bin"));
    pz_io_add(&io, PZ_IO_OUT_FILE, "--val-out", at("sub/../v.bin"));
    CHECK_STATUS(pz_io_check(&io), PZ_ERR_ARG, "name the same file: one output would replace the other");
    pz_io_free(&io);
    pz_io_free(&io);   /* safe on a freed (zeroed) set */
}

static void test_places(void) {
    /* devices: not a file to replace, not a directory */
    CHECK_STATUS(one(PZ_IO_OUT_FILE, "--trace", "/dev/null"), PZ_ERR_IO,
                 "--trace /dev/null is a device, not a regular file");
    CHECK_STATUS(one(PZ_IO_OUT_DIR, "--checkpoint-dir", "/dev/null"), PZ_ERR_IO,
                 "--checkpoint-dir /dev/null is a device, not a directory");
    /* a directory where a file goes, a file where a directory goes */
    CHECK_STATUS(one(PZ_IO_OUT_FILE, "--trace", at("sub")), PZ_ERR_IO, "is a directory, where a file is written");
    CHECK_STATUS(one(PZ_IO_OUT_DIR, "--checkpoint-dir", at("d.bin")), PZ_ERR_IO, "is a regular file, not a directory");
    /* under a regular file, under a missing directory */
    CHECK_STATUS(one(PZ_IO_OUT_DIR, "--checkpoint-dir", at("d.bin/ck")), PZ_ERR_IO, "Not a directory");
    CHECK_STATUS(one(PZ_IO_OUT_FILE, "--metrics", at("d.bin/m.jsonl")), PZ_ERR_IO, "--metrics");
    CHECK_STATUS(one(PZ_IO_OUT_DIR, "--dump-dir", "/missing/sub"), PZ_ERR_IO,
                 "--dump-dir /missing/sub: cannot be created: directory /missing: No such file");
    CHECK_STATUS(one(PZ_IO_OUT_FILE, "--trace", "/missing/t.json"), PZ_ERR_IO, "--trace /missing/t.json");
    /* what can be written or created */
    CHECK_STATUS(one(PZ_IO_OUT_DIR, "--checkpoint-dir", at("ck")), PZ_OK, NULL);
    CHECK_STATUS(one(PZ_IO_OUT_DIR, "--checkpoint-dir", at("sub/")), PZ_OK, NULL);
    CHECK_STATUS(one(PZ_IO_OUT_FILE, "--trace", at("t.json")), PZ_OK, NULL);
    CHECK_STATUS(one(PZ_IO_OUT_FILE, "--save", at("d.bin")), PZ_OK, NULL);   /* replaced: no input */
    /* a file in a directory the same command creates first (--save DIR/) */
    pz_io_set io = {0};
    pz_io_add(&io, PZ_IO_OUT_DIR, "--save", at("model/"));
    pz_io_add(&io, PZ_IO_OUT_FILE, "--save", at("model/model.safetensors"));
    CHECK_STATUS(pz_io_check(&io), PZ_OK, NULL);
    pz_io_free(&io);
    /* as train names them: pz_path_join("model2/", name) keeps both slashes */
    pz_io_add(&io, PZ_IO_OUT_DIR, "--save", at("model2/"));
    pz_io_add(&io, PZ_IO_OUT_FILE, "--save", at("model2//model.safetensors"));
    CHECK_STATUS(pz_io_check(&io), PZ_OK, NULL);
    pz_io_free(&io);
    CHECK_STATUS(one(PZ_IO_OUT_FILE, "--save", at("model/model.safetensors")), PZ_ERR_IO, "No such file");
}

/* A directory this process may not write: as root every mode bit is
 * writable, so the check runs in a child that dropped to user nobody, on a
 * directory root owns (0755); else on a directory of mode 0555. */
static void test_not_writable(void) {
    CHECK(mkdir(at("ro"), 0755) == 0, "mkdir ro");
    if (geteuid() != 0) CHECK(chmod(at("ro"), 0555) == 0, "chmod");
    CHECK(chmod(dir, 0755) == 0, "chmod the test directory");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
        checks = failures = 0;
        CHECK_STATUS(one(PZ_IO_OUT_DIR, "--checkpoint-dir", at("ro")), PZ_ERR_IO,
                     "--checkpoint-dir " /* the path */);
        CHECK_STATUS(one(PZ_IO_OUT_DIR, "--checkpoint-dir", at("ro")), PZ_ERR_IO, "directory not writable");
        CHECK_STATUS(one(PZ_IO_OUT_DIR, "--dump-dir", at("ro/sub")), PZ_ERR_IO, "cannot be created");
        CHECK_STATUS(one(PZ_IO_OUT_FILE, "--save", at("ro/m.safetensors")), PZ_ERR_IO, "is not writable");
        fflush(stdout);
        _exit(failures ? 1 : 0);
    }
    int ws = 0;
    CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid, "fork");
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 3) {
        printf("note: cannot become user nobody: the not-writable cases were not run\n");
        return;
    }
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the not-writable checks failed (status %d)", ws);
    checks += 4;
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_inputs();
    test_places();
    test_not_writable();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
    return check_summary("iocheck");
}
