/* pretokenize.c: pre-tokenizer stages and the word step.
 *   Split      regex (PCRE2) matches and the gaps between them, combined by the split
 *              behavior (Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous)
 *   ByteLevel  optional prefix space, then GPT-2's regex; the byte alphabet is not written
 *              out: words stay raw bytes and the BPE model maps them (bpe.c)
 *   Metaspace  ' ' -> replacement, optional prepend (always / first / never), optional split
 *              before each replacement character
 * Each piece of a stage is fed to the next; the last stage's pieces are words, encoded through
 * the per-thread word cache into BPE ids. Hugging Face drops empty pieces; so does this. */
#include <stdint.h>
#include <string.h>

#include "tokenizer/encoder.h"
#include "util/error.h"

enum { CACHE_SLOTS = 1 << 16, CACHE_KEY_BYTES = 2 << 20, CACHE_IDS = 1 << 19, CACHE_MAX_WORD = 255 };

/* ---------- word cache ---------- */

void word_cache_free(WordCache *c) {
    free(c->slots);
    free(c->keys);
    free(c->ids);
    memset(c, 0, sizeof *c);
}

static int cache_init(WordCache *c) {
    c->slots = calloc(CACHE_SLOTS, sizeof *c->slots);
    c->keys = malloc(CACHE_KEY_BYTES);
    c->ids = malloc(CACHE_IDS * sizeof *c->ids);
    if (!c->slots || !c->keys || !c->ids) {
        word_cache_free(c);
        return -1;
    }
    c->mask = CACHE_SLOTS - 1;
    c->keys_cap = CACHE_KEY_BYTES;
    c->ids_cap = CACHE_IDS;
    return 0;
}

static void cache_insert(WordCache *c, uint64_t h, const uint8_t *w, size_t n, const int32_t *ids, size_t k) {
    if (2 * (c->used + 1) > c->mask + 1 || c->keys_cap - c->keys_n < n || c->ids_cap - c->ids_n < k || k > UINT16_MAX) {
        if (k > UINT16_MAX) return;
        memset(c->slots, 0, (c->mask + 1) * sizeof *c->slots); /* full: start over */
        c->used = c->keys_n = c->ids_n = 0;
    }
    size_t s = h & c->mask;
    while (c->slots[s].hash) s = (s + 1) & c->mask;
    memcpy(c->keys + c->keys_n, w, n);
    memcpy(c->ids + c->ids_n, ids, k * sizeof *ids);
    c->slots[s] = (CacheSlot){h, (uint32_t)c->keys_n, (uint32_t)c->ids_n, (uint16_t)n, (uint16_t)k};
    c->keys_n += n;
    c->ids_n += k;
    c->used++;
}

static int encode_word(TokEncoder *e, const uint8_t *w, size_t n, IdBuf *out) {
    if (n == 0) return 0;
    const BpeModel *m = &e->t->bpe;
    if (n > CACHE_MAX_WORD) return bpe_word(m, &e->bpe, w, n, out);
    WordCache *c = &e->cache;
    if (!c->slots && cache_init(c)) return myr_error("out of memory for the word cache");
    uint64_t h = tok_hash(w, n) | 1; /* 0 marks a free slot */
    for (size_t s = h & c->mask;; s = (s + 1) & c->mask) {
        const CacheSlot *sl = &c->slots[s];
        if (!sl->hash) break;
        if (sl->hash == h && sl->key_len == n && !memcmp(c->keys + sl->key_off, w, n)) {
            if (idbuf_reserve(out, sl->n_ids)) return myr_error("out of memory");
            memcpy(out->p + out->n, c->ids + sl->ids_off, sl->n_ids * sizeof *out->p);
            out->n += sl->n_ids;
            return 0;
        }
    }
    size_t before = out->n;
    if (bpe_word(m, &e->bpe, w, n, out)) return myr_error("out of memory in the BPE merge");
    cache_insert(c, h, w, n, out->p + before, out->n - before);
    return 0;
}

/* ---------- splits ---------- */

static int push_span(SpanList *l, size_t a, size_t b, int match) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        Span *p = realloc(l->p, cap * sizeof *p);
        if (!p) return myr_error("out of memory");
        l->p = p;
        l->cap = cap;
    }
    l->p[l->n++] = (Span){a, b, match};
    return 0;
}

/* Regex matches and gaps over s[0, n) (Hugging Face's Pattern::find_matches). With `partial`,
 * stops where the answer would need text past n; *covered is how far the list is final. */
static int regex_spans(TokEncoder *e, const TokRegex *re, const uint8_t *s, size_t n, int partial, SpanList *l,
                       size_t *covered) {
    l->n = 0;
    RegexIter it;
    regex_iter_init(&it, re, e->rx, s, n, 0, partial);
    size_t prev = 0, ms, me;
    int rc;
    while ((rc = regex_iter_next(&it, &ms, &me)) == 1) {
        if (ms > prev && push_span(l, prev, ms, 0)) return -1;
        if (push_span(l, ms, me, 1)) return -1;
        prev = me;
    }
    if (rc < 0) return -1;
    if (rc == 2) {
        *covered = prev;
        return 0;
    }
    if (prev < n && push_span(l, prev, n, 0)) return -1;
    *covered = n;
    return 0;
}

