/* sim_opts.c: parsing of the simulator's command-line options (see sim_opts.h). Two passes: the
 * first loads the model, cluster and GPU configs named on the line, the second applies the flags
 * that override them, so the order of flags does not matter. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_opts.h"
#include "util/args.h"
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

int sim_opts_parse(int argc, char **argv, SimOpts *o, int plan) {
    memset(o, 0, sizeof *o);
    sim_layout_defaults(&o->layout);
    o->top_k = 5;
    const char *model = NULL, *cluster = NULL, *gpu = NULL;
    /* pass 1: configs, help, and that every flag is known and has its value */
    static const char *valued[] = {"--model", "--cluster", "--gpu", "--gpus", "--tp", "--cp", "--pp", "--vpp", "--dp",
                                   "--ep", "--micro-batch", "--global-batch", "--seq", "--recompute", "--zero",
                                   "--dtype", "--tokens", "--trace", "--arch", "--layers", "--hidden", "--heads",
                                   "--kv-heads", "--ffn", "--vocab", "--experts", "--top-k", "--schedule",
                                   "--attention", "--grad-bytes", "--hot-spares", "--top", "--software", NULL};
    static const char *bare[] = {"--json", "--sp", "--no-sp", "--no-overlap-dp", "--in-memory-ckpt", "--ignore-memory",
                                 "--why", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (plan && !strcmp(a, "--compare")) {
            if (i + 2 >= argc) return myr_error("--compare needs two cluster files: --compare A.json B.json");
            o->compare[0] = argv[++i];
            o->compare[1] = argv[++i];
            continue;
        }
        int known = 0;
        for (const char **v = valued; *v; v++)
            if (!strcmp(a, *v)) {
                if (i + 1 >= argc) return myr_error("%s needs a value", a);
                known = 1;
                if (!strcmp(a, "--model")) model = argv[i + 1];
                if (!strcmp(a, "--cluster")) cluster = argv[i + 1];
                if (!strcmp(a, "--gpu")) gpu = argv[i + 1];
                i++;
                break;
            }
        for (const char **v = bare; *v && !known; v++)
            if (!strcmp(a, *v)) known = 1;
        if (!known) return myr_error("unknown option '%s' (see myriad %s --help)", a, plan ? "plan" : "sim");
    }
    if (model) {
        if (sim_load_model(model, &o->model)) return -1;
    } else {
        snprintf(o->model.name, sizeof o->model.name, "custom");
        sim_model_set_arch(&o->model, ARCH_GPT);
        o->model.top_k = 1;
        o->model.seq = 2048;
    }
    if (cluster) {
        if (sim_load_cluster(cluster, &o->cluster)) return -1;
    } else if (sim_load_cluster("selene", &o->cluster)) {
        sim_cluster_defaults(&o->cluster);
    }
    if (sim_load_gpu(gpu ? gpu : o->cluster.gpu, &o->gpu)) return -1;
    /* the software preset first, so that explicit flags override it */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--software") && sim_software_preset(&o->layout, argv[i + 1])) return -1;
    /* pass 2: everything else */
    SimModel *m = &o->model;
    Layout *l = &o->layout;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        int rc = 0, consumed = 1;
        if (!strcmp(a, "--json")) { o->json = 1; consumed = 0; }
        else if (!strcmp(a, "--sp")) { l->sp = 1; o->set_sp = 1; consumed = 0; }
        else if (!strcmp(a, "--no-sp")) { l->sp = 0; o->set_sp = 1; consumed = 0; }
        else if (!strcmp(a, "--no-overlap-dp")) { l->overlap_dp = 0; consumed = 0; }
        else if (!strcmp(a, "--in-memory-ckpt")) { o->in_memory = 1; consumed = 0; }
        else if (!strcmp(a, "--ignore-memory")) { o->ignore_memory = 1; consumed = 0; }
        else if (!strcmp(a, "--why")) {
            if (!plan) return myr_error("--why is an option of myriad plan");
            o->why = 1;
            consumed = 0;
        }
        else if (!strcmp(a, "--compare")) { i += 2; continue; }
        else if (!strcmp(a, "--model") || !strcmp(a, "--cluster") || !strcmp(a, "--gpu")) {}
        else if (!strcmp(a, "--gpus")) rc = flag_int(a, v, 1, &o->gpus);
        else if (!strcmp(a, "--software")) {}
        else if (!strcmp(a, "--tp")) { rc = flag_int(a, v, 1, &l->tp); o->set_tp = 1; }
        else if (!strcmp(a, "--cp")) { rc = flag_int(a, v, 1, &l->cp); o->set_cp = 1; }
        else if (!strcmp(a, "--pp")) { rc = flag_int(a, v, 1, &l->pp); o->set_pp = 1; }
        else if (!strcmp(a, "--dp")) { rc = flag_int(a, v, 1, &l->dp); o->set_dp = 1; }
        else if (!strcmp(a, "--ep")) { rc = flag_int(a, v, 1, &l->ep); o->set_ep = 1; }
        else if (!strcmp(a, "--vpp")) {
            o->set_vpp = 1;
            if (!strcmp(v, "auto")) o->search_vpp = 1;
            else rc = flag_int(a, v, 1, &l->vpp);
        } else if (!strcmp(a, "--micro-batch")) {
            if (!strcmp(v, "auto")) { o->search_mb = 1; l->micro_batch = 0; }
            else rc = flag_int(a, v, 1, &l->micro_batch);
        } else if (!strcmp(a, "--global-batch")) rc = flag_int(a, v, 1, &l->global_batch);
        else if (!strcmp(a, "--seq")) rc = flag_int(a, v, 1, &l->seq);
        else if (!strcmp(a, "--recompute")) { rc = sim_recompute_parse(v, &l->recompute); o->set_recompute = 1; }
        else if (!strcmp(a, "--zero")) {
            rc = flag_int(a, v, 0, &l->zero);
            if (!rc && l->zero > 3) rc = myr_error("--zero expects 0, 1, 2 or 3, got %s", v);
            o->set_zero = 1;
        } else if (!strcmp(a, "--dtype")) rc = sim_dtype_parse(v, &l->dtype);
        else if (!strcmp(a, "--tokens")) rc = sim_parse_count(v, &o->tokens);
        else if (!strcmp(a, "--trace")) o->trace_path = v;
        else if (!strcmp(a, "--schedule")) {
            if (!strcmp(v, "1f1b") || !strcmp(v, "interleaved")) l->schedule = SCHED_1F1B;
            else if (!strcmp(v, "gpipe")) l->schedule = SCHED_GPIPE;
            else rc = myr_error("--schedule expects 1f1b, interleaved or gpipe, got '%s'", v);
        } else if (!strcmp(a, "--attention")) {
            if (!strcmp(v, "flash") || !strcmp(v, "fused")) l->flash = ATTN_FUSED;
            else if (!strcmp(v, "fa2")) l->flash = ATTN_FA2;
            else if (!strcmp(v, "unfused")) l->flash = ATTN_UNFUSED;
            else rc = myr_error("--attention expects fused, fa2 or unfused, got '%s'", v);
        } else if (!strcmp(a, "--grad-bytes")) {
            rc = flag_int(a, v, 2, &l->grad_bytes);
            if (!rc && l->grad_bytes != 2 && l->grad_bytes != 4) rc = myr_error("--grad-bytes expects 2 or 4");
        } else if (!strcmp(a, "--hot-spares")) rc = flag_int(a, v, 0, &o->hot_spares);
        else if (!strcmp(a, "--top")) rc = flag_int(a, v, 1, &o->top_k);
        else if (!strcmp(a, "--arch")) {
            SimArch ar;
            rc = sim_arch_parse(v, &ar);
            if (!rc) sim_model_set_arch(m, ar);
        } else if (!strcmp(a, "--layers")) { rc = flag_int(a, v, 1, &m->layers); }
        else if (!strcmp(a, "--hidden")) { rc = flag_int(a, v, 1, &m->hidden); }
        else if (!strcmp(a, "--heads")) { rc = flag_int(a, v, 1, &m->heads); }
        else if (!strcmp(a, "--kv-heads")) { rc = flag_int(a, v, 1, &m->kv_heads); }
        else if (!strcmp(a, "--ffn")) { rc = flag_int(a, v, 1, &m->ffn); }
        else if (!strcmp(a, "--vocab")) { rc = flag_int(a, v, 1, &m->vocab); }
        else if (!strcmp(a, "--experts")) { rc = flag_int(a, v, 1, &m->experts); }
        else if (!strcmp(a, "--top-k")) { rc = flag_int(a, v, 1, &m->top_k); }
        else return myr_error("unknown option '%s'", a);
        if (rc) return -1;
        i += consumed;
    }
    if (!model) {
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
