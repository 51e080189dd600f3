/* trace.c: Chrome Trace Event Format output ("X" complete events, microseconds), viewable in
 * chrome://tracing or Perfetto. One process, one thread (lane) per pipeline stage. */
#include <stdio.h>
#include <stdlib.h>

#include "sim/sim.h"
#include "util/error.h"

struct TraceWriter {
    FILE *f;
    int first;
};

TraceWriter *trace_open(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) { myr_error("cannot write trace file %s", path); return NULL; }
    TraceWriter *t = malloc(sizeof *t);
    if (!t) { fclose(f); myr_error("out of memory"); return NULL; }
    t->f = f;
    t->first = 1;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
    return t;
}

static void sep(TraceWriter *t) {
    if (!t->first) fputs(",\n", t->f);
    t->first = 0;
}

void trace_lane(TraceWriter *t, int lane, const char *name) {
    sep(t);
    fprintf(t->f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", lane, name);
    sep(t);
    fprintf(t->f, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,\"args\":{\"sort_index\":%d}}", lane, lane);
}

void trace_event(TraceWriter *t, int lane, const char *name, double start_s, double dur_s) {
    sep(t);
    fprintf(t->f, "{\"name\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}", name, lane,
            start_s * 1e6, dur_s * 1e6);
}

int trace_close(TraceWriter *t) {
    if (!t) return 0;
    fputs("\n]}\n", t->f);
    int bad = ferror(t->f);
    bad |= fclose(t->f) != 0;
    free(t);
    return bad ? myr_error("error writing the trace file") : 0;
}
