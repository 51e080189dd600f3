/* test_straggler.c: the straggler detector (src/launch/straggler.c) on synthetic section times
 * whose answers are known by construction: a rank slowed 1.5x is flagged within the windows the
 * rule allows (and its scores are 1/1.5), whether slow from its first step or later, in 2-rank and
 * 4-rank jobs, among peers whose speeds differ, and without peers (one rank per pipeline stage); noise, a whole-job slowdown, a rank
 * slower by role (another pipeline stage), a faster rank, a one-window spike and a slow but
 * negligible section are not; the scores are checked against medians computed here by hand, and
 * a slow section is named as the culprit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "launch/straggler.h"
#include "test.h"

enum { MAX_RANKS = 8 };
static int RANKS = 4;                     /* ranks of the run() below */
static int (*cohort_of)(int rank) = NULL; /* its cohorts (NULL: all one) */

/* deterministic noise in [1 - a, 1 + a] */
static double jitter(unsigned *state, double a) {
    *state = *state * 1664525u + 1013904223u;
    return 1 + a * (2.0 * (*state >> 8) / (double)(1u << 24) - 1);
}

/* The section times of one step: forward 30 ms, backward 60 ms, optimizer 8 ms, data 0.1 ms,
 * checkpoint 1 ms, comm 5 ms, each scaled by `scale` (comm not: waiting is not compute). */
static void sections(double *sec, double scale, double noise, unsigned *st) {
    sec[HB_SEC_DATA] = 1e-4 * scale * jitter(st, noise);
    sec[HB_SEC_FORWARD] = 0.030 * scale * jitter(st, noise);
    sec[HB_SEC_BACKWARD] = 0.060 * scale * jitter(st, noise);
    sec[HB_SEC_COMM] = 0.005 * jitter(st, noise);
    sec[HB_SEC_OPTIMIZER] = 0.008 * scale * jitter(st, noise);
    sec[HB_SEC_CHECKPOINT] = 0.001 * scale * jitter(st, noise);
}

typedef double (*ScaleFn)(int rank, long long step);

/* Run `steps` steps of RANKS ranks; returns the job step at which `want_rank` was first flagged
 * (-1: never) and counts every flag in *flags. */
static long long run(const StragglerOptions *o, int steps, double noise, ScaleFn scale, int want_rank, int *flags,
                     StragglerDetector **keep) {
    StragglerDetector *d = straggler_create(RANKS, o);
    straggler_begin(d, 0);
    for (int r = 0; cohort_of && r < RANKS; r++) straggler_set_cohort(d, r, cohort_of(r));
    unsigned st = 12345;
    long long first = -1;
    *flags = 0;
    for (long long s = 1; s <= steps; s++) {
        for (int r = 0; r < RANKS; r++) {
            double sec[HB_NSECTIONS];
            sections(sec, scale(r, s), noise, &st);
            straggler_sample(d, r, s, sec, 0.1 * (r + 1));
        }
        const StragglerWindow *w;
        while ((w = straggler_advance(d, s)))
            for (int r = 0; r < RANKS; r++)
                if (w->flagged[r]) {
                    (*flags)++;
                    if (r == want_rank && first < 0) first = s;
                }
    }
    if (keep) *keep = d;
    else straggler_free(d);
    return first;
}

/* The window rule alone (no horizon): the tests of W, K, the scores and the cohorts; the horizon
 * has its own tests below. */
static void window_rule(StragglerOptions *o) {
    straggler_options_default(o);
    o->horizon_s = 0;
}

