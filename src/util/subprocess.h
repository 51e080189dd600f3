/* subprocess.h: run external commands (Slurm's sinfo, squeue, srun probes) with a deadline and
 * their output captured, several at once. Each child gets its own process group, so a command
 * that outlives the deadline is killed with everything it started. */
#ifndef MYRIAD_UTIL_SUBPROCESS_H
#define MYRIAD_UTIL_SUBPROCESS_H

#include <stddef.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;
    int fd;          /* read end of the child's stdout+stderr (or stdout only) */
    char *out;       /* captured output, NUL-terminated (at most SUBPROC_OUT_MAX bytes kept) */
    size_t len;
    int status;      /* exit code; 128 + signal; 127 when it could not be executed; -1 before the end */
    int timed_out;
} Subproc;

#define SUBPROC_OUT_MAX (16u << 20)

/* Starts argv[0] (searched on PATH) with argv; stdout (and stderr too when with_stderr) captured,
 * stdin from /dev/null. Returns 0, or -1 with myr_error(). */
int subproc_start(Subproc *p, char *const argv[], int with_stderr);
/* The same in directory dir (commands that leave files in their working directory). */
int subproc_start_in(Subproc *p, char *const argv[], int with_stderr, const char *dir);
/* Waits for all n started processes, reading their output, for at most timeout_s seconds (<= 0:
 * no limit); those still running then are killed (their process groups) and marked timed_out. */
void subproc_wait_all(Subproc *p, int n, double timeout_s);
/* Both in one: 0 when the command ran and exited 0, else -1 with myr_error() quoting its output. */
int subproc_run(Subproc *p, char *const argv[], int with_stderr, double timeout_s);
int subproc_run_in(Subproc *p, char *const argv[], int with_stderr, double timeout_s, const char *dir);
void subproc_free(Subproc *p);

#endif
