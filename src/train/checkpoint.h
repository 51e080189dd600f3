/* checkpoint.h: training state <-> sharded checkpoints (src/ckpt/). Every rank writes the
 * pieces of the global tensors it owns (parameters "param/NAME", AdamW moments "adam_m/NAME",
 * "adam_v/NAME"), described as boxes and ranges of the whole tensors, so a checkpoint saved in
 * one layout (tp, pp, dp, zero) loads into any other: each rank reads exactly the slices it
 * holds. Replicated copies are written once (tensor-parallel rank 0, data-parallel rank 0). */
#ifndef MYRIAD_TRAIN_CHECKPOINT_H
#define MYRIAD_TRAIN_CHECKPOINT_H

#include "ckpt/ckpt.h"
#include "model/model.h"
#include "optim/adamw.h"
#include "parallel/data_parallel.h"

typedef struct {
    Model *chunks;     /* [nchunks] this rank's model objects */
    DataParallel *dp;  /* [nchunks], or NULL in a single process */
    AdamW *opt;        /* single process: the optimizer state of chunks[0] */
    int nchunks;
    Comm *world;       /* NULL in a single process */
    /* pinned host mirrors of the device buffers the checkpoint code reads and writes (used when
     * host code may not touch device memory: a GPU); from train_state_mirrors(), or NULL when
     * the buffers are host-accessible (tests on the CPU) */
    struct StateMirrors *mirrors;
} TrainState;

/* The mirrors for a TrainState (free with train_state_mirrors_free). */
struct StateMirrors *train_state_mirrors(void);
void train_state_mirrors_free(struct StateMirrors *m);

/* Save step `step` into dir (collective). async: snapshot now, write in the background (the
 * previous async save is finished first). meta_json: the caller's state (config, layout, seed). */
int train_ckpt_save(const TrainState *st, const char *dir, long step, int keep, int async, const char *meta_json);
/* Async saves will follow: prepare their snapshot memory in the background (ckpt_async_reserve). */
void train_ckpt_reserve_async(const TrainState *st);
/* Load parameters and optimizer state from an open checkpoint into this rank's pieces
 * (resharding as needed); every tensor is checked against the model's shapes first. */
int train_ckpt_load(const TrainState *st, Ckpt *c, long step);
/* Bytes of parameters and optimizer state this rank holds (what a load should read). */
double train_ckpt_own_bytes(const TrainState *st);

/* Every parameter piece this rank holds (its pipeline chunks' tensor-parallel slices, or its
 * ZeRO-3 shard), filled box by box from fn: the seeded initialization (model/weight_init.h) or a
 * Hugging Face checkpoint (model/hf_weights.h). Nothing larger than the rank's own state exists. */
int train_state_fill_params(const TrainState *st, TensorBoxFn fn, void *ctx);
/* The parameter pieces this rank writes (replicas once over the job, tied copies skipped),
 * handed to fn for reading: what an export writes from this rank. */
int train_state_walk_params(const TrainState *st, TensorBoxFn fn, void *ctx);

/* Resume from disk (collective): load the newest valid checkpoint of path (`first`: already
 * opened, or NULL); a checksum failure on any rank makes every rank fall back to the next older
 * one, saying so. --resume auto with no checkpoint at all starts from step 0. Prints (rank0)
 * where it resumed and the bytes read per rank; appends the launcher events ("restored-from-
 * disk", "disk-fallback", "started-from-scratch") to events. Returns the step, -1 on error. */
long train_resume_disk(const TrainState *st, const char *path, int is_auto, Ckpt *first, int rank0,
                       const char **events, int *nevents);

/* In-memory checkpoints (same layout only): every piece this rank owns back to back in a fixed
 * order (train_state_bytes in all): all it holds, but parameters replicated over data parallelism
 * by ZeRO 1/2 only in its own ZeRO pieces. unpack restores them and all-gathers those parameters
 * (collective over each data-parallel group). */
size_t train_state_bytes(const TrainState *st);
int train_state_unpack(const TrainState *st, const void *src, long step);
/* The copy's bytes as runs of the live state, in order (adjacent runs merged), for copying in
 * parallel pieces. Returns the count (*out: malloc'd, the caller frees), -1 on error. */
typedef struct {
    const unsigned char *src;
    size_t bytes;
} StateRun;
int train_state_runs(const TrainState *st, StateRun **out);

#endif
