/* slurm.c: the allocation's nodes and the verdict on lost ones for `myriad run` under Slurm
 * (see slurm.h). Slurm is asked through its own commands (squeue, sinfo, srun, scontrol), so
 * nothing here links against libslurm and any Slurm version with these commands works. */
#define _GNU_SOURCE
#include "launch/slurm.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"
#include "util/subprocess.h"

enum { PROBE_BATCH = 64, QUERY_TIMEOUT_S = 30 };

int slurm_job_nodes(HostList *out) {
    const char *list = getenv("SLURM_JOB_NODELIST");
    if (!list || !*list) list = getenv("SLURM_NODELIST");
    if (!getenv("SLURM_JOB_ID") || !list || !*list)
        return myr_error("run: not inside a Slurm allocation (SLURM_JOB_ID / SLURM_JOB_NODELIST unset); start it "
                         "under salloc or sbatch, or give --hosts FILE");
    return hostlist_expand(out, list, 0);
}

int slurm_state_down(const char *state) {
    static const char *bad[] = {"down", "drain", "fail", "power", "reboot", "future", "inval", "maint", "unknown"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!strncmp(state, bad[i], strlen(bad[i]))) return 1;
    return 0;
}

int slurm_state_unusable(const char *state) {
    size_t len = strlen(state);
    return (len && state[len - 1] == '*') /* not responding */ || slurm_state_down(state);
}

/* The nodes the job holds now (squeue); 0 with an empty list when Slurm no longer lists the job. */
static int job_nodes_now(HostList *out) {
    const char *job = getenv("SLURM_JOB_ID");
    if (!job) return 0;
    char *argv[] = {"squeue", "-h", "-j", (char *)job, "-o", "%N", NULL};
    Subproc p;
    int rc = subproc_run(&p, argv, 0, QUERY_TIMEOUT_S);
    if (rc == 0) {
        char *nl = strchr(p.out, '\n');
        if (nl) *nl = 0;
        if (p.out[0] && hostlist_expand(out, p.out, 0)) rc = -1;
    }
    subproc_free(&p);
    return rc;
}

/* Slurm's state of each node ("idle", "down*", ...) into states[i] (empty when sinfo omits it). */
static int node_states(char *const *nodes, int n, char (*states)[32]) {
    size_t cap = 64 + (size_t)n * 72;
    char *list = malloc(cap);
    if (hostlist_compress(nodes, n, list, cap)) {
        free(list);
        return myr_error("run: node list too long");
    }
    char *argv[] = {"sinfo", "-h", "-N", "-n", list, "-o", "%N %T", NULL};
    Subproc p;
    int rc = subproc_run(&p, argv, 0, QUERY_TIMEOUT_S);
    for (int i = 0; i < n; i++) states[i][0] = 0;
    if (rc == 0)
        for (char *line = strtok(p.out, "\n"); line; line = strtok(NULL, "\n")) {
            char name[64], st[32];
            if (sscanf(line, "%63s %31s", name, st) != 2) continue;
            for (int i = 0; i < n; i++)
                if (!strcmp(nodes[i], name) && (!states[i][0] || slurm_state_unusable(st))) snprintf(states[i], 32, "%s", st);
        }
    subproc_free(&p);
    free(list);
    return rc;
}

/* First line of a probe's output, for the event log. */
static void first_line(const char *s, char *out, size_t cap) {
    while (*s == '\n') s++;
    snprintf(out, cap, "%s", s);
    char *nl = strchr(out, '\n');
    if (nl) *nl = 0;
}

