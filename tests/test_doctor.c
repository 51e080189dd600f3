/* test_doctor.c: the doctor's verdicts and the pre-flight host choice on hand-computed cases:
 * per-rank checks against the median of the ranks, pair checks through each host's best peer,
 * latency (lower is better), the noise-raised limit, the baseline, cohorts too small to judge,
 * and which hosts `run --preflight` keeps, swaps or refuses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "launch/preflight.h"
#include "ops/doctor.h"
#include "test.h"

/* 3 hosts "h0".."h2", 2 ranks each (ranks 2h, 2h+1), thresholds 10%, no noise rule, no baseline */
static char names[3][DOCTOR_HOST_MAX] = {"h0", "h1", "h2"};
static int rank_host[6] = {0, 0, 1, 1, 2, 2};

static DoctorResults base(void) {
    DoctorResults r;
    memset(&r, 0, sizeof r);
    r.nhosts = 3, r.nranks = 6, r.hosts = names, r.rank_host = rank_host;
    for (int c = 0; c < CHK_N; c++) r.threshold[c] = 0.10;
    return r;
}

static int count_flags(const DoctorVerdict *v, DoctorCheck c, int host) {
    int n = 0;
    for (int i = 0; i < v->nflags; i++) n += v->flags[i].check == c && (host < 0 || v->flags[i].host == host);
    return n;
}

static const char *reason_of(const DoctorVerdict *v, DoctorCheck c, int host) {
    for (int i = 0; i < v->nflags; i++)
        if (v->flags[i].check == c && v->flags[i].host == host) return v->flags[i].reason;
    return "";
}

static void test_slow_rank_flags_its_host_only(void) {
    DoctorResults r = base();
    DoctorSample s[6] = {{0, -1, 100}, {1, -1, 102}, {2, -1, 98}, {3, -1, 101}, {4, -1, 60}, {5, -1, 99}};
    r.samples[CHK_GEMM] = s, r.nsamples[CHK_GEMM] = 6;
    DoctorVerdict v;
    CHECK(doctor_analyze(&r, &v) == 0, "analyze");
    CHECK_CLOSE(v.median[CHK_GEMM], 99.5, 0, 1e-12, "median of the six ranks");
    CHECK_CLOSE(v.host_value[CHK_GEMM][2], 60, 0, 1e-12, "a host's figure is its worst rank");
    CHECK(count_flags(&v, CHK_GEMM, -1) == 1 && count_flags(&v, CHK_GEMM, 2) == 1, "only h2 flagged (%d flags)", v.nflags);
    CHECK(!strcmp(reason_of(&v, CHK_GEMM, 2),
                  "GEMM rate of 1 of 2 ranks past the limit; worst rank 4: 40% below the median (60 vs 99.5 GFLOP/s)"),
          "reason: %s", reason_of(&v, CHK_GEMM, 2));
    CHECK_CLOSE(v.flags[0].deficit, 1 - 60 / 99.5, 1e-12, 0, "deficit");
    CHECK(doctor_host_flagged(&v, 2) && !doctor_host_flagged(&v, 0) && !doctor_host_flagged(&v, 1), "hosts");
    doctor_verdict_free(&v);
}

