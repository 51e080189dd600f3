/* test_schedule.c: pipeline schedules (src/parallel/schedule.c).
 * 1. For p = 4 stages and m = 8 micro-batches (v = 2 for interleaved), every stage's op list
 *    equals a reference written out by hand from the published schedules and the documented
 *    placement of sends and receives (docs/PIPELINE.md): GPipe (Huang et al. 2019: all forwards,
 *    then the backwards, last micro-batch first), 1F1B / PipeDream-Flush (Narayanan et al. 2021:
 *    p-1-s warm-up forwards, then one forward one backward, then the cool-down), interleaved 1F1B
 *    (Narayanan et al. SC'21, Megatron-LM: micro-batches in groups of p per chunk, warm-up
 *    2(p-1-s) + (v-1)p forwards).
 * 2. The executor runs all stages together: no deadlock (GPipe and 1F1B even with blocking
 *    send/recv), every recv meets its send; live activations on stage 0 are m for GPipe and p for
 *    1F1B; the simulated bubble equals (p-1)/(v*m + p-1). Lists broken on purpose are caught.
 * 3. Bad layouts and layer splits fail with one-line reasons. */
#include <stdlib.h>
#include <string.h>

#include "parallel/schedule.h"
#include "mpi_test.h"
#include "test.h"
#include "util/error.h"

/* Notation: F3/B3 forward/backward of micro-batch 3; sa/ra send/recv activation, sg/rg gradient;
 * with v > 1, ".c" is the model chunk on this stage. */
static const char *const GPIPE_P4_M8[4] = {
    "F0 sa0 F1 sa1 F2 sa2 F3 sa3 F4 sa4 F5 sa5 F6 sa6 F7 sa7 "
    "rg7 B7 rg6 B6 rg5 B5 rg4 B4 rg3 B3 rg2 B2 rg1 B1 rg0 B0",
    "ra0 F0 sa0 ra1 F1 sa1 ra2 F2 sa2 ra3 F3 sa3 ra4 F4 sa4 ra5 F5 sa5 ra6 F6 sa6 ra7 F7 sa7 "
    "rg7 B7 sg7 rg6 B6 sg6 rg5 B5 sg5 rg4 B4 sg4 rg3 B3 sg3 rg2 B2 sg2 rg1 B1 sg1 rg0 B0 sg0",
    "ra0 F0 sa0 ra1 F1 sa1 ra2 F2 sa2 ra3 F3 sa3 ra4 F4 sa4 ra5 F5 sa5 ra6 F6 sa6 ra7 F7 sa7 "
    "rg7 B7 sg7 rg6 B6 sg6 rg5 B5 sg5 rg4 B4 sg4 rg3 B3 sg3 rg2 B2 sg2 rg1 B1 sg1 rg0 B0 sg0",
    "ra0 F0 ra1 F1 ra2 F2 ra3 F3 ra4 F4 ra5 F5 ra6 F6 ra7 F7 "
    "B7 sg7 B6 sg6 B5 sg5 B4 sg4 B3 sg3 B2 sg2 B1 sg1 B0 sg0",
};

static const char *const ONEF1B_P4_M8[4] = {
    "F0 sa0 F1 sa1 F2 sa2 "                                       /* warm-up: 3 forwards */
    "F3 sa3 rg0 B0 F4 sa4 rg1 B1 F5 sa5 rg2 B2 F6 sa6 rg3 B3 F7 sa7 rg4 B4 " /* steady */
    "rg5 B5 rg6 B6 rg7 B7",                                       /* cool-down */
    "ra0 F0 sa0 ra1 F1 sa1 "
    "ra2 F2 sa2 rg0 B0 ra3 sg0 F3 sa3 rg1 B1 ra4 sg1 F4 sa4 rg2 B2 ra5 sg2 F5 sa5 rg3 B3 "
    "ra6 sg3 F6 sa6 rg4 B4 ra7 sg4 F7 sa7 rg5 B5 "
    "sg5 rg6 B6 sg6 rg7 B7 sg7",
    "ra0 F0 sa0 "
    "ra1 F1 sa1 rg0 B0 ra2 sg0 F2 sa2 rg1 B1 ra3 sg1 F3 sa3 rg2 B2 ra4 sg2 F4 sa4 rg3 B3 "
    "ra5 sg3 F5 sa5 rg4 B4 ra6 sg4 F6 sa6 rg5 B5 ra7 sg5 F7 sa7 rg6 B6 "
    "sg6 rg7 B7 sg7",
    "ra0 F0 B0 ra1 sg0 F1 B1 ra2 sg1 F2 B2 ra3 sg2 F3 B3 ra4 sg3 F4 B4 ra5 sg4 F5 B5 ra6 sg5 F6 B6 "
    "ra7 sg6 F7 B7 sg7",
};

