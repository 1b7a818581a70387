/* resume.c: see resume.h. */
#include "runtime/ckpt/resume.h"
#include "runtime/ckpt/resume_meta.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/crc32c.h"
#include "base/io/file.h"
#include "base/mem.h"
#include "base/formats/safetensors.h"

#define STEP_DIR_FMT "step-%08d"

static char *step_dir(const char *dir, int step) {
    char name[32];
    snprintf(name, sizeof name, STEP_DIR_FMT, step);
    return pz_path_join(dir, name);
}

/* "DIR/step-N/rank-R<ext>": a rank's shard (.safetensors) or codec state (.codecs) */
static char *rank_path(const char *dir, int step, int rank, const char *ext) {
    char *sd = step_dir(dir, step), name[48];
    snprintf(name, sizeof name, "rank-%d%s", rank, ext);
    char *p = pz_path_join(sd, name);
    free(sd);
    return p;
}

static char *shard_path(const char *dir, int step, int rank) { return rank_path(dir, step, rank, ".safetensors"); }
char *pz_resume_rank_path(const char *dir, int step, int rank, const char *ext) { return rank_path(dir, step, rank, ext); }

static pz_status make_dir(const char *path) {
    if (mkdir(path, 0777) == 0 || errno == EEXIST) return PZ_OK;
    return pz_fail(PZ_ERR_IO, "checkpoint: cannot create %s: %s", path, strerror(errno));
}

/* fsync a directory so that the names created in it are durable too */
static void sync_dir(const char *path) {
    DIR *d = opendir(path);
    if (!d) return;
    fsync(dirfd(d));
    closedir(d);
}

/* PIPEZIP_FAULT=nospace:STEP:RANK (tests): this rank's shard of STEP fails
 * as a full disk would fail it, after its step directory was made. */
static pz_status fault_nospace(const char *sd, int step, int rank) {
    const char *f = getenv("PIPEZIP_FAULT");
    int s, r;
    if (f && sscanf(f, "nospace:%d:%d", &s, &r) == 2 && s == step && r == rank)
        return pz_fail(PZ_ERR_IO, "checkpoint: cannot write into %s: %s (PIPEZIP_FAULT=%s)", sd, strerror(ENOSPC), f);
    return PZ_OK;
}

