/* cpu_peak_cache.c: the best matmul rate ever measured on this machine, per machine key (CPU
 * model, online CPUs, threads, GEMM kernel), in a small text file of the user's cache directory.
 * Why: a measurement at start-up is only as good as the moment it is taken (other jobs on the
 * cores make it low, and MFU then reads above 100%), while the best figure ever seen by `myriad
 * bench sgemm` or an earlier run is the closest to what the hardware can do, and the same for
 * every run of the machine. One line per key: "KEY<TAB>GFLOP/s<TAB>SOURCE<TAB>DATE". */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cpu/cpu_gemm.h"
#include "kernels/cpu/cpu_peak.h"
#include "util/error.h"

static void cpu_model(char *out, size_t n) {
    snprintf(out, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) && strncmp(line, "cpu model", 9) && strncmp(line, "Model name", 10)) continue;
        char *v = strchr(line, ':');
        if (!v) continue;
        for (v++; *v == ' ' || *v == '\t'; v++) {}
        v[strcspn(v, "\r\n")] = 0;
        if (*v) snprintf(out, n, "%s", v);
        break;
    }
    fclose(f);
}

void cpu_peak_key(int threads, char *key, size_t n) {
    char model[256], gemm_kind[96];
    cpu_model(model, sizeof model);
    if (gemm_is_native()) snprintf(gemm_kind, sizeof gemm_kind, "own avx512");
    else snprintf(gemm_kind, sizeof gemm_kind, "blas %s", openblas_get_corename());
    snprintf(key, n, "%s | %ld cpus | %d threads | %s", model, sysconf(_SC_NPROCESSORS_ONLN), threads, gemm_kind);
    for (char *p = key; *p; p++)
        if (*p == '\t' || *p == '\n' || *p == '\r') *p = ' ';
}

void cpu_peak_cache_path(char *path, size_t n) {
    const char *dir = getenv("MYRIAD_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && *dir) snprintf(path, n, "%s/cpu_peak.tsv", dir);
    else if (xdg && *xdg) snprintf(path, n, "%s/myriad/cpu_peak.tsv", xdg);
    else if (home && *home) snprintf(path, n, "%s/.cache/myriad/cpu_peak.tsv", home);
    else path[0] = 0;
}

/* The whole file (NULL when absent or unreadable). */
static char *read_all(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
        len += got;
        if (cap - len < 2) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (buf) buf[len] = 0;
    return buf;
}

/* Finds key's line in text: its GFLOP/s and the rest (source, date); NULL when absent. */
static const char *find_line(const char *text, const char *key, double *gflops, char *rest, size_t rest_n) {
    size_t kl = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, key, kl) || l[kl] != '\t') continue;
        char *end;
        double v = strtod(l + kl + 1, &end);
        if (end == l + kl + 1 || *end != '\t' || !(v > 0)) continue;
        size_t m = strcspn(end + 1, "\n");
        if (rest) snprintf(rest, rest_n, "%.*s", (int)m, end + 1);
        *gflops = v;
        return l;
    }
    return NULL;
}

int cpu_peak_cache_get(const char *key, double *flops, char *source, size_t source_n) {
    char path[4096], rest[256];
    cpu_peak_cache_path(path, sizeof path);
    char *text = path[0] ? read_all(path) : NULL;
    double g = 0;
    const char *l = text ? find_line(text, key, &g, rest, sizeof rest) : NULL;
    free(text);
    if (!l) return -1;
    char *tab = strchr(rest, '\t'); /* "SOURCE<TAB>DATE" -> "SOURCE, DATE" */
    if (tab) *tab = 0;
    if (source) snprintf(source, source_n, "%s%s%s", rest, tab ? ", " : "", tab ? tab + 1 : "");
    *flops = g * 1e9;
    return 0;
}

static int make_dirs(const char *file) {
    char d[4096];
    snprintf(d, sizeof d, "%s", file);
    char *slash = strrchr(d, '/');
    if (!slash) return 0;
    *slash = 0;
    for (char *p = d + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(d, 0755) && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(d, 0755) && errno != EEXIST ? -1 : 0;
}

int cpu_peak_cache_put(const char *key, double flops, const char *source) {
    char path[4096];
    cpu_peak_cache_path(path, sizeof path);
    if (!path[0]) return myr_error("no cache directory (set MYRIAD_CACHE_DIR or HOME)");
    char *text = read_all(path);
    double old = 0;
    const char *line = text ? find_line(text, key, &old, NULL, 0) : NULL;
    if (line && old * 1e9 >= flops) {
        free(text);
        return 0;
    }
    if (make_dirs(path)) {
        free(text);
        return myr_error("cannot create the directory of %s: %s", path, strerror(errno));
    }
    char date[32], entry[1024];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime(&now));
    snprintf(entry, sizeof entry, "%s\t%.1f\t%s\t%s\n", key, flops / 1e9, source, date);
    /* a temporary file of this process's own (several runs may record at once), renamed into
     * place: readers see the old file or the new one; of two writers at once the last one stands */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        free(text);
        return myr_error("cannot write %s: %s", tmp, strerror(errno));
    }
    if (text) { /* every other line as it was; this key's line replaced */
        size_t before = line ? (size_t)(line - text) : strlen(text);
        fwrite(text, 1, before, f);
        if (line && strchr(line, '\n')) fputs(strchr(line, '\n') + 1, f);
        else if (!line && before && text[before - 1] != '\n') fputc('\n', f);
    }
    fputs(entry, f);
    int rc = ferror(f) | fclose(f);
    free(text);
    if (rc || rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return myr_error("cannot write %s: %s", path, strerror(e));
    }
    return rc ? -1 : 1;
}
