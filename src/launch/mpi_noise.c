/* mpi_noise.c: the filter between mpirun/srun and the terminal (see mpi_noise.h). */
#define _GNU_SOURCE
#include "launch/mpi_noise.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pid_t filter_pid = -1;
static int write_fd = -1;

int mpi_noise_line(const char *line, int *in_box, int prev_noise) {
    size_t n = strlen(line), dashes = strspn(line, "-");
    if (n >= 20 && dashes == n) { /* Open MPI's help messages are framed by lines of dashes */
        *in_box = !*in_box;
        return 1;
    }
    if (*in_box) return 1;
    if (!strncmp(line, "mpirun", 6) || !strncmp(line, "srun:", 5) || !strncmp(line, "slurmstepd:", 11)) return 1;
    if (line[0] == '[') { /* "[host:12345] *** Process received signal ***" and the like */
        const char *close = strchr(line, ']'), *colon = strchr(line, ':');
        if (close && colon && colon < close && strspn(colon + 1, "0123456789") == (size_t)(close - colon - 1)) return 1;
    }
    if (prev_noise && strspn(line, " \t") == n) return 1; /* the blank line after a message of theirs */
    return 0;
}

/* A FNV-1a hash of each "myriad: " line already shown: the same line from another rank is noise. */
static uint64_t seen[256];
static int nseen;

static int repeated(const char *line) {
    if (strncmp(line, "myriad: ", 8)) return 0;
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = line; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    for (int i = 0; i < nseen; i++)
        if (seen[i] == h) return 1;
    if (nseen < (int)(sizeof seen / sizeof seen[0])) seen[nseen++] = h;
    return 0;
}

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w, n -= (size_t)w;
    }
}

static _Noreturn void filter_main(int in, const char *log_path) {
    signal(SIGINT, SIG_IGN), signal(SIGTERM, SIG_IGN), signal(SIGHUP, SIG_IGN), signal(SIGUSR1, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    int log = -1, in_box = 0, prev = 0;
    long logged = 0, repeats = 0;
    char buf[65536], line[8192];
    size_t len = 0;
    for (;;) {
        ssize_t got = read(in, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        for (ssize_t i = 0; i < got; i++) {
            char c = buf[i];
            int end = c == '\n' || c == '\r' || len + 1 >= sizeof line;
            line[len++] = c;
            if (!end) continue;
            line[len] = 0;
            char text[8192];
            memcpy(text, line, len + 1);
            text[strcspn(text, "\r\n")] = 0;
            int noise = mpi_noise_line(text, &in_box, prev);
            int dup = !noise && repeated(text);
            if (noise || dup) {
                if (log < 0) log = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                if (log >= 0) write_all(log, line, len);
                logged += noise, repeats += dup;
            } else
                write_all(STDERR_FILENO, line, len);
            prev = noise || (dup && prev);
            len = 0;
        }
    }
    if (len) write_all(STDERR_FILENO, line, len);
    if (log >= 0) {
        close(log);
        char note[4400];
        char rep[64] = "";
        if (repeats) snprintf(rep, sizeof rep, ", and %ld line%s other ranks repeated", repeats, repeats == 1 ? "" : "s");
        int k = snprintf(note, sizeof note, "myriad run: mpirun's own messages (%ld line%s%s) are in %s\n", logged,
                         logged == 1 ? "" : "s", rep, log_path);
        if (k > 0) write_all(STDERR_FILENO, note, (size_t)k < sizeof note ? (size_t)k : sizeof note - 1);
    }
    _exit(0);
}

int mpi_noise_start(const char *log_path) {
    if (write_fd >= 0) return write_fd;
    char path[4096];
    if (log_path && *log_path) snprintf(path, sizeof path, "%s", log_path);
    else {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/myriad-run-%d.log", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    }
    int fds[2];
    if (pipe(fds)) return -1;
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[1]);
        filter_main(fds[0], path);
    }
    close(fds[0]);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC); /* only the launcher child gets it (dup2 onto its stderr) */
    filter_pid = pid, write_fd = fds[1];
    return write_fd;
}

void mpi_noise_finish(void) {
    if (write_fd < 0) return;
    close(write_fd);
    write_fd = -1;
    /* a daemon that kept the pipe open (an orted that outlived mpirun) must not hold us up */
    for (int i = 0; i < 300; i++) {
        int st;
        pid_t r = waitpid(filter_pid, &st, WNOHANG);
        if (r == filter_pid || (r < 0 && errno != EINTR)) break;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    filter_pid = -1;
}
