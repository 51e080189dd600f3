/* sim.h: the cluster simulator's interface: hardware / cluster / model descriptions (loaded from
 * JSON under configs/), a parallel layout, and the analytic + event-driven model of one training
 * step, its memory, the reliability and cost models, the planner and the validation driver.
 * Units everywhere: seconds, bytes, FLOP, bytes/s (not GB/s) unless a field name says otherwise.
 * The equations and the source of every default are in docs/SIMULATOR.md. */
#ifndef MYRIAD_SIM_SIM_H
#define MYRIAD_SIM_SIM_H

#include <stdio.h>

/* ---------- data types of the math ---------- */
typedef enum { DT_FP32 = 0, DT_TF32, DT_BF16, DT_FP16, DT_FP8, DT_COUNT } SimDtype;
const char *sim_dtype_name(SimDtype d);
int sim_dtype_parse(const char *s, SimDtype *out); /* -1 with reason if unknown */
double sim_dtype_bytes(SimDtype d);                /* bytes of one activation / weight element */

/* ---------- hardware (configs/hardware/NAME.json) ---------- */
typedef struct {
    char name[64];
    double peak_tflops[DT_COUNT]; /* dense, per GPU; 0 = not supported */
    double hbm_gib, hbm_tbps;     /* capacity (GiB), bandwidth (TB/s = 1e12 B/s) */
    double scaleup_gbps;          /* NVLink GB/s per GPU per direction */
    int nics;                     /* scale-out NICs per GPU */
    double nic_gbps;              /* Gb/s per NIC */
    double tdp_w;
    int sms;                      /* streaming multiprocessors (GEMM wave quantization) */
    /* achievable fractions (from published microbenchmarks; see docs/SIMULATOR.md) */
    double gemm_eff;     /* best cuBLAS efficiency on large, well-shaped 16-bit GEMMs */
    double gemm_eff_fp8; /* the same for fp8 GEMMs (0 = gemm_eff) */
    double sustained;    /* GEMM throughput sustained in multi-GPU training over single-GPU microbenchmarks
                          * (power-limited clocks; fitted, see docs/SIMULATOR.md); 1 = as benchmarked */
    double attn_eff;     /* fused attention (cuDNN / FlashAttention-3 class) fwd+bwd, fraction of 16-bit peak */
    double attn_eff_fa2; /* FlashAttention-2 (PyTorch SDPA's flash backend), the same (0 = attn_eff) */
    double hbm_eff;      /* achievable fraction of HBM bandwidth for streaming kernels */
    double kernel_us;    /* fixed cost per kernel (launch + ramp/tail) */
    double ce_ns_per_logit; /* fused softmax cross-entropy, forward and gradient in one pass, measured per
                             * logit (myriad bench calibrate: exp-bound on a CPU); 0 = memory-bound */
    int tile;            /* GEMM output tile side (128 on GPUs) */
    /* measured GEMM rates (myriad bench calibrate): M, N, K, FLOP/s; used instead of the tile
     * model when present (nearest measured shape in log space, scaled by its FLOPs) */
    int ngemm;
    double gemm_table[64][4];
} GpuSpec;

/* ---------- cluster (configs/clusters/NAME.json) ---------- */
#define SIM_MAX_TIERS 4
typedef struct {
    char name[32];
    int radix;          /* switch ports */
    double oversub;     /* down:up ratio of the links that reach this tier (1 = non-blocking) */
    double latency_us;  /* per-step latency of a collective whose traffic reaches this tier */
    double gpus_below;  /* GPUs under one switch group of this tier; 0 = derived from radix */
} NetTier;

