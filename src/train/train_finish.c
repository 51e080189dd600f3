/* train_finish.c: the end of a `myriad train` run: outstanding checkpoints finished, the final
 * validation loss, measured memory beside the analytic figure, exposed communication, the
 * pipeline bubble per stage; then the sample and the Hugging Face export from the distributed
 * model (train_sample.c, train_export.c); and everything freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "io/path_check.h"
#include "launch/heartbeat.h"
#include "model/hf_weights.h"
#include "parallel/tensor_parallel.h"
#include "train/evaluate.h"
#include "train/samples.h"
#include "parallel/context_parallel.h"
#include "train/train_job.h"
#include "util/error.h"
#include "util/rss.h"

/* Peak resident set size of this process (VmHWM), in bytes; 0 if unknown. */
static double peak_rss_bytes(void) {
    double now, peak;
    rss_bytes(&now, &peak);
    return peak > 0 ? peak : 0;
}

/* Measured peak memory beside the planned figure of this rank (train_memory.c): on the CPU the
 * peak RSS (every kind of memory is host memory), on a GPU the device allocator's peak. */
static void print_memory(const TrainJob *j) {
    double MiB = 1048576.0, planned = j->memory_need.total;
    printf("memory: peak RSS %.1f MiB = %.3f x planned %.1f MiB (measured VmHWM; planned: parameters %.1f + gradients "
           "%.1f + AdamW %.1f + activations %.1f + checkpoints %.1f + runtime %.1f)\n",
           peak_rss_bytes() / MiB, peak_rss_bytes() / planned, planned / MiB, j->memory_need.params / MiB,
           j->memory_need.grads / MiB, j->memory_need.optim / MiB, j->memory_need.acts / MiB,
           j->memory_need.ckpt / MiB, j->memory_need.runtime / MiB);
}

/* Every rank's parameter/gradient/optimizer bytes, planned total and peak RSS, gathered and
 * printed by rank 0. */
static void print_dp_memory(const TrainJob *j, DataParallel *dp, int rank0) {
    double mine[7];
    dp_memory(dp, &mine[0], &mine[1], &mine[2], &mine[3]);
    mine[4] = peak_rss_bytes();
    mine[5] = (double)dp->peak_transient_bytes;
    mine[6] = j->memory_need.total;
    int n = j->world;
    double *all = malloc((size_t)n * 7 * sizeof(double));
    if (comm_all_gather(comm_world(), mine, all, 14, COMM_F32)) myr_die_last();
    if (rank0) {
        double MiB = 1048576.0;
        char cp_note[32] = ""; /* N of the formulas below is dp x ep x cp: ZeRO shards over the cp ranks too */
        if (j->cp > 1) snprintf(cp_note, sizeof cp_note, " x cp %d", j->cp);
        printf("memory per rank (tp %d x pp %d x dp %d x ep %d%s, zero %d, %.2fM parameters on rank 0; ZeRO formula of "
               "the data-parallel state: %s):\n", j->tp, j->pp, j->dp_size, j->ep, cp_note, dp->o.zero,
               model_num_params(dp->m) / 1e6,
               dp->o.zero == 0   ? "16 psi"
               : dp->o.zero == 1 ? "(8 + 8/N) psi"
               : dp->o.zero == 2 ? "(4 + 12/N) psi"
                                 : "16 psi / N + largest gathered unit");
        printf("  rank  params MiB  grads MiB  optim MiB  total MiB  formula MiB  ratio  transient MiB  planned MiB  "
               "peak RSS MiB  RSS/planned\n");
        for (int r = 0; r < n; r++) {
            double *v = all + 7 * r, tot = v[0] + v[1] + v[2];
            printf("  %4d  %10.2f %10.2f %10.2f %10.2f %12.2f %6.3f %14.2f %12.1f %13.1f %12.3f\n", r, v[0] / MiB,
                   v[1] / MiB, v[2] / MiB, tot / MiB, v[3] / MiB, tot / v[3], v[5] / MiB, v[6] / MiB, v[4] / MiB,
                   v[4] / v[6]);
        }
    }
    free(all);
}

