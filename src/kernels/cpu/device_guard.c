/* device_guard.c: the CPU backend's device memory made to behave like a GPU's to the host.
 *
 * MYRIAD_DEVICE_GUARD=1: every device allocation is its own mapping, kept PROT_NONE except while
 * a kernel or a copy function (kernels.h) runs, so host code that reads or writes a device buffer
 * directly (instead of dev_to_host / host_to_dev) faults, and MPI can no longer read device
 * buffers, so the staging paths a GPU needs run on the CPU. Opening is counted (nested and from
 * several threads: the checkpoint threads copy while the main thread computes), so memory closes
 * only when the last user leaves; while it is open, any thread could touch it unnoticed.
 *
 * MYRIAD_DEVICE_GUARD=strict: no such window. Device pointers are addresses in a reserved range
 * that is PROT_NONE for the life of the process; the same bytes live in a second mapping at a
 * fixed offset, and only the dispatcher translates a device pointer into it, for a kernel, a copy,
 * or a transport library that moves device memory itself (dev_transport_address: a CUDA-aware
 * MPI, NCCL). So any other access, from any thread at any time, faults, and a fault names the
 * device address. Neither mode is meant for speed; the tests run the training paths under both.
 * Checkpoint snapshots are deferred to their wait (device_guard.h says why). */
#include "kernels/cpu/device_guard.h"

#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    void *p;
    size_t len;
} Region;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Region *regions;
static size_t nregions, cap;
static int open_count;

int guard_requested(void) {
    const char *e = getenv("MYRIAD_DEVICE_GUARD");
    if (!e || !*e || !strcmp(e, "0")) return GUARD_OFF;
    return !strcmp(e, "strict") ? GUARD_STRICT : GUARD_CLOSED;
}

static size_t page_round(size_t bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes + page - 1) / page * page;
}

void *guard_alloc(size_t bytes) {
    size_t len = page_round(bytes ? bytes : 1);
    pthread_mutex_lock(&lock);
    /* fresh anonymous pages are zero; accessible now if memory is open */
    void *p = mmap(NULL, len, open_count ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        pthread_mutex_unlock(&lock);
        return NULL;
    }
    if (nregions == cap) {
        cap = cap ? 2 * cap : 256;
        regions = realloc(regions, cap * sizeof *regions);
    }
    regions[nregions++] = (Region){p, len};
    pthread_mutex_unlock(&lock);
    return p;
}

void guard_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nregions; i++)
        if (regions[i].p == p) {
            munmap(p, regions[i].len);
            regions[i] = regions[--nregions];
            break;
        }
    pthread_mutex_unlock(&lock);
}

static void protect_all(int prot) {
    for (size_t i = 0; i < nregions; i++) mprotect(regions[i].p, regions[i].len, prot);
}

void guard_open(void) {
    pthread_mutex_lock(&lock);
    if (open_count++ == 0) protect_all(PROT_READ | PROT_WRITE);
    pthread_mutex_unlock(&lock);
}

void guard_close(void) {
    pthread_mutex_lock(&lock);
    if (--open_count == 0) protect_all(PROT_NONE);
    pthread_mutex_unlock(&lock);
}

/* ---- strict: one reserved range, never accessible, mirrored by the device's mapping ---- */

#define ARENA_BYTES ((size_t)64 << 30) /* address space only: pages exist once the device writes them */

uintptr_t guard_host_base, guard_dev_base;
size_t guard_arena_bytes;

typedef struct {
    size_t off, len;
} Extent;
static Extent *free_ext, *used_ext; /* free extents sorted by offset; live blocks unsorted */
static size_t nfree, free_cap, nused, used_cap;

static void push(Extent **a, size_t *n, size_t *capacity, size_t at, Extent e) {
    if (*n == *capacity) {
        *capacity = *capacity ? 2 * *capacity : 64;
        *a = realloc(*a, *capacity * sizeof **a);
    }
    memmove(*a + at + 1, *a + at, (*n - at) * sizeof **a);
    (*a)[at] = e;
    (*n)++;
}

static struct sigaction previous[2]; /* SIGSEGV, SIGBUS as they were (Open MPI prints a backtrace) */

/* A fault on the inaccessible range: say what it was; then, whatever it was, the handler that
 * was there before gets the signal (returning re-runs the access). */
