/* normalize.c: the supported normalizers, applied in order to one piece of text (the text
 * between two added tokens, as Hugging Face normalizes each such piece on its own):
 *   Prepend  puts a string in front of a non-empty piece (Llama 2: U+2581)
 *   Replace  replaces every non-overlapping occurrence of a string or regex (Llama 2: ' ' -> U+2581)
 * A piece that continues one cut off at a '\n' (data prepare) is not a piece start: no Prepend. */
#define _GNU_SOURCE /* memmem */
#include <string.h>

#include "tokenizer/tok_internal.h"

static int replace_literal(const NormStep *st, const uint8_t *s, size_t n, ByteBuf *out) {
    size_t i = 0;
    while (i < n) {
        const uint8_t *hit = st->pat_len == 1 ? memchr(s + i, st->pat[0], n - i) : memmem(s + i, n - i, st->pat, st->pat_len);
        if (!hit) break;
        size_t at = (size_t)(hit - s);
        if (bytebuf_append(out, s + i, at - i) || bytebuf_append(out, st->text, st->len)) return -1;
        i = at + st->pat_len;
    }
    return bytebuf_append(out, s + i, n - i);
}

static int replace_regex(const NormStep *st, RegexScratch *rx, const uint8_t *s, size_t n, ByteBuf *out) {
    RegexIter it;
    regex_iter_init(&it, st->re, rx, s, n, 0, 0);
    size_t prev = 0, ms, me;
    int rc;
    while ((rc = regex_iter_next(&it, &ms, &me)) == 1) {
        if (bytebuf_append(out, s + prev, ms - prev) || bytebuf_append(out, st->text, st->len)) return -1;
        prev = me;
    }
    if (rc < 0) return -1;
    return bytebuf_append(out, s + prev, n - prev);
}

int normalize_run(const Tokenizer *t, RegexScratch *rx, const uint8_t *s, size_t n, int piece_start, ByteBuf *out,
                  ByteBuf *tmp) {
    RegexScratch *own = NULL;
    /* ping-pong between out and tmp, starting so that the last step lands in out */
    ByteBuf *bufs[2] = {t->n_norm % 2 ? out : tmp, t->n_norm % 2 ? tmp : out};
    const uint8_t *cur = s;
    size_t cur_n = n;
    size_t base = out->n; /* out may hold earlier text: append after it */
    int rc = 0;
    for (int k = 0; k < t->n_norm && !rc; k++) {
        const NormStep *st = &t->norm[k];
        ByteBuf *dst = bufs[k % 2];
        size_t keep = dst == out ? base : 0;
        dst->n = keep;
        if (st->kind == NORM_PREPEND) {
            if (piece_start && cur_n > 0) rc = bytebuf_append(dst, st->text, st->len);
            if (!rc) rc = bytebuf_append(dst, cur, cur_n);
        } else if (st->re) {
            if (!rx && !(rx = own = regex_scratch_new())) rc = -1;
            if (!rc) rc = replace_regex(st, rx, cur, cur_n, dst);
        } else {
            rc = replace_literal(st, cur, cur_n, dst);
        }
        cur = dst->p + keep;
        cur_n = dst->n - keep;
    }
    if (!rc && t->n_norm == 0) rc = bytebuf_append(out, s, n);
    regex_scratch_free(own);
    return rc;
}
