/* sim_opts.c: parsing of the simulator's command-line options (see sim_opts.h). Every flag is a
 * row of an option table (util/opts.h), which gives --help and refuses unknown flags; the values
 * are kept as given and applied in two steps: first the model, cluster, GPU and software preset
 * they name, then the flags that override them, so the order of flags does not matter. Then the
 * layout is completed: dp from --gpus, the cluster sized to the GPUs, the default global batch. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_opts.h"
#include "util/opts.h"
#include "util/error.h"

int sim_parse_count(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0) return myr_error("expected a count like 300e9 or 300B, got '%s'", s);
    double mult = 1;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': mult = 1e3; break;
        case 'M': mult = 1e6; break;
        case 'B': case 'G': mult = 1e9; break;
        case 'T': mult = 1e12; break;
        default: return myr_error("expected a count like 300e9 or 300B, got '%s'", s);
        }
        if (end[1]) return myr_error("expected a count like 300e9 or 300B, got '%s'", s);
    }
    *out = v * mult;
    return 0;
}

static int flag_int(const char *flag, const char *v, int lo, int *out) {
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < lo || x > 1 << 30) return myr_error("%s expects an integer >= %d, got '%s'", flag, lo, v);
    *out = (int)x;
    return 0;
}

static int flag_num(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || x < lo || x > hi)
        return myr_error("%s expects a number in [%g, %g], got '%s'", flag, lo, hi, v);
    *out = x;
    return 0;
}

/* The valued flags: name, placeholder, help, which command takes them ('b' both, 's' sim,
 * 'p' plan) and, for an integer, its range [lo, hi] (hi 0: a text value with its own parser).
 * The table checks the range; a section row has a NULL meta. Values are applied by name
 * (apply_value below). */
