/* validate_loso.c: leave-one-source-out validation. A "source" is the `source` column of the
 * published-run files (one paper, report or results page). For every source S, each FITTED
 * constant (validate_fit.c) is re-fitted on the rows of all other sources, in order (sustained
 * Hopper/Blackwell, sustained A100, then the MLPerf GEMM speed-up and the MoE imbalance given those),
 * and S's rows are predicted with the values so fitted: their error is error on data the model was
 * not fitted to. A constant is fitted by minimizing the mean |log(predicted / published)| step
 * time over its fitting rows (golden-section search over its range, with the unpublished
 * micro-batch / interleaving / recompute searched at every trial value, as validation does); with
 * no row left it takes its prior (1.0). A fold that removes no fitting row of a constant, and
 * changes no constant its rows depend on, keeps the all-rows value (the same fit). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "sim/validate.h"
#include "util/error.h"

static const int order[FIT_N] = {FIT_SUSTAINED_HB, FIT_SUSTAINED_A100, FIT_MLPERF_GEMM, FIT_MOE_IMBALANCE};

/* predicted / published - 1 of a prepared row (NAN when it cannot be simulated) */
static double row_error(const ValPrepared *p, const FitValues *fv) {
    SimResult r;
    if (!p->ok || val_simulate(p, fv, &r, NULL)) return NAN;
    return (r.step_time - p->vc->measured_s) / p->vc->measured_s;
}

/* mean |log(pred/published)| over the fitting rows of `id` outside the excluded source */
static double objective(const ValPrepared *P, int n, const char *excl, FitValues fv, int id, double x) {
    fv.set[id] = 1;
    fv.v[id] = x;
    double sum = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!P[i].ok || !val_fit_trains(P[i].vc, id) || (excl && !strcmp(P[i].vc->source, excl))) continue;
        double e = row_error(&P[i], &fv);
        if (!isfinite(e) || e <= -1) continue;
        sum += fabs(log1p(e));
        k++;
    }
    return k ? sum / k : 0;
}

static int fit_rows(const ValPrepared *P, int n, const char *excl, int id) {
    int k = 0;
    for (int i = 0; i < n; i++)
        k += P[i].ok && val_fit_trains(P[i].vc, id) && !(excl && !strcmp(P[i].vc->source, excl));
    return k;
}

/* golden-section search of the constant over its range, to 0.002 */
static double fit_one(const ValPrepared *P, int n, const char *excl, const FitValues *fv, int id) {
    const FitInfo *fi = val_fit_info(id);
    if (!fit_rows(P, n, excl, id)) return fi->prior;
    const double gr = 0.6180339887498949;
    double a = fi->lo, b = fi->hi;
    double c = b - gr * (b - a), d = a + gr * (b - a);
    double fc = objective(P, n, excl, *fv, id, c), fd = objective(P, n, excl, *fv, id, d);
    while (b - a > 0.002) {
        if (fc <= fd) { b = d; d = c; fd = fc; c = b - gr * (b - a); fc = objective(P, n, excl, *fv, id, c); }
        else { a = c; c = d; fc = fd; d = a + gr * (b - a); fd = objective(P, n, excl, *fv, id, d); }
    }
    return 0.5 * (a + b);
}

/* Do the constants `id`'s fitting rows (outside excl) depend on, other than id, differ from ref? */
static int deps_changed(const ValPrepared *P, int n, const char *excl, int id, const FitValues *fv, const FitValues *ref) {
    for (int j = 0; j < FIT_N; j++) {
        if (j == id || !fv->set[j] || fv->v[j] == ref->v[j]) continue;
        for (int i = 0; i < n; i++)
            if (P[i].ok && val_fit_trains(P[i].vc, id) && val_fit_uses(P[i].vc, j) && !(excl && !strcmp(P[i].vc->source, excl)))
                return 1;
    }
    return 0;
}

