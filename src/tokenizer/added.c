/* added.c: finding added tokens (special tokens such as <|endoftext|>) in text, with the
 * semantics of Hugging Face's AddedVocabulary: leftmost-longest matching (a trie walked from
 * each position whose byte starts some token), then single_word (the match must not touch a
 * word character on either side, \w as in Rust's regex), lstrip / rstrip (the token absorbs
 * the whitespace before / after it). */
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/utf8.h"

int added_matcher_add(AddedMatcher *m, const uint8_t *pat, size_t len, int32_t token) {
    if (!m->nodes) {
        m->cap = 64;
        if (!(m->nodes = malloc(m->cap * sizeof *m->nodes))) return -1;
        m->nodes[0] = (TrieNode){-1, -1, -1, 0};
        m->n = 1;
        for (int b = 0; b < 256; b++) m->root_child[b] = -1;
    }
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t child = node == 0 ? m->root_child[pat[i]] : m->nodes[node].child;
        if (node != 0)
            while (child >= 0 && m->nodes[child].byte != pat[i]) child = m->nodes[child].sibling;
        if (child < 0) {
            if (m->n == m->cap) {
                TrieNode *nn = realloc(m->nodes, 2 * m->cap * sizeof *nn);
                if (!nn) return -1;
                m->nodes = nn;
                m->cap *= 2;
            }
            child = (int32_t)m->n++;
            m->nodes[child] = (TrieNode){-1, -1, -1, pat[i]};
            if (node == 0) m->root_child[pat[i]] = child;
            else {
                m->nodes[child].sibling = m->nodes[node].child;
                m->nodes[node].child = child;
            }
        }
        node = child;
    }
    m->nodes[node].token = token; /* a later token with the same text replaces the earlier */
    return 0;
}

void added_matcher_free(AddedMatcher *m) {
    free(m->nodes);
    memset(m, 0, sizeof *m);
}

/* Longest pattern starting at s[i]: its token index and length, or -1. */
static int longest_at(const AddedMatcher *m, const uint8_t *s, size_t n, size_t i, size_t *len) {
    int32_t node = m->root_child[s[i]];
    int best = -1;
    for (size_t k = i + 1;; k++) {
        if (m->nodes[node].token >= 0) {
            best = m->nodes[node].token;
            *len = k - i;
        }
        if (k >= n) break;
        int32_t c = m->nodes[node].child;
        while (c >= 0 && m->nodes[c].byte != s[k]) c = m->nodes[c].sibling;
        if (c < 0) break;
        node = c;
    }
    return best;
}

static int is_word_char(const Tokenizer *t, RegexScratch *rx, const uint8_t *c, size_t clen) {
    size_t ms, me;
    return t->word_char && rx && tok_regex_next(t->word_char, rx, c, clen, 0, 0, &ms, &me) == 1;
}

int added_find(const Tokenizer *t, RegexScratch *rx, const AddedMatcher *m, const uint8_t *s, size_t n, size_t from,
               size_t floor, size_t *start, size_t *end, size_t *next_from, int *token) {
    if (!m->nodes) return 0;
    size_t pos = from;
    while (pos < n) {
        size_t ms = pos, len = 0;
        int tok = -1;
        for (; ms < n; ms++) {
            if (m->root_child[s[ms]] < 0) continue;
            if ((tok = longest_at(m, s, n, ms, &len)) >= 0) break;
        }
        if (tok < 0) return 0;
        size_t me = ms + len;
        const AddedToken *a = &t->added[tok];
        if (a->single_word) {
            uint32_t cp;
            int before = 0, after = 0;
            if (ms > 0) {
                int l = utf8_decode_last(s, ms, &cp);
                before = is_word_char(t, rx, s + ms - l, (size_t)l);
            }
            if (me < n) after = is_word_char(t, rx, s + me, (size_t)utf8_len(s[me]) <= n - me ? (size_t)utf8_len(s[me]) : n - me);
            if (before || after) { /* not a single word: the search goes on after it */
                pos = me;
                continue;
            }
        }
        size_t st = ms, en = me;
        if (a->lstrip) {
            while (st > 0) {
                uint32_t cp;
                int l = utf8_decode_last(s, st, &cp);
                if (!utf8_is_white_space(cp)) break;
                st -= (size_t)l;
            }
            if (st < floor) st = floor;
        }
        if (a->rstrip) {
            while (en < n) {
                uint32_t cp;
                int l = utf8_decode(s + en, n - en, &cp);
                if (!utf8_is_white_space(cp)) break;
                en += (size_t)l;
            }
        }
        *start = st;
        *end = en;
        *next_from = me;
        *token = tok;
        return 1;
    }
    return 0;
}
