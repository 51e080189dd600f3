/* device_comm.h: collectives over device buffers (kernels.h memory) for the parallel modes.
 * MPI reads the buffers themselves when it can (the CPU backend's device memory is host memory;
 * a CUDA-aware Open MPI reads GPU memory); otherwise each operation is staged through pinned host
 * memory: device -> host copy, the collective on the host copy, host -> device copy on completion.
 * Either way the result is the same bits (staging only moves bytes). Same semantics and return
 * convention as comm.h (0, or -1 with the reason recorded). */
#ifndef MYRIAD_PARALLEL_DEVICE_COMM_H
#define MYRIAD_PARALLEL_DEVICE_COMM_H

#include <stddef.h>

#include "comm/comm.h"

/* 1 when buffers go to MPI directly (no staging), decided once per process. */
int dcomm_direct(void);

int dcomm_all_reduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op); /* in place */
int dcomm_reduce_scatter(Comm *c, const void *send, void *recv, size_t recvcount, CommDtype dt, CommOp op);
int dcomm_all_gather(Comm *c, const void *send, void *recv, size_t sendcount, CommDtype dt);
int dcomm_all_to_all_v(Comm *c, const void *send, const size_t *sendcounts, const size_t *sdispls, void *recv,
                       const size_t *recvcounts, const size_t *rdispls, CommDtype dt);

/* Nonblocking, in place on buf (device): all-reduce of count elements; reduce-scatter whose
 * result lands at buf + rank * recvcount; all-gather of the piece at buf + rank * sendcount. */
typedef struct DevRequest DevRequest;
int dcomm_iall_reduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op, DevRequest **req);
int dcomm_ireduce_scatter(Comm *c, void *buf, size_t recvcount, CommDtype dt, CommOp op, DevRequest **req);
int dcomm_iall_gather(Comm *c, void *buf, size_t sendcount, CommDtype dt, DevRequest **req);
/* As comm_wait / comm_test; the result is in device memory when they report completion. */
int dcomm_wait(DevRequest **req);
int dcomm_test(DevRequest **req, int *done);

#endif
