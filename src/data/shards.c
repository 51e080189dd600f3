/* shards.c: validate, mmap, concatenate and write llm.c token shards (see shards.h). */
#include "data/shards.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "shards.c assumes a little-endian host (the format is little-endian)"
#endif

typedef struct {
    char *path;
    void *map;
    size_t map_size;
    const uint8_t *tokens; /* first token, just after the header */
    int token_bytes;       /* 2 (version 1) or 4 (version 7) */
    uint64_t count;
    uint64_t start;        /* index of its first token in the concatenation */
} Shard;

struct TokenData {
    int n;
    Shard *shards;
    uint64_t total;
};

/* ---------- header ---------- */

int shards_parse_header(const uint8_t *buf, size_t len, const char *name, int *token_bytes, uint64_t *count) {
    int32_t h[3] = {0, 0, 0};
    memcpy(h, buf, len < sizeof h ? len : sizeof h);
    /* a wrong magic says more than "too short" about, say, a text file passed as --data */
    if (len >= 4 && h[0] != SHARD_MAGIC_V1 && h[0] != SHARD_MAGIC_V7)
        return myr_error("shard %s: wrong magic %d (expected %d or %d): not an llm.c token shard (make one with "
                         "myriad data prepare)", name, h[0], SHARD_MAGIC_V1, SHARD_MAGIC_V7);
    if (len < SHARD_HEADER_BYTES)
        return myr_error("shard %s is truncated: %zu bytes, shorter than the %d-byte llm.c header (regenerate it with "
                         "myriad data prepare)", name, len, SHARD_HEADER_BYTES);
    int width;
    if (h[0] == SHARD_MAGIC_V1) {
        if (h[1] != 1)
            return myr_error("shard %s: unsupported version %d for magic %d (expected 1; regenerate it with myriad "
                             "data prepare)", name, h[1], h[0]);
        width = 2;
    } else if (h[0] == SHARD_MAGIC_V7) {
        if (h[1] != 7)
            return myr_error("shard %s: unsupported version %d for magic %d (expected 7; regenerate it with myriad "
                             "data prepare)", name, h[1], h[0]);
        width = 4;
    } else {
        return myr_error("shard %s: wrong magic %d (expected %d or %d): not an llm.c token shard (make one with "
                         "myriad data prepare)", name, h[0], SHARD_MAGIC_V1, SHARD_MAGIC_V7);
    }
    if (h[2] < 0)
        return myr_error("shard %s: negative token count %d in the header (corrupt; regenerate it)", name, h[2]);
    uint64_t n = (uint64_t)h[2];
    uint64_t need = SHARD_HEADER_BYTES + n * width;
    if (len < need)
        return myr_error("shard %s is truncated: header says %" PRIu64 " tokens (%" PRIu64 " bytes) but the file has %zu "
                         "bytes (regenerate it with myriad data prepare)", name, n, need, len);
    if (len > need)
        return myr_error("shard %s has %" PRIu64 " bytes after its %" PRIu64 " tokens (header count wrong or file "
                         "corrupt; regenerate it)", name, (uint64_t)len - need, n);
    *token_bytes = width;
    *count = n;
    return 0;
}

/* ---------- opening a spec ---------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int is_regular(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Expand `spec` into a sorted list of shard paths. */
static int expand_spec(const char *spec, char ***paths_out, int *n_out) {
    char **paths = NULL;
    int n = 0, cap = 0, rc = 0;
#define PUSH(s)                                                               \
    do {                                                                      \
        if (n == cap) {                                                       \
            cap = cap ? 2 * cap : 16;                                         \
            char **p_ = realloc(paths, cap * sizeof *paths);                  \
            if (!p_) { rc = myr_error("out of memory listing %s", spec); break; } \
            paths = p_;                                                       \
        }                                                                     \
        if (!(paths[n] = strdup(s))) { rc = myr_error("out of memory listing %s", spec); break; } \
        n++;                                                                  \
    } while (0)
    struct stat st;
    if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) {
        DIR *dir = opendir(spec);
        if (!dir) return myr_error("cannot list directory %s: %s", spec, strerror(errno));
        for (struct dirent *e; !rc && (e = readdir(dir));) {
            size_t len = strlen(e->d_name);
            if (len < 5 || strcmp(e->d_name + len - 4, ".bin")) continue;
            size_t plen = strlen(spec) + len + 2;
            char *p = malloc(plen);
            if (!p) { rc = myr_error("out of memory"); break; }
            snprintf(p, plen, "%s/%s", spec, e->d_name);
            if (is_regular(p)) PUSH(p);
            free(p);
        }
        closedir(dir);
        if (!rc && n == 0)
            rc = myr_error("no *.bin shards in directory %s (create them with myriad data prepare TEXT... --out %s)",
                           spec, spec);
    } else if (stat(spec, &st) == 0) {
        PUSH(spec);
    } else if (strpbrk(spec, "*?[")) {
        glob_t g;
        int grc = glob(spec, 0, NULL, &g);
        if (grc == 0)
            for (size_t i = 0; i < g.gl_pathc && !rc; i++)
                if (is_regular(g.gl_pathv[i])) PUSH(g.gl_pathv[i]);
        if (grc == 0 || grc == GLOB_NOMATCH) globfree(&g);
        if (!rc && n == 0)
            rc = myr_error("no shard files match %s (check --data; it takes a file, a directory or a glob)", spec);
    } else {
        rc = myr_error("cannot open shard %s: %s (check --data; it takes a file, a directory of *.bin shards or a "
                       "glob)", spec, strerror(ENOENT));
    }
