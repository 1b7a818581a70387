/* jobsecret.h: the shared secret by which the ranks of a job prove to each
 * other that they belong to it (runtime/net/bootmsg.h has the proof).
 *
 * Sources, first found wins: --job-secret-file FILE, then the environment
 * variable PIPEZIP_JOB_SECRET. The local launcher makes a random one per job
 * and hands it to its ranks in the environment, never in argv (ps shows
 * argv; /proc/PID/environ is readable only by the owner). The secret is the
 * bytes given, less trailing white space (a file written by `echo` or
 * `openssl rand -hex 32 > FILE` works as it is). */
#ifndef PZ_JOBSECRET_H
#define PZ_JOBSECRET_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define PZ_JOB_SECRET_ENV "PIPEZIP_JOB_SECRET"
#define PZ_JOB_SECRET_MAX 4096   /* bytes of the secret (and of its file) */
#define PZ_JOB_SECRET_MIN_GOOD 16 /* shorter ones work, with a warning */

typedef struct {
    uint8_t key[PZ_JOB_SECRET_MAX];
    size_t len;                 /* 0: no secret */
    char source[64];            /* "--job-secret-file" or PZ_JOB_SECRET_ENV, for messages */
} pz_job_secret;

/* Loads the secret: from `file` when not NULL (it must be a regular file,
 * not empty, at most PZ_JOB_SECRET_MAX bytes and not readable or writable by
 * others), else from the environment, else s->len = 0. A secret shorter
 * than PZ_JOB_SECRET_MIN_GOOD bytes is used with a warning on stderr. */
pz_status pz_job_secret_load(const char *file, pz_job_secret *s);
pz_status pz_job_secret_read_file(const char *path, pz_job_secret *s);

/* A fresh random secret as 64 hex digits and a NUL (cap >= 65). */
void pz_job_secret_make(char *out, size_t cap);

/* Overwrites the secret (memory that held it is cleared, not just freed). */
void pz_job_secret_clear(pz_job_secret *s);

#endif
