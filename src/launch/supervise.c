/* supervise.c: the supervising launcher behind `myriad run` when any fault-tolerance option is
 * given. Each attempt launches the job (mpirun, srun or the command itself, as a child in its own
 * process group), watches it (sup_loop.c: epoll over the heartbeat listener and connections,
 * timers for hang detection), and on a failure kills it, replaces lost hosts with spares and
 * relaunches with `--resume auto`, until it finishes or --max-restarts is spent. Under Slurm the
 * hosts are the allocation's nodes: lost nodes are found and settled with Slurm, and a job with no
 * spare left exits 75 for a requeue; SIGTERM/SIGUSR1 make the ranks checkpoint and stop. This file
 * owns the attempts, the hosts, the command lines and the summary; the rest of the supervisor is
 * split by job (sup_state.h lists the files). Formats, rules and the goodput definition:
 * docs/LAUNCHER.md and docs/SLURM.md. */
#define _GNU_SOURCE
#include "launch/sup_state.h"
#include "launch/sup_loop.h"
#include "launch/metrics.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch/mpi_noise.h"
#include "launch/rank_binding.h"
#include "launch/slurm.h"
#include "util/error.h"
#include "util/hostlist.h"
#include "util/path.h"
#include "util/sha256.h"

static volatile sig_atomic_t stop_signal, child_pgid;

static void say(const char *s) {
    for (size_t n = strlen(s); n > 0;) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w, n -= (size_t)w;
    }
}

/* SIGTERM, SIGUSR1 and a first SIGINT (Ctrl-C: the job runs in its own process group, so the
 * terminal's SIGINT reaches only this process) stop with a checkpoint: SIGUSR1 to the launcher,
 * which forwards it to every rank. A second SIGINT, or SIGHUP, stops at once. */
static void on_signal(int sig) {
    if (sig == SIGTERM || sig == SIGUSR1 || (sig == SIGINT && !sup_graceful_signal)) {
        if (sup_graceful_signal) return; /* already stopping (Slurm may signal both the script and us) */
        sup_graceful_signal = sig;
        if (sig == SIGINT)
            say("\nmyriad run: interrupt: every rank checkpoints after the step they agree on and stops; press "
                "Ctrl-C again to stop at once (losing the steps since the last checkpoint)\n");
        if (child_pgid > 0) kill(child_pgid, SIGUSR1);
        return;
    }
    /* a second SIGINT, SIGHUP: stop now. The watch loop wakes (epoll_wait is interrupted) and tears
     * the job down as after a failure: the ranks killed first, then mpirun (a SIGINT to mpirun while
     * it aborts can crash it) */
    if (!stop_signal) stop_signal = sig;
}

/* The exit status after a stop with checkpoints: 130 after Ctrl-C, 143 after SIGTERM, else 75
 * (SIGUSR1: Slurm's warning, a requeue). */
static int graceful_exit_code(void) {
    return sup_graceful_signal == SIGINT ? 128 + SIGINT : sup_graceful_signal == SIGTERM ? 128 + SIGTERM : SLURM_EXIT_REQUEUE;
}

/* ---------- command line of one attempt ---------- */

static int has_resume(char **cmd) {
    for (int i = 0; cmd[i]; i++)
        if (!strcmp(cmd[i], "--resume")) return 1;
    return 0;
}

/* The host of each rank: the working hosts in order, each for its slots (ranks of one host are
 * consecutive, as Open MPI's hostfile and srun's arbitrary distribution place them). Returns how
 * many distinct hosts get ranks. */
static int rank_hosts(const Host *hosts, const int *active, int nactive, int nranks, int *host_of_rank) {
    int r = 0, used = 0;
    for (int i = 0; i < nactive && r < nranks; i++, used++)
        for (int k = 0; k < hosts[active[i]].slots && r < nranks; k++) host_of_rank[r++] = active[i];
    return used;
}

/* argv for attempt `attempt` on hosts[active[0..nactive)] (hostfile already written: Open MPI's
 * for mpirun, one node per rank line for srun's --distribution=arbitrary via SLURM_HOSTFILE). */
