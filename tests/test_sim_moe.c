/* test_sim_moe.c: today's MoE models in the simulator (issue 29, item 3), against hand-computed
 * cases: the parameter counts of the DeepSeek-V3, Mixtral 8x22B and Qwen2-57B-A14B configs against
 * their reports, multi-head latent attention's weights and FLOPs, dense first layers and shared
 * experts, the busiest rank's expert load, two-stage (DeepEP) dispatch with node-limited routing
 * against the flat all-to-all, fp8 blockwise casts, and the DeepSeek-V3 layout (2,048 H800, pp 16,
 * ep 64, fp8 blockwise, DualPipe): accepted, simulated, its all-to-all hidden by DualPipe and not
 * by 1F1B unless the 1F1B overlap is asked for. No ../shared needed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "test.h"
#include "util/error.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static void load_model(const char *name, SimModel *m) {
    if (sim_load_model(name, m)) { fprintf(stderr, "%s\n", myr_last_error()); exit(1); }
}

/* Totals the reports give: DeepSeek-V3 671B / 37B activated (+ the MTP module), Mixtral 8x22B
 * 141B / 39B, Qwen2-57B-A14B 57B / 14B. */
static void test_moe_configs_match_reports(void) {
    SimModel m;
    load_model("deepseek-v3", &m);
    SimModel main_only = m;
    main_only.mtp = 0;
    CHECK_CLOSE(sim_model_params(&main_only), 671e9, 0.01, 0, "DeepSeek-V3 total");
    CHECK_CLOSE(sim_model_active_params(&main_only), 37e9, 0.03, 0, "DeepSeek-V3 activated");
    CHECK(sim_model_params(&m) > sim_model_params(&main_only) + 10e9, "the MTP module adds a layer: %g", sim_model_params(&m));
    CHECK(sim_moe_layers(&m) == 58 && sim_layer_is_moe(&m, 3) && !sim_layer_is_moe(&m, 2), "3 dense layers");
    load_model("mixtral-8x22b", &m);
    CHECK_CLOSE(sim_model_params(&m), 141e9, 0.01, 0, "Mixtral 8x22B total");
    CHECK_CLOSE(sim_model_active_params(&m), 39e9, 0.02, 0, "Mixtral 8x22B active");
    load_model("qwen2-57b-a14b", &m);
    CHECK_CLOSE(sim_model_params(&m), 57e9, 0.02, 0, "Qwen2-57B total");
    CHECK_CLOSE(sim_model_active_params(&m), 14e9, 0.03, 0, "Qwen2-57B active");
}

/* MLA by hand: q 7168x1536 + 1536 (norm) + 1536x128x192, kv 7168x576 + 512 + 512x128x256, out
 * 128x128x7168; attention core 2 s^2 heads (192 + 128) FLOPs per sequence, non-causal count. */
static void test_mla_by_hand(void) {
    SimModel m;
    load_model("deepseek-v3", &m);
    double q = 7168.0 * 1536 + 1536 + 1536.0 * 128 * 192, kv = 7168.0 * 576 + 512 + 512.0 * 128 * 256, o = 128.0 * 128 * 7168;
    CHECK_CLOSE(sim_attn_params(&m), q + kv + o, 1e-12, 0, "MLA weights");
    double s = 4096;
    double dense = sim_layer_fwd_flops(&m, s, 0), moe = sim_layer_fwd_flops(&m, s, 1);
    double attn_w = q + kv + o - 1536 - 512;
    CHECK_CLOSE(dense, 2 * s * (attn_w + 3.0 * 7168 * 18432) + 2 * s * s * 128 * (192 + 128), 1e-12, 0, "dense layer FLOPs");
    CHECK_CLOSE(moe, 2 * s * (attn_w + 3.0 * 7168 * 2048 * 9 + 7168.0 * 256) + 2 * s * s * 128 * 320, 1e-12, 0,
                "MoE layer FLOPs: 8 routed + 1 shared expert + router");
}

/* The busiest rank's tokens: ep 1 holds every expert (exactly top_k per token), ep = E waits for the
 * busiest expert, in between the finite-population factor sqrt((ep - 1)/(E - 1)). */
