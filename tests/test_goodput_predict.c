/* test_goodput_predict.c: the Poisson fault clock of `myriad run --inject-rate` (util/fault_clock.c)
 * and the effective-training-time prediction of `myriad sim goodput` (sim/goodput_predict.c):
 *   - the clock's spec: accepted forms, and each bad one refused with its reason;
 *   - its draws: the first ones equal an independent Python splitmix64 (computed once, below), the
 *     same seed gives the same schedule and another seed another; over 20,000 draws of seed 1 the
 *     mean inter-arrival time is within 3 standard errors of the MTBF, the share below the MTBF
 *     within 3 sigma of 1 - 1/e and the kinds' shares within 3 sigma of uniform (fixed seed: the
 *     test is deterministic);
 *   - the expectation against hand-computed cases (E[U] = S tau / (1 - rho/M), ...);
 *   - the replay against hand-made schedules worked out by hand (lost work from the newest
 *     committed copy, a hang found as much sooner as it struck into its step), and no faults;
 *   - the two derivations agree: the replay's mean effective time over 2,000 seeds is within 3
 *     standard errors of the expectation. No wall time is measured. */
#include <math.h>
#include <string.h>

#include "sim/goodput_predict.h"
#include "test.h"
#include "util/error.h"
#include "util/fault_clock.h"

