/* job_report.h: per-job output of a scheduler simulation (`sched simulate --jobs-out FILE`). */
#ifndef MYRIAD_SCHED_JOB_REPORT_H
#define MYRIAD_SCHED_JOB_REPORT_H

#include "sched/job.h"

/* Writes FILE as CSV, one row per job (header first): id, name, state (COMPLETED, REJECTED,
 * PENDING, RUNNING), submit_s, start_s (first start), end_s, wait_s (first start - submit), run_s
 * (end - first start), gpus, tasks, nodes (of the last placement), tier (highest spanned), queue,
 * priority, restarts (node failures), preemptions, lost_gpu_h. Times of events that did not happen
 * are empty. Returns 0, or -1 with the reason. */
int job_report_write(const char *path, const JobSet *js);

#endif
