/* test_sched.c: hand-computed cases for the scheduler: placement under each rule on small clusters,
 * topology constraints, GPU sharing and FGD, EASY backfill and preemption timelines, launch-file
 * rank layout, and bad input (malformed trace rows, impossible jobs, bad policies). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched/placement.h"
#include "sched/place.h"
#include "sched/sim.h"
#include "sched/trace.h"
#include "test.h"
#include "util/error.h"

/* 4 nodes x 8 GPUs; leaves {0,1} and {2,3}, each leaf its own spine. */
static void four_nodes(Cluster *c) {
    cluster_generate(c, 4, 8, "H100", 128000, 1048576, 2, 1);
}

static void occupy(Cluster *c, int node, int gpus) {
    uint16_t m = (uint16_t)((1u << gpus) - 1);
    cluster_take(c, node, m, -1, 1000, 0, 0);
}

static Job mkjob(int ntasks, int g) {
    Job j;
    memset(&j, 0, sizeof j);
    j.ntasks = ntasks, j.gpus_per_task = g, j.gpu_milli = 1000, j.topo_tier = 3;
    return j;
}

static int place_with(Cluster *c, const char *policy, Job *j, TaskSlot *slots, int max_tier, const Workload *wl) {
    Policy p;
    policy_builtin(&p, "fifo");
    if (!strcmp(policy, "binpack")) p.place = PLACE_BINPACK, p.topology = true;
    if (!strcmp(policy, "spread")) p.place = PLACE_SPREAD, p.topology = true;
    if (!strcmp(policy, "fgd")) p.place = PLACE_BINPACK, p.fgd = true;
    Placer pl;
    placer_init(&pl, c, &p, wl);
    int t = place_find(&pl, c, j, max_tier, slots);
    placer_free(&pl);
    return t;
}

static void test_placement_rules_single_task(void) {
    Cluster c;
    four_nodes(&c);
    occupy(&c, 0, 6); /* free: node0 2, node1 4, node2 8, node3 7 */
    occupy(&c, 1, 4);
    occupy(&c, 3, 1);
    TaskSlot s[4];
    Job j = mkjob(1, 2);
    CHECK(place_with(&c, "firstfit", &j, s, 3, NULL) == 0 && s[0].node == 0, "firstfit 2 GPUs -> node0, got %d", s[0].node);
    CHECK(s[0].mask == 0xC0, "first free devices 6,7 of node0: mask %x", s[0].mask);
    CHECK(place_with(&c, "binpack", &j, s, 3, NULL) == 0 && s[0].node == 0, "binpack tightest -> node0, got %d", s[0].node);
    CHECK(place_with(&c, "spread", &j, s, 3, NULL) == 0 && s[0].node == 2, "spread roomiest -> node2, got %d", s[0].node);
    j = mkjob(1, 4);
    CHECK(place_with(&c, "firstfit", &j, s, 3, NULL) == 0 && s[0].node == 1, "firstfit 4 GPUs -> node1, got %d", s[0].node);
    CHECK(place_with(&c, "binpack", &j, s, 3, NULL) == 0 && s[0].node == 1, "binpack 4 GPUs -> node1, got %d", s[0].node);
    CHECK(place_with(&c, "spread", &j, s, 3, NULL) == 0 && s[0].node == 2, "spread 4 GPUs -> node2, got %d", s[0].node);
    cluster_free(&c);
}