static char **build_argv(SuperviseOpts *o, int use_srun, const char *tool, const char *hostfile, Host *hosts,
                         int nhosts, const int *active, int nactive, int attempt, const Elastic *el) {
    int ncmd = 0;
    while (o->cmd[ncmd]) ncmd++;
    char **a = calloc((size_t)(ncmd + o->nextra + 48 + 2 * o->plan.n), sizeof *a); /* + --inject-nan per fault */
    int k = 0;
    char buf[64];
    a[k++] = strdup(tool);
    if (use_srun) {
        snprintf(buf, sizeof buf, "--ntasks=%d", o->nranks);
        a[k++] = strdup(buf);
        if (nactive) {
            int *hr = malloc((size_t)o->nranks * sizeof *hr);
            snprintf(buf, sizeof buf, "--nodes=%d", rank_hosts(hosts, active, nactive, o->nranks, hr));
            free(hr);
            a[k++] = strdup(buf);
            a[k++] = strdup("--distribution=arbitrary"); /* rank r on line r of SLURM_HOSTFILE */
        }
        a[k++] = strdup("--kill-on-bad-exit=1"); /* one dead rank ends the step at once */
        a[k++] = strdup("--quit-on-interrupt");  /* teardown: one SIGINT ends the step on every node */
        /* Slurm keeps a failed step that had a task on a dead node until that node answers again,
         * holding its share of the other nodes: a relaunch must be allowed to overlap it */
        if (attempt > 0) a[k++] = strdup("--overlap");
        /* Open MPI ranks wire up through PMIx */
        if (!launch_args_have((const char *const *)o->extra, o->nextra, "--mpi")) a[k++] = strdup("--mpi=pmix");
        char **lost = malloc((size_t)(nhosts + 1) * sizeof *lost);
        int nlost = 0;
        for (int i = 0; i < nhosts; i++)
            if (hosts[i].lost) lost[nlost++] = hosts[i].name;
        if (nlost) {
            size_t cap = 16 + (size_t)nlost * 72;
            char *ex = malloc(cap);
            strcpy(ex, "--exclude=");
            if (hostlist_compress(lost, nlost, ex + 10, cap - 10)) ex[10] = 0;
            a[k++] = ex;
        }
        free(lost);
    } else {
        a[k++] = strdup("-np");
        snprintf(buf, sizeof buf, "%d", o->nranks);
        a[k++] = strdup(buf);
        a[k++] = strdup("--oversubscribe");
        const char *bind = rank_binding((const char *const *)o->extra, o->nextra, hostfile != NULL);
        if (bind) a[k++] = strdup("--bind-to"), a[k++] = strdup(bind);
        if (hostfile) a[k++] = strdup("--hostfile"), a[k++] = strdup(hostfile);
        /* remote daemons do not inherit the launcher's environment: export ours by name
         * (values travel inside Open MPI's launch message, never on a command line) */
        static const char *vars[] = {"MYRIAD_HB_ADDR", "MYRIAD_HB_SECRET", "MYRIAD_HB_ATTEMPT", "MYRIAD_HB_HOLD", "MYRIAD_CKPT_DIR",
                                     "MYRIAD_SHM_DIR", "MYRIAD_JOB_ID", "OMP_NUM_THREADS", "MYRIAD_MTBF_S",
                                     "MYRIAD_FAILURES"};
        for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
            if (getenv(vars[i])) a[k++] = strdup("-x"), a[k++] = strdup(vars[i]);
    }
    for (int i = 0; i < o->nextra; i++) a[k++] = strdup(o->extra[i]);
    for (int i = 0; i < ncmd; i++) a[k++] = strdup(o->cmd[i]);
    if (attempt > 0 && !has_resume(o->cmd)) a[k++] = strdup("--resume"), a[k++] = strdup("auto");
    if (el->min_dp) elastic_args(el, el->cur_dp, a, &k); /* --elastic below the full size: --dp K --micro-batch M */
    for (int i = 0; i < o->plan.n; i++) /* nan@: the rank itself turns a gradient to NaN (train --inject-nan) */
        if (o->plan.faults[i].kind == FAULT_NAN && !o->plan.faults[i].fired) {
            snprintf(buf, sizeof buf, "%lld:%d", o->plan.faults[i].step, o->plan.faults[i].rank);
            a[k++] = strdup("--inject-nan"), a[k++] = strdup(buf);
        }
    a[k] = NULL;
    return a;
}

/* --launcher direct: the command itself, once; it starts (or simulates) every rank. */
static char **direct_argv(const SuperviseOpts *o, int attempt) {
    int ncmd = 0;
    while (o->cmd[ncmd]) ncmd++;
    char **a = calloc((size_t)ncmd + 3, sizeof *a);
    for (int i = 0; i < ncmd; i++) a[i] = strdup(o->cmd[i]);
    if (attempt > 0 && !has_resume(o->cmd)) a[ncmd++] = strdup("--resume"), a[ncmd++] = strdup("auto");
    return a;
}

/* Bytes under dir (files of one level of subdirectories: the layout of in-memory copies), and
 * the newest modification time seen (*newest). */
static double dir_bytes(const char *dir, int depth, time_t *newest) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    double total = 0;
    struct stat self;
    if (!stat(dir, &self) && self.st_mtime > *newest) *newest = self.st_mtime;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st)) continue;
        if (S_ISDIR(st.st_mode) && depth > 0) total += dir_bytes(path, depth - 1, newest);
        else if (S_ISREG(st.st_mode)) {
            total += (double)st.st_blocks * 512;
            if (st.st_mtime > *newest) *newest = st.st_mtime;
        }
    }
    closedir(d);
    return total;
}

/* When the supervisor gives up, the job's in-memory copies stay in shared memory (a later
 * `--resume auto` of the same job restores from them): say where, how big, and how to free them.
 * The job's directories are those written since the supervisor started. */
static void report_leftover_copies(void) {
    const char *root = getenv("MYRIAD_SHM_DIR");
    if (!root || !*root) root = "/dev/shm";
    DIR *d = opendir(root);
    if (!d) return;
    time_t since = time(NULL) - (time_t)(sup_now() - sup_t_start) - 1;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "myriad-", 7)) continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", root, e->d_name);
        struct stat st;
        if (stat(path, &st) || !S_ISDIR(st.st_mode)) continue;
        time_t newest = 0;
        double mib = dir_bytes(path, 1, &newest) / 1048576.0;
        if (newest < since) continue; /* another job's */
        fprintf(stderr, "myriad: run: the job's in-memory copies remain in %s (%.1f MiB here, likewise on the other "
                "hosts): `--resume auto` of the same job restores from them; `rm -rf %s` frees them\n", path, mib,
                path);
        cJSON *x = sup_event("copies-left");
        cJSON_AddStringToObject(x, "dir", path);
        cJSON_AddNumberToObject(x, "mib", round(mib * 10) / 10);
        sup_emit(x);
    }
    closedir(d);
}

