/* prepare_tok.h: `myriad data prepare --tokenizer`: documents -> a model's tokens -> llm.c
 * shards, in parallel, in bounded memory, with the same bytes for any thread count. */
#ifndef MYRIAD_DATA_PREPARE_TOK_H
#define MYRIAD_DATA_PREPARE_TOK_H

#include <stdint.h>

typedef struct {
    const char *tokenizer;   /* tokenizer.json */
    const char *out;         /* output directory (exists) */
    const char *jsonl_field; /* NULL: every file is one text document */
    const char *doc_prefix, *doc_suffix; /* token texts, "none", or NULL (the tokenizer's own) */
    double val_fraction;
    uint64_t seed;
    long long shard_tokens;
    int threads;             /* 0: all cores */
    int version;             /* 0: uint16 if the vocabulary fits, else 7 */
    int skipped_binary;      /* binary inputs left out before (data_cmd.c), counted in the summary */
} PrepareTokOptions;

/* paths[0..n) with their sizes (progress): returns the process exit code; errors die. */
int prepare_tokenized(const PrepareTokOptions *o, char *const *paths, const uint64_t *sizes, int n);

#endif
