/* cpu_stream.h: the CPU backend's streams and events (kernels.h, "streams and events"), and the
 * contract an emulated device library relies on (tests/nccl_emu.c, the NCCL emulation): on the
 * CPU backend the handle dev_stream_handle() returns is a CpuStream, and such a library queues
 * its work on it with the inline functions below (no symbol of the binary is needed).
 *
 * The compute stream runs every kernel and copy at once, on the calling thread; it only counts
 * them (compute_ops, the owner thread's dispatch count). The communication stream holds work
 * that a library queued and runs it, in order, only when something waits for an event recorded
 * after it: dev_event_query polls it (work done on the network lands then), dev_event_sync and
 * dev_stream_wait_event(STREAM_COMPUTE, e) finish it. So a consumer that is not ordered after
 * the communication stream reads stale bytes, as it would on a GPU; and the library can check,
 * before it reads a buffer, that the stream has waited for an event recorded after the compute
 * stream's latest work (cpu_stream_after_compute). Work runs only on the thread that created the
 * streams (MPI is funneled); other threads see only what has already completed. */
#ifndef MYRIAD_KERNELS_CPU_STREAM_H
#define MYRIAD_KERNELS_CPU_STREAM_H

#include <pthread.h>
#include <stdint.h>

#define CPU_STREAM_MAGIC 0x43505553u /* "CPUS" */

typedef struct CpuWork {
    int (*poll)(void *arg);    /* advance without blocking; 1 once done (results in place) */
    void (*finish)(void *arg); /* complete it, blocking */
    void (*release)(void *arg); /* after it is done and off the stream (may free the item); may be NULL */
    void *arg;
    struct CpuWork *next;
} CpuWork;

typedef struct CpuStream {
    uint32_t magic;
    int kind;                     /* 0: compute, 1: communication */
    pthread_mutex_t lock;         /* head/tail/queued/done */
    CpuWork *head, *tail;         /* queued and not done, in order */
    uint64_t queued, done;        /* work ever queued / done (done work is a prefix) */
    const uint64_t *compute_ops;  /* kernels and copies the owner thread has dispatched so far */
    uint64_t waited_compute;      /* *compute_ops as of the latest compute event this stream waited for */
    pthread_t owner;              /* the only thread that runs queued work */
} CpuStream;

/* Whether work queued on s now would be ordered after everything the compute stream has run. */
static inline int cpu_stream_after_compute(const CpuStream *s) { return s->waited_compute >= *s->compute_ops; }

/* Queue w on s; it runs when an event recorded after it is queried, waited for or synchronized. */
static inline void cpu_stream_enqueue(CpuStream *s, CpuWork *w) {
    pthread_mutex_lock(&s->lock);
    w->next = NULL;
    if (s->tail) s->tail->next = w;
    else s->head = w;
    s->tail = w;
    s->queued++;
    pthread_mutex_unlock(&s->lock);
}

#endif