#define BIG (1 << 30)
typedef struct { const char *name, *meta, *help; char scope; int lo, hi; } FlagRow;
static const FlagRow flag_rows[] = {
    {"model:", NULL, NULL, 'b', 0, 0},
    {"--model", "NAME|FILE", "a model of configs/models or a .json file", 'b', 0, 0},
    {"--arch", "gpt2|llama|nemotron", "model family of the shape flags (default gpt2)", 'b', 0, 0},
    {"--layers", "N", "transformer blocks", 'b', 1, BIG},
    {"--hidden", "N", "model width", 'b', 1, BIG},
    {"--heads", "N", "attention heads", 'b', 1, BIG},
    {"--kv-heads", "N", "key/value heads (default heads)", 'b', 1, BIG},
    {"--ffn", "N", "MLP width (default 4 x hidden; gated 8/3 x hidden)", 'b', 1, BIG},
    {"--vocab", "N", "vocabulary size", 'b', 1, BIG},
    {"--experts", "E", "mixture of experts: routed experts per layer", 'b', 1, BIG},
    {"--top-k", "K", "experts per token", 'b', 1, BIG},
    {"--expert-ffn", "N", "MLP width of an expert (default --ffn)", 'b', 1, BIG},
    {"--shared-experts", "N", "always-active (shared) experts per MoE layer", 'b', 0, BIG},
    {"--shared-ffn", "N", "MLP width of a shared expert (default --expert-ffn)", 'b', 1, BIG},
    {"--dense-layers", "N", "first layers with a dense MLP of --ffn instead of experts", 'b', 0, BIG},
    {"--route-nodes", "M", "node-limited routing: a token's experts on at most M nodes (0 = any)", 'b', 0, BIG},
    {"--dropout", "0|1", "dropout kernels on (1) or off (0)", 'b', 0, 0},
    {"--seq", "N", "sequence length (default: the model's)", 'b', 1, BIG},
    {"cluster:", NULL, NULL, 'b', 0, 0},
    {"--gpu", "NAME", "a GPU of configs/hardware (default: the cluster's)", 'b', 0, 0},
    {"--cluster", "NAME|FILE", "a cluster of configs/clusters or a .json file (default: the GPU's design)", 'b', 0, 0},
    {"--gpus", "N", "GPUs of the job; above the cluster's size the same design is built bigger", 'b', 1, BIG},
    {"layout (plan: each one given is fixed, the others are searched):", NULL, NULL, 'b', 0, 0},
    {"--tp", "N", "tensor parallel", 'b', 1, BIG},
    {"--cp", "N", "context parallel (ring attention)", 'b', 1, BIG},
    {"--pp", "N", "pipeline stages", 'b', 1, BIG},
    {"--vpp", "N|auto", "model chunks per stage (interleaved 1F1B); auto searches", 'b', 0, 0},
    {"--vpp-group", "N", "interleaved: micro-batches per model chunk in a row (default pp; Megatron-core, Llama 3's N)", 'b', 1, BIG},
    {"--dp", "N", "data parallel (default: --gpus / (tp x cp x pp); plan derives it)", 'b', 1, BIG},
    {"--ep", "N", "expert parallel", 'b', 1, BIG},
    {"--etp", "N", "expert tensor parallel (default tp)", 'b', 1, BIG},
    {"--stage-layers", "a,b,..", "layers of each pipeline stage", 'b', 0, 0},
    {"--first-stage-layers", "N", "layers of the first pipeline stage (the rest split evenly)", 'b', 1, BIG},
    {"--last-stage-layers", "N", "layers of the last pipeline stage", 'b', 1, BIG},
    {"--micro-batch", "N|auto", "sequences per micro-batch; auto searches", 'b', 0, 0},
    {"--global-batch", "N", "sequences per step (default 2^22 tokens, a multiple of dp)", 'b', 1, BIG},
    {"--recompute", "none|selective|full", "activation recomputation", 'b', 0, 0},
    {"--zero", "0-3", "ZeRO stage (3 = FSDP)", 'b', 0, 3},
    {"software:", NULL, NULL, 'b', 0, 0},
    {"--software", "NAME|list", "software preset (list: the presets and what they switch)", 'b', 0, 0},
    {"--dtype", "fp32|tf32|bf16|fp16|fp8", "math and weights precision (default bf16)", 'b', 0, 0},
    {"--fp8-scaling", "delayed|current|blockwise", "fp8 scaling recipe (blockwise: 1x128 / 128x128, DeepSeek-V3)", 'b', 0, 0},
    {"--schedule", "1f1b|interleaved|gpipe|dualpipe", "pipeline schedule (dualpipe: DeepSeek-V3's)", 'b', 0, 0},
    {"--ep-a2a", "flat|deepep", "MoE dispatch: NCCL all-to-all or two-stage (network once per node, then NVLink)", 'b', 0, 0},
    {"--ep-overlap", "on|off", "all-to-all overlapped with another micro-batch's compute (1F1B steady phase)", 'b', 0, 0},
    {"--attention", "fused|fa2|unfused", "attention kernels (flash = fused)", 'b', 0, 0},
    {"--tp-overlap", "on|off", "TP communication overlapped with GEMMs", 'b', 0, 0},
    {"--grad-bytes", "2|4", "bytes per gradient element in the reduction", 'b', 0, 0},
    {"--capacity-factor", "X", "MoE expert capacity factor (0 = dropless)", 'b', 0, 0},
    {"--moe-imbalance", "X", "MoE routing imbalance: busiest expert / mean (>= 1)", 'b', 0, 0},
    {"--mem-headroom", "F|P%", "HBM share kept free (default 10%)", 'b', 0, 0},
    {"--straggler-cv", "X", "per-GPU step-time variation (0.01 = 1%): the step waits for the slowest GPU (default: the cluster's, 0)", 'b', 0, 0},
    {"run and output:", NULL, NULL, 'b', 0, 0},
    {"--tokens", "X", "training tokens: days to train, goodput, energy and cost (300e9, 300B, 2T)", 'b', 0, 0},
    {"--hot-spares", "NODES", "hot spare nodes (default: from practice, see docs/SIMULATOR.md)", 'b', 0, BIG},
    {"--failure-rate", "X", "interruptions per GPU-day (default 0.00047, Llama 3's 419 in 54 days on 16,384 GPUs; 0.01 = 1% of GPUs a day)", 'b', 0, 0},
    {"--mtbf", "HOURS", "the job's mean time between interruptions at this size (instead of --failure-rate)", 'b', 0, 0},
    {"--trace", "FILE", "Chrome trace of the simulated step (Perfetto)", 's', 0, 0},
    {"--top", "K", "layouts printed (default 5)", 'p', 1, BIG},
};
#define NFLAGS (int)(sizeof flag_rows / sizeof flag_rows[0])

