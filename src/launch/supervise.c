/* supervise.c: the supervising launcher behind `myriad run` when any fault-tolerance option is
 * given. One process, one poll() loop: a TCP listener for the ranks' heartbeats, the launched
 * mpirun/srun as a child in its own process group, and timers for hang detection. Each attempt
 * launches the job, watches it, and on a failure kills it, replaces lost hosts with spares and
 * relaunches with `--resume auto`, until it finishes or --max-restarts is spent.
 * Formats, rules and the goodput definition: docs/LAUNCHER.md. */
#define _GNU_SOURCE
#include "launch/supervise.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch/heartbeat.h"
#include "launch/hostfile.h"
#include "launch/slurm.h"
#include "util/error.h"
#include "util/hostlist.h"
#include "util/path.h"
#include "util/sha256.h"

typedef struct {
    int connected, done, closed;
    long long pid;
    char host[HB_HOST_MAX];
    long long step;          /* last step reported in this attempt; -1 none */
    long long first_step;    /* first step reported in this attempt; -1 none */
    long long best_step;     /* highest step ever reported (all attempts) */
    long long best_step_before; /* best_step when this attempt began */
    double last_progress;    /* monotonic seconds of the last HELLO or new step */
    long long held;          /* waiting for GO after reporting this hold step; -1 none */
    int fd;                  /* its heartbeat connection */
    int stopped;             /* it checkpointed and stopped on a signal (event "stopped-on-signal") */
} RankState;

typedef struct {
    int fd;
    int rank;                /* -1 until authenticated */
    char nonce[2 * HB_NONCE_BYTES + 1];
    long long last_seq;
    char buf[HB_LINE_MAX];
    size_t len;
} Conn;

/* Per-attempt job-step timeline for goodput: t[i] = when every rank had reported step s0 + i,
 * t0 = when every rank had connected (the attempt's first computed step starts there). */
typedef struct {
    long long s0;            /* first step computed in the attempt; -1 none */
    double t0;
    double *t;
    long long n, cap;
} Timeline;

static double t_start;
static FILE *events_file;
static volatile sig_atomic_t stop_signal, child_pgid;
/* SIGTERM or SIGUSR1: the ranks are asked (SIGUSR1, which mpirun and srun forward) to checkpoint
 * and stop; the run ends when they have, or after --stop-grace */
static volatile sig_atomic_t graceful_signal;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Log one event: a JSON line to the events file and to stderr. Takes ownership of obj. */
static void emit(cJSON *obj) {
    cJSON *ordered = cJSON_CreateObject();
    cJSON_AddNumberToObject(ordered, "t", round((now_s() - t_start) * 1000) / 1000);
    for (cJSON *it = obj->child; it;) {
        cJSON *next = it->next;
        cJSON_AddItemToObject(ordered, it->string, cJSON_DetachItemViaPointer(obj, it));
        it = next;
    }
    cJSON_Delete(obj);
    char *s = cJSON_PrintUnformatted(ordered);
    if (s) {
        fprintf(stderr, "myriad run: %s\n", s);
        if (events_file) fprintf(events_file, "%s\n", s), fflush(events_file);
        free(s);
    }
    cJSON_Delete(ordered);
}

static cJSON *ev(const char *name) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", name);
    return o;
}

static void on_signal(int sig) {
    if (sig == SIGTERM || sig == SIGUSR1) {
        if (graceful_signal) return; /* already stopping (Slurm may signal both the script and us) */
        graceful_signal = sig;
        if (child_pgid > 0) kill(child_pgid, SIGUSR1);
        return;
    }
    stop_signal = sig; /* SIGINT, SIGHUP: stop now */
    if (child_pgid > 0) kill(-child_pgid, sig);
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

static int extra_has(const SuperviseOpts *o, const char *flag) {
    for (int i = 0; i < o->nextra; i++)
        if (!strncmp(o->extra[i], flag, strlen(flag))) return 1;
    return 0;
}

/* argv for attempt `attempt` on hosts[active[0..nactive)] (hostfile already written: Open MPI's
 * for mpirun, one node per rank line for srun's --distribution=arbitrary via SLURM_HOSTFILE). */
static char **build_argv(SuperviseOpts *o, int use_srun, const char *tool, const char *hostfile, Host *hosts,
                         int nhosts, const int *active, int nactive, int attempt) {
    int ncmd = 0;
    while (o->cmd[ncmd]) ncmd++;
    char **a = calloc((size_t)(ncmd + o->nextra + 32), sizeof *a);
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
        if (!extra_has(o, "--mpi")) a[k++] = strdup("--mpi=pmix"); /* Open MPI ranks wire up through PMIx */
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
        a[k++] = strdup("--bind-to");
        a[k++] = strdup("none");
        if (hostfile) a[k++] = strdup("--hostfile"), a[k++] = strdup(hostfile);
        /* remote daemons do not inherit the launcher's environment: export ours by name
         * (values travel inside Open MPI's launch message, never on a command line) */
        static const char *vars[] = {"MYRIAD_HB_ADDR", "MYRIAD_HB_SECRET", "MYRIAD_HB_ATTEMPT", "MYRIAD_HB_HOLD", "MYRIAD_CKPT_DIR",
                                     "MYRIAD_SHM_DIR", "MYRIAD_JOB_ID", "OMP_NUM_THREADS"};
        for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
            if (getenv(vars[i])) a[k++] = strdup("-x"), a[k++] = strdup(vars[i]);
    }
    for (int i = 0; i < o->nextra; i++) a[k++] = strdup(o->extra[i]);
    for (int i = 0; i < ncmd; i++) a[k++] = strdup(o->cmd[i]);
    if (attempt > 0 && !has_resume(o->cmd)) a[k++] = strdup("--resume"), a[k++] = strdup("auto");
    for (int i = 0; i < o->plan.n; i++) /* nan@: the rank itself turns a gradient to NaN (train --inject-nan) */
        if (o->plan.faults[i].kind == FAULT_NAN && !o->plan.faults[i].fired) {
            snprintf(buf, sizeof buf, "%lld:%d", o->plan.faults[i].step, o->plan.faults[i].rank);
            a[k++] = strdup("--inject-nan"), a[k++] = strdup(buf);
        }
    a[k] = NULL;
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
    time_t since = time(NULL) - (time_t)(now_s() - t_start) - 1;
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
        cJSON *x = ev("copies-left");
        cJSON_AddStringToObject(x, "dir", path);
        cJSON_AddNumberToObject(x, "mib", round(mib * 10) / 10);
        emit(x);
    }
    closedir(d);
}

