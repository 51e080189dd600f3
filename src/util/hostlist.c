/* hostlist.c: Slurm host list expressions, expanded and compressed (see hostlist.h). */
#include "util/hostlist.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

enum { NAME_MAX_LEN = 255, DEFAULT_LIMIT = 1000000 };

void hostlist_add(HostList *hl, const char *name) {
    if (hl->n == hl->cap) {
        hl->cap = hl->cap ? 2 * hl->cap : 16;
        hl->names = realloc(hl->names, (size_t)hl->cap * sizeof *hl->names);
    }
    hl->names[hl->n++] = strdup(name);
}

int hostlist_find(const HostList *hl, const char *name) {
    for (int i = 0; i < hl->n; i++)
        if (!strcmp(hl->names[i], name)) return i;
    return -1;
}

void hostlist_free(HostList *hl) {
    for (int i = 0; i < hl->n; i++) free(hl->names[i]);
    free(hl->names);
    memset(hl, 0, sizeof *hl);
}

/* One bound of a range: digits only, at most 18 of them. */
static int parse_bound(const char *s, size_t len, long long *v) {
    if (len == 0 || len > 18) return -1;
    *v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i])) return -1;
        *v = *v * 10 + (s[i] - '0');
    }
    return 0;
}

/* Expands item[pos..] behind the already built prefix `head` (recursion over bracket groups). */
static int expand_item(HostList *hl, const char *item, const char *whole, char *head, size_t hlen, int limit) {
    const char *open = strchr(item, '[');
    if (!open) {
        if (hlen + strlen(item) > NAME_MAX_LEN) return myr_error("host list '%s': a name is longer than %d characters", whole, NAME_MAX_LEN);
        strcpy(head + hlen, item);
        if (!head[0]) return myr_error("host list '%s': empty host name", whole);
        if (hl->n >= limit) return myr_error("host list '%s' names more than %d hosts", whole, limit);
        hostlist_add(hl, head);
        return 0;
    }
    size_t lit = (size_t)(open - item);
    const char *close = strchr(open, ']');
    if (!close) return myr_error("host list '%s': '[' without ']'", whole);
    if (memchr(open + 1, '[', (size_t)(close - open - 1))) return myr_error("host list '%s': nested '['", whole);
    if (hlen + lit > NAME_MAX_LEN) return myr_error("host list '%s': a name is longer than %d characters", whole, NAME_MAX_LEN);
    memcpy(head + hlen, item, lit);
    size_t base = hlen + lit;
    for (const char *r = open + 1; r < close;) {
        const char *comma = memchr(r, ',', (size_t)(close - r));
        const char *end = comma ? comma : close;
        const char *dash = memchr(r, '-', (size_t)(end - r));
        long long lo, hi;
        size_t width = (size_t)((dash ? dash : end) - r);
        if (parse_bound(r, width, &lo) || (dash ? parse_bound(dash + 1, (size_t)(end - dash - 1), &hi) : (hi = lo, 0)))
            return myr_error("host list '%s': bad range '%.*s' (expected N or N-M inside [])", whole, (int)(end - r), r);
        if (hi < lo) return myr_error("host list '%s': range %lld-%lld runs backwards", whole, lo, hi);
        if (hi - lo >= limit) return myr_error("host list '%s' names more than %d hosts", whole, limit);
        int pad = r[0] == '0' && width > 1 ? (int)width : 0; /* n[08-10]: width 2 */
        for (long long v = lo; v <= hi; v++) {
            char num[32];
            int k = snprintf(num, sizeof num, "%0*lld", pad, v);
            if (base + (size_t)k > NAME_MAX_LEN) return myr_error("host list '%s': a name is longer than %d characters", whole, NAME_MAX_LEN);
            memcpy(head + base, num, (size_t)k + 1);
            if (expand_item(hl, close + 1, whole, head, base + (size_t)k, limit)) return -1;
        }
        r = comma ? comma + 1 : close;
    }
    return 0;
}