/* The bubble each stage measured (idle share of the schedule's run) and the most micro-batches
 * whose activations were alive at once, as the allocator counted them. */
static void print_pipeline(const TrainJob *j, long timed) {
    int pp = j->pp;
    double mine[2] = {j->bubble_total / timed, (double)j->chunks[0].peak_live_slots};
    double *all = malloc((size_t)pp * 2 * sizeof(double));
    if (comm_all_gather(j->groups.pp, mine, all, 4, COMM_F32)) myr_die_last();
    if (j->rank0) {
        double avg = 0;
        printf("pipeline: bubble measured per stage:");
        for (int k = 0; k < pp; k++) printf(" %.3f", all[2 * k]), avg += all[2 * k] / pp;
        printf(" (mean %.3f; analytic (p-1)/(v*m+p-1) = %.3f); live activation sets on chunk 0 per stage:", avg,
               (pp - 1.0) / (j->vpp * j->n_micro + pp - 1.0));
        for (int k = 0; k < pp; k++) printf(" %.0f", all[2 * k + 1]);
        printf("\n");
    }
    free(all);
}

/* A failure at the end (a checkpoint that did not commit, an export that could not be written)
 * is remembered and said after the trained state is safe; the run then exits non-zero. */
static char late_error[1024];

static void remember_error(const char *what) {
    if (!late_error[0]) snprintf(late_error, sizeof late_error, "%s", what);
}

/* Outstanding saves, final validation and the run's figures. */
static void report_run(TrainJob *j) {
    const TrainOptions *o = &j->o;
    if (ckpt_async_wait()) remember_error(myr_last_error());
    if (j->mem) {
        double ms = 1e3 * mem_ckpt_seconds(j->mem);
        long saves = (j->last_step / o->mem_ckpt_every) - (j->first_step / o->mem_ckpt_every);
        if (j->rank0 && saves > 0)
            fprintf(stderr, "in-memory checkpoints: %ld saves, %.1f ms each on rank 0\n", saves, ms / saves);
        if (mem_ckpt_finish(j->mem, j->last_step == o->steps)) remember_error(myr_last_error());
    }
    if (j->last_step < o->steps) return; /* --stop-after: the run continues later */
    if (j->val && o->eval_every == 0) j->last_val = train_validation_loss(j);
    long timed = o->steps - j->first_step > 1 ? o->steps - j->first_step - 1 : o->steps - j->first_step;
    if (o->steps > 0 && j->rank0 && !j->distributed && dev_host_accessible()) print_memory(j);
    if (o->steps > 0 && j->rank0 && !dev_host_accessible()) { /* device memory is not in the RSS */
        size_t now, peak;
        kernels_memory_usage(&now, &peak);
        printf("device memory: peak %.1f MiB = %.3f x planned %.1f MiB (rank 0)\n", peak / 1048576.0,
               peak / j->memory_need.device, j->memory_need.device / 1048576.0);
    }
    if (j->dp) print_dp_memory(j, &j->dp[0], j->rank0);
    if (j->distributed && j->rank0 && timed > 0) {
        char groups[96] = "";
        size_t len = 0;
        if (j->dp_size > 1) len += (size_t)snprintf(groups + len, sizeof groups - len, "%sdp", len ? ", " : "");
        if (j->tp > 1) len += (size_t)snprintf(groups + len, sizeof groups - len, "%stp%s", len ? ", " : "", o->sp ? "+sp" : "");
        if (j->pp > 1) len += (size_t)snprintf(groups + len, sizeof groups - len, "%spp (with its bubble)", len ? ", " : "");
        if (j->ep > 1) len += (size_t)snprintf(groups + len, sizeof groups - len, "%sep", len ? ", " : "");
        printf("communication: exposed %.1f ms of %.1f ms per step (%.1f%%; rank 0's time blocked in %s communication), "
               "steps %ld..%ld\n", 1e3 * j->comm_total_s / timed, 1e3 * j->step_total_s / timed,
               100 * j->comm_total_s / j->step_total_s, groups[0] ? groups : "the job's", o->steps - timed + 1, o->steps);
    }
    if (j->pl && timed > 0) print_pipeline(j, timed);
}