int slurm_find_lost(char *const *nodes, int n, double probe_timeout_s, SlurmLost *lost) {
    int nlost = 0;
    char *flagged = calloc((size_t)n + 1, 1);
    HostList now = {0};
    if (job_nodes_now(&now)) {
        free(flagged);
        return -1;
    }
    for (int i = 0; i < n && now.n; i++)
        if (hostlist_find(&now, nodes[i]) < 0) {
            snprintf(lost[nlost].node, sizeof lost[0].node, "%s", nodes[i]);
            snprintf(lost[nlost].why, sizeof lost[0].why, "Slurm removed it from job %s (node failure)", getenv("SLURM_JOB_ID"));
            nlost++, flagged[i] = 1;
        }
    hostlist_free(&now);
    char (*states)[32] = calloc((size_t)n + 1, sizeof *states);
    if (node_states(nodes, n, states)) {
        free(flagged), free(states);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (!flagged[i] && slurm_state_unusable(states[i])) {
            snprintf(lost[nlost].node, sizeof lost[0].node, "%s", nodes[i]);
            snprintf(lost[nlost].why, sizeof lost[0].why, "Slurm reports it %s", states[i]);
            nlost++, flagged[i] = 1;
        }
    free(states);
    /* the rest: can each still start a task? (a dead slurmd is not flagged before SlurmdTimeout) */
    for (int b = 0; probe_timeout_s > 0 && b < n; b += PROBE_BATCH) {
        int m = n - b < PROBE_BATCH ? n - b : PROBE_BATCH;
        Subproc *p = calloc((size_t)m, sizeof *p);
        for (int i = 0; i < m; i++) {
            p[i].status = -1, p[i].fd = -1;
            if (flagged[b + i]) continue;
            /* its own step, beside nothing (the failed step is torn down) but allowed to overlap one
             * that is still being cleaned up; no GPUs, one task */
            char *argv[] = {"srun", "-Q", "-N1", "-n1", "-w", nodes[b + i], "--overlap", "--quit-on-interrupt",
                            "--job-name=myriad-probe", "--mpi=none", "--gres=none", "--cpus-per-task=1",
                            "--distribution=block", "--ntasks-per-node=1", "true", NULL};
            if (subproc_start(&p[i], argv, 1)) p[i].status = 127;
        }
        subproc_wait_all(p, m, probe_timeout_s);
        for (int i = 0; i < m; i++) {
            if (flagged[b + i]) continue;
            if (p[i].status != 0) {
                char line[150];
                first_line(p[i].out ? p[i].out : "", line, sizeof line);
                snprintf(lost[nlost].node, sizeof lost[0].node, "%s", nodes[b + i]);
                if (p[i].timed_out)
                    snprintf(lost[nlost].why, sizeof lost[0].why, "a probe step (srun -w %s true) did not end within %.0f s",
                             nodes[b + i], probe_timeout_s);
                else
                    snprintf(lost[nlost].why, sizeof lost[0].why, "a probe step failed (exit %d)%s%s", p[i].status,
                             line[0] ? ": " : "", line);
                nlost++, flagged[b + i] = 1;
            }
            subproc_free(&p[i]);
        }
        free(p);
    }
    free(flagged);
    return nlost;
}

int slurm_release_nodes(char *const *nodes, int n) {
    const char *job = getenv("SLURM_JOB_ID");
    HostList now = {0};
    if (!job || job_nodes_now(&now)) return -1;
    char **keep = malloc((size_t)(now.n + 1) * sizeof *keep);
    int nkeep = 0;
    for (int i = 0; i < now.n; i++) {
        int lost = 0;
        for (int k = 0; k < n && !lost; k++) lost = !strcmp(now.names[i], nodes[k]);
        if (!lost) keep[nkeep++] = now.names[i];
    }
    int released = now.n - nkeep, rc = 0;
    if (released > 0 && nkeep > 0) {
        size_t cap = 64 + (size_t)nkeep * 72;
        char *arg = malloc(cap), jobarg[64];
        strcpy(arg, "NodeList=");
        snprintf(jobarg, sizeof jobarg, "JobId=%s", job);
        if (hostlist_compress(keep, nkeep, arg + 9, cap - 9)) rc = myr_error("run: node list too long");
        /* scontrol leaves slurm_job_ID_resize.{sh,csh} in its working directory: not the job's */
        char dir[] = "/tmp/myriad-resize-XXXXXX";
        if (!rc && !mkdtemp(dir)) rc = myr_error("run: cannot create a directory under /tmp");
        if (!rc) {
            char *argv[] = {"scontrol", "update", jobarg, arg, NULL};
            Subproc p;
            rc = subproc_run_in(&p, argv, 1, QUERY_TIMEOUT_S, dir);
            subproc_free(&p);
            char path[PATH_MAX];
            for (int i = 0; i < 2; i++) {
                snprintf(path, sizeof path, "%s/slurm_job_%s_resize.%s", dir, job, i ? "csh" : "sh");
                unlink(path);
            }
            rmdir(dir);
        }
        free(arg);
    }
    free(keep);
    hostlist_free(&now);
    return rc ? -1 : released;
}

int slurm_wait_flagged(char *const *nodes, int n, double max_s) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char (*states)[32] = calloc((size_t)n + 1, sizeof *states);
    int all = 0;
    for (;;) {
        /* sinfo alone is not enough: while a step that Slurm could not end on the dead node still
         * holds its CPUs, sinfo shows "mixed*" although scontrol says DOWN (22.05); Slurm removes a
         * node it declares down from a --no-kill job at the same moment, and squeue shows that */
        HostList now = {0};
        int listed = job_nodes_now(&now) == 0 && now.n > 0;
        int known = node_states(nodes, n, states) == 0;
        all = 1;
        for (int i = 0; i < n && all; i++)
            all = (known && slurm_state_down(states[i])) || (listed && hostlist_find(&now, nodes[i]) < 0);
        hostlist_free(&now);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (all || (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 >= max_s) break;
        sleep(1);
    }
    free(states);
    return all;
}

double slurm_slurmd_timeout(void) {
    char *argv[] = {"scontrol", "show", "config", NULL};
    Subproc p;
    double t = 300;
    if (subproc_run(&p, argv, 0, QUERY_TIMEOUT_S) == 0) {
        const char *k = strstr(p.out, "\nSlurmdTimeout");
        double v;
        if (k && (k = strchr(k, '=')) && sscanf(k + 1, "%lf", &v) == 1 && v > 0) t = v;
    }
    subproc_free(&p);
    return t;
}
