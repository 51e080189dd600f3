/* metrics.c: job-level statistics (JCT and queueing by size class, fairness, topology) and the
 * table / JSON printers. */
#include "sched/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double percentile(double *v, int n, double pct) {
    if (n <= 0) return 0;
    qsort(v, n, sizeof(double), cmp_double);
    int k = (int)ceil(pct / 100.0 * n) - 1;
    if (k < 0) k = 0;
    if (k >= n) k = n - 1;
    return v[k];
}

static double mean(const double *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return n ? s / n : 0;
}

void metrics_from_jobs(Metrics *m, const Job *jobs, int n, const Policy *pol) {
    double *jct = malloc(sizeof(double) * (n + 1)), *qd = malloc(sizeof(double) * (n + 1));
    int *cls = malloc(sizeof(int) * (n + 1));
    int k = 0;
    double js = 0, jsq = 0, tier_sum = 0;
    long multi = 0;
    m->jobs_total = n;
    for (int i = 0; i < n; i++) {
        const Job *j = &jobs[i];
        if (j->state == JOB_REJECTED) { m->jobs_rejected++; continue; }
        if (j->state != JOB_DONE) { m->jobs_unfinished++; continue; }
        jct[k] = j->finish - j->submit;
        qd[k] = j->first_start - j->submit;
        cls[k] = job_size_class(j);
        double x = jct[k] > 0 ? j->duration / jct[k] : 1;
        if (x > 1) x = 1; /* a run can only be slower than its ideal duration */
        js += x, jsq += x * x;
        if (qd[k] > m->max_queue_s) m->max_queue_s = qd[k];
        if (j->ntasks > 1 && j->gpus_per_task > 0) {
            /* nodes spanned > 1 only counts when the gang really left one node */
            m->tier_hist[j->max_tier_seen]++;
            if (j->max_tier_seen > 0) tier_sum += j->max_tier_seen, multi++;
        }
        k++;
    }
    m->jobs_finished = k;
    m->jain_jobs = jsq > 0 ? js * js / (k * jsq) : 1;
    m->avg_tier_multi = multi ? tier_sum / multi : 0;
    m->avg_jct_s = mean(jct, k);
    m->avg_queue_s = mean(qd, k);
    /* per class (before the global percentiles reorder the arrays) */
    double *cj = malloc(sizeof(double) * (k + 1)), *cq = malloc(sizeof(double) * (k + 1));
    for (int c = 0; c < JOB_CLASSES; c++) {
        int nc = 0;
        for (int i = 0; i < k; i++)
            if (cls[i] == c) cj[nc] = jct[i], cq[nc] = qd[i], nc++;
        ClassMetrics *cm = &m->cls[c];
        cm->n = nc;
        cm->avg_jct = mean(cj, nc);
        cm->avg_queue = mean(cq, nc);
        cm->p50_jct = percentile(cj, nc, 50);
        cm->p99_jct = percentile(cj, nc, 99);
        cm->p50_queue = percentile(cq, nc, 50);
        cm->p99_queue = percentile(cq, nc, 99);
    }
    m->p50_jct_s = percentile(jct, k, 50);
    m->p99_jct_s = percentile(jct, k, 99);
    m->p50_queue_s = percentile(qd, k, 50);
    m->p99_queue_s = percentile(qd, k, 99);
    free(cj), free(cq), free(jct), free(qd), free(cls);
    (void)pol;
}

void metrics_print_table(FILE *o, const Metrics *m, const char *policy, const char *workload) {
    fprintf(o, "policy %s on %s\n", policy, workload);
    fprintf(o, "  jobs           %d finished, %d rejected, %d unfinished (of %d)\n", m->jobs_finished, m->jobs_rejected,
            m->jobs_unfinished, m->jobs_total);
    fprintf(o, "  JCT            avg %.0f s, p50 %.0f s, p99 %.0f s\n", m->avg_jct_s, m->p50_jct_s, m->p99_jct_s);
    fprintf(o, "  queueing       avg %.0f s, p50 %.0f s, p99 %.0f s, max %.0f s\n", m->avg_queue_s, m->p50_queue_s,
            m->p99_queue_s, m->max_queue_s);
    fprintf(o, "  makespan       %.0f s (%.2f days)\n", m->makespan_s, m->makespan_s / 86400);
    if (isfinite(m->offered_load) && isfinite(m->window_demand))
        fprintf(o, "  window         first to last arrival: %.0f s; offered load %.1f %%, %.1f %% in the window had no job "
                "waited; GPU allocation %.1f %% (%.1f %% over the makespan)\n",
                m->window_s, 100 * m->offered_load, 100 * m->window_demand, 100 * m->gpu_alloc_rate,
                100 * m->gpu_alloc_makespan);
    else
        fprintf(o, "  window         first to last arrival: %.0f s; GPU allocation %.1f %% (%.1f %% over the makespan)\n",
                m->window_s, 100 * m->gpu_alloc_rate, 100 * m->gpu_alloc_makespan);
    fprintf(o, "  fragmentation  %.2f %% of GPUs (FGD, time-averaged over the window); head-of-queue %.2f %% while jobs wait (%.1f %% of the window)\n",
            100 * m->fragmentation, 100 * m->frag_head, 100 * m->waiting_time_frac);
    fprintf(o, "  topology       multi-node gangs: %ld in a node, %ld in a leaf, %ld in a spine, %ld across spines (mean tier %.2f)\n",
            m->tier_hist[0], m->tier_hist[1], m->tier_hist[2], m->tier_hist[3], m->avg_tier_multi);
    fprintf(o, "  fairness       Jain (jobs, ideal/actual run) %.3f, Jain (queues) %.3f\n", m->jain_jobs, m->jain_queues);
    fprintf(o, "  disruption     %ld preemptions, %ld node failures (%ld spare swaps, %ld requeues), %.1f GPU-hours lost\n",
            m->preemptions, m->failures, m->spare_swaps, m->failure_requeues, m->gpu_hours_lost);
    fprintf(o, "  decisions      %ld passes, latency p50 %.3f ms, p99 %.3f ms, max %.3f ms; simulated in %.2f s\n",
            m->decisions, m->decision_ms_p50, m->decision_ms_p99, m->decision_ms_max, m->sim_wall_s);
    fprintf(o, "  %-9s %7s %11s %11s %11s %11s %11s\n", "class", "jobs", "avg JCT", "p50 JCT", "p99 JCT", "avg queue",
            "p99 queue");
    for (int c = 0; c < JOB_CLASSES; c++) {
        const ClassMetrics *k = &m->cls[c];
        if (!k->n) continue;
        fprintf(o, "  %-9s %7d %11.0f %11.0f %11.0f %11.0f %11.0f\n", job_class_name(c), k->n, k->avg_jct, k->p50_jct,
                k->p99_jct, k->avg_queue, k->p99_queue);
    }
}

