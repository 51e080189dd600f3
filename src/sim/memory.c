/* memory.c: bytes per GPU by category for a model under a layout, for the fullest pipeline stage.
 *   weights / grads / optimizer: parameters held by the stage (its layers from stages.c, sharded by
 *     tp, experts by etp x ep; embedding on the first stage, output layer on the last) times bytes
 *     per element, sharded over dp x cp by the ZeRO stage (Rajbhandari et al. 2020). Megatron-LM
 *     keeps 16-bit weights, fp32 main gradients (grad_bytes) and fp32 master + Adam m, v (12 bytes);
 *     a torch FSDP run (optimizer_passes) keeps fp32 sharded parameters (4), gradients (4) and m, v
 *     (8); NeMo's distributed Adam with bf16 state (optim.dtype bf16) keeps m, v in bf16 and the
 *     master weights as 16-bit remainders of the bf16 weights: 6 (opt_bytes). ZeRO 3 also holds gathered layers: two prefetched layers and one layer's unsharded
 *     gradients without pipelining; under a pipeline the whole stage stays gathered (torchtitan
 *     turns resharding off with pp) with its unsharded gradients.
 *   fp8 copies: Transformer Engine keeps each fp8 GEMM's cast weight and its transpose for the
 *     step (2 bytes per weight; fp8_cache).
 *   activations: Korthikanti et al. 2022, Sec. 4, per layer and micro-batch, generalized to GQA,
 *     gated MLPs and any ffn; fp8 linears save their input as a 1-byte transposed copy (TE, torchao);
 *     selective recompute drops the attention core (Megatron) or keeps only every other matmul
 *     output (torchtitan's op policy); full recompute keeps the layer input; times the layers a
 *     stage holds at its peak in its schedule (uneven chunks weighted by their layers).
 *   buffers/workspace: 1 GiB (CUDA context, cuBLAS workspace, NCCL buffers) plus the transient
 *     buffers of backward: one layer's recomputed activations, the loss's logits on the last stage
 *     (ce_peak_bytes per logit), the sequence-parallel gathered input, ZeRO-3 gathered layers.
 *   reserve: the caching allocator's fragmentation, 5% of the activations and transient buffers
 *     (the memory that is allocated and freed every micro-batch). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define FRAGMENTATION 0.05

static double kvd(const SimModel *m) { return (double)m->kv_heads * (m->hidden / m->heads); }

/* Parts of one layer's saved activations for b sequences: replicated across tp ranks (sharded by
 * sp), sharded by tp, the s^2 attention core (unfused), in bytes. MoE layers keep the permuted
 * copies of their tokens (top_k each, at the busiest rank's load) as the experts' fc1 inputs, and
 * the shared experts' MLP activations; multi-head latent attention keeps its two latents (inputs of
 * the up-projections) and the up-projected Q, K (nope + rope dims) and V per head. */
