/* memckpt.h: in-memory checkpoint copies: one file per (rank, step) in a per-host directory on
 * shared memory (default /dev/shm), so a copy outlives the process that wrote it (not the host).
 * The file is a 64-byte header (magic, version, rank, world, step, layout hash, payload size,
 * CRC-32C of the payload, CRC-32C of the header) followed by the payload (a rank's training
 * state, opaque here). Commit protocol: written under a hidden temporary name, header last,
 * then renamed; scans only see renamed files, so a torn copy is never taken as valid, and the
 * payload CRC catches damage after the commit. No MPI here (train/mem_checkpoint.c moves
 * copies between ranks). Format and protocol: docs/CHECKPOINT.md, "In-memory checkpoints". */
#ifndef MYRIAD_CKPT_MEMCKPT_H
#define MYRIAD_CKPT_MEMCKPT_H

#include <stddef.h>
#include <stdint.h>

#define MEMCKPT_HEADER 64

typedef struct {
    int rank, world;
    int64_t step;
    uint64_t layout;  /* hash of everything a same-layout restore must match (model, mesh, world) */
    uint64_t payload; /* bytes after the header */
    uint32_t crc;     /* CRC-32C of the payload */
} MemHeader;

/* A copy being written (or mapped for reading): header + payload, memory-mapped. */
typedef struct {
    int fd;
    unsigned char *map;
    size_t bytes; /* MEMCKPT_HEADER + payload */
    char tmp[4096], path[4096];
} MemFile;

/* "<root>/myriad-<job hex>" (root: $MYRIAD_SHM_DIR or /dev/shm): the job's directory (not created). */
void memckpt_job_dir(char *out, size_t n, uint64_t job);
/* "<root>/myriad-<job hex>/<host>" into out (root: $MYRIAD_SHM_DIR or /dev/shm), created. */
int memckpt_dir(char *out, size_t n, uint64_t job, const char *host);
/* Create the hidden temporary file of (rank, step) in dir, sized for `payload` bytes, mapped
 * read-write; the payload goes to f->map + MEMCKPT_HEADER. */
int memckpt_create(MemFile *f, const char *dir, int rank, int64_t step, uint64_t payload);
/* Reuse a mapped file for (rank, step): a committed copy, or a leftover temporary file taken back
 * (memckpt_open_leftover), renamed to that step's temporary name (so scans no longer list it),
 * still mapped; then write the payload and commit as after memckpt_create. */
int memckpt_recycle(MemFile *f, const char *dir, int rank, int64_t step);
/* Write the header (h) and rename the file into place: from now on it is a valid copy. */
int memckpt_commit(MemFile *f, const MemHeader *h);
/* Rename a temporary file whose complete bytes (header included) arrived from elsewhere;
 * the header is checked first (not the payload: readers verify that). */
int memckpt_commit_received(MemFile *f, int rank, int64_t step);
/* Unmap and close; an uncommitted temporary file is removed. */
void memckpt_close(MemFile *f);
/* Map the committed copy of (rank, step) read-only. */
int memckpt_open(MemFile *f, const char *dir, int rank, int64_t step);
/* The same, mapped writable: a committed copy taken back as a slot to recycle (memckpt_recycle). */
int memckpt_open_mode(MemFile *f, const char *dir, int rank, int64_t step, int writable);
/* Check a whole copy (header fields against the expectations, header CRC, payload CRC):
 * 0, or -1 with the reason. */
int memckpt_verify(const unsigned char *file, size_t bytes, int rank, int world, int64_t step, uint64_t layout);
/* Parse and check a header (its CRC and magic); -1 with the reason if it is not one. */
int memckpt_read_header(const unsigned char *hdr, MemHeader *h);

typedef struct {
    int rank;
    int64_t step;
} MemEntry;
/* Committed copies in dir whose header matches (world, layout), newest first; at most max. */
int memckpt_scan(const char *dir, int world, uint64_t layout, MemEntry *out, int max);
/* Committed copies in dir of another (world, layout): what a same-layout restore cannot use.
 * *their_world: the world size of one of them (0 when none). */
int memckpt_count_foreign(const char *dir, int world, uint64_t layout, int *their_world);
/* Delete rank's copies older than its `keep` newest. */
void memckpt_prune(const char *dir, int rank, int keep);
/* Map a temporary file rank left behind (a copy a killed process was writing) of exactly `bytes`,
 * writable, to be recycled: 0, or -1 when there is none. */
int memckpt_open_leftover(MemFile *f, const char *dir, int rank, size_t bytes);
/* Delete the committed copy of (rank, step). */
void memckpt_delete(const char *dir, int rank, int64_t step);
/* Delete every copy (committed or temporary) of rank in dir; rank < 0: of every rank. */
void memckpt_remove(const char *dir, int rank);

/* FNV-1a 64 of a string (job ids, layout hashes). */
uint64_t memckpt_hash(const char *s, uint64_t h);

#endif
