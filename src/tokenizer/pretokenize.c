/* pretokenize.c: pre-tokenizer stages and the word step.
 *   Split      regex (PCRE2) matches and the gaps between them, combined by the split
 *              behavior (Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous)
 *   ByteLevel  optional prefix space, then GPT-2's regex; the byte alphabet is not written
 *              out: words stay raw bytes and the BPE model maps them (bpe.c)
 *   Metaspace  ' ' -> replacement, optional prepend (always / first / never), optional split
 *              before each replacement character
 * Each piece of a stage is fed to the next; the last stage's pieces are words, encoded through
 * the per-thread word cache into BPE ids. Hugging Face drops empty pieces; so does this. */
#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <string.h>

#include "tokenizer/encoder.h"
#include "util/error.h"

/* The cache starts small (short texts, many encoders in tests) and doubles up to these. */
enum { CACHE_SLOTS = 1 << 16, CACHE_MAX_WORD = 255, CACHE_START = 256 }; /* slots; 32 key bytes, 8 ids each */

/* ---------- word cache ---------- */

void word_cache_free(WordCache *c) {
    free(c->slots);
    free(c->keys);
    free(c->ids);
    memset(c, 0, sizeof *c);
}

static int cache_alloc(WordCache *c, size_t slots) {
    CacheSlot *sl = calloc(slots, sizeof *sl);
    uint8_t *keys = malloc(slots * 32);
    int32_t *ids = malloc(slots * 8 * sizeof *ids);
    if (!sl || !keys || !ids) {
        free(sl);
        free(keys);
        free(ids);
        return -1;
    }
    word_cache_free(c);
    c->slots = sl;
    c->keys = keys;
    c->ids = ids;
    c->mask = slots - 1;
    c->keys_cap = slots * 32;
    c->ids_cap = slots * 8;
    return 0;
}

static void cache_insert(WordCache *c, uint64_t h, const uint8_t *w, size_t n, const int32_t *ids, size_t k) {
    if (k > UINT16_MAX) return;
    if (2 * (c->used + 1) > c->mask + 1 || c->keys_cap - c->keys_n < n || c->ids_cap - c->ids_n < k) {
        /* full: grow while it may, else start over */
        size_t slots = c->mask + 1;
        if (slots >= CACHE_SLOTS || cache_alloc(c, 2 * slots)) {
            memset(c->slots, 0, (c->mask + 1) * sizeof *c->slots);
            c->used = c->keys_n = c->ids_n = 0;
        }
        if (c->keys_cap - c->keys_n < n || c->ids_cap - c->ids_n < k) return;
    }
    size_t s = h & c->mask;
    while (c->slots[s].hash) s = (s + 1) & c->mask;
    memcpy(c->keys + c->keys_n, w, n);
    if (k) memcpy(c->ids + c->ids_n, ids, k * sizeof *ids);
    c->slots[s] = (CacheSlot){h, (uint32_t)c->keys_n, (uint32_t)c->ids_n, (uint16_t)n, (uint16_t)k};
    c->keys_n += n;
    c->ids_n += k;
    c->used++;
}

static int encode_part(TokEncoder *e, const uint8_t *w, size_t n, IdBuf *out);

static int encode_word(TokEncoder *e, const uint8_t *w, size_t n, IdBuf *out) {
    const BpeModel *m = &e->t->bpe;
    if (!m->can_segment || n <= 16) return encode_part(e, w, n, out);
    if (m->ignore_merges) { /* the whole word first, as BPE::tokenize_with_cache */
        int32_t id = strmap_get(&m->vocab, w, n);
        if (id >= 0) return idbuf_push(out, id) ? myr_error("out of memory") : 0;
    }
    for (size_t a = 0; a < n;) {
        size_t b = bpe_segment_end(m, w, n, a);
        if (encode_part(e, w + a, b - a, out)) return -1;
        a = b;
    }
    return 0;
}

