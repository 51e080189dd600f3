/* ckpt_bench.c: checkpoint throughput on this machine (one process, world of one).
 * Baselines measured in the same run: memcpy (for CRC-32C), a plain write + fsync of the same
 * bytes (for the save), a plain pread (for the load). Built and run by bench/ckpt_bench.sh. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "ckpt/crc32c.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* One save of the tensor as step `step`: *call = until the commit call returns, *done = until
 * the save is complete (async: after ckpt_async_wait). */
static int save_one(const char *dir, int step, const int64_t *sh, const CkptSlice *whole, const float *buf, int async,
                    double *call, double *done) {
    CkptWriter *w;
    double t0 = now();
    if (ckpt_writer_begin(dir, step, 0, 1, NULL, &w) || ckpt_add_piece(w, "w", CKPT_F32, 2, sh, whole, buf) ||
        (async ? ckpt_writer_commit_async(w, NULL, "{}") : ckpt_writer_commit(w, NULL, "{}")))
        return -1;
    *call = now() - t0;
    if (async && ckpt_async_wait()) return -1;
    if (done) *done = now() - t0;
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp/myriad-ckpt-bench";
    int64_t mib = argc > 2 ? atoll(argv[2]) : 256;
    int64_t rows = mib * 1024 * 1024 / (4 * 4096), sh[2] = {rows, 4096}, n = rows * 4096;
    float *buf = malloc(sizeof(float) * n), *back = malloc(sizeof(float) * n);
    for (int64_t k = 0; k < n; k++) buf[k] = (float)k;
    size_t bytes = (size_t)n * 4;
    memset(back, 0, bytes); /* fault the pages in before timing */
    double t0 = now();
    memcpy(back, buf, bytes);
    double t_memcpy = now() - t0;
    t0 = now();
    volatile uint32_t c = crc32c(buf, bytes);
    double t_crc = now() - t0;
    t0 = now();
    c = crc32c_update_sw(0, buf, bytes);
    double t_crc_sw = now() - t0;
    t0 = now();
    c = crc32c_copy(0, back, buf, bytes);
    double t_copy_crc = now() - t0;
    (void)c;
    char path[512];
    snprintf(path, sizeof path, "%s-plain.bin", dir);
    t0 = now();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, bytes) != (ssize_t)bytes || fsync(fd)) return 1;
    close(fd);
    double t_plain = now() - t0;
    t0 = now();
    fd = open(path, O_RDONLY);
    if (pread(fd, back, bytes, 0) != (ssize_t)bytes) return 1;
    close(fd);
    double t_plain_read = now() - t0;
    unlink(path);

    CkptSlice whole = ckpt_whole(2, sh);
    double t_save, t_async_call, t_async_total, t_async_call2, t_async_total2;
    /* step 1 sync; steps 2 and 3 async (the second reuses the first one's snapshot memory) */
    if (save_one(dir, 1, sh, &whole, buf, 0, &t_save, NULL) ||
        save_one(dir, 2, sh, &whole, buf, 1, &t_async_call, &t_async_total) ||
        save_one(dir, 3, sh, &whole, buf, 1, &t_async_call2, &t_async_total2))
        return 1;
    Ckpt *ck;
    t0 = now();
    char step1[600]; /* the sync save: written through the page cache, so the load reads it warm as the pread did
                        (async saves bypass the page cache: a load of those reads the disk) */
    snprintf(step1, sizeof step1, "%s/step-00000001", dir);
    if (ckpt_open(step1, &ck) || ckpt_read_slice(ck, "w", &whole, back)) return 1;
    double t_load = now() - t0;
    int same = memcmp(back, buf, bytes) == 0;
    ckpt_close(ck);
    double gb = bytes / 1e9;
    printf("checkpoint of %lld MiB (1 MiB checksum blocks), page cache warm, %s\n", (long long)mib, dir);
    printf("  crc32c %6.2f GB/s (software slicing-by-8 %6.2f GB/s)   memcpy %6.2f GB/s   ratio %.2f\n", gb / t_crc,
           gb / t_crc_sw, gb / t_memcpy, t_crc / t_memcpy);
    printf("  crc32c_copy (copy + checksum in one pass, non-temporal stores) %6.2f GB/s   ratio to memcpy %.2f\n",
           gb / t_copy_crc, t_copy_crc / t_memcpy);
    printf("  save (sync)          %6.2f GB/s   plain write+fsync %6.2f GB/s   ratio %.2f\n", gb / t_save, gb / t_plain,
           t_save / t_plain);
    printf("  async: call returns after %.1f ms (snapshot copy), save done after %.1f ms (sync save %.1f ms)\n",
           t_async_call * 1e3, t_async_total * 1e3, t_save * 1e3);
    printf("  async, second save (snapshot memory kept): call returns after %.1f ms, save done after %.1f ms\n",
           t_async_call2 * 1e3, t_async_total2 * 1e3);
    printf("  load (verified)      %6.2f GB/s   plain pread %6.2f GB/s   ratio %.2f   bit exact: %s\n", gb / t_load,
           gb / t_plain_read, t_load / t_plain_read, same ? "yes" : "NO");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) != 0 || !same;
}
