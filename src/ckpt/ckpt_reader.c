/* ckpt_reader.c: open a checkpoint (a given step, or the newest valid one of a directory),
 * validate its manifest and shard files, and read slices of tensors from whichever pieces
 * hold them, reading whole checksum blocks and verifying each block's CRC-32C. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_internal.h"
#include "ckpt/crc32c.h"
#include "util/error.h"

typedef struct {
    char *path;
    int fd;
    uint64_t bytes;
} RFile;

/* A piece's checksums cover its span: its bytes and the padding up to the next piece of its
 * file (so a flip anywhere in a shard is caught), in blocks of `block` from its offset, the last
 * block running to the span's end. */
typedef struct {
    int file, id;
    uint64_t offset, bytes, span, block, nblocks;
    uint32_t *crc;
    const char *hex; /* while parsing */
    CkptSlice s;
} RPiece;

typedef struct {
    char *name;
    CkptDtype dt;
    int ndim;
    int64_t shape[CKPT_MAX_NDIM];
    int np;
    RPiece *p;
} RTensor;

enum { CACHE_SLOTS = 4 };

struct Ckpt {
    char *path, *notes, *meta;
    int64_t step, block;
    int nfiles, ntensors;
    RFile *files;
    RTensor *t;
    uint64_t bytes_read;
    RPiece **all; /* every piece, by id */
    int npieces;
    struct {
        int piece;
        uint64_t block, len, used;
        uint8_t *buf;
    } cache[CACHE_SLOTS];
    uint64_t tick;
};

void ckpt_close(Ckpt *c) {
    if (!c) return;
    for (int i = 0; i < c->nfiles; i++) {
        if (c->files[i].fd >= 0) close(c->files[i].fd);
        free(c->files[i].path);
    }
    for (int i = 0; i < c->ntensors; i++) {
        for (int k = 0; k < c->t[i].np; k++) free(c->t[i].p[k].crc);
        free(c->t[i].name);
        free(c->t[i].p);
    }
    free(c->all);
    for (int i = 0; i < CACHE_SLOTS; i++) free(c->cache[i].buf);
    free(c->files);
    free(c->t);
    free(c->path);
    free(c->notes);
    free(c->meta);
    free(c);
}

static int json_i64(const cJSON *j, int64_t *v) {
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (d < 0 || d > 9007199254740992.0 || d != (double)(int64_t)d) return -1;
    *v = (int64_t)d;
    return 0;
}

static int json_dims(const cJSON *a, int ndim, int64_t *out) {
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != ndim) return -1;
    for (int d = 0; d < ndim; d++)
        if (json_i64(cJSON_GetArrayItem(a, d), &out[d])) return -1;
    return 0;
}

static char *read_whole(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) == 0 && st.st_size >= 0 && st.st_size < ((off_t)1 << 31)) {
        buf = malloc((size_t)st.st_size + 1);
        size_t got = 0;
        while (buf && got < (size_t)st.st_size) {
            ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (buf) buf[got] = 0;
        *len = got;
    }
    close(fd);
    return buf;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
}

