/* subprocess.c: external commands with a deadline and captured output (see subprocess.h). */
#define _GNU_SOURCE
#include "util/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int subproc_start(Subproc *p, char *const argv[], int with_stderr) { return subproc_start_in(p, argv, with_stderr, NULL); }

int subproc_start_in(Subproc *p, char *const argv[], int with_stderr, const char *dir) {
    memset(p, 0, sizeof *p);
    p->status = -1;
    p->fd = -1;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return myr_error("cannot create a pipe for %s: %s", argv[0], strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        return myr_error("cannot fork for %s: %s", argv[0], strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGHUP, SIG_DFL), signal(SIGUSR1, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0) dup2(null, 0);
        dup2(fds[1], 1);
        if (with_stderr) dup2(fds[1], 2);
        if (dir && chdir(dir) != 0) {
            fprintf(stderr, "cannot enter %s: %s\n", dir, strerror(errno));
            _exit(127);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "cannot execute %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    close(fds[1]);
    p->pid = pid;
    p->fd = fds[0];
    p->out = calloc(1, 1);
    return 0;
}

static void drain(Subproc *p) {
    char buf[8192];
    ssize_t r = read(p->fd, buf, sizeof buf);
    if (r > 0) {
        if (p->len < SUBPROC_OUT_MAX) {
            size_t keep = (size_t)r < SUBPROC_OUT_MAX - p->len ? (size_t)r : SUBPROC_OUT_MAX - p->len;
            p->out = realloc(p->out, p->len + keep + 1);
            memcpy(p->out + p->len, buf, keep);
            p->len += keep;
            p->out[p->len] = 0;
        }
        return;
    }
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) return;
    close(p->fd); /* EOF */
    p->fd = -1;
}

void subproc_wait_all(Subproc *p, int n, double timeout_s) {
    double deadline = timeout_s > 0 ? mono_s() + timeout_s : 0;
    struct pollfd *pfd = calloc((size_t)(n > 0 ? n : 1), sizeof *pfd);
    for (;;) {
        int open_fds = 0, running = 0;
        for (int i = 0; i < n; i++) {
            pfd[i] = (struct pollfd){.fd = p[i].fd, .events = POLLIN};
            open_fds += p[i].fd >= 0;
            if (p[i].pid > 0 && p[i].status < 0) {
                int st;
                if (waitpid(p[i].pid, &st, WNOHANG) == p[i].pid)
                    p[i].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                else running++;
            }
        }
        if (!running && !open_fds) break;
        double left = deadline ? deadline - mono_s() : 1;
        if (deadline && left <= 0) {
            for (int i = 0; i < n; i++) {
                if (p[i].pid > 0 && p[i].status < 0) {
                    kill(-p[i].pid, SIGKILL);
                    int st;
                    waitpid(p[i].pid, &st, 0);
                    p[i].status = 128 + SIGKILL;
                    p[i].timed_out = 1;
                }
                if (p[i].fd >= 0) close(p[i].fd), p[i].fd = -1;
            }
            break;
        }
        /* a child may exit while a grandchild keeps the pipe open: wake up to reap it */
        int ms = running ? 20 : (int)(left * 1000 > 200 ? 200 : left * 1000 + 1);
        if (poll(pfd, (nfds_t)n, ms) > 0)
            for (int i = 0; i < n; i++)
                if (pfd[i].fd >= 0 && pfd[i].revents) drain(&p[i]);
        /* the command ended and its output is read to EOF: done, whatever else holds the pipe */
        for (int i = 0; i < n; i++)
            if (p[i].status >= 0 && p[i].fd >= 0 && !(pfd[i].revents & POLLIN)) close(p[i].fd), p[i].fd = -1;
    }
    free(pfd);
}

int subproc_run(Subproc *p, char *const argv[], int with_stderr, double timeout_s) {
    return subproc_run_in(p, argv, with_stderr, timeout_s, NULL);
}

int subproc_run_in(Subproc *p, char *const argv[], int with_stderr, double timeout_s, const char *dir) {
    if (subproc_start_in(p, argv, with_stderr, dir)) return -1;
    subproc_wait_all(p, 1, timeout_s);
    if (p->status == 0) return 0;
    char first[200] = "";
    snprintf(first, sizeof first, "%s", p->out ? p->out : "");
    char *nl = strchr(first, '\n');
    if (nl) *nl = 0;
    if (p->timed_out) return myr_error("%s did not finish within %.0f s", argv[0], timeout_s);
    if (p->status == 127) return myr_error("cannot run %s (not installed or not on PATH)", argv[0]);
    return myr_error("%s failed (exit %d)%s%s", argv[0], p->status, first[0] ? ": " : "", first);
}

void subproc_free(Subproc *p) {
    if (p->fd >= 0) close(p->fd);
    free(p->out);
    memset(p, 0, sizeof *p);
    p->fd = -1;
}