/* ---------- heartbeat server ---------- */

static int listen_on(const char *host, int *port_out) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return myr_error("run: socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        struct addrinfo hints = {.ai_family = AF_INET}, *res;
        if (getaddrinfo(host, NULL, &hints, &res) != 0) {
            close(fd);
            return myr_error("run: --hb-addr '%s' is not an IPv4 address or resolvable name", host);
        }
        sa.sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
        freeaddrinfo(res);
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 1024) != 0) {
        int e = errno;
        close(fd);
        return myr_error("run: cannot listen on %s: %s", host, strerror(e));
    }
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    *port_out = ntohs(sa.sin_port);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

static int random_bytes(uint8_t *out, size_t n) {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, out + got, n - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    return got == n ? 0 : -1;
}

static void send_line(int fd, const char *s) {
    size_t len = strlen(s);
    (void)!send(fd, s, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* ---------- the supervisor state ---------- */

typedef struct {
    SuperviseOpts *o;
    uint8_t secret[HB_SECRET_BYTES];
    int attempt;
    RankState *ranks;
    Conn *conns;
    int nconns, cap_conns;
    double launch_time;
    int all_connected;
    long long job_step;      /* min step over ranks in this attempt */
    Timeline *tl;            /* per attempt */
    int fault_fired_this_attempt;
    long long *holds; /* steps every rank waits at for GO this attempt (fault steps) */
    int nholds;
    int lost_host_this_attempt; /* index into hosts, -1 */
    Host *hosts;
    int nhosts;
    int *active;
    int nactive;
    /* failure of this attempt */
    int failed;
    char why[256];
    double *stop_time;       /* per rank: when hang@ stopped it (for the event log) */
    uint64_t corrupt_state;
    long long refused;
    char source[32];         /* this attempt's restore source, from rank 0's event */
    int copy_rejected;       /* rank 0 said a damaged in-memory copy was passed over */
    int use_srun;
    int slurm_nodes;         /* hosts are the nodes of this Slurm allocation: ask Slurm about lost ones */
    char self_host[HB_HOST_MAX]; /* where this launcher runs (ranks here may be signalled by pid) */
} Sup;

static void fail(Sup *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(Sup *s, const char *fmt, ...) {
    if (s->failed) return;
    s->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof s->why, fmt, ap);
    va_end(ap);
}

static void close_conn(Sup *s, int i) {
    close(s->conns[i].fd);
    s->conns[i] = s->conns[--s->nconns];
}

static void timeline_add(Timeline *tl, long long step, double t) {
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
    cJSON *e = ev("inject");
    cJSON_AddStringToObject(e, "fault", "corrupt");
    cJSON_AddNumberToObject(e, "step", (double)step);
    char **files = NULL;
    int n = 0, cap = 0;
    if (s->o->ckpt_dir) collect_files(s->o->ckpt_dir, &files, &n, &cap, 0);
    if (n == 0) {
        cJSON_AddStringToObject(e, "error", s->o->ckpt_dir ? "no file under the checkpoint dir" : "no --ckpt-dir given");
        emit(e);
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
    emit(e);
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
}

/* cmd@STEP: the --fault-cmd shell command, run to its end while the ranks wait at STEP (tests make
 * a node die, mark it down in Slurm or send Slurm's warning signal exactly there). */
static void run_fault_cmd(Sup *s, long long step) {
    cJSON *e = ev("inject");
    cJSON_AddStringToObject(e, "fault", "cmd");
    cJSON_AddNumberToObject(e, "step", (double)step);
    char st[24];
    snprintf(st, sizeof st, "%lld", step);
    setenv("MYRIAD_FAULT_STEP", st, 1);
    fflush(stdout), fflush(stderr);
    int rc = system(s->o->fault_cmd);
    cJSON_AddNumberToObject(e, "status", WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc));
    emit(e);
}

/* Fire due faults after rank r reported `step`. At most one job-ending fault per attempt, so
 * COUNT faults cost COUNT restarts (a second kill during the teardown would be invisible). */
static void maybe_inject(Sup *s, int r, long long step) {
    FaultPlan *p = &s->o->plan;
    for (int i = 0; i < p->n; i++) {
        Fault *f = &p->faults[i];
        if (f->fired || step < f->step) continue;
        if (f->kind == FAULT_NAN) { /* the rank did it itself; reported for the record */
            f->fired = 1;
            cJSON *e = ev("inject");
            cJSON_AddStringToObject(e, "fault", "nan");
            cJSON_AddNumberToObject(e, "step", (double)f->step);
            cJSON_AddNumberToObject(e, "rank", f->rank);
            emit(e);
            continue;
        }
        if (f->kind == FAULT_CORRUPT) {
            f->fired = 1;
            corrupt_one(s, step);
            continue;
        }
        if (f->kind == FAULT_CMD) { /* once every rank is at the step, waiting there for GO */
            if (s->job_step < f->step || s->failed) continue;
            f->fired = 1;
            run_fault_cmd(s, f->step);
            continue;
        }
        if (s->fault_fired_this_attempt || s->failed) continue;
        if (f->job_level) { /* random: due once the slowest rank reached the step */
            if (s->job_step < f->step) continue;
            r = f->rank; /* its drawn rank, or the slowest one still running if that one is done */
            if (s->ranks[r].done || s->ranks[r].closed)
                for (int q = 0; q < s->o->nranks; q++)
                    if (!s->ranks[q].done && !s->ranks[q].closed && (r == f->rank || s->ranks[q].step < s->ranks[r].step)) r = q;
            if (s->ranks[r].done || s->ranks[r].closed) continue;
        } else if ((f->kind == FAULT_KILL || f->kind == FAULT_HANG) && f->rank != r) continue;
        cJSON *e = ev("inject");
        cJSON_AddStringToObject(e, "fault", fault_kind_name(f->kind));
        cJSON_AddNumberToObject(e, "step", (double)step);
        f->fired = 1;
        s->fault_fired_this_attempt = 1;
        if (f->kind == FAULT_HOST) {
            int h = -1;
            for (int j = 0; j < s->nactive; j++)
                if (!strcmp(s->hosts[s->active[j]].name, f->host)) h = s->active[j];
            cJSON_AddStringToObject(e, "host", f->host);
            if (h < 0) {
                cJSON_AddStringToObject(e, "error", "host is not in use");
                emit(e);
                s->fault_fired_this_attempt = 0;
                continue;
            }
            cJSON *pids = cJSON_AddArrayToObject(e, "pids");
            for (int q = 0; q < s->o->nranks; q++)
                if (s->ranks[q].connected && !strcmp(s->ranks[q].host, f->host)) {
                    kill((pid_t)s->ranks[q].pid, SIGKILL);
                    cJSON_AddItemToArray(pids, cJSON_CreateNumber((double)s->ranks[q].pid));
                }
            s->lost_host_this_attempt = h;
            s->hosts[h].lost = 1;
            emit(e);
            if (s->o->cut_link_cmd) {
                setenv("MYRIAD_LOST_HOST", f->host, 1);
                int rc = system(s->o->cut_link_cmd);
                cJSON *c = ev("link-cut");
                cJSON_AddStringToObject(c, "host", f->host);
                cJSON_AddNumberToObject(c, "status", rc);
                emit(c);
            }
            continue;
        }
        RankState *rs = &s->ranks[r];
        cJSON_AddNumberToObject(e, "rank", r);
        cJSON_AddNumberToObject(e, "pid", (double)rs->pid);
        cJSON_AddStringToObject(e, "host", rs->host);
        kill((pid_t)rs->pid, f->kind == FAULT_KILL ? SIGKILL : SIGSTOP);
        if (f->kind == FAULT_HANG) s->stop_time[r] = now_s();
        emit(e);
    }
}

/* Job step = the slowest rank's step, once every rank has reported; extends the timeline. */
static void update_job_step(Sup *s) {
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
        if (s->attempt > 0 || lo > 1) { /* a relaunch, or a run (a requeued job) resuming a checkpoint */
            cJSON *e = ev("resumed");
            cJSON_AddNumberToObject(e, "attempt", s->attempt);
            cJSON_AddNumberToObject(e, "first_step", (double)lo);
            cJSON_AddNumberToObject(e, "recomputed_steps", (double)recomputed);
            if (s->source[0]) cJSON_AddStringToObject(e, "source", s->source);
            if (s->copy_rejected) cJSON_AddBoolToObject(e, "corrupt_copy_skipped", 1);
            emit(e);
        }
        tl->s0 = lo;
    }
    for (long long st = s->job_step < 0 ? tl->s0 : s->job_step + 1; st <= mn; st++) timeline_add(tl, st, now_s());
    s->job_step = mn;
    maybe_inject(s, -1, mn); /* job-level (random) faults */
}

/* Fault steps of this attempt: every rank waits after reporting one until the launcher says GO,
 * which it does once every rank still running has reported it and the faults due have fired;
 * so kill@6:1 finds rank 1 right after step 6 and corrupt@7 finds the checkpoints of step 7. */
static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static int is_hold_step(const Sup *s, long long step) { /* holds: ascending */
    return s->nholds && bsearch(&step, s->holds, (size_t)s->nholds, sizeof *s->holds, cmp_ll) != NULL;
}

/* The hold steps of a new attempt: those of the faults not fired yet (MYRIAD_HB_HOLD), distinct,
 * ascending, at most HOLD_MAX (the earliest: faults fire in step order, and the next attempt lists
 * the rest), so the variable stays far below the kernel's limit on one environment string. */
enum { HOLD_MAX = 4096 };
static void set_holds(Sup *s) {
    const FaultPlan *p = &s->o->plan;
    s->holds = realloc(s->holds, ((size_t)p->n + 1) * sizeof *s->holds);
    s->nholds = 0;
    for (int i = 0; i < p->n; i++) /* nan@ needs no hold: the rank acts inside the step */
        if (!p->faults[i].fired && p->faults[i].kind != FAULT_NAN) s->holds[s->nholds++] = p->faults[i].step;
    qsort(s->holds, (size_t)s->nholds, sizeof *s->holds, cmp_ll);
    int n = 0;
    for (int i = 0; i < s->nholds && n < HOLD_MAX; i++)
        if (!n || s->holds[i] != s->holds[n - 1]) s->holds[n++] = s->holds[i];
    s->nholds = n;
    char *env = malloc((size_t)n * 21 + 1);
    size_t len = 0;
    env[0] = 0;
    for (int i = 0; i < n; i++) len += (size_t)sprintf(env + len, "%s%lld", i ? "," : "", s->holds[i]);
    setenv("MYRIAD_HB_HOLD", env, 1);
    free(env);
}

static void release_holds(Sup *s) {
    long long h = -1;
    for (int r = 0; r < s->o->nranks; r++)
        if (s->ranks[r].held >= 0) h = s->ranks[r].held;
    if (h < 0) return;
    for (int r = 0; r < s->o->nranks; r++) {
        const RankState *rs = &s->ranks[r];
        int running = rs->connected && !rs->done && !rs->closed && s->stop_time[r] == 0;
        if (running && rs->step < h) return; /* someone has yet to get there */
    }
    char go[40];
    snprintf(go, sizeof go, "GO %lld\n", h);
    for (int r = 0; r < s->o->nranks; r++)
        if (s->ranks[r].held == h) {
            if (!s->ranks[r].closed) send_line(s->ranks[r].fd, go);
            /* released now: a rank that waited for the others is not the one that went silent */
            if (s->stop_time[r] == 0) s->ranks[r].last_progress = now_s();
            s->ranks[r].held = -1;
        }
}

static void handle_line(Sup *s, int ci, char *line) {
    Conn *c = &s->conns[ci];
    struct sockaddr_in peer;
    socklen_t plen = sizeof peer;
    char peerbuf[64] = "?";
    if (getpeername(c->fd, (struct sockaddr *)&peer, &plen) == 0)
        snprintf(peerbuf, sizeof peerbuf, "%s:%d", inet_ntoa(peer.sin_addr), ntohs(peer.sin_port));
    HbMsg m;
    if (hb_verify(line, s->secret, c->nonce) != 0 || hb_parse(line, &m) != 0) {
        cJSON *e = ev("auth-refused");
        cJSON_AddStringToObject(e, "peer", peerbuf);
        cJSON_AddStringToObject(e, "reason", myr_last_error());
        if (c->rank >= 0) cJSON_AddNumberToObject(e, "rank", c->rank);
        emit(e);
        s->refused++;
        send_line(c->fd, "NO authentication failed\n");
        c->len = (size_t)-1; /* mark for closing */
        return;
    }
    if (c->rank < 0) {
        const char *no = NULL;
        if (m.type != HB_HELLO) no = "expected HELLO";
        else if (m.attempt != s->attempt) no = "stale attempt";
        else if (m.rank >= s->o->nranks) no = "rank out of range";
        else if (s->ranks[m.rank].connected) no = "rank already connected";
        if (no) {
            cJSON *e = ev("auth-refused");
            cJSON_AddStringToObject(e, "peer", peerbuf);
            cJSON_AddStringToObject(e, "reason", no);
            emit(e);
            char msg[64];
            snprintf(msg, sizeof msg, "NO %s\n", no);
            send_line(c->fd, msg);
            c->len = (size_t)-1;
            return;
        }
        RankState *rs = &s->ranks[m.rank];
        c->rank = m.rank;
        rs->connected = 1;
        rs->fd = c->fd;
        rs->pid = m.pid;
        snprintf(rs->host, sizeof rs->host, "%s", m.host);
        rs->last_progress = now_s();
        send_line(c->fd, "OK\n");
        int all = 1;
        for (int r = 0; r < s->o->nranks; r++) all &= s->ranks[r].connected;
        if (all && !s->all_connected) {
            s->all_connected = 1;
            s->tl[s->attempt].t0 = now_s();
            cJSON *e = ev("connected");
            cJSON_AddNumberToObject(e, "attempt", s->attempt);
            cJSON_AddNumberToObject(e, "ranks", s->o->nranks);
            emit(e);
        }
        return;
    }
    if (m.seq <= c->last_seq) { /* a replayed or reordered line */
        cJSON *e = ev("auth-refused");
        cJSON_AddStringToObject(e, "peer", peerbuf);
        cJSON_AddStringToObject(e, "reason", "sequence number went backwards (replay)");
        cJSON_AddNumberToObject(e, "rank", c->rank);
        emit(e);
        c->len = (size_t)-1;
        return;
    }
    c->last_seq = m.seq;
    RankState *rs = &s->ranks[c->rank];
    if (m.type == HB_EVENT) {
        if (!strcmp(m.name, "done")) rs->done = 1;
        else {
            if (!strcmp(m.name, "stopped-on-signal")) rs->stopped = 1;
            /* where the trainer restored from: memory, replica, disk, disk-fallback, scratch */
            if (c->rank == 0 && (!strncmp(m.name, "restored-from-", 14) || !strcmp(m.name, "disk-fallback") ||
                                 !strcmp(m.name, "started-from-scratch")))
                snprintf(s->source, sizeof s->source, "%s",
                         !strncmp(m.name, "restored-from-", 14) ? m.name + 14 : m.name);
            if (c->rank == 0 && !strcmp(m.name, "mem-copy-rejected")) s->copy_rejected = 1;
            cJSON *e = ev("rank-event");
            cJSON_AddNumberToObject(e, "rank", c->rank);
            cJSON_AddStringToObject(e, "name", m.name);
            emit(e);
        }
        return;
    }
    if (m.type == HB_FROM) { /* resumed position: the next step it computes is m.step + 1 */
        if (rs->first_step < 0) rs->first_step = m.step + 1;
        if (m.step > rs->step) rs->step = m.step;
        rs->last_progress = now_s();
        update_job_step(s);
        return;
    }
    if (m.type != HB_STEP) return;
    if (rs->first_step < 0) rs->first_step = m.step;
    if (m.step > rs->step) {
        rs->step = m.step;
        rs->last_progress = now_s();
    }
    if (m.step > rs->best_step) rs->best_step = m.step;
    if (is_hold_step(s, m.step)) rs->held = m.step;
    update_job_step(s);
    maybe_inject(s, c->rank, m.step);
    release_holds(s);
}

static void read_conn(Sup *s, int ci) {
    Conn *c = &s->conns[ci];
    char tmp[4096];
    ssize_t r = recv(c->fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) { /* EOF: the rank's process is gone (or closed after "done") */
        if (c->rank >= 0) {
            RankState *rs = &s->ranks[c->rank];
            rs->closed = 1;
            if (!rs->done && !rs->stopped && !graceful_signal && !s->failed) {
                cJSON *e = ev("exit");
                cJSON_AddNumberToObject(e, "rank", c->rank);
                cJSON_AddNumberToObject(e, "pid", (double)rs->pid);
                cJSON_AddStringToObject(e, "host", rs->host);
                cJSON_AddNumberToObject(e, "step", (double)rs->step);
                cJSON_AddStringToObject(e, "why", "heartbeat connection closed before the rank finished");
                emit(e);
                fail(s, "rank %d (pid %lld on %s) exited at step %lld", c->rank, rs->pid, rs->host, rs->step);
            }
        }
        close_conn(s, ci);
        release_holds(s);
        return;
    }
    for (ssize_t i = 0; i < r; i++) {
        if (tmp[i] == '\n') {
            c->buf[c->len] = 0;
            c->len = 0;
            handle_line(s, ci, c->buf);
            c = &s->conns[ci];
            if (c->len == (size_t)-1) {
                close_conn(s, ci);
                return;
            }
        } else if (c->len + 1 >= sizeof c->buf) {
            cJSON *e = ev("auth-refused");
            cJSON_AddStringToObject(e, "reason", "line too long");
            emit(e);
            close_conn(s, ci);
            return;
        } else c->buf[c->len++] = tmp[i];
    }
}

static void accept_conns(Sup *s, int lfd) {
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) return;
        if (s->nconns == s->cap_conns) {
            s->cap_conns = s->cap_conns ? 2 * s->cap_conns : 64;
            s->conns = realloc(s->conns, (size_t)s->cap_conns * sizeof *s->conns);
        }
        Conn *c = &s->conns[s->nconns++];
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->rank = -1;
        uint8_t nonce[HB_NONCE_BYTES];
        if (random_bytes(nonce, sizeof nonce) != 0) memset(nonce, 0, sizeof nonce);
        hex_encode(nonce, sizeof nonce, c->nonce);
        char greet[64];
        snprintf(greet, sizeof greet, "MYRHB1 %s\n", c->nonce);
        send_line(fd, greet);
    }
}