pz_status pz_resume_write_shard(const char *dir, int step, int rank, int world, const pz_stage *s,
                                const pz_optim *o, const pz_loader *l, const pz_ckpt_job *job) {
    if (step < 0 || step > PZ_RESUME_STEP_MAX) return pz_fail(PZ_ERR_ARG, "checkpoint: step %d out of range", step);
    /* the directory must still be this run's (job.h: the lock) */
    pz_status st = job->token ? pz_ckpt_lock_check(dir, job) : PZ_OK;
    if (st == PZ_OK) st = make_dir(dir);
    char *sd = step_dir(dir, step), *path = shard_path(dir, step, rank);
    if (st == PZ_OK) st = make_dir(sd);
    if (st == PZ_OK) st = fault_nospace(sd, step, rank);
    size_t n = s->params.numel;
    float *host = NULL;
    pz_st_write_tensor *ts = NULL;
    char(*names)[80] = NULL;
    char(*crcs)[2][96] = NULL;   /* "crc32c:NAME" and its value, per tensor */
    pz_st_meta *meta = NULL;
    if (st == PZ_OK) {
        /* parameters and moments live in backend memory: one host copy of each */
        host = xmalloc(3 * n * sizeof(float) + 1);
        s->be->to_host(host, s->param_mem, n * sizeof(float));
        s->be->to_host(host + n, o->m, n * sizeof(float));
        s->be->to_host(host + 2 * n, o->v, n * sizeof(float));
        /* one tensor per parameter and kind, by its HF name, so that another
         * stage layout can pick its blocks out of these shards */
        int nt = pz_gpt2_params_tensors(&s->params, NULL);
        pz_tensor_info *ti = xcalloc((size_t)nt + 1, sizeof *ti);
        pz_gpt2_params_tensors(&s->params, ti);
        ts = xcalloc((size_t)(3 * nt) + 1, sizeof *ts);
        names = xcalloc((size_t)(3 * nt) + 1, sizeof *names);
        static const char *const kinds[3] = {"params", "adam_m", "adam_v"};
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < nt; i++) {
                int j = k * nt + i;
                snprintf(names[j], sizeof names[j], "%s/%s", kinds[k], ti[i].name);
                ts[j] = (pz_st_write_tensor){names[j], PZ_ST_F32, 1, {ti[i].numel}, host + (size_t)k * n + ti[i].offset, 0};
            }
        free(ti);
        char v_step[24], v_rank[16], v_world[16], v_l0[16], v_l1[16], v_numel[32], v_t[16], v_epoch[16], v_batch[32];
        /* each tensor's CRC-32C, so that resume names a damaged one */
        crcs = xcalloc((size_t)(3 * nt) + 1, sizeof *crcs);
        meta = xcalloc((size_t)(3 * nt) + 16, sizeof *meta);
        for (int j = 0; j < 3 * nt; j++) {
            snprintf(crcs[j][0], sizeof crcs[j][0], "%s%s", PZ_SHARD_CRC_PREFIX, names[j]);
            snprintf(crcs[j][1], sizeof crcs[j][1], "%08x",
                     (unsigned)pz_crc32c(0, ts[j].data, (size_t)ts[j].shape[0] * sizeof(float)));
            meta[11 + j] = (pz_st_meta){crcs[j][0], crcs[j][1]};
        }
        snprintf(v_step, sizeof v_step, "%d", step);
        snprintf(v_rank, sizeof v_rank, "%d", rank);
        snprintf(v_world, sizeof v_world, "%d", world);
        snprintf(v_l0, sizeof v_l0, "%d", s->range.l0);
        snprintf(v_l1, sizeof v_l1, "%d", s->range.l1);
        snprintf(v_numel, sizeof v_numel, "%zu", n);
        snprintf(v_t, sizeof v_t, "%d", o->t);
        /* the loader's next batch; at the end of an epoch, the next epoch's first */
        int epoch = l && l->d ? l->epoch : -1;
        size_t batch = l && l->d ? l->pos / (size_t)l->B : 0;
        if (l && l->d && batch >= pz_loader_batches_per_epoch(l)) epoch++, batch = 0;
        snprintf(v_epoch, sizeof v_epoch, "%d", epoch);
        snprintf(v_batch, sizeof v_batch, "%zu", batch);
        const pz_st_meta head[11] = {
            {"format", PZ_RESUME_FORMAT}, {"step", v_step},   {"rank", v_rank},   {"stages", v_world},
            {"block_first", v_l0},        {"block_end", v_l1}, {"numel", v_numel}, {"optim_t", v_t},
            {"loader_epoch", v_epoch},    {"loader_batch", v_batch}, {"job", job->hex},
        };
        memcpy(meta, head, sizeof head);
        st = pz_st_write(path, ts, 3 * nt, meta, 11 + 3 * nt);
        if (st == PZ_OK) sync_dir(sd);
    }
    free(crcs);
    free(meta);
    free(ts);
    free(names);
    free(host);
    free(sd);
    free(path);
    return st;
}

/* Whether name is "step-NNNNNNNN"; its step in *step. */
static int parse_step_name(const char *name, int *step) {
    if (strncmp(name, "step-", 5) != 0 || strlen(name) != 13) return 0;
    int v = 0;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        v = v * 10 + (*p - '0');
    }
    *step = v;
    return 1;
}

static int is_complete(const char *dir, int step) {
    char *sd = step_dir(dir, step), *m = pz_path_join(sd, "manifest.json");
    int ok = pz_is_regular_file(m);
    free(sd);
    free(m);
    return ok;
}

/* Whether name is one of the files pipezip writes into a step directory:
 * manifest.json, rank-N.safetensors, rank-N.codecs, rank-N.auto, or the
 * temporary of one of them (NAME.tmp.PID, base/io/file.h). */
int pz_resume_is_own_file(const char *name) {
    char base[64];
    size_t n = strlen(name);
    const char *tmp = strstr(name, ".tmp.");
    if (tmp) {   /* only digits after ".tmp." */
        if (!tmp[5] || strspn(tmp + 5, "0123456789") != strlen(tmp + 5)) return 0;
        n = (size_t)(tmp - name);
    }
    if (n >= sizeof base) return 0;
    memcpy(base, name, n);
    base[n] = 0;
    if (strcmp(base, "manifest.json") == 0) return 1;
    if (strncmp(base, "rank-", 5) != 0) return 0;
    size_t d = strspn(base + 5, "0123456789");
    if (d == 0 || d > 4) return 0;
    const char *ext = base + 5 + d;
    if (!strncmp(ext, ".dpef", 5))   /* --dp-compress: a replica's error feedback, .dpefR */
        return ext[5] && strspn(ext + 5, "0123456789") == strlen(ext + 5) && strlen(ext + 5) <= 3;
    return !strcmp(ext, ".safetensors") || !strcmp(ext, ".codecs") || !strcmp(ext, ".auto");
}

