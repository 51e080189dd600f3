/* sup_state.h: the supervisor's state, shared by the files of `myriad run`'s supervisor (internal
 * to src/launch): supervise.c (attempts: launch, teardown, spares, the summary), sup_loop.c (the
 * event loop of one attempt: epoll over the listener, the connections, the launched child and
 * the metrics server), hb_server.c (heartbeat connections and their messages), rank_progress.c
 * (job step, goodput timeline, hang and start timeouts), fault_fire.c (injected faults and the
 * hold steps, cmd@), sup_straggler.c (straggler verdicts, evictions), metrics.c (/metrics),
 * sup_state.c (the graceful-stop signal, sup_fail) and event_log.c (the JSON-lines event log).
 * No two of them call each other, directly or round a loop (tests/test_layering.sh): supervise.c
 * is on top, sup_state.c and event_log.c at the bottom. Behaviour and formats: docs/LAUNCHER.md
 * and docs/OPERATIONS.md. */
#ifndef MYRIAD_LAUNCH_SUP_STATE_H
#define MYRIAD_LAUNCH_SUP_STATE_H

#include <cjson/cJSON.h>
#include <signal.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "launch/elastic.h"
#include "launch/heartbeat.h"
#include "launch/hostfile.h"
#include "launch/ledger.h"
#include "launch/supervise.h"

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
    int running;             /* connected, not done, not closed, not stopped by hang@ */
    int watch_prev, watch_next, watched; /* the hang watch list (oldest progress first) */
    long long last_t_us;     /* sender's clock at its last STEP, for its step duration */
    double step_s;           /* duration of its last step (its own clock); NAN unknown */
    double relative, individual; /* its straggler scores in the last window; NAN unknown */
} RankState;

