/* sup_straggler.c: the supervisor's side of straggler detection (the detector is straggler.c):
 * feeds it every rank's section times, logs each evaluated window (`rank-times`, for the run
 * report and the metrics) and each straggler (`straggler`), and with --straggler-action evict
 * ends the attempt so that the straggler's host is replaced by a spare. Events and fields:
 * docs/OPERATIONS.md. */
#define _GNU_SOURCE
#include "launch/sup_state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sup_straggler_sample(Sup *s, int r, const HbMsg *m) {
    if (!s->straggler) return;
    if (m->info.role >= 0) straggler_set_cohort(s->straggler, r, m->info.role);
    straggler_sample(s->straggler, r, m->step, m->info.section_s, s->ranks[r].step_s);
}

static cJSON *number_or_null(double v, double scale) {
    return isfinite(v) ? cJSON_CreateNumber(round(v * scale) / scale) : cJSON_CreateNull();
}

/* rank-times: every rank's medians over the window, per section, and its scores. Logged for
 * every window up to 1000 ranks; above, every k-th window (k = ranks / 1000, rounded up), so one
 * event never holds more than ~1000 ranks' worth per window on average. */
static void log_window(Sup *s, const StragglerWindow *w) {
    int n = w->nranks, every = (n + 999) / 1000;
    if (s->windows_logged++ % every) return;
    cJSON *e = sup_event("rank-times");
    cJSON_AddNumberToObject(e, "attempt", s->attempt);
    cJSON_AddNumberToObject(e, "first_step", (double)w->first_step);
    cJSON_AddNumberToObject(e, "last_step", (double)w->last_step);
    cJSON *a = cJSON_AddArrayToObject(e, "step_s");
    for (int r = 0; r < n; r++) cJSON_AddItemToArray(a, number_or_null(w->step_s[r], 1e6));
    cJSON *secs = cJSON_AddObjectToObject(e, "sections");
    for (int k = 0; k < STRAGGLER_SECTIONS; k++) {
        cJSON *v = cJSON_AddArrayToObject(secs, straggler_section_name(k));
        for (int r = 0; r < n; r++) cJSON_AddItemToArray(v, number_or_null(w->section_s[(size_t)r * STRAGGLER_SECTIONS + k], 1e6));
    }
    a = cJSON_AddArrayToObject(e, "relative");
    for (int r = 0; r < n; r++) cJSON_AddItemToArray(a, number_or_null(w->relative[r], 1e4));
    a = cJSON_AddArrayToObject(e, "individual");
    for (int r = 0; r < n; r++) cJSON_AddItemToArray(a, number_or_null(w->individual[r], 1e4));
    a = cJSON_AddArrayToObject(e, "horizon_relative");
    for (int r = 0; r < n; r++) cJSON_AddItemToArray(a, number_or_null(w->horizon_relative[r], 1e4));
    a = cJSON_AddArrayToObject(e, "horizon_individual");
    for (int r = 0; r < n; r++) cJSON_AddItemToArray(a, number_or_null(w->horizon_individual[r], 1e4));
    cJSON_AddItemToObject(e, "horizon_s", number_or_null(w->horizon_s, 1e3));
    sup_emit(e);
}

/* A spare is free for host index h (the same rule as replace_lost_hosts in supervise.c). */
static int spare_left(const Sup *s) {
    for (int j = s->nhosts - s->o->spares; j >= 0 && j < s->nhosts; j++) {
        int used = 0;
        for (int k = 0; k < s->nactive; k++) used |= s->active[k] == j;
        if (!used && !s->hosts[j].lost) return 1;
    }
    return 0;
}

static void flag(Sup *s, const StragglerWindow *w, int r) {
    RankState *rs = &s->ranks[r];
    int k = w->section[r], host = -1;
    for (int i = 0; i < s->nactive; i++)
        if (!strcmp(s->hosts[s->active[i]].name, rs->host)) host = s->active[i];
    const char *action = "warn";
    if (s->o->straggler_evict) {
        if (host < 0) action = "warn (evict needs --hosts or a Slurm allocation, with --spares)";
        else if (!spare_left(s)) action = "warn (no spare host left)";
        else if (s->failed) action = "warn (the attempt already failed)";
        else action = "evict";
    }
    s->m.stragglers++;
    cJSON *e = sup_event("straggler");
    cJSON_AddNumberToObject(e, "attempt", s->attempt);
    cJSON_AddNumberToObject(e, "rank", r);
    cJSON_AddStringToObject(e, "host", rs->host);
    cJSON_AddStringToObject(e, "section", k >= 0 ? straggler_section_name(k) : "compute");
    cJSON_AddItemToObject(e, "relative", number_or_null(w->relative[r], 1e4));
    cJSON_AddItemToObject(e, "individual", number_or_null(w->individual[r], 1e4));
    cJSON_AddItemToObject(e, "section_relative", number_or_null(k >= 0 ? w->sec_relative[r] : w->relative[r], 1e4));
    cJSON_AddItemToObject(e, "section_individual", number_or_null(k >= 0 ? w->sec_individual[r] : w->individual[r], 1e4));
    cJSON_AddItemToObject(e, "horizon_relative", number_or_null(w->horizon_relative[r], 1e4));
    cJSON_AddItemToObject(e, "horizon_individual", number_or_null(w->horizon_individual[r], 1e4));
    cJSON_AddItemToObject(e, "horizon_s", number_or_null(w->horizon_s, 1e3));
    cJSON_AddItemToObject(e, "median_s", number_or_null(w->section_s[(size_t)r * STRAGGLER_SECTIONS + STRAGGLER_COMPUTE], 1e6));
    cJSON_AddItemToObject(e, "reference_s", number_or_null(w->fastest_s[r], 1e6)); /* the peers' median */
    cJSON_AddItemToObject(e, "best_s", number_or_null(w->best_s[r], 1e6));
    cJSON_AddNumberToObject(e, "windows", w->below[r]);
    long long W = (w->last_step - w->first_step + 1) / 2; /* verdicts every W steps, medians over 2W */
    cJSON_AddNumberToObject(e, "first_step", (double)(w->first_step - (long long)(w->below[r] - 1) * W));
    cJSON_AddNumberToObject(e, "last_step", (double)w->last_step);
    cJSON_AddStringToObject(e, "action", action);
    sup_emit(e);
    if (strcmp(action, "evict")) return;
    s->hosts[host].lost = 1; /* replaced by a spare before the next attempt, like a lost host */
    /* Slurm has no reason to flag a slow node down: nothing to wait for (settle_lost_nodes); srun
     * --exclude keeps the job off it */
    s->hosts[host].settled = 1;
    s->lost_host_this_attempt = host;
    sup_fail(s, FAIL_STRAGGLER, "rank %d on %s is a straggler (compute %.2f relative, %.2f individual; slowest section %s): host evicted",
             r, rs->host, w->relative[r], w->individual[r], k >= 0 ? straggler_section_name(k) : "compute");
}

void sup_straggler_advance(Sup *s) {
    if (!s->straggler) return;
    const StragglerWindow *w;
    while ((w = straggler_advance(s->straggler, s->job_step))) {
        for (int r = 0; r < w->nranks; r++) s->ranks[r].relative = w->relative[r], s->ranks[r].individual = w->individual[r];
        log_window(s, w);
        for (int r = 0; r < w->nranks; r++)
            if (w->flagged[r] && s->ranks[r].running) flag(s, w, r);
    }
}
