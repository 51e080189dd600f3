/* test_sim_memory.c: the simulator's memory model (sim_memory) end to end against the formulas
 * docs/SIMULATOR.md states ("Memory model"), computed here independently and by hand, with no
 * ../shared data: per-stage parameters (layers / p / t, experts / (t ep), embedding on the first
 * stage, output layer or tied copy on the last), weight / gradient / optimizer bytes and the ZeRO
 * divisions (experts by dp / ep), activations per layer (Korthikanti et al. 2022, Sec. 4) times the
 * layers the schedule holds at its peak (1F1B, interleaved, GPipe), the buffers (1 GiB + recompute
 * workspace + fp32 logits on the last stage + the sequence-parallel gathered input + ZeRO-3
 * prefetch), and the fullest stage reported. (tests/test_sim.c checks the per-layer activation
 * formulas and the ZeRO paper's figures; the published measurements need ../shared.) */
#include <math.h>
#include <string.h>

#include "sim/sim.h"
#include "test.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static SimModel gpt(int layers, int h, int heads, int vocab, int seq) {
    SimModel m;
    memset(&m, 0, sizeof m);
    sim_model_set_arch(&m, ARCH_GPT); /* biases, tied embedding, learned positions, dropout */
    m.layers = layers, m.hidden = h, m.heads = heads, m.kv_heads = heads, m.ffn = 4 * h, m.vocab = vocab, m.seq = seq;
    m.top_k = 1;
    return m;
}

/* One GPT layer's parameters: QKV + projection with biases, two LayerNorms, MLP h-4h-h with biases. */
static double gpt_layer_params(double h) { return 3 * h * h + 3 * h + h * h + h + 4 * h + 2 * h * 4 * h + 4 * h + h; }

static Layout layout(int tp, int pp, int dp, int mb, int gb, int seq) {
    Layout l;
    sim_layout_defaults(&l);
    l.tp = tp, l.pp = pp, l.dp = dp, l.micro_batch = mb, l.global_batch = gb, l.seq = seq;
    return l;
}

/* GPT, t 2 x p 2 x d 4, ZeRO 1, bf16 with fp32 main gradients, micro-batch 2 of 8 per step,
 * selective recompute without fused attention (the core is dropped by the recompute), sp on. */
static void test_gpt_1f1b_zero1(void) {
    double L = 4, h = 1024, a = 16, V = 32000, s = 2048, t = 2, p = 2, d = 4, b = 2;
    SimModel m = gpt(4, 1024, 16, 32000, 2048);
    Layout l = layout(2, 2, 4, 2, 64, 2048);
    l.flash = 0;
    SimMemory r;
    CHECK(sim_memory(&m, &l, &r) == 0, "sim_memory");
    /* stage 0: 2 layers / t + word embedding / t + position embedding (whole) */
    double p0 = L / p * gpt_layer_params(h) / t + V * h / t + s * h;
    double p1 = L / p * gpt_layer_params(h) / t + V * h / t + 2 * h; /* the tied copy + final LayerNorm on the last stage */
    double act_layer = 34 * s * b * h / t;                    /* s b h (10 + 24 / t) / t ... with sp: 34 sbh / t */
    double full_layer = s * b * h * (10 + 24 / t + 5 * a * s / (h * t)) - 10 * s * b * h + 10 * s * b * h / t;
    double gathered = 2 * s * b * h;
    /* transient buffers (recompute workspace, gathered input, fp32 logits on the last stage) and
     * the allocator's fragmentation reserve: 5% of activations + transients */
    double tr0 = (full_layer - act_layer) + gathered, tr1 = tr0 + 4 * s * b * V / t;
    double a0 = act_layer * 2 * (L / p), a1 = act_layer * 1 * (L / p);
    double tot0 = 2 * p0 + 4 * p0 + 12 * p0 / d + a0 + GIB + tr0 + 0.05 * (a0 + tr0);
    double tot1 = 2 * p1 + 4 * p1 + 12 * p1 / d + a1 + GIB + tr1 + 0.05 * (a1 + tr1);
    int fullest = tot1 > tot0;
    double pw = fullest ? p1 : p0;
    CHECK(r.stage == fullest, "the fullest stage: %d (stage totals %.4g, %.4g GiB)", r.stage, tot0 / GIB, tot1 / GIB);
    CHECK_CLOSE(r.weights, 2 * pw, 1e-12, 0, "weights: 2 bytes x stage parameters");
    CHECK_CLOSE(r.grads, 4 * pw, 1e-12, 0, "gradients: fp32 main_grad");
    CHECK_CLOSE(r.optimizer, 12 * pw / d, 1e-12, 0, "optimizer: 12 bytes / dp at ZeRO 1");
    CHECK_CLOSE(r.activations, act_layer * (fullest ? 1 : 2) * (L / p), 1e-12, 0,
                "activations: 34 sbh / t per layer x in-flight layers (1F1B: min(p - s, m) chunks)");
    CHECK_CLOSE(r.total, fullest ? tot1 : tot0, 1e-12, 0, "total");
    CHECK_CLOSE(r.reserve, 0.05 * (fullest ? a1 + tr1 : a0 + tr0), 1e-12, 0, "fragmentation reserve");
    CHECK_CLOSE(r.total, r.weights + r.grads + r.optimizer + r.fp8_copies + r.activations + r.comm_buffers + r.reserve,
                1e-12, 0, "parts sum");
}

