/* load_util.h: typed access to tokenizer.json fields with messages that point into the file:
 * "tokenizer.json:12:5: model.dropout: expected a number or null, found a string". Shared by
 * load.c (model, added tokens) and load_steps.c (normalizer, pre-tokenizer, decoder,
 * post-processor). */
#ifndef MYRIAD_TOKENIZER_LOAD_UTIL_H
#define MYRIAD_TOKENIZER_LOAD_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/json.h"
#include "tokenizer/tok_internal.h"

typedef struct {
    const JsonDoc *doc;
    const char *path; /* the file, for "not supported" messages */
    Tokenizer *t;
} LoadCtx;

/* "FILE:LINE:COL: WHAT: message" about value v (NULL: the file as a whole). Returns -1. */
int load_bad(const LoadCtx *c, const JsonValue *v, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "FILE: not supported: message (what is supported)". Returns -1. */
int load_unsupported(const LoadCtx *c, const JsonValue *v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Optional fields: absent or null leave *out at its default. Wrong types are errors. */
int load_bool(const LoadCtx *c, const JsonValue *obj, const char *key, const char *what, int *out);
int load_int(const LoadCtx *c, const JsonValue *obj, const char *key, const char *what, long long lo, long long hi,
             long long *out);
/* A string field; `required` makes absence an error. *s is NULL when absent or null. */
int load_str(const LoadCtx *c, const JsonValue *obj, const char *key, const char *what, int required,
             const char **s, size_t *len);
/* A single character (Metaspace replacement, Strip content) as a code point and its UTF-8. */
int load_char(const LoadCtx *c, const JsonValue *obj, const char *key, const char *what, uint32_t *cp,
              uint8_t utf8[4], int *n_utf8);
/* {"String": "..."} or {"Regex": "..."} (Split, Replace). */
int load_pattern(const LoadCtx *c, const JsonValue *obj, const char *what, const char **s, size_t *len, int *is_regex);
/* A Sequence component: add(c, item, depth + 1) for each item of its array `key`. */
int load_sequence(LoadCtx *c, const JsonValue *v, const char *key, const char *what, int depth,
                  int (*add)(LoadCtx *, const JsonValue *, int));
/* The "type" string of a component object, or an error naming `what`. */
int load_type(const LoadCtx *c, const JsonValue *obj, const char *what, const char **type);

uint8_t *load_dup(const void *s, size_t n); /* NUL-terminated copy, NULL on OOM */

/* load_steps.c */
int load_normalizer(LoadCtx *c, const JsonValue *v);
int load_pre_tokenizer(LoadCtx *c, const JsonValue *v);
int load_decoder(LoadCtx *c, const JsonValue *v);
int load_post_processor(LoadCtx *c, const JsonValue *v);

#endif
