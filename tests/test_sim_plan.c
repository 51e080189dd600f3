/* test_sim_plan.c: the simulator's newer mechanisms against hand-computed cases (no ../shared
 * needed): uneven pipeline splits, the memory model (ZeRO 1 over dp x cp, FSDP, fp8 weight copies,
 * the allocator reserve, uneven interleaved chunks), cluster sizing and the default cluster, fp8 vs
 * bf16, Megatron's FLOP convention, hot-spare defaults, and the planner: every layout flag fixes its
 * dimension, the memory headroom holds, and "nothing fits" names the binding constraint. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "test.h"
#include "util/error.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static SimModel llama(int layers, int hidden, int heads, int kv, int ffn, int vocab, int seq) {
    SimModel m = {0};
    snprintf(m.name, sizeof m.name, "llama-test");
    sim_model_set_arch(&m, ARCH_LLAMA);
    m.layers = layers; m.hidden = hidden; m.heads = heads; m.kv_heads = kv; m.ffn = ffn; m.vocab = vocab; m.seq = seq;
    m.top_k = 1;
    return m;
}

static void load(const char *cluster, const char *gpu, ClusterSpec *c, GpuSpec *g) {
    if (sim_load_cluster(cluster, c) || sim_load_gpu(gpu, g)) { fprintf(stderr, "%s\n", myr_last_error()); exit(1); }
    c->gpus = 0;
}

/* Megatron-LM's --decoder-first/last-pipeline-num-layers and account_for_embedding/loss split. */
static void test_uneven_stage_splits(void) {
    SimModel m = llama(126, 16384, 128, 8, 53248, 128256, 8192);
    Layout l;
    sim_layout_defaults(&l);
    l.pp = 16; l.first_layers = 7; l.last_layers = 7;
    int c[128];
    CHECK(sim_vstage_layers(&m, &l, c) == 0, "%s", myr_last_error());
    CHECK(c[0] == 7 && c[15] == 7 && c[1] == 8 && c[14] == 8, "pp16: %d %d %d %d", c[0], c[1], c[14], c[15]);
    /* NeMo's 405B: pp 8 x vpp 8 with the embedding and the loss taking a layer's slot: the first
     * and the last virtual stage hold 1 layer, all others 2 */
    l.pp = 8; l.vpp = 8; l.first_layers = 15; l.last_layers = 15;
    CHECK(sim_vstage_layers(&m, &l, c) == 0, "%s", myr_last_error());
    CHECK(c[0] == 1 && c[63] == 1, "first %d last %d", c[0], c[63]);
    int ones = 0, sum = 0;
    for (int k = 0; k < 64; k++) { ones += c[k] == 1; sum += c[k]; }
    CHECK(ones == 2 && sum == 126, "%d one-layer chunks, %d layers", ones, sum);
    /* an explicit list, as myriad train takes it */
    Layout e;
    sim_layout_defaults(&e);
    e.pp = 2;
    CHECK(sim_parse_stage_list("60,66", &e) == 0 && sim_vstage_layers(&m, &e, c) == 0 && c[0] == 60 && c[1] == 66, "list");
    CHECK(sim_parse_stage_list("60,65", &e) == 0 && sim_vstage_layers(&m, &e, c) == -1 &&
              strstr(myr_last_error(), "adds up to 125 layers but the model has 126"), "%s", myr_last_error());
    /* even split refused with the way out named */
    Layout v;
    sim_layout_defaults(&v);
    v.pp = 16;
    CHECK(sim_vstage_layers(&m, &v, c) == -1 && strstr(myr_last_error(), "--first-stage-layers"), "%s", myr_last_error());
    /* the stage's memory follows its layers: the first stage holds 7 layers + the embedding */
    double d0, e0, d1, e1;
    l.pp = 16; l.vpp = 1; l.first_layers = 7; l.last_layers = 7; l.tp = 8;
    sim_stage_params_split(&m, &l, 0, &d0, &e0);
    sim_stage_params_split(&m, &l, 1, &d1, &e1);
    double layer = sim_model_layer_params(&m) / 8, emb = 128256.0 * 16384 / 8;
    CHECK_CLOSE(d0, 7 * layer + emb, 1e-12, 0, "first stage");
    CHECK_CLOSE(d1, 8 * layer, 1e-12, 0, "middle stage");
}

