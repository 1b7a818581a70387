/* resume_meta.c: see resume_meta.h. */
#include "runtime/resume_meta.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

typedef struct {
    pz_manifest *m;
    int have_format, have_step, have_stages;
} manifest_walk;

/* an integer JSON value in [lo, hi] */
static pz_status json_int(pz_json *p, const char *key, long lo, long hi, int *out) {
    double v;
    int is_int;
    pz_status st = pz_json_number(p, &v, &is_int);
    if (st != PZ_OK) return st;
    if (!is_int || v < (double)lo || v > (double)hi)
        return pz_fail(PZ_ERR_FORMAT, "%s: \"%s\" must be an integer in [%ld, %ld]", p->what, key, lo, hi);
    *out = (int)v;
    return PZ_OK;
}

static pz_status manifest_key(pz_json *p, const char *key, void *ctx) {
    manifest_walk *w = ctx;
    if (strcmp(key, "format") == 0) {
        char fmt[64];
        if (pz_json_peek(p) != '"') return pz_fail(PZ_ERR_FORMAT, "%s: \"format\" must be a string", p->what);
        pz_status st = pz_json_string(p, fmt, sizeof fmt, NULL);
        if (st == PZ_OK && strcmp(fmt, PZ_RESUME_FORMAT) != 0)
            st = pz_fail(PZ_ERR_FORMAT, "%s: format '%s', expected '%s'", p->what, fmt, PZ_RESUME_FORMAT);
        w->have_format = 1;
        return st;
    }
    if (strcmp(key, "step") == 0) {
        w->have_step = 1;
        return json_int(p, key, 0, PZ_RESUME_STEP_MAX, &w->m->step);
    }
    if (strcmp(key, "stages") == 0) {
        w->have_stages = 1;
        return json_int(p, key, 1, 4096, &w->m->stages);
    }
    return pz_json_skip(p);
}

pz_status pz_manifest_parse(const char *text, size_t len, const char *what, pz_manifest *m) {
    memset(m, 0, sizeof *m);
    if (len > PZ_RESUME_MANIFEST_MAX)
        return pz_fail(PZ_ERR_FORMAT, "%s: %zu bytes, more than a manifest has (%d)", what, len, PZ_RESUME_MANIFEST_MAX);
    manifest_walk w = {m, 0, 0, 0};
    pz_json p = pz_json_at(text, len, what);
    pz_status st = pz_json_object(&p, manifest_key, &w, 1);
    if (st != PZ_OK) return st;
    if (!w.have_format || !w.have_step || !w.have_stages)
        return pz_fail(PZ_ERR_FORMAT, "%s: no \"%s\" in the manifest", what,
                       !w.have_format ? "format" : !w.have_step ? "step" : "stages");
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

pz_status pz_shard_meta_get(const pz_st_file *f, const char *path, pz_shard_meta *m) {
    memset(m, 0, sizeof *m);
    const char *fmt = pz_st_meta_get(f, "format");
    if (!fmt || strcmp(fmt, PZ_RESUME_FORMAT) != 0)
        return pz_fail(PZ_ERR_FORMAT, "checkpoint %s: format '%s', expected '%s'", path, fmt ? fmt : "(none)",
                       PZ_RESUME_FORMAT);
    pz_status st;
    if ((st = meta_long(f, path, "step", 0, PZ_RESUME_STEP_MAX, &m->step)) != PZ_OK ||
        (st = meta_long(f, path, "rank", 0, 4095, &m->rank)) != PZ_OK ||
        (st = meta_long(f, path, "stages", 1, 4096, &m->stages)) != PZ_OK ||
        (st = meta_long(f, path, "block_first", 0, 1 << 20, &m->block_first)) != PZ_OK ||
        (st = meta_long(f, path, "block_end", 0, 1 << 20, &m->block_end)) != PZ_OK ||
        (st = meta_long(f, path, "optim_t", 0, 1L << 30, &m->optim_t)) != PZ_OK ||
        (st = meta_long(f, path, "loader_epoch", -1, 1L << 30, &m->loader_epoch)) != PZ_OK ||
        (st = meta_long(f, path, "loader_batch", 0, 1L << 40, &m->loader_batch)) != PZ_OK)
        return st;
    if (m->rank >= m->stages || m->block_first > m->block_end)
        return pz_fail(PZ_ERR_FORMAT, "checkpoint %s: rank %ld of %ld stages, blocks [%ld, %ld): inconsistent", path,
                       m->rank, m->stages, m->block_first, m->block_end);
    return PZ_OK;
}
