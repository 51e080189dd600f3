/* ckpt.h: sharded, crash-safe checkpoints (format and protocol: docs/CHECKPOINT.md).
 *
 * DIR/step-NNNNNNNN/ holds rank-NNNNN.bin (one per rank: tensor slices, 64-byte aligned, raw
 * little-endian) and manifest.json (version, step, caller JSON, every tensor's dtype, global
 * shape and pieces, per-block CRC-32C of every shard file). DIR/latest names the newest step
 * directory (a hint). A checkpoint exists once its manifest is renamed into place.
 *
 * Handles and explicit errors: every call returns 0 / -1 (+ a one-line myr_error naming the
 * file, tensor and problem). Writing is collective through comm.h (world == NULL: a process
 * writing alone, a world of one without MPI). Reading is per rank and reads only the bytes
 * of the slices asked for (plus the rest of their checksum blocks). */
#ifndef MYRIAD_CKPT_CKPT_H
#define MYRIAD_CKPT_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"

enum { CKPT_MAX_NDIM = 8, CKPT_VERSION = 2 }; /* 2: checksum blocks per piece (1: per file) */

typedef enum { CKPT_F32 = 0, CKPT_BF16, CKPT_F16, CKPT_F64, CKPT_I32, CKPT_I64, CKPT_U8, CKPT_NDTYPES } CkptDtype;

const char *ckpt_dtype_name(CkptDtype d); /* "f32", "bf16", ... (manifest spelling) */
size_t ckpt_dtype_size(CkptDtype d);

/* A part of a tensor of global shape `shape` (row-major):
 *  - a box: dimension d holds [start[d], start[d] + extent[d]); its data is the box's elements in
 *    row-major order (row blocks, column blocks, any N-d tile);
 *  - a flat range: elements [offset, offset + count) of the row-major flattening (ZeRO shards:
 *    a flat range of a concatenation of tensors is a flat range of each tensor it overlaps). */
typedef struct {
    int flat;
    int64_t start[CKPT_MAX_NDIM], extent[CKPT_MAX_NDIM]; /* box */
    int64_t offset, count;                                /* flat */
} CkptSlice;

CkptSlice ckpt_box(int ndim, const int64_t *start, const int64_t *extent);
CkptSlice ckpt_flat(int64_t offset, int64_t count);
CkptSlice ckpt_whole(int ndim, const int64_t *shape);
/* Rows [r0, r0 + n) along dimension 0 / columns [c0, c0 + n) along the last dimension. */
CkptSlice ckpt_rows(int ndim, const int64_t *shape, int64_t r0, int64_t n);
CkptSlice ckpt_cols(int ndim, const int64_t *shape, int64_t c0, int64_t n);
int64_t ckpt_slice_numel(const CkptSlice *s, int ndim);
/* Elements [offset, offset + count) of `box`'s own row-major order as at most 2*ndim - 1 boxes
 * of the global tensor, in order (their concatenated data = that range of the box's data).
 * For ZeRO over tensor parallelism: a rank's ZeRO shard is a flat range of its *local* tensor,
 * which is a box (or a few boxes: qkv) of the global one; save / read it as these boxes.
 * Returns the number of boxes written to out (0 for an empty range), -1 if out is too small
 * or the range lies outside the box. */
int ckpt_box_range(const CkptSlice *box, int ndim, int64_t offset, int64_t count, CkptSlice *out, int max_out);

/* ---- writing */
typedef struct CkptWriter CkptWriter;

typedef struct {
    int64_t block_bytes; /* largest checksum block (power of two, >= 64; blocks follow each piece's rows); 0: 1 MiB */
    int keep;            /* after a commit keep this many newest complete checkpoints; 0: keep all */
} CkptWriteOptions;

/* Start writing step `step` of DIR as rank `rank` of `nranks` (creates DIR and the step
 * directory; stale files of an earlier attempt at the same step are removed first). */
int ckpt_writer_begin(const char *dir, int64_t step, int rank, int nranks, const CkptWriteOptions *opt,
                      CkptWriter **out);
/* Add this rank's piece `slice` of tensor `name` (global shape `shape`). `data` holds the
 * slice's elements (box: row-major over the box) and must stay valid until the commit starts
 * (the async commit copies it). Pieces of all ranks must partition each tensor. */
int ckpt_add_piece(CkptWriter *w, const char *name, CkptDtype dt, int ndim, const int64_t *shape,
                   const CkptSlice *slice, const void *data);
/* Collective over `world` (NULL: alone, rank 0 of 1): write + fsync the shard, agree that
 * every rank succeeded, rank 0 commits the manifest, replaces DIR/latest and applies --keep.
 * `meta_json`: a JSON object stored as the manifest's "meta" (model config, mesh, data-loader
 * and LR-schedule positions, RNG state...); NULL = {}. Frees w. Same result on every rank. */
