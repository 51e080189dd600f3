/* json.c: the JSON reader of json.h. Recursive descent over the whole text; children of an
 * open array or object wait on a shared stack and move into the arena when it closes, so a
 * container costs exactly its size however many siblings it has. */
#include "tokenizer/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

enum { MAX_DEPTH = 128, ARENA_BLOCK = 1 << 20 };

/* ---------- arena ---------- */

typedef struct Block {
    struct Block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} Block;

struct JsonArena {
    Block *head;
    size_t block; /* size of the next block: small documents (JSON lines) take small ones */
};

static void *arena_alloc(JsonArena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    Block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > a->block ? n : a->block;
        if (a->block < ARENA_BLOCK) a->block *= 2;
        Block *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->used = 0;
        nb->cap = cap;
        nb->next = a->head;
        a->head = nb;
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

static void arena_free(JsonArena *a) {
    for (Block *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(a);
}

/* ---------- parser state ---------- */

typedef struct {
    const unsigned char *s;
    size_t len, i;
    const char *name;
    JsonArena *arena;
    JsonValue *vals; /* pending children of open arrays */
    size_t n_vals, cap_vals;
    JsonMember *mems; /* pending members of open objects */
    size_t n_mems, cap_mems;
    int depth;
    int failed;
    int lenient; /* lone surrogates -> U+FFFD */
} Parser;

static void where_of(const unsigned char *s, size_t pos, size_t *line, size_t *col) {
    size_t l = 1, c = 1;
    for (size_t k = 0; k < pos; k++) {
        if (s[k] == '\n') l++, c = 1;
        else if ((s[k] & 0xC0) != 0x80) c++; /* columns count characters, not bytes */
    }
    *line = l;
    *col = c;
}

/* Record "NAME:LINE:COL: what" once (the innermost failure wins) and return -1. */
static int fail_at(Parser *p, size_t pos, const char *what) {
    if (p->failed) return -1;
    p->failed = 1;
    size_t line, col;
    where_of(p->s, pos, &line, &col);
    if (pos >= p->len)
        return myr_error("%s:%zu:%zu: %s, but the file ends there (truncated?)", p->name, line, col, what);
    unsigned char c = p->s[pos];
    if (c >= 0x20 && c < 0x7f)
        return myr_error("%s:%zu:%zu: %s, found '%c'", p->name, line, col, what, c);
    return myr_error("%s:%zu:%zu: %s, found byte 0x%02x", p->name, line, col, what, c);
}

static void skip_ws(Parser *p) {
    while (p->i < p->len) {
        unsigned char c = p->s[p->i];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
        p->i++;
    }
}

static int oom(Parser *p) {
    p->failed = 1;
    return myr_error("%s: out of memory while parsing", p->name);
}

static int push_val(Parser *p, const JsonValue *v) {
    if (p->n_vals == p->cap_vals) {
        size_t cap = p->cap_vals ? 2 * p->cap_vals : 256;
        JsonValue *n = realloc(p->vals, cap * sizeof *n);
        if (!n) return oom(p);
        p->vals = n;
        p->cap_vals = cap;
    }
    p->vals[p->n_vals++] = *v;
    return 0;
}

static int push_mem(Parser *p, const JsonMember *m) {
    if (p->n_mems == p->cap_mems) {
        size_t cap = p->cap_mems ? 2 * p->cap_mems : 256;
        JsonMember *n = realloc(p->mems, cap * sizeof *n);
        if (!n) return oom(p);
        p->mems = n;
        p->cap_mems = cap;
    }
    p->mems[p->n_mems++] = *m;
    return 0;
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(Parser *p, size_t at, unsigned *out) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        int h = at + k < p->len ? hexval(p->s[at + k]) : -1;
        if (h < 0) return fail_at(p, at + k, "expected 4 hex digits after \\u");
        v = v << 4 | (unsigned)h;
    }
    *out = v;
    return 0;
}

/* Length of the valid UTF-8 sequence at s[i] (1-4), or 0 if invalid (RFC 3629: no overlongs,
 * no surrogates, nothing above U+10FFFF). */
static int utf8_valid_len(const unsigned char *s, size_t n, size_t i) {
    unsigned char c = s[i];
    if (c < 0x80) return 1;
    int len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (i + len > n) return 0;
    if (s[i + 1] < lo || s[i + 1] > hi) return 0;
    for (int k = 2; k < len; k++)
        if ((s[i + k] & 0xC0) != 0x80) return 0;
    return len;
}

static size_t put_utf8(unsigned char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | cp >> 6); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* p->i at the opening quote. Unescaped bytes go to the arena (never longer than the source). */
static int parse_string(Parser *p, const char **out, size_t *out_len) {
    size_t start = ++p->i; /* past '"' */
    /* fast scan: no escapes is the common case (vocabulary entries) */
    size_t j = start;
    while (j < p->len && p->s[j] != '"' && p->s[j] != '\\' && p->s[j] >= 0x20 && p->s[j] < 0x80) j++;
    size_t cap = j - start;
    size_t k = j;
    if (j >= p->len || p->s[j] != '"') { /* escapes, controls or non-ASCII: find the end for the size */
        while (k < p->len && p->s[k] != '"') k += p->s[k] == '\\' ? 2 : 1;
        cap = (k < p->len ? k : p->len) - start;
    }
    unsigned char *o = arena_alloc(p->arena, cap + 1);
    if (!o) return oom(p);
    size_t n = 0, i = start;
    while (1) {
        if (i >= p->len) return fail_at(p, i, "expected '\"' to close the string");
        unsigned char c = p->s[i];
        if (c == '"') break;
        if (c < 0x20) return fail_at(p, i, "control characters must be escaped inside a string");
        if (c == '\\') {
            if (i + 1 >= p->len) return fail_at(p, i + 1, "expected an escape character after '\\'");
            unsigned char e = p->s[i + 1];
            unsigned char simple = e == '"' ? '"' : e == '\\' ? '\\' : e == '/' ? '/' : e == 'b' ? '\b' : e == 'f' ? '\f'
                                   : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : 0;
            if (simple) {
                o[n++] = simple;
                i += 2;
                continue;
            }
            if (e != 'u') return fail_at(p, i + 1, "expected one of \" \\ / b f n r t u after '\\'");
            unsigned cp = 0;
            if (read_hex4(p, i + 2, &cp)) return -1;
            size_t esc = i;
            i += 6;
            int has_low = i + 1 < p->len && p->s[i] == '\\' && p->s[i + 1] == 'u';
            unsigned peek = 0;
            if (p->lenient && cp >= 0xD800 && cp <= 0xDFFF) {
                /* a high surrogate without its low half, or a low one alone: U+FFFD */
                int paired = cp <= 0xDBFF && has_low && read_hex4(p, i + 2, &peek) == 0 && peek >= 0xDC00 && peek <= 0xDFFF;
                if (p->failed) return -1;
                if (!paired) {
                    n += put_utf8(o + n, 0xFFFD);
                    continue;
                }
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo = 0;
                if (i + 1 >= p->len || p->s[i] != '\\' || p->s[i + 1] != 'u')
                    return fail_at(p, esc, "expected a low surrogate \\uDC00-\\uDFFF after this high surrogate");
                if (read_hex4(p, i + 2, &lo)) return -1;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return fail_at(p, i, "expected a low surrogate \\uDC00-\\uDFFF after a high surrogate");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return fail_at(p, esc, "lone low surrogate in a \\u escape");
            }
            n += put_utf8(o + n, cp);
            continue;
        }
        if (c < 0x80) {
            o[n++] = c;
            i++;
            continue;
        }
        int l = utf8_valid_len(p->s, p->len, i);
        if (!l) return fail_at(p, i, "invalid UTF-8 inside a string");
        memcpy(o + n, p->s + i, l);
        n += l;
        i += l;
    }
    o[n] = 0;
    p->i = i + 1;
    *out = (const char *)o;
    *out_len = n;
    return 0;
}

static int parse_number(Parser *p, JsonValue *v) {
    size_t st = p->i, i = p->i;
    if (i < p->len && p->s[i] == '-') i++;
    if (i >= p->len || !(p->s[i] >= '0' && p->s[i] <= '9')) return fail_at(p, i, "expected a digit");
    if (p->s[i] == '0') i++;
    else while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    if (i < p->len && p->s[i] == '.') {
        i++;
        if (i >= p->len || !(p->s[i] >= '0' && p->s[i] <= '9')) return fail_at(p, i, "expected a digit after '.'");
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (i >= p->len || !(p->s[i] >= '0' && p->s[i] <= '9')) return fail_at(p, i, "expected an exponent digit");
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    char buf[64];
    size_t n = i - st;
    if (n >= sizeof buf) {
        /* long numbers: strtod needs a terminated copy */
        char *tmp = malloc(n + 1);
        if (!tmp) return oom(p);
        memcpy(tmp, p->s + st, n);
        tmp[n] = 0;
        v->u.number = strtod(tmp, NULL);
        free(tmp);
    } else {
        memcpy(buf, p->s + st, n);
        buf[n] = 0;
        v->u.number = strtod(buf, NULL);
    }
    v->type = JSON_NUMBER;
    p->i = i;
    return 0;
}

static int parse_value(Parser *p, JsonValue *v);

static int parse_array(Parser *p, JsonValue *v) {
    size_t base = p->n_vals;
    p->i++; /* '[' */
    skip_ws(p);
    if (p->i < p->len && p->s[p->i] == ']') p->i++;
    else {
        while (1) {
            JsonValue item;
            skip_ws(p);
            if (parse_value(p, &item) || push_val(p, &item)) return -1;
            skip_ws(p);
            if (p->i < p->len && p->s[p->i] == ',') { p->i++; continue; }
            if (p->i < p->len && p->s[p->i] == ']') { p->i++; break; }
            return fail_at(p, p->i, "expected ',' or ']' after an array element");
        }
    }
    size_t n = p->n_vals - base;
    JsonValue *items = NULL;
    if (n) {
        if (!(items = arena_alloc(p->arena, n * sizeof *items))) return oom(p);
        memcpy(items, p->vals + base, n * sizeof *items);
    }
    p->n_vals = base;
    v->type = JSON_ARRAY;
    v->u.arr.items = items;
    v->u.arr.n = n;
    return 0;
}

static int parse_object(Parser *p, JsonValue *v) {
    size_t base = p->n_mems;
    p->i++; /* '{' */
    skip_ws(p);
    if (p->i < p->len && p->s[p->i] == '}') p->i++;
    else {
        while (1) {
            JsonMember m;
            skip_ws(p);
            if (p->i >= p->len || p->s[p->i] != '"') return fail_at(p, p->i, "expected '\"' to start an object key");
            if (parse_string(p, &m.key, &m.key_len)) return -1;
            skip_ws(p);
            if (p->i >= p->len || p->s[p->i] != ':') return fail_at(p, p->i, "expected ':' after an object key");
            p->i++;
            skip_ws(p);
            if (parse_value(p, &m.value) || push_mem(p, &m)) return -1;
            skip_ws(p);
            if (p->i < p->len && p->s[p->i] == ',') { p->i++; continue; }
            if (p->i < p->len && p->s[p->i] == '}') { p->i++; break; }
            return fail_at(p, p->i, "expected ',' or '}' after an object member");
        }
    }
    size_t n = p->n_mems - base;
    JsonMember *mems = NULL;
    if (n) {
        if (!(mems = arena_alloc(p->arena, n * sizeof *mems))) return oom(p);
        memcpy(mems, p->mems + base, n * sizeof *mems);
    }
    p->n_mems = base;
    v->type = JSON_OBJECT;
    v->u.obj.members = mems;
    v->u.obj.n = n;
    return 0;
}

static int literal(Parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->len - p->i < n || memcmp(p->s + p->i, word, n)) return fail_at(p, p->i, "expected a JSON value");
    p->i += n;
    return 0;
}

static int parse_value(Parser *p, JsonValue *v) {
    memset(v, 0, sizeof *v);
    v->pos = (uint32_t)p->i;
    if (p->i >= p->len) return fail_at(p, p->i, "expected a JSON value");
    unsigned char c = p->s[p->i];
    if (c == '{' || c == '[') {
        if (++p->depth > MAX_DEPTH) return fail_at(p, p->i, "nesting deeper than 128 levels");
        int rc = c == '{' ? parse_object(p, v) : parse_array(p, v);
        p->depth--;
        return rc;
    }
    if (c == '"') {
        v->type = JSON_STRING;
        return parse_string(p, &v->u.str.s, &v->u.str.len);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
    if (c == 't') { v->type = JSON_BOOL; v->u.boolean = 1; return literal(p, "true"); }
    if (c == 'f') { v->type = JSON_BOOL; v->u.boolean = 0; return literal(p, "false"); }
    if (c == 'n') { v->type = JSON_NULL; return literal(p, "null"); }
    return fail_at(p, p->i, "expected a JSON value");
}

static int parse_doc(const char *text, size_t len, const char *name, JsonDoc *doc, int lenient) {
    memset(doc, 0, sizeof *doc);
    if (len >= UINT32_MAX) return myr_error("%s: %zu bytes is too large for a JSON file here (limit 4 GiB)", name, len);
    Parser p = {.s = (const unsigned char *)text, .len = len, .name = name, .lenient = lenient};
    if (!(p.arena = calloc(1, sizeof *p.arena))) return myr_error("%s: out of memory", name);
    p.arena->block = len < ARENA_BLOCK / 8 ? 8 * len + 256 : ARENA_BLOCK;
    JsonValue *root = arena_alloc(p.arena, sizeof *root);
    int rc = root ? 0 : oom(&p);
    if (!rc) {
        if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) p.i = 3; /* a UTF-8 byte-order mark */
        skip_ws(&p);
        rc = parse_value(&p, root);
    }
    if (!rc) {
        skip_ws(&p);
        if (p.i != len) rc = fail_at(&p, p.i, "expected the end of the file after the top-level value");
    }
    free(p.vals);
    free(p.mems);
    if (rc) {
        arena_free(p.arena);
        return -1;
    }
    doc->root = root;
    doc->arena = p.arena;
    doc->text = text;
    doc->len = len;
    doc->name = name;
    return 0;
}

int json_parse(const char *text, size_t len, const char *name, JsonDoc *doc) {
    return parse_doc(text, len, name, doc, 0);
}

int json_parse_lenient(const char *text, size_t len, const char *name, JsonDoc *doc) {
    return parse_doc(text, len, name, doc, 1);
}

void json_free(JsonDoc *doc) {
    if (doc->arena) arena_free(doc->arena);
    memset(doc, 0, sizeof *doc);
}

const JsonValue *json_get(const JsonValue *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (size_t i = obj->u.obj.n; i-- > 0;) {
        const JsonMember *m = &obj->u.obj.members[i];
        if (m->key_len == n && !memcmp(m->key, key, n)) return &m->value;
    }
    return NULL;
}

int json_str_eq(const JsonValue *v, const char *s) {
    size_t n = strlen(s);
    return v && v->type == JSON_STRING && v->u.str.len == n && !memcmp(v->u.str.s, s, n);
}

const char *json_where(const JsonDoc *doc, const JsonValue *v, char *buf, size_t cap) {
    size_t line, col;
    where_of((const unsigned char *)doc->text, v ? v->pos : 0, &line, &col);
    snprintf(buf, cap, "%s:%zu:%zu", doc->name, line, col);
    return buf;
}

const char *json_type_name(JsonType t) {
    static const char *const names[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
    return t <= JSON_OBJECT ? names[t] : "?";
}
