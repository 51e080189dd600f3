/* load_util.c: see load_util.h. */
#include "tokenizer/load_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/utf8.h"
#include "util/error.h"

/* "WHERE: PREFIX: message", WHERE the value's file:line:col (or the file). */
static int report(const LoadCtx *c, const JsonValue *v, const char *prefix, const char *fmt, va_list ap) {
    char where[512], msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (v) json_where(c->doc, v, where, sizeof where);
    else snprintf(where, sizeof where, "%s", c->path);
    return myr_error("%s: %s: %s", where, prefix, msg);
}

int load_bad(const LoadCtx *c, const JsonValue *v, const char *what, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = report(c, v, what, fmt, ap);
    va_end(ap);
    return rc;
}

int load_unsupported(const LoadCtx *c, const JsonValue *v, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = report(c, v, "not supported", fmt, ap);
    va_end(ap);
    return rc;
}

int load_sequence(LoadCtx *c, const JsonValue *v, const char *key, const char *what, int depth,
                  int (*add)(LoadCtx *, const JsonValue *, int)) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", what, key);
    const JsonValue *list = json_get(v, key);
    if (!list || list->type != JSON_ARRAY) return load_bad(c, list ? list : v, full, "expected an array");
    if (depth > 4) return load_unsupported(c, v, "%s Sequences nested deeper than 4", what);
    for (size_t i = 0; i < list->u.arr.n; i++)
        if (add(c, &list->u.arr.items[i], depth + 1)) return -1;
    return 0;
}

static const JsonValue *field(const JsonValue *obj, const char *key) {
    const JsonValue *v = json_get(obj, key);
    return v && v->type != JSON_NULL ? v : NULL;
}

static int wrong_type(const LoadCtx *c, const JsonValue *v, const char *what, const char *key, const char *want) {
    char full[256];
    snprintf(full, sizeof full, "%s.%s", what, key);
    return load_bad(c, v, full, "expected %s, found %s", want, json_type_name(v->type));
}

int load_bool(const LoadCtx *c, const JsonValue *obj, const char *key, const char *what, int *out) {
    const JsonValue *v = field(obj, key);
    if (!v) return 0;
    if (v->type != JSON_BOOL) return wrong_type(c, v, what, key, "true or false");
    *out = v->u.boolean;
    return 0;
}

int load_int(const LoadCtx *c, const JsonValue *obj, const char *key, const char *what, long long lo, long long hi,
             long long *out) {
    const JsonValue *v = field(obj, key);
    if (!v) return 0;
    if (v->type != JSON_NUMBER) return wrong_type(c, v, what, key, "an integer");
    double d = v->u.number;
    if (!(d >= (double)lo && d <= (double)hi) || d != (double)(long long)d) {
        char full[256];
        snprintf(full, sizeof full, "%s.%s", what, key);
        return load_bad(c, v, full, "expected an integer in [%lld, %lld], found %.17g", lo, hi, d);
    }
    *out = (long long)d;
    return 0;
}

int load_str(const LoadCtx *c, const JsonValue *obj, const char *key, const char *what, int required,
             const char **s, size_t *len) {
    *s = NULL;
    *len = 0;
    const JsonValue *v = field(obj, key);
    if (!v) {
        if (!required) return 0;
        char full[256];
        snprintf(full, sizeof full, "%s", what);
        return load_bad(c, json_get(obj, key) ? json_get(obj, key) : obj, full, "expected a string field \"%s\"", key);
    }
    if (v->type != JSON_STRING) return wrong_type(c, v, what, key, "a string");
    *s = v->u.str.s;
    *len = v->u.str.len;
    return 0;
}

int load_char(const LoadCtx *c, const JsonValue *obj, const char *key, const char *what, uint32_t *cp,
              uint8_t utf8[4], int *n_utf8) {
    const char *s;
    size_t n;
    if (load_str(c, obj, key, what, 1, &s, &n)) return -1;
    if (n == 0 || n > 4 || !utf8_is_valid((const uint8_t *)s, n) || utf8_len((uint8_t)s[0]) != (int)n) {
        char full[256];
        snprintf(full, sizeof full, "%s.%s", what, key);
        return load_bad(c, json_get(obj, key), full, "expected exactly one character");
    }
    utf8_decode((const uint8_t *)s, n, cp);
    memcpy(utf8, s, n);
    *n_utf8 = (int)n;
    return 0;
}

int load_pattern(const LoadCtx *c, const JsonValue *obj, const char *what, const char **s, size_t *len,
                 int *is_regex) {
    const JsonValue *p = json_get(obj, "pattern");
    char full[256];
    snprintf(full, sizeof full, "%s.pattern", what);
    if (!p || p->type != JSON_OBJECT || p->u.obj.n != 1)
        return load_bad(c, p ? p : obj, full, "expected {\"String\": \"...\"} or {\"Regex\": \"...\"}");
    const JsonMember *m = &p->u.obj.members[0];
    int regex = m->key_len == 5 && !memcmp(m->key, "Regex", 5);
    if (!regex && !(m->key_len == 6 && !memcmp(m->key, "String", 6)))
        return load_bad(c, p, full, "expected {\"String\": \"...\"} or {\"Regex\": \"...\"}");
    if (m->value.type != JSON_STRING) return load_bad(c, &m->value, full, "expected a string");
    *s = m->value.u.str.s;
    *len = m->value.u.str.len;
    *is_regex = regex;
    return 0;
}

int load_type(const LoadCtx *c, const JsonValue *obj, const char *what, const char **type) {
    if (obj->type != JSON_OBJECT) return load_bad(c, obj, what, "expected an object or null, found %s", json_type_name(obj->type));
    const JsonValue *t = json_get(obj, "type");
    if (!t || t->type != JSON_STRING) return load_bad(c, t ? t : obj, what, "expected a string field \"type\"");
    *type = t->u.str.s;
    return 0;
}

uint8_t *load_dup(const void *s, size_t n) {
    uint8_t *p = malloc(n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}
