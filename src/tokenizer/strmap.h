/* strmap.h: byte string -> int32 hash map (open addressing, keys copied into one arena), for
 * vocabularies: built once, then read by every thread without locks. Also the hash function
 * shared by the tokenizer's caches. */
#ifndef MYRIAD_TOKENIZER_STRMAP_H
#define MYRIAD_TOKENIZER_STRMAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint64_t off : 40; /* key bytes at arena + off */
    uint64_t len : 24;
    int32_t value;
    uint32_t hash32;   /* low bits of the hash: most misses stop here without a memcmp */
} StrMapEntry;

typedef struct {
    uint32_t *slots; /* entry index + 1; 0 = empty */
    size_t mask;
    StrMapEntry *entries;
    size_t n, cap;
    uint8_t *arena;
    size_t arena_n, arena_cap;
} StrMap;

static inline uint64_t tok_hash(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (n * 0xff51afd7ed558ccdULL);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    h = (h ^ v) * 0x94d049bb133111ebULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 32);
}

void strmap_free(StrMap *m);
/* Size for n keys of about key_bytes in all (fewer rehashes while loading a vocabulary). */
int strmap_reserve(StrMap *m, size_t n, size_t key_bytes);
/* Insert or overwrite (the later value wins, as a JSON object read into a map). -1 on OOM. */
int strmap_put(StrMap *m, const void *key, size_t len, int32_t value);
/* The value, or -1 if absent (values are non-negative ids). */
int32_t strmap_get(const StrMap *m, const void *key, size_t len);
/* Key bytes of entry i (for iteration over 0..m->n-1). */
static inline const uint8_t *strmap_key(const StrMap *m, size_t i) { return m->arena + m->entries[i].off; }

#endif
