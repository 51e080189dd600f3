/* hf_source.c: a Hugging Face model directory as a source of boxes of the global tensors
 * (hf_weights.h). Only headers are parsed up front (st_open_header); every box is read with
 * pread from the bytes it covers, so a rank that holds 1/64 of a 140 GB checkpoint reads about
 * 1/64 of it and never maps or buffers a whole file. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/hf_config.h"
#include "io/quote.h"
#include "io/safetensors.h"
#include "model/hf_slots.h"
#include "model/hf_weights.h"
#include "util/error.h"

/* A string -> int map (open addressing), for tensor names. */
typedef struct {
    const char **key;
    int *val;
    int cap;
} NameMap;

static unsigned long long fnv(const char *s) {
    unsigned long long h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void map_init(NameMap *m, int n) {
    for (m->cap = 16; m->cap < 2 * n + 2; m->cap *= 2) {}
    m->key = calloc((size_t)m->cap, sizeof *m->key);
    m->val = calloc((size_t)m->cap, sizeof *m->val);
}

static void map_put(NameMap *m, const char *k, int v) {
    unsigned long long h = fnv(k) & (unsigned long long)(m->cap - 1);
    while (m->key[h] && strcmp(m->key[h], k)) h = (h + 1) & (unsigned long long)(m->cap - 1);
    m->key[h] = k;
    m->val[h] = v;
}

static int map_get(const NameMap *m, const char *k) {
    unsigned long long h = fnv(k) & (unsigned long long)(m->cap - 1);
    for (; m->key[h]; h = (h + 1) & (unsigned long long)(m->cap - 1))
        if (!strcmp(m->key[h], k)) return m->val[h];
    return -1;
}

static void map_free(NameMap *m) {
    free(m->key);
    free(m->val);
    m->key = NULL;
    m->val = NULL;
}

struct HfSource {
    char dir[4096], desc[4600];
    ModelConfig cfg;
    ParamTable whole;
    HfSlotList slots;
    HfSlotIndex ix;
    int nfiles;
    StFile *files;
    const StTensor **slot_tensor; /* [slots] */
    int *slot_file;               /* [slots] */
    uint64_t bytes_read;
};

const ModelConfig *hf_source_config(const HfSource *s) { return &s->cfg; }
const char *hf_source_describe(const HfSource *s) { return s->desc; }
uint64_t hf_source_bytes_read(const HfSource *s) { return s->bytes_read; }

uint64_t hf_source_total_bytes(const HfSource *s) {
    uint64_t n = 0;
    for (int i = 0; i < s->slots.n; i++) n += s->slot_tensor[i]->end - s->slot_tensor[i]->begin;
    return n;
}

void hf_source_close(HfSource *s) {
    if (!s) return;
    for (int i = 0; i < s->nfiles; i++) st_close(&s->files[i]);
    free(s->files);
    free(s->slot_tensor);
    free(s->slot_file);
    hf_slot_index_free(&s->ix);
    hf_slots_free(&s->slots);
    param_table_free(&s->whole);
    free(s);
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        myr_error("cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            if (cap >= (256u << 20)) {
                free(buf);
                fclose(f);
                myr_error("%s is larger than 256 MB; not a safetensors index", path);
                return NULL;
            }
            char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    fclose(f);
    if (!buf) myr_error("out of memory reading %s", path);
    *len = n;
    return buf;
}

/* The tensors a file holds that the model does not expect (buffers aside) are an error: a
 * checkpoint for another shape or family must not load half-way. */
static int check_unexpected(const HfSource *s, const NameMap *expected, const StFile *f, const char *path) {
    int tied = s->cfg.tied_embeddings;
    for (int i = 0; i < f->n; i++) {
        const char *name = f->tensors[i].name;
        if (hf_name_ignorable(name) || map_get(expected, name) >= 0) continue;
        if (tied && !strcmp(name, "lm_head.weight")) continue; /* a tied head saved explicitly */
        return myr_error("%s: unexpected tensor %s for a %s model with %d layers (is the checkpoint for this "
                         "model's config.json?)", path, io_quote(name), model_arch_name(s->cfg.arch), s->cfg.layers);
    }
    return 0;
}

/* Check a slot's tensor: shape and a loadable dtype. */
static int check_slot(const HfSlot *sl, const StTensor *t, const char *path) {
    int64_t want[2];
    int ndim = hf_slot_shape(sl, want);
    if (t->ndim != ndim || t->shape[0] != want[0] || (ndim == 2 && t->shape[1] != want[1])) {
        char got[96] = "", w[64];
        for (int d = 0; d < t->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        if (ndim == 2) snprintf(w, sizeof w, "%lld, %lld", (long long)want[0], (long long)want[1]);
        else snprintf(w, sizeof w, "%lld", (long long)want[0]);
        return myr_error("%s: tensor %s has shape [%s], the config needs [%s]", path, sl->hf, got, w);
    }
    if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16 && t->dtype != ST_F64)
        return myr_error("%s: tensor %s has dtype %s; weights must be F32, BF16 or F16", path, sl->hf,
                         st_dtype_name(t->dtype));
    return 0;
}

/* The GPT-2 names may lack "transformer.": the name as the file holds it, or NULL. */
static const StTensor *find_in(const StFile *f, const HfSlot *sl) {
    const StTensor *t = st_find(f, sl->hf);
    if (!t && !strncmp(sl->hf, "transformer.", 12)) t = st_find(f, sl->hf + 12);
    return t;
}

/* Slots bound to tensors: single file (files[0]) or through the index's weight map. */
static int bind_slots(HfSource *s, const NameMap *weight_map, const char *index_path) {
    param_table_build(&s->whole, &s->cfg, 1);
    hf_slots_build(&s->cfg, &s->whole, &s->slots);
    hf_slot_index_build(&s->ix, &s->slots);
    int n = s->slots.n;
    s->slot_tensor = calloc((size_t)(n ? n : 1), sizeof *s->slot_tensor);
    s->slot_file = calloc((size_t)(n ? n : 1), sizeof *s->slot_file);
    NameMap expected;
    map_init(&expected, 2 * n);
    for (int i = 0; i < n; i++) {
        const HfSlot *sl = &s->slots.s[i];
        map_put(&expected, sl->hf, i);
        if (!strncmp(sl->hf, "transformer.", 12)) map_put(&expected, sl->hf + 12, i);
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const HfSlot *sl = &s->slots.s[i];
        int f = 0;
        if (weight_map) {
            f = map_get(weight_map, sl->hf);
            if (f < 0 && !strncmp(sl->hf, "transformer.", 12)) f = map_get(weight_map, sl->hf + 12);
            if (f < 0) {
                rc = myr_error("%s: tensor %s is not in the weight map (is the checkpoint for this model family and "
                               "shape?)", index_path, sl->hf);
                break;
            }
        }
        const char *path = s->files[f].path ? s->files[f].path : s->dir;
        const StTensor *t = find_in(&s->files[f], sl);
        if (!t) {
            rc = weight_map ? myr_error("%s: the index places tensor %s in %s, which does not hold it (a shard file "
                                        "from another checkpoint?)", index_path, sl->hf, path)
                            : myr_error("%s: tensor %s is missing (is the checkpoint for this model family and shape?)",
                                        path, sl->hf);
            break;
        }
        rc = check_slot(sl, t, path);
        s->slot_tensor[i] = t;
        s->slot_file[i] = f;
    }
    for (int f = 0; f < s->nfiles && !rc; f++)
        rc = check_unexpected(s, &expected, &s->files[f], s->files[f].path ? s->files[f].path : s->dir);
    map_free(&expected);
    return rc;
}

static const char *dtype_summary(const HfSource *s) {
    int seen[16] = {0}, kinds = 0;
    StDtype last = ST_F32;
    for (int i = 0; i < s->slots.n; i++) {
        StDtype d = s->slot_tensor[i]->dtype;
        if (!seen[d]++) kinds++, last = d;
    }
    return kinds == 1 ? st_dtype_name(last) : "mixed dtypes";
}

/* model.safetensors.index.json: {"metadata": {...}, "weight_map": {"tensor": "file", ...}} */
static int open_index(HfSource *s, const char *index_path) {
    size_t len;
    char *text = read_text(index_path, &len);
    if (!text) return -1;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root) return myr_error("%s: not valid JSON (a damaged safetensors index?)", index_path);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    int rc = 0;
    if (!cJSON_IsObject(wm)) rc = myr_error("%s: no \"weight_map\" object (not a safetensors index)", index_path);
    int entries = rc ? 0 : cJSON_GetArraySize(wm);
    char **names = calloc((size_t)entries + 1, sizeof *names);
    NameMap files, weight_map;
    map_init(&files, entries);
    map_init(&weight_map, entries);
    for (const cJSON *e = rc ? NULL : wm->child; e && !rc; e = e->next) {
        if (!cJSON_IsString(e)) {
            rc = myr_error("%s: weight_map entry %s is not a file name", index_path, io_quote(e->string));
            break;
        }
        const char *file = e->valuestring;
        if (!file[0] || strchr(file, '/') || file[0] == '.') {
            rc = myr_error("%s: weight_map names %s for %s: shard files must be plain names in the model directory",
                           index_path, io_quote(file), io_quote(e->string));
            break;
        }
        int f = map_get(&files, file);
        if (f < 0) {
            f = s->nfiles++;
            names[f] = strdup(file);
            map_put(&files, names[f], f);
        }
        map_put(&weight_map, e->string, f);
    }
    if (!rc && s->nfiles == 0) rc = myr_error("%s: the weight map is empty", index_path);
    s->files = calloc((size_t)(s->nfiles ? s->nfiles : 1), sizeof *s->files);
    for (int f = 0; f < s->nfiles; f++) s->files[f].fd = -1;
    for (int f = 0; f < s->nfiles && !rc; f++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", s->dir, names[f]);
        if (st_open_header(path, &s->files[f]))
            rc = is_file(path) ? -1
                               : myr_error("%s names the shard %s, which is missing (copy every shard file of the "
                                           "checkpoint into %s)", index_path, names[f], s->dir);
    }
    if (!rc) rc = bind_slots(s, &weight_map, index_path);
    if (!rc)
        snprintf(s->desc, sizeof s->desc, "%s: %d shard%s (model.safetensors.index.json), %s", s->dir, s->nfiles,
                 s->nfiles == 1 ? "" : "s", dtype_summary(s));
    map_free(&files);
    map_free(&weight_map); /* its keys point into root */
    cJSON_Delete(root);
    for (int f = 0; f < s->nfiles; f++) free(names[f]);
    free(names);
    return rc;
}

