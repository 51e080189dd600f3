/* preflight.c: `myriad run --preflight` (see preflight.h): launch `myriad doctor --json` over all
 * of the job's hosts through the job's own launcher (mpirun with the same hostfile syntax and
 * --mpirun-arg's, or srun), read its verdict, and rewrite the host list before the supervisor
 * starts. Inside a Slurm allocation without --hosts the hosts are the allocation's nodes (the last
 * --spares of them spares, as the supervisor takes them); the chosen ones are handed to the
 * supervisor as a hostfile of those nodes. Events `preflight` and `spare-used` go to the job's
 * event log. */
#define _GNU_SOURCE
#include "launch/preflight.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch/slurm.h"
#include "util/error.h"
#include "util/path.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One event line, `t` first (seconds since t0), on stderr and appended to the event log, as the
 * supervisor writes them. Takes ownership of obj. */
static void log_event(const SuperviseOpts *so, cJSON *obj) {
    cJSON *line = cJSON_CreateObject();
    cJSON_AddNumberToObject(line, "t", round((now_s() - so->t_start) * 1000) / 1000);
    while (obj->child) {
        cJSON *it = obj->child;
        cJSON_AddItemToObject(line, it->string, cJSON_DetachItemViaPointer(obj, it));
    }
    cJSON_Delete(obj);
    char *s = cJSON_PrintUnformatted(line);
    fprintf(stderr, "myriad run: %s\n", s);
    FILE *f = so->events_path ? fopen(so->events_path, "a") : NULL;
    if (f) fprintf(f, "%s\n", s), fclose(f);
    free(s);
    cJSON_Delete(line);
}

int preflight_choose(int n, int spares, const int *flagged, int *order, int *nwork_out, int *nspare_out, int *replaced_by) {
    int nwork = n - spares, next_spare = nwork, k = 0;
    for (int i = 0; i < nwork; i++) {
        replaced_by[i] = -1;
        if (!flagged[i]) {
            order[k++] = i;
            continue;
        }
        while (next_spare < n && flagged[next_spare]) next_spare++;
        if (next_spare >= n) return -1;
        replaced_by[i] = next_spare;
        order[k++] = next_spare++;
    }
    int ns = 0;
    for (int j = next_spare; j < n; j++)
        if (!flagged[j]) order[k + ns++] = j;
    *nwork_out = nwork, *nspare_out = ns;
    return 0;
}

/* argv of the doctor's launch over `hosts` (all of them), or here when nhosts == 0. */
static char **doctor_argv(const SuperviseOpts *so, const PreflightOpts *po, int use_srun, const char *tool,
                          const char *self, const char *hostfile, const Host *hosts, int nhosts, int nranks) {
    char **a = calloc((size_t)(so->nextra + po->ndoctor_args + 24), sizeof *a);
    int k = 0;
    char buf[64];
    a[k++] = strdup(tool);
    if (use_srun) {
        snprintf(buf, sizeof buf, "--ntasks=%d", nranks);
        a[k++] = strdup(buf);
        a[k++] = strdup("--kill-on-bad-exit=1");
        if (nhosts) { /* every slot of every host: rank r on line r of SLURM_HOSTFILE (hostfile) */
            snprintf(buf, sizeof buf, "--nodes=%d", nhosts);
            a[k++] = strdup(buf);
            a[k++] = strdup("--distribution=arbitrary");
        }
        int has_mpi = 0;
        for (int i = 0; i < so->nextra; i++) has_mpi |= !strncmp(so->extra[i], "--mpi", 5);
        if (!has_mpi) a[k++] = strdup("--mpi=pmix"); /* Open MPI ranks wire up through PMIx, as in the job */
    } else {
        snprintf(buf, sizeof buf, "%d", nranks);
        a[k++] = strdup("-np"), a[k++] = strdup(buf);
        a[k++] = strdup("--oversubscribe"), a[k++] = strdup("--bind-to"), a[k++] = strdup("none");
        if (hostfile) a[k++] = strdup("--hostfile"), a[k++] = strdup(hostfile);
        a[k++] = strdup("-x"), a[k++] = strdup("OMP_NUM_THREADS");
    }
    for (int i = 0; i < so->nextra; i++) a[k++] = strdup(so->extra[i]);
    a[k++] = strdup(self), a[k++] = strdup("doctor"), a[k++] = strdup("--json");
    for (int i = 0; i < po->ndoctor_args; i++) a[k++] = strdup(po->doctor_args[i]);
    a[k] = NULL;
    return a;
}

/* Run argv with stdout captured (stderr passes through); the child stays in our process group,
 * so a terminal's Ctrl-C reaches it too. NULL with myr_error() on failure or timeout. */