int hostlist_expand(HostList *hl, const char *expr, int limit) {
    if (limit <= 0) limit = DEFAULT_LIMIT;
    if (!expr) return myr_error("host list: none given");
    char *copy = strdup(expr);
    int depth = 0, rc = 0;
    char *start = copy;
    for (char *p = copy;; p++) {
        if (*p == '[') depth++;
        else if (*p == ']') depth--;
        if (depth < 0) { rc = myr_error("host list '%s': ']' without '['", expr); break; }
        if ((*p == ',' && depth == 0) || !*p) {
            char c = *p;
            *p = 0;
            while (*start == ' ') start++;
            char head[NAME_MAX_LEN + 1] = "";
            if (*start && expand_item(hl, start, expr, head, 0, limit)) { rc = -1; break; }
            if (!c) break;
            start = p + 1;
        }
    }
    free(copy);
    return rc;
}

/* ---------- compression ---------- */

typedef struct {
    const char *name;
    size_t plen;  /* prefix length (the name without its trailing digits) */
    int width;    /* digits when zero-padded, else 0 */
    long long num;
    int has_num, group, order;
} Parsed;

static int by_group_num(const void *a, const void *b) {
    const Parsed *x = a, *y = b;
    if (x->group != y->group) return x->group - y->group;
    return (x->num > y->num) - (x->num < y->num);
}

static int put(char *out, size_t cap, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int put(char *out, size_t cap, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out + *len, *len < cap ? cap - *len : 0, fmt, ap);
    va_end(ap);
    if (k < 0 || *len + (size_t)k >= cap) return -1;
    *len += (size_t)k;
    return 0;
}

int hostlist_compress(char *const *names, int n, char *out, size_t cap) {
    if (cap == 0) return -1;
    out[0] = 0;
    Parsed *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    int ngroups = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]), d = len;
        while (d > 0 && isdigit((unsigned char)names[i][d - 1])) d--;
        p[i].name = names[i], p[i].plen = d, p[i].order = i;
        p[i].has_num = d < len && len - d <= 18;
        if (!p[i].has_num) p[i].plen = len;
        else {
            p[i].num = strtoll(names[i] + d, NULL, 10);
            p[i].width = names[i][d] == '0' && len - d > 1 ? (int)(len - d) : 0;
        }
        /* same prefix and padding: one group (numbered in order of first appearance) */
        p[i].group = -1;
        for (int j = 0; j < i && p[i].group < 0; j++)
            if (p[j].has_num && p[i].has_num && p[j].plen == p[i].plen && p[j].width == p[i].width &&
                !strncmp(p[j].name, p[i].name, p[i].plen))
                p[i].group = p[j].group;
        if (p[i].group < 0) p[i].group = ngroups++;
    }
    qsort(p, (size_t)n, sizeof *p, by_group_num);
    size_t len = 0;
    int rc = 0;
    for (int i = 0; i < n && !rc;) {
        int j = i;
        while (j < n && p[j].group == p[i].group) j++;
        if (len) rc |= put(out, cap, &len, ",");
        if (!p[i].has_num) rc |= put(out, cap, &len, "%s", p[i].name);
        else if (j - i == 1) rc |= put(out, cap, &len, "%s", p[i].name);
        else {
            rc |= put(out, cap, &len, "%.*s[", (int)p[i].plen, p[i].name);
            for (int k = i; k < j && !rc;) {
                int e = k;
                while (e + 1 < j && p[e + 1].num <= p[e].num + 1) e++; /* duplicates fold too */
                rc |= put(out, cap, &len, "%s%0*lld", k > i ? "," : "", p[k].width, p[k].num);
                if (p[e].num != p[k].num) rc |= put(out, cap, &len, "-%0*lld", p[e].width, p[e].num);
                k = e + 1;
            }
            rc |= put(out, cap, &len, "]");
        }
        i = j;
    }
    free(p);
    return rc ? -1 : 0;
}
