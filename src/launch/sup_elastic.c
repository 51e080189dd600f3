/* sup_elastic.c: `myriad run --elastic MIN` in the supervisor: a job that loses a host with no
 * spare left goes on at the largest data-parallel size the surviving hosts hold (the global batch
 * kept by more gradient accumulation, the state resharded from the newest disk checkpoint), down to
 * MIN; while it runs below its full size the --hosts file is read again about once a second, and
 * when hosts were added the ranks are asked to checkpoint and stop (SIGUSR1, as for a graceful
 * stop) and the job is relaunched at the size the hosts now hold, from that checkpoint. Each change
 * is an event (shrink, hosts-added, resizing, grow) and its time is the ledger's `reshard` cause.
 * The layouts themselves: elastic.c. Rules: docs/OPERATIONS.md, "Going on when the spares run out". */
#define _GNU_SOURCE
#include "launch/sup_state.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/error.h"

static int host_active(const Sup *s, int h) {
    for (int k = 0; k < s->nactive; k++)
        if (s->active[k] == h) return 1;
    return 0;
}

/* The hosts a job may use now, in order of preference: the active ones that are not lost (their
 * ranks keep their places), then the unused ones that are not lost (spares, hosts added). */
static int candidates(const Sup *s, int *out, int *slots) {
    int n = 0;
    *slots = 0;
    for (int k = 0; k < s->nactive; k++)
        if (!s->hosts[s->active[k]].lost) out[n++] = s->active[k], *slots += s->hosts[s->active[k]].slots;
    for (int h = 0; h < s->nhosts; h++)
        if (!s->hosts[h].lost && !host_active(s, h)) out[n++] = h, *slots += s->hosts[h].slots;
    return n;
}

static cJSON *host_names(const Sup *s, const int *idx, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(s->hosts[idx[i]].name));
    return a;
}

/* The next attempt at size dp on the first candidates that hold its ranks. */
static void apply(Sup *s, int dp, int accum, const int *cand, int ncand) {
    Elastic *e = &s->el;
    int need = dp * e->group, got = 0, n = 0;
    while (n < ncand && got < need) got += s->hosts[cand[n++]].slots;
    memcpy(s->active, cand, (size_t)n * sizeof *cand);
    s->nactive = n;
    s->o->nranks = need;
    e->cur_dp = dp, e->cur_accum = accum;
}

static void add_sizes(const Sup *s, cJSON *ev, int from_dp, int from_accum) {
    const Elastic *e = &s->el;
    cJSON_AddNumberToObject(ev, "from_dp", from_dp);
    cJSON_AddNumberToObject(ev, "to_dp", e->cur_dp);
    cJSON_AddNumberToObject(ev, "full_dp", e->full_dp);
    cJSON_AddNumberToObject(ev, "ranks", s->o->nranks);
    cJSON_AddNumberToObject(ev, "global_batch", e->batch);
    cJSON_AddNumberToObject(ev, "micro_batch", e->micro);
    cJSON_AddNumberToObject(ev, "from_accum", from_accum);
    cJSON_AddNumberToObject(ev, "accum", e->cur_accum);
    cJSON_AddItemToObject(ev, "hosts", host_names(s, s->active, s->nactive));
}

int sup_elastic_shrink(Sup *s, const char *no_spare_msg) {
    Elastic *e = &s->el;
    char no_spare[512]; /* a copy: the message lives in the error buffer that elastic_fit writes */
    snprintf(no_spare, sizeof no_spare, "%s", no_spare_msg);
    if (!strncmp(no_spare, "run: ", 5)) memmove(no_spare, no_spare + 5, strlen(no_spare + 5) + 1);
    int *cand = malloc((size_t)s->nhosts * sizeof *cand), slots, dp, accum;
    int n = candidates(s, cand, &slots);
    if (elastic_fit(e, s->o->cmd, slots, &dp, &accum)) {
        char why[1024];
        snprintf(why, sizeof why, "run: %s, and --elastic %d cannot go on: %s", no_spare, e->min_dp, myr_last_error());
        free(cand);
        return myr_error("%s", why);
    }
    int from = e->cur_dp, from_accum = e->cur_accum;
    cJSON *lost = cJSON_CreateArray();
    for (int k = 0; k < s->nactive; k++)
        if (s->hosts[s->active[k]].lost) cJSON_AddItemToArray(lost, cJSON_CreateString(s->hosts[s->active[k]].name));
    apply(s, dp, accum, cand, n);
    free(cand);
    e->shrinks++;
    cJSON *ev = sup_event("shrink");
    cJSON_AddItemToObject(ev, "lost", lost);
    add_sizes(s, ev, from, from_accum);
    cJSON_AddNumberToObject(ev, "step", (double)s->led.best_job_step);
    cJSON_AddStringToObject(ev, "resume", "disk");
    sup_emit(ev);
    fprintf(stderr, "myriad run: %s: going on at dp %d of %d (%d ranks; global batch %d kept: %d micro-batch%s of %d "
            "per rank and step, was %d); it grows back when hosts are added to %s\n", no_spare, dp, e->full_dp,
            s->o->nranks, e->batch, accum, accum == 1 ? "" : "es", e->micro, from_accum,
            s->o->hosts_file ? s->o->hosts_file : "the hosts");
    sup_ledger_account(s, LEDGER_RESHARD); /* choosing the layout */
    return 0;
}

/* --hosts read again: hosts not seen before are added (unused: spares, or room to grow). Lines
 * removed from the file change nothing (a host in use stays in use; a lost one stays lost). */
