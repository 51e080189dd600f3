/* sup_state.h: the supervisor's state, shared by the files of `myriad run`'s supervisor (internal
 * to src/launch): supervise.c (attempts: launch, watch, teardown, spares, the summary),
 * hb_server.c (heartbeat connections and their messages), rank_progress.c (job step, goodput
 * timeline, hang and start timeouts), fault_fire.c (injected faults and the hold steps) and
 * event_log.c (the JSON-lines event log). Behaviour and formats: docs/LAUNCHER.md. */
#ifndef MYRIAD_LAUNCH_SUP_STATE_H
#define MYRIAD_LAUNCH_SUP_STATE_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "launch/heartbeat.h"
#include "launch/supervise.h"

typedef struct {
    char name[64];
    int slots;
    int lost;
} Host;

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
} RankState;

typedef struct {
    int fd;
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

typedef struct {
    SuperviseOpts *o;
    uint8_t secret[HB_SECRET_BYTES];
    int attempt;
    RankState *ranks;
    Conn *conns;
    int nconns, cap_conns;
    double launch_time;
    int all_connected;
    long long job_step;      /* min step over ranks in this attempt */
    Timeline *tl;            /* per attempt */
    int fault_fired_this_attempt;
    long long *holds; /* steps every rank waits at for GO this attempt (fault steps) */
    int nholds;
    int lost_host_this_attempt; /* index into hosts, -1 */
    Host *hosts;
    int nhosts;
    int *active;
    int nactive;
    /* failure of this attempt */
    int failed;
    char why[256];
    double *stop_time;       /* per rank: when hang@ stopped it (for the event log) */
    uint64_t corrupt_state;
    long long refused;
    char source[32];         /* this attempt's restore source, from rank 0's event */
    int copy_rejected;       /* rank 0 said a damaged in-memory copy was passed over */
} Sup;

/* event_log.c: every event is a JSON line on stderr and in --events */
extern double sup_t_start;       /* monotonic seconds when the supervisor started */
extern FILE *sup_events_file;    /* --events, or NULL */
double sup_now(void);            /* monotonic seconds */
cJSON *sup_event(const char *name);
void sup_emit(cJSON *obj);       /* adds "t", prints, appends to the file; takes ownership */

/* supervise.c */
void sup_fail(Sup *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int sup_random_bytes(uint8_t *out, size_t n);

/* hb_server.c */
int hb_listen(const char *host, int *port_out);
void hb_send_line(int fd, const char *s);
void hb_accept(Sup *s, int lfd);
void hb_read(Sup *s, int ci);
void hb_close_conn(Sup *s, int i);

/* rank_progress.c */
void progress_timeline_add(Timeline *tl, long long step, double t);
void progress_update_job_step(Sup *s);
void progress_check_timeouts(Sup *s);
double progress_productive_time(Sup *s, int nattempts, long long *steps_out);

/* fault_fire.c */
void faults_fire(Sup *s, int r, long long step);
int holds_has(const Sup *s, long long step);
void holds_set(Sup *s);
void holds_release(Sup *s);

#endif
