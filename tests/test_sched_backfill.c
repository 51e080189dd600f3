/* test_sched_backfill.c: EASY backfill's promise, that backfilled jobs never delay the reserved
 * job. Two hand-computed timelines (the spare GPUs of a reservation are charged to every job
 * backfilled on them; a node that is down when the reservation is made comes back at its repair
 * time, so the reservation holds) and a randomized invariant: for whole-node gangs with exact
 * run-time estimates, every job starts no later than the first start time a reservation promised it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sim.h"
#include "test.h"

static Job *add(JobSet *js, double t, int ntasks, int g, double dur) {
    Job *j = jobset_add(js);
    j->submit = t, j->ntasks = ntasks, j->gpus_per_task = g, j->duration = j->est_duration = dur;
    j->priority = 1;
    return j;
}

static void run(Cluster *c, JobSet *js, const char *policy, SimConfig *cfg, Metrics *m) {
    Policy p;
    policy_builtin(&p, policy);
    for (int i = 0; i < js->n; i++) job_validate(&js->jobs[i], c, p.hot_spares);
    sim_run(c, js, &p, cfg, m);
}

/* One 8-GPU node. A (4 GPUs, 0-100) runs; B (6 GPUs) arrives at 1 and cannot start: reserved for
 * t=100 (A's end), when 8 GPUs will be free, 2 more than B needs. C and D (2 GPUs, 1000 s each)
 * arrive together at 2, in one scheduling pass: C takes the 2 spare GPUs (it runs past 100, but B
 * can do without them); D would take 2 that B needs, so it waits. Timeline: A 0-100, C 2-1002,
 * B 100-110, D 110-1110. (Without charging C against the spare GPUs, D starts at 2 and B waits
 * until 1002.) */
static void test_spare_gpus_are_charged(void) {
    Cluster c;
    cluster_generate(&c, 1, 8, "GPU", 128000, 1048576, 32, 8);
    JobSet js = {0};
    add(&js, 0, 1, 4, 100);  /* A */
    add(&js, 1, 1, 6, 10);   /* B */
    add(&js, 2, 1, 2, 1000); /* C */
    add(&js, 2, 1, 2, 1000); /* D */
    SimConfig cfg;
    sim_config_default(&cfg);
    Metrics m;
    run(&c, &js, "backfill", &cfg, &m);
    const Job *J = js.jobs;
    CHECK(J[0].first_start == 0 && J[0].finish == 100, "A 0-100: %g-%g", J[0].first_start, J[0].finish);
    CHECK(J[2].first_start == 2 && J[2].finish == 1002, "C backfilled on the spare GPUs 2-1002: %g-%g", J[2].first_start,
          J[2].finish);
    CHECK(J[1].first_start == 100 && J[1].finish == 110, "B starts at its reservation, 100-110: %g-%g", J[1].first_start,
          J[1].finish);
    CHECK(J[3].first_start == 110 && J[3].finish == 1110, "D waits for B, 110-1110: %g-%g", J[3].first_start, J[3].finish);
    jobset_free(&js);
    cluster_free(&c);
}

/* Four 8-GPU nodes. A (8 GPUs, 0-1000) runs on node 0; node 3 fails at t=10 and is repaired at
 * t=110. B (all 32 GPUs, 100 s) arrives at 20: it can start only when node 3 is back (110) and A
 * has ended (1000), so it is reserved for t=1000 with no spare GPU. C (8 GPUs, 5000 s) arrives at
 * 30 and fits now, but would hold node 1 or 2 past 1000: it waits. Timeline: B 1000-1100, C
 * 1100-6100; FIFO gives the same. (When the reservation ignored repairs, B's start could not be
 * computed while a node was down, C backfilled at 30 and B waited until 5030.) */
