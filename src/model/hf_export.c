/* hf_export.c: a model written in the Hugging Face layout by every rank at once (hf_weights.h).
 * The files' layout depends on the config alone (tensor order, dtype, shard size), so each rank
 * computes the same plan; one process creates the files at their full size under temporary
 * names, every rank writes the boxes it owns into place with pwrite (converted to the file's
 * dtype through a small buffer: no rank holds more than its own slices), and one process renames
 * them into place with the index and config.json. A failure at any step leaves the directory as
 * it was (temporary files removed). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "io/atomic_file.h"
#include "model/hf_config.h"
#include "io/safetensors.h"
#include "model/hf_slots.h"
#include "model/hf_weights.h"
#include "util/bf16.h"
#include "util/error.h"

enum { EXPORT_CHUNK = 1 << 18 }; /* elements converted per write: 1 MiB of fp32 */

struct HfExport {
    ModelConfig cfg;
    ParamTable whole;
    HfSlotList slots;
    HfSlotIndex ix;
    HfSaveDtype dtype;
    size_t esize;
    int nfiles;
    char (*names)[64];   /* [nfiles] final file names */
    char **headers;      /* [nfiles] header text (space-padded) */
    uint64_t *prefix;    /* [nfiles] bytes before the data: 8 + header */
    uint64_t *size;      /* [nfiles] file size */
    int *slot_file;      /* [slots] */
    uint64_t *slot_begin; /* [slots] byte offset of the tensor in its file's data */
    int *fd;             /* [nfiles] open for writing (hf_export_open), else -1 */
    unsigned char *buf;  /* conversion buffer of the writes (EXPORT_CHUNK elements) */
    char dir[4096];
    uint64_t total;
};

int hf_export_files(const HfExport *e) { return e->nfiles; }
const char *hf_export_file_name(const HfExport *e, int i) { return e->names[i]; }
uint64_t hf_export_total_bytes(const HfExport *e) { return e->total; }

void hf_export_free(HfExport *e) {
    if (!e) return;
    for (int i = 0; i < e->nfiles; i++) {
        free(e->headers[i]);
        if (e->fd && e->fd[i] >= 0) close(e->fd[i]);
    }
    free(e->names);
    free(e->headers);
    free(e->prefix);
    free(e->size);
    free(e->slot_file);
    free(e->slot_begin);
    free(e->fd);
    free(e->buf);
    hf_slot_index_free(&e->ix);
    hf_slots_free(&e->slots);
    param_table_free(&e->whole);
    free(e);
}

static uint64_t slot_numel(const HfSlot *s) { return (uint64_t)s->rows * (uint64_t)hf_slot_cols(s); }

int hf_export_plan(const ModelConfig *c, HfSaveDtype dtype, uint64_t shard_bytes, HfExport **out) {
    if (model_config_validate(c)) return -1;
    HfExport *e = calloc(1, sizeof *e);
    e->cfg = *c;
    e->dtype = dtype;
    e->esize = dtype == HF_SAVE_BF16 ? 2 : 4;
    param_table_build(&e->whole, c, 1);
    hf_slots_build(c, &e->whole, &e->slots);
    hf_slot_index_build(&e->ix, &e->slots);
    int n = e->slots.n;
    e->slot_file = calloc((size_t)n, sizeof *e->slot_file);
    e->slot_begin = calloc((size_t)n, sizeof *e->slot_begin);
    /* shards: a new one when the next tensor would take the current one past shard_bytes */
    uint64_t cur = 0;
    int file = 0;
    for (int i = 0; i < n; i++) {
        uint64_t b = slot_numel(&e->slots.s[i]) * e->esize;
        if (cur > 0 && cur + b > shard_bytes) file++, cur = 0;
        e->slot_file[i] = file;
        cur += b;
    }
    e->nfiles = n ? file + 1 : 1;
    e->names = calloc((size_t)e->nfiles, sizeof *e->names);
    e->headers = calloc((size_t)e->nfiles, sizeof *e->headers);
    e->prefix = calloc((size_t)e->nfiles, sizeof *e->prefix);
    e->size = calloc((size_t)e->nfiles, sizeof *e->size);
    e->fd = malloc((size_t)e->nfiles * sizeof *e->fd);
    StLayoutTensor *lay = calloc((size_t)(n ? n : 1), sizeof *lay);
    int rc = 0;
    for (int f = 0; f < e->nfiles && !rc; f++) {
        e->fd[f] = -1;
        if (e->nfiles == 1) snprintf(e->names[f], sizeof e->names[f], "model.safetensors");
        else snprintf(e->names[f], sizeof e->names[f], "model-%05d-of-%05d.safetensors", f + 1, e->nfiles);
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (e->slot_file[i] != f) continue;
            const HfSlot *s = &e->slots.s[i];
            lay[k] = (StLayoutTensor){.name = s->hf, .dtype = dtype == HF_SAVE_BF16 ? ST_BF16 : ST_F32};
            lay[k].ndim = hf_slot_shape(s, lay[k].shape);
            k++;
        }
        uint64_t data_bytes;
        e->headers[f] = st_layout_header(lay, k, NULL, NULL, 0, &e->prefix[f], &data_bytes);
        if (!e->headers[f]) {
            rc = -1;
            break;
        }
        e->size[f] = e->prefix[f] + data_bytes;
        e->total += e->size[f];
        k = 0;
        for (int i = 0; i < n; i++)
            if (e->slot_file[i] == f) e->slot_begin[i] = lay[k++].begin;
    }
    free(lay);
    if (rc) {
        hf_export_free(e);
        return -1;
    }
    *out = e;
    return 0;
}

