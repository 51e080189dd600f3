/* validate_row.c: one row of a published-measurement CSV (../shared/validation) turned into what
 * the simulator needs: model shape and arch, layout, software preset, GPU, cluster, what to search,
 * and the measured seconds per step. The modern file's `notes` column carries what the columns
 * cannot; the keywords read here are listed in docs/SIMULATOR.md (Validation). A row that cannot
 * be simulated gets a one-line reason instead. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "sim/validate.h"
#include "util/error.h"

int val_col(const ValHeader *h, const char *name) {
    for (int i = 0; i < h->ncol; i++)
        if (!strcmp(h->names[i], name)) return i;
    return -1;
}

static int has(const char *notes, const char *word) { return strstr(notes, word) != NULL; }

/* The integer after `key` in notes ("CP8" -> 8, "local batch 32" -> 32); 0 when absent. */
static int after(const char *notes, const char *key) {
    const char *p = strstr(notes, key);
    while (p) {
        const char *q = p + strlen(key);
        while (*q == ' ') q++;
        if (isdigit((unsigned char)*q)) return atoi(q);
        p = strstr(p + 1, key);
    }
    return 0;
}

/* Software of a source generation (see software.c and docs/SIMULATOR.md, Software presets). */
static const char *software_of(const char *source, const char *notes) {
    if (!strncmp(source, "narayanan2021", 13)) return "megatron-2021";
    if (!strncmp(source, "korthikanti2022", 15)) return "megatron-2022";
    if (!strncmp(source, "torchtitan", 10)) {
        /* torch.compile is named when used; "no compile"/"eager" rows and the 2024 docs (whose
         * configs had compile off) run eager */
        int compiled = has(notes, "compile") && !has(notes, "no compile");
        if (!compiled) return "torchtitan-eager";
        /* before 2025-04 only the blocks were compiled: the loss ran eager (software.c) */
        return !strncmp(source, "torchtitan-2024", 15) ? "torchtitan-2024" : "torchtitan";
    }
    if (!strncmp(source, "nemo-25", 7)) return "nemo-2";
    if (!strncmp(source, "mlperf", 6)) return "mlperf";
    if (!strncmp(source, "nemo", 4)) return "nemo";
    return "megatron-core";
}

/* The GPU and cluster a source ran on. */
static void machine_of(const char *source, const char *notes, const char *gpu, char *gpu_out, char *cluster_out) {
    snprintf(gpu_out, 64, "%s", gpu);
    cluster_out[0] = 0; /* the default cluster of the GPU */
    if (!strncmp(source, "torchtitan", 10) && (has(notes, "Grand Teton") || has(notes, "95GB HBM2e")) &&
        !strcmp(gpu, "h100-sxm")) {
        snprintf(gpu_out, 64, "h100-gt500");       /* 96 GB HBM2e, 500 W (torchtitan benchmarks) */
        snprintf(cluster_out, 64, "grand-teton-roce"); /* 400 Gb/s RDMA per GPU */
    } else if (has(source, "oracle")) {
        snprintf(cluster_out, 64, "oci-h100-roce");
    }
}

/* Uneven split of Megatron's account_for_embedding/loss_in_pipeline_split and torchtitan's
 * default split points: the first and last stage share what the even middle stages leave. */
static void uneven_ends(int layers, int pp, Layout *l) {
    int per = (layers + pp - 1) / pp;
    int rest = layers - (pp - 2) * per;
    l->first_layers = rest / 2;
    l->last_layers = rest - rest / 2;
}

