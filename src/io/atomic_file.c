/* atomic_file.c: temp-file + fsync + rename writer (see atomic_file.h). */
#define _GNU_SOURCE /* O_DIRECT */
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"

enum { ATOMIC_BUF_SIZE = 1 << 20 };

static void free_names(AtomicFile *a) {
    free(a->path);
    free(a->tmp_path);
    free(a->buf);
    a->path = a->tmp_path = a->buf = NULL;
}

int atomic_open(AtomicFile *a, const char *path) {
    memset(a, 0, sizeof *a);
    a->fd = -1;
    size_t len = strlen(path);
    a->path = strdup(path);
    a->tmp_path = malloc(len + 5);
    a->buf = malloc(ATOMIC_BUF_SIZE);
    if (!a->path || !a->tmp_path || !a->buf) {
        free_names(a);
        return myr_error("out of memory opening %s for writing", path);
    }
    memcpy(a->tmp_path, path, len);
    memcpy(a->tmp_path + len, ".tmp", 5);
    a->fd = open(a->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (a->fd < 0) {
        int e = errno;
        myr_error("cannot create %s: %s (check that the directory exists and is writable)", a->tmp_path, strerror(e));
        free_names(a);
        return -1;
    }
    a->created = 1;
    return 0;
}

/* write(2) until done; short writes and EINTR are retried. */
static int write_all(AtomicFile *a, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(a->fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            a->failed = 1;
            return myr_error("writing %s failed: %s (disk full or quota?); %s was left unchanged", a->tmp_path,
                             w < 0 ? strerror(errno) : "no progress", a->path);
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int flush_buf(AtomicFile *a) {
    if (a->buf_used == 0) return 0;
    int rc = write_all(a, a->buf, a->buf_used);
    a->buf_used = 0;
    return rc;
}

int atomic_write(AtomicFile *a, const void *data, size_t n) {
    if (a->failed || a->fd < 0) return -1;
    const char *p = data;
    if (a->buf_used + n <= ATOMIC_BUF_SIZE) {
        memcpy(a->buf + a->buf_used, p, n);
        a->buf_used += n;
        return 0;
    }
    if (flush_buf(a)) return -1;
    if (n >= ATOMIC_BUF_SIZE) return write_all(a, p, n); /* large blocks go straight through */
    memcpy(a->buf, p, n);
    a->buf_used = n;
    return 0;
}

int atomic_write_image(AtomicFile *a, const void *image, size_t n) {
    if (a->failed || a->fd < 0) return -1;
    if (a->buf_used || lseek(a->fd, 0, SEEK_CUR) != 0) {
        a->failed = 1;
        return myr_error("writing %s: an image must be the whole file", a->tmp_path);
    }
    const char *p = image;
    size_t done = 0, whole = (n + ATOMIC_DIRECT_ALIGN - 1) / ATOMIC_DIRECT_ALIGN * ATOMIC_DIRECT_ALIGN;
    int flags = fcntl(a->fd, F_GETFL);
    if (((uintptr_t)p % ATOMIC_DIRECT_ALIGN) == 0 && flags >= 0 && fcntl(a->fd, F_SETFL, flags | O_DIRECT) == 0) {
        while (done < whole) { /* stops at the first short or refused write; the rest goes buffered */
            size_t take = whole - done < ((size_t)8 << 20) ? whole - done : (size_t)8 << 20;
            ssize_t w = write(a->fd, p + done, take);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0 || w % ATOMIC_DIRECT_ALIGN) {
                if (w > 0) lseek(a->fd, (off_t)done, SEEK_SET);
                break;
            }
            done += (size_t)w;
        }
        fcntl(a->fd, F_SETFL, flags);
        if (done > n) done = n;
        if (ftruncate(a->fd, (off_t)done) || lseek(a->fd, (off_t)done, SEEK_SET) != (off_t)done) {
            a->failed = 1;
            return myr_error("writing %s failed: %s; %s was left unchanged", a->tmp_path, strerror(errno), a->path);
        }
    }
    return write_all(a, p + done, n - done);
}

void atomic_abort(AtomicFile *a) {
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
    if (a->created && a->tmp_path) unlink(a->tmp_path);
    a->created = 0;
    free_names(a);
}

/* fsync the directory holding `path` so the rename itself is durable. */
static int fsync_parent_dir(const char *path) {
    char *copy = strdup(path);
    if (!copy) return myr_error("out of memory");
    int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = 0;
    if (dfd >= 0) {
        if (fsync(dfd) && errno != EINVAL) rc = myr_error("fsync of the directory of %s failed: %s", path, strerror(errno));
        close(dfd);
    }
    free(copy);
    return rc;
}

int atomic_commit(AtomicFile *a) {
    if (a->failed || a->fd < 0) {
        atomic_abort(a);
        return -1;
    }
    if (flush_buf(a)) {
        atomic_abort(a);
        return -1;
    }
    if (fsync(a->fd)) {
        myr_error("fsync of %s failed: %s; %s was left unchanged", a->tmp_path, strerror(errno), a->path);
        atomic_abort(a);
        return -1;
    }
    int rc = close(a->fd);
    a->fd = -1;
    if (rc) {
        myr_error("closing %s failed: %s; %s was left unchanged", a->tmp_path, strerror(errno), a->path);
        atomic_abort(a);
        return -1;
    }
    if (rename(a->tmp_path, a->path)) {
        myr_error("cannot rename %s to %s: %s", a->tmp_path, a->path, strerror(errno));
        atomic_abort(a);
        return -1;
    }
    rc = fsync_parent_dir(a->path);
    free_names(a);
    return rc;
}

int atomic_write_text(const char *path, const char *text) {
    AtomicFile a;
    if (atomic_open(&a, path)) return -1;
    if (atomic_write(&a, text, strlen(text)) || atomic_write(&a, "\n", 1)) {
        atomic_abort(&a);
        return -1;
    }
    return atomic_commit(&a);
}

int atomic_copy(const char *from, const char *to) {
    char rf[PATH_MAX], rt[PATH_MAX];
    if (realpath(from, rf) && realpath(to, rt) && !strcmp(rf, rt)) return 0;
    FILE *f = fopen(from, "rb");
    if (!f) return myr_error("cannot read %s: %s", from, strerror(errno));
    AtomicFile a;
    if (atomic_open(&a, to)) {
        fclose(f);
        return -1;
    }
    char buf[1 << 16];
    size_t k;
    int rc = 0;
    while (!rc && (k = fread(buf, 1, sizeof buf, f)) > 0) rc = atomic_write(&a, buf, k);
    int err = ferror(f);
    fclose(f);
    if (rc || err) {
        atomic_abort(&a);
        return rc ? -1 : myr_error("reading %s failed", from);
    }
    return atomic_commit(&a);
}
