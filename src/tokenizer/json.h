/* json.h: a small JSON reader for tokenizer.json. It parses the whole text into a tree held in
 * one arena (freed at once) and, unlike cJSON, says exactly where and what went wrong:
 * "FILE:LINE:COL: expected ',' or '}' after an object member". Strings are unescaped into
 * the arena (UTF-8, may hold NUL: use len), lone surrogates and control characters are
 * rejected as serde_json (Hugging Face's reader) rejects them. Nesting is capped. */
#ifndef MYRIAD_TOKENIZER_JSON_H
#define MYRIAD_TOKENIZER_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonType;

typedef struct JsonValue JsonValue;
typedef struct JsonMember JsonMember;

struct JsonValue {
    JsonType type;
    uint32_t pos;             /* byte offset of the value in the text (for error messages) */
    union {
        int boolean;
        double number;
        struct { const char *s; size_t len; } str;
        struct { JsonValue *items; size_t n; } arr;
        struct { JsonMember *members; size_t n; } obj;
    } u;
};

struct JsonMember {
    const char *key;
    size_t key_len;
    JsonValue value;
};

typedef struct JsonArena JsonArena;

typedef struct {
    JsonValue *root;
    JsonArena *arena;
    const char *text; /* the parsed text (not owned), for json_where */
    size_t len;
    const char *name; /* the file name used in messages */
} JsonDoc;

/* Parse text[0, len). On failure: -1 + myr_error("NAME:LINE:COL: expected ..."). */
int json_parse(const char *text, size_t len, const char *name, JsonDoc *doc);
/* The same, but a lone surrogate escape becomes U+FFFD instead of an error (JSON lines of
 * scraped text have them; Python's json reads them). */
int json_parse_lenient(const char *text, size_t len, const char *name, JsonDoc *doc);
void json_free(JsonDoc *doc);

/* Object member by key (the last one if repeated, as serde_json keeps), or NULL. */
const JsonValue *json_get(const JsonValue *obj, const char *key);
/* Is the string value equal to the C string s? */
int json_str_eq(const JsonValue *v, const char *s);
/* "NAME:LINE:COL" of a value, into buf (for callers' own messages). */
const char *json_where(const JsonDoc *doc, const JsonValue *v, char *buf, size_t cap);
const char *json_type_name(JsonType t);

#endif