static void on_fault(int sig, siginfo_t *si, void *uctx) {
    (void)uctx;
    uintptr_t a = (uintptr_t)si->si_addr;
    if (a - guard_host_base < guard_arena_bytes) {
        char msg[256];
        int k = snprintf(msg, sizeof msg,
                         "myriad: host code touched device memory at %p (MYRIAD_DEVICE_GUARD=strict: only kernels, "
                         "the copy functions and transports given dev_transport_address may); where:\n",
                         si->si_addr);
        if (write(2, msg, (size_t)k) < 0) {}
        void *frames[32];
        backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
    }
    sigaction(sig, &previous[sig == SIGBUS], NULL);
}

static int arena_init(void) {
    void *h = mmap(NULL, ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (h == MAP_FAILED) return -1;
    void *d = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (d == MAP_FAILED) {
        munmap(h, ARENA_BYTES);
        return -1;
    }
    guard_host_base = (uintptr_t)h;
    guard_dev_base = (uintptr_t)d;
    guard_arena_bytes = ARENA_BYTES;
    push(&free_ext, &nfree, &free_cap, 0, (Extent){0, ARENA_BYTES});
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    void *frame;
    backtrace(&frame, 1); /* loads what backtrace needs now, not inside the handler */
    sigaction(SIGSEGV, &sa, &previous[0]);
    sigaction(SIGBUS, &sa, &previous[1]);
    return 0;
}

void *guard_strict_alloc(size_t bytes) {
    size_t len = page_round(bytes ? bytes : 1);
    void *p = NULL;
    pthread_mutex_lock(&lock);
    if (guard_arena_bytes || arena_init() == 0)
        for (size_t i = 0; i < nfree; i++) { /* first fit */
            if (free_ext[i].len < len) continue;
            size_t off = free_ext[i].off;
            free_ext[i].off += len;
            free_ext[i].len -= len;
            if (!free_ext[i].len) memmove(free_ext + i, free_ext + i + 1, (--nfree - i) * sizeof *free_ext);
            push(&used_ext, &nused, &used_cap, nused, (Extent){off, len});
            p = (void *)(guard_host_base + off);
            break;
        }
    pthread_mutex_unlock(&lock);
    return p; /* never-written or released pages read as zero */
}

void guard_strict_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&lock);
    size_t off = (uintptr_t)p - guard_host_base;
    for (size_t i = 0; i < nused; i++) {
        if (used_ext[i].off != off) continue;
        Extent e = used_ext[i];
        used_ext[i] = used_ext[--nused];
        madvise((void *)(guard_dev_base + e.off), e.len, MADV_DONTNEED); /* release; zero when reused */
        size_t at = 0;
        while (at < nfree && free_ext[at].off < e.off) at++;
        push(&free_ext, &nfree, &free_cap, at, e);
        if (at + 1 < nfree && free_ext[at].off + free_ext[at].len == free_ext[at + 1].off) { /* merge right */
            free_ext[at].len += free_ext[at + 1].len;
            memmove(free_ext + at + 1, free_ext + at + 2, (nfree - at - 2) * sizeof *free_ext);
            nfree--;
        }
        if (at > 0 && free_ext[at - 1].off + free_ext[at - 1].len == free_ext[at].off) { /* merge left */
            free_ext[at - 1].len += free_ext[at].len;
            memmove(free_ext + at, free_ext + at + 1, (nfree - at - 1) * sizeof *free_ext);
            nfree--;
        }
        break;
    }
    pthread_mutex_unlock(&lock);
}

/* ---- deferred snapshots ---- */

typedef struct {
    void *host;
    const void *dev;
    size_t bytes;
} Snapshot;

static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;
static Snapshot *snaps;
static size_t nsnaps, snap_cap;

void guard_snapshot_async(void *host, const void *dev, size_t bytes) {
    pthread_mutex_lock(&snap_lock);
    if (nsnaps == snap_cap) {
        snap_cap = snap_cap ? 2 * snap_cap : 16;
        snaps = realloc(snaps, snap_cap * sizeof *snaps);
    }
    snaps[nsnaps++] = (Snapshot){host, dev, bytes};
    pthread_mutex_unlock(&snap_lock);
}

/* Held while copying: a second waiter returns only once every queued copy has landed. */
void guard_snapshot_wait(void) {
    pthread_mutex_lock(&snap_lock);
    if (nsnaps) {
        guard_open();
        for (size_t i = 0; i < nsnaps; i++) memcpy(snaps[i].host, snaps[i].dev, snaps[i].bytes);
        guard_close();
        nsnaps = 0;
    }
    pthread_mutex_unlock(&snap_lock);
}