static void test_placement_gangs_and_tiers(void) {
    Cluster c;
    four_nodes(&c);
    occupy(&c, 0, 6);
    occupy(&c, 1, 4);
    occupy(&c, 3, 1);
    TaskSlot s[8];
    /* 3 tasks x 2 GPUs: topology bin-pack puts the whole gang on one node, the tightest that holds it
     * (node3: 7 free, capacity 3) */
    Job j = mkjob(3, 2);
    int t = place_with(&c, "binpack", &j, s, 3, NULL);
    CHECK(t == 0 && s[0].node == 3 && s[1].node == 3 && s[2].node == 3, "binpack gang -> node3 tier 0 (tier %d)", t);
    CHECK((s[0].mask & s[1].mask) == 0 && (s[1].mask & s[2].mask) == 0, "tasks on one node get distinct devices");
    /* topology-unaware first fit walks nodes in order: node0 takes 1 task, node1 2 -> one leaf */
    t = place_with(&c, "firstfit", &j, s, 3, NULL);
    CHECK(t == 1 && s[0].node == 0 && s[1].node == 1 && s[2].node == 1, "firstfit gang over nodes 0,1 (tier %d)", t);
    /* 2 x 8 GPUs: only node2 is whole-free -> no room (all or nothing) */
    j = mkjob(2, 8);
    CHECK(place_with(&c, "binpack", &j, s, 3, NULL) == -1, "16-GPU gang must not be placed partially");
    cluster_free(&c);

    /* hard leaf constraint: free whole nodes are 0 and 2, in different leaves */
    four_nodes(&c);
    occupy(&c, 1, 8);
    occupy(&c, 3, 8);
    j = mkjob(2, 8);
    CHECK(place_with(&c, "binpack", &j, s, 1, NULL) == -1, "hard leaf constraint cannot be met");
    t = place_with(&c, "binpack", &j, s, 3, NULL);
    CHECK(t == 3 && s[0].node == 0 && s[1].node == 2, "soft: spans spines (tier %d, nodes %d %d)", t, s[0].node, s[1].node);
    cluster_free(&c);

    /* topology picks the tightest leaf: leaf0 has 16 free, leaf1 10 free; a 8+2 gang goes to leaf1 */
    four_nodes(&c);
    occupy(&c, 2, 6);
    j = mkjob(5, 2);
    t = place_with(&c, "binpack", &j, s, 3, NULL);
    CHECK(t == 1, "5x2 gang inside one leaf (tier %d)", t);
    for (int k = 0; k < 5; k++) CHECK(c.nodes[s[k].node].leaf == 1, "task %d in leaf1 (node %d)", k, s[k].node);
    cluster_free(&c);
}

static void test_gpu_sharing_and_fgd(void) {
    Cluster c;
    cluster_generate(&c, 1, 2, "T4", 64000, 262144, 32, 8);
    cluster_take(&c, 0, 0, 0, 400, 0, 0); /* device 0: 600 milli free, device 1 whole */
    TaskSlot s[1];
    Job j = mkjob(1, 1);
    j.gpu_milli = 500;
    CHECK(place_with(&c, "firstfit", &j, s, 3, NULL) == 0 && s[0].dev == 0, "firstfit -> dev0 (%d)", s[0].dev);
    CHECK(place_with(&c, "binpack", &j, s, 3, NULL) == 0 && s[0].dev == 0, "best fit -> dev0 (%d)", s[0].dev);
    CHECK(place_with(&c, "spread", &j, s, 3, NULL) == 0 && s[0].dev == 1, "spread -> dev1 (%d)", s[0].dev);
    /* FGD with a workload of whole-GPU tasks: dev0 leaves 100 unusable (delta -500), dev1 would leave
     * 600 + 500 unusable (delta +500) */
    Workload w = {.n = 1, .g = {1}, .milli = {1000}, .p = {1.0}};
    CHECK_CLOSE(fgd_node_frag(&c.nodes[0], &w), 600, 0, 1e-9, "frag before");
    CHECK(place_with(&c, "fgd", &j, s, 3, &w) == 0 && s[0].dev == 0, "fgd -> dev0 (%d)", s[0].dev);
    /* with a workload of 0.5-GPU tasks only, both devices are usable; a 0.7 task on dev1 leaves 300
     * unusable, on dev0 it does not fit; 0.5 tasks: dev0 (600) -> 100 left: frag 100 vs dev1 -> 500 left: 0 */
    Workload half = {.n = 1, .g = {1}, .milli = {500}, .p = {1.0}};
    CHECK_CLOSE(fgd_node_frag(&c.nodes[0], &half), 0, 0, 1e-9, "600 and 1000 free both take a 0.5 task");
    CHECK(place_with(&c, "fgd", &j, s, 3, &half) == 0 && s[0].dev == 1, "fgd(half) -> dev1 keeps no sliver (%d)", s[0].dev);
    /* an unusable-for-head measure: a whole-GPU job cannot use the 600 on dev0 */
    Job whole = mkjob(1, 1);
    CHECK(place_unusable_milli(&c.nodes[0], &whole) == 600, "unusable %d", place_unusable_milli(&c.nodes[0], &whole));
    cluster_free(&c);
}

