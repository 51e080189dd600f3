/* decode.c: ids -> text, as Hugging Face's Tokenizer::decode: each id becomes its token
 * string (an added token's own text, a normalized one in its normalized form), the decoder
 * chain rewrites the list of strings, and the result is their concatenation. Without a
 * decoder the tokens are joined by spaces. Decoders:
 *   ByteLevel     GPT-2's byte alphabet back to bytes, then invalid UTF-8 -> U+FFFD
 *   Metaspace     U+2581 -> ' ' (dropped in the first token unless prepend_scheme is never)
 *   Replace       a literal or regex -> a string, per token
 *   ByteFallback  runs of <0xHH> tokens -> their bytes if valid UTF-8, else U+FFFD per byte
 *   Fuse          all tokens -> one
 *   Strip         up to `start` leading / `stop` trailing copies of a character, per token */
#define _GNU_SOURCE /* memmem */
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

/* A list of strings: [off[i], off[i] + len[i]) of data. */
typedef struct {
    ByteBuf data;
    size_t *off, *len;
    size_t n, cap;
} StrList;

static void list_free(StrList *l) {
    bytebuf_free(&l->data);
    free(l->off);
    free(l->len);
    memset(l, 0, sizeof *l);
}

/* Start a new string (appended to with list_cat) */
static int list_begin(StrList *l) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        size_t *o = realloc(l->off, cap * sizeof *o), *n = o ? realloc(l->len, cap * sizeof *n) : NULL;
        if (o) l->off = o;
        if (!o || !n) return -1;
        l->len = n;
        l->cap = cap;
    }
    l->off[l->n] = l->data.n;
    l->len[l->n++] = 0;
    return 0;
}

static int list_cat(StrList *l, const void *s, size_t n) {
    if (bytebuf_append(&l->data, s, n)) return -1;
    l->len[l->n - 1] += n;
    return 0;
}

static int list_push(StrList *l, const void *s, size_t n) { return list_begin(l) || list_cat(l, s, n); }

static const uint8_t *item(const StrList *l, size_t i, size_t *n) {
    *n = l->len[i];
    return l->data.p + l->off[i];
}

/* ---------- decoders: src -> dst ---------- */

static int dec_byte_level(const StrList *src, StrList *dst) {
    ByteBuf raw = {0};
    int rc = 0;
    for (size_t i = 0; i < src->n && !rc; i++) {
        size_t n;
        const uint8_t *s = item(src, i, &n);
        size_t mark = raw.n;
        for (size_t k = 0; k < n && !rc;) {
            uint32_t cp;
            k += (size_t)utf8_decode(s + k, n - k, &cp);
            int b = byte_level_byte(cp);
            if (b < 0) { /* not all in the byte alphabet: the token's own bytes */
                raw.n = mark;
                rc = bytebuf_append(&raw, s, n);
                break;
            }
            uint8_t c = (uint8_t)b;
            rc = bytebuf_append(&raw, &c, 1);
        }
    }
    if (!rc) rc = list_begin(dst);
    if (!rc) {
        ByteBuf clean = {0};
        rc = utf8_sanitize(raw.p, raw.n, &clean) || list_cat(dst, clean.p, clean.n);
        bytebuf_free(&clean);
    }
    bytebuf_free(&raw);
    return rc;
}

static int dec_metaspace(const DecStep *d, const StrList *src, StrList *dst) {
    for (size_t i = 0; i < src->n; i++) {
        size_t n;
        const uint8_t *s = item(src, i, &n);
        if (list_begin(dst)) return -1;
        for (size_t k = 0; k < n;) {
            if (n - k >= (size_t)d->rep_len && !memcmp(s + k, d->rep, d->rep_len)) {
                if (!(i == 0 && d->prepend_scheme != PREPEND_NEVER) && list_cat(dst, " ", 1)) return -1;
                k += d->rep_len;
            } else {
                int l = utf8_len(s[k]);
                if (list_cat(dst, s + k, (size_t)l)) return -1;
                k += (size_t)l;
            }
        }
    }
    return 0;
}

static int dec_replace(const DecStep *d, RegexScratch *rx, const StrList *src, StrList *dst) {
    for (size_t i = 0; i < src->n; i++) {
        size_t n;
        const uint8_t *s = item(src, i, &n);
        if (list_begin(dst)) return -1;
        size_t prev = 0;
        if (d->re) {
            RegexIter it;
            regex_iter_init(&it, d->re, rx, s, n, 0, 0);
            size_t ms, me;
            int rc;
            while ((rc = regex_iter_next(&it, &ms, &me)) == 1) {
                if (list_cat(dst, s + prev, ms - prev) || list_cat(dst, d->text, d->len)) return -1;
                prev = me;
            }
            if (rc < 0) return -1;
        } else {
            for (const uint8_t *hit; prev < n && (hit = memmem(s + prev, n - prev, d->pat, d->pat_len));) {
                size_t at = (size_t)(hit - s);
                if (list_cat(dst, s + prev, at - prev) || list_cat(dst, d->text, d->len)) return -1;
                prev = at + d->pat_len;
            }
        }
        if (list_cat(dst, s + prev, n - prev)) return -1;
    }
    return 0;
}

