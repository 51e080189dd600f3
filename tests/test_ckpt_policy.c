/* test_ckpt_policy.c: --save-every auto / --mem-ckpt-every auto (src/train/ckpt_policy.c) against
 * hand-computed Young/Daly intervals: Daly (2006) tau = sqrt(2 d M) (1 + sqrt(d/2M)/3 + d/18M) - d,
 * so for a 2 s save stall and M = 1000 s, tau = 61.919 s (124 steps of 0.5 s, 248 of 0.25 s); the
 * first choice from estimates, the re-choice from measurements (averaged per save, not per step),
 * the hysteresis that keeps an interval within 20% of the new optimum, the MTBF's sources
 * (--mtbf, what myriad run observed, Llama 3's rates), and duration parsing. */
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "test.h"
#include "train/ckpt_policy.h"

static void test_daly_by_hand(void) {
    CHECK_CLOSE(sim_daly_interval(2, 1000), 61.91924715, 1e-8, 0, "daly 2 s / 1000 s");
    CHECK_CLOSE(sim_daly_interval(0.5, 1000), 31.29032168, 1e-8, 0, "daly 0.5 s / 1000 s");
    CHECK_CLOSE(sim_daly_interval(3000, 1000), 1000, 0, 0, "a save longer than 2 MTBF: the MTBF");
}

static void test_first_choice_from_estimates(void) {
    unsetenv("MYRIAD_MTBF_S");
    CkptPolicy p;
    int save = -2, mem = -2;
    /* disk: 8 GB sync at the 1 GB/s estimate = 8 s; mem: 4 GB at 8 GB/s = 0.5 s; step 0.5 s; M 1000 s */
    ckpt_policy_init(&p, 1, 1, 1000, 8e9, 4e9, 0, 4, 100000, 0.5, &save, &mem);
    double tau_disk = sim_daly_interval(8, 1000), tau_mem = sim_daly_interval(0.5, 1000);
    CHECK_CLOSE(tau_mem, 31.29032168, 1e-8, 0, "tau mem");
    CHECK(save == (int)round(tau_disk / 0.5), "save every %d, want %d", save, (int)round(tau_disk / 0.5));
    CHECK(mem == 63, "mem every %d, want 63 (31.29 s / 0.5 s)", mem);
    CHECK(p.mtbf_s == 1000 && !strcmp(p.mtbf_source, "--mtbf"), "mtbf %g from %s", p.mtbf_s, p.mtbf_source);
    char line[700];
    ckpt_policy_describe(&p, line, sizeof line);
    CHECK(strstr(line, "Young/Daly") && strstr(line, "--save-every auto") && strstr(line, "estimated"), "%s", line);
    /* a cheap save is first made no more often than every POLICY_EVERY steps (until measured) */
    ckpt_policy_init(&p, 1, 0, 1000, 1e3, 0, 1, 4, 100000, 0.5, &save, &mem);
    CHECK(save == POLICY_EVERY, "cheap save every %d before measuring", save);
    CHECK(mem == 63, "mem untouched when not auto: %d", mem);
}

