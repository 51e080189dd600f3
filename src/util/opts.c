/* opts.c: table-driven option parsing and --help (see opts.h). The one place where a flag's value
 * is turned into a number and checked against its range. */
#include "util/opts.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

Opt opt_given(Opt o, int *given) {
    o.given = given;
    return o;
}

Opt opt_alias(Opt o, const char *alias) {
    o.alias = alias;
    return o;
}

Opt opt_open_hi(Opt o) {
    o.open_hi = 1;
    return o;
}

static int is_flag_row(const Opt *o) { return o->kind >= OPT_KIND_SWITCH; }

const Opt *opts_find(const Opt *rows, const char *flag) {
    for (const Opt *o = rows; o->kind != OPT_KIND_END; o++)
        if (is_flag_row(o) && (!strcmp(o->name, flag) || (o->alias && !strcmp(o->alias, flag)))) return o;
    return NULL;
}

/* A bound as a person writes it: integers without a fraction, huge ones as "2^31 - 1" would be
 * noise, so anything at or beyond 1e15 reads as "no upper limit" and is left out. */
static void fmt_bound(char *buf, size_t n, double v) {
    if (v == floor(v) && fabs(v) < 1e15) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%g", v);
}

static int unbounded_hi(const Opt *o) { return o->hi >= 2147483647.0 || isinf(o->hi); }

void opts_describe_range(const Opt *o, char *buf, size_t n) {
    const char *what = o->kind == OPT_KIND_DOUBLE ? "a number" : "an integer";
    char lo[32], hi[32];
    fmt_bound(lo, sizeof lo, o->lo);
    fmt_bound(hi, sizeof hi, o->hi);
    if (unbounded_hi(o)) snprintf(buf, n, "%s %s %s", what, o->open_lo ? ">" : ">=", lo);
    else snprintf(buf, n, "%s in %s%s, %s%s", what, o->open_lo ? "(" : "[", lo, hi, o->open_hi ? ")" : "]");
}

