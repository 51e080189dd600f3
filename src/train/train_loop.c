/* train_loop.c: the steps of a `myriad train` run: this rank's rows of each global batch, one
 * trainer_step, the checkpoints due after it (async disk saves, in-memory copies), evaluation,
 * the progress line and JSON log (rank 0), the heartbeat to `myriad run`; a Chrome trace of the
 * first pipeline step after warm-up and the first step's MoE routing when asked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ckpt/ckpt.h"
#include "kernels/kernels.h"
#include "launch/heartbeat.h"
#include "model/moe.h"
#include "train/evaluate.h"
#include "train/ckpt_saves.h"
#include "train/mfu_peak.h"
#include "train/nonfinite.h"
#include "train/progress.h"
#include "train/stop_signal.h"
#include "train/train_job.h"
#include "train/train_phases.h"
#include "trace/trace.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/rss.h"

/* Validation loss over this rank's rows of K batches, averaged over the data-parallel ranks. */
double train_validation_loss(TrainJob *j) {
    const TrainOptions *o = &j->o;
    Model *m = &j->chunks[0];
    int rows = j->rows;
    double loss;
    uint64_t toks;
    if (!j->pl) {
        if (evaluate_loss(m, j->val, o->batch, o->seq, o->eval_batches, j->data_rank * rows, rows, &loss, &toks))
            myr_die_last();
    } else { /* through the pipeline, one batch at a time */
        BatchLoader l;
        if (loader_init(&l, j->val, o->batch, o->seq, 0, 0)) myr_die_last();
        int K = o->eval_batches < (int)l.windows ? o->eval_batches : (int)l.windows;
        size_t n = (size_t)rows * o->seq;
        int32_t *x = malloc(n * sizeof(int32_t)), *y = malloc(n * sizeof(int32_t));
        double sum = 0;
        for (int k = 0; k < K; k++) {
            if (loader_batch(&l, (uint64_t)k, j->data_rank * rows, rows, x, y)) myr_die_last();
            if (check_tokens(x, (int)n, m->cfg.vocab, "validation", k) ||
                check_tokens(y, (int)n, m->cfg.vocab, "validation", k))
                myr_die_last();
            sum += pipeline_forward(j->pl, x, y, rows);
        }
        loss = sum / K;
        free(x);
        free(y);
        loader_free(&l);
    }
    if (j->dp) {
        loss = dp_mean(j->dp, loss);
        for (int c = 0; c < (j->pl ? j->pl->vpp : 1); c++) dp_release_gathered(&j->dp[c]);
    }
    return loss;
}

/* The step's mixture-of-experts figures, summed over the ranks (tensor-parallel ranks route the
 * same tokens: counted once), into the report; and the counters zeroed for the next step. */
static void moe_report(Model *chunks, int n, int tp, int pp, int world, StepReport *rep) {
    const ModelConfig *c = &chunks[0].cfg;
    int LE = c->layers * c->experts;
    float *v = calloc((size_t)LE + 2, sizeof(float)); /* counts are exact in fp32 below 2^24 */
    for (int k = 0; k < n; k++) {
        MoeStats *st = &chunks[k].moe_stats;
        for (int i = 0; i < LE; i++) v[i] += (float)st->tokens[i];
        v[LE] += (float)st->dropped;
        v[LE + 1] += (float)(st->aux_sum / (st->forwards ? st->forwards : 1));
    }
    if (world > 1 && comm_all_reduce(comm_world(), v, v, (size_t)LE + 2, COMM_F32, COMM_SUM)) myr_die_last();
    int moe_layers = 0;
    double mn = 1e300, mx = 0, sum = 0;
    for (int l = 0; l < c->layers; l++) {
        if (!model_layer_is_moe(c, l)) continue;
        moe_layers++;
        for (int e = 0; e < c->experts; e++) {
            double x = v[l * c->experts + e] / tp;
            mn = x < mn ? x : mn, mx = x > mx ? x : mx, sum += x;
        }
    }
    rep->have_moe = 1;
    if (!moe_layers) mn = 0; /* --moe-every beyond the layers: no MoE layer */
    rep->moe_tokens_min = mn, rep->moe_tokens_max = mx;
    rep->moe_tokens_mean = moe_layers ? sum / ((double)moe_layers * c->experts) : 0;
    rep->moe_dropped = v[LE] / tp;
    rep->moe_aux = v[LE + 1] / ((double)world / pp); /* each stage's sum over its layers, averaged over replicas */
    rep->a2a_bytes = 0, rep->a2a_ms = 0, rep->a2a_wait_ms = 0;
    for (int k = 0; k < n; k++) {
        rep->a2a_bytes += chunks[k].moe_stats.a2a_bytes;
        rep->a2a_ms += chunks[k].moe_stats.a2a_s * 1e3;
        rep->a2a_wait_ms += chunks[k].moe_stats.a2a_wait_s * 1e3;
        moe_stats_reset(&chunks[k]);
    }
    free(v);
}

