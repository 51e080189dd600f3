/* tok_internal.h: the parts of a loaded Tokenizer, shared by the files of src/tokenizer/
 * (load.c builds them; added.c, normalize.c, pretokenize.c, bpe.c, encode.c, decode.c use
 * them). Not for use outside the tokenizer. */
#ifndef MYRIAD_TOKENIZER_TOK_INTERNAL_H
#define MYRIAD_TOKENIZER_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/buf.h"
#include "tokenizer/regex.h"
#include "tokenizer/strmap.h"
#include "tokenizer/tokenizer.h"

/* ---------- BPE model (bpe.c) ---------- */

typedef struct {
    StrMap vocab;        /* token text as written in tokenizer.json -> id */
    int32_t n_ids;       /* one past the largest model id */
    int shared_ids;      /* two vocabulary entries have the same id (their texts are then ambiguous) */
    int32_t *id_entry;   /* id -> index into vocab.entries (-1: no token has that id) */
    uint64_t *merge_key; /* open addressing: (left << 32 | right), MERGE_EMPTY if free */
    uint64_t *merge_val; /* rank << 32 | merged id */
    size_t merge_mask, n_merges;
    int merge_shift;     /* slot = (key * golden ratio) >> merge_shift */
    int32_t unk_id;      /* -1: no unk_token (unknown characters are dropped, as Hugging Face does) */
    int byte_fallback, fuse_unk, ignore_merges;
    int32_t fallback_id[256]; /* id of "<0xHH>" (-1 if absent) */
    int byte_level;           /* words arrive as raw bytes; the vocabulary is in GPT-2's byte alphabet */
    int32_t byte_id[256];     /* byte-level: id of each byte's character (-1: not in the vocabulary) */
    int32_t ascii_id[128];    /* otherwise: id of each ASCII character (-1: not in the vocabulary) */
    /* Which adjacent characters some merge can ever join: (last character of its left token,
     * first of its right). Between two characters that no merge joins, a word splits into
     * parts that merge independently, so a whole line (Llama 2 has no pre-tokenizer) is
     * encoded as short, cacheable parts. Only when no character can become unk_token and no
     * merge involves a byte-fallback token (else the parts would not be independent). */
    uint64_t *join_key;
    size_t join_mask;
    int can_segment;
} BpeModel;

#define MERGE_EMPTY UINT64_MAX

static inline int bpe_merge_lookup(const BpeModel *m, int32_t a, int32_t b, uint32_t *rank, int32_t *merged) {
    if (!m->merge_key) return 0;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t s = (size_t)((key * 0x9E3779B97F4A7C15ULL) >> m->merge_shift);; s = (s + 1) & m->merge_mask) {
        uint64_t k = m->merge_key[s];
        if (k == key) {
            uint64_t v = m->merge_val[s];
            *rank = (uint32_t)(v >> 32);
            *merged = (int32_t)(uint32_t)v;
            return 1;
        }
        if (k == MERGE_EMPTY) return 0;
    }
}

/* Token text of a model id (NULL if none). */
static inline const uint8_t *bpe_id_text(const BpeModel *m, int32_t id, size_t *len) {
    if (id < 0 || id >= m->n_ids || m->id_entry[id] < 0) return NULL;
    const StrMapEntry *e = &m->vocab.entries[m->id_entry[id]];
    *len = e->len;
    return m->vocab.arena + e->off;
}

int bpe_add_merge(BpeModel *m, int32_t a, int32_t b, uint32_t rank, int32_t merged);
int bpe_reserve_merges(BpeModel *m, size_t n); /* size the table for n merges up front */
void bpe_free(BpeModel *m);
/* Build the join table (after all merges); -1 on OOM. */
int bpe_build_joins(BpeModel *m);
/* End of the independently merging part of w[0, n) that starts at `start` (see join_key). */
size_t bpe_segment_end(const BpeModel *m, const uint8_t *w, size_t n, size_t start);

/* Scratch of one encoding thread for bpe_word (symbol arrays and the merge heap). */
typedef struct {
    int32_t *ids;
    uint32_t *rank;
    int32_t *merged;
    int32_t *prev, *next;
    uint8_t *alive;
    struct BpeHeapItem *heap;
    size_t cap, heap_cap;
    ByteBuf mapped; /* a byte-level word in the vocabulary's alphabet (ignore_merges lookups) */
} BpeScratch;
void bpe_scratch_free(BpeScratch *s);
/* Append the ids of one word (a pre-token): raw bytes for byte-level models, else UTF-8 text. */
int bpe_word(const BpeModel *m, BpeScratch *s, const uint8_t *w, size_t n, IdBuf *out);

