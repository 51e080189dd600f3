/* sim_opts.c: parsing of the simulator's command-line options (see sim_opts.h). Two passes: the
 * first loads the model, cluster and GPU configs named on the line, the second applies the flags
 * that override them, so the order of flags does not matter. Then the layout is completed: dp from
 * --gpus, the cluster sized to the GPUs, the default global batch. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_opts.h"
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

static const char *valued[] = {"--model", "--cluster", "--gpu", "--gpus", "--tp", "--cp", "--pp", "--vpp", "--dp", "--ep",
                               "--etp", "--micro-batch", "--global-batch", "--seq", "--recompute", "--zero", "--dtype",
                               "--tokens", "--trace", "--arch", "--layers", "--hidden", "--heads", "--kv-heads", "--ffn",
                               "--vocab", "--experts", "--top-k", "--expert-ffn", "--schedule", "--attention",
                               "--grad-bytes", "--hot-spares", "--top", "--software", "--stage-layers",
                               "--first-stage-layers", "--last-stage-layers", "--capacity-factor", "--moe-imbalance",
                               "--fp8-scaling", "--tp-overlap", "--mem-headroom", "--dropout", NULL};
static const char *bare[] = {"--json", "--sp", "--no-sp", "--no-overlap-dp", "--in-memory-ckpt", "--ignore-memory", "--why",
                             NULL};
/* options of myriad plan only, and of myriad sim only */
static const char *plan_only[] = {"--top", "--why", NULL};
static const char *sim_only[] = {"--trace", "--ignore-memory", NULL};

static int in_list(const char *a, const char **list) {
    for (const char **v = list; *v; v++)
        if (!strcmp(a, *v)) return 1;
    return 0;
}

/* Pass 1: help, known flags with values, and the configs. */
static int load_configs(int argc, char **argv, SimOpts *o, int plan) {
    const char *model = NULL, *cluster = NULL, *gpu = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (plan && !strcmp(a, "--compare")) {
            if (i + 2 >= argc) return myr_error("--compare needs two cluster files: --compare A.json B.json");
            o->compare[0] = argv[++i];
            o->compare[1] = argv[++i];
            continue;
        }
        int v = in_list(a, valued);
        if (!v && !in_list(a, bare)) return myr_error("unknown option '%s' (see myriad %s --help)", a, plan ? "plan" : "sim");
        if (plan && in_list(a, sim_only)) return myr_error("%s is an option of myriad sim, not of myriad plan", a);
        if (!plan && in_list(a, plan_only)) return myr_error("%s is an option of myriad plan", a);
        if (!v) continue;
        if (i + 1 >= argc) return myr_error("%s needs a value", a);
        if (!strcmp(a, "--software") && !strcmp(argv[i + 1], "list")) return 2;
        if (!strcmp(a, "--model")) model = argv[i + 1];
        if (!strcmp(a, "--cluster")) cluster = argv[i + 1];
        if (!strcmp(a, "--gpu")) gpu = argv[i + 1];
        i++;
    }
    if (model) {
        if (sim_load_model(model, &o->model)) return -1;
    } else {
        snprintf(o->model.name, sizeof o->model.name, "custom");
        sim_model_set_arch(&o->model, ARCH_GPT);
        o->model.top_k = 1;
        o->model.seq = 2048;
    }
    /* the cluster: as given, else the GPU's default design, else Selene (A100) */
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
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--software") && sim_software_preset(&o->layout, argv[i + 1])) return -1;
    return 0;
}

static int layout_flag(SimOpts *o, const char *a, const char *v) {
    Layout *l = &o->layout;
    int rc = 0;
    if (!strcmp(a, "--tp")) { rc = flag_int(a, v, 1, &l->tp); o->set_tp = 1; }
    else if (!strcmp(a, "--cp")) { rc = flag_int(a, v, 1, &l->cp); o->set_cp = 1; }
    else if (!strcmp(a, "--pp")) { rc = flag_int(a, v, 1, &l->pp); o->set_pp = 1; }
    else if (!strcmp(a, "--dp")) { rc = flag_int(a, v, 1, &l->dp); o->set_dp = 1; }
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
        else return myr_error("--schedule expects 1f1b, interleaved or gpipe, got '%s'", v);
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
        else return myr_error("--fp8-scaling expects delayed or current, got '%s'", v);
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
        {"--expert-ffn", &m->expert_ffn}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!strcmp(a, f[i].flag)) return flag_int(a, v, 1, f[i].field);
    return 1;
}

