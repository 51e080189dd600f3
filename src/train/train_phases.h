/* train_phases.h: how long a run's start-up phases took (wall clock): MPI init, the setup (the
 * device, the layout check and mesh, the model, data and parallelism) and the resume (restoring a
 * checkpoint). Marked by train_cmd.c around those phases (train_layout.c ends MPI init); train_loop.c sends them to `myriad run` with its first heartbeat
 * (hb_start_info), where they become causes of the run's time ledger (docs/LAUNCHER.md). */
#ifndef MYRIAD_TRAIN_TRAIN_PHASES_H
#define MYRIAD_TRAIN_TRAIN_PHASES_H

enum { TRAIN_PHASE_MPI, TRAIN_PHASE_SETUP, TRAIN_PHASE_RESUME, TRAIN_PHASES };

void train_phase_begin(int phase);
void train_phase_end(int phase);
double train_phase_seconds(int phase);  /* -1: not measured */
double train_phase_end_time(int phase); /* train_now_s() at its end; -1: not measured */

#endif
