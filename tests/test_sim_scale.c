/* test_sim_scale.c: what changes between 1,000 and 100,000 GPUs (issue 29, item 2), by hand: the
 * straggler wait of a synchronous step (the expected maximum of N normals), multi-plane and
 * rail-only fabrics (fewer switch tiers: one fat-tree per plane or per rail), a rail-only
 * network's NVLink forwarding of cross-rail all-to-all traffic, and 100,000-GPU layouts on both
 * simulated (their speed is bench/sim_speed.sh's; tests never time). No ../shared needed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "test.h"
#include "util/error.h"

static void die(void) { fprintf(stderr, "%s\n", myr_last_error()); exit(1); }

/* E[max of n normals]: n = 2 is 1/sqrt(pi) exactly, n = 1000 is 3.2414 (tables); Blom's
 * approximation is within a few percent */
static void test_expected_max(void) {
    CHECK_CLOSE(sim_expected_max_normal(2), 1 / sqrt(M_PI), 0.05, 0, "n = 2");
    CHECK_CLOSE(sim_expected_max_normal(1000), 3.2414, 0.01, 0, "n = 1000");
    CHECK(sim_expected_max_normal(16384) > sim_expected_max_normal(1024), "grows with n");
    CHECK(sim_expected_max_normal(1) == 0, "one GPU waits for nobody");
}

/* the step waits cv x E[max] x the pipeline's span for its slowest GPU */
static void test_straggler_wait(void) {
    SimModel m;
    ClusterSpec c;
    GpuSpec g;
    if (sim_load_model("llama3-70b", &m) || sim_load_cluster("h100-ib", &c) || sim_load_gpu("h100-sxm", &g)) die();
    Layout l;
    sim_layout_defaults(&l);
    l.tp = 8; l.pp = 8; l.dp = 16; l.seq = 8192; l.global_batch = 1024; l.micro_batch = 1; l.recompute = RECOMPUTE_FULL;
    SimResult a, b;
    if (sim_step(&m, &c, &g, &l, &a, NULL)) die();
    c.straggler_cv = 0.01;
    if (sim_step(&m, &c, &g, &l, &b, NULL)) die();
    CHECK(a.straggler == 0, "no variation, no wait");
    double span = a.step_time - a.dp_comm - a.optimizer; /* the pipeline's finish on the critical stage */
    CHECK_CLOSE(b.straggler, 0.01 * sim_expected_max_normal(1024) * span, 0.02, 0, "cv x E[max of 1024] x span");
    CHECK_CLOSE(b.step_time, a.step_time + b.straggler, 1e-9, 0, "added to the step");
}

/* one fat-tree per plane or per rail, each for its share of the NIC ports */
static void test_planes_and_rails_cost(void) {
    ClusterSpec mp, ro, ft;
    if (sim_load_cluster("h800-multiplane", &mp) || sim_load_cluster("h100-rail-only", &ro) || sim_load_cluster("h100-ib", &ft)) die();
    ClusterCost c;
    sim_fat_tree(&mp, 2048, &c);
    /* 8 planes of 256 ports: 8 leaves (32 down) + 4 spines each */
    CHECK(c.tiers == 2 && c.switches == 8 * 12, "multi-plane 2,048 GPUs: %d tiers, %.0f switches", c.tiers, c.switches);
    ClusterCost a, b, f;
    sim_fat_tree(&mp, 98304, &a);
    sim_fat_tree(&ro, 98304, &b);
    sim_fat_tree(&ft, 98304, &f);
    CHECK(a.tiers == 3 && b.tiers == 3 && f.tiers == 4, "tiers at 98,304 GPUs: planes %d, rail-only %d, fat-tree %d", a.tiers,
          b.tiers, f.tiers);
    CHECK(b.switches < f.switches && a.switches < f.switches, "fewer switches: %.0f, %.0f vs %.0f", a.switches, b.switches,
          f.switches);
    /* sizing a design to 100k GPUs follows the same capacity */
    if (sim_cluster_fit(&ro, 98304, NULL, 0) || sim_cluster_fit(&ft, 98304, NULL, 0)) die();
    CHECK(ro.ntiers == 3 && ft.ntiers == 4, "built: rail-only %d tiers, fat-tree %d", ro.ntiers, ft.ntiers);
}

