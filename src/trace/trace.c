/* trace.c: Chrome Trace Event buffers, the JSON writer, and the gather of every rank's events
 * to one writer over the comm layer. */
#define _POSIX_C_SOURCE 200809L
#include "trace/trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/atomic_file.h"
#include "util/error.h"

double trace_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

int trace_init(TraceBuffer *t, int rank) {
    memset(t, 0, sizeof *t);
    t->rank = rank;
    t->origin_us = trace_now_us();
    return 0;
}

void trace_free(TraceBuffer *t) {
    free(t->ev);
    memset(t, 0, sizeof *t);
}

int trace_sync_origin(TraceBuffer *t, Comm *c) {
    if (comm_barrier(c) < 0) return -1;
    t->origin_us = trace_now_us();
    return 0;
}

int trace_lane_name(TraceBuffer *t, int tid, const char *name) {
    if (tid < 0 || tid >= TRACE_LANES_MAX) return myr_error("trace: lane %d is outside 0..%d", tid, TRACE_LANES_MAX - 1);
    snprintf(t->lane[tid], sizeof t->lane[tid], "%s", name);
    return 0;
}

TraceEvent *trace_complete(TraceBuffer *t, const char *name, const char *cat, int tid, double start_us,
                           double dur_us) {
    if (tid < 0 || tid >= TRACE_LANES_MAX) {
        myr_error("trace: lane %d is outside 0..%d", tid, TRACE_LANES_MAX - 1);
        return NULL;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        TraceEvent *ev = realloc(t->ev, cap * sizeof *ev);
        if (!ev) {
            myr_error("trace: out of memory (%zu events)", cap);
            return NULL;
        }
        t->ev = ev, t->cap = cap;
    }
    TraceEvent *e = &t->ev[t->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->cat, sizeof e->cat, "%s", cat);
    e->tid = tid;
    e->ts_us = start_us - t->origin_us;
    e->dur_us = dur_us < 0 ? 0 : dur_us;
    return e;
}

TraceEvent *trace_end(TraceBuffer *t, const char *name, const char *cat, int tid, double start_us) {
    return trace_complete(t, name, cat, tid, start_us, trace_now_us() - start_us);
}

int trace_arg(TraceEvent *e, const char *key, int64_t value) {
    for (int i = 0; i < TRACE_ARGS_MAX; i++)
        if (!e->arg_key[i][0]) {
            snprintf(e->arg_key[i], sizeof e->arg_key[i], "%s", key);
            e->arg_val[i] = value;
            return 0;
        }
    return myr_error("trace: event '%s' already has %d args", e->name, TRACE_ARGS_MAX);
}

/* ---- JSON */

typedef struct {
    AtomicFile f;
    int first;
} Out;