/* --moe-routing: the first step's routing, one file per rank (tensor-parallel rank 0 only). */
static FILE *open_routing_dump(TrainJob *j) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", j->o.moe_routing, j->rank);
    FILE *f = fopen(path, "w");
    if (!f) myr_die("--moe-routing: cannot create %s", path);
    for (int c = 0; c < j->vpp; c++) j->chunks[c].moe_routing = f, j->chunks[c].moe_seq0 = j->data_rank * j->rows;
    return f;
}

/* What the saves of one step cost it (for --save-every auto, ckpt_policy.h). */
typedef struct {
    double disk_s, mem_s;
    int disk_saved, mem_saved;
} SaveCost;

/* Checkpoints due after step s (0-based): commit the async save in flight once every shard is
 * durable, start this step's disk save, and the in-memory copy of step s + 1 (packed during the
 * next step and committed before its update, so a rank killed at any time loses at most the one
 * step it had reported since). Returns the seconds spent. */
static double save_checkpoints(TrainJob *j, long s, SaveCost *cost) {
    const TrainOptions *o = &j->o;
    double tc = train_now_s();
    ckpt_saves_poll(j); /* a failed save is said, not fatal: the next interval tries again */
    int last = s + 1 == j->last_step;
    int due = o->save_every > 0 && ((s + 1) % o->save_every == 0 || last);
    if (last && o->stop_after > 0 && o->stop_after < o->steps) due = 1; /* --stop-after: the step to resume from */
    if (j->stop_signal && o->save_dir) due = 1; /* SIGTERM/SIGUSR1: the checkpoint to resume from */
    /* an update can overflow although its gradient was finite: such a state is never saved */
    if (due && !train_params_finite(j)) return -1;
    /* the checkpoint the run ends with is written now (sync), with a fallback directory */
    if (due) ckpt_saves_save(j, s + 1, last || j->stop_signal);
    double tm = train_now_s(), m0 = j->mem ? mem_ckpt_seconds(j->mem) : 0;
    cost->disk_s = tm - tc, cost->disk_saved = due;
    cost->mem_saved = j->mem && (s + 1) % o->mem_ckpt_every == 0;
    if (cost->mem_saved && mem_ckpt_save(j->mem, s + 1)) myr_die_last();
    if (j->mem && mem_ckpt_confirm(j->mem)) myr_die_last();
    cost->mem_s = j->mem ? mem_ckpt_seconds(j->mem) - m0 : 0;
    return train_now_s() - tc;
}

int train_params_finite(TrainJob *j) {
    size_t bad = 0;
    for (int c = 0; c < j->vpp; c++) {
        const DataParallel *dp = j->dp ? &j->dp[c] : NULL;
        if (dp && dp->o.zero >= 3) { /* the parameters live in the shards */
            bad += count_nonfinite(dp->param_shard, dp->shard_elems);
        } else
            bad += model_count_nonfinite(&j->chunks[c], NULL);
    }
    float flag = bad > 0;
    if (j->distributed && comm_all_reduce(comm_world(), &flag, &flag, 1, COMM_F32, COMM_MAX)) myr_die_last();
    return flag == 0;
}