/* Parse + validate the manifest body into c. */
static int parse_manifest(Ckpt *c, const char *mpath, cJSON *root, int64_t dir_step) {
#define BAD(...) (myr_error("%s is damaged: " __VA_ARGS__), -1)
    const char *fmt = cJSON_GetStringValue(cJSON_GetObjectItem(root, "format"));
    int64_t version, nranks, align;
    if (!fmt || strcmp(fmt, CKPT_FORMAT_NAME)) return BAD("not a %s manifest", mpath, CKPT_FORMAT_NAME);
    if (json_i64(cJSON_GetObjectItem(root, "version"), &version)) version = -1;
    if (version != CKPT_VERSION)
        return myr_error("%s: format version %lld not supported (this build reads version %d%s)", mpath,
                         (long long)version, CKPT_VERSION,
                         version == 1 ? "; version 1 kept one checksum per file block, version 2 one per piece block: "
                                        "resume it with the build that wrote it, or start again" : "");
    if (json_i64(cJSON_GetObjectItem(root, "step"), &c->step) || (dir_step >= 0 && c->step != dir_step))
        return BAD("its step does not match the directory name", mpath);
    if (json_i64(cJSON_GetObjectItem(root, "block_bytes"), &c->block) || c->block < 64 || (c->block & (c->block - 1)))
        return BAD("bad block_bytes", mpath);
    if (json_i64(cJSON_GetObjectItem(root, "align"), &align) || align != CKPT_ALIGN) return BAD("bad align", mpath);
    cJSON *meta = cJSON_GetObjectItem(root, "meta"), *files = cJSON_GetObjectItem(root, "files");
    cJSON *tensors = cJSON_GetObjectItem(root, "tensors");
    if (!cJSON_IsObject(meta) || !cJSON_IsArray(files) || !cJSON_IsObject(tensors)) return BAD("missing sections", mpath);
    if (json_i64(cJSON_GetObjectItem(root, "nranks"), &nranks) || nranks != cJSON_GetArraySize(files) || nranks < 1)
        return BAD("nranks does not match the files", mpath);
    c->meta = cJSON_PrintUnformatted(meta);
    c->nfiles = (int)nranks;
    c->files = calloc(nranks, sizeof *c->files);
    if (!c->meta || !c->files) return myr_error("out of memory");
    for (int i = 0; i < c->nfiles; i++) c->files[i].fd = -1;
    for (int i = 0; i < c->nfiles; i++) {
        cJSON *f = cJSON_GetArrayItem(files, i);
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(f, "name"));
        char expect[32];
        snprintf(expect, sizeof expect, "rank-%05d.bin", i);
        RFile *rf = &c->files[i];
        int64_t bytes;
        if (!name || strcmp(name, expect) || json_i64(cJSON_GetObjectItem(f, "bytes"), &bytes))
            return BAD("file entry %d", mpath, i);
        rf->bytes = (uint64_t)bytes;
        size_t n = strlen(c->path) + strlen(name) + 2;
        rf->path = malloc(n);
        if (!rf->path) return myr_error("out of memory");
        snprintf(rf->path, n, "%s/%s", c->path, name);
    }
    c->ntensors = cJSON_GetArraySize(tensors);
    c->t = calloc(c->ntensors + 1, sizeof *c->t);
    if (!c->t) return myr_error("out of memory");
    int ti = 0;
    cJSON *tj;
    cJSON_ArrayForEach(tj, tensors) {
        RTensor *t = &c->t[ti++];
        t->name = strdup(tj->string ? tj->string : "");
        const char *dt = cJSON_GetStringValue(cJSON_GetObjectItem(tj, "dtype"));
        cJSON *shape = cJSON_GetObjectItem(tj, "shape"), *pieces = cJSON_GetObjectItem(tj, "pieces");
        if (!t->name) return myr_error("out of memory");
        if (!dt || ckpt_dtype_parse(dt, &t->dt)) return BAD("tensor %s has an unknown dtype", mpath, t->name);
        t->ndim = cJSON_GetArraySize(shape);
        if (!cJSON_IsArray(shape) || t->ndim < 1 || t->ndim > CKPT_MAX_NDIM || json_dims(shape, t->ndim, t->shape) ||
            ckpt_check_shape(t->ndim, t->shape, t->name) || !cJSON_IsArray(pieces))
            return BAD("tensor %s has a bad shape or no pieces", mpath, t->name);
        t->np = cJSON_GetArraySize(pieces);
        t->p = calloc(t->np + 1, sizeof *t->p);
        if (!t->p) return myr_error("out of memory");
        size_t es = ckpt_dtype_size(t->dt);
        int64_t sum = 0;
        for (int k = 0; k < t->np; k++) {
            cJSON *pj = cJSON_GetArrayItem(pieces, k), *flat = cJSON_GetObjectItem(pj, "flat");
            RPiece *p = &t->p[k];
            int64_t file, off, bytes, fl[2], block = 0;
            if (json_i64(cJSON_GetObjectItem(pj, "file"), &file) || file >= c->nfiles ||
                json_i64(cJSON_GetObjectItem(pj, "offset"), &off) || json_i64(cJSON_GetObjectItem(pj, "bytes"), &bytes))
                return BAD("tensor %s, piece %d: bad file/offset/bytes", mpath, t->name, k);
            p->file = (int)file;
            p->offset = (uint64_t)off;
            p->bytes = (uint64_t)bytes;
            p->hex = cJSON_GetStringValue(cJSON_GetObjectItem(pj, "crc32c"));
            if (bytes && (json_i64(cJSON_GetObjectItem(pj, "block"), &block) || block < 1 || block > c->block || !p->hex))
                return BAD("tensor %s, piece %d: bad checksum block", mpath, t->name, k);
            p->block = (uint64_t)block;
            if (flat) {
                if (json_dims(flat, 2, fl)) return BAD("tensor %s, piece %d: bad flat range", mpath, t->name, k);
                p->s = ckpt_flat(fl[0], fl[1]);
            } else {
                int64_t st[CKPT_MAX_NDIM], ex[CKPT_MAX_NDIM];
                if (json_dims(cJSON_GetObjectItem(pj, "start"), t->ndim, st) ||
                    json_dims(cJSON_GetObjectItem(pj, "extent"), t->ndim, ex))
                    return BAD("tensor %s, piece %d: bad start/extent", mpath, t->name, k);
                p->s = ckpt_box(t->ndim, st, ex);
            }
            if (ckpt_check_slice(&p->s, t->ndim, t->shape, t->name))
                return ckpt_error_prefix("%s is damaged: tensor %s, piece %d", mpath, t->name, k);
            int64_t numel = ckpt_slice_numel(&p->s, t->ndim);
            if (p->bytes != (uint64_t)numel * es || p->offset % CKPT_ALIGN || p->offset > c->files[file].bytes ||
                p->bytes > c->files[file].bytes - p->offset)
                return BAD("tensor %s, piece %d: its bytes do not fit its slice or its file", mpath, t->name, k);
            sum += numel;
        }
        if (sum != ckpt_numel(t->ndim, t->shape))
            return BAD("the pieces of tensor %s do not cover it exactly", mpath, t->name);
        c->npieces += t->np;
    }
    /* spans: each non-empty piece up to the next one of its file (or the file's end); they must
     * tile every file, so each shard byte is under exactly one checksum */
    c->all = malloc(sizeof *c->all * (size_t)(c->npieces + 1));
    if (!c->all) return myr_error("out of memory");
    int id = 0;
    for (int i = 0; i < c->ntensors; i++)
        for (int k = 0; k < c->t[i].np; k++) c->t[i].p[k].id = id, c->all[id++] = &c->t[i].p[k];
    for (int f = 0; f < c->nfiles; f++) {
        uint64_t covered = 0;
        for (;;) { /* the non-empty piece at `covered`, then the next one after it */
            RPiece *at = NULL, *next = NULL;
            for (int j = 0; j < c->npieces; j++) {
                RPiece *p = c->all[j];
                if (p->file != f || !p->bytes) continue;
                if (p->offset == covered) {
                    if (at) return BAD("two pieces start at byte %" PRIu64 " of %s", mpath, covered, c->files[f].path);
                    at = p;
                } else if (p->offset > covered && (!next || p->offset < next->offset)) next = p;
            }
            if (!at) {
                if (covered != c->files[f].bytes)
                    return BAD("bytes %" PRIu64 ".. of %s belong to no piece", mpath, covered, c->files[f].path);
                break;
            }
            at->span = (next ? next->offset : c->files[f].bytes) - at->offset;
            if (at->span < at->bytes) return BAD("pieces overlap in %s", mpath, c->files[f].path);
            covered += at->span;
        }
    }
    for (int j = 0; j < c->npieces; j++) { /* the checksums of each span */
        RPiece *p = c->all[j];
        if (!p->bytes) continue;
        p->nblocks = (p->bytes + p->block - 1) / p->block; /* the last one runs to the span's end */
        if (strlen(p->hex) != p->nblocks * 8)
            return BAD("a piece in %s has %zu checksum digits, expected %" PRIu64, mpath, c->files[p->file].path,
                       strlen(p->hex), p->nblocks * 8);
        if (!(p->crc = malloc(sizeof(uint32_t) * p->nblocks))) return myr_error("out of memory");
        for (uint64_t b = 0; b < p->nblocks; b++) {
            uint32_t v = 0;
            for (int k = 0; k < 8; k++) {
                int h = hexval(p->hex[8 * b + k]);
                if (h < 0) return BAD("bad checksum digits for %s", mpath, c->files[p->file].path);
                v = v << 4 | (uint32_t)h;
            }
            p->crc[b] = v;
        }
        p->hex = NULL;
    }
    return 0;