/* ---------- added tokens (added.c) ---------- */

typedef struct {
    int32_t id;
    uint8_t *text;      /* content */
    size_t len;
    uint8_t *match;     /* what is searched for: content, or its normalized form (normalized tokens) */
    size_t match_len;
    uint8_t single_word, lstrip, rstrip, normalized, special;
} AddedToken;

typedef struct {
    int32_t child, sibling; /* first child, next sibling (-1: none) */
    int32_t token;          /* index into Tokenizer.added of the pattern ending here (-1: none) */
    uint8_t byte;
} TrieNode;

typedef struct {
    TrieNode *nodes; /* nodes[0] is the root */
    size_t n, cap;
    int32_t root_child[256];
} AddedMatcher;

/* ---------- normalizers, pre-tokenizers, decoders ---------- */

enum { NORM_PREPEND, NORM_REPLACE };
typedef struct {
    int kind;
    uint8_t *text;   /* Prepend: what is prepended; Replace: the replacement */
    size_t len;
    uint8_t *pat;    /* Replace with a String pattern (matched literally) */
    size_t pat_len;
    TokRegex *re;    /* Replace with a Regex pattern, or an empty String */
} NormStep;

enum { PT_SPLIT, PT_BYTELEVEL, PT_METASPACE };
enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS };
enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER };
typedef struct {
    int kind;
    TokRegex *re;          /* Split's pattern; ByteLevel's GPT-2 regex when use_regex; NULL otherwise */
    int behavior, invert;  /* Split */
    int add_prefix_space;  /* ByteLevel */
    uint8_t rep[4];        /* Metaspace replacement character */
    int rep_len, prepend_scheme, split;
} PtStage;

enum { DEC_BYTELEVEL, DEC_METASPACE, DEC_REPLACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP };
typedef struct {
    int kind;
    uint8_t *pat, *text;   /* Replace: literal pattern and replacement */
    size_t pat_len, len;
    TokRegex *re;          /* Replace with a Regex pattern */
    uint32_t strip_char;   /* Strip */
    int start, stop;
    uint8_t rep[4];        /* Metaspace */
    int rep_len, prepend_scheme;
} DecStep;

enum { MAX_STAGES = 8, MAX_NORM = 16, MAX_DEC = 16 };

struct Tokenizer {
    char *path;
    BpeModel bpe;
    AddedToken *added;
    int n_added;
    AddedMatcher raw_match, norm_match; /* normalized=false tokens on the raw text; normalized=true after */
    TokRegex *word_char; /* a word character as Rust regex \w sees it (single_word tokens) */
    NormStep norm[MAX_NORM];
    int n_norm;
    PtStage pt[MAX_STAGES];
    int n_pt;
    DecStep dec[MAX_DEC];
    int n_dec, has_decoder;
    int32_t vocab_size;
    int32_t *added_of_id;  /* id -> index into added (-1), over 0..vocab_size-1 */
    IdBuf tmpl_prefix, tmpl_suffix;
    int has_template;
    int can_cut;
    char cut_why[160];
    char desc[160];
};

/* added.c */
int added_matcher_add(AddedMatcher *m, const uint8_t *pat, size_t len, int32_t token);
void added_matcher_free(AddedMatcher *m);
/* One split of s[from, n) by Hugging Face's AddedVocabulary::find_matches: the next accepted
 * added-token match at or after `from` (leftmost-longest, single_word / lstrip / rstrip
 * applied; lstrip never reaches before `floor`). Returns 1 with [*start, *end) and the token
 * index, 0 if none. *next_from is where the search goes on (the match's own end: an rstrip
 * extension does not move it, as in Hugging Face). */
int added_find(const Tokenizer *t, RegexScratch *rx, const AddedMatcher *m, const uint8_t *s, size_t n, size_t from,
               size_t floor, size_t *start, size_t *end, size_t *next_from, int *token);

/* normalize.c: append the normalized form of s[0, n) to out (piece_start: Prepend applies). */
int normalize_run(const Tokenizer *t, RegexScratch *rx, const uint8_t *s, size_t n, int piece_start, ByteBuf *out,
                  ByteBuf *tmp);

#endif
