/* args.h: strict parsing of command-line values. Each subcommand walks its own argv;
 * these helpers turn a flag's value into a number or die with a message naming the flag. */
#ifndef MYRIAD_UTIL_ARGS_H
#define MYRIAD_UTIL_ARGS_H

#include <stdint.h>

/* Returns argv[*i + 1] and advances *i; dies if the flag has no value. */
const char *args_value(int argc, char **argv, int *i);
/* Parse an integer / float / int64 value of `flag`; die with "--flag expects ..." on junk. */
int args_int(const char *flag, const char *value);
long long args_i64(const char *flag, const char *value);
double args_double(const char *flag, const char *value);
/* Convenience: value of the flag at argv[*i], parsed. */
int args_next_int(int argc, char **argv, int *i);
long long args_next_i64(int argc, char **argv, int *i);
double args_next_double(int argc, char **argv, int *i);

#endif