void metrics_print_json(FILE *o, const Metrics *m, const char *policy, const char *workload) {
    fprintf(o, "{\"policy\": \"%s\", \"workload\": \"%s\", ", policy, workload);
    fprintf(o, "\"jobs_total\": %d, \"jobs_finished\": %d, \"jobs_rejected\": %d, \"jobs_unfinished\": %d, ", m->jobs_total,
            m->jobs_finished, m->jobs_rejected, m->jobs_unfinished);
    fprintf(o, "\"avg_jct_s\": %.3f, \"p50_jct_s\": %.3f, \"p99_jct_s\": %.3f, ", m->avg_jct_s, m->p50_jct_s, m->p99_jct_s);
    fprintf(o, "\"avg_queue_s\": %.3f, \"p50_queue_s\": %.3f, \"p99_queue_s\": %.3f, \"max_queue_s\": %.3f, ", m->avg_queue_s,
            m->p50_queue_s, m->p99_queue_s, m->max_queue_s);
    if (isfinite(m->offered_load)) fprintf(o, "\"offered_load\": %.6f, ", m->offered_load);
    if (isfinite(m->window_demand)) fprintf(o, "\"window_demand\": %.6f, ", m->window_demand);
    fprintf(o, "\"makespan_s\": %.3f, \"window_s\": %.3f, \"gpu_alloc_rate\": %.6f, \"gpu_alloc_makespan\": %.6f, "
               "\"fragmentation\": %.6f, \"frag_head\": %.6f, \"waiting_time_frac\": %.6f, ",
            m->makespan_s, m->window_s, m->gpu_alloc_rate, m->gpu_alloc_makespan, m->fragmentation, m->frag_head,
            m->waiting_time_frac);
    fprintf(o, "\"preemptions\": %ld, \"node_failures\": %ld, \"spare_swaps\": %ld, \"failure_requeues\": %ld, "
               "\"gpu_hours_lost\": %.3f, ",
            m->preemptions, m->failures, m->spare_swaps, m->failure_requeues, m->gpu_hours_lost);
    fprintf(o, "\"decisions\": %ld, \"decision_ms_p50\": %.6f, \"decision_ms_p99\": %.6f, \"decision_ms_max\": %.6f, ",
            m->decisions, m->decision_ms_p50, m->decision_ms_p99, m->decision_ms_max);
    fprintf(o, "\"jain_jobs\": %.6f, \"jain_queues\": %.6f, \"mean_tier_multinode\": %.4f, ", m->jain_jobs, m->jain_queues,
            m->avg_tier_multi);
    fprintf(o, "\"tiers_spanned\": {\"node\": %ld, \"leaf\": %ld, \"spine\": %ld, \"cluster\": %ld}, ", m->tier_hist[0],
            m->tier_hist[1], m->tier_hist[2], m->tier_hist[3]);
    fprintf(o, "\"classes\": {");
    int first = 1;
    for (int c = 0; c < JOB_CLASSES; c++) {
        const ClassMetrics *k = &m->cls[c];
        if (!k->n) continue;
        fprintf(o, "%s\"%s\": {\"jobs\": %d, \"avg_jct_s\": %.3f, \"p50_jct_s\": %.3f, \"p99_jct_s\": %.3f, "
                   "\"avg_queue_s\": %.3f, \"p50_queue_s\": %.3f, \"p99_queue_s\": %.3f}",
                first ? "" : ", ", job_class_name(c), k->n, k->avg_jct, k->p50_jct, k->p99_jct, k->avg_queue, k->p50_queue,
                k->p99_queue);
        first = 0;
    }
    fprintf(o, "}, \"sim_wall_s\": %.3f}\n", m->sim_wall_s);
}