static void out_printf(Out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(Out *o, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) atomic_write(&o->f, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* A JSON string literal (quotes, backslashes and control characters escaped). */
static void out_string(Out *o, const char *s) {
    char buf[4 * TRACE_NAME_MAX * 2 + 8];
    size_t k = 0;
    buf[k++] = '"';
    for (; *s && k < sizeof buf - 8; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') buf[k++] = '\\', buf[k++] = (char)c;
        else if (c < 0x20) k += (size_t)snprintf(buf + k, sizeof buf - k, "\\u%04x", c);
        else buf[k++] = (char)c;
    }
    buf[k++] = '"';
    atomic_write(&o->f, buf, k);
}

static void sep(Out *o) {
    if (!o->first) atomic_write(&o->f, ",\n", 2);
    o->first = 0;
}

static int by_lane_then_time(const void *pa, const void *pb) {
    const TraceEvent *a = *(const TraceEvent *const *)pa, *b = *(const TraceEvent *const *)pb;
    if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
    if (a->ts_us != b->ts_us) return a->ts_us < b->ts_us ? -1 : 1;
    return a < b ? -1 : a > b; /* stable: recording order */
}

static void write_rank(Out *o, const TraceBuffer *t) {
    char label[32];
    snprintf(label, sizeof label, "rank %d", t->rank);
    sep(o);
    out_printf(o, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", t->rank);
    out_string(o, label);
    out_printf(o, "}}");
    sep(o);
    out_printf(o, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
               t->rank, t->rank);
    int used[TRACE_LANES_MAX] = {0};
    for (size_t i = 0; i < t->n; i++) used[t->ev[i].tid] = 1;
    for (int l = 0; l < TRACE_LANES_MAX; l++) {
        if (!used[l] && !t->lane[l][0]) continue;
        char def[16];
        snprintf(def, sizeof def, "lane %d", l);
        sep(o);
        out_printf(o, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", t->rank, l);
        out_string(o, t->lane[l][0] ? t->lane[l] : def);
        out_printf(o, "}}");
    }
    const TraceEvent **order = malloc(sizeof *order * (t->n ? t->n : 1));
    if (!order) {
        o->f.failed = 1;
        myr_error("trace: out of memory");
        return;
    }
    for (size_t i = 0; i < t->n; i++) order[i] = &t->ev[i];
    qsort(order, t->n, sizeof *order, by_lane_then_time);
    for (size_t i = 0; i < t->n; i++) {
        const TraceEvent *e = order[i];
        sep(o);
        out_printf(o, "{\"name\":");
        out_string(o, e->name);
        out_printf(o, ",\"cat\":");
        out_string(o, e->cat[0] ? e->cat : "other");
        out_printf(o, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{", t->rank, e->tid,
                   e->ts_us, e->dur_us);
        for (int a = 0, k = 0; a < TRACE_ARGS_MAX; a++) {
            if (!e->arg_key[a][0]) continue;
            if (k++) out_printf(o, ",");
            out_string(o, e->arg_key[a]);
            out_printf(o, ":%lld", (long long)e->arg_val[a]);
        }
        out_printf(o, "}}");
    }
    free(order);
}

int trace_write(const TraceBuffer *const *bufs, int nbufs, const char *path) {
    Out o = {.first = 1};
    if (atomic_open(&o.f, path) < 0) return -1;
    out_printf(&o, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    for (int i = 0; i < nbufs; i++) write_rank(&o, bufs[i]);
    out_printf(&o, "\n]}\n");
    if (o.f.failed) {
        atomic_abort(&o.f);
        return myr_error("trace: could not write %s", path);
    }
    return atomic_commit(&o.f);
}

/* ---- gather: members send a header (rank, event count, lane names) and their events to rank 0.
 * The comm layer moves bf16 elements (2 bytes each) without touching them, so bytes travel as
 * COMM_BF16 elements; every record is a whole number of them. */

typedef struct {
    int64_t rank, n;
    char lane[TRACE_LANES_MAX][TRACE_NAME_MAX];
} Header;

_Static_assert(sizeof(Header) % 2 == 0 && sizeof(TraceEvent) % 2 == 0, "records travel as 2-byte elements");

int trace_write_gathered(Comm *c, const TraceBuffer *t, const char *path) {
    int me = comm_rank(c), n = comm_size(c), rc = 0;
    Header h;
    memset(&h, 0, sizeof h);
    h.rank = t->rank, h.n = (int64_t)t->n;
    memcpy(h.lane, t->lane, sizeof h.lane);
    if (me != 0) {
        if (comm_send(c, &h, sizeof h / 2, COMM_BF16, 0) < 0) return -1;
        if (t->n && comm_send(c, t->ev, t->n * sizeof(TraceEvent) / 2, COMM_BF16, 0) < 0) return -1;
    } else {
        TraceBuffer *all = calloc((size_t)n, sizeof *all);
        const TraceBuffer **ptrs = calloc((size_t)n, sizeof *ptrs);
        if (!all || !ptrs) rc = myr_error("trace: out of memory gathering %d ranks", n);
        for (int r = 0; r < n; r++) {
            if (r == 0) {
                if (all) all[0] = *t;
                continue;
            }
            /* keep receiving even after a failure, so the senders are not left blocked */
            Header hr;
            if (comm_recv(c, &hr, sizeof hr / 2, COMM_BF16, r) < 0) return -1;
            TraceEvent *ev = hr.n > 0 ? malloc((size_t)hr.n * sizeof *ev) : NULL;
            if (hr.n > 0 && !ev) { /* drain into a small buffer is not possible with one message: give up */
                rc = myr_error("trace: out of memory for %lld events of rank %lld", (long long)hr.n, (long long)hr.rank);
                free(all), free(ptrs);
                return rc;
            }
            if (hr.n > 0 && comm_recv(c, ev, (size_t)hr.n * sizeof *ev / 2, COMM_BF16, r) < 0) return -1;
            if (all) {
                all[r].rank = (int)hr.rank, all[r].ev = ev, all[r].n = all[r].cap = (size_t)hr.n;
                memcpy(all[r].lane, hr.lane, sizeof hr.lane);
            } else free(ev);
        }
        if (all && ptrs) {
            for (int r = 0; r < n; r++) ptrs[r] = &all[r];
            rc = trace_write(ptrs, n, path);
        }
        for (int r = 1; all && r < n; r++) free(all[r].ev);
        free(all), free(ptrs);
    }
    /* every member returns the writer's status */
    float status = rc < 0 ? 1.0f : 0.0f;
    char reason[256];
    snprintf(reason, sizeof reason, "%s", myr_last_error());
    if (comm_broadcast(c, &status, &status, 1, COMM_F32, 0) < 0) return -1;
    if (status != 0) {
        if (me == 0) return myr_error("%s", reason);
        return myr_error("trace: rank 0 of group '%s' could not write %s", comm_name(c), path);
    }
    return 0;
}
