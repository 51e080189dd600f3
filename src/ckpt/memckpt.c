/* memckpt.c: in-memory checkpoint copies as files on shared memory (see memckpt.h): naming,
 * the header, the write-then-rename commit, scans, verification and retention. */
#include "ckpt/memckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/crc32c.h"
#include "util/error.h"

/* header layout (little-endian): magic[8] version u32 rank u32 world u32 crc u32 step i64
 * layout u64 payload u64, zero padding, header CRC u32 at byte 60 over bytes 0..59 */
static const char MAGIC[8] = {'M', 'Y', 'R', 'M', 'E', 'M', 0, 1};
enum { MEM_VERSION = 1 };

uint64_t memckpt_hash(const char *s, uint64_t h) {
    if (!h) h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int mkdir_p(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0700) && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(buf, 0700) && errno != EEXIST ? -1 : 0;
}

void memckpt_job_dir(char *out, size_t n, uint64_t job) {
    const char *root = getenv("MYRIAD_SHM_DIR");
    if (!root || !*root) root = "/dev/shm";
    snprintf(out, n, "%s/myriad-%016llx", root, (unsigned long long)job);
}

int memckpt_dir(char *out, size_t n, uint64_t job, const char *host) {
    const char *root = getenv("MYRIAD_SHM_DIR");
    if (!root || !*root) root = "/dev/shm";
    char safe[128];
    size_t k = 0;
    for (const char *p = host; *p && k + 1 < sizeof safe; p++) /* a host name is one path component */
        safe[k++] = (*p == '/' || *p == ' ') ? '_' : *p;
    safe[k] = 0;
    snprintf(out, n, "%s/myriad-%016llx/%s", root, (unsigned long long)job, k ? safe : "host");
    if (mkdir_p(out))
        return myr_error("in-memory checkpoints: cannot create %s: %s (set MYRIAD_SHM_DIR to a writable "
                         "shared-memory directory)", out, strerror(errno));
    return 0;
}

static void name_of(char *out, size_t n, const char *dir, int rank, int64_t step, int tmp) {
    snprintf(out, n, tmp ? "%s/.r%05d-s%012lld.tmp" : "%s/r%05d-s%012lld.mem", dir, rank, (long long)step);
}

int memckpt_create(MemFile *f, const char *dir, int rank, int64_t step, uint64_t payload) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    name_of(f->tmp, sizeof f->tmp, dir, rank, step, 1);
    name_of(f->path, sizeof f->path, dir, rank, step, 0);
    f->bytes = MEMCKPT_HEADER + (size_t)payload;
    unlink(f->tmp); /* a leftover of a killed writer */
    f->fd = open(f->tmp, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (f->fd < 0) return myr_error("in-memory checkpoint: cannot create %s: %s", f->tmp, strerror(errno));
    /* posix_fallocate reserves the pages now, so a full /dev/shm fails here, not as SIGBUS later */
    int rc = posix_fallocate(f->fd, 0, (off_t)f->bytes);
    if (rc) {
        myr_error("in-memory checkpoint: cannot reserve %zu bytes in %s: %s (shared memory is full; free /dev/shm "
                  "or turn in-memory checkpoints off with --mem-ckpt-every 0)", f->bytes, f->tmp, strerror(rc));
        memckpt_close(f);
        return -1;
    }
    f->map = mmap(NULL, f->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        myr_error("in-memory checkpoint: cannot map %s: %s", f->tmp, strerror(errno));
        memckpt_close(f);
        return -1;
    }
    return 0;
}

int memckpt_recycle(MemFile *f, const char *dir, int rank, int64_t step) {
    char tmp[4096], path[4096];
    name_of(tmp, sizeof tmp, dir, rank, step, 1);
    name_of(path, sizeof path, dir, rank, step, 0);
    if (!f->map) return myr_error("in-memory checkpoint: %s is not mapped", f->path);
    /* out of sight first (a committed copy): from here a crash leaves only a temporary file,
     * never a torn copy; a temporary file (a leftover taken back) just takes the new name */
    const char *from = f->tmp[0] ? f->tmp : f->path;
    if (rename(from, tmp)) return myr_error("in-memory checkpoint: cannot rename %s: %s", from, strerror(errno));
    memset(f->map, 0, MEMCKPT_HEADER);
    snprintf(f->tmp, sizeof f->tmp, "%s", tmp);
    snprintf(f->path, sizeof f->path, "%s", path);
    return 0;
}

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