static char *run_capture(char **argv, const char *slurm_hostfile, double timeout_s, int *timed_out_out) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return myr_error("run: pre-flight: pipe: %s", strerror(errno)), NULL;
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return myr_error("run: pre-flight: fork: %s", strerror(errno)), NULL;
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        if (slurm_hostfile) setenv("SLURM_HOSTFILE", slurm_hostfile, 1);
        execv(argv[0], argv);
        fprintf(stderr, "myriad: run: cannot execute %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    double deadline = now_s() + timeout_s;
    int timed_out = 0;
    for (;;) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        double left = deadline - now_s();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        if (poll(&p, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR) break;
        if (!p.revents) continue;
        if (len + 4096 > cap) out = realloc(out, cap *= 2);
        ssize_t got = read(fds[0], out + len, cap - len - 1);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        len += (size_t)got;
    }
    close(fds[0]);
    out[len] = 0;
    if (timed_out) { /* mpirun takes its ranks down on SIGTERM; SIGKILL if it does not go */
        kill(pid, SIGTERM);
        for (int i = 0; i < 250 && waitpid(pid, NULL, WNOHANG) == 0; i++) usleep(20000);
        kill(pid, SIGKILL);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    *timed_out_out = timed_out;
    if (timed_out) {
        free(out);
        return myr_error("run: pre-flight: the doctor did not finish within %.0f s (--preflight-timeout); a host may "
                         "be unreachable, or the launch never started its ranks", timeout_s), NULL;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        free(out);
        return myr_error("run: pre-flight: the doctor failed (%s %d; its messages are above); a host may be down or "
                         "unreachable", WIFEXITED(status) ? "exit status" : "signal",
                         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status)), NULL;
    }
    return out;
}

/* The doctor's JSON document inside its captured output. */
static cJSON *parse_doctor(const char *out) {
    const char *key = strstr(out, "\"doctor\"");
    const char *start = key;
    while (start && start > out && *start != '{') start--;
    cJSON *doc = start && *start == '{' ? cJSON_ParseWithOpts(start, NULL, 0) : NULL;
    if (!doc || !cJSON_IsArray(cJSON_GetObjectItem(doc, "flagged"))) {
        cJSON_Delete(doc);
        myr_error("run: pre-flight: the doctor's output holds no JSON verdict (first bytes: %.80s)", out);
        return NULL;
    }
    return doc;
}

/* Host of the hostfile the doctor's name means: exact, else the same short name (up to '.'). */
static int host_index(const Host *hosts, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(hosts[i].name, name)) return i;
    size_t sl = strcspn(name, ".");
    for (int i = 0; i < n; i++)
        if (strcspn(hosts[i].name, ".") == sl && !strncmp(hosts[i].name, name, sl)) return i;
    return -1;
}

/* "A (reason); B (reason)" for the flagged hosts, for the refusal line. */
static void reasons(cJSON *doc, char *out, size_t n) {
    out[0] = 0;
    cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(doc, "flagged")) {
        const char *h = cJSON_GetStringValue(cJSON_GetObjectItem(f, "host")), *r = cJSON_GetStringValue(cJSON_GetObjectItem(f, "reason"));
        size_t used = strlen(out);
        snprintf(out + used, n - used, "%s%s: %s", used ? "; " : "", h ? h : "?", r ? r : "?");
    }
}

/* The nodes of this Slurm allocation as hosts, the ranks spread evenly over the working ones (the
 * supervisor's rule, supervise.c slurm_hosts), so every slot the job may use is checked. */
static int slurm_alloc_hosts(const SuperviseOpts *so, Host **out, int *n) {
    HostList nodes = {0};
    if (slurm_job_nodes(&nodes)) return -1;
    int working = nodes.n - so->spares;
    if (working < 1 || so->nranks % working) {
        int rc = myr_error("run: pre-flight: %d ranks do not spread evenly over the %d working nodes of this allocation "
                           "(%d nodes, --spares %d)", so->nranks, working, nodes.n, so->spares);
        hostlist_free(&nodes);
        return rc;
    }
    Host *h = calloc((size_t)nodes.n, sizeof *h);
    for (int i = 0; i < nodes.n; i++) {
        if (strlen(nodes.names[i]) >= sizeof h[i].name) {
            int rc = myr_error("run: node name '%s' is too long", nodes.names[i]);
            hostlist_free(&nodes), free(h);
            return rc;
        }
        snprintf(h[i].name, sizeof h[i].name, "%s", nodes.names[i]);
        h[i].slots = so->nranks / working;
    }
    *out = h, *n = nodes.n;
    hostlist_free(&nodes);
    return 0;
}

