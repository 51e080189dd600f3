/* test_progress.c: what a training run reports (train/progress.c). The ETA of a resumed run comes
 * from the steps this run has timed, not from the step number (a run resumed at step 50 of 100
 * that took 1 s per step has 49 s left, not 1 s); the JSON log counts steps from 1, writes null
 * for numbers that are not finite and marks skipped steps, and every line parses; lines written
 * to a file hold no carriage returns or terminal escapes. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "train/progress.h"

/* Runs fn with stderr sent to a temporary file; returns what it printed (malloc'd). */
static char *capture_stderr(void (*fn)(void *), void *ctx) {
    char path[] = "/tmp/myriad-progress-XXXXXX";
    int fd = mkstemp(path);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    fn(ctx);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    long n = lseek(fd, 0, SEEK_END);
    char *text = calloc((size_t)n + 1, 1);
    if (n > 0) pread(fd, text, (size_t)n, 0);
    close(fd);
    unlink(path);
    return text;
}

typedef struct {
    const char *log;
    long first, steps;
    double step_ms;
} Run;

static void report_steps(void *ctx) {
    Run *r = ctx;
    Progress p;
    progress_open(&p, r->log, r->steps, 1, 0);
    p.tty = 0; /* as when stderr is a file */
    for (long s = r->first; s < r->steps; s++) {
        StepReport rep = {.step = s, .steps = r->steps, .loss = 2.5, .lr = 1e-3, .grad_norm = 0.5, .ms = r->step_ms,
                          .tokens_per_s = 1000, .mfu = 0.01, .comm_ms = -1};
        if (s == r->first + 1) rep.loss = NAN, rep.grad_norm = INFINITY, rep.skipped = 1;
        progress_step(&p, &rep);
    }
    progress_close(&p);
}

/* Resumed at step 50 of 100 (the checkpoint holds 50 steps), 1 s per step: after the first
 * timed step (step 51), 49 steps remain: 49 s. The ETA from the step number was 1/51 * 49 s. */
static void test_eta_after_resume(void) {
    Run r = {NULL, 50, 100, 1000};
    char *out = capture_stderr(report_steps, &r);
    CHECK(strstr(out, "step 51/100 ") != NULL, "the first line is step 51: %.200s", out);
    const char *l51 = strstr(out, "step 51/100 ");
    CHECK(l51 && strstr(l51, "ETA 0m49s\n") && strstr(l51, "ETA 0m49s\n") < strstr(l51, "step 52/100"),
          "ETA of step 51: %.200s", l51 ? l51 : out);
    CHECK(strstr(out, "step 100/100 ") && strstr(strstr(out, "step 100/100 "), "ETA 0m00s"), "last ETA");
    CHECK(strstr(out, "step 52/100 ") && strstr(out, "skipped (non-finite)"), "the skipped step is said");
    CHECK(!strchr(out, '\r') && !strchr(out, '\033'), "no carriage return or escape in a file");
    free(out);
}

static void test_json_log(void) {
    char log[] = "/tmp/myriad-progress-log-XXXXXX";
    close(mkstemp(log));
    Run r = {log, 0, 4, 10};
    free(capture_stderr(report_steps, &r));
    FILE *f = fopen(log, "r");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        CHECK(j != NULL, "line %d is not JSON: %s", n + 1, line);
        if (!j) break;
        cJSON *step = cJSON_GetObjectItem(j, "step"), *loss = cJSON_GetObjectItem(j, "loss");
        cJSON *norm = cJSON_GetObjectItem(j, "grad_norm"), *skipped = cJSON_GetObjectItem(j, "skipped");
        CHECK(cJSON_IsNumber(step) && step->valuedouble == n + 1, "step counts from 1: line %d: %s", n + 1, line);
        if (n == 1) {
            CHECK(cJSON_IsNull(loss) && cJSON_IsNull(norm), "non-finite numbers are null: %s", line);
            CHECK(cJSON_IsTrue(skipped), "the skipped step is marked: %s", line);
        } else {
            CHECK(cJSON_IsNumber(loss) && loss->valuedouble == 2.5 && cJSON_IsNumber(norm), "finite numbers: %s", line);
            CHECK(skipped == NULL, "only the skipped step is marked: %s", line);
        }
        cJSON_Delete(j);
        n++;
    }
    if (f) fclose(f);
    CHECK(n == 4, "4 lines, got %d", n);
    unlink(log);
}

int main(void) {
    RUN(test_eta_after_resume);
    RUN(test_json_log);
    return TEST_SUMMARY();
}