/* Detect hung ranks: silent for --hang-timeout, or not connected --start-timeout after launch.
 * With collectives a stuck rank stalls everyone; the rank that went silent first is blamed. */
static void check_timeouts(Sup *s) {
    double t = now_s();
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
        cJSON *e = ev("heartbeat-timeout");
        cJSON_AddNumberToObject(e, "rank", worst);
        cJSON_AddNumberToObject(e, "pid", (double)rs->pid);
        cJSON_AddStringToObject(e, "host", rs->host);
        cJSON_AddNumberToObject(e, "step", (double)rs->step);
        cJSON_AddNumberToObject(e, "silent_s", round((t - rs->last_progress) * 1000) / 1000);
        cJSON_AddNumberToObject(e, "timeout_s", s->o->hang_timeout);
        if (s->stop_time[worst] > 0)
            cJSON_AddNumberToObject(e, "since_stop_s", round((t - s->stop_time[worst]) * 1000) / 1000);
        emit(e);
        fail(s, "rank %d (pid %lld on %s) made no progress for %.1f s after step %lld", worst, rs->pid, rs->host,
             t - rs->last_progress, rs->step);
        return;
    }
    if (s->o->start_timeout > 0 && t - s->launch_time > s->o->start_timeout) {
        for (int r = 0; r < s->o->nranks; r++)
            if (!s->ranks[r].connected) {
                cJSON *e = ev("heartbeat-timeout");
                cJSON_AddNumberToObject(e, "rank", r);
                cJSON_AddStringToObject(e, "why", "never connected");
                cJSON_AddNumberToObject(e, "timeout_s", s->o->start_timeout);
                emit(e);
                fail(s, "rank %d never connected within %.0f s of the launch", r, s->o->start_timeout);
                return;
            }
    }
}