static int flag_compare(void *dst, const char *v) { /* "A\tB" */
    SimOpts *o = dst;
    static char both[8192];
    snprintf(both, sizeof both, "%s", v);
    char *tab = strchr(both, '\t');
    if (!tab) return myr_error("--compare needs two cluster files: --compare A.json B.json");
    *tab = 0;
    o->compare[0] = both, o->compare[1] = tab + 1;
    return 0;
}

static const char sim_usage[] =
    "usage: myriad sim [--model NAME|FILE | --arch gpt2|llama|nemotron --layers N --hidden N --heads N --vocab N ...]\n"
    "                  [--gpu NAME] [--cluster NAME|FILE] [--gpus N] [layout flags] [--tokens X] [--json] [--trace FILE]\n"
    "       myriad sim validate FILE.csv [options] (see myriad sim validate --help)\n"
    "       myriad sim goodput [options] (a fault soak's effective training time; see myriad sim goodput --help)\n"
    "Simulates one training step: time and breakdown, MFU, memory per GPU, days to train.\n"
    "Without --cluster the GPU's default cluster design is used, sized to --gpus (the output says which).\n"
    "Configs: configs/hardware, configs/clusters, configs/models (or a path to a .json file).\n"
    "X accepts 300e9, 300B, 2T, 15T. See docs/SIMULATOR.md.";
static const char plan_usage[] =
    "usage: myriad plan --model NAME|FILE (or shape flags as in sim) [--gpu NAME] [--cluster NAME|FILE] --gpus N [options]\n"
    "       myriad plan --compare A.json B.json --model NAME --gpus N [--tokens X]\n"
    "Searches tp, cp, pp (uneven first/last stages where pp does not divide the layers), vpp, ep,\n"
    "micro-batch and recompute; any of them given is fixed. Drops layouts above the memory headroom\n"
    "(default 10% of HBM). Ranks by days to train including failures (hot spares by default enough\n"
    "for a free spare at 99% of hardware faults). Default global batch: 2^22 tokens, as in sim.";

/* The switches, applied after the valued flags. */
typedef struct { int json, sp, no_sp, no_overlap_dp, in_memory, ignore_memory, why; } SimSwitches;

/* Configs first: the cluster as given, else the GPU's default design, else Selene (A100). */
static int load_configs(const char *model, const char *cluster, const char *gpu, const char *software, SimOpts *o) {
    if (model) {
        if (sim_load_model(model, &o->model)) return -1;
    } else {
        snprintf(o->model.name, sizeof o->model.name, "custom");
        sim_model_set_arch(&o->model, ARCH_GPT);
        o->model.top_k = 1;
        o->model.seq = 2048;
    }
    const char *gpu_for = gpu ? gpu : "a100-80g";
    if (cluster) {
        if (sim_load_cluster(cluster, &o->cluster)) return -1;
        snprintf(o->cluster_note, sizeof o->cluster_note, "cluster %s", o->cluster.name);
    } else {
        if (gpu && sim_load_gpu(gpu, &o->gpu)) return -1; /* an unknown GPU is reported as such */
        if (sim_load_default_cluster(gpu_for, &o->cluster)) return -1;
        snprintf(o->cluster_note, sizeof o->cluster_note, "cluster %s (the default for %s; --cluster to choose)",
                 o->cluster.name, gpu_for);
    }
    if (sim_load_gpu(gpu ? gpu : o->cluster.gpu, &o->gpu)) return -1;
    if (gpu && cluster && strcmp(o->gpu.name, o->cluster.gpu)) {
        size_t n = strlen(o->cluster_note);
        snprintf(o->cluster_note + n, sizeof o->cluster_note - n, " with %s GPUs (the file says %s)", o->gpu.name,
                 o->cluster.gpu);
        snprintf(o->cluster.gpu, sizeof o->cluster.gpu, "%s", o->gpu.name);
    }
    /* the software preset first, so that explicit flags override it */
    if (software && sim_software_preset(&o->layout, software)) return -1;
    snprintf(o->software, sizeof o->software, "%s", software && strcmp(software, "current") ? software : "megatron-core");
    o->software_given = software != NULL;
    return 0;
}

