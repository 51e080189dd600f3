/* software.c: the layout defaults and the software presets. A preset says which mechanisms a
 * generation of training software has; explicit flags override it. `myriad sim --software list`
 * prints this table; docs/SIMULATOR.md gives the reasoning and sources of each entry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "util/error.h"

void sim_layout_defaults(Layout *l) {
    memset(l, 0, sizeof *l);
    l->tp = l->cp = l->pp = l->vpp = l->dp = l->ep = 1;
    l->micro_batch = 1;
    l->recompute = RECOMPUTE_SELECTIVE;
    l->sp = 1;
    l->dtype = DT_BF16;
    l->schedule = SCHED_1F1B;
    l->moe_imbalance = 1.188; /* busiest expert over the mean, dropless (FITTED: docs/SIMULATOR.md) */
    l->comm_sms = 20;       /* SMs held by overlapped communication kernels (DeepSeek-V3 Sec. 3.2.2) */
    sim_software_preset(l, "current");
}

typedef struct {
    const char *name, *summary, *sources;
    /* flash, fused_elementwise, fused_grad_accum, overlap_p2p, overlap_dp, zero, grad_bytes,
     * tp_overlap, sp_regather, selective_op, reshard, fp8_scaling, fp8_gather, fp8_cache, optimizer_passes,
     * fused_ce, cp_torch */
    int v[17];
} Preset;

