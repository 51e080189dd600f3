/* regex.c: PCRE2 behind regex.h. */
#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/utf8.h"
#include "util/error.h"

struct TokRegex {
    pcre2_code *code;
    int jit;               /* JIT-compiled (complete and hard-partial modes) */
    uint32_t max_lookbehind;
    int can_match_empty;
};

struct RegexScratch {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
};

static int no_jit;
void tok_regex_disable_jit(void) { no_jit = 1; }

int tok_regex_compile(const char *pattern, size_t len, int literal, const char *what, TokRegex **out) {
    *out = NULL;
    int err;
    PCRE2_SIZE off;
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (!cc) return myr_error("out of memory compiling %s", what);
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_MULTILINE);
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &err, &off, cc);
    pcre2_compile_context_free(cc);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return myr_error("%s: the regex does not compile with PCRE2 at offset %zu: %s", what, (size_t)off, (char *)msg);
    }
    TokRegex *re = calloc(1, sizeof *re);
    if (!re) {
        pcre2_code_free(code);
        return myr_error("out of memory compiling %s", what);
    }
    re->code = code;
    re->jit = !no_jit && pcre2_jit_compile(code, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD) == 0;
    pcre2_pattern_info(code, PCRE2_INFO_MAXLOOKBEHIND, &re->max_lookbehind);
    uint32_t minlen = 0;
    pcre2_pattern_info(code, PCRE2_INFO_MINLENGTH, &minlen);
    re->can_match_empty = minlen == 0;
    *out = re;
    return 0;
}

void tok_regex_free(TokRegex *re) {
    if (!re) return;
    pcre2_code_free(re->code);
    free(re);
}

uint32_t tok_regex_max_lookbehind(const TokRegex *re) { return re->max_lookbehind; }
int tok_regex_can_match_empty(const TokRegex *re) { return re->can_match_empty; }

RegexScratch *regex_scratch_new(void) {
    RegexScratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->md = pcre2_match_data_create(1, NULL);
    s->mctx = pcre2_match_context_create(NULL);
    if (!s->md || !s->mctx) {
        regex_scratch_free(s);
        return NULL;
    }
    return s;
}

void regex_scratch_free(RegexScratch *s) {
    if (!s) return;
    pcre2_match_data_free(s->md);
    pcre2_match_context_free(s->mctx);
    pcre2_jit_stack_free(s->jstack);
    free(s);
}

int tok_regex_next(const TokRegex *re, RegexScratch *sc, const uint8_t *s, size_t n, size_t from, int partial,
                   size_t *ms, size_t *me) {
    uint32_t opts = PCRE2_NO_UTF_CHECK | (partial ? PCRE2_PARTIAL_HARD : 0);
    if (re->jit && !sc->jstack) {
        /* long runs (a megabyte of spaces) backtrack deeper than the 32 KiB default JIT stack */
        if (!(sc->jstack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL)))
            return myr_error("out of memory for the regex stack");
        pcre2_jit_stack_assign(sc->mctx, NULL, sc->jstack);
    }
    int rc = re->jit ? pcre2_jit_match(re->code, s, n, from, opts, sc->md, sc->mctx)
                     : pcre2_match(re->code, s, n, from, opts, sc->md, sc->mctx);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc == PCRE2_ERROR_PARTIAL) return 2;
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return myr_error("regex match failed: %s", (char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sc->md);
    *ms = ov[0];
    *me = ov[1];
    return 1;
}

void regex_iter_init(RegexIter *it, const TokRegex *re, RegexScratch *sc, const uint8_t *s, size_t n, size_t from,
                     int partial) {
    memset(it, 0, sizeof *it);
    it->re = re;
    it->sc = sc;
    it->s = s;
    it->n = n;
    it->pos = from;
    it->partial = partial;
}

int regex_iter_next(RegexIter *it, size_t *ms, size_t *me) {
    while (it->pos <= it->n) {
        int rc = tok_regex_next(it->re, it->sc, it->s, it->n, it->pos, it->partial, ms, me);
        if (rc != 1) return rc;
        if (*ms == *me && it->have_last && it->last_end == *me) {
            /* an empty match where the last one ended: step over one character */
            it->pos += it->pos < it->n ? utf8_len(it->s[it->pos]) : 1;
            continue;
        }
        it->pos = *me;
        it->have_last = 1;
        it->last_end = *me;
        return 1;
    }
    return 0;
}
