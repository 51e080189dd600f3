/* path.c: finding programs on PATH and this binary's own path. */
#define _DEFAULT_SOURCE
#include "util/path.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

char *path_find_program(const char *name) {
    const char *path = getenv("PATH");
    if (!path) return NULL;
    char buf[PATH_MAX];
    for (const char *p = path; *p;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        snprintf(buf, sizeof buf, "%.*s/%s", (int)len, len ? p : ".", name);
        struct stat st;
        if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0) return strdup(buf);
        if (!end) break;
        p = end + 1;
    }
    return NULL;
}

int path_self(char *buf, unsigned long n) {
    ssize_t len = readlink("/proc/self/exe", buf, n - 1);
    if (len <= 0) return myr_error("cannot find this binary's path (/proc/self/exe): %s", strerror(errno));
    buf[len] = 0;
    return 0;
}