static const Preset presets[] = {
    {"megatron-core",
     "Megatron-Core + Transformer Engine (2024-25; NeMo 24-25, MLPerf GPT-3 by NVIDIA and partners): fused "
     "(cuDNN) attention, fused kernels, distributed optimizer (ZeRO 1 over dp x cp) with overlapped gradient "
     "reduce-scatter and parameter all-gather, TP communication overlapped with GEMMs, overlapped pipeline p2p, "
     "fp8 with delayed scaling and cached fp8 weights",
     "Megatron-LM README (--overlap-grad-reduce --overlap-param-gather --tp-comm-overlap, r0.8.0); TE docs "
     "(DelayedScaling, userbuffers); NeMo performance summaries; MLPerf v3.0-v4.1 GPT-3 configs",
     {ATTN_FUSED, 1, 1, 1, 1, 1, 4, 1, 1, 0, 0, FP8_DELAYED, 0, 1, 0, 0}},
    {"nemo",
     "NeMo 1.x (24.0x): as megatron-core, with 16-bit gradient buffers and optimizer state (distributed Adam with "
     "grad_sync_dtype bf16 and optim.dtype bf16: m, v in bf16, master weights as 16-bit remainders, 6 bytes per "
     "parameter), fused cross-entropy",
     "NeMo-Framework-Launcher conf/training (e.g. nemotron_340b.yaml: mcore_distributed_optim, grad_sync_dtype bf16, "
     "dtype bf16, overlap_grad_sync, overlap_param_sync, ub_tp_comm_overlap, cross_entropy_loss_fusion); NeMo docs: "
     "distributed Adam 'dtype: optimizer state datatype'; NeMo performance summary 24.07",
     {ATTN_FUSED, 1, 1, 1, 1, 1, 2, 1, 1, 0, 0, FP8_DELAYED, 0, 1, 0, 1}},
    {"nemo-2",
     "NeMo 2.x (25.x) and Megatron-Bridge: as nemo, with fp8 parameters (fp8_param_gather: weights kept and "
     "all-gathered in fp8 with their transposes, no 16-bit copy)",
     "NeMo nemo/collections/llm/recipes/precision/mixed_precision.py and Megatron-Bridge mixed_precision.py: "
     "bf16_with_fp8_mixed() sets fp8_param_gather = True; Megatron-Bridge performance summary 25.11",
     {ATTN_FUSED, 1, 1, 1, 1, 1, 2, 1, 1, 0, 0, FP8_DELAYED, 1, 1, 0, 1}},
    {"mlperf",
     "NVIDIA's MLPerf Training GPT-3 submissions (NeMo-based, tuned): as nemo, with GEMMs 1.23x as fast as the "
     "other Megatron/NeMo runs reach (FITTED: tuned kernels, layer CUDA graphs, vboost) and the data-parallel "
     "reduction charged in full (added after seeing validation errors: one-layer chunks leave only the pipeline "
     "cooldown to hide it)",
     "MLPerf Training v3.0-v4.1 results and configs (mlcommons/training_results_v*: LAYER_CUDA_GRAPH, "
     "TP_COMM_OVERLAP, OVERLAP_GRAD_SYNC); docs/SIMULATOR.md, Validation",
     {ATTN_FUSED, 1, 1, 1, 0, 1, 2, 1, 1, 0, 0, FP8_DELAYED, 0, 1, 0, 1}},
    {"megatron-2022",
     "Megatron-LM of Korthikanti et al. 2022: unfused attention (softmax, dropout), fused gradient accumulation, "
     "blocking pipeline p2p, no overlap of the data-parallel all-reduce, no distributed optimizer, fp32 gradients",
     "Korthikanti et al. 2022 (Reducing Activation Recomputation), Sec. 5 and Megatron-LM of that date",
     {ATTN_UNFUSED, 1, 1, 0, 0, 0, 4, 0, 1, 0, 0, FP8_DELAYED, 0, 1, 0, 0}},
    {"megatron-2021",
     "Megatron-LM of Narayanan et al. 2021: as megatron-2022, but gradient accumulation as a separate pass",
     "Narayanan et al. 2021 (Efficient Large-Scale Language Model Training on GPU Clusters)",
     {ATTN_UNFUSED, 1, 0, 0, 0, 0, 4, 0, 1, 0, 0, FP8_DELAYED, 0, 1, 0, 0}},
    {"torchtitan",
     "torchtitan (2024-25) with torch.compile: FSDP2 (ZeRO 3 over dp x cp, resharded after forward, fp32 "
     "gradient reduce-scatter, plain AdamW on fp32 shards), PyTorch SDPA FlashAttention-2, selective recompute = "
     "op policy (every second matmul re-run), TP without overlap unless AsyncTP, float8 tensorwise (dynamic, "
     "current) scaling without cached fp8 weights, context parallel as PyTorch's experimental ring attention (K/V "
     "of all query heads, all-gather rotation, fp32 merges and dK/dV ring)",
     "torchtitan docs/fsdp.md, docs/float8.md, parallelize_llama.py (_save_list: all compute ops but every second "
     "mm), benchmarks/llama3_h100_202412_torchtitan.md; torchtitan 9dec370 models/llama/model.py (repeat_kv), "
     "config_manager.py (context_parallel_rotate_method allgather); torch/distributed/tensor/experimental/_attention.py",
     {ATTN_FA2, 1, 1, 1, 1, 3, 4, 0, 0, 1, 1, FP8_CURRENT, 0, 0, 1, 1, 1}},
    {"torchtitan-2024",
     "torchtitan of 2024 (before 2025-04) with torch.compile: as torchtitan, but only the transformer blocks compiled; "
     "the output layer and the loss ran eager (F.cross_entropy on logits.float(): cast, log_softmax, nll_loss and "
     "their backwards as separate kernels, 12 bytes per logit held at the loss's peak)",
     "torchtitan 9dec370 train.py (loss_fn; '# TODO: compiling loss function causes CUDA errors, turning off for "
     "now'), torchtitan/parallelisms/parallelize_llama.py (apply_compile: per TransformerBlock); the loss is "
     "compiled from pytorch/torchtitan bbb1b616e (2025-04-02, build_loss_fn)",
     {ATTN_FA2, 1, 1, 1, 1, 3, 4, 0, 0, 1, 1, FP8_CURRENT, 0, 0, 1, 0, 1}},
    {"torchtitan-eager",
     "torchtitan without torch.compile: as torchtitan, with every elementwise op (RMSNorm in fp32, rotary through "
     "complex views, SwiGLU, residual adds) as its own PyTorch kernel",
     "torchtitan models/llama (RMSNorm, apply_rotary_emb), benchmarks (FSDP vs FSDP + torch.compile)",
     {ATTN_FA2, 0, 1, 1, 1, 3, 4, 0, 0, 1, 1, FP8_CURRENT, 0, 0, 1, 0, 1}},
    {"deepseek",
     "DeepSeek-V3's framework (HAI-LLM, 2024): DualPipe (bidirectional pipeline, forward and backward chunks of "
     "different micro-batches overlapped so that all-to-all and pipeline transfers hide behind compute, 20 SMs given "
     "to communication), DeepEP-style two-stage dispatch (IB once per remote node, then NVLink) in fp8, combine in "
     "bf16, fp8 GEMMs with blockwise scaling (1x128 activations, 128x128 weights), ZeRO 1, fp32 master weights and "
     "gradients, bf16 AdamW moments, no tensor parallelism",
     "DeepSeek-V3 Technical Report (arXiv 2412.19437) Sec. 3.2 (DualPipe, cross-node all-to-all, 20 SMs), Sec. 3.3 "
     "(fine-grained fp8, low-precision optimizer states and communication), Table 2; deepseek-ai/DeepEP README "
     "(normal kernels: NVLink forwarding of RDMA traffic); deepseek-ai/DualPipe README",
     {ATTN_FUSED, 1, 1, 1, 1, 1, 4, 0, 0, 0, 0, FP8_BLOCKWISE, 0, 1, 0, 1, 0}},
    {"myriad",
     "myriad train on CPUs (fp32): its attention kernel and GEMMs as calibrated, fused elementwise kernels, fused "
     "softmax cross-entropy, weight gradients accumulated by the GEMM, 25 MiB gradient buckets all-reduced during "
     "backward (ZeRO 0 by default), nonblocking pipeline transfers, plain fp32 AdamW",
     "src/train, src/model, src/kernels, src/parallel of this repository",
     {ATTN_FUSED, 1, 1, 1, 1, 0, 4, 0, 0, 0, 0, FP8_DELAYED, 0, 0, 1, 1}},
};
#define NPRESETS (int)(sizeof presets / sizeof presets[0])

