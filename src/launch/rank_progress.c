/* rank_progress.c: what the supervisor knows of the job's progress: the job step (the slowest
 * rank's), each attempt's timeline of it (for goodput), and the hang and start timeouts. */
#define _GNU_SOURCE
#include "launch/sup_state.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>

void progress_timeline_add(Timeline *tl, long long step, double t) {
    if (tl->s0 < 0) tl->s0 = step;
    long long idx = step - tl->s0;
    if (idx < 0) return;
    while (tl->n <= idx) {
        if (tl->n == tl->cap) {
            tl->cap = tl->cap ? 2 * tl->cap : 64;
            tl->t = realloc(tl->t, (size_t)tl->cap * sizeof *tl->t);
        }
        tl->t[tl->n++] = t;
    }
}

/* Job step = the slowest rank's step, once every rank has reported; extends the timeline. */
void progress_update_job_step(Sup *s) {
    long long mn = LLONG_MAX;
    for (int r = 0; r < s->o->nranks; r++) mn = s->ranks[r].step < mn ? s->ranks[r].step : mn;
    if (mn < 0 || mn <= s->job_step) return;
    Timeline *tl = &s->tl[s->attempt];
    if (s->job_step < 0) {
        long long lo = LLONG_MAX, recomputed = 0;
        for (int r = 0; r < s->o->nranks; r++) {
            RankState *rs = &s->ranks[r];
            lo = rs->first_step < lo ? rs->first_step : lo;
            /* steps this rank had reported in earlier attempts that it computes again */
            long long again = rs->best_step_before - rs->first_step + 1;
            if (again > recomputed) recomputed = again;
        }
        if (s->attempt > 0) {
            cJSON *e = sup_event("resumed");
            cJSON_AddNumberToObject(e, "attempt", s->attempt);
            cJSON_AddNumberToObject(e, "first_step", (double)lo);
            cJSON_AddNumberToObject(e, "recomputed_steps", (double)recomputed);
            if (s->source[0]) cJSON_AddStringToObject(e, "source", s->source);
            if (s->copy_rejected) cJSON_AddBoolToObject(e, "corrupt_copy_skipped", 1);
            sup_emit(e);
        }
        tl->s0 = lo;
    }
    for (long long st = s->job_step < 0 ? tl->s0 : s->job_step + 1; st <= mn; st++) progress_timeline_add(tl, st, sup_now());
    s->job_step = mn;
    faults_fire(s, -1, mn); /* job-level (random) faults */
}

/* Detect hung ranks: silent for --hang-timeout, or not connected --start-timeout after launch.
 * With collectives a stuck rank stalls everyone; the rank that went silent first is blamed. */
void progress_check_timeouts(Sup *s) {
    double t = sup_now();
    int worst = -1;
    for (int r = 0; r < s->o->nranks; r++) {
        RankState *rs = &s->ranks[r];
        if (rs->done || !rs->connected || rs->closed) continue;
        if (s->o->hang_timeout > 0 && t - rs->last_progress > s->o->hang_timeout &&
            (worst < 0 || rs->last_progress < s->ranks[worst].last_progress))
            worst = r;
    }
    if (worst >= 0) {
        RankState *rs = &s->ranks[worst];
        cJSON *e = sup_event("heartbeat-timeout");
        cJSON_AddNumberToObject(e, "rank", worst);
        cJSON_AddNumberToObject(e, "pid", (double)rs->pid);
        cJSON_AddStringToObject(e, "host", rs->host);
        cJSON_AddNumberToObject(e, "step", (double)rs->step);
        cJSON_AddNumberToObject(e, "silent_s", round((t - rs->last_progress) * 1000) / 1000);
        cJSON_AddNumberToObject(e, "timeout_s", s->o->hang_timeout);
        if (s->stop_time[worst] > 0)
            cJSON_AddNumberToObject(e, "since_stop_s", round((t - s->stop_time[worst]) * 1000) / 1000);
        sup_emit(e);
        sup_fail(s, "rank %d (pid %lld on %s) made no progress for %.1f s after step %lld", worst, rs->pid, rs->host,
             t - rs->last_progress, rs->step);
        return;
    }
    if (s->o->start_timeout > 0 && t - s->launch_time > s->o->start_timeout) {
        for (int r = 0; r < s->o->nranks; r++)
            if (!s->ranks[r].connected) {
                cJSON *e = sup_event("heartbeat-timeout");
                cJSON_AddNumberToObject(e, "rank", r);
                cJSON_AddStringToObject(e, "why", "never connected");
                cJSON_AddNumberToObject(e, "timeout_s", s->o->start_timeout);
                sup_emit(e);
                sup_fail(s, "rank %d never connected within %.0f s of the launch", r, s->o->start_timeout);
                return;
            }
    }
}

/* Productive time: for every step of the final trajectory, its duration in the last attempt that
 * computed it (earlier computations of it were lost). docs/LAUNCHER.md defines it precisely. */
double progress_productive_time(Sup *s, int nattempts, long long *steps_out) {
    long long maxstep = -1;
    for (int a = 0; a < nattempts; a++)
        if (s->tl[a].s0 >= 0 && s->tl[a].s0 + s->tl[a].n - 1 > maxstep) maxstep = s->tl[a].s0 + s->tl[a].n - 1;
    double total = 0;
    long long steps = 0;
    for (long long st = 0; st <= maxstep; st++) {
        for (int a = nattempts - 1; a >= 0; a--) {
            Timeline *tl = &s->tl[a];
            if (tl->s0 < 0 || st < tl->s0 || st >= tl->s0 + tl->n) continue;
            double prev = st == tl->s0 ? tl->t0 : tl->t[st - 1 - tl->s0];
            total += tl->t[st - tl->s0] - prev;
            steps++;
            break;
        }
    }
    *steps_out = steps;
    return total;
}

