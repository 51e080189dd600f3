/* safetensors.c: parse, validate, convert and write safetensors files (see safetensors.h). */
#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/quote.h"
#include "util/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host (the format is little-endian)"
#endif

/* The reference implementation refuses headers above 100 MB; so do we. */
enum { ST_MAX_HEADER = 100000000 };

static const struct {
    const char *name;
    size_t size;
} dtype_info[] = {
    [ST_F32] = {"F32", 4}, [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2}, [ST_F64] = {"F64", 8},
    [ST_I64] = {"I64", 8}, [ST_I32] = {"I32", 4}, [ST_I16] = {"I16", 2},  [ST_I8] = {"I8", 1},
    [ST_U8] = {"U8", 1},   [ST_BOOL] = {"BOOL", 1},
};
enum { ST_NUM_DTYPES = sizeof dtype_info / sizeof dtype_info[0] };

const char *st_dtype_name(StDtype d) { return (unsigned)d < ST_NUM_DTYPES ? dtype_info[d].name : "?"; }
size_t st_dtype_size(StDtype d) { return (unsigned)d < ST_NUM_DTYPES ? dtype_info[d].size : 0; }

int64_t st_numel(const StTensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* ---------- reading ---------- */

/* A JSON number that is a non-negative integer exactly representable in a double. */
static int json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0) || d > 9007199254740992.0 || d != floor(d)) return -1;
    *out = (uint64_t)d;
    return 0;
}

static void free_tensors(StFile *f) {
    for (int i = 0; i < f->n; i++) free(f->tensors[i].name);
    free(f->tensors);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->meta_keys);
    free(f->meta_values);
    f->tensors = NULL;
    f->meta_keys = f->meta_values = NULL;
    f->n = f->n_meta = 0;
}

static int parse_metadata(const cJSON *meta, const char *src, StFile *f) {
    if (!cJSON_IsObject(meta))
        return myr_error("safetensors %s: \"__metadata__\" must be an object of strings", src);
    int n = cJSON_GetArraySize(meta);
    f->meta_keys = calloc(n ? n : 1, sizeof *f->meta_keys);
    f->meta_values = calloc(n ? n : 1, sizeof *f->meta_values);
    if (!f->meta_keys || !f->meta_values) return myr_error("out of memory reading %s", src);
    for (const cJSON *m = meta->child; m; m = m->next) {
        if (!cJSON_IsString(m))
            return myr_error("safetensors %s: \"__metadata__\" value of '%s' is not a string", src, io_quote(m->string));
        f->meta_keys[f->n_meta] = strdup(m->string);
        f->meta_values[f->n_meta] = strdup(m->valuestring);
        f->n_meta++;
        if (!f->meta_keys[f->n_meta - 1] || !f->meta_values[f->n_meta - 1])
            return myr_error("out of memory reading %s", src);
    }
    return 0;
}

/* Fill one StTensor from its header entry, checking dtype, shape and that the byte range
 * matches the shape exactly and lies inside the data buffer. */