/* The sample and the export, on the distributed model as it trained (no rank gathers it). */
static void sample_and_save(TrainJob *j) {
    const TrainOptions *o = &j->o;
    if (j->val && j->rank0)
        printf("final validation loss %.4f (%.3f bits per token)\n", j->last_val, j->last_val / 0.6931471805599453);
    if (o->sample_tokens > 0) train_sample(j, o->sample_tokens);
    char late[256] = "";
    if (o->save_dir && train_export_model(j, late, sizeof late)) remember_error(late);
}

/* Stopped on a signal: the checkpoint of last_step made durable, in-memory copies kept, said so. */
static void report_stop(TrainJob *j) {
    if (ckpt_async_wait()) myr_die_last();
    if (j->mem && mem_ckpt_finish(j->mem, 0)) myr_die_last();
    if (j->rank0)
        fprintf(stderr, "myriad train: stopped by signal %d (%s) after step %ld; %s%s; resume with --resume auto\n",
                j->stop_signal, strsignal(j->stop_signal), j->last_step,
                j->o.save_dir ? "checkpoint saved in " : "nothing saved (no --save DIR)", j->o.save_dir ? j->o.save_dir : "");
    hb_event("stopped-on-signal");
}

void train_job_finish(TrainJob *j) {
    if (j->stop_signal) {
        report_stop(j);
        return;
    }
    report_run(j);
    if (j->last_step < j->o.steps) { /* --stop-after */
        char name[32], path[4200];
        snprintf(name, sizeof name, "step-%08ld", j->last_step);
        if (j->rank0)
            fprintf(stderr, "myriad train: stopped after step %ld of %ld (--stop-after); the checkpoint %s continues "
                    "it: run the same command with --resume auto\n", j->last_step, j->o.steps,
                    path_join(path, sizeof path, j->o.save_dir, name));
    } else {
        if (!train_params_finite(j)) { /* never export a non-finite model (over a good one) */
            if (j->rank0)
                fprintf(stderr, "myriad: train: the final weights are not finite; %s was left as it was\n",
                        j->o.save_dir ? j->o.save_dir : "nothing was saved and");
            train_exit_all(TRAIN_EXIT_NONFINITE);
        }
        sample_and_save(j);
    }
    float failed = late_error[0] != 0; /* every rank exits alike; each says its own trouble */
    if (j->distributed && comm_all_reduce(comm_world(), &failed, &failed, 1, COMM_F32, COMM_MAX)) myr_die_last();
    if (failed) {
        if (late_error[0] && j->rank0) fprintf(stderr, "myriad: train: %s\n", late_error);
        else if (late_error[0]) fprintf(stderr, "myriad: train: rank %d: %s\n", j->rank, late_error);
        train_exit_all(1);
    }
}

void train_job_destroy(TrainJob *j) {
    tokenizer_free(j->tok);
    loader_free(&j->loader);
    tokens_close(j->train);
    if (j->val) tokens_close(j->val);
    trainer_destroy(&j->t);
    train_state_mirrors_free(j->state.mirrors);
    if (j->pl) pipeline_destroy(j->pl);
    for (int c = 0; c < j->vpp; c++) {
        if (j->dp) dp_destroy(&j->dp[c]);
        free(j->tensor_weight[c]);
        cp_detach(&j->chunks[c]);
        model_destroy(&j->chunks[c]);
    }
    free(j->tensor_weight);
    free(j->dp);
    free(j->chunks);
    if (j->dense_group && j->dense_group != j->groups.dp && j->dense_group != j->expert_group)
        comm_group_free(j->dense_group);
    if (j->expert_group && j->expert_group != j->groups.dp) comm_group_free(j->expert_group);
    if (!j->stop_signal) hb_finish(); /* a stopped rank did not finish: its connection just closes */
    if (j->distributed) comm_finalize();
}