static void layer_act_parts(const SimModel *m, const Layout *l, int b, int moe, double *repl, double *shard, double *core) {
    double e = sim_dtype_bytes(l->dtype == DT_FP8 ? DT_BF16 : l->dtype) / 2.0; /* formulas in 2-byte units */
    double q8 = l->dtype == DT_FP8 ? 0.5 : 1.0; /* fp8 GEMM inputs saved in 1 byte */
    double s = (double)l->seq / l->cp, S = l->seq, h = m->hidden, a = m->heads, kv = kvd(m);
    moe = moe && m->experts > 1;
    double load = moe ? sim_moe_load(m, l) : 1;
    double f = moe ? (double)m->expert_ffn * m->top_k * load : m->ffn;
    double sf = moe ? (double)m->shared_experts * (m->shared_ffn > 0 ? m->shared_ffn : m->expert_ffn) : 0;
    double sbh = s * b * h, sbf = s * b * f, sbs = s * b * sf;
    /* attention: Q, K, V (2-byte units per token, sharded by tp) and what is kept replicated */
    double qkv = 2.0 * sbh + 4.0 * s * b * kv, lat = 0;
    if (sim_mla(m)) {
        double qk = m->qk_nope + m->qk_rope;
        qkv = 2.0 * s * b * a * qk + 2.0 * s * b * a * (qk + m->v_head);
        lat = (2.0 + 2.0 * q8) * s * b * ((m->q_lora > 0 ? m->q_lora : 0) + m->kv_lora + m->qk_rope); /* norm in + GEMM in */
    }
    double proj_in = sim_mla(m) ? s * b * a * m->v_head : sbh;
    double routed_in = moe ? 2.0 * q8 * m->top_k * load * sbh : 0; /* permuted tokens into the experts */
    if (l->recompute == RECOMPUTE_SELECTIVE && l->selective_ds) {
        /* DeepSeek-V3 (Sec. 3.2.3, 3.3.3): the norms' outputs and the up-projected Q, K, V are
         * recomputed; kept: the norm inputs, every linear's input in fp8 (the latents included),
         * the SwiGLU input in fp8 (its output recomputed), the permuted tokens in fp8 */
        *repl = e * (4.0 * sbh + 4.0 * q8 * sbh + 2.0 * q8 * (lat > 0 ? lat / (2.0 + 2.0 * q8) : 0));
        *shard = e * (2.0 * q8 * proj_in + (m->gated ? 4.0 : 2.0) * q8 * (sbf + sbs) + routed_in);
        *core = 0;
        return;
    }
    if (l->recompute == RECOMPUTE_SELECTIVE && l->selective_op) {
        /* torchtitan: the block input, q, v, the attention output and every other matmul output */
        *repl = e * (2 * sbh + (m->gated ? 2 * sbh : 0));
        *shard = e * (2 * sbh + 2 * s * b * kv + 2 * sbh + 2 * sbf + 2 * sbs + routed_in);
        *core = 0;
        return;
    }
    /* norm inputs 2 + 2, QKV and fc1 inputs 2 + 2 (fp8: 1 + 1), dropout masks 1 + 1 */
    *repl = e * ((4.0 + 4.0 * q8) * sbh + (m->dropout ? 2.0 * sbh : 0) + lat);
    double fc1_out = (m->gated ? 4.0 : 2.0) * (sbf + sbs);
    *shard = e * (qkv + 2.0 * proj_in + (q8 < 1 ? proj_in : 0) + fc1_out + 2.0 * q8 * (sbf + sbs) + routed_in);
    /* softmax output 2, dropout mask 1, dropout output 2 (no dropout: softmax output only) */
    *core = e * (m->dropout ? 5.0 : 2.0) * a * s * S * b;
}

double sim_layer_activation_bytes_kind(const SimModel *m, const Layout *l, int b, int moe) {
    double repl, shard, core;
    double t = l->tp;
    int sp = l->sp && t > 1;
    if (l->recompute == RECOMPUTE_FULL)
        return sim_dtype_bytes(l->dtype == DT_FP8 ? DT_BF16 : l->dtype) * ((double)l->seq / l->cp) * b * m->hidden /
               (sp ? t : 1);
    layer_act_parts(m, l, b, moe, &repl, &shard, &core);
    double v = (sp ? repl / t : repl) + shard / t;
    if (l->recompute == RECOMPUTE_NONE && l->flash == ATTN_UNFUSED) v += core / t;
    if (l->flash != ATTN_UNFUSED) v += 4.0 * m->heads * ((double)l->seq / l->cp) * b / t; /* fp32 softmax statistics */
    return v;
}

double sim_layer_activation_bytes(const SimModel *m, const Layout *l, int b) {
    return sim_layer_activation_bytes_kind(m, l, b, m->experts > 1);
}

static int microbatches(const Layout *l) {
    int dpb = l->global_batch / l->dp;
    int mb = l->micro_batch > 0 ? dpb / l->micro_batch : 1;
    return mb > 0 ? mb : 1;
}

