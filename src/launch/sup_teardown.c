/* sup_teardown.c: ending a failed (or stuck) attempt. Every rank pid known from HELLO gets SIGKILL
 * (which also ends SIGSTOPped ones); then the attempt is over as soon as every rank is gone, which
 * the launcher sees as each rank's heartbeat connection closing (a process's sockets close when it
 * dies, wherever it runs). Ranks on a lost host are not waited for (their host is abandoned), and
 * an attempt whose ranks had not all connected waits for its launcher as before (a rank that never
 * connected may still be starting). mpirun itself, whose own abort (printing, cleaning its session
 * directory and shared-memory segments) took 0.3-1.2 s after a kill and until our SIGTERM at 5 s
 * after a host loss (it waits for the lost host's daemon), is not waited for: it is parked and
 * reaped later (sup_reap_parked), with the same escalation: SIGTERM to its process group at 5 s
 * (a SIGTERM in the middle of Open MPI 4.1's abort can crash mpirun, so not earlier), SIGKILL at 7 s.
 * srun is waited for (SIGINT, SIGKILL after 2 s): a new step must not start on GPUs whose tasks
 * Slurm has not yet killed. MYRIAD_TEARDOWN_WAIT=1 waits for mpirun too (the old behaviour, kept
 * for bench/recovery.sh's before/after). Before/after: bench/recovery_results.md. */
#define _GNU_SOURCE
#include "launch/sup_state.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int cmp_pid(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Every rank that could still run is gone: connected in this attempt and its connection closed,
 * or on a host that is lost. */
static int ranks_gone(Sup *s) {
    hb_drain(s); /* EOFs waiting to be read */
    for (int r = 0; r < s->o->nranks; r++) {
        const RankState *rs = &s->ranks[r];
        int lost = 0;
        for (int h = 0; h < s->nhosts && !lost; h++) lost = s->hosts[h].lost && !strcmp(s->hosts[h].name, rs->host);
        if (lost) continue;
        if (!rs->connected || !rs->closed) return 0;
    }
    return 1;
}

static void park(Sup *s, pid_t child, double t0) {
    s->parked = realloc(s->parked, ((size_t)s->nparked + 1) * sizeof *s->parked);
    s->parked[s->nparked].pid = child, s->parked[s->nparked].t0 = t0, s->parked[s->nparked].termed = 0;
    s->nparked++;
}

void sup_teardown(Sup *s, pid_t child, int *status) {
    cJSON *e = sup_event("kill");
    cJSON_AddNumberToObject(e, "attempt", s->attempt);
    cJSON *pids = cJSON_AddArrayToObject(e, "pids");
    long long *list = malloc((size_t)s->o->nranks * sizeof *list);
    int n = 0;
    for (int r = 0; r < s->o->nranks; r++)
        if (s->ranks[r].connected && !s->ranks[r].closed && s->ranks[r].pid > 0 &&
            (!s->use_srun || !strcmp(s->ranks[r].host, s->self_host))) /* srun: a pid elsewhere is not ours */
            list[n++] = s->ranks[r].pid;
    qsort(list, (size_t)n, sizeof *list, cmp_pid); /* each process once (simulated ranks share one) */
    for (int i = 0; i < n; i++)
        if (i == 0 || list[i] != list[i - 1]) {
            kill((pid_t)list[i], SIGKILL);
            cJSON_AddItemToArray(pids, cJSON_CreateNumber((double)list[i]));
        }
    free(list);
    cJSON_AddNumberToObject(e, "launcher_pid", child);
    sup_emit(e);
    /* srun --quit-on-interrupt: one SIGINT makes srun kill the step's tasks on every node */
    if (s->use_srun) kill(child, SIGINT);
    /* mpirun: 5 s to abort by itself, then SIGTERM, SIGKILL at 7 s; srun has had its SIGINT and may
     * wait for a dead node's answer: SIGKILL after 2 s (the step's tasks on the live nodes were killed
     * by their slurmstepd) */
    double t0 = sup_now(), term_at = s->use_srun ? 2 : 5, kill_at = s->use_srun ? 2 : 7;
    const char *wait_env = getenv("MYRIAD_TEARDOWN_WAIT");
    int early = !s->use_srun && !(wait_env && *wait_env && strcmp(wait_env, "0"));
    int reaped = 0, termed = 0;
    while (!reaped) {
        pid_t w = waitpid(child, status, WNOHANG);
        if (w == child) reaped = 1;
        else if (early && ranks_gone(s)) {
            park(s, child, t0); /* its ranks are gone: the rest of its abort need not hold the relaunch */
            return;
        } else if (!termed && sup_now() > t0 + term_at && term_at < kill_at) kill(-child, SIGTERM), termed = 1;
        else if (sup_now() > t0 + kill_at) {
            kill(-child, SIGKILL);
            waitpid(child, status, 0);
            reaped = 1;
        } else usleep(early ? 2000 : 20000);
    }
    kill(-child, SIGKILL); /* stragglers left in the group */
}

void sup_reap_parked(Sup *s, int block) {
    while (s->nparked) {
        int k = 0;
        for (int i = 0; i < s->nparked; i++) {
            pid_t pid = s->parked[i].pid;
            double age = sup_now() - s->parked[i].t0;
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid) {
                kill(-pid, SIGKILL); /* stragglers left in its group */
                continue;
            }
            if (age > 7) {
                kill(-pid, SIGKILL);
                waitpid(pid, &st, 0);
                continue;
            }
            if (age > 5 && !s->parked[i].termed) kill(-pid, SIGTERM), s->parked[i].termed = 1;
            s->parked[k++] = s->parked[i];
        }
        s->nparked = k;
        if (!block || !k) break;
        usleep(20000);
    }
    if (!s->nparked) free(s->parked), s->parked = NULL;
}