/* v = 2: forwards run (mb.chunk) 0.0 1.0 2.0 3.0 0.1 1.1 2.1 3.1 4.0 5.0 6.0 7.0 4.1 5.1 6.1 7.1,
 * backwards 0.1 1.1 2.1 3.1 0.0 1.0 2.0 3.0 4.1 5.1 6.1 7.1 4.0 5.0 6.0 7.0; warm-up 10, 8, 6, 4.
 * Stage 0 chunk 1 receives from stage 3 and sends gradients back to it. */
static const char *const INTERLEAVED_P4_V2_M8[4] = {
    "F0.0 sa0.0 F1.0 sa1.0 F2.0 sa2.0 F3.0 sa3.0 ra0.1 F0.1 sa0.1 ra1.1 F1.1 sa1.1 ra2.1 F2.1 sa2.1 "
    "ra3.1 F3.1 sa3.1 F4.0 sa4.0 F5.0 sa5.0 "
    "F6.0 sa6.0 rg0.1 B0.1 sg0.1 F7.0 sa7.0 rg1.1 B1.1 ra4.1 sg1.1 F4.1 sa4.1 rg2.1 B2.1 "
    "ra5.1 sg2.1 F5.1 sa5.1 rg3.1 B3.1 ra6.1 sg3.1 F6.1 sa6.1 rg0.0 B0.0 ra7.1 F7.1 sa7.1 rg1.0 B1.0 "
    "rg2.0 B2.0 rg3.0 B3.0 rg4.1 B4.1 sg4.1 rg5.1 B5.1 sg5.1 rg6.1 B6.1 sg6.1 rg7.1 B7.1 sg7.1 "
    "rg4.0 B4.0 rg5.0 B5.0 rg6.0 B6.0 rg7.0 B7.0",
    "ra0.0 F0.0 sa0.0 ra1.0 F1.0 sa1.0 ra2.0 F2.0 sa2.0 ra3.0 F3.0 sa3.0 ra0.1 F0.1 sa0.1 "
    "ra1.1 F1.1 sa1.1 ra2.1 F2.1 sa2.1 ra3.1 F3.1 sa3.1 "
    "ra4.0 F4.0 sa4.0 rg0.1 B0.1 ra5.0 sg0.1 F5.0 sa5.0 rg1.1 B1.1 ra6.0 sg1.1 F6.0 sa6.0 rg2.1 B2.1 "
    "ra7.0 sg2.1 F7.0 sa7.0 rg3.1 B3.1 ra4.1 sg3.1 F4.1 sa4.1 rg0.0 B0.0 ra5.1 sg0.0 F5.1 sa5.1 "
    "rg1.0 B1.0 ra6.1 sg1.0 F6.1 sa6.1 rg2.0 B2.0 ra7.1 sg2.0 F7.1 sa7.1 rg3.0 B3.0 "
    "sg3.0 rg4.1 B4.1 sg4.1 rg5.1 B5.1 sg5.1 rg6.1 B6.1 sg6.1 rg7.1 B7.1 sg7.1 "
    "rg4.0 B4.0 sg4.0 rg5.0 B5.0 sg5.0 rg6.0 B6.0 sg6.0 rg7.0 B7.0 sg7.0",
    "ra0.0 F0.0 sa0.0 ra1.0 F1.0 sa1.0 ra2.0 F2.0 sa2.0 ra3.0 F3.0 sa3.0 ra0.1 F0.1 sa0.1 "
    "ra1.1 F1.1 sa1.1 "
    "ra2.1 F2.1 sa2.1 rg0.1 B0.1 ra3.1 sg0.1 F3.1 sa3.1 rg1.1 B1.1 ra4.0 sg1.1 F4.0 sa4.0 rg2.1 B2.1 "
    "ra5.0 sg2.1 F5.0 sa5.0 rg3.1 B3.1 ra6.0 sg3.1 F6.0 sa6.0 rg0.0 B0.0 ra7.0 sg0.0 F7.0 sa7.0 "
    "rg1.0 B1.0 ra4.1 sg1.0 F4.1 sa4.1 rg2.0 B2.0 ra5.1 sg2.0 F5.1 sa5.1 rg3.0 B3.0 "
    "ra6.1 sg3.0 F6.1 sa6.1 rg4.1 B4.1 ra7.1 sg4.1 F7.1 sa7.1 rg5.1 B5.1 "
    "sg5.1 rg6.1 B6.1 sg6.1 rg7.1 B7.1 sg7.1 rg4.0 B4.0 sg4.0 rg5.0 B5.0 sg5.0 rg6.0 B6.0 sg6.0 "
    "rg7.0 B7.0 sg7.0",
    "ra0.0 F0.0 sa0.0 ra1.0 F1.0 sa1.0 ra2.0 F2.0 sa2.0 ra3.0 F3.0 sa3.0 "
    "ra0.1 F0.1 B0.1 ra1.1 sg0.1 F1.1 B1.1 ra2.1 sg1.1 F2.1 B2.1 ra3.1 sg2.1 F3.1 B3.1 "
    "ra4.0 sg3.1 F4.0 sa4.0 rg0.0 B0.0 ra5.0 sg0.0 F5.0 sa5.0 rg1.0 B1.0 ra6.0 sg1.0 F6.0 sa6.0 "
    "rg2.0 B2.0 ra7.0 sg2.0 F7.0 sa7.0 rg3.0 B3.0 ra4.1 sg3.0 F4.1 B4.1 ra5.1 sg4.1 F5.1 B5.1 "
    "ra6.1 sg5.1 F6.1 B6.1 ra7.1 sg6.1 F7.1 B7.1 "
    "sg7.1 rg4.0 B4.0 sg4.0 rg5.0 B5.0 sg5.0 rg6.0 B6.0 sg6.0 rg7.0 B7.0 sg7.0",
};

