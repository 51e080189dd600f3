/* mpi_noise.h: mpirun's (and srun's) own messages kept out of the terminal. When a rank exits
 * non-zero, Open MPI follows its one-line error with ~10 lines of boxes ("Primary job terminated
 * normally, but 1 process returned a non-zero exit code ...", "mpirun detected that one or more
 * processes exited ..."), and a line every rank printed alike appears once per rank. A filter
 * process between the launcher (mpirun/srun) and this process's stderr passes the ranks' lines
 * through at once and writes the launcher's own ones (its dashed boxes, lines starting "mpirun"
 * or "srun:", "[host:pid]" reports) and repeated "myriad: " lines to a log file, named in one line
 * at the end. The file is created only when something goes to it. */
#ifndef MYRIAD_LAUNCH_MPI_NOISE_H
#define MYRIAD_LAUNCH_MPI_NOISE_H

#include <stddef.h>

/* Start the filter (once per `myriad run`): returns the descriptor the launcher child's stderr
 * should be (dup2 it onto 2 in the child), or -1 when no filter could be started (then the child
 * writes to stderr as it is). log_path: where the messages go ("" or NULL: $TMPDIR or /tmp,
 * myriad-run-<pid>.log). */
int mpi_noise_start(const char *log_path);
/* Close the filter's input and wait (up to a few seconds) for it to say where the log is. */
void mpi_noise_finish(void);
/* Pure classification, for tests: is `line` (without its newline) launcher noise? `in_box`
 * carries the state of a dashed box across lines; `prev_noise` whether the previous line was. */
int mpi_noise_line(const char *line, int *in_box, int prev_noise);

#endif
