/* strmap.c: see strmap.h. Load factor stays under 1/2, so probes are short. */
#include "tokenizer/strmap.h"

#include <stdlib.h>

void strmap_free(StrMap *m) {
    free(m->slots);
    free(m->entries);
    free(m->arena);
    memset(m, 0, sizeof *m);
}

static int rehash(StrMap *m, size_t cap);

static int grow_slots(StrMap *m) { return rehash(m, m->mask ? 2 * (m->mask + 1) : 1024); }

int strmap_reserve(StrMap *m, size_t n, size_t key_bytes) {
    size_t cap = 1024;
    while (cap < 2 * n + 2) cap *= 2;
    if (cap > (m->mask ? m->mask + 1 : 0) && rehash(m, cap)) return -1;
    if (n > m->cap) {
        StrMapEntry *en = realloc(m->entries, n * sizeof *en);
        if (!en) return -1;
        m->entries = en;
        m->cap = n;
    }
    if (key_bytes > m->arena_cap) {
        uint8_t *a = realloc(m->arena, key_bytes);
        if (!a) return -1;
        m->arena = a;
        m->arena_cap = key_bytes;
    }
    return 0;
}

static int rehash(StrMap *m, size_t cap) {
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < m->n; i++) {
        uint64_t h = tok_hash(strmap_key(m, i), m->entries[i].len);
        size_t s = h & (cap - 1);
        while (slots[s]) s = (s + 1) & (cap - 1);
        slots[s] = (uint32_t)i + 1;
    }
    free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return 0;
}

int32_t strmap_get(const StrMap *m, const void *key, size_t len) {
    if (!m->slots) return -1;
    uint64_t h = tok_hash(key, len);
    for (size_t s = h & m->mask;; s = (s + 1) & m->mask) {
        uint32_t e = m->slots[s];
        if (!e) return -1;
        const StrMapEntry *en = &m->entries[e - 1];
        if (en->hash32 == (uint32_t)h && en->len == len && !memcmp(m->arena + en->off, key, len)) return en->value;
    }
}

int strmap_put(StrMap *m, const void *key, size_t len, int32_t value) {
    if (len >= (1u << 24)) return -1;
    if (2 * (m->n + 1) > (m->mask ? m->mask + 1 : 0) && grow_slots(m)) return -1;
    uint64_t h = tok_hash(key, len);
    size_t s = h & m->mask;
    for (;; s = (s + 1) & m->mask) {
        uint32_t e = m->slots[s];
        if (!e) break;
        StrMapEntry *en = &m->entries[e - 1];
        if (en->hash32 == (uint32_t)h && en->len == len && !memcmp(m->arena + en->off, key, len)) {
            en->value = value;
            return 0;
        }
    }
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 1024;
        StrMapEntry *en = realloc(m->entries, cap * sizeof *en);
        if (!en) return -1;
        m->entries = en;
        m->cap = cap;
    }
    if (m->arena_cap - m->arena_n < len + 1) {
        size_t cap = m->arena_cap ? m->arena_cap : 65536;
        while (cap - m->arena_n < len + 1) cap *= 2;
        uint8_t *a = realloc(m->arena, cap);
        if (!a) return -1;
        m->arena = a;
        m->arena_cap = cap;
    }
    memcpy(m->arena + m->arena_n, key, len);
    m->arena[m->arena_n + len] = 0;
    m->entries[m->n] = (StrMapEntry){.off = m->arena_n, .len = len, .value = value, .hash32 = (uint32_t)h};
    m->arena_n += len + 1;
    m->slots[s] = (uint32_t)++m->n;
    return 0;
}
