/* test_sim.c: the cluster simulator against hand-computed and published numbers: FLOP and
 * parameter counts vs closed formulas, alpha-beta collectives, pipeline makespans, ZeRO and
 * activation memory, Young/Daly, fat-tree switch counts, GEMM shape efficiency, oversubscription,
 * reliability, the GPT-3 estimate, config errors and the published validation sets. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "sim/sim.h"
#include "sim/validate.h"
#include "test.h"
#include "util/error.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static SimModel gpt(int l, int h, int a, int V, int s) {
    SimModel m = {0};
    snprintf(m.name, sizeof m.name, "gpt-test");
    sim_model_set_arch(&m, ARCH_GPT);
    m.layers = l; m.hidden = h; m.heads = a; m.kv_heads = a; m.ffn = 4 * h; m.vocab = V; m.seq = s; m.top_k = 1;
    return m;
}

static void load_a100(ClusterSpec *c, GpuSpec *g) {
    if (sim_load_cluster("selene", c)) { fprintf(stderr, "%s\n", myr_last_error()); exit(1); }
    if (sim_load_gpu("a100-80g", g)) { fprintf(stderr, "%s\n", myr_last_error()); exit(1); }
    c->gpus = 0;
}

/* GPT parameters: 12 l h^2 (1 + 13/12h + (V + s)/(12 l h)) (Narayanan et al. 2021, eq. 2) + final LN (2h). */
static void test_param_count_matches_closed_formula(void) {
    SimModel m = gpt(96, 12288, 96, 51200, 2048);
    double l = 96, h = 12288, V = 51200, s = 2048;
    double closed = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h)) + 2 * h;
    CHECK_CLOSE(sim_model_params(&m), closed, 1e-12, 0, "GPT-3 175B parameters");
    CHECK(fabs(sim_model_params(&m) / 1e9 - 174.6) < 0.1, "175B: %.2f B", sim_model_params(&m) / 1e9);
}

/* Hardware FLOPs of a full-recompute step = 96 B s l h^2 (1 + s/6h + V/16lh), and model FLOPs =
 * 72 B s l h^2 (1 + s/6h) + 6 B s h V (no recompute). */
static void test_step_flops_match_narayanan_formula(void) {
    ClusterSpec c; GpuSpec g;
    load_a100(&c, &g);
    SimModel m = gpt(24, 2304, 24, 51200, 2048);
    Layout l;
    sim_layout_defaults(&l);
    l.seq = 2048; l.dp = 4; l.global_batch = 64; l.micro_batch = 4; l.recompute = RECOMPUTE_FULL;
    SimResult r;
    CHECK(sim_step(&m, &c, &g, &l, &r, NULL) == 0, "%s", myr_last_error());
    CHECK_CLOSE(r.hw_flops, sim_narayanan_flops(64, 2048, 24, 2304, 51200), 1e-12, 0, "hw flops");
    double B = 64, s = 2048, L = 24, h = 2304, V = 51200;
    CHECK_CLOSE(r.model_flops, 72 * B * s * L * h * h * (1 + s / (6 * h)) + 6 * B * s * h * V, 1e-12, 0, "model flops");
}

static void test_alpha_beta_collectives_by_hand(void) {
    /* ring all-reduce, 8 ranks, 1 GB, 100 GB/s, 5 us: 2*7*5us + 2*7/8 * 10 ms */
    CHECK_CLOSE(sim_ring_allreduce(8, 1e9, 100e9, 5e-6), 70e-6 + 0.0175, 1e-12, 0, "ring all-reduce");
    CHECK_CLOSE(sim_ring_gather(4, 4e8, 50e9, 1e-6), 3e-6 + 0.75 * 8e-3, 1e-12, 0, "ring all-gather");
    CHECK_CLOSE(sim_tree_allreduce(16, 1e9, 100e9, 5e-6), 8 * 5e-6 + 0.02, 1e-12, 0, "double binary tree");
    /* a group inside one NVLink domain: the fastest of ring and tree at NVLink speed */
    ClusterSpec c; GpuSpec g;
    load_a100(&c, &g);
    Network n;
    sim_network(&c, &g, &n);
    CHECK_CLOSE(n.bw[0], 300e9 * 0.8, 1e-12, 0, "NVLink bandwidth");
    CHECK_CLOSE(n.bw[1], 25e9 * 0.9, 1e-12, 0, "HDR NIC bandwidth");
    Group tp = {8, 1};
    double S = 100e6;
    double want = fmin(sim_ring_allreduce(8, S, n.bw[0], n.alpha[0]), sim_tree_allreduce(8, S, n.bw[0], n.alpha[0]));
    CHECK_CLOSE(sim_coll_time(&n, COLL_ALLREDUCE, ALG_AUTO, S, tp), want, 1e-12, 0, "tp all-reduce");
    /* 16 ranks over two nodes, hierarchical: RS + AG in the node (8 ranks), ring across 2 nodes on S/8 */
    Group two = {16, 1};
    double hier = 2 * (7 * n.alpha[0] + 7.0 / 8 * S / n.bw[0]) + (2 * n.alpha[1] + S / 8 / n.bw[1]);
    CHECK_CLOSE(sim_coll_time(&n, COLL_ALLREDUCE, ALG_HIER, S, two), hier, 1e-12, 0, "hierarchical all-reduce");
    /* point to point across nodes: alpha + S / B */
    Group pair = {2, 8};
    CHECK_CLOSE(sim_coll_time(&n, COLL_P2P, ALG_AUTO, S, pair), n.alpha[1] + S / n.bw[1], 1e-12, 0, "p2p");
    /* SHARP: each rank sends S/m0 once instead of twice */
    c.sharp = 1;
    sim_network(&c, &g, &n);
    double sh = sim_coll_time(&n, COLL_ALLREDUCE, ALG_SHARP, S, two);
    CHECK_CLOSE(sh, 2 * (7 * n.alpha[0] + 7.0 / 8 * S / n.bw[0]) + (2 * n.alpha[1] + S / 8 / n.bw[1]), 1e-12, 0, "sharp");
}

