/* cpu_memory.c: the CPU backend's memory, threads and device description (the machine's CPU
 * model and memory from /proc, so the first line of a CPU run names what it ran on). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/cpu/cpu_kernels.h"

void openblas_set_num_threads(int num_threads); /* from OpenBLAS; not in cblas.h everywhere */

static int current_threads = 0;

/* Blocks from this size up are 2 MiB-aligned and asked to be transparent huge pages: zeroing
 * them below takes one page fault per 2 MiB instead of one per 4 KiB. The first touch of the
 * parameters, gradients and AdamW moments was most of a rank's set-up time (a recovery's slowest
 * phase: bench/recovery_results.md), nearly all of it page faults on a virtual machine. */
#define HUGE_BLOCK ((size_t)4 << 20)
#define HUGE_ALIGN ((size_t)2 << 20)

void *cpu_alloc(size_t bytes) {
    if (bytes == 0) bytes = 1;
    /* 64-byte alignment for AVX-512 loads; calloc would not guarantee it. */
    bytes = (bytes + 63) / 64 * 64;
    int huge = bytes >= HUGE_BLOCK;
    /* aligned_alloc wants a multiple of the alignment; only the whole huge pages inside the block
     * are advised and only its own bytes are touched, so the rounding stays virtual (rounding the
     * touched size up cost up to 2 MiB of RSS per block: 1.25x the plan at ZeRO-3, test_memory.sh) */
    size_t asked = huge ? (bytes + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN : bytes;
    void *p = aligned_alloc(huge ? HUGE_ALIGN : 64, asked);
    if (p && huge) madvise(p, bytes / HUGE_ALIGN * HUGE_ALIGN, MADV_HUGEPAGE); /* without THP: 4 KiB pages as before */
    if (p) memset(p, 0, bytes);
    return p;
}

void cpu_free(void *p) { free(p); }

void cpu_set_threads(int threads) {
    if (threads < 1) threads = 1;
    current_threads = threads;
    omp_set_num_threads(threads);
    openblas_set_num_threads(1); /* BLAS runs inside our OpenMP threads (see cpu_gemm.c) */
}

int cpu_threads(void) { return current_threads ? current_threads : omp_get_max_threads(); }

/* A "key : value" line of a /proc file, value copied (trimmed); 0 if found. */
static int proc_field(const char *path, const char *key, char *out, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    size_t klen = strlen(key);
    int rc = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) || (line[klen] != ' ' && line[klen] != '\t' && line[klen] != ':')) continue;
        char *v = strchr(line, ':');
        if (!v) continue;
        v++;
        while (*v == ' ' || *v == '\t') v++;
        v[strcspn(v, "\n")] = 0;
        snprintf(out, n, "%s", v);
        rc = 0;
        break;
    }
    fclose(f);
    return rc;
}

int cpu_device_info(DeviceInfo *d) {
    memset(d, 0, sizeof *d);
    if (proc_field("/proc/cpuinfo", "model name", d->name, sizeof d->name)) snprintf(d->name, sizeof d->name, "CPU");
    char v[128];
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    d->total_bytes = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    d->free_bytes = d->total_bytes;
    d->count = 1;
    if (!proc_field("/proc/meminfo", "MemAvailable", v, sizeof v)) d->free_bytes = (size_t)strtoull(v, NULL, 10) * 1024;
    return 0;
}