typedef struct {
    char name[64];
    char gpu[64];           /* GPU model name (configs/hardware) */
    int gpus;               /* GPUs installed (0 = unbounded) */
    int gpus_per_node;
    int scaleup_domain;     /* GPUs in one NVLink/NVSwitch domain */
    double scaleup_gbps;    /* 0 = the GPU's */
    double scaleup_latency_us;
    int nics_per_gpu;       /* 0 = the GPU's */
    double nic_gbps;        /* 0 = the GPU's */
    int roce;               /* 1 = RoCE (Ethernet), 0 = InfiniBand */
    int sharp;              /* in-network reduction available */
    int rail_optimized;     /* rails: NIC i of every node on rail switch i */
    int rail_only;          /* rail-only (Wang et al. 2023): one fabric per rail, none above; cross-rail traffic is
                             * forwarded over NVLink to the GPU on the destination's rail */
    double straggler_cv;    /* per-GPU step-time coefficient of variation (a synchronous step waits for the slowest) */
    int planes;             /* independent network planes (multi-plane) */
    int ntiers;             /* scale-out switch tiers: [0] leaf, [1] spine, [2] core */
    NetTier tier[SIM_MAX_TIERS];
    double net_eff;         /* achievable fraction of NIC line rate for collectives */
    double scaleup_eff;     /* achievable fraction of NVLink bandwidth */
    /* power and money */
    double pue, host_w_per_gpu, gpu_hour_usd, switch_usd, optic_usd, nic_usd, gpu_usd;
    /* storage and restarts (reliability) */
    double storage_gbps;    /* aggregate checkpoint storage bandwidth, GB/s */
    double host_mem_gbps;   /* per-GPU copy bandwidth to host/peer memory (in-memory checkpoints), GB/s */
} ClusterSpec;

/* ---------- model (configs/models/NAME.json or flags) ---------- */
typedef enum { ARCH_GPT = 0, ARCH_LLAMA, ARCH_NEMOTRON } SimArch;
typedef struct {
    char name[64];
    /* arch presets (sim_model_set_arch): gpt = LayerNorm, GELU MLP (2 matrices, biases), learned
     * positions, tied embeddings, dropout; llama = RMSNorm, SwiGLU (3 matrices), rotary, untied, no
     * biases; nemotron = LayerNorm, squared-ReLU MLP (2 matrices), rotary, untied, no biases */
    int llama;        /* the arch is llama (kept for the places that only ask that) */
    SimArch arch;
    int gated;        /* MLP with a gate: 3 matrices (SwiGLU) */
    int tied;         /* output layer shares the embedding table */
    int learned_pos;  /* learned position table of seq x hidden */
    int bias;         /* linear layers have biases */
    int rmsnorm;      /* RMSNorm (1 statistic) instead of LayerNorm */
    int rope;         /* rotary position embedding on q and k */
    int dropout;      /* dropout after attention and MLP (masks kept for backward) */
    int layers, hidden, heads, kv_heads, ffn, vocab;
    int experts, top_k, expert_ffn; /* MoE: experts > 1 replaces every MLP by `experts` MLPs of expert_ffn */
    int shared_experts, shared_ffn; /* always-active experts of shared_ffn each (DeepSeek, Qwen2-MoE); 0 = none */
    int dense_layers;  /* the first layers keep a dense MLP of ffn (DeepSeek-V3: 3) */
    int route_nodes;   /* node-limited routing: a token's experts lie on at most this many nodes (DeepSeek-V3: 4) */
    /* multi-head latent attention (DeepSeek-V2/V3) when kv_lora > 0: latent ranks and head dims */
    int q_lora, kv_lora, qk_nope, qk_rope, v_head;
    int mtp;           /* multi-token prediction depth (DeepSeek-V3: 1), on the last pipeline stage */
    int seq;          /* default sequence length */
} SimModel;
void sim_model_set_arch(SimModel *m, SimArch a);
int sim_arch_parse(const char *s, SimArch *out);
const char *sim_arch_name(SimArch a);

double sim_model_params(const SimModel *m);        /* all parameters */
int sim_mla(const SimModel *m);                      /* multi-head latent attention */
double sim_qk_head_dim(const SimModel *m), sim_v_head_dim(const SimModel *m);
int sim_layer_is_moe(const SimModel *m, int layer);  /* layer (0-based) has routed experts */
int sim_moe_layers(const SimModel *m);               /* layers with routed experts */
double sim_attn_params(const SimModel *m);           /* one layer's attention weights */
double sim_model_layer_params_kind(const SimModel *m, int moe); /* a dense (0) or MoE (1) layer */
double sim_layer_fwd_flops(const SimModel *m, double s, int moe); /* one layer, one sequence */
double sim_model_layer_params(const SimModel *m);  /* one transformer layer (an MoE layer in an MoE model) */
double sim_model_active_params(const SimModel *m); /* per token (MoE: top_k experts) */
double sim_mlp_params(const SimModel *m, double f);  /* one dense MLP of inner size f */
/* Forward FLOPs of one sequence of length s through the whole model (attention counted as full
 * s x s, the convention of Narayanan et al. 2021); training = 3x, with full recompute 4x. */
