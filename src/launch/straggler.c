/* straggler.c: windows of section times per rank, their medians, the relative and individual
 * scores, the K-windows rule and the culprit section (see straggler.h). */
#include "launch/straggler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    long long step; /* -1: empty */
    float s[STRAGGLER_SECTIONS];
    float wall;     /* the step's wall time; NAN unknown */
} Sample;

struct StragglerDetector {
    StragglerOptions o;
    int nranks, ring;     /* ring: samples kept per rank (a median's span, 2W, and a window ahead) */
    Sample *samples;      /* [nranks * ring], by step % ring */
    double *best;         /* [nranks * STRAGGLER_SECTIONS]: best (lowest) window median so far */
    int *cohort;          /* [nranks]: the rank's role (pipeline stage); peers share one */
    /* the horizon: the last hz_cap windows' compute medians per rank, newest at hz_head - 1 */
    int hz_cap, hz_count, hz_head;
    double *hz_c;         /* [nranks * hz_cap]: a window's compute median (NAN: none) */
    double *hz_span;      /* [hz_cap]: the seconds of steps a window adds (W x the job's median step time; NAN unknown) */
    double *hz_best;      /* [nranks]: best (lowest) horizon median so far */
    int *reported;        /* [nranks]: flagged, and not recovered since (straggler_advance) */
    long long next_end;   /* last step of the next window to evaluate; -1 until restarted */
    long long first_median; /* the attempt's first step a median may hold (straggler_begin) */
    StragglerWindow w;
};

void straggler_options_default(StragglerOptions *o) {
    o->window = 5;
    o->consecutive = 3;
    o->threshold = 0.75;
    o->min_share = 0.1;
    o->warmup = 0; /* the medians and the peers' reference absorb the first steps' costs (all ranks pay them) */
    /* healthy ranks on shared 2-core VMs ran 1.3-1.6x slower for 3-6 s at a time on one machine and
     * ~20 s on another (bench/straggler_results.md): a horizon of 60 s tolerates episodes up to
     * 30 s and flags a lasting slowdown in ~30-60 s, small against the hours a straggler costs */
    o->horizon_s = 60;
}

const char *straggler_section_name(int section) {
    return section == STRAGGLER_COMPUTE ? "compute" : hb_section_name(section);
}

StragglerDetector *straggler_create(int nranks, const StragglerOptions *o) {
    StragglerDetector *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->o = *o;
    if (d->o.window < 1) d->o.window = 1;
    if (d->o.window > 32) d->o.window = 32; /* a median's 2W samples fit rank_medians' stack arrays */
    if (d->o.consecutive < 1) d->o.consecutive = 1;
    d->nranks = nranks;
    d->ring = 3 * d->o.window;
    if (!(d->o.horizon_s >= 0)) d->o.horizon_s = 0;
    /* ~8 MiB of horizon at any rank count: 1024 windows for a small job, 104 at 10,000 ranks (whose
     * steps take seconds: 104 windows of 5 steps are minutes) */
    d->hz_cap = nranks > 0 ? (1 << 20) / nranks : 16;
    if (d->hz_cap > 1024) d->hz_cap = 1024;
    if (d->hz_cap < 16) d->hz_cap = 16;
    size_t n = (size_t)nranks, ns = n * STRAGGLER_SECTIONS;
    d->hz_c = malloc(n * (size_t)d->hz_cap * sizeof *d->hz_c);
    d->hz_span = malloc((size_t)d->hz_cap * sizeof *d->hz_span);
    d->hz_best = malloc(n * sizeof *d->hz_best);
    d->reported = calloc(n, sizeof *d->reported);
    d->samples = malloc(n * (size_t)d->ring * sizeof *d->samples);
    d->best = malloc(ns * sizeof *d->best);
    d->cohort = calloc(n, sizeof *d->cohort);
    StragglerWindow *w = &d->w;
    w->nranks = nranks;
    w->step_s = malloc(n * sizeof(double)), w->relative = malloc(n * sizeof(double));
    w->individual = malloc(n * sizeof(double)), w->sec_relative = malloc(n * sizeof(double));
    w->sec_individual = malloc(n * sizeof(double)), w->fastest_s = malloc(n * sizeof(double));
    w->best_s = malloc(n * sizeof(double)), w->section_s = malloc(ns * sizeof(double));
    w->section = malloc(n * sizeof(int)), w->below = calloc(n, sizeof(int)), w->flagged = malloc(n * sizeof(int));
    w->horizon_relative = malloc(n * sizeof(double)), w->horizon_individual = malloc(n * sizeof(double));
    if (!d->samples || !d->best || !d->cohort || !w->step_s || !w->relative || !w->individual || !w->sec_relative ||
        !w->sec_individual || !w->fastest_s || !w->best_s || !w->section_s || !w->section || !w->below || !w->flagged ||
        !d->hz_c || !d->hz_span || !d->hz_best || !d->reported || !w->horizon_relative || !w->horizon_individual) {
        straggler_free(d);
        return NULL;
    }
    straggler_restart(d);
    return d;
}

