/* cpu_stream.c: the CPU backend's compute and communication streams and its events
 * (cpu_stream.h says what they emulate and why). */
#define _GNU_SOURCE
#include "kernels/cpu/cpu_stream.h"

#include <sched.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"

struct DevEvent {
    CpuStream *s; /* NULL until recorded */
    uint64_t mark; /* compute: the dispatch count; communication: the work queued, when recorded */
};

static CpuStream streams[2];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void create(void) {
    for (int k = 0; k < 2; k++) {
        streams[k].magic = CPU_STREAM_MAGIC;
        streams[k].kind = k;
        pthread_mutex_init(&streams[k].lock, NULL);
        streams[k].compute_ops = cpu_dispatch_count();
        streams[k].owner = pthread_self();
    }
}

static CpuStream *stream(DevStream s) {
    pthread_once(&once, create);
    return &streams[s == STREAM_COMM];
}

void *cpu_stream_handle(DevStream s) { return stream(s); }

DevEvent *cpu_event_create(void) { return calloc(1, sizeof(DevEvent)); }
void cpu_event_destroy(DevEvent *e) { free(e); }

void cpu_event_record(DevEvent *e, DevStream s) {
    CpuStream *st = stream(s);
    e->s = st;
    pthread_mutex_lock(&st->lock);
    e->mark = st->kind ? st->queued : *st->compute_ops;
    pthread_mutex_unlock(&st->lock);
}

/* Run s's work up to `mark`, blocking (finish) or not (poll); 1 when it is all done. Only the owner
 * thread runs work; another thread only looks. */
static int run_until(CpuStream *s, uint64_t mark, int block) {
    if (!pthread_equal(pthread_self(), s->owner)) {
        for (;;) {
            pthread_mutex_lock(&s->lock);
            int done = s->done >= mark;
            pthread_mutex_unlock(&s->lock);
            if (done || !block) return done;
            sched_yield();
        }
    }
    for (;;) {
        pthread_mutex_lock(&s->lock);
        CpuWork *w = s->done < mark ? s->head : NULL;
        pthread_mutex_unlock(&s->lock);
        if (!w) return 1;
        if (block) w->finish(w->arg);
        else if (!w->poll(w->arg)) return 0;
        pthread_mutex_lock(&s->lock);
        s->head = w->next;
        if (!s->head) s->tail = NULL;
        s->done++;
        pthread_mutex_unlock(&s->lock);
        if (w->release) w->release(w->arg);
    }
}

void cpu_stream_wait_event(DevStream s, DevEvent *e) {
    CpuStream *st = stream(s);
    if (!e->s || e->s == st) return; /* a stream is ordered after its own work */
    if (!e->s->kind) {                /* communication after compute: the compute work is done */
        if (e->mark > st->waited_compute) st->waited_compute = e->mark;
        return;
    }
    run_until(e->s, e->mark, 1); /* compute after communication: its kernels run at once, so now */
}

int cpu_event_query(DevEvent *e) { return !e->s || !e->s->kind || run_until(e->s, e->mark, 0); }

void cpu_event_sync(DevEvent *e) {
    if (e->s && e->s->kind) run_until(e->s, e->mark, 1);
}