static double healthy(int r, long long s) { return 1; }
static double rank2_slow_from_20(int r, long long s) { return r == 2 && s >= 20 ? 1.5 : 1; }
static double all_slow_from_30(int r, long long s) { return s >= 30 ? 2 : 1; }
static double rank1_heavier(int r, long long s) { return r == 1 ? 1.5 : 1; }
static double rank0_faster(int r, long long s) { return r == 0 ? 0.7 : 1; }
static double stage1_heavier(int r, long long s) { return r >= 2 ? 1.5 : 1; }
static double stage1_heavier_rank3_slow_from_30(int r, long long s) { return (r >= 2 ? 1.5 : 1) * (r == 3 && s >= 30 ? 1.5 : 1); }
static int two_stages(int r) { return r < 2 ? 0 : 1; } /* pp 2 x dp 2: ranks 0, 1 stage 0; 2, 3 stage 1 */
static int own_stage(int r) { return r; }              /* pp 4: one rank per stage, no peers */
static double odd_ranks_slower(int r, long long s) { return r % 2 ? 1.25 : 1; }
static double odd_slower_rank2_slow_from_20(int r, long long s) { return (r % 2 ? 1.25 : 1) * (r == 2 && s >= 20 ? 1.5 : 1); }
static double rank3_spike(int r, long long s) { return r == 3 && s >= 21 && s <= 25 ? 3 : 1; }

static void test_slowed_rank_flagged_within_20_steps(void) {
    StragglerOptions o;
    window_rule(&o);
    int flags;
    StragglerDetector *d;
    long long at = run(&o, 60, 0.05, rank2_slow_from_20, 2, &flags, &d);
    /* medians over 10 steps every 5: at 25 (16..25, 6 of 10 slow), 30 and 35 -> step 35 */
    CHECK(at == 35, "flagged at job step %lld (expected 35: three windows whose medians are slow)", at);
    CHECK(at >= 20 && at - 20 <= 20, "within 20 steps of the slowdown (%lld)", at);
    CHECK(flags == 1, "one flag, once (got %d)", flags);
    straggler_free(d);
}

static long long slow_from;
static double rank2_slow_from_var(int r, long long s) { return r == 2 && s >= slow_from ? 1.5 : 1; }

static void test_latency_at_most_19_steps_wherever_it_starts(void) {
    StragglerOptions o;
    window_rule(&o);
    long long worst = 0;
    for (slow_from = 16; slow_from <= 40; slow_from++) { /* every phase against the windows */
        int flags;
        long long at = run(&o, 80, 0.05, rank2_slow_from_var, 2, &flags, NULL);
        CHECK(at >= slow_from && at - slow_from <= 19 && flags == 1, "slowed from %lld: flagged at %lld (%d flags)",
              slow_from, at, flags);
        if (at - slow_from > worst) worst = at - slow_from;
    }
    CHECK(worst == 19, "the worst case is K x W + W - 1 = 19 steps (%lld)", worst);
}

static void test_scores_equal_hand_computed_medians(void) {
    StragglerOptions o;
    window_rule(&o);
    StragglerDetector *d = straggler_create(RANKS, &o);
    straggler_begin(d, 0);
    /* noiseless: rank 2 is 1.5x slower in every compute section from step 11 on */
    const StragglerWindow *last = NULL;
    for (long long s = 1; s <= 20; s++) {
        for (int r = 0; r < RANKS; r++) {
            double sec[HB_NSECTIONS];
            unsigned st = 1;
            sections(sec, r == 2 && s >= 11 ? 1.5 : 1, 0, &st);
            straggler_sample(d, r, s, sec, 0.1 * (r + 1));
        }
        const StragglerWindow *w;
        while ((w = straggler_advance(d, s))) last = w;
    }
    CHECK(last && last->first_step == 11 && last->last_step == 20, "the last median is over steps 11..20");
    /* the first median (at 10) was over 1..10, all fast, so rank 2's best is 1x */
    CHECK_CLOSE(last->relative[2], 1 / 1.5, 1e-6, 0, "relative score of the slowed rank");
    CHECK_CLOSE(last->individual[2], 1 / 1.5, 1e-6, 0, "individual score of the slowed rank");
    CHECK_CLOSE(last->relative[0], 1, 1e-6, 0, "a healthy rank's relative score");
    CHECK_CLOSE(last->section_s[2 * STRAGGLER_SECTIONS + HB_SEC_BACKWARD], 0.090, 1e-6, 0, "median backward");
    CHECK_CLOSE(last->section_s[2 * STRAGGLER_SECTIONS + STRAGGLER_COMPUTE], 1.5 * (1e-4 + 0.030 + 0.060 + 0.008), 1e-6, 0,
                "compute = data + forward + backward + optimizer");
    CHECK_CLOSE(last->step_s[1], 0.2, 1e-6, 0, "step_s: the median wall time, as reported");
    CHECK(last->below[2] == 1, "rank 2 below in its first wholly slow median (relative 0.67 < 0.75) (%d)", last->below[2]);
    CHECK(last->below[0] == 0 && last->below[1] == 0 && last->below[3] == 0, "the others not");
    CHECK_CLOSE(last->fastest_s[2], 1e-4 + 0.030 + 0.060 + 0.008, 1e-6, 0, "its reference: the peers' median compute");
    CHECK(last->section[2] == HB_SEC_FORWARD || last->section[2] == HB_SEC_BACKWARD || last->section[2] == HB_SEC_OPTIMIZER,
          "the culprit is a big compute section (%s)", straggler_section_name(last->section[2]));
    CHECK_CLOSE(last->sec_relative[2], 1 / 1.5, 1e-6, 0, "the culprit's relative score");
    straggler_free(d);
}

