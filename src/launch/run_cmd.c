/* run_cmd.c: `myriad run -n N -- <subcommand> [args...]`: starts this binary on N ranks through
 * mpirun with the flags a workstation needs (--oversubscribe, no core binding, root allowed,
 * OpenMP threads split between the ranks), turns the first SIGINT/SIGTERM into a checkpoint and
 * stop of every rank (a second SIGINT ends the job at once), and exits with mpirun's exit code. Any fault-tolerance option (--hosts, --max-restarts, --hang-timeout, --inject, ...)
 * hands the job to the supervisor (supervise.c): heartbeats, restarts, spares, fault injection,
 * event log and goodput; through srun inside a Slurm allocation (always supervised there).
 * --slurm-script prints an sbatch script that runs the same command with requeue and recovery
 * (slurm_script.c, docs/SLURM.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "launch/mpi_noise.h"
#include "launch/preflight.h"
#include "launch/rank_binding.h"
#include "launch/slurm_script.h"
#include "launch/supervise.h"
#include "launch/train_precheck_run.h"
#include "util/opts.h"
#include "util/error.h"
#include "util/path.h"

static volatile sig_atomic_t child_pid, graceful, hard;

static void say(const char *s) {
    for (size_t n = strlen(s); n > 0;) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w, n -= (size_t)w;
    }
}

/* mpirun runs in its own process group, so a terminal's Ctrl-C reaches only this process (mpirun
 * would abort the job on it, killing the ranks before they can save anything). A first SIGINT, or
 * SIGTERM, becomes SIGUSR1 to mpirun, which forwards it to every rank: `myriad train` then
 * checkpoints after the step all ranks agree on and exits (src/train/stop_signal.c). A second
 * SIGINT, or SIGHUP, is passed on to mpirun: the job ends at once. */
static void forward(int sig, siginfo_t *info, void *ctx) {
    (void)ctx, (void)info;
    if ((sig == SIGINT || sig == SIGTERM) && !graceful) {
        graceful = sig;
        if (sig == SIGINT)
            say("\nmyriad run: interrupt: every rank checkpoints after the step they agree on and stops; press "
                "Ctrl-C again to stop at once (losing the steps since the last checkpoint)\n");
        if (child_pid > 0) kill(child_pid, SIGUSR1);
        return;
    }
    if (sig == SIGTERM) return; /* already stopping */
    if (!hard) {
        hard = sig;
        say("\nmyriad run: stopping at once: the steps since the last checkpoint are lost\n");
    }
    if (child_pid > 0) kill(child_pid, sig == SIGHUP ? SIGHUP : SIGINT);
}

/* Environment every launch needs: root allowed for Open MPI, OpenMP threads split between ranks. */
static void launch_env(int n) {
    if (geteuid() == 0) { /* Open MPI refuses root without both variables */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    if (!getenv("OMP_NUM_THREADS")) { /* N ranks x all cores of OpenMP threads would thrash */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        char t[24];
        snprintf(t, sizeof t, "%ld", cores / n > 1 ? cores / n : 1);
        setenv("OMP_NUM_THREADS", t, 1);
    }
}

/* `myriad train` checks its command line against n ranks in one process (MYRIAD_PRECHECK_WORLD,
 * src/train/train_precheck.c) before mpirun starts any: a bad layout or shape is one line from
 * here, not one per rank followed by mpirun's abort messages. */
static void precheck_train(int n, int argc, char **argv, int first) {
    char self[PATH_MAX];
    if (path_self(self, sizeof self) != 0) return;
    char **args = calloc((size_t)(argc - first + 2), sizeof *args);
    if (!args) return;
    args[0] = self;
    for (int i = first; i < argc; i++) args[i - first + 1] = argv[i];
    char out[8192];
    int rc = train_precheck_run(args, n, 0, 0, out, sizeof out);
    free(args);
    if (rc == 0 || rc < 0 || (rc == 127 && !out[0])) return; /* could not run the check: the run will say */
    fputs(out, stderr);
    exit(rc);
}

static int run_supervised(SuperviseOpts *so, const PreflightOpts *pf, int n, int dry, int exec_mode, int argc,
                          char **argv, int first, const char **extra, int nextra) {
    char self[PATH_MAX];
    if (path_self(self, sizeof self) != 0) myr_die("run: %s", myr_last_error());
    char **cmd = calloc((size_t)(argc - first + 2), sizeof *cmd);
    int k = 0;
    if (!exec_mode) cmd[k++] = self;
    for (int i = first; i < argc; i++) cmd[k++] = argv[i];
    so->nranks = n;
    so->cmd = cmd;
    so->extra = (char **)extra;
    so->nextra = nextra;
    so->dry_run = dry;
    launch_env(n);
    char checked_hosts[64] = "";
    int rc = 0;
    if (pf->enabled) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        so->t_start = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
        if (preflight_run(so, pf, self, checked_hosts) != 0) {
            fprintf(stderr, "myriad: %s\n", myr_last_error());
            rc = 1;
        }
    }
    if (!rc) rc = supervise(so);
    if (checked_hosts[0]) unlink(checked_hosts);
    inject_free(&so->plan);
    free(cmd);
    return rc;
}