/* Short keys compare faster inline than through memcmp. */
static inline int same_bytes(const uint8_t *a, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* One independently merging part of a word, through the cache. */
static int encode_part(TokEncoder *e, const uint8_t *w, size_t n, IdBuf *out) {
    if (n == 0) return 0;
    const BpeModel *m = &e->t->bpe;
    if (n > CACHE_MAX_WORD) return bpe_word(m, &e->bpe, w, n, out);
    WordCache *c = &e->cache;
    if (!c->slots && cache_alloc(c, CACHE_START)) return myr_error("out of memory for the word cache");
    uint64_t h = tok_hash(w, n) | 1; /* 0 marks a free slot */
    for (size_t s = h & c->mask;; s = (s + 1) & c->mask) {
        const CacheSlot *sl = &c->slots[s];
        if (!sl->hash) break;
        if (sl->hash == h && sl->key_len == n && same_bytes(c->keys + sl->key_off, w, n)) {
            size_t k = sl->n_ids;
            if (out->cap - out->n < k && idbuf_reserve(out, k)) return myr_error("out of memory");
            const int32_t *src = c->ids + sl->ids_off;
            int32_t *dst = out->p + out->n;
            for (size_t i = 0; i < k; i++) dst[i] = src[i]; /* mostly 1-3 ids: no memcpy call */
            out->n += k;
            return 0;
        }
    }
    size_t before = out->n;
    if (bpe_word(m, &e->bpe, w, n, out)) return myr_error("out of memory in the BPE merge");
    cache_insert(c, h, w, n, out->p + before, out->n - before);
    return 0;
}

/* ---------- splits ---------- */

/* NormalizedString::split's behaviors, applied as matches and gaps stream by: each behavior
 * needs at most one span held back. */
typedef struct {
    TokEncoder *e;
    int stage;           /* pieces go to stage + 1 */
    const uint8_t *s;
    int behavior, invert;
    int at_origin;
    IdBuf *out;
    int have, last_match; /* a held span, and the flag of the last span seen */
    Span held;
} Combiner;

/* Every split of a regex stage starts a piece for the next stage, the first one too: a piece
 * continued after a cut begins at a split boundary the cut was verified to be. */
static int emit(Combiner *c, Span sp) {
    if (sp.b == sp.a) return 0; /* Hugging Face drops empty splits */
    return pretokenize_run(c->e, c->stage + 1, c->s + sp.a, sp.b - sp.a, 1, sp.a == 0 && c->at_origin, NO_CUT, c->out);
}

static int combine(Combiner *c, Span sp) {
    if (c->invert) sp.match = !sp.match;
    int rc = 0;
    switch (c->behavior) {
    case SPLIT_ISOLATED: return emit(c, sp);
    case SPLIT_REMOVED: return sp.match ? 0 : emit(c, sp);
    case SPLIT_CONTIGUOUS: /* runs of the same flag become one piece */
        if (c->have && sp.match == c->last_match) c->held.b = sp.b;
        else {
            if (c->have) rc = emit(c, c->held);
            c->held = sp;
            c->have = 1;
        }
        break;
    case SPLIT_MERGED_PREV: /* a match joins the piece before it */
        if (c->have && sp.match && !c->last_match) c->held.b = sp.b;
        else {
            if (c->have) rc = emit(c, c->held);
            c->held = sp;
            c->have = 1;
        }
        break;
    case SPLIT_MERGED_NEXT: /* a match joins the piece after it, unless that is a match too */
        if (c->have && !sp.match) {
            c->held.b = sp.b;
            rc = emit(c, c->held);
            c->have = 0;
        } else {
            if (c->have) rc = emit(c, c->held);
            c->have = 0;
            if (sp.match) {
                c->held = sp;
                c->have = 1;
            } else {
                rc = rc ? rc : emit(c, sp);
            }
        }
        break;
    }
    c->last_match = sp.match;
    return rc;
}

static int combine_end(Combiner *c) {
    int rc = c->have ? emit(c, c->held) : 0;
    c->have = 0;
    return rc;
}

static int cut_failed(void) {
    return myr_error("a cut after a line break falls inside a pre-token (this tokenizer's split pattern runs across "
                     "line breaks)");
}

/* Regex matches and the gaps between them over s[0, n) (Hugging Face's Pattern::find_matches),
 * combined and fed to the next stage as they are found. With a cut (Isolated or Removed only,
 * see load.c): the match/gap sequence must have a boundary exactly at cut.at, found without
 * looking past n when the text may go on (partial matching); only what precedes it is fed. */
static int regex_stage(TokEncoder *e, int stage, const TokRegex *re, int behavior, int invert, const uint8_t *s,
                       size_t n, int starts_piece, int at_origin, Cut cut, IdBuf *out) {
    Combiner c = {e, stage, s, behavior, invert, at_origin, out, 0, 0, {0, 0, 0}};
    int cutting = cut.at != SIZE_MAX;
    RegexIter it;
    regex_iter_init(&it, re, e->rx, s, n, 0, cutting && cut.partial);
    size_t prev = 0, ms, me;
    int rc;
    while ((rc = regex_iter_next(&it, &ms, &me)) == 1) {
        if (cutting) {
            if (prev == cut.at) return 0;                            /* boundary reached */
            if ((ms > cut.at && prev < cut.at) || (me > cut.at && ms < cut.at)) return cut_failed();
        }
        if (ms > prev && combine(&c, (Span){prev, ms, 0})) return -1;
        if (cutting && ms == cut.at) return 0;
        if (combine(&c, (Span){ms, me, 1})) return -1;
        prev = me;
        if (cutting && prev == cut.at) return 0;
    }
    if (rc < 0) return -1;
    if (cutting) { /* no more matches (or the rest needs more text): the cut must be where we are */
        if (prev == cut.at) return 0;
        if (rc == 2 || prev < cut.at) return cut_failed();
    }
    if (prev < n && combine(&c, (Span){prev, n, 0})) return -1;
    return combine_end(&c);
}

static int metaspace_stage(TokEncoder *e, int stage, const PtStage *p, const uint8_t *s, size_t n, int starts_piece,
                           int at_origin, Cut cut, IdBuf *out) {
    ByteBuf *b = &e->stage[stage];
    b->n = 0;
    size_t cut_at = SIZE_MAX;
    if (bytebuf_reserve(b, 4 * n + 8)) return myr_error("out of memory");
    int prepend = (p->prepend_scheme == PREPEND_ALWAYS && starts_piece) || (p->prepend_scheme == PREPEND_FIRST && at_origin);
    int starts_with_rep = n > 0 && (s[0] == ' ' || (n >= (size_t)p->rep_len && !memcmp(s, p->rep, p->rep_len)));
    if (prepend && !starts_with_rep) {
        memcpy(b->p, p->rep, p->rep_len);
        b->n = p->rep_len;
    }
    for (size_t i = 0; i < n; i++) {
        if (i == cut.at) cut_at = b->n;
        if (s[i] == ' ') {
            memcpy(b->p + b->n, p->rep, p->rep_len);
            b->n += p->rep_len;
        } else {
            b->p[b->n++] = s[i];
        }
    }
    if (cut.at == n) cut_at = b->n;
    Cut c2 = {cut.at == SIZE_MAX ? SIZE_MAX : cut_at, cut.partial};
    if (!p->split) return pretokenize_run(e, stage + 1, b->p, b->n, starts_piece, at_origin, c2, out);
    /* split before every replacement character (MergedWithNext on it) */
    for (size_t a = 0; a < b->n;) {
        size_t k = a + (b->n - a >= (size_t)p->rep_len && !memcmp(b->p + a, p->rep, p->rep_len) ? (size_t)p->rep_len : 0);
        const uint8_t *next = k < b->n ? memmem(b->p + k, b->n - k, p->rep, p->rep_len) : NULL;
        k = next ? (size_t)(next - b->p) : b->n;
        if (c2.at != SIZE_MAX && a >= c2.at) break;
        Cut inner = c2.at != SIZE_MAX && k > c2.at ? (Cut){c2.at - a, c2.partial} : NO_CUT;
        int first = a == 0;
        if (pretokenize_run(e, stage + 1, b->p + a, k - a, first ? starts_piece : 1, first && at_origin, inner, out))
            return -1;
        a = k;
    }
    return 0;
}

int pretokenize_run(TokEncoder *e, int stage, const uint8_t *s, size_t n, int starts_piece, int at_origin, Cut cut,
                    IdBuf *out) {
    const Tokenizer *t = e->t;
    if (stage == t->n_pt) /* a word; a cut here runs through it (allowed only where no merge spans it) */
        return encode_word(e, s, cut.at == SIZE_MAX ? n : cut.at, out);
    const PtStage *p = &t->pt[stage];
    if (p->kind == PT_METASPACE) return metaspace_stage(e, stage, p, s, n, starts_piece, at_origin, cut, out);
    if (p->kind == PT_SPLIT) return regex_stage(e, stage, p->re, p->behavior, p->invert, s, n, starts_piece, at_origin, cut, out);
    /* ByteLevel */
    if (p->add_prefix_space && starts_piece && (n == 0 || s[0] != ' ')) {
        ByteBuf *b = &e->stage[stage];
        b->n = 0;
        if (bytebuf_append(b, " ", 1) || bytebuf_append(b, s, n)) return myr_error("out of memory");
        s = b->p;
        n = b->n;
        if (cut.at != SIZE_MAX) cut.at++;
    }
    if (!p->re) return pretokenize_run(e, stage + 1, s, n, starts_piece, at_origin, cut, out);
    return regex_stage(e, stage, p->re, SPLIT_ISOLATED, 0, s, n, starts_piece, at_origin, cut, out);
}