double sim_model_fwd_flops(const SimModel *m, int s);
/* Narayanan et al. eq. (3): 96 B s l h^2 (1 + s/6h + V/16lh), GPT shapes, full recompute. */
double sim_narayanan_flops(int B, int s, int l, int h, int V);
/* Model FLOPs of B sequences of length s by Megatron-LM's num_floating_point_operations (also
 * NeMo's): 12 B s l h^2 ((1 + g/a + s/h) + f/h k (3/2 if gated) + V/(2 l h)): full s x s attention. */
double sim_megatron_flops(const SimModel *m, double B, double s);

/* ---------- layout ---------- */
typedef enum { RECOMPUTE_NONE = 0, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL } Recompute;
typedef enum { SCHED_1F1B = 0, SCHED_GPIPE, SCHED_INTERLEAVED, SCHED_DUALPIPE } PipeSchedule;
/* FP8 scaling: delayed (Transformer Engine's default: the scale comes from an amax history, the
 * amax of each cast is taken by the cast kernel itself) or current (per-tensor scale of this very
 * tensor: an amax pass reads the tensor before its cast; TE current scaling, torchao tensorwise) */
typedef enum { FP8_DELAYED = 0, FP8_CURRENT, FP8_BLOCKWISE } Fp8Scaling; /* blockwise: 1x128 / 128x128 (DeepSeek-V3) */
typedef enum { ATTN_UNFUSED = 0, ATTN_FUSED, ATTN_FA2 } AttnKernel;
#define SIM_MAX_VSTAGES 512
typedef struct {
    int tp, cp, pp, vpp, dp, ep;
    int etp;              /* expert tensor parallelism (0 = tp) */
    int micro_batch;      /* sequences per micro-batch per data-parallel rank; 0 = search */
    int global_batch;     /* sequences per step */
    int seq;
    Recompute recompute;
    int sp;               /* sequence parallelism (with tp) */
    int zero;             /* 0..3 */
    SimDtype dtype;
    PipeSchedule schedule;/* interleaved is implied by vpp > 1 */
    int flash;            /* attention kernel (AttnKernel): fused (cuDNN/FA3), fa2, or unfused softmax/dropout */
    int overlap_dp;       /* overlap the data-parallel gradient reduction with backward */
    int grad_bytes;       /* bytes per gradient element kept for accumulation (Megatron: 4, ZeRO paper: 2) */
    int fused_grad_accum; /* weight-gradient GEMMs accumulate into the main gradients directly */
    int overlap_p2p;      /* pipeline sends/receives run asynchronously to compute */
    /* software mechanisms (set by --software presets; see software.c) */
    int tp_overlap;       /* TP all-gather/reduce-scatter overlapped with the GEMMs (TE userbuffers, AsyncTP) */
    int sp_regather;      /* sp keeps the sequence shard of GEMM inputs and gathers it again for wgrad (Megatron) */
    int fused_elementwise;/* norms, activations, rotary, residuals as fused kernels (TE, torch.compile); 0 = eager ops */
    int selective_op;     /* "selective" recompute means torchtitan's op-level policy (re-run every 2nd matmul) */
    int selective_ds;     /* "selective" recompute means DeepSeek-V3's: RMSNorms, MLA up-projections and the SwiGLU
                           * output re-run in backward; linear inputs and the SwiGLU input kept in fp8 (Sec. 3.2.3,
                           * 3.3.3) */
    int reshard;          /* zero 3: parameters gathered again for backward (FSDP reshard_after_forward) */
    int fp8_scaling;      /* Fp8Scaling */
    int fp8_gather;       /* zero 3 / distributed optimizer all-gather parameters in fp8 */
    int optimizer_passes; /* 0 = Megatron's fused mixed-precision Adam; 1 = a plain fp32 AdamW (torch) */
    int fp8_cache;        /* fp8 weights (and transposes) cast once per step and kept (Transformer Engine) */
    int fused_ce;         /* vocab-parallel cross-entropy as one fused kernel (else fp32 eager ops) */
    double ce_peak_bytes; /* bytes per logit the loss holds at its peak on the last stage: 4 (fp32 logits;
                             fused or Megatron's in-place eager ops), 12 for PyTorch's eager
                             F.cross_entropy on logits.float() (software.c) */
    int cp_torch;         /* context parallel as PyTorch's experimental ring attention (torchtitan 2024): K/V
                           * repeated to all heads, all-gathered after the first block, fp32 merges (layer.c) */
    int cp_dkv_serial;    /* ring backward passes the fp32 dK/dV accumulators cp times, each hop waited for
                           * before the next step's blocks (myriad train's ring_attention.c); else overlapped */
    int sw_sp;            /* the software has sequence parallelism (Korthikanti et al. 2022; not Megatron-LM of 2021) */
    int sw_selective;     /* the software has selective recompute (not Megatron-LM of 2021: full or none) */
    double sw_eff;        /* GEMM throughput this software reaches in a step, over kernel microbenchmarks (fitted) */
    double bucket;        /* gradient-reduction bucket, elements (Megatron-LM 40 M) */
    int opt_bytes;        /* optimizer state per parameter: 12 (fp32 master, m, v); NeMo's bf16 states 6 */
    /* uneven pipelines: layers of the first / last pipeline stage (0 = even), or every virtual stage */
    int first_layers, last_layers;
    int vpp_group;        /* interleaved: micro-batches per virtual stage in a row (0 = pp; Megatron-core's
                           * --microbatch-group-size-per-virtual-pipeline-stage, Llama 3's N) */
    int n_stage_layers;
    int stage_layers[SIM_MAX_VSTAGES];
    /* mixture of experts */
    double capacity_factor;  /* tokens an expert takes, over the mean (0 = dropless) */
    int ep_a2a;              /* 0: NCCL all-to-all (every token-expert pair); 1: two-stage DeepEP (network, then NVLink) */
    int ep_fp8_dispatch;     /* fp8 runs dispatch tokens in fp8 with 1x128 scales (DeepSeek-V3, DeepEP) */
    int ep_overlap;          /* all-to-all overlapped with another micro-batch's compute (Megatron-core's 1F1B a2a
                              * overlap; DualPipe always) */
    int comm_sms;            /* SMs the communication kernels hold while overlapped (DeepSeek-V3: 20 of 132) */
    /* TP overlap (TE userbuffers) with set_sm_margin: SMs the reduce-scatter kernel overlapped with the
     * output-projection / fc2 forward GEMM holds, which that GEMM is launched without (0 = none) */
    int ub_sm_proj, ub_sm_fc2;
    double moe_imbalance;    /* busiest expert's tokens over the mean, dropless routing */
} Layout;
void sim_layout_defaults(Layout *l);
/* Software presets (software.c): which mechanisms a generation of training software has. -1 with
 * the list of names if unknown. sim_software_list prints name, summary and sources. */