static int layout_flag(SimOpts *o, const char *a, const char *v) {
    Layout *l = &o->layout;
    int rc = 0;
    if (!strcmp(a, "--tp")) { rc = flag_int(a, v, 1, &l->tp); o->set_tp = 1; }
    else if (!strcmp(a, "--cp")) { rc = flag_int(a, v, 1, &l->cp); o->set_cp = 1; }
    else if (!strcmp(a, "--pp")) { rc = flag_int(a, v, 1, &l->pp); o->set_pp = 1; }
    else if (!strcmp(a, "--dp")) { rc = flag_int(a, v, 1, &l->dp); o->set_dp = 1; }
    else if (!strcmp(a, "--vpp-group")) rc = flag_int(a, v, 1, &l->vpp_group);
    else if (!strcmp(a, "--ep")) { rc = flag_int(a, v, 1, &l->ep); o->set_ep = 1; }
    else if (!strcmp(a, "--etp")) { rc = flag_int(a, v, 1, &l->etp); o->set_etp = 1; }
    else if (!strcmp(a, "--vpp")) {
        o->set_vpp = 1;
        if (!strcmp(v, "auto")) o->search_vpp = 1;
        else rc = flag_int(a, v, 1, &l->vpp);
    } else if (!strcmp(a, "--micro-batch")) {
        if (!strcmp(v, "auto")) { o->search_mb = 1; l->micro_batch = 0; }
        else { rc = flag_int(a, v, 1, &l->micro_batch); o->set_mb = 1; }
    } else if (!strcmp(a, "--recompute")) { rc = sim_recompute_parse(v, &l->recompute); o->set_recompute = 1; }
    else if (!strcmp(a, "--zero")) {
        rc = flag_int(a, v, 0, &l->zero);
        if (!rc && l->zero > 3) rc = myr_error("--zero expects 0, 1, 2 or 3, got %s", v);
        o->set_zero = 1;
    } else if (!strcmp(a, "--stage-layers")) { rc = sim_parse_stage_list(v, l); o->set_stages = 1; }
    else if (!strcmp(a, "--first-stage-layers")) { rc = flag_int(a, v, 1, &l->first_layers); o->set_stages = 1; }
    else if (!strcmp(a, "--last-stage-layers")) { rc = flag_int(a, v, 1, &l->last_layers); o->set_stages = 1; }
    else return 1;
    return rc ? -1 : 0;
}

static int software_flag(SimOpts *o, const char *a, const char *v) {
    Layout *l = &o->layout;
    if (!strcmp(a, "--dtype")) return sim_dtype_parse(v, &l->dtype);
    if (!strcmp(a, "--schedule")) {
        if (!strcmp(v, "1f1b") || !strcmp(v, "interleaved")) l->schedule = SCHED_1F1B;
        else if (!strcmp(v, "gpipe")) l->schedule = SCHED_GPIPE;
        else if (!strcmp(v, "dualpipe")) l->schedule = SCHED_DUALPIPE;
        else return myr_error("--schedule expects 1f1b, interleaved, gpipe or dualpipe, got '%s'", v);
        return 0;
    }
    if (!strcmp(a, "--ep-a2a")) {
        if (!strcmp(v, "flat")) l->ep_a2a = 0;
        else if (!strcmp(v, "deepep")) l->ep_a2a = 1;
        else return myr_error("--ep-a2a expects flat (NCCL all-to-all) or deepep (two-stage, node-limited), got '%s'", v);
        return 0;
    }
    if (!strcmp(a, "--ep-overlap")) {
        if (!strcmp(v, "on")) l->ep_overlap = 1;
        else if (!strcmp(v, "off")) l->ep_overlap = 0;
        else return myr_error("--ep-overlap expects on or off, got '%s'", v);
        return 0;
    }
    if (!strcmp(a, "--attention")) {
        if (!strcmp(v, "flash") || !strcmp(v, "fused")) l->flash = ATTN_FUSED;
        else if (!strcmp(v, "fa2")) l->flash = ATTN_FA2;
        else if (!strcmp(v, "unfused")) l->flash = ATTN_UNFUSED;
        else return myr_error("--attention expects fused, fa2 or unfused, got '%s'", v);
        return 0;
    }
    if (!strcmp(a, "--grad-bytes")) {
        if (flag_int(a, v, 2, &l->grad_bytes)) return -1;
        if (l->grad_bytes != 2 && l->grad_bytes != 4) return myr_error("--grad-bytes expects 2 or 4");
        return 0;
    }
    if (!strcmp(a, "--fp8-scaling")) {
        if (!strcmp(v, "delayed")) l->fp8_scaling = FP8_DELAYED;
        else if (!strcmp(v, "current")) l->fp8_scaling = FP8_CURRENT;
        else if (!strcmp(v, "blockwise")) l->fp8_scaling = FP8_BLOCKWISE;
        else return myr_error("--fp8-scaling expects delayed, current or blockwise, got '%s'", v);
        return 0;
    }
    if (!strcmp(a, "--tp-overlap")) {
        if (!strcmp(v, "on")) l->tp_overlap = 1;
        else if (!strcmp(v, "off")) l->tp_overlap = 0;
        else return myr_error("--tp-overlap expects on or off, got '%s'", v);
        return 0;
    }
    if (!strcmp(a, "--capacity-factor")) return flag_num(a, v, 0, 64, &l->capacity_factor);
    if (!strcmp(a, "--moe-imbalance")) return flag_num(a, v, 1, 64, &l->moe_imbalance);
    return 1;
}

