/* lock.c: the checkpoint directory's lock and the start-up check of whose
 * checkpoints it holds (job.h). */
#include "runtime/ckpt/job.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/io/file.h"
#include "base/mem.h"
#include "runtime/net/bootmsg.h"
#include "runtime/ckpt/resume.h"

/* the value after "name " on a line of the lock file's text, or "?" */
static void lock_field(const char *text, const char *name, char *out, size_t cap) {
    size_t nl = strlen(name);
    snprintf(out, cap, "?");
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, name, nl) == 0 && p[nl] == ' ') {
            size_t n = strcspn(p + nl + 1, "\n");
            if (n >= cap) n = cap - 1;
            memcpy(out, p + nl + 1, n);
            out[n] = 0;
            return;
        }
}

static char *read_lock_text(const char *path) {
    uint8_t *t = NULL;
    size_t n = 0;
    if (pz_read_file_max(path, 4096, &t, &n) != PZ_OK) return xstrdup("");
    char *s = xmalloc(n + 1);
    memcpy(s, t, n);
    s[n] = 0;
    free(t);
    return s;
}

pz_status pz_ckpt_lock(const char *dir, pz_ckpt_job *job) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return pz_fail(PZ_ERR_IO, "--checkpoint-dir %s: cannot create it: %s", dir, strerror(errno));
    char *path = pz_path_join(dir, PZ_JOB_LOCK_NAME);
    pz_status st = PZ_OK;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        st = pz_fail(PZ_ERR_IO, "--checkpoint-dir %s: cannot open its lock %s: %s", dir, path, strerror(errno));
        goto out;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char *text = read_lock_text(path), pid[32], host[128], jid[32];
        lock_field(text, "pid", pid, sizeof pid);
        lock_field(text, "host", host, sizeof host);
        lock_field(text, "job", jid, sizeof jid);
        free(text);
        close(fd);
        if (e == EWOULDBLOCK)
            st = pz_fail(PZ_ERR_ARG, "--checkpoint-dir %s is in use: another run (pid %s on host %s, job %s%s) holds "
                         "its lock %s; two runs must not write one checkpoint directory", dir, pid, host, jid,
                         strcmp(jid, job->hex) == 0 ? ", this same job" : "", path);
        else st = pz_fail(PZ_ERR_IO, "--checkpoint-dir %s: cannot lock %s: %s", dir, path, strerror(e));
        goto out;
    }
    char host[256] = "?", text[512];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    int n = snprintf(text, sizeof text, "pipezip checkpoint lock\njob %s\ntoken %016llx\npid %ld\nhost %s\n", job->hex,
                     (unsigned long long)job->token, (long)getpid(), host);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != (ssize_t)n || fsync(fd) != 0) {
        st = pz_fail(PZ_ERR_IO, "--checkpoint-dir %s: cannot write its lock %s: %s", dir, path, strerror(errno));
        close(fd);
        goto out;
    }
    job->lock_fd = fd;
out:
    free(path);
    return st;
}

pz_status pz_ckpt_lock_check(const char *dir, const pz_ckpt_job *job) {
    char *path = pz_path_join(dir, PZ_JOB_LOCK_NAME), *text = read_lock_text(path), tok[32], want[24], pid[32],
         host[128];
    lock_field(text, "token", tok, sizeof tok);
    lock_field(text, "pid", pid, sizeof pid);
    lock_field(text, "host", host, sizeof host);
    snprintf(want, sizeof want, "%016llx", (unsigned long long)job->token);
    pz_status st = PZ_OK;
    if (strcmp(tok, want) != 0)
        st = pz_fail(PZ_ERR_ARG, "--checkpoint-dir %s: its lock %s is not held by this run's rank 0 (it names pid %s on "
                     "host %s): another run writes there", dir, path, pid, host);
    free(text);
    free(path);
    return st;
}

void pz_ckpt_job_free(pz_ckpt_job *job) {
    if (job->lock_fd > 0) close(job->lock_fd);   /* closing releases the flock */
    job->lock_fd = -1;
    free(job->desc);
    job->desc = NULL;
}

/* Rank 0: the verdict on --checkpoint-dir's contents. A run that will not
 * resume from that directory (fresh, --resume auto with none of its own, or
 * --resume of another directory) must not write beside another job's
 * checkpoints: refused, naming the first such checkpoint and the flags. */