void straggler_free(StragglerDetector *d) {
    if (!d) return;
    StragglerWindow *w = &d->w;
    free(w->step_s), free(w->relative), free(w->individual), free(w->sec_relative), free(w->sec_individual);
    free(w->fastest_s), free(w->best_s), free(w->section_s), free(w->section), free(w->below), free(w->flagged);
    free(w->horizon_relative), free(w->horizon_individual);
    free(d->hz_c), free(d->hz_span), free(d->hz_best), free(d->reported);
    free(d->samples), free(d->best), free(d->cohort), free(d);
}

void straggler_restart(StragglerDetector *d) {
    for (size_t i = 0; i < (size_t)d->nranks * d->ring; i++) d->samples[i].step = -1;
    for (size_t i = 0; i < (size_t)d->nranks * STRAGGLER_SECTIONS; i++) d->best[i] = INFINITY;
    memset(d->w.below, 0, (size_t)d->nranks * sizeof *d->w.below);
    for (int r = 0; r < d->nranks; r++) d->hz_best[r] = INFINITY, d->reported[r] = 0;
    d->hz_count = d->hz_head = 0;
    d->next_end = -1;
}

void straggler_begin(StragglerDetector *d, long long start_step) {
    long long W = d->o.window, first = start_step < 0 ? 0 : start_step;
    /* the partial window up to a multiple of W and the warm-up windows never enter a median; the
     * first median is the next whole window, W steps, the later ones 2W. A
     * first median of 2W steps would put the earliest verdict on a rank slow from its first step
     * K + 1 windows in (19 steps at W 5, K 3, one step inside #28's 20); W steps put it at K (14) */
    long long whole = (first + W - 1) / W * W;
    d->first_median = whole + 1 + W * d->o.warmup;
    d->next_end = whole + W * (1 + d->o.warmup);
}

void straggler_set_cohort(StragglerDetector *d, int rank, int cohort) {
    if (rank >= 0 && rank < d->nranks && cohort >= 0) d->cohort[rank] = cohort;
}

void straggler_sample(StragglerDetector *d, int rank, long long step, const double section_s[HB_NSECTIONS], double step_s) {
    if (rank < 0 || rank >= d->nranks || step < 1) return;
    Sample *sm = &d->samples[(size_t)rank * d->ring + (size_t)(step % d->ring)];
    if (sm->step >= step) return;
    double compute = 0;
    int any = 0;
    for (int k = 0; k < HB_NSECTIONS; k++) {
        sm->s[k] = section_s[k] >= 0 ? (float)section_s[k] : NAN;
        if (k != HB_SEC_COMM && k != HB_SEC_CHECKPOINT && section_s[k] >= 0) compute += section_s[k], any = 1;
    }
    sm->s[STRAGGLER_COMPUTE] = any ? (float)compute : NAN;
    sm->wall = step_s > 0 ? (float)step_s : NAN;
    sm->step = step;
}

