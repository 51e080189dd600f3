/* encoder.h: the per-thread encoder, shared by encode.c (added tokens, normalization, cuts)
 * and pretokenize.c (pre-tokenizer stages, word cache, BPE). Internal to the tokenizer. */
#ifndef MYRIAD_TOKENIZER_ENCODER_H
#define MYRIAD_TOKENIZER_ENCODER_H

#include "tokenizer/tok_internal.h"

/* Word -> ids cache: the same few thousand words make up most text, and their merges need
 * only be found once per thread. Direct probing; cleared wholesale when full. */
typedef struct {
    uint64_t hash;
    uint32_t key_off, ids_off;
    uint16_t key_len, n_ids;
} CacheSlot;

typedef struct {
    CacheSlot *slots;
    size_t mask, used;
    uint8_t *keys;
    size_t keys_n, keys_cap;
    int32_t *ids;
    size_t ids_n, ids_cap;
} WordCache;

/* One split produced by a pre-tokenizer stage: text [a, b), and whether the pattern matched it. */
typedef struct {
    size_t a, b;
    int match;
} Span;

/* Where the current text stops being this piece's to encode (data prepare's cuts). */
typedef struct {
    size_t at;   /* position in the current text; SIZE_MAX: no cut */
    int partial; /* the text after `at` is only a lookahead: it may continue past its end */
} Cut;

#define NO_CUT ((Cut){SIZE_MAX, 0})

struct TokEncoder {
    const Tokenizer *t;
    RegexScratch *rx;
    BpeScratch bpe;
    WordCache cache;
    ByteBuf clean;              /* the input with invalid UTF-8 replaced */
    ByteBuf normed, ntmp;       /* a normalized piece */
    ByteBuf stage[MAX_STAGES];  /* text rewritten by a stage (Metaspace, ByteLevel's prefix space) */
};

/* pretokenize.c: run pre-tokenizer stages [stage, n_pt) on s[0, n), then BPE on each word.
 * starts_piece: s begins a piece (not a continuation after a cut); at_origin: it begins the
 * document (Metaspace's "first"). With a cut (only at stage 0), verifies that the cut is a
 * split boundary and encodes only what lies before it. */
int pretokenize_run(TokEncoder *e, int stage, const uint8_t *s, size_t n, int starts_piece, int at_origin, Cut cut,
                    IdBuf *out);
void word_cache_free(WordCache *c);

#endif
