/* rank_progress.c: what the supervisor knows of the job's progress: the job step (the slowest
 * rank's), each attempt's timeline of it (for goodput), and the hang and start timeouts. Every
 * heartbeat costs O(1) here, whatever the number of ranks: the minimum step is kept with the
 * count of ranks at it (rescanned only when that count reaches 0, i.e. once per step of the job),
 * and the hang watch is a list ordered by last progress (a rank that progresses moves to its
 * tail), so the rank silent longest is always its head. */
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

/* ---------- the hang watch list ---------- */

static void unlink_rank(Sup *s, int r) {
    RankState *rs = &s->ranks[r];
    if (rs->watch_prev >= 0) s->ranks[rs->watch_prev].watch_next = rs->watch_next;
    else s->watch_head = rs->watch_next;
    if (rs->watch_next >= 0) s->ranks[rs->watch_next].watch_prev = rs->watch_prev;
    else s->watch_tail = rs->watch_prev;
    rs->watch_prev = rs->watch_next = -1;
}

static void append_rank(Sup *s, int r) {
    RankState *rs = &s->ranks[r];
    rs->watch_prev = s->watch_tail, rs->watch_next = -1;
    if (s->watch_tail >= 0) s->ranks[s->watch_tail].watch_next = r;
    else s->watch_head = r;
    s->watch_tail = r;
}

void progress_touch(Sup *s, int r) {
    RankState *rs = &s->ranks[r];
    rs->last_progress = sup_now(); /* the newest: the tail keeps the list in order */
    if (!rs->watched) return;
    unlink_rank(s, r);
    append_rank(s, r);
}

void progress_unwatch(Sup *s, int r) {
    if (!s->ranks[r].watched) return;
    unlink_rank(s, r);
    s->ranks[r].watched = 0;
}

/* ---------- minimum steps ---------- */

/* The minimum step over all ranks (the job step) and over the running ones (holds), recounted. */
static void rescan_min(Sup *s) {
    long long mn = LLONG_MAX;
    int at = 0;
    for (int r = 0; r < s->o->nranks; r++) {
        long long st = s->ranks[r].step;
        if (st < mn) mn = st, at = 1;
        else if (st == mn) at++;
    }
    s->min_step = mn, s->n_at_min = at;
}

static void rescan_run_min(Sup *s) {
    long long mn = LLONG_MAX;
    int at = 0;
    for (int r = 0; r < s->o->nranks; r++) {
        if (!s->ranks[r].running) continue;
        long long st = s->ranks[r].step;
        if (st < mn) mn = st, at = 1;
        else if (st == mn) at++;
    }
    s->run_min = mn, s->run_at_min = at;
}

void progress_begin_attempt(Sup *s) {
    s->watch_head = s->watch_tail = -1;
    s->nconnected = s->ndone = s->nrunning = 0;
    s->min_step = -1, s->n_at_min = s->o->nranks; /* every rank at -1: nothing reported */
    s->run_min = LLONG_MAX, s->run_at_min = 0;
    for (int r = 0; r < s->o->nranks; r++) {
        RankState *rs = &s->ranks[r];
        rs->watch_prev = rs->watch_next = -1;
        rs->fd = -1;
        rs->step_s = rs->relative = rs->individual = NAN;
    }
}

void progress_connected(Sup *s, int r) {
    RankState *rs = &s->ranks[r];
    rs->connected = rs->running = rs->watched = 1;
    s->nconnected++;
    append_rank(s, r);
    rs->last_progress = sup_now();
    s->nrunning++;
    if (rs->step < s->run_min) s->run_min = rs->step, s->run_at_min = 1;
    else if (rs->step == s->run_min) s->run_at_min++;
}

void progress_stop_running(Sup *s, int r) {
    RankState *rs = &s->ranks[r];
    if (!rs->running) return;
    rs->running = 0;
    s->nrunning--;
    if (rs->step == s->run_min && --s->run_at_min == 0) rescan_run_min(s);
}

/* Job step = the slowest rank's step, once every rank has reported; extends the timeline.
 * 1: it advanced. */
