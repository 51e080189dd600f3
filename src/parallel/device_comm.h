/* device_comm.h: collectives over device buffers (kernels.h memory) for the parallel modes, the
 * one interface the trainer uses for them, whatever moves the bytes. Transports (docs/COMM.md,
 * "Device buffers"), chosen once per process by dcomm_setup:
 *   mpi, staged  each operation copies device -> pinned host, runs the MPI collective on the host
 *                copy, copies back on completion (a GPU with an MPI that cannot read its memory);
 *   mpi, direct  MPI is handed the device buffers (the CPU backend; a CUDA-aware Open MPI per
 *                MPIX_Query_cuda_support()); the comm layer then touches them only through
 *                kernels.h (comm_device_buffers): no host code reads device memory;
 *   nccl         libnccl, loaded at run time (src/comm/nccl_lib.h): one communicator per group,
 *                bootstrapped over MPI; operations queued on the backend's communication stream,
 *                ordered after the compute stream's work by an event, and the compute stream
 *                ordered after them by another, so a reduction overlaps the backward that
 *                follows it; timeouts and NCCL's asynchronous errors abort the communicator and
 *                fail with comm.h's one-line report (device_comm_nccl.c).
 * Semantics and in-place conventions are comm.h's (NCCL's); 0, or -1 with the reason recorded.
 * The staged and direct forms give the same bits (staging only moves bytes); NCCL reduces in its
 * own order (bf16: NCCL's bf16 arithmetic, docs/COMM.md). */
#ifndef MYRIAD_PARALLEL_DEVICE_COMM_H
#define MYRIAD_PARALLEL_DEVICE_COMM_H

#include <stddef.h>

#include "comm/comm.h"

typedef enum { DCOMM_MPI_STAGED = 0, DCOMM_MPI_DIRECT = 1, DCOMM_NCCL = 2 } DcommTransport;

/* Choose the transport for this process from the comm options (--comm) and the selected kernel
 * backend: after comm_init and kernels_select, before the first operation. Loads libnccl for
 * --comm nccl (and for the default on a GPU, which falls back to MPI when it does not load).
 * `desc` gets a phrase for the run's first line ("nccl 2.28.9", "mpi (device buffers direct:
 * CUDA-aware)", ...). -1 with the reason (e.g. --comm nccl and no libnccl). Called implicitly
 * with the defaults by the first operation if nobody called it. */
int dcomm_setup(char *desc, size_t desc_size);
DcommTransport dcomm_transport(void);
/* 1 when buffers go to MPI or NCCL directly (no staging). */
int dcomm_direct(void);

int dcomm_all_reduce(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, CommOp op);
int dcomm_reduce_scatter(Comm *c, const void *send, void *recv, size_t recvcount, CommDtype dt, CommOp op);
int dcomm_all_gather(Comm *c, const void *send, void *recv, size_t sendcount, CommDtype dt);
int dcomm_all_to_all(Comm *c, const void *send, void *recv, size_t count_per_rank, CommDtype dt);
int dcomm_all_to_all_v(Comm *c, const void *send, const size_t *sendcounts, const size_t *sdispls, void *recv,
                       const size_t *recvcounts, const size_t *rdispls, CommDtype dt);
int dcomm_broadcast(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, int root);

/* Nonblocking, in place on buf (device): all-reduce of count elements; reduce-scatter whose
 * result lands at buf + rank * recvcount; all-gather of the piece at buf + rank * sendcount;
 * point-to-point. */
typedef struct DevRequest DevRequest;
int dcomm_iall_reduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op, DevRequest **req);
int dcomm_ireduce_scatter(Comm *c, void *buf, size_t recvcount, CommDtype dt, CommOp op, DevRequest **req);
int dcomm_iall_gather(Comm *c, void *buf, size_t sendcount, CommDtype dt, DevRequest **req);
int dcomm_isend(Comm *c, const void *buf, size_t count, CommDtype dt, int peer, DevRequest **req);
int dcomm_irecv(Comm *c, void *buf, size_t count, CommDtype dt, int peer, DevRequest **req);
/* As comm_wait / comm_test; the result is in device memory, ordered before the compute stream's
 * later work, when they report completion. */
int dcomm_wait(DevRequest **req);
int dcomm_test(DevRequest **req, int *done);

/* Point-to-point operations between dcomm_group_start and dcomm_group_end are posted together
 * (NCCL's group semantics: a send and a receive of one exchange never wait for each other);
 * their requests complete after the end. Nesting is allowed; the MPI transports post at once. */
int dcomm_group_start(void);
int dcomm_group_end(void);

#endif
