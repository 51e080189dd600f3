/* trace.h: timelines in the Chrome Trace Event format (the JSON that Perfetto and
 * chrome://tracing open). Each rank records complete events ("ph":"X": name, category, lane,
 * start and duration in microseconds, a few integer args) into its own in-memory buffer; at the
 * end they are written by one process (trace_write) or gathered to rank 0 of a group and written
 * as one file (trace_write_gathered). In the file every rank is a process ("pid" = rank, named
 * "rank N" by metadata events) and each lane a thread ("tid", named by trace_lane_name), so the
 * viewer shows one row group per rank, e.g. lanes "compute" and "comm".
 *
 * Timestamps come from trace_now_us() (CLOCK_MONOTONIC) minus the buffer's origin:
 * trace_sync_origin() sets every rank's origin at the exit of one barrier, so ranks line up
 * (within the barrier's skew; on one node the clocks are the same clock). Categories in use:
 * "forward", "backward", "comm" (and anything else a caller needs). */
#ifndef MYRIAD_TRACE_TRACE_H
#define MYRIAD_TRACE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"

#define TRACE_NAME_MAX 48
#define TRACE_CAT_MAX 16
#define TRACE_ARGS_MAX 4
#define TRACE_ARG_KEY_MAX 12
#define TRACE_LANES_MAX 8

typedef struct {
    char name[TRACE_NAME_MAX];
    char cat[TRACE_CAT_MAX];
    char arg_key[TRACE_ARGS_MAX][TRACE_ARG_KEY_MAX]; /* "" = unused */
    int64_t arg_val[TRACE_ARGS_MAX];
    double ts_us, dur_us; /* relative to the buffer's origin */
    int32_t tid;          /* lane within the rank, 0..TRACE_LANES_MAX-1 */
    int32_t pad;
} TraceEvent;

typedef struct {
    int rank;            /* becomes the event's "pid" */
    double origin_us;    /* trace_now_us() value that becomes ts 0 */
    TraceEvent *ev;
    size_t n, cap;
    char lane[TRACE_LANES_MAX][TRACE_NAME_MAX]; /* lane names ("" = "lane N") */
} TraceBuffer;

/* Empty buffer for `rank`; origin = now. */
int trace_init(TraceBuffer *t, int rank);
void trace_free(TraceBuffer *t);
/* Monotonic clock in microseconds. */
double trace_now_us(void);
/* Collective over c: barrier, then every member sets its origin to now. */
int trace_sync_origin(TraceBuffer *t, Comm *c);
/* Name lane `tid` of this rank (the viewer's thread name). */
int trace_lane_name(TraceBuffer *t, int tid, const char *name);

/* Record a complete event that started at start_us (a trace_now_us() value) and lasted dur_us.
 * Names and categories longer than their fields are cut. Returns the event (to add args) or NULL. */
TraceEvent *trace_complete(TraceBuffer *t, const char *name, const char *cat, int tid, double start_us,
                           double dur_us);
/* Same, ending now: for `double t0 = trace_now_us(); work(); trace_end(t, "F3", "forward", 0, t0);` */
TraceEvent *trace_end(TraceBuffer *t, const char *name, const char *cat, int tid, double start_us);
/* Attach an integer arg (micro-batch, chunk, bytes, peer). -1 when the event already has TRACE_ARGS_MAX. */
int trace_arg(TraceEvent *e, const char *key, int64_t value);

/* Write the buffers (one per rank, or one) into one JSON file, atomically. Events are sorted by
 * start time within each (rank, lane), so timestamps never go back within a lane. */
int trace_write(const TraceBuffer *const *bufs, int nbufs, const char *path);
/* Collective over c: every member's buffer goes to c's rank 0 (point-to-point), which writes the
 * file. Returns the same status (0 / -1) on every member. */
int trace_write_gathered(Comm *c, const TraceBuffer *t, const char *path);

#endif