/* 1F1B and GPipe: (m + p - 1)(f + b); interleaved: m (f + b) + (p - 1)(f + b)/v (Narayanan et al. 2021). */
static void test_pipeline_makespans(void) {
    PipeResult *r = malloc(sizeof *r);
    double f[16], b[16];
    for (int i = 0; i < 16; i++) { f[i] = 1; b[i] = 2; }
    CHECK(sim_pipeline(4, 1, 8, SCHED_1F1B, f, b, 0, r, NULL) == 0, "1f1b");
    CHECK_CLOSE(r->makespan, (8 + 3) * 3.0, 1e-12, 0, "1F1B makespan");
    CHECK(r->peak_inflight[0] == 4 && r->peak_inflight[3] == 1, "1F1B in flight %d %d", r->peak_inflight[0], r->peak_inflight[3]);
    CHECK(sim_pipeline(4, 1, 8, SCHED_GPIPE, f, b, 0, r, NULL) == 0, "gpipe");
    CHECK_CLOSE(r->makespan, (8 + 3) * 3.0, 1e-12, 0, "GPipe makespan");
    CHECK(r->peak_inflight[0] == 8, "GPipe holds all micro-batches: %d", r->peak_inflight[0]);
    for (int i = 0; i < 16; i++) { f[i] = 0.5; b[i] = 1; }
    CHECK(sim_pipeline(4, 2, 8, SCHED_INTERLEAVED, f, b, 0, r, NULL) == 0, "interleaved");
    CHECK_CLOSE(r->makespan, 8 * 3.0 + 3 * 3.0 / 2, 1e-12, 0, "interleaved makespan");
    /* Korthikanti: the first stage holds p v + p - 1 chunks; the closed form in memory.c agrees */
    CHECK(r->peak_inflight[0] == 4 * 2 + 4 - 1, "interleaved in flight %d", r->peak_inflight[0]);
    SimModel m = gpt(16, 1024, 16, 1000, 128);
    Layout l;
    sim_layout_defaults(&l);
    l.pp = 4; l.vpp = 2; l.seq = 128; l.global_batch = 8; l.micro_batch = 1;
    CHECK_CLOSE(sim_inflight_layers(&m, &l, 0), r->peak_inflight[0] * 16.0 / 8, 1e-12, 0, "closed form vs simulated");
    /* transfers add to the critical path: 1F1B with p2p d: every hand-off on the first/last path */
    for (int i = 0; i < 16; i++) { f[i] = 1; b[i] = 2; }
    CHECK(sim_pipeline(2, 1, 1, SCHED_1F1B, f, b, 0.25, r, NULL) == 0, "p2p");
    CHECK_CLOSE(r->makespan, 1 + 0.25 + 1 + 2 + 0.25 + 2, 1e-12, 0, "one micro-batch through two stages");
    CHECK(sim_pipeline(4, 2, 6, SCHED_INTERLEAVED, f, b, 0, r, NULL) != 0, "interleaved needs m to be a multiple of p");
    free(r);
}

/* ZeRO paper (Rajbhandari et al. 2020) Fig. 1: psi = 7.5B, Nd = 64: 120, 31.4, 16.6, 1.9 GB. */
static void test_zero_memory_matches_paper(void) {
    double psi = 7.5e9;
    CHECK_CLOSE(sim_zero_state_bytes(psi, 0, 64, 2, 2) / 1e9, 120, 0, 0.05, "baseline 16 psi");
    CHECK_CLOSE(sim_zero_state_bytes(psi, 1, 64, 2, 2) / 1e9, 31.4, 0, 0.05, "P_os");
    CHECK_CLOSE(sim_zero_state_bytes(psi, 2, 64, 2, 2) / 1e9, 16.6, 0, 0.05, "P_os+g");
    CHECK_CLOSE(sim_zero_state_bytes(psi, 3, 64, 2, 2) / 1e9, 1.9, 0, 0.05, "P_os+g+p");
    /* Megatron keeps fp32 main gradients: 18 bytes per parameter */
    CHECK_CLOSE(sim_zero_state_bytes(1, 0, 8, 4, 2), 18, 1e-12, 0, "18 bytes");
}

/* Korthikanti et al. 2022 eq. (2), (4), (6): per layer, 22B model, t = 8, b = 4. */
static void test_activation_memory_formulas(void) {
    SimModel m = gpt(48, 6144, 64, 51200, 2048);
    Layout l;
    sim_layout_defaults(&l);
    l.tp = 8; l.seq = 2048; l.flash = 0; l.sp = 0; l.recompute = RECOMPUTE_NONE;
    double s = 2048, b = 4, h = 6144, a = 64, t = 8;
    CHECK_CLOSE(sim_layer_activation_bytes(&m, &l, 4), s * b * h * (10 + 24 / t + 5 * a * s / (h * t)), 1e-12, 0, "tp");
    l.sp = 1; l.recompute = RECOMPUTE_SELECTIVE;
    CHECK_CLOSE(sim_layer_activation_bytes(&m, &l, 4), s * b * h * 34 / t, 1e-12, 0, "tp + sp + selective");
    l.sp = 0; l.recompute = RECOMPUTE_FULL;
    CHECK_CLOSE(sim_layer_activation_bytes(&m, &l, 4), 2 * s * b * h, 1e-12, 0, "full recompute");
    l.tp = 1; l.recompute = RECOMPUTE_NONE;
    CHECK_CLOSE(sim_layer_activation_bytes(&m, &l, 4), s * b * h * (34 + 5 * a * s / h), 1e-12, 0, "no parallelism");
}