#undef PUSH
    if (rc) {
        for (int i = 0; i < n; i++) free(paths[i]);
        free(paths);
        return -1;
    }
    qsort(paths, n, sizeof *paths, cmp_str);
    *paths_out = paths;
    *n_out = n;
    return 0;
}

static int map_shard(Shard *s) {
    int fd = open(s->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return myr_error("cannot open shard %s: %s (check --data)", s->path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return myr_error("shard %s is not a regular file (check --data)", s->path);
    }
    size_t size = (size_t)st.st_size;
    if (size < SHARD_HEADER_BYTES) { /* report through the header check, before mmap */
        uint8_t head[SHARD_HEADER_BYTES] = {0};
        ssize_t got = read(fd, head, sizeof head);
        close(fd);
        int w;
        uint64_t c;
        return shards_parse_header(head, got > 0 ? (size_t)got : 0, s->path, &w, &c);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return myr_error("cannot mmap shard %s: %s", s->path, strerror(errno));
    s->map = map;
    s->map_size = size;
    if (shards_parse_header(map, size, s->path, &s->token_bytes, &s->count)) return -1;
    s->tokens = (const uint8_t *)map + SHARD_HEADER_BYTES;
    return 0;
}

int tokens_open(const char *spec, TokenData **out) {
    *out = NULL;
    char **paths;
    int n;
    if (expand_spec(spec, &paths, &n)) return -1;
    TokenData *d = calloc(1, sizeof *d);
    Shard *shards = calloc(n, sizeof *shards);
    if (!d || !shards) {
        for (int i = 0; i < n; i++) free(paths[i]);
        free(paths);
        free(d);
        free(shards);
        return myr_error("out of memory opening %s", spec);
    }
    d->shards = shards;
    d->n = n;
    for (int i = 0; i < n; i++) shards[i].path = paths[i]; /* ownership moves to the shards */
    free(paths);
    for (int i = 0; i < n; i++) {
        if (map_shard(&shards[i])) {
            tokens_close(d);
            return -1;
        }
        shards[i].start = d->total;
        d->total += shards[i].count;
    }
    *out = d;
    return 0;
}

void tokens_close(TokenData *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++) {
        if (d->shards[i].map) munmap(d->shards[i].map, d->shards[i].map_size);
        free(d->shards[i].path);
    }
    free(d->shards);
    free(d);
}

uint64_t tokens_count(const TokenData *d) { return d->total; }
int tokens_num_shards(const TokenData *d) { return d->n; }
const char *tokens_shard_path(const TokenData *d, int i) { return d->shards[i].path; }
int tokens_shard_version(const TokenData *d, int i) { return d->shards[i].token_bytes == 2 ? 1 : 7; }
uint64_t tokens_shard_count(const TokenData *d, int i) { return d->shards[i].count; }

int tokens_read(const TokenData *d, uint64_t start, uint64_t n, int32_t *out) {
    if (start > d->total || n > d->total - start)
        return myr_error("reading tokens [%" PRIu64 ", %" PRIu64 ") past the end of the data (%" PRIu64 " tokens)",
                         start, start + n, d->total);
    /* last shard whose first token is <= start (empty shards are stepped over below) */
    int lo = 0, hi = d->n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (d->shards[mid].start <= start) lo = mid;
        else hi = mid - 1;
    }
    for (int s = lo; n > 0; s++) {
        const Shard *sh = &d->shards[s];
        uint64_t off = start - sh->start;
        if (off >= sh->count) continue;
        uint64_t take = sh->count - off < n ? sh->count - off : n;
        if (sh->token_bytes == 2) {
            const uint8_t *p = sh->tokens + 2 * off;
            for (uint64_t i = 0; i < take; i++) {
                uint16_t t;
                memcpy(&t, p + 2 * i, 2);
                out[i] = t;
            }
        } else {
            const uint8_t *p = sh->tokens + 4 * off;
            for (uint64_t i = 0; i < take; i++) {
                uint32_t t;
                memcpy(&t, p + 4 * i, 4);
                if (t > INT32_MAX)
                    return myr_error("shard %s: token %" PRIu32 " at position %" PRIu64 " does not fit in int32 "
                                     "(corrupt shard?)", sh->path, t, off + i);
                out[i] = (int32_t)t;
            }
        }
        out += take;
        start += take;
        n -= take;
    }
    return 0;
}