static int parse_tensor(const cJSON *e, const char *src, size_t data_size, StTensor *t) {
    const char *name = io_quote(e->string);
    if (!cJSON_IsObject(e)) return myr_error("safetensors %s: entry '%s' is not an object", src, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt)) return myr_error("safetensors %s: tensor '%s' has no \"dtype\" string", src, name);
    int found = -1;
    for (int d = 0; d < ST_NUM_DTYPES; d++)
        if (!strcmp(dt->valuestring, dtype_info[d].name)) found = d;
    if (found < 0)
        return myr_error("safetensors %s: tensor '%s' has unsupported dtype '%s' (supported: F32 F16 BF16 F64 I64 "
                         "I32 I16 I8 U8 BOOL)", src, name, io_quote(dt->valuestring));
    t->dtype = (StDtype)found;
    if (!cJSON_IsArray(sh)) return myr_error("safetensors %s: tensor '%s' has no \"shape\" array", src, name);
    int ndim = cJSON_GetArraySize(sh);
    if (ndim > ST_MAX_NDIM)
        return myr_error("safetensors %s: tensor '%s' has %d dimensions (at most %d supported)", src, name, ndim,
                         ST_MAX_NDIM);
    t->ndim = ndim;
    /* numel and byte size with overflow checks: 2^62 bytes is far beyond any real file */
    uint64_t numel = 1;
    int i = 0;
    for (const cJSON *d = sh->child; d; d = d->next, i++) {
        uint64_t v;
        if (json_uint(d, &v))
            return myr_error("safetensors %s: tensor '%s' shape entry %d is not a non-negative integer", src, name, i);
        t->shape[i] = (int64_t)v;
        if (v && numel > (UINT64_C(1) << 62) / v)
            return myr_error("safetensors %s: tensor '%s' shape is absurdly large", src, name);
        numel *= v;
    }
    uint64_t esize = dtype_info[found].size;
    if (numel > (UINT64_C(1) << 62) / esize)
        return myr_error("safetensors %s: tensor '%s' shape is absurdly large", src, name);
    uint64_t nbytes = numel * esize;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || json_uint(off->child, &t->begin) ||
        json_uint(off->child->next, &t->end))
        return myr_error("safetensors %s: tensor '%s' \"data_offsets\" must be [begin, end] non-negative integers",
                         src, name);
    if (t->begin > t->end)
        return myr_error("safetensors %s: header offsets lie: tensor '%s' has begin %" PRIu64 " > end %" PRIu64
                         " (file corrupt)", src, name, t->begin, t->end);
    if (t->end > data_size)
        return myr_error("safetensors %s: header offsets lie: tensor '%s' ends at byte %" PRIu64
                         " but the data section has only %zu bytes (file truncated or corrupt)",
                         src, name, t->end, data_size);
    if (t->end - t->begin != nbytes)
        return myr_error("safetensors %s: header offsets lie: tensor '%s' spans %" PRIu64 " bytes but its shape and "
                         "dtype %s need %" PRIu64 " (file corrupt)", src, name, t->end - t->begin,
                         dtype_info[found].name, nbytes);
    return 0;
}

static int cmp_by_begin(const void *a, const void *b) {
    const StTensor *x = *(const StTensor *const *)a, *y = *(const StTensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}
static int cmp_by_name(const void *a, const void *b) {
    return strcmp((*(const StTensor *const *)a)->name, (*(const StTensor *const *)b)->name);
}

/* No two tensors may share a name or overlap in the data buffer (gaps are allowed). */
static int check_layout(const StFile *f, const char *src) {
    if (f->n < 2) return 0;
    const StTensor **idx = malloc(f->n * sizeof *idx);
    if (!idx) return myr_error("out of memory reading %s", src);
    for (int i = 0; i < f->n; i++) idx[i] = &f->tensors[i];
    int rc = 0;
    qsort(idx, f->n, sizeof *idx, cmp_by_name);
    for (int i = 1; i < f->n && !rc; i++)
        if (!strcmp(idx[i - 1]->name, idx[i]->name))
            rc = myr_error("safetensors %s: tensor '%s' appears twice in the header", src, io_quote(idx[i]->name));
    qsort(idx, f->n, sizeof *idx, cmp_by_begin);
    const StTensor *prev = NULL; /* the non-empty tensor reaching furthest so far */
    for (int i = 0; i < f->n && !rc; i++) {
        if (idx[i]->begin == idx[i]->end) continue;
        if (prev && idx[i]->begin < prev->end)
            rc = myr_error("safetensors %s: header offsets lie: tensors '%s' and '%s' overlap in the data section "
                           "(file corrupt)", src, io_quote(prev->name), io_quote(idx[i]->name));
        if (!prev || idx[i]->end > prev->end) prev = idx[i];
    }
    free(idx);
    return rc;
}

/* The JSON header (text, hlen bytes) of a file whose data section holds data_size bytes. */
static int parse_header(const char *text, uint64_t hlen, size_t data_size, const char *src, StFile *f) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, (size_t)hlen, &end, 0);
    if (!root)
        return myr_error("safetensors %s: header is not valid JSON (error near header byte %td)", src,
                         end ? end - text : (ptrdiff_t)0);
    int rc = 0;
    for (const char *p = end; p < text + hlen && !rc; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            rc = myr_error("safetensors %s: unexpected bytes after the JSON header (at header byte %td)", src,
                           p - text);
    if (!rc && !cJSON_IsObject(root)) rc = myr_error("safetensors %s: header is not a JSON object", src);
    f->data_size = data_size;
    f->data_start = 8 + hlen;
    if (!rc) {
        int count = 0;
        for (const cJSON *e = root->child; e; e = e->next) count += strcmp(e->string, "__metadata__") != 0;
        f->tensors = calloc(count ? count : 1, sizeof *f->tensors);
        if (!f->tensors) rc = myr_error("out of memory reading %s", src);
    }
    for (const cJSON *e = rc ? NULL : root->child; e && !rc; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) {
            if (f->meta_keys) rc = myr_error("safetensors %s: \"__metadata__\" appears twice", src);
            else rc = parse_metadata(e, src, f);
            continue;
        }
        StTensor *t = &f->tensors[f->n];
        rc = parse_tensor(e, src, f->data_size, t);
        if (!rc && !(t->name = strdup(e->string))) rc = myr_error("out of memory reading %s", src);
        if (!rc) f->n++;
    }
    cJSON_Delete(root);
    if (!rc) rc = check_layout(f, src);
    if (rc) {
        free_tensors(f);
        memset(f, 0, sizeof *f);
        f->fd = -1;
    }
    return rc;
}

