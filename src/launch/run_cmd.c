/* run_cmd.c: `myriad run -n N -- <subcommand> [args...]`: a local convenience that starts this
 * binary on N ranks through mpirun with the flags a workstation needs (--oversubscribe, no
 * core binding, root allowed, OpenMP threads split between the ranks), forwards SIGINT/SIGTERM
 * to mpirun, and exits with its exit code. Clusters use their own launcher (mpirun, srun). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "util/args.h"
#include "util/error.h"

static volatile sig_atomic_t child_pid;

/* Forward a signal to mpirun, unless the terminal sent it: then mpirun, in the same foreground
 * process group, already has it (a second SIGINT would make mpirun skip its clean shutdown). */
static void forward(int sig, siginfo_t *info, void *ctx) {
    (void)ctx;
    if (child_pid > 0 && !(info && info->si_code == SI_KERNEL)) kill(child_pid, sig);
}

/* Full path of `name` on PATH, or NULL. */
static char *find_on_path(const char *name) {
    const char *path = getenv("PATH");
    if (!path) return NULL;
    static char buf[PATH_MAX];
    for (const char *p = path; *p;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        snprintf(buf, sizeof buf, "%.*s/%s", (int)len, len ? p : ".", name);
        struct stat st;
        if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0) return buf;
        if (!end) break;
        p = end + 1;
    }
    return NULL;
}

static void usage(FILE *out) {
    fprintf(out, "usage: myriad run -n N [--dry-run] [--mpirun-arg ARG]... -- <subcommand> [args...]\n"
                 "  -n N              number of ranks\n"
                 "  --mpirun-arg ARG  pass ARG to mpirun (repeatable), e.g. --mpirun-arg --tag-output\n"
                 "  --dry-run         print the mpirun command line and exit\n"
                 "Runs `mpirun -np N --oversubscribe --bind-to none <this binary> <subcommand> ...`; sets\n"
                 "OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) when run as root and OMP_NUM_THREADS=max(1, cores/N)\n"
                 "unless already set; forwards SIGINT/SIGTERM and exits with mpirun's exit code.\n");
}

int cmd_run(int argc, char **argv) {
    int n = 0, dry = 0, first = -1;
    const char *extra[32];
    int nextra = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            first = i + 1;
            break;
        }
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return usage(stdout), 0;
        else if (!strcmp(argv[i], "-n") || !strcmp(argv[i], "-np")) n = args_next_int(argc, argv, &i);
        else if (!strcmp(argv[i], "--dry-run")) dry = 1;
        else if (!strcmp(argv[i], "--mpirun-arg")) {
            if (nextra == 32) myr_die("run: at most 32 --mpirun-arg");
            extra[nextra++] = args_value(argc, argv, &i);
        } else if (argv[i][0] != '-') {
            first = i; /* the subcommand, without a "--" before it */
            break;
        } else myr_die("run: unknown option '%s' (see myriad run --help)", argv[i]);
    }
    if (n < 1) myr_die("run: give the number of ranks with -n N (N >= 1), e.g. myriad run -n 4 -- bench comm");
    if (first < 0 || first >= argc) myr_die("run: no subcommand to run; e.g. myriad run -n %d -- bench comm", n);
    if (!strcmp(argv[first], "run")) myr_die("run: refusing to nest 'myriad run' inside itself");
    char *mpirun = find_on_path("mpirun");
    if (!mpirun)
        myr_die("run: mpirun not found on PATH; install Open MPI (apt-get install openmpi-bin) or start "
                "bin/myriad with your cluster's launcher");
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) myr_die("run: cannot find this binary's path (/proc/self/exe): %s", strerror(errno));
    self[len] = 0;

    char np[16];
    snprintf(np, sizeof np, "%d", n);
    char **args = calloc(argc + nextra + 16, sizeof *args);
    if (!args) myr_die("run: out of memory");
    int k = 0;
    args[k++] = mpirun;
    args[k++] = "-np";
    args[k++] = np;
    args[k++] = "--oversubscribe"; /* more ranks than cores is fine for tests and emulated nodes */
    args[k++] = "--bind-to";       /* binding each rank to one core would stack oversubscribed ranks */
    args[k++] = "none";
    for (int i = 0; i < nextra; i++) args[k++] = (char *)extra[i];
    args[k++] = self;
    for (int i = first; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;

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

    pid_t pid = fork();
    if (pid < 0) myr_die("run: fork failed: %s", strerror(errno));
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        execv(mpirun, args);
        fprintf(stderr, "myriad: run: cannot execute %s: %s\n", mpirun, strerror(errno));
        _exit(127);
    }
    child_pid = pid;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) myr_die("run: waiting for mpirun failed: %s", strerror(errno));
    free(args);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}