static void test_quiet_on_noise(void) {
    StragglerOptions o;
    window_rule(&o);
    int flags;
    run(&o, 400, 0.2, healthy, -1, &flags, NULL); /* +-20% per step, per section */
    CHECK(flags == 0, "no straggler from noise (%d flags)", flags);
}

static void test_whole_job_slowdown_not_a_straggler(void) {
    StragglerOptions o;
    window_rule(&o);
    int flags;
    run(&o, 100, 0.05, all_slow_from_30, -1, &flags, NULL);
    CHECK(flags == 0, "every rank 2x slower is not a straggler (%d flags)", flags);
}

static void test_slow_from_the_start_flagged(void) {
    StragglerOptions o;
    window_rule(&o);
    int flags;
    /* windows end at 5 (the attempt's first median, over 1..5), 10 (1..10), 15: K = 3 below -> step
     * 15, 14 steps after step 1 (a first median of 10 steps made it 19: one inside #28's 20) */
    long long at = run(&o, 100, 0.05, rank1_heavier, 1, &flags, NULL);
    CHECK(at == 15 && flags == 1, "a rank 1.5x slower from step 1 (individual score 1) flagged at %lld (%d flags)", at, flags);
    RANKS = 2; /* with one peer, the other rank is its reference */
    at = run(&o, 100, 0.05, rank1_heavier, 1, &flags, NULL);
    CHECK(at == 15 && flags == 1, "2 ranks: flagged at %lld (%d flags)", at, flags);
    at = run(&o, 100, 0.05, rank2_slow_from_20, 2, &flags, NULL);
    CHECK(at == -1 && flags == 0, "2 ranks: no rank 2 (%d flags)", flags);
    run(&o, 400, 0.2, healthy, -1, &flags, NULL);
    CHECK(flags == 0, "2 ranks: noise alone flags nothing (%d)", flags);
    RANKS = 4;
}

static void test_slower_by_role_not_a_straggler(void) {
    StragglerOptions o;
    window_rule(&o);
    int flags;
    cohort_of = two_stages; /* stage 1 holds the LM head: 1.5x the work of stage 0 */
    run(&o, 100, 0.05, stage1_heavier, -1, &flags, NULL);
    CHECK(flags == 0, "ranks of a heavier pipeline stage are not stragglers (%d flags)", flags);
    long long at = run(&o, 100, 0.05, stage1_heavier_rank3_slow_from_30, 3, &flags, NULL);
    CHECK(at == 45 && flags == 1, "a stage-1 rank slowed 1.5x against its stage peer: flagged at %lld (%d)", at, flags);
    cohort_of = NULL; /* the same heavier ranks as peers of the others are stragglers */
    run(&o, 100, 0.05, stage1_heavier, -1, &flags, NULL);
    CHECK(flags == 2, "without cohorts the two heavier ranks are flagged (%d)", flags);
}