static void add(JobSet *js, double t, int ntasks, int g, double dur, int prio) {
    Job *j = jobset_add(js);
    j->submit = t, j->ntasks = ntasks, j->gpus_per_task = g, j->duration = j->est_duration = dur;
    j->priority = prio;
    j->preemptible = true;
}

static void run(Cluster *c, JobSet *js, Policy *p, Metrics *m, double ckpt) {
    for (int i = 0; i < js->n; i++) job_validate(&js->jobs[i], c, p->hot_spares);
    SimConfig cfg;
    sim_config_default(&cfg);
    cfg.checkpoint_s = ckpt;
    sim_run(c, js, p, &cfg, m);
}

static void test_fifo_vs_easy_backfill_timeline(void) {
    for (int bf = 0; bf < 2; bf++) {
        Cluster c;
        cluster_generate(&c, 1, 4, "GPU", 128000, 1048576, 32, 8);
        JobSet js = {0};
        add(&js, 0, 1, 2, 100, 0);  /* A */
        add(&js, 1, 1, 4, 10, 0);   /* B: needs the whole node */
        add(&js, 2, 1, 2, 50, 0);   /* C: fits in the hole before A ends */
        add(&js, 3, 1, 2, 200, 0);  /* D: would delay B */
        Policy p;
        policy_builtin(&p, bf ? "backfill" : "fifo");
        Metrics m;
        run(&c, &js, &p, &m, 0);
        const Job *J = js.jobs;
        CHECK(J[0].finish == 100 && J[1].first_start == 100 && J[1].finish == 110, "A 0-100, B 100-110 (%s)", p.name);
        if (bf) CHECK(J[2].first_start == 2 && J[2].finish == 52, "C backfilled 2-52, got %g-%g", J[2].first_start, J[2].finish);
        else CHECK(J[2].first_start == 110 && J[2].finish == 160, "C waits for B: %g-%g", J[2].first_start, J[2].finish);
        CHECK(J[3].first_start == 110 && J[3].finish == 310, "D never delays B: %g-%g (%s)", J[3].first_start, J[3].finish, p.name);
        double avg = bf ? (100 + 109 + 50 + 307) / 4.0 : (100 + 109 + 158 + 307) / 4.0;
        CHECK_CLOSE(m.avg_jct_s, avg, 1e-12, 1e-9, "avg JCT");
        CHECK(m.jobs_finished == 4, "finished %d", m.jobs_finished);
        jobset_free(&js);
        cluster_free(&c);
    }
}

static void test_preemption_picks_fewest_gpu_hours(void) {
    Cluster c;
    cluster_generate(&c, 1, 4, "GPU", 128000, 1048576, 32, 8);
    JobSet js = {0};
    add(&js, 0, 1, 2, 1000, 0);   /* L1: 100 s done at t=100 */
    add(&js, 10, 1, 2, 1000, 0);  /* L2: 90 s done -> cheaper victim */
    add(&js, 100, 1, 2, 50, 2);   /* H */
    add(&js, 101, 1, 2, 10, 0);   /* E: same priority as the runners: must wait, never preempt */
    Policy p;
    policy_builtin(&p, "fifo");
    p.preemption = true;
    p.order = ORDER_PRIORITY;
    Metrics m;
    run(&c, &js, &p, &m, 0);
    const Job *J = js.jobs;
    CHECK(m.preemptions == 1, "one preemption, got %ld", m.preemptions);
    CHECK(J[1].preemptions == 1 && J[0].preemptions == 0, "L2 (90 GPU-s x2) is the victim, not L1");
    CHECK(J[2].first_start == 100 && J[2].finish == 150, "H runs 100-150: %g-%g", J[2].first_start, J[2].finish);
    CHECK_CLOSE(m.gpu_hours_lost, 180.0 / 3600, 1e-9, 1e-12, "lost 90 s x 2 GPUs");
    /* L2 restarts from scratch at 150 (no checkpoint); E (prio 0, arrived 101) runs after L2 is back? L2
     * was submitted earlier so it is ahead in FIFO order: L2 150-1150; E waits for L1 to end at 1000 */
    CHECK(J[1].finish == 1150, "L2 restarts at 150 from scratch: %g", J[1].finish);
    CHECK(J[3].first_start == 1000, "E waits for L1: %g", J[3].first_start);
    jobset_free(&js);
    cluster_free(&c);
}

