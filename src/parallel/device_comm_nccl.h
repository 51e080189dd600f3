/* device_comm_nccl.h: the NCCL transport behind device_comm.h (device_comm_nccl.c). Internal to
 * src/parallel/device_comm*.c. Each function that starts an operation returns its handle, or NULL
 * with the reason recorded (comm.h's one-line form). */
#ifndef MYRIAD_PARALLEL_DEVICE_COMM_NCCL_H
#define MYRIAD_PARALLEL_DEVICE_COMM_NCCL_H

#include <stddef.h>

#include "comm/comm.h"

typedef struct DncclOp DncclOp;

/* Load libnccl and check that it can move this backend's memory. 0, or -1 with why. */
int dnccl_setup(char *why, size_t why_size);

DncclOp *dnccl_all_reduce(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, CommOp op);
DncclOp *dnccl_reduce_scatter(Comm *c, const void *send, void *recv, size_t recvcount, CommDtype dt, CommOp op);
DncclOp *dnccl_all_gather(Comm *c, const void *send, void *recv, size_t sendcount, CommDtype dt);
DncclOp *dnccl_all_to_all_v(Comm *c, const void *send, const size_t *sendcounts, const size_t *sdispls, void *recv,
                            const size_t *recvcounts, const size_t *rdispls, CommDtype dt);
DncclOp *dnccl_broadcast(Comm *c, const void *send, void *recv, size_t count, CommDtype dt, int root);
DncclOp *dnccl_send(Comm *c, const void *buf, size_t count, CommDtype dt, int peer);
DncclOp *dnccl_recv(Comm *c, void *buf, size_t count, CommDtype dt, int peer);
int dnccl_group_start(void);
int dnccl_group_end(void);

/* The blocking form: the compute stream is ordered after op, the host does not wait (the
 * watchdog covers a hang); the handle is released. -1 (and nothing else) when op is NULL. */
int dnccl_run(DncclOp *op);
/* The host waits for op (answering arrival queries, watching the deadline and NCCL's
 * asynchronous errors), then orders the compute stream after it; releases the handle. */
int dnccl_wait(DncclOp *op);
/* Whether op is done (then as dnccl_wait, and *done = 1); the handle is released when done or failed. */
int dnccl_test(DncclOp *op, int *done);

#endif
