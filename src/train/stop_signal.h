/* stop_signal.h: SIGTERM, SIGUSR1 or SIGUSR2 during training (Slurm's warning before the time limit,
 * scancel, `myriad run` stopping a job) asks for a checkpoint and a clean stop: every rank finishes
 * the step it is in, all of them agree on the step (a one-value all-reduce, so they stop together),
 * save a checkpoint of it and exit with 75 (resume with --resume auto). The first SIGINT (Ctrl-C)
 * does the same and exits 130; a second one exits at once (130), saying what it loses (the text
 * the loop keeps current with train_stop_set_lost). */
#ifndef MYRIAD_TRAIN_STOP_SIGNAL_H
#define MYRIAD_TRAIN_STOP_SIGNAL_H

#include "comm/comm.h"

#define TRAIN_EXIT_STOPPED 75 /* EX_TEMPFAIL: checkpointed on a signal, run again to continue */

/* Catch the stop signals (they only set a flag; a second SIGINT exits). */
void train_stop_install(void);
/* What exiting right now would lose, said by a second Ctrl-C ("the 12 steps since ..."). */
void train_stop_set_lost(const char *what);
/* The exit code after stopping on `sig`: 130 for SIGINT (interrupted by the user), else 75. */
int train_stop_exit_code(int sig);
/* Collective over world (NULL: this process alone): the signal any rank received, 0 if none. */
int train_stop_agreed(Comm *world);

#endif
