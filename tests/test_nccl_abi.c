/* test_nccl_abi.c: our transcription of NCCL's ABI (src/comm/nccl_lib.h) against the toolkit's
 * nccl.h where it is installed (the constants and the id's size, at compile time), and the
 * dlopen'd symbol table against the real library (every symbol found, the version it reports)
 * and against the emulation the tests use (build/tests/libnccl-emu.so). */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/nccl_lib.h"
#include "test.h"
#include "util/error.h"

#ifdef MYRIAD_NCCL_H
#include MYRIAD_NCCL_H
_Static_assert(sizeof(NcclUniqueId) == sizeof(ncclUniqueId), "ncclUniqueId size");
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(NCCL_SUCCESS, ncclSuccess) && SAME(NCCL_UNHANDLED_CUDA_ERROR, ncclUnhandledCudaError) &&
                   SAME(NCCL_SYSTEM_ERROR, ncclSystemError) && SAME(NCCL_INTERNAL_ERROR, ncclInternalError) &&
                   SAME(NCCL_INVALID_ARGUMENT, ncclInvalidArgument) && SAME(NCCL_INVALID_USAGE, ncclInvalidUsage) &&
                   SAME(NCCL_REMOTE_ERROR, ncclRemoteError) && SAME(NCCL_IN_PROGRESS, ncclInProgress),
               "ncclResult_t");
_Static_assert(SAME(NCCL_SUM, ncclSum) && SAME(NCCL_PROD, ncclProd) && SAME(NCCL_MAX, ncclMax) &&
                   SAME(NCCL_MIN, ncclMin) && SAME(NCCL_AVG, ncclAvg), "ncclRedOp_t");
_Static_assert(SAME(NCCL_FLOAT32, ncclFloat32) && SAME(NCCL_BFLOAT16, ncclBfloat16), "ncclDataType_t");
_Static_assert(sizeof(ncclResult_t) == sizeof(NcclResult) && sizeof(ncclDataType_t) == sizeof(NcclDataType) &&
                   sizeof(ncclRedOp_t) == sizeof(NcclRedOp), "enum sizes");
#endif

static void test_abi_matches_nccl_h(void) {
#ifdef MYRIAD_NCCL_H
    CHECK(1, "checked at compile time");
#endif
}

static int real_library_present(void) {
    return !access("/usr/local/cuda/lib64/libnccl.so.2", R_OK) ||
           !access("/usr/local/cuda/targets/x86_64-linux/lib/libnccl.so.2", R_OK) ||
           !access("/usr/lib/x86_64-linux-gnu/libnccl.so.2", R_OK);
}

/* In a child (nccl_load loads once per process). */
static int load_in_child(const char *lib, int *version, int *emulation) {
    int fd[2];
    if (pipe(fd)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        if (lib) setenv("MYRIAD_NCCL_LIB", lib, 1);
        else unsetenv("MYRIAD_NCCL_LIB");
        int out[3] = {nccl_load(), nccl_version(), nccl_is_emulation()};
        if (out[0]) fprintf(stderr, "  %s\n", myr_last_error());
        if (write(fd[1], out, sizeof out) != sizeof out) _exit(2);
        _exit(0);
    }
    close(fd[1]);
    int out[3] = {-1, 0, 0};
    if (read(fd[0], out, sizeof out) != sizeof out) out[0] = -1;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    *version = out[1], *emulation = out[2];
    return out[0];
}

static void test_real_library_loads(void) {
    int v, emu;
    CHECK(load_in_child(NULL, &v, &emu) == 0, "libnccl.so.2 is installed but did not load");
    CHECK(!emu && v >= 21000, "version %d, emulation %d", v, emu);
#ifdef MYRIAD_NCCL_H
    CHECK(v == NCCL_VERSION_CODE, "the library says %d, its header %d", v, NCCL_VERSION_CODE);
#endif
}

static void test_emulation_loads(void) {
    int v, emu;
    CHECK(load_in_child("build/tests/libnccl-emu.so", &v, &emu) == 0 && emu, "emulation: rc, emulation %d", emu);
    CHECK(load_in_child("/nonexistent/libnccl.so.2", &v, &emu) == -1, "a bad MYRIAD_NCCL_LIB must fail");
}

int main(void) {
#ifdef MYRIAD_NCCL_H
    RUN(test_abi_matches_nccl_h);
#else
    SKIP(test_abi_matches_nccl_h, "no nccl.h installed");
#endif
    if (real_library_present()) RUN(test_real_library_loads);
    else SKIP(test_real_library_loads, "no libnccl.so.2 installed");
    RUN(test_emulation_loads);
    return TEST_SUMMARY();
}