int sim_software_preset(Layout *l, const char *name);
/* The class a preset's runs are compared in (validated.c): a dated variant of a software is its
 * software (torchtitan-2024 -> torchtitan); others are themselves. */
const char *sim_software_class(const char *name);
void sim_software_list(FILE *out);
const char *sim_recompute_name(Recompute r);
int sim_recompute_parse(const char *s, Recompute *out);

/* ---------- JSON loading (json_load.c) ---------- */
/* Find configs/KIND/NAME.json (KIND: hardware, clusters, models) or take NAME as a path when it
 * contains '/' or ends in .json. Search: $MYRIAD_CONFIG_DIR, <binary>/../configs, ./configs. */
int sim_config_path(const char *kind, const char *name, char *out, size_t cap);
int sim_load_gpu(const char *name_or_path, GpuSpec *g);
int sim_load_cluster(const char *name_or_path, ClusterSpec *c);
int sim_load_model(const char *name_or_path, SimModel *m);
void sim_cluster_defaults(ClusterSpec *c);
void sim_gpu_defaults(GpuSpec *g);

/* ---------- which cluster, how big (cluster_size.c) ---------- */
const char *sim_default_cluster(const char *gpu);               /* configs/clusters name, NULL if none */
int sim_load_default_cluster(const char *gpu, ClusterSpec *c);  /* that cluster, or a built-in fat-tree */
/* Make the cluster hold `gpus`: size a file without "gpus", or build the same design with more
 * nodes (and switch tiers if needed). note (may be NULL) gets one line when something was built. */
int sim_cluster_fit(ClusterSpec *c, int gpus, char *note, size_t cap);

/* ---------- network (cluster.c) ---------- */
/* A group of `size` GPUs whose ranks are `stride` apart in the layout's rank order. */
typedef struct {
    int size, stride;
} Group;
/* Resolved network of one job: per-level bandwidth (B/s per GPU) and latency; level 0 is the
 * scale-up domain, level k >= 1 the k-th switch tier. reach[k]: GPUs under one level-k switch group. */
