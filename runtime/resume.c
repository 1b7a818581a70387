/* resume.c: see resume.h. */
#include "runtime/resume.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/mem.h"
#include "base/safetensors.h"

#define STEP_DIR_FMT "step-%08d"
#define STEP_MAX 99999999

static char *step_dir(const char *dir, int step) {
    char name[32];
    snprintf(name, sizeof name, STEP_DIR_FMT, step);
    return pz_path_join(dir, name);
}

static char *shard_path(const char *dir, int step, int rank) {
    char *sd = step_dir(dir, step), name[32];
    snprintf(name, sizeof name, "rank-%d.safetensors", rank);
    char *p = pz_path_join(sd, name);
    free(sd);
    return p;
}

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

pz_status pz_resume_write_shard(const char *dir, int step, int rank, int world, const pz_stage *s,
                                const pz_optim *o, const pz_loader *l) {
    if (step < 0 || step > STEP_MAX) return pz_fail(PZ_ERR_ARG, "checkpoint: step %d out of range", step);
    pz_status st = make_dir(dir);
    char *sd = step_dir(dir, step), *path = shard_path(dir, step, rank);
    if (st == PZ_OK) st = make_dir(sd);
    size_t n = s->params.numel;
    float *host = NULL;
    if (st == PZ_OK) {
        /* parameters and moments live in backend memory: one host copy of each */
        host = xmalloc(3 * n * sizeof(float));
        s->be->to_host(host, s->param_mem, n * sizeof(float));
        s->be->to_host(host + n, o->m, n * sizeof(float));
        s->be->to_host(host + 2 * n, o->v, n * sizeof(float));
        pz_st_write_tensor ts[3] = {
            {"params", PZ_ST_F32, 1, {n}, host, 0},
            {"adam_m", PZ_ST_F32, 1, {n}, host + n, 0},
            {"adam_v", PZ_ST_F32, 1, {n}, host + 2 * n, 0},
        };
        char v_step[24], v_rank[16], v_world[16], v_l0[16], v_l1[16], v_numel[32], v_t[16], v_epoch[16], v_batch[32];
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
        pz_st_meta meta[] = {
            {"format", PZ_RESUME_FORMAT}, {"step", v_step},   {"rank", v_rank},   {"stages", v_world},
            {"block_first", v_l0},        {"block_end", v_l1}, {"numel", v_numel}, {"optim_t", v_t},
            {"loader_epoch", v_epoch},    {"loader_batch", v_batch},
        };
        st = pz_st_write(path, ts, 3, meta, (int)(sizeof meta / sizeof meta[0]));
        if (st == PZ_OK) sync_dir(sd);
    }
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

/* Removes a step directory and the files in it (shards, manifest, temporaries). */
static void remove_step(const char *dir, int step) {
    char *sd = step_dir(dir, step);
    DIR *d = opendir(sd);
    if (d) {
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char *p = pz_path_join(sd, e->d_name);
            unlink(p);
            free(p);
        }
        closedir(d);
    }
    rmdir(sd);
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

pz_status pz_resume_commit(const char *dir, int step, int world, int keep) {
    char *sd = step_dir(dir, step), *mpath = pz_path_join(sd, "manifest.json");
    pz_atomic_file af;
    pz_status st = pz_atomic_open(&af, mpath);
    if (st == PZ_OK) {
        fprintf(af.f, "{\"format\": \"%s\", \"step\": %d, \"stages\": %d}\n", PZ_RESUME_FORMAT, step, world);
        st = pz_atomic_commit(&af);
    }
    if (st == PZ_OK) sync_dir(sd);
    free(sd);
    free(mpath);
    if (st != PZ_OK) return st;
    /* keep the newest `keep` complete checkpoints; drop older ones and any
     * incomplete directory older than this one (a run killed mid-write) */
    int n;
    int *steps = list_steps(dir, &n, &st);
    if (!steps) return st;
    int kept = 0;
    for (int i = n - 1; i >= 0; i--) {
        if (steps[i] > step) continue;   /* not ours to judge */
        if (is_complete(dir, steps[i]) && kept < keep) {
            kept++;
            continue;
        }
        remove_step(dir, steps[i]);
    }
    free(steps);
    sync_dir(dir);
    return PZ_OK;
}

pz_status pz_resume_find(const char *dir, int allow_missing, int *step) {
    *step = -1;
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (errno == ENOENT && allow_missing) return PZ_OK;
        return pz_fail(PZ_ERR_IO, "--resume %s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode)) return pz_fail(PZ_ERR_ARG, "--resume %s: not a directory", dir);
    int n;
    pz_status st;
    int *steps = list_steps(dir, &n, &st);
    if (!steps) return st;
    for (int i = n - 1; i >= 0 && *step < 0; i--) {
        if (!is_complete(dir, steps[i])) continue;
        /* the manifest names its step: a renamed directory is not trusted */
        char *sd = step_dir(dir, steps[i]), *mpath = pz_path_join(sd, "manifest.json");
        uint8_t *text = NULL;
        size_t len = 0;
        if (pz_read_file(mpath, &text, &len) == PZ_OK) {
            char want[64];
            snprintf(want, sizeof want, "\"step\": %d,", steps[i]);
            if (len < 4096 && memmem(text, len, want, strlen(want)) && memmem(text, len, PZ_RESUME_FORMAT, 20))
                *step = steps[i];
        }
        free(text);
        free(sd);
        free(mpath);
    }
    free(steps);
    return PZ_OK;
}

/* An integer metadata value of f, or an error naming the file and key. */
static pz_status meta_long(const pz_st_file *f, const char *path, const char *key, long lo, long hi, long *out) {
    const char *v = pz_st_meta_get(f, key);
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || errno || x < lo || x > hi)
        return pz_fail(PZ_ERR_FORMAT, "checkpoint %s: metadata \"%s\" is %s%s%s, not an integer in [%ld, %ld]", path,
                       key, v ? "'" : "missing", v ? v : "", v ? "'" : "", lo, hi);
    *out = x;
    return PZ_OK;
}

pz_status pz_resume_read_shard(const char *dir, int step, int rank, int world, pz_stage *s, pz_optim *o,
                               pz_loader *l) {
    char *path = shard_path(dir, step, rank);
    pz_st_file f;
    memset(&f, 0, sizeof f);
    float *host = NULL;
    pz_status st = pz_st_open(&f, path);
    if (st != PZ_OK) goto out;
    const char *fmt = pz_st_meta_get(&f, "format");
    if (!fmt || strcmp(fmt, PZ_RESUME_FORMAT) != 0) {
        st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s: format '%s', expected '%s'", path, fmt ? fmt : "(none)",
                     PZ_RESUME_FORMAT);
        goto out;
    }
    long v_step, v_rank, v_world, l0, l1, numel, t, epoch, batch;
    if ((st = meta_long(&f, path, "step", 0, STEP_MAX, &v_step)) != PZ_OK ||
        (st = meta_long(&f, path, "rank", 0, 4095, &v_rank)) != PZ_OK ||
        (st = meta_long(&f, path, "stages", 1, 4096, &v_world)) != PZ_OK ||
        (st = meta_long(&f, path, "block_first", 0, 1 << 20, &l0)) != PZ_OK ||
        (st = meta_long(&f, path, "block_end", 0, 1 << 20, &l1)) != PZ_OK ||
        (st = meta_long(&f, path, "numel", 0, 1L << 40, &numel)) != PZ_OK ||
        (st = meta_long(&f, path, "optim_t", 0, 1L << 30, &t)) != PZ_OK ||
        (st = meta_long(&f, path, "loader_epoch", -1, 1L << 30, &epoch)) != PZ_OK ||
        (st = meta_long(&f, path, "loader_batch", 0, 1L << 40, &batch)) != PZ_OK)
        goto out;
    if (v_step != step || v_rank != rank || v_world != world || l0 != s->range.l0 || l1 != s->range.l1 ||
        (size_t)numel != s->params.numel) {
        st = pz_fail(PZ_ERR_ARG,
                     "checkpoint %s holds step %ld of rank %ld of %ld stages, blocks [%ld, %ld), %ld parameters; this "
                     "run is rank %d of %d stages, blocks [%d, %d), %zu parameters (resuming with another stage "
                     "count, --split or model is not supported yet: use the checkpoint's)",
                     path, v_step, v_rank, v_world, l0, l1, numel, rank, world, s->range.l0, s->range.l1,
                     s->params.numel);
        goto out;
    }
    const char *names[3] = {"params", "adam_m", "adam_v"};
    float *dst[3] = {s->param_mem, o->m, o->v};
    size_t n = s->params.numel;
    host = xmalloc(n * sizeof(float) + 1);
    for (int k = 0; k < 3; k++) {
        const pz_st_tensor *ts = pz_st_find(&f, names[k]);
        if (!ts || ts->dtype != PZ_ST_F32 || ts->numel != n || ts->end - ts->begin != n * sizeof(float)) {
            st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s: tensor \"%s\" missing or not F32 of %zu elements", path,
                         names[k], n);
            goto out;
        }
        memcpy(host, ts->data, n * sizeof(float));   /* the map may be unaligned */
        s->be->from_host(dst[k], host, n * sizeof(float));
    }
    o->t = (int)t;
    if (l && l->d) {
        if (epoch < 0) {
            st = pz_fail(PZ_ERR_FORMAT, "checkpoint %s: rank %d reads data but its shard has no loader position",
                         path, rank);
            goto out;
        }
        st = pz_loader_seek(l, (int)epoch, (size_t)batch);
    }
out:
    free(host);
    pz_st_close(&f);
    free(path);
    return st;
}
