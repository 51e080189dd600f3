/* rss.c: the resident set from /proc/self/status (see rss.h). */
#include "util/rss.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rss_bytes(double *now, double *peak) {
    *now = *peak = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "VmRSS:", 6)) *now = atof(line + 6) * 1024;
        else if (!strncmp(line, "VmHWM:", 6)) *peak = atof(line + 6) * 1024;
    }
    fclose(f);
    return *now < 0 && *peak < 0 ? -1 : 0;
}