typedef struct {
    int fd;                  /* -1: a free slot */
    unsigned gen;            /* bumped at every reuse: stale epoll events are recognised */
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

/* What /metrics reports beyond the ranks' state (metrics.c renders it). */
enum { FAIL_RANK_EXIT, FAIL_HANG, FAIL_NEVER_CONNECTED, FAIL_LAUNCHER_EXIT, FAIL_HOST_LOST, FAIL_STRAGGLER, FAIL_KINDS };
#define STEP_BUCKETS 14
typedef struct {
    long long restarts, failures[FAIL_KINDS], stragglers;
    long long step_count, step_buckets[STEP_BUCKETS]; /* job step durations (histogram) */
    double step_sum;
    long long r0_step;       /* rank 0's last reported step, its loss, throughput and MFU */
    double r0_loss, tokens_per_s, mfu;
    double ckpt_s;           /* rank 0's checkpoint section, summed */
    long long mem_step;      /* newest in-memory copy complete on every rank (rank 0 says); -1 */
    double mem_seen;         /* when that copy was first reported */
} SupMetrics;

/* The supervisor's side of the time ledger (sup_ledger.c; the bookkeeping is ledger.c). */
#define LEDGER_RING 64   /* job steps whose rank-side times are gathered at once (max over ranks) */
#define LEDGER_RANK_RING 8 /* steps of each rank's compute kept for the straggler share */
typedef struct {
    Ledger l;
    struct { long long step; double v[3]; } ring[LEDGER_RING]; /* per step, max over ranks: checkpoint, data, eval */
    double *compute;         /* [rank * LEDGER_RANK_RING + step % LEDGER_RANK_RING]: a rank's compute (CPU s) */
    long long *compute_step; /* the step each of those is of */
    int start_done;          /* this attempt's start (launch .. every rank connected) is accounted */
    int critical;            /* the rank whose HELLO completed the attempt's connections (-1: none yet) */
    int have_start;
    HbStartInfo start;       /* that rank's FROM start field */
    double t_fault, t_declared; /* this attempt's failure: when it struck, when it was declared (0: none) */
    long long best_before;   /* highest job step completed before this attempt (-1: none) */
    long long best_job_step; /* highest job step completed so far */
    int recovering;          /* a failure's recovery is under way: reported at the first new step */
    LedgerRow at_failure;    /* the totals when that failure struck */
    char fail_kind[24];
    int fail_attempt;
    double rec_fault_t, rec_declared_t; /* that failure: when it struck, when it was declared */
    char rec_kind[24];
} SupLedger;

struct StragglerDetector;
struct MetricsServer;

typedef struct Sup {
    SuperviseOpts *o;
    uint8_t secret[HB_SECRET_BYTES];
    HmacKey key;             /* the secret's HMAC pads, absorbed once */
    int attempt;
    RankState *ranks;
    /* heartbeat connections: slots, reused; the event loop's epoll set holds them */
    int epfd, lfd;
    Conn *conns;
    int nconns, cap_conns;   /* open, allocated */
    int *free_conns, nfree;
    double launch_time;
    int all_connected, nconnected, ndone;
    long long job_step;      /* min step over ranks in this attempt */
    long long min_step;      /* min over all ranks of their step, and how many are at it */
    int n_at_min;
    long long run_min;       /* min over running ranks (holds are released up to it) */
    int run_at_min, nrunning;
    int watch_head, watch_tail; /* connected ranks not done, oldest progress first (-1: none) */
    Timeline *tl;            /* per attempt */
    int fault_fired_this_attempt;
    long long next_fault_step; /* no unfired fault is due below this step */
    double clock_due;        /* --inject-rate: when this attempt's clock fault is due (INFINITY: none) */
    ClockDraw clock_draw;    /* and what it is */
    long long *holds; /* steps every rank waits at for GO this attempt (fault steps) */
    int nholds;
    int *held_ranks, nheld;  /* ranks waiting for GO */
    long long min_held;
    int lost_host_this_attempt; /* index into hosts, -1 */
    Host *hosts;
    int nhosts;
    int *active;
    int nactive;
    /* failure of this attempt */
    int failed, fail_kind;
    char why[256];
    double *stop_time;       /* per rank: when hang@ stopped it (for the event log) */
    uint64_t corrupt_state;
    long long refused;
    char source[32];         /* this attempt's restore source, from rank 0's event */
    int copy_rejected;       /* rank 0 said a damaged in-memory copy was passed over */
    int use_srun;
    int slurm_nodes;         /* hosts are the nodes of this Slurm allocation: ask Slurm about lost ones */
    char self_host[HB_HOST_MAX]; /* where this launcher runs (ranks here may be signalled by pid) */
    struct StragglerDetector *straggler;
    long long windows_logged; /* rank-times events: every window up to 1000 ranks, fewer above */
    struct MetricsServer *metrics;
    SupMetrics m;
    SupLedger led;           /* the time ledger */
    struct { pid_t pid; double t0; int termed; } *parked; /* launchers left to finish their abort (sup_teardown.c) */
    int nparked;
    Elastic el;              /* --elastic (sup_elastic.c); o->nranks is the current attempt's size, el.full_ranks -n */
    int max_attempts;        /* timelines allocated (failures + planned resizes) */
} Sup;

/* epoll data in the event loop: a tag, or for a connection the top bit, its slot and generation */
#define SUP_TAG_LISTEN 1ull
#define SUP_TAG_CHILD 2ull
#define SUP_TAG_METRICS 3ull
#define SUP_TAG_CONN (1ull << 63)

/* event_log.c: every event is a JSON line on stderr and in --events */
extern double sup_t_start;       /* monotonic seconds when the supervisor started */
extern FILE *sup_events_file;    /* --events, or NULL */
double sup_now(void);            /* monotonic seconds */
cJSON *sup_event(const char *name);
void sup_emit(cJSON *obj);       /* adds "t", prints, appends to the file; takes ownership */

/* sup_state.c */
/* SIGTERM or SIGUSR1 received: the ranks were asked (SIGUSR1, which mpirun and srun forward) to
 * checkpoint and stop; the run ends when they have, or after --stop-grace. 0: none. */
extern volatile sig_atomic_t sup_graceful_signal;
/* The attempt failed (the first reason counts): kind is a FAIL_* for the metrics. */
void sup_fail(Sup *s, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *sup_fail_kind_name(int kind); /* "rank-exit", "hang", ... (metrics and events) */

/* hb_server.c */
int sup_random_bytes(uint8_t *out, size_t n);
int hb_listen(const char *host, int nranks, int *port_out);
void hb_accept(Sup *s);                  /* every pending connection */
void hb_read(Sup *s, int slot, unsigned gen); /* readable connection (epoll data) */
void hb_close_conn(Sup *s, int slot);
void hb_drain(Sup *s);                   /* read what every connection has buffered */
void hb_close_all(Sup *s);

/* rank_progress.c: the job step, timelines and timeouts, all O(1) per heartbeat */
void progress_timeline_add(Timeline *tl, long long step, double t);
void progress_begin_attempt(Sup *s);
void progress_connected(Sup *s, int r);                  /* HELLO accepted */
/* STEP (from 0) or FROM (1); 1: the job step advanced (the caller fires what is due then) */
int progress_report(Sup *s, int r, long long step, int from);
void progress_stop_running(Sup *s, int r);               /* done, closed or SIGSTOPped; then holds_release() */
void progress_unwatch(Sup *s, int r);                    /* done or closed: no hang watch */
void progress_touch(Sup *s, int r);                      /* it progressed now */
double progress_deadline(const Sup *s);                  /* when a timeout could next fire */
void progress_check_timeouts(Sup *s);
double progress_productive_time(Sup *s, int nattempts, long long *steps_out);

/* fault_fire.c */
void faults_fire(Sup *s, int r, long long step);
void faults_begin_attempt(Sup *s);      /* hold steps (MYRIAD_HB_HOLD), slowed ranks (MYRIAD_INJECT_SLOW) */
int holds_has(const Sup *s, long long step);
void holds_add(Sup *s, int r, long long step); /* rank r waits for GO at step */
void holds_release(Sup *s);            /* GO to every held rank whose step every running rank reached */
void faults_clock_arm(Sup *s);         /* every rank connected: --inject-rate's next fault is due (a draw) */
void faults_clock_check(Sup *s);       /* fire it when due, while the job computes steps */

/* sup_teardown.c: ending an attempt */
/* Kill the attempt's ranks and its launcher; returns once every rank is gone (the launcher may be
 * left to finish its own abort: parked, reaped by sup_reap_parked). *status: the launcher's, when reaped. */
void sup_teardown(Sup *s, pid_t child, int *status);
void sup_reap_parked(Sup *s, int block); /* reap (block: all of) the parked launchers, escalating to signals */

/* sup_ledger.c: the time ledger fed from the attempts, heartbeats and failures (docs/LAUNCHER.md) */
void sup_ledger_open(Sup *s, int preflight_ran); /* at the supervisor's start: the time so far */
void sup_ledger_launch(Sup *s);                 /* attempt s->attempt launches now */
void sup_ledger_connected(Sup *s, int r);       /* r's HELLO completed the attempt's connections */
void sup_ledger_from(Sup *s, int r, const HbMsg *m);
void sup_ledger_sample(Sup *s, int r, const HbMsg *m); /* a STEP with its info */
void sup_ledger_job_step(Sup *s, long long step, double t); /* the job step reached `step` at t */
void sup_ledger_fault(Sup *s, double t);        /* a failure struck at t (the first one counts) */
void sup_ledger_declared(Sup *s, const char *kind); /* the attempt's failure was declared now */
void sup_ledger_failed(Sup *s);                 /* after the watch: the failure's lost step and detection */
void sup_ledger_account(Sup *s, int cause);     /* the time since the mark went to cause */
/* The end: the time since the mark to `cause`; returns the wall time (the launcher's start to now). */
double sup_ledger_close(Sup *s, int cause);
void sup_ledger_report(Sup *s, double wall); /* the goodput event and the console summary */
void sup_ledger_free(Sup *s);

/* sup_elastic.c: --elastic (docs/OPERATIONS.md, "Going on when the spares run out") */
void sup_elastic_start(Sup *s);                 /* before the first launch: the --hosts file as it is */
/* A lost host has no spare (no_spare says so): the next attempt at the largest size the other hosts
 * hold (event shrink); -1 with myr_error() when none down to MIN fits. */
int sup_elastic_shrink(Sup *s, const char *no_spare);
/* Running below the full size: about once a second, --hosts read again; hosts added start a planned
 * stop (SIGUSR1 to child: the ranks checkpoint and stop) for a grow. */
void sup_elastic_poll(Sup *s, pid_t child);
/* Before a relaunch (after a planned stop or a failure): when the hosts hold a larger size, the next
 * attempt runs at it (event grow); 1 when it grew. */
int sup_elastic_grow(Sup *s, const char *why);

/* sup_straggler.c: the detector's verdicts become events, evictions and metrics */
void sup_straggler_sample(Sup *s, int r, const HbMsg *m);
void sup_straggler_advance(Sup *s);

#endif
