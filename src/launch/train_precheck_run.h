/* train_precheck_run.h: run `myriad train` in its pre-check mode (MYRIAD_PRECHECK_WORLD,
 * src/train/train_precheck.c) from the launcher: the trainer checks its command line against a
 * world of N ranks in one process, before mpirun starts any. Used by `myriad run` before every
 * launch (run_cmd.c) and by --elastic for every size it considers (elastic.c). */
#ifndef MYRIAD_LAUNCH_TRAIN_PRECHECK_RUN_H
#define MYRIAD_LAUNCH_TRAIN_PRECHECK_RUN_H

#include <stddef.h>

/* Runs argv (argv[0] a path; NULL-terminated) with MYRIAD_PRECHECK_WORLD=world, and
 * MYRIAD_PRECHECK_LAYOUT=1 when print_layout (the trainer then prints the layout it derived).
 * Its stderr, and its stdout when capture_stdout (else /dev/null), go to out (at most cap - 1
 * bytes kept, NUL-terminated). Returns its exit status (128 + signal when killed; 127 when it
 * could not be executed), or -1 with myr_error() when it could not be started. */
int train_precheck_run(char *const argv[], int world, int print_layout, int capture_stdout, char *out, size_t cap);

#endif