static void test_moe_load(void) {
    SimModel m;
    load_model("mixtral-8x22b", &m);
    Layout l;
    sim_layout_defaults(&l);
    l.moe_imbalance = 1.4;
    l.ep = 1;
    CHECK_CLOSE(sim_moe_load(&m, &l), 1.0, 1e-12, 0, "ep 1");
    l.ep = 8;
    CHECK_CLOSE(sim_moe_load(&m, &l), 1.4, 1e-12, 0, "ep = experts");
    l.ep = 4;
    CHECK_CLOSE(sim_moe_load(&m, &l), 1 + 0.4 * sqrt(3.0 / 7), 1e-12, 0, "ep 4");
    l.capacity_factor = 1.25;
    CHECK_CLOSE(sim_moe_load(&m, &l), 1.25, 1e-12, 0, "capacity factor pads every expert");
}

/* Dispatch over 8 nodes of 8 GPUs, top-8: the flat all-to-all sends each token-expert pair (7/8 of
 * them leave the node); two-stage sends a token once per remote node it needs, then NVLink; with
 * node-limited routing (4 nodes) fewer. By hand on a 2-level network. */
static void test_two_stage_dispatch(void) {
    ClusterSpec c;
    GpuSpec g;
    if (sim_load_cluster("h800-multiplane", &c) || sim_load_gpu("h800", &g)) { fprintf(stderr, "%s\n", myr_last_error()); exit(1); }
    Network n;
    sim_network(&c, &g, &n);
    Group eg = {64, 1};
    double T = 4096, tb = 7168;
    double flat = sim_ep_dispatch_time(&n, eg, T, tb, 8, 0, 0);
    double two = sim_ep_dispatch_time(&n, eg, T, tb, 8, 0, 1), lim = sim_ep_dispatch_time(&n, eg, T, tb, 8, 4, 1);
    int m0;
    int L = sim_group_level(&n, eg, &m0);
    CHECK(m0 == 8 && L >= 1, "8 GPUs per node, across nodes: %d, level %d", m0, L);
    double D = 8 * (1 - pow(7.0 / 8, 8));
    double ib = T * D * 7 / 8 * tb / n.bw[L], nvl = T * 8 * tb * 7 / 8 / n.bw[0];
    CHECK_CLOSE(two, fmax(ib, nvl) + n.alpha[L] + n.alpha[0], 1e-9, 0, "two-stage by hand");
    double ib4 = T * 4 * 7.0 / 8 * tb / n.bw[L];
    CHECK_CLOSE(lim, fmax(ib4, nvl) + n.alpha[L] + n.alpha[0], 1e-9, 0, "node-limited to 4 nodes");
    CHECK(flat > two && two > lim, "flat %g > two-stage %g > node-limited %g", flat, two, lim);
}

static void deepseek_layout(Layout *l, const char *schedule) {
    sim_layout_defaults(l);
    sim_software_preset(l, "deepseek");
    l->tp = 1; l->pp = 16; l->dp = 128; l->ep = 64; l->seq = 4096;
    l->global_batch = 15360; l->micro_batch = 1;
    l->dtype = DT_FP8;
    l->first_layers = 3; l->last_layers = 2;
    if (!strcmp(schedule, "1f1b")) l->schedule = SCHED_1F1B;
}

/* Acceptance 2: DeepSeek-V3 on 2,048 H800 (pp 16, ep 64, fp8 blockwise, DualPipe) is accepted and
 * simulated; the breakdown says how much all-to-all is hidden; the overlap is DualPipe's: 1F1B hides
 * none of it, 1F1B with the a2a overlap hides its steady phase. */