/* Removes what pipezip wrote into a step directory, and the directory when
 * nothing else is left in it (a user's file keeps it, and is named). */
void pz_resume_remove_step(const char *dir, int step) {
    char *sd = step_dir(dir, step);
    DIR *d = opendir(sd);
    int others = 0;
    char other[256] = "";
    if (d) {
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            if (!pz_resume_is_own_file(e->d_name)) {
                if (!others++) snprintf(other, sizeof other, "%s", e->d_name);
                continue;
            }
            char *p = pz_path_join(sd, e->d_name);
            unlink(p);
            free(p);
        }
        closedir(d);
    }
    if (others)
        fprintf(stderr, "pipezip train: note: %s holds %d file%s pipezip did not write (%s): its checkpoint files "
                "were removed, the directory and those left\n", sd, others, others == 1 ? "" : "s", other);
    else rmdir(sd);
    free(sd);
}

/* The step directories in dir, ascending; *n of them. */
static int *list_steps(const char *dir, int *n, pz_status *st) {
    *n = 0;
    *st = PZ_OK;
    DIR *d = opendir(dir);
    if (!d) {
        *st = pz_fail(PZ_ERR_IO, "checkpoint directory %s: %s", dir, strerror(errno));
        return NULL;
    }
    int cap = 16, *v = xmalloc((size_t)cap * sizeof *v);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int s;
        if (!parse_step_name(e->d_name, &s)) continue;
        if (*n == cap) {
            int *w = xmalloc((size_t)(cap *= 2) * sizeof *v);
            memcpy(w, v, (size_t)*n * sizeof *v);
            free(v);
            v = w;
        }
        v[(*n)++] = s;
    }
    closedir(d);
    for (int i = 1; i < *n; i++)   /* insertion sort: a handful of entries */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            int t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v;
}

/* a JSON string of s (no control bytes in job descriptions: job.c) */
static void json_str(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\') fputc('\\', f);
        fputc(s[i], f);
    }
    fputc('"', f);
}

/* {"format": ..., "step": N, "stages": S, "job": "...", "job_flags": {...}} */
static void write_manifest(FILE *f, int step, int world, const pz_ckpt_job *job) {
    fprintf(f, "{\"format\": \"%s\", \"step\": %d, \"stages\": %d, \"job\": \"%s\",\n \"job_flags\": {",
            PZ_RESUME_FORMAT, step, world, job->hex);
    int first = 1;
    for (const char *p = job->desc ? job->desc : ""; *p;) {
        const char *nl = strchr(p, '\n'), *tab = strchr(p, '\t');
        if (!nl) nl = p + strlen(p);
        if (tab && tab < nl) {
            fputs(first ? "\n  " : ",\n  ", f);
            json_str(f, p, (size_t)(tab - p));
            fputs(": ", f);
            json_str(f, tab + 1, (size_t)(nl - tab - 1));
            first = 0;
        }
        p = *nl ? nl + 1 : nl;
    }
    fputs("}}\n", f);
}

/* A complete checkpoint's manifest, which must name `step`. */
static pz_status read_manifest(const char *dir, int step, pz_manifest *m) {
    char *sd = step_dir(dir, step), *mpath = pz_path_join(sd, "manifest.json");
    uint8_t *text = NULL;
    size_t len = 0;
    pz_status st = pz_read_file_max(mpath, PZ_RESUME_MANIFEST_MAX, &text, &len);
    if (st == PZ_OK) st = pz_manifest_parse((const char *)text, len, mpath, m);
    if (st == PZ_OK && m->step != step) {   /* a renamed directory is not trusted */
        st = pz_fail(PZ_ERR_FORMAT, "%s: says step %d, in the directory of step %d", mpath, m->step, step);
        pz_manifest_free(m);
    }
    free(text);
    free(sd);
    free(mpath);
    return st;
}

