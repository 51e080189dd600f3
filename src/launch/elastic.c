/* elastic.c: the layouts of `myriad run --elastic MIN` (see elastic.h). The trainer is the one
 * authority on what a command line can run as: the launcher runs it in its pre-check mode
 * (MYRIAD_PRECHECK_WORLD, src/train/train_precheck.c: the same checks as the run's own) for every
 * size it considers, with MYRIAD_PRECHECK_LAYOUT asking it to print the layout it derived. */
#define _GNU_SOURCE
#include "launch/elastic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.h"

typedef struct {
    int dp, group, batch, micro, accum, saves;
} Layout;

/* Run cmd + extra in pre-check mode for `world` ranks. 0 with *out filled, or -1 with the
 * trainer's own one-line reason in myr_error(). */
static int precheck(char *const *cmd, char *const *extra, int nextra, int world, Layout *out) {
    int ncmd = 0;
    while (cmd[ncmd]) ncmd++;
    int fds[2];
    if (pipe(fds)) return myr_error("run: --elastic: pipe: %s", strerror(errno));
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        return myr_error("run: --elastic: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        char w[16];
        snprintf(w, sizeof w, "%d", world);
        setenv("MYRIAD_PRECHECK_WORLD", w, 1);
        setenv("MYRIAD_PRECHECK_LAYOUT", "1", 1);
        dup2(fds[1], STDOUT_FILENO), dup2(fds[1], STDERR_FILENO);
        close(fds[0]), close(fds[1]);
        char **args = calloc((size_t)(ncmd + nextra + 1), sizeof *args);
        for (int i = 0; i < ncmd; i++) args[i] = cmd[i];
        for (int i = 0; i < nextra; i++) args[ncmd + i] = extra[i];
        execv(cmd[0], args);
        _exit(127);
    }
    close(fds[1]);
    char text[8192];
    size_t len = 0;
    for (ssize_t got; (got = read(fds[0], text + len, sizeof text - 1 - len)) != 0;) {
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) break;
        len += (size_t)got;
        if (len == sizeof text - 1) break;
    }
    text[len] = 0;
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    const char *lay = strstr(text, "layout dp=");
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && lay &&
        sscanf(lay, "layout dp=%d group=%d batch=%d micro=%d accum=%d saves=%d", &out->dp, &out->group, &out->batch,
               &out->micro, &out->accum, &out->saves) == 6)
        return 0;
    /* the trainer's reason: its first "myriad: " line, without the prefix */
    const char *why = strstr(text, "myriad: ");
    why = why ? why + 8 : text;
    size_t n = strcspn(why, "\n");
    return myr_error("%.*s", (int)(n > 400 ? 400 : n), *why ? why : "the trainer's check did not run");
}

int elastic_open(Elastic *e, int min_dp, char *const *cmd, int nranks) {
    memset(e, 0, sizeof *e);
    e->min_dp = min_dp;
    e->full_ranks = nranks;
    if (!cmd[0] || !cmd[1] || strcmp(cmd[1], "train"))
        return myr_error("run: --elastic resizes the data parallelism of `myriad train`: the command is not train");
    Layout l;
    if (precheck(cmd, NULL, 0, nranks, &l)) return -1;
    if (min_dp > l.dp)
        return myr_error("run: --elastic %d is above the job's data-parallel size %d (%d ranks / %d per replica): give "
                         "--elastic %d or less", min_dp, l.dp, nranks, l.group, l.dp);
    if (!l.saves)
        return myr_error("run: --elastic needs disk checkpoints during the run (train --save DIR --save-every N or auto): "
                         "a job resized to another data-parallel size restores from them (in-memory copies restore "
                         "only the layout that wrote them)");
    e->full_dp = e->cur_dp = l.dp, e->group = l.group, e->batch = l.batch, e->micro = l.micro;
    e->full_accum = e->cur_accum = l.accum;
    return 0;
}

void elastic_args(const Elastic *e, int dp, char **a, int *k) {
    if (dp == e->full_dp) return;
    char v[24];
    a[(*k)++] = strdup("--dp");
    snprintf(v, sizeof v, "%d", dp);
    a[(*k)++] = strdup(v);
    a[(*k)++] = strdup("--micro-batch");
    snprintf(v, sizeof v, "%d", e->micro);
    a[(*k)++] = strdup(v);
}

int elastic_fit(const Elastic *e, char *const *cmd, int slots, int *dp, int *accum) {
    int top = slots / e->group < e->full_dp ? slots / e->group : e->full_dp;
    if (top < e->min_dp)
        return myr_error("%d slot%s left hold%s %d data-parallel replica%s of %d rank%s, below --elastic %d", slots,
                         slots == 1 ? "" : "s", slots == 1 ? "s" : "", top, top == 1 ? "" : "s", e->group,
                         e->group == 1 ? "" : "s", e->min_dp);
    char refused[1024] = "";
    for (int d = top; d >= e->min_dp; d--) {
        if (d == e->full_dp) {
            *dp = d, *accum = e->full_accum;
            return 0;
        }
        char *extra[4];
        int k = 0;
        elastic_args(e, d, extra, &k);
        Layout l;
        int rc = precheck(cmd, extra, k, d * e->group, &l);
        for (int i = 0; i < k; i++) free(extra[i]);
        if (rc == 0 && l.dp == d && l.batch == e->batch) {
            *dp = d, *accum = l.accum;
            return 0;
        }
        size_t len = strlen(refused);
        snprintf(refused + len, sizeof refused - len, "%sdp %d: %s", len ? "; " : "", d,
                 rc ? myr_last_error() : "the trainer derived another layout");
    }
    return myr_error("no data-parallel size from %d down to --elastic %d keeps the global batch of %d sequences at "
                     "micro-batch %d (%s)", top, e->min_dp, e->batch, e->micro, refused);
}
