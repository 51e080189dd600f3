/* train_memory.c: the memory a run needs on this rank, computed from the planned model chunks
 * before anything is allocated, and the check against what is free (one line naming the bytes
 * asked and free per rank and the layout that would fit, before anything is written).
 *
 * What a rank holds, by kind (docs/TRAINING.md, "Memory"):
 *   parameters   fp32 master weights: the whole local slice, or at ZeRO-3 the shard plus the
 *                units gathered at once (the largest, plus a tied embedding kept gathered from
 *                the head's forward to the end of backward);
 *   gradients    the local slice, or at ZeRO 2/3 the shard plus the units' reduction buffers
 *                alive at once (the one being written, one still reducing, a tied embedding's);
 *                bf16 gradient wire copies;
 *   optimizer    AdamW m and v: whole, or 1/N at ZeRO >= 1;
 *   working      the bf16 copy of the weights the GEMMs read (bf16 runs; at ZeRO-3 only the
 *                gathered units' copies);
 *   activations  what the forward stores for backward for every micro-batch in flight, and the
 *                backward's scratch;
 *   comm         the communication library's temporaries: Open MPI's nonblocking reductions hold
 *                about their message's size (measured: every bucket in flight held half the
 *                gradients again), so data parallelism keeps at most DP_MAX_INFLIGHT in flight and
 *                the largest ones are counted;
 *   checkpoints  host memory: the async save's snapshot (kept for the run) and the in-memory
 *                copies on shared memory (two generations of this rank's own pieces and of the
 *                replicas it keeps for a rank on another host);
 *   runtime      this process before any of the above (libraries, MPI, the tokenizer), measured.
 * On the CPU all of it is one memory and peak RSS is compared with the sum at the end of the
 * run; on a GPU the first five are device memory and the rest host memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/schedule.h"
#include "train/train_job.h"
#include "util/error.h"

#define GIB 1073741824.0
#define MIB 1048576.0

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

/* This process's resident memory now (VmRSS), in bytes; 0 if unknown. */
static double rss_now(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = atof(line + 6);
    fclose(f);
    return kb * 1024;
}

/* The memory of one layout: this rank's chunks with data-parallel size N at ZeRO `zero`. */
static void need_of(const TrainJob *j, const Model *chunks, int nchunks, int zero, double N, int distributed,
                    TrainMemory *need) {
    const TrainOptions *o = &j->o;
    memset(need, 0, sizeof *need);
    double own_state = 0, write_state = 0; /* bytes of parameters + AdamW this rank owns / writes to disk */
    for (int c = 0; c < nchunks; c++) {
        const Model *m = &chunks[c];
        const ParamTable *t = &m->table;
        double P = (double)t->total * sizeof(real), emb = 0, largest = 0;
        for (int u = 0; u < t->units; u++) {
            double b = (double)(t->unit_hi[u] - t->unit_lo[u]) * sizeof(real);
            if (u == 0 && m->stage.first) emb = b;
            else if (b > largest) largest = b;
        }
        int tied = m->cfg.tied_embeddings && m->stage.first && m->stage.last;
        double gathered = tied ? emb + largest : (emb > largest ? emb : largest);
        double reducing = tied ? emb + 2 * largest : (emb > 2 * largest ? emb : 2 * largest);
        need->params += zero >= 3 ? P / N + gathered : P;
        need->grads += zero >= 2 ? P / N + reducing : P;
        need->optim += zero >= 1 ? 2 * P / N : 2 * P;
        /* the bf16 working copy: whole, or at ZeRO-3 only the gathered units' (rounded as gathered) */
        double working = (double)(model_weight_bytes(m) - 2 * t->total * sizeof(real));
        need->working += zero >= 3 ? working / P * gathered : working;
        if (distributed && o->dpo.grad_dtype == COMM_BF16) need->grads += zero >= 2 ? reducing / 2 : P / 2;
        if (distributed && N > 1) {
            DpOptions d = o->dpo;
            d.zero = zero;
            need->comm += dp_inflight_bytes(t, &d) * (o->dpo.grad_dtype == COMM_BF16 ? 0.5 : 1);
        }
        need->acts += (double)peak_live(j, c) * model_activation_bytes(m, j->micro, o->seq) +
                      (double)model_scratch_bytes(m, j->micro, o->seq);
        own_state += 3 * P / N;
        /* the disk snapshot: what data-parallel rank 0 writes (replicated pieces once) is the most */
        write_state += zero >= 3 ? 3 * P / N : zero >= 1 ? P + 2 * P / N : 3 * P;
    }
    if (o->save_every > 0 && !o->sync_save) need->ckpt += write_state;
    if (o->mem_ckpt_every > 0) {
        /* replicas of a rank on another host are kept here too (emulated hosts name themselves) */
        const char *h = getenv("MYRIAD_HOST");
        int several_hosts = distributed && ((h && *h) || comm_node_count(comm_world()) > 1);
        need->ckpt += 2 * own_state * (several_hosts ? 2 : 1);
    }
    need->device = need->params + need->grads + need->optim + need->working + need->acts + need->comm;
    need->total = need->device + need->ckpt + need->runtime;
}

