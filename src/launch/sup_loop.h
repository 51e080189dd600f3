/* sup_loop.h: the supervisor's event loop (sup_loop.c) and the limits it needs. */
#ifndef MYRIAD_LAUNCH_SUP_LOOP_H
#define MYRIAD_LAUNCH_SUP_LOOP_H

#include <signal.h>
#include <sys/types.h>

#include "launch/sup_state.h"

/* WATCH_RESIZED: every rank checkpointed and stopped for an --elastic grow (their launcher, still
 * finishing its own abort after their exit code 75, is not waited for) */
typedef enum { WATCH_FAILED, WATCH_EXITED, WATCH_STUCK, WATCH_STOPPED, WATCH_GRACE_EXPIRED, WATCH_RESIZED } WatchEnd;

/* Raise the soft open-file limit to what nranks connections need (and the hard one when
 * privileged); -1 with myr_error() naming the limit and how to raise it when it cannot. */
int sup_loop_fd_limit(int nranks);
/* The epoll set with the listener (s->lfd) and the metrics server (s->metrics, if any). */
int sup_loop_open(Sup *s);
/* Watch one attempt until the child exits (*status set), the attempt fails (s->failed), *stop is
 * set by a signal, every rank is done but the child does not exit (stuck), or after a graceful
 * signal (sup_graceful_signal) the ranks did not stop within --stop-grace. */
WatchEnd sup_watch(Sup *s, pid_t child, int *status, volatile sig_atomic_t *stop);
/* After the job: keep answering /metrics for at most `seconds`, until one scrape has read the
 * final figures (--metrics-linger: a job that ends between two scrapes keeps its last counters). */
void sup_loop_linger(Sup *s, double seconds);

#endif