/* The run options to repeat in a --slurm-script: argv[1..end) without --slurm-script and the options
 * that only shape sbatch's request (their rows point into sc). */
static char **script_run_opts(const Opt *rows, const SlurmScript *sc, int argc, char **argv, int end, int *nout) {
    char **out = calloc((size_t)argc + 1, sizeof *out);
    int n = 0;
    for (int i = 1; i < end && strcmp(argv[i], "--"); i++) {
        const Opt *o = opts_find(rows, argv[i]);
        int nval = !o || o->kind == OPT_KIND_SWITCH ? 0 : o->kind == OPT_KIND_CALL && o->nargs > 1 ? o->nargs : 1;
        const char *dst = o ? (const char *)o->dst : NULL;
        int script_only = o && (!strcmp(o->name, "--slurm-script") ||
                                (dst >= (const char *)sc && dst < (const char *)(sc + 1)));
        for (int k = 0; k <= nval && i + k < end; k++)
            if (!script_only) out[n++] = argv[i + k];
        i += nval;
    }
    *nout = n;
    return out;
}

static int write_slurm_script(SlurmScript *sc, int n, int spares, int exec_mode, char **run_opts, int nrun_opts,
                              int argc, char **argv, int first) {
    char self[PATH_MAX], cwd[PATH_MAX];
    if (path_self(self, sizeof self) != 0) myr_die("run: %s", myr_last_error());
    if (!getcwd(cwd, sizeof cwd)) myr_die("run: cannot read the current directory: %s", strerror(errno));
    sc->nranks = n, sc->spares = spares, sc->exec_mode = exec_mode;
    sc->myriad = self, sc->workdir = cwd;
    sc->run_opts = run_opts, sc->nrun_opts = nrun_opts;
    sc->cmd = argv + first, sc->ncmd = argc - first;
    if (slurm_script_write(stdout, sc)) myr_die_last();
    return fflush(stdout) == 0 ? 0 : 1;
}

static int add_inject_rate(void *dst, const char *v) {
    SuperviseOpts *so = dst;
    if (so->plan.clock.mtbf_s > 0) return myr_error("--inject-rate is given once (one clock; list several kinds in it, e.g. kill+hang:20)");
    return fault_clock_parse(&so->plan.clock, v);
}

static int add_inject(void *dst, const char *v) {
    SuperviseOpts *so = dst;
    if (so->nranks < 1) return myr_error("give -n N before --inject (rank numbers are checked against N)");
    return inject_parse(&so->plan, v, so->nranks);
}

typedef struct {
    const char *v[32];
    int n;
} Extra;

static int add_extra(void *dst, const char *v) {
    Extra *e = dst;
    if (e->n == 32) return myr_error("at most 32 --mpirun-arg");
    e->v[e->n++] = v;
    return 0;
}

static int add_doctor_arg(void *dst, const char *v) {
    PreflightOpts *pf = dst;
    if (pf->ndoctor_args == PREFLIGHT_MAX_ARGS) return myr_error("at most %d --doctor-arg", PREFLIGHT_MAX_ARGS);
    pf->doctor_args[pf->ndoctor_args++] = v;
    return 0;
}

static int set_launcher(void *dst, const char *v) {
    if (strcmp(v, "mpirun") && strcmp(v, "srun") && strcmp(v, "direct"))
        return myr_error("--launcher must be mpirun, srun or direct, not '%s'", v);
    *(const char **)dst = v;
    return 0;
}