static void fit_all(const ValPrepared *P, int n, const char *excl, const FitValues *ref, FitValues *out) {
    memset(out, 0, sizeof *out);
    for (int q = 0; q < FIT_N; q++) {
        int id = order[q];
        int removed = ref && fit_rows(P, n, excl, id) != fit_rows(P, n, NULL, id);
        if (ref && !removed && !deps_changed(P, n, excl, id, out, ref)) out->v[id] = ref->v[id];
        else out->v[id] = fit_one(P, n, excl, out, id);
        out->set[id] = 1;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static void med_max(double *v, int n, double *med, double *mx) {
    if (n <= 0) { *med = *mx = NAN; return; }
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    *mx = v[n - 1];
}

int sim_validate_loso(const ValCase *cases, int n, int json, FILE *out, LosoSummary *sum) {
    memset(sum, 0, sizeof *sum);
    ValPrepared *P = calloc((size_t)(n > 0 ? n : 1), sizeof *P);
    double *ein = calloc((size_t)(n > 0 ? n : 1), sizeof(double)), *eloso = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    const char **src = calloc((size_t)(n > 0 ? n : 1), sizeof(char *));
    FitValues *fold = calloc((size_t)(n > 0 ? n : 1), sizeof(FitValues));
    double *tmp = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!P || !ein || !eloso || !src || !fold || !tmp) {
        free(P); free(ein); free(eloso); free(src); free(fold); free(tmp);
        return myr_error("out of memory");
    }
    int ns = 0;
    for (int i = 0; i < n; i++) {
        val_prepare(&cases[i], &P[i]);
        ein[i] = row_error(&P[i], NULL);
        if (!isfinite(ein[i])) continue;
        int k = 0;
        while (k < ns && strcmp(src[k], cases[i].source)) k++;
        if (k == ns) src[ns++] = cases[i].source;
    }
    fit_all(P, n, NULL, NULL, &sum->all);
    for (int id = 0; id < FIT_N; id++) sum->all_rows[id] = fit_rows(P, n, NULL, id);
    for (int s = 0; s < ns; s++) {
        fit_all(P, n, src[s], &sum->all, &fold[s]);
        for (int i = 0; i < n; i++)
            if (isfinite(ein[i]) && !strcmp(cases[i].source, src[s])) eloso[i] = row_error(&P[i], &fold[s]);
    }
    /* summary over all predicted rows */
    int m = 0;
    for (int i = 0; i < n; i++) if (isfinite(ein[i])) tmp[m++] = fabs(ein[i]);
    sum->rows = m;
    sum->nsources = ns;
    med_max(tmp, m, &sum->in_median, &sum->in_max);
    m = 0;
    for (int i = 0; i < n; i++) if (isfinite(ein[i]) && isfinite(eloso[i])) tmp[m++] = fabs(eloso[i]);
    med_max(tmp, m, &sum->loso_median, &sum->loso_max);
    if (json) {
        fprintf(out, "\"loso\":{\"rows\":%d,\"sources\":%d,\"in_sample_median\":%.4f,\"in_sample_max\":%.4f,"
                     "\"median_abs_error\":%.4f,\"max_abs_error\":%.4f,\"fitted_all\":{",
                sum->rows, ns, sum->in_median, sum->in_max, sum->loso_median, sum->loso_max);
        for (int id = 0; id < FIT_N; id++)
            fprintf(out, "%s\"%s\":{\"value\":%.4f,\"shipped\":%.4f,\"rows\":%d}", id ? "," : "", val_fit_info(id)->key,
                    sum->all.v[id], val_fit_shipped(id), sum->all_rows[id]);
        fprintf(out, "},\"folds\":[");
        for (int s = 0; s < ns; s++) {
            fprintf(out, "%s{\"source\":\"%s\",\"values\":{", s ? "," : "", src[s]);
            for (int id = 0; id < FIT_N; id++)
                fprintf(out, "%s\"%s\":%.4f", id ? "," : "", val_fit_info(id)->key, fold[s].v[id]);
            fprintf(out, "},\"rows\":[");
            int first = 1;
            for (int i = 0; i < n; i++) {
                if (!isfinite(ein[i]) || strcmp(cases[i].source, src[s])) continue;
                fprintf(out, "%s{\"case\":\"%s\",\"in_sample_error\":%.4f,\"loso_error\":%.4f}", first ? "" : ",",
                        cases[i].name, ein[i], eloso[i]);
                first = 0;
            }
            fprintf(out, "]}");
        }
        fprintf(out, "]}");
    } else {
        fprintf(out, "\nleave-one-source-out: every FITTED constant re-fitted without the rows of one source, then "
                     "that source predicted\n");
        fprintf(out, "%-38s %4s %17s %17s", "source left out", "rows", "in-sample med/max", "LOSO med/max");
        for (int id = 0; id < FIT_N; id++) fprintf(out, " %14s", val_fit_info(id)->key);
        fprintf(out, "\n");
        for (int s = 0; s < ns; s++) {
            double a[512], b[512];
            int k = 0;
            for (int i = 0; i < n && k < 512; i++)
                if (isfinite(ein[i]) && !strcmp(cases[i].source, src[s])) { a[k] = fabs(ein[i]); b[k] = fabs(eloso[i]); k++; }
            double am, ax, bm, bx;
            med_max(a, k, &am, &ax);
            med_max(b, k, &bm, &bx);
            fprintf(out, "%-38.38s %4d %7.1f%% /%5.1f%% %7.1f%% /%5.1f%%", src[s], k, 100 * am, 100 * ax, 100 * bm, 100 * bx);
            for (int id = 0; id < FIT_N; id++)
                fprintf(out, " %13.3f%s", fold[s].v[id], fit_rows(P, n, src[s], id) ? " " : "*");
            fprintf(out, "\n");
        }
        fprintf(out, "(* no row left to fit on: the prior)\n");
        fprintf(out, "fitted on all rows:");
        for (int id = 0; id < FIT_N; id++)
            fprintf(out, " %s %.3f (%d rows; shipped %.3g)%s", val_fit_info(id)->key, sum->all.v[id], sum->all_rows[id],
                    val_fit_shipped(id), id < FIT_N - 1 ? "," : "\n");
        fprintf(out, "%d rows of %d sources: in-sample median |error| %.1f%%, max %.1f%%; leave-one-source-out median "
                     "%.1f%%, max %.1f%%\n", sum->rows, ns, 100 * sum->in_median, 100 * sum->in_max, 100 * sum->loso_median,
                100 * sum->loso_max);
    }
    free(P); free(ein); free(eloso); free(src); free(fold); free(tmp);
    return 0;
}