/* Print the first differing op, to make a mismatch readable. */
static void check_stage(const Schedule *sc, int stage, const char *want) {
    char got[16384];
    CHECK(schedule_stage_str(sc, stage, got, sizeof got) == 0, "%s", myr_last_error());
    if (!strcmp(got, want)) return;
    size_t i = 0;
    while (got[i] && got[i] == want[i]) i++;
    while (i > 0 && got[i - 1] != ' ') i--;
    CHECK(0, "%s stage %d differs at \"%.40s\" (expected \"%.40s\")", schedule_name(sc->kind), stage, got + i,
          want + i);
}

static void check_schedule(ScheduleKind kind, int v, const char *const *want) {
    Schedule sc;
    CHECK(schedule_build(&sc, kind, 4, v, 8) == 0, "%s", myr_last_error());
    if (!sc.nops) return;
    for (int s = 0; s < 4; s++) check_stage(&sc, s, want[s]);
    /* peers: activations go to the next stage (around the ring), gradients to the previous one */
    for (int s = 0; s < 4; s++)
        for (int i = 0; i < sc.nops[s]; i++) {
            const ScheduleOp *op = &sc.ops[s][i];
            int want_peer = op->kind == OP_SEND_ACT || op->kind == OP_RECV_GRAD   ? (s + 1) % 4
                            : op->kind == OP_RECV_ACT || op->kind == OP_SEND_GRAD ? (s + 3) % 4
                                                                                  : -1;
            CHECK(op->peer == want_peer, "stage %d op %d: peer %d, want %d", s, i, op->peer, want_peer);
        }
    schedule_free(&sc);
}

static void test_gpipe_reference_order(void) { check_schedule(SCHEDULE_GPIPE, 1, GPIPE_P4_M8); }
static void test_1f1b_reference_order(void) { check_schedule(SCHEDULE_1F1B, 1, ONEF1B_P4_M8); }
static void test_interleaved_reference_order(void) {
    check_schedule(SCHEDULE_INTERLEAVED, 2, INTERLEAVED_P4_V2_M8);
}

/* Executing all stages together. Forward 1, backward 2 time units per whole stage. Hand values:
 * GPipe and 1F1B take (m + p - 1)(tf + tb) = 11 * 3 = 33; interleaved m(tf + tb) + (p-1)(tf + tb)/v
 * = 24 + 4.5 = 28.5 (Narayanan et al. SC'21, section 2.2.2); messages 2m(pv - 1). */
