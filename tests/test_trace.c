/* test_trace.c: the Chrome Trace Event writer (src/trace/trace.c).
 * Alone: two ranks' buffers, recorded out of order and with names that need escaping, are
 * written by trace_write and read back with cJSON: metadata naming each rank and lane, events
 * sorted by time within each lane, args, escapes; a file that cannot be written fails cleanly.
 * Under mpirun (tests/test_trace.sh): every rank records a known set of events (rank r: r+2
 * forwards on lane 0 "compute", newest first, and one send on lane 1 "comm") and
 * trace_write_gathered writes them to argv[1]; tests/py/check_trace.py checks the file. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "trace/trace.h"
#include "util/error.h"

/* rank r: forwards F0..F(r+1) at ts 100*r + 10*i, dur 5, args mb=i, chunk=r; then "send" at
 * 100*r + 50 on lane 1 with args bytes=1024*(r+1), peer=r+1. Recorded newest first. */
static void record_known(TraceBuffer *t, int r) {
    trace_lane_name(t, 0, "compute");
    trace_lane_name(t, 1, "comm");
    for (int i = r + 1; i >= 0; i--) {
        char name[16];
        snprintf(name, sizeof name, "F%d", i);
        TraceEvent *e = trace_complete(t, name, "forward", 0, t->origin_us + 100.0 * r + 10.0 * i, 5);
        CHECK(e && trace_arg(e, "mb", i) == 0 && trace_arg(e, "chunk", r) == 0, "record");
    }
    TraceEvent *e = trace_complete(t, "send", "comm", 1, t->origin_us + 100.0 * r + 50, 2.5);
    CHECK(e && trace_arg(e, "bytes", 1024 * (r + 1)) == 0 && trace_arg(e, "peer", r + 1) == 0, "record");
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static void test_single_process_writer(void) {
    TraceBuffer a, b;
    trace_init(&a, 0);
    trace_init(&b, 1);
    record_known(&a, 0);
    record_known(&b, 1);
    TraceEvent *odd = trace_complete(&b, "say \"hi\"\\\n", "backward", 2, b.origin_us + 7, 1);
    CHECK(odd != NULL, "record");
    CHECK(trace_arg(odd, "a", 1) == 0 && trace_arg(odd, "b", 2) == 0 && trace_arg(odd, "c", 3) == 0 &&
              trace_arg(odd, "d", 4) == 0 && trace_arg(odd, "e", 5) == -1, "at most 4 args");
    CHECK(trace_complete(&a, "x", "forward", TRACE_LANES_MAX, 0, 1) == NULL, "lane out of range");
    const char *path = "build/test-logs/trace_single.json";
    const TraceBuffer *bufs[2] = {&a, &b};
    CHECK(trace_write(bufs, 2, path) == 0, "%s", myr_last_error());
    char *text = slurp(path);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECK(root != NULL, "the file parses as JSON");
    cJSON *evs = cJSON_GetObjectItem(root, "traceEvents");
    CHECK(cJSON_IsArray(evs), "traceEvents array");
    int names[2] = {0, 0}, x_events = 0, found_odd = 0;
    double last_ts[2][TRACE_LANES_MAX];
    for (int p = 0; p < 2; p++)
        for (int l = 0; l < TRACE_LANES_MAX; l++) last_ts[p][l] = -1e30;
    cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
        int pid = cJSON_GetObjectItem(e, "pid")->valueint, tid = cJSON_GetObjectItem(e, "tid")->valueint;
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
        CHECK(ph && name && (pid == 0 || pid == 1), "fields");
        if (!ph || !name || pid < 0 || pid > 1 || tid < 0 || tid >= TRACE_LANES_MAX) continue;
        if (!strcmp(ph, "M") && !strcmp(name, "process_name")) {
            char want[16];
            snprintf(want, sizeof want, "rank %d", pid);
            CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "name")), want),
                  "process name of %d", pid);
            names[pid]++;
        }
        if (strcmp(ph, "X")) continue;
        x_events++;
        double ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
        CHECK(ts >= last_ts[pid][tid], "rank %d lane %d goes back in time at %s", pid, tid, name);
        last_ts[pid][tid] = ts;
        if (!strcmp(name, "say \"hi\"\\\n")) {
            found_odd = 1;
            cJSON *args = cJSON_GetObjectItem(e, "args");
            CHECK(cJSON_GetObjectItem(args, "d")->valueint == 4 && !cJSON_GetObjectItem(args, "e"), "args");
            CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "cat")), "backward"), "category");
        }
        if (!strcmp(name, "F1") && pid == 1) {
            CHECK(fabs(ts - 110.0) < 1e-3 && fabs(cJSON_GetObjectItem(e, "dur")->valuedouble - 5) < 1e-9, "ts/dur");
            CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "mb")->valueint == 1, "arg mb");
        }
    }
    CHECK(names[0] == 1 && names[1] == 1, "one process_name per rank");
    CHECK(x_events == 3 + 4 + 1, "%d complete events", x_events);
    CHECK(found_odd, "escaped name round-trips");
    cJSON_Delete(root);
    free(text);
    /* a directory that does not exist: -1, nothing written */
    CHECK(trace_write(bufs, 2, "build/test-logs/no/such/dir/t.json") == -1, "unwritable path");
    CHECK(access("build/test-logs/no/such/dir/t.json.tmp", F_OK) != 0, "no temporary file left");
    trace_free(&a);
    trace_free(&b);
}

int main(int argc, char **argv) {
    if (!getenv("OMPI_COMM_WORLD_SIZE")) {
        RUN(test_single_process_writer);
        return TEST_SUMMARY();
    }
    /* under mpirun: gather to argv[1] */
    CommOptions opt = comm_default_options();
    opt.timeout_s = 60;
    if (comm_init(&argc, &argv, &opt) < 0) myr_die_last();
    if (argc < 2) myr_die("usage: mpirun -np N test_trace OUT.json");
    Comm *w = comm_world();
    TraceBuffer t;
    trace_init(&t, comm_rank(w));
    if (trace_sync_origin(&t, w) < 0) myr_die_last();
    record_known(&t, comm_rank(w));
    if (trace_write_gathered(w, &t, argv[1]) < 0) myr_die_last();
    /* a path rank 0 cannot write: every rank gets -1 */
    int rc = trace_write_gathered(w, &t, "build/test-logs/no/such/dir/t.json");
    if (rc != -1) myr_die("rank %d: an unwritable path did not fail", comm_rank(w));
    trace_free(&t);
    if (comm_finalize() < 0) myr_die_last();
    return test_failures_in_case != 0;
}