static _Noreturn void die_cmd(const OptCommand *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void die_cmd(const OptCommand *cmd, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    myr_die("%s: %s", cmd->name, msg);
}

static int in_range(const Opt *o, double v) {
    if (o->open_lo ? !(v > o->lo) : !(v >= o->lo)) return 0;
    if (o->open_hi ? !(v < o->hi) : !(v <= o->hi)) return 0;
    return 1;
}

static void bad_range(const OptCommand *cmd, const Opt *o, const char *flag, const char *value) {
    char range[128];
    opts_describe_range(o, range, sizeof range);
    die_cmd(cmd, "%s %s is out of range: give %s", flag, value, range);
}

static void set_value(const OptCommand *cmd, const Opt *o, const char *flag, const char *value) {
    char *end;
    char range[128];
    switch (o->kind) {
    case OPT_KIND_INT:
    case OPT_KIND_I64:
    case OPT_KIND_LONG: {
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (end == value || *end) {
            opts_describe_range(o, range, sizeof range);
            die_cmd(cmd, "%s expects %s, got '%s'", flag, range, value);
        }
        if (errno || !in_range(o, (double)v)) bad_range(cmd, o, flag, value);
        if (o->kind == OPT_KIND_INT) *(int *)o->dst = (int)v;
        else if (o->kind == OPT_KIND_LONG) *(long *)o->dst = (long)v;
        else *(long long *)o->dst = v;
        break;
    }
    case OPT_KIND_DOUBLE: {
        errno = 0;
        double v = strtod(value, &end);
        if (end == value || *end || isnan(v)) {
            opts_describe_range(o, range, sizeof range);
            die_cmd(cmd, "%s expects %s, got '%s'", flag, range, value);
        }
        if (errno || !isfinite(v) || !in_range(o, v)) bad_range(cmd, o, flag, value);
        *(double *)o->dst = v;
        break;
    }
    case OPT_KIND_STR:
        if (!*value) die_cmd(cmd, "%s needs a non-empty value", flag);
        *(const char **)o->dst = value;
        break;
    case OPT_KIND_CHOICE: {
        for (int k = 0; o->choices[k]; k++)
            if (!strcmp(o->choices[k], value)) {
                *(int *)o->dst = o->values ? o->values[k] : k;
                return;
            }
        char list[256] = "";
        for (int k = 0; o->choices[k]; k++) {
            size_t len = strlen(list);
            snprintf(list + len, sizeof list - len, "%s%s", k ? (o->choices[k + 1] ? ", " : " or ") : "",
                     o->choices[k]);
        }
        die_cmd(cmd, "%s '%s' is not known (use %s)", flag, value, list);
    }
    case OPT_KIND_CALL:
        if (o->call(o->dst, value)) die_cmd(cmd, "%s", myr_last_error());
        break;
    default: break;
    }
}

int opts_apply(const OptCommand *cmd, int argc, char **argv, int *i) {
    const char *flag = argv[*i];
    const Opt *o = opts_find(cmd->rows, flag);
    if (!o) return 0;
    if (o->given) *o->given = 1;
    if (o->kind == OPT_KIND_SWITCH) {
        *(int *)o->dst = o->set;
        return 1;
    }
    int nargs = o->kind == OPT_KIND_CALL && o->nargs > 1 ? o->nargs : 1;
    if (*i + nargs >= argc)
        die_cmd(cmd, "%s needs %s%s", flag, nargs > 1 ? "values: " : "a value: ", o->meta ? o->meta : "VALUE");
    if (nargs == 2) { /* two values (plan --compare A B): joined by a tab for the callback */
        static char joined[8192];
        snprintf(joined, sizeof joined, "%s\t%s", argv[*i + 1], argv[*i + 2]);
        *i += 2;
        set_value(cmd, o, flag, joined);
        return 1;
    }
    *i += 1;
    set_value(cmd, o, flag, argv[*i]);
    return 1;
}

int opts_parse(const OptCommand *cmd, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) break;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            opts_help(cmd, stdout);
            exit(0);
        }
        const Opt *o = opts_find(cmd->rows, argv[i]);
        if (cmd->stop_at_positional && argv[i][0] != '-') break;
        if (o && o->kind != OPT_KIND_SWITCH) i += o->kind == OPT_KIND_CALL && o->nargs > 1 ? o->nargs : 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--") && cmd->stop_at_positional) return i + 1;
        if (opts_apply(cmd, argc, argv, &i)) continue;
        if (a[0] == '-' && a[1]) {
            char hint[160] = "";
            if (!strncmp(a, "--", 2) && strchr(a, '=')) snprintf(hint, sizeof hint, "; give the value after a space");
            die_cmd(cmd, "unknown option '%s'%s (see myriad %s --help)", a, hint, cmd->name);
        }
        if (cmd->stop_at_positional) return i;
        if (!cmd->positional) die_cmd(cmd, "unexpected argument '%s' (see myriad %s --help)", a, cmd->name);
        if (cmd->positional(cmd->ctx, a)) die_cmd(cmd, "%s", myr_last_error());
    }
    return argc;
}

/* "  --name, -a META" padded to the help column; long names push the help to the next line. */
void opts_help(const OptCommand *cmd, FILE *out) {
    enum { COL = 28 };
    if (cmd->usage) fprintf(out, "%s\n", cmd->usage);
    for (const Opt *o = cmd->rows; o->kind != OPT_KIND_END; o++) {
        if (o->kind == OPT_KIND_SECTION) {
            fprintf(out, "%s\n", o->name);
            continue;
        }
        if (o->kind == OPT_KIND_TEXT) {
            fprintf(out, "  %s\n", o->name);
            continue;
        }
        char left[160];
        int n = snprintf(left, sizeof left, "  %s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "", o->name,
                         o->meta ? " " : "", o->meta ? o->meta : "");
        fputs(left, out);
        const char *h = o->help ? o->help : "";
        if (n >= COL - 1) fprintf(out, "\n%*s", COL, "");
        else fprintf(out, "%*s", COL - n, "");
        for (const char *p = h; *p; p++) {
            fputc(*p, out);
            if (*p == '\n' && p[1]) fprintf(out, "%*s", COL, "");
        }
        fputc('\n', out);
    }
    if (cmd->footer) fputs(cmd->footer, out);
}