/* NormalizedString::split: combine matches and gaps by `behavior` (in place). */
static void apply_behavior(SpanList *l, int behavior, int invert) {
    if (invert)
        for (size_t i = 0; i < l->n; i++) l->p[i].match = !l->p[i].match;
    size_t k = 0;
    int prev_match = 0;
    switch (behavior) {
    case SPLIT_ISOLATED: return;
    case SPLIT_REMOVED:
        for (size_t i = 0; i < l->n; i++)
            if (!l->p[i].match) l->p[k++] = l->p[i];
        break;
    case SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < l->n; i++) {
            if (l->p[i].match == prev_match && k > 0) l->p[k - 1].b = l->p[i].b;
            else l->p[k++] = l->p[i];
            prev_match = l->p[i].match;
        }
        break;
    case SPLIT_MERGED_PREV:
        for (size_t i = 0; i < l->n; i++) {
            if (l->p[i].match && !prev_match && k > 0) l->p[k - 1].b = l->p[i].b;
            else l->p[k++] = l->p[i];
            prev_match = l->p[i].match;
        }
        break;
    case SPLIT_MERGED_NEXT: {
        /* folded from the right, then put back in order */
        size_t w = l->n;
        for (size_t i = l->n; i-- > 0;) {
            if (l->p[i].match && !prev_match && w < l->n) l->p[w].a = l->p[i].a;
            else l->p[--w] = l->p[i];
            prev_match = l->p[i].match;
        }
        memmove(l->p, l->p + w, (l->n - w) * sizeof *l->p);
        k = l->n - w;
        break;
    }
    }
    l->n = k;
}

static int cut_failed(void) {
    return myr_error("a cut after a line break falls inside a pre-token (this tokenizer's split pattern runs across "
                     "line breaks)");
}

/* Feed the pieces of `l` to the next stage. With a cut: the raw match/gap list must have a
 * boundary exactly at cut.at (checked before combining), and only pieces before it are fed. */
static int feed_spans(TokEncoder *e, int stage, const uint8_t *s, SpanList *l, size_t covered, int behavior,
                      int invert, int starts_piece, int at_origin, Cut cut, IdBuf *out) {
    if (cut.at != SIZE_MAX) {
        size_t keep = 0;
        int ok = covered == cut.at;
        for (; keep < l->n; keep++) {
            const Span *sp = &l->p[keep];
            if (sp->a >= cut.at) {
                ok = 1;
                break;
            }
            if (sp->b > cut.at) return cut_failed();
            if (sp->b == cut.at) ok = 1;
        }
        if (!ok) return cut_failed();
        l->n = keep;
    }
    apply_behavior(l, behavior, invert);
    /* the next stage reuses no list of this stage, but copy the count: recursion below may
     * run this stage's sibling stages only at deeper indices */
    for (size_t i = 0; i < l->n; i++) {
        Span sp = l->p[i];
        if (sp.b == sp.a) continue;
        int first = sp.a == 0;
        if (pretokenize_run(e, stage + 1, s + sp.a, sp.b - sp.a, first ? starts_piece : 1, first && at_origin, NO_CUT, out))
            return -1;
    }
    return 0;
}

static int regex_stage(TokEncoder *e, int stage, const TokRegex *re, int behavior, int invert, const uint8_t *s,
                       size_t n, int starts_piece, int at_origin, Cut cut, IdBuf *out) {
    SpanList *l = &e->spans[stage];
    size_t covered;
    if (regex_spans(e, re, s, n, cut.at != SIZE_MAX && cut.partial, l, &covered)) return -1;
    return feed_spans(e, stage, s, l, covered, behavior, invert, starts_piece, at_origin, cut, out);
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
    /* split before every replacement character (MergedWithNext) */
    SpanList *l = &e->spans[stage];
    l->n = 0;
    size_t prev = 0;
    for (size_t i = 0; i + p->rep_len <= b->n;) {
        if (!memcmp(b->p + i, p->rep, p->rep_len)) {
            if (i > prev && push_span(l, prev, i, 0)) return -1;
            if (push_span(l, i, i + p->rep_len, 1)) return -1;
            i += p->rep_len;
            prev = i;
        } else {
            i++;
        }
    }
    if (prev < b->n && push_span(l, prev, b->n, 0)) return -1;
    apply_behavior(l, SPLIT_MERGED_NEXT, 0);
    for (size_t i = 0; i < l->n; i++) {
        Span sp = l->p[i];
        if (sp.b == sp.a) continue;
        if (c2.at != SIZE_MAX && sp.a >= c2.at) break;
        Cut inner = c2.at != SIZE_MAX && sp.b > c2.at ? (Cut){c2.at - sp.a, c2.partial} : NO_CUT;
        int first = sp.a == 0;
        if (pretokenize_run(e, stage + 1, b->p + sp.a, sp.b - sp.a, first ? starts_piece : 1, first && at_origin, inner, out))
            return -1;
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
