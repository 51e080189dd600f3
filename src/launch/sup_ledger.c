/* sup_ledger.c: the supervisor's side of the time ledger (the bookkeeping is ledger.c): what each
 * stretch of the job's wall time was, decided from what the launcher sees (launches, connections,
 * job steps, failures, teardowns) and what the ranks report (their start-up phases with FROM, the
 * wall time of checkpoint stalls, data and evaluation with each STEP). Per heartbeat O(1): the
 * rank-side times go into a ring by step (max over ranks); per job step O(ranks) only while some
 * rank scores as slow (the straggler share). Emits the `ledger` event of each attempt, the
 * `recovery` event of each failure (its phases, from the failure to the first new step) and the
 * `goodput` event at the end. Rules: docs/LAUNCHER.md, "Time ledger". */
#define _GNU_SOURCE
#include "launch/sup_state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sup_ledger_open(Sup *s, int preflight_ran) {
    SupLedger *g = &s->led;
    ledger_init(&g->l, sup_t_start);
    g->compute = malloc((size_t)s->o->nranks * LEDGER_RANK_RING * sizeof *g->compute);
    g->compute_step = malloc((size_t)s->o->nranks * LEDGER_RANK_RING * sizeof *g->compute_step);
    for (int i = 0; i < s->o->nranks * LEDGER_RANK_RING; i++) g->compute_step[i] = -1;
    for (int i = 0; i < LEDGER_RING; i++) g->ring[i].step = -1;
    g->best_before = g->best_job_step = -1;
    g->critical = -1;
    /* a --preflight check ran before the supervisor started; else this is the launcher's own start */
    ledger_account(&g->l, preflight_ran ? LEDGER_PREFLIGHT : LEDGER_LAUNCH, sup_now());
}

static cJSON *attempt_event(const Sup *s, int a) {
    cJSON *e = sup_event("ledger");
    cJSON_AddNumberToObject(e, "attempt", a);
    cJSON_AddItemToObject(e, "seconds", ledger_row_json(&s->led.l.att[a]));
    return e;
}

void sup_ledger_account(Sup *s, int cause) { ledger_account(&s->led.l, cause, sup_now()); }

void sup_ledger_launch(Sup *s) {
    SupLedger *g = &s->led;
    /* between a teardown and this launch: lost-node checks, waiting for Slurm or a spare */
    if (s->attempt > 0) {
        ledger_account(&g->l, LEDGER_SPARE_WAIT, sup_now());
        sup_emit(attempt_event(s, s->attempt - 1));
    } else ledger_account(&g->l, LEDGER_LAUNCH, sup_now());
    ledger_set_attempt(&g->l, s->attempt);
    g->start_done = 0, g->critical = -1, g->have_start = 0;
    g->t_fault = g->t_declared = 0;
    g->best_before = g->best_job_step;
    for (int i = 0; i < LEDGER_RING; i++) g->ring[i].step = -1;
    for (int i = 0; i < s->o->nranks * LEDGER_RANK_RING; i++) g->compute_step[i] = -1;
}

void sup_ledger_connected(Sup *s, int r) { s->led.critical = r; }

void sup_ledger_from(Sup *s, int r, const HbMsg *m) {
    if (r != s->led.critical || !m->has_start) return;
    s->led.start = m->start;
    s->led.have_start = 1;
}

/* The attempt's start, from its launch to every rank connected (the timeline's t0): the rank that
 * connected last (it decided when the job could start) said how long its process had run and how
 * long MPI init, the setup and the restore took; the rest before its process began is the launch,
 * the rest after the restore is the rejoin. Without its report (a program that sends none) the
 * whole start is the launch. */
static void account_start(Sup *s) {
    SupLedger *g = &s->led;
    if (g->start_done) return;
    g->start_done = 1;
    double t0 = s->tl[s->attempt].t0;
    if (!(t0 > 0)) return;
    if (!g->have_start) {
        ledger_account(&g->l, LEDGER_LAUNCH, t0);
        return;
    }
    const HbStartInfo *h = &g->start;
    double mpi = h->mpi_s > 0 ? h->mpi_s : 0, setup = h->setup_s > 0 ? h->setup_s : 0;
    double restore = h->restore_s > 0 ? h->restore_s : 0, post = h->post_s > 0 ? h->post_s : 0;
    /* its FROM came just after t0: counting back from there, the restore ended post_s before, and
     * MPI init began mpi + setup + restore + post before; what precedes (mpirun's start, the exec,
     * option parsing) is the launch */
    double begin = t0 - (mpi + setup + restore + post);
    int src = strncmp(s->source, "disk", 4) ? LEDGER_RESTORE_MEMORY : LEDGER_RESTORE_DISK;
    if (!s->source[0] || !strcmp(s->source, "started-from-scratch")) src = LEDGER_SETUP;
    double t = begin;
    ledger_account(&g->l, LEDGER_LAUNCH, t < t0 ? t : t0);
    ledger_account(&g->l, LEDGER_MPI_INIT, (t += mpi) < t0 ? t : t0);
    ledger_account(&g->l, LEDGER_SETUP, (t += setup) < t0 ? t : t0);
    ledger_account(&g->l, src, (t += restore) < t0 ? t : t0);
    ledger_account(&g->l, LEDGER_REJOIN, t0);
}