/* The newest committed checkpoint in --save DIR, for the stop message ("" when none). */
static void newest_checkpoint(const TrainJob *j, char *buf, size_t n) {
    buf[0] = 0;
    Ckpt *ck;
    if (!j->o.save_dir || ckpt_open(j->o.save_dir, &ck)) return;
    snprintf(buf, n, "%s (step %lld)", ckpt_path(ck), (long long)ckpt_step(ck));
    ckpt_close(ck);
}

static const char *num_text(char *buf, size_t n, double v) { /* "NaN", "inf", "-inf" or the number */
    if (isnan(v)) snprintf(buf, n, "NaN");
    else if (isinf(v)) snprintf(buf, n, v > 0 ? "inf" : "-inf");
    else snprintf(buf, n, "%.4g", v);
    return buf;
}

static void describe_nonfinite(const StepResult *r, char *what, size_t n) {
    char a[32], b[32];
    if (!isfinite(r->loss)) snprintf(what, n, "the loss is %s", num_text(a, sizeof a, r->loss));
    else snprintf(what, n, "the loss is %s but the gradient norm is %s", num_text(a, sizeof a, r->loss),
                  num_text(b, sizeof b, r->grad_norm));
}

/* What a second Ctrl-C would lose now, after step s (0-based) and its checkpoints (stop_signal.c). */
static void note_what_is_lost(TrainJob *j, long s) {
    const TrainOptions *o = &j->o;
    char what[1024];
    long mem = mem_ckpt_complete_step(j->mem), saved = j->ckpt_committed > mem ? j->ckpt_committed : mem;
    long lost = saved >= 0 ? s + 1 - saved : s + 1 - j->first_step;
    if (!o->save_dir)
        snprintf(what, sizeof what, "nothing is saved (no --save DIR): the %ld steps of this run are lost", s + 1 - j->first_step);
    else if (saved < 0)
        snprintf(what, sizeof what, "no checkpoint is written yet: the %ld steps of this run are lost", lost);
    else if (lost <= 0)
        snprintf(what, sizeof what, "nothing is lost: step %ld is checkpointed (%s)", saved,
                 saved == mem && saved > j->ckpt_committed ? "in memory" : o->save_dir);
    else
        snprintf(what, sizeof what, "the %ld step%s after step %ld, the last checkpoint (%s), %s lost", lost,
                 lost == 1 ? "" : "s", saved, saved == mem && saved > j->ckpt_committed ? "an in-memory copy" : o->save_dir,
                 lost == 1 ? "is" : "are");
    train_stop_set_lost(what);
}

/* A non-finite step that ends the run (--on-nan stop, or too many skipped in a row): every rank
 * gets here at the same step (the trainer's decision is agreed). The checkpoint in flight (of an
 * earlier, finite step) is finished so that it is intact; nothing is saved; rank 0 says why and
 * what to do; all ranks exit with TRAIN_EXIT_NONFINITE. */
static _Noreturn void stop_nonfinite(TrainJob *j, Progress *progress, long s, const char *what, int skipped) {
    const TrainOptions *o = &j->o;
    int ckpt_failed = ckpt_async_wait();
    if (j->mem) mem_ckpt_finish(j->mem, 0); /* keep the copies: they hold the last good steps */
    progress_close(progress);
    progress_break_line(progress);
    if (j->distributed) comm_barrier(comm_world()); /* every rank's saves are done before anyone looks */
    if (j->rank0) {
        char ck[4200];
        newest_checkpoint(j, ck, sizeof ck);
        if (skipped > 1)
            fprintf(stderr, "myriad: train: step %ld: %s, the %d%s non-finite step in a row (--max-nan-skips %d): "
                    "stopping. ", s + 1, what, skipped, skipped == 2 ? "nd" : skipped == 3 ? "rd" : "th",
                    o->max_nan_skips);
        else
            fprintf(stderr, "myriad: train: step %ld: %s (non-finite): stopping (--on-nan stop). ", s + 1, what);
        if (ck[0]) fprintf(stderr, "The last checkpoint, %s, is from before it and intact", ck);
        else fprintf(stderr, "Nothing was saved (no checkpoint yet)");
        fprintf(stderr, "%s. Lower --lr, keep --clip on, check the data, or use --on-nan skip to step over "
                "isolated bad batches.\n", ckpt_failed ? " (but the save in flight failed: see above)" : "");
    }
    hb_event("nonfinite-stop");
    hb_finish();
    train_exit_all(TRAIN_EXIT_NONFINITE);
}