typedef struct {
    int nlevels;
    double bw[SIM_MAX_TIERS + 1];
    double alpha[SIM_MAX_TIERS + 1];
    double reach[SIM_MAX_TIERS + 1];
    int sharp;
    int rail_only, gpus_per_node; /* cross-rail traffic forwarded over NVLink */
} Network;
void sim_network(const ClusterSpec *c, const GpuSpec *g, Network *n);
/* Highest level the group's traffic crosses (0 = stays in scale-up), and members per level-0 domain. */
int sim_group_level(const Network *n, Group g, int *members_per_domain);

/* ---------- collectives (collectives.c) ---------- */
typedef enum { COLL_ALLREDUCE = 0, COLL_REDUCE_SCATTER, COLL_ALLGATHER, COLL_ALLTOALL, COLL_P2P } CollKind;
typedef enum { ALG_AUTO = 0, ALG_RING, ALG_TREE, ALG_HIER, ALG_SHARP } CollAlg;
/* Time of one collective of `bytes` (the full per-rank buffer: all-reduce input, all-gather output,
 * reduce-scatter input, all-to-all send buffer) over group g. ALG_AUTO picks the fastest applicable. */
double sim_coll_time(const Network *n, CollKind kind, CollAlg alg, double bytes, Group g);
/* Flat alpha-beta formulas (n ranks, per-rank bandwidth bw B/s, per-step latency a s). */
double sim_ring_allreduce(int n, double bytes, double bw, double a);
double sim_ring_gather(int n, double bytes, double bw, double a); /* reduce-scatter or all-gather */
double sim_tree_allreduce(int n, double bytes, double bw, double a);
/* MoE dispatch/combine of T tokens (token_bytes each) to top_k experts over the ep group: flat
 * all-to-all, or two-stage (network once per remote node, then NVLink), node-limited routing. */
double sim_ep_dispatch_time(const Network *n, Group g, double T, double token_bytes, int top_k, int route_nodes,
                            int two_stage);

/* ---------- kernels (gemm_eff.c) ---------- */
double sim_peak_flops(const GpuSpec *g, SimDtype dt); /* FLOP/s of the dtype (16-bit peak if fp16/bf16 missing) */
double sim_gemm_eff(const GpuSpec *g, double M, double N, double K);
double sim_gemm_time(const GpuSpec *g, SimDtype dt, double M, double N, double K, double batch);
double sim_membound_time(const GpuSpec *g, double bytes, int kernels);

/* ---------- pipeline stages (stages.c) ---------- */
int sim_uneven(const Layout *l); /* --stage-layers or --first/--last-stage-layers given */
/* Layers of every virtual stage k = chunk * pp + stage (pp * vpp entries); -1 with the reason. */
int sim_vstage_layers(const SimModel *m, const Layout *l, int *count);
int sim_stage_layer_count(const SimModel *m, const Layout *l, int stage); /* layers of one pipeline stage */
/* Dense and MoE layers of virtual stage k (the model's first dense_layers are dense). */
void sim_vstage_kinds(const SimModel *m, const int *count, int k, int *dense, int *moe);
int sim_parse_stage_list(const char *s, Layout *l);                      /* "7,8,8,7" -> stage_layers */

/* ---------- one layer (layer.c) ---------- */
typedef struct {
    double tokens;                 /* local tokens of the micro-batch */
    double gemm_f, gemm_b;         /* weight GEMMs: forward; dgrad + wgrad */
    double attn_f, attn_b;         /* attention core (unfused: with softmax/dropout) */
    double core_mem_f;             /* the unfused softmax/dropout part of attn_f */
    double elem_f, elem_b;         /* memory-bound kernels */
    double fp8_f, fp8_b;           /* fp8 casts of activations and gradients */
    double tp_f, tp_b, cp_f, cp_b; /* exposed communication */
    double ep_f, ep_b;             /* MoE dispatch + combine, in full (step.c applies the schedule's overlap) */
    double rec_op, rec_op_fp8;     /* what torchtitan's op-level selective recompute re-runs (GEMMs, casts) */
    double rec_ds;                 /* what DeepSeek-V3's recompute re-runs: up-projections, norms, SwiGLU */
    double weight_cast;            /* fp8 cast + transpose of the layer's local weights, once */
    double weight_elems;           /* weights of the fp8 GEMMs */
} LayerCost;
void sim_layer_cost(const SimModel *m, const GpuSpec *g, const Network *net, const Layout *l, int b, LayerCost *o);
/* The same for a dense (moe 0) or MoE (moe 1) layer of the model. */
void sim_layer_cost_kind(const SimModel *m, const GpuSpec *g, const Network *net, const Layout *l, int b, int moe,
                         LayerCost *o);
