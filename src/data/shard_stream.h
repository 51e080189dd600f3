/* shard_stream.h: one split (train or val) of `data prepare --tokenizer`, written as llm.c
 * shards of at most `per_shard` tokens while the token count is not known in advance. Every
 * shard is written under a temporary name (DIR/.train_000000.bin.tmp) and gets its header
 * when full; nothing takes a final name until shard_stream_commit, after the whole input was
 * encoded, so a failed or interrupted run leaves no partial shard (abort removes the rest). */
#ifndef MYRIAD_DATA_SHARD_STREAM_H
#define MYRIAD_DATA_SHARD_STREAM_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char dir[4096], split[16];
    int version;          /* 1: uint16 tokens, 7: uint32 */
    uint64_t per_shard;
    int fd;               /* the shard being written, -1 if none */
    int shards;           /* shards started (temporary files that exist) */
    int committed;        /* shards renamed to their final names by commit */
    uint64_t in_shard, total;
    uint8_t *buf;         /* write-behind buffer */
    size_t buf_n;
} ShardStream;

int shard_stream_init(ShardStream *s, const char *dir, const char *split, int version, uint64_t per_shard);
/* Append tokens (all < 65536 for version 1: else an error naming the token). */
int shard_stream_write(ShardStream *s, const int32_t *ids, size_t n);
/* Close the last shard (an empty split still gets one empty shard). */
int shard_stream_finish(ShardStream *s);
/* Rename every temporary shard to DIR/<split>_NNNNNN.bin and fsync DIR. */
int shard_stream_commit(ShardStream *s);
/* Remove the temporary shards and free. Safe at any point, also after a failure or commit. */
void shard_stream_abort(ShardStream *s);

/* Remove DIR/<split>_NNNNNN.bin numbered >= keep, left by an earlier, larger run (else a later
 * --data 'DIR/train_*.bin' would read stale shards). Returns how many. */
int shards_remove_stale(const char *dir, const char *split, int keep);

#endif
