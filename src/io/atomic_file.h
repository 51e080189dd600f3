/* atomic_file.h: write a file so that readers see either the old contents or the complete
 * new contents, never a torn mix. Bytes go to "<path>.tmp"; commit fsyncs it, renames it over
 * <path> and fsyncs the directory. Any failure (or an abort) removes the temporary file and
 * leaves an existing <path> untouched. Used by every writer of model and data files. */
#ifndef MYRIAD_IO_ATOMIC_FILE_H
#define MYRIAD_IO_ATOMIC_FILE_H

#include <stddef.h>

typedef struct {
    int fd;          /* -1 once closed */
    char *path;      /* final destination */
    char *tmp_path;  /* "<path>.tmp" */
    char *buf;       /* write-behind buffer (fewer syscalls for many small writes) */
    size_t buf_used;
    int failed;      /* a write failed: commit will refuse */
    int created;     /* the temporary file exists and is ours to remove */
} AtomicFile;

/* Create "<path>.tmp" (truncating a stale one). -1 + myr_error on failure. */
int atomic_open(AtomicFile *a, const char *path);
/* Append bytes. On failure records the error, marks the file failed and returns -1. */
int atomic_write(AtomicFile *a, const void *data, size_t n);
/* Write the whole file at once from `image` (nothing written before): with direct I/O (past the
 * page cache: no copy into it, no memory taken from the host) when the image is aligned to
 * ATOMIC_DIRECT_ALIGN and readable up to n rounded up to it, and the file system allows it; else,
 * or for whatever a direct write left, buffered. Errors as atomic_write. */
enum { ATOMIC_DIRECT_ALIGN = 4096 };
int atomic_write_image(AtomicFile *a, const void *image, size_t n);
/* Flush, fsync, rename over the destination, fsync the directory, free. On failure the
 * temporary file is removed, the destination is untouched and -1 is returned. */
int atomic_commit(AtomicFile *a);
/* Drop the temporary file and free (safe after a failed write). */
void atomic_abort(AtomicFile *a);
/* The whole file at once: `text` and a final newline (JSON documents: config.json, indexes,
 * reports). Errors as atomic_commit; an existing file is untouched on failure. */
int atomic_write_text(const char *path, const char *text);
/* Copy file `from` to `to` atomically (nothing to do when both name the same file). */
int atomic_copy(const char *from, const char *to);

#endif
