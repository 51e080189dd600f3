/* path_check.h: checks that an output path can be written, made before the work that produces
 * it (a training run, a simulation), so that a bad path fails in the first second rather than at
 * the end. Nothing is created or changed by a check. */
#ifndef MYRIAD_IO_PATH_CHECK_H
#define MYRIAD_IO_PATH_CHECK_H

/* A file to be created or replaced at `path`: its directory exists and is writable, and `path`
 * is not a directory (nor an existing file without write permission). -1 + myr_error naming
 * `what` (e.g. "--log") and the reason. */
int path_check_file(const char *what, const char *path);
/* A directory to write into: it exists and is writable, or its nearest existing ancestor is a
 * writable directory (it will be created). -1 + myr_error otherwise. */
int path_check_dir(const char *what, const char *dir);
/* Drops trailing '/' from a user-given path in place ("out/" -> "out", "/" stays), so that paths
 * built from it and printed never read "out//step-00000010". Returns p. */
char *path_trim(char *p);
/* `a` joined with `b` by exactly one '/' (no "//" when a ends in '/'), into buf. */
const char *path_join(char *buf, unsigned long n, const char *a, const char *b);

#endif