static int write_hostfile(Sup *s, char *path) {
    if (!s->use_srun) return hosts_write_temp(path, s->hosts, s->active, s->nactive);
    strcpy(path, "/tmp/myriad-hosts-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return myr_error("run: cannot create a hostfile: %s", strerror(errno));
    FILE *f = fdopen(fd, "w");
    /* SLURM_HOSTFILE for --distribution=arbitrary: line r = node of rank r */
    int *hr = malloc((size_t)s->o->nranks * sizeof *hr);
    rank_hosts(s->hosts, s->active, s->nactive, s->o->nranks, hr);
    for (int r = 0; r < s->o->nranks; r++) fprintf(f, "%s\n", s->hosts[hr[r]].name);
    free(hr);
    fclose(f);
    return 0;
}

/* After a failed attempt inside a Slurm allocation: which of its nodes are lost (Slurm flags them,
 * removed them from the job, or a probe step fails there); each is marked and logged (node-lost). */
static void find_lost_nodes(Sup *s) {
    char **names = malloc((size_t)s->nhosts * sizeof *names);
    int *idx = malloc((size_t)s->nhosts * sizeof *idx), n = 0;
    for (int i = 0; i < s->nhosts; i++)
        if (!s->hosts[i].lost) names[n] = s->hosts[i].name, idx[n++] = i;
    SlurmLost *lost = calloc((size_t)n + 1, sizeof *lost);
    int nlost = n ? slurm_find_lost(names, n, s->o->probe_timeout, lost) : 0;
    if (nlost < 0) {
        cJSON *e = sup_event("node-check-failed");
        cJSON_AddStringToObject(e, "why", myr_last_error());
        sup_emit(e);
    }
    for (int k = 0; k < nlost; k++)
        for (int i = 0; i < n; i++)
            if (!strcmp(names[i], lost[k].node)) {
                s->hosts[idx[i]].lost = 1;
                cJSON *e = sup_event("node-lost");
                cJSON_AddStringToObject(e, "node", lost[k].node);
                cJSON_AddStringToObject(e, "why", lost[k].why);
                sup_emit(e);
            }
    free(lost), free(names), free(idx);
}

/* Newly lost nodes of a Slurm allocation, before the next launch or the requeue: wait (at most
 * --node-wait) until Slurm itself declares them down. Until then Slurm's own handling of a dead node
 * is still to come (the node removed from the job, the failed step killed on it), and when it landed
 * while a relaunched step was starting, that step was killed or hung in its PMIx wire-up (seen with
 * 22.05). A requeued job, too, must not be given the dead node again. A node Slurm never flags (its
 * slurmd answers but it failed our probe) is given back to Slurm instead (slurm_release_nodes).
 * Returns 1 when Slurm flagged them all. */
static int settle_lost_nodes(Sup *s) {
    char **names = malloc((size_t)s->nhosts * sizeof *names);
    int *idx = malloc((size_t)s->nhosts * sizeof *idx), n = 0;
    for (int i = 0; i < s->nhosts; i++)
        if (s->hosts[i].lost && !s->hosts[i].settled) names[n] = s->hosts[i].name, idx[n++] = i;
    if (!n) {
        free(names), free(idx);
        return 1;
    }
    double wait = s->o->node_wait >= 0 ? s->o->node_wait : slurm_slurmd_timeout() + 30;
    double t0 = sup_now();
    int flagged = slurm_wait_flagged(names, n, wait);
    cJSON *e = sup_event("nodes-settled");
    cJSON *arr = cJSON_AddArrayToObject(e, "nodes");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateString(names[i])), s->hosts[idx[i]].settled = 1;
    cJSON_AddBoolToObject(e, "slurm_flagged", flagged);
    cJSON_AddNumberToObject(e, "waited_s", round((sup_now() - t0) * 1000) / 1000);
    if (!flagged) {
        int rc = slurm_release_nodes(names, n);
        cJSON_AddNumberToObject(e, "released", rc > 0 ? rc : 0);
        if (rc < 0) cJSON_AddStringToObject(e, "release_failed", myr_last_error());
    }
    sup_emit(e);
    free(names), free(idx);
    return flagged;
}

/* No spare left for a lost node of a Slurm allocation: the job can go on after a requeue, on other
 * nodes (the lost ones settled first, above). */
static int requeue_exit(Sup *s, const char *why) {
    settle_lost_nodes(s);
    cJSON *e = sup_event("requeue");
    cJSON_AddStringToObject(e, "why", why);
    cJSON_AddNumberToObject(e, "exit_code", SLURM_EXIT_REQUEUE);
    sup_emit(e);
    return SLURM_EXIT_REQUEUE;
}

/* Replace lost active hosts with unused spares; -1 when a lost host has no spare left. The spares
 * are the hosts not in use and not lost: the last --spares of --hosts at the start, then also hosts
 * added to the file (--elastic) and hosts a smaller --elastic size left unused. */