static double median(double *v, int n) {
    for (int i = 1; i < n; i++) /* insertion sort: n is a window, a handful */
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return n == 0 ? NAN : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Medians of rank r over steps [lo, hi] (sections and wall step time). 0 with too few samples. */
static int rank_medians(StragglerDetector *d, int r, long long lo, long long hi, double *sec, double *step) {
    double v[STRAGGLER_SECTIONS][64], wall[64];
    int n = 0, nwall = 0, cnt[STRAGGLER_SECTIONS] = {0};
    for (int i = 0; i < d->ring && n < 64; i++) {
        const Sample *sm = &d->samples[(size_t)r * d->ring + i];
        if (sm->step < lo || sm->step > hi) continue;
        for (int k = 0; k < STRAGGLER_SECTIONS; k++)
            if (!isnan(sm->s[k])) v[k][cnt[k]++] = sm->s[k];
        if (!isnan(sm->wall)) wall[nwall++] = sm->wall;
        n++;
    }
    if (2 * n < hi - lo + 1) return 0; /* fewer than half the window */
    for (int k = 0; k < STRAGGLER_SECTIONS; k++) sec[k] = 2 * cnt[k] >= n ? median(v[k], cnt[k]) : NAN;
    *step = 2 * nwall >= n ? median(wall, nwall) : NAN;
    return 1;
}

typedef struct {
    int group, rank;
    double v;
} Item;

static int cmp_item(const void *a, const void *b) {
    const Item *x = a, *y = b;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

/* For every rank r with value[r] > 0: the median of the values of the other ranks of its group
 * (leave-one-out), NAN when it has none; O(n log n) (one sort; each median read off the sorted
 * group), so 10,000 ranks cost nothing per window. */
static void loo_medians(int n, const int *group, const double *value, size_t stride, Item *items, double *out) {
    int m = 0;
    for (int r = 0; r < n; r++) {
        out[r] = NAN;
        double v = value[(size_t)r * stride];
        if (v > 0) items[m++] = (Item){group ? group[r] : 0, r, v};
    }
    qsort(items, (size_t)m, sizeof *items, cmp_item);
    for (int g0 = 0, g1; g0 < m; g0 = g1) {
        for (g1 = g0; g1 < m && items[g1].group == items[g0].group; g1++) {}
        int rem = g1 - g0 - 1; /* the others */
        for (int i = g0; rem > 0 && i < g1; i++) {
            int a = (rem - 1) / 2, b = rem / 2, skip = i - g0; /* positions in the group without i */
            double va = items[g0 + (a < skip ? a : a + 1)].v, vb = items[g0 + (b < skip ? b : b + 1)].v;
            out[items[i].rank] = 0.5 * (va + vb);
        }
    }
}

/* The horizon (straggler.h): pushes this window's compute medians, then each rank's median over
 * its last H seconds of windows and its scores against its peers' (w->horizon_*). below_long[r]:
 * the horizon says below (the window's rule on the horizon medians); 1 for every rank with the
 * horizon off, 0 until a rank's horizon spans H. */
static void horizon_scores(StragglerDetector *d, StragglerWindow *w, Item *items, double *col, double *others, int *below_long) {
    int n = d->nranks, cap = d->hz_cap;
    const StragglerOptions *o = &d->o;
    double step[64], job_step = NAN; /* the job's step time: the median of the ranks' (steps are synchronous) */
    int ns = 0;
    for (int r = 0; r < n && ns < 64; r++)
        if (w->step_s[r] > 0) step[ns++] = w->step_s[r];
    if (ns) job_step = median(step, ns);
    int at = d->hz_head;
    d->hz_span[at] = job_step > 0 ? o->window * job_step : NAN;
    for (int r = 0; r < n; r++) {
        double c = w->section_s[(size_t)r * STRAGGLER_SECTIONS + STRAGGLER_COMPUTE];
        d->hz_c[(size_t)r * cap + at] = c > 0 ? c : NAN;
    }
    d->hz_head = (at + 1) % cap;
    if (d->hz_count < cap) d->hz_count++;
    double *h = calloc((size_t)(n > 0 ? n : 1), sizeof *h); /* the horizon medians */
    double *v = malloc((size_t)cap * sizeof *v);
    /* the horizon's windows: the newest ones spanning H (the span is the job's, the same for every rank) */
    double span = 0;
    int nwin = 0, known = 1;
    while (nwin < d->hz_count && span < o->horizon_s) {
        double sp = d->hz_span[(at - nwin + cap) % cap];
        if (!(sp > 0)) {
            known = 0;
            break;
        }
        span += sp, nwin++;
    }
    int full = span >= o->horizon_s || d->hz_count == cap;
    for (int r = 0; r < n; r++) {
        int m = 0;
        for (int i = 0; i < nwin; i++) {
            double c = d->hz_c[(size_t)r * cap + (at - i + cap) % cap];
            if (c > 0) v[m++] = c;
        }
        double c = w->section_s[(size_t)r * STRAGGLER_SECTIONS + STRAGGLER_COMPUTE];
        /* without step times the horizon is the window */
        h[r] = !known ? (c > 0 ? c : NAN) : full && m > 0 ? median(v, m) : NAN;
        if (h[r] > 0 && h[r] < d->hz_best[r]) d->hz_best[r] = h[r];
        w->horizon_individual[r] = h[r] > 0 ? d->hz_best[r] / h[r] : NAN;
    }
    free(v);
    loo_medians(n, d->cohort, h, 1, items, col);
    for (int r = 0; r < n; r++) w->horizon_relative[r] = h[r] > 0 && col[r] > 0 ? (col[r] < h[r] ? col[r] / h[r] : 1.0) : NAN;
    loo_medians(n, NULL, w->horizon_individual, 1, items, others);
    for (int r = 0; r < n; r++) {
        below_long[r] = h[r] > 0 && ((w->horizon_relative[r] < o->threshold) ||
                                     (w->horizon_individual[r] < o->threshold && others[r] >= o->threshold));
        if (o->horizon_s <= 0) below_long[r] = 1;
    }
    w->horizon_s = known ? span : NAN; /* what the horizon medians cover */
    free(h);
}

const StragglerWindow *straggler_advance(StragglerDetector *d, long long job_step) {
    if (d->next_end < 0 || job_step < d->next_end) return NULL;
    StragglerWindow *w = &d->w;
    const StragglerOptions *o = &d->o;
    w->last_step = d->next_end, w->first_step = d->next_end - 2 * o->window + 1; /* rolling: windows overlap by half */
    if (w->first_step < d->first_median) w->first_step = d->first_median;        /* the attempt's first window */
    d->next_end += o->window;
    int n = d->nranks, S = STRAGGLER_SECTIONS;
    for (int r = 0; r < n; r++) {
        double *sec = &w->section_s[(size_t)r * S];
        if (!rank_medians(d, r, w->first_step, w->last_step, sec, &w->step_s[r])) {
            w->step_s[r] = NAN;
            for (int k = 0; k < S; k++) sec[k] = NAN;
        }
    }
    /* every rank's reference for every section: the leave-one-out median over its cohort */
    Item *items = malloc((size_t)(n > 0 ? n : 1) * sizeof *items);
    double *ref = malloc((size_t)(n > 0 ? n : 1) * S * sizeof *ref), *others = malloc((size_t)(n > 0 ? n : 1) * sizeof *others);
    double *col = malloc((size_t)(n > 0 ? n : 1) * sizeof *col);
    int *below_long = malloc((size_t)(n > 0 ? n : 1) * sizeof *below_long);
    horizon_scores(d, w, items, col, others, below_long);
    for (int k = 0; k < S; k++) {
        loo_medians(n, d->cohort, &w->section_s[k], (size_t)S, items, col);
        for (int r = 0; r < n; r++) ref[(size_t)r * S + k] = col[r];
    }
    /* individual scores first: a rank without peers is judged against the others' (below) */
    for (int r = 0; r < n; r++) {
        const double *sec = &w->section_s[(size_t)r * S];
        double *best = &d->best[(size_t)r * S];
        for (int k = 0; k < S; k++)
            if (sec[k] > 0 && sec[k] < best[k]) best[k] = sec[k];
        double c = sec[STRAGGLER_COMPUTE];
        w->individual[r] = c > 0 ? best[STRAGGLER_COMPUTE] / c : NAN;
        w->best_s[r] = c > 0 ? best[STRAGGLER_COMPUTE] : NAN;
    }
    loo_medians(n, NULL, w->individual, 1, items, others); /* the other ranks' individual scores */
    for (int r = 0; r < n; r++) {
        const double *sec = &w->section_s[(size_t)r * S];
        const double *best = &d->best[(size_t)r * S];
        w->relative[r] = w->sec_relative[r] = w->sec_individual[r] = w->fastest_s[r] = NAN;
        w->section[r] = -1, w->flagged[r] = 0;
        double c = sec[STRAGGLER_COMPUTE];
        if (!(c > 0)) {
            w->below[r] = 0;
            continue;
        }
        /* the verdict: the compute as a whole (what slows the step) against the median of the
         * rank's peers, the ranks doing the same work (leave-one-out: a slow rank does not pull
         * its own reference; the median: one lucky or unlucky peer does not either) */
        double rc = ref[(size_t)r * S + STRAGGLER_COMPUTE];
        /* slowed from its own best while the rest did not: the test for a rank without peers (one
         * rank per pipeline stage), and for any rank that became slow, whose peers' own spread (on
         * a shared machine, healthy ranks' compute differed by 25% for a whole run) can hide part
         * of its slowdown from the relative score */
        int below = w->individual[r] < o->threshold && others[r] >= o->threshold;
        if (rc > 0) {
            w->relative[r] = rc < c ? rc / c : 1.0;
            w->fastest_s[r] = rc;
            below = below || w->relative[r] < o->threshold;
        }
        /* the culprit: the section that slowed the most against the peers, among those big enough */
        for (int k = 0; k < HB_NSECTIONS; k++) {
            if (k == HB_SEC_COMM || k == HB_SEC_CHECKPOINT || !(sec[k] > 0) || sec[k] < o->min_share * c) continue;
            double pk = ref[(size_t)r * S + k];
            double rel = pk > 0 ? (pk < sec[k] ? pk / sec[k] : 1.0) : best[k] / sec[k];
            if (w->section[r] < 0 || rel < w->sec_relative[r])
                w->section[r] = k, w->sec_relative[r] = rel, w->sec_individual[r] = best[k] / sec[k];
        }
        w->below[r] = below ? w->below[r] + 1 : 0;
        /* reported again only after it recovered: over its horizon (a peer's passing slowdown can
         * lift one window of a lasting straggler above the threshold), or without one, in a window */
        if (o->horizon_s > 0 ? !below_long[r] : !w->below[r]) d->reported[r] = 0;
        /* K windows in a row, and over the horizon too: not a passing slowdown */
        w->flagged[r] = w->below[r] >= o->consecutive && below_long[r] && !d->reported[r];
        if (w->flagged[r]) d->reported[r] = 1;
    }
    free(items), free(ref), free(others), free(col), free(below_long);
    return w;
}