static void test_rechoice_from_measurements(void) {
    CkptPolicy p;
    int save = 0, mem = 0;
    ckpt_policy_init(&p, 1, 0, 1000, 8e9, 0, 0, 4, 100000, 0.5, &save, &mem);
    /* ten steps of 0.25 s, two saves of 2 s each among them: per save 2 s, per step 0.25 s */
    for (int i = 0; i < 10; i++) ckpt_policy_measure(&p, 0.25, i % 5 == 4 ? 2 : 0, i % 5 == 4, 0, 0);
    CHECK(ckpt_policy_update(&p, NULL, 9, &save, &mem) == 0, "no re-choice off the POLICY_EVERY grid");
    CHECK(ckpt_policy_update(&p, NULL, 10, &save, &mem) == 1, "re-chosen at step 10");
    CHECK(save == 248, "save every %d, want 248 (61.92 s / 0.25 s)", save);
    CHECK(p.disk_measured && p.step_measured, "measured");
    /* 10% slower steps: within the 20% hysteresis, the interval stays */
    for (int i = 0; i < 10; i++) ckpt_policy_measure(&p, 0.3, 0, 0, 0, 0);
    int before = save;
    ckpt_policy_update(&p, NULL, 20, &save, &mem);
    CHECK(save == before, "kept at %d within the hysteresis (now %d)", before, save);
    /* steps 4x slower: re-chosen (blend 0.5 x 0.275 + 0.5 x 1.0 = 0.6375 s -> 97 steps) */
    for (int i = 0; i < 10; i++) ckpt_policy_measure(&p, 1.0, 0, 0, 0, 0);
    CHECK(ckpt_policy_update(&p, NULL, 30, &save, &mem) == 1, "re-chosen when the steps slow down");
    CHECK(save == (int)round(61.91924715 / p.step_s), "save every %d, step %g", save, p.step_s);
    CHECK(save < before / 2, "fewer steps between saves: %d (was %d)", save, before);
}

static void test_mtbf_sources(void) {
    CkptPolicy p;
    int save = 0, mem = 0;
    setenv("MYRIAD_MTBF_S", "120", 1);
    setenv("MYRIAD_FAILURES", "3", 1);
    ckpt_policy_init(&p, 1, 0, 0, 1e9, 0, 1, 4, 1000, 0.1, &save, &mem);
    CHECK(p.mtbf_s == 120 && strstr(p.mtbf_source, "observed") && strstr(p.mtbf_source, "3 failures"), "%g %s", p.mtbf_s,
          p.mtbf_source);
    ckpt_policy_init(&p, 1, 0, 60, 1e9, 0, 1, 4, 1000, 0.1, &save, &mem);
    CHECK(p.mtbf_s == 60, "--mtbf wins over the observed: %g", p.mtbf_s);
    unsetenv("MYRIAD_MTBF_S");
    unsetenv("MYRIAD_FAILURES");
    ckpt_policy_init(&p, 1, 0, 0, 1e9, 0, 1, 16384, 1000, 0.1, &save, &mem);
    FailureRates f;
    sim_failure_rates_default(&f);
    CHECK_CLOSE(p.mtbf_s, sim_job_mtbf_hours(&f, 16384) * 3600, 1e-12, 0, "Llama 3 rates");
    /* 419 interruptions in 54 days on 16,384 GPUs: one every ~3.09 h */
    CHECK_CLOSE(p.mtbf_s / 3600, 54.0 * 24 / 419, 1e-9, 0, "Llama 3's MTBF at 16,384 GPUs");
}

static void test_parse_duration(void) {
    CHECK(ckpt_policy_parse_duration("3600") == 3600, "plain seconds");
    CHECK(ckpt_policy_parse_duration("90m") == 5400, "minutes");
    CHECK(ckpt_policy_parse_duration("2h") == 7200, "hours");
    CHECK(ckpt_policy_parse_duration("1.5d") == 129600, "days");
    CHECK(ckpt_policy_parse_duration("30s") == 30, "s");
    CHECK(ckpt_policy_parse_duration("0") < 0 && ckpt_policy_parse_duration("-5") < 0, "non-positive refused");
    CHECK(ckpt_policy_parse_duration("2x") < 0 && ckpt_policy_parse_duration("") < 0 && ckpt_policy_parse_duration("h") < 0,
          "junk refused");
    CHECK(ckpt_policy_parse_duration("inf") < 0 && ckpt_policy_parse_duration("nan") < 0, "non-finite refused");
}

int main(void) {
    RUN(test_daly_by_hand);
    RUN(test_first_choice_from_estimates);
    RUN(test_rechoice_from_measurements);
    RUN(test_mtbf_sources);
    RUN(test_parse_duration);
    return TEST_SUMMARY();
}
