/* file.c: see file.h. */
#include "base/io/file.h"

#include <errno.h>
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
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
    return pz_read_file_max(path, SIZE_MAX, out, len);
}

pz_status pz_read_file_max(const char *path, size_t max, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return pz_fail(PZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > (uint64_t)max) {
        fclose(f);
        return pz_fail(PZ_ERR_ARG, "%s: %lld bytes, more than the %zu this input may have", path,
                       (long long)sb.st_size, max);
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = xmalloc(cap);
    for (;;) {
        if (n > max) {   /* a device or pipe that does not end */
            free(buf);
            fclose(f);
            return pz_fail(PZ_ERR_ARG, "%s: more than the %zu bytes this input may have (a device or a pipe "
                           "that does not end?)", path, max);
        }
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

/* Temporaries being written, for the signal cleanup: fixed slots, since a
 * handler may only read them (paths copied in, never freed while set). */
#define ATOMIC_SLOTS 16
static char atomic_tmp[ATOMIC_SLOTS][4096];
static volatile sig_atomic_t atomic_used[ATOMIC_SLOTS];

static void track(const char *tmp, int on) {
    for (int i = 0; i < ATOMIC_SLOTS; i++) {
        if (on && !atomic_used[i] && strlen(tmp) < sizeof atomic_tmp[i]) {
            strcpy(atomic_tmp[i], tmp);
            atomic_used[i] = 1;
            return;
        }
        if (!on && atomic_used[i] && strcmp(atomic_tmp[i], tmp) == 0) {
            atomic_used[i] = 0;
            return;
        }
    }
}

static void on_fatal_signal(int sig) {
    for (int i = 0; i < ATOMIC_SLOTS; i++)
        if (atomic_used[i]) unlink(atomic_tmp[i]);   /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

void pz_atomic_cleanup_on_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Removes "<path>.tmp.<pid>" files whose process is gone: what a killed
 * writer (SIGKILL, power loss) left beside path. */
static void sweep_stale(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1, slash ? path : ".");
    const char *base = slash ? slash + 1 : path;
    size_t bl = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, base, bl) != 0 || strncmp(e->d_name + bl, ".tmp.", 5) != 0) continue;
        char *end;
        long pid = strtol(e->d_name + bl + 5, &end, 10);
        if (end == e->d_name + bl + 5 || *end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;   /* alive, or not ours to judge */
        char full[8192];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        unlink(full);
    }
    closedir(d);
}

pz_status pz_atomic_open(pz_atomic_file *af, const char *path) {
    memset(af, 0, sizeof *af);
    sweep_stale(path);
    /* the rename would replace whatever is there: only regular files (a
     * device such as /dev/null, a pipe or a directory is refused) */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return pz_fail(PZ_ERR_ARG, "%s exists and is not a regular file (%s): refusing to replace it", path,
                       S_ISDIR(sb.st_mode) ? "a directory" : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                       : S_ISFIFO(sb.st_mode) ? "a pipe" : "not a plain file");
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
    track(af->tmp, 1);
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
    track(af->tmp, 0);
    free(af->path); free(af->tmp);
    memset(af, 0, sizeof *af);
    return st;
}

void pz_atomic_abort(pz_atomic_file *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) remove(af->tmp);
    if (af->tmp) track(af->tmp, 0);
    free(af->path); free(af->tmp);
    memset(af, 0, sizeof *af);
}

pz_status pz_map_file(const char *path, const void **map, size_t *len) {
    *map = NULL;
    *len = 0;
    /* O_NONBLOCK: a FIFO is refused below instead of waiting for a writer
     * forever (a regular file's reads and mapping ignore the flag) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
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

int pz_self_exe(char *out, size_t cap) {
    if (cap < 2) return -1;
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1) return -1;   /* cap - 1 bytes: maybe cut short */
    out[n] = 0;
    return 0;
}

int pz_ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

int pz_same_file(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return 1;
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    /* not there yet: the same directory (by its identity) and the same name */
    const char *na = strrchr(a, '/'), *nb = strrchr(b, '/');
    const char *fa = na ? na + 1 : a, *fb = nb ? nb + 1 : b;
    if (strcmp(fa, fb) != 0) return 0;
    char da[4096], db[4096];
    snprintf(da, sizeof da, "%.*s", na ? (int)(na - a) + 1 : 1, na ? a : ".");
    snprintf(db, sizeof db, "%.*s", nb ? (int)(nb - b) + 1 : 1, nb ? b : ".");
    return stat(da, &sa) == 0 && stat(db, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}