static void test_deepseek_v3_layout(void) {
    SimModel m;
    load_model("deepseek-v3", &m);
    ClusterSpec c;
    GpuSpec g;
    if (sim_load_cluster("h800-multiplane", &c) || sim_load_gpu("h800", &g)) { fprintf(stderr, "%s\n", myr_last_error()); exit(1); }
    Layout l;
    deepseek_layout(&l, "dualpipe");
    CHECK(l.fp8_scaling == FP8_BLOCKWISE && l.schedule == SCHED_DUALPIPE && l.ep_a2a, "the deepseek preset");
    SimResult dual, one, ovl;
    CHECK(sim_check_layout(&m, &c, &g, &l) == 0, "%s", myr_last_error());
    CHECK(sim_step(&m, &c, &g, &l, &dual, NULL) == 0, "%s", myr_last_error());
    CHECK(dual.mem.total < 80 * GIB, "fits in 80 GB: %.1f GiB", dual.mem.total / GIB);
    CHECK(dual.ep_total > 0 && dual.ep_hidden > 0.9 * dual.ep_total, "DualPipe hides the all-to-all: %g of %g s",
          dual.ep_hidden, dual.ep_total);
    double sum = dual.forward + dual.backward + dual.recompute + dual.tp_comm + dual.cp_comm + dual.pp_comm + dual.dp_comm +
                 dual.ep_comm + dual.bubble + dual.optimizer;
    CHECK_CLOSE(sum, dual.step_time, 1e-6, 0, "the breakdown sums to the step");
    deepseek_layout(&l, "1f1b");
    CHECK(sim_step(&m, &c, &g, &l, &one, NULL) == 0, "%s", myr_last_error());
    CHECK(one.ep_total > 0 && one.ep_hidden == 0, "1F1B hides nothing: %g", one.ep_hidden);
    l.ep_overlap = 1;
    CHECK(sim_step(&m, &c, &g, &l, &ovl, NULL) == 0, "%s", myr_last_error());
    CHECK(ovl.ep_hidden > 0 && ovl.ep_hidden < dual.ep_hidden, "1F1B overlap hides its steady phase: %g (DualPipe %g)",
          ovl.ep_hidden, dual.ep_hidden);
    CHECK(dual.step_time < one.step_time, "DualPipe faster: %g vs %g s", dual.step_time, one.step_time);
    /* DualPipe keeps two stages per device: the mirror stage's parameters too */
    CHECK(dual.mem.weights > 1.5 * one.mem.weights, "parameters x2: %g vs %g", dual.mem.weights, one.mem.weights);
    /* odd pp and odd micro-batch counts are refused with the way out */
    deepseek_layout(&l, "dualpipe");
    l.pp = 15; l.dp = 128; l.first_layers = 5; l.last_layers = 0;
    CHECK(sim_check_layout(&m, &c, &g, &l) == -1 && strstr(myr_last_error(), "even pp"), "%s", myr_last_error());
}

/* fp8 blockwise (1x128 / 128x128): casts without norm fusion, the gradient quantized twice and the
 * saved input re-quantized transposed; TE's delayed scaling fuses the cast into the norm. */
static void test_fp8_blockwise_casts(void) {
    SimModel m;
    load_model("llama3-8b", &m);
    ClusterSpec c;
    GpuSpec g;
    if (sim_load_cluster("h100-ib", &c) || sim_load_gpu("h100-sxm", &g)) { fprintf(stderr, "%s\n", myr_last_error()); exit(1); }
    Network n;
    sim_network(&c, &g, &n);
    Layout l;
    sim_layout_defaults(&l);
    l.seq = 8192; l.dtype = DT_FP8; l.dp = 8; l.global_batch = 8;
    LayerCost d, b;
    sim_layer_cost(&m, &g, &n, &l, 1, &d);
    l.fp8_scaling = FP8_BLOCKWISE;
    sim_layer_cost(&m, &g, &n, &l, 1, &b);
    /* forward: every GEMM input quantized at 2 + 1 + 4/128 bytes per element, one kernel each (the amax is the tile's) */
    double T = 8192, K[4] = {4096, 4096, 4096, 14336}, want = 0;
    for (int i = 0; i < 4; i++) want += sim_membound_time(&g, (3.0 + 4.0 / 128) * T * K[i], 1);
    CHECK_CLOSE(b.fp8_f, want, 1e-9, 0, "blockwise forward casts by hand");
    CHECK(b.fp8_b > d.fp8_b, "blockwise backward quantizes twice and re-quantizes the input: %g vs %g", b.fp8_b, d.fp8_b);
    CHECK_CLOSE(b.gemm_f, d.gemm_f, 1e-12, 0, "same GEMM rate");
}

int main(void) {
    RUN(test_moe_configs_match_reports);
    RUN(test_mla_by_hand);
    RUN(test_moe_load);
    RUN(test_two_stage_dispatch);
    RUN(test_deepseek_v3_layout);
    RUN(test_fp8_blockwise_casts);
    return TEST_SUMMARY();
}