static void test_clock_spec(void) {
    FaultClock c;
    CHECK(fault_clock_parse(&c, "kill:20") == 0 && c.mtbf_s == 20 && c.nkinds == 1 && c.kinds[CLOCK_KILL] && c.seed == 1,
          "kill:20: %g s, %d kinds, seed %llu", c.mtbf_s, c.nkinds, (unsigned long long)c.seed);
    CHECK(fault_clock_parse(&c, "kill+hang+host:2.5,seed=7") == 0 && c.mtbf_s == 2.5 && c.nkinds == 3 && c.seed == 7,
          "mixed: %g s, %d kinds, seed %llu", c.mtbf_s, c.nkinds, (unsigned long long)c.seed);
    static const char *bad[][2] = {{"20", "is not"},           {"kill", "is not"},
                                   {"kil:20", "unknown fault kind 'kil'"}, {"kill+:20", "ends its kinds"},
                                   {"kill+kill:20", "twice"},  {"kill:0", "positive"},
                                   {"kill:-3", "positive"},    {"kill:x", "positive"},
                                   {"kill:20,seed=-1", "seed"}, {"kill:20,sed=1", "unknown option"},
                                   {"kill:20x", "unexpected"}, {":20", "is not"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = fault_clock_parse(&c, bad[i][0]);
        CHECK(rc == -1 && strstr(myr_last_error(), bad[i][1]), "'%s': rc %d, '%s' (want '%s')", bad[i][0], rc,
              myr_last_error(), bad[i][1]);
    }
}

static void test_clock_draws(void) {
    FaultClock a, b;
    fault_clock_parse(&a, "kill+hang:20");
    ClockDraw d;
    /* independent oracle: splitmix64 in Python, u = ((x >> 11) + 0.5) / 2^53, t = -20 ln u */
    fault_clock_draw(&a, &d);
    CHECK_CLOSE(d.after_s, 11.363390207665581, 1e-12, 0, "first draw of seed 1");
    CHECK(d.kind == CLOCK_HANG && d.pick % 4 == 2 && d.index == 0, "first draw: kind %d pick %% 4 = %d", d.kind, (int)(d.pick % 4));
    fault_clock_draw(&a, &d);
    CHECK_CLOSE(d.after_s, 16.22243992458905, 1e-12, 0, "second draw of seed 1");
    /* reproducible: a reset (or another clock of the seed) gives the same schedule */
    fault_clock_reset(&a);
    fault_clock_parse(&b, "kill+hang:20,seed=1");
    int same = 1;
    for (int i = 0; i < 1000; i++) {
        ClockDraw x, y;
        fault_clock_draw(&a, &x), fault_clock_draw(&b, &y);
        same &= x.after_s == y.after_s && x.kind == y.kind && x.pick == y.pick;
    }
    CHECK(same, "the same seed gave another schedule");
    fault_clock_parse(&b, "kill+hang:20,seed=2");
    fault_clock_reset(&a);
    ClockDraw x, y;
    fault_clock_draw(&a, &x), fault_clock_draw(&b, &y);
    CHECK(x.after_s != y.after_s, "seeds 1 and 2 drew the same first time %g", x.after_s);
}

static void test_clock_statistics(void) {
    FaultClock c;
    fault_clock_parse(&c, "kill+hang+host:20,seed=1");
    const int n = 20000;
    double sum = 0;
    int below = 0, kinds[CLOCK_KINDS] = {0};
    for (int i = 0; i < n; i++) {
        ClockDraw d;
        fault_clock_draw(&c, &d);
        sum += d.after_s, below += d.after_s < 20, kinds[d.kind]++;
    }
    /* exponential: sd = mean, so the mean of n has standard error 20 / sqrt(n) */
    double mean = sum / n, se = 20 / sqrt(n);
    CHECK(fabs(mean - 20) < 3 * se, "mean inter-arrival %.4f s, want 20 +- %.4f", mean, 3 * se);
    double p = 1 - exp(-1), sp = sqrt(p * (1 - p) / n);
    CHECK(fabs((double)below / n - p) < 3 * sp, "share below the MTBF %.4f, want %.4f +- %.4f", (double)below / n, p, 3 * sp);
    for (int k = 0; k < CLOCK_KINDS; k++) {
        double q = 1.0 / 3, sq = sqrt(q * (1 - q) / n);
        CHECK(fabs((double)kinds[k] / n - q) < 3 * sq, "kind %d share %.4f", k, (double)kinds[k] / n);
    }
}

static GoodputModel model(const char *clock) {
    GoodputModel m = {.steps = 100, .step_s = 1, .productive_s = 0.8, .fixed_s = 10, .copy_every = 1, .commit_lag = 1};
    fault_clock_parse(&m.clock, clock);
    m.recovery_s[CLOCK_KILL] = 5, m.recovery_s[CLOCK_HANG] = 9, m.recovery_s[CLOCK_HOST] = 12;
    return m;
}

static void test_expectation_by_hand(void) {
    /* kills every 50 s: rho = 1.5 s, E[U] = 100 / (1 - 0.03) = 103.0928 s, E[N] = 2.061856,
     * E[T] = 10 + 103.0928 + 5 x 2.061856 = 123.4021 s, effective 80 / 123.4021 = 0.6482877 */
    GoodputModel m = model("kill:50");
    GoodputPrediction p;
    CHECK(goodput_expect(&m, &p) == 0, "%s", myr_last_error());
    CHECK_CLOSE(goodput_lost_per_fault(&m), 1.5, 1e-12, 0, "rho");
    CHECK_CLOSE(p.up_s, 103.09278350515464, 1e-12, 0, "up time");
    CHECK_CLOSE(p.faults, 2.0618556701030926, 1e-12, 0, "faults");
    CHECK_CLOSE(p.wall_s, 123.40206185567011, 1e-12, 0, "wall");
    CHECK_CLOSE(p.effective, 0.64828738512949, 1e-10, 0, "effective");
    /* kills and hangs: R = (5 + 9 - 1/2) / 2 = 6.75 s (a hang found half a step sooner);
     * copies every 4 steps: rho = 1 x (2 + 1) = 3 s, E[U] = 100 / 0.94 = 106.38298 s, E[N] = 2.12766,
     * E[T] = 10 + 106.38298 + 6.75 x 2.12766 = 130.74468 s, effective 0.61188 */
    m = model("kill+hang:50");
    m.copy_every = 4;
    CHECK(goodput_expect(&m, &p) == 0, "%s", myr_last_error());
    CHECK_CLOSE(p.wall_s, 130.74468085106383, 1e-12, 0, "mixed wall");
    CHECK_CLOSE(p.effective, 80 / 130.74468085106383, 1e-12, 0, "mixed effective");
    /* the spread: each fault costs its kind's R_k + 3 / 0.94: kill 8.19149, hang 11.69149 s;
     * sigma(T) = sqrt(2.12766 x (8.19149^2 + 11.69149^2) / 2) = 14.72411 s, x 0.61188 / 130.74468 */
    CHECK_CLOSE(p.sigma, 0.06890820719490484, 1e-9, 0, "sigma");
    /* refusals: work lost faster than it is done; a kind with no recovery time */
    m = model("kill:1");
    m.copy_every = 4;
    CHECK(goodput_expect(&m, &p) == -1 && strstr(myr_last_error(), "never finishes"), "%s", myr_last_error());
    m = model("host:50");
    m.recovery_s[CLOCK_HOST] = -1;
    CHECK(goodput_expect(&m, &p) == -1 && strstr(myr_last_error(), "--recovery host="), "%s", myr_last_error());
}

static void test_replay_by_hand(void) {
    GoodputModel m = model("kill+hang:50");
    m.steps = 10, m.fixed_s = 1, m.recovery_s[CLOCK_KILL] = 2, m.recovery_s[CLOCK_HANG] = 5;
    /* a kill 3.5 s in: steps 1-3 done, the copy of step 2 committed (step 3's is not yet): resume
     * after 2, lost 1.5 s; wall 1 + 3.5 + 2 = 6.5. A hang 0.4 s in: nothing new committed, resume
     * after 2 again, lost 0.4 s, found 0.4 s sooner: 5 - 0.4; wall 6.5 + 0.4 + 4.6 = 11.5. Then 8
     * steps to the end: wall 19.5, up 11.9, lost 1.9, effective 8 / 19.5 */
    ClockDraw d[] = {{3.5, CLOCK_KILL, 0, 0}, {0.4, CLOCK_HANG, 0, 1}};
    GoodputPrediction p;
    CHECK(goodput_replay_draws(&m, d, 2, &p) == 0, "%s", myr_last_error());
    CHECK_CLOSE(p.wall_s, 19.5, 1e-12, 0, "wall");
    CHECK_CLOSE(p.up_s, 11.9, 1e-12, 0, "up");
    CHECK_CLOSE(p.lost_s, 1.9, 1e-12, 0, "lost");
    CHECK_CLOSE(p.down_s, 6.6, 1e-12, 0, "down");
    CHECK(p.faults == 2, "faults %g", p.faults);
    CHECK_CLOSE(p.effective, 8 / 19.5, 1e-12, 0, "effective");
    /* copies every 4 steps: a kill 6.5 s in (steps 1-6 done; step 4's copy committed with step 5):
     * resume after 4, lost 2.5 s; then the 6 steps left: wall 1 + 6.5 + 2 + 6 = 15.5 */
    m.copy_every = 4;
    /* (3.5 s in: no copy since the start, all 3.5 s lost) */
    CHECK(goodput_replay_draws(&m, d, 1, &p) == 0 && fabs(p.lost_s - 3.5) < 1e-12, "copy every 4, 3.5 s: lost %g", p.lost_s);
    ClockDraw late = {6.5, CLOCK_KILL, 0, 0};
    CHECK(goodput_replay_draws(&m, &late, 1, &p) == 0, "%s", myr_last_error());
    CHECK_CLOSE(p.lost_s, 2.5, 1e-12, 0, "lost, copy every 4");
    CHECK_CLOSE(p.wall_s, 15.5, 1e-12, 0, "wall, copy every 4");
    /* a fault drawn after the end never strikes; no faults: F + S tau */
    ClockDraw never = {10, CLOCK_KILL, 0, 0};
    CHECK(goodput_replay_draws(&m, &never, 1, &p) == 0 && p.faults == 0 && fabs(p.wall_s - 11) < 1e-12,
          "a fault at the end: %g faults, wall %g", p.faults, p.wall_s);
}

static void test_replay_mean_is_the_expectation(void) {
    /* tau 1 s, M 50 s, copies every step: over 2,000 seeds the replay's mean effective time and
     * fault count are within 3 standard errors of the expectation (the analytic model neglects
     * only the faults in an attempt's first step, which lose no whole step: ~2% of faults x 1 s) */
    GoodputModel m = model("kill+hang:50");
    m.steps = 300;
    GoodputPrediction e, r;
    CHECK(goodput_expect(&m, &e) == 0, "%s", myr_last_error());
    const int n = 2000;
    double s1 = 0, s2 = 0, f1 = 0;
    for (int seed = 1; seed <= n; seed++) {
        m.clock.seed = (uint64_t)seed;
        CHECK(goodput_replay(&m, &r) == 0, "%s", myr_last_error());
        s1 += r.effective, s2 += r.effective * r.effective, f1 += r.faults;
    }
    double mean = s1 / n, sd = sqrt(s2 / n - mean * mean), se = sd / sqrt(n);
    CHECK(fabs(mean - e.effective) < 3 * se, "replay mean %.5f, expectation %.5f (+- %.5f)", mean, e.effective, 3 * se);
    CHECK(fabs(sd - e.sigma) < 0.25 * e.sigma, "replay spread %.5f, predicted sigma %.5f", sd, e.sigma);
    CHECK(fabs(f1 / n - e.faults) < 3 * sqrt(e.faults / n), "faults: replay mean %.3f, expectation %.3f", f1 / n, e.faults);
}

int main(void) {
    RUN(test_clock_spec);
    RUN(test_clock_draws);
    RUN(test_clock_statistics);
    RUN(test_expectation_by_hand);
    RUN(test_replay_by_hand);
    RUN(test_replay_mean_is_the_expectation);
    return TEST_SUMMARY();
}