/* Kill the attempt: every rank pid we know (SIGKILL also ends SIGSTOPped ones), then the
 * launcher's process group (mpirun, its rsh agents, local ranks) with SIGTERM, SIGKILL after 3 s. */
static int teardown(Sup *s, pid_t child, int *status) {
    cJSON *e = ev("kill");
    cJSON_AddNumberToObject(e, "attempt", s->attempt);
    cJSON *pids = cJSON_AddArrayToObject(e, "pids");
    for (int r = 0; r < s->o->nranks; r++)
        if (s->ranks[r].connected && !s->ranks[r].closed && s->ranks[r].pid > 0 &&
            (!s->use_srun || !strcmp(s->ranks[r].host, s->self_host))) { /* srun: a pid elsewhere is not ours */
            kill((pid_t)s->ranks[r].pid, SIGKILL);
            cJSON_AddItemToArray(pids, cJSON_CreateNumber((double)s->ranks[r].pid));
        }
    cJSON_AddNumberToObject(e, "launcher_pid", child);
    emit(e);
    /* srun --quit-on-interrupt: one SIGINT makes srun kill the step's tasks on every node */
    if (s->use_srun) kill(child, SIGINT);
    /* with its ranks killed mpirun aborts by itself (a SIGTERM in the middle of that abort can
     * crash Open MPI 4.1's mpirun): give it 5 s, then SIGTERM, then after 2 s more SIGKILL. srun has
     * had its SIGINT; it may wait for a dead node's answer: SIGKILL after 2 s (the step's tasks on
     * the live nodes were killed by their slurmstepd) */
    double t0 = now_s(), term_at = s->use_srun ? 2 : 5, kill_at = s->use_srun ? 2 : 7;
    int reaped = 0, termed = 0;
    while (!reaped) {
        pid_t w = waitpid(child, status, WNOHANG);
        if (w == child) reaped = 1;
        else if (!termed && now_s() > t0 + term_at && term_at < kill_at) kill(-child, SIGTERM), termed = 1;
        else if (now_s() > t0 + kill_at) {
            kill(-child, SIGKILL);
            waitpid(child, status, 0);
            reaped = 1;
        } else usleep(20000);
    }
    kill(-child, SIGKILL); /* stragglers left in the group */
    return 0;
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
        cJSON *e = ev("node-check-failed");
        cJSON_AddStringToObject(e, "why", myr_last_error());
        emit(e);
    }
    for (int k = 0; k < nlost; k++)
        for (int i = 0; i < n; i++)
            if (!strcmp(names[i], lost[k].node)) {
                s->hosts[idx[i]].lost = 1;
                cJSON *e = ev("node-lost");
                cJSON_AddStringToObject(e, "node", lost[k].node);
                cJSON_AddStringToObject(e, "why", lost[k].why);
                emit(e);
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
    double t0 = now_s();
    int flagged = slurm_wait_flagged(names, n, wait);
    cJSON *e = ev("nodes-settled");
    cJSON *arr = cJSON_AddArrayToObject(e, "nodes");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateString(names[i])), s->hosts[idx[i]].settled = 1;
    cJSON_AddBoolToObject(e, "slurm_flagged", flagged);
    cJSON_AddNumberToObject(e, "waited_s", round((now_s() - t0) * 1000) / 1000);
    if (!flagged) {
        int rc = slurm_release_nodes(names, n);
        cJSON_AddNumberToObject(e, "released", rc > 0 ? rc : 0);
        if (rc < 0) cJSON_AddStringToObject(e, "release_failed", myr_last_error());
    }
    emit(e);
    free(names), free(idx);
    return flagged;
}

