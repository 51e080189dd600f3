/* sim_opts.c: parsing of the simulator's command-line options (see sim_opts.h). Two passes: the
 * first loads the model, cluster and GPU configs named on the line, the second applies the flags
 * that override them, so the order of flags does not matter. */
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

static int flag_auto_int(void *dst, const char *v) { /* "N|auto": -1 = auto */
    int *out = dst;
    if (!strcmp(v, "auto")) { *out = -1; return 0; }
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < 1 || x > 1 << 30) return myr_error("expected an integer >= 1 or auto, got '%s'", v);
    *out = (int)x;
    return 0;
}

static int flag_tokens(void *dst, const char *v) { return sim_parse_count(v, (double *)dst); }

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

/* Everything the command line says, before the configs it names are loaded (so that flags
 * override the files whatever their order). -1 / 0 = not given. */
typedef struct {
    const char *model, *cluster, *gpu, *software, *recompute, *dtype;
    int gpus, tp, cp, pp, dp, ep, vpp, micro_batch, global_batch, seq, zero, hot_spares;
    int layers, hidden, heads, kv_heads, ffn, vocab, experts, top_k;
    int arch, schedule, attention, grad_bytes; /* choice indexes, -1 = not given */
    int sp, no_sp, no_overlap_dp, zero_given, gpus_given;
} SimFlags;

static const char *const arch_names[] = {"gpt2", "gpt", "llama", NULL};
static const char *const sched_names[] = {"1f1b", "interleaved", "gpipe", NULL};
static const char *const attention_names[] = {"flash", "unfused", NULL};
static const char *const grad_bytes_names[] = {"2", "4", NULL};
static const int grad_bytes_values[] = {2, 4};

static const char sim_usage[] =
    "usage: myriad sim [--model NAME|FILE | --arch gpt2|llama --layers N --hidden N --heads N --vocab N ...]\n"
    "                  [--cluster NAME|FILE] [--gpus N] [layout flags] [--tokens X] [--json] [--trace FILE]\n"
    "       myriad sim validate FILE.csv [--json]\n"
    "Simulates one training step: time and breakdown, MFU, memory per GPU, days to train.\n"
    "Configs: configs/hardware, configs/clusters, configs/models (or a path to a .json file).\n"
    "X accepts 300e9, 300B, 2T, 15T. See docs/SIMULATOR.md.";
static const char plan_usage[] =
    "usage: myriad plan --model NAME|FILE (or shape flags) [--cluster NAME|FILE] --gpus N [--tokens X] [options]\n"
    "       myriad plan --compare A.json B.json --model NAME --gpus N [--tokens X]\n"
    "Enumerates tp, cp, pp, vpp, ep, micro-batch, recompute and sequence parallelism; drops layouts that\n"
    "do not fit in memory (and says why; --why lists every rejected layout); prints the top K by days\n"
    "to train.";