/* Whether step's directory is this job's to prune: a complete checkpoint of
 * the job, or an incomplete one whose shards (if any) are the job's. */
static int is_ours(const char *dir, int step, uint64_t job, int *complete) {
    *complete = is_complete(dir, step);
    if (*complete) {
        pz_manifest m;
        memset(&m, 0, sizeof m);
        int ours = read_manifest(dir, step, &m) == PZ_OK && m.version == 2 && m.job == job;
        pz_manifest_free(&m);
        return ours;
    }
    for (int r = 0; r < 4096; r++) {   /* a torn one: its shards tell */
        char *p = shard_path(dir, step, r);
        pz_st_file f;
        memset(&f, 0, sizeof f);
        int exists = access(p, F_OK) == 0, ok = 1;
        if (exists) {
            pz_shard_meta sm;
            ok = pz_st_open(&f, p) == PZ_OK && pz_shard_meta_get(&f, p, &sm) == PZ_OK && sm.job == job;
            pz_st_close(&f);
        }
        free(p);
        if (!exists) break;
        if (!ok) return 0;
    }
    return 1;
}

pz_status pz_resume_commit(const char *dir, int step, int world, int keep, const pz_ckpt_job *job) {
    char *sd = step_dir(dir, step), *mpath = pz_path_join(sd, "manifest.json");
    pz_atomic_file af;
    pz_status st = pz_atomic_open(&af, mpath);
    if (st == PZ_OK) {
        write_manifest(af.f, step, world, job);
        st = pz_atomic_commit(&af);
    }
    if (st == PZ_OK) sync_dir(sd);
    free(sd);
    free(mpath);
    if (st != PZ_OK) return st;
    /* keep the newest `keep` complete checkpoints of this job; drop its older
     * ones and any incomplete directory of it older than this one (a run
     * killed mid-write); other jobs' are not ours to judge */
    int n;
    int *steps = list_steps(dir, &n, &st);
    if (!steps) return st;
    int kept = 0;
    for (int i = n - 1; i >= 0; i--) {
        int complete;
        if (steps[i] > step || !is_ours(dir, steps[i], job->id, &complete)) continue;
        if (complete && kept < keep) {
            kept++;
            continue;
        }
        pz_resume_remove_step(dir, steps[i]);
    }
    free(steps);
    sync_dir(dir);
    return PZ_OK;
}

/* "DIR/step-N" of this job's newest complete checkpoint into out, or "" */
static void last_good(const char *dir, const pz_ckpt_job *job, char *out, size_t cap) {
    pz_ckpt_entry *es = NULL;
    int n = 0;
    out[0] = 0;
    if (pz_resume_scan(dir, 1, &es, &n) != PZ_OK) return;
    for (int i = 0; i < n && !out[0]; i++)
        if (es[i].version == 2 && es[i].job == job->id) {
            char *sd = step_dir(dir, es[i].step);
            snprintf(out, cap, "%s", sd);
            free(sd);
        }
    pz_resume_scan_free(es, n);
}

pz_status pz_resume_abandon(const char *dir, int step, int rank, const pz_ckpt_job *job, pz_status why) {
    if (why != PZ_OK)
        fprintf(stderr, "pipezip train: rank %d: warning: %s\n", rank < 0 ? 0 : rank, pz_last_error());
    char *sd = step_dir(dir, step);
    if (rank < 0) pz_resume_remove_step(dir, step);
    else {
        DIR *d = opendir(sd);
        char mine[32];
        int ml = snprintf(mine, sizeof mine, "rank-%d.", rank);
        for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
            /* this rank's files (and, on rank 0, the manifest's temporary) */
            int ours = pz_resume_is_own_file(e->d_name) &&
                       (strncmp(e->d_name, mine, (size_t)ml) == 0 || (rank == 0 && !strncmp(e->d_name, "manifest", 8)));
            if (!ours) continue;
            char *p = pz_path_join(sd, e->d_name);
            unlink(p);
            free(p);
        }
        if (d) closedir(d);
        rmdir(sd);   /* the last rank out removes it; a user's file keeps it */
    }
    if (rank <= 0) {
        char good[4200];
        last_good(dir, job, good, sizeof good);
        fprintf(stderr, "pipezip train: warning: no checkpoint of step %d (what was written of it is removed); the run "
                "goes on, --save at the end; the last good checkpoint is %s\n", step, good[0] ? good : "none yet");
    }
    free(sd);
    return PZ_OK;
}

