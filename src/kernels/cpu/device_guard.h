/* device_guard.h: the CPU backend's rehearsal of device memory (device_guard.c). Internal to
 * src/kernels/ (dispatch.c). */
#ifndef MYRIAD_KERNELS_DEVICE_GUARD_H
#define MYRIAD_KERNELS_DEVICE_GUARD_H

#include <stddef.h>

int guard_requested(void);           /* MYRIAD_DEVICE_GUARD is set (and not 0) */
void *guard_alloc(size_t bytes);     /* zeroed; inaccessible while memory is closed; NULL on failure */
void guard_free(void *p);
void guard_open(void);               /* device memory readable and writable by this process */
void guard_close(void);
/* Checkpoint snapshots as the slowest copy engine would run them: snapshot_async only queues the
 * copy and snapshot_wait does it (from whichever thread waits first), so a reader that skips the
 * wait sees stale bytes and an update made before the wait changes what is saved: the tests
 * catch both orderings a GPU's side stream would get wrong only now and then. */
void guard_snapshot_async(void *host, const void *dev, size_t bytes);
void guard_snapshot_wait(void);

#endif