int ckpt_writer_commit(CkptWriter *w, Comm *world, const char *meta_json);
/* Async commit: copies the pieces into memory (the caller may modify its buffers as soon as
 * this returns), writes + fsyncs the shard from a background thread, and finishes (the
 * collective part: agreement, manifest, latest, retention) in ckpt_async_wait(), which the
 * caller calls before the next save and at exit (a new async commit waits for the previous
 * one first, so saves serialize; if that one failed its error is returned and w is freed). */
int ckpt_writer_commit_async(CkptWriter *w, Comm *world, const char *meta_json);
/* Finish the async save in flight (collective over its world). 0 if none. On failure the
 * previous checkpoint stays the newest valid one and the error names the cause. */
int ckpt_async_wait(void);
/* Collective over the save's world, cheap (one tiny all-reduce): finish the async save in
 * flight if every rank's shard is written, else return at once. 0, or -1 if the commit failed.
 * The training loop calls it every step, so a save becomes the newest valid checkpoint soon
 * after its writes end, not only at the next save. */
int ckpt_async_poll(void);
int ckpt_async_pending(void);
/* Prepare the memory of async snapshots of about `bytes` now, in a background thread, so the
 * first async save does not pay for touching fresh memory (on a virtual machine ~3 s per GB,
 * longer than the copy). Optional; a save that comes first uses memory of its own. */
void ckpt_async_reserve(uint64_t bytes);
void ckpt_writer_abort(CkptWriter *w);

/* Lower level, for one process writing several ranks' shards (tools, tests):
 * write + fsync this rank's shard and return its piece table (JSON, malloc'd), then free w;
 * rank 0 (or anyone, once every shard is durable) commits the manifest from all tables. */
int ckpt_writer_write_shard(CkptWriter *w, char **table_json);
int ckpt_commit_manifest(const char *dir, int64_t step, int nranks, char *const *tables, const char *meta_json,
                         const CkptWriteOptions *opt);

/* Test hook for torn-write tests: the k-th crash point (1-based: each piece write, fsync,
 * rename, `latest` and retention step) calls _exit(86). 0 disables. Also read from the
 * environment variable MYRIAD_CKPT_CRASH_AT by ckpt_writer_begin. Returns points passed. */
void ckpt_test_crash_at(long k);
long ckpt_test_crash_points(void);

/* ---- reading */
typedef struct Ckpt Ckpt;

typedef struct {
    int verify;         /* read every shard byte and check every checksum before accepting */
    int64_t below_step; /* "auto" / DIR: only steps < this (fall back after a failed load); 0: any */
} CkptOpenOptions;

/* path: a step directory (DIR/step-N), or DIR or "auto:DIR"/DIR: the newest valid checkpoint
 * of DIR (step directories scanned newest first; DIR/latest is only a hint). A checkpoint
 * without a manifest, with a damaged manifest, or with a missing, truncated or (verify)
 * corrupt shard is skipped; ckpt_notes() says which were skipped and why. */
int ckpt_open(const char *path, Ckpt **out);
int ckpt_open_ex(const char *path, const CkptOpenOptions *opt, Ckpt **out);
void ckpt_close(Ckpt *c);

int64_t ckpt_step(const Ckpt *c);
const char *ckpt_path(const Ckpt *c);  /* the step directory */
const char *ckpt_notes(const Ckpt *c); /* "" or "skipped DIR/step-X (reason); ..." */
const char *ckpt_meta(const Ckpt *c);  /* the caller's JSON object, as text */
int ckpt_tensor_count(const Ckpt *c);
const char *ckpt_tensor_name(const Ckpt *c, int i);
/* dtype / ndim / shape (shape holds CKPT_MAX_NDIM) of `name`; any out pointer may be NULL. */
int ckpt_tensor_info(const Ckpt *c, const char *name, CkptDtype *dt, int *ndim, int64_t *shape);
/* ckpt_tensor_info + a one-line error when dtype or shape differ from what the model needs. */
int ckpt_expect(const Ckpt *c, const char *name, CkptDtype dt, int ndim, const int64_t *shape);
/* Read `slice` of `name` into dst (slice order, as ckpt_add_piece's data), from whichever
 * shards hold it, verifying the checksum of every block read. */
int ckpt_read_slice(Ckpt *c, const char *name, const CkptSlice *slice, void *dst);
/* Read and check every block of every shard. */
int ckpt_verify(Ckpt *c);
/* Bytes this handle read from shard files (manifest excluded). */
uint64_t ckpt_bytes_read(const Ckpt *c);
void ckpt_reset_bytes_read(Ckpt *c);

#endif
