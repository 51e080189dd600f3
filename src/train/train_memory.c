/* train_memory.c: the device memory a run needs on this rank, computed from the planned model
 * chunks before any device allocation, and the check against the device's free memory (one line
 * naming the bytes asked and free and what to change, before anything is written).
 *
 * The sum counts the resident allocations: fp32 parameters and gradients (or their ZeRO shards
 * plus the largest unit gathered or reduced at a time), the bf16 working copy, the AdamW moments
 * (sharded at ZeRO >= 1), the stored activations of every micro-batch this rank keeps in flight
 * (one for a plain step; the schedule's peak per chunk under pipeline parallelism), the backward
 * scratch, and bf16 gradient wire buffers. Transient buffers (MoE per-layer state, pinned staging)
 * are not counted, so the figure errs low: a run it refuses would not have fit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/schedule.h"
#include "train/train_job.h"
#include "util/error.h"

#define GIB 1073741824.0

/* Most micro-batches of `chunk` whose forward has run and backward has not, on this stage. */
static int peak_live(const TrainJob *j, int chunk) {
    if (j->pp == 1 && j->vpp == 1) return 1;
    Schedule s;
    if (schedule_build(&s, (ScheduleKind)j->o.schedule, j->pp, j->vpp, j->n_micro)) return j->n_micro;
    int live = 0, peak = 0;
    for (int i = 0; i < s.nops[j->pp_rank]; i++) {
        const ScheduleOp *op = &s.ops[j->pp_rank][i];
        if (op->chunk != chunk) continue;
        if (op->kind == OP_FORWARD && ++live > peak) peak = live;
        if (op->kind == OP_BACKWARD) live--;
    }
    schedule_free(&s);
    return peak > 0 ? peak : 1;
}

void train_memory_need(const TrainJob *j, TrainMemory *need) {
    memset(need, 0, sizeof *need);
    const TrainOptions *o = &j->o;
    int zero = j->distributed ? o->dpo.zero : 0;
    double N = j->distributed ? j->dense_dp : 1;
    for (int c = 0; c < j->vpp; c++) {
        const Model *m = &j->chunks[c];
        double P = (double)m->table.total * sizeof(real), largest = 0;
        for (int u = 0; u < m->table.units; u++) {
            double b = (double)(m->table.unit_hi[u] - m->table.unit_lo[u]) * sizeof(real);
            if (b > largest) largest = b;
        }
        need->params += zero >= 3 ? P / N + largest : P;
        need->grads += zero >= 2 ? P / N + largest : P;
        need->optim += zero >= 1 ? 2 * P / N : 2 * P;
        need->working += (double)(model_weight_bytes(m) - 2 * m->table.total * sizeof(real));
        if (j->distributed && o->dpo.grad_dtype == COMM_BF16) need->grads += P / 2;
        need->acts += (double)peak_live(j, c) * model_activation_bytes(m, j->micro, o->seq) +
                      (double)model_scratch_bytes(m, j->micro, o->seq);
    }
    need->total = need->params + need->grads + need->optim + need->working + need->acts;
}

/* Ranks of this machine that share one device (local ranks round-robin over the visible GPUs;
 * on the CPU all of them share its memory). */
static int ranks_per_device(const TrainJob *j) {
    const char *v = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!v) v = getenv("SLURM_NTASKS_PER_NODE");
    int local = v ? atoi(v) : 1;
    if (local < 1) local = 1;
    int devices = j->device.count > 0 ? j->device.count : 1;
    return (local + devices - 1) / devices;
}

void train_memory_check(TrainJob *j) {
    TrainMemory n;
    train_memory_need(j, &n);
    j->memory_need = n;
    int share = ranks_per_device(j);
    double free_b = (double)j->device.free_bytes, asked = n.total * share;
    if (asked <= free_b) return;
    char who[64] = "";
    if (share > 1) snprintf(who, sizeof who, " x %d ranks sharing it", share);
    train_layout_error(j->rank,
                       "the run needs %.2f GiB (%.0f bytes) of %s memory per rank%s (parameters %.2f, gradients %.2f, AdamW %.2f, "
                       "bf16 weights %.2f, activations %.2f GiB at micro-batch %d x %d) but %.2f GiB (%.0f bytes) is free on %s: "
                       "reduce --micro-batch, --batch or --seq, use --recompute full, --zero 1..3, more ranks "
                       "(--dp/--tp/--pp)%s, or a smaller model",
                       n.total / GIB, n.total, kernels_device(), who, n.params / GIB, n.grads / GIB, n.optim / GIB,
                       n.working / GIB, n.acts / GIB, j->micro, j->o.seq, free_b / GIB, free_b, j->device.name,
                       kernels_dtype() == DTYPE_F32 ? ", --dtype bf16" : "");
}
