/* iocheck.h: the files a command reads and writes, checked before it starts.
 *
 * A command lists its inputs and its outputs (each with the flag that named
 * it) and calls pz_io_check once, before any work. It refuses, naming the
 * flag and the path:
 *  - an output that is an input of the same command: the same file by device
 *    and inode (stat), so also through symbolic and hard links; an output
 *    that does not exist yet cannot be an input;
 *  - two file outputs that name the same file (the second would replace the
 *    first);
 *  - a file output that exists and is not a regular file (a directory, a
 *    device such as /dev/null, a pipe): outputs are written to a temporary
 *    beside the name and renamed over it (base/io/file.h), which would replace
 *    the device; for no output, leave the flag out;
 *  - a file output whose directory is missing, is not a directory or is not
 *    writable (unless the directory is itself an output of the set: it is
 *    created first);
 *  - a directory output that exists and is not a writable directory, or that
 *    does not exist and cannot be created (its parent missing, not a
 *    directory or not writable; one level is created, as mkdir does).
 * So a run that would fail at its first checkpoint, or at the end when it
 * writes its trace, fails at the start instead, and nothing is written. */
#ifndef PZ_BASE_IOCHECK_H
#define PZ_BASE_IOCHECK_H

#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { PZ_IO_IN, PZ_IO_OUT_FILE, PZ_IO_OUT_DIR } pz_io_kind;

typedef struct {
    const char *flag;   /* "--data", "input": static text, not copied */
    char *path;         /* copied */
    pz_io_kind kind;
} pz_io_place;

/* zero-initialise; pz_io_free is safe on a zeroed set */
typedef struct {
    pz_io_place *v;
    int n, cap;
} pz_io_set;

/* NULL paths are ignored, so optional flags can be added as they are. */
void pz_io_add(pz_io_set *s, pz_io_kind kind, const char *flag, const char *path);
pz_status pz_io_check(const pz_io_set *s);
void pz_io_free(pz_io_set *s);

#ifdef __cplusplus
}
#endif

#endif