/* No spare left for a lost node of a Slurm allocation: the job can go on after a requeue, on other
 * nodes (the lost ones settled first, above). */
static int requeue_exit(Sup *s, const char *why) {
    settle_lost_nodes(s);
    cJSON *e = ev("requeue");
    cJSON_AddStringToObject(e, "why", why);
    cJSON_AddNumberToObject(e, "exit_code", SLURM_EXIT_REQUEUE);
    emit(e);
    return SLURM_EXIT_REQUEUE;
}

/* Replace lost active hosts with unused spares; -1 when a lost host has no spare left. */
static int replace_lost_hosts(Sup *s) {
    for (int i = 0; i < s->nactive; i++) {
        Host *h = &s->hosts[s->active[i]];
        if (!h->lost) continue;
        int spare = -1;
        for (int j = s->nhosts - s->o->spares; j < s->nhosts && spare < 0; j++) {
            int used = 0;
            for (int k = 0; k < s->nactive; k++) used |= s->active[k] == j;
            if (!used && !s->hosts[j].lost) spare = j;
        }
        if (spare < 0)
            return myr_error("run: %s %s is lost and no spare %s is left (--spares %d)", s->slurm_nodes ? "node" : "host", h->name,
                             s->slurm_nodes ? "node of this allocation" : "host", s->o->spares);
        cJSON *e = ev("spare-used");
        cJSON_AddStringToObject(e, "lost", h->name);
        cJSON_AddStringToObject(e, "spare", s->hosts[spare].name);
        emit(e);
        s->active[i] = spare;
    }
    return 0;
}

