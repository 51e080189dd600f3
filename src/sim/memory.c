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
 *     buffers of backward: one layer's recomputed activations, fp32 logits on the last stage, the
 *     sequence-parallel gathered input, ZeRO-3 gathered layers.
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
 * sp), sharded by tp, the s^2 attention core (unfused), in bytes. */
static void layer_act_parts(const SimModel *m, const Layout *l, int b, double *repl, double *shard, double *core) {
    double e = sim_dtype_bytes(l->dtype == DT_FP8 ? DT_BF16 : l->dtype) / 2.0; /* formulas in 2-byte units */
    double q8 = l->dtype == DT_FP8 ? 0.5 : 1.0; /* fp8 GEMM inputs saved in 1 byte */
    double s = (double)l->seq / l->cp, S = l->seq, h = m->hidden, a = m->heads, kv = kvd(m);
    double load = m->experts > 1 ? (l->capacity_factor > 0 ? l->capacity_factor : (l->moe_imbalance > 0 ? l->moe_imbalance : 1)) : 1;
    double f = m->experts > 1 ? (double)m->expert_ffn * m->top_k * load : m->ffn;
    double sbh = s * b * h, sbf = s * b * f;
    if (l->recompute == RECOMPUTE_SELECTIVE && l->selective_op) {
        /* torchtitan: the block input, q, v, the attention output and every other matmul output */
        *repl = e * (2 * sbh + (m->gated ? 2 * sbh : 0));
        *shard = e * (2 * sbh + 2 * s * b * kv + 2 * sbh + 2 * sbf + (m->gated ? 0 : 0));
        *core = 0;
        return;
    }
    /* norm inputs 2 + 2, QKV and fc1 inputs 2 + 2 (fp8: 1 + 1), dropout masks 1 + 1 */
    *repl = e * ((4.0 + 4.0 * q8) * sbh + (m->dropout ? 2.0 * sbh : 0));
    double fc1_out = (m->gated ? 4.0 : 2.0) * sbf;
    *shard = e * (2.0 * sbh + 4.0 * s * b * kv + 2.0 * sbh + (q8 < 1 ? sbh : 0) + fc1_out + 2.0 * q8 * sbf);
    /* softmax output 2, dropout mask 1, dropout output 2 (no dropout: softmax output only) */
    *core = e * (m->dropout ? 5.0 : 2.0) * a * s * S * b;
}

double sim_layer_activation_bytes(const SimModel *m, const Layout *l, int b) {
    double repl, shard, core;
    double t = l->tp;
    int sp = l->sp && t > 1;
    if (l->recompute == RECOMPUTE_FULL)
        return sim_dtype_bytes(l->dtype == DT_FP8 ? DT_BF16 : l->dtype) * ((double)l->seq / l->cp) * b * m->hidden /
               (sp ? t : 1);
    layer_act_parts(m, l, b, &repl, &shard, &core);
    double v = (sp ? repl / t : repl) + shard / t;
    if (l->recompute == RECOMPUTE_NONE && l->flash == ATTN_UNFUSED) v += core / t;
    if (l->flash != ATTN_UNFUSED) v += 4.0 * m->heads * ((double)l->seq / l->cp) * b / t; /* fp32 softmax statistics */
    return v;
}

/* Full (no-recompute) activations of one layer: what backward rebuilds while it runs. */
static double layer_full_bytes(const SimModel *m, const Layout *l, int b) {
    Layout x = *l;
    x.recompute = RECOMPUTE_NONE;
    return sim_layer_activation_bytes(m, &x, b);
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
        peak = sim_pipeline_peak_weight(p, v, microbatches(l), sched, stage, w);
    }
    free(count);
    free(w);
    return peak;
}

void sim_layer_params_split(const SimModel *m, const Layout *l, double *dense, double *expert) {
    double per_layer = sim_model_layer_params(m);
    double exp_layer = m->experts > 1 ? m->experts * sim_mlp_params(m, m->expert_ffn) : 0;
    double et = l->etp > 0 ? l->etp : l->tp;
    *dense = (per_layer - exp_layer) / l->tp;
    *expert = exp_layer / (et * l->ep);
}

void sim_vstage_params_split(const SimModel *m, const Layout *l, int k, const int *count, double *dense, double *expert) {
    double d, e;
    sim_layer_params_split(m, l, &d, &e);
    int V = l->pp * (l->vpp > 0 ? l->vpp : 1);
    *dense = count[k] * d;
    *expert = count[k] * e;
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
static double fp8_layer_weights(const SimModel *m, const Layout *l) {
    double d, e;
    sim_layer_params_split(m, l, &d, &e);
    double norms = (m->rmsnorm ? 1 : 2) * 2.0 * m->hidden / l->tp;
    double router = m->experts > 1 ? (double)m->hidden * m->experts / l->tp : 0;
    return d + e - norms - router;
}

static void stage_memory(const SimModel *m, const Layout *l, int s, SimMemory *x) {
    memset(x, 0, sizeof *x);
    int fp32 = sim_dtype_bytes(l->dtype) == 4;
    int b = l->micro_batch > 0 ? l->micro_batch : 1;
    double dpc = (double)l->dp * l->cp, edp = dpc / l->ep;
    if (edp < 1) edp = 1;
    double dense, expert;
    sim_stage_params_split(m, l, s, &dense, &expert);
    double shard = dense / dpc + expert / edp, full = dense + expert;
    double wb = fp32 ? 4 : 2;
    int torch_fsdp = l->zero >= 3 && l->optimizer_passes;
    if (l->zero >= 3) {
        x->weights = (torch_fsdp ? 4.0 : wb) * shard;
        x->grads = l->grad_bytes * shard;
        x->optimizer = (torch_fsdp || fp32 ? 8.0 : l->opt_bytes) * shard;
    } else if (l->dtype == DT_FP8 && l->fp8_gather) {
        /* fp8 parameters: the linears' weights held in fp8 (their transposes are the fp8 copies) */
        double f8 = 0;
        int layers = sim_stage_layer_count(m, l, s);
        if (layers > 0) f8 = fp8_layer_weights(m, l) * layers;
        x->weights = wb * (full - f8) + 1.0 * f8;
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
    if (l->dtype == DT_FP8 && l->fp8_cache) {
        int layers = sim_stage_layer_count(m, l, s);
        x->fp8_copies = (l->fp8_gather ? 1.0 : 2.0) * fp8_layer_weights(m, l) * (layers > 0 ? layers : 0);
    }
    x->activations = sim_layer_activation_bytes(m, l, b) * sim_inflight_layers(m, l, s);
    if (l->recompute != RECOMPUTE_NONE) transient += layer_full_bytes(m, l, b) - sim_layer_activation_bytes(m, l, b);
    double e = sim_dtype_bytes(l->dtype == DT_FP8 ? DT_BF16 : l->dtype);
    if (s == l->pp - 1) transient += 4.0 * ((double)l->seq / l->cp) * b * m->vocab / l->tp; /* fp32 logits */
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
