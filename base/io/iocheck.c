/* iocheck.c: see iocheck.h. */
#include "base/io/iocheck.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/io/file.h"
#include "base/mem.h"

void pz_io_add(pz_io_set *s, pz_io_kind kind, const char *flag, const char *path) {
    if (!path) return;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 8;
        s->v = realloc(s->v, (size_t)s->cap * sizeof *s->v);
        if (!s->v) pz_die("out of memory");
    }
    char *p = xstrdup(path);
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/') p[--len] = 0;   /* "out/" is the directory out */
    s->v[s->n++] = (pz_io_place){flag, p, kind};
}

void pz_io_free(pz_io_set *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i].path);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static const char *kind_of(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISCHR(m) || S_ISBLK(m) ? "a device" : S_ISFIFO(m) ? "a pipe"
         : S_ISSOCK(m) ? "a socket" : S_ISREG(m) ? "a regular file" : "not a plain file";
}

/* the directory a path's last name is in: malloc'ed. Repeated slashes
 * before the name belong to no name ("out//model.safetensors", which
 * pz_path_join makes of --save out/, is in "out", not "out/") */
static char *parent_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return xstrdup(".");
    while (slash > path && slash[-1] == '/') slash--;
    if (slash == path) return xstrdup("/");
    char *d = xstrdup(path);
    d[slash - path] = 0;
    return d;
}

static int is_out_dir(const pz_io_set *s, const char *dir) {
    for (int i = 0; i < s->n; i++)
        if (s->v[i].kind == PZ_IO_OUT_DIR && pz_same_file(s->v[i].path, dir)) return 1;
    return 0;
}

/* the directory that will hold a new name: there, a directory, writable */
static pz_status check_parent(const pz_io_place *o, const char *what) {
    char *dir = parent_of(o->path);
    struct stat sb;
    pz_status st = PZ_OK;
    if (stat(dir, &sb) != 0)
        st = pz_fail(PZ_ERR_IO, "%s %s: %s: directory %s: %s", o->flag, o->path, what, dir, strerror(errno));
    else if (!S_ISDIR(sb.st_mode))
        st = pz_fail(PZ_ERR_IO, "%s %s: %s: %s is %s, not a directory", o->flag, o->path, what, dir,
                     kind_of(sb.st_mode));
    else if (access(dir, W_OK | X_OK) != 0)
        st = pz_fail(PZ_ERR_IO, "%s %s: %s: directory %s is not writable: %s", o->flag, o->path, what, dir,
                     strerror(errno));
    free(dir);
    return st;
}

static pz_status check_place(const pz_io_set *s, const pz_io_place *o) {
    struct stat sb;
    if (stat(o->path, &sb) != 0) {
        if (errno == ENOTDIR || errno == ENAMETOOLONG || errno == ELOOP || errno == EACCES)
            return pz_fail(PZ_ERR_IO, "%s %s: cannot be written: %s", o->flag, o->path, strerror(errno));
        if (o->kind == PZ_IO_OUT_DIR) return check_parent(o, "cannot be created");
        char *dir = parent_of(o->path);
        int later = is_out_dir(s, dir);   /* created by this command first */
        free(dir);
        return later ? PZ_OK : check_parent(o, "cannot be written");
    }
    if (o->kind == PZ_IO_OUT_DIR) {
        if (!S_ISDIR(sb.st_mode))
            return pz_fail(PZ_ERR_IO, "%s %s is %s, not a directory", o->flag, o->path, kind_of(sb.st_mode));
        if (access(o->path, W_OK | X_OK) != 0)
            return pz_fail(PZ_ERR_IO, "%s %s: directory not writable: %s", o->flag, o->path, strerror(errno));
        return PZ_OK;
    }
    if (S_ISDIR(sb.st_mode))
        return pz_fail(PZ_ERR_IO, "%s %s is a directory, where a file is written", o->flag, o->path);
    if (!S_ISREG(sb.st_mode))
        return pz_fail(PZ_ERR_IO, "%s %s is %s, not a regular file: an output is written beside it and renamed over "
                       "the name, which would replace it (for no output, leave %s out)", o->flag, o->path,
                       kind_of(sb.st_mode), o->flag);
    return check_parent(o, "cannot be replaced");
}

pz_status pz_io_check(const pz_io_set *s) {
    for (int i = 0; i < s->n; i++) {
        const pz_io_place *o = &s->v[i];
        if (o->kind == PZ_IO_IN) continue;
        struct stat so, si;
        int there = stat(o->path, &so) == 0;
        for (int j = 0; j < s->n; j++) {
            const pz_io_place *p = &s->v[j];
            if (j == i) continue;
            if (p->kind == PZ_IO_IN) {
                if (there && stat(p->path, &si) == 0 && so.st_dev == si.st_dev && so.st_ino == si.st_ino)
                    return pz_fail(PZ_ERR_ARG, "%s %s is the same file as %s %s: the output would replace the input "
                                   "(choose another name for %s)", o->flag, o->path, p->flag, p->path, o->flag);
            } else if (j < i && !(o->kind == PZ_IO_OUT_DIR && p->kind == PZ_IO_OUT_DIR) &&
                       pz_same_file(o->path, p->path)) {
                return pz_fail(PZ_ERR_ARG, "%s %s and %s %s name the same file: one output would replace the other",
                               p->flag, p->path, o->flag, o->path);
            }
        }
    }
    for (int i = 0; i < s->n; i++) {
        pz_status st = s->v[i].kind == PZ_IO_IN ? PZ_OK : check_place(s, &s->v[i]);
        if (st) return st;
    }
    return PZ_OK;
}