static void test_young_daly_worked_example(void) {
    double M = 24 * 60, delta = 5; /* minutes */
    CHECK_CLOSE(sim_young_interval(delta, M), 120, 1e-12, 0, "Young");
    double daly = sim_daly_interval(delta, M);
    CHECK(fabs(daly - 117) < 0.5, "Daly %.2f min (about 117)", daly);
    /* restart does not move the optimum but lowers goodput; the optimum beats its neighbours */
    double g0 = sim_daly_goodput(daly, delta, 10, M);
    CHECK(g0 > sim_daly_goodput(daly * 0.5, delta, 10, M) && g0 > sim_daly_goodput(daly * 2, delta, 10, M), "optimum");
    CHECK(g0 > sim_daly_goodput(daly, delta, 60, M), "longer restarts cost goodput");
}

static void test_goodput_spares_and_in_memory(void) {
    FailureRates f;
    sim_failure_rates_default(&f);
    /* Llama 3: 419 interruptions in 54 days on 16,384 GPUs: job MTBF = 54*24/419 h */
    CHECK_CLOSE(sim_job_mtbf_hours(&f, 16384), 54.0 * 24 / 419, 1e-9, 0, "MTBF");
    ReliabilityInput in = {0};
    in.gpus = 16384; in.state_bytes = 405e9 * 14; in.restart_s = 600; in.repair_hours = 4;
    in.storage_gbps = 100; in.host_mem_gbps = 20; in.gpus_per_node = 8;
    ReliabilityResult r0, r8, r32, rm;
    sim_reliability(&f, &in, &r0);
    in.hot_spares = 8;
    sim_reliability(&f, &in, &r8);
    in.hot_spares = 32;
    sim_reliability(&f, &in, &r32);
    in.in_memory = 1;
    sim_reliability(&f, &in, &rm);
    CHECK(r8.goodput > r0.goodput && r32.goodput > r8.goodput, "spares: %.3f %.3f %.3f", r0.goodput, r8.goodput, r32.goodput);
    CHECK(rm.goodput > r32.goodput, "in-memory %.3f vs disk %.3f", rm.goodput, r32.goodput);
    CHECK(rm.interval_s < r32.interval_s, "cheaper checkpoints are taken more often");
    CHECK(r0.goodput > 0 && rm.goodput < 1, "goodput in (0, 1)");
}

/* Al-Fares et al. 2008: a k-ary fat-tree (k = 64) has k^3/4 = 65,536 hosts and 5k^2/4 = 5,120 switches;
 * two tiers of 64-port switches: 2,048 hosts on 64 leaves + 32 spines. */
static void test_fat_tree_counts(void) {
    ClusterSpec c;
    sim_cluster_defaults(&c);
    c.nics_per_gpu = 1;
    c.ntiers = 3;
    for (int i = 0; i < 3; i++) { c.tier[i].radix = 64; c.tier[i].oversub = 1; }
    ClusterCost k;
    sim_fat_tree(&c, 65536, &k);
    CHECK(k.tiers == 3 && k.switches == 5120, "65,536 hosts: %d tiers %.0f switches", k.tiers, k.switches);
    sim_fat_tree(&c, 2048, &k);
    CHECK(k.tiers == 2 && k.switches == 96, "2,048 hosts: %d tiers %.0f switches", k.tiers, k.switches);
    CHECK(k.optics == 2048 + 2 * 2048, "optics %.0f", k.optics);
    c.tier[1].oversub = 3; /* leaves: 48 down, 16 up */
    sim_fat_tree(&c, 2048, &k);
    CHECK(k.switches == 43 + 11, "oversubscribed 3:1: %.0f switches (43 leaves, 11 spines)", k.switches);
}

static void test_gemm_efficiency_depends_on_shape(void) {
    GpuSpec g;
    CHECK(sim_load_gpu("a100-80g", &g) == 0, "%s", myr_last_error());
    double big = sim_gemm_eff(&g, 8192, 8192, 8192);
    /* 64 x 64 = 4,096 tiles in ceil(4096/108) = 38 waves */
    CHECK_CLOSE(big, g.gemm_eff * 4096.0 / (38 * 108) * 8192 / (8192 + 64.0), 1e-12, 0, "large square");
    CHECK(sim_gemm_eff(&g, 8192, 8192, 64) < 0.6 * big, "short K is slower");
    /* wave quantization: 108 tiles fill the 108 SMs once, 109 tiles need two waves */
    double one = sim_gemm_eff(&g, 128 * 108, 128, 4096), two = sim_gemm_eff(&g, 128 * 109, 128, 4096);
    CHECK_CLOSE(two / one, 109.0 / 216, 1e-12, 0, "second wave");
    /* roofline: a matrix-vector product is bound by HBM bandwidth */
    double t = sim_gemm_time(&g, DT_BF16, 1, 16384, 16384, 1);
    CHECK_CLOSE(t, 2.0 * 16384 * 16384 / (g.hbm_tbps * 1e12 * g.hbm_eff) + g.kernel_us * 1e-6, 1e-3, 0, "GEMV");
}

