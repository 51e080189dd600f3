/* ckpt_slice.c: slice geometry. A box is walked row by row (rows of the last dimension),
 * merging rows that are consecutive in the global order, so a row block or a whole tensor is
 * one run; a flat range is one run. Intersections work on these runs. */
#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_internal.h"
#include "util/error.h"

static const char *const dtype_names[CKPT_NDTYPES] = {"f32", "bf16", "f16", "f64", "i32", "i64", "u8"};
static const size_t dtype_sizes[CKPT_NDTYPES] = {4, 2, 2, 8, 4, 8, 1};

const char *ckpt_dtype_name(CkptDtype d) { return d >= 0 && d < CKPT_NDTYPES ? dtype_names[d] : "?"; }
size_t ckpt_dtype_size(CkptDtype d) { return d >= 0 && d < CKPT_NDTYPES ? dtype_sizes[d] : 0; }

int ckpt_dtype_parse(const char *s, CkptDtype *out) {
    for (int d = 0; d < CKPT_NDTYPES; d++)
        if (strcmp(s, dtype_names[d]) == 0) {
            *out = (CkptDtype)d;
            return 0;
        }
    return -1;
}

CkptSlice ckpt_box(int ndim, const int64_t *start, const int64_t *extent) {
    CkptSlice s;
    memset(&s, 0, sizeof s);
    for (int d = 0; d < ndim && d < CKPT_MAX_NDIM; d++) {
        s.start[d] = start[d];
        s.extent[d] = extent[d];
    }
    return s;
}

CkptSlice ckpt_flat(int64_t offset, int64_t count) {
    CkptSlice s;
    memset(&s, 0, sizeof s);
    s.flat = 1;
    s.offset = offset;
    s.count = count;
    return s;
}

CkptSlice ckpt_whole(int ndim, const int64_t *shape) {
    int64_t zero[CKPT_MAX_NDIM] = {0};
    return ckpt_box(ndim, zero, shape);
}

CkptSlice ckpt_rows(int ndim, const int64_t *shape, int64_t r0, int64_t n) {
    CkptSlice s = ckpt_whole(ndim, shape);
    s.start[0] = r0;
    s.extent[0] = n;
    return s;
}

CkptSlice ckpt_cols(int ndim, const int64_t *shape, int64_t c0, int64_t n) {
    CkptSlice s = ckpt_whole(ndim, shape);
    s.start[ndim - 1] = c0;
    s.extent[ndim - 1] = n;
    return s;
}

int64_t ckpt_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

int64_t ckpt_slice_numel(const CkptSlice *s, int ndim) { return s->flat ? s->count : ckpt_numel(ndim, s->extent); }

const char *ckpt_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t used = 0;
    used += (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

int ckpt_check_shape(int ndim, const int64_t *shape, const char *what) {
    if (ndim < 1 || ndim > CKPT_MAX_NDIM)
        return myr_error("%s: %d dimensions; checkpoints hold tensors of 1 to %d dimensions", what, ndim, CKPT_MAX_NDIM);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || shape[d] > ((int64_t)1 << 40))
            return myr_error("%s: dimension %d has size %" PRId64 " (must be 0..2^40)", what, d, shape[d]);
        if (shape[d] && n > ((int64_t)1 << 50) / shape[d]) return myr_error("%s: more than 2^50 elements", what);
        n *= shape[d];
    }
    return 0;
}