pz_status pz_resume_note_last_good(pz_status st, const char *dir, const pz_ckpt_job *job) {
    if (st == PZ_OK || !dir) return st;
    char msg[1024], good[4200];
    snprintf(msg, sizeof msg, "%s", pz_last_error());
    last_good(dir, job, good, sizeof good);
    return pz_fail(st, "%s; the last good checkpoint is %s", msg, good[0] ? good : "none (nothing to resume from)");
}

pz_status pz_resume_final_lost(const char *dir, int step, const pz_ckpt_job *job) {
    pz_fail(PZ_ERR_IO, "the checkpoint of the last step, %d, could not be written (above) and there is no --save: "
            "the trained model is kept nowhere", step);
    return pz_resume_note_last_good(PZ_ERR_IO, dir, job);
}

pz_status pz_resume_scan(const char *dir, int allow_missing, pz_ckpt_entry **out, int *count) {
    *out = NULL;
    *count = 0;
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (errno == ENOENT && allow_missing) return PZ_OK;
        return pz_fail(PZ_ERR_IO, "checkpoint directory %s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode)) return pz_fail(PZ_ERR_ARG, "checkpoint directory %s: not a directory", dir);
    int n;
    pz_status st;
    int *steps = list_steps(dir, &n, &st);
    if (!steps) return st;
    pz_ckpt_entry *es = xcalloc((size_t)n + 1, sizeof *es);
    for (int i = n - 1; i >= 0; i--) {
        if (!is_complete(dir, steps[i])) continue;
        pz_manifest m;
        if (read_manifest(dir, steps[i], &m) != PZ_OK) {
            fprintf(stderr, "pipezip: warning: skipping the checkpoint of step %d: %s\n", steps[i], pz_last_error());
            continue;
        }
        es[*count] = (pz_ckpt_entry){steps[i], m.version, m.job, m.desc};
        (*count)++;
    }
    free(steps);
    *out = es;
    return PZ_OK;
}

void pz_resume_scan_free(pz_ckpt_entry *es, int n) {
    for (int i = 0; i < n; i++) free(es[i].desc);
    free(es);
}

pz_status pz_resume_read_shard(const char *dir, int step, int rank, int world, pz_stage *s, pz_optim *o,
                               pz_loader *l, int *same_layout) {
    *same_layout = 0;
    pz_manifest man;
    pz_status st = read_manifest(dir, step, &man);
    if (st != PZ_OK) return st;
    const int old = man.stages;
    const uint64_t job = man.job;
    pz_manifest_free(&man);
    if (man.version != 2)
        return pz_fail(PZ_ERR_FORMAT, "checkpoint %s of step %d: format '%s', written by an older pipezip (no job id, "
                       "no checksums); this one reads '%s' only: resume it with the pipezip that wrote it", dir, step,
                       PZ_RESUME_FORMAT_OLD, PZ_RESUME_FORMAT);
    /* every shard of the checkpoint (mapped, read on demand): with another
     * stage count or split, this stage's tensors come from several */
    pz_st_file *f = xcalloc((size_t)old, sizeof *f);
    char **paths = xcalloc((size_t)old, sizeof *paths);
    float *host = NULL;
    pz_tensor_info *ti = NULL;
    long t = -1, epoch = -1, batch = 0;
    int same = old == world;
    for (int r = 0; r < old && st == PZ_OK; r++) {
        paths[r] = shard_path(dir, step, r);
        if ((st = pz_st_open(&f[r], paths[r])) != PZ_OK) break;
        pz_shard_meta sm;
        if ((st = pz_shard_meta_get(&f[r], paths[r], &sm)) != PZ_OK) break;
        const long v_step = sm.step, v_rank = sm.rank, v_world = sm.stages, l0 = sm.block_first,
                   l1 = sm.block_end, v_t = sm.optim_t, v_epoch = sm.loader_epoch, v_batch = sm.loader_batch;
        if (sm.job != job) {   /* a step directory of two jobs' shards */
            st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s is of job %016llx, its manifest of job %016llx: not one job's "
                         "checkpoint", paths[r], (unsigned long long)sm.job, (unsigned long long)job);
            break;
        }
        if (v_step != step || v_rank != r || v_world != old || (t >= 0 && v_t != t)) {
            st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s says step %ld, rank %ld of %ld, optimizer step %ld: not shard "
                         "%d of the %d-stage checkpoint of step %d", paths[r], v_step, v_rank, v_world, v_t, r, old,
                         step);
            break;
        }
        t = v_t;
        if (v_epoch >= 0 && epoch < 0) epoch = v_epoch, batch = v_batch;
        if (r == rank && (l0 != s->range.l0 || l1 != s->range.l1)) same = 0;
    }
    if (st != PZ_OK) goto out;
    int nt = pz_gpt2_params_tensors(&s->params, NULL);
    ti = xcalloc((size_t)nt + 1, sizeof *ti);
    pz_gpt2_params_tensors(&s->params, ti);
    size_t n = s->params.numel;
    host = xmalloc(3 * n * sizeof(float) + 1);
    static const char *const kinds[3] = {"params", "adam_m", "adam_v"};
    for (int k = 0; k < 3 && st == PZ_OK; k++)
        for (int i = 0; i < nt && st == PZ_OK; i++) {
            char name[96];
            snprintf(name, sizeof name, "%s/%s", kinds[k], ti[i].name);
            const pz_st_tensor *x = NULL;
            int from = -1;
            /* this rank's own shard first (the same layout reads only it) */
            for (int q = 0; q < old && !x; q++) {
                int r = (rank + q) % old;
                if ((x = pz_st_find(&f[r], name)) != NULL) from = r;
            }
            if (!x) {
                st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s of step %d has no tensor \"%s\" in any of its %d shards "
                             "(another model?)", dir, step, name, old);
                break;
            }
            if (x->dtype != PZ_ST_F32 || x->numel != ti[i].numel || x->end - x->begin != ti[i].numel * sizeof(float)) {
                st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s: tensor \"%s\" has %llu elements, this model's has %zu "
                             "(another model?)", paths[from], name, (unsigned long long)x->numel, ti[i].numel);
                break;
            }
            uint32_t want, got = pz_crc32c(0, x->data, ti[i].numel * sizeof(float));
            if ((st = pz_shard_tensor_crc(&f[from], paths[from], name, &want)) != PZ_OK) break;
            if (got != want) {
                st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s: tensor \"%s\" is damaged: its CRC-32C is %08x, the shard "
                             "recorded %08x", paths[from], name, (unsigned)got, (unsigned)want);
                break;
            }
            memcpy(host + (size_t)k * n + ti[i].offset, x->data, ti[i].numel * sizeof(float));
        }
    if (st != PZ_OK) goto out;
    s->be->from_host(s->param_mem, host, n * sizeof(float));
    s->be->from_host(o->m, host + n, n * sizeof(float));
    s->be->from_host(o->v, host + 2 * n, n * sizeof(float));
    o->t = (int)t;
    if (l && l->d) {
        if (epoch < 0) {
            st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s of step %d: no shard holds a loader position", dir, step);
            goto out;
        }
        st = pz_loader_seek(l, (int)epoch, (size_t)batch);
    }
    *same_layout = same;
    if (st == PZ_OK && !same && rank == 0)
        fprintf(stderr, "pipezip train: the checkpoint has %d stage%s; its parameters and AdamW moments were "
                "re-partitioned by block onto this run's %d\n", old, old == 1 ? "" : "s", world);