double sim_moe_load(const SimModel *m, const Layout *l); /* busiest rank's expert tokens over the mean */

/* ---------- memory (memory.c) ---------- */
typedef struct {
    double weights, grads, optimizer, activations, comm_buffers; /* bytes per GPU */
    double fp8_copies;  /* fp8 weight copies (Transformer Engine keeps the cast weights for the step) */
    double reserve;     /* allocator fragmentation reserve */
    double total;
    int stage; /* the pipeline stage with the largest total */
} SimMemory;
/* Activation bytes of one layer for one micro-batch of b sequences (Korthikanti et al. 2022, generalized). */
double sim_layer_activation_bytes(const SimModel *m, const Layout *l, int b);
/* Micro-batches' worth of layer activations held by pipeline stage `stage` at its peak, in layers. */
double sim_inflight_layers(const SimModel *m, const Layout *l, int stage);
double sim_stage_params(const SimModel *m, const Layout *l, int stage); /* parameters held per GPU */
/* The same, split into dense parameters (replicated over dp) and expert parameters (over dp/ep). */
void sim_stage_params_split(const SimModel *m, const Layout *l, int stage, double *dense, double *expert);
/* One transformer layer's parameters per GPU (tp-sharded; experts over etp x ep). */
void sim_layer_params_split(const SimModel *m, const Layout *l, double *dense, double *expert);
void sim_layer_params_split_kind(const SimModel *m, const Layout *l, int moe, double *dense, double *expert);
/* Activation bytes of one dense (0) or MoE (1) layer for b sequences. */
double sim_layer_activation_bytes_kind(const SimModel *m, const Layout *l, int b, int moe);
/* Virtual stage k's parameters per GPU given the layer split `count` (embedding on k = 0, output
 * layer or tied copy on the last). */
void sim_vstage_params_split(const SimModel *m, const Layout *l, int k, const int *count, double *dense, double *expert);
int sim_memory(const SimModel *m, const Layout *l, SimMemory *out);
/* ZeRO (Rajbhandari et al. 2020) model-state bytes per GPU for psi parameters. */
double sim_zero_state_bytes(double psi, int stage, int dp, int grad_bytes, int weight_bytes);

/* ---------- step (step.c, pipeline.c) ---------- */
typedef struct {
    double step_time;
    double forward, backward, recompute;          /* compute time summed on the critical stage */
    double tp_comm, cp_comm, pp_comm, dp_comm, ep_comm; /* exposed communication */
    double ep_total, ep_hidden;   /* MoE all-to-all if nothing hid it, and what compute hid (step totals) */
    double ep_sm_tax;             /* part of ep_comm: compute lost to the SMs the hidden all-to-all held */
    double bubble, optimizer;
    double straggler;     /* the wait for the slowest GPU of a synchronous step (ClusterSpec.straggler_cv) */
    double model_flops;   /* per step, 3x forward (no recompute) */
    double hw_flops;      /* including recomputation */
    double mfu, hfu, tokens_per_s, tflops_per_gpu;
    SimMemory mem;
    int gpus;
    int micro_batch, vpp, microbatches;
} SimResult;

typedef struct TraceWriter TraceWriter;

double sim_expected_max_normal(double n); /* E[max of n standard normals] (Blom) */
/* Check the layout against model, cluster and GPU; -1 with the reason (e.g. "tp 16 exceeds the
 * 8-GPU scale-up domain"). Does not check memory. */
int sim_check_layout(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, const Layout *l);
void sim_normalize_layout(Layout *l); /* sp off without tp, micro-batch and vpp at least 1 */
/* Simulate one step. trace may be NULL. Fails only on an invalid layout. */
int sim_step(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, const Layout *l, SimResult *r,
             TraceWriter *trace);
/* Choose micro-batch (if l->micro_batch == 0) and vpp (if search_vpp) for the fastest step that fits. */
int sim_step_search(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, Layout *l, int search_vpp,
                    SimResult *r);
