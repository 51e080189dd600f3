/* device_guard.h: the CPU backend's rehearsal of device memory (device_guard.c). Internal to
 * src/kernels/ (dispatch.c, cpu_stream.c). */
#ifndef MYRIAD_KERNELS_DEVICE_GUARD_H
#define MYRIAD_KERNELS_DEVICE_GUARD_H

#include <stddef.h>
#include <stdint.h>

/* MYRIAD_DEVICE_GUARD: unset or 0: off; 1 (any other value): GUARD_CLOSED; strict: GUARD_STRICT. */
enum { GUARD_OFF = 0, GUARD_CLOSED = 1, GUARD_STRICT = 2 };
int guard_requested(void);           /* the mode MYRIAD_DEVICE_GUARD asks for */

/* GUARD_CLOSED: every allocation its own mapping, PROT_NONE except while a kernel or copy runs. */
void *guard_alloc(size_t bytes);     /* zeroed; inaccessible while memory is closed; NULL on failure */
void guard_free(void *p);
void guard_open(void);               /* device memory readable and writable by this process */
void guard_close(void);

/* GUARD_STRICT: device pointers lie in an address range that is never accessible (PROT_NONE, from
 * any thread, at any time); the device (kernels, copies, and the transports the dispatcher hands
 * addresses to) reaches the same bytes through a second mapping at a fixed offset. */
void *guard_strict_alloc(size_t bytes); /* zeroed; NULL when the arena is full */
void guard_strict_free(void *p);
extern uintptr_t guard_host_base;    /* the inaccessible range handed out as device pointers */
extern uintptr_t guard_dev_base;     /* where the device reaches it */
extern size_t guard_arena_bytes;     /* 0 unless strict */
/* The device's address of p (p itself when p is not strict-guarded device memory). */
static inline void *guard_addr(const void *p) {
    uintptr_t off = (uintptr_t)p - guard_host_base;
    return off < guard_arena_bytes ? (void *)(guard_dev_base + off) : (void *)(uintptr_t)p;
}

/* Checkpoint snapshots as the slowest copy engine would run them: snapshot_async only queues the
 * copy and snapshot_wait does it (from whichever thread waits first), so a reader that skips the
 * wait sees stale bytes and an update made before the wait changes what is saved: the tests
 * catch both orderings a GPU's side stream would get wrong only now and then. (Strict mode: the
 * dispatcher passes the device's address.) */
void guard_snapshot_async(void *host, const void *dev, size_t bytes);
void guard_snapshot_wait(void);

#endif