static int model_flag(SimModel *m, const char *a, const char *v) {
    if (!strcmp(a, "--dropout")) {
        if (strcmp(v, "0") && strcmp(v, "1")) return myr_error("--dropout expects 0 or 1, got '%s'", v);
        m->dropout = !strcmp(v, "1");
        return 0;
    }
    if (!strcmp(a, "--arch")) {
        SimArch ar;
        if (sim_arch_parse(v, &ar)) return -1;
        sim_model_set_arch(m, ar);
        return 0;
    }
    struct { const char *flag; int *field; } f[] = {
        {"--layers", &m->layers}, {"--hidden", &m->hidden}, {"--heads", &m->heads}, {"--kv-heads", &m->kv_heads},
        {"--ffn", &m->ffn}, {"--vocab", &m->vocab}, {"--experts", &m->experts}, {"--top-k", &m->top_k},
        {"--expert-ffn", &m->expert_ffn}, {"--shared-ffn", &m->shared_ffn}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!strcmp(a, f[i].flag)) return flag_int(a, v, 1, f[i].field);
    struct { const char *flag; int *field; } z[] = {
        {"--shared-experts", &m->shared_experts}, {"--dense-layers", &m->dense_layers}, {"--route-nodes", &m->route_nodes}};
    for (size_t i = 0; i < sizeof z / sizeof z[0]; i++)
        if (!strcmp(a, z[i].flag)) return flag_int(a, v, 0, z[i].field);
    return 1;
}

