/* bpe.c: the BPE model: merges in a hash of (left id, right id) -> (rank, merged id), and
 * the merge of one word exactly as Hugging Face's Word::merge_all: repeatedly the pair of
 * lowest rank, leftmost first. Short words (nearly all) scan an array of ranks; long ones
 * (Llama 2 without a pre-tokenizer encodes whole lines as one word) use a binary heap over a
 * linked list, O(n log n). Initial symbols follow BPE::merge_word, including its byte
 * fallback and unknown-token fusing. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/utf8.h"

enum { SMALL_WORD = 64 }; /* symbols up to which the quadratic scan beats the heap */

typedef struct BpeHeapItem {
    uint32_t rank;
    int32_t pos, merged;
} BpeHeapItem;

static int resize_merges(BpeModel *m, size_t cap);

static int grow_merges(BpeModel *m) { return resize_merges(m, m->merge_key ? 2 * (m->merge_mask + 1) : 64); }

int bpe_reserve_merges(BpeModel *m, size_t n) {
    size_t cap = 64;
    while (cap < 2 * n + 2) cap *= 2;
    return cap > (m->merge_key ? m->merge_mask + 1 : 0) ? resize_merges(m, cap) : 0;
}

static int resize_merges(BpeModel *m, size_t cap) {
    int bits = 0;
    while (((size_t)1 << bits) < cap) bits++;
    uint64_t *keys = malloc(cap * sizeof *keys), *vals = malloc(cap * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    memset(keys, 0xFF, cap * sizeof *keys);
    uint64_t *old_k = m->merge_key, *old_v = m->merge_val;
    size_t old_cap = old_k ? m->merge_mask + 1 : 0;
    m->merge_key = keys;
    m->merge_val = vals;
    m->merge_mask = cap - 1;
    m->merge_shift = 64 - bits;
    for (size_t i = 0; i < old_cap; i++) {
        if (old_k[i] == MERGE_EMPTY) continue;
        size_t s = (size_t)((old_k[i] * 0x9E3779B97F4A7C15ULL) >> m->merge_shift);
        while (keys[s] != MERGE_EMPTY) s = (s + 1) & m->merge_mask;
        keys[s] = old_k[i];
        vals[s] = old_v[i];
    }
    free(old_k);
    free(old_v);
    return 0;
}

int bpe_add_merge(BpeModel *m, int32_t a, int32_t b, uint32_t rank, int32_t merged) {
    if ((!m->merge_key || 2 * (m->n_merges + 1) > m->merge_mask + 1) && grow_merges(m)) return -1;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t s = (size_t)((key * 0x9E3779B97F4A7C15ULL) >> m->merge_shift);
    while (m->merge_key[s] != MERGE_EMPTY && m->merge_key[s] != key) s = (s + 1) & m->merge_mask;
    if (m->merge_key[s] == MERGE_EMPTY) m->n_merges++;
    m->merge_key[s] = key; /* a repeated pair takes the later rank, as a map built in file order */
    m->merge_val[s] = (uint64_t)rank << 32 | (uint32_t)merged;
    return 0;
}

/* ---------- independent parts of a word ---------- */

static inline uint64_t join_slot(uint64_t key, size_t mask) { return (key * 0x9E3779B97F4A7C15ULL >> 17) & mask; }

static int join_add(BpeModel *m, uint64_t key, size_t *n) {
    for (size_t s = join_slot(key, m->join_mask);; s = (s + 1) & m->join_mask) {
        if (m->join_key[s] == key) return 0;
        if (m->join_key[s] == MERGE_EMPTY) {
            m->join_key[s] = key;
            ++*n;
            return 0;
        }
    }
}

static inline int joins(const BpeModel *m, uint32_t c1, uint32_t c2) {
    uint64_t key = (uint64_t)c1 << 21 | c2;
    for (size_t s = join_slot(key, m->join_mask);; s = (s + 1) & m->join_mask) {
        if (m->join_key[s] == key) return 1;
        if (m->join_key[s] == MERGE_EMPTY) return 0;
    }
}

int bpe_build_joins(BpeModel *m) {
    m->can_segment = 0;
    if (m->byte_level || !m->merge_key || m->shared_ids) return 0; /* joins are read from token texts */
    int full_fallback = m->byte_fallback;
    for (int b = 0; b < 256; b++) full_fallback &= m->fallback_id[b] >= 0;
    if (m->unk_id >= 0 && !full_fallback) return 0; /* unknown characters fuse: keep words whole */
    size_t cap = 1024;
    while (cap < 4 * m->n_merges) cap *= 2;
    if (!(m->join_key = malloc(cap * sizeof *m->join_key))) return -1;
    memset(m->join_key, 0xFF, cap * sizeof *m->join_key);
    m->join_mask = cap - 1;
    size_t n = 0;
    for (size_t s = 0; s <= m->merge_mask; s++) {
        if (m->merge_key[s] == MERGE_EMPTY) continue;
        int32_t a = (int32_t)(m->merge_key[s] >> 32), b = (int32_t)(uint32_t)m->merge_key[s];
        size_t la = 0, lb = 0;
        const uint8_t *ta = bpe_id_text(m, a, &la), *tb = bpe_id_text(m, b, &lb);
        for (int k = 0; k < 256; k++)
            if (a == m->fallback_id[k] || b == m->fallback_id[k]) return 0; /* merges on raw bytes */
        if (a == m->unk_id || b == m->unk_id || !ta || !tb || !la || !lb) return 0;
        uint32_t c1, c2;
        utf8_decode_last(ta, la, &c1);
        utf8_decode(tb, lb, &c2);
        join_add(m, (uint64_t)c1 << 21 | c2, &n);
    }
    m->can_segment = 1;
    return 0;
}

size_t bpe_segment_end(const BpeModel *m, const uint8_t *w, size_t n, size_t start) {
    uint32_t c1, c2;
    size_t i = start + (size_t)utf8_decode(w + start, n - start, &c1);
    while (i < n) {
        int l = utf8_decode(w + i, n - i, &c2);
        if (!joins(m, c1, c2)) return i;
        c1 = c2;
        i += (size_t)l;
    }
    return n;
}

void bpe_free(BpeModel *m) {
    free(m->join_key);
    strmap_free(&m->vocab);
    free(m->id_entry);
    free(m->merge_key);
    free(m->merge_val);
    memset(m, 0, sizeof *m);
}

void bpe_scratch_free(BpeScratch *s) {
    free(s->ids);
    free(s->rank);
    free(s->merged);
    free(s->prev);
    free(s->next);
    free(s->alive);
    free(s->heap);
    bytebuf_free(&s->mapped);
    memset(s, 0, sizeof *s);
}

static int reserve(BpeScratch *s, size_t n) {
    if (n <= s->cap) return 0;
    size_t cap = s->cap ? s->cap : 256;
    while (cap < n) cap *= 2;
    int32_t *ids = realloc(s->ids, cap * sizeof *ids);
    if (ids) s->ids = ids;
    uint32_t *rank = realloc(s->rank, cap * sizeof *rank);
    if (rank) s->rank = rank;
    int32_t *merged = realloc(s->merged, cap * sizeof *merged);
    if (merged) s->merged = merged;
    int32_t *prev = realloc(s->prev, cap * sizeof *prev);
    if (prev) s->prev = prev;
    int32_t *next = realloc(s->next, cap * sizeof *next);
    if (next) s->next = next;
    uint8_t *alive = realloc(s->alive, cap);
    if (alive) s->alive = alive;
    if (!ids || !rank || !merged || !prev || !next || !alive) return -1;
    s->cap = cap;
    return 0;
}

/* ---------- initial symbols (BPE::merge_word) ---------- */

typedef struct {
    BpeScratch *s;
    size_t n;
    int32_t unk;       /* pending unknown symbol, -1 if none */
} Init;

static inline void add_sym(Init *in, int32_t id) { in->s->ids[in->n++] = id; }

static inline void flush_unk(Init *in) {
    if (in->unk >= 0) add_sym(in, in->unk);
    in->unk = -1;
}

/* A character `c` (its UTF-8 bytes) not in the vocabulary. */
static void unknown_char(const BpeModel *m, Init *in, const uint8_t *c, int clen) {
    if (m->byte_fallback) {
        int ok = 1;
        for (int k = 0; k < clen; k++) ok &= m->fallback_id[c[k]] >= 0;
        if (ok) { /* Hugging Face adds these without flushing a pending unknown first */
            for (int k = 0; k < clen; k++) add_sym(in, m->fallback_id[c[k]]);
            return;
        }
    }
    if (m->unk_id < 0) return; /* no unk_token: the character is dropped */
    if (in->unk >= 0 && m->fuse_unk) return;
    flush_unk(in);
    in->unk = m->unk_id;
}

static size_t init_symbols(const BpeModel *m, BpeScratch *s, const uint8_t *w, size_t n) {
    Init in = {.s = s, .unk = -1};
    if (m->byte_level) {
        for (size_t i = 0; i < n; i++) {
            int32_t id = m->byte_id[w[i]];
            if (id >= 0) {
                flush_unk(&in);
                add_sym(&in, id);
            } else {
                uint8_t u[4];
                int ul = utf8_encode(byte_level_char(w[i]), u);
                unknown_char(m, &in, u, ul);
            }
        }
    } else {
        for (size_t i = 0; i < n;) {
            int32_t id;
            int clen;
            if (w[i] < 0x80) {
                clen = 1;
                id = m->ascii_id[w[i]];
            } else {
                clen = utf8_len(w[i]);
                if (i + clen > n) clen = (int)(n - i);
                id = strmap_get(&m->vocab, w + i, (size_t)clen);
            }
            if (id >= 0) {
                flush_unk(&in);
                add_sym(&in, id);
            } else {
                unknown_char(m, &in, w + i, clen);
            }
            i += clen;
        }
    }
    flush_unk(&in);
    return in.n;
}

/* ---------- merging ---------- */

static inline void pair_rank(const BpeModel *m, BpeScratch *s, size_t i) {
    uint32_t r;
    int32_t merged;
    if (bpe_merge_lookup(m, s->ids[i], s->ids[i + 1], &r, &merged)) {
        s->rank[i] = r;
        s->merged[i] = merged;
    } else {
        s->rank[i] = UINT32_MAX;
    }
}

static size_t merge_small(const BpeModel *m, BpeScratch *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) pair_rank(m, s, i);
    while (n > 1) {
        size_t best = 0;
        uint32_t br = s->rank[0];
        for (size_t i = 1; i + 1 < n; i++)
            if (s->rank[i] < br) {
                br = s->rank[i];
                best = i;
            }
        if (br == UINT32_MAX) break;
        s->ids[best] = s->merged[best];
        size_t tail = n - best - 2; /* symbols after the merged pair */
        memmove(s->ids + best + 1, s->ids + best + 2, tail * sizeof *s->ids);
        memmove(s->rank + best + 1, s->rank + best + 2, (tail ? tail - 1 : 0) * sizeof *s->rank);
        memmove(s->merged + best + 1, s->merged + best + 2, (tail ? tail - 1 : 0) * sizeof *s->merged);
        n--;
        if (best > 0) pair_rank(m, s, best - 1);
        if (best + 1 < n) pair_rank(m, s, best);
    }
    return n;
}