static void test_slow_link_found_through_best_peer(void) {
    /* pairs (0,1) fast; both pairs with h2 slow: the median of the PAIRS would be slow itself */
    DoctorResults r = base();
    DoctorSample bw[3] = {{0, 1, 1.0}, {0, 2, 0.1}, {1, 2, 0.1}}, lat[3] = {{0, 1, 10}, {0, 2, 5000}, {1, 2, 5000}};
    r.samples[CHK_P2P_BW] = bw, r.nsamples[CHK_P2P_BW] = 3;
    r.samples[CHK_P2P_LAT] = lat, r.nsamples[CHK_P2P_LAT] = 3;
    DoctorVerdict v;
    doctor_analyze(&r, &v);
    CHECK(v.host_value[CHK_P2P_BW][0] == 1.0 && v.host_value[CHK_P2P_BW][1] == 1.0 && v.host_value[CHK_P2P_BW][2] == 0.1,
          "best peers");
    CHECK_CLOSE(v.median[CHK_P2P_BW], 1.0, 0, 1e-12, "median of the hosts' best peers");
    CHECK(count_flags(&v, CHK_P2P_BW, -1) == 1 && count_flags(&v, CHK_P2P_BW, 2) == 1, "bandwidth: h2 only");
    CHECK(!strcmp(reason_of(&v, CHK_P2P_BW, 2), "p2p bandwidth to 2 of 2 peers at least 90% below the median (0.1 vs 1 GB/s)"),
          "reason: %s", reason_of(&v, CHK_P2P_BW, 2));
    CHECK(count_flags(&v, CHK_P2P_LAT, -1) == 1 && count_flags(&v, CHK_P2P_LAT, 2) == 1, "latency: h2 only");
    CHECK(!strcmp(reason_of(&v, CHK_P2P_LAT, 2), "p2p latency to 2 of 2 peers at least 500x the median (5e+03 vs 10 us)"),
          "reason: %s", reason_of(&v, CHK_P2P_LAT, 2));
    doctor_verdict_free(&v);
}

static void test_threshold_edges(void) {
    /* 10% below the median is not "more than 10%"; a per-check threshold moves the edge */
    DoctorResults r = base();
    DoctorSample s[3] = {{0, -1, 1.0}, {1, -1, 1.0}, {2, -1, 0.89}};
    r.samples[CHK_AR_INTRA] = s, r.nsamples[CHK_AR_INTRA] = 3;
    DoctorVerdict v;
    doctor_analyze(&r, &v);
    CHECK(count_flags(&v, CHK_AR_INTRA, 2) == 1, "11%% below is flagged");
    CHECK(!strcmp(reason_of(&v, CHK_AR_INTRA, 2), "intra-host all-reduce bus bandwidth 11% below the median (0.89 vs 1 GB/s)"),
          "reason: %s", reason_of(&v, CHK_AR_INTRA, 2));
    doctor_verdict_free(&v);
    s[2].value = 0.91;
    doctor_analyze(&r, &v);
    CHECK(v.nflags == 0, "9%% below is not flagged");
    doctor_verdict_free(&v);
    s[2].value = 0.75, r.threshold[CHK_AR_INTRA] = 0.30;
    doctor_analyze(&r, &v);
    CHECK(v.nflags == 0, "25%% below with a 30%% threshold is not flagged");
    doctor_verdict_free(&v);
}

static void test_noise_raises_the_limit(void) {
    /* every rank's typical repetition is half its best (noise factor 2): with k = 2 the limit is
     * a slowdown of 4 (75%), so a rank 40% below is not condemned; a rank 80% below still is */
    DoctorResults r = base();
    DoctorSample s[6] = {{0, -1, 100}, {1, -1, 102}, {2, -1, 98}, {3, -1, 101}, {4, -1, 60}, {5, -1, 99}};
    float raw[6 * 3];
    for (int i = 0; i < 6; i++) raw[3 * i] = (float)s[i].value, raw[3 * i + 1] = raw[3 * i + 2] = (float)(s[i].value / 2);
    r.samples[CHK_GEMM] = s, r.nsamples[CHK_GEMM] = 6, r.raw[CHK_GEMM] = raw, r.nraw[CHK_GEMM] = 3, r.noise_k = 2;
    DoctorVerdict v;
    doctor_analyze(&r, &v);
    CHECK_CLOSE(v.noise[CHK_GEMM], 2.0, 1e-6, 0, "noise factor");
    CHECK_CLOSE(v.effective[CHK_GEMM], 0.75, 1e-6, 0, "limit 1 - 1/2^2");
    CHECK(v.nflags == 0, "40%% below under that noise: no flag");
    doctor_verdict_free(&v);
    s[4].value = 19, raw[12] = 19, raw[13] = raw[14] = 9.5f;
    doctor_analyze(&r, &v);
    CHECK(count_flags(&v, CHK_GEMM, 2) == 1 && v.nflags == 1, "81%% below: flagged");
    doctor_verdict_free(&v);
    r.noise_k = 0; /* thresholds only */
    s[4].value = 60, raw[12] = 60, raw[13] = raw[14] = 30;
    doctor_analyze(&r, &v);
    CHECK(count_flags(&v, CHK_GEMM, 2) == 1, "k = 0: flagged");
    CHECK_CLOSE(v.effective[CHK_GEMM], 0.10, 1e-12, 0, "k = 0: the plain threshold");
    doctor_verdict_free(&v);
}