static void tmp_path(const HfExport *e, const char *dir, int f, char *out, size_t n) {
    snprintf(out, n, "%s/%s.tmp", dir, e->names[f]);
}

static int write_at(int fd, const void *buf, size_t n, uint64_t off, const char *path) {
    for (size_t done = 0; done < n;) {
        ssize_t w = pwrite(fd, (const char *)buf + done, n - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return myr_error("cannot write %s: %s", path, strerror(errno));
        done += (size_t)w;
    }
    return 0;
}

int hf_export_create(const HfExport *e, const char *dir) {
    if (mkdir(dir, 0755) && errno != EEXIST) return myr_error("cannot create %s: %s", dir, strerror(errno));
    for (int f = 0; f < e->nfiles; f++) {
        char path[8192];
        tmp_path(e, dir, f, path, sizeof path);
        int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0) {
            myr_error("cannot create %s: %s", path, strerror(errno));
            hf_export_abort(e, dir);
            return -1;
        }
        uint64_t hlen = e->prefix[f] - 8;
        int rc = write_at(fd, &hlen, 8, 0, path);
        if (!rc) rc = write_at(fd, e->headers[f], (size_t)hlen, 8, path);
        /* the whole size now: a disk too small fails before any rank writes */
        int fa = rc ? 0 : posix_fallocate(fd, 0, (off_t)e->size[f]);
        if (!rc && fa && fa != EOPNOTSUPP && fa != EINVAL)
            rc = myr_error("cannot reserve %.1f MiB for %s: %s", e->size[f] / 1048576.0, path, strerror(fa));
        if (!rc && fa && ftruncate(fd, (off_t)e->size[f]))
            rc = myr_error("cannot size %s: %s", path, strerror(errno));
        if (close(fd) && !rc) rc = myr_error("cannot write %s: %s", path, strerror(errno));
        if (rc) {
            hf_export_abort(e, dir);
            return -1;
        }
    }
    return 0;
}

int hf_export_open(HfExport *e, const char *dir) {
    snprintf(e->dir, sizeof e->dir, "%s", dir);
    if (!e->buf && !(e->buf = malloc(EXPORT_CHUNK * 4))) return myr_error("out of memory writing %s", dir);
    for (int f = 0; f < e->nfiles; f++) {
        char path[8192];
        tmp_path(e, dir, f, path, sizeof path);
        e->fd[f] = open(path, O_WRONLY | O_CLOEXEC);
        if (e->fd[f] < 0) return myr_error("cannot open %s for writing: %s", path, strerror(errno));
    }
    return 0;
}

int hf_export_close(HfExport *e) {
    int rc = 0;
    for (int f = 0; f < e->nfiles; f++) {
        if (e->fd[f] < 0) continue;
        char path[8192];
        tmp_path(e, e->dir, f, path, sizeof path);
        if (fsync(e->fd[f]) && !rc) rc = myr_error("cannot write %s: %s", path, strerror(errno));
        if (close(e->fd[f]) && !rc) rc = myr_error("cannot write %s: %s", path, strerror(errno));
        e->fd[f] = -1;
    }
    return rc;
}

/* n elements src[0], src[stride], ... written as elements [first, first + n) of slot i. */
static int write_run(HfExport *e, int i, uint64_t first, const real *src, int64_t n, int64_t stride) {
    enum { CHUNK = EXPORT_CHUNK };
    unsigned char *buf = e->buf;
    int f = e->slot_file[i];
    char path[8192];
    for (int64_t done = 0; done < n;) {
        int64_t k = n - done < CHUNK ? n - done : CHUNK;
        if (e->dtype == HF_SAVE_BF16) {
            uint16_t *o = (uint16_t *)buf;
            for (int64_t j = 0; j < k; j++) o[j] = f32_to_bf16((float)src[(done + j) * stride]);
        } else {
            float *o = (float *)buf;
            for (int64_t j = 0; j < k; j++) o[j] = (float)src[(done + j) * stride];
        }
        uint64_t off = e->prefix[f] + e->slot_begin[i] + (first + (uint64_t)done) * e->esize;
        tmp_path(e, e->dir, f, path, sizeof path);
        if (write_at(e->fd[f], buf, (size_t)k * e->esize, off, path)) return -1;
        done += k;
    }
    return 0;
}

