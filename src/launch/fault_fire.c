/* fault_fire.c: the launcher performs the faults of --inject (parsed by inject.c) when the ranks
 * report their steps: kill, hang (SIGSTOP), host loss (and --cut-link-cmd), a flipped bit under
 * --ckpt-dir, a shell command (cmd@, --fault-cmd); and the hold steps (MYRIAD_HB_HOLD) that make
 * a fault land exactly at its step. */
#define _GNU_SOURCE
#include "launch/sup_state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Flip one pseudo-random bit of one pseudo-random non-empty file under dir. */
static void collect_files(const char *dir, char ***list, int *n, int *cap, int depth) {
    DIR *d = opendir(dir);
    if (!d || depth > 8) {
        if (d) closedir(d);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) collect_files(path, list, n, cap, depth + 1);
        else if (S_ISREG(st.st_mode) && st.st_size > 0) {
            if (*n == *cap) *cap = *cap ? 2 * *cap : 16, *list = realloc(*list, (size_t)*cap * sizeof **list);
            (*list)[(*n)++] = strdup(path);
        }
    }
    closedir(d);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void corrupt_one(Sup *s, long long step) {
    cJSON *e = sup_event("inject");
    cJSON_AddStringToObject(e, "fault", "corrupt");
    cJSON_AddNumberToObject(e, "step", (double)step);
    char **files = NULL;
    int n = 0, cap = 0;
    if (s->o->ckpt_dir) collect_files(s->o->ckpt_dir, &files, &n, &cap, 0);
    if (n == 0) {
        cJSON_AddStringToObject(e, "error", s->o->ckpt_dir ? "no file under the checkpoint dir" : "no --ckpt-dir given");
        sup_emit(e);
        return;
    }
    qsort(files, (size_t)n, sizeof *files, cmp_str); /* directory order is not deterministic */
    /* a shard (*.bin) of the newest directory that holds shards (step-NNNNNNNN sorts by step), so
     * the flip lands in the checkpoint a resume would load; any file when there are no shards */
    const char *newest = NULL;
    size_t newest_len = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(files[i]);
        const char *slash = strrchr(files[i], '/');
        if (len < 4 || strcmp(files[i] + len - 4, ".bin") || !slash) continue;
        size_t dl = (size_t)(slash - files[i]);
        if (!newest || strncmp(files[i], newest, dl > newest_len ? dl : newest_len) > 0) newest = files[i], newest_len = dl;
    }
    int m = 0;
    char **pick = malloc((size_t)n * sizeof *pick);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(files[i]);
        if (!newest || (len > newest_len + 4 && !strncmp(files[i], newest, newest_len) && files[i][newest_len] == '/' &&
                        !strchr(files[i] + newest_len + 1, '/') && !strcmp(files[i] + len - 4, ".bin")))
            pick[m++] = files[i];
    }
    const char *path = pick[inject_next(&s->corrupt_state) % (uint64_t)m];
    free(pick);
    int fd = open(path, O_RDWR);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0) {
        off_t off = (off_t)(inject_next(&s->corrupt_state) % (uint64_t)st.st_size);
        int bit = (int)(inject_next(&s->corrupt_state) % 8);
        unsigned char byte;
        if (pread(fd, &byte, 1, off) == 1) {
            byte ^= (unsigned char)(1u << bit);
            if (pwrite(fd, &byte, 1, off) == 1) fsync(fd);
        }
        cJSON_AddStringToObject(e, "file", path);
        cJSON_AddNumberToObject(e, "offset", (double)off);
        cJSON_AddNumberToObject(e, "bit", bit);
    } else cJSON_AddStringToObject(e, "error", strerror(errno));
    if (fd >= 0) close(fd);
    sup_emit(e);
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
}

static void update_next_fault_step(Sup *s) {
    const FaultPlan *p = &s->o->plan;
    s->next_fault_step = LLONG_MAX;
    for (int i = 0; i < p->n; i++)
        if (!p->faults[i].fired && p->faults[i].step < s->next_fault_step) s->next_fault_step = p->faults[i].step;
}

/* slow@ takes effect in the rank itself (MYRIAD_INJECT_SLOW); the launcher logs it once, when the
 * rank reports the step, and remembers its host: an eviction to a spare ends the slowness. */