static int replace_lost_hosts(Sup *s) {
    for (int i = 0; i < s->nactive; i++) {
        Host *h = &s->hosts[s->active[i]];
        if (!h->lost) continue;
        int spare = -1;
        for (int j = 0; j < s->nhosts && spare < 0; j++) {
            int used = 0;
            for (int k = 0; k < s->nactive; k++) used |= s->active[k] == j;
            if (!used && !s->hosts[j].lost) spare = j;
        }
        if (spare < 0)
            return myr_error("run: %s %s is lost and no spare %s is left (--spares %d)", s->slurm_nodes ? "node" : "host", h->name,
                             s->slurm_nodes ? "node of this allocation" : "host", s->o->spares);
        cJSON *e = sup_event("spare-used");
        cJSON_AddStringToObject(e, "lost", h->name);
        cJSON_AddStringToObject(e, "spare", s->hosts[spare].name);
        sup_emit(e);
        s->active[i] = spare;
    }
    return 0;
}

/* This launcher's host as ranks name theirs (MYRIAD_HOST, SLURMD_NODENAME, the kernel's name). */
static void self_host_name(char *out, size_t cap) {
    const char *h = getenv("MYRIAD_HOST");
    if (!h || !*h) h = getenv("SLURMD_NODENAME");
    if (h && *h) snprintf(out, cap, "%s", h);
    else if (gethostname(out, cap - 1) != 0) snprintf(out, cap, "localhost");
    out[cap - 1] = 0;
}

/* Under srun the ranks run on other nodes: the heartbeat address must not be loopback. This host's
 * name when it resolves to a non-loopback IPv4 address, else the first such address of an
 * interface that is up; 127.0.0.1 when there is none (a single machine). --hb-addr overrides. */
static void reachable_address(char out[INET_ADDRSTRLEN]) {
    char name[256] = "";
    struct addrinfo hints = {.ai_family = AF_INET}, *res = NULL;
    if (gethostname(name, sizeof name - 1) == 0 && getaddrinfo(name, NULL, &hints, &res) == 0) {
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            struct in_addr in = ((struct sockaddr_in *)a->ai_addr)->sin_addr;
            if ((ntohl(in.s_addr) >> 24) != 127) {
                inet_ntop(AF_INET, &in, out, INET_ADDRSTRLEN);
                freeaddrinfo(res);
                return;
            }
        }
        freeaddrinfo(res);
    }
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK)) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, INET_ADDRSTRLEN);
            break;
        }
    freeifaddrs(ifs);
}

/* Hosts = the nodes of this Slurm allocation, the last --spares of them spares; the ranks spread
 * evenly over the others (--ntasks-per-node). */
static int slurm_hosts(Sup *s, const SuperviseOpts *o) {
    HostList nodes = {0};
    if (slurm_job_nodes(&nodes)) return -1;
    int working = nodes.n - o->spares;
    if (working < 1) {
        hostlist_free(&nodes);
        return myr_error("run: --spares %d leaves no working node in this allocation of %d nodes (%s)", o->spares,
                         nodes.n, getenv("SLURM_JOB_NODELIST"));
    }
    if (o->nranks % working) {
        hostlist_free(&nodes);
        return myr_error("run: %d ranks do not spread evenly over the %d working nodes of this allocation (%d nodes, "
                         "--spares %d); give -n a multiple of %d or count the extra nodes with --spares",
                         o->nranks, working, working + o->spares, o->spares, working);
    }
    s->hosts = calloc((size_t)nodes.n, sizeof *s->hosts);
    s->active = malloc((size_t)nodes.n * sizeof *s->active);
    for (int i = 0; i < nodes.n; i++) {
        if (strlen(nodes.names[i]) >= sizeof s->hosts[i].name) {
            hostlist_free(&nodes);
            return myr_error("run: node name '%s' is too long", nodes.names[i]);
        }
        snprintf(s->hosts[i].name, sizeof s->hosts[i].name, "%s", nodes.names[i]);
        s->hosts[i].slots = o->nranks / working;
    }
    s->nhosts = nodes.n;
    s->nactive = working;
    for (int i = 0; i < working; i++) s->active[i] = i;
    s->slurm_nodes = 1;
    hostlist_free(&nodes);
    return 0;
}