int cmd_run(int argc, char **argv) {
    int n = 0, dry = 0, first = -1, supervised = 0, exec_mode = 0, script = 0;
    Extra extra = {{0}, 0};
    SuperviseOpts so = {.max_restarts = 3, .start_timeout = -1, .metrics_port = -1, .probe_timeout = 30, .node_wait = -1,
                        .stop_grace = 60};
    straggler_options_default(&so.straggler);
    static const char *const straggler_actions[] = {"warn", "evict", NULL};
    SlurmScript sc = {.signal_lead_s = 120};
    PreflightOpts pf = {0};
    int pf_given = 0;
    int *S = &supervised;
    const Opt rows[] = {
        OPT_ALIAS(OPT_INT("-np", "N", &so.nranks, 1, 1 << 24, "number of ranks (required)"), "-n"),
        OPT_CALL("--mpirun-arg", "ARG", &extra, add_extra, "pass ARG to mpirun (or srun) (repeatable), e.g. --mpirun-arg --tag-output"),
        OPT_SWITCH("--dry-run", &dry, "print the launch command line and exit"),
        OPT_STR("--mpi-log", "FILE", &so.mpi_log,
                "where mpirun's own messages go (default: $TMPDIR or /tmp, myriad-run-PID.log,\n"
                "made only when there are some; named at the end)"),
        OPT_SECTION("fault tolerance (any of these turns on the supervisor, see docs/LAUNCHER.md):"),
        OPT_GIVEN(OPT_STR("--hosts", "FILE", &so.hosts_file, "hosts, one per line 'HOST [slots=N]'; the last --spares K are spares"), S),
        OPT_GIVEN(OPT_INT("--spares", "K", &so.spares, 0, 1 << 20, "hot spare hosts at the end of --hosts (default 0)"), S),
        OPT_GIVEN(OPT_INT("--max-restarts", "R", &so.max_restarts, 0, 1000, "relaunch at most R times, with --resume auto (default 3)"), S),
        OPT_GIVEN(OPT_DOUBLE("--hang-timeout", "S", &so.hang_timeout, 0, 1e9,
                             "a rank without a new step for S seconds is dead (default 0 = off)"), S),
        OPT_GIVEN(OPT_POSITIVE("--start-timeout", "S", &so.start_timeout, 1e9,
                               "every rank must connect within S seconds of a launch\n"
                               "(default 300 with --hang-timeout, else off)"), S),
        OPT_GIVEN(OPT_CALL("--inject", "SPEC", &so, add_inject,
                           "faults: kill@STEP:RANK, hang@STEP:RANK, host@STEP:HOST, corrupt@STEP,\n"
                           "nan@STEP:RANK, slow@STEP:RANK:FACTOR, cmd@STEP, random:SEED:COUNT[:MAXSTEP]\n"
                           "(comma-separated, repeatable)"), S),
        OPT_GIVEN(OPT_CALL("--inject-rate", "SPEC", &so, add_inject_rate,
                           "faults at Poisson times: KINDS:MTBF_SECONDS[,seed=N], KINDS of kill, hang,\n"
                           "host joined by '+' (e.g. kill+hang:20,seed=3): one exponential wait of up\n"
                           "time per attempt, a seeded schedule (docs/OPERATIONS.md)"), S),
        OPT_GIVEN(OPT_STR("--events", "FILE", &so.events_path, "append every event as a JSON line to FILE"), S),
        OPT_GIVEN(OPT_STR("--ckpt-dir", "DIR", &so.ckpt_dir, "checkpoint dir (exported as MYRIAD_CKPT_DIR; corrupt@ flips a bit there)"), S),
        OPT_GIVEN(OPT_STR("--hb-addr", "ADDR", &so.hb_host, "address the ranks reach the launcher at (default 127.0.0.1)"), S),
        OPT_GIVEN(OPT_STR("--cut-link-cmd", "CMD", &so.cut_link_cmd, "shell command run when host@ fires (MYRIAD_LOST_HOST names the host)"), S),
        OPT_GIVEN(OPT_STR("--fault-cmd", "CMD", &so.fault_cmd, "shell command run when cmd@STEP fires, the ranks waiting at STEP"), S),
        OPT_GIVEN(OPT_CALL("--launcher", "mpirun|srun|direct", &so.launcher, set_launcher,
                           "default: srun when SLURM_JOB_ID is set; direct runs the command once\n"
                           "(it starts the ranks itself, e.g. a load generator)"), S),
        OPT_GIVEN(OPT_SWITCH("--exec", &exec_mode, "the command after -- is a program, not a myriad subcommand"), S),
        OPT_SWITCH("--supervise", &supervised, "use the supervisor with all defaults"),
        OPT_GIVEN(OPT_INT("--elastic", "MIN", &so.elastic_min, 1, 1 << 24,
                          "a lost host with no spare left: go on at the largest data-parallel size the\n"
                          "other hosts hold, down to MIN (global batch kept); grow back when hosts are\n"
                          "added to --hosts (train only; needs --save-every)"), S),
        OPT_GIVEN(OPT_DOUBLE("--stop-grace", "S", &so.stop_grace, 0, 1e9,
                             "after SIGTERM/SIGUSR1 the ranks checkpoint and stop within S s (default 60)"), S),
        OPT_SECTION("pre-flight (docs/OPERATIONS.md):"),
        OPT_GIVEN(OPT_SWITCH("--preflight", &pf.enabled,
                             "first run `myriad doctor` over every host and spare; launch on healthy\n"
                             "hosts (flagged ones replaced by spares), or refuse with the reasons"), &pf_given),
        OPT_CALL("--doctor-arg", "ARG", &pf, add_doctor_arg,
                 "pass ARG to the doctor (repeatable), e.g. --doctor-arg --baseline --doctor-arg F"),
        OPT_GIVEN(OPT_STR("--preflight-out", "F", &pf.out_path, "write the doctor's JSON verdict to F (implies --preflight)"), &pf_given),
        OPT_POSITIVE("--preflight-timeout", "S", &pf.timeout_s, 1e9,
                     "the doctor must finish within S seconds (default 300; relaunched once)"),
        OPT_SECTION("operations (see docs/OPERATIONS.md):"),
        OPT_GIVEN(OPT_CHOICE("--straggler-action", "A", &so.straggler_evict, straggler_actions,
                             "warn (default) or evict: a straggler's host is replaced by a spare"), S),
        OPT_GIVEN(OPT_BELOW(OPT_POSITIVE("--straggler-threshold", "X", &so.straggler.threshold, 1,
                                         "compute score against the peers' median below which a window counts (0.75)")), S),
        OPT_GIVEN(OPT_INT("--straggler-window", "W", &so.straggler.window, 1, 32, "steps per window (5)"), S),
        OPT_GIVEN(OPT_INT("--straggler-windows", "K", &so.straggler.consecutive, 1, 1000,
                          "windows below the threshold in a row that make a straggler (3)"), S),
        OPT_GIVEN(OPT_DOUBLE("--straggler-horizon", "S", &so.straggler.horizon_s, 0, 86400,
                             "and slow over its last S seconds of steps (60; 0 = off): a passing\n"
                             "slowdown (another tenant on a shared core) is not a straggler"), S),
        OPT_GIVEN(OPT_INT("--metrics-port", "P", &so.metrics_port, 0, 65535,
                          "serve Prometheus metrics on http://ADDR:P/metrics (0: any free port)"), S),
        OPT_GIVEN(OPT_STR("--metrics-addr", "ADDR", &so.metrics_addr, "address for --metrics-port (default: every interface)"), S),
        OPT_GIVEN(OPT_DOUBLE("--metrics-linger", "S", &so.metrics_linger, 0, 1e6,
                             "after the job, serve /metrics until one scrape has read the final figures\n"
                             "(at most S s; default 0)"), S),
        OPT_SECTION("under Slurm (inside salloc/sbatch: srun, the allocation's nodes, --spares counts nodes; docs/SLURM.md):"),
        OPT_GIVEN(OPT_DOUBLE("--probe-timeout", "S", &so.probe_timeout, 0, 1e9,
                             "after a failure, a probe step on each node must end within S s (default 30; 0 = off)"), S),
        OPT_GIVEN(OPT_DOUBLE("--node-wait", "S", &so.node_wait, 0, 1e9,
                             "wait at most S s for Slurm to declare lost nodes down before the relaunch\n"
                             "(or, with no spare left, exit 75 for a requeue) (default SlurmdTimeout + 30)"), S),
        OPT_SECTION("sbatch script (print it instead of running; the run options above are repeated in it):"),
        OPT_SWITCH("--slurm-script", &script, "print an sbatch script for this command (> job.sbatch; sbatch job.sbatch)"),
        OPT_INT("--nodes", "K", &sc.nodes, 1, 1 << 20, "nodes for the ranks (default: what -n and --tasks-per-node need); --spares K adds K"),
        OPT_INT("--tasks-per-node", "T", &sc.tasks_per_node, 1, 1 << 16, "ranks per node"),
        OPT_INT("--gpus-per-task", "G", &sc.gpus_per_task, 0, 1 << 10, "GPUs per rank (default 0: none asked)"),
        OPT_STR("--switches", "N[@WAIT]", &sc.switches, "at most N leaf switches (sbatch --switches)"),
        OPT_STR("--time", "T", &sc.time_limit, "time limit (sbatch --time)"),
        OPT_INT("--signal-lead", "S", &sc.signal_lead_s, 1, 1 << 24, "checkpoint S s before the time limit (default 120)"),
        OPT_STR("--partition", "P", &sc.partition, "partition"),
        OPT_STR("--account", "A", &sc.account, "account"),
        OPT_STR("--job-name", "J", &sc.job_name, "job name"),
        OPT_STR("--output", "F", &sc.output, "Slurm's output file for the job"),
        OPT_END};
    OptCommand cmd = {
        .name = "run",
        .usage = "usage: myriad run -n N [options] -- <subcommand> [args...]",
        .rows = rows,
        .footer = "Runs `mpirun -np N --oversubscribe --bind-to B <this binary> <subcommand> ...`; sets\n"
                  "OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) when run as root and OMP_NUM_THREADS=max(1, cores/N)\n"
                  "unless already set; B is core:overload-allowed with one thread per rank on this machine\n"
                  "alone, else none (--mpirun-arg --bind-to, --cpu-set or --rankfile wins); exits with\n"
                  "mpirun's exit code. The first Ctrl-C (or SIGTERM) makes every rank checkpoint and stop\n"
                  "(exit 130, 143); a second Ctrl-C stops at once.\n",
        .stop_at_positional = 1};
    first = opts_parse(&cmd, argc, argv);
    n = so.nranks;
    const char **extra_v = extra.v;
    int nextra = extra.n;
    if (n < 1) myr_die("run: give the number of ranks with -n N (N >= 1), e.g. myriad run -n 4 -- bench comm");
    if (first < 0 || first >= argc) myr_die("run: no subcommand to run; e.g. myriad run -n %d -- bench comm", n);
    if (!exec_mode && !strcmp(argv[first], "run")) myr_die("run: refusing to nest 'myriad run' inside itself");
    if (script) {
        int nrun_opts = 0;
        char **run_opts = script_run_opts(rows, &sc, argc, argv, first, &nrun_opts);
        int rc = write_slurm_script(&sc, n, so.spares, exec_mode, run_opts, nrun_opts, argc, argv, first);
        free(run_opts);
        return rc;
    }
    if (sc.nodes || sc.tasks_per_node || sc.gpus_per_task || sc.switches || sc.time_limit ||
                    sc.partition || sc.account || sc.job_name || sc.output || sc.signal_lead_s != 120)
        myr_die("run: --nodes, --tasks-per-node, --gpus-per-task, --switches, --time, --signal-lead, --partition, "
                "--account, --job-name and --output shape an sbatch script: add --slurm-script");
    int host_fault = 0;
    for (int i = 0; i < so.plan.n; i++) host_fault |= so.plan.faults[i].kind == FAULT_HOST;
    host_fault |= so.plan.clock.kinds[CLOCK_HOST];
    if (so.plan.clock.kinds[CLOCK_HOST] && (!so.hosts_file || so.spares < 1))
        myr_die("run: --inject-rate host:... loses hosts: give --hosts FILE with --spares K (a spare replaces each lost host)");
    /* the clock strikes only while steps are computed: up to train's last step (its --steps) */
    if (so.plan.clock.mtbf_s > 0 && !exec_mode && first < argc && !strcmp(argv[first], "train"))
        for (int i = first + 1; i + 1 < argc; i++)
            if (!strcmp(argv[i], "--steps")) so.plan.clock_last_step = atoll(argv[i + 1]);
    if (so.cut_link_cmd && !host_fault)
        myr_die("run: --cut-link-cmd runs when a host@ fault fires: add --inject host@STEP:HOST (or drop it)");
    if (so.elastic_min && exec_mode)
        myr_die("run: --elastic resizes the data parallelism of `myriad train`: not with --exec");
    if (so.metrics_linger > 0 && so.metrics_port < 0)
        myr_die("run: --metrics-linger keeps /metrics served after the job: add --metrics-port P");
    for (int i = 0; i < so.plan.n; i++)
        if (so.plan.faults[i].kind == FAULT_NAN && (first + (exec_mode ? 1 : 0) >= argc ||
                                                    strcmp(argv[first + (exec_mode ? 1 : 0)], "train")))
            myr_die("run: --inject nan@STEP:RANK turns a gradient of `myriad train` to NaN: the command is not train");
    /* a program that never connects (no heartbeats) is only a hang when hangs are watched */
    if (so.start_timeout == -1) so.start_timeout = so.hang_timeout > 0 ? 300 : 0;
    if (pf_given) pf.enabled = 1, supervised = 1;
    if ((pf.ndoctor_args || pf.timeout_s) && !pf.enabled) myr_die("run: --doctor-arg and --preflight-timeout need --preflight");
    /* inside a Slurm allocation the job goes through srun, supervised (heartbeats, lost nodes, restarts) */
    if (getenv("SLURM_JOB_ID") && !(so.launcher && !strcmp(so.launcher, "mpirun"))) supervised = 1;
    /* a train command line that cannot work is said once, here, before any rank starts */
    if (!exec_mode && !dry && !strcmp(argv[first], "train")) precheck_train(n, argc, argv, first);
    if (supervised) return run_supervised(&so, &pf, n, dry, exec_mode, argc, argv, first, extra_v, nextra);
    char *mpirun = path_find_program("mpirun");
    if (!mpirun)
        myr_die("run: mpirun not found on PATH; install Open MPI (apt-get install openmpi-bin) or start "
                "bin/myriad with your cluster's launcher");
    char self[PATH_MAX];
    if (path_self(self, sizeof self) != 0) myr_die("run: %s", myr_last_error());

    launch_env(n); /* first: the binding depends on OMP_NUM_THREADS */
    char np[16];
    snprintf(np, sizeof np, "%d", n);
    char **args = calloc(argc + nextra + 16, sizeof *args);
    if (!args) myr_die("run: out of memory");
    int k = 0;
    args[k++] = mpirun;
    args[k++] = "-np";
    args[k++] = np;
    args[k++] = "--oversubscribe"; /* more ranks than cores is fine for tests and emulated nodes */
    const char *bind = rank_binding(extra_v, nextra, 0);
    if (bind) args[k++] = "--bind-to", args[k++] = (char *)bind;
    for (int i = 0; i < nextra; i++) args[k++] = (char *)extra_v[i];
    args[k++] = self;
    for (int i = first; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;

    if (dry) {
        for (int i = 0; args[i]; i++) printf("%s%s", i ? " " : "", args[i]);
        printf("\n");
        return 0;
    }
    fflush(stdout);
    fflush(stderr);

    struct sigaction sa = {0};
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    int errfd = mpi_noise_start(so.mpi_log); /* mpirun's boilerplate to a log, the ranks' lines through */
    pid_t pid = fork();
    if (pid < 0) myr_die("run: fork failed: %s", strerror(errno));
    if (pid == 0) {
        if (errfd >= 0) dup2(errfd, STDERR_FILENO);
        setpgid(0, 0); /* its own group: the terminal's Ctrl-C comes to us, not to mpirun (above) */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        execv(mpirun, args);
        fprintf(stderr, "myriad: run: cannot execute %s: %s\n", mpirun, strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    child_pid = pid;
    if (graceful) kill(pid, SIGUSR1); /* it came while mpirun was starting */
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) myr_die("run: waiting for mpirun failed: %s", strerror(errno));
    free(args);
    mpi_noise_finish();
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    if (graceful && !hard && code != 0) return 128 + graceful; /* stopped as asked: 130 after Ctrl-C, 143 after SIGTERM */
    if (hard) return 128 + hard;
    return code;
}