static void test_simulated_p4_m8(void) {
    struct {
        ScheduleKind kind;
        int v, peak, msgs;
        double makespan, bubble;
    } cases[] = {
        {SCHEDULE_GPIPE, 1, 8, 48, 33, 3.0 / 11},       /* all 8 micro-batches alive before the backwards */
        {SCHEDULE_1F1B, 1, 4, 48, 33, 3.0 / 11},        /* p-1 warm-up + 1 */
        {SCHEDULE_INTERLEAVED, 2, 11, 112, 28.5, 3.0 / 19}, /* 10 warm-up chunk forwards + 1 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Schedule sc;
        ScheduleSimResult r;
        CHECK(schedule_build(&sc, cases[i].kind, 4, cases[i].v, 8) == 0, "%s", myr_last_error());
        CHECK(schedule_simulate(&sc, 1, 2, 0, &r) == 0, "%s", myr_last_error());
        CHECK(r.peak_live_chunks0 == cases[i].peak, "%s: %d live on stage 0, want %d", schedule_name(cases[i].kind),
              r.peak_live_chunks0, cases[i].peak);
        CHECK(r.messages == cases[i].msgs, "%s: %d messages", schedule_name(cases[i].kind), r.messages);
        CHECK_CLOSE(r.makespan, cases[i].makespan, 1e-12, 0, "makespan");
        CHECK_CLOSE(r.bubble, cases[i].bubble, 1e-12, 0, "simulated bubble");
        CHECK_CLOSE(r.bubble_analytic, cases[i].bubble, 1e-12, 0, "analytic bubble");
        printf("  %-11s p 4 m 8 v %d: makespan %.1f, bubble %.4f (analytic %.4f), stage 0 holds %d chunk "
               "activations (%.1f micro-batches)\n", schedule_name(cases[i].kind), cases[i].v, r.makespan, r.bubble,
               r.bubble_analytic, r.peak_live_chunks0, r.peak_live_mb0);
        /* blocking send/recv: GPipe and 1F1B are safe; the interleaved ring is not (documented) */
        int rc = schedule_simulate(&sc, 1, 2, 1, &r);
        if (cases[i].kind == SCHEDULE_INTERLEAVED)
            CHECK(rc == -1 && strstr(myr_last_error(), "deadlock"), "interleaved with blocking send/recv: %s",
                  rc ? myr_last_error() : "completed");
        else
            CHECK(rc == 0 && r.makespan == cases[i].makespan, "%s with blocking send/recv: %s",
                  schedule_name(cases[i].kind), myr_last_error());
        schedule_free(&sc);
    }
}

/* Many shapes: never a deadlock, the bubble equals (p-1)/(v*m + p-1), stage 0 holds m (GPipe)
 * or at most p (1F1B) micro-batches. */
static void test_simulated_sweep(void) {
    for (int p = 1; p <= 6; p++)
        for (int m = p; m <= 3 * p + 1; m++)
            for (int kind = 0; kind < 3; kind++)
                for (int v = 1; v <= 3; v++) {
                    if ((kind == SCHEDULE_INTERLEAVED) != (v > 1)) continue;
                    if (kind == SCHEDULE_INTERLEAVED && (p < 2 || m % p)) continue;
                    Schedule sc;
                    ScheduleSimResult r;
                    CHECK(schedule_build(&sc, kind, p, v, m) == 0, "%s", myr_last_error());
                    if (!sc.nops) continue;
                    for (int rv = 0; rv < (kind == SCHEDULE_INTERLEAVED ? 1 : 2); rv++) {
                        int rc = schedule_simulate(&sc, 1, 2, rv, &r);
                        CHECK(rc == 0, "p %d m %d v %d: %s", p, m, v, myr_last_error());
                        if (rc) continue;
                        double want = (double)(p - 1) / (v * m + p - 1);
                        CHECK_CLOSE(r.bubble, want, 1e-9, 1e-12, "bubble");
                        if (kind == SCHEDULE_GPIPE) CHECK(r.peak_live_chunks0 == m, "gpipe p %d m %d", p, m);
                        if (kind == SCHEDULE_1F1B)
                            CHECK(r.peak_live_chunks0 == p, "1f1b p %d m %d: %d live", p, m, r.peak_live_chunks0);
                    }
                    schedule_free(&sc);
                }
}

