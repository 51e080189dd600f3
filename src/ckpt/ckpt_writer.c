/* ckpt_writer.c: one rank's side of a save: collect pieces, lay them out in the shard file
 * (64-byte aligned), write + fsync it with per-block CRC-32C, and describe it as a piece table
 * (JSON) for the manifest; the memory of the async save's snapshots (ckpt_save.c). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_internal.h"
#include "ckpt/crc32c.h"
#include "ckpt/ckpt_writer.h"
#include "io/atomic_file.h"
#include "util/error.h"

static int mkdir_p(const char *path) {
    char *p = strdup(path);
    if (!p) return myr_error("out of memory");
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == 0) {
            char c = *s;
            *s = 0;
            if (mkdir(p, 0755) && errno != EEXIST) {
                int e = errno;
                myr_error("cannot create checkpoint directory %s: %s", p, strerror(e));
                free(p);
                return -1;
            }
            *s = c;
            if (!c) break;
        }
    }
    free(p);
    return 0;
}

int ckpt_writer_begin(const char *dir, int64_t step, int rank, int nranks, const CkptWriteOptions *opt,
                      CkptWriter **out) {
    *out = NULL;
    ckpt_crash_env();
    if (step < 0) return myr_error("checkpoint step %" PRId64 " is negative", step);
    if (nranks < 1 || rank < 0 || rank >= nranks || nranks > 99999)
        return myr_error("checkpoint writer: rank %d of %d is not valid", rank, nranks);
    int64_t block = opt && opt->block_bytes ? opt->block_bytes : CKPT_DEFAULT_BLOCK;
    if (block < 64 || (block & (block - 1)))
        return myr_error("checkpoint block size %" PRId64 " must be a power of two >= 64", block);
    CkptWriter *w = calloc(1, sizeof *w);
    if (!w) return myr_error("out of memory");
    char name[64];
    ckpt_step_dirname(step, name, sizeof name);
    size_t n = strlen(dir) + strlen(name) + 2;
    w->dir = strdup(dir);
    w->step_dir = malloc(n);
    if (!w->dir || !w->step_dir) {
        ckpt_writer_abort(w);
        return myr_error("out of memory");
    }
    snprintf(w->step_dir, n, "%s/%s", dir, name);
    w->step = step;
    w->rank = rank;
    w->nranks = nranks;
    w->block = block;
    if (opt) w->opt = *opt;
    w->opt.block_bytes = block;
    if (mkdir_p(w->step_dir)) { /* said by the commit, on every rank alike (ckpt_writer.h) */
        snprintf(w->begin_err, sizeof w->begin_err, "%s", myr_last_error());
        *out = w;
        return 0;
    }
    /* A re-save of the same step (after a resume) first invalidates the old manifest, so the
     * directory is never a mix of old manifest and new shards that could pass as complete. */
    if (rank == 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/manifest.json", w->step_dir);
        if (unlink(path) == 0) ckpt_fsync_dir(w->step_dir);
    }
    *out = w;
    return 0;
}