typedef struct {
    int search_mb, search_vpp, search_recompute; /* what to search (micro-batch also when it is 0) */
    int max_mb;      /* largest micro-batch tried (default 16) */
    double mem_cap;  /* bytes a layout may use (default: the GPU's HBM) */
} SearchOpts;
int sim_step_search_ex(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, Layout *l, const SearchOpts *so,
                       SimResult *r);

/* Pipeline schedule simulation (pipeline.c). fwd[k], bwd[k]: time of the forward and backward
 * (incl. recompute) of virtual stage k = chunk * pp + stage for one micro-batch; p2p: one transfer. */
typedef struct {
    double finish[1024];      /* per stage: time its last op ends (stages <= 1024) */
    double last_bwd[1024];    /* per stage: duration of its last backward op */
    double busy[1024];        /* per stage: compute time */
    double makespan;
    int peak_inflight[1024];  /* per stage: max forward chunks held awaiting backward */
} PipeResult;
int sim_pipeline(int p, int v, int m, PipeSchedule sched, const double *fwd, const double *bwd, double p2p,
                 PipeResult *out, TraceWriter *trace);
/* The same; chunk_done[k] (pp * vpp entries, may be NULL) receives when virtual stage k's last
 * backward ends (its gradients are complete). */
int sim_pipeline_ex(int p, int v, int m, PipeSchedule sched, const double *fwd, const double *bwd, double p2p,
                    double *chunk_done, PipeResult *out, TraceWriter *trace);
/* Interleaved 1F1B with micro-batches in groups of `group` per virtual stage (Megatron-core's
 * microbatch_group_size_per_vp_stage; 0 = pp, and then m must be a multiple of pp). */
int sim_pipeline_group(int p, int v, int m, int group, PipeSchedule sched, const double *fwd, const double *bwd,
                       double p2p, double *chunk_done, PipeResult *out, TraceWriter *trace);
/* Peak of the activation weight (weight[k] per held forward of virtual stage k) one stage holds. */
double sim_pipeline_peak_weight(int p, int v, int m, PipeSchedule sched, int stage, const double *weight);
double sim_pipeline_peak_weight_group(int p, int v, int m, int group, PipeSchedule sched, int stage, const double *weight);

/* Chrome Trace Event output (trace.c). */
TraceWriter *trace_open(const char *path);
void trace_lane(TraceWriter *t, int lane, const char *name);
void trace_event(TraceWriter *t, int lane, const char *name, double start_s, double dur_s);
int trace_close(TraceWriter *t); /* -1 on write error */

/* ---------- data-parallel communication and optimizer (dp_comm.c) ---------- */
typedef struct {
    Group dense, expert;   /* gradient-reduction groups: dp x cp ranks; experts over dp x cp / ep */
    int per_layer;         /* ZeRO 3 without pipelining: FSDP's per-layer gathers */
    double layer_ag, layer_rs; /* one layer's parameter all-gather and gradient reduce-scatter */
    double lay_b;          /* one layer's backward compute (set by the caller) */
} DpPlan;
void sim_dp_plan(const SimModel *m, const Network *net, const Layout *l, DpPlan *d);
/* Data-parallel time of stage s that compute does not hide (after its pipeline finish). */
double sim_dp_exposed(const SimModel *m, const GpuSpec *g, const Network *net, const Layout *l, const DpPlan *d, int s,
                      const int *count, const double *fwd, const double *bwd, const double *done, const PipeResult *pr,
                      int M);
double sim_optimizer_time(const SimModel *m, const GpuSpec *g, const Layout *l, int s, const int *count);

/* ---------- reliability (reliability.c) ---------- */
typedef struct {
    double gpu, hbm, nic, network, host, software; /* interruptions per GPU-hour */
} FailureRates;
void sim_failure_rates_default(FailureRates *f); /* Llama 3 (Dubey et al. 2024, Table 5) */
double sim_job_mtbf_hours(const FailureRates *f, int gpus);
#include "sim/ckpt_interval.h" /* Young/Daly: shared with the trainer's automatic checkpoint intervals */
typedef struct {
    int gpus, hot_spares, in_memory;
    double state_bytes;        /* checkpoint size (whole job) */
    double restart_s;          /* re-launch: scheduling, process start, NCCL init */
    double repair_hours;       /* time to get a failed node back without a spare */
    double storage_gbps, host_mem_gbps;
    int gpus_per_node;
} ReliabilityInput;
typedef struct {
    double mtbf_h, ckpt_s, restore_s, restart_s, interval_s, goodput, young_s, daly_s;
    double p_spare_available;
} ReliabilityResult;
void sim_reliability(const FailureRates *f, const ReliabilityInput *in, ReliabilityResult *out);
/* Default hot-spare nodes: a free spare at a hardware fault with probability >= 99% (4 h repairs). */
int sim_default_hot_spares(int gpus, int gpus_per_node);
int sim_default_hot_spares_for(const FailureRates *f, int gpus, int gpus_per_node); /* with these rates */