#undef BAD
}

/* Open the files and check their sizes. */
static int open_files(Ckpt *c) {
    for (int i = 0; i < c->nfiles; i++) {
        RFile *f = &c->files[i];
        f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
        if (f->fd < 0) return myr_error("%s is missing: %s (the checkpoint is incomplete)", f->path, strerror(errno));
        struct stat st;
        if (fstat(f->fd, &st)) return myr_error("cannot stat %s: %s", f->path, strerror(errno));
        if ((uint64_t)st.st_size < f->bytes)
            return myr_error("%s is truncated: %lld bytes, the manifest says %" PRIu64, f->path, (long long)st.st_size,
                             f->bytes);
        if ((uint64_t)st.st_size > f->bytes)
            return myr_error("%s has %lld bytes, the manifest says %" PRIu64 " (the file was changed)", f->path,
                             (long long)st.st_size, f->bytes);
    }
    return 0;
}

static int open_step(const char *step_dir, int verify, Ckpt **out) {
    *out = NULL;
    Ckpt *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(step_dir)) || !(c->notes = strdup(""))) {
        ckpt_close(c);
        return myr_error("out of memory");
    }
    size_t plen = strlen(step_dir);
    while (plen > 1 && c->path[plen - 1] == '/') c->path[--plen] = 0;
    const char *base = strrchr(c->path, '/');
    int64_t dir_step = ckpt_parse_step_dirname(base ? base + 1 : c->path);
    char mpath[4200];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", c->path);
    size_t len = 0;
    char *text = read_whole(mpath, &len);
    if (!text) {
        ckpt_close(c);
        return myr_error("%s has no manifest.json: the checkpoint is incomplete (its save was interrupted)", step_dir);
    }
    size_t pl = strlen(CKPT_MANIFEST_PREFIX), ml = strlen(CKPT_MANIFEST_MIDDLE);
    int rc = -1;
    if (len < pl + 8 + ml + 2 || memcmp(text, CKPT_MANIFEST_PREFIX, pl) || memcmp(text + pl + 8, CKPT_MANIFEST_MIDDLE, ml) ||
        memcmp(text + len - 2, "}\n", 2)) {
        myr_error("%s is damaged or truncated (bad framing)", mpath);
    } else {
        uint32_t want = 0;
        int ok = 1;
        for (int k = 0; k < 8; k++) {
            int h = hexval(text[pl + k]);
            if (h < 0) ok = 0;
            want = want << 4 | (uint32_t)(h & 15);
        }
        const char *body = text + pl + 8 + ml;
        size_t blen = len - 2 - (pl + 8 + ml);
        if (!ok || crc32c(body, blen) != want) {
            myr_error("checksum mismatch in %s: the manifest is corrupt", mpath);
        } else {
            cJSON *root = cJSON_ParseWithLength(body, blen);
            if (!root) myr_error("%s is damaged: not valid JSON", mpath);
            else {
                rc = parse_manifest(c, mpath, root, dir_step);
                cJSON_Delete(root);
            }
        }
    }
    free(text);
    if (rc == 0) rc = open_files(c);
    if (rc == 0 && verify) rc = ckpt_verify(c);
    if (rc) {
        ckpt_close(c);
        return -1;
    }
    c->bytes_read = 0;
    *out = c;
    return 0;
}

