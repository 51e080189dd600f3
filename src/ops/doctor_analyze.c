/* doctor_analyze.c: which hosts the doctor's figures condemn, and why. Pure: no MPI, no I/O.
 *
 * Every figure is compared with a reference (the cohort median, or the baseline) as a slowdown
 * factor f >= 1 when worse: ref/value for rates, value/ref for latency. It is reported as
 * "X% below" (X = 1 - 1/f) for rates and "f x" for latency. A host is flagged for a check when
 * f exceeds the check's limit, max(1 / (1 - threshold), noise^k):
 *  - threshold: the user's (default 10%);
 *  - noise: how far the median repetition lies from the best one, in the noisiest sample of the
 *    check (best / median, as a factor). Figures are the best repetition, and when repetitions
 *    scatter widely, which subject happened to get the quiet moments decides more than the
 *    hardware; so the limit grows with the scatter. k (noise_k, default 2) was chosen
 *    from healthy runs on a loaded 2-core machine: docs/OPERATIONS.md.
 * Cohorts:
 *  - per-rank checks (GEMM, triad): each rank against the median over all ranks; the host's
 *    figure is its worst rank; the reason counts its slow ranks.
 *  - per-host checks (all-reduce inside a host): each host against the median over hosts.
 *  - per-pair checks (p2p, all-reduce across two hosts): a pair is as slow as its slower end, so
 *    a host's figure is its BEST pair (the best peer bounds what its own link can do; with one
 *    bad host among three, the median of the pairs would itself be bad). Hosts' figures are
 *    compared with their median; the reason counts the peers whose pair is also past the limit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/doctor.h"
#include "util/error.h"

static const DoctorCheckInfo infos[CHK_N] = {
    [CHK_GEMM] = {"gemm", "GEMM rate", "GFLOP/s", SCOPE_RANK, 1},
    [CHK_TRIAD] = {"triad", "memory bandwidth (triad)", "GB/s", SCOPE_RANK, 1},
    [CHK_P2P_BW] = {"p2p_bw", "p2p bandwidth", "GB/s", SCOPE_PAIR, 1},
    [CHK_P2P_LAT] = {"p2p_lat", "p2p latency", "us", SCOPE_PAIR, 0},
    [CHK_AR_INTRA] = {"allreduce_intra", "intra-host all-reduce bus bandwidth", "GB/s", SCOPE_HOST, 1},
    [CHK_AR_INTER] = {"allreduce_inter", "inter-host all-reduce bus bandwidth", "GB/s", SCOPE_PAIR, 1},
};

const DoctorCheckInfo *doctor_check_info(DoctorCheck c) { return &infos[c]; }

int doctor_check_by_name(const char *name) {
    for (int c = 0; c < CHK_N; c++)
        if (!strcmp(infos[c].name, name)) return c;
    return -1;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Median of the finite values among v[0..n); NAN when fewer than `min` of them. */
static double median_of(const double *v, int n, int min) {
    double *s = malloc((size_t)(n > 0 ? n : 1) * sizeof *s);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i]) && v[i] > 0) s[k++] = v[i];
    double m = NAN;
    if (k >= min && k > 0) {
        qsort(s, (size_t)k, sizeof *s, cmp_double);
        m = k % 2 ? s[k / 2] : 0.5 * (s[k / 2 - 1] + s[k / 2]);
    }
    free(s);
    return m;
}

/* Slowdown factor of `value` against `ref` (> 1: worse; 0 when either is missing). */
static double slowdown(double value, double ref, int higher_better) {
    if (!(ref > 0) || !(value > 0)) return 0;
    return higher_better ? ref / value : value / ref;
}

/* Is a better than b? */
static int better(double a, double b, int higher_better) { return higher_better ? a > b : a < b; }

static void add_flag(DoctorVerdict *v, int host, DoctorCheck c, int vs_baseline, double d, const char *reason) {
    v->flags = realloc(v->flags, (size_t)(v->nflags + 1) * sizeof *v->flags);
    DoctorFlag *f = &v->flags[v->nflags++];
    f->host = host, f->check = c, f->vs_baseline = vs_baseline, f->deficit = d;
    snprintf(f->reason, sizeof f->reason, "%s", reason);
}

/* "41% below the median (1.2 vs 2.0 GB/s)" or, for latency, "3.5x the median (350 vs 100 us)". */
static void describe(char *out, size_t n, const DoctorCheckInfo *ci, double f, double value, double ref, int vs_baseline) {
    const char *what = vs_baseline ? "the baseline" : "the median";
    if (ci->higher_better) snprintf(out, n, "%.0f%% below %s (%.3g vs %.3g %s)", 100 * (1 - 1 / f), what, value, ref, ci->unit);
    else snprintf(out, n, "%.3gx %s (%.3g vs %.3g %s)", f, what, value, ref, ci->unit);
}

