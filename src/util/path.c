/* path.c: finding programs on PATH, this binary's own path, argument vectors. */
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

char *argv_join(char **argv) {
    size_t len = 1;
    for (int i = 0; argv[i]; i++) len += strlen(argv[i]) + 1;
    char *s = malloc(len);
    s[0] = 0;
    for (int i = 0; argv[i]; i++) strcat(s, argv[i]), strcat(s, argv[i + 1] ? " " : "");
    return s;
}

void argv_free(char **argv) {
    for (int i = 0; argv && argv[i]; i++) free(argv[i]);
    free(argv);
}