static int open_single(HfSource *s, const char *path) {
    s->nfiles = 1;
    s->files = calloc(1, sizeof *s->files);
    if (st_open_header(path, &s->files[0])) return -1;
    if (bind_slots(s, NULL, NULL)) return -1;
    snprintf(s->desc, sizeof s->desc, "%s (%s)", path, dtype_summary(s));
    return 0;
}

int hf_source_open(const char *dir, HfSource **out) {
    HfSource *s = calloc(1, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    char path[8192];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = hf_config_read(path, &s->cfg);
    if (!rc) {
        char single[8192], index[8192];
        snprintf(single, sizeof single, "%s/model.safetensors", dir);
        snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
        /* the single file first, as transformers looks for it */
        if (is_file(single)) rc = open_single(s, single);
        else if (is_file(index)) rc = open_index(s, index);
        else
            rc = myr_error("%s holds neither model.safetensors nor model.safetensors.index.json (a Hugging Face model "
                           "directory holds its weights in one file or in shards named by the index)", dir);
    }
    if (rc) {
        hf_source_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

int hf_source_open_file(const char *path, const ModelConfig *c, HfSource **out) {
    HfSource *s = calloc(1, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s", path);
    s->cfg = *c;
    if (open_single(s, path)) {
        hf_source_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

/* Elements [first, first + n) of a slot's tensor into dst (real: fp32, or fp64 in the
 * gradient-check build, through a float buffer). */
static int read_range(HfSource *s, int slot, int64_t first, int64_t n, real *dst) {
    const StTensor *t = s->slot_tensor[slot];
    const StFile *f = &s->files[s->slot_file[slot]];
    s->bytes_read += (uint64_t)n * st_dtype_size(t->dtype);
    if (sizeof(real) == sizeof(float)) return st_read_range_f32(f, t, first, n, (float *)dst);
    float *tmp = malloc((size_t)(n ? n : 1) * sizeof(float));
    int rc = tmp ? st_read_range_f32(f, t, first, n, tmp) : myr_error("out of memory reading %s", f->path);
    for (int64_t k = 0; !rc && k < n; k++) dst[k] = tmp[k];
    free(tmp);
    return rc;
}

int hf_source_box(void *ctx, const char *name, const int64_t gshape[2], const TensorBox *box, real *data) {
    HfSource *s = ctx;
    int64_t covered = 0, nc = box->nc;
    real *tmp = NULL;
    int rc = 0;
    for (int i = hf_slot_first(&s->ix, name); i >= 0 && !rc; i = hf_slot_next(&s->ix, i, name)) {
        const HfSlot *sl = &s->slots.s[i];
        int64_t a = box->r0 > sl->row0 ? box->r0 : sl->row0;
        int64_t b = box->r0 + box->nr < sl->row0 + sl->rows ? box->r0 + box->nr : sl->row0 + sl->rows;
        if (a >= b) continue;
        covered += b - a;
        int64_t cols = hf_slot_cols(sl);
        real *out = data + (a - box->r0) * nc;
        if (!sl->transpose && box->c0 == 0 && nc == cols) { /* whole rows: one run */
            rc = read_range(s, i, (a - sl->row0) * cols, (b - a) * cols, out);
        } else if (!sl->transpose) {
            for (int64_t r = a; r < b && !rc; r++)
                rc = read_range(s, i, (r - sl->row0) * cols + box->c0, nc, out + (r - a) * nc);
        } else { /* stored [cols, rows]: our column c is the file's row c */
            if (!tmp) tmp = malloc((size_t)box->nr * sizeof(real));
            for (int64_t c = box->c0; c < box->c0 + nc && !rc; c++) {
                rc = read_range(s, i, c * sl->rows + (a - sl->row0), b - a, tmp);
                for (int64_t r = 0; r < b - a && !rc; r++) out[r * nc + (c - box->c0)] = tmp[r];
            }
        }
    }
    free(tmp);
    if (!rc && covered != box->nr)
        rc = myr_error("internal: rows [%lld, %lld) of %s are not all in the Hugging Face layout", (long long)box->r0,
                       (long long)(box->r0 + box->nr), name);
    (void)gshape;
    return rc;
}
