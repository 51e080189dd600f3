/* error.h: how myriad reports failures.
 * Library functions return 0 on success and -1 on failure after recording a one-line,
 * human-readable reason with myr_error(); callers either propagate (-1) or, at the CLI
 * boundary, print it with myr_die_last(). The message names what was wrong and the fix. */
#ifndef MYRIAD_UTIL_ERROR_H
#define MYRIAD_UTIL_ERROR_H

#include <stdarg.h>
#include <stdnoreturn.h>

/* Exit codes beyond 0 (success) and 1 (an error): a run that stopped itself on a non-finite loss,
 * gradient or weight (`myriad train`, `myriad eval`), which restarting would not cure. */
enum { MYRIAD_EXIT_NONFINITE = 3 };

/* Record the reason for the current failure (printf-style); always returns -1. */
int myr_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The last recorded reason ("" if none). Thread-local. */
const char *myr_last_error(void);
/* Print "myriad: <fmt>" to stderr and exit(1). For the CLI layer only. */
noreturn void myr_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with a va_list (for wrappers that take their own arguments). */
noreturn void myr_vdie(const char *fmt, va_list ap);
/* While set, myr_die prints nothing (it waits 2 s, then exits 1): for the ranks other than 0 of an
 * MPI job while they check what every rank checks alike (the command line), so that one message,
 * rank 0's, is printed instead of one per rank. */
void myr_die_quietly(int quiet);
/* Print the last recorded error and exit(1). */
noreturn void myr_die_last(void);

#endif
