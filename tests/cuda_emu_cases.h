/* cuda_emu_cases.h: the cases of test_kernels_cuda_emu that prove the emulator catches what a
 * real GPU punishes (included by tests/test_kernels_cuda.c in the emulation build only). Each runs
 * a kernel of tests/cuda_emu_planted.cu with its bug planted and passes only when the emulator
 * reports it: by aborting with its message (run in a child process, whose output is checked), or
 * by the poison the bug reads (NaN where the data would be). Each also runs the correct form of
 * the same kernel, which must run clean, so a check that fired on everything would fail too. With
 * any of the emulator's checks removed, its case fails. */
#ifndef MYRIAD_TESTS_CUDA_EMU_CASES_H
#define MYRIAD_TESTS_CUDA_EMU_CASES_H

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_emu_planted.h"

/* Runs fn(arg) in a child process with its stdout and stderr in log; 1 if the child died or
 * exited non-zero, 0 if it returned. */
static int emu_child(void (*fn)(int), int arg, char *log, size_t logsz) {
    fflush(stdout);
    fflush(stderr);
    int fd[2];
    if (pipe(fd)) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        struct rlimit no_core = {0, 0}; /* an abort here is the expected outcome: no core file */
        setrlimit(RLIMIT_CORE, &no_core);
        close(fd[0]);
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        fn(arg);
        fflush(stdout);
        fflush(stderr);
        _exit(0);
    }
    close(fd[1]);
    size_t len = 0;
    char sink[4096];
    for (;;) { /* read it all (the child must not block on a full pipe), keep the first logsz - 1 bytes */
        ssize_t r = len + 1 < logsz ? read(fd[0], log + len, logsz - 1 - len) : read(fd[0], sink, sizeof sink);
        if (r <= 0) break;
        if (len + 1 < logsz) len += (size_t)r;
    }
    log[len] = 0;
    close(fd[0]);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* the first line of log containing needle, for the test's output */
static void emu_print_line(const char *log, const char *needle) {
    const char *p = strstr(log, needle);
    if (!p) return;
    while (p > log && p[-1] != '\n') p--;
    const char *e = strchr(p, '\n');
    printf("    caught: %.*s\n", (int)(e ? e - p : (long)strlen(p)), p);
}

/* fn(bug) must die with both needles in its output (needle2 may be NULL) */
static void expect_caught(void (*fn)(int), int bug, const char *what, const char *needle, const char *needle2) {
    static char log[1 << 16];
    int died = emu_child(fn, bug, log, sizeof log);
    int named = strstr(log, needle) && (!needle2 || strstr(log, needle2));
    CHECK(died == 1 && named, "%s: the emulator did not report it (died %d, output: %.2000s)", what, died, log);
    if (died == 1 && named) emu_print_line(log, needle);
}
/* fn(0), the correct form, must run clean */
static void expect_clean(void (*fn)(int), const char *what) {
    static char log[1 << 16];
    int died = emu_child(fn, 0, log, sizeof log);
    CHECK(died == 0, "%s (correct form): the emulator objected: %.2000s", what, log);
}

static int all_nan(const float *x, int n) {
    for (int i = 0; i < n; i++)
        if (!isnan(x[i])) return 0;
    return 1;
}

/* cp.async lands at the wait_group that covers it: one group too few waited for reads NaN */
static void test_emu_catches_cp_async_wait(void) {
    float good[PLANTED_TILE], bad[PLANTED_TILE];
    planted_cp_async_wait(0, good);
    planted_cp_async_wait(1, bad);
    int good_ok = 1, first_ok = 1;
    for (int i = 0; i < PLANTED_TILE; i++) good_ok &= good[i] == (float)(i + 1);
    for (int i = 0; i < PLANTED_TILE / 2; i++) first_ok &= bad[i] == (float)(i + 1);
    CHECK(good_ok, "cp.async with wait_group 0: the tile was not copied");
    CHECK(first_ok, "wait_group 1: the first group had to land");
    CHECK(all_nan(bad + PLANTED_TILE / 2, PLANTED_TILE / 2),
          "wait_group 1 where 0 was needed: the second group's floats were read before they landed (%g)",
          bad[PLANTED_TILE / 2]);
    expect_clean(planted_cp_async_ldmatrix, "ldmatrix after wait_group 0");
    expect_caught(planted_cp_async_ldmatrix, 1, "ldmatrix after wait_group 1", "that a cp.async is still writing",
                  NULL);
}

static void test_emu_catches_misaligned_cp_async_ldmatrix(void) {
    expect_clean(planted_cp_async_misaligned, "cp.async, aligned");
    expect_caught(planted_cp_async_misaligned, 1, "16-byte cp.async, destination 8 bytes off",
                  "cp.async destination", "not 16-byte aligned");
    expect_caught(planted_cp_async_misaligned, 2, "16-byte cp.async, source 8 bytes off", "cp.async source",
                  "not 16-byte aligned");
    expect_caught(planted_cp_async_misaligned, 3, "8-byte cp.async 4 bytes off", "cp.async destination",
                  "not 8-byte aligned");
    expect_clean(planted_ldmatrix_misaligned, "ldmatrix, aligned");
    expect_caught(planted_ldmatrix_misaligned, 1, "ldmatrix row 8 bytes off", "ldmatrix row address",
                  "not 16-byte aligned");
    expect_caught(planted_ldmatrix_misaligned, 2, "ldmatrix of global memory", "ldmatrix row address",
                  "not in this block's shared memory");
}