int supervise(SuperviseOpts *o) {
    sup_t_start = o->t_start > 0 ? o->t_start : sup_now(); /* a pre-flight check counts as launcher time */
    Sup sup = {.o = o}, *s = &sup;
    s->corrupt_state = o->plan.seed ^ 0x5eedull;
    if (o->events_path) {
        sup_events_file = fopen(o->events_path, "a");
        if (!sup_events_file) myr_die("run: cannot open --events %s: %s", o->events_path, strerror(errno));
    }
    int direct = o->launcher && !strcmp(o->launcher, "direct");
    int use_srun = !direct && (o->launcher ? !strcmp(o->launcher, "srun") : getenv("SLURM_JOB_ID") != NULL);
    s->use_srun = use_srun;
    self_host_name(s->self_host, sizeof s->self_host);
    if (o->hosts_file) {
        if (hosts_load(o->hosts_file, &s->hosts, &s->nhosts) != 0) myr_die_last();
        if (o->spares >= s->nhosts)
            myr_die("run: --spares %d leaves no working host in %s (%d hosts)", o->spares, o->hosts_file, s->nhosts);
        s->active = malloc((size_t)s->nhosts * sizeof *s->active);
        s->nactive = s->nhosts - o->spares;
        int slots = 0;
        for (int i = 0; i < s->nactive; i++) s->active[i] = i, slots += s->hosts[i].slots;
        if (slots < o->nranks)
            myr_die("run: the %d working hosts of %s have %d slots for %d ranks; add slots=N or hosts", s->nactive,
                    o->hosts_file, slots, o->nranks);
        s->slurm_nodes = use_srun && getenv("SLURM_JOB_ID"); /* --hosts names nodes of the allocation */
    } else if (use_srun && getenv("SLURM_JOB_ID")) {
        if (slurm_hosts(s, o) != 0) myr_die_last();
    } else if (o->spares)
        myr_die("run: --spares needs --hosts FILE (the last K hosts are the spares) or a Slurm allocation");
    for (int i = 0; i < o->plan.n; i++)
        if (o->plan.faults[i].kind == FAULT_CMD && !o->fault_cmd)
            myr_die("run: --inject cmd@%lld needs --fault-cmd CMD (the shell command to run there)", o->plan.faults[i].step);
    for (int i = 0; i < o->plan.n; i++)
        if (o->plan.faults[i].kind == FAULT_HOST) {
            int found = 0;
            for (int h = 0; h < s->nhosts; h++) found |= !strcmp(s->hosts[h].name, o->plan.faults[i].host);
            if (!found) myr_die("run: --inject host@%lld:%s names a host that is not in --hosts", o->plan.faults[i].step,
                                o->plan.faults[i].host);
        }

    if (o->elastic_min) { /* the layout of the train command, asked of the trainer; refused when it cannot resize */
        if (direct) myr_die("run: --elastic resizes a job that mpirun or srun starts, not --launcher direct");
        if (elastic_open(&s->el, o->elastic_min, o->cmd, o->nranks) != 0) myr_die_last();
        sup_elastic_start(s);
    }
    const char *launcher_name = direct ? "direct" : use_srun ? "srun" : "mpirun";
    char *tool = direct ? NULL : path_find_program(use_srun ? "srun" : "mpirun");
    if (!tool && !direct)
        myr_die("run: %s not found on PATH; install it or pass --launcher %s", use_srun ? "srun" : "mpirun",
                use_srun ? "mpirun" : "srun");

    if (sup_random_bytes(s->secret, sizeof s->secret) != 0) myr_die("run: cannot read /dev/urandom for the job secret");
    hmac_sha256_key(&s->key, s->secret, sizeof s->secret);
    char hex[2 * HB_SECRET_BYTES + 1];
    hex_encode(s->secret, sizeof s->secret, hex);
    char reachable[INET_ADDRSTRLEN] = "127.0.0.1";
    if (!o->hb_host && use_srun) reachable_address(reachable);
    const char *hb_host = o->hb_host ? o->hb_host : reachable;
    int port = 0;
    s->lfd = s->epfd = -1;
    if (!o->dry_run) {
        if (sup_loop_fd_limit(o->nranks) != 0) myr_die_last();
        s->lfd = hb_listen(hb_host, o->nranks, &port);
        if (s->lfd < 0) myr_die_last();
        if (o->metrics_port >= 0) {
            if (!(s->metrics = metrics_start(s, o->metrics_addr, o->metrics_port))) myr_die_last();
            cJSON *e = sup_event("metrics");
            cJSON_AddStringToObject(e, "addr", o->metrics_addr ? o->metrics_addr : "0.0.0.0");
            cJSON_AddNumberToObject(e, "port", metrics_port(s->metrics));
            cJSON_AddStringToObject(e, "path", "/metrics");
            sup_emit(e);
        }
        if (sup_loop_open(s) != 0) myr_die_last();
    }
    char addr[300];
    snprintf(addr, sizeof addr, "%s:%d", hb_host, port);
    setenv("MYRIAD_HB_ADDR", addr, 1);
    setenv("MYRIAD_HB_SECRET", hex, 1);
    if (o->ckpt_dir) setenv("MYRIAD_CKPT_DIR", o->ckpt_dir, 1);

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);

    s->ranks = calloc((size_t)o->nranks, sizeof *s->ranks);
    s->stop_time = calloc((size_t)o->nranks, sizeof *s->stop_time);
    /* attempts: the first and one per restart, and with --elastic a planned relaunch (a grow) per restart */
    s->max_attempts = o->max_restarts + 1 + (o->elastic_min ? o->max_restarts + 1 : 0);
    s->tl = calloc((size_t)s->max_attempts, sizeof *s->tl);
    for (int r = 0; r < o->nranks; r++) s->ranks[r].best_step = -1;
    s->straggler = straggler_create(o->nranks, &o->straggler);
    int straggler_ranks = o->nranks;
    s->m.r0_loss = s->m.tokens_per_s = s->m.mfu = NAN;
    s->m.mem_step = -1;
    sup_ledger_open(s, o->t_start > 0); /* the time ledger; a --preflight check set t_start */
    int exit_code = 1, restarts = 0, finished = 0, stopped = 0, requeue = 0, nonfinite = 0;
    char hostfile[64] = "";

    for (s->attempt = 0; s->attempt < s->max_attempts && restarts <= o->max_restarts && !stop_signal && !sup_graceful_signal;
         s->attempt++) {
        s->tl[s->attempt].s0 = -1;
        for (int r = 0; r < o->nranks; r++) {
            RankState *rs = &s->ranks[r];
            long long best = rs->best_step;
            memset(rs, 0, sizeof *rs);
            rs->step = rs->first_step = rs->held = -1;
            rs->best_step = rs->best_step_before = best;
            s->stop_time[r] = 0;
        }
        s->all_connected = 0, s->job_step = -1, s->failed = 0, s->why[0] = 0;
        s->fault_fired_this_attempt = 0, s->lost_host_this_attempt = -1, s->clock_due = INFINITY;
        s->source[0] = 0, s->copy_rejected = 0;
        progress_begin_attempt(s);
        if (s->straggler && straggler_ranks != o->nranks) { /* --elastic changed the size: a detector for it */
            straggler_free(s->straggler);
            s->straggler = straggler_create(o->nranks, &o->straggler);
            straggler_ranks = o->nranks;
        } else if (s->straggler) straggler_restart(s->straggler);
        faults_begin_attempt(s);
        char att[16];
        snprintf(att, sizeof att, "%d", s->attempt);
        setenv("MYRIAD_HB_ATTEMPT", att, 1);
        if (restarts > 0) { /* the MTBF seen so far, for --save-every auto (train/ckpt_policy.h) */
            char v[48];
            snprintf(v, sizeof v, "%.6g", (sup_now() - sup_t_start) / restarts);
            setenv("MYRIAD_MTBF_S", v, 1);
            snprintf(v, sizeof v, "%d", restarts);
            setenv("MYRIAD_FAILURES", v, 1);
        }
        if (s->nactive) {
            if (hostfile[0]) unlink(hostfile);
            if (write_hostfile(s, hostfile) != 0) myr_die_last();
        }
        char **argv = direct ? direct_argv(o, s->attempt)
                             : build_argv(o, use_srun, tool, use_srun || !s->nactive ? NULL : hostfile, s->hosts, s->nhosts,
                                          s->active, s->nactive, s->attempt, &s->el);
        char *line = argv_join(argv);
        if (o->dry_run) {
            if (use_srun && s->nactive) { /* what SLURM_HOSTFILE holds: the node of each rank */
                int *hr = malloc((size_t)o->nranks * sizeof *hr);
                rank_hosts(s->hosts, s->active, s->nactive, o->nranks, hr);
                printf("# SLURM_HOSTFILE (rank 0..%d):", o->nranks - 1);
                for (int r = 0; r < o->nranks; r++) printf(" %s", s->hosts[hr[r]].name);
                printf("\n");
                free(hr);
            }
            printf("%s\n", line);
            free(line), argv_free(argv);
            if (hostfile[0]) unlink(hostfile);
            return 0;
        }
        cJSON *e = sup_event("launch");
        cJSON_AddNumberToObject(e, "attempt", s->attempt);
        cJSON_AddStringToObject(e, "launcher", launcher_name);
        if (s->nactive) {
            cJSON *hs = cJSON_AddArrayToObject(e, "hosts");
            for (int i = 0; i < s->nactive; i++) cJSON_AddItemToArray(hs, cJSON_CreateString(s->hosts[s->active[i]].name));
        }
        cJSON_AddStringToObject(e, "cmd", line);
        sup_emit(e);
        free(line);
        fflush(stdout);
        fflush(stderr);
        sup_reap_parked(s, 0);
        sup_ledger_launch(s);
        s->launch_time = sup_now();
        /* mpirun's / srun's boilerplate to a log, the ranks' lines through (mpi_noise.h) */
        int errfd = direct ? -1 : mpi_noise_start(o->mpi_log);
        pid_t child = fork();
        if (child < 0) myr_die("run: fork failed: %s", strerror(errno));
        if (child == 0) {
            if (errfd >= 0) dup2(errfd, STDERR_FILENO);
            setpgid(0, 0); /* its own group: teardown kills mpirun and everything it started */
            signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGHUP, SIG_DFL), signal(SIGUSR1, SIG_DFL);
            if (use_srun && s->nactive) setenv("SLURM_HOSTFILE", hostfile, 1);
            if (direct) execvp(argv[0], argv);
            else execv(argv[0], argv);
            fprintf(stderr, "myriad: run: cannot execute %s: %s\n", argv[0], strerror(errno));
            _exit(127);
        }
        setpgid(child, child);
        child_pgid = child;
        if (sup_graceful_signal) kill(child, SIGUSR1); /* it came while this attempt was starting */
        argv_free(argv);

        int status = 0, resized = 0;
        s->el.resizing = 0;
        WatchEnd end = sup_watch(s, child, &status, &stop_signal);
        int exited = end == WATCH_EXITED, stuck = end == WATCH_STUCK;
        if (end == WATCH_RESIZED) resized = 1; /* torn down below (its launcher parked) */
        if (stuck) finished = 1, exit_code = 0;
        int nstopped_now = 0;
        for (int r = 0; r < o->nranks; r++) nstopped_now += s->ranks[r].stopped;
        if (stop_signal && sup_graceful_signal && nstopped_now == o->nranks) {
            /* every rank had checkpointed and was exiting: the second signal cost nothing */
            stop_signal = 0, stopped = 1, exit_code = graceful_exit_code();
            cJSON *y = sup_event("stopped");
            cJSON_AddNumberToObject(y, "signal", sup_graceful_signal);
            cJSON_AddNumberToObject(y, "ranks_checkpointed", nstopped_now);
            cJSON_AddNumberToObject(y, "step", (double)s->job_step);
            cJSON_AddNumberToObject(y, "exit_code", exit_code);
            sup_emit(y);
        }
        if (stop_signal) {
            cJSON *k = sup_event("interrupted");
            cJSON_AddNumberToObject(k, "signal", stop_signal);
            sup_emit(k);
            /* what stopping at once cost: the steps after the newest copy every rank holds */
            if (s->m.mem_step >= 0)
                fprintf(stderr, "myriad run: stopped at once at job step %lld: the in-memory copies of step %lld "
                        "remain (below), so %lld step%s would be recomputed by `--resume auto`\n", s->job_step,
                        (long long)s->m.mem_step, s->job_step - s->m.mem_step > 0 ? s->job_step - s->m.mem_step : 0,
                        s->job_step - s->m.mem_step == 1 ? "" : "s");
            else
                fprintf(stderr, "myriad run: stopped at once at job step %lld: the steps after the last disk "
                        "checkpoint are lost\n", s->job_step);
        }
        if (exited) {
            /* drain what the ranks sent just before exiting (their "done" or last steps) */
            for (int pass = 0; pass < 5; pass++) {
                hb_drain(s);
                usleep(2000);
            }
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            cJSON *x = sup_event("exit");
            cJSON_AddStringToObject(x, "what", launcher_name);
            cJSON_AddNumberToObject(x, "code", code);
            sup_emit(x);
            int nstopped = 0;
            for (int r = 0; r < o->nranks; r++) nstopped += s->ranks[r].stopped;
            if (s->el.resizing && !sup_graceful_signal && nstopped == o->nranks && !s->failed) {
                resized = 1; /* every rank checkpointed for the grow (sup_elastic.c): relaunched below */
            } else if (s->el.resizing && !sup_graceful_signal && code != 0 && !s->failed) {
                sup_fail(s, FAIL_LAUNCHER_EXIT, "the ranks did not all checkpoint and stop for the resize (%d of %d did; "
                         "%s exited with code %d)", nstopped, o->nranks, launcher_name, code);
            } else if ((code != 0 || nstopped) && (sup_graceful_signal || nstopped == o->nranks)) {
                /* the ranks checkpointed and stopped on a signal (ours, forwarded, or Slurm's --signal
                 * sent to them directly): a requeued job resumes from there */
                stopped = 1;
                exit_code = graceful_exit_code();
                cJSON *y = sup_event("stopped");
                cJSON_AddNumberToObject(y, "signal", sup_graceful_signal ? sup_graceful_signal : SIGUSR1);
                cJSON_AddNumberToObject(y, "ranks_checkpointed", nstopped);
                cJSON_AddNumberToObject(y, "step", (double)s->job_step);
                cJSON_AddNumberToObject(y, "exit_code", exit_code);
                sup_emit(y);
            } else if (code == 0 && !s->failed) {
                finished = 1;
                exit_code = 0;
            } else if (code == MYRIAD_EXIT_NONFINITE) { /* a restart would compute the same step again */
                exit_code = code;
                sup_fail(s, FAIL_LAUNCHER_EXIT, "the job stopped itself on a non-finite loss or gradient (exit code %d; see its message)", code);
                nonfinite = 1;
            } else {
                exit_code = code ? code : 1;
                sup_fail(s, FAIL_LAUNCHER_EXIT, "%s exited with code %d", direct ? o->cmd[0] : launcher_name, code);
            }
        }
        if (s->failed) sup_ledger_failed(s); /* the step lost with the failure, its detection */
        if (!exited) sup_teardown(s, child, &status);
        else kill(-child, SIGKILL); /* anything it left in its group */
        child_pgid = 0;
        hb_close_all(s);
        /* a planned stop's checkpoint and exit are the resize's cost */
        sup_ledger_account(s, s->failed ? LEDGER_TEARDOWN : resized ? LEDGER_RESHARD : LEDGER_FINISH);
        if (s->el.min_dp && s->el.cur_dp < s->el.full_dp) s->el.degraded_steps += s->tl[s->attempt].n;
        if (!exited && sup_graceful_signal && !stop_signal) { /* the grace ran out: stopped all the same */
            stopped = 1;
            exit_code = graceful_exit_code();
        }
        if (finished || stop_signal || stopped) break;
        if (resized) { /* a planned relaunch at the size the hosts hold now: not a restart */
            char at[96];
            snprintf(at, sizeof at, "a checkpoint at job step %lld", s->job_step);
            sup_elastic_grow(s, at); /* (should the added hosts hold no more now, it goes on at its size) */
            s->el.planned++;
            s->el.resizing = 0;
            continue;
        }
        if (nonfinite) {
            cJSON *g = sup_event("giving-up");
            cJSON_AddStringToObject(g, "why", s->why);
            sup_emit(g);
            fprintf(stderr, "myriad: run: not restarting: %s; a restart would replay the same step (resume by hand "
                    "with a lower --lr or --on-nan skip)\n", s->why);
            s->attempt++;
            goto done;
        }
        if (restarts == o->max_restarts) break;
        if (s->slurm_nodes) find_lost_nodes(s);
        int replaced = replace_lost_hosts(s);
        if (replaced != 0 && s->el.min_dp) replaced = sup_elastic_shrink(s, myr_last_error()); /* no spare: go on smaller */
        else if (replaced == 0) sup_elastic_grow(s, "a restart"); /* below the full size: hosts added since? */
        if (replaced != 0) {
            if (s->slurm_nodes) { /* a requeue gets other nodes: say so, and exit for it */
                char why[512];
                snprintf(why, sizeof why, "%s; exiting with %d so that the job is requeued (the script from "
                         "myriad run --slurm-script runs scontrol requeue)", myr_last_error(), SLURM_EXIT_REQUEUE);
                fprintf(stderr, "myriad: %s\n", why);
                exit_code = requeue_exit(s, why);
                sup_ledger_account(s, LEDGER_SPARE_WAIT); /* lost-node checks and settling with Slurm */
                requeue = 1;
                s->attempt++;
                goto done;
            }
            fprintf(stderr, "myriad: %s\n", myr_last_error());
            cJSON *g = sup_event("giving-up");
            cJSON_AddStringToObject(g, "why", myr_last_error());
            sup_emit(g);
            exit_code = 1;
            s->attempt++;
            goto done;
        }
        if (s->slurm_nodes) settle_lost_nodes(s);
        restarts++;
        s->m.restarts++;
        cJSON *r = sup_event("restart");
        cJSON_AddNumberToObject(r, "attempt", s->attempt + 1);
        cJSON_AddStringToObject(r, "after", s->why);
        cJSON_AddStringToObject(r, "resume", "auto");
        sup_emit(r);
    }
    if (s->attempt >= s->max_attempts) s->attempt = s->max_attempts - 1;
    s->attempt++; /* number of attempts with timelines */
    if (sup_graceful_signal && !finished && !stop_signal && !stopped) { /* it came between two attempts */
        stopped = 1;
        exit_code = graceful_exit_code();
    }
    if (!finished && !stop_signal && !stopped) {
        cJSON *g = sup_event("giving-up");
        cJSON_AddNumberToObject(g, "restarts", restarts);
        cJSON_AddStringToObject(g, "why", s->why);
        sup_emit(g);
        fprintf(stderr, "myriad: run: giving up after %d restart%s (--max-restarts %d); last failure: %s\n", restarts,
                restarts == 1 ? "" : "s", o->max_restarts, s->why);
        if (exit_code == 0) exit_code = 1;
    }
