/* regex.h: the tokenizer's regular expressions, through PCRE2 (UTF + UCP, JIT-compiled).
 * Hugging Face runs tokenizer.json patterns through Oniguruma (Ruby syntax): ^ and $ match at
 * line breaks there, so patterns compile MULTILINE here; \p{L}, \p{N}, \s follow Unicode. The
 * iteration rule is Oniguruma's find_iter: an empty match right where the previous match
 * ended is skipped by one character. Subjects must be valid UTF-8 (callers sanitize). */
#ifndef MYRIAD_TOKENIZER_REGEX_H
#define MYRIAD_TOKENIZER_REGEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct TokRegex TokRegex;
typedef struct RegexScratch RegexScratch; /* per-thread match state (match data, JIT stack) */

/* Compile `pattern` (len bytes; literal=1 for a plain string). -1 + myr_error naming `what`. */
int tok_regex_compile(const char *pattern, size_t len, int literal, const char *what, TokRegex **out);
void tok_regex_free(TokRegex *re);
/* Compile later patterns without the JIT (the fuzzer compiles thousands; results are the same). */
void tok_regex_disable_jit(void);
uint32_t tok_regex_max_lookbehind(const TokRegex *re); /* in characters */
int tok_regex_can_match_empty(const TokRegex *re);

RegexScratch *regex_scratch_new(void);
void regex_scratch_free(RegexScratch *s);

/* The next match in s[0, n) searching from `from` (a character boundary). Returns 1 and sets
 * [*ms, *me) on a match, 0 when there is none, 2 when `partial` is set and the answer depends on
 * text past n (PCRE2's hard partial match: the engine reached the end), -1 + myr_error on an
 * engine failure. */
int tok_regex_next(const TokRegex *re, RegexScratch *sc, const uint8_t *s, size_t n, size_t from, int partial,
                   size_t *ms, size_t *me);

/* Oniguruma-style iteration over s[0, n) from `from`. */
typedef struct {
    const TokRegex *re;
    RegexScratch *sc;
    const uint8_t *s;
    size_t n, pos;
    int partial;
    int have_last;
    size_t last_end;
} RegexIter;
void regex_iter_init(RegexIter *it, const TokRegex *re, RegexScratch *sc, const uint8_t *s, size_t n, size_t from,
                     int partial);
/* 1: a match [*ms, *me); 0: no more; 2: partial (see tok_regex_next); -1: error. */
int regex_iter_next(RegexIter *it, size_t *ms, size_t *me);

#endif