void train_memory_need(const TrainJob *j, TrainMemory *need) {
    int zero = j->distributed ? j->o.dpo.zero : 0;
    need_of(j, j->chunks, j->vpp, zero, j->distributed ? j->dense_dp : 1, j->distributed, need);
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

static int on_cpu(void) { return dev_host_accessible(); }

/* The per-rank need of this model at ZeRO-3 over dp ranks (tp and pp as given): the first dp
 * whose need fits `free_per_rank`, or 0 if none up to 65536. */
static int dp_that_fits(const TrainJob *j, double free_per_rank, double runtime) {
    for (int dp = j->dense_dp; dp <= 65536; dp *= 2) {
        TrainMemory n;
        Model *chunks = calloc((size_t)j->vpp, sizeof(Model));
        int ok = 1;
        for (int c = 0; c < j->vpp && ok; c++) {
            chunks[c] = (Model){0};
            ok = model_plan_ep(&chunks[c], &j->cfg, dp, j->tp, j->tp_rank, j->ep, j->ep_rank, &j->chunks[c].stage) == 0;
            chunks[c].recompute = j->chunks[c].recompute;
            chunks[c].tp.sp = j->chunks[c].tp.sp;
        }
        if (ok) need_of(j, chunks, j->vpp, 3, dp, 1, &n);
        for (int c = 0; c < j->vpp; c++) model_destroy(&chunks[c]);
        free(chunks);
        double total = on_cpu() ? n.total + runtime : n.device;
        if (ok && total <= free_per_rank) return dp;
    }
    return 0;
}

void train_memory_check(TrainJob *j) {
    TrainMemory n;
    train_memory_need(j, &n);
    n.runtime = rss_now();
    /* rank 0 measures the CPU's sgemm rate for MFU (train_setup.c): three 1024^2 matrices */
    if (on_cpu() && j->rank0 && !(j->o.peak_tflops > 0)) n.runtime += 3.0 * 1024 * 1024 * sizeof(float);
    n.total += n.runtime;
    j->memory_need = n;
    int share = ranks_per_device(j);
    double free_b = (double)j->device.free_bytes, per_rank_free = free_b / share;
    double asked = on_cpu() ? n.total : n.device;
    if (asked <= per_rank_free) return;
    char who[400] = "";
    if (share > 1) snprintf(who, sizeof who, " (%.2f GiB free on %s for its %d ranks)", free_b / GIB, j->device.name, share);
    else snprintf(who, sizeof who, " on %s", j->device.name);
    /* what would fit: ZeRO-3 over more data-parallel ranks, each on a machine like this one */
    char fit[512];
    int zero = j->distributed ? j->o.dpo.zero : 0;
    int dp = dp_that_fits(j, free_b, n.runtime);
    int ranks = dp * j->tp * j->pp;
    if (dp > 0)
        snprintf(fit, sizeof fit, "it would fit with --zero 3 over %d ranks (dp %d x tp %d x pp %d) with one rank per "
                 "machine like this one%s", ranks, dp, j->tp, j->pp,
                 n.acts > 0.25 * asked ? ", or with fewer activations (--recompute full, --micro-batch 1)" : "");
    else
        snprintf(fit, sizeof fit, "no data-parallel size fits at this tp %d x pp %d: shard the model with --tp/--pp "
                 "(or --recompute full, --micro-batch 1)", j->tp, j->pp);
    train_layout_error(j->rank,
                       "the run needs %.2f GiB (%.0f bytes) of %s memory per rank (parameters %.2f, gradients %.2f, "
                       "AdamW %.2f, bf16 weights %.2f, activations %.2f GiB at micro-batch %d x %d, checkpoints %.2f, "
                       "runtime %.2f; zero %d, tp %d, pp %d, dp %d) but %.2f GiB (%.0f bytes) is free per rank%s: %s",
                       asked / GIB, asked, kernels_device(), n.params / GIB, n.grads / GIB, n.optim / GIB,
                       n.working / GIB, n.acts / GIB, j->micro, j->o.seq, n.ckpt / GIB,
                       (on_cpu() ? n.runtime : 0) / GIB, zero, j->tp, j->pp, j->dense_dp, per_rank_free / GIB,
                       per_rank_free, who, fit);
}

void train_memory_print(const TrainJob *j) {
    const TrainMemory *n = &j->memory_need;
    if (on_cpu())
        fprintf(stderr, "memory planned per rank: %.1f MiB = device allocations %.1f MiB (parameters %.1f, gradients "
                "%.1f, AdamW %.1f, activations %.1f, communication %.1f) + checkpoints %.1f + runtime %.1f measured at "
                "start\n", n->total / MIB, n->device / MIB, n->params / MIB, n->grads / MIB, n->optim / MIB,
                n->acts / MIB, n->comm / MIB, n->ckpt / MIB, n->runtime / MIB);
    else
        fprintf(stderr, "memory planned per rank: device %.1f MiB (parameters %.1f, gradients %.1f, AdamW %.1f, working "
                "weights %.1f, activations %.1f, communication %.1f); host %.1f MiB (checkpoints %.1f, runtime %.1f)\n",
                n->device / MIB, n->params / MIB, n->grads / MIB, n->optim / MIB, n->working / MIB, n->acts / MIB,
                n->comm / MIB, (n->ckpt + n->runtime) / MIB, n->ckpt / MIB, n->runtime / MIB);
}
