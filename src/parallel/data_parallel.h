/* data_parallel.h: data parallelism with ZeRO sharding over a comm group.
 *
 * Every rank holds the same model and trains on its contiguous slice of the global batch; the
 * gradients are averaged over the group. The parameter layout is cut into buckets of whole
 * units (params.h): in reverse layer order, each bucket's reduction starts as soon as backward
 * has finished its lowest unit, while backward goes on with the layers below (overlap), and
 * Open MPI is progressed from the model's unit hooks. Buckets split evenly over the N ranks:
 * rank r owns piece r of every bucket; its ZeRO shard is the union of its pieces.
 *   zero 0: all-reduce; full AdamW on every rank.
 *   zero 1: reduce-scatter; AdamW state only for the own pieces; all-gather parameters.
 *   zero 2: as 1, and gradients live only in transient per-unit buffers and the own shard
 *           (buckets are single units; each micro-batch's gradients are reduced as they finish).
 *   zero 3: as 2, and parameters too are sharded: each unit is all-gathered just before its
 *           forward and its backward and freed after (a tied embedding stays gathered for the
 *           step, since the head uses it).
 * The clip norm is the true global norm in every stage (sums of squares exchanged exactly).
 *
 * Mixture of experts: the units holding routed experts (params.h) form buckets of their own,
 * reduced over the expert-data-parallel group (the ranks holding the same experts) instead of the
 * whole group; with expert parallelism each expert's gradient already sums the tokens of all
 * expert-parallel ranks, so the average over the expert group is scaled by 1 / ep. */
#ifndef MYRIAD_PARALLEL_DATA_PARALLEL_H
#define MYRIAD_PARALLEL_DATA_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "model/model.h"
#include "optim/adamw.h"
#include "parallel/device_comm.h"

typedef struct {
    int zero;          /* 0..3 */
    double bucket_mb;  /* bucket size for zero 0/1 (MiB of fp32 gradients) */
    CommDtype grad_dtype;
    int overlap;       /* 1: reduce during backward; 0: after backward */
    int max_inflight;  /* reductions in flight at once (0: DP_MAX_INFLIGHT): MPI's nonblocking
                          collectives hold a temporary as large as their message, so with every
                          bucket in flight the library held about half the gradients again */
} DpOptions;

enum { DP_MAX_INFLIGHT = 2 };

typedef struct {
    size_t lo, hi;        /* element range (whole units, padded: (hi - lo) % N == 0) */
    size_t piece;         /* (hi - lo) / N */
    int unit_lo, unit_hi; /* units [unit_lo, unit_hi] */
    DevRequest *req;      /* reduction in flight */
    int pending;          /* launched, not yet finished */
    int deferred;         /* reduced only in dp_finish_backward, once per step (see dp_defer_unit) */
    int expert;           /* routed experts' unit: reduced over the expert group */
    Comm *group;          /* the group it is reduced over, this rank's place and its size */
    int rank, size;
    uint16_t *bf16;       /* wire buffer (device) when gradients travel as bf16 */
    real *grad;           /* zero >= 2: transient gradient buffer of the bucket */
    long launched;        /* launch order of the reduction in flight (the oldest is waited for first) */
} DpBucket;

typedef struct {
    Comm *group;
    int rank, size;
    Comm *expert_group;  /* == group without expert parallelism */
    double expert_scale; /* 1 / ep */
    DpOptions o;
    Model *m;
    ModelHooks hooks;
    int nbuckets;
    DpBucket *b;
    int *bucket_of_unit;  /* [units] */
    int last_micro;       /* the running backward ends gradient accumulation */
    long launches;        /* reductions launched so far (their order) */
    real *param_shard;    /* zero 3: own pieces, bucket by bucket */
    act **gathered_act;   /* zero 3 in bf16: [units] each gathered unit's working copy, or NULL */
    real *grad_shard;     /* zero >= 2: own pieces' averaged gradients */
    size_t shard_elems;
    size_t *shard_off;    /* [nbuckets]: offset of bucket b's piece in the shard arrays */
    real **gathered;      /* zero 3: [units] gathered parameters of a unit, or NULL */
    AdamW *opt;           /* [nbuckets] own pieces (zero >= 1), or [1] whole model (zero 0) */
    int nopt;
    double exposed_comm_s; /* time spent waiting for reductions after backward (last step) */
    const double *tensor_weight; /* [table.count] weight of each tensor's squares in the norm
                                    (1/tp for tensors replicated across tensor parallelism), or NULL */
    size_t transient_bytes, peak_transient_bytes;
} DataParallel;

/* Set up over `group` for model m (created with model_create_aligned(..., group size)).
 * Zero >= 2 frees the model's full gradient buffer, zero 3 its full parameters. Collective. */
int dp_create(DataParallel *dp, Comm *group, Model *m, const DpOptions *o);
/* Bytes of the reductions that can be in flight at once for a model of table t (its max_inflight
 * largest buckets): the communication library's temporaries are about that large. */
double dp_inflight_bytes(const ParamTable *t, const DpOptions *o);
/* With expert parallelism of size ep inside `group`: routed experts are reduced over expert_group
 * (the ranks holding the same experts). ZeRO 0 and 1 only. */
int dp_create_ep(DataParallel *dp, Comm *group, Comm *expert_group, int ep, Model *m, const DpOptions *o);
void dp_destroy(DataParallel *dp);
/* Step protocol, called by the trainer: begin (zero gradients), then for every micro-batch
 * dp_set_last_micro + forward + backward, then dp_finish_backward (waits for reductions). */
void dp_begin_step(DataParallel *dp);
void dp_set_last_micro(DataParallel *dp, int last);
/* Reduce the bucket holding `unit` only in dp_finish_backward, after every micro-batch, and
 * never from the backward hooks: for gradients that need another sum first (a tied embedding
 * split over pipeline stages). Its gradients accumulate locally over the micro-batches. */
void dp_defer_unit(DataParallel *dp, int unit);
int dp_finish_backward(DataParallel *dp);
/* Sum of squares of the averaged gradients over the whole model (exact, same on every rank). */
double dp_grad_sum_squares(DataParallel *dp);
/* Testing (fault injection): sets one element of this rank's own reduced gradient piece that the
 * norm counts to NaN. Returns 1, or 0 when the rank owns no counted element. */
int dp_poison_grad(DataParallel *dp);
void dp_scale_grads(DataParallel *dp, real s);
/* AdamW on the own shard, then (zero 1/2) all-gather parameters. */
int dp_optimizer_step(DataParallel *dp, const AdamWConfig *cfg, double lr);
/* Zero 1/2: every rank's own parameter pieces all-gathered into the full parameters (the end of
 * an optimizer step). No-op for other stages. Collective. */
int dp_gather_params(DataParallel *dp);
/* Everything the group replicates rebuilt from every rank's own pieces: the parameters (zero
 * 0-2) and, at zero 0, the AdamW moments (after restoring only the own pieces of an in-memory
 * checkpoint). No-op at zero 3. Collective. */
int dp_gather_replicated(DataParallel *dp);
/* Mean of one double per rank, summed in rank order (identical on every rank). */
double dp_mean(DataParallel *dp, double x);
/* Free parameters gathered for a forward outside training (evaluation). */
void dp_release_gathered(DataParallel *dp);
/* Bytes this rank holds for parameters, gradients and optimizer state, and what the ZeRO
 * formulas predict for fp32 (16Ψ; (8 + 8/N)Ψ; (4 + 12/N)Ψ; 16Ψ/N + the largest gathered unit). */
void dp_memory(const DataParallel *dp, double *params, double *grads, double *optim, double *expected);

#endif