static void test_baseline_and_small_cohorts(void) {
    DoctorResults r = base();
    DoctorSample s[3] = {{0, -1, 1.0}, {1, -1, 1.0}, {2, -1, 1.0}};
    r.samples[CHK_AR_INTRA] = s, r.nsamples[CHK_AR_INTRA] = 3, r.baseline[CHK_AR_INTRA] = 2.0;
    DoctorVerdict v;
    doctor_analyze(&r, &v);
    CHECK(count_flags(&v, CHK_AR_INTRA, -1) == 3, "all three are half the baseline (%d flags)", v.nflags);
    CHECK(v.flags[0].vs_baseline && strstr(v.flags[0].reason, "50% below the baseline (1 vs 2 GB/s)"), "reason: %s",
          v.flags[0].reason);
    doctor_verdict_free(&v);
    /* two ranks: which one is slow cannot be told from the median of two */
    DoctorResults two = base();
    int rh[2] = {0, 1};
    two.nranks = 2, two.nhosts = 2, two.rank_host = rh;
    DoctorSample g[2] = {{0, -1, 100}, {1, -1, 50}};
    two.samples[CHK_GEMM] = g, two.nsamples[CHK_GEMM] = 2;
    doctor_analyze(&two, &v);
    CHECK(isnan(v.median[CHK_GEMM]) && v.nflags == 0, "no cohort verdict for two ranks");
    CHECK_CLOSE(v.reference[CHK_GEMM], 75, 0, 1e-12, "but a reference for a later --baseline (their median)");
    doctor_verdict_free(&v);
    two.baseline[CHK_GEMM] = 100;
    doctor_analyze(&two, &v);
    CHECK(v.nflags == 1 && v.flags[0].host == 1, "the baseline still judges them");
    doctor_verdict_free(&v);
}

static void test_preflight_choice(void) {
    int order[8], repl[8], nw = -1, ns = -1;
    int f1[4] = {0, 1, 0, 0}; /* working 0..2, spare 3; host 1 flagged */
    CHECK(preflight_choose(4, 1, f1, order, &nw, &ns, repl) == 0, "swap");
    CHECK(nw == 3 && ns == 0 && order[0] == 0 && order[1] == 3 && order[2] == 2, "spare 3 takes host 1's place");
    CHECK(repl[0] == -1 && repl[1] == 3 && repl[2] == -1, "replacements");
    int f2[4] = {0, 0, 1, 0}; /* a flagged spare is dropped, the healthy one kept */
    CHECK(preflight_choose(4, 2, f2, order, &nw, &ns, repl) == 0 && nw == 2 && ns == 1 && order[2] == 3, "flagged spare dropped");
    int f3[4] = {1, 0, 1, 0}; /* the first spare is flagged: the next one is used */
    CHECK(preflight_choose(4, 2, f3, order, &nw, &ns, repl) == 0 && order[0] == 3 && order[1] == 1 && ns == 0,
          "skips a flagged spare");
    int f4[3] = {1, 1, 0}; /* two flagged working hosts, one spare: refused */
    CHECK(preflight_choose(3, 1, f4, order, &nw, &ns, repl) == -1, "too few spares");
    int f5[3] = {0, 0, 0};
    CHECK(preflight_choose(3, 1, f5, order, &nw, &ns, repl) == 0 && nw == 2 && ns == 1 && order[2] == 2, "all healthy");
}

int main(void) {
    RUN(test_slow_rank_flags_its_host_only);
    RUN(test_slow_link_found_through_best_peer);
    RUN(test_threshold_edges);
    RUN(test_noise_raises_the_limit);
    RUN(test_baseline_and_small_cohorts);
    RUN(test_preflight_choice);
    return TEST_SUMMARY();
}