/* Productive time: for every step of the final trajectory, its duration in the last attempt that
 * computed it (earlier computations of it were lost). docs/LAUNCHER.md defines it precisely. */
static double productive_time(Sup *s, int nattempts, long long *steps_out) {
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
    t_start = o->t_start > 0 ? o->t_start : now_s(); /* a pre-flight check counts as launcher time */
    Sup sup = {.o = o}, *s = &sup;
    s->corrupt_state = o->plan.seed ^ 0x5eedull;
    if (o->events_path) {
        events_file = fopen(o->events_path, "a");
        if (!events_file) myr_die("run: cannot open --events %s: %s", o->events_path, strerror(errno));
    }
    int use_srun = o->launcher ? !strcmp(o->launcher, "srun") : getenv("SLURM_JOB_ID") != NULL;
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

    char *tool = path_find_program(use_srun ? "srun" : "mpirun");
    if (!tool)
        myr_die("run: %s not found on PATH; install it or pass --launcher %s", use_srun ? "srun" : "mpirun",
                use_srun ? "mpirun" : "srun");

    if (random_bytes(s->secret, sizeof s->secret) != 0) myr_die("run: cannot read /dev/urandom for the job secret");
    char hex[2 * HB_SECRET_BYTES + 1];
    hex_encode(s->secret, sizeof s->secret, hex);
    char reachable[INET_ADDRSTRLEN] = "127.0.0.1";
    if (!o->hb_host && use_srun) reachable_address(reachable);
    const char *hb_host = o->hb_host ? o->hb_host : reachable;
    int port = 0, lfd = -1;
    if (!o->dry_run) {
        lfd = listen_on(hb_host, &port);
        if (lfd < 0) myr_die_last();
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
    s->tl = calloc((size_t)o->max_restarts + 1, sizeof *s->tl);
    for (int r = 0; r < o->nranks; r++) s->ranks[r].best_step = -1;
    int exit_code = 1, restarts = 0, finished = 0, stopped = 0, requeue = 0, nonfinite = 0;
    char hostfile[64] = "";

    for (s->attempt = 0; s->attempt <= o->max_restarts && !stop_signal && !graceful_signal; s->attempt++) {
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
        s->fault_fired_this_attempt = 0, s->lost_host_this_attempt = -1;
        s->source[0] = 0, s->copy_rejected = 0;
        set_holds(s);
        char att[16];
        snprintf(att, sizeof att, "%d", s->attempt);
        setenv("MYRIAD_HB_ATTEMPT", att, 1);
        if (s->nactive) {
            if (hostfile[0]) unlink(hostfile);
            if (write_hostfile(s, hostfile) != 0) myr_die_last();
        }
        char **argv = build_argv(o, use_srun, tool, use_srun || !s->nactive ? NULL : hostfile, s->hosts, s->nhosts,
                                 s->active, s->nactive, s->attempt);
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
        cJSON *e = ev("launch");
        cJSON_AddNumberToObject(e, "attempt", s->attempt);
        cJSON_AddStringToObject(e, "launcher", use_srun ? "srun" : "mpirun");
        if (s->nactive) {
            cJSON *hs = cJSON_AddArrayToObject(e, "hosts");
            for (int i = 0; i < s->nactive; i++) cJSON_AddItemToArray(hs, cJSON_CreateString(s->hosts[s->active[i]].name));
        }
        cJSON_AddStringToObject(e, "cmd", line);
        emit(e);
        free(line);
        fflush(stdout);
        fflush(stderr);
        s->launch_time = now_s();
        pid_t child = fork();
        if (child < 0) myr_die("run: fork failed: %s", strerror(errno));
        if (child == 0) {
            setpgid(0, 0); /* its own group: teardown kills mpirun and everything it started */
            signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGHUP, SIG_DFL), signal(SIGUSR1, SIG_DFL);
            if (use_srun && s->nactive) setenv("SLURM_HOSTFILE", hostfile, 1);
            execv(argv[0], argv);
            fprintf(stderr, "myriad: run: cannot execute %s: %s\n", argv[0], strerror(errno));
            _exit(127);
        }
        setpgid(child, child);
        child_pgid = child;
        if (graceful_signal) kill(child, SIGUSR1); /* it came while this attempt was starting */
        argv_free(argv);

        int status = 0, exited = 0, stuck = 0;
        double all_done_since = 0, grace_until = 0;
        while (!exited && !s->failed && !stop_signal && !stuck) {
            if (graceful_signal && !grace_until) {
                grace_until = now_s() + o->stop_grace;
                cJSON *x = ev("stopping");
                cJSON_AddNumberToObject(x, "signal", graceful_signal);
                cJSON_AddNumberToObject(x, "grace_s", o->stop_grace);
                emit(x);
            } else if (grace_until && now_s() > grace_until) {
                cJSON *x = ev("stop-grace-expired");
                cJSON_AddNumberToObject(x, "grace_s", o->stop_grace);
                emit(x);
                break;
            }
            struct pollfd *pfd = malloc((size_t)(s->nconns + 1) * sizeof *pfd);
            pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
            for (int i = 0; i < s->nconns; i++) pfd[i + 1] = (struct pollfd){.fd = s->conns[i].fd, .events = POLLIN};
            int nfds = s->nconns + 1;
            poll(pfd, (nfds_t)nfds, 20);
            int *fds = malloc((size_t)nfds * sizeof *fds);
            for (int i = 0; i < nfds; i++) fds[i] = pfd[i].revents ? pfd[i].fd : -1;
            free(pfd);
            if (fds[0] >= 0) accept_conns(s, lfd);
            for (int i = 1; i < nfds; i++) {
                if (fds[i] < 0) continue;
                for (int ci = 0; ci < s->nconns; ci++)
                    if (s->conns[ci].fd == fds[i]) {
                        read_conn(s, ci);
                        break;
                    }
            }
            free(fds);
            if (waitpid(child, &status, WNOHANG) == child) exited = 1;
            else if (!s->failed && !graceful_signal) check_timeouts(s);
            /* every rank reported "done" (its outputs are written) but the job does not exit, e.g. a
             * rank stopped after its last heartbeat: the run is complete, end it rather than wait */
            int all_done = !exited;
            for (int r = 0; r < o->nranks && all_done; r++) all_done = s->ranks[r].done;
            double grace = o->hang_timeout > 0 ? o->hang_timeout : 30;
            if (!all_done) all_done_since = 0;
            else if (!all_done_since) all_done_since = now_s();
            else if (now_s() - all_done_since > grace) {
                cJSON *x = ev("exit-stuck");
                cJSON_AddNumberToObject(x, "after_done_s", round((now_s() - all_done_since) * 1000) / 1000);
                emit(x);
                stuck = 1;
            }
        }
        if (stuck) finished = 1, exit_code = 0;
        if (stop_signal) {
            cJSON *k = ev("interrupted");
            cJSON_AddNumberToObject(k, "signal", stop_signal);
            emit(k);
        }
        if (exited) {
            /* drain what the ranks sent just before exiting (their "done" or last steps) */
            for (int pass = 0; pass < 5; pass++) {
                for (int ci = s->nconns - 1; ci >= 0; ci--) read_conn(s, ci);
                usleep(2000);
            }
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            cJSON *x = ev("exit");
            cJSON_AddStringToObject(x, "what", use_srun ? "srun" : "mpirun");
            cJSON_AddNumberToObject(x, "code", code);
            emit(x);
            int nstopped = 0;
            for (int r = 0; r < o->nranks; r++) nstopped += s->ranks[r].stopped;
            if ((code != 0 || nstopped) && (graceful_signal || nstopped == o->nranks)) {
                /* the ranks checkpointed and stopped on a signal (ours, forwarded, or Slurm's --signal
                 * sent to them directly): a requeued job resumes from there */
                stopped = 1;
                exit_code = graceful_signal == SIGTERM ? 128 + SIGTERM : SLURM_EXIT_REQUEUE;
                cJSON *y = ev("stopped");
                cJSON_AddNumberToObject(y, "signal", graceful_signal ? graceful_signal : SIGUSR1);
                cJSON_AddNumberToObject(y, "ranks_checkpointed", nstopped);
                cJSON_AddNumberToObject(y, "step", (double)s->job_step);
                cJSON_AddNumberToObject(y, "exit_code", exit_code);
                emit(y);
            } else if (code == 0 && !s->failed) {
                finished = 1;
                exit_code = 0;
            } else if (code == MYRIAD_EXIT_NONFINITE) { /* a restart would compute the same step again */
                exit_code = code;
                fail(s, "the job stopped itself on a non-finite loss or gradient (exit code %d; see its message)", code);
                nonfinite = 1;
            } else {
                exit_code = code ? code : 1;
                fail(s, "%s exited with code %d", use_srun ? "srun" : "mpirun", code);
            }
        }
        if (!exited) teardown(s, child, &status);
        else kill(-child, SIGKILL); /* anything it left in its group */
        child_pgid = 0;
        for (int ci = s->nconns - 1; ci >= 0; ci--) close_conn(s, ci);
        if (!exited && graceful_signal && !stop_signal) { /* the grace ran out: stopped all the same */
            stopped = 1;
            exit_code = graceful_signal == SIGTERM ? 128 + SIGTERM : SLURM_EXIT_REQUEUE;
        }
        if (finished || stop_signal || stopped) break;
        if (nonfinite) {
            cJSON *g = ev("giving-up");
            cJSON_AddStringToObject(g, "why", s->why);
            emit(g);
            fprintf(stderr, "myriad: run: not restarting: %s; a restart would replay the same step (resume by hand "
                    "with a lower --lr or --on-nan skip)\n", s->why);
            s->attempt++;
            goto done;
        }
        if (s->attempt == o->max_restarts) break;
        if (s->slurm_nodes) find_lost_nodes(s);
        if (replace_lost_hosts(s) != 0) {
            if (s->slurm_nodes) { /* a requeue gets other nodes: say so, and exit for it */
                char why[512];
                snprintf(why, sizeof why, "%s; exiting with %d so that the job is requeued (the script from "
                         "myriad run --slurm-script runs scontrol requeue)", myr_last_error(), SLURM_EXIT_REQUEUE);
                fprintf(stderr, "myriad: %s\n", why);
                exit_code = requeue_exit(s, why);
                requeue = 1;
                s->attempt++;
                goto done;
            }
            fprintf(stderr, "myriad: %s\n", myr_last_error());
            cJSON *g = ev("giving-up");
            cJSON_AddStringToObject(g, "why", myr_last_error());
            emit(g);
            exit_code = 1;
            s->attempt++;
            goto done;
        }
        if (s->slurm_nodes) settle_lost_nodes(s);
        restarts++;
        cJSON *r = ev("restart");
        cJSON_AddNumberToObject(r, "attempt", s->attempt + 1);
        cJSON_AddStringToObject(r, "after", s->why);
        cJSON_AddStringToObject(r, "resume", "auto");
        emit(r);
    }
    if (s->attempt > o->max_restarts) s->attempt = o->max_restarts;
    s->attempt++; /* number of attempts with timelines */
    if (graceful_signal && !finished && !stop_signal && !stopped) { /* it came between two attempts */
        stopped = 1;
        exit_code = graceful_signal == SIGTERM ? 128 + SIGTERM : SLURM_EXIT_REQUEUE;
    }
    if (!finished && !stop_signal && !stopped) {
        cJSON *g = ev("giving-up");
        cJSON_AddNumberToObject(g, "restarts", restarts);
        cJSON_AddStringToObject(g, "why", s->why);
        emit(g);
        fprintf(stderr, "myriad: run: giving up after %d restart%s (--max-restarts %d); last failure: %s\n", restarts,
                restarts == 1 ? "" : "s", o->max_restarts, s->why);
        if (exit_code == 0) exit_code = 1;
    }
done:;
    if (!finished) report_leftover_copies();
    if (stop_signal && !finished) exit_code = 128 + stop_signal;
    long long steps = 0;
    double wall = now_s() - t_start;
    double productive = productive_time(s, s->attempt, &steps);
    cJSON *f = ev("finished");
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
    emit(f);
    fprintf(stderr, "myriad run: %s after %d restart%s; goodput %.1f%% (%.2f s productive of %.2f s wall, %lld steps)\n",
            finished ? "finished" : "stopped", restarts, restarts == 1 ? "" : "s", wall > 0 ? 100 * productive / wall : 0,
            productive, wall, steps);
    if (hostfile[0]) unlink(hostfile);
    if (events_file) fclose(events_file);
    for (int a = 0; a <= o->max_restarts; a++) free(s->tl[a].t);
    free(s->tl), free(s->holds), free(s->ranks), free(s->stop_time), free(s->conns), free(s->hosts), free(s->active), free(tool);
    if (lfd >= 0) close(lfd);
    return exit_code;
}