static void set_spine(ClusterSpec *c, double o) { c->tier[1].oversub = o; }

static double step_of(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, int tp, int gpus, SimResult *r) {
    Layout l;
    sim_layout_defaults(&l);
    l.tp = tp; l.dp = gpus / tp; l.seq = 4096; l.global_batch = 4096; l.micro_batch = 1;
    if (sim_step(m, c, g, &l, r, NULL)) { fprintf(stderr, "%s\n", myr_last_error()); return -1; }
    return r->step_time;
}

/* Levels of h100-ib (rail-optimized, 64-port switches, NDR 400 Gb/s per GPU): a rail group of
 * 32 nodes x 8 GPUs under the leaves, 32 such groups under a spine group, the core above. */
static void test_network_levels_by_hand(void) {
    ClusterSpec c;
    GpuSpec g;
    CHECK(sim_load_cluster("h100-ib", &c) == 0 && sim_load_gpu("h100-sxm", &g) == 0, "%s", myr_last_error());
    Network n;
    sim_network(&c, &g, &n);
    CHECK(n.nlevels == 4, "levels %d", n.nlevels);
    CHECK(n.reach[0] == 8 && n.reach[1] == 256 && n.reach[2] == 256 * 32, "reach %g %g %g", n.reach[0], n.reach[1], n.reach[2]);
    CHECK_CLOSE(n.bw[1], 50e9 * 0.9, 1e-12, 0, "NDR");
    c.tier[1].oversub = 4; /* 4:1 leaf-to-spine: leaves keep floor(64*4/5) = 51 ports down */
    sim_network(&c, &g, &n);
    CHECK_CLOSE(n.bw[2], 50e9 * 0.9 / 4, 1e-12, 0, "tapered spine");
    CHECK_CLOSE(n.bw[1], 50e9 * 0.9, 1e-12, 0, "leaf untouched");
    CHECK(n.reach[1] == 51 * 8, "reach %g", n.reach[1]);
    int m0;
    Group dp = {512, 8}; /* one GPU per node, 512 nodes: crosses the spine */
    CHECK(sim_group_level(&n, dp, &m0) == 2 && m0 == 1, "dp group level %d m0 %d", sim_group_level(&n, dp, &m0), m0);
    Group tp = {8, 1};
    CHECK(sim_group_level(&n, tp, &m0) == 0 && m0 == 8, "tp stays in NVLink");
    /* all-to-all of S bytes over 64 GPUs on 8 nodes under one leaf: 7/8 of S leaves each node */
    Group ep = {64, 1};
    double S = 1e9, t = sim_coll_time(&n, COLL_ALLTOALL, ALG_AUTO, S, ep);
    double want = fmax(7.0 / 64 * S / n.bw[0], (1 - 8.0 / 64) * S / n.bw[1]) + 63 * n.alpha[1] / 8 + n.alpha[1];
    CHECK_CLOSE(t, want, 1e-12, 0, "all-to-all");
}

static void test_planner_ranks_fitting_layouts(void) {
    ClusterSpec c; GpuSpec g;
    load_a100(&c, &g);
    SimModel m;
    CHECK(sim_load_model("gpt3-175b", &m) == 0, "%s", myr_last_error());
    Layout base;
    sim_layout_defaults(&base);
    base.seq = 2048; base.global_batch = 1536;
    PlanFixed fx = {0};
    fx.mem_cap = 0.9 * 80 * GIB;
    PlanResult pr;
    CHECK(sim_plan(&m, &c, &g, 256, &base, &fx, 300e9, 4, &pr) == 0, "%s", myr_last_error());
    CHECK(pr.nbest == 4 && pr.count[PLAN_MEMORY] > 0 && pr.nrejected >= pr.count[PLAN_MEMORY], "best %d memory %d", pr.nbest,
          pr.count[PLAN_MEMORY]);
    for (int i = 0; i < pr.nbest; i++) {
        const PlanEntry *e = &pr.best[i];
        CHECK(e->res.mem.total <= 0.9 * 80 * GIB, "entry %d within the headroom", i);
        CHECK(e->layout.tp * e->layout.cp * e->layout.pp * e->layout.dp == 256, "entry %d uses 256 GPUs", i);
        if (i) CHECK(e->days >= pr.best[i - 1].days, "sorted");
        /* the plan's numbers are what sim would say for that layout */
        Layout l = e->layout;
        l.micro_batch = e->res.micro_batch;
        l.vpp = e->res.vpp;
        SimResult r;
        CHECK(sim_step(&m, &c, &g, &l, &r, NULL) == 0 && r.step_time == e->res.step_time, "entry %d reproducible", i);
    }
    CHECK(strstr(pr.example[PLAN_MEMORY], "GiB per GPU, above 72.0 GiB") != NULL, "%s", pr.example[PLAN_MEMORY]);
    sim_plan_free(&pr);
}