/* The executor is a real check: lists broken on purpose fail, each with its reason. */
static void swap_ops(Schedule *sc, int s, int i) {
    ScheduleOp t = sc->ops[s][i];
    sc->ops[s][i] = sc->ops[s][i + 1], sc->ops[s][i + 1] = t;
}
static void test_broken_lists_are_caught(void) {
    Schedule sc;
    ScheduleSimResult r;
    CHECK(schedule_build(&sc, SCHEDULE_1F1B, 4, 1, 8) == 0, "%s", myr_last_error());
    swap_ops(&sc, 1, 0); /* stage 1: F0 before ra0 */
    CHECK(schedule_simulate(&sc, 1, 2, 0, &r) == -1 && strstr(myr_last_error(), "stage 1, op 0 (F0): forward before its input"),
          "%s", myr_last_error());
    swap_ops(&sc, 1, 0);
    /* stage 1 "ra3 sg0" -> "sg0 ra3": fine with nonblocking sends, a deadlock with blocking ones */
    CHECK(sc.ops[1][11].kind == OP_RECV_ACT && sc.ops[1][12].kind == OP_SEND_GRAD, "op 11, 12 of stage 1");
    swap_ops(&sc, 1, 11);
    CHECK(schedule_simulate(&sc, 1, 2, 0, &r) == 0, "%s", myr_last_error());
    CHECK(schedule_simulate(&sc, 1, 2, 1, &r) == -1 && strstr(myr_last_error(), "deadlock"), "%s", myr_last_error());
    swap_ops(&sc, 1, 11);
    /* a send that goes missing: stage 1 waits for it forever */
    ScheduleOp saved = sc.ops[0][5];
    CHECK(saved.kind == OP_SEND_ACT && saved.mb == 2, "op 5 of stage 0 is sa2");
    memmove(&sc.ops[0][5], &sc.ops[0][6], sizeof(ScheduleOp) * (size_t)(sc.nops[0] - 6));
    sc.nops[0]--;
    CHECK(schedule_simulate(&sc, 1, 2, 0, &r) == -1 && strstr(myr_last_error(), "deadlock with nonblocking sends: stage 0 at op 7 (rg0), stage 1 at op 6 (ra2), stage 2 at op 8 (ra2), stage 3 at op 7 (ra2)"),
          "%s", myr_last_error());
    memmove(&sc.ops[0][6], &sc.ops[0][5], sizeof(ScheduleOp) * (size_t)(sc.nops[0] - 5));
    sc.ops[0][5] = saved, sc.nops[0]++;
    /* the wrong peer */
    sc.ops[2][0].peer = 3;
    CHECK(schedule_simulate(&sc, 1, 2, 0, &r) == -1 && strstr(myr_last_error(), "wrong peer"), "%s", myr_last_error());
    sc.ops[2][0].peer = 1;
    CHECK(schedule_simulate(&sc, 1, 2, 0, &r) == 0, "restored: %s", myr_last_error());
    schedule_free(&sc);
}

/* schedule_build_blocking: same computes in the same order on every stage, transfers moved so
 * that blocking send/recv cannot deadlock, for every schedule (interleaved included). */
static void test_blocking_lists(void) {
    for (int p = 1; p <= 6; p++)
        for (int m = 1; m <= 3 * p + 1; m++)
            for (int kind = 0; kind < 3; kind++)
                for (int v = 1; v <= 3; v++) {
                    if (schedule_validate(kind, p, v, m) < 0) continue;
                    Schedule a, b;
                    ScheduleSimResult ra, rb;
                    CHECK(schedule_build(&a, kind, p, v, m) == 0, "%s", myr_last_error());
                    CHECK(schedule_build_blocking(&b, kind, p, v, m, 1, 2) == 0, "%s", myr_last_error());
                    if (!a.nops || !b.nops) continue;
                    CHECK(b.blocking_safe, "flag");
                    for (int s = 0; s < p; s++) {
                        CHECK(a.nops[s] == b.nops[s], "p %d m %d v %d stage %d: op count", p, m, v, s);
                        for (int i = 0, j = 0; i < a.nops[s] && j < b.nops[s]; i++, j++) {
                            while (i < a.nops[s] && a.ops[s][i].kind > OP_BACKWARD) i++;
                            while (j < b.nops[s] && b.ops[s][j].kind > OP_BACKWARD) j++;
                            if (i < a.nops[s] && j < b.nops[s])
                                CHECK(!memcmp(&a.ops[s][i], &b.ops[s][j], sizeof(ScheduleOp)), "compute order changed");
                        }
                    }
                    CHECK(schedule_simulate(&b, 1, 2, 1, &rb) == 0, "p %d m %d v %d blocking: %s", p, m, v,
                          myr_last_error());
                    CHECK(schedule_simulate(&a, 1, 2, 0, &ra) == 0, "%s", myr_last_error());
                    CHECK(rb.makespan >= ra.makespan - 1e-9, "cannot beat the nonblocking run");
                    if (p == 4 && m == 8 && v == 2)
                        printf("  interleaved p 4 m 8 v 2, blocking lists: makespan %.1f (nonblocking %.1f), "
                               "bubble %.4f\n", rb.makespan, ra.makespan, rb.bubble);
                    schedule_free(&a);
                    schedule_free(&b);
                }
}