/* ZeRO 1 shards the optimizer over dp x cp; FSDP (torch) keeps fp32 shards and gathered layers. */
static void test_memory_zero_over_dp_cp_and_fsdp(void) {
    SimModel m = llama(8, 1024, 16, 16, 2816, 32000, 4096);
    Layout l;
    sim_layout_defaults(&l);
    l.seq = 4096; l.cp = 2; l.dp = 4; l.global_batch = 4; l.micro_batch = 1; l.recompute = RECOMPUTE_FULL;
    SimMemory mem;
    sim_memory(&m, &l, &mem);
    double P = sim_model_params(&m);
    CHECK_CLOSE(mem.optimizer, 12.0 * P / 8, 1e-12, 0, "zero 1 over dp x cp = 8");
    CHECK_CLOSE(mem.weights, 2.0 * P, 1e-12, 0, "bf16 weights");
    CHECK_CLOSE(mem.grads, 4.0 * P, 1e-12, 0, "fp32 main gradients");
    /* full recompute keeps the layer input: 2 bytes x (4096/2 tokens) x hidden per layer, 8 layers */
    CHECK_CLOSE(mem.activations, 2.0 * 2048 * 1024 * 8, 1e-12, 0, "activations with cp 2");
    /* the allocator reserve: 5% of what is allocated and freed per micro-batch */
    CHECK_CLOSE(mem.reserve, 0.05 * (mem.activations + mem.comm_buffers - GIB), 1e-9, 0, "reserve");
    CHECK_CLOSE(mem.total, mem.weights + mem.grads + mem.optimizer + mem.fp8_copies + mem.activations + mem.comm_buffers +
                               mem.reserve, 1e-12, 0, "total");
    /* torchtitan FSDP over 8 ranks: fp32 shards of weights (4), gradients (4), Adam m, v (8) */
    Layout f = l;
    sim_software_preset(&f, "torchtitan");
    f.cp = 1; f.dp = 8; f.global_batch = 8; f.recompute = RECOMPUTE_NONE;
    sim_memory(&m, &f, &mem);
    CHECK_CLOSE(mem.weights, 4.0 * P / 8, 1e-12, 0, "fsdp weights");
    CHECK_CLOSE(mem.grads, 4.0 * P / 8, 1e-12, 0, "fsdp grads");
    CHECK_CLOSE(mem.optimizer, 8.0 * P / 8, 1e-12, 0, "fsdp m, v");
    /* two gathered layers (bf16) and one layer's gradients (bf16 + fp32) in flight, fp32 logits */
    double layer = sim_model_layer_params(&m);
    CHECK_CLOSE(mem.comm_buffers, GIB + 2.0 * 2 * layer + (2.0 + 4.0) * layer + 4.0 * 4096 * 32000, 1e-12, 0, "buffers");
}

