/* mem_checkpoint.h: in-memory checkpoints of the training state (--mem-ckpt-every N).
 * Every N steps each rank packs everything it holds into a copy on its host's shared memory
 * (ckpt/memckpt.h: outlives the process) and sends the same bytes to a buddy rank on another
 * host, which keeps them as a replica; the transfer runs during the next step and is committed
 * at the next save. The copy itself is made by a thread during the next step's forward and
 * backward, which only read the state, and committed before that step's update. A restart in the same layout restores from the newest step every rank can
 * get (its own copy, else a replica fetched over MPI), each copy verified by its CRC-32C, a bad
 * one replaced by another holder's; when none is complete the caller falls back to disk.
 * Resharding stays a disk feature: copies of another layout are ignored. */
#ifndef MYRIAD_TRAIN_MEM_CHECKPOINT_H
#define MYRIAD_TRAIN_MEM_CHECKPOINT_H

#include "train/checkpoint.h"

typedef struct MemCkpt MemCkpt;

/* Collective over st->world. job_id names the job (copies of other jobs are never touched);
 * layout_meta: everything a copy must match to be restored (model, layout, batch...); fresh:
 * this run starts from scratch, so stale copies of the same job are deleted. note/n: what a
 * person should know (e.g. all ranks on one host: no replicas), "" otherwise. */
int mem_ckpt_init(MemCkpt **out, const TrainState *st, const char *job_id, const char *layout_meta, int fresh,
                  char *note, size_t n);
/* Save step `step`: finishes the previous copy and replica exchange, waits (a barrier, with
 * replicas only) until every rank has committed the replicas of that previous save, then starts
 * a thread that packs the state into a new copy while the next step computes. Call after the
 * update. So some step always has every copy and every replica: any one host can be lost. */
int mem_ckpt_save(MemCkpt *m, long step);
/* Wait for the copy being packed, commit it and start sending its replica (collective: pairs
 * with the buddy's). Must run before the next optimizer update (it is the Trainer's
 * before_update hook: mem_ckpt_before_update), so the copy is exactly the saved step. */
int mem_ckpt_sync(MemCkpt *m);
void mem_ckpt_before_update(void *mem); /* dies with the reason on failure */
/* Wait until every rank has committed the copy synced last (a barrier entered at the commit,
 * normally long complete). Call before reporting a step: a reported step s then always has a
 * complete copy of s - 1 on all ranks, so a failure recomputes at most one reported step. */
int mem_ckpt_confirm(MemCkpt *m);
/* Restore the newest step >= min_step that every rank can get. Returns 1 and sets *step when
 * restored, 0 when no complete in-memory checkpoint exists, -1 on error. Same on every rank.
 * desc: e.g. "memory (own copies 3, replicas 1; rejected 1 corrupt copy)". used_replica: a
 * rank's state came from another rank's replica; rejected: copies that failed verification. */
int mem_ckpt_restore(MemCkpt *m, long min_step, long *step, int *used_replica, int *rejected, char *desc, size_t n);
/* What in-memory copies of this job exist in this layout (collective): the steps any rank holds
 * (oldest..newest, how many copies), the newest step complete on every rank (own copy or a
 * replica; -1 none) and, when the newest is not, a rank without it; copies of another layout or
 * world size (foreign, foreign_world: what a same-layout restore cannot use); the settings of the
 * run that wrote them ("" when unknown); the job's directory. */
typedef struct {
    long newest, oldest, complete;
    int copies, missing_rank, foreign, foreign_world;
    char meta[2048];
    char dir[4096];
} MemSurvey;
int mem_ckpt_survey(MemCkpt *m, MemSurvey *sv);
/* The name of the job whose copies these are: $MYRIAD_JOB_ID, else the absolute --save DIR. */
void mem_ckpt_job_name(const char *save_dir, char *job, size_t n);
/* Whether this host holds in-memory copies of the job of --save DIR (a resume looks at them). */
int mem_ckpt_job_has_copies(const char *save_dir);
/* After a restart resumed at `step` (from memory or disk): take this rank's committed copies of
 * steps <= step back as the slots the next copies are written over (their memory is already
 * there: no new shared memory to create and touch, seconds per GB on some machines) and delete
 * its copies of later steps (not complete on every rank; rewritten as training passes them).
 * Returns the number of copies taken back. Call before the first mem_ckpt_save. */
int mem_ckpt_adopt(MemCkpt *m, long step);
/* Finish the exchange in flight; job_done: the run completed, delete this job's copies. Frees m. */
int mem_ckpt_finish(MemCkpt *m, int job_done);
/* The newest step whose copy is known committed on every rank (restored, or confirmed), -1 when
 * none yet; reported to the launcher (the age of the newest in-memory copy). m may be NULL. */
long mem_ckpt_complete_step(const MemCkpt *m);
/* Seconds spent in mem_ckpt_save (packing, checksums, commits, waiting for replicas). */
double mem_ckpt_seconds(const MemCkpt *m);

#endif
