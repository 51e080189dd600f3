/* encode.c: text -> ids, in Hugging Face's order:
 *   1. invalid UTF-8 -> U+FFFD (as the text Node or Python would hand to Hugging Face)
 *   2. added tokens with normalized=false are found in the raw text; between them, pieces
 *   3. each piece is normalized, then added tokens with normalized=true are found in it
 *   4. what remains goes through the pre-tokenizer stages and the BPE model (pretokenize.c)
 * tok_encode_piece does the same for one piece of a document cut after a '\n' (data prepare
 * encodes a long document in parallel that way): it encodes up to the cut, using the text
 * after it only to prove that the cut is a boundary of the whole document's tokenization. */
#include <stdint.h>
#include <string.h>

#include "tokenizer/encoder.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

TokEncoder *tok_encoder_new(const Tokenizer *t) {
    TokEncoder *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->t = t;
    if (!(e->rx = regex_scratch_new())) {
        free(e);
        return NULL;
    }
    return e;
}

void tok_encoder_free(TokEncoder *e) {
    if (!e) return;
    regex_scratch_free(e->rx);
    bpe_scratch_free(&e->bpe);
    word_cache_free(&e->cache);
    bytebuf_free(&e->clean);
    bytebuf_free(&e->normed);
    bytebuf_free(&e->ntmp);
    for (int i = 0; i < MAX_STAGES; i++) bytebuf_free(&e->stage[i]);
    free(e);
}

static int added_across_cut(void) {
    return myr_error("an added token runs across a cut after a line break");
}

/* Step 3 and on, for one piece s[0, n) of raw text. With a cut inside it, the part after the
 * cut is normalized on its own (nothing in a normalizer reaches across a cut: load.c). */
static int encode_piece_text(TokEncoder *e, const uint8_t *s, size_t n, int starts_piece, int at_origin, Cut cut,
                             IdBuf *out) {
    const Tokenizer *t = e->t;
    const uint8_t *ns = s;
    size_t nn = n, ncut = cut.at;
    if (t->n_norm) {
        ByteBuf *nb = &e->normed;
        nb->n = 0;
        if (cut.at == SIZE_MAX) {
            if (normalize_run(t, e->rx, s, n, starts_piece, nb, &e->ntmp)) return -1;
        } else {
            if (normalize_run(t, e->rx, s, cut.at, starts_piece, nb, &e->ntmp)) return -1;
            ncut = nb->n;
            if (normalize_run(t, e->rx, s + cut.at, n - cut.at, 0, nb, &e->ntmp)) return -1;
        }
        ns = nb->p;
        nn = nb->n;
    }
    /* normalized added tokens split the normalized piece further */
    size_t pos = 0, floor = 0, st, en, next;
    int tok;
    while (1) {
        int found = added_find(t, e->rx, &t->norm_match, ns, nn, pos, floor, &st, &en, &next, &tok);
        size_t end = found ? st : nn;
        if (ncut != SIZE_MAX && floor >= ncut) return 0;
        Cut sub = NO_CUT;
        if (ncut != SIZE_MAX && end > ncut) sub = (Cut){ncut - floor, cut.partial && !found};
        if (found && ncut != SIZE_MAX && st < ncut && en > ncut) return added_across_cut();
        if (end > floor) {
            int first = floor == 0;
            if (pretokenize_run(e, 0, ns + floor, end - floor, first ? starts_piece : 1, first && at_origin, sub, out))
                return -1;
        }
        if (!found || (ncut != SIZE_MAX && st >= ncut)) return 0;
        if (idbuf_push(out, t->added[tok].id)) return myr_error("out of memory");
        pos = next;
        floor = en;
    }
}

/* Steps 2-4 over s[0, n); a cut at cut.at ends what is encoded. */
static int encode_text(TokEncoder *e, const uint8_t *s, size_t n, int doc_start, Cut cut, IdBuf *out) {
    const Tokenizer *t = e->t;
    size_t pos = 0, floor = 0, st, en, next;
    int tok;
    while (1) {
        int found = added_find(t, e->rx, &t->raw_match, s, n, pos, floor, &st, &en, &next, &tok);
        size_t end = found ? st : n;
        if (cut.at != SIZE_MAX && floor >= cut.at) return 0;
        if (found && cut.at != SIZE_MAX && st < cut.at && en > cut.at) return added_across_cut();
        Cut sub = NO_CUT;
        /* the piece after the last added token may go on past the lookahead */
        if (cut.at != SIZE_MAX && end > cut.at) sub = (Cut){cut.at - floor, cut.partial && !found};
        if (end > floor) {
            int first = floor == 0;
            if (encode_piece_text(e, s + floor, end - floor, first ? doc_start : 1, first && doc_start, sub, out))
                return -1;
        }
        if (!found || (cut.at != SIZE_MAX && st >= cut.at)) return 0;
        if (idbuf_push(out, t->added[tok].id)) return myr_error("out of memory");
        pos = next;
        floor = en;
    }
}

/* The text with invalid UTF-8 replaced: itself when it is valid (the usual case: no copy). */
static const uint8_t *clean_text(TokEncoder *e, const uint8_t *s, size_t n, size_t *out_n) {
    if (utf8_is_valid(s, n)) {
        *out_n = n;
        return s;
    }
    e->clean.n = 0;
    if (utf8_sanitize(s, n, &e->clean)) return NULL;
    *out_n = e->clean.n;
    return e->clean.p;
}

int tok_encode(TokEncoder *e, const uint8_t *text, size_t len, IdBuf *out) {
    size_t n;
    const uint8_t *s = clean_text(e, text, len, &n);
    if (!s) return myr_error("out of memory");
    return encode_text(e, s, n, 1, NO_CUT, out);
}

int tok_encode_piece(TokEncoder *e, const uint8_t *buf, size_t len, size_t lookahead, int doc_start, IdBuf *out) {
    if (!lookahead) {
        size_t n;
        const uint8_t *s = clean_text(e, buf, len, &n);
        if (!s) return myr_error("out of memory");
        return encode_text(e, s, n, doc_start, NO_CUT, out);
    }
    if (!e->t->can_cut) return myr_error("internal: this tokenizer cannot encode documents in pieces");
    if (len == 0 || buf[len - 1] != '\n') return myr_error("internal: a piece must end with a line break");
    /* the lookahead ends at its last ASCII byte, so its replacement of invalid bytes is what
     * the whole text would get there (invalid sequences never span an ASCII byte: the piece and
     * the lookahead are cleaned as the whole text would be) */
    size_t la_n = lookahead;
    while (la_n > 0 && buf[len + la_n - 1] >= 0x80) la_n--;
    size_t n;
    const uint8_t *s = clean_text(e, buf, len + la_n, &n);
    if (!s) return myr_error("out of memory");
    size_t cut = len;
    if (s != buf) { /* cleaned: find the cut again (the piece ends with a '\n') */
        e->clean.n = 0;
        if (utf8_sanitize(buf, len, &e->clean)) return myr_error("out of memory");
        cut = e->clean.n;
        if (utf8_sanitize(buf + len, la_n, &e->clean)) return myr_error("out of memory");
        s = e->clean.p;
        n = e->clean.n;
    }
    return encode_text(e, s, n, doc_start, (Cut){cut, 1}, out);
}