/* One valued flag, after the configs: 0, -1 with a reason. */
static int apply_value(SimOpts *o, const char *a, const char *v) {
    int rc = 0;
    if (!strcmp(a, "--model") || !strcmp(a, "--cluster") || !strcmp(a, "--gpu") || !strcmp(a, "--software")) return 0;
    if (!strcmp(a, "--gpus")) return flag_int(a, v, 1, &o->gpus);
    if (!strcmp(a, "--global-batch")) return flag_int(a, v, 1, &o->layout.global_batch);
    if (!strcmp(a, "--seq")) return flag_int(a, v, 1, &o->layout.seq);
    if (!strcmp(a, "--tokens")) return sim_parse_count(v, &o->tokens);
    if (!strcmp(a, "--trace")) { o->trace_path = v; return 0; }
    if (!strcmp(a, "--hot-spares")) return flag_int(a, v, 0, &o->hot_spares);
    if (!strcmp(a, "--failure-rate")) {
        if (flag_num(a, v, 0, 1e3, &o->failure_rate)) return -1;
        if (o->failure_rate <= 0) return myr_error("--failure-rate expects a positive rate per GPU-day, got '%s'", v);
        return 0;
    }
    if (!strcmp(a, "--mtbf")) {
        if (flag_num(a, v, 0, 1e9, &o->mtbf_h)) return -1;
        if (o->mtbf_h <= 0) return myr_error("--mtbf expects positive hours, got '%s'", v);
        return 0;
    }
    if (!strcmp(a, "--top")) return flag_int(a, v, 1, &o->top_k);
    if (!strcmp(a, "--straggler-cv")) return flag_num(a, v, 0, 0.5, &o->cluster.straggler_cv);
    if (!strcmp(a, "--mem-headroom")) {
        double x = 0;
        char buf[32];
        snprintf(buf, sizeof buf, "%s", v);
        size_t n = strlen(buf);
        int pct = n && buf[n - 1] == '%';
        if (pct) buf[n - 1] = 0;
        rc = flag_num(a, buf, 0, pct ? 90 : 0.9, &x);
        o->mem_headroom = pct ? x / 100 : x;
        return rc;
    }
    if ((rc = layout_flag(o, a, v)) != 1) return rc;
    if ((rc = software_flag(o, a, v)) != 1) return rc;
    if ((rc = model_flag(&o->model, a, v)) != 1) return rc;
    return myr_error("internal: flag %s has no handler", a);
}

/* Model defaults, dp from the GPU count, the cluster sized to the GPUs, the default batch. */
static int complete(SimOpts *o, int plan, int have_model_file) {
    SimModel *m = &o->model;
    Layout *l = &o->layout;
    if (!have_model_file && (!m->layers || !m->hidden || !m->heads || !m->vocab))
        return myr_error("no model: give --model NAME (see configs/models) or --layers, --hidden, --heads and --vocab");
    if (!m->kv_heads) m->kv_heads = m->heads;
    if (!m->ffn) m->ffn = m->gated ? 256 * (int)ceil(8.0 * m->hidden / 3.0 / 256) : 4 * m->hidden;
    if (m->experts > 1 && !m->expert_ffn) m->expert_ffn = m->ffn;
    if (m->top_k < 1) m->top_k = 1;
    if (m->experts > 1 && m->top_k > m->experts) return myr_error("--top-k %d exceeds the %d experts", m->top_k, m->experts);
    if ((m->shared_experts || m->dense_layers || m->route_nodes) && m->experts <= 1)
        return myr_error("--shared-experts, --dense-layers and --route-nodes describe a mixture of experts: give --experts");
    if (m->dense_layers >= m->layers) return myr_error("--dense-layers %d must be below the %d layers", m->dense_layers, m->layers);
    if (m->hidden % m->heads) return myr_error("hidden %d is not divisible by heads %d", m->hidden, m->heads);
    if (m->heads % m->kv_heads) return myr_error("kv heads %d do not divide heads %d", m->kv_heads, m->heads);
    if (!l->seq) l->seq = m->seq;
    m->seq = l->seq;
    int mp = l->tp * l->cp * l->pp;
    if (plan) {
        if (!o->gpus) return myr_error("myriad plan needs --gpus N");
    } else if (o->gpus && !o->set_dp) {
        if (o->gpus % mp) return myr_error("%d GPUs are not a multiple of tp x cp x pp = %d", o->gpus, mp);
        l->dp = o->gpus / mp;
    } else if (o->gpus && o->gpus != mp * l->dp) {
        return myr_error("--gpus %d disagrees with tp x cp x pp x dp = %d", o->gpus, mp * l->dp);
    }
    if (!o->gpus) o->gpus = mp * l->dp;
    char built[256];
    if (sim_cluster_fit(&o->cluster, o->gpus, built, sizeof built)) return -1;
    if (built[0]) {
        size_t n = strlen(o->cluster_note);
        snprintf(o->cluster_note + n, sizeof o->cluster_note - n, "; %s", built);
    }
    if (!l->global_batch) {
        /* 2^22 tokens in whole sequences; sim raises it to dp x pp x micro-batch sequences where
         * that is more, so that no pipeline runs fewer micro-batches than it has stages (Llama 3
         * 405B on 16,384 GPUs: dp 128 x pp 16 = 2,048 sequences = 16 M tokens, as Meta ran it) */
        o->batch_defaulted = 1;
        int want = (int)ceil(SIM_DEFAULT_BATCH_TOKENS / l->seq);
        if (plan) l->global_batch = want;
        else {
            long mb = l->micro_batch > 0 ? l->micro_batch : 1, unit = (long)l->dp * mb;
            long gb = (want + unit - 1) / unit * unit, fill = unit * l->pp;
            if (gb < fill) {
                snprintf(o->batch_note, sizeof o->batch_note,
                         "the default 2^22 tokens (%ld sequences) would give %ld micro-batches for %d pipeline stages; "
                         "raised to dp %d x pp %d x micro-batch %ld = %ld sequences (%.3g M tokens)",
                         gb, gb / unit, l->pp, l->dp, l->pp, mb, fill, fill * (double)l->seq / 1e6);
                gb = fill;
            }
            if (gb > 0x7fffffff) return myr_error("the default global batch (%ld sequences) is too large; give --global-batch", gb);
            l->global_batch = (int)gb;
        }
    }
    if (o->failure_rate > 0 && o->mtbf_h > 0)
        return myr_error("give --failure-rate or --mtbf, not both (one sets the other: MTBF = 24 / (rate x GPUs) hours)");
    return 0;
}

