/* ckpt_internal.h: what the checkpoint writer and reader share: names of files in a step
 * directory, slice geometry (runs of consecutive global elements), the crash hook. */
#ifndef MYRIAD_CKPT_INTERNAL_H
#define MYRIAD_CKPT_INTERNAL_H

#include <stdint.h>

#include "ckpt/ckpt.h"

#define CKPT_ALIGN 64
#define CKPT_DEFAULT_BLOCK (1 << 20)
#define CKPT_FORMAT_NAME "myriad-checkpoint"
/* manifest.json = MANIFEST_PREFIX + 8 hex digits + MANIFEST_MIDDLE + body + "}\n", where the
 * CRC-32C covers exactly the body bytes (so any damage to the manifest is detected). */
#define CKPT_MANIFEST_PREFIX "{\"crc32c\": \""
#define CKPT_MANIFEST_MIDDLE "\", \"manifest\": "

/* Validate dimensions (1..8, non-negative) and the slice against them; -1 + error naming `what`. */
int ckpt_check_shape(int ndim, const int64_t *shape, const char *what);
int ckpt_check_slice(const CkptSlice *s, int ndim, const int64_t *shape, const char *what);
int64_t ckpt_numel(int ndim, const int64_t *shape);
/* "[96, 32]" into buf. */
const char *ckpt_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);
int ckpt_dtype_parse(const char *s, CkptDtype *out);

/* Calls fn for each maximal run of consecutive global (row-major) element indices in s,
 * in the slice's own element order: run [g, g + n) is elements [local, local + n) of s. */
typedef int (*CkptRunFn)(int64_t g, int64_t n, int64_t local, void *u);
int ckpt_slice_runs(const CkptSlice *s, int ndim, const int64_t *shape, CkptRunFn fn, void *u);
/* Intersect the global run [g, g + n) with piece slice p: fn(g', n', index of g' within p)
 * for each part (consecutive in p as well), in increasing g'. */
int ckpt_run_in_piece(int64_t g, int64_t n, const CkptSlice *p, int ndim, const int64_t *shape,
                      CkptRunFn fn, void *u);

/* Step directory name "step-%08lld" and parsing (-1 if `name` is not one). */
void ckpt_step_dirname(int64_t step, char *buf, size_t n);
int64_t ckpt_parse_step_dirname(const char *name);
/* Steps of DIR's step-N directories below `below` (0: all), newest first, into *steps (malloc'd;
 * may be NULL when none). Returns the count, or -1 if DIR cannot be opened (errno set). */
int ckpt_list_steps(const char *dir, int64_t below, int64_t **steps);

/* Record "<prefix>: <the last recorded error>" (safe: copies the old message first). -1. */
int ckpt_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Crash points for torn-write tests. */
void ckpt_crash_point(void);
void ckpt_crash_env(void);

#endif
