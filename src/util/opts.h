/* opts.h: a command's options as one table. Each row names a flag, where its value goes, the
 * range a number must lie in and one line of help; the same rows parse the command line (an
 * unknown flag, a missing value, junk or an out-of-range number is refused with a message that
 * gives the range), and print --help. A flag therefore cannot be accepted without being listed,
 * nor listed without being accepted (tests/test_cli_help.sh checks every command).
 *
 * Adopting it in a command:
 *     int batch = 0; const char *out = NULL; int quiet = 0;
 *     const Opt rows[] = {
 *         OPT_SECTION("data:"),
 *         OPT_INT("--batch", "B", &batch, 1, INT_MAX, "sequences per step"),
 *         OPT_STR("--out", "DIR", &out, "where the result goes"),
 *         OPT_SWITCH("--quiet", &quiet, "print nothing"),
 *         OPT_END};
 *     OptCommand cmd = {"mycmd", "usage: myriad mycmd --batch B [options]", rows};
 *     opts_parse(&cmd, argc, argv);    (argv[0] is the command's name; --help prints and exits 0)
 * Defaults are whatever the variables hold before the call; a row's `given` (OPT_GIVEN) records
 * whether the flag appeared. Values that need their own parser (lists, "N|auto") use OPT_CALL. */
#ifndef MYRIAD_UTIL_OPTS_H
#define MYRIAD_UTIL_OPTS_H

#include <stdio.h>

typedef enum {
    OPT_KIND_END = 0,
    OPT_KIND_SECTION, /* a heading line in --help */
    OPT_KIND_TEXT,    /* a free line of --help */
    OPT_KIND_SWITCH,  /* no value: *(int *)dst = set */
    OPT_KIND_INT,     /* int, range [lo, hi] */
    OPT_KIND_I64,     /* long long, range [lo, hi] */
    OPT_KIND_LONG,    /* long, range [lo, hi] */
    OPT_KIND_DOUBLE,  /* finite double, range [lo, hi] (open_lo / open_hi exclude the bound) */
    OPT_KIND_STR,     /* const char * (points into argv) */
    OPT_KIND_CHOICE,  /* one of choices[]: *(int *)dst = values[k] (or k when values is NULL) */
    OPT_KIND_CALL,    /* call(dst, value): 0, or -1 with a reason (myr_error); nargs values */
} OptKind;

typedef struct {
    OptKind kind;
    const char *name;  /* "--batch" (SECTION / TEXT: the line) */
    const char *alias; /* a short form ("-n") or NULL */
    const char *meta;  /* the value's placeholder in --help ("B", "FILE"); NULL for a switch */
    void *dst;
    double lo, hi;
    int open_lo, open_hi;
    const char *const *choices; /* NULL-terminated */
    const int *values;
    int (*call)(void *dst, const char *value);
    int nargs; /* OPT_KIND_CALL: values taken (default 1; 2 passes "A\0B" joined by a tab) */
    int set;   /* OPT_KIND_SWITCH: the value stored */
    int *given;
    const char *help; /* may contain '\n' for continuation lines */
} Opt;

