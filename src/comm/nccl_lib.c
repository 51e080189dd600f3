/* nccl_lib.c: libnccl loaded at run time (nccl_lib.h). Not linked, for the reason cuBLASLt is not
 * (docs/GPU.md): a machine without it still runs the binary, and the tests swap in the
 * emulation by path. */
#include "comm/nccl_lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

NcclLib nccl;
static void *handle;
static char loaded_from[512];
static int version, emulation, tried;
static char failure[1024];

const char *nccl_library(void) { return loaded_from; }
int nccl_version(void) { return version; }
int nccl_is_emulation(void) { return emulation; }

int nccl_load(void) {
    if (handle) return 0;
    if (tried) return myr_error("%s", failure);
    tried = 1;
    const char *env = getenv("MYRIAD_NCCL_LIB");
    const char *candidates[] = {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
                                "/usr/local/cuda/targets/x86_64-linux/lib/libnccl.so.2",
                                "/usr/lib/x86_64-linux-gnu/libnccl.so.2"};
    char why[512] = "";
    if (env && *env) {
        handle = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!handle) {
            snprintf(failure, sizeof failure, "cannot load NCCL from MYRIAD_NCCL_LIB=%s: %s", env, dlerror());
            return myr_error("%s", failure);
        }
        snprintf(loaded_from, sizeof loaded_from, "%s", env);
    } else {
        for (size_t i = 0; i < sizeof candidates / sizeof *candidates && !handle; i++) {
            handle = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
            if (handle) snprintf(loaded_from, sizeof loaded_from, "%s", candidates[i]);
            else if (!why[0]) snprintf(why, sizeof why, "%s", dlerror());
        }
        if (!handle) {
            snprintf(failure, sizeof failure,
                     "cannot load NCCL (libnccl.so.2: %s): install NCCL (the nvidia-nccl package, or NCCL from the "
                     "CUDA toolkit), point MYRIAD_NCCL_LIB at libnccl.so.2, or use --comm mpi", why);
            return myr_error("%s", failure);
        }
    }
    struct {
        void **slot;
        const char *name;
        int optional;
    } syms[] = {
        {(void **)&nccl.GetVersion, "ncclGetVersion", 0},
        {(void **)&nccl.GetUniqueId, "ncclGetUniqueId", 0},
        {(void **)&nccl.CommInitRank, "ncclCommInitRank", 0},
        {(void **)&nccl.CommDestroy, "ncclCommDestroy", 0},
        {(void **)&nccl.CommAbort, "ncclCommAbort", 0},
        {(void **)&nccl.CommGetAsyncError, "ncclCommGetAsyncError", 0},
        {(void **)&nccl.GetErrorString, "ncclGetErrorString", 0},
        {(void **)&nccl.GetLastError, "ncclGetLastError", 1},
        {(void **)&nccl.AllReduce, "ncclAllReduce", 0},
        {(void **)&nccl.ReduceScatter, "ncclReduceScatter", 0},
        {(void **)&nccl.AllGather, "ncclAllGather", 0},
        {(void **)&nccl.Broadcast, "ncclBroadcast", 0},
        {(void **)&nccl.Send, "ncclSend", 0},
        {(void **)&nccl.Recv, "ncclRecv", 0},
        {(void **)&nccl.GroupStart, "ncclGroupStart", 0},
        {(void **)&nccl.GroupEnd, "ncclGroupEnd", 0},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
        *syms[i].slot = dlsym(handle, syms[i].name);
        if (!*syms[i].slot && !syms[i].optional) {
            snprintf(failure, sizeof failure, "%s has no %s: it is not NCCL 2.7 or newer (use --comm mpi, or point "
                     "MYRIAD_NCCL_LIB at a newer libnccl.so.2)", loaded_from, syms[i].name);
            dlclose(handle);
            handle = NULL;
            memset(&nccl, 0, sizeof nccl);
            return myr_error("%s", failure);
        }
    }
    emulation = dlsym(handle, "myriadNcclEmulation") != NULL;
    if (nccl.GetVersion(&version) != NCCL_SUCCESS) version = 0;
    return 0;
}