/* The ZeRO stages divide optimizer, + gradients, + weights by dp; experts by dp / ep; ZeRO 3 adds
 * the prefetch of two layers. Llama (untied: output layer on the last stage), one stage. */
static void test_zero_stages_and_experts(void) {
    SimModel m;
    memset(&m, 0, sizeof m);
    sim_model_set_arch(&m, ARCH_LLAMA);
    m.layers = 2, m.hidden = 512, m.heads = 8, m.kv_heads = 2, m.ffn = 1024, m.vocab = 1000, m.seq = 256;
    m.experts = 8, m.top_k = 2, m.expert_ffn = 512;
    double h = 512, kv = 2 * 64, fe = 512, E = 8, V = 1000, d = 8, ep = 2;
    double attn = h * (h + 2 * kv) + h * h, norms = 2 * h, router = h * E, experts = E * 3 * h * fe;
    double dense = 2 * (attn + norms + router) + 2 * V * h + h, expert = 2 * experts / ep; /* layers 2, tp 1, final RMSNorm */
    for (int z = 0; z <= 3; z++) {
        Layout l = layout(1, 1, 8, 1, 64, 256);
        l.ep = 2, l.zero = z;
        SimMemory r;
        sim_memory(&m, &l, &r);
        double ed = d / ep;
        const char *what[] = {"ZeRO 0", "ZeRO 1", "ZeRO 2", "ZeRO 3"};
        CHECK_CLOSE(r.optimizer, 12 * (z >= 1 ? dense / d + expert / ed : dense + expert), 1e-12, 0, what[z]);
        CHECK_CLOSE(r.grads, 4 * (z >= 2 ? dense / d + expert / ed : dense + expert), 1e-12, 0, what[z]);
        CHECK_CLOSE(r.weights, 2 * (z >= 3 ? dense / d + expert / ed : dense + expert), 1e-12, 0, what[z]);
        if (z == 3) {
            Layout l2 = l;
            l2.zero = 2;
            SimMemory r2;
            sim_memory(&m, &l2, &r2);
            /* a rank gathers its own experts only (E / ep); two layers in bf16 (running + prefetched)
             * and one layer's unsharded gradients in bf16 and in the reduce dtype */
            double layer = attn + norms + router + experts / ep;
            CHECK_CLOSE(r.comm_buffers - r2.comm_buffers, 2 * 2 * layer + (2 + l.grad_bytes) * layer, 1e-12, 0,
                        "ZeRO-3 gathers 2 layers and one layer's gradients");
        }
    }
}

/* Layers held at the peak on the first stage: 1F1B min(p, m) chunks of l/p layers; interleaved
 * min(m v, 2(p-1) + (v-1)p + 1) chunks of l/(p v) layers, l (1 + (p-1)/(p v)) for many
 * micro-batches (Korthikanti eq. 5); GPipe all m micro-batches. */
