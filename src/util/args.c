/* args.c: strict number parsing for CLI flags (no silent atoi). */
#include "util/args.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "util/error.h"

const char *args_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) myr_die("%s needs a value", argv[*i]);
    *i += 1;
    return argv[*i];
}

long long args_i64(const char *flag, const char *value) {
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (errno || end == value || *end) myr_die("%s expects an integer, got '%s'", flag, value);
    return v;
}

int args_int(const char *flag, const char *value) {
    long long v = args_i64(flag, value);
    if (v < INT_MIN || v > INT_MAX) myr_die("%s: %s is out of range", flag, value);
    return (int)v;
}

double args_double(const char *flag, const char *value) {
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (errno || end == value || *end || !isfinite(v))
        myr_die("%s expects a number, got '%s'", flag, value);
    return v;
}

int args_next_int(int argc, char **argv, int *i) {
    const char *flag = argv[*i];
    return args_int(flag, args_value(argc, argv, i));
}
long long args_next_i64(int argc, char **argv, int *i) {
    const char *flag = argv[*i];
    return args_i64(flag, args_value(argc, argv, i));
}
double args_next_double(int argc, char **argv, int *i) {
    const char *flag = argv[*i];
    return args_double(flag, args_value(argc, argv, i));
}