static void test_faster_rank_does_not_flag_the_others(void) {
    StragglerOptions o;
    window_rule(&o);
    int flags;
    /* against the fastest rank the others would score 0.7; against their peers' median, 1 */
    run(&o, 100, 0.05, rank0_faster, -1, &flags, NULL);
    CHECK(flags == 0, "a rank 1/0.7 x faster does not make the others stragglers (%d flags)", flags);
}

/* Healthy ranks whose compute differs for the whole run (measured: ranks 1 and 3 25% above 0 and 2
 * on a shared 2-core machine): the fast rank 2 slowed 1.5x scores relative 1.25/1.5 = 0.83 against
 * its peers' median, above the threshold; its individual score, 0.67 while the others' stay 1,
 * flags it. The spread alone flags nothing. */
static void test_became_slow_among_spread_peers(void) {
    StragglerOptions o;
    window_rule(&o);
    int flags;
    run(&o, 200, 0.05, odd_ranks_slower, -1, &flags, NULL);
    CHECK(flags == 0, "peers 25%% apart for the whole run: none (%d flags)", flags);
    long long at = run(&o, 100, 0.05, odd_slower_rank2_slow_from_20, 2, &flags, NULL);
    CHECK(at == 35 && flags == 1, "the fastest rank slowed 1.5x: flagged at %lld (%d flags)", at, flags);
}

static void test_without_peers(void) {
    StragglerOptions o;
    window_rule(&o);
    int flags;
    cohort_of = own_stage; /* pp 4, dp 1: nobody does the same work */
    long long at = run(&o, 100, 0.05, rank2_slow_from_20, 2, &flags, NULL);
    CHECK(at == 35 && flags == 1, "slowed from its own best while the others did not: flagged at %lld (%d)", at, flags);
    run(&o, 100, 0.05, all_slow_from_30, -1, &flags, NULL);
    CHECK(flags == 0, "every rank 2x slower: none (%d)", flags);
    run(&o, 100, 0.05, rank1_heavier, -1, &flags, NULL);
    CHECK(flags == 0, "heavier from the start, alone in its stage: not told from its role (%d)", flags);
    cohort_of = NULL;
}

static void test_one_window_spike_not_a_straggler(void) {
    StragglerOptions o;
    window_rule(&o);
    int flags;
    run(&o, 100, 0.05, rank3_spike, -1, &flags, NULL);
    CHECK(flags == 0, "3x slower for 5 steps: in 2 medians only, fewer than K (%d)", flags);
    o.consecutive = 1;
    long long at = run(&o, 100, 0.05, rank3_spike, 3, &flags, NULL);
    CHECK(at == 25 && flags == 1, "with K = 1 the spike is flagged at its window's end (%lld, %d)", at, flags);
}

static void test_negligible_section_not_scored(void) {
    StragglerOptions o;
    window_rule(&o);
    StragglerDetector *d = straggler_create(RANKS, &o);
    straggler_begin(d, 0);
    int flags = 0;
    for (long long s = 1; s <= 60; s++)
        for (int r = 0; r < RANKS; r++) {
            double sec[HB_NSECTIONS];
            unsigned st = 7;
            sections(sec, 1, 0, &st);
            if (r == 0 && s > 10) sec[HB_SEC_DATA] *= 10; /* 1 ms of a ~104 ms step: under 10% */
            straggler_sample(d, r, s, sec, 0.1 * (r + 1));
            const StragglerWindow *w;
            if (r == RANKS - 1)
                while ((w = straggler_advance(d, s)))
                    for (int q = 0; q < RANKS; q++) flags += w->flagged[q];
        }
    CHECK(flags == 0, "a 10x slower data section under min_share is not scored (%d)", flags);
    straggler_free(d);
}