static void test_checkpoint_keeps_work(void) {
    Cluster c;
    cluster_generate(&c, 1, 2, "GPU", 128000, 1048576, 32, 8);
    JobSet js = {0};
    add(&js, 0, 1, 2, 1000, 0);
    add(&js, 250, 1, 2, 100, 1);
    Policy p;
    policy_builtin(&p, "fifo");
    p.preemption = true;
    p.order = ORDER_PRIORITY;
    Metrics m;
    run(&c, &js, &p, &m, 100); /* checkpoints at 100, 200: 50 s x 2 GPUs lost */
    CHECK_CLOSE(m.gpu_hours_lost, 100.0 / 3600, 1e-9, 1e-12, "lost since last checkpoint");
    CHECK(js.jobs[0].finish == 350 + 800, "restart at 350 with 800 s left: %g", js.jobs[0].finish);
    jobset_free(&js);
    cluster_free(&c);
}

/* A 2 x 4-GPU gang on nodes 0,1 (checkpoint every 100 s) loses node 1 at t=250: 50 s x 8 GPUs are
 * lost and 800 s of work remain. With a hot spare it restarts at once on the spare; with a free
 * node it is requeued and re-placed at once; with neither it waits for the repair at 250 + 500. */
static void test_failure_spare_requeue_repair(void) {
    for (int mode = 0; mode < 3; mode++) {
        Cluster c;
        cluster_generate(&c, mode == 2 ? 2 : 3, 4, "GPU", 128000, 1048576, 32, 8);
        JobSet js = {0};
        add(&js, 0, 2, 4, 1000, 0);
        Policy p;
        policy_builtin(&p, "fifo");
        p.hot_spares = mode == 0 ? 1 : 0;
        for (int i = 0; i < js.n; i++) job_validate(&js.jobs[i], &c, p.hot_spares);
        SimConfig cfg;
        sim_config_default(&cfg);
        cfg.checkpoint_s = 100;
        cfg.repair_s = 500;
        double ft = 250;
        int fn = 1;
        cfg.fail_times = &ft, cfg.fail_nodes = &fn, cfg.nfail_script = 1;
        Metrics m;
        sim_run(&c, &js, &p, &cfg, &m);
        CHECK_CLOSE(m.gpu_hours_lost, 400.0 / 3600, 1e-9, 1e-12, "50 s x 8 GPUs lost");
        CHECK(m.failures == 1, "one failure");
        double want = mode == 2 ? 750 + 800 : 250 + 800;
        CHECK_CLOSE(js.jobs[0].finish, want, 1e-12, 1e-9, mode == 0 ? "finish (spare)" : mode == 1 ? "finish (requeue)" : "finish (repair)");
        CHECK(m.spare_swaps == (mode == 0) && m.failure_requeues == (mode != 0), "mode %d: %ld swaps, %ld requeues", mode,
              m.spare_swaps, m.failure_requeues);
        if (mode == 0) CHECK(js.jobs[0].slots[1].node == 2 || js.jobs[0].slots[0].node == 2, "runs on the spare node 2");
        jobset_free(&js);
        cluster_free(&c);
    }
}

/* Node 0 is held outside the simulation; A (8 GPUs, 30 s) lands on node 1 and B (8 GPUs, 100 s) on
 * node 2 (first fit). The 2 x 8 gang G arrives at t=1. At t=30 only nodes 1 and 3 are free, in
 * different leaves. Without delay G starts there at 30; with delay_s=120 it waits, and at t=100 leaf
 * {2,3} is free, so it starts inside one leaf. */