/* rail-only: an all-to-all's traffic to other nodes' other-rail GPUs crosses NVLink first */
static void test_rail_only_forwarding(void) {
    Network n;
    memset(&n, 0, sizeof n);
    n.nlevels = 2;
    n.bw[0] = 100e9; n.bw[1] = 100e9; n.alpha[0] = n.alpha[1] = 0;
    n.reach[0] = 8; n.reach[1] = 1e18; n.gpus_per_node = 8;
    Group g = {64, 1};
    double S = 64e6;
    double plain = sim_coll_time(&n, COLL_ALLTOALL, ALG_AUTO, S, g);
    n.rail_only = 1;
    double rail = sim_coll_time(&n, COLL_ALLTOALL, ALG_AUTO, S, g);
    CHECK_CLOSE(plain, 56.0 / 64 * S / 100e9, 1e-9, 0, "the network carries 7/8");
    CHECK_CLOSE(rail, (7.0 / 64 * S + 56.0 / 64 * S * 7 / 8) / 100e9, 1e-9, 0, "NVLink: own node + forwarded");
}

/* 100,000-GPU clusters, multi-plane and rail-only, a dense and an MoE layout */
static void test_hundred_thousand_gpus(void) {
    const char *clusters[] = {"h800-multiplane", "h100-rail-only"};
    SimModel d, e;
    if (sim_load_model("llama3-405b", &d) || sim_load_model("deepseek-v3", &e)) die();
    for (int i = 0; i < 2; i++) {
        ClusterSpec c;
        GpuSpec g;
        if (sim_load_cluster(clusters[i], &c) || sim_load_gpu("h100-sxm", &g) || sim_cluster_fit(&c, 98304, NULL, 0)) die();
        Layout l;
        sim_layout_defaults(&l);
        l.tp = 8; l.pp = 16; l.vpp = 4; l.dp = 768; l.seq = 8192; l.global_batch = 12288; l.micro_batch = 1;
        l.first_layers = 7; l.last_layers = 7; l.recompute = RECOMPUTE_FULL;
        SimResult r;
        CHECK(sim_step(&d, &c, &g, &l, &r, NULL) == 0 && r.step_time > 0 && r.gpus == 98304, "%s dense: %s", clusters[i],
              myr_last_error());
        sim_layout_defaults(&l);
        sim_software_preset(&l, "deepseek");
        l.pp = 16; l.dp = 6144; l.ep = 64; l.seq = 4096; l.global_batch = 6144 * 32; l.micro_batch = 1; l.dtype = DT_FP8;
        l.first_layers = 3; l.last_layers = 2;
        CHECK(sim_step(&e, &c, &g, &l, &r, NULL) == 0 && r.ep_total > 0, "%s MoE: %s", clusters[i], myr_last_error());
    }
}

/* Megatron-core's micro-batch groups per virtual stage (its docstring's example: pp 2, vpp 2, 5
 * micro-batches in groups of 3: rank 0 runs forwards 0 1 2 0 1 2 3 4 3 4): stage 0 warms up with
 * 2 (p - 1) + (v - 1) N = 5 forwards and holds 6 chunks at its peak; the default group (pp) with
 * 4 micro-batches holds 5; a group below pp is refused (the schedule deadlocks) */
static void test_vpp_groups(void) {
    double w[4] = {1, 1, 1, 1};
    CHECK_CLOSE(sim_pipeline_peak_weight_group(2, 2, 5, 3, SCHED_INTERLEAVED, 0, w), 6, 1e-12, 0, "groups of 3");
    CHECK_CLOSE(sim_pipeline_peak_weight_group(2, 2, 4, 0, SCHED_INTERLEAVED, 0, w), 5, 1e-12, 0, "default group");
    double f[4] = {1, 1, 1, 1}, b[4] = {2, 2, 2, 2};
    PipeResult r;
    CHECK(sim_pipeline_group(2, 2, 5, 3, SCHED_INTERLEAVED, f, b, 0, NULL, &r, NULL) == 0, "%s", myr_last_error());
    CHECK(r.busy[0] == 5 * 2 * 3 && r.makespan >= r.busy[0], "all ops ran: busy %g, makespan %g", r.busy[0], r.makespan);
    SimModel m;
    ClusterSpec c;
    GpuSpec g;
    if (sim_load_model("llama3-405b", &m) || sim_load_cluster("llama3-24k", &c) || sim_load_gpu("h100-sxm", &g)) die();
    Layout l;
    sim_layout_defaults(&l);
    l.tp = 8; l.pp = 16; l.vpp = 4; l.dp = 128; l.seq = 8192; l.global_batch = 2048; l.micro_batch = 1;
    l.first_layers = 7; l.last_layers = 7; l.vpp_group = 8;
    CHECK(sim_check_layout(&m, &c, &g, &l) == -1 && strstr(myr_last_error(), "would deadlock"), "%s", myr_last_error());
}

int main(void) {
    RUN(test_vpp_groups);
    RUN(test_expected_max);
    RUN(test_straggler_wait);
    RUN(test_planes_and_rails_cost);
    RUN(test_rail_only_forwarding);
    RUN(test_hundred_thousand_gpus);
    return TEST_SUMMARY();
}