int ckpt_check_slice(const CkptSlice *s, int ndim, const int64_t *shape, const char *what) {
    char b[160];
    if (s->flat) {
        int64_t n = ckpt_numel(ndim, shape);
        if (s->offset < 0 || s->count < 0 || s->offset > n || s->count > n - s->offset)
            return myr_error("%s: flat range [%" PRId64 ", %" PRId64 ") lies outside the tensor's %" PRId64
                             " elements (shape %s)",
                             what, s->offset, s->offset + s->count, n, ckpt_shape_str(ndim, shape, b, sizeof b));
        return 0;
    }
    for (int d = 0; d < ndim; d++)
        if (s->start[d] < 0 || s->extent[d] < 0 || s->start[d] > shape[d] || s->extent[d] > shape[d] - s->start[d])
            return myr_error("%s: dimension %d of the slice, [%" PRId64 ", %" PRId64 "), lies outside shape %s", what, d,
                             s->start[d], s->start[d] + s->extent[d], ckpt_shape_str(ndim, shape, b, sizeof b));
    return 0;
}

int ckpt_slice_runs(const CkptSlice *s, int ndim, const int64_t *shape, CkptRunFn fn, void *u) {
    if (s->flat) return s->count > 0 ? fn(s->offset, s->count, 0, u) : 0;
    if (ckpt_numel(ndim, s->extent) == 0) return 0;
    int64_t stride[CKPT_MAX_NDIM];
    stride[ndim - 1] = 1;
    for (int d = ndim - 2; d >= 0; d--) stride[d] = stride[d + 1] * shape[d + 1];
    int64_t idx[CKPT_MAX_NDIM] = {0}; /* odometer over the box's rows (dims 0..ndim-2) */
    int64_t row_len = s->extent[ndim - 1], local = 0;
    int64_t run_g = -1, run_n = 0, run_local = 0;
    for (;;) {
        int64_t g = 0;
        for (int d = 0; d < ndim; d++) g += (s->start[d] + (d < ndim - 1 ? idx[d] : 0)) * stride[d];
        if (run_n > 0 && run_g + run_n == g) run_n += row_len;
        else {
            if (run_n > 0 && fn(run_g, run_n, run_local, u)) return -1;
            run_g = g;
            run_n = row_len;
            run_local = local;
        }
        local += row_len;
        int d = ndim - 2;
        for (; d >= 0; d--) {
            if (++idx[d] < s->extent[d]) break;
            idx[d] = 0;
        }
        if (d < 0) break;
    }
    return run_n > 0 ? fn(run_g, run_n, run_local, u) : 0;
}

int ckpt_run_in_piece(int64_t g, int64_t n, const CkptSlice *p, int ndim, const int64_t *shape, CkptRunFn fn,
                      void *u) {
    if (p->flat) {
        int64_t a = g > p->offset ? g : p->offset, b = g + n < p->offset + p->count ? g + n : p->offset + p->count;
        return a < b ? fn(a, b - a, a - p->offset, u) : 0;
    }
    if (ckpt_numel(ndim, p->extent) == 0) return 0;
    int64_t L = shape[ndim - 1];
    int64_t c0 = p->start[ndim - 1], c1 = c0 + p->extent[ndim - 1];
    /* Rows of the global tensor the run touches, as odometer coordinates over dims 0..ndim-2. */
    int64_t q = g / L, q_last = (g + n - 1) / L;
    int64_t coord[CKPT_MAX_NDIM];
    int64_t rest = q;
    for (int d = ndim - 2; d >= 0; d--) {
        coord[d] = rest % shape[d];
        rest /= shape[d];
    }
    for (; q <= q_last; q++) {
        int inside = 1;
        int64_t local_row = 0; /* row index within the box, row-major over dims 0..ndim-2 */
        for (int d = 0; d < ndim - 1; d++) {
            if (coord[d] < p->start[d] || coord[d] >= p->start[d] + p->extent[d]) {
                inside = 0;
                break;
            }
            local_row = local_row * p->extent[d] + (coord[d] - p->start[d]);
        }
        if (inside) {
            int64_t a = q * L + c0, b = q * L + c1;
            if (a < g) a = g;
            if (b > g + n) b = g + n;
            if (a < b && fn(a, b - a, local_row * p->extent[ndim - 1] + (a - q * L - c0), u)) return -1;
        }
        for (int d = ndim - 2; d >= 0; d--) {
            if (++coord[d] < shape[d]) break;
            coord[d] = 0;
        }
    }
    return 0;
}