#define OPT_END {.kind = OPT_KIND_END}
#define OPT_SECTION(text) {.kind = OPT_KIND_SECTION, .name = (text)}
#define OPT_TEXT(text) {.kind = OPT_KIND_TEXT, .name = (text)}
#define OPT_SWITCH(n, d, h) {.kind = OPT_KIND_SWITCH, .name = (n), .dst = (d), .set = 1, .help = (h)}
#define OPT_SWITCH_TO(n, d, v, h) {.kind = OPT_KIND_SWITCH, .name = (n), .dst = (d), .set = (v), .help = (h)}
#define OPT_INT(n, m, d, l, u, h) {.kind = OPT_KIND_INT, .name = (n), .meta = (m), .dst = (d), .lo = (l), .hi = (u), .help = (h)}
#define OPT_I64(n, m, d, l, u, h) {.kind = OPT_KIND_I64, .name = (n), .meta = (m), .dst = (d), .lo = (l), .hi = (u), .help = (h)}
#define OPT_LONG(n, m, d, l, u, h) {.kind = OPT_KIND_LONG, .name = (n), .meta = (m), .dst = (d), .lo = (l), .hi = (u), .help = (h)}
#define OPT_DOUBLE(n, m, d, l, u, h) {.kind = OPT_KIND_DOUBLE, .name = (n), .meta = (m), .dst = (d), .lo = (l), .hi = (u), .help = (h)}
/* a double that must be > 0 */
#define OPT_POSITIVE(n, m, d, u, h) {.kind = OPT_KIND_DOUBLE, .name = (n), .meta = (m), .dst = (d), .lo = 0, .open_lo = 1, .hi = (u), .help = (h)}
#define OPT_STR(n, m, d, h) {.kind = OPT_KIND_STR, .name = (n), .meta = (m), .dst = (d), .help = (h)}
#define OPT_CHOICE(n, m, d, ch, h) {.kind = OPT_KIND_CHOICE, .name = (n), .meta = (m), .dst = (d), .choices = (ch), .help = (h)}
#define OPT_CHOICE_V(n, m, d, ch, v, h) {.kind = OPT_KIND_CHOICE, .name = (n), .meta = (m), .dst = (d), .choices = (ch), .values = (v), .help = (h)}
#define OPT_CALL(n, m, d, fn, h) {.kind = OPT_KIND_CALL, .name = (n), .meta = (m), .dst = (d), .call = (fn), .nargs = 1, .help = (h)}
#define OPT_CALL2(n, m, d, fn, h) {.kind = OPT_KIND_CALL, .name = (n), .meta = (m), .dst = (d), .call = (fn), .nargs = 2, .help = (h)}

/* Row modifiers, applied to a row built by the macros above (C11 compound literal style):
 *   OPT_GIVEN(OPT_INT(...), &flag)  sets flag = 1 whenever the option appears
 *   OPT_ALIAS(OPT_INT(...), "-n")   also accepts the short form */
Opt opt_given(Opt o, int *given);
Opt opt_alias(Opt o, const char *alias);
Opt opt_open_hi(Opt o); /* the upper bound is excluded: [lo, hi) */
#define OPT_GIVEN(row, g) opt_given((Opt)row, (g))
#define OPT_ALIAS(row, a) opt_alias((Opt)row, (a))
#define OPT_BELOW(row) opt_open_hi((Opt)row)

typedef struct {
    const char *name;   /* "train", "sched simulate": named in error messages */
    const char *usage;  /* the first line(s) of --help, without a trailing newline */
    const Opt *rows;    /* ends with OPT_END */
    const char *footer; /* printed after the options, or NULL */
    /* positional arguments (in order); NULL: none accepted. Returns 0, or -1 with a reason. */
    int (*positional)(void *ctx, const char *arg);
    void *ctx;
    int stop_at_positional; /* 1: the first positional argument ends parsing (opts_parse returns its index) */
} OptCommand;

/* Parses argv[1..argc). --help / -h prints opts_help to stdout and exits 0; anything wrong dies
 * with "myriad: <name>: <what>" (exit 1). Returns argc, or with stop_at_positional the index of
 * the first positional argument (or of the argument after "--"). */
int opts_parse(const OptCommand *cmd, int argc, char **argv);
/* Applies the option at argv[*i] (and its values, advancing *i). Returns 1 if it was one of the
 * rows, 0 if the name is unknown; dies on a bad value. For commands that read options from
 * elsewhere too (train's --config file). */
int opts_apply(const OptCommand *cmd, int argc, char **argv, int *i);
/* Looks a flag up: its row, or NULL. */
const Opt *opts_find(const Opt *rows, const char *flag);
/* The help text: usage, every row (sections, flags with their placeholders and help), footer. */
void opts_help(const OptCommand *cmd, FILE *out);
/* "an integer in [1, 64]", "a number > 0", ...: the range of a numeric row, for messages. */
void opts_describe_range(const Opt *o, char *buf, size_t n);

#endif