out:
    for (int r = 0; r < old; r++) {
        pz_st_close(&f[r]);
        free(paths[r]);
    }
    PZ_FREE_ALL(f, paths, ti, host);
    return st;
}

/* ---- codec state ------------------------------------------------------------ */

#define CODECS_MAGIC "PZCK"

static char *codecs_path(const char *dir, int step, int rank) { return rank_path(dir, step, rank, ".codecs"); }

pz_status pz_resume_write_codecs(const char *dir, int step, int rank, const char *const *names, pz_codec *const *cs,
                                 int n) {
    char *path = codecs_path(dir, step, rank);
    pz_atomic_file af;
    pz_status st = pz_atomic_open(&af, path);
    if (st == PZ_OK) {
        uint8_t head[8];
        memcpy(head, CODECS_MAGIC, 4);
        pz_put_u32(head + 4, (uint32_t)n);
        fwrite(head, 1, 8, af.f);
        for (int i = 0; i < n && st == PZ_OK; i++) {
            uint8_t *blob = NULL;
            size_t len = 0;
            if ((st = pz_codec_state_save(cs[i], &blob, &len)) != PZ_OK) break;
            uint8_t h[12];
            uint32_t nl = (uint32_t)strlen(names[i]);
            pz_put_u32(h, nl);
            pz_put_u64(h + 4, len);
            fwrite(h, 1, 12, af.f);
            fwrite(names[i], 1, nl, af.f);
            fwrite(blob, 1, len, af.f);
            free(blob);
        }
        if (st == PZ_OK) st = pz_atomic_commit(&af);
        else pz_atomic_abort(&af);
    }
    free(path);
    return st;
}