static int apply_flags(int argc, char **argv, SimOpts *o, int plan) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        int rc = 0, consumed = in_list(a, valued);
        if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--sp")) { o->layout.sp = 1; o->set_sp = 1; }
        else if (!strcmp(a, "--no-sp")) { o->layout.sp = 0; o->set_sp = 1; }
        else if (!strcmp(a, "--no-overlap-dp")) o->layout.overlap_dp = 0;
        else if (!strcmp(a, "--in-memory-ckpt")) o->in_memory = 1;
        else if (!strcmp(a, "--ignore-memory")) o->ignore_memory = 1;
        else if (!strcmp(a, "--why")) o->why = 1;
        else if (!strcmp(a, "--compare")) { i += 2; continue; }
        else if (!strcmp(a, "--model") || !strcmp(a, "--cluster") || !strcmp(a, "--gpu") || !strcmp(a, "--software")) {}
        else if (!strcmp(a, "--gpus")) rc = flag_int(a, v, 1, &o->gpus);
        else if (!strcmp(a, "--global-batch")) rc = flag_int(a, v, 1, &o->layout.global_batch);
        else if (!strcmp(a, "--seq")) rc = flag_int(a, v, 1, &o->layout.seq);
        else if (!strcmp(a, "--tokens")) rc = sim_parse_count(v, &o->tokens);
        else if (!strcmp(a, "--trace")) o->trace_path = v;
        else if (!strcmp(a, "--hot-spares")) rc = flag_int(a, v, 0, &o->hot_spares);
        else if (!strcmp(a, "--top")) rc = flag_int(a, v, 1, &o->top_k);
        else if (!strcmp(a, "--mem-headroom")) {
            double x = 0;
            char buf[32];
            snprintf(buf, sizeof buf, "%s", v);
            size_t n = strlen(buf);
            int pct = n && buf[n - 1] == '%';
            if (pct) buf[n - 1] = 0;
            rc = flag_num(a, buf, 0, pct ? 90 : 0.9, &x);
            o->mem_headroom = pct ? x / 100 : x;
        } else if ((rc = layout_flag(o, a, v)) != 1) {}
        else if ((rc = software_flag(o, a, v)) != 1) {}
        else if ((rc = model_flag(&o->model, a, v)) != 1) {}
        else return myr_error("unknown option '%s' (see myriad %s --help)", a, plan ? "plan" : "sim");
        if (rc) return -1;
        i += consumed;
    }
    return 0;
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
        o->batch_defaulted = 1;
        int want = (int)ceil(SIM_DEFAULT_BATCH_TOKENS / l->seq);
        l->global_batch = plan ? want : ((want + l->dp - 1) / l->dp) * l->dp;
    }
    return 0;
}

int sim_opts_parse(int argc, char **argv, SimOpts *o, int plan) {
    memset(o, 0, sizeof *o);
    sim_layout_defaults(&o->layout);
    o->top_k = 5;
    o->hot_spares = -1;
    o->mem_headroom = SIM_DEFAULT_HEADROOM;
    int rc = load_configs(argc, argv, o, plan);
    if (rc) return rc;
    int have_model_file = 0;
    for (int i = 1; i < argc; i++) have_model_file |= !strcmp(argv[i], "--model");
    if (apply_flags(argc, argv, o, plan)) return -1;
    return complete(o, plan, have_model_file);
}

int sim_opts_spares(const SimOpts *o) {
    if (o->hot_spares >= 0) return o->hot_spares;
    return sim_default_hot_spares(o->gpus, o->cluster.gpus_per_node);
}

void sim_opts_reliability(const SimOpts *o, int spares, ReliabilityResult *out) {
    FailureRates f;
    sim_failure_rates_default(&f);
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
