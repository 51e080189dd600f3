/* safetensors.h: read and write the safetensors format (Hugging Face's weight files).
 * Layout: 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {..}}
 * then the data buffer; offsets are relative to the start of the data buffer.
 * Everything in the header is validated before any tensor is touched (see docs/FORMATS.md);
 * readers mmap the file, the writer is atomic (io/atomic_file.h). Little-endian hosts only. */
#ifndef MYRIAD_IO_SAFETENSORS_H
#define MYRIAD_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL } StDtype;

enum { ST_MAX_NDIM = 8 };

typedef struct {
    char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[8];
    uint64_t begin, end; /* byte range within the data buffer */
} StTensor;

typedef struct {
    int n;
    StTensor *tensors;      /* in header order */
    void *map;              /* mmap'd file (st_open) or NULL (st_parse) */
    size_t map_size;
    const uint8_t *data;    /* start of the data buffer (NULL after st_open_header) */
    size_t data_size;
    uint64_t data_start;    /* the data buffer's byte offset in the file */
    char *path;             /* st_open_header: the file's path; NULL for mapped / in-memory files */
    int fd;                 /* st_open_header: the open file (read with pread); valid when path is set */
    int n_meta;             /* "__metadata__" string pairs */
    char **meta_keys, **meta_values;
} StFile;

/* mmap + parse + validate; -1 + myr_error (naming the file) on failure. */
int st_open(const char *path, StFile *f);
/* Read and validate the header only (pread); tensors are then read by range with
 * st_read_range_f32, so that only the bytes asked for are ever in memory (no mapping: a rank that
 * reads its slices of a 100 GB checkpoint touches only those). */
int st_open_header(const char *path, StFile *f);
/* Parse a whole in-memory file; f->data points into buf (which must outlive f). */
int st_parse(const uint8_t *buf, size_t len, StFile *f);
/* Same, naming `source` in error messages. */
int st_parse_named(const uint8_t *buf, size_t len, const char *source, StFile *f);
const StTensor *st_find(const StFile *f, const char *name);
/* Value of a "__metadata__" key, or NULL. */
const char *st_metadata(const StFile *f, const char *key);
int64_t st_numel(const StTensor *t);
/* "F32", "BF16", ... and the element size in bytes. */
const char *st_dtype_name(StDtype d);
size_t st_dtype_size(StDtype d);
/* Convert a F32/F16/BF16/F64 tensor to f32; count must equal numel. Exact for F32/F16/BF16. */
int st_read_f32(const StFile *f, const StTensor *t, float *dst, int64_t count);
/* Elements [first, first + count) of tensor t (row-major) converted to f32 (F32/F16/BF16/F64). */
int st_read_range_f32(const StFile *f, const StTensor *t, int64_t first, int64_t count, float *dst);
void st_close(StFile *f);

typedef struct {
    const char *name;
    const float *data;
    int ndim;
    int64_t shape[8];
} StWriteTensor;

/* The layout of a file written piece by piece (a sharded export streams each rank's slices into
 * place): tensors back to back in the given order. */
typedef struct {
    const char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[8];
    uint64_t begin, end; /* filled: byte range within the data buffer */
} StLayoutTensor;

/* The header text (malloc'd, space-padded so the data starts 8-byte aligned; the caller frees),
 * with metadata {"format": "pt"} plus the given pairs; fills each tensor's begin/end, the bytes
 * before the data (8 + header) and of the data. NULL + myr_error on bad input. */
char *st_layout_header(StLayoutTensor *tensors, int n, const char *const *meta_keys, const char *const *meta_values,
                       int n_meta, uint64_t *prefix_bytes, uint64_t *data_bytes);

/* Write F32 tensors in the given order with metadata {"format": "pt"} (what transformers
 * expects). Atomic: <path>.tmp, fsync, rename, fsync dir; on failure <path> is untouched. */
int st_write_f32(const char *path, const StWriteTensor *tensors, int n);
/* Same, with extra "__metadata__" string pairs (a "format" key overrides "pt"). */
int st_write_f32_meta(const char *path, const StWriteTensor *tensors, int n, const char *const *meta_keys,
                      const char *const *meta_values, int n_meta);

#endif
