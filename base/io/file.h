/* file.h: whole-file reads, atomic writes and read-only maps. */
#ifndef PZ_BASE_FILE_H
#define PZ_BASE_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write-all helpers that abort with file and line on a write error. */
void xfwrite_at(const void *p, size_t size, size_t n, FILE *f, const char *file, int line);
#define xfwrite(p, s, n, f) xfwrite_at((p), (s), (n), (f), __FILE__, __LINE__)

/* Read a whole file (or fail with a message). *out is malloc'ed. _max
 * refuses more than max bytes (a regular file at once by its size; a device
 * or pipe once max bytes were read), so /dev/zero cannot fill the memory. */
pz_status pz_read_file(const char *path, uint8_t **out, size_t *len);
pz_status pz_read_file_max(const char *path, size_t max, uint8_t **out, size_t *len);

/* Atomic file write: data goes to "<path>.tmp.<pid>", and pz_atomic_commit
 * flushes, fsyncs and renames it over <path>. pz_atomic_abort removes the
 * temporary, so a failed save never leaves a half-written file at <path>. */
typedef struct {
    FILE *f;
    char *path;
    char *tmp;
} pz_atomic_file;
pz_status pz_atomic_open(pz_atomic_file *af, const char *path);
/* SIGINT, SIGTERM and SIGHUP then remove the temporaries being written
 * before the process dies of them (the program calls it once at start);
 * pz_atomic_open also removes "<path>.tmp.<pid>" files of processes that are
 * gone (a writer killed by SIGKILL). */
void pz_atomic_cleanup_on_signals(void);
pz_status pz_atomic_commit(pz_atomic_file *af);
void pz_atomic_abort(pz_atomic_file *af);

/* Whether two paths name the same file: the same inode when both exist, else
 * the same name in the same directory. */
int pz_same_file(const char *a, const char *b);
/* "dir/name", malloc'ed. */
char *pz_path_join(const char *dir, const char *name);
/* 1 if path names a regular file (after symlinks). */
int pz_is_regular_file(const char *path);
/* This process's executable (/proc/self/exe, links resolved) into out;
 * 0, or -1 when it cannot be read or does not fit. */
int pz_self_exe(char *out, size_t cap);
/* 1 if the string s ends with tail. */
int pz_ends_with(const char *s, const char *tail);

/* Maps a regular file read-only. *len is its size; a file of 0 bytes gives
 * *map = NULL. Unmap with pz_unmap_file. The message names the path. */
pz_status pz_map_file(const char *path, const void **map, size_t *len);
void pz_unmap_file(const void *map, size_t len);

#ifdef __cplusplus
}
#endif

#endif