/* Transformer Engine keeps each fp8 GEMM's cast weight and its transpose: 2 bytes per weight. */
static void test_memory_fp8_copies_and_activations(void) {
    SimModel m = llama(4, 2048, 16, 16, 5632, 32000, 2048);
    Layout l;
    sim_layout_defaults(&l);
    l.seq = 2048; l.global_batch = 1; l.micro_batch = 1; l.recompute = RECOMPUTE_NONE; l.dtype = DT_FP8;
    SimMemory mem;
    sim_memory(&m, &l, &mem);
    double h = 2048, f = 5632;
    double linears = 4 * (h * 3 * h + h * h + 3 * h * f);
    CHECK_CLOSE(mem.fp8_copies, 2.0 * linears, 1e-12, 0, "fp8 weight + transpose");
    /* fp8 saves the QKV, fc1 and fc2 inputs as 1-byte copies: per layer (bytes, sbh = s h):
     * norm inputs 4, QKV + fc1 inputs 2 (4 in bf16), Q 2, K V 4, output projection input 2 + its
     * fp8 copy 1, fc1 output 4 sbf, fc2 input 1 sbf (2 in bf16), softmax statistics */
    double s = 2048, sbh = s * h, sbf = s * f;
    double fp8 = 4 * sbh + 2 * sbh + 2 * sbh + 4 * sbh + 2 * sbh + sbh + 4 * sbf + sbf + 4.0 * 16 * s;
    CHECK_CLOSE(sim_layer_activation_bytes(&m, &l, 1), fp8, 1e-12, 0, "fp8 layer activations");
    l.dtype = DT_BF16;
    double bf16 = 4 * sbh + 4 * sbh + 2 * sbh + 4 * sbh + 2 * sbh + 4 * sbf + 2 * sbf + 4.0 * 16 * s;
    CHECK_CLOSE(sim_layer_activation_bytes(&m, &l, 1), bf16, 1e-12, 0, "bf16 layer activations");
    sim_memory(&m, &l, &mem);
    CHECK(mem.fp8_copies == 0, "no fp8 copies in bf16");
}

/* Interleaved chunks of unequal size: the peak is walked in schedule order. p = 2, v = 2, m = 2,
 * chunk layers [1, 2 | 2, 1] (k = chunk * p + stage): stage 0 runs F(0,c0) F(1,c0) F(0,c1) then
 * B...; warm-up 2(p-s-1) + (v-1)p = 4 forwards: 1 + 1 + 2 + 2 = 6 layers held. */
static void test_uneven_interleaved_peak(void) {
    double w[4] = {1, 2, 2, 1};
    CHECK_CLOSE(sim_pipeline_peak_weight(2, 2, 2, SCHED_INTERLEAVED, 0, w), 6, 1e-12, 0, "stage 0");
    /* stage 1: warm-up (v-1)p = 2 forwards: F(0,c0)=2, F(1,c0)=2, then F(0,c1)=1 before B: 5 */
    CHECK_CLOSE(sim_pipeline_peak_weight(2, 2, 2, SCHED_INTERLEAVED, 1, w), 5, 1e-12, 0, "stage 1");
}

/* More GPUs than a cluster file holds: the same design with more nodes, tiers added by the radix. */
static void test_cluster_sizing(void) {
    ClusterSpec c;
    CHECK(sim_load_cluster("h100-ib", &c) == 0, "%s", myr_last_error());
    char note[256];
    CHECK(sim_cluster_fit(&c, 16384, note, sizeof note) == 0 && note[0] == 0 && c.ntiers == 3, "fits as is: '%s'", note);
    /* 3 tiers of 64 ports: 32 x 32 x 64 = 65,536 NIC ports; 100,000 GPUs need a fourth */
    CHECK(sim_cluster_fit(&c, 100000, note, sizeof note) == 0, "%s", myr_last_error());
    CHECK(c.gpus == 100000 && c.ntiers == 4 && strstr(note, "built the same design with 100000 GPUs") &&
              strstr(note, "tiers added"), "%d tiers, '%s'", c.ntiers, note);
    /* a file without a size is sized to the run */
    CHECK(sim_load_cluster("b200-ib", &c) == 0 && c.gpus == 0, "b200-ib has no size");
    CHECK(sim_cluster_fit(&c, 512, note, sizeof note) == 0 && c.gpus == 512 && strstr(note, "sized to 512 GPUs"), "%s", note);
    /* the default cluster follows the GPU */
    CHECK(!strcmp(sim_default_cluster("h100-sxm"), "h100-ib") && !strcmp(sim_default_cluster("a100-80g"), "selene") &&
              !strcmp(sim_default_cluster("b200"), "b200-ib"), "defaults");
    CHECK(sim_load_default_cluster("h200", &c) == 0 && !strcmp(c.gpu, "h200"), "h200 cluster has h200 GPUs");
}