static void test_oversubscription_slows_dp_not_tp(void) {
    SimModel m;
    ClusterSpec c;
    GpuSpec g;
    CHECK(sim_load_model("llama2-7b", &m) == 0 && sim_load_cluster("h100-ib", &c) == 0 && sim_load_gpu("h100-sxm", &g) == 0,
          "%s", myr_last_error());
    c.gpus = 0;
    SimResult a, b;
    set_spine(&c, 1);
    double t1 = step_of(&m, &c, &g, 1, 4096, &a);
    set_spine(&c, 4);
    double t4 = step_of(&m, &c, &g, 1, 4096, &b);
    CHECK(t4 > 1.2 * t1, "DP-heavy 7B on 4,096 GPUs: %.3f s at 1:1, %.3f s at 4:1", t1, t4);
    CHECK(b.dp_comm > a.dp_comm, "exposed DP %.3f -> %.3f", a.dp_comm, b.dp_comm);
    /* tensor parallelism inside the node does not see the spine */
    set_spine(&c, 1);
    step_of(&m, &c, &g, 8, 4096, &a);
    set_spine(&c, 4);
    step_of(&m, &c, &g, 8, 4096, &b);
    CHECK(a.tp_comm > 0 && a.tp_comm == b.tp_comm, "TP comm %.4f vs %.4f", a.tp_comm, b.tp_comm);
    /* a layout that stays under one leaf does not change at all */
    set_spine(&c, 1);
    double l1 = step_of(&m, &c, &g, 8, 64, &a);
    set_spine(&c, 4);
    double l4 = step_of(&m, &c, &g, 8, 64, &b);
    CHECK(l1 == l4, "64 GPUs under one leaf: %.4f vs %.4f", l1, l4);
}

static void test_gpt3_days_seed_estimate(void) {
    ClusterSpec c; GpuSpec g;
    load_a100(&c, &g);
    SimModel m;
    CHECK(sim_load_model("gpt3-175b", &m) == 0, "%s", myr_last_error());
    Layout l;
    sim_layout_defaults(&l);
    sim_software_preset(&l, "megatron-2021");
    l.tp = 8; l.pp = 8; l.dp = 16; l.seq = 2048; l.global_batch = 1536; l.micro_batch = 0;
    l.recompute = RECOMPUTE_FULL; l.sp = 0;
    SimResult r;
    CHECK(sim_step_search(&m, &c, &g, &l, 0, &r) == 0, "%s", myr_last_error());
    double days = 300e9 / r.tokens_per_s / 86400;
    CHECK(days > 34 * 0.9 && days < 34 * 1.1, "GPT-3 175B, 300B tokens, 1,024 A100: %.1f days (seed: 34)", days);
    double n = sim_model_params(&m);
    CHECK(fabs(6 * n * 300e9 / 1e21 - 315) < 3 && fabs(8 * n * 300e9 / 1e21 - 420) < 4, "ZFLOPs");
}

/* The breakdown accounts for the whole step, whatever the software and schedule. */
static void test_breakdown_sums_to_step(void) {
    ClusterSpec c; GpuSpec g;
    load_a100(&c, &g);
    SimModel m = gpt(48, 8192, 64, 51200, 2048);
    const char *sw[] = {"current", "megatron-2021", "megatron-2022"};
    for (int i = 0; i < 3; i++)
        for (int v = 1; v <= 3; v += 2) {
            Layout l;
            sim_layout_defaults(&l);
            sim_software_preset(&l, sw[i]);
            l.tp = 8; l.pp = 4; l.vpp = v; l.dp = 4; l.seq = 2048; l.global_batch = 128; l.micro_batch = 2;
            l.recompute = RECOMPUTE_FULL;
            SimResult r;
            CHECK(sim_step(&m, &c, &g, &l, &r, NULL) == 0, "%s", myr_last_error());
            double sum = r.forward + r.backward + r.recompute + r.tp_comm + r.cp_comm + r.pp_comm + r.dp_comm + r.ep_comm +
                         r.bubble + r.optimizer;
            CHECK_CLOSE(sum, r.step_time, 1e-9, 0, sw[i]);
            CHECK(r.bubble > 0 && r.pp_comm > 0 && r.dp_comm > 0, "%s: parts present", sw[i]);
        }
}

/* A measured fused cross-entropy (ce_ns_per_logit, from bench calibrate) replaces the memory-bound
 * estimate: loss and gradient in one pass in the forward, T x V logits at the measured rate, nothing
 * in the backward; the rest of the step is unchanged. */
static void test_measured_cross_entropy(void) {
    ClusterSpec c; GpuSpec g;
    load_a100(&c, &g);
    SimModel m = gpt(2, 512, 8, 32000, 1024);
    Layout l;
    sim_layout_defaults(&l);
    sim_software_preset(&l, "myriad");
    l.dtype = DT_FP32; l.seq = 1024; l.global_batch = 4; l.micro_batch = 4;
    SimResult a, b;
    CHECK(sim_step(&m, &c, &g, &l, &a, NULL) == 0, "%s", myr_last_error());
    double logits = 4.0 * 1024 * 32000, mem_f = logits * 12 / (g.hbm_tbps * 1e12 * g.hbm_eff) + g.kernel_us * 1e-6,
           mem_b = logits * 8 / (g.hbm_tbps * 1e12 * g.hbm_eff) + g.kernel_us * 1e-6;
    g.ce_ns_per_logit = 2.0;
    CHECK(sim_step(&m, &c, &g, &l, &b, NULL) == 0, "%s", myr_last_error());
    CHECK_CLOSE(b.forward - a.forward, logits * 2e-9 - mem_f, 1e-6, 1e-9, "forward: the measured pass replaces the estimate");
    CHECK_CLOSE(a.backward - b.backward, mem_b, 1e-6, 1e-9, "backward: no cross-entropy left");
}