int ckpt_add_piece(CkptWriter *w, const char *name, CkptDtype dt, int ndim, const int64_t *shape,
                   const CkptSlice *slice, const void *data) {
    char what[512];
    snprintf(what, sizeof what, "checkpoint piece of tensor %s", name ? name : "(null)");
    if (!name || !*name || strlen(name) > 400) return myr_error("checkpoint piece: tensor name missing or too long");
    if (ckpt_dtype_size(dt) == 0) return myr_error("%s: unknown dtype %d", what, (int)dt);
    if (ckpt_check_shape(ndim, shape, what) || ckpt_check_slice(slice, ndim, shape, what)) return -1;
    for (int i = 0; i < w->n; i++) { /* a tensor has one dtype and shape */
        WPiece *q = &w->p[i];
        if (strcmp(q->name, name) != 0) continue;
        if (q->dt != dt || q->ndim != ndim || memcmp(q->shape, shape, sizeof(int64_t) * ndim) != 0) {
            char a[160], b[160];
            return myr_error("%s: declared as %s %s here but %s %s by an earlier piece", what, ckpt_dtype_name(dt),
                             ckpt_shape_str(ndim, shape, a, sizeof a), ckpt_dtype_name(q->dt),
                             ckpt_shape_str(q->ndim, q->shape, b, sizeof b));
        }
        break;
    }
    int64_t numel = ckpt_slice_numel(slice, ndim);
    if (numel > 0 && !data) return myr_error("%s: no data", what);
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        WPiece *p = realloc(w->p, sizeof *p * cap);
        if (!p) return myr_error("out of memory");
        w->p = p;
        w->cap = cap;
    }
    WPiece *p = &w->p[w->n];
    memset(p, 0, sizeof *p);
    p->name = strdup(name);
    if (!p->name) return myr_error("out of memory");
    p->dt = dt;
    p->ndim = ndim;
    memcpy(p->shape, shape, sizeof(int64_t) * ndim);
    p->slice = *slice;
    p->data = data;
    p->offset = (w->file_bytes + CKPT_ALIGN - 1) / CKPT_ALIGN * CKPT_ALIGN;
    p->bytes = (uint64_t)numel * ckpt_dtype_size(dt);
    w->file_bytes = p->offset + p->bytes;
    w->n++;
    return 0;
}

/* The async snapshot's memory is kept for the next save (one per process; saves of one run
 * have the same size): a fresh buffer of gigabytes costs a page fault per 4 KiB on its first
 * copy, which on a virtual machine took longer than the copy itself (3.7 s of 4 for 1 GB). */
static uint8_t *spare_snapshot;
static size_t spare_bytes;
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;

/* Room for `bytes` rounded up to the direct-I/O alignment (atomic_write_image), in 2 MiB pages
 * where the kernel grants them (a few hundred faults per gigabyte instead of 262144). */
uint8_t *ckpt_snapshot_take(size_t bytes, size_t *cap) {
    size_t huge = (size_t)2 << 20, need = (bytes + huge - 1) / huge * huge;
    pthread_mutex_lock(&spare_lock);
    uint8_t *p = NULL;
    if (spare_snapshot && spare_bytes >= need && spare_bytes / 2 <= need) p = spare_snapshot, spare_snapshot = NULL;
    if (p) need = spare_bytes;
    pthread_mutex_unlock(&spare_lock);
    if (!p) {
        if (!need) need = huge;
        if (posix_memalign((void **)&p, huge, need)) return NULL;
#ifdef MADV_HUGEPAGE
        madvise(p, need, MADV_HUGEPAGE);
#endif
    }
    *cap = need;
    return p;
}

static void snapshot_release(uint8_t *p, size_t bytes) {
    if (!p) return;
    pthread_mutex_lock(&spare_lock);
    uint8_t *old = spare_snapshot;
    spare_snapshot = p, spare_bytes = bytes;
    pthread_mutex_unlock(&spare_lock);
    free(old);
}

/* Fill the spare snapshot in the background: its first touch is the expensive part. At normal
 * priority: at the lowest, a busy machine starves it past the first save, which then pays twice. */
static void *reserve_main(void *arg) {
    size_t bytes = (size_t)(uintptr_t)arg, cap = 0;
    uint8_t *p = ckpt_snapshot_take(bytes, &cap);
    if (p) {
        memset(p, 0, cap);
        snapshot_release(p, cap);
    }
    return NULL;
}

void ckpt_async_reserve(uint64_t bytes) {
    pthread_t t;
    if (!pthread_create(&t, NULL, reserve_main, (void *)(uintptr_t)bytes)) pthread_detach(t);
}

void ckpt_writer_abort(CkptWriter *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->p[i].name), free(w->p[i].crc);
    free(w->p);
    free(w->dir);
    free(w->step_dir);
    snapshot_release(w->snapshot, w->snapshot_bytes);
    free(w->meta);
    free(w->table);
    free(w);
}