static void test_reservation_holds_while_a_node_is_down(void) {
    for (int bf = 0; bf < 2; bf++) {
        Cluster c;
        cluster_generate(&c, 4, 8, "GPU", 128000, 1048576, 32, 8);
        JobSet js = {0};
        add(&js, 0, 1, 8, 1000); /* A */
        add(&js, 20, 4, 8, 100); /* B */
        add(&js, 30, 1, 8, 5000); /* C */
        SimConfig cfg;
        sim_config_default(&cfg);
        cfg.repair_s = 100;
        double ft = 10;
        int fn = 3;
        cfg.fail_times = &ft, cfg.fail_nodes = &fn, cfg.nfail_script = 1;
        Metrics m;
        run(&c, &js, bf ? "backfill" : "fifo", &cfg, &m);
        const Job *J = js.jobs;
        CHECK(J[1].first_start == 1000 && J[1].finish == 1100, "%s: B 1000-1100, got %g-%g", bf ? "backfill" : "fifo",
              J[1].first_start, J[1].finish);
        CHECK(J[2].first_start == 1100 && J[2].finish == 6100, "%s: C 1100-6100, got %g-%g", bf ? "backfill" : "fifo",
              J[2].first_start, J[2].finish);
        CHECK(m.failures == 1 && J[0].restarts == 0, "one failure, of an idle node");
        jobset_free(&js);
        cluster_free(&c);
    }
}

/* ---- the randomized invariant ---- */
typedef struct {
    double *promised; /* the first reservation's start time of each job (INFINITY: none yet) */
    int violations, reservations;
    char first[200];
} Promises;

static void hook(void *ctx, int kind, const Job *j, const Job *by, double t) {
    Promises *p = ctx;
    if (kind == SIM_RESERVE) {
        if (isinf(p->promised[j->id])) p->promised[j->id] = t, p->reservations++;
    } else if (kind == SIM_START && t > p->promised[j->id] + 1e-9 && !p->violations++)
        snprintf(p->first, sizeof p->first, "job %d (%d x %d GPUs) started at %.3f, reserved for %.3f", j->id, j->ntasks,
                 j->gpus_per_task, t, p->promised[j->id]);
}

static uint64_t rs;
static double ur(void) {
    rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
    return (rs >> 11) * (1.0 / 9007199254740992.0);
}

static void test_backfill_never_delays_the_reserved_job(void) {
    int total_res = 0;
    for (int trial = 0; trial < 40; trial++) {
        rs = 1000 + trial;
        Cluster c;
        cluster_generate(&c, 16, 8, "GPU", 128000, 1048576, 32, 8); /* one leaf: no tier slowdown */
        JobSet js = {0};
        double t = 0;
        for (int i = 0; i < 300; i++) {
            int nodes = ur() < 0.6 ? 1 : ur() < 0.7 ? 2 + (int)(ur() * 3) : 5 + (int)(ur() * 12);
            add(&js, t, nodes, 8, 50 + floor(ur() * 2000));
            t += floor(ur() * 60);
        }
        Promises p = {malloc(sizeof(double) * js.n), 0, 0, ""};
        for (int i = 0; i < js.n; i++) p.promised[i] = INFINITY;
        SimConfig cfg;
        sim_config_default(&cfg);
        cfg.hook = hook, cfg.hook_ctx = &p;
        Metrics m;
        run(&c, &js, "backfill", &cfg, &m);
        CHECK(p.violations == 0, "trial %d: %d reserved jobs delayed, first: %s", trial, p.violations, p.first);
        CHECK(m.jobs_finished == js.n, "trial %d: %d of %d finished", trial, m.jobs_finished, js.n);
        total_res += p.reservations;
        free(p.promised);
        jobset_free(&js);
        cluster_free(&c);
    }
    CHECK(total_res > 1000, "the traces exercise reservations: %d", total_res);
    printf("# %d reservations over 40 traces\n", total_res);
}

int main(void) {
    RUN(test_spare_gpus_are_charged);
    RUN(test_reservation_holds_while_a_node_is_down);
    RUN(test_backfill_never_delays_the_reserved_job);
    return TEST_SUMMARY();
}