int hf_export_box(void *ctx, const char *name, const int64_t gshape[2], const TensorBox *box, real *data) {
    HfExport *e = ctx;
    int64_t covered = 0, nc = box->nc;
    int rc = 0;
    for (int i = hf_slot_first(&e->ix, name); i >= 0 && !rc; i = hf_slot_next(&e->ix, i, name)) {
        const HfSlot *s = &e->slots.s[i];
        int64_t a = box->r0 > s->row0 ? box->r0 : s->row0;
        int64_t b = box->r0 + box->nr < s->row0 + s->rows ? box->r0 + box->nr : s->row0 + s->rows;
        if (a >= b) continue;
        covered += b - a;
        int64_t cols = hf_slot_cols(s);
        const real *in = data + (a - box->r0) * nc;
        if (!s->transpose && box->c0 == 0 && nc == cols) {
            rc = write_run(e, i, (uint64_t)((a - s->row0) * cols), in, (b - a) * cols, 1);
        } else if (!s->transpose) {
            for (int64_t r = a; r < b && !rc; r++)
                rc = write_run(e, i, (uint64_t)((r - s->row0) * cols + box->c0), in + (r - a) * nc, nc, 1);
        } else { /* stored [cols, rows]: our column c is the file's row c */
            for (int64_t c = box->c0; c < box->c0 + nc && !rc; c++)
                rc = write_run(e, i, (uint64_t)(c * s->rows + (a - s->row0)), in + (c - box->c0), b - a, nc);
        }
    }
    if (!rc && covered != box->nr)
        rc = myr_error("internal: rows [%lld, %lld) of %s are not all in the Hugging Face layout", (long long)box->r0,
                       (long long)(box->r0 + box->nr), name);
    (void)gshape;
    return rc;
}

void hf_export_abort(const HfExport *e, const char *dir) {
    for (int f = 0; f < e->nfiles; f++) {
        char path[8192];
        tmp_path(e, dir, f, path, sizeof path);
        unlink(path);
    }
}

static int write_index(const HfExport *e, const char *dir) {
    char path[8192];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    uint64_t params = 0;
    for (int i = 0; i < e->slots.n; i++) params += slot_numel(&e->slots.s[i]) * e->esize;
    /* the weight map sorted by name, as transformers writes it */
    int n = e->slots.n;
    int *order = malloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++) /* insertion sort: a few hundred to a few thousand names, once */
        for (int j = i; j > 0 && strcmp(e->slots.s[order[j - 1]].hf, e->slots.s[order[j]].hf) > 0; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "metadata");
    char total[32];
    snprintf(total, sizeof total, "%llu", (unsigned long long)params);
    cJSON_AddItemToObject(meta, "total_size", cJSON_CreateRaw(total));
    cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
    for (int k = 0; k < n; k++)
        cJSON_AddStringToObject(map, e->slots.s[order[k]].hf, e->names[e->slot_file[order[k]]]);
    free(order);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return myr_error("out of memory writing %s", path);
    int rc = atomic_write_text(path, text);
    free(text);
    return rc;
}

/* An earlier save of another size may have left files this one does not replace: a single
 * model.safetensors beside new shards (transformers would load it first), an index beside a new
 * single file, shards of another count. */
static int is_stale(const HfExport *e, const char *name) {
    for (int f = 0; f < e->nfiles; f++)
        if (!strcmp(name, e->names[f])) return 0;
    if (!strcmp(name, "model.safetensors")) return 1;
    if (!strcmp(name, "model.safetensors.index.json")) return e->nfiles == 1;
    int a, b, len = 0;
    return sscanf(name, "model-%5d-of-%5d.safetensors%n", &a, &b, &len) == 2 && (size_t)len == strlen(name);
}

int hf_export_commit(const HfExport *e, const char *dir, const ModelConfig *c) {
    for (int f = 0; f < e->nfiles; f++) {
        char from[8192], to[8192];
        tmp_path(e, dir, f, from, sizeof from);
        snprintf(to, sizeof to, "%s/%s", dir, e->names[f]);
        if (rename(from, to)) return myr_error("cannot rename %s to %s: %s", from, to, strerror(errno));
    }
    if (e->nfiles > 1 && write_index(e, dir)) return -1;
    char path[8192];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (hf_config_write_dtype(path, c, e->dtype == HF_SAVE_BF16 ? "bfloat16" : "float32")) return -1;
    DIR *d = opendir(dir);
    for (struct dirent *ent; d && (ent = readdir(d));) {
        if (!is_stale(e, ent->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}