/* The 8-byte header length of a file of len bytes, checked. */
static int header_length(const uint8_t *first8, size_t len, const char *src, uint64_t *hlen) {
    if (len < 8)
        return myr_error("safetensors %s: file is %zu bytes, too short for the 8-byte header length (not a "
                         "safetensors file?)", src, len);
    memcpy(hlen, first8, 8);
    if (*hlen > len - 8)
        return myr_error("safetensors %s: header length %" PRIu64 " runs past the end of the %zu-byte file "
                         "(truncated, or not a safetensors file)", src, *hlen, len);
    if (*hlen > ST_MAX_HEADER)
        return myr_error("safetensors %s: header length %" PRIu64 " exceeds the 100 MB limit (corrupt file)", src,
                         *hlen);
    return 0;
}

int st_parse_named(const uint8_t *buf, size_t len, const char *src, StFile *f) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    uint64_t hlen = 0;
    if (header_length(buf, len, src, &hlen)) return -1;
    if (parse_header((const char *)buf + 8, hlen, len - 8 - (size_t)hlen, src, f)) return -1;
    f->data = buf + 8 + hlen;
    return 0;
}

/* Read exactly n bytes at offset off (pread until done). */
static int read_at(int fd, void *dst, size_t n, uint64_t off, const char *src) {
    for (size_t got = 0; got < n;) {
        ssize_t r = pread(fd, (char *)dst + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return myr_error("cannot read %s: %s", src, strerror(errno));
        if (r == 0) return myr_error("safetensors %s: the file ends early (truncated while reading?)", src);
        got += (size_t)r;
    }
    return 0;
}

int st_open_header(const char *path, StFile *f) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return myr_error("cannot open %s: %s (check the path)", path, strerror(errno));
    struct stat st;
    uint8_t first8[8] = {0};
    uint64_t hlen = 0;
    char *text = NULL;
    int rc = 0;
    if (fstat(fd, &st)) rc = myr_error("cannot stat %s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode)) rc = myr_error("%s is not a regular file (expected a .safetensors file)", path);
    if (!rc && (size_t)st.st_size >= 8) rc = read_at(fd, first8, 8, 0, path);
    if (!rc) rc = header_length(first8, (size_t)st.st_size, path, &hlen);
    if (!rc && !(text = malloc(hlen ? hlen : 1))) rc = myr_error("out of memory reading the header of %s", path);
    if (!rc) rc = read_at(fd, text, hlen, 8, path);
    if (!rc) rc = parse_header(text, hlen, (size_t)st.st_size - 8 - (size_t)hlen, path, f);
    free(text);
    if (rc) {
        close(fd);
        return -1;
    }
    f->fd = fd;
    f->path = strdup(path);
    return 0;
}

int st_parse(const uint8_t *buf, size_t len, StFile *f) { return st_parse_named(buf, len, "<memory>", f); }

int st_open(const char *path, StFile *f) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return myr_error("cannot open %s: %s (check the path)", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return myr_error("cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return myr_error("%s is not a regular file (expected a .safetensors file)", path);
    }
    size_t size = (size_t)st.st_size;
    if (size < 8) {
        close(fd);
        return myr_error("safetensors %s: file is %zu bytes, too short for the 8-byte header length (not a "
                         "safetensors file?)", path, size);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return myr_error("cannot mmap %s: %s", path, strerror(errno));
    if (st_parse_named(map, size, path, f)) {
        munmap(map, size);
        return -1;
    }
    f->map = map;
    f->map_size = size;
    return 0;
}

const StTensor *st_find(const StFile *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

const char *st_metadata(const StFile *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_values[i];
    return NULL;
}

/* IEEE binary16 -> binary32, exact for every input (subnormals, infinities, NaN payloads). */
static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        float v = (float)mant * 0x1p-24f; /* zero or subnormal: mant * 2^-24, exact in f32 */
        memcpy(&bits, &v, 4);
        bits |= sign;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

int st_read_f32(const StFile *f, const StTensor *t, float *dst, int64_t count) {
    int64_t n = st_numel(t);
    if (count != n)
        return myr_error("tensor '%s' has %" PRId64 " elements but %" PRId64 " were expected (shape mismatch with the "
                         "model config)", io_quote(t->name), n, count);
    return st_read_range_f32(f, t, 0, n, dst);
}

/* n elements of dtype dt at src -> f32 */
static void convert_f32(StDtype dt, const uint8_t *src, float *dst, int64_t n) {
    switch (dt) {
    case ST_F32: memcpy(dst, src, (size_t)n * 4); break;
    case ST_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = f16_to_f32(h);
        }
        break;
    case ST_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            uint32_t bits = (uint32_t)h << 16;
            memcpy(&dst[i], &bits, 4);
        }
        break;
    default: /* ST_F64 */
        for (int64_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, src + 8 * i, 8);
            dst[i] = (float)d;
        }
    }
}