/* bf16 vs fp8 for the same layout: fp8 is faster but far from 2x (casts, attention and elementwise
 * stay 16-bit, fp8 GEMMs run at a lower fraction of their peak); Megatron's FLOP convention. */
static void test_fp8_vs_bf16_and_flop_convention(void) {
    ClusterSpec c; GpuSpec g;
    load("h100-ib", "h100-sxm", &c, &g);
    SimModel m = llama(32, 4096, 32, 8, 14336, 128256, 8192);
    Layout l;
    sim_layout_defaults(&l);
    l.seq = 8192; l.dp = 8; l.global_batch = 128; l.micro_batch = 1; l.recompute = RECOMPUTE_NONE;
    SimResult a, b;
    CHECK(sim_step(&m, &c, &g, &l, &a, NULL) == 0, "%s", myr_last_error());
    l.dtype = DT_FP8;
    CHECK(sim_step(&m, &c, &g, &l, &b, NULL) == 0, "%s", myr_last_error());
    double speedup = a.step_time / b.step_time;
    CHECK(speedup > 1.15 && speedup < 1.7, "fp8 speed-up %.2f (measured runs: 1.2-1.5)", speedup);
    l.fp8_scaling = FP8_CURRENT;
    SimResult cur;
    CHECK(sim_step(&m, &c, &g, &l, &cur, NULL) == 0 && cur.step_time > b.step_time, "current scaling reads more");
    /* 12 B s l h^2 ((1 + g/a + s/h) + 3/2 f/h + V/(2 l h)) */
    double B = 1, s = 8192, L = 32, h = 4096;
    double want = 12 * B * s * L * h * h * ((1 + 8.0 / 32 + s / h) + 1.5 * 14336 / h + 128256 / (2 * L * h));
    CHECK_CLOSE(sim_megatron_flops(&m, 1, 8192), want, 1e-12, 0, "Megatron FLOPs");
}

/* Llama 3 reports >90% effective training time on 16,384 GPUs with spares; without any the job
 * would wait for repairs after every hardware fault. */
static void test_default_hot_spares(void) {
    int k = sim_default_hot_spares(16384, 8);
    CHECK(k >= 1 && k <= 16, "default spares for 16,384 GPUs: %d nodes", k);
    FailureRates f;
    sim_failure_rates_default(&f);
    ReliabilityInput in = {0};
    in.gpus = 16384; in.state_bytes = 405e9 * 14; in.restart_s = 600; in.repair_hours = 4;
    in.storage_gbps = 100; in.host_mem_gbps = 20; in.gpus_per_node = 8;
    ReliabilityResult with, without;
    in.hot_spares = k;
    sim_reliability(&f, &in, &with);
    in.hot_spares = 0;
    sim_reliability(&f, &in, &without);
    CHECK(with.p_spare_available >= 0.99 && with.goodput > 0.8, "with %d spares: P %.3f goodput %.3f", k,
          with.p_spare_available, with.goodput);
    CHECK(without.goodput < 0.5, "no spares: %.3f", without.goodput);
    CHECK(sim_default_hot_spares(8, 8) == 0, "a one-node job has no spares");
}

static int plan(const char *model, const char *cluster, const char *gpu, int gpus, Layout *base, PlanFixed *fx,
                PlanResult *pr) {
    ClusterSpec c; GpuSpec g;
    SimModel m;
    load(cluster, gpu, &c, &g);
    if (sim_load_model(model, &m)) return -1;
    if (!base->seq) base->seq = m.seq;
    if (!fx->mem_cap) fx->mem_cap = 0.9 * g.hbm_gib * GIB;
    return sim_plan(&m, &c, &g, gpus, base, fx, 1e12, 5, pr);
}