double sim_inflight_layers(const SimModel *m, const Layout *l, int stage) {
    int p = l->pp, v = l->vpp > 0 ? l->vpp : 1, V = p * v;
    int *count = malloc(sizeof(int) * (size_t)V);
    double *w = malloc(sizeof(double) * (size_t)V);
    double peak = 0;
    if (count && w && !sim_vstage_layers(m, l, count)) {
        for (int k = 0; k < V; k++) w[k] = count[k];
        PipeSchedule sched = v > 1 ? SCHED_INTERLEAVED : l->schedule;
        peak = sim_pipeline_peak_weight_group(p, v, microbatches(l), l->vpp_group, sched, stage, w);
    }
    free(count);
    free(w);
    return peak;
}

void sim_layer_params_split(const SimModel *m, const Layout *l, double *dense, double *expert) {
    sim_layer_params_split_kind(m, l, m->experts > 1, dense, expert);
}

void sim_layer_params_split_kind(const SimModel *m, const Layout *l, int moe, double *dense, double *expert) {
    moe = moe && m->experts > 1;
    double per_layer = sim_model_layer_params_kind(m, moe);
    double exp_layer = moe ? m->experts * sim_mlp_params(m, m->expert_ffn) : 0;
    double et = l->etp > 0 ? l->etp : l->tp;
    *dense = (per_layer - exp_layer) / l->tp;
    *expert = exp_layer / (et * l->ep);
}

void sim_vstage_params_split(const SimModel *m, const Layout *l, int k, const int *count, double *dense, double *expert) {
    double dd, de, md, me;
    sim_layer_params_split_kind(m, l, 0, &dd, &de);
    sim_layer_params_split_kind(m, l, 1, &md, &me);
    int V = l->pp * (l->vpp > 0 ? l->vpp : 1), nd, nm;
    sim_vstage_kinds(m, count, k, &nd, &nm);
    *dense = nd * dd + nm * md;
    *expert = nd * de + nm * me;
    /* DeepSeek-V3's MTP modules sit with the output head on the last stage (one more layer and the
     * projection of [h; emb], Sec. 2.2) */
    if (k == V - 1 && m->mtp) {
        *dense += m->mtp * (m->experts > 1 ? md : dd) + m->mtp * 2.0 * m->hidden * m->hidden / l->tp;
        *expert += m->mtp * (m->experts > 1 ? me : de);
    }
    double emb = (double)m->vocab * m->hidden / l->tp;
    if (k == 0) *dense += emb + (m->learned_pos ? (double)m->seq * m->hidden : 0);
    if (k == V - 1 && (!m->tied || l->pp > 1)) *dense += emb; /* output layer (or tied copy) */
    if (k == V - 1) *dense += (m->rmsnorm ? 1.0 : 2.0) * m->hidden; /* final norm */
}

/* Parameters per GPU of stage `stage`, split into dense (replicated over dp) and expert parts. */
void sim_stage_params_split(const SimModel *m, const Layout *l, int stage, double *dense, double *expert) {
    int V = l->pp * (l->vpp > 0 ? l->vpp : 1);
    int *count = malloc(sizeof(int) * (size_t)V);
    *dense = *expert = 0;
    if (!count) return;
    if (sim_vstage_layers(m, l, count)) {
        /* an invalid split: fall back to an even share (callers check the layout first) */
        for (int k = 0; k < V; k++) count[k] = m->layers / V;
    }
    for (int k = stage; k < V; k += l->pp) {
        double d, e;
        sim_vstage_params_split(m, l, k, count, &d, &e);
        *dense += d;
        *expert += e;
    }
    free(count);
}

double sim_stage_params(const SimModel *m, const Layout *l, int stage) {
    double d, e;
    sim_stage_params_split(m, l, stage, &d, &e);
    return d + e;
}

double sim_zero_state_bytes(double psi, int stage, int dp, int grad_bytes, int weight_bytes) {
    double w = weight_bytes * psi, g = grad_bytes * psi, o = 12.0 * psi;
    if (stage >= 1) o /= dp;
    if (stage >= 2) g /= dp;
    if (stage >= 3) w /= dp;
    return w + g + o;
}