int st_read_range_f32(const StFile *f, const StTensor *t, int64_t first, int64_t count, float *dst) {
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16 && t->dtype != ST_F64)
        return myr_error("tensor '%s' has dtype %s; only F32, F16, BF16 and F64 tensors can be loaded as weights",
                         io_quote(t->name), st_dtype_name(t->dtype));
    if (first < 0 || count < 0 || first + count > st_numel(t))
        return myr_error("internal: elements [%" PRId64 ", %" PRId64 ") lie outside tensor '%s' of %" PRId64, first,
                         first + count, io_quote(t->name), st_numel(t));
    size_t es = dtype_info[t->dtype].size;
    uint64_t off = t->begin + (uint64_t)first * es;
    if (!f->path) { /* an mmap'd or in-memory file */
        convert_f32(t->dtype, f->data + off, dst, count);
        return 0;
    }
    const char *src = f->path;
    if (t->dtype == ST_F32) return read_at(f->fd, dst, (size_t)count * 4, f->data_start + off, src);
    /* other dtypes through a small staging buffer: only the asked bytes are ever in memory */
    enum { STAGE = 1 << 20 };
    uint8_t *stage = malloc(STAGE);
    if (!stage) return myr_error("out of memory reading %s", src);
    int64_t per = STAGE / (int64_t)es;
    int rc = 0;
    for (int64_t done = 0; done < count && !rc; done += per) {
        int64_t n = count - done < per ? count - done : per;
        rc = read_at(f->fd, stage, (size_t)n * es, f->data_start + off + (uint64_t)done * es, src);
        if (!rc) convert_f32(t->dtype, stage, dst + done, n);
    }
    free(stage);
    return rc;
}

