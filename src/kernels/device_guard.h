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

#endif