static void announce_slow(Sup *s, Fault *f) {
    RankState *rs = &s->ranks[f->rank];
    f->fired = 1;
    snprintf(f->host, sizeof f->host, "%s", rs->host);
    cJSON *e = sup_event("inject");
    cJSON_AddStringToObject(e, "fault", "slow");
    cJSON_AddNumberToObject(e, "step", (double)f->step);
    cJSON_AddNumberToObject(e, "rank", f->rank);
    cJSON_AddStringToObject(e, "host", rs->host);
    cJSON_AddNumberToObject(e, "factor", f->factor);
    sup_emit(e);
}

/* cmd@STEP: the --fault-cmd shell command, run to its end while the ranks wait at STEP (tests make
 * a node die, mark it down in Slurm or send Slurm's warning signal exactly there). */
static void run_fault_cmd(Sup *s, long long step) {
    cJSON *e = sup_event("inject");
    cJSON_AddStringToObject(e, "fault", "cmd");
    cJSON_AddNumberToObject(e, "step", (double)step);
    char st[24];
    snprintf(st, sizeof st, "%lld", step);
    setenv("MYRIAD_FAULT_STEP", st, 1);
    fflush(stdout), fflush(stderr);
    int rc = system(s->o->fault_cmd);
    s->el.hosts_checked = 0; /* it may have changed --hosts (tests add a host so): --elastic looks at once */
    cJSON_AddNumberToObject(e, "status", WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc));
    sup_emit(e);
}

/* Carry out a job-ending fault (kill, hang, host loss) now: on rank r, or on f->host. `d`: the draw
 * of the --inject-rate clock that chose it (NULL for a fault at a step). */
static void strike(Sup *s, Fault *f, int r, long long step, const ClockDraw *d) {
    cJSON *e = sup_event("inject");
    cJSON_AddStringToObject(e, "fault", fault_kind_name(f->kind));
    cJSON_AddNumberToObject(e, "step", (double)step);
    if (d) {
        cJSON_AddNumberToObject(e, "clock_index", (double)d->index);
        cJSON_AddNumberToObject(e, "after_s", round(d->after_s * 1000) / 1000);
    }
    s->fault_fired_this_attempt = 1;
    if (f->kind == FAULT_HOST) {
        int h = -1;
        for (int j = 0; j < s->nactive; j++)
            if (!strcmp(s->hosts[s->active[j]].name, f->host)) h = s->active[j];
        cJSON_AddStringToObject(e, "host", f->host);
        if (h < 0) {
            cJSON_AddStringToObject(e, "error", "host is not in use");
            sup_emit(e);
            s->fault_fired_this_attempt = 0;
            return;
        }
        cJSON *pids = cJSON_AddArrayToObject(e, "pids");
        for (int q = 0; q < s->o->nranks; q++)
            if (s->ranks[q].connected && !strcmp(s->ranks[q].host, f->host))
                cJSON_AddItemToArray(pids, cJSON_CreateNumber((double)s->ranks[q].pid));
        s->lost_host_this_attempt = h;
        s->hosts[h].lost = 1;
        /* the event, then the failure's time (time ledger), then the kills, as for a rank below:
         * killing first once put the event 11 ms after the failure it caused */
        sup_emit(e);
        sup_ledger_fault(s, sup_now());
        for (int q = 0; q < s->o->nranks; q++)
            if (s->ranks[q].connected && !strcmp(s->ranks[q].host, f->host)) kill((pid_t)s->ranks[q].pid, SIGKILL);
        if (s->o->cut_link_cmd) {
            setenv("MYRIAD_LOST_HOST", f->host, 1);
            int rc = system(s->o->cut_link_cmd);
            cJSON *c = sup_event("link-cut");
            cJSON_AddStringToObject(c, "host", f->host);
            cJSON_AddNumberToObject(c, "status", rc);
            sup_emit(c);
        }
        return;
    }
    RankState *rs = &s->ranks[r];
    cJSON_AddNumberToObject(e, "rank", r);
    cJSON_AddNumberToObject(e, "pid", (double)rs->pid);
    cJSON_AddStringToObject(e, "host", rs->host);
    /* the event first, then the fault's time and the signal: the event log's time of the fault
     * is never later than the ledger's (sup_emit stamps its own time; a signal sent first once
     * put the event 5 ms after the failure it caused) */
    sup_emit(e);
    sup_ledger_fault(s, sup_now());
    kill((pid_t)rs->pid, f->kind == FAULT_KILL ? SIGKILL : SIGSTOP);
    if (f->kind == FAULT_HANG) {
        s->stop_time[r] = sup_now();
        progress_stop_running(s, r); /* the others are released without it; the hang timeout finds it */
        holds_release(s);
    }
}