static void expect_error(int rc, const char *want) {
    CHECK(rc == -1, "expected a failure: %s", want);
    CHECK(!strcmp(myr_last_error(), want), "message\n   got: %s\n  want: %s", myr_last_error(), want);
}

static void test_bad_layouts(void) {
    expect_error(schedule_validate(SCHEDULE_1F1B, 4, 1, 3),
                 "the 1f1b schedule needs at least pp = 4 micro-batches per step, got 3 (use more micro-batches or "
                 "the gpipe schedule)");
    expect_error(schedule_validate(SCHEDULE_1F1B, 2, 2, 8),
                 "vpp 2 needs the interleaved schedule (--schedule interleaved), not 1f1b");
    expect_error(schedule_validate(SCHEDULE_GPIPE, 2, 2, 8),
                 "vpp 2 needs the interleaved schedule (--schedule interleaved), not gpipe");
    expect_error(schedule_validate(SCHEDULE_INTERLEAVED, 4, 2, 6),
                 "the interleaved schedule needs the micro-batches (6) to be a multiple of pp 4");
    expect_error(schedule_validate(SCHEDULE_INTERLEAVED, 4, 1, 8),
                 "the interleaved schedule needs vpp >= 2 model chunks per stage, got 1 (with one chunk use 1f1b)");
    expect_error(schedule_validate(SCHEDULE_INTERLEAVED, 1, 2, 8), "the interleaved schedule needs pp >= 2, got pp 1");
    expect_error(schedule_validate(SCHEDULE_GPIPE, 0, 1, 8), "pp is 0; it must be at least 1");
    expect_error(schedule_validate(SCHEDULE_GPIPE, 2, 1, 0), "0 micro-batches; a step needs at least 1");
    ScheduleKind k;
    expect_error(schedule_parse("zb-v", &k), "unknown pipeline schedule 'zb-v'; use gpipe, 1f1b or interleaved");
    CHECK(schedule_parse("interleaved", &k) == 0 && k == SCHEDULE_INTERLEAVED, "parse");
    CHECK(schedule_validate(SCHEDULE_GPIPE, 4, 1, 3) == 0, "gpipe takes fewer micro-batches than stages");
    Schedule sc;
    expect_error(schedule_build(&sc, SCHEDULE_1F1B, 4, 1, 2),
                 "the 1f1b schedule needs at least pp = 4 micro-batches per step, got 2 (use more micro-batches or "
                 "the gpipe schedule)");
}

static void test_stage_layers(void) {
    int start[8], count[8];
    /* 16 layers, pp 4, vpp 2: 2 layers per virtual stage k = chunk*4 + rank, in order */
    CHECK(schedule_stage_layers(16, 4, 2, NULL, 0, start, count) == 0, "%s", myr_last_error());
    const int want_start[8] = {0, 2, 4, 6, 8, 10, 12, 14};
    for (int k = 0; k < 8; k++) CHECK(start[k] == want_start[k] && count[k] == 2, "virtual stage %d", k);
    /* rank 1 holds layers 2-3 (chunk 0) and 10-11 (chunk 1) */
    CHECK(start[0 * 4 + 1] == 2 && start[1 * 4 + 1] == 10, "rank 1's chunks");
    const int uneven[4] = {3, 4, 4, 2};
    CHECK(schedule_stage_layers(13, 4, 1, uneven, 4, start, count) == 0, "%s", myr_last_error());
    CHECK(start[0] == 0 && start[1] == 3 && start[2] == 7 && start[3] == 11 && count[3] == 2, "explicit split");
    expect_error(schedule_stage_layers(12, 4, 2, NULL, 0, start, count),
                 "12 layers are not divisible by pp 4 x vpp 2 = 8 (change the layout or give --stage-layers)");
    expect_error(schedule_stage_layers(14, 4, 1, uneven, 4, start, count),
                 "--stage-layers adds up to 13 layers but the model has 14");
    expect_error(schedule_stage_layers(13, 2, 1, uneven, 4, start, count),
                 "--stage-layers lists 4 stages; pp 2 x vpp 1 needs 2");
    const int zero[2] = {4, 0};
    expect_error(schedule_stage_layers(4, 2, 1, zero, 2, start, count),
                 "--stage-layers gives virtual stage 1 0 layers; each needs at least 1");
}