void sup_ledger_sample(Sup *s, int r, const HbMsg *m) {
    SupLedger *g = &s->led;
    const HbStepInfo *in = &m->info;
    typeof(g->ring[0]) *slot = &g->ring[m->step % LEDGER_RING];
    if (slot->step < m->step) slot->step = m->step, slot->v[0] = slot->v[1] = slot->v[2] = 0;
    if (slot->step == m->step) {
        double v[3] = {in->wall_ckpt_s, in->wall_data_s, in->wall_eval_s};
        for (int k = 0; k < 3; k++)
            if (v[k] > slot->v[k]) slot->v[k] = v[k];
    }
    double c = 0;
    int known = 0;
    static const int compute[] = {HB_SEC_DATA, HB_SEC_FORWARD, HB_SEC_BACKWARD, HB_SEC_OPTIMIZER};
    for (int k = 0; k < 4; k++)
        if (in->section_s[compute[k]] >= 0) c += in->section_s[compute[k]], known = 1;
    size_t at = (size_t)r * LEDGER_RANK_RING + (size_t)(m->step % LEDGER_RANK_RING);
    g->compute[at] = known ? c : NAN;
    g->compute_step[at] = m->step;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Time of step `step` above the cohort's pace: the slowest compute among the ranks whose latest
 * straggler window scored both of their scores under the threshold, minus the median compute of
 * all ranks at that step. 0 while no rank scores as slow (ordinary jitter is not a straggler). */
static double straggler_share(Sup *s, long long step) {
    const SupLedger *g = &s->led;
    double thr = s->o->straggler.threshold, slow = -1;
    int n = s->o->nranks;
    for (int r = 0; r < n; r++) {
        const RankState *rs = &s->ranks[r];
        if (!(rs->relative < thr && rs->individual < thr)) continue;
        size_t at = (size_t)r * LEDGER_RANK_RING + (size_t)(step % LEDGER_RANK_RING);
        if (g->compute_step[at] == step && g->compute[at] > slow) slow = g->compute[at];
    }
    if (slow < 0) return 0;
    double *v = malloc((size_t)n * sizeof *v);
    int k = 0;
    for (int r = 0; r < n; r++) {
        size_t at = (size_t)r * LEDGER_RANK_RING + (size_t)(step % LEDGER_RANK_RING);
        if (g->compute_step[at] == step && isfinite(g->compute[at])) v[k++] = g->compute[at];
    }
    double med = 0;
    if (k) {
        qsort(v, (size_t)k, sizeof *v, cmp_double);
        med = k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
    }
    free(v);
    return slow > med ? slow - med : 0;
}

/* The phases of a recovery: the ledger's causes from the failure to the start of the first step
 * no attempt had completed before (completed = 0: another failure struck first). */
static void emit_recovery(Sup *s, int completed) {
    SupLedger *g = &s->led;
    g->recovering = 0;
    LedgerRow d;
    for (int c = 0; c < LEDGER_CAUSES; c++) d.seconds[c] = g->l.total.seconds[c] - g->at_failure.seconds[c];
    cJSON *e = sup_event("recovery");
    cJSON_AddNumberToObject(e, "attempt", g->fail_attempt + 1);
    cJSON_AddStringToObject(e, "failure", g->rec_kind);
    cJSON_AddBoolToObject(e, "completed", completed);
    cJSON_AddNumberToObject(e, "failure_t", round((g->rec_fault_t - sup_t_start) * 1000) / 1000);
    cJSON_AddNumberToObject(e, "declared_t", round((g->rec_declared_t - sup_t_start) * 1000) / 1000);
    if (completed && s->source[0]) cJSON_AddStringToObject(e, "source", s->source);
    cJSON *p = cJSON_AddObjectToObject(e, "phases");
    static const struct {
        const char *name;
        int cause[3];
    } phases[] = {{"detection", {LEDGER_DETECTION, -1}},
                  {"teardown", {LEDGER_TEARDOWN, -1}},
                  {"spare_wait", {LEDGER_SPARE_WAIT, -1}},
                  {"reshard", {LEDGER_RESHARD, -1}},
                  {"launch", {LEDGER_LAUNCH, -1}},
                  {"mpi_init", {LEDGER_MPI_INIT, -1}},
                  {"setup", {LEDGER_SETUP, -1}},
                  {"restore", {LEDGER_RESTORE_MEMORY, LEDGER_RESTORE_DISK, -1}},
                  {"rejoin", {LEDGER_REJOIN, -1}},
                  {"replay", {LEDGER_RECOMPUTED, LEDGER_CHECKPOINT, LEDGER_DATA}}};
    double total = 0;
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
        double v = 0;
        for (int k = 0; k < 3 && phases[i].cause[k] >= 0; k++) v += d.seconds[phases[i].cause[k]];
        cJSON_AddNumberToObject(p, phases[i].name, round(v * 1000) / 1000);
        total += v;
    }
    cJSON_AddNumberToObject(e, "total_s", round(total * 1000) / 1000);
    cJSON_AddNumberToObject(e, "ranks", s->o->nranks);
    sup_emit(e);
}

