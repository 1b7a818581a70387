/* file.c: see file.h. */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/mem.h"

void xfwrite_at(const void *p, size_t size, size_t n, FILE *f, const char *file, int line) {
    if (n && fwrite(p, size, n, f) != n)
        pz_die("%s:%d: write failed: %s", file, line, strerror(errno));
}

pz_status pz_read_file(const char *path, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return pz_fail(PZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = xmalloc(cap);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return pz_fail(PZ_ERR_NOMEM, "%s: file too large to read", path); }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) { free(buf); return pz_fail(PZ_ERR_IO, "%s: read error", path); }
    *out = buf;
    *len = n;
    return PZ_OK;
}

pz_status pz_atomic_open(pz_atomic_file *af, const char *path) {
    memset(af, 0, sizeof *af);
    size_t n = strlen(path) + 32;
    af->path = xstrdup(path);
    af->tmp = xmalloc(n);
    snprintf(af->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) {
        pz_status st = pz_fail(PZ_ERR_IO, "%s: cannot create: %s", af->tmp, strerror(errno));
        free(af->path); free(af->tmp);
        memset(af, 0, sizeof *af);
        return st;
    }
    return PZ_OK;
}

pz_status pz_atomic_commit(pz_atomic_file *af) {
    pz_status st = PZ_OK;
    if (fflush(af->f) != 0 || ferror(af->f) || fsync(fileno(af->f)) != 0)
        st = pz_fail(PZ_ERR_IO, "%s: write failed: %s", af->tmp, strerror(errno));
    if (fclose(af->f) != 0 && st == PZ_OK)
        st = pz_fail(PZ_ERR_IO, "%s: close failed: %s", af->tmp, strerror(errno));
    af->f = NULL;
    if (st == PZ_OK && rename(af->tmp, af->path) != 0)
        st = pz_fail(PZ_ERR_IO, "%s: cannot rename to %s: %s", af->tmp, af->path, strerror(errno));
    if (st != PZ_OK) remove(af->tmp);
    free(af->path); free(af->tmp);
    memset(af, 0, sizeof *af);
    return st;
}

void pz_atomic_abort(pz_atomic_file *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) remove(af->tmp);
    free(af->path); free(af->tmp);
    memset(af, 0, sizeof *af);
}

pz_status pz_map_file(const char *path, const void **map, size_t *len) {
    *map = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return pz_fail(PZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return pz_fail(PZ_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return pz_fail(PZ_ERR_IO, "%s: not a regular file", path);
    }
    size_t n = (size_t)sb.st_size;
    if (n == 0) { close(fd); return PZ_OK; }
    void *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file */
    if (p == MAP_FAILED) return pz_fail(PZ_ERR_IO, "%s: cannot mmap: %s", path, strerror(e));
    *map = p;
    *len = n;
    return PZ_OK;
}

void pz_unmap_file(const void *map, size_t len) {
    if (map && len) munmap((void *)map, len);
}

char *pz_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *s = xmalloc(a + b + 2);
    memcpy(s, dir, a);
    s[a] = '/';
    memcpy(s + a + 1, name, b + 1);
    return s;
}

int pz_is_regular_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

int pz_ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}