/* The checksum block of a piece: whole-piece reads cost nothing extra with any size, and a read
 * of part of a piece costs at most one partial block at each end of each contiguous run. Runs
 * are rows or parts of rows of the piece (a column block of a row block, a tensor-parallel
 * split of a column block, a ZeRO range), so blocks start at the piece and are a row divided by
 * up to 8 (>= 32 bytes): splitting rows 2, 4 or 8 ways more finely then reads exactly its bytes.
 * Blocks double (staying aligned to rows) while a piece would need more than 4096, and never
 * exceed the writer's block_bytes. */
static uint64_t piece_block(const WPiece *p, int64_t cap) {
    uint64_t es = ckpt_dtype_size(p->dt);
    int64_t cols = p->slice.flat ? p->shape[p->ndim - 1] : p->slice.extent[p->ndim - 1];
    uint64_t b = cols > 0 ? (uint64_t)cols * es : es;
    for (int k = 0; k < 3 && b % 2 == 0 && b / 2 >= 32 && (b / 2) % es == 0; k++) b /= 2;
    while (b > (uint64_t)cap && b % 2 == 0) b /= 2;
    if (b > (uint64_t)cap) b = (uint64_t)cap;
    while (p->bytes / b >= 4096 && 2 * b <= (uint64_t)cap) b *= 2;
    return b;
}

/* Streams bytes into the shard file; bytes of a piece's span go into its block checksums. */
typedef struct {
    AtomicFile f;
    uint64_t pos;
    WPiece *owner; /* the piece whose span is being written (padding after it included) */
    uint64_t in_span;
    uint32_t cur;
    int dry; /* checksums only: the bytes are written afterwards as one image (async snapshot) */
} ShardOut;

static int push_crc(WPiece *p, uint32_t v) {
    if (p->ncrc == p->capcrc) {
        size_t cap = p->capcrc ? 2 * p->capcrc : 16;
        uint32_t *c = realloc(p->crc, sizeof *c * cap);
        if (!c) return myr_error("out of memory");
        p->crc = c;
        p->capcrc = cap;
    }
    p->crc[p->ncrc++] = v;
    return 0;
}

static int shard_put(ShardOut *o, const uint8_t *p, uint64_t n) {
    while (n > 0) {
        uint64_t take = n < ((uint64_t)1 << 24) ? n : (uint64_t)1 << 24;
        WPiece *w = o->owner;
        if (w) { /* blocks of the piece's bytes; the padding after them joins the last block */
            uint64_t B = w->block;
            int data = o->in_span < w->bytes, fresh = data && o->in_span % B == 0;
            if (data && take > B - o->in_span % B) take = B - o->in_span % B;
            o->cur = crc32c_update(fresh ? 0 : o->cur, p, take);
        }
        if (!o->dry && atomic_write(&o->f, p, take)) return -1;
        o->pos += take;
        o->in_span += take;
        p += take;
        n -= take;
        if (w && o->in_span % w->block == 0 && o->in_span < w->bytes && push_crc(w, o->cur)) return -1;
    }
    return 0;
}

/* The previous piece's span ends here: its last block (with the padding) gets its checksum. */
static int shard_switch(ShardOut *o, WPiece *next) {
    if (o->owner && push_crc(o->owner, o->cur)) return -1;
    o->owner = next;
    o->in_span = 0;
    return 0;
}

static cJSON *int_array(int n, const int64_t *v) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