static void test_inflight_layers_by_schedule(void) {
    SimModel m = gpt(32, 1024, 16, 32000, 1024);
    double l = 32, p = 4, v = 2, mbs = 16;
    Layout x = layout(1, 4, 1, 1, 16, 1024);
    CHECK_CLOSE(sim_inflight_layers(&m, &x, 0), p * l / p, 1e-12, 0, "1F1B stage 0");
    CHECK_CLOSE(sim_inflight_layers(&m, &x, 3), 1 * l / p, 1e-12, 0, "1F1B last stage");
    x.vpp = 2, x.schedule = SCHED_INTERLEAVED;
    CHECK_CLOSE(sim_inflight_layers(&m, &x, 0), l * (1 + (p - 1) / (p * v)), 1e-12, 0, "interleaved stage 0");
    x.vpp = 1, x.schedule = SCHED_GPIPE;
    CHECK_CLOSE(sim_inflight_layers(&m, &x, 0), mbs * l / p, 1e-12, 0, "GPipe: every micro-batch");
    /* and sim_memory uses them: activations = per-layer bytes x in-flight layers of the fullest stage */
    x = layout(1, 4, 1, 1, 16, 1024);
    SimMemory r;
    sim_memory(&m, &x, &r);
    CHECK_CLOSE(r.activations, sim_layer_activation_bytes(&m, &x, 1) * sim_inflight_layers(&m, &x, r.stage), 1e-12, 0,
                "activations of the reported stage");
}

/* fp32 training keeps no separate master copy: 4-byte weights and 8 bytes of Adam state. Full
 * recompute keeps 2 s b h per layer (/t with sp) and rebuilds one layer in backward. */
static void test_fp32_and_full_recompute(void) {
    SimModel m = gpt(2, 256, 4, 1000, 128);
    Layout l = layout(1, 1, 1, 4, 4, 128);
    l.dtype = DT_FP32, l.zero = 0, l.sp = 0;
    SimMemory r;
    sim_memory(&m, &l, &r);
    double P = 2 * gpt_layer_params(256) + 1000 * 256 + 128 * 256 + 2 * 256; /* tied output not counted twice at pp 1; final LN */
    CHECK_CLOSE(r.weights, 4 * P, 1e-12, 0, "fp32 weights");
    CHECK_CLOSE(r.optimizer, 8 * P, 1e-12, 0, "fp32: Adam m and v only");
    l.dtype = DT_BF16, l.recompute = RECOMPUTE_FULL;
    sim_memory(&m, &l, &r);
    double s = 128, b = 4, h = 256;
    CHECK_CLOSE(r.activations, 2 * s * b * h * 2, 1e-12, 0, "full recompute keeps each layer's input");
}

/* PyTorch's eager loss (torchtitan of 2024, torchtitan-eager) holds 12 bytes per logit at its
 * peak on the last stage (logits.float(), log_softmax's output, then nll_loss's and log_softmax's
 * gradients), against 4 (fp32 logits) for a fused or in-place loss; only the last stage changes. */
static void test_eager_loss_bytes(void) {
    SimModel m = gpt(4, 512, 8, 50000, 1024);
    double s = 1024, b = 2, V = 50000, t = 2;
    Layout a, e;
    sim_layout_defaults(&a);
    CHECK(sim_software_preset(&a, "torchtitan") == 0, "preset");
    e = a;
    CHECK(sim_software_preset(&e, "torchtitan-2024") == 0, "preset");
    CHECK(a.ce_peak_bytes == 4 && e.ce_peak_bytes == 12, "bytes per logit %g, %g", a.ce_peak_bytes, e.ce_peak_bytes);
    a.tp = e.tp = 2, a.dp = e.dp = 2, a.micro_batch = e.micro_batch = 2, a.global_batch = e.global_batch = 16;
    a.seq = e.seq = 1024;
    SimMemory ra, re;
    sim_memory(&m, &a, &ra);
    sim_memory(&m, &e, &re);
    CHECK_CLOSE(re.comm_buffers - ra.comm_buffers, 8 * s * b * V / t, 1e-9, 0, "8 more bytes per logit");
    CHECK_CLOSE(re.reserve - ra.reserve, 0.05 * 8 * s * b * V / t, 1e-9, 0, "and their fragmentation reserve");
    CHECK_CLOSE(re.activations, ra.activations, 1e-12, 0, "nothing else changes");
    CHECK(strcmp(sim_software_class("torchtitan-2024"), "torchtitan") == 0 &&
              strcmp(sim_software_class("nemo"), "nemo") == 0, "software classes");
}

int main(void) {
    RUN(test_gpt_1f1b_zero1);
    RUN(test_zero_stages_and_experts);
    RUN(test_inflight_layers_by_schedule);
    RUN(test_fp32_and_full_recompute);
    RUN(test_eager_loss_bytes);
    return TEST_SUMMARY();
}