void ckpt_step_dirname(int64_t step, char *buf, size_t n) { snprintf(buf, n, "step-%08" PRId64, step); }

int64_t ckpt_parse_step_dirname(const char *name) {
    if (strncmp(name, "step-", 5) != 0) return -1;
    const char *p = name + 5;
    if (strlen(p) < 8 || strlen(p) > 18) return -1;
    int64_t v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

int ckpt_error_prefix(const char *fmt, ...) {
    char old[1024], prefix[1024];
    snprintf(old, sizeof old, "%s", myr_last_error());
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    return myr_error("%s: %s", prefix, old);
}

/* Split [a, b) of the box's row-major order along dimension d (dims < d already fixed to the
 * single index in cur). A range inside one index of dimension d recurses; otherwise it is a
 * head (recursing into the first index), whole indices (one box) and a tail (recursing). */
static int box_range_rec(CkptSlice cur, int ndim, int d, int64_t a, int64_t b, CkptSlice *out, int max, int *n) {
    if (a >= b) return 0;
    int64_t inner = 1;
    for (int k = d + 1; k < ndim; k++) inner *= cur.extent[k];
    if (d == ndim - 1 || (a % inner == 0 && b % inner == 0) || a / inner == (b - 1) / inner) {
        if (d < ndim - 1 && a / inner == (b - 1) / inner && !(a % inner == 0 && b - a == inner)) {
            CkptSlice sub = cur; /* inside one index of dimension d */
            sub.start[d] += a / inner;
            sub.extent[d] = 1;
            return box_range_rec(sub, ndim, d + 1, a % inner, a % inner + (b - a), out, max, n);
        }
        if (*n >= max) return -1; /* whole indices [a/inner, b/inner) of dimension d */
        CkptSlice whole = cur;
        whole.start[d] += a / inner;
        whole.extent[d] = (b - a) / inner;
        out[(*n)++] = whole;
        return 0;
    }
    int64_t head_end = (a + inner - 1) / inner * inner, tail_start = b / inner * inner;
    if (a < head_end && box_range_rec(cur, ndim, d, a, head_end, out, max, n)) return -1;
    if (head_end < tail_start && box_range_rec(cur, ndim, d, head_end, tail_start, out, max, n)) return -1;
    if (tail_start < b && box_range_rec(cur, ndim, d, tail_start, b, out, max, n)) return -1;
    return 0;
}

int ckpt_box_range(const CkptSlice *box, int ndim, int64_t offset, int64_t count, CkptSlice *out, int max_out) {
    if (box->flat || ndim < 1 || ndim > CKPT_MAX_NDIM) return myr_error("ckpt_box_range: needs a box of 1 to 8 dimensions");
    int64_t n = ckpt_numel(ndim, box->extent);
    if (offset < 0 || count < 0 || offset > n || count > n - offset)
        return myr_error("ckpt_box_range: range [%" PRId64 ", %" PRId64 ") outside the box's %" PRId64 " elements", offset,
                         offset + count, n);
    int got = 0;
    if (box_range_rec(*box, ndim, 0, offset, offset + count, out, max_out, &got))
        return myr_error("ckpt_box_range: more than %d boxes needed", max_out);
    return got;
}

static int cmp_step_desc(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x > y ? -1 : x < y;
}

int ckpt_list_steps(const char *dir, int64_t below, int64_t **steps) {
    *steps = NULL;
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t s = ckpt_parse_step_dirname(e->d_name);
        if (s < 0 || (below > 0 && s >= below)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *t = realloc(*steps, sizeof *t * cap);
            if (!t) break;
            *steps = t;
        }
        (*steps)[n++] = s;
    }
    closedir(d);
    if (n > 1) qsort(*steps, n, sizeof **steps, cmp_step_desc);
    return n;
}