int sim_opts_parse(int argc, char **argv, SimOpts *o, int plan) {
    memset(o, 0, sizeof *o);
    sim_layout_defaults(&o->layout);
    o->top_k = 5;
    o->hot_spares = -1;
    o->mem_headroom = SIM_DEFAULT_HEADROOM;
    const char *val[NFLAGS];
    int ival[NFLAGS], given[NFLAGS];
    static char itext[NFLAGS][16]; /* an integer value as text, applied like the others */
    memset(val, 0, sizeof val);
    memset(ival, 0, sizeof ival);
    memset(given, 0, sizeof given);
    SimSwitches sw;
    memset(&sw, 0, sizeof sw);
    /* the table: the valued rows of this command, then the switches */
    Opt rows[NFLAGS + 16];
    int n = 0;
    for (int i = 0; i < NFLAGS; i++) {
        const FlagRow *r = &flag_rows[i];
        if (r->scope != 'b' && r->scope != (plan ? 'p' : 's')) continue;
        if (!r->meta) rows[n++] = (Opt)OPT_SECTION(r->name);
        else if (r->hi) rows[n++] = OPT_GIVEN(OPT_INT(r->name, r->meta, &ival[i], r->lo, r->hi, r->help), &given[i]);
        else rows[n++] = (Opt)OPT_STR(r->name, r->meta, &val[i], r->help);
    }
    rows[n++] = (Opt)OPT_SWITCH("--sp", &sw.sp, "sequence parallelism (with tp; the default)");
    rows[n++] = (Opt)OPT_SWITCH("--no-sp", &sw.no_sp, "no sequence parallelism");
    rows[n++] = (Opt)OPT_SWITCH("--no-overlap-dp", &sw.no_overlap_dp, "the gradient reduction waits for backward");
    rows[n++] = (Opt)OPT_SWITCH("--in-memory-ckpt", &sw.in_memory, "checkpoints to host memory instead of storage");
    if (plan) {
        rows[n++] = (Opt)OPT_SWITCH("--why", &sw.why, "list every rejected layout with its reason");
        rows[n++] = (Opt)OPT_CALL2("--compare", "A.json B.json", o, flag_compare,
                                   "two cluster designs side by side (network capex, step time, days)");
    } else {
        rows[n++] = (Opt)OPT_SWITCH("--ignore-memory", &sw.ignore_memory, "simulate a layout that does not fit in HBM");
    }
    rows[n++] = (Opt)OPT_SWITCH("--json", &sw.json, "print one JSON object");
    rows[n++] = (Opt)OPT_END;
    OptCommand cmd = {.name = plan ? "plan" : "sim", .usage = plan ? plan_usage : sim_usage, .rows = rows};
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            opts_help(&cmd, stdout);
            return 1;
        }
    opts_parse(&cmd, argc, argv);
    for (int i = 0; i < NFLAGS; i++)
        if (given[i]) {
            snprintf(itext[i], sizeof itext[i], "%d", ival[i]);
            val[i] = itext[i];
        }
    const char *model = NULL, *cluster = NULL, *gpu = NULL, *software = NULL;
    for (int i = 0; i < NFLAGS; i++) {
        if (!val[i]) continue;
        const char *a = flag_rows[i].name;
        if (!strcmp(a, "--model")) model = val[i];
        if (!strcmp(a, "--cluster")) cluster = val[i];
        if (!strcmp(a, "--gpu")) gpu = val[i];
        if (!strcmp(a, "--software")) software = val[i];
    }
    if (software && !strcmp(software, "list")) return 2;
    if (sw.sp && sw.no_sp) return myr_error("--sp and --no-sp contradict each other");
    if (load_configs(model, cluster, gpu, software, o)) return -1;
    /* --arch first: it sets the family's defaults that the shape flags then override */
    for (int i = 0; i < NFLAGS; i++)
        if (val[i] && !strcmp(flag_rows[i].name, "--arch") && apply_value(o, "--arch", val[i])) return -1;
    for (int i = 0; i < NFLAGS; i++)
        if (val[i] && strcmp(flag_rows[i].name, "--arch") && apply_value(o, flag_rows[i].name, val[i])) return -1;
    for (int i = 0; i < NFLAGS; i++) /* the schedule against the chunks, whatever the flags' order */
        if (val[i] && !strcmp(flag_rows[i].name, "--schedule")) {
            int chunks = o->layout.vpp > 1 || o->search_vpp;
            if (!strcmp(val[i], "interleaved") && !chunks)
                return myr_error("--schedule interleaved needs --vpp 2 or more (or --vpp auto)");
            if (!strcmp(val[i], "gpipe") && chunks)
                return myr_error("--schedule gpipe runs one model chunk per stage: drop --vpp");
            if (!strcmp(val[i], "dualpipe") && chunks)
                return myr_error("--schedule dualpipe runs two stages per device of its own: drop --vpp");
        }
    o->json = sw.json;
    if (sw.sp) o->layout.sp = 1, o->set_sp = 1;
    if (sw.no_sp) o->layout.sp = 0, o->set_sp = 1;
    if (sw.no_overlap_dp) o->layout.overlap_dp = 0;
    o->in_memory = sw.in_memory;
    o->ignore_memory = sw.ignore_memory;
    o->why = sw.why;
    return complete(o, plan, model != NULL);
}

