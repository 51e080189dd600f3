/* metrics.c: `myriad run --metrics-port P`: /metrics in the Prometheus text exposition format
 * (version 0.0.4), served by libmicrohttpd inside the supervisor's own event loop (MHD's epoll
 * descriptor sits in the supervisor's epoll set; no thread, so the state is read without locks).
 * Names follow Prometheus conventions: base units (_seconds), _total for counters, _ratio for
 * fractions, a histogram for the step time. The list, with what each means: docs/OPERATIONS.md. */
#define _GNU_SOURCE
#include "launch/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "launch/sup_state.h"
#include "util/error.h"

struct MetricsServer {
    struct MHD_Daemon *d;
    Sup *s;
    int port;
    long long served; /* /metrics answers so far */
};

typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static void put(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(Buf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = 2 * (b->cap + (size_t)n);
        char *p = realloc(b->p, cap);
        if (!p) return;
        b->p = p, b->cap = cap;
    }
}

/* A float as the exposition format spells it: NaN, +Inf, or the shortest of %.15g / %.17g that
 * reads back as the same double (a loss reported as 4.20592025 stays 4.20592025). */
static const char *num(double v, char *buf, size_t n) {
    if (isnan(v)) return "NaN";
    if (isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    snprintf(buf, n, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, n, "%.17g", v);
    return buf;
}

static void header(Buf *b, const char *name, const char *type, const char *help) {
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metric(Buf *b, const char *name, const char *type, const char *help, double v) {
    char t[40];
    header(b, name, type, help);
    put(b, "%s %s\n", name, num(v, t, sizeof t));
}

/* A label value: backslash, double quote and newline escaped. */
static void label(Buf *b, const char *v) {
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') put(b, "\\%c", *v);
        else if (*v == '\n') put(b, "\\n");
        else put(b, "%c", *v);
    }
}

char *metrics_render(Sup *s, size_t *len) {
    Buf b = {malloc(1 << 14), 0, 1 << 14};
    if (!b.p) return NULL;
    b.p[0] = 0;
    const SupMetrics *m = &s->m;
    char t[40];
    int n = s->o->nranks;
    metric(&b, "myriad_step", "gauge", "Last training step completed and reported by rank 0 (myriad_loss is its loss).",
           (double)m->r0_step);
    metric(&b, "myriad_job_step", "gauge", "Last step completed by every rank (the slowest rank's).",
           (double)(s->job_step < 0 ? 0 : s->job_step));
    metric(&b, "myriad_loss", "gauge", "Training loss of step myriad_step, as rank 0 reported it.", m->r0_loss);
    metric(&b, "myriad_tokens_per_second", "gauge", "Training throughput of rank 0's last step (tokens of the global batch per second).",
           m->tokens_per_s);
    metric(&b, "myriad_model_flops_utilization_ratio", "gauge",
           "Model FLOPs utilization of rank 0's last step (model FLOPs per second over the peak of all ranks).", m->mfu);
    long long steps = 0;
    double wall = sup_now() - sup_t_start, productive = progress_productive_time(s, s->attempt + 1, &steps);
    metric(&b, "myriad_goodput_ratio", "gauge",
           "Productive time (final-trajectory step time) over wall time since the launcher started.",
           wall > 0 ? productive / wall : 0);
    header(&b, "myriad_time_seconds_total", "counter",
           "Wall time of the job by cause (the time ledger, docs/LAUNCHER.md); the causes add up to the time accounted so far.");
    for (int c = 0; c < LEDGER_CAUSES; c++)
        put(&b, "myriad_time_seconds_total{cause=\"%s\"} %s\n", ledger_cause_name(c), num(s->led.l.total.seconds[c], t, sizeof t));
    metric(&b, "myriad_wall_seconds", "gauge",
           "Wall time since the launcher started; less the causes' sum, what is not yet accounted (the step in flight).", wall);
    metric(&b, "myriad_attempt", "gauge", "Current attempt (0 = the first launch).", s->attempt);
    metric(&b, "myriad_ranks", "gauge", "Ranks of the job.", n);
    metric(&b, "myriad_ranks_connected", "gauge", "Ranks connected to the launcher in this attempt.", s->nconnected);
    metric(&b, "myriad_restarts_total", "counter", "Relaunches after a failure.", (double)m->restarts);
    static const char *kinds[FAIL_KINDS] = {"rank-exit", "hang", "never-connected", "launcher-exit", "host-lost", "straggler"};
    header(&b, "myriad_failures_total", "counter", "Failures that ended an attempt, by kind.");
    for (int k = 0; k < FAIL_KINDS; k++) put(&b, "myriad_failures_total{kind=\"%s\"} %lld\n", kinds[k], m->failures[k]);
    metric(&b, "myriad_stragglers_total", "counter", "Ranks flagged as stragglers.", (double)m->stragglers);
    static const double le[STEP_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
    header(&b, "myriad_step_duration_seconds", "histogram", "Time between consecutive job steps (the slowest rank's).");
    for (int k = 0; k < STEP_BUCKETS; k++)
        put(&b, "myriad_step_duration_seconds_bucket{le=\"%s\"} %lld\n", num(le[k], t, sizeof t), m->step_buckets[k]);
    put(&b, "myriad_step_duration_seconds_bucket{le=\"+Inf\"} %lld\n", m->step_count);
    put(&b, "myriad_step_duration_seconds_sum %s\n", num(m->step_sum, t, sizeof t));
    put(&b, "myriad_step_duration_seconds_count %lld\n", m->step_count);
    metric(&b, "myriad_checkpoint_seconds_total", "counter",
           "Time rank 0 spent checkpointing (disk saves and in-memory copies, communication waits excluded).", m->ckpt_s);
    metric(&b, "myriad_memory_checkpoint_step", "gauge", "Step of the newest in-memory copy complete on every rank (NaN: none).",
           m->mem_step >= 0 ? (double)m->mem_step : NAN);
    metric(&b, "myriad_memory_checkpoint_age_seconds", "gauge",
           "Seconds since the newest in-memory copy complete on every rank was reported (NaN: none).",
           m->mem_step >= 0 ? sup_now() - m->mem_seen : NAN);
    static const struct {
        const char *name, *help;
    } per_rank[3] = {{"myriad_rank_step_seconds", "Duration of the rank's last step, by its own clock."},
                     {"myriad_rank_straggler_relative_score", "Median compute time of this rank's peers (same pipeline stage) over its own, last window (1: no slower)."},
                     {"myriad_rank_straggler_individual_score", "This rank's best window median over its last one (1: as fast as ever)."}};
    for (int k = 0; k < 3; k++) {
        header(&b, per_rank[k].name, "gauge", per_rank[k].help);
        for (int r = 0; r < n; r++) {
            const RankState *rs = &s->ranks[r];
            double v = k == 0 ? rs->step_s : k == 1 ? rs->relative : rs->individual;
            if (isnan(v)) continue; /* unknown: no sample rather than NaN, so absent ranks stay absent */
            put(&b, "%s{rank=\"%d\",host=\"", per_rank[k].name, r);
            label(&b, rs->host);
            put(&b, "\"} %s\n", num(v, t, sizeof t));
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    metric(&b, "process_cpu_seconds_total", "counter", "CPU time of the launcher process (user and system).",
           ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec));
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        metric(&b, "process_max_fds", "gauge", "Open-file limit of the launcher process.", (double)rl.rlim_cur);
    metric(&b, "myriad_heartbeat_connections", "gauge", "Open heartbeat connections.", s->nconns);
    *len = b.len;
    return b.p;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    MetricsServer *ms = cls;
    struct MHD_Response *resp;
    unsigned status = MHD_HTTP_OK;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        static const char msg[] = "only GET /metrics\n";
        resp = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (strcmp(url, "/metrics")) {
        static const char msg[] = "myriad run serves /metrics\n";
        resp = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_NOT_FOUND;
    } else {
        size_t len = 0;
        char *text = metrics_render(ms->s, &len);
        ms->served++;
        if (!text) return MHD_NO;
        resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    }
    if (!resp) return MHD_NO;
    enum MHD_Result rc = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

MetricsServer *metrics_start(Sup *s, const char *addr, int port) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (addr && inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        myr_error("run: --metrics-addr '%s' is not an IPv4 address", addr);
        return NULL;
    }
    MetricsServer *ms = calloc(1, sizeof *ms);
    ms->s = s;
    /* no MHD thread: MHD_run from the supervisor's loop when MHD's epoll descriptor is ready */
    ms->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, (uint16_t)port, NULL, NULL, answer, ms,
                             MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT, 10u,
                             MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_END);
    if (!ms->d) {
        int e = errno;
        free(ms);
        myr_error("run: cannot serve metrics on %s:%d (%s); pick another --metrics-port (0: any free port)",
                  addr ? addr : "0.0.0.0", port, e ? strerror(e) : "libmicrohttpd refused");
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(ms->d, MHD_DAEMON_INFO_BIND_PORT);
    ms->port = info ? info->port : port;
    return ms;
}

int metrics_fd(const MetricsServer *ms) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(ms->d, MHD_DAEMON_INFO_EPOLL_FD);
    return info ? info->epoll_fd : -1;
}

int metrics_port(const MetricsServer *ms) { return ms->port; }

long long metrics_served(const MetricsServer *ms) { return ms ? ms->served : 0; }

double metrics_timeout(const MetricsServer *ms) {
    MHD_UNSIGNED_LONG_LONG ms_left;
    if (MHD_get_timeout(ms->d, &ms_left) != MHD_YES) return INFINITY;
    return ms_left * 1e-3;
}

void metrics_run(MetricsServer *ms) { MHD_run(ms->d); }

void metrics_stop(MetricsServer *ms) {
    if (!ms) return;
    MHD_stop_daemon(ms->d);
    free(ms);
}