static pz_status check_dir(const pz_ckpt_opts *c, pz_ckpt_job *job) {
    const char *dir = c->dir;
    pz_ckpt_entry *es = NULL;
    int n = 0;
    pz_status st = pz_resume_scan(dir, 1, &es, &n);
    if (st != PZ_OK) return st;
    int foreign = -1;
    for (int i = 0; i < n; i++) {
        int own = es[i].version == 2 && es[i].job == job->id;
        if (own && job->newest_own < 0) job->newest_own = es[i].step;
        if (!own && foreign < 0) foreign = i;
    }
    int is_auto = c->resume && strcmp(c->resume, "auto") == 0;
    int resumes_here = c->resume && (is_auto ? job->newest_own >= 0 : pz_same_file(c->resume, dir));
    if (foreign >= 0 && !resumes_here) {
        const pz_ckpt_entry *f = &es[foreign];
        if (f->version != 2)
            st = pz_fail(PZ_ERR_ARG, "--checkpoint-dir %s holds the checkpoint of step %d in an older format (%s, "
                         "without a job id): which job wrote it cannot be told; move it away or give this run another "
                         "--checkpoint-dir", dir, f->step, PZ_RESUME_FORMAT_OLD);
        else {
            char diff[1024];
            pz_job_compare(job->desc, f->desc, diff, sizeof diff);
            char fh[17];
            pz_job_hex(f->job, fh);
            st = pz_fail(PZ_ERR_ARG, "--checkpoint-dir %s holds the checkpoint of step %d of another job (job %s; this "
                         "run is job %s): %s. Give this run another --checkpoint-dir or move those away; to continue "
                         "that job with another layout, --steps or learning rate, name it with --resume %s", dir,
                         f->step, fh, job->hex, diff, dir);
        }
    } else if (foreign >= 0 && is_auto) {
        fprintf(stderr, "pipezip train: note: %s also holds checkpoints of other jobs (step %d, ...): --resume auto "
                "takes this job's (%s) only, and pruning leaves the others\n", dir, es[foreign].step, job->hex);
    }
    pz_resume_scan_free(es, n);
    return st;
}

pz_status pz_ckpt_share_refusal(pz_transport *tp, int rank, int world, pz_status mine) {
    /* after the fingerprint's verdict (micro-batch 0 of the kind), so micro-batch 1 is free */
    const uint64_t tag = pz_tag(0, 0, 1, PZ_KIND_VERDICT);
    char msg[2048];
    pz_request *r = NULL;
    pz_status st = PZ_OK;
    if (!tp) return mine;
    if (rank == 0) {
        snprintf(msg, sizeof msg, "%s", pz_last_error());
        for (int q = 1; q < world && st == PZ_OK; q++) {
            st = pz_transport_send(tp, q, tag, msg, strlen(msg) + 1, "rank 0's refusal", &r);
            if (st == PZ_OK) st = pz_transport_wait(tp, r, NULL);
        }
        return mine != PZ_OK ? pz_fail(mine, "%s", msg) : mine;
    }
    size_t n = 0;
    st = pz_transport_recv(tp, 0, tag, msg, sizeof msg, "rank 0's refusal", &r);
    if (st == PZ_OK) st = pz_transport_wait(tp, r, &n);
    if (st != PZ_OK || n == 0 || msg[n - 1] != 0)
        return pz_fail(PZ_ERR_ARG, "rank %d: rank 0 refused the job (its message says why)", rank);
    return pz_fail(PZ_ERR_ARG, "rank %d: rank 0 refused the job: %s", rank, msg);
}

static int refused;   /* the verdict of pz_ckpt_job_start in this process */
int pz_ckpt_refused(void) { return refused; }

pz_status pz_ckpt_job_start(pz_transport *tp, const pz_ckpt_opts *c, int rank, int world, const char *fingerprint,
                            pz_ckpt_job *job) {
    memset(job, 0, sizeof *job);
    job->lock_fd = -1;
    job->newest_own = -1;
    pz_status st = PZ_OK;
    double v[9] = {0};   /* [0] refused, [1..4] the id, [5..8] the token, 16 bits each (exact in a double) */
    if (rank == 0) {
        job->desc = pz_job_desc(fingerprint);
        job->id = pz_job_id(job->desc);
        uint8_t r[8];
        pz_boot_random(r, sizeof r);
        for (int i = 0; i < 8; i++) job->token = job->token << 8 | r[i];
        job->token |= 1;   /* never 0: 0 is "no lock" */
        if (c->dir) {
            pz_job_hex(job->id, job->hex);
            st = pz_ckpt_lock(c->dir, job);
            if (st == PZ_OK) st = check_dir(c, job);
        }
        v[0] = st != PZ_OK;
        for (int i = 0; i < 4; i++) {
            v[1 + i] = (double)((job->id >> (16 * i)) & 0xffff);
            v[5 + i] = (double)((job->token >> (16 * i)) & 0xffff);
        }
    }
    pz_status st2 = tp ? pz_transport_allreduce_sum_f64(tp, v, 9) : PZ_OK;
    if (st2 != PZ_OK) return st != PZ_OK ? st : st2;
    if (v[0] > 0) {   /* every rank names the reason: the launcher may stop rank 0 before it prints */
        refused = 1;
        return pz_ckpt_share_refusal(tp, rank, world, st);
    }
    job->id = job->token = 0;
    for (int i = 0; i < 4; i++) {
        job->id |= (uint64_t)v[1 + i] << (16 * i);
        job->token |= (uint64_t)v[5 + i] << (16 * i);
    }
    pz_job_hex(job->id, job->hex);
    return PZ_OK;
}