int sim_opts_spares(const SimOpts *o) {
    if (o->hot_spares >= 0) return o->hot_spares;
    FailureRates f;
    sim_opts_failure_rates(o, &f);
    return sim_default_hot_spares_for(&f, o->gpus, o->cluster.gpus_per_node);
}

void sim_opts_failure_rates(const SimOpts *o, FailureRates *f) {
    sim_failure_rates_default(f);
    double per_gpu_hour = f->gpu + f->hbm + f->nic + f->network + f->host + f->software, want = per_gpu_hour;
    if (o->failure_rate > 0) want = o->failure_rate / 24.0;
    if (o->mtbf_h > 0) want = 1.0 / (o->mtbf_h * (o->gpus > 0 ? o->gpus : 1));
    double k = want / per_gpu_hour; /* the same mix of causes, scaled */
    f->gpu *= k; f->hbm *= k; f->nic *= k; f->network *= k; f->host *= k; f->software *= k;
}

void sim_opts_reliability(const SimOpts *o, int spares, ReliabilityResult *out) {
    FailureRates f;
    sim_opts_failure_rates(o, &f);
    ReliabilityInput in = {0};
    in.gpus = o->gpus;
    in.hot_spares = spares >= 0 ? spares : sim_opts_spares(o);
    in.in_memory = o->in_memory;
    in.state_bytes = sim_model_params(&o->model) * 14.0; /* bf16 weights + fp32 master, Adam m, v */
    in.restart_s = 600;
    in.repair_hours = 4;
    in.storage_gbps = o->cluster.storage_gbps;
    in.host_mem_gbps = o->cluster.host_mem_gbps;
    in.gpus_per_node = o->cluster.gpus_per_node;
    sim_reliability(&f, &in, out);
}
