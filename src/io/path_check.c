/* path_check.c: output-path checks (see path_check.h). access(2) answers for this process's
 * real ids, which is what a later open would use (no set-uid here). */
#include "io/path_check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

char *path_trim(char *p) {
    if (!p) return p;
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    return p;
}

const char *path_join(char *buf, unsigned long n, const char *a, const char *b) {
    size_t la = strlen(a);
    while (la > 1 && a[la - 1] == '/') la--;
    while (*b == '/') b++;
    snprintf(buf, n, "%.*s/%s", (int)la, a, b);
    return buf;
}

/* The directory part of path ("." when there is none). */
static void dir_of(const char *path, char *dir, size_t n) {
    snprintf(dir, n, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, n, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
}

/* Creating (and at once removing) a file is the only test that also holds for root, read-only
 * mounts and pseudo file systems such as /proc, where permission bits say yes. */
static int probe(const char *dir) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/.myriad-probe-%d", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return -1;
    close(fd);
    unlink(path);
    return 0;
}

static int writable_dir(const char *what, const char *dir, const char *for_path) {
    struct stat st;
    if (stat(dir, &st))
        return myr_error("%s %s: the directory %s does not exist (create it first)", what, for_path, dir);
    if (!S_ISDIR(st.st_mode)) return myr_error("%s %s: %s is not a directory", what, for_path, dir);
    if (access(dir, W_OK | X_OK) || probe(dir))
        return myr_error("%s %s: cannot write in %s (%s)", what, for_path, dir, strerror(errno));
    return 0;
}

int path_check_file(const char *what, const char *path) {
    if (!path || !*path) return myr_error("%s needs a file path", what);
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return myr_error("%s %s is a directory; give a file path", what, path);
        if (S_ISREG(st.st_mode)) { /* opened, not truncated: nothing changes (a FIFO would block: not opened) */
            int fd = open(path, O_WRONLY | O_APPEND);
            if (fd < 0) return myr_error("%s %s: cannot write it (%s)", what, path, strerror(errno));
            close(fd);
        } else if (access(path, W_OK))
            return myr_error("%s %s: cannot write it (%s)", what, path, strerror(errno));
    }
    char dir[PATH_MAX];
    dir_of(path, dir, sizeof dir);
    return writable_dir(what, dir, path);
}

int path_check_dir(const char *what, const char *dir) {
    if (!dir || !*dir) return myr_error("%s needs a directory path", what);
    char cur[PATH_MAX];
    snprintf(cur, sizeof cur, "%s", dir);
    for (;;) { /* the nearest existing ancestor decides */
        struct stat st;
        if (stat(cur, &st) == 0) {
            if (!S_ISDIR(st.st_mode)) return myr_error("%s %s: %s exists and is not a directory", what, dir, cur);
            if (access(cur, W_OK | X_OK) || probe(cur))
                return myr_error("%s %s: cannot write in %s (%s)", what, dir, cur, strerror(errno));
            return 0;
        }
        if (errno != ENOENT && errno != ENOTDIR) return myr_error("%s %s: %s (%s)", what, dir, cur, strerror(errno));
        size_t n = strlen(cur);
        while (n > 1 && cur[n - 1] == '/') cur[--n] = 0;
        char *slash = strrchr(cur, '/');
        if (!slash) snprintf(cur, sizeof cur, ".");
        else if (slash == cur) cur[1] = 0;
        else *slash = 0;
    }
}
