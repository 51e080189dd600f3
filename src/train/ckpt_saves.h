/* ckpt_saves.h: the disk checkpoints of a training run, and what happens when one cannot be
 * written (a full disk, a directory gone or read-only). A failed periodic save leaves nothing
 * behind (src/ckpt removes the step directory it made), keeps the last good checkpoint, and the
 * run goes on, saying so each time and trying again at the next interval. The checkpoint a run
 * ends with (the last step, --stop-after, a stop signal) is written synchronously; if it cannot go
 * to --save DIR it goes to a fallback directory (./myriad-rescue-ckpt-<time>-<pid>/, else under
 * $TMPDIR or /tmp), as the final export does, and the run exits 1. All collective: every rank
 * takes the same decisions (a save's result is agreed by the commit protocol). */
#ifndef MYRIAD_TRAIN_CKPT_SAVES_H
#define MYRIAD_TRAIN_CKPT_SAVES_H

#include "train/train_job.h"

/* The async save in flight, if finished: committed, or its failure said (not fatal). */
void ckpt_saves_poll(TrainJob *j);
/* Save step `step` (1-based) to --save DIR: async for periodic saves, sync when `final`. */
void ckpt_saves_save(TrainJob *j, long step, int final);
/* The run's checkpoint status in one line for the end of the run ("" when every save worked). */
void ckpt_saves_summary(const TrainJob *j, char *buf, size_t n);

#endif