static void test_layout_errors_name_the_problem(void) {
    ClusterSpec c; GpuSpec g;
    load_a100(&c, &g);
    SimModel m = gpt(96, 12288, 96, 51200, 2048);
    Layout l;
    sim_layout_defaults(&l);
    l.seq = 2048; l.global_batch = 64; l.tp = 16;
    CHECK(sim_check_layout(&m, &c, &g, &l) == -1, "tp 16");
    CHECK(strstr(myr_last_error(), "tp 16 exceeds the 8-GPU scale-up domain") != NULL, "got '%s'", myr_last_error());
    l.tp = 8; l.pp = 7;
    CHECK(sim_check_layout(&m, &c, &g, &l) == -1 && strstr(myr_last_error(), "does not divide the 96 layers"), "%s", myr_last_error());
    l.pp = 1; l.dtype = DT_FP8;
    CHECK(sim_check_layout(&m, &c, &g, &l) == -1 && strstr(myr_last_error(), "no fp8"), "%s", myr_last_error());
}

static void test_malformed_json_reports_file_line_and_expectation(void) {
    char path[] = "/tmp/myriad-sim-test-XXXXXX.json";
    int fd = mkstemps(path, 5);
    CHECK(fd >= 0, "mkstemps");
    const char *text = "{\n  \"name\": \"bad\",\n  \"layers\": 2,\n}\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
    close(fd);
    SimModel m;
    CHECK(sim_load_model(path, &m) == -1, "must fail");
    char want[256];
    snprintf(want, sizeof want, "%s:4:1: malformed JSON: expected", path);
    CHECK(strstr(myr_last_error(), want) != NULL, "got '%s'", myr_last_error());
    CHECK(strstr(myr_last_error(), "trailing comma") != NULL, "got '%s'", myr_last_error());
    /* a missing comma is found where it is missing */
    FILE *f = fopen(path, "w");
    fputs("{\"layers\": 2\n \"hidden\": 64}\n", f);
    fclose(f);
    snprintf(want, sizeof want, "%s:2:2: malformed JSON: expected ',' or '}'", path);
    CHECK(sim_load_model(path, &m) == -1 && strstr(myr_last_error(), want), "got '%s'", myr_last_error());
    /* well-formed but a field of the wrong type */
    f = fopen(path, "w");
    fputs("{\"layers\": \"many\", \"hidden\": 64, \"heads\": 4, \"vocab\": 10}\n", f);
    fclose(f);
    CHECK(sim_load_model(path, &m) == -1 && strstr(myr_last_error(), "\"layers\" must be a number"), "got '%s'", myr_last_error());
    /* a misspelt field is an error, not a silent default */
    f = fopen(path, "w");
    fputs("{\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"vocab\": 10, \"kv_head\": 2}\n", f);
    fclose(f);
    CHECK(sim_load_model(path, &m) == -1 && strstr(myr_last_error(), "unknown field \"kv_head\""), "got '%s'", myr_last_error());
    unlink(path);
}

static void test_trace_has_one_lane_per_stage(void) {
    ClusterSpec c; GpuSpec g;
    load_a100(&c, &g);
    SimModel m = gpt(8, 1024, 16, 1000, 512);
    Layout l;
    sim_layout_defaults(&l);
    l.pp = 4; l.vpp = 2; l.seq = 512; l.global_batch = 8; l.micro_batch = 1;
    const char *path = "/tmp/myriad-sim-test-trace.json";
    TraceWriter *t = trace_open(path);
    SimResult r;
    CHECK(t && sim_step(&m, &c, &g, &l, &r, t) == 0 && trace_close(t) == 0, "%s", myr_last_error());
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *root = cJSON_Parse(buf);
    CHECK(root != NULL, "trace is JSON");
    int x = 0, lanes = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(root, "traceEvents")) {
        const char *ph = cJSON_GetObjectItem(ev, "ph")->valuestring;
        if (!strcmp(ph, "X")) x++;
        if (!strcmp(ph, "M") && !strcmp(cJSON_GetObjectItem(ev, "name")->valuestring, "thread_name")) lanes++;
    }
    /* 4 stages x 8 micro-batches x 2 chunks x (F + B) + DP/optimizer events for stages 0, 1, 3 */
    CHECK(x == 4 * 8 * 2 * 2 + 3, "%d complete events", x);
    CHECK(lanes == 4 + 1, "%d lanes", lanes);
    cJSON_Delete(root);
    free(buf);
    unlink(path);
}

