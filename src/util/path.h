/* path.h: running programs: finding them on PATH, this binary's own path, argument vectors. */
#ifndef MYRIAD_UTIL_PATH_H
#define MYRIAD_UTIL_PATH_H

/* Full path of executable `name` on PATH (malloc'd), or NULL. */
char *path_find_program(const char *name);
/* This binary's own path (/proc/self/exe) into buf; 0, or -1 with myr_error(). */
int path_self(char *buf, unsigned long n);
/* A NULL-terminated argv of malloc'd strings: its words joined by spaces (malloc'd), and freeing it. */
char *argv_join(char **argv);
void argv_free(char **argv);

#endif
