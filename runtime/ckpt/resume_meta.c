/* resume_meta.c: see resume_meta.h. */
#include "runtime/ckpt/resume_meta.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/formats/json.h"
#include "base/mem.h"
#include "runtime/ckpt/job.h"

typedef struct {
    pz_manifest *m;
    int have_format, have_step, have_stages, have_job, have_flags;
    char job_hex[24];
    size_t desc_n;   /* bytes of m->desc (PZ_JOB_DESC_MAX allocated) */
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

/* one member of "job_flags": a flag and its value, appended as a line of
 * the job's description (no tab, newline or control byte in either) */
static pz_status flag_key(pz_json *p, const char *key, void *ctx) {
    manifest_walk *w = ctx;
    char val[PZ_JOB_VALUE_MAX + 64];
    if (pz_json_peek(p) != '"') return pz_fail(PZ_ERR_FORMAT, "%s: job flag \"%s\" must have a string value", p->what, key);
    pz_status st = pz_json_string(p, val, sizeof val, NULL);
    if (st != PZ_OK) return st;
    for (const char *s = key; *s; s++)
        if ((unsigned char)*s < 0x20) return pz_fail(PZ_ERR_FORMAT, "%s: a job flag's name holds a control byte", p->what);
    for (const char *s = val; *s; s++)
        if ((unsigned char)*s < 0x20)
            return pz_fail(PZ_ERR_FORMAT, "%s: job flag \"%s\": its value holds a control byte", p->what, key);
    if (!*key || strlen(key) > 63) return pz_fail(PZ_ERR_FORMAT, "%s: a job flag's name must have 1 to 63 bytes", p->what);
    if (!w->m->desc) w->m->desc = xcalloc(PZ_JOB_DESC_MAX, 1);
    size_t need = strlen(key) + strlen(val) + 2;
    if (w->desc_n + need >= PZ_JOB_DESC_MAX)
        return pz_fail(PZ_ERR_FORMAT, "%s: \"job_flags\" longer than %d bytes", p->what, PZ_JOB_DESC_MAX);
    w->desc_n += (size_t)snprintf(w->m->desc + w->desc_n, PZ_JOB_DESC_MAX - w->desc_n, "%s\t%s\n", key, val);
    return PZ_OK;
}

static pz_status manifest_key(pz_json *p, const char *key, void *ctx) {
    manifest_walk *w = ctx;
    if (strcmp(key, "format") == 0) {
        char fmt[64];
        if (pz_json_peek(p) != '"') return pz_fail(PZ_ERR_FORMAT, "%s: \"format\" must be a string", p->what);
        pz_status st = pz_json_string(p, fmt, sizeof fmt, NULL);
        if (st == PZ_OK && strcmp(fmt, PZ_RESUME_FORMAT) == 0) w->m->version = 2;
        else if (st == PZ_OK && strcmp(fmt, PZ_RESUME_FORMAT_OLD) == 0) w->m->version = 1;
        else if (st == PZ_OK)
            st = pz_fail(PZ_ERR_FORMAT, "%s: format '%s', expected '%s'", p->what, fmt, PZ_RESUME_FORMAT);
        w->have_format = 1;
        return st;
    }
    if (strcmp(key, "job") == 0) {
        if (pz_json_peek(p) != '"') return pz_fail(PZ_ERR_FORMAT, "%s: \"job\" must be a string", p->what);
        pz_status st = pz_json_string(p, w->job_hex, sizeof w->job_hex, NULL);
        if (st == PZ_OK && !pz_job_parse_hex(w->job_hex, &w->m->job))
            st = pz_fail(PZ_ERR_FORMAT, "%s: \"job\" must be 16 lower-case hex digits", p->what);
        w->have_job = 1;
        return st;
    }
    if (strcmp(key, "job_flags") == 0) {
        if (pz_json_peek(p) != '{') return pz_fail(PZ_ERR_FORMAT, "%s: \"job_flags\" must be an object", p->what);
        w->have_flags = 1;
        return pz_json_members(p, flag_key, w, 1);
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
    manifest_walk w;
    memset(&w, 0, sizeof w);
    w.m = m;
    pz_json p = pz_json_at(text, len, what);
    pz_status st = pz_json_object(&p, manifest_key, &w, 1);
    if (st == PZ_OK && (!w.have_format || !w.have_step || !w.have_stages))
        st = pz_fail(PZ_ERR_FORMAT, "%s: no \"%s\" in the manifest", what,
                     !w.have_format ? "format" : !w.have_step ? "step" : "stages");
    if (st == PZ_OK && m->version == 2 && (!w.have_job || !w.have_flags))
        st = pz_fail(PZ_ERR_FORMAT, "%s: no \"%s\" in the manifest", what, !w.have_job ? "job" : "job_flags");
    if (st == PZ_OK && m->version == 2 && !m->desc) st = pz_fail(PZ_ERR_FORMAT, "%s: \"job_flags\" is empty", what);
    if (st == PZ_OK && m->version == 2 && pz_job_id(m->desc) != m->job)
        st = pz_fail(PZ_ERR_FORMAT, "%s: \"job\" %s is not the id of its \"job_flags\" (edited?)", what, w.job_hex);
    if (st == PZ_OK && m->version != 2) {   /* an older format's job is unknown */
        free(m->desc);
        m->desc = NULL;
        m->job = 0;
    }
    if (st != PZ_OK) pz_manifest_free(m);
    return st;
}

void pz_manifest_free(pz_manifest *m) {
    free(m->desc);
    m->desc = NULL;
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
    if (fmt && strcmp(fmt, PZ_RESUME_FORMAT_OLD) == 0)
        return pz_fail(PZ_ERR_FORMAT, "checkpoint %s: format '%s', written by an older pipezip (no job id, no "
                       "checksums); this one reads '%s' only: resume it with the pipezip that wrote it", path, fmt,
                       PZ_RESUME_FORMAT);
    if (!fmt || strcmp(fmt, PZ_RESUME_FORMAT) != 0)
        return pz_fail(PZ_ERR_FORMAT, "checkpoint %s: format '%s', expected '%s'", path, fmt ? fmt : "(none)",
                       PZ_RESUME_FORMAT);
    if (!pz_job_parse_hex(pz_st_meta_get(f, "job"), &m->job))
        return pz_fail(PZ_ERR_FORMAT, "checkpoint %s: metadata \"job\" missing or not 16 lower-case hex digits", path);
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

pz_status pz_shard_tensor_crc(const pz_st_file *f, const char *path, const char *tensor, uint32_t *crc) {
    char key[160];
    if (snprintf(key, sizeof key, "%s%s", PZ_SHARD_CRC_PREFIX, tensor) >= (int)sizeof key)
        return pz_fail(PZ_ERR_FORMAT, "checkpoint %s: tensor name \"%.60s...\" too long", path, tensor);
    const char *v = pz_st_meta_get(f, key);
    uint32_t x = 0;
    int ok = v && strlen(v) == 8;
    for (int i = 0; ok && i < 8; i++) {
        char c = v[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) ok = 0;
        x = x << 4 | (uint32_t)(d & 15);
    }
    if (!ok)
        return pz_fail(PZ_ERR_FORMAT, "checkpoint %s: metadata \"%s\" is %s%s%s, not 8 lower-case hex digits", path,
                       key, v ? "'" : "missing", v ? v : "", v ? "'" : "");
    *crc = x;
    return PZ_OK;
}