/* ---------- writing ---------- */

int shard_writer_open(ShardWriter *w, const char *path, int version, uint64_t count) {
    memset(w, 0, sizeof *w);
    if (version != 1 && version != 7)
        return myr_error("shard version %d is not supported (use 1 for uint16 tokens or 7 for uint32)", version);
    if (count > INT32_MAX)
        return myr_error("shard %s would hold %" PRIu64 " tokens; the llm.c header allows at most %d per shard "
                         "(split the data into more shards)", path, count, INT32_MAX);
    int32_t header[SHARD_HEADER_INTS] = {0};
    header[0] = version == 1 ? SHARD_MAGIC_V1 : SHARD_MAGIC_V7;
    header[1] = version;
    header[2] = (int32_t)count;
    if (atomic_open(&w->file, path)) return -1;
    w->version = version;
    w->expected = count;
    if (atomic_write(&w->file, header, sizeof header)) {
        atomic_abort(&w->file);
        return -1;
    }
    return 0;
}

static int writer_room(ShardWriter *w, uint64_t n) {
    if (n > w->expected - w->written)
        return myr_error("shard %s: more tokens appended than the %" PRIu64 " announced in its header", w->file.path,
                         w->expected);
    return 0;
}

int shard_writer_append(ShardWriter *w, const int32_t *tokens, uint64_t n) {
    if (writer_room(w, n)) return -1;
    enum { CHUNK = 16384 };
    uint32_t buf[CHUNK];
    uint16_t narrow[CHUNK];
    for (uint64_t done = 0; done < n;) {
        size_t m = n - done < CHUNK ? (size_t)(n - done) : CHUNK;
        for (size_t i = 0; i < m; i++) {
            int32_t t = tokens[done + i];
            if (t < 0 || (w->version == 1 && t > 65535))
                return myr_error("token %d at position %" PRIu64 " does not fit a version-%d shard (%s)", t,
                                 w->written + done + i, w->version,
                                 t < 0 ? "tokens are non-negative" : "use --version 7 for vocabularies above 65536");
            buf[i] = (uint32_t)t;
        }
        if (w->version == 1) {
            for (size_t i = 0; i < m; i++) narrow[i] = (uint16_t)buf[i];
            if (atomic_write(&w->file, narrow, m * 2)) return -1;
        } else if (atomic_write(&w->file, buf, m * 4)) {
            return -1;
        }
        done += m;
    }
    w->written += n;
    return 0;
}

int shard_writer_append_bytes(ShardWriter *w, const uint8_t *bytes, uint64_t n) {
    if (writer_room(w, n)) return -1;
    enum { CHUNK = 16384 };
    int32_t buf[CHUNK];
    for (uint64_t done = 0; done < n;) {
        size_t m = n - done < CHUNK ? (size_t)(n - done) : CHUNK;
        for (size_t i = 0; i < m; i++) buf[i] = bytes[done + i];
        if (shard_writer_append(w, buf, m)) return -1;
        done += m;
    }
    return 0;
}

int shard_writer_commit(ShardWriter *w) {
    if (w->written != w->expected) {
        myr_error("shard %s: %" PRIu64 " tokens written but the header announces %" PRIu64, w->file.path, w->written,
                  w->expected);
        atomic_abort(&w->file);
        return -1;
    }
    return atomic_commit(&w->file);
}

void shard_writer_abort(ShardWriter *w) { atomic_abort(&w->file); }

int shard_write(const char *path, const int32_t *tokens, uint64_t n, int version) {
    ShardWriter w;
    if (shard_writer_open(&w, path, version, n)) return -1;
    if (shard_writer_append(&w, tokens, n)) {
        shard_writer_abort(&w);
        return -1;
    }
    return shard_writer_commit(&w);
}