void st_close(StFile *f) {
    free_tensors(f);
    if (f->map) munmap(f->map, f->map_size);
    if (f->path) close(f->fd);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

/* ---------- writing ---------- */

/* Integers go into the header as raw text so that no value is ever printed in exponent form. */
static cJSON *raw_u64(uint64_t v) {
    char s[32];
    snprintf(s, sizeof s, "%" PRIu64, v);
    return cJSON_CreateRaw(s);
}

char *st_layout_header(StLayoutTensor *tensors, int n, const char *const *mk, const char *const *mv, int n_meta,
                       uint64_t *prefix_bytes, uint64_t *data_bytes) {
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_CreateObject();
    if (!root || !meta) {
        cJSON_Delete(root);
        cJSON_Delete(meta);
        myr_error("out of memory building a safetensors header");
        return NULL;
    }
    int has_format = 0;
    for (int i = 0; i < n_meta; i++) has_format |= !strcmp(mk[i], "format");
    if (!has_format) cJSON_AddStringToObject(meta, "format", "pt");
    for (int i = 0; i < n_meta; i++) cJSON_AddStringToObject(meta, mk[i], mv[i]);
    cJSON_AddItemToObject(root, "__metadata__", meta);
    uint64_t off = 0;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        StLayoutTensor *t = &tensors[i];
        if (!t->name || !t->name[0] || !strcmp(t->name, "__metadata__")) {
            rc = myr_error("safetensors writer: tensor %d has an empty or reserved name", i);
            break;
        }
        if (cJSON_GetObjectItemCaseSensitive(root, t->name)) {
            rc = myr_error("safetensors writer: tensor '%s' given twice", io_quote(t->name));
            break;
        }
        if (t->ndim < 0 || t->ndim > ST_MAX_NDIM) {
            rc = myr_error("safetensors writer: tensor '%s' has %d dims (0..8 allowed)", t->name, t->ndim);
            break;
        }
        if ((unsigned)t->dtype >= ST_NUM_DTYPES) {
            rc = myr_error("safetensors writer: tensor '%s' has an unknown dtype", io_quote(t->name));
            break;
        }
        uint64_t numel = 1;
        cJSON *shape = cJSON_CreateArray();
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0) rc = myr_error("safetensors writer: tensor '%s' has a negative dim", io_quote(t->name));
            else if (t->shape[d] && numel > (UINT64_C(1) << 60) / (uint64_t)t->shape[d])
                rc = myr_error("safetensors writer: tensor '%s' is absurdly large", io_quote(t->name));
            else numel *= (uint64_t)t->shape[d];
            cJSON_AddItemToArray(shape, raw_u64((uint64_t)t->shape[d]));
        }
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "dtype", dtype_info[t->dtype].name);
        cJSON_AddItemToObject(e, "shape", shape);
        t->begin = off;
        t->end = off + numel * dtype_info[t->dtype].size;
        cJSON *offs = cJSON_CreateArray();
        cJSON_AddItemToArray(offs, raw_u64(t->begin));
        cJSON_AddItemToArray(offs, raw_u64(t->end));
        cJSON_AddItemToObject(e, "data_offsets", offs);
        cJSON_AddItemToObject(root, t->name, e);
        off = t->end;
    }
    char *text = rc ? NULL : cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!rc && !text) myr_error("out of memory building a safetensors header");
    if (!text) return NULL;
    /* pad the header with spaces so the data buffer starts 8-byte aligned, as the reference writer does */
    size_t hlen = strlen(text), padded = (hlen + 8 + 7) / 8 * 8 - 8;
    char *out = realloc(text, padded + 1);
    if (!out) {
        free(text);
        myr_error("out of memory building a safetensors header");
        return NULL;
    }
    memset(out + hlen, ' ', padded - hlen);
    out[padded] = 0;
    *prefix_bytes = 8 + padded;
    *data_bytes = off;
    return out;
}

int st_write_f32_meta(const char *path, const StWriteTensor *tensors, int n, const char *const *meta_keys,
                      const char *const *meta_values, int n_meta) {
    StLayoutTensor *lay = calloc(n ? (size_t)n : 1, sizeof *lay);
    if (!lay) return myr_error("out of memory writing %s", path);
    for (int i = 0; i < n; i++) {
        lay[i] = (StLayoutTensor){.name = tensors[i].name, .dtype = ST_F32, .ndim = tensors[i].ndim};
        memcpy(lay[i].shape, tensors[i].shape, sizeof lay[i].shape);
        if (tensors[i].ndim >= 0 && tensors[i].ndim <= ST_MAX_NDIM) {
            int64_t numel = 1;
            for (int d = 0; d < tensors[i].ndim; d++) numel *= tensors[i].shape[d] > 0 ? tensors[i].shape[d] : 0;
            if (numel && !tensors[i].data) {
                free(lay);
                return myr_error("safetensors writer: tensor '%s' has no data", io_quote(tensors[i].name ? tensors[i].name : ""));
            }
        }
    }
    uint64_t prefix, data_bytes;
    char *header = st_layout_header(lay, n, meta_keys, meta_values, n_meta, &prefix, &data_bytes);
    if (!header) {
        free(lay);
        return -1;
    }
    uint64_t hlen_le = prefix - 8;
    AtomicFile a;
    if (atomic_open(&a, path)) {
        free(header);
        free(lay);
        return -1;
    }
    int rc = atomic_write(&a, &hlen_le, 8);
    if (!rc) rc = atomic_write(&a, header, (size_t)hlen_le);
    for (int i = 0; i < n && !rc; i++)
        if (lay[i].end > lay[i].begin) rc = atomic_write(&a, tensors[i].data, (size_t)(lay[i].end - lay[i].begin));
    free(header);
    free(lay);
    if (rc) {
        atomic_abort(&a);
        return -1;
    }
    return atomic_commit(&a);
}

int st_write_f32(const char *path, const StWriteTensor *tensors, int n) {
    return st_write_f32_meta(path, tensors, n, NULL, NULL, 0);
}
