/* jobsecret.c: see jobsecret.h. */
#include "runtime/net/jobsecret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "runtime/net/bootmsg.h"

/* Trailing white space (a newline from echo or an editor) is not part of it. */
static void trim(pz_job_secret *s) {
    while (s->len > 0 && (s->key[s->len - 1] == '\n' || s->key[s->len - 1] == '\r' || s->key[s->len - 1] == ' ' ||
                          s->key[s->len - 1] == '\t'))
        s->len--;
}

static void warn_short(const pz_job_secret *s) {
    if (s->len < PZ_JOB_SECRET_MIN_GOOD)
        fprintf(stderr, "pipezip: warning: the job secret from %s has only %zu bytes; one that is guessed lets a "
                "stranger join (use e.g. `openssl rand -hex 32`)\n", s->source, s->len);
}

pz_status pz_job_secret_read_file(const char *path, pz_job_secret *s) {
    pz_job_secret_clear(s);
    snprintf(s->source, sizeof s->source, "--job-secret-file");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return pz_fail(PZ_ERR_IO, "--job-secret-file %s: %s", path, strerror(errno));
    struct stat sb;
    pz_status st = PZ_OK;
    if (fstat(fd, &sb) != 0) {
        st = pz_fail(PZ_ERR_IO, "--job-secret-file %s: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = pz_fail(PZ_ERR_ARG, "--job-secret-file %s is not a regular file", path);
    } else if (sb.st_mode & (S_IROTH | S_IWOTH)) {
        st = pz_fail(PZ_ERR_ARG, "--job-secret-file %s is %s by every user of this machine, so it is no secret: "
                     "chmod 600 %s", path, sb.st_mode & S_IROTH ? "readable" : "writable", path);
    } else if (sb.st_size == 0) {
        st = pz_fail(PZ_ERR_ARG, "--job-secret-file %s is empty", path);
    } else if (sb.st_size > PZ_JOB_SECRET_MAX) {
        st = pz_fail(PZ_ERR_ARG, "--job-secret-file %s has %lld bytes, at most %d expected (a secret, not a data file?)",
                     path, (long long)sb.st_size, PZ_JOB_SECRET_MAX);
    } else {
        /* read at most the bound plus one byte: a file that grew since fstat is refused too */
        uint8_t buf[PZ_JOB_SECRET_MAX + 1];
        size_t got = 0;
        for (;;) {
            ssize_t r = read(fd, buf + got, sizeof buf - got);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) { st = pz_fail(PZ_ERR_IO, "--job-secret-file %s: %s", path, strerror(errno)); break; }
            if (r == 0 || (got += (size_t)r) == sizeof buf) break;
        }
        if (st == PZ_OK && got > PZ_JOB_SECRET_MAX)
            st = pz_fail(PZ_ERR_ARG, "--job-secret-file %s has more than %d bytes", path, PZ_JOB_SECRET_MAX);
        if (st == PZ_OK) {
            memcpy(s->key, buf, got);
            s->len = got;
            trim(s);
            if (s->len == 0) st = pz_fail(PZ_ERR_ARG, "--job-secret-file %s holds only white space", path);
        }
        OPENSSL_cleanse(buf, sizeof buf);
    }
    close(fd);
    if (st != PZ_OK) pz_job_secret_clear(s);
    else warn_short(s);
    return st;
}

pz_status pz_job_secret_load(const char *file, pz_job_secret *s) {
    if (file) return pz_job_secret_read_file(file, s);
    pz_job_secret_clear(s);
    const char *v = getenv(PZ_JOB_SECRET_ENV);
    if (!v) return PZ_OK;
    size_t n = strlen(v);
    snprintf(s->source, sizeof s->source, "%s", PZ_JOB_SECRET_ENV);
    if (n > PZ_JOB_SECRET_MAX)
        return pz_fail(PZ_ERR_ARG, "%s has %zu bytes, at most %d allowed", PZ_JOB_SECRET_ENV, n, PZ_JOB_SECRET_MAX);
    memcpy(s->key, v, n);
    s->len = n;
    trim(s);
    if (s->len == 0)
        return pz_fail(PZ_ERR_ARG, "%s is set but empty (unset it to run without a secret)", PZ_JOB_SECRET_ENV);
    warn_short(s);
    return PZ_OK;
}

void pz_job_secret_make(char *out, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    uint8_t b[32];
    if (cap < 65) pz_die("pz_job_secret_make: buffer of %zu bytes", cap);
    pz_boot_random(b, sizeof b);
    for (size_t i = 0; i < sizeof b; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[64] = 0;
    OPENSSL_cleanse(b, sizeof b);
}

void pz_job_secret_clear(pz_job_secret *s) {
    OPENSSL_cleanse(s->key, sizeof s->key);
    s->len = 0;
    s->source[0] = 0;
}
