/* hostfile.c: reading and writing hostfiles (see hostfile.h). */
#define _DEFAULT_SOURCE
#include "launch/hostfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"

int hosts_load(const char *path, Host **out, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return myr_error("run: cannot open hosts file %s: %s", path, strerror(errno));
    char line[512];
    int cap = 0, lineno = 0;
    *n = 0, *out = NULL;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char name[64], rest[64] = "";
        int k = sscanf(line, "%63s %63s", name, rest);
        if (k <= 0) continue;
        int slots = 1;
        if (k == 2 && (sscanf(rest, "slots=%d", &slots) != 1 || slots < 1)) {
            fclose(f);
            return myr_error("run: %s:%d: expected 'HOST [slots=N]', got '%s'", path, lineno, rest);
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            *out = realloc(*out, (size_t)cap * sizeof **out);
        }
        Host *h = &(*out)[(*n)++];
        *h = (Host){.slots = slots};
        snprintf(h->name, sizeof h->name, "%s", name);
    }
    fclose(f);
    if (*n == 0) return myr_error("run: hosts file %s lists no hosts", path);
    return 0;
}

int hosts_write_temp(char *path, const Host *hosts, const int *order, int n) {
    strcpy(path, "/tmp/myriad-hosts-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return myr_error("run: cannot create a hostfile: %s", strerror(errno));
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < n; i++) fprintf(f, "%s slots=%d\n", hosts[order[i]].name, hosts[order[i]].slots);
    if (fclose(f) != 0) return myr_error("run: cannot write hostfile %s: %s", path, strerror(errno));
    return 0;
}