static int reload_hosts(Sup *s) {
    Elastic *e = &s->el;
    struct stat st;
    if (!s->o->hosts_file || stat(s->o->hosts_file, &st) != 0) return 0;
    if (st.st_mtime == e->hosts_mtime && st.st_mtim.tv_nsec == e->hosts_mtime_ns && st.st_size == e->hosts_size) return 0;
    e->hosts_mtime = st.st_mtime, e->hosts_mtime_ns = st.st_mtim.tv_nsec, e->hosts_size = st.st_size;
    Host *now = NULL;
    int n = 0, added = 0;
    if (hosts_load(s->o->hosts_file, &now, &n) != 0) {
        cJSON *ev = sup_event("hosts-unreadable");
        cJSON_AddStringToObject(ev, "why", myr_last_error());
        sup_emit(ev);
        free(now);
        return 0;
    }
    cJSON *names = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        int known = 0;
        for (int h = 0; h < s->nhosts && !known; h++) known = !strcmp(s->hosts[h].name, now[i].name);
        if (known) continue;
        s->hosts = realloc(s->hosts, (size_t)(s->nhosts + 1) * sizeof *s->hosts);
        s->active = realloc(s->active, (size_t)(s->nhosts + 1) * sizeof *s->active);
        s->hosts[s->nhosts++] = now[i];
        cJSON_AddItemToArray(names, cJSON_CreateString(now[i].name));
        added++;
    }
    free(now);
    if (!added) {
        cJSON_Delete(names);
        return 0;
    }
    cJSON *ev = sup_event("hosts-added");
    cJSON_AddItemToObject(ev, "hosts", names);
    cJSON_AddStringToObject(ev, "file", s->o->hosts_file);
    sup_emit(ev);
    return added;
}

void sup_elastic_start(Sup *s) {
    struct stat st;
    if (s->o->hosts_file && stat(s->o->hosts_file, &st) == 0)
        s->el.hosts_mtime = st.st_mtime, s->el.hosts_mtime_ns = st.st_mtim.tv_nsec, s->el.hosts_size = st.st_size;
    s->el.hosts_checked = sup_now();
}

/* The size the hosts hold now, above the current one; 0 when none. */
static int grow_target(Sup *s, int *accum) {
    Elastic *e = &s->el;
    if (e->cur_dp >= e->full_dp) return 0;
    int *cand = malloc((size_t)s->nhosts * sizeof *cand), slots, dp = 0;
    candidates(s, cand, &slots);
    free(cand);
    if (slots / e->group <= e->cur_dp) return 0;
    if (elastic_fit(e, s->o->cmd, slots, &dp, accum) || dp <= e->cur_dp) return 0;
    return dp;
}

void sup_elastic_poll(Sup *s, pid_t child) {
    Elastic *e = &s->el;
    if (!e->min_dp || e->resizing || s->failed || sup_graceful_signal) return;
    double now = sup_now();
    if (now - e->hosts_checked < 1) return;
    e->hosts_checked = now;
    reload_hosts(s);
    /* a planned stop needs a running attempt: every rank connected and one step computed (its stop
     * handler installed), and room for the relaunch */
    if (e->cur_dp >= e->full_dp || !s->all_connected || s->tl[s->attempt].n < 1 || s->attempt + 1 >= s->max_attempts) return;
    int accum, dp = grow_target(s, &accum);
    if (!dp) return;
    e->resizing = 1, e->grow_dp = dp;
    e->resize_deadline = now + s->o->stop_grace;
    cJSON *ev = sup_event("resizing");
    cJSON_AddNumberToObject(ev, "from_dp", e->cur_dp);
    cJSON_AddNumberToObject(ev, "to_dp", dp);
    cJSON_AddNumberToObject(ev, "step", (double)s->job_step);
    cJSON_AddStringToObject(ev, "how", "checkpoint and stop (SIGUSR1), relaunch");
    sup_emit(ev);
    fprintf(stderr, "myriad run: hosts were added: growing back from dp %d to dp %d at the next step (checkpoint, "
            "relaunch)\n", e->cur_dp, dp);
    kill(child, SIGUSR1); /* mpirun and srun forward it to every rank: a checkpoint after the step they agree on */
}

int sup_elastic_grow(Sup *s, const char *why) {
    Elastic *e = &s->el;
    if (!e->min_dp || e->cur_dp >= e->full_dp) return 0;
    reload_hosts(s); /* hosts added since the last look (a relaunch after a failure is a restart point too) */
    int *cand = malloc((size_t)s->nhosts * sizeof *cand), slots, dp, accum;
    int n = candidates(s, cand, &slots);
    if (e->cur_dp >= e->full_dp || elastic_fit(e, s->o->cmd, slots, &dp, &accum) || dp <= e->cur_dp) {
        free(cand);
        return 0;
    }
    int from = e->cur_dp, from_accum = e->cur_accum;
    apply(s, dp, accum, cand, n);
    free(cand);
    e->grows++;
    cJSON *ev = sup_event("grow");
    add_sizes(s, ev, from, from_accum);
    cJSON_AddNumberToObject(ev, "step", (double)s->led.best_job_step);
    cJSON_AddStringToObject(ev, "at", why);
    cJSON_AddStringToObject(ev, "resume", "disk");
    sup_emit(ev);
    fprintf(stderr, "myriad run: growing back from dp %d to dp %d (%d ranks; %d micro-batch%s per rank and step) after "
            "%s\n", from, dp, s->o->nranks, accum, accum == 1 ? "" : "es", why);
    sup_ledger_account(s, LEDGER_RESHARD);
    return 1;
}