static int append_note(char **notes, const char *fmt, const char *a, const char *b) {
    size_t n = strlen(*notes) + strlen(fmt) + strlen(a) + strlen(b) + 8;
    char *s = malloc(n);
    if (!s) return -1;
    int used = snprintf(s, n, "%s%s", *notes, **notes ? "; " : "");
    snprintf(s + used, n - used, fmt, a, b);
    free(*notes);
    *notes = s;
    return 0;
}

static int open_newest(const char *dir, const CkptOpenOptions *o, Ckpt **out) {
    int64_t *steps;
    int n = ckpt_list_steps(dir, o->below_step, &steps);
    if (n < 0) return myr_error("cannot open checkpoint directory %s: %s", dir, strerror(errno));
    char *notes = strdup("");
    int incomplete = 0; /* directories of saves that never committed (no manifest): not checkpoints at all */
    for (int i = 0; i < n && notes; i++) {
        char name[64], path[4200];
        ckpt_step_dirname(steps[i], name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        Ckpt *c;
        if (open_step(path, o->verify, &c) == 0) {
            if (*notes) append_note(&notes, "using %s%s", path, "");
            free(c->notes);
            c->notes = notes;
            free(steps);
            *out = c;
            return 0;
        }
        char why[1024];
        snprintf(why, sizeof why, "%s", myr_last_error());
        incomplete += strstr(why, "has no manifest.json") != NULL;
        append_note(&notes, "skipped %s (%s)", path, why);
    }
    free(steps);
    /* only interrupted saves (a job killed before its first save committed): no checkpoint yet, said
     * the way an empty directory is, so that `--resume auto` starts from step 0 */
    if (n > 0 && incomplete == n)
        myr_error("no valid checkpoint in %s (no step-* directories with a manifest: %s)", dir, notes ? notes : "");
    else
        myr_error("no valid checkpoint in %s%s%s", dir, notes && *notes ? ": " : " (no step-* directories)",
                  notes ? notes : "");
    free(notes);
    return -1;
}

int ckpt_open_ex(const char *path, const CkptOpenOptions *opt, Ckpt **out) {
    CkptOpenOptions o = {0};
    if (opt) o = *opt;
    *out = NULL;
    if (!strncmp(path, "auto:", 5)) return open_newest(path + 5, &o, out);
    if (!strcmp(path, "auto")) return myr_error("checkpoint path 'auto' needs a directory: use auto:DIR or DIR");
    char m[4200];
    snprintf(m, sizeof m, "%s/manifest.json", path);
    const char *base = strrchr(path, '/');
    struct stat st;
    if (access(m, F_OK) == 0 || ckpt_parse_step_dirname(base ? base + 1 : path) >= 0) return open_step(path, o.verify, out);
    if (stat(path, &st) || !S_ISDIR(st.st_mode))
        return myr_error("checkpoint %s not found (give a checkpoint directory or one of its step-* directories)", path);
    return open_newest(path, &o, out);
}

int ckpt_open(const char *path, Ckpt **out) { return ckpt_open_ex(path, NULL, out); }

int64_t ckpt_step(const Ckpt *c) { return c->step; }
const char *ckpt_path(const Ckpt *c) { return c->path; }
const char *ckpt_notes(const Ckpt *c) { return c->notes; }
const char *ckpt_meta(const Ckpt *c) { return c->meta; }
int ckpt_tensor_count(const Ckpt *c) { return c->ntensors; }
const char *ckpt_tensor_name(const Ckpt *c, int i) { return i >= 0 && i < c->ntensors ? c->t[i].name : NULL; }
uint64_t ckpt_bytes_read(const Ckpt *c) { return c->bytes_read; }
void ckpt_reset_bytes_read(Ckpt *c) { c->bytes_read = 0; }

static RTensor *find(const Ckpt *c, const char *name) {
    for (int i = 0; i < c->ntensors; i++)
        if (!strcmp(c->t[i].name, name)) return &c->t[i];
    if (c->ntensors)
        myr_error("%s: the checkpoint has no tensor %s (it holds %d tensors, e.g. %s; a checkpoint of another model?)",
                  c->path, name, c->ntensors, c->t[0].name);
    else myr_error("%s: the checkpoint has no tensor %s (it holds none)", c->path, name);
    return NULL;
}

int ckpt_tensor_info(const Ckpt *c, const char *name, CkptDtype *dt, int *ndim, int64_t *shape) {
    RTensor *t = find(c, name);
    if (!t) return -1;
    if (dt) *dt = t->dt;
    if (ndim) *ndim = t->ndim;
    if (shape) memcpy(shape, t->shape, sizeof(int64_t) * t->ndim);
    return 0;
}

int ckpt_expect(const Ckpt *c, const char *name, CkptDtype dt, int ndim, const int64_t *shape) {
    RTensor *t = find(c, name);
    if (!t) return -1;
    char a[160], b[160];
    if (t->ndim != ndim || memcmp(t->shape, shape, sizeof(int64_t) * ndim))
        return myr_error("%s: checkpoint tensor %s has shape %s, the model needs %s", c->path, name,
                         ckpt_shape_str(t->ndim, t->shape, a, sizeof a), ckpt_shape_str(ndim, shape, b, sizeof b));
    if (t->dt != dt)
        return myr_error("%s: checkpoint tensor %s has dtype %s, the model needs %s", c->path, name,
                         ckpt_dtype_name(t->dt), ckpt_dtype_name(dt));
    return 0;
}

/* Read block `b` of piece p's span into buf (n bytes) and check its CRC. */
static int load_block(Ckpt *c, const RPiece *p, uint64_t b, uint8_t *buf, uint64_t n, const char *tensor) {
    RFile *rf = &c->files[p->file];
    uint64_t start = p->offset + b * p->block, got = 0;
    while (got < n) {
        ssize_t r = pread(rf->fd, buf + got, n - got, (off_t)(start + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return myr_error("%s is truncated or unreadable at byte %" PRIu64 " (tensor %s): %s", rf->path, start + got,
                             tensor, r < 0 ? strerror(errno) : "end of file");
        got += (uint64_t)r;
    }
    c->bytes_read += n;
    if (crc32c(buf, n) != p->crc[b])
        return myr_error("checksum mismatch in %s, tensor %s (block %" PRIu64 ", bytes %" PRIu64 "..%" PRIu64
                         "): the file is corrupt; an older checkpoint or a replica is needed",
                         rf->path, tensor, b, start, start + n);
    return 0;
}

/* Blocks cover the piece's bytes; the last one also takes the padding up to the span's end, so
 * every byte read as data shares a checksum with any padding next to it (a flip there is
 * found by the load itself, not only by ckpt_verify). */
static uint64_t block_len(const RPiece *p, uint64_t b) { return b + 1 == p->nblocks ? p->span - b * p->block : p->block; }

static int cached(const Ckpt *c, const RPiece *p, uint64_t b) {
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (c->cache[i].buf && c->cache[i].piece == p->id && c->cache[i].block == b) return i;
    return -1;
}

/* The verified contents of block `b` of piece p (from the cache or read + checked now). */
static const uint8_t *get_block(Ckpt *c, const RPiece *p, uint64_t b, const char *tensor, uint64_t *len) {
    int hit = cached(c, p, b);
    if (hit >= 0) {
        c->cache[hit].used = ++c->tick;
        *len = c->cache[hit].len;
        return c->cache[hit].buf;
    }
    int victim = 0;
    for (int i = 1; i < CACHE_SLOTS; i++)
        if (c->cache[i].used < c->cache[victim].used) victim = i;
    if (!c->cache[victim].buf && !(c->cache[victim].buf = malloc((size_t)c->block + CKPT_ALIGN))) {
        myr_error("out of memory");
        return NULL;
    }
    c->cache[victim].used = 0; /* invalid until checked */
    c->cache[victim].piece = -1;
    uint64_t n = block_len(p, b);
    if (load_block(c, p, b, c->cache[victim].buf, n, tensor)) return NULL;
    c->cache[victim].piece = p->id;
    c->cache[victim].block = b;
    c->cache[victim].len = n;
    c->cache[victim].used = ++c->tick;
    *len = n;
    return c->cache[victim].buf;
}

/* n bytes at offset `off` of piece p into dst. */
static int read_bytes(Ckpt *c, const RPiece *p, uint64_t off, uint64_t n, uint8_t *dst, const char *tensor) {
    uint64_t B = p->block;
    while (n > 0) {
        uint64_t b = off / B, in = off % B, len;
        if (in == 0 && n >= block_len(p, b) && cached(c, p, b) < 0) { /* a whole block: straight into dst */
            len = block_len(p, b);
            if (load_block(c, p, b, dst, len, tensor)) return -1;
            dst += len;
            off += len;
            n -= len;
            continue;
        }
        const uint8_t *blk = get_block(c, p, b, tensor, &len);
        if (!blk) return -1;
        uint64_t take = len - in < n ? len - in : n;
        memcpy(dst, blk + in, take);
        dst += take;
        off += take;
        n -= take;
    }
    return 0;
}

typedef struct {
    Ckpt *c;
    RTensor *t;
    RPiece *p;
    uint8_t *dst;
    size_t es;
    int64_t run_g, run_local, copied;
} ReadCtx;

static int on_segment(int64_t g, int64_t n, int64_t plocal, void *u) {
    ReadCtx *x = u;
    x->copied += n;
    return read_bytes(x->c, x->p, (uint64_t)plocal * x->es, (uint64_t)n * x->es,
                      x->dst + (x->run_local + (g - x->run_g)) * (int64_t)x->es, x->t->name);
}

static int on_run(int64_t g, int64_t n, int64_t local, void *u) {
    ReadCtx *x = u;
    x->run_g = g;
    x->run_local = local;
    for (int k = 0; k < x->t->np; k++) {
        x->p = &x->t->p[k];
        if (ckpt_run_in_piece(g, n, &x->p->s, x->t->ndim, x->t->shape, on_segment, x)) return -1;
    }
    return 0;
}

int ckpt_read_slice(Ckpt *c, const char *name, const CkptSlice *slice, void *dst) {
    RTensor *t = find(c, name);
    if (!t) return -1;
    char what[600];
    snprintf(what, sizeof what, "reading checkpoint tensor %s", name);
    if (ckpt_check_slice(slice, t->ndim, t->shape, what)) return -1;
    ReadCtx x = {c, t, NULL, dst, ckpt_dtype_size(t->dt), 0, 0, 0};
    if (ckpt_slice_runs(slice, t->ndim, t->shape, on_run, &x)) return -1;
    if (x.copied != ckpt_slice_numel(slice, t->ndim))
        return myr_error("%s: %" PRId64 " of the %" PRId64 " requested elements of tensor %s are in no piece", c->path,
                         ckpt_slice_numel(slice, t->ndim) - x.copied, ckpt_slice_numel(slice, t->ndim), name);
    return 0;
}

int ckpt_verify(Ckpt *c) {
    for (int i = 0; i < c->ntensors; i++)
        for (int k = 0; k < c->t[i].np; k++) {
            RPiece *p = &c->t[i].p[k];
            for (uint64_t b = 0; b < p->nblocks; b++) {
                uint64_t len;
                if (!get_block(c, p, b, c->t[i].name, &len)) return -1;
            }
        }
    return 0;
}