/* Weights of the fp8 GEMMs of one layer (all linears but the router), per GPU. */
static double fp8_layer_weights_kind(const SimModel *m, const Layout *l, int moe) {
    double d, e;
    sim_layer_params_split_kind(m, l, moe, &d, &e);
    double norms = (m->rmsnorm ? 1 : 2) * 2.0 * m->hidden / l->tp;
    double router = moe && m->experts > 1 ? (double)m->hidden * m->experts / l->tp : 0;
    return d + e - norms - router;
}

/* The pipeline stages a GPU holds: its own and, under DualPipe, the mirror stage pp-1-s (DeepSeek-V3
 * Sec. 3.2.1: every device keeps two stages, one of each direction, "parameters 2x"). */
static int held_stages(const Layout *l, int s, int *out) {
    out[0] = s;
    if (l->schedule == SCHED_DUALPIPE && l->pp > 1 && l->pp - 1 - s != s) { out[1] = l->pp - 1 - s; return 2; }
    return 1;
}

/* fp8 GEMM weights of the held stages' layers, dense and MoE layers each their own. */
static double stage_fp8_weights(const SimModel *m, const Layout *l, const int *count, int s) {
    int st[2], ns = held_stages(l, s, st), V = l->pp * (l->vpp > 0 ? l->vpp : 1);
    double w = 0, wd = fp8_layer_weights_kind(m, l, 0), wm = fp8_layer_weights_kind(m, l, 1);
    for (int i = 0; i < ns; i++)
        for (int k = st[i]; k < V; k += l->pp) {
            int nd, nm;
            sim_vstage_kinds(m, count, k, &nd, &nm);
            w += nd * wd + nm * wm;
        }
    return w;
}

/* Activation bytes a stage holds at its peak: its schedule's in-flight forwards, each virtual stage
 * weighted by its dense and MoE layers' bytes. DualPipe holds PP + 1 micro-batches of a stage's
 * layers (DeepSeek-V3 Table 2; 1F1B's first stage: PP), of the two stages it runs. */
static double inflight_bytes(const SimModel *m, const Layout *l, const int *count, int s, int b) {
    int p = l->pp, v = l->vpp > 0 ? l->vpp : 1, V = p * v;
    double ad = sim_layer_activation_bytes_kind(m, l, b, 0), am = sim_layer_activation_bytes_kind(m, l, b, 1);
    double *w = malloc(sizeof(double) * (size_t)V);
    if (!w) return 0;
    for (int k = 0; k < V; k++) {
        int nd, nm;
        sim_vstage_kinds(m, count, k, &nd, &nm);
        w[k] = nd * ad + nm * am;
    }
    double peak;
    if (l->schedule == SCHED_DUALPIPE && p > 1) {
        int mb = microbatches(l);
        peak = (mb < p + 1 ? mb : p + 1) * 0.5 * (w[s] + w[p - 1 - s]);
    } else {
        PipeSchedule sched = v > 1 ? SCHED_INTERLEAVED : l->schedule;
        peak = sim_pipeline_peak_weight_group(p, v, microbatches(l), l->vpp_group, sched, s, w);
    }
    free(w);
    return peak;
}