/* Each layout flag fixes its dimension (the issue saw the same top 5 whatever was given). */
static void test_plan_respects_every_fixed_dimension(void) {
    struct { const char *what; int tp, pp, cp, vpp, mb; Recompute rc; int sp; } cases[] = {
        {"tp 8", 8, 0, 0, 0, 0, -1, -1}, {"pp 4", 0, 4, 0, 0, 0, -1, -1}, {"cp 2", 0, 0, 2, 0, 0, -1, -1},
        {"vpp 1", 0, 0, 0, 1, 0, -1, -1}, {"micro-batch 4", 0, 0, 0, 0, 4, -1, -1},
        {"recompute full", 0, 0, 0, 0, 0, RECOMPUTE_FULL, -1}, {"no sp", 0, 0, 0, 0, 0, -1, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Layout base;
        sim_layout_defaults(&base);
        base.seq = 8192; base.global_batch = 512;
        PlanFixed fx = {0};
        if (cases[i].tp) { base.tp = cases[i].tp; fx.tp = 1; }
        if (cases[i].pp) { base.pp = cases[i].pp; fx.pp = 1; }
        if (cases[i].cp) { base.cp = cases[i].cp; fx.cp = 1; }
        if (cases[i].vpp) { base.vpp = cases[i].vpp; fx.vpp = 1; }
        if (cases[i].mb) { base.micro_batch = cases[i].mb; fx.micro_batch = 1; }
        if ((int)cases[i].rc >= 0) { base.recompute = cases[i].rc; fx.recompute = 1; }
        if (cases[i].sp >= 0) { base.sp = cases[i].sp; fx.sp = 1; }
        PlanResult pr;
        CHECK(plan("llama3-70b", "h100-ib", "h100-sxm", 256, &base, &fx, &pr) == 0, "%s", myr_last_error());
        CHECK(pr.nbest > 0, "%s: a layout", cases[i].what);
        for (int k = 0; k < pr.nbest; k++) {
            const PlanEntry *e = &pr.best[k];
            int ok = (!cases[i].tp || e->layout.tp == cases[i].tp) && (!cases[i].pp || e->layout.pp == cases[i].pp) &&
                     (!cases[i].cp || e->layout.cp == cases[i].cp) && (!cases[i].vpp || e->res.vpp == cases[i].vpp) &&
                     (!cases[i].mb || e->res.micro_batch == cases[i].mb) &&
                     ((int)cases[i].rc < 0 || e->layout.recompute == cases[i].rc) &&
                     (cases[i].sp < 0 || e->layout.sp == cases[i].sp);
            CHECK(ok, "%s: entry %d has tp %d pp %d cp %d vpp %d mb %d rc %d sp %d", cases[i].what, k, e->layout.tp,
                  e->layout.pp, e->layout.cp, e->res.vpp, e->res.micro_batch, e->layout.recompute, e->layout.sp);
            CHECK(e->res.mem.total <= 0.9 * 80 * GIB, "%s: entry %d within the headroom", cases[i].what, k);
        }
        sim_plan_free(&pr);
    }
}

/* Llama 3 405B on 16,384 GPUs: pp sizes that do not divide the 126 layers are searched with one
 * layer fewer on the first and last stage (the issue saw "use more GPUs" instead). fp8 on A100
 * names the dtype as the binding constraint, with counts. */
static void test_plan_uneven_and_binding_constraints(void) {
    Layout base;
    sim_layout_defaults(&base);
    base.seq = 8192; base.global_batch = 2048;
    base.tp = 8; base.pp = 16;
    PlanFixed fx = {0};
    fx.tp = fx.pp = 1;
    PlanResult pr;
    CHECK(plan("llama3-405b", "h100-ib", "h100-sxm", 16384, &base, &fx, &pr) == 0, "%s", myr_last_error());
    CHECK(pr.nbest > 0, "a layout for 405B on 16,384 GPUs with pp 16");
    if (pr.nbest) CHECK(pr.best[0].layout.first_layers == 7 && pr.best[0].layout.last_layers == 7, "first/last %d/%d",
                        pr.best[0].layout.first_layers, pr.best[0].layout.last_layers);
    sim_plan_free(&pr);
    Layout a;
    sim_layout_defaults(&a);
    a.seq = 2048; a.global_batch = 2048; a.dtype = DT_FP8;
    PlanFixed none = {0};
    CHECK(plan("gpt3-175b", "selene", "a100-80g", 1024, &a, &none, &pr) == 0, "%s", myr_last_error());
    char why[2048];
    sim_plan_why_none(&pr, why, sizeof why);
    CHECK(pr.nbest == 0 && pr.count[PLAN_DTYPE] > 0, "fp8 on A100: %d layouts, %d dtype", pr.nbest, pr.count[PLAN_DTYPE]);
    CHECK(strstr(why, "no fp8 tensor cores") && strstr(why, "the GPU has no tensor cores for the dtype"), "%s", why);
    sim_plan_free(&pr);
    /* memory as the binding constraint: a 1T model on 8 GPUs */
    Layout big;
    sim_layout_defaults(&big);
    big.seq = 2048; big.global_batch = 64;
    CHECK(plan("gpt-1t", "selene", "a100-80g", 8, &big, &none, &pr) == 0, "%s", myr_last_error());
    sim_plan_why_none(&pr, why, sizeof why);
    CHECK(pr.nbest == 0 && pr.count[PLAN_MEMORY] > 0 && strstr(why, "memory above the headroom") &&
              strstr(why, "the smallest needs"), "%s", why);
    sim_plan_free(&pr);
}

/* MoE: capacity factor bounds the expert work, imbalance stretches it, etp shards experts. */
static void test_moe_capacity_imbalance_etp(void) {
    ClusterSpec c; GpuSpec g;
    load("h100-ib", "h100-sxm", &c, &g);
    SimModel m;
    CHECK(sim_load_model("mixtral-8x7b", &m) == 0, "%s", myr_last_error());
    Layout l;
    sim_layout_defaults(&l);
    l.seq = 4096; l.tp = 2; l.ep = 8; l.dp = 32; l.global_batch = 256; l.micro_batch = 1;
    SimResult one, two, cf;
    l.moe_imbalance = 1.0;
    CHECK(sim_step(&m, &c, &g, &l, &one, NULL) == 0, "%s", myr_last_error());
    l.moe_imbalance = 1.5;
    CHECK(sim_step(&m, &c, &g, &l, &two, NULL) == 0 && two.step_time > one.step_time * 1.15, "imbalance %.3f vs %.3f",
          two.step_time, one.step_time);
    l.capacity_factor = 1.0; /* tokens beyond capacity dropped: the balanced work again */
    CHECK(sim_step(&m, &c, &g, &l, &cf, NULL) == 0 && fabs(cf.step_time - one.step_time) < 0.02 * one.step_time,
          "capacity 1.0 %.3f vs balanced %.3f", cf.step_time, one.step_time);
    l.capacity_factor = 0; l.moe_imbalance = 1.0; l.etp = 1;
    SimMemory a, b;
    sim_memory(&m, &l, &a);
    l.etp = 0;
    sim_memory(&m, &l, &b);
    CHECK(a.weights > b.weights, "etp 1 keeps whole experts: %.2f vs %.2f GiB", a.weights / GIB, b.weights / GIB);
    l.etp = 3;
    CHECK(sim_check_layout(&m, &c, &g, &l) == -1 && strstr(myr_last_error(), "etp 3 must divide tp 2"), "%s",
          myr_last_error());
}

int main(void) {
    RUN(test_uneven_stage_splits);
    RUN(test_memory_zero_over_dp_cp_and_fsdp);
    RUN(test_memory_fp8_copies_and_activations);
    RUN(test_uneven_interleaved_peak);
    RUN(test_cluster_sizing);
    RUN(test_fp8_vs_bf16_and_flop_convention);
    RUN(test_default_hot_spares);
    RUN(test_plan_respects_every_fixed_dimension);
    RUN(test_plan_uneven_and_binding_constraints);
    RUN(test_moe_capacity_imbalance_etp);
    return TEST_SUMMARY();
}