pz_status pz_resume_read_codecs(const char *dir, int step, int rank, const char *const *names, pz_codec *const *cs,
                                int n) {
    char *path = codecs_path(dir, step, rank);
    uint8_t *data = NULL;
    size_t len = 0, at = 8;
    pz_status st = pz_read_file(path, &data, &len);
    if (st == PZ_OK && (len < 8 || memcmp(data, CODECS_MAGIC, 4) != 0))
        st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s: not a codec-state file", path);
    uint32_t count = st == PZ_OK ? pz_get_u32(data + 4) : 0;
    int *found = xcalloc((size_t)n + 1, sizeof *found);
    for (uint32_t e = 0; st == PZ_OK && e < count; e++) {
        if (len - at < 12) { st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s: truncated entry %u", path, e); break; }
        uint32_t nl = pz_get_u32(data + at);
        uint64_t bl = pz_get_u64(data + at + 4);
        at += 12;
        if (nl > 256 || nl > len - at || bl > len - at - nl) {
            st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s: entry %u runs past the end of the file", path, e);
            break;
        }
        const char *name = (const char *)data + at;
        const uint8_t *blob = data + at + nl;
        at += nl + (size_t)bl;
        int i = 0;
        while (i < n && !(strlen(names[i]) == nl && memcmp(names[i], name, nl) == 0)) i++;
        if (i == n) continue;   /* a codec this run does not have (no longer on this edge) */
        if ((st = pz_codec_state_load(cs[i], blob, (size_t)bl)) != PZ_OK) {
            char msg[600];
            snprintf(msg, sizeof msg, "%s", pz_last_error());
            st = pz_fail(st, "checkpoint %s, %s: %s", path, names[i], msg);
        }
        found[i] = 1;
    }
    if (st == PZ_OK && at != len) st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s: trailing bytes", path);
    for (int i = 0; st == PZ_OK && i < n; i++)
        if (!found[i] && pz_codec_has_state(cs[i]))
            st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s has no state for %s (%s)", path, names[i], pz_codec_spec(cs[i]));
    free(found);
    free(data);
    free(path);
    return st;
}

static char *side_path(const char *dir, int step, int g, const char *kind, int replica) {
    char ext[24];
    snprintf(ext, sizeof ext, ".%s%d", kind, replica);
    return pz_resume_rank_path(dir, step, g, ext);
}

pz_status pz_resume_write_side(const char *dir, int step, int g, const char *kind, int replica, const uint8_t *blob,
                               size_t len) {
    char *path = side_path(dir, step, g, kind, replica), *slash = strrchr(path, '/');
    pz_status st = PZ_OK;
    *slash = 0;
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        st = pz_fail(PZ_ERR_IO, "checkpoint: cannot create %s: %s", path, strerror(errno));
    *slash = '/';
    pz_atomic_file af;
    if (st == PZ_OK && (st = pz_atomic_open(&af, path)) == PZ_OK) {
        if (fwrite(blob, 1, len, af.f) == len) st = pz_atomic_commit(&af);
        else pz_atomic_abort(&af), st = pz_fail(PZ_ERR_IO, "checkpoint: cannot write %s", path);
    }
    free(path);
    return st;
}

pz_status pz_resume_read_side(const char *dir, int step, int g, const char *kind, int replica, const char *holds,
                              uint8_t **blob, size_t *len, char **path) {
    *path = side_path(dir, step, g, kind, replica);
    if (access(*path, F_OK) != 0)
        return pz_fail(PZ_ERR_ARG, "--resume: %s is missing: the checkpoint holds no %s for replica %d (written "
                       "without it, or with fewer replicas?)", *path, holds, replica);
    return pz_read_file(*path, blob, len);
}