static void test_emu_catches_misaligned_vector_access(void) {
    expect_clean(planted_vector_misaligned, "float4 load, aligned");
    expect_caught(planted_vector_misaligned, 1, "float4 load 4 bytes off 16", "misaligned address", "float4");
    expect_caught(planted_vector_misaligned, 2, "uint2 load (4 bf16) 2 bytes off 8", "misaligned address", "uint2");
}

static void test_emu_catches_big_dynamic_smem(void) {
    expect_clean(planted_big_dynamic_smem, "64 KiB with cudaFuncSetAttribute");
    expect_caught(planted_big_dynamic_smem, 1, "64 KiB without cudaFuncSetAttribute", "cudaFuncSetAttribute",
                  "cudaErrorInvalidValue");
    expect_caught(planted_big_dynamic_smem, 2, "64 KiB with the attribute at 60 KiB", "61440 allowed",
                  "cudaErrorInvalidValue");
    expect_caught(planted_big_dynamic_smem, 3, "40 KiB dynamic + 16 KiB static", "16384 bytes of static and 40960",
                  NULL);
}

static void test_emu_catches_stale_static_smem(void) {
    enum { NB = 6 };
    float in[32], out[2 * NB * 32];
    for (int i = 0; i < 32; i++) in[i] = (float)(i + 1);
    planted_stale_static_smem(0, in, out, NB);
    int good = 1;
    for (int i = 0; i < 2 * NB * 32; i++) good &= out[i] == in[i % 32];
    CHECK(good, "every block fills its own table: every block must read it back");
    planted_stale_static_smem(1, in, out, NB);
    for (int launch = 0; launch < 2; launch++) {
        const float *o = out + launch * NB * 32;
        CHECK(!memcmp(o, in, sizeof in), "launch %d: block 0 fills the table and must read it back", launch);
        CHECK(all_nan(o + 32, (NB - 1) * 32),
              "launch %d: blocks 1-%d read a static __shared__ table only block 0 wrote: it must read as NaN "
              "(got %g)", launch, NB - 1, o[32]);
    }
}

static void test_emu_catches_block_order(void) {
    enum { NB = 8 };
    int out[NB];
    for (int launch = 0; launch < 3; launch++) {
        planted_block_order(0, out, NB);
        int good = 1;
        for (int b = 0; b < NB; b++) good &= out[b] == b + 1;
        CHECK(good, "launch %d: blocks that each write their own result", launch);
        planted_block_order(1, out, NB);
        int chained = 1;
        for (int b = 0; b < NB; b++) chained &= out[b] == b + 1;
        CHECK(!chained, "launch %d: a block reading the previous block's result got it: blocks ran in grid order",
              launch);
    }
}

/* A checkpoint snapshot through the CUDA table, the state overwritten by the next step after
 * (wait_first) or before snapshot_wait; the snapshot's host side is pinned, as the checkpoint's
 * mirrors are. */
static void snapshot_case(int wait_first, const float *in, float *got, int n) {
    KernelOptions o = {"cuda", DTYPE_F32, 0, 0};
    char why[256];
    const KernelBackend *g = cuda_backend(&o, why, sizeof why);
    CHECK(g != NULL, "cuda_backend: %s", why);
    if (!g) return;
    float *d = up(in, n, CUDA_F32), *host = cuda_host_alloc((size_t)n * sizeof(float));
    g->snapshot_async(host, d, (size_t)n * sizeof(float));
    if (wait_first) g->snapshot_wait();
    cuda_zero(d, (size_t)n * sizeof(float)); /* the next step updates the state */
    g->snapshot_wait();
    memcpy(got, host, (size_t)n * sizeof(float));
    cuda_host_free(host);
    cuda_free(d);
}

/* not kernel bugs but the same kind: the host reads a copy's result before synchronizing, or
 * overwrites a copy's source before the copy is waited for */
static void test_emu_catches_unsynchronized_copy(void) {
    enum { N = 40 };
    float in[N], before[N], after[N];
    for (int i = 0; i < N; i++) in[i] = (float)i - 3.5f;
    planted_pinned_read(0, in, before, after, N);
    CHECK(!memcmp(before, in, sizeof in) && !memcmp(after, in, sizeof in), "synchronized: the data");
    planted_pinned_read(1, in, before, after, N);
    CHECK(all_nan(before, N), "a pinned buffer read before cuda_synchronize must not hold the copy yet (%g)", before[0]);
    CHECK(!memcmp(after, in, sizeof in), "after cuda_synchronize the copy has landed");
    snapshot_case(1, in, after, N);
    CHECK(!memcmp(after, in, sizeof in), "snapshot waited for before the state changes: the state");
    snapshot_case(0, in, after, N);
    CHECK(memcmp(after, in, sizeof in) != 0,
          "a snapshot whose source changed before snapshot_wait may copy the new values (the copy runs late)");
}

#endif