/* SLURM_HOSTFILE for srun --distribution=arbitrary: each host's name once per slot. */
static int write_rank_nodes(char *path, const Host *hosts, int n) {
    strcpy(path, "/tmp/myriad-hosts-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return myr_error("run: cannot create a hostfile: %s", strerror(errno));
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < n; i++)
        for (int k = 0; k < hosts[i].slots; k++) fprintf(f, "%s\n", hosts[i].name);
    if (fclose(f) != 0) return myr_error("run: cannot write hostfile %s: %s", path, strerror(errno));
    return 0;
}

int preflight_run(SuperviseOpts *so, const PreflightOpts *po, const char *self, char *new_hostfile) {
    new_hostfile[0] = 0;
    Host *hosts = NULL;
    int nhosts = 0, nranks = so->nranks;
    if (so->hosts_file) {
        if (hosts_load(so->hosts_file, &hosts, &nhosts) != 0) return -1;
        if (so->spares >= nhosts)
            return myr_error("run: --spares %d leaves no working host in %s (%d hosts)", so->spares, so->hosts_file, nhosts);
        nranks = 0;
        for (int i = 0; i < nhosts; i++) nranks += hosts[i].slots; /* every slot of every host is checked */
    }
    int use_srun = so->launcher ? !strcmp(so->launcher, "srun") : getenv("SLURM_JOB_ID") != NULL;
    int alloc_nodes = !so->hosts_file && use_srun && getenv("SLURM_JOB_ID");
    if (alloc_nodes) {
        if (slurm_alloc_hosts(so, &hosts, &nhosts) != 0) return -1;
        nranks = 0;
        for (int i = 0; i < nhosts; i++) nranks += hosts[i].slots;
    }
    char *tool = path_find_program(use_srun ? "srun" : "mpirun");
    if (!tool) {
        free(hosts);
        return myr_error("run: pre-flight: %s not found on PATH", use_srun ? "srun" : "mpirun");
    }
    char all_hosts[64] = "";
    int *idx = malloc((size_t)(nhosts + 1) * sizeof *idx);
    for (int i = 0; i < nhosts; i++) idx[i] = i;
    if (nhosts && (use_srun ? write_rank_nodes(all_hosts, hosts, nhosts) : hosts_write_temp(all_hosts, hosts, idx, nhosts)) != 0)
        return -1;
    char **argv = doctor_argv(so, po, use_srun, tool, self, all_hosts[0] ? all_hosts : NULL, hosts, nhosts, nranks);
    free(tool);
    char *line = argv_join(argv);
    if (so->dry_run) {
        if (use_srun && nhosts) { /* what SLURM_HOSTFILE holds, as the supervisor's dry run shows it */
            printf("# preflight SLURM_HOSTFILE (rank 0..%d):", nranks - 1);
            for (int i = 0; i < nhosts; i++)
                for (int k = 0; k < hosts[i].slots; k++) printf(" %s", hosts[i].name);
            printf("\n");
        }
        printf("preflight: %s\n", line);
        free(line), argv_free(argv), free(idx), free(hosts);
        if (all_hosts[0]) unlink(all_hosts);
        return 0;
    }
    double t0 = now_s();
    double limit = po->timeout_s > 0 ? po->timeout_s : 300;
    int timed_out = 0;
    const char *slurm_hostfile = use_srun && all_hosts[0] ? all_hosts : NULL;
    char *out = run_capture(argv, slurm_hostfile, limit, &timed_out);
    if (!out && timed_out) { /* as the supervisor relaunches a job that never starts, once */
        fprintf(stderr, "myriad run: pre-flight: %s; launching the doctor once more\n", myr_last_error());
        out = run_capture(argv, slurm_hostfile, limit, &timed_out);
    }
    argv_free(argv);
    if (all_hosts[0]) unlink(all_hosts);
    cJSON *doc = out ? parse_doctor(out) : NULL;
    free(out);
    int rc = 0;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "event", "preflight");
    cJSON_AddNumberToObject(e, "hosts", nhosts ? nhosts : 1);
    cJSON_AddNumberToObject(e, "ranks", nranks);
    cJSON_AddNumberToObject(e, "seconds", round((now_s() - t0) * 1000) / 1000);
    cJSON_AddStringToObject(e, "cmd", line);
    free(line);
    if (!doc) {
        cJSON_AddBoolToObject(e, "ok", 0);
        cJSON_AddStringToObject(e, "why", myr_last_error());
        log_event(so, e);
        free(idx), free(hosts);
        return -1;
    }
    if (po->out_path) {
        char *text = cJSON_Print(doc);
        FILE *f = fopen(po->out_path, "w");
        if (f) fprintf(f, "%s\n", text), fclose(f);
        else fprintf(stderr, "myriad: run: cannot write --preflight-out %s: %s\n", po->out_path, strerror(errno));
        free(text);
    }
    /* which hostfile entries are flagged */
    int *flagged = calloc((size_t)(nhosts + 1), sizeof *flagged), nflagged_hosts = 0, local_flagged = 0;
    cJSON *fl = cJSON_AddArrayToObject(e, "flagged"), *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(doc, "flagged")) {
        const char *h = cJSON_GetStringValue(cJSON_GetObjectItem(f, "host"));
        cJSON *copy = cJSON_CreateObject();
        cJSON_AddStringToObject(copy, "host", h ? h : "?");
        cJSON_AddStringToObject(copy, "check", cJSON_GetStringValue(cJSON_GetObjectItem(f, "check")) ?: "?");
        cJSON_AddStringToObject(copy, "reason", cJSON_GetStringValue(cJSON_GetObjectItem(f, "reason")) ?: "?");
        cJSON_AddItemToArray(fl, copy);
        local_flagged = 1;
        int i = h && nhosts ? host_index(hosts, nhosts, h) : -1;
        if (i >= 0 && !flagged[i]) flagged[i] = 1, nflagged_hosts++;
        else if (i < 0 && nhosts)
            fprintf(stderr, "myriad: run: pre-flight: flagged host '%s' is not in %s; ignored\n", h,
                    so->hosts_file ? so->hosts_file : "this Slurm allocation");
    }
    char why[2048];
    reasons(doc, why, sizeof why);
    if (!nhosts) { /* all ranks on this machine: nothing to swap it for */
        if (local_flagged) {
            rc = myr_error("run: pre-flight flagged this machine (%s) and there is no other host to use (give --hosts FILE "
                           "with --spares K)", why);
        }
    } else {
        int *order = malloc((size_t)nhosts * sizeof *order), *repl = malloc((size_t)nhosts * sizeof *repl), nw, nsp;
        if (preflight_choose(nhosts, so->spares, flagged, order, &nw, &nsp, repl) != 0) {
            int healthy_spares = 0;
            for (int j = nhosts - so->spares; j < nhosts; j++) healthy_spares += !flagged[j];
            int flagged_work = 0;
            for (int j = 0; j < nhosts - so->spares; j++) flagged_work += flagged[j];
            rc = myr_error("run: pre-flight flagged %d working host%s and only %d healthy spare%s remain%s (--spares %d): "
                           "%s; repair or replace them, or add spares",
                           flagged_work, flagged_work == 1 ? "" : "s", healthy_spares, healthy_spares == 1 ? "" : "s",
                           healthy_spares == 1 ? "s" : "", so->spares, why);
        } else if (nflagged_hosts) {
            cJSON *rp = cJSON_AddArrayToObject(e, "replaced");
            for (int i = 0; i < nw; i++)
                if (repl[i] >= 0) {
                    cJSON *r = cJSON_CreateObject();
                    cJSON_AddStringToObject(r, "host", hosts[i].name);
                    cJSON_AddStringToObject(r, "spare", hosts[repl[i]].name);
                    cJSON_AddItemToArray(rp, r);
                }
            if (hosts_write_temp(new_hostfile, hosts, order, nw + nsp) != 0) rc = -1;
            else so->hosts_file = new_hostfile, so->spares = nsp;
        }
        if (!rc) { /* the supervisor's own event for each swap, after the verdict */
            cJSON_AddBoolToObject(e, "ok", 1);
            log_event(so, e), e = NULL;
            for (int i = 0; i < nw && nflagged_hosts; i++)
                if (repl[i] >= 0) {
                    cJSON *s = cJSON_CreateObject();
                    cJSON_AddStringToObject(s, "event", "spare-used");
                    cJSON_AddStringToObject(s, "lost", hosts[i].name);
                    cJSON_AddStringToObject(s, "spare", hosts[repl[i]].name);
                    cJSON_AddStringToObject(s, "why", "preflight");
                    log_event(so, s);
                }
        }
        free(order), free(repl);
    }
    if (e) {
        cJSON_AddBoolToObject(e, "ok", rc == 0);
        if (rc) cJSON_AddStringToObject(e, "why", myr_last_error());
        log_event(so, e);
    }
    if (!rc) fprintf(stderr, "myriad run: pre-flight: %s\n", nflagged_hosts ? "launching on the healthy hosts" : "all hosts healthy");
    cJSON_Delete(doc);
    free(flagged), free(idx), free(hosts);
    return rc;
}