static void test_delay_scheduling_waits_for_a_leaf(void) {
    for (int delay = 0; delay < 2; delay++) {
        Cluster c;
        cluster_generate(&c, 4, 8, "GPU", 128000, 1048576, 2, 1);
        occupy(&c, 0, 8);
        JobSet js = {0};
        add(&js, 0, 1, 8, 30, 0);
        add(&js, 0, 1, 8, 100, 0);
        add(&js, 1, 2, 8, 50, 0);
        Policy p;
        policy_builtin(&p, "fifo");
        p.topology = true;
        p.delay_s = delay ? 120 : 0;
        Metrics m;
        run(&c, &js, &p, &m, 0);
        const Job *G = &js.jobs[2];
        CHECK(G->first_start == (delay ? 100 : 30), "G starts at %g (delay %d)", G->first_start, delay);
        CHECK(G->tier == (delay ? 1 : 3), "G spans tier %d (delay %d)", G->tier, delay);
        jobset_free(&js);
        cluster_free(&c);
    }
}

/* Queue a submits three 2-GPU jobs before queue b's one, on a 4-GPU node. Arrival order runs a1, a2
 * first; DRF (equal weights) alternates queues, so b1 starts at once. */
static void test_drf_shares_between_queues(void) {
    for (int fair = 0; fair < 2; fair++) {
        Cluster c;
        cluster_generate(&c, 1, 4, "GPU", 128000, 1048576, 32, 8);
        JobSet js = {0};
        for (int i = 0; i < 4; i++) {
            add(&js, 0, 1, 2, 100, 0);
            js.jobs[i].queue = i == 3 ? 1 : 0;
        }
        Policy p;
        policy_builtin(&p, "fifo");
        p.nqueues = 2;
        p.queue_weight[0] = p.queue_weight[1] = 1;
        p.fair = fair ? FAIR_DRF : FAIR_NONE;
        Metrics m;
        run(&c, &js, &p, &m, 0);
        CHECK(js.jobs[3].first_start == (fair ? 0 : 100), "b1 starts at %g (fair %d)", js.jobs[3].first_start, fair);
        CHECK(js.jobs[1].first_start == (fair ? 100 : 0), "a2 starts at %g (fair %d)", js.jobs[1].first_start, fair);
        jobset_free(&js);
        cluster_free(&c);
    }
}

/* Weights 3:1 on one 8-GPU node, four 2-GPU jobs per queue, all at t=0 for 100 s. Proportional:
 * deserved 6 and 2 GPUs; picks a (0/6), b (0/2), a (2/6 < 2/2), a (4/6 < 1): a gets 3 jobs, b 1.
 * DRF (dominant share / weight): a 0, b 0 -> a; a 2/8/3 vs b 0 -> b; a 1/12 < 1/4 -> a; a 1/6 < 1/4
 * -> a: the same split. The rest start when the first four end at 100. */
static void test_weighted_fair_share_drf_and_proportional(void) {
    for (int fair = FAIR_DRF; fair <= FAIR_PROPORTIONAL; fair++) {
        Cluster c;
        cluster_generate(&c, 1, 8, "GPU", 128000, 1048576, 32, 8);
        JobSet js = {0};
        for (int i = 0; i < 8; i++) {
            add(&js, 0, 1, 2, 100, 0);
            js.jobs[i].queue = i < 4 ? 0 : 1;
        }
        Policy p;
        policy_builtin(&p, "fifo");
        p.nqueues = 2;
        p.queue_weight[0] = 3, p.queue_weight[1] = 1;
        p.fair = fair;
        Metrics m;
        run(&c, &js, &p, &m, 0);
        int a0 = 0, b0 = 0, later = 0;
        for (int i = 0; i < 8; i++) {
            if (js.jobs[i].first_start == 0) *(i < 4 ? &a0 : &b0) += 1;
            else later += js.jobs[i].first_start == 100;
        }
        CHECK(a0 == 3 && b0 == 1 && later == 4, "fair %d: a %d, b %d at 0, %d at 100", fair, a0, b0, later);
        jobset_free(&js);
        cluster_free(&c);
    }
}

