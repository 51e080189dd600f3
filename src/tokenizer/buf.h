/* buf.h: growable byte and id arrays for the tokenizer (amortized doubling, -1 on OOM). */
#ifndef MYRIAD_TOKENIZER_BUF_H
#define MYRIAD_TOKENIZER_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *p;
    size_t n, cap;
} ByteBuf;

typedef struct {
    int32_t *p;
    size_t n, cap;
} IdBuf;

static inline int bytebuf_reserve(ByteBuf *b, size_t extra) {
    if (b->cap - b->n >= extra) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < extra) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int bytebuf_append(ByteBuf *b, const void *data, size_t n) {
    if (bytebuf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
    return 0;
}

static inline int idbuf_reserve(IdBuf *b, size_t extra) {
    if (b->cap - b->n >= extra) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < extra) cap *= 2;
    int32_t *p = realloc(b->p, cap * sizeof *p);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int idbuf_push(IdBuf *b, int32_t id) {
    if (b->n == b->cap && idbuf_reserve(b, 1)) return -1;
    b->p[b->n++] = id;
    return 0;
}

static inline void bytebuf_free(ByteBuf *b) { free(b->p); memset(b, 0, sizeof *b); }
static inline void idbuf_free(IdBuf *b) { free(b->p); memset(b, 0, sizeof *b); }

#endif
