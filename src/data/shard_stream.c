/* shard_stream.c: see shard_stream.h. */
#include "data/shard_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/shards.h"
#include "util/error.h"

enum { BUF_BYTES = 1 << 20 };

static void tmp_name(const ShardStream *s, int i, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/.%s_%06d.bin.tmp", s->dir, s->split, i);
}

static void final_name(const ShardStream *s, int i, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s_%06d.bin", s->dir, s->split, i);
}

int shard_stream_init(ShardStream *s, const char *dir, const char *split, int version, uint64_t per_shard) {
    memset(s, 0, sizeof *s);
    s->fd = -1;
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    snprintf(s->split, sizeof s->split, "%s", split);
    s->version = version;
    s->per_shard = per_shard;
    if (!(s->buf = malloc(BUF_BYTES))) return myr_error("out of memory");
    return 0;
}

static int write_all(ShardStream *s, const void *p, size_t n, off_t at) {
    const char *c = p;
    while (n) {
        ssize_t w = at >= 0 ? pwrite(s->fd, c, n, at) : write(s->fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            char path[4200];
            tmp_name(s, s->shards - 1, path, sizeof path);
            return myr_error("writing %s failed: %s (disk full?)", path, w < 0 ? strerror(errno) : "no progress");
        }
        c += w;
        n -= (size_t)w;
        if (at >= 0) at += w;
    }
    return 0;
}

static int flush(ShardStream *s) {
    if (!s->buf_n) return 0;
    int rc = write_all(s, s->buf, s->buf_n, -1);
    s->buf_n = 0;
    return rc;
}

static int open_shard(ShardStream *s) {
    char path[4200];
    tmp_name(s, s->shards, path, sizeof path);
    s->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (s->fd < 0) return myr_error("cannot create %s: %s (is --out writable?)", path, strerror(errno));
    s->shards++;
    s->in_shard = 0;
    int32_t header[SHARD_HEADER_INTS] = {0}; /* the count is filled in when the shard is full */
    return write_all(s, header, sizeof header, -1);
}

static int close_shard(ShardStream *s) {
    int32_t head[3] = {s->version == 1 ? SHARD_MAGIC_V1 : SHARD_MAGIC_V7, s->version, (int32_t)s->in_shard};
    int rc = flush(s);
    if (!rc) rc = write_all(s, head, sizeof head, 0);
    if (!rc && fsync(s->fd)) rc = myr_error("fsync of a %s shard failed: %s", s->split, strerror(errno));
    if (close(s->fd) && !rc) rc = myr_error("closing a %s shard failed: %s", s->split, strerror(errno));
    s->fd = -1;
    return rc;
}

int shard_stream_write(ShardStream *s, const int32_t *ids, size_t n) {
    size_t width = s->version == 1 ? 2 : 4;
    for (size_t i = 0; i < n; i++) {
        if (s->fd < 0 && open_shard(s)) return -1;
        uint32_t v = (uint32_t)ids[i];
        if (ids[i] < 0 || (width == 2 && v > 65535))
            return myr_error("token %d does not fit a version-%d shard (use --version 7)", ids[i], s->version);
        if (s->buf_n + width > BUF_BYTES && flush(s)) return -1;
        memcpy(s->buf + s->buf_n, &v, width); /* little-endian host (shards.c checks) */
        s->buf_n += width;
        s->total++;
        if (++s->in_shard == s->per_shard && close_shard(s)) return -1;
    }
    return 0;
}

int shard_stream_finish(ShardStream *s) {
    if (s->fd < 0 && s->shards == 0 && open_shard(s)) return -1;
    return s->fd >= 0 ? close_shard(s) : 0;
}

int shard_stream_commit(ShardStream *s) {
    for (int i = 0; i < s->shards; i++) {
        char from[4200], to[4200];
        tmp_name(s, i, from, sizeof from);
        final_name(s, i, to, sizeof to);
        if (rename(from, to)) return myr_error("renaming %s to %s failed: %s", from, to, strerror(errno));
    }
    int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    s->committed = s->shards;
    s->shards = 0; /* nothing temporary left to remove */
    return 0;
}

void shard_stream_abort(ShardStream *s) {
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    for (int i = 0; i < s->shards; i++) {
        char path[4200];
        tmp_name(s, i, path, sizeof path);
        unlink(path);
    }
    s->shards = 0;
    free(s->buf);
    s->buf = NULL;
}

int shards_remove_stale(const char *dir, const char *split, int keep) {
    int removed = 0;
    for (int i = keep;; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s_%06d.bin", dir, split, i);
        if (unlink(path)) break;
        removed++;
    }
    return removed;
}