int memckpt_read_header(const unsigned char *p, MemHeader *h) {
    if (memcmp(p, MAGIC, 8)) return myr_error("not an in-memory checkpoint (bad magic)");
    if (get32(p + 60) != crc32c(p, 60)) return myr_error("header checksum mismatch");
    if (get32(p + 8) != MEM_VERSION) return myr_error("version %u, expected %d", get32(p + 8), MEM_VERSION);
    h->rank = (int)get32(p + 12);
    h->world = (int)get32(p + 16);
    h->crc = get32(p + 20);
    h->step = (int64_t)get64(p + 24);
    h->layout = get64(p + 32);
    h->payload = get64(p + 40);
    return 0;
}

int memckpt_commit(MemFile *f, const MemHeader *h) {
    unsigned char *p = f->map;
    memset(p, 0, MEMCKPT_HEADER);
    memcpy(p, MAGIC, 8);
    put32(p + 8, MEM_VERSION);
    put32(p + 12, (uint32_t)h->rank);
    put32(p + 16, (uint32_t)h->world);
    put32(p + 20, h->crc);
    put64(p + 24, (uint64_t)h->step);
    put64(p + 32, h->layout);
    put64(p + 40, h->payload);
    put32(p + 60, crc32c(p, 60));
    /* the payload was written before the header and both before the rename: a reader that sees
     * the name sees the whole copy (one page cache, whatever process dies afterwards) */
    if (rename(f->tmp, f->path)) return myr_error("in-memory checkpoint: cannot rename %s: %s", f->tmp, strerror(errno));
    f->tmp[0] = 0;
    return 0;
}

int memckpt_commit_received(MemFile *f, int rank, int64_t step) {
    MemHeader h = {0};
    if (memckpt_read_header(f->map, &h) || h.rank != rank || h.step != step || h.payload + MEMCKPT_HEADER != f->bytes)
        return myr_error("in-memory replica of rank %d step %lld arrived damaged", rank, (long long)step);
    if (rename(f->tmp, f->path)) return myr_error("in-memory checkpoint: cannot rename %s: %s", f->tmp, strerror(errno));
    f->tmp[0] = 0;
    return 0;
}

void memckpt_close(MemFile *f) {
    if (f->map) munmap(f->map, f->bytes);
    if (f->fd >= 0) close(f->fd);
    if (f->tmp[0]) unlink(f->tmp);
    f->map = NULL;
    f->fd = -1;
    f->tmp[0] = 0;
}

int memckpt_open(MemFile *f, const char *dir, int rank, int64_t step) { return memckpt_open_mode(f, dir, rank, step, 0); }

int memckpt_open_mode(MemFile *f, const char *dir, int rank, int64_t step, int writable) {
    memset(f, 0, sizeof *f);
    name_of(f->path, sizeof f->path, dir, rank, step, 0);
    f->fd = open(f->path, writable ? O_RDWR : O_RDONLY);
    struct stat st;
    if (f->fd < 0 || fstat(f->fd, &st) || st.st_size < MEMCKPT_HEADER) {
        const char *why = f->fd < 0 ? strerror(errno) : "too short";
        if (f->fd >= 0) close(f->fd);
        f->fd = -1;
        return myr_error("in-memory checkpoint %s: %s", f->path, why);
    }
    f->bytes = (size_t)st.st_size;
    f->map = mmap(NULL, f->bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, f->fd, 0);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        memckpt_close(f);
        return myr_error("in-memory checkpoint %s: cannot map it: %s", f->path, strerror(errno));
    }
    return 0;
}

int memckpt_verify(const unsigned char *file, size_t bytes, int rank, int world, int64_t step, uint64_t layout) {
    MemHeader h = {0};
    if (bytes < MEMCKPT_HEADER || memckpt_read_header(file, &h)) return -1;
    if (h.rank != rank || h.world != world || h.step != step || h.layout != layout)
        return myr_error("header names rank %d of %d, step %lld (expected rank %d of %d, step %lld, same layout)",
                         h.rank, h.world, (long long)h.step, rank, world, (long long)step);
    if (h.payload + MEMCKPT_HEADER != bytes)
        return myr_error("%zu bytes, the header says %llu", bytes, (unsigned long long)(h.payload + MEMCKPT_HEADER));
    if (crc32c(file + MEMCKPT_HEADER, h.payload) != h.crc) return myr_error("payload checksum mismatch (corrupt copy)");
    return 0;
}