static void stage_memory(const SimModel *m, const Layout *l, int s, SimMemory *x) {
    memset(x, 0, sizeof *x);
    int fp32 = sim_dtype_bytes(l->dtype) == 4;
    int b = l->micro_batch > 0 ? l->micro_batch : 1;
    double dpc = (double)l->dp * l->cp, edp = dpc / l->ep;
    if (edp < 1) edp = 1;
    int V = l->pp * (l->vpp > 0 ? l->vpp : 1);
    int *count = malloc(sizeof(int) * (size_t)V);
    if (!count) return;
    if (sim_vstage_layers(m, l, count))
        for (int k = 0; k < V; k++) count[k] = m->layers / V; /* invalid split: callers check the layout */
    int st[2], ns = held_stages(l, s, st);
    double dense = 0, expert = 0;
    for (int i = 0; i < ns; i++) {
        double d, e;
        sim_stage_params_split(m, l, st[i], &d, &e);
        dense += d;
        expert += e;
    }
    double shard = dense / dpc + expert / edp, full = dense + expert;
    double f8w = l->dtype == DT_FP8 ? stage_fp8_weights(m, l, count, s) : 0;
    double wb = fp32 ? 4 : 2;
    int torch_fsdp = l->zero >= 3 && l->optimizer_passes;
    if (l->zero >= 3) {
        x->weights = (torch_fsdp ? 4.0 : wb) * shard;
        x->grads = l->grad_bytes * shard;
        x->optimizer = (torch_fsdp || fp32 ? 8.0 : l->opt_bytes) * shard;
    } else if (l->dtype == DT_FP8 && l->fp8_gather) {
        /* fp8 parameters: the linears' weights held in fp8 (their transposes are the fp8 copies) */
        x->weights = wb * (full - f8w) + 1.0 * f8w;
        x->grads = l->grad_bytes * (l->zero >= 2 ? shard : full);
        x->optimizer = (fp32 ? 8.0 : l->opt_bytes) * (l->zero >= 1 ? shard : full);
    } else {
        x->weights = wb * full;
        x->grads = l->grad_bytes * (l->zero >= 2 ? shard : full);
        x->optimizer = (fp32 ? 8.0 : l->opt_bytes) * (l->zero >= 1 ? shard : full);
    }
    double gb = l->fp8_gather && l->dtype == DT_FP8 ? 1.0 : 2.0;
    double ws = 1.0 * GIB; /* CUDA context, cuBLAS workspace, NCCL channel buffers */
    double transient = 0;
    if (l->zero >= 3) {
        double d1, e1;
        sim_layer_params_split(m, l, &d1, &e1);
        if (l->pp > 1) {
            /* the stage stays gathered over the micro-batches, with unsharded gradients */
            x->weights += gb * full;
            x->grads += 2.0 * full;
        } else {
            /* two gathered layers (the running one, the prefetched one) and one layer's gradients,
             * unsharded in 16 bits and in the reduce dtype */
            transient += 2.0 * gb * (d1 + e1) + (2.0 + l->grad_bytes) * (d1 + e1);
        }
    }
    if (l->dtype == DT_FP8 && l->fp8_cache) x->fp8_copies = (l->fp8_gather ? 1.0 : 2.0) * f8w;
    x->activations = inflight_bytes(m, l, count, s, b);
    free(count);
    if (l->recompute != RECOMPUTE_NONE) {
        Layout x0 = *l;
        x0.recompute = RECOMPUTE_NONE;
        int moe = m->experts > 1;
        transient += sim_layer_activation_bytes_kind(m, &x0, b, moe) - sim_layer_activation_bytes_kind(m, l, b, moe);
    }
    double e = sim_dtype_bytes(l->dtype == DT_FP8 ? DT_BF16 : l->dtype);
    int last = s == l->pp - 1 || (l->schedule == SCHED_DUALPIPE && s == 0);
    if (last) transient += l->ce_peak_bytes * ((double)l->seq / l->cp) * b * m->vocab / l->tp; /* the loss's logits */
    if (l->tp > 1 && l->sp) transient += e * l->seq / l->cp * b * m->hidden;              /* gathered input */
    /* PyTorch's ring attention all-gathers the K/V of every local query head (layer.c) */
    if (l->cp > 1 && l->cp_torch) transient += 2.0 * e * l->seq * b * m->hidden / l->tp;
    x->comm_buffers = ws + transient;
    x->reserve = FRAGMENTATION * (x->activations + transient);
    x->total = x->weights + x->grads + x->optimizer + x->fp8_copies + x->activations + x->comm_buffers + x->reserve;
    x->stage = s;
}

int sim_memory(const SimModel *m, const Layout *l, SimMemory *out) {
    memset(out, 0, sizeof *out);
    int uneven = sim_uneven(l);
    for (int s = 0; s < l->pp; s++) {
        /* stages in the middle are alike (even splits); check the first two and the last */
        if (!uneven && s > 1 && s < l->pp - 1) continue;
        SimMemory x;
        stage_memory(m, l, s, &x);
        if (x.total > out->total) *out = x;
    }
    return 0;
}