void sup_ledger_job_step(Sup *s, long long step, double t) {
    SupLedger *g = &s->led;
    if (g->t_declared) return; /* heartbeats read after the verdict: the attempt is over (teardown) */
    account_start(s);
    if (g->recovering && step > g->best_before) emit_recovery(s, 1);
    if (step <= g->best_before) { /* computed before, lost with a failure: computed again */
        ledger_step(&g->l, t, LEDGER_RECOMPUTED, NULL, NULL, 0);
        return;
    }
    const typeof(g->ring[0]) *slot = &g->ring[step % LEDGER_RING];
    int causes[4] = {LEDGER_CHECKPOINT, LEDGER_DATA, LEDGER_EVAL, LEDGER_STRAGGLER};
    double sub[4] = {0, 0, 0, straggler_share(s, step)};
    if (slot->step == step) sub[0] = slot->v[0], sub[1] = slot->v[1], sub[2] = slot->v[2];
    ledger_step(&g->l, t, LEDGER_PRODUCTIVE, causes, sub, 4);
    if (step > g->best_job_step) g->best_job_step = step;
}

void sup_ledger_fault(Sup *s, double t) {
    if (!s->led.t_fault) s->led.t_fault = t;
}

void sup_ledger_declared(Sup *s, const char *kind) {
    SupLedger *g = &s->led;
    g->t_declared = sup_now();
    if (!g->t_fault || g->t_fault > g->t_declared) g->t_fault = g->t_declared;
    snprintf(g->fail_kind, sizeof g->fail_kind, "%s", kind);
}

void sup_ledger_failed(Sup *s) {
    SupLedger *g = &s->led;
    if (!g->t_declared) return;
    double tf = g->t_fault > g->l.t_mark ? g->t_fault : g->l.t_mark;
    if (!g->start_done && s->all_connected) account_start(s);
    /* the step in flight when the failure struck is lost and computed again (or, before every
     * rank had connected, the start itself was) */
    ledger_account(&g->l, g->start_done ? LEDGER_RECOMPUTED : LEDGER_LAUNCH, tf);
    if (g->recovering) emit_recovery(s, 0); /* the previous failure's recovery did not get this far */
    g->at_failure = g->l.total;
    g->recovering = 1;
    g->fail_attempt = s->attempt;
    g->rec_fault_t = tf, g->rec_declared_t = g->t_declared;
    memcpy(g->rec_kind, g->fail_kind, sizeof g->rec_kind);
    ledger_account(&g->l, LEDGER_DETECTION, g->t_declared);
}

double sup_ledger_close(Sup *s, int cause) {
    SupLedger *g = &s->led;
    double t = sup_now();
    if (!g->start_done && s->all_connected && !s->failed) account_start(s);
    ledger_account(&g->l, cause, t);
    return t - sup_t_start;
}

void sup_ledger_report(Sup *s, double wall_s) {
    SupLedger *g = &s->led;
    double *wall = &wall_s;
    sup_emit(attempt_event(s, g->l.cur));
    cJSON *e = sup_event("goodput");
    cJSON_AddNumberToObject(e, "wall_s", round(*wall * 1000) / 1000);
    cJSON_AddItemToObject(e, "seconds", ledger_row_json(&g->l.total));
    double prod = g->l.total.seconds[LEDGER_PRODUCTIVE];
    cJSON_AddNumberToObject(e, "effective", *wall > 0 ? round(prod / *wall * 10000) / 10000 : 0);
    cJSON *att = cJSON_AddArrayToObject(e, "attempts");
    for (int a = 0; a < g->l.natt; a++) cJSON_AddItemToArray(att, ledger_row_json(&g->l.att[a]));
    cJSON_AddItemToObject(e, "timeline", ledger_timeline_json(&g->l));
    sup_emit(e);
    char line[1400];
    ledger_summary(&g->l.total, *wall, line, sizeof line);
    fprintf(stderr, "myriad run: time ledger: effective training time %.1f%%; %s\n", *wall > 0 ? 100 * prod / *wall : 0, line);
}

void sup_ledger_free(Sup *s) {
    SupLedger *g = &s->led;
    free(g->compute), free(g->compute_step);
    ledger_free(&g->l);
    g->compute = NULL, g->compute_step = NULL;
}