/* "<0xHH>" as u8::from_str_radix reads the two characters: hex digits, or '+' then one. */
static int fallback_byte(const uint8_t *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    int v = 0, digits = 0;
    for (int k = 3; k < 5; k++) {
        uint8_t c = s[k];
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (k == 3 && c == '+') continue;
        if (h < 0) return -1;
        v = v * 16 + h;
        digits++;
    }
    return digits ? v : -1;
}

static int flush_bytes(StrList *dst, ByteBuf *pending) {
    if (!pending->n) return 0;
    int rc = 0;
    if (utf8_is_valid(pending->p, pending->n)) rc = list_push(dst, pending->p, pending->n);
    else
        for (size_t k = 0; k < pending->n && !rc; k++) rc = list_push(dst, "\xEF\xBF\xBD", 3);
    pending->n = 0;
    return rc;
}

static int dec_byte_fallback(const StrList *src, StrList *dst) {
    ByteBuf pending = {0};
    int rc = 0;
    for (size_t i = 0; i < src->n && !rc; i++) {
        size_t n;
        const uint8_t *s = item(src, i, &n);
        int b = fallback_byte(s, n);
        if (b >= 0) {
            uint8_t c = (uint8_t)b;
            rc = bytebuf_append(&pending, &c, 1);
        } else {
            rc = flush_bytes(dst, &pending) || list_push(dst, s, n);
        }
    }
    if (!rc) rc = flush_bytes(dst, &pending);
    bytebuf_free(&pending);
    return rc;
}

static int dec_fuse(const StrList *src, StrList *dst) {
    if (list_begin(dst)) return -1;
    for (size_t i = 0; i < src->n; i++) {
        size_t n;
        const uint8_t *s = item(src, i, &n);
        if (list_cat(dst, s, n)) return -1;
    }
    return 0;
}

static int dec_strip(const DecStep *d, const StrList *src, StrList *dst) {
    for (size_t i = 0; i < src->n; i++) {
        size_t n;
        const uint8_t *s = item(src, i, &n);
        size_t a = 0, b = n;
        for (int k = 0; k < d->start && a < n; k++) {
            uint32_t cp;
            int l = utf8_decode(s + a, n - a, &cp);
            if (cp != d->strip_char) break;
            a += (size_t)l;
        }
        for (int k = 0; k < d->stop && b > a; k++) {
            uint32_t cp;
            int l = utf8_decode_last(s, b, &cp);
            if (cp != d->strip_char) break;
            b -= (size_t)l;
        }
        if (list_push(dst, s + a, b - a)) return -1;
    }
    return 0;
}

int tok_decode(const Tokenizer *t, const int32_t *ids, size_t n, int flags, ByteBuf *out) {
    StrList lists[2];
    memset(lists, 0, sizeof lists);
    StrList *cur = &lists[0], *next = &lists[1];
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        int32_t id = ids[i];
        const uint8_t *s = NULL;
        size_t len = 0;
        if (id >= 0 && id < t->vocab_size && t->added_of_id[id] >= 0) {
            const AddedToken *a = &t->added[t->added_of_id[id]];
            if (a->special && (flags & TOK_DECODE_SKIP_SPECIAL)) continue;
            s = a->match;
            len = a->match_len;
        } else if (!(s = bpe_id_text(&t->bpe, id, &len))) {
            if (flags & TOK_DECODE_LENIENT) continue;
            rc = myr_error("id %d is not in the vocabulary of %s (ids 0..%d)", id, t->path, t->vocab_size - 1);
            break;
        }
        rc = list_push(cur, s, len) ? myr_error("out of memory") : 0;
    }
    RegexScratch *rx = NULL;
    for (int k = 0; k < t->n_dec && !rc; k++) {
        const DecStep *d = &t->dec[k];
        next->n = 0;
        next->data.n = 0;
        switch (d->kind) {
        case DEC_BYTELEVEL: rc = dec_byte_level(cur, next); break;
        case DEC_METASPACE: rc = dec_metaspace(d, cur, next); break;
        case DEC_REPLACE:
            if (d->re && !rx && !(rx = regex_scratch_new())) rc = -1;
            else rc = dec_replace(d, rx, cur, next);
            break;
        case DEC_BYTEFALLBACK: rc = dec_byte_fallback(cur, next); break;
        case DEC_FUSE: rc = dec_fuse(cur, next); break;
        case DEC_STRIP: rc = dec_strip(d, cur, next); break;
        }
        if (rc) rc = myr_error("out of memory decoding");
        StrList *tmp = cur;
        cur = next;
        next = tmp;
    }
    for (size_t i = 0; i < cur->n && !rc; i++) {
        size_t len;
        const uint8_t *s = item(cur, i, &len);
        if ((!t->has_decoder && i > 0 && bytebuf_append(out, " ", 1)) || bytebuf_append(out, s, len))
            rc = myr_error("out of memory decoding");
    }
    regex_scratch_free(rx);
    list_free(&lists[0]);
    list_free(&lists[1]);
    return rc;
}