void train_job_run(TrainJob *j) {
    const TrainOptions *o = &j->o;
    int rows = j->rows;
    Trainer *t = &j->t;
    Progress progress;
    /* a relaunch by `myriad run` (attempt > 0) continues the same run: its log keeps the earlier
     * attempts' steps, so one log (and `myriad report`) holds the whole run */
    const char *attempt = getenv("MYRIAD_HB_ATTEMPT");
    progress_open(&progress, j->rank0 ? o->log_path : NULL, o->steps, o->print_every, attempt && atoi(attempt) > 0);
    if (!j->rank0) progress.quiet = 1;
    char *config = j->rank0 && o->log_path ? train_job_config_json(j) : NULL;
    progress.config = config;
    size_t n = (size_t)rows * o->seq;
    int32_t *x = malloc(n * sizeof(int32_t)), *y = malloc(n * sizeof(int32_t));
    j->last_val = NAN;
    j->comm_total_s = j->step_total_s = j->bubble_total = 0;
    TraceBuffer trace;
    long trace_step = o->steps > 1 ? 1 : 0; /* the first step after warm-up */
    /* under `myriad run --max-restarts/--hang-timeout/...` every rank reports each step to the
     * launcher (a no-op otherwise) */
    if (hb_connect_from_env()) fprintf(stderr, "myriad train: heartbeat: %s (continuing without it)\n", myr_last_error());
    for (int i = 0; j->rank0 && i < j->nevents; i++) hb_event(j->events[i]);
    /* where this start's time went, for the launcher's time ledger (docs/LAUNCHER.md) */
    HbStartInfo phases;
    hb_start_info_init(&phases);
    phases.mpi_s = train_phase_seconds(TRAIN_PHASE_MPI);
    phases.setup_s = train_phase_seconds(TRAIN_PHASE_SETUP);
    phases.restore_s = train_phase_seconds(TRAIN_PHASE_RESUME);
    if (train_phase_end_time(TRAIN_PHASE_RESUME) > 0) phases.post_s = train_now_s() - train_phase_end_time(TRAIN_PHASE_RESUME);
    hb_start_info(j->first_step, &phases);
    j->last_step = o->stop_after > 0 && o->stop_after < o->steps ? o->stop_after : o->steps;
    train_stop_install(); /* SIGTERM/SIGUSR1/SIGUSR2/SIGINT: a checkpoint after the step all ranks agree on */
    if (j->policy.auto_disk || j->policy.auto_mem) { /* --save-every auto / --mem-ckpt-every auto */
        double est = j->peak_flops > 0 ? j->flops_per_step / (j->peak_flops * (j->peak_devices > 0 ? j->peak_devices : 1) * 0.4) : 0;
        ckpt_policy_init(&j->policy, j->policy.auto_disk, j->policy.auto_mem && j->mem, o->mtbf_s,
                         train_ckpt_own_bytes(&j->state), (double)train_state_bytes(&j->state), !o->sync_save, j->world,
                         o->steps, est, &j->o.save_every, &j->o.mem_ckpt_every);
        char line[700];
        ckpt_policy_describe(&j->policy, line, sizeof line);
        if (j->rank0) fprintf(stderr, "myriad train: %s\n", line);
    }
    j->ckpt_requested = j->ckpt_committed = o->resume && j->first_step > 0 ? j->first_step : -1;
    j->ckpt_attempts = j->ckpt_nfailed = j->late_failure = 0;
    j->ckpt_rescue[0] = j->ckpt_error[0] = 0;
    if (j->first_step < j->last_step) note_what_is_lost(j, j->first_step - 1);
    int skips_in_a_row = 0;
    for (long s = j->first_step; s < j->last_step; s++) {
        double td = clock_thread_cpu_s(), td_wall = train_now_s(); /* sections are CPU time: see trainer.h */
        if (loader_batch(&j->loader, (uint64_t)s, j->data_rank * rows, rows, x, y)) myr_die_last();
        if (check_tokens(x, (int)n, j->cfg.vocab, "training", s) || check_tokens(y, (int)n, j->cfg.vocab, "training", s))
            myr_die_last();
        double data_s = clock_thread_cpu_s() - td, data_wall = train_now_s() - td_wall;
        t->slow_factor = hb_slow_factor(s + 1); /* myriad run --inject slow@STEP:RANK:FACTOR */
        if (j->pl && o->trace_path && s == trace_step) {
            trace_init(&trace, j->rank);
            trace_sync_origin(&trace, comm_world());
            j->pl->trace = &trace;
        }
        FILE *routing = o->moe_routing && j->cfg.experts && s == j->first_step && j->tp_rank == 0
                            ? open_routing_dump(j) : NULL;
        double mem_s0 = j->mem ? mem_ckpt_seconds(j->mem) : 0; /* the copy's wait inside the step (before_update) */
        double t0 = train_now_s();
        StepResult r = trainer_step(t, x, y, rows, o->seq);
        double dt = train_now_s() - t0;
        double ckpt_wall = j->mem ? mem_ckpt_seconds(j->mem) - mem_s0 : 0;
        if (routing) {
            for (int c = 0; c < j->vpp; c++) j->chunks[c].moe_routing = NULL;
            fclose(routing);
        }
        if (j->pl && j->pl->trace) {
            j->pl->trace = NULL;
            if (trace_write_gathered(comm_world(), &trace, o->trace_path)) myr_die_last();
            if (j->rank0) fprintf(stderr, "wrote the trace of step %ld to %s\n", s + 1, o->trace_path);
            trace_free(&trace);
        }
        StepReport rep = {.step = s, .steps = o->steps, .loss = r.loss, .lr = r.lr, .grad_norm = r.grad_norm,
                          .ms = dt * 1e3, .tokens_per_s = o->batch * o->seq / dt,
                          .mfu = mfu_of_step(j, dt, s), .peak_flops = j->peak_flops * j->peak_devices,
                          .peak_source = j->peak_source,
                          .comm_ms = j->distributed ? t->sections.comm * 1e3 : -1, .skipped = r.nonfinite};
        size_t mem_now, mem_peak;
        kernels_memory_usage(&mem_now, &mem_peak);
        rep.mem_bytes = (double)mem_now, rep.mem_peak_bytes = (double)mem_peak;
        rep.host_memory = dev_host_accessible(); /* then the line shows the measured resident set */
        rss_bytes(&rep.rss_bytes, &rep.rss_peak_bytes);
        if (r.nonfinite) {
            skips_in_a_row++;
            j->skipped_steps++;
            if (o->on_nan == TRAIN_ON_NAN_STOP || skips_in_a_row > o->max_nan_skips) {
                char what[160];
                describe_nonfinite(&r, what, sizeof what);
                rep.skipped = 0, rep.stopped = 1; /* not skipped: this step ends the run */
                progress_step(&progress, &rep); /* the log shows the step that stopped the run */
                stop_nonfinite(j, &progress, s, what, skips_in_a_row);
            }
        } else
            skips_in_a_row = 0;
        if (j->cfg.experts) moe_report(j->chunks, j->vpp, j->tp, j->pp, j->world, &rep);
        double cpu_c = clock_thread_cpu_s(), comm_c = comm_wait_seconds(), comm_cpu_c = comm_wait_cpu_seconds();
        j->stop_signal = train_stop_agreed(j->state.world);
        SaveCost cost = {0};
        rep.ckpt_ms = save_checkpoints(j, s, &cost) * 1e3;
        if (rep.ckpt_ms > 0) ckpt_wall += rep.ckpt_ms * 1e-3;
        if (rep.ckpt_ms < 0) { /* the update of this step left non-finite weights */
            rep.ckpt_ms = 0;
            rep.stopped = 1;
            progress_step(&progress, &rep);
            stop_nonfinite(j, &progress, s, "its update left non-finite weights (an overflow), which are not saved", 1);
        }
        note_what_is_lost(j, s); /* the step is done and its checkpoints started: said by a second Ctrl-C */
        /* what the step spent where, for the launcher's straggler detection (docs/OPERATIONS.md) */
        HbStepInfo info;
        hb_step_info_init(&info);
        info.section_s[HB_SEC_DATA] = data_s;
        info.section_s[HB_SEC_FORWARD] = t->sections.forward;
        info.section_s[HB_SEC_BACKWARD] = t->sections.backward;
        info.section_s[HB_SEC_COMM] = t->sections.comm + comm_wait_seconds() - comm_c;
        info.section_s[HB_SEC_OPTIMIZER] = t->sections.optimizer;
        info.section_s[HB_SEC_CHECKPOINT] =
            t->sections.checkpoint + clock_thread_cpu_s() - cpu_c - (comm_wait_cpu_seconds() - comm_cpu_c);
        info.tokens_per_s = rep.tokens_per_s;
        info.mfu = rep.mfu;
        info.mem_step = mem_ckpt_complete_step(j->mem);
        info.role = j->pp_rank; /* ranks of one pipeline stage do the same work: the straggler detector's peers */
        if (s > j->first_step || o->steps == 1) { /* the first step includes warm-up */
            /* exposed: the step's time blocked in communication of every group (dp, tp, pp, ep),
             * not only the data-parallel reduction's tail */
            j->comm_total_s += t->sections.comm;
            j->step_total_s += dt;
            if (j->pl) j->bubble_total += 1 - j->pl->compute_s / j->pl->run_s;
        }
        double eval_wall = 0;
        if (o->eval_every > 0 && ((s + 1) % o->eval_every == 0 || s + 1 == o->steps)) {
            double te = train_now_s();
            j->last_val = train_validation_loss(j);
            eval_wall = train_now_s() - te;
            rep.have_val = 1;
            rep.val_loss = j->last_val;
        }
        /* wall time of the rank-side causes of the launcher's time ledger (docs/LAUNCHER.md) */
        info.wall_ckpt_s = ckpt_wall, info.wall_data_s = data_wall, info.wall_eval_s = eval_wall;
        if (j->policy.auto_disk || j->policy.auto_mem) { /* measured costs; re-chosen every POLICY_EVERY steps */
            double inside = ckpt_wall - (rep.ckpt_ms > 0 ? rep.ckpt_ms * 1e-3 : 0); /* the copy's wait inside the step */
            if (s > j->first_step) /* the first step of a start includes its warm-up */
                ckpt_policy_measure(&j->policy, dt - inside, cost.disk_s, cost.disk_saved, cost.mem_s + inside, cost.mem_saved);
            if (s + 1 < j->last_step &&
                ckpt_policy_update(&j->policy, j->distributed ? comm_world() : NULL, s + 1, &j->o.save_every, &j->o.mem_ckpt_every) &&
                j->rank0) {
                char line[700];
                ckpt_policy_describe(&j->policy, line, sizeof line);
                fprintf(stderr, "myriad train: step %ld: %s\n", s + 1, line);
            }
        }
        progress_step(&progress, &rep);
        hb_step_info(s + 1, r.loss, &info);
        if (j->stop_signal) {
            j->last_step = s + 1;
            break;
        }
    }
    progress_close(&progress);
    free(config);
    free(x);
    free(y);
    if (!j->stop_signal && o->save_dir) {
        char what[1024];
        snprintf(what, sizeof what, "the end of the run (the final checkpoint and the export to %s) may not be written",
                 o->save_dir);
        train_stop_set_lost(what);
    }
}