/* "rNNNNN-sNNNNNNNNNNNN.mem" -> rank, step */
static int parse_name(const char *name, int *rank, int64_t *step) {
    long long s;
    int r, len = 0;
    if (sscanf(name, "r%d-s%lld.mem%n", &r, &s, &len) != 2 || name[len]) return -1;
    *rank = r, *step = s;
    return 0;
}

/* The header of directory entry `name` when it is a copy ("rNNNNN-sNNNNNNNNNNNN.mem") whose
 * header reads back whole: 0 and *h filled; -1 for any other file or an unreadable header. */
static int read_entry_header(const char *dir, const char *name, int *rank, int64_t *step, MemHeader *h) {
    if (parse_name(name, rank, step)) return -1;
    char path[4352];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    unsigned char hdr[MEMCKPT_HEADER];
    int ok = pread(fd, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr && !memckpt_read_header(hdr, h);
    close(fd);
    return ok ? 0 : -1;
}

int memckpt_scan(const char *dir, int world, uint64_t layout, MemEntry *out, int max) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        int rank;
        int64_t step;
        MemHeader h = {0};
        if (!read_entry_header(dir, e->d_name, &rank, &step, &h) && h.rank == rank && h.step == step &&
            h.world == world && h.layout == layout)
            out[n++] = (MemEntry){rank, step};
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* newest first, then by rank */
        for (int j = i; j > 0 && (out[j].step > out[j - 1].step ||
                                  (out[j].step == out[j - 1].step && out[j].rank < out[j - 1].rank)); j--) {
            MemEntry t = out[j];
            out[j] = out[j - 1], out[j - 1] = t;
        }
    return n;
}

int memckpt_count_foreign(const char *dir, int world, uint64_t layout, int *their_world) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    *their_world = 0;
    for (struct dirent *e; (e = readdir(d));) {
        int rank;
        int64_t step;
        MemHeader h = {0};
        if (!read_entry_header(dir, e->d_name, &rank, &step, &h) && (h.world != world || h.layout != layout))
            n++, *their_world = h.world;
    }
    closedir(d);
    return n;
}

void memckpt_prune(const char *dir, int rank, int keep) {
    DIR *d = opendir(dir);
    if (!d) return;
    int64_t steps[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        int r;
        int64_t s;
        if (!parse_name(e->d_name, &r, &s) && r == rank) steps[n++] = s;
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        int newer = 0;
        for (int j = 0; j < n; j++) newer += steps[j] > steps[i];
        if (newer >= keep) {
            char path[4096];
            name_of(path, sizeof path, dir, rank, steps[i], 0);
            unlink(path);
        }
    }
}

int memckpt_open_leftover(MemFile *f, const char *dir, int rank, size_t bytes) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    int found = -1;
    while (found && (e = readdir(d))) {
        int r, len = 0;
        long long s;
        if (sscanf(e->d_name, ".r%d-s%lld.tmp%n", &r, &s, &len) != 2 || e->d_name[len] || r != rank) continue;
        snprintf(f->tmp, sizeof f->tmp, "%s/%s", dir, e->d_name);
        struct stat st;
        f->fd = open(f->tmp, O_RDWR);
        if (f->fd >= 0 && !fstat(f->fd, &st) && (size_t)st.st_size == bytes &&
            (f->map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0)) != MAP_FAILED) {
            f->bytes = bytes;
            found = 0;
        } else {
            if (f->fd >= 0) close(f->fd);
            f->fd = -1, f->map = NULL, f->tmp[0] = 0;
        }
    }
    closedir(d);
    return found;
}

void memckpt_delete(const char *dir, int rank, int64_t step) {
    char path[4096];
    name_of(path, sizeof path, dir, rank, step, 0);
    unlink(path);
}

void memckpt_remove(const char *dir, int rank) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int r;
        long long s;
        int len = 0;
        const char *nm = e->d_name[0] == '.' ? e->d_name + 1 : e->d_name;
        if (sscanf(nm, "r%d-s%lld.%n", &r, &s, &len) != 2 || (rank >= 0 && r != rank)) continue;
        if (strcmp(nm + len, "mem") && strcmp(nm + len, "tmp")) continue;
        char path[4352];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}