/* ---------- cost (cost.c) ---------- */
typedef struct {
    int tiers;
    double switches, links, optics, nics;
    double network_usd, gpu_capex_usd;
    double power_kw;           /* IT power x PUE */
} ClusterCost;
int sim_fat_tree(const ClusterSpec *c, int gpus, ClusterCost *out);
int sim_fabrics(const ClusterSpec *c); /* independent fabrics: planes, or one per rail (rail-only) */
void sim_cost(const ClusterSpec *c, const GpuSpec *g, int gpus, ClusterCost *out);

/* ---------- planner (planner.c) ---------- */
typedef struct {
    Layout layout;
    SimResult res;
    double days; /* without failures */
} PlanEntry;
/* Why layouts were turned down, by binding constraint. */
typedef enum {
    PLAN_TP = 0, PLAN_CP, PLAN_LAYERS, PLAN_GPUS, PLAN_EXPERTS, PLAN_DTYPE, PLAN_BATCH, PLAN_MEMORY, PLAN_OTHER,
    PLAN_NREASONS
} PlanReason;
const char *sim_plan_reason_name(PlanReason r);
/* Dimensions the caller fixed (taken from base as they are) and the memory a layout may use. */
typedef struct {
    int tp, cp, pp, vpp, ep, etp, micro_batch, recompute, sp, stages;
    int batch_default; /* the global batch is the default: raised to dp x pp sequences where that is more */
    double mem_cap; /* bytes: HBM less the headroom */
} PlanFixed;
typedef struct {
    PlanEntry *best; int nbest, cap;
    int considered;
    int count[PLAN_NREASONS];        /* layouts turned down, by binding constraint */
    char example[PLAN_NREASONS][192];
    double least_mem;                /* smallest memory among layouts above the headroom */
    char (*rejected)[192];           /* every rejected layout and why (`plan --why`) */
    int nrejected;
} PlanResult;
/* Enumerate layouts for `gpus` GPUs, keep the top k by time to train `tokens`. base supplies seq,
 * global batch, dtype, software and the fixed dimensions. */
int sim_plan(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, int gpus, const Layout *base,
             const PlanFixed *fx, double tokens, int k, PlanResult *out);
void sim_plan_free(PlanResult *r);
/* "no layout fits: N considered; 12: pp does not split the layers (e.g. ...); ..." */
void sim_plan_why_none(const PlanResult *r, char *buf, size_t cap);

/* ---------- validated range (validated.c) ---------- */
/* GPU family of a GPU config name (a100, h100, h200, b200; NULL for others). */
const char *sim_gpu_family(const char *gpu);
/* Best measured MFU in the validation sets for this GPU family, software preset and 16-bit (fp8 0)
 * or fp8 math; *exact = 0 when no run of that software and precision exists and the GPU's best
 * run of any software is returned instead; 0 when the GPU has no validated run. *run names it. */
double sim_validated_mfu(const char *gpu, const char *software, int fp8, const char **run, int *exact);

/* Flags an answer carries (sim_warn.c): fewer micro-batches than stages, a bubble above 25% of the
 * step, an MFU above (or without) a validated run of this GPU, software and precision. */
enum { SIM_WARN_FEW_MB = 1, SIM_WARN_BUBBLE = 2, SIM_WARN_MFU = 4 };
int sim_result_flags(const char *gpu, const char *software, const Layout *l, const SimResult *r);
void sim_result_warning(int flag, const char *gpu, const char *software, const Layout *l, const SimResult *r, char *buf,
                        size_t cap);

/* ---------- validation (validate.c) ---------- */
int sim_validate_file(const char *path, int json, FILE *out, double *median_err, double *max_err);

#endif