/* Fire due faults after rank r reported `step`. At most one job-ending fault per attempt, so
 * COUNT faults cost COUNT restarts (a second kill during the teardown would be invisible). */
void faults_fire(Sup *s, int r, long long step) {
    FaultPlan *p = &s->o->plan;
    int fired = 0;
    for (int i = 0; i < p->n; i++) {
        Fault *f = &p->faults[i];
        if (f->fired || step < f->step) continue;
        if (f->kind == FAULT_SLOW) {
            if (f->rank == r) announce_slow(s, f), fired = 1;
            continue;
        }
        if (f->kind == FAULT_NAN) { /* the rank did it itself (train --inject-nan); reported for the record */
            f->fired = 1;
            cJSON *e = sup_event("inject");
            cJSON_AddStringToObject(e, "fault", "nan");
            cJSON_AddNumberToObject(e, "step", (double)f->step);
            cJSON_AddNumberToObject(e, "rank", f->rank);
            sup_emit(e);
            continue;
        }
        if (f->kind == FAULT_CORRUPT) {
            f->fired = fired = 1;
            corrupt_one(s, step);
            continue;
        }
        if (f->kind == FAULT_CMD) { /* once every rank is at the step, waiting there for GO */
            if (s->job_step < f->step || s->failed) continue;
            f->fired = fired = 1;
            run_fault_cmd(s, f->step);
            continue;
        }
        if (s->fault_fired_this_attempt || s->failed) continue;
        if (f->job_level) { /* random: due once the slowest rank reached the step */
            if (s->job_step < f->step) continue;
            r = f->rank % s->o->nranks; /* its drawn rank (of a smaller --elastic size: modulo), or the slowest one still running if that one is done */
            if (s->ranks[r].done || s->ranks[r].closed)
                for (int q = 0; q < s->o->nranks; q++)
                    if (!s->ranks[q].done && !s->ranks[q].closed && (r == f->rank % s->o->nranks || s->ranks[q].step < s->ranks[r].step)) r = q;
            if (s->ranks[r].done || s->ranks[r].closed) continue;
        } else if ((f->kind == FAULT_KILL || f->kind == FAULT_HANG) && f->rank != r) continue;
        f->fired = fired = 1;
        strike(s, f, r, step, NULL);
    }
    if (fired) update_next_fault_step(s);
}

/* Fault steps of this attempt: every rank waits after reporting one until the launcher says GO,
 * which it does once every rank still running has reported it and the faults due have fired;
 * so kill@6:1 finds rank 1 right after step 6 and corrupt@7 finds the checkpoints of step 7. */
static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int holds_has(const Sup *s, long long step) { /* holds: ascending */
    return s->nholds && bsearch(&step, s->holds, (size_t)s->nholds, sizeof *s->holds, cmp_ll) != NULL;
}

/* The hold steps of a new attempt: those of the faults not fired yet (MYRIAD_HB_HOLD), distinct,
 * ascending, at most HOLD_MAX (the earliest: faults fire in step order, and the next attempt lists
 * the rest), so the variable stays far below the kernel's limit on one environment string. slow@
 * needs no hold (the rank slows itself from its step on): it goes to MYRIAD_INJECT_SLOW instead,
 * while the rank still runs on the host it was slowed on (a spare that replaced it is healthy). */
enum { HOLD_MAX = 4096 };
void faults_begin_attempt(Sup *s) {
    const FaultPlan *p = &s->o->plan;
    s->holds = realloc(s->holds, ((size_t)p->n + 1) * sizeof *s->holds);
    s->nholds = 0;
    size_t cap = 1, len = 0;
    char *slow = calloc(cap, 1);
    for (int i = 0; i < p->n; i++) {
        const Fault *f = &p->faults[i];
        if (f->kind == FAULT_NAN) continue; /* no hold: the rank acts inside the step */
        if (f->kind != FAULT_SLOW) {
            if (!f->fired) s->holds[s->nholds++] = f->step;
            continue;
        }
        int gone = 0; /* slowed on a host that is now lost or evicted */
        for (int h = 0; h < s->nhosts && f->fired; h++) gone |= s->hosts[h].lost && !strcmp(s->hosts[h].name, f->host);
        if (gone) continue;
        char item[96];
        int n = snprintf(item, sizeof item, "%s%lld:%d:%.17g", len ? "," : "", f->step, f->rank, f->factor);
        if (len + (size_t)n + 1 > cap) cap = 2 * (len + (size_t)n + 1), slow = realloc(slow, cap);
        memcpy(slow + len, item, (size_t)n + 1), len += (size_t)n;
    }
    if (len) setenv("MYRIAD_INJECT_SLOW", slow, 1);
    else unsetenv("MYRIAD_INJECT_SLOW");
    free(slow);
    qsort(s->holds, (size_t)s->nholds, sizeof *s->holds, cmp_ll);
    int n = 0;
    for (int i = 0; i < s->nholds && n < HOLD_MAX; i++)
        if (!n || s->holds[i] != s->holds[n - 1]) s->holds[n++] = s->holds[i];
    s->nholds = n;
    char *env = malloc((size_t)n * 21 + 1);
    len = 0;
    env[0] = 0;
    for (int i = 0; i < n; i++) len += (size_t)sprintf(env + len, "%s%lld", i ? "," : "", s->holds[i]);
    setenv("MYRIAD_HB_HOLD", env, 1);
    free(env);
    s->held_ranks = realloc(s->held_ranks, (size_t)s->o->nranks * sizeof *s->held_ranks);
    s->nheld = 0, s->min_held = LLONG_MAX;
    update_next_fault_step(s);
}