int sim_opts_parse(int argc, char **argv, SimOpts *o, int plan) {
    memset(o, 0, sizeof *o);
    sim_layout_defaults(&o->layout);
    o->top_k = 5;
    SimFlags f;
    memset(&f, 0, sizeof f);
    f.arch = f.schedule = f.attention = f.grad_bytes = -1;
#define SHAPE_ROWS                                                                                                   \
    OPT_SECTION("model:"),                                                                                            \
    OPT_STR("--model", "NAME|FILE", &f.model, "a model of configs/models or a .json file"),                         \
    OPT_CHOICE("--arch", "gpt2|llama", &f.arch, arch_names, "model family of the shape flags (default gpt2)"),       \
    OPT_INT("--layers", "N", &f.layers, 1, 1 << 20, "transformer blocks"),                                            \
    OPT_INT("--hidden", "N", &f.hidden, 1, 1 << 24, "model width"),                                                    \
    OPT_INT("--heads", "N", &f.heads, 1, 1 << 20, "attention heads"),                                                 \
    OPT_INT("--kv-heads", "N", &f.kv_heads, 1, 1 << 20, "key/value heads (default heads)"),                          \
    OPT_INT("--ffn", "N", &f.ffn, 1, 1 << 26, "MLP width (default 4 x hidden; Llama 8/3 x hidden)"),                \
    OPT_INT("--vocab", "N", &f.vocab, 1, 1 << 28, "vocabulary size"),                                                 \
    OPT_INT("--experts", "E", &f.experts, 1, 1 << 16, "mixture of experts: routed experts per layer"),               \
    OPT_INT("--top-k", "K", &f.top_k, 1, 1 << 16, "experts per token"),                                               \
    OPT_INT("--seq", "N", &f.seq, 1, 1 << 26, "sequence length (default: the model's)"),                             \
    OPT_SECTION("cluster:"),                                                                                          \
    OPT_STR("--cluster", "NAME|FILE", &f.cluster, "a cluster of configs/clusters or a .json file (default selene)"), \
    OPT_STR("--gpu", "NAME", &f.gpu, "a GPU of configs/hardware (default: the cluster's)"),                          \
    OPT_GIVEN(OPT_INT("--gpus", "N", &f.gpus, 1, 1 << 30, "GPUs of the job (with tp, cp, pp: gives dp)"), &f.gpus_given)
#define COMMON_LAYOUT_ROWS                                                                                           \
    OPT_INT("--global-batch", "N", &f.global_batch, 1, 1 << 30, "sequences per step (default ~4M tokens)"),         \
    OPT_GIVEN(OPT_INT("--zero", "0-3", &f.zero, 0, 3, "ZeRO stage"), &f.zero_given),                                \
    OPT_STR("--dtype", "fp32|tf32|bf16|fp16|fp8", &f.dtype, "math and weights precision (default bf16)"),           \
    OPT_CHOICE("--attention", "flash|unfused", &f.attention, attention_names, "attention kernels (default flash)"), \
    OPT_SWITCH("--no-overlap-dp", &f.no_overlap_dp, "the gradient reduction waits for backward"),                 \
    OPT_CHOICE_V("--grad-bytes", "2|4", &f.grad_bytes, grad_bytes_names, grad_bytes_values,                          \
                 "bytes per accumulated gradient element (Megatron 4)"),                                              \
    OPT_STR("--software", "current|megatron-2021|megatron-2022", &f.software,                                         \
            "software preset: kernels and overlaps of that Megatron-LM release (flags override it)"),               \
    OPT_CALL("--tokens", "X", &o->tokens, flag_tokens, "training tokens: days to train, goodput, energy and cost"), \
    OPT_SWITCH("--json", &o->json, "print one JSON object")
    const Opt sim_rows[] = {
        SHAPE_ROWS,
        OPT_SECTION("layout:"),
        OPT_INT("--tp", "N", &f.tp, 1, 1 << 20, "tensor parallel"),
        OPT_INT("--cp", "N", &f.cp, 1, 1 << 20, "context parallel"),
        OPT_INT("--pp", "N", &f.pp, 1, 1 << 20, "pipeline stages"),
        OPT_CALL("--vpp", "N|auto", &f.vpp, flag_auto_int, "model chunks per stage (interleaved 1F1B); auto searches"),
        OPT_INT("--dp", "N", &f.dp, 1, 1 << 30, "data parallel (default: --gpus / (tp x cp x pp))"),
        OPT_INT("--ep", "N", &f.ep, 1, 1 << 20, "expert parallel"),
        OPT_CALL("--micro-batch", "N|auto", &f.micro_batch, flag_auto_int,
                 "sequences per micro-batch; auto: the fastest that fits"),
        OPT_STR("--recompute", "none|selective|full", &f.recompute, "activation recomputation"),
        OPT_SWITCH("--sp", &f.sp, "sequence parallelism (with tp; the default)"),
        OPT_SWITCH("--no-sp", &f.no_sp, "no sequence parallelism"),
        OPT_CHOICE("--schedule", "1f1b|interleaved|gpipe", &f.schedule, sched_names,
                   "pipeline schedule (interleaved needs --vpp 2 or more)"),
        COMMON_LAYOUT_ROWS,
        OPT_SECTION("failures and output:"),
        OPT_INT("--hot-spares", "NODES", &o->hot_spares, 0, 1 << 20, "hot spare nodes (goodput with --tokens)"),
        OPT_SWITCH("--in-memory-ckpt", &o->in_memory, "checkpoints to host memory instead of storage"),
        OPT_SWITCH("--ignore-memory", &o->ignore_memory, "simulate a layout that does not fit in HBM"),
        OPT_STR("--trace", "FILE", &o->trace_path, "Chrome trace of the simulated step (Perfetto)"),
        OPT_END};
    const Opt plan_rows[] = {
        SHAPE_ROWS,
        OPT_SECTION("fixed for every layout (tp, cp, pp, vpp, ep, micro-batch, recompute and sp are searched):"),
        COMMON_LAYOUT_ROWS,
        OPT_SECTION("output:"),
        OPT_INT("--top", "K", &o->top_k, 1, 1000, "layouts printed (default 5)"),
        OPT_SWITCH("--why", &o->why, "list every rejected layout with its reason"),
        OPT_CALL2("--compare", "A.json B.json", o, flag_compare,
                  "two cluster designs side by side: best layout, days, goodput, network,\n"
                  "power, energy and cost"),
        OPT_INT("--hot-spares", "NODES", &o->hot_spares, 0, 1 << 20, "hot spare nodes (goodput of --compare)"),
        OPT_SWITCH("--in-memory-ckpt", &o->in_memory, "checkpoints to host memory (goodput of --compare)"),
        OPT_END};
#undef SHAPE_ROWS
#undef COMMON_LAYOUT_ROWS
    OptCommand cmd = {.name = plan ? "plan" : "sim", .usage = plan ? plan_usage : sim_usage,
                      .rows = plan ? plan_rows : sim_rows};
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            opts_help(&cmd, stdout);
            return 1;
        }
    opts_parse(&cmd, argc, argv);
    if (f.sp && f.no_sp) return myr_error("--sp and --no-sp contradict each other");
    if (plan && !o->compare[0] && (o->hot_spares || o->in_memory))
        return myr_error("--hot-spares and --in-memory-ckpt enter the goodput of --compare only");
    /* configs first, then the flags that override them */
    if (f.model) {
        if (sim_load_model(f.model, &o->model)) return -1;
    } else {
        snprintf(o->model.name, sizeof o->model.name, "custom");
        o->model.top_k = 1;
        o->model.seq = 2048;
    }
    if (f.cluster) {
        if (sim_load_cluster(f.cluster, &o->cluster)) return -1;
    } else if (sim_load_cluster("selene", &o->cluster)) {
        sim_cluster_defaults(&o->cluster);
    }
    if (sim_load_gpu(f.gpu ? f.gpu : o->cluster.gpu, &o->gpu)) return -1;
    SimModel *m = &o->model;
    Layout *l = &o->layout;
    if (f.software && sim_software_preset(l, f.software)) return -1;
    if (f.arch >= 0) m->llama = f.arch == 2;
    if (f.layers) m->layers = f.layers;
    if (f.hidden) m->hidden = f.hidden;
    if (f.heads) m->heads = f.heads;
    if (f.kv_heads) m->kv_heads = f.kv_heads;
    if (f.ffn) m->ffn = f.ffn;
    if (f.vocab) m->vocab = f.vocab;
    if (f.experts) m->experts = f.experts;
    if (f.top_k) m->top_k = f.top_k;
    if (f.tp) l->tp = f.tp, o->set_tp = 1;
    if (f.cp) l->cp = f.cp, o->set_cp = 1;
    if (f.pp) l->pp = f.pp, o->set_pp = 1;
    if (f.dp) l->dp = f.dp, o->set_dp = 1;
    if (f.ep) l->ep = f.ep, o->set_ep = 1;
    if (f.vpp) {
        o->set_vpp = 1;
        if (f.vpp < 0) o->search_vpp = 1;
        else l->vpp = f.vpp;
    }
    if (f.micro_batch) {
        if (f.micro_batch < 0) o->search_mb = 1, l->micro_batch = 0;
        else l->micro_batch = f.micro_batch;
    }
    if (f.global_batch) l->global_batch = f.global_batch;
    if (f.seq) l->seq = f.seq;
    if (f.recompute) {
        if (sim_recompute_parse(f.recompute, &l->recompute)) return -1;
        o->set_recompute = 1;
    }
    if (f.zero_given) l->zero = f.zero, o->set_zero = 1;
    if (f.dtype && sim_dtype_parse(f.dtype, &l->dtype)) return -1;
    if (f.sp) l->sp = 1, o->set_sp = 1;
    if (f.no_sp) l->sp = 0, o->set_sp = 1;
    if (f.no_overlap_dp) l->overlap_dp = 0;
    if (f.schedule >= 0) {
        if (f.schedule == 1 && !(l->vpp > 1 || o->search_vpp))
            return myr_error("--schedule interleaved needs --vpp 2 or more (or --vpp auto)");
        l->schedule = f.schedule == 2 ? SCHED_GPIPE : SCHED_1F1B;
        if (f.schedule == 2 && (l->vpp > 1 || o->search_vpp))
            return myr_error("--schedule gpipe runs one model chunk per stage: drop --vpp");
    }
    if (f.attention >= 0) l->flash = f.attention == 0;
    if (f.grad_bytes > 0) l->grad_bytes = f.grad_bytes;
    o->gpus = f.gpus;
    if (!f.model) {
        if (!m->layers || !m->hidden || !m->heads || !m->vocab)
            return myr_error("no model: give --model NAME (see configs/models) or --layers, --hidden, --heads and --vocab");
    }
    if (!m->kv_heads) m->kv_heads = m->heads;
    if (!m->ffn) m->ffn = m->llama ? 256 * (int)ceil(8.0 * m->hidden / 3.0 / 256) : 4 * m->hidden;
    if (m->experts > 1 && !m->expert_ffn) m->expert_ffn = m->ffn;
    if (m->hidden % m->heads) return myr_error("hidden %d is not divisible by heads %d", m->hidden, m->heads);
    if (m->heads % m->kv_heads) return myr_error("kv heads %d do not divide heads %d", m->kv_heads, m->heads);
    if (!l->seq) l->seq = m->seq;
    m->seq = l->seq;
    /* GPU count and data parallelism */
    int mp = l->tp * l->cp * l->pp;
    if (o->gpus && !o->set_dp) {
        if (o->gpus % mp) return myr_error("%d GPUs are not a multiple of tp x cp x pp = %d", o->gpus, mp);
        l->dp = o->gpus / mp;
    } else if (o->gpus && o->gpus != mp * l->dp) {
        return myr_error("--gpus %d disagrees with tp x cp x pp x dp = %d", o->gpus, mp * l->dp);
    }
    if (!o->gpus) o->gpus = mp * l->dp;
    if (o->cluster.gpus > 0 && o->gpus > o->cluster.gpus)
        return myr_error("%d GPUs exceed the %d of cluster %s (choose another --cluster)", o->gpus, o->cluster.gpus,
                         o->cluster.name);
    if (!l->global_batch) {
        /* about 4M tokens per step (GPT-3 175B used 3.2M, Llama 3 405B 4M-16M), a multiple of dp */
        int want = (int)ceil(4194304.0 / l->seq);
        l->global_batch = ((want + l->dp - 1) / l->dp) * l->dp;
    }
    return 0;
}

void sim_opts_reliability(const SimOpts *o, ReliabilityResult *out) {
    FailureRates f;
    sim_failure_rates_default(&f);
    ReliabilityInput in = {0};
    in.gpus = o->gpus;
    in.hot_spares = o->hot_spares;
    in.in_memory = o->in_memory;
    in.state_bytes = sim_model_params(&o->model) * 14.0; /* bf16 weights + fp32 master, Adam m, v */
    in.restart_s = 600;
    in.repair_hours = 4;
    in.storage_gbps = o->cluster.storage_gbps;
    in.host_mem_gbps = o->cluster.host_mem_gbps;
    in.gpus_per_node = o->cluster.gpus_per_node;
    sim_reliability(&f, &in, out);
}
