/* shards.h: llm.c token shards. A shard is a 256 x int32 little-endian header
 *   [0] magic: 20240520 (version 1, uint16 tokens) or 20240801 (version 7, uint32 tokens)
 *   [1] version, [2] token count, rest zero
 * followed by exactly `count` tokens. `tokens_open` takes a file, a directory (every *.bin
 * in it) or a glob, sorts the names bytewise, mmaps every shard and presents the
 * concatenation as one token sequence. Writers are atomic (io/atomic_file.h). */
#ifndef MYRIAD_DATA_SHARDS_H
#define MYRIAD_DATA_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "io/atomic_file.h"

enum {
    SHARD_HEADER_INTS = 256,
    SHARD_HEADER_BYTES = SHARD_HEADER_INTS * 4,
    SHARD_MAGIC_V1 = 20240520, /* version 1: uint16 tokens */
    SHARD_MAGIC_V7 = 20240801, /* version 7: uint32 tokens */
};

typedef struct TokenData TokenData; /* opaque: the mmap'd shards of one --data spec */

int tokens_open(const char *spec, TokenData **out);
uint64_t tokens_count(const TokenData *d); /* total tokens over the concatenation */
/* Copy tokens [start, start + n) (may span shards); -1 + myr_error if past the end. */
int tokens_read(const TokenData *d, uint64_t start, uint64_t n, int32_t *out);
void tokens_close(TokenData *d);

/* Per-shard facts (for `myriad data info` and log lines). */
int tokens_num_shards(const TokenData *d);
const char *tokens_shard_path(const TokenData *d, int i);
int tokens_shard_version(const TokenData *d, int i);
uint64_t tokens_shard_count(const TokenData *d, int i);

/* Validate a whole shard held in buf[0, len) (header and size); `name` is used in messages.
 * On success sets the token width in bytes (2 or 4) and the token count. */
int shards_parse_header(const uint8_t *buf, size_t len, const char *name, int *token_bytes, uint64_t *count);

/* Write a whole shard: version 1 (uint16; error if a token is > 65535) or 7 (uint32). Atomic. */
int shard_write(const char *path, const int32_t *tokens, uint64_t n, int version);

/* Streaming writer for shards too large to hold as int32: the token count is fixed up front
 * (it is in the header) and commit checks exactly that many were appended. */
typedef struct {
    AtomicFile file;
    int version;
    uint64_t expected, written;
} ShardWriter;
int shard_writer_open(ShardWriter *w, const char *path, int version, uint64_t count);
int shard_writer_append(ShardWriter *w, const int32_t *tokens, uint64_t n);
int shard_writer_append_bytes(ShardWriter *w, const uint8_t *bytes, uint64_t n); /* byte-level tokens */
int shard_writer_commit(ShardWriter *w);
void shard_writer_abort(ShardWriter *w);

#endif