/* ------------------------------------------------------------------ under mpirun -np 4 */
#include <mpi.h>

#include "parallel/schedule_run.h"
#include "trace/trace.h"

/* A toy model run over real send/recv: virtual stage k adds k+1 in forward (the input of
 * micro-batch mb is mb*1000 + i) and doubles the gradient in backward (the last stage's output
 * gradient is its output). Every receive checks the values it got against these formulas, so a
 * message matched to the wrong op is caught. Messages of 128 KiB are above Open MPI's eager
 * limit, so a send waits for its receive (blocking semantics are really exercised). */
#define TOY_N 32768
typedef struct {
    const Schedule *sc;
    int stage, bad;
    float *act_in, *act_out, *grad_in, *grad_out; /* [mb][chunk][TOY_N] */
} Toy;

static float *toy_at(Toy *t, float *base, int mb, int chunk) {
    return base + ((size_t)mb * t->sc->vpp + chunk) * TOY_N;
}
static int toy_k(Toy *t, int chunk) { return chunk * t->sc->pp + t->stage; }

static int toy_forward(void *ctx, int mb, int chunk) {
    Toy *t = ctx;
    int k = toy_k(t, chunk);
    float *in = toy_at(t, t->act_in, mb, chunk), *out = toy_at(t, t->act_out, mb, chunk);
    if (k == 0)
        for (int i = 0; i < TOY_N; i++) in[i] = (float)(mb * 1000 + i);
    for (int i = 0; i < TOY_N; i++) out[i] = in[i] + (float)(k + 1);
    return 0;
}
static int toy_backward(void *ctx, int mb, int chunk) {
    Toy *t = ctx;
    int k = toy_k(t, chunk), V = t->sc->pp * t->sc->vpp;
    float *gout = toy_at(t, t->grad_out, mb, chunk), *gin = toy_at(t, t->grad_in, mb, chunk);
    if (k == V - 1) memcpy(gout, toy_at(t, t->act_out, mb, chunk), sizeof(float) * TOY_N);
    for (int i = 0; i < TOY_N; i++) gin[i] = gout[i] * 2;
    if (k == 0) { /* the gradient that reached the first layer: (input + V(V+1)/2) * 2^V */
        for (int i = 0; i < TOY_N; i++)
            if (gin[i] != (float)((mb * 1000 + i + V * (V + 1) / 2) * (double)(1 << V))) { t->bad++; break; }
    }
    return 0;
}
static float *toy_buffer(void *ctx, const ScheduleOp *op, size_t *count) {
    Toy *t = ctx;
    *count = TOY_N;
    switch (op->kind) {
    case OP_SEND_ACT: return toy_at(t, t->act_out, op->mb, op->chunk);
    case OP_RECV_ACT: return toy_at(t, t->act_in, op->mb, op->chunk);
    case OP_SEND_GRAD: return toy_at(t, t->grad_in, op->mb, op->chunk);
    case OP_RECV_GRAD: return toy_at(t, t->grad_out, op->mb, op->chunk);
    default: return NULL;
    }
}
/* After the run: every received activation and gradient holds what the formulas say. */
static void toy_check(Toy *t) {
    int V = t->sc->pp * t->sc->vpp;
    for (int mb = 0; mb < t->sc->micro; mb++)
        for (int c = 0; c < t->sc->vpp; c++) {
            int k = toy_k(t, c);
            float *in = toy_at(t, t->act_in, mb, c), *gout = toy_at(t, t->grad_out, mb, c);
            for (int i = 0; i < TOY_N; i += 97) {
                CHECK(in[i] == (float)(mb * 1000 + i + k * (k + 1) / 2), "stage %d mb %d chunk %d: activation %g",
                      t->stage, mb, c, in[i]);
                double g = (mb * 1000 + i + V * (V + 1) / 2) * (double)(1 << (V - 1 - k));
                CHECK(gout[i] == (float)g, "stage %d mb %d chunk %d: gradient %g, want %g", t->stage, mb, c, gout[i], g);
            }
        }
    CHECK(t->bad == 0, "stage %d: first-layer gradients wrong", t->stage);
}

