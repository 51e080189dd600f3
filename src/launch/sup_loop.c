/* sup_loop.c: the supervisor's event loop for one attempt. One epoll set holds the heartbeat
 * listener, every rank's connection, the launched child (a pidfd: its exit wakes the loop) and
 * the metrics server's descriptor; the loop sleeps until one of them is ready or the next
 * deadline (the oldest rank's hang timeout, the start timeout), so an idle supervisor costs
 * nothing and a busy one does constant work per heartbeat, whatever the number of ranks.
 * It also owns the resources that scale with the ranks: the open-file limit. */
#define _GNU_SOURCE
#include "launch/sup_loop.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch/metrics.h"
#include "util/error.h"

int sup_loop_fd_limit(int nranks) {
    /* one connection per rank, plus room for the listener, epoll, the event log, the child's
     * pidfd, metrics scrapes (at most 64 at once) and connections of a torn-down attempt */
    rlim_t need = (rlim_t)nranks + 192;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need) return 0;
    struct rlimit want = {need, rl.rlim_max >= need ? rl.rlim_max : need};
    if (setrlimit(RLIMIT_NOFILE, &want) != 0) /* above the hard limit needs privilege */
        return myr_error("run: %d ranks need %llu open files (a heartbeat connection each) but the limit is %llu "
                         "(hard limit %llu); raise it before starting, e.g. `ulimit -n %llu` (LimitNOFILE= for a service, "
                         "nofile in /etc/security/limits.conf)",
                         nranks, (unsigned long long)need, (unsigned long long)rl.rlim_cur,
                         (unsigned long long)rl.rlim_max, (unsigned long long)need);
    cJSON *e = sup_event("fd-limit");
    cJSON_AddNumberToObject(e, "raised_from", (double)rl.rlim_cur);
    cJSON_AddNumberToObject(e, "to", (double)need);
    sup_emit(e);
    return 0;
}

int sup_loop_open(Sup *s) {
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->epfd < 0) return myr_error("run: epoll_create1: %s", strerror(errno));
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = SUP_TAG_LISTEN};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev) != 0) return myr_error("run: epoll_ctl: %s", strerror(errno));
    if (s->metrics) {
        struct epoll_event mev = {.events = EPOLLIN, .data.u64 = SUP_TAG_METRICS};
        int fd = metrics_fd(s->metrics);
        if (fd < 0 || epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &mev) != 0)
            return myr_error("run: cannot watch the metrics server: %s", strerror(errno));
    }
    return 0;
}

