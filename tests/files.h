/* files.h: small file helpers shared by the I/O and data tests (scratch directories, whole-file
 * reads and writes, running the Python oracle, checking that an error is one line). */
#ifndef MYRIAD_TESTS_FILES_H
#define MYRIAD_TESTS_FILES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fresh scratch directory under /tmp (removed by tmpdir_remove). */
static inline const char *tmpdir_make(void) {
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/myriad-test-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    return dir;
}

static inline void tmpdir_remove(const char *dir) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
}

static inline char *path_in(const char *dir, const char *name) {
    static char bufs[8][1024];
    static int next;
    char *p = bufs[next++ % 8];
    if (snprintf(p, sizeof bufs[0], "%s/%s", dir, name) >= (int)sizeof bufs[0]) {
        fprintf(stderr, "path too long: %s/%s\n", dir, name);
        exit(1);
    }
    return p;
}

static inline int file_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) || w != n ? -1 : 0;
}

/* Whole file, malloc'd (caller frees); NULL if unreadable. */
static inline unsigned char *file_read(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(len > 0 ? (size_t)len : 1);
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static inline int file_exists(const char *path) { return access(path, F_OK) == 0; }

/* One line: non-empty, no newline. */
static inline int one_line(const char *msg) { return msg[0] && !strchr(msg, '\n'); }

/* Is /usr/bin/python3 with the given modules (comma separated) installed? Looks the modules
 * up without importing them (importing torch takes seconds). */
static inline int python_has(const char *modules) {
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import importlib.util as u, sys; "
             "sys.exit(any(u.find_spec(m.strip()) is None for m in \"%s\".split(\",\")))' >/dev/null 2>&1",
             modules);
    return system(cmd) == 0;
}

#endif