static void test_missing_samples_and_restart(void) {
    StragglerOptions o;
    window_rule(&o);
    StragglerDetector *d = straggler_create(RANKS, &o);
    straggler_begin(d, 0);
    const StragglerWindow *w = NULL;
    for (long long s = 1; s <= 15; s++)
        for (int r = 0; r < RANKS - 1; r++) { /* rank 3 never reports */
            double sec[HB_NSECTIONS];
            unsigned st = 3;
            sections(sec, 1, 0, &st);
            straggler_sample(d, r, s, sec, 0.1 * (r + 1));
        }
    w = straggler_advance(d, 10);
    CHECK(w && w->first_step == 1 && w->last_step == 5, "the first median: the first window alone, 1..5 (%lld..%lld)",
          w ? w->first_step : -1, w ? w->last_step : -1);
    w = straggler_advance(d, 10);
    CHECK(w && w->first_step == 1 && w->last_step == 10, "then two windows, 1..10");
    CHECK(w && isnan(w->relative[3]) && isnan(w->step_s[3]) && !w->flagged[3], "a rank without samples is not scored");
    CHECK(w && fabs(w->relative[0] - 1) < 1e-9, "the others are");
    CHECK(straggler_advance(d, 10) == NULL, "each window once");
    straggler_restart(d);
    CHECK(straggler_advance(d, 100) == NULL, "nothing evaluated after a restart until straggler_begin");
    straggler_begin(d, 42); /* resumed at 42: 43..45 partial (never in a median), then 46..50, 46..55 */
    CHECK(straggler_advance(d, 49) == NULL, "the partial window and the window in progress");
    w = straggler_advance(d, 50);
    CHECK(w && w->first_step == 46 && w->last_step == 50, "first median after a resume at 42: 46..50 (%lld..%lld)",
          w ? w->first_step : -1, w ? w->last_step : -1);
    CHECK(straggler_advance(d, 54) == NULL, "the window in progress");
    w = straggler_advance(d, 55);
    CHECK(w && w->first_step == 46 && w->last_step == 55, "the next after a resume at 42: 46..55 (%lld..%lld)",
          w ? w->first_step : -1, w ? w->last_step : -1);
    straggler_free(d);
}

static void test_culprit_section_named(void) {
    StragglerOptions o;
    straggler_options_default(&o);
    StragglerDetector *d = straggler_create(RANKS, &o);
    straggler_begin(d, 0);
    int flagged = -1, culprit = -1;
    for (long long s = 1; s <= 50 && flagged < 0; s++) {
        for (int r = 0; r < RANKS; r++) {
            double sec[HB_NSECTIONS];
            unsigned st = 9;
            sections(sec, 1, 0.02, &st);
            if (r == 1 && s > 20) sec[HB_SEC_BACKWARD] *= 2; /* compute 98 -> 158 ms: 0.62 */
            straggler_sample(d, r, s, sec, NAN);
        }
        const StragglerWindow *w;
        while ((w = straggler_advance(d, s)))
            if (w->flagged[1]) flagged = (int)s, culprit = w->section[1];
    }
    /* the default options: without step times (NAN) the horizon is the window, so the window rule */
    CHECK(flagged == 40 && culprit == HB_SEC_BACKWARD, "rank 1 flagged at %d with culprit %s", flagged,
          culprit >= 0 ? straggler_section_name(culprit) : "none");
    straggler_free(d);
}

/* The horizon (default 60 s; these tests use 30). The run() job's step time is the median of the ranks' 0.1-0.4 s,
 * 0.25 s: a window adds 5 x 0.25 = 1.25 s, so the horizon is the last 24 windows (120 steps). */
static long long slow_until;
static double rank2_slow_between(int r, long long s) { return r == 2 && s >= slow_from && s < slow_until ? 1.5 : 1; }