static int pidfd_of(pid_t pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

enum { COALESCE_RANKS = 512, COALESCE_NS = 5000000 };

WatchEnd sup_watch(Sup *s, pid_t child, int *status, volatile sig_atomic_t *stop) {
    /* the child's exit wakes the loop through its pidfd; without one (old kernels) it is polled */
    int pidfd = pidfd_of(child);
    if (pidfd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = SUP_TAG_CHILD};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, pidfd, &ev) != 0) close(pidfd), pidfd = -1;
    }
    double grace = s->o->hang_timeout > 0 ? s->o->hang_timeout : 30, all_done_since = 0;
    double metrics_due = 0, grace_until = 0;
    WatchEnd end = WATCH_FAILED;
    struct epoll_event evs[256];
    for (;;) {
        if (s->failed) break;
        if (*stop) {
            end = WATCH_STOPPED;
            break;
        }
        if (sup_graceful_signal && !grace_until) { /* the ranks checkpoint and stop: no hang verdicts now */
            grace_until = sup_now() + s->o->stop_grace;
            cJSON *x = sup_event("stopping");
            cJSON_AddNumberToObject(x, "signal", sup_graceful_signal);
            cJSON_AddNumberToObject(x, "grace_s", s->o->stop_grace);
            sup_emit(x);
        } else if (grace_until && sup_now() > grace_until) {
            cJSON *x = sup_event("stop-grace-expired");
            cJSON_AddNumberToObject(x, "grace_s", s->o->stop_grace);
            sup_emit(x);
            end = WATCH_GRACE_EXPIRED;
            break;
        }
        double now = sup_now(), deadline = grace_until ? grace_until : progress_deadline(s);
        if (all_done_since > 0 && all_done_since + grace < deadline) deadline = all_done_since + grace;
        if (s->clock_due < deadline) deadline = s->clock_due;
        if (s->metrics) {
            double mt = now + metrics_timeout(s->metrics);
            if (mt < deadline) deadline = mt;
        }
        double wait = deadline - now;
        int timeout_ms = wait <= 0 ? 0 : wait > 1 ? 1000 : (int)ceil(wait * 1000);
        if (pidfd < 0 && timeout_ms > 20) timeout_ms = 20;
        int n = epoll_wait(s->epfd, evs, (int)(sizeof evs / sizeof evs[0]), timeout_ms);
        int check_child = pidfd < 0, run_metrics = 0;
        for (int i = 0; i < n; i++) {
            uint64_t d = evs[i].data.u64;
            if (d & SUP_TAG_CONN) hb_read(s, (int)(uint32_t)d, (unsigned)(d >> 32) & 0x7fffffffu);
            else if (d == SUP_TAG_LISTEN) hb_accept(s);
            else if (d == SUP_TAG_CHILD) check_child = 1;
            else if (d == SUP_TAG_METRICS) run_metrics = 1;
        }
        if (s->metrics && (run_metrics || sup_now() >= metrics_due)) {
            metrics_run(s->metrics);
            metrics_due = sup_now() + 1; /* MHD's own timeouts are also honoured through metrics_timeout */
        }
        /* a large job's heartbeats arrive spread over the period: gather them for a few ms
         * instead of waking for each (fewer context switches and epoll_wait calls; hang
         * detection is unaffected at that precision). Not while ranks wait for GO. */
        if (n > 0 && n < 64 && s->o->nranks >= COALESCE_RANKS && s->nheld == 0) {
            struct timespec ts = {0, COALESCE_NS};
            nanosleep(&ts, NULL);
        }
        if (check_child && waitpid(child, status, WNOHANG) == child) {
            end = WATCH_EXITED;
            break;
        }
        if (!s->failed && !sup_graceful_signal && !s->el.resizing) progress_check_timeouts(s);
        if (!s->failed && !sup_graceful_signal && !s->el.resizing) faults_clock_check(s);
        if (s->el.min_dp) sup_elastic_poll(s, child); /* --elastic: hosts added, a grow (about once a second) */
        if (s->el.resizing && !s->failed) { /* every rank checkpointed, stopped and is gone: the resize can go on */
            int gone = 0;
            for (int r = 0; r < s->o->nranks; r++) gone += s->ranks[r].stopped && s->ranks[r].closed;
            if (gone == s->o->nranks) {
                end = WATCH_RESIZED;
                break;
            }
        }
        if (s->el.resizing && sup_now() > s->el.resize_deadline && !s->failed) {
            sup_fail(s, FAIL_HANG, "the ranks did not checkpoint and stop for the resize within %.0f s (--stop-grace)",
                     s->o->stop_grace);
            break;
        }
        if (s->nparked) sup_reap_parked(s, 0); /* launchers of earlier attempts finishing their abort */
        /* every rank reported "done" (its outputs are written) but the job does not exit, e.g. a
         * rank stopped after its last heartbeat: the run is complete, end it rather than wait */
        if (s->ndone < s->o->nranks) all_done_since = 0;
        else if (!all_done_since) all_done_since = sup_now();
        else if (sup_now() - all_done_since > grace) {
            cJSON *x = sup_event("exit-stuck");
            cJSON_AddNumberToObject(x, "after_done_s", round((sup_now() - all_done_since) * 1000) / 1000);
            sup_emit(x);
            end = WATCH_STUCK;
            break;
        }
    }
    if (pidfd >= 0) close(pidfd);
    return end;
}

void sup_loop_linger(Sup *s, double seconds) {
    if (!s->metrics || seconds <= 0) return;
    long long before = metrics_served(s->metrics);
    double until = sup_now() + seconds;
    struct epoll_event evs[16];
    while (metrics_served(s->metrics) == before && sup_now() < until) {
        double wait = until - sup_now(), mt = metrics_timeout(s->metrics);
        if (mt < wait) wait = mt;
        int ms = wait <= 0 ? 0 : wait > 1 ? 1000 : (int)ceil(wait * 1000);
        epoll_wait(s->epfd, evs, 16, ms); /* the metrics server's descriptor (connections are closed) */
        metrics_run(s->metrics);
    }
}
