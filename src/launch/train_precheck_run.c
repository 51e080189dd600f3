/* train_precheck_run.c: `myriad train` in pre-check mode as a child of the launcher, its output
 * captured (see train_precheck_run.h). */
#define _GNU_SOURCE
#include "launch/train_precheck_run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.h"

int train_precheck_run(char *const argv[], int world, int print_layout, int capture_stdout, char *out, size_t cap) {
    int fds[2];
    if (cap < 1) return myr_error("train pre-check: no room for its output");
    out[0] = 0;
    if (pipe(fds)) return myr_error("train pre-check: pipe: %s", strerror(errno));
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        return myr_error("train pre-check: fork: %s", strerror(errno));
    }
    if (pid == 0) { /* the child: only async-signal-safe work before exec, plus setenv (one thread here) */
        char w[16];
        snprintf(w, sizeof w, "%d", world);
        setenv("MYRIAD_PRECHECK_WORLD", w, 1);
        if (print_layout) setenv("MYRIAD_PRECHECK_LAYOUT", "1", 1);
        if (capture_stdout) dup2(fds[1], STDOUT_FILENO);
        else {
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0) dup2(null, STDOUT_FILENO);
        }
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]), close(fds[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    char spill[512]; /* output past cap is read and dropped: a child blocked on a full pipe never exits */
    for (ssize_t got;;) {
        int full = len == cap - 1;
        got = full ? read(fds[0], spill, sizeof spill) : read(fds[0], out + len, cap - 1 - len);
        if (got == 0) break;
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) break;
        if (!full) len += (size_t)got;
    }
    out[len] = 0;
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}