static int advance_job_step(Sup *s) {
    long long mn = s->min_step;
    if (mn < 0 || mn <= s->job_step) return 0;
    Timeline *tl = &s->tl[s->attempt];
    if (s->job_step < 0) { /* once per attempt */
        long long lo = LLONG_MAX, recomputed = 0;
        for (int r = 0; r < s->o->nranks; r++) {
            RankState *rs = &s->ranks[r];
            lo = rs->first_step < lo ? rs->first_step : lo;
            /* steps this rank had reported in earlier attempts that it computes again */
            long long again = rs->best_step_before - rs->first_step + 1;
            if (again > recomputed) recomputed = again;
        }
        if (s->attempt > 0 || lo > 1) { /* a relaunch, or a run (a requeued job) resuming a checkpoint */
            cJSON *e = sup_event("resumed");
            cJSON_AddNumberToObject(e, "attempt", s->attempt);
            cJSON_AddNumberToObject(e, "first_step", (double)lo);
            cJSON_AddNumberToObject(e, "recomputed_steps", (double)recomputed);
            if (s->source[0]) cJSON_AddStringToObject(e, "source", s->source);
            if (s->copy_rejected) cJSON_AddBoolToObject(e, "corrupt_copy_skipped", 1);
            sup_emit(e);
        }
        tl->s0 = lo;
        if (s->straggler) straggler_begin(s->straggler, lo - 1);
    }
    double now = sup_now();
    for (long long st = s->job_step < 0 ? tl->s0 : s->job_step + 1; st <= mn; st++) {
        double prev = st == tl->s0 ? tl->t0 : tl->n > 0 ? tl->t[tl->n - 1] : tl->t0;
        progress_timeline_add(tl, st, now);
        sup_ledger_job_step(s, st, now);
        if (st > tl->s0 || tl->t0 > 0) { /* the step-time histogram of /metrics */
            static const double le[STEP_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
            double d = now - prev;
            s->m.step_count++, s->m.step_sum += d;
            for (int b = 0; b < STEP_BUCKETS; b++) s->m.step_buckets[b] += d <= le[b];
        }
    }
    s->job_step = mn;
    return 1;
}

/* A rank reported `step` (from: its resumed position, the next step it computes is step + 1). */
int progress_report(Sup *s, int r, long long step, int from) {
    RankState *rs = &s->ranks[r];
    if (rs->first_step < 0) rs->first_step = from ? step + 1 : step;
    if (!from && step > rs->best_step) rs->best_step = step;
    if (step <= rs->step) {
        if (from) progress_touch(s, r);
        return 0;
    }
    long long old = rs->step;
    rs->step = step;
    progress_touch(s, r);
    if (rs->running && old == s->run_min && --s->run_at_min == 0) rescan_run_min(s);
    if (old == s->min_step && --s->n_at_min == 0) {
        rescan_min(s); /* once per step of the job: O(1) per heartbeat on average */
        return advance_job_step(s);
    }
    return 0;
}

/* ---------- timeouts ---------- */

double progress_deadline(const Sup *s) {
    double d = INFINITY;
    if (s->o->hang_timeout > 0 && s->watch_head >= 0) d = s->ranks[s->watch_head].last_progress + s->o->hang_timeout;
    if (s->o->start_timeout > 0 && s->nconnected < s->o->nranks && s->launch_time + s->o->start_timeout < d)
        d = s->launch_time + s->o->start_timeout;
    return d;
}

/* Detect hung ranks: silent for --hang-timeout, or not connected --start-timeout after launch.
 * With collectives a stuck rank stalls everyone; the rank that went silent first (the head of
 * the watch list) is blamed. */
void progress_check_timeouts(Sup *s) {
    double t = sup_now();
    int worst = s->watch_head;
    if (s->o->hang_timeout > 0 && worst >= 0 && t - s->ranks[worst].last_progress > s->o->hang_timeout) {
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
        sup_ledger_fault(s, s->stop_time[worst] > 0 ? s->stop_time[worst] : rs->last_progress);
        sup_fail(s, FAIL_HANG, "rank %d (pid %lld on %s) made no progress for %.1f s after step %lld", worst, rs->pid,
                 rs->host, t - rs->last_progress, rs->step);
        return;
    }
    if (s->o->start_timeout > 0 && s->nconnected < s->o->nranks && t - s->launch_time > s->o->start_timeout) {
        for (int r = 0; r < s->o->nranks; r++)
            if (!s->ranks[r].connected) {
                cJSON *e = sup_event("heartbeat-timeout");
                cJSON_AddNumberToObject(e, "rank", r);
                cJSON_AddStringToObject(e, "why", "never connected");
                cJSON_AddNumberToObject(e, "timeout_s", s->o->start_timeout);
                sup_emit(e);
                sup_fail(s, FAIL_NEVER_CONNECTED, "rank %d never connected within %.0f s of the launch", r,
                         s->o->start_timeout);
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