static void test_rank_layout_tp_in_node_pp_in_leaf(void) {
    Cluster c;
    cluster_generate(&c, 8, 8, "GPU", 128000, 1048576, 4, 1);
    Policy p;
    policy_builtin(&p, "gang-binpack-topo");
    Placer pl;
    placer_init(&pl, &c, &p, NULL);
    Job j = mkjob(4, 8); /* 32 GPUs: tp 4, pp 4, dp 2 */
    TaskSlot s[4];
    j.slots = s;
    CHECK(place_find(&pl, &c, &j, 3, s) == 1, "one leaf");
    int rn[32], rd[32];
    CHECK(place_rank_layout(&c, &j, 4, 4, 2, rn, rd) == 0, "%s", myr_last_error());
    for (int r = 0; r < 32; r++) CHECK(rn[r] == rn[r - r % 4], "rank %d shares its TP group's node", r);
    CHECK(place_pp_cross_leaf(&c, 4, 4, 2, rn) == 0, "pipeline neighbours under one leaf");
    /* every (node, device) used once */
    int used[8][8] = {{0}};
    for (int r = 0; r < 32; r++) used[rn[r]][rd[r]]++;
    int dup = 0;
    for (int a = 0; a < 8; a++) for (int b = 0; b < 8; b++) dup += used[a][b] > 1;
    CHECK(dup == 0, "no GPU given two ranks");
    CHECK(place_rank_layout(&c, &j, 3, 1, 1, rn, rd) == -1, "tp*pp*dp must match the job");
    FILE *f = tmpfile();
    place_write_slurm_topology(f, &c);
    rewind(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    CHECK(strstr(buf, "SwitchName=leaf0 Nodes=node0000,node0001,node0002,node0003\n") != NULL, "%s", buf);
    CHECK(strstr(buf, "SwitchName=root Switches=spine0,spine1") != NULL, "root switch");
    fclose(f);
    placer_free(&pl);
    cluster_free(&c);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static void test_bad_input(void) {
    Cluster c;
    cluster_generate(&c, 2, 8, "V100M32", 96000, 786432, 32, 8);
    char path[] = "/tmp/myriad_sched_badXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    write_file(path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
                     "p0,1000,1024,1,1000,,LS,Running,0,100,0\n"
                     "p1,1000,1024,x,1000,,LS,Running,5,100,5\n"
                     "p2,1000,1024,1,500,A100,BE,Running,9,100,9\n"
                     "p3,1000,1024,1\n");
    JobSet js = {0};
    TraceOptions o = {.skip_bad = false};
    CHECK(trace_load_openb(&js, path, &c, &o) == -1, "malformed row is fatal by default");
    CHECK(strstr(myr_last_error(), ":3:") && strstr(myr_last_error(), "num_gpu"), "names line 3 and the column: %s", myr_last_error());
    jobset_free(&js);
    FILE *warn = tmpfile();
    TraceOptions skip = {.skip_bad = true, .warn = warn};
    CHECK(trace_load_openb(&js, path, &c, &skip) == 0, "skipping: %s", myr_last_error());
    CHECK(skip.bad_rows == 2 && js.n == 2, "2 bad rows skipped (%d), 2 pods kept (%d)", skip.bad_rows, js.n);
    rewind(warn);
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, warn);
    buf[n] = 0;
    CHECK(strstr(buf, ":5:") != NULL, "short row reported with its line: %s", buf);
    fclose(warn);
    CHECK(js.jobs[1].state == JOB_REJECTED && strstr(js.jobs[1].reason, "A100"), "missing GPU type rejected: '%s'", js.jobs[1].reason);
    CHECK(js.jobs[1].gpu_milli == 500, "fraction kept");
    Job big = mkjob(3, 8);
    CHECK(job_validate(&big, &c, 0) == -1 && strstr(big.reason, "whole cluster"), "too big: %s", big.reason);
    Job hard = mkjob(2, 8);
    hard.topo_tier = 0, hard.topo_hard = true;
    CHECK(job_validate(&hard, &c, 0) == -1 && strstr(hard.reason, "hard topology"), "hard node: %s", hard.reason);
    Job ok = mkjob(2, 8);
    CHECK(job_validate(&ok, &c, 0) == 0, "fits: %s", ok.reason);
    jobset_free(&js);
    unlink(path);

    Policy p;
    write_file(path, "{\"base\": \"backfill\", \"placment\": \"binpack\"}");
    char pj[64];
    snprintf(pj, sizeof pj, "%s.json", path);
    rename(path, pj);
    CHECK(policy_load(&p, pj) == -1 && strstr(myr_last_error(), "placment"), "typo named: %s", myr_last_error());
    write_file(pj, "{\"base\": \"backfill\", \"placement\": \"spread\", \"preemption\": true, \"queues\": [{\"name\": \"a\", \"weight\": 3}, {\"name\": \"b\"}]}");
    CHECK(policy_load(&p, pj) == 0 && p.backfill && p.place == PLACE_SPREAD && p.preemption && p.nqueues == 2 &&
              p.queue_weight[0] == 3 && p.queue_weight[1] == 1, "json policy: %s", myr_last_error());
    CHECK(policy_load(&p, "nosuch") == -1 && strstr(myr_last_error(), "built-ins"), "%s", myr_last_error());
    /* no policy may claim a non-gang mode: the tasks of a job always start together */
    write_file(pj, "{\"base\": \"best\", \"gang\": false}");
    CHECK(policy_load(&p, pj) == -1 && strstr(myr_last_error(), "gang"), "gang false refused: %s", myr_last_error());
    unlink(pj);
    cluster_free(&c);
}