/* Flags for one check against one reference (the cohort median or the baseline). */
static void judge(const DoctorResults *r, DoctorVerdict *v, DoctorCheck c, double ref, int vs_baseline) {
    const DoctorCheckInfo *ci = &infos[c];
    double limit = 1 / (1 - v->effective[c]);
    if (!(ref > 0)) return;
    for (int h = 0; h < r->nhosts; h++) {
        double hv = v->host_value[c][h];
        if (!isfinite(hv)) continue;
        double f = slowdown(hv, ref, ci->higher_better);
        if (!(f > limit)) continue;
        char how[160], reason[256];
        int bad = 0, total = 0, worst_rank = -1;
        for (int i = 0; i < r->nsamples[c]; i++) {
            const DoctorSample *s = &r->samples[c][i];
            if (!(s->value > 0)) continue;
            int mine = ci->scope == SCOPE_RANK ? r->rank_host[s->a] == h : ci->scope == SCOPE_PAIR ? s->a == h || s->b == h : 0;
            if (!mine) continue;
            total++;
            bad += slowdown(s->value, ref, ci->higher_better) > limit;
            if (ci->scope == SCOPE_RANK && s->value == hv) worst_rank = s->a;
        }
        describe(how, sizeof how, ci, f, hv, ref, vs_baseline);
        if (ci->scope == SCOPE_RANK && total == 1) snprintf(reason, sizeof reason, "%s of rank %d %s", ci->title, worst_rank, how);
        else if (ci->scope == SCOPE_RANK)
            snprintf(reason, sizeof reason, "%s of %d of %d ranks past the limit; worst rank %d: %s", ci->title, bad, total,
                     worst_rank, how);
        else if (ci->scope == SCOPE_PAIR)
            snprintf(reason, sizeof reason, "%s to %d of %d peers %s%s", ci->title, bad, total, bad > 1 ? "at least " : "", how);
        else snprintf(reason, sizeof reason, "%s %s", ci->title, how);
        add_flag(v, h, c, vs_baseline, 1 - 1 / f, reason);
    }
}

/* Noise of a check as a factor >= 1: best / median repetition of its noisiest sample. Figures
 * are best repetitions, and the noisiest sample says how far luck could have carried one of them
 * (the median sample would not: with repetitions scattered 15x in one pair and 1.3x in the
 * others, that pair's best alone made a healthy host look 10x worse; docs/OPERATIONS.md). */
static double noise_factor(const DoctorResults *r, DoctorCheck c) {
    int m = r->nraw[c], n = r->nsamples[c];
    if (!r->raw[c] || m < 2 || n < 1) return 1;
    double *per = malloc((size_t)n * sizeof *per), *reps = malloc((size_t)m * sizeof *reps);
    for (int i = 0; i < n; i++) {
        int k = 0;
        double best = 0;
        for (int j = 0; j < m; j++) {
            double x = r->raw[c][(size_t)i * m + j];
            if (!(x > 0)) continue;
            reps[k++] = x;
            if (best == 0 || (infos[c].higher_better ? x > best : x < best)) best = x;
        }
        double med = median_of(reps, k, 1);
        per[i] = isfinite(med) ? slowdown(med, best, infos[c].higher_better) : NAN;
    }
    double f = 1;
    for (int i = 0; i < n; i++)
        if (isfinite(per[i]) && per[i] > f) f = per[i];
    free(per), free(reps);
    return f;
}

int doctor_analyze(const DoctorResults *r, DoctorVerdict *v) {
    memset(v, 0, sizeof *v);
    for (int c = 0; c < CHK_N; c++) {
        const DoctorCheckInfo *ci = &infos[c];
        double *hv = malloc((size_t)(r->nhosts > 0 ? r->nhosts : 1) * sizeof *hv);
        for (int h = 0; h < r->nhosts; h++) hv[h] = NAN;
        v->host_value[c] = hv;
        double *vals = malloc((size_t)(r->nsamples[c] > 0 ? r->nsamples[c] : 1) * sizeof *vals);
        for (int i = 0; i < r->nsamples[c]; i++) {
            const DoctorSample *s = &r->samples[c][i];
            vals[i] = s->value;
            if (!(s->value > 0)) continue;
            int hosts[2] = {ci->scope == SCOPE_RANK ? r->rank_host[s->a] : s->a, ci->scope == SCOPE_PAIR ? s->b : -1};
            if (hosts[0] < 0 || hosts[0] >= r->nhosts || hosts[1] >= r->nhosts) {
                free(vals);
                return myr_error("doctor: %s sample names host %d of %d", ci->name, hosts[0], r->nhosts);
            }
            for (int k = 0; k < 2; k++) {
                int h = hosts[k];
                if (h < 0) continue;
                /* rank scope: the worst rank speaks for its host; pair scope: the best peer */
                int take = !isfinite(hv[h]) || (ci->scope == SCOPE_RANK ? better(hv[h], s->value, ci->higher_better)
                                                                        : better(s->value, hv[h], ci->higher_better));
                if (take) hv[h] = s->value;
            }
        }
        /* the cohort: ranks for per-rank checks, hosts otherwise */
        const double *cohort = ci->scope == SCOPE_RANK ? vals : hv;
        int ncohort = ci->scope == SCOPE_RANK ? r->nsamples[c] : r->nhosts;
        v->median[c] = median_of(cohort, ncohort, DOCTOR_MIN_COHORT);
        v->reference[c] = median_of(cohort, ncohort, 1);
        free(vals);
        double k = r->noise_k > 0 ? r->noise_k : 0, limit = 1 / (1 - r->threshold[c]);
        v->noise[c] = noise_factor(r, (DoctorCheck)c);
        if (k > 0 && pow(v->noise[c], k) > limit) limit = pow(v->noise[c], k);
        v->effective[c] = 1 - 1 / limit;
        judge(r, v, (DoctorCheck)c, v->median[c], 0);
        judge(r, v, (DoctorCheck)c, r->baseline[c], 1);
    }
    return 0;
}

void doctor_verdict_free(DoctorVerdict *v) {
    for (int c = 0; c < CHK_N; c++) free(v->host_value[c]);
    free(v->flags);
    memset(v, 0, sizeof *v);
}

int doctor_host_flagged(const DoctorVerdict *v, int host) {
    for (int i = 0; i < v->nflags; i++)
        if (v->flags[i].host == host) return 1;
    return 0;
}