static void test_moe_and_context_parallel_costs(void) {
    SimModel m;
    ClusterSpec c;
    GpuSpec g;
    CHECK(sim_load_model("mixtral-8x7b", &m) == 0 && sim_load_cluster("h100-ib", &c) == 0 && sim_load_gpu("h100-sxm", &g) == 0,
          "%s", myr_last_error());
    CHECK(fabs(sim_model_params(&m) / 1e9 - 46.7) < 0.3, "Mixtral total %.2f B", sim_model_params(&m) / 1e9);
    CHECK(fabs(sim_model_active_params(&m) / 1e9 - 12.9) < 0.3, "Mixtral active %.2f B", sim_model_active_params(&m) / 1e9);
    Layout l;
    sim_layout_defaults(&l);
    l.tp = 2; l.ep = 8; l.dp = 64; l.seq = 4096; l.global_batch = 512; l.micro_batch = 1;
    SimResult r;
    CHECK(sim_step(&m, &c, &g, &l, &r, NULL) == 0, "%s", myr_last_error());
    CHECK(r.ep_comm > 0, "expert all-to-all costs time");
    l.ep = 3;
    CHECK(sim_step(&m, &c, &g, &l, &r, NULL) == -1 && strstr(myr_last_error(), "ep 3"), "%s", myr_last_error());
    /* context parallelism halves the attention work per GPU and holds half the activations */
    SimModel d;
    CHECK(sim_load_model("llama3-8b", &d) == 0, "%s", myr_last_error());
    Layout a;
    sim_layout_defaults(&a);
    a.seq = 32768; a.tp = 8; a.dp = 2; a.global_batch = 2; a.micro_batch = 1;
    Layout b = a;
    b.cp = 2; b.dp = 1;
    SimResult ra, rb;
    CHECK(sim_step(&d, &c, &g, &a, &ra, NULL) == 0 && sim_step(&d, &c, &g, &b, &rb, NULL) == 0, "%s", myr_last_error());
    CHECK_CLOSE(rb.mem.activations, ra.mem.activations / 2, 0.01, 0, "cp activations");
    /* PyTorch's ring attention (torchtitan): the K/V all-gather (of all query heads, across nodes
     * here) outlasts the first block, the fp32 merges add memory-bound forward time, the gathered
     * K/V takes memory */
    Layout t = b;
    t.cp_torch = 1;
    SimResult rt;
    CHECK(sim_step(&d, &c, &g, &t, &rt, NULL) == 0, "%s", myr_last_error());
    CHECK(rt.cp_comm > rb.cp_comm && rt.cp_comm > 0, "torch cp exposes its all-gather: %g vs %g s", rt.cp_comm, rb.cp_comm);
    CHECK(rt.forward > rb.forward, "fp32 merges cost forward time: %g vs %g s", rt.forward, rb.forward);
    CHECK_CLOSE(rt.mem.activations, rb.mem.activations, 1e-9, 0, "same activations");
    CHECK(rt.mem.total > rb.mem.total, "gathered K/V buffer: %g vs %g", rt.mem.total, rb.mem.total);
    /* myriad train's ring (--software myriad): each backward step's fp32 dK/dV hop is waited for,
     * cp hops per layer that no attention block hides, where the K/V hops of the rest hide */
    Layout s = b;
    s.cp_dkv_serial = 1;
    SimResult rs;
    CHECK(sim_step(&d, &c, &g, &s, &rs, NULL) == 0, "%s", myr_last_error());
    CHECK(rb.cp_comm < 1e-9 && rs.cp_comm > 0, "serial dK/dV hops exposed: %g vs %g s", rs.cp_comm, rb.cp_comm);
    CHECK_CLOSE(rs.forward, rb.forward, 1e-9, 0, "forward unchanged");
}

/* TE userbuffers with set_sm_margin: the output-projection and fc2 forward GEMMs run on the SMs the
 * overlapped reduce-scatter kernel leaves, sms / (sms - num_sm) longer (hand-computed from the GEMM
 * times); nothing changes without TP overlap or for the backward */
static void test_tp_overlap_sm_margin(void) {
    SimModel m = gpt(96, 12288, 96, 50257, 2048);
    ClusterSpec c;
    GpuSpec g;
    CHECK(sim_load_cluster("h100-ib", &c) == 0 && sim_load_gpu("h100-sxm", &g) == 0, "%s", myr_last_error());
    Network net;
    sim_network(&c, &g, &net);
    Layout l;
    sim_layout_defaults(&l);
    l.tp = 4; l.sp = 1; l.tp_overlap = 1; l.seq = 2048; l.dtype = DT_BF16;
    LayerCost a, b;
    sim_layer_cost(&m, &g, &net, &l, 1, &a);
    l.ub_sm_proj = 24; l.ub_sm_fc2 = 20;
    sim_layer_cost(&m, &g, &net, &l, 1, &b);
    double T = 2048, h = 12288, t = 4;
    double proj = sim_gemm_time(&g, DT_BF16, T, h, h / t, 1), fc2 = sim_gemm_time(&g, DT_BF16, T, h, 4 * h / t, 1);
    double want = proj * (g.sms / (g.sms - 24.0) - 1) + fc2 * (g.sms / (g.sms - 20.0) - 1);
    CHECK(g.sms == 132, "H100 SXM has 132 SMs: %d", g.sms);
    CHECK_CLOSE(b.gemm_f - a.gemm_f, want, 1e-9, 0, "forward GEMMs longer by the SMs the reduce-scatter holds");
    CHECK_CLOSE(b.gemm_b, a.gemm_b, 1e-12, 0, "backward unchanged");
    l.tp_overlap = 0;
    sim_layer_cost(&m, &g, &net, &l, 1, &b);
    l.ub_sm_proj = 0; l.ub_sm_fc2 = 0;
    sim_layer_cost(&m, &g, &net, &l, 1, &a);
    CHECK_CLOSE(b.gemm_f, a.gemm_f, 1e-12, 0, "no margin without TP overlap");
}

static void test_validation_sets(void) {
    const char *step = "../shared/validation/published_a100.csv", *mem = "../shared/validation/memory_a100.csv";
    FILE *devnull = fopen("/dev/null", "w");
    double med, mx;
    CHECK(sim_validate_file(step, 0, devnull, &med, &mx) == 0, "%s", myr_last_error());
    CHECK(med <= 0.05 && mx <= 0.15, "step time: median %.1f%%, max %.1f%%", 100 * med, 100 * mx);
    printf("# published_a100: median %.1f%% max %.1f%%\n", 100 * med, 100 * mx);
    CHECK(sim_validate_file(mem, 0, devnull, &med, &mx) == 0, "%s", myr_last_error());
    CHECK(med <= 0.05, "memory: median %.1f%%", 100 * med);
    printf("# memory_a100: median %.1f%% max %.1f%%\n", 100 * med, 100 * mx);
    fclose(devnull);
}

/* The product's table of the best validated MFU per GPU family, software and precision
 * (validated.c) is what the validation sets give, class by class. */