static void test_cluster_json(void) {
    char path[] = "/tmp/myriad_sched_clXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    write_file(path, "{\"nodes\": [{\"name\": \"a\", \"gpus\": 8, \"gpu_type\": \"H100\", \"leaf\": 5, \"spine\": 1},"
                     "{\"name\": \"b\", \"gpus\": 8, \"gpu_type\": \"H100\", \"leaf\": 5, \"spine\": 1, \"state\": \"spare\"},"
                     "{\"name\": \"c\", \"gpus\": 4, \"gpu_type\": \"A10\", \"leaf\": 2, \"spine\": 0}]}");
    Cluster c;
    CHECK(cluster_load_json(&c, path) == 0, "%s", myr_last_error());
    CHECK(c.nnodes == 3 && c.nleaves == 2 && c.nspines == 2 && c.ntypes == 2, "shape");
    CHECK(c.total_gpus == 20 && c.total_free == 12, "spare GPUs are not schedulable: free %ld", c.total_free);
    CHECK(c.nodes[0].leaf == c.nodes[1].leaf && c.nodes[0].leaf != c.nodes[2].leaf, "leaves compacted");
    cluster_free(&c);
    write_file(path, "{\"nodes\": [{\"gpus\": 8}]}");
    CHECK(cluster_load_json(&c, path) == -1 && strstr(myr_last_error(), "gpu_type"), "%s", myr_last_error());
    write_file(path, "{\"nodes\": [{\"gpus\": 1, \"gpu_type\": \"X\", \"leaf\": 0, \"spine\": 0}, {\"gpus\": 1, \"gpu_type\": \"X\", \"leaf\": 0, \"spine\": 1}]}");
    CHECK(cluster_load_json(&c, path) == -1 && strstr(myr_last_error(), "one spine"), "%s", myr_last_error());
    unlink(path);
}

int main(void) {
    RUN(test_placement_rules_single_task);
    RUN(test_placement_gangs_and_tiers);
    RUN(test_gpu_sharing_and_fgd);
    RUN(test_fifo_vs_easy_backfill_timeline);
    RUN(test_preemption_picks_fewest_gpu_hours);
    RUN(test_checkpoint_keeps_work);
    RUN(test_failure_spare_requeue_repair);
    RUN(test_delay_scheduling_waits_for_a_leaf);
    RUN(test_drf_shares_between_queues);
    RUN(test_weighted_fair_share_drf_and_proportional);
    RUN(test_rank_layout_tp_in_node_pp_in_leaf);
    RUN(test_bad_input);
    RUN(test_cluster_json);
    return TEST_SUMMARY();
}
