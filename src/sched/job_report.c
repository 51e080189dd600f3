/* job_report.c: one line per job after a simulation, like Slurm's `sacct`: when it was submitted,
 * first started and finished, what it asked for, where its last placement sat, and what interrupted
 * it. Written as CSV so that questions such as "why did this gang wait so long" can be answered
 * with a spreadsheet or three lines of Python (docs/SCHEDULER.md, "Per-job output"). */
#include "sched/job_report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"

static const char *state_name(const Job *j) {
    switch (j->state) {
    case JOB_DONE: return "COMPLETED";
    case JOB_REJECTED: return "REJECTED";
    case JOB_RUNNING: return "RUNNING";
    default: return "PENDING";
    }
}

/* Distinct nodes of the job's current (or last) placement; 0 if it never ran. */
static int nodes_of(const Job *j) {
    if (j->first_start < 0 || !j->slots) return 0;
    int n = 0;
    for (int t = 0; t < j->ntasks; t++) {
        int seen = 0;
        for (int u = 0; u < t && !seen; u++) seen = j->slots[u].node == j->slots[t].node;
        n += !seen;
    }
    return n;
}

int job_report_write(const char *path, const JobSet *js) {
    FILE *f = fopen(path, "w");
    if (!f) return myr_error("--jobs-out %s: cannot create (%s)", path, strerror(errno));
    fprintf(f, "id,name,state,submit_s,start_s,end_s,wait_s,run_s,gpus,tasks,nodes,tier,queue,priority,restarts,"
               "preemptions,lost_gpu_h\n");
    for (int i = 0; i < js->n; i++) {
        const Job *j = &js->jobs[i];
        int ran = j->state != JOB_REJECTED && j->first_start >= 0, done = j->state == JOB_DONE;
        fprintf(f, "%d,%s,%s,%.3f,", j->id, j->name, state_name(j), j->submit);
        if (ran) fprintf(f, "%.3f,", j->first_start); else fputc(',', f);
        if (done) fprintf(f, "%.3f,", j->finish); else fputc(',', f);
        if (ran) fprintf(f, "%.3f,", j->first_start - j->submit); else fputc(',', f);
        if (done) fprintf(f, "%.3f,", j->finish - j->first_start); else fputc(',', f);
        fprintf(f, "%.3f,%d,%d,%d,%d,%d,%d,%d,%.4f\n", job_gpu_milli(j) / 1000.0, j->ntasks, nodes_of(j),
                ran ? j->max_tier_seen : -1, j->queue, j->priority, j->restarts, j->preemptions,
                j->lost_gpu_s / 3600.0);
    }
    if (fclose(f)) return myr_error("--jobs-out %s: write failed (%s)", path, strerror(errno));
    return 0;
}
