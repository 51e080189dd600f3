/* nccl_lib.h: the part of NCCL's C API myriad uses, as a table of functions loaded at run time
 * with dlopen (nccl_lib.c): the binary neither links nor needs libnccl, and a test library with
 * the same symbols can stand in for it (MYRIAD_NCCL_LIB=build/tests/libnccl-emu.so, the
 * emulation over MPI: tests/nccl_emu.c). The types and constants are NCCL's ABI (nccl.h of NCCL
 * 2.x, unchanged since 2.0 for these; tests/test_nccl_abi.c checks them against the toolkit's
 * nccl.h where it is installed), under names of our own so that this header and nccl.h never
 * clash. Streams are cudaStream_t, passed as void *. */
#ifndef MYRIAD_COMM_NCCL_LIB_H
#define MYRIAD_COMM_NCCL_LIB_H

#include <stddef.h>

typedef struct NcclCommOpaque *NcclComm;           /* ncclComm_t */
typedef struct { char internal[128]; } NcclUniqueId; /* ncclUniqueId (NCCL_UNIQUE_ID_BYTES) */
typedef int NcclResult;                              /* ncclResult_t */
typedef int NcclDataType;                            /* ncclDataType_t */
typedef int NcclRedOp;                               /* ncclRedOp_t */

enum { /* ncclResult_t */
    NCCL_SUCCESS = 0, NCCL_UNHANDLED_CUDA_ERROR = 1, NCCL_SYSTEM_ERROR = 2, NCCL_INTERNAL_ERROR = 3,
    NCCL_INVALID_ARGUMENT = 4, NCCL_INVALID_USAGE = 5, NCCL_REMOTE_ERROR = 6, NCCL_IN_PROGRESS = 7
};
enum { NCCL_SUM = 0, NCCL_PROD = 1, NCCL_MAX = 2, NCCL_MIN = 3, NCCL_AVG = 4 }; /* ncclRedOp_t */
enum { NCCL_FLOAT32 = 7, NCCL_BFLOAT16 = 9 };                                /* ncclDataType_t */

typedef struct {
    NcclResult (*GetVersion)(int *version);
    NcclResult (*GetUniqueId)(NcclUniqueId *id);
    NcclResult (*CommInitRank)(NcclComm *comm, int nranks, NcclUniqueId id, int rank);
    NcclResult (*CommDestroy)(NcclComm comm);
    NcclResult (*CommAbort)(NcclComm comm);
    NcclResult (*CommGetAsyncError)(NcclComm comm, NcclResult *async_error);
    const char *(*GetErrorString)(NcclResult result);
    const char *(*GetLastError)(NcclComm comm); /* NCCL >= 2.13; NULL when absent */
    NcclResult (*AllReduce)(const void *send, void *recv, size_t count, NcclDataType dt, NcclRedOp op, NcclComm comm,
                            void *stream);
    NcclResult (*ReduceScatter)(const void *send, void *recv, size_t recvcount, NcclDataType dt, NcclRedOp op,
                                NcclComm comm, void *stream);
    NcclResult (*AllGather)(const void *send, void *recv, size_t sendcount, NcclDataType dt, NcclComm comm,
                            void *stream);
    NcclResult (*Broadcast)(const void *send, void *recv, size_t count, NcclDataType dt, int root, NcclComm comm,
                            void *stream);
    NcclResult (*Send)(const void *send, size_t count, NcclDataType dt, int peer, NcclComm comm, void *stream);
    NcclResult (*Recv)(void *recv, size_t count, NcclDataType dt, int peer, NcclComm comm, void *stream);
    NcclResult (*GroupStart)(void);
    NcclResult (*GroupEnd)(void);
} NcclLib;

/* The loaded table (valid after nccl_load returned 0). */
extern NcclLib nccl;

/* Load libnccl once per process: MYRIAD_NCCL_LIB (a path) if set, else libnccl.so.2 through the
 * loader, then the CUDA toolkit's lib directories. 0, or -1 with a one-line reason naming what
 * was tried and how to fix it. */
int nccl_load(void);
const char *nccl_library(void);    /* the path or name that loaded */
int nccl_version(void);            /* e.g. 22809 for 2.28.9 */
/* The library is myriad's emulation (tests/nccl_emu.c exports myriadNcclEmulation): it moves the
 * CPU backend's memory, not a GPU's. */
int nccl_is_emulation(void);

#endif