static inline int heap_less(const BpeHeapItem *a, const BpeHeapItem *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static int heap_push(BpeScratch *s, size_t *hn, BpeHeapItem it) {
    if (*hn == s->heap_cap) {
        size_t cap = s->heap_cap ? 2 * s->heap_cap : 256;
        BpeHeapItem *h = realloc(s->heap, cap * sizeof *h);
        if (!h) return -1;
        s->heap = h;
        s->heap_cap = cap;
    }
    size_t i = (*hn)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&it, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = it;
    return 0;
}

static BpeHeapItem heap_pop(BpeScratch *s, size_t *hn) {
    BpeHeapItem top = s->heap[0], last = s->heap[--*hn];
    size_t i = 0, n = *hn;
    while (2 * i + 1 < n) {
        size_t c = 2 * i + 1;
        if (c + 1 < n && heap_less(&s->heap[c + 1], &s->heap[c])) c++;
        if (!heap_less(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

static int push_pair(const BpeModel *m, BpeScratch *s, size_t *hn, int32_t pos) {
    int32_t nx = s->next[pos];
    if (nx < 0) return 0;
    uint32_t r;
    int32_t merged;
    if (!bpe_merge_lookup(m, s->ids[pos], s->ids[nx], &r, &merged)) return 0;
    return heap_push(s, hn, (BpeHeapItem){r, pos, merged});
}

/* Word::merge_all: a stale heap entry is applied only if the pair now at its position merges
 * into the same id, exactly Hugging Face's check. */
static int merge_large(const BpeModel *m, BpeScratch *s, size_t *n_io) {
    size_t n = *n_io, hn = 0;
    for (size_t i = 0; i < n; i++) {
        s->prev[i] = (int32_t)i - 1;
        s->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        s->alive[i] = 1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        if (push_pair(m, s, &hn, (int32_t)i)) return -1;
    while (hn) {
        BpeHeapItem top = heap_pop(s, &hn);
        int32_t p = top.pos;
        if (!s->alive[p] || s->next[p] < 0) continue;
        int32_t right = s->next[p];
        uint32_t r;
        int32_t merged;
        if (!bpe_merge_lookup(m, s->ids[p], s->ids[right], &r, &merged) || merged != top.merged) continue;
        s->ids[p] = top.merged;
        s->alive[right] = 0;
        s->next[p] = s->next[right];
        if (s->next[right] >= 0) s->prev[s->next[right]] = p;
        if (s->prev[p] >= 0 && push_pair(m, s, &hn, s->prev[p])) return -1;
        if (push_pair(m, s, &hn, p)) return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (s->alive[i]) s->ids[k++] = s->ids[i];
    *n_io = k;
    return 0;
}

/* ignore_merges (Llama 3): a word that is itself a token is that token, merges or not. */
static int32_t whole_word(const BpeModel *m, BpeScratch *s, const uint8_t *w, size_t n) {
    if (!m->byte_level) return strmap_get(&m->vocab, w, n);
    s->mapped.n = 0;
    if (bytebuf_reserve(&s->mapped, 2 * n)) return -1;
    for (size_t i = 0; i < n; i++) s->mapped.n += (size_t)utf8_encode(byte_level_char(w[i]), s->mapped.p + s->mapped.n);
    return strmap_get(&m->vocab, s->mapped.p, s->mapped.n);
}

int bpe_word(const BpeModel *m, BpeScratch *s, const uint8_t *w, size_t n, IdBuf *out) {
    if (n == 0) return 0;
    if (m->ignore_merges) {
        int32_t id = whole_word(m, s, w, n);
        if (id >= 0) return idbuf_push(out, id);
    }
    /* a character expands to at most 4 byte-fallback symbols */
    if (reserve(s, 4 * n + 1)) return -1;
    size_t k = init_symbols(m, s, w, n);
    if (k <= SMALL_WORD) k = merge_small(m, s, k);
    else if (merge_large(m, s, &k)) return -1;
    if (!k) return 0;
    if (idbuf_reserve(out, k)) return -1;
    memcpy(out->p + out->n, s->ids, k * sizeof *s->ids);
    out->n += k;
    return 0;
}