static void test_validated_table_matches_sets(void) {
    ValCase *cases = NULL;
    int n = 0;
    CHECK(sim_validate_load("../shared/validation/published_modern.csv", &cases, &n) == 0 &&
              sim_validate_load("../shared/validation/published_a100.csv", &cases, &n) == 0, "%s", myr_last_error());
    struct { const char *fam, *sw; int fp8; double mfu; } best[64];
    int nb = 0;
    for (int i = 0; i < n; i++) {
        ValPrepared p;
        SimResult r;
        if (val_prepare(&cases[i], &p) || val_simulate(&p, NULL, &r, NULL)) continue;
        double mfu = r.mfu * r.step_time / cases[i].measured_s;
        const char *fam = sim_gpu_family(cases[i].gpu_name);
        int fp8 = cases[i].l.dtype == DT_FP8, k = 0;
        const char *sw = sim_software_class(cases[i].software);
        while (k < nb && !(!strcmp(best[k].fam, fam) && !strcmp(best[k].sw, sw) && best[k].fp8 == fp8)) k++;
        if (k == nb) best[nb++] = (typeof(best[0])){fam, sw, fp8, 0};
        if (mfu > best[k].mfu) best[k].mfu = mfu;
    }
    for (int k = 0; k < nb; k++) {
        const char *gpu = !strcmp(best[k].fam, "a100") ? "a100-80g" : !strcmp(best[k].fam, "h100") ? "h100-sxm" : best[k].fam;
        int exact;
        double t = sim_validated_mfu(gpu, best[k].sw, best[k].fp8, NULL, &exact);
        CHECK(exact && fabs(t - best[k].mfu) < 0.002, "%s %s fp8 %d: table %.4f, sets %.4f", best[k].fam, best[k].sw,
              best[k].fp8, t, best[k].mfu);
    }
    CHECK(nb >= 10, "%d classes", nb);
    free(cases);
}

/* The flags an answer carries: few micro-batches, a bubble above 25%, an MFU above the validated. */
static void test_result_flags(void) {
    Layout l;
    sim_layout_defaults(&l);
    l.pp = 16; l.dp = 8;
    SimResult r = {0};
    r.microbatches = 4; r.micro_batch = 1; r.step_time = 10; r.bubble = 3; r.mfu = 0.30;
    int f = sim_result_flags("h100-sxm", "megatron-core", &l, &r);
    CHECK(f == (SIM_WARN_FEW_MB | SIM_WARN_BUBBLE), "flags %d", f);
    char w[512];
    sim_result_warning(SIM_WARN_FEW_MB, "h100-sxm", "megatron-core", &l, &r, w, sizeof w);
    CHECK(strstr(w, "4 micro-batches for 16 pipeline stages") && strstr(w, "--global-batch 128 or more"), "%s", w);
    r.microbatches = 16; r.bubble = 2; r.mfu = 0.60;
    f = sim_result_flags("h100-sxm", "megatron-core", &l, &r);
    CHECK(f == SIM_WARN_MFU, "flags %d", f);
    sim_result_warning(SIM_WARN_MFU, "h100-sxm", "megatron-core", &l, &r, w, sizeof w);
    CHECK(strstr(w, "above the best validated 16-bit run of megatron-core on h100-sxm (49.4%"), "%s", w);
    CHECK(sim_result_flags("a100-80g", "megatron-core", &l, &r) == SIM_WARN_MFU, "no A100 megatron-core run");
    r.mfu = 0.1;
    CHECK(sim_result_flags("a100-80g", "megatron-core", &l, &r) == SIM_WARN_MFU, "unvalidated even when slow");
    CHECK(sim_result_flags("a100-80g", "megatron-2022", &l, &r) == 0, "validated class, below its best");
    CHECK(sim_result_flags("my-cpu", "myriad", &l, &r) == 0, "no table for other devices");
}

int main(void) {
    RUN(test_param_count_matches_closed_formula);
    RUN(test_step_flops_match_narayanan_formula);
    RUN(test_alpha_beta_collectives_by_hand);
    RUN(test_pipeline_makespans);
    RUN(test_zero_memory_matches_paper);
    RUN(test_activation_memory_formulas);
    RUN(test_young_daly_worked_example);
    RUN(test_goodput_spares_and_in_memory);
    RUN(test_fat_tree_counts);
    RUN(test_gemm_efficiency_depends_on_shape);
    RUN(test_network_levels_by_hand);
    RUN(test_planner_ranks_fitting_layouts);
    RUN(test_oversubscription_slows_dp_not_tp);
    RUN(test_gpt3_days_seed_estimate);
    RUN(test_breakdown_sums_to_step);
    RUN(test_measured_cross_entropy);
    RUN(test_layout_errors_name_the_problem);
    RUN(test_malformed_json_reports_file_line_and_expectation);
    RUN(test_trace_has_one_lane_per_stage);
    RUN(test_moe_and_context_parallel_costs);
    RUN(test_tp_overlap_sm_margin);
    RUN(test_result_flags);
    if (access("../shared/validation/published_modern.csv", R_OK) || access("../shared/validation/published_a100.csv", R_OK))
        SKIP(test_validated_table_matches_sets, "../shared/validation not present");
    else
        RUN(test_validated_table_matches_sets);
    if (access("../shared/validation/published_a100.csv", R_OK) || access("../shared/validation/memory_a100.csv", R_OK))
        SKIP(test_validation_sets, "../shared/validation not present");
    else
        RUN(test_validation_sets);
    return TEST_SUMMARY();
}
