/* device_guard.c: MYRIAD_DEVICE_GUARD=1 makes the CPU backend's device memory behave like a
 * GPU's to the host: every device allocation is its own mapping, kept PROT_NONE except while a
 * kernel or a copy function (kernels.h) runs, so any host code that reads or writes a device
 * buffer directly (instead of dev_to_host / host_to_dev) faults at once, and MPI can no longer
 * read device buffers, so the staging paths a GPU needs run on the CPU. The tests run the
 * training paths under it (tests/test_device.sh); it is slow and meant only for that.
 * Opening is counted (nested and from several threads: the checkpoint threads copy while the
 * main thread computes), so memory closes only when the last user leaves. Checkpoint snapshots
 * are deferred to their wait (device_guard.h says why). */
#include "kernels/cpu/device_guard.h"

#include <pthread.h>
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
    return e && *e && strcmp(e, "0") != 0;
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