const char *sim_software_class(const char *name) {
    return !strcmp(name, "torchtitan-2024") ? "torchtitan" : name;
}

int sim_software_preset(Layout *l, const char *name) {
    if (!strcmp(name, "current")) name = "megatron-core";
    for (int i = 0; i < NPRESETS; i++) {
        if (strcmp(name, presets[i].name)) continue;
        const int *v = presets[i].v;
        l->flash = v[0]; l->fused_elementwise = v[1]; l->fused_grad_accum = v[2]; l->overlap_p2p = v[3];
        l->overlap_dp = v[4]; l->zero = v[5]; l->grad_bytes = v[6]; l->tp_overlap = v[7]; l->sp_regather = v[8];
        l->selective_op = v[9]; l->reshard = v[10]; l->fp8_scaling = v[11]; l->fp8_gather = v[12];
        l->fp8_cache = v[13]; l->optimizer_passes = v[14]; l->fused_ce = v[15]; l->cp_torch = v[16];
        l->sw_eff = 1.0;
        /* PyTorch's eager loss: logits.float() (4 B/logit) and log_softmax's saved output (4); its
         * backward writes nll_loss's dense gradient (4) and log_softmax's input gradient (4) while
         * the output is still held (the bf16 logits are deleted before backward, train.py) */
        l->ce_peak_bytes = !strcmp(name, "torchtitan-2024") || !strcmp(name, "torchtitan-eager") ? 12.0 : 4.0;
        l->sw_sp = l->sw_selective = 1;
        if (!strcmp(name, "megatron-2021")) {
            /* Narayanan et al. 2021 predates sequence parallelism and selective recompute (Korthikanti
             * et al. 2022): full recompute or none, tensor-parallel activations replicated */
            l->sw_sp = l->sw_selective = 0;
            l->sp = 0;
            l->recompute = RECOMPUTE_FULL;
        }
        l->bucket = 40e6;
        l->opt_bytes = 12;
        char env[64];
        snprintf(env, sizeof env, "MYRIAD_SWEFF_%s", presets[i].name);
        for (char *q = env; *q; q++) if (*q == '-') *q = '_';
        if (!strcmp(name, "mlperf")) l->sw_eff = 1.227; /* FITTED (validate_fit.c), docs/SIMULATOR.md */
        if (getenv(env)) l->sw_eff = atof(getenv(env));
        if (!strcmp(name, "myriad")) l->bucket = 25.0 * 1024 * 1024 / 4; /* --bucket-mb 25 of fp32 */
        l->cp_dkv_serial = !strcmp(name, "myriad");
        if (!strncmp(name, "nemo", 4) || !strcmp(name, "mlperf")) l->opt_bytes = 6; /* bf16 optimizer state */
        l->ep_a2a = l->ep_fp8_dispatch = l->ep_overlap = l->selective_ds = 0;
        if (!strcmp(name, "deepseek")) {
            l->schedule = SCHED_DUALPIPE;
            l->ep_a2a = l->ep_fp8_dispatch = 1; /* the overlap is DualPipe's (a 1F1B schedule has none) */
            l->opt_bytes = 8; /* fp32 master weights, bf16 m and v (Sec. 3.3.4) */
            l->recompute = RECOMPUTE_SELECTIVE;
            l->selective_ds = 1;
            l->sp = 0;
        }
        return 0;
    }
    char names[256] = "current";
    for (int i = 0; i < NPRESETS; i++) {
        strncat(names, ", ", sizeof names - strlen(names) - 1);
        strncat(names, presets[i].name, sizeof names - strlen(names) - 1);
    }
    return myr_error("unknown software preset '%s' (use %s)", name, names);
}

void sim_software_list(FILE *out) {
    fprintf(out, "current = megatron-core\n");
    for (int i = 0; i < NPRESETS; i++)
        fprintf(out, "%s\n  %s\n  sources: %s\n", presets[i].name, presets[i].summary, presets[i].sources);
}