/* The piece table: {"file", "bytes", "pieces": [{..., "block", "crc32c": hex}]}. */
static char *piece_table(const CkptWriter *w, const char *file) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "file", file);
    cJSON_AddNumberToObject(t, "bytes", (double)w->file_bytes);
    cJSON *ps = cJSON_AddArrayToObject(t, "pieces");
    for (int i = 0; i < w->n; i++) {
        const WPiece *p = &w->p[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", p->name);
        cJSON_AddStringToObject(j, "dtype", ckpt_dtype_name(p->dt));
        cJSON_AddItemToObject(j, "shape", int_array(p->ndim, p->shape));
        cJSON_AddNumberToObject(j, "offset", (double)p->offset);
        cJSON_AddNumberToObject(j, "bytes", (double)p->bytes);
        if (p->bytes) {
            char *hex = malloc(p->ncrc * 8 + 1);
            if (!hex) {
                cJSON_Delete(t);
                return NULL;
            }
            for (size_t i = 0; i < p->ncrc; i++) snprintf(hex + 8 * i, 9, "%08" PRIx32, p->crc[i]);
            hex[p->ncrc * 8] = 0;
            cJSON_AddNumberToObject(j, "block", (double)p->block);
            cJSON_AddStringToObject(j, "crc32c", hex);
            free(hex);
        }
        if (p->slice.flat) {
            int64_t f[2] = {p->slice.offset, p->slice.count};
            cJSON_AddItemToObject(j, "flat", int_array(2, f));
        } else {
            cJSON_AddItemToObject(j, "start", int_array(p->ndim, p->slice.start));
            cJSON_AddItemToObject(j, "extent", int_array(p->ndim, p->slice.extent));
        }
        cJSON_AddItemToArray(ps, j);
    }
    char *s = cJSON_PrintUnformatted(t);
    cJSON_Delete(t);
    return s;
}

void ckpt_rank_file(const CkptWriter *w, char *buf, size_t n) { snprintf(buf, n, "rank-%05d.bin", w->rank); }

/* Write and fsync this rank's shard (pieces at their offsets, zero padding between). */
int ckpt_write_shard_keep(CkptWriter *w, char **table_json) {
    *table_json = NULL;
    if (w->begin_err[0]) return myr_error("saving checkpoint step %" PRId64 ", rank %d: %s", w->step, w->rank, w->begin_err);
    char file[64], path[4096];
    ckpt_rank_file(w, file, sizeof file);
    snprintf(path, sizeof path, "%s/%s", w->step_dir, file);
    ShardOut o;
    memset(&o, 0, sizeof o);
    if (atomic_open(&o.f, path)) return -1;
    o.dry = w->snapshot != NULL;
    static const uint8_t zeros[CKPT_ALIGN];
    int rc = 0;
    for (int i = 0; i < w->n && rc == 0; i++) {
        WPiece *p = &w->p[i];
        ckpt_crash_point();
        p->ncrc = 0;
        if (!p->bytes) continue;
        p->block = piece_block(p, w->block);
        if (o.pos < p->offset) rc = shard_put(&o, zeros, p->offset - o.pos); /* the previous span's padding */
        if (rc == 0) rc = shard_switch(&o, p);
        if (rc == 0) rc = shard_put(&o, p->data, p->bytes);
    }
    if (rc == 0) rc = shard_switch(&o, NULL);
    if (rc == 0 && o.dry) rc = atomic_write_image(&o.f, w->snapshot, w->file_bytes);
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", myr_last_error());
        atomic_abort(&o.f);
        return myr_error("saving checkpoint step %" PRId64 ", rank %d: %s", w->step, w->rank, msg);
    }
    ckpt_crash_point();
    if (atomic_commit(&o.f)) /* fsync, rename into place, fsync the directory */
        return ckpt_error_prefix("saving checkpoint step %" PRId64 ", rank %d", w->step, w->rank);
    ckpt_crash_point();
    *table_json = piece_table(w, file);
    if (!*table_json) return myr_error("out of memory describing checkpoint shard %s", path);
    return 0;
}

int ckpt_writer_write_shard(CkptWriter *w, char **table_json) {
    int rc = ckpt_write_shard_keep(w, table_json);
    ckpt_writer_abort(w);
    return rc;
}