done:;
    if (!finished) report_leftover_copies();
    if (stop_signal && !finished) exit_code = 128 + stop_signal;
    long long steps = 0;
    double wall = sup_ledger_close(s, LEDGER_FINISH); /* the ledger and the finished event end at one instant */
    double productive = progress_productive_time(s, s->attempt, &steps);
    cJSON *f = sup_event("finished");
    cJSON_AddStringToObject(f, "status", finished       ? "ok"
                                         : stop_signal  ? "interrupted"
                                         : stopped      ? "stopped"
                                         : requeue      ? "requeue"
                                                        : "failed");
    cJSON_AddNumberToObject(f, "restarts", restarts);
    cJSON_AddNumberToObject(f, "steps", (double)steps);
    cJSON_AddNumberToObject(f, "productive_s", round(productive * 1000) / 1000);
    cJSON_AddNumberToObject(f, "wall_s", round(wall * 1000) / 1000);
    cJSON_AddNumberToObject(f, "goodput", wall > 0 ? round(productive / wall * 10000) / 10000 : 0);
    cJSON_AddNumberToObject(f, "refused", (double)s->refused);
    cJSON_AddNumberToObject(f, "exit_code", exit_code);
    if (s->el.min_dp) {
        cJSON_AddNumberToObject(f, "degraded_steps", (double)s->el.degraded_steps);
        cJSON_AddNumberToObject(f, "shrinks", s->el.shrinks);
        cJSON_AddNumberToObject(f, "grows", s->el.grows);
        cJSON_AddNumberToObject(f, "final_dp", s->el.cur_dp);
    }
    sup_emit(f);
    fprintf(stderr, "myriad run: %s after %d restart%s; goodput %.1f%% (%.2f s productive of %.2f s wall, %lld steps)\n",
            finished ? "finished" : "stopped", restarts, restarts == 1 ? "" : "s", wall > 0 ? 100 * productive / wall : 0,
            productive, wall, steps);
    if (s->el.min_dp && (s->el.shrinks || s->el.grows))
        fprintf(stderr, "myriad run: elastic: ran degraded (below dp %d) for %lld step%s; %d shrink%s, %d grow%s; "
                "ended at dp %d\n", s->el.full_dp, s->el.degraded_steps, s->el.degraded_steps == 1 ? "" : "s",
                s->el.shrinks, s->el.shrinks == 1 ? "" : "s", s->el.grows, s->el.grows == 1 ? "" : "s", s->el.cur_dp);
    sup_ledger_report(s, wall); /* the goodput event (the last one) and the console summary */
    sup_loop_linger(s, o->metrics_linger);
    sup_ledger_free(s);
    sup_reap_parked(s, 1); /* launchers of torn-down attempts still finishing their own abort */
    if (hostfile[0]) unlink(hostfile);
    mpi_noise_finish();
    if (sup_events_file) fclose(sup_events_file);
    for (int a = 0; a < s->max_attempts; a++) free(s->tl[a].t);
    free(s->tl), free(s->holds), free(s->ranks), free(s->stop_time), free(s->conns), free(s->hosts), free(s->active), free(tool);
    free(s->free_conns), free(s->held_ranks);
    straggler_free(s->straggler);
    metrics_stop(s->metrics);
    if (s->lfd >= 0) close(s->lfd);
    if (s->epfd >= 0) close(s->epfd);
    return exit_code;
}