static void test_passing_slowdown_not_a_straggler(void) {
    StragglerOptions o;
    straggler_options_default(&o);
    CHECK(o.horizon_s == 60, "the default horizon is 60 s (%g)", o.horizon_s);
    o.horizon_s = 30;
    /* rank 2 1.5x slower for 50 steps (12.5 s of the job's time, 10 windows of 24): what a
     * healthy rank on a shared core did for seconds at a time (bench/straggler_results.md) */
    slow_from = 200, slow_until = 250;
    int flags;
    long long at = run(&o, 400, 0.05, rank2_slow_between, 2, &flags, NULL);
    CHECK(at < 0 && flags == 0, "a 12.5 s slowdown within a 30 s horizon: not flagged (at %lld, %d flags)", at, flags);
    StragglerOptions w;
    window_rule(&w);
    at = run(&w, 400, 0.05, rank2_slow_between, 2, &flags, NULL);
    CHECK(at == 215 && flags == 1, "the window rule alone flags it at 215 (%lld, %d flags)", at, flags);
}

static void test_lasting_slowdown_flagged_over_the_horizon(void) {
    StragglerOptions o;
    straggler_options_default(&o);
    o.horizon_s = 30;
    /* rank 2 1.5x slower from step 200 on: its windows are slow from 205 (6 of 10 steps); its
     * horizon median (24 windows, the mean of the 12th and 13th) is slow once 13 of them are:
     * the window at 205 + 12 x 5 = 265, by which the window rule's K = 3 has long held */
    slow_from = 200, slow_until = 1 << 30;
    int flags;
    StragglerDetector *d;
    long long at = run(&o, 400, 0.05, rank2_slow_between, 2, &flags, &d);
    CHECK(at == 265 && flags == 1, "flagged at 265, once (%lld, %d flags)", at, flags);
    const StragglerWindow *w = straggler_advance(d, 1 << 30); /* one more window (405): the state at its end */
    CHECK(w && w->horizon_relative[2] < 0.7 && w->horizon_relative[2] > 0.63 && w->horizon_relative[0] == 1,
          "horizon scores: rank 2 %.3f (~1/1.5), rank 0 %.3f", w ? w->horizon_relative[2] : NAN, w ? w->horizon_relative[0] : NAN);
    CHECK(w && fabs(w->horizon_s - 30) < 1e-6, "the horizon spans 30 s (%.17g)", w ? w->horizon_s : NAN);
    straggler_free(d);
    /* slow from the start, 2 ranks (step time the median of 0.1 and 0.2 s: 0.75 s a window): no
     * verdict before the horizon spans 30 s, its 40th window (step 5 + 39 x 5 = 200) */
    RANKS = 2;
    at = run(&o, 250, 0.05, rank1_heavier, 1, &flags, NULL);
    CHECK(at == 200 && flags == 1, "2 ranks, rank 1 slower from step 1: flagged when the horizon fills, at 200 (%lld)", at);
    RANKS = 4;
    /* H = 10 s (8 windows): the slowdown from 200 is flagged at the 5th slow window, 225 */
    o.horizon_s = 10;
    at = run(&o, 400, 0.05, rank2_slow_between, 2, &flags, NULL);
    CHECK(at == 225 && flags == 1, "with a 10 s horizon: at 225 (%lld)", at);
}

int main(void) {
    RUN(test_slowed_rank_flagged_within_20_steps);
    RUN(test_latency_at_most_19_steps_wherever_it_starts);
    RUN(test_scores_equal_hand_computed_medians);
    RUN(test_quiet_on_noise);
    RUN(test_whole_job_slowdown_not_a_straggler);
    RUN(test_slow_from_the_start_flagged);
    RUN(test_slower_by_role_not_a_straggler);
    RUN(test_faster_rank_does_not_flag_the_others);
    RUN(test_became_slow_among_spread_peers);
    RUN(test_without_peers);
    RUN(test_one_window_spike_not_a_straggler);
    RUN(test_negligible_section_not_scored);
    RUN(test_missing_samples_and_restart);
    RUN(test_culprit_section_named);
    RUN(test_passing_slowdown_not_a_straggler);
    RUN(test_lasting_slowdown_flagged_over_the_horizon);
    return TEST_SUMMARY();
}