void holds_add(Sup *s, int r, long long step) {
    if (s->ranks[r].held >= 0) return;
    s->ranks[r].held = step;
    s->held_ranks[s->nheld++] = r;
    if (step < s->min_held) s->min_held = step;
}

/* GO to every rank held at a step that every running rank has reached (the running minimum). */
void holds_release(Sup *s) {
    if (!s->nheld || s->min_held > s->run_min) return;
    int k = 0;
    long long mn = LLONG_MAX;
    for (int i = 0; i < s->nheld; i++) {
        int r = s->held_ranks[i];
        RankState *rs = &s->ranks[r];
        if (rs->held > s->run_min) {
            s->held_ranks[k++] = r;
            if (rs->held < mn) mn = rs->held;
            continue;
        }
        char go[40];
        snprintf(go, sizeof go, "GO %lld\n", rs->held);
        if (!rs->closed && rs->fd >= 0) hb_send_line(rs->fd, go);
        /* released now: a rank that waited for the others is not the one that went silent */
        if (s->stop_time[r] == 0) progress_touch(s, r);
        rs->held = -1;
    }
    s->nheld = k, s->min_held = mn;
}

/* ---------- the Poisson clock (--inject-rate, util/fault_clock.h) ---------- */

/* Every rank has connected: this attempt's up time starts, and the clock's next fault is due one
 * exponential draw from now. One draw per attempt, so the schedule is the seed's whatever the
 * machine's speed: attempt a waits draw a (when every attempt ends with a clock fault). */
void faults_clock_arm(Sup *s) {
    FaultClock *c = &s->o->plan.clock;
    s->clock_due = INFINITY;
    if (!(c->mtbf_s > 0)) return;
    fault_clock_draw(c, &s->clock_draw);
    s->clock_due = s->tl[s->attempt].t0 + s->clock_draw.after_s;
}

/* The clock's fault, once due, while the job still computes steps: not before its first step nor
 * after its last (`train --steps`, or once any rank is done: the finish is no step), and not after
 * another job-ending fault of this attempt. A kill or hang strikes the drawn rank (pick % ranks),
 * a host loss the host of the drawn rank. */
void faults_clock_check(Sup *s) {
    if (!(sup_now() >= s->clock_due)) return;
    const FaultPlan *p = &s->o->plan;
    s->clock_due = INFINITY;
    if (s->failed || s->fault_fired_this_attempt || s->ndone > 0) return;
    if (p->clock_last_step > 0 && s->job_step >= p->clock_last_step) return;
    int n = s->o->nranks, r0 = (int)(s->clock_draw.pick % (uint64_t)n), r = -1;
    for (int k = 0; k < n && r < 0; k++) /* the drawn rank, or the next one that runs */
        if (s->ranks[(r0 + k) % n].running) r = (r0 + k) % n;
    if (r < 0) return;
    Fault f = {.rank = r, .step = s->job_step};
    f.kind = s->clock_draw.kind == CLOCK_HANG ? FAULT_HANG : s->clock_draw.kind == CLOCK_HOST ? FAULT_HOST : FAULT_KILL;
    if (f.kind == FAULT_HOST) snprintf(f.host, sizeof f.host, "%s", s->ranks[r].host);
    strike(s, &f, r, s->job_step < 0 ? 0 : s->job_step, &s->clock_draw);
}