static int me;
static const char *trace_path;

/* blocking: 0 nonblocking sends, 1 blocking, 2 blocking with schedule_build_blocking's lists */
static void run_toy(ScheduleKind kind, int v, int blocking, const char *trace_file) {
    Schedule sc;
    if (blocking == 2) CHECK(schedule_build_blocking(&sc, kind, 4, v, 8, 1, 2) == 0, "%s", myr_last_error());
    else CHECK(schedule_build(&sc, kind, 4, v, 8) == 0, "%s", myr_last_error());
    size_t cells = (size_t)8 * v * TOY_N;
    Toy t = {.sc = &sc, .stage = me};
    t.act_in = calloc(cells * 4, sizeof(float));
    t.act_out = t.act_in + cells, t.grad_in = t.act_in + 2 * cells, t.grad_out = t.act_in + 3 * cells;
    ScheduleHooks h = {toy_forward, toy_backward, toy_buffer};
    TraceBuffer tb;
    trace_init(&tb, me);
    CHECK(trace_sync_origin(&tb, comm_world()) == 0, "%s", myr_last_error());
    int rc = schedule_run_stage(&sc, me, comm_world(), &h, &t, blocking != 0, trace_file ? &tb : NULL);
    CHECK(rc == 0, "%s", myr_last_error());
    if (rc == 0) toy_check(&t);
    if (trace_file) {
        CHECK(tb.n == (size_t)sc.nops[me], "one event per op: %zu vs %d", tb.n, sc.nops[me]);
        CHECK(trace_write_gathered(comm_world(), &tb, trace_file) == 0, "%s", myr_last_error());
    }
    trace_free(&tb);
    free(t.act_in);
    schedule_free(&sc);
}

static void test_gpipe_blocking_np4(void) { run_toy(SCHEDULE_GPIPE, 1, 1, NULL); }
static void test_1f1b_blocking_np4(void) { run_toy(SCHEDULE_1F1B, 1, 1, trace_path); }
static void test_1f1b_nonblocking_np4(void) { run_toy(SCHEDULE_1F1B, 1, 0, NULL); }
static void test_interleaved_nonblocking_np4(void) {
    run_toy(SCHEDULE_INTERLEAVED, 2, 0, NULL);
    run_toy(SCHEDULE_INTERLEAVED, 2, 2, NULL); /* lists from schedule_build_blocking, blocking sends */
    /* blocking sends would deadlock on the ring: refused before any transfer */
    Schedule sc;
    ScheduleHooks h = {toy_forward, toy_backward, toy_buffer};
    CHECK(schedule_build(&sc, SCHEDULE_INTERLEAVED, 4, 2, 8) == 0, "%s", myr_last_error());
    CHECK(schedule_run_stage(&sc, me, comm_world(), &h, NULL, 1, NULL) == -1 &&
              strstr(myr_last_error(), "need nonblocking sends"), "%s", myr_last_error());
    schedule_free(&sc);
}

#define MRUN(fn) MPI_RUN(fn, "")

int main(int argc, char **argv) {
    if (getenv("OMPI_COMM_WORLD_SIZE")) {
        CommOptions opt = comm_default_options();
        opt.timeout_s = 30;
        if (comm_init(&argc, &argv, &opt) < 0) myr_die_last();
        me = comm_rank(comm_world());
        if (comm_size(comm_world()) != 4) myr_die("test_schedule: run it on 4 ranks");
        trace_path = argc > 1 ? argv[1] : NULL;
        MRUN(test_gpipe_blocking_np4);
        MRUN(test_1f1b_blocking_np4);
        MRUN(test_1f1b_nonblocking_np4);
        MRUN(test_interleaved_nonblocking_np4);
        if (comm_finalize() < 0) myr_die_last();
        return TEST_SUMMARY();
    }
    RUN(test_gpipe_reference_order);
    RUN(test_1f1b_reference_order);
    RUN(test_interleaved_reference_order);
    RUN(test_simulated_p4_m8);
    RUN(test_simulated_sweep);
    RUN(test_broken_lists_are_caught);
    RUN(test_blocking_lists);
    RUN(test_bad_layouts);
    RUN(test_stage_layers);
    return TEST_SUMMARY();
}