int val_row_case(const ValHeader *h, char **c, ValCase *vc) {
    memset(vc, 0, sizeof *vc);
#define HAS(name) (val_col(h, name) >= 0 && c[val_col(h, name)][0])
#define I(name) atoi(c[val_col(h, name)])
#define D(name) atof(c[val_col(h, name)])
#define S(name) (val_col(h, name) >= 0 ? c[val_col(h, name)] : "")
    const char *notes = S("notes"), *source = S("source");
    SimModel *m = &vc->m;
    Layout *l = &vc->l;
    snprintf(vc->name, sizeof vc->name, "%s", S("case"));
    snprintf(vc->source, sizeof vc->source, "%s", source);
    snprintf(m->name, sizeof m->name, "%s", S("case"));
    SimArch arch = ARCH_GPT;
    if (has(notes, "SwiGLU") || has(notes, "Mixtral")) arch = ARCH_LLAMA;
    else if (has(notes, "Nemotron") || has(notes, "squared-ReLU")) arch = ARCH_NEMOTRON;
    sim_model_set_arch(m, arch);
    if (has(notes, "untied")) m->tied = 0;
    if (arch == ARCH_GPT && !strncmp(source, "mlperf", 6)) m->tied = 1;
    m->layers = I("layers"); m->hidden = I("hidden"); m->heads = I("heads");
    m->kv_heads = HAS("kv_heads") ? I("kv_heads") : m->heads;
    m->ffn = HAS("ffn") ? I("ffn") : 4 * m->hidden;
    m->vocab = I("vocab"); m->seq = I("seq"); m->top_k = 1;
    int experts = after(notes, "MoE ");
    if (experts > 1) {
        m->experts = experts;
        m->top_k = after(notes, "top-") > 0 ? after(notes, "top-") : 2;
        m->expert_ffn = m->ffn;
    }
    sim_layout_defaults(l);
    snprintf(vc->software, sizeof vc->software, "%s", software_of(source, notes));
    sim_software_preset(l, vc->software);
    int gpus = I("gpus");
    l->tp = I("tp"); l->pp = I("pp"); l->seq = m->seq;
    l->cp = after(notes, "CP") > 0 ? after(notes, "CP") : 1;
    l->ep = after(notes, "EP") > 0 ? after(notes, "EP") : 1;
    l->dp = HAS("dp") ? I("dp") : gpus / (l->tp * l->pp * l->cp);
    l->global_batch = I("global_batch");
    l->micro_batch = HAS("micro_batch") ? I("micro_batch") : 0;
    vc->search_mb = !HAS("micro_batch");
    vc->search_vpp = HAS("vpp") ? 0 : 1;
    l->vpp = HAS("vpp") ? I("vpp") : 1;
    vc->search_recompute = !HAS("recompute");
    if (HAS("recompute") && sim_recompute_parse(S("recompute"), &l->recompute))
        return myr_error("recompute: %s", myr_last_error());
    /* sequence parallelism: as published, else on with tp (Megatron-LM/NeMo with TP, SP implied) */
    l->sp = HAS("seq_parallel") ? !strcmp(S("seq_parallel"), "yes") : l->tp > 1;
    l->dtype = DT_FP16;
    if (HAS("dtype") && sim_dtype_parse(S("dtype"), &l->dtype)) return myr_error("dtype: %s", myr_last_error());
    /* mechanisms the notes name */
    if (has(notes, "FSDP") && !has(notes, "no FSDP")) l->zero = 3;
    if (has(notes, "Megatron-FSDP")) l->reshard = 1, l->optimizer_passes = 0;
    if (has(notes, "current (per-tensor) scaling") || has(notes, "tensorwise")) l->fp8_scaling = FP8_CURRENT;
    if (has(notes, "fp8 FSDP all-gather")) l->fp8_gather = 1;
    if (!strncmp(source, "torchtitan", 10)) {
        l->tp_overlap = has(notes, "AsyncTP") && !has(notes, "vanilla TP");
        /* torchtitan's pipeline: looped schedules put 2 stages on a rank, micro-batches default to
         * the pp degree (torchtitan pipeline_llama.py) */
        if (l->pp > 1) {
            int local = after(notes, "local batch") > 0 ? after(notes, "local batch") : l->global_batch / l->dp;
            l->vpp = has(notes, "nterleaved") ? 2 : 1;
            vc->search_vpp = 0;
            l->micro_batch = local / l->pp > 0 ? local / l->pp : 1;
            vc->search_mb = 0;
        }
    }
    if (m->layers % (l->pp * l->vpp) && !vc->search_vpp) uneven_ends(m->layers, l->pp, l);
    /* Transformer Engine ran flash-attn 2 on Hopper until its default moved to cuDNN's fused
     * attention in 2024 (TE issue 1123, Aug 2024: "TE currently supports cuDNN attention as
     * default"): MLPerf v3.x (2023) and NeMo 24.03 ran FlashAttention-2 */
    if (!strncmp(source, "mlperf-v3", 9) || !strncmp(source, "nemo-24.03", 10)) l->flash = ATTN_FA2;
    /* MLPerf GPT-3 TP-overlap configs (set_sm_margin 1; mlcommons training_results, NVIDIA's
     * benchmarks/gpt3 implementations): proj_fprop "pipeline" on 24 SMs in every round; fc2_fprop
     * "pipeline" on 20 SMs in v3.0 (h100tp4pp8mbs1_tp_comm_overlap_cfg.yaml), 4 in v3.1
     * (conf/tp_overlap/h100tp4pp8mbs1.yaml), ring exchange on 1 SM in v4.x (conf/tp_overlap/h100tp4mbs1.yaml,
     * b200tp4mbs2.yaml) */
    if (!strncmp(source, "mlperf", 6) && l->tp_overlap) {
        l->ub_sm_proj = 24;
        l->ub_sm_fc2 = !strncmp(source, "mlperf-v3.0", 11) ? 20 : !strncmp(source, "mlperf-v3.1", 11) ? 4 : 1;
    }
    if (has(source, "narayanan2021") || has(source, "korthikanti2022")) l->dtype = l->dtype == DT_FP16 ? DT_FP16 : l->dtype;
    /* metric -> measured seconds per step */
    const char *metric = HAS("metric") ? S("metric") : "iter_time_s";
    snprintf(vc->metric, sizeof vc->metric, "%s", metric);
    vc->value = HAS("value") ? D("value") : D("iter_time_s");
    double tokens = (double)l->global_batch * l->seq;
    if (!strcmp(metric, "tokens_per_s_per_gpu")) vc->measured_s = tokens / (vc->value * gpus);
    else if (!strcmp(metric, "tflops_per_gpu"))
        vc->measured_s = sim_megatron_flops(m, l->global_batch, l->seq) / (gpus * vc->value * 1e12);
    else vc->measured_s = vc->value;
    if (HAS("iter_time_s")) vc->measured_s = D("iter_time_s"); /* published (or derived by the file) */
    if (!(vc->measured_s > 0)) snprintf(vc->why, sizeof vc->why, "no published %s value", metric);
    char gpu[64], cluster[64];
    machine_of(source, notes, HAS("gpu") ? S("gpu") : "a100-80g", gpu, cluster);
    snprintf(vc->gpu_name, sizeof vc->gpu_name, "%s", gpu);
    snprintf(vc->cluster_name, sizeof vc->cluster_name, "%s", cluster);
    if (!vc->why[0] && (long)l->tp * l->pp * l->cp * l->dp != gpus)
        snprintf(vc->why, sizeof vc->why, "tp %d x pp %d x cp %d x dp %d is not the %d GPUs published", l->tp, l->pp, l->cp,
                 l->dp, gpus);
    vc->gpus = gpus;
#undef HAS
#undef I
#undef D
#undef S
    return 0;
}
