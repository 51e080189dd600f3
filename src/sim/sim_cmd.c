/* sim_cmd.c: the `myriad sim` and `myriad sim validate` commands: parse the model, cluster and
 * layout flags, simulate one step and print (or --json) its time, breakdown, MFU, memory, the days
 * to train with and without hot spares, optionally writing a Chrome trace. Option parsing shared
 * with `myriad plan` lives in sim_opts.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "sim/goodput_predict.h"
#include "sim/sim_opts.h"
#include "sim/validate.h"
#include "util/opts.h"
#include "util/error.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static void layout_text(const SimOpts *o, const SimResult *r, char *buf, size_t cap) {
    const Layout *l = &o->layout;
    size_t n = (size_t)snprintf(buf, cap, "tp %d cp %d pp %d vpp %d dp %d ep %d", l->tp, l->cp, l->pp, r->vpp, l->dp, l->ep);
    if (l->etp) n += (size_t)snprintf(buf + n, cap - n, " etp %d", l->etp);
    if (sim_uneven(l) && n < cap) {
        int V = l->pp * r->vpp;
        int *count = malloc(sizeof(int) * (size_t)V);
        Layout x = *l;
        x.vpp = r->vpp;
        if (count && !sim_vstage_layers(&o->model, &x, count)) {
            n += (size_t)snprintf(buf + n, cap - n, "; layers per stage");
            for (int s = 0; s < l->pp && n < cap - 16; s++) {
                if (l->pp > 8 && s == 3) { n += (size_t)snprintf(buf + n, cap - n, " ..."); s = l->pp - 3; }
                n += (size_t)snprintf(buf + n, cap - n, " %d", sim_stage_layer_count(&o->model, &x, s));
            }
        }
        free(count);
    }
}

/* "12.3 days", or a plain statement when failures leave the run no progress */
static const char *days_text(double days, double goodput, char *buf, size_t cap) {
    if (goodput < 1e-3) snprintf(buf, cap, "no progress (restarts take all the time between failures)");
    else snprintf(buf, cap, "%.1f days", days / goodput);
    return buf;
}

static void print_text(const SimOpts *o, const SimResult *r) {
    const SimModel *m = &o->model;
    const Layout *l = &o->layout;
    printf("model %s: %.1f B parameters (%.1f B active), %d layers, hidden %d, heads %d/%d, ffn %d, vocab %d%s\n", m->name,
           sim_model_params(m) / 1e9, sim_model_active_params(m) / 1e9, m->layers, m->hidden, m->heads, m->kv_heads,
           m->ffn, m->vocab, m->experts > 1 ? "" : "");
    if (m->experts > 1) printf("  MoE: %d experts, top-%d, expert ffn %d\n", m->experts, m->top_k, m->expert_ffn);
    printf("%s\n", o->cluster_note);
    printf("  %d x %s, scale-up domain %d, %s %s", r->gpus, o->gpu.name, o->cluster.scaleup_domain,
           o->cluster.roce ? "RoCE" : "InfiniBand", o->cluster.rail_optimized ? "rail-optimized" : "fat-tree");
    for (int k = 0; k < o->cluster.ntiers; k++)
        printf("%s%s %g:1", k ? ", " : " (", o->cluster.tier[k].name, o->cluster.tier[k].oversub);
    printf(")%s\n", o->cluster.sharp ? ", SHARP" : "");
    char lay[256];
    layout_text(o, r, lay, sizeof lay);
    printf("layout: %s; micro batch %d x %d per step; global batch %d x %d tokens;\n"
           "        recompute %s, sp %s, zero %d, %s%s, %s attention, %s schedule\n",
           lay, r->micro_batch, r->microbatches, l->global_batch, l->seq, sim_recompute_name(l->recompute),
           l->sp && l->tp > 1 ? "on" : "off", l->zero, sim_dtype_name(l->dtype),
           l->dtype == DT_FP8 ? (l->fp8_scaling == FP8_CURRENT ? " (current scaling)" : l->fp8_scaling == FP8_BLOCKWISE
                                 ? " (blockwise scaling)" : " (delayed scaling)") : "",
           l->flash == ATTN_UNFUSED ? "unfused" : l->flash == ATTN_FA2 ? "FlashAttention-2" : "fused",
           r->vpp > 1 ? "interleaved 1F1B" : l->schedule == SCHED_GPIPE ? "GPipe" : l->schedule == SCHED_DUALPIPE ? "DualPipe" : "1F1B");
    if (l->ep > 1)
        printf("        expert parallel: %s dispatch%s%s, all-to-all %s\n", l->ep_a2a ? "two-stage (DeepEP)" : "NCCL all-to-all",
               l->dtype == DT_FP8 && l->ep_fp8_dispatch ? " in fp8" : "",
               o->model.route_nodes > 0 ? ", node-limited routing" : "",
               l->schedule == SCHED_DUALPIPE && l->pp > 1 ? "overlapped by DualPipe" : l->ep_overlap ? "overlapped (1F1B steady phase)" : "not overlapped");
    double st = r->step_time;
    printf("\nstep time %10.4f s\n", st);
    const char *names[] = {"forward", "backward", "recompute", "TP comm (exposed)", "CP comm (exposed)",
                           "PP comm (exposed)", "DP comm (exposed)", "EP comm (exposed)", "bubble", "optimizer",
                           "straggler wait"};
    double vals[] = {r->forward, r->backward, r->recompute, r->tp_comm, r->cp_comm, r->pp_comm, r->dp_comm,
                     r->ep_comm, r->bubble, r->optimizer, r->straggler};
    for (int i = 0; i < 11; i++) {
        if (i == 10 && r->straggler <= 0) break;
        printf("  %-19s %10.4f s %6.1f%%", names[i], vals[i], 100 * vals[i] / st);
        if (i == 7 && r->ep_total > 0)
            printf("\n  %-19s %10s   on the stage with the most MoE layers: all-to-all %.4f s in full, %.4f s = %.0f%% "
                   "hidden\n  %-19s %10s   under compute, which loses %.4f s to the %d SMs it holds", "", "", r->ep_total,
                   r->ep_hidden, 100 * r->ep_hidden / r->ep_total, "", "", r->ep_sm_tax, o->layout.comm_sms);
        printf("\n");
    }
    /* a calibrated CPU does well under a TFLOP/s: GFLOP/s then, not "0.0 TFLOP/s" */
    char rate[48];
    if (r->tflops_per_gpu >= 1) snprintf(rate, sizeof rate, "%.1f TFLOP/s", r->tflops_per_gpu);
    else snprintf(rate, sizeof rate, "%.3g GFLOP/s", 1e3 * r->tflops_per_gpu);
    printf("MFU %.1f%%  HFU %.1f%%  %s per device (incl. recompute)  %.0f tokens/s\n", 100 * r->mfu, 100 * r->hfu, rate,
           r->tokens_per_s);
    if (o->batch_note[0]) printf("note: global batch: %s\n", o->batch_note);
    int flags = sim_result_flags(o->gpu.name, o->software, l, r);
    for (int bit = 1; bit <= SIM_WARN_MFU; bit <<= 1)
        if (flags & bit) {
            char w[512];
            sim_result_warning(bit, o->gpu.name, o->software, l, r, w, sizeof w);
            printf("warning: %s\n", w);
        }
    const SimMemory *mm = &r->mem;
    printf("\nmemory per GPU (stage %d, the fullest): weights %.1f, grads %.1f, optimizer %.1f, fp8 copies %.1f,\n"
           "        activations %.1f, buffers/workspace %.1f, allocator reserve %.1f; total %.1f GiB of %g GiB\n",
           mm->stage, mm->weights / GIB, mm->grads / GIB, mm->optimizer / GIB, mm->fp8_copies / GIB, mm->activations / GIB,
           mm->comm_buffers / GIB, mm->reserve / GIB, mm->total / GIB, o->gpu.hbm_gib);
    double limit = (1 - o->mem_headroom) * o->gpu.hbm_gib;
    if (mm->total / GIB > limit)
        printf("warning: above the %.0f%% memory headroom (%.1f GiB); plan recommends only layouts below it\n",
               100 * o->mem_headroom, limit);
    if (o->tokens > 0) {
        double days = o->tokens / r->tokens_per_s / 86400;
        double n = sim_model_active_params(m);
        int spares = sim_opts_spares(o);
        ReliabilityResult rel, none, alt;
        sim_opts_reliability(o, spares, &rel);
        sim_opts_reliability(o, 0, &none);
        SimOpts x = *o;
        x.in_memory = !o->in_memory;
        sim_opts_reliability(&x, spares, &alt);
        printf("\ntraining %.4g tokens: compute 6ND = %.0f ZFLOPs, 8ND (with full recompute) = %.0f ZFLOPs\n", o->tokens,
               6 * n * o->tokens / 1e21, 8 * n * o->tokens / 1e21);
        char mtbf[32];
        if (rel.mtbf_h < 1) snprintf(mtbf, sizeof mtbf, "%.1f min", rel.mtbf_h * 60);
        else snprintf(mtbf, sizeof mtbf, "%.1f h", rel.mtbf_h);
        printf("  %.1f days without failures; job MTBF %s (%s); checkpoints %s every %.1f min (%.1f s each)\n", days,
               mtbf, o->failure_rate > 0 ? "--failure-rate" : o->mtbf_h > 0 ? "--mtbf" : "the Llama 3 failure rates",
               o->in_memory ? "in memory" : "to storage", rel.interval_s / 60, rel.ckpt_s);
        char d1[96], d2[96], d3[96];
        printf("  with %d hot spare nodes%s: goodput %.1f%% -> %s; without spares: goodput %.1f%% -> %s\n",
               spares, o->hot_spares < 0 ? " (default: a free spare at 99% of faults)" : "", 100 * rel.goodput,
               days_text(days, rel.goodput, d1, sizeof d1), 100 * none.goodput, days_text(days, none.goodput, d2, sizeof d2));
        printf("  (checkpoints %s instead: every %.1f min, goodput %.1f%% -> %s)\n",
               o->in_memory ? "to storage" : "in memory", alt.interval_s / 60, 100 * alt.goodput,
               days_text(days, alt.goodput, d3, sizeof d3));
        ClusterCost cc;
        sim_cost(&o->cluster, &o->gpu, r->gpus, &cc);
        double run_h = days / rel.goodput * 24;
        printf("  power %.2f MW (TDP + host, PUE %.2f), energy %.2f GWh, $%.2f M at $%.2f per GPU-hour\n", cc.power_kw / 1e3,
               o->cluster.pue, cc.power_kw * run_h / 1e6, r->gpus * run_h * o->cluster.gpu_hour_usd / 1e6,
               o->cluster.gpu_hour_usd);
    }
}

static void print_json(const SimOpts *o, const SimResult *r) {
    const SimMemory *mm = &r->mem;
    const Layout *l = &o->layout;
    double days = o->tokens > 0 ? o->tokens / r->tokens_per_s / 86400 : 0;
    printf("{\"model\":\"%s\",\"cluster\":\"%s\",\"cluster_note\":\"%s\",\"gpu\":\"%s\",\"gpus\":%d,", o->model.name,
           o->cluster.name, o->cluster_note, o->gpu.name, r->gpus);
    printf("\"layout\":{\"tp\":%d,\"cp\":%d,\"pp\":%d,\"vpp\":%d,\"dp\":%d,\"ep\":%d,\"etp\":%d,\"micro_batch\":%d,"
           "\"global_batch\":%d,\"seq\":%d,\"recompute\":\"%s\",\"sp\":%s,\"zero\":%d,\"dtype\":\"%s\",\"stage_layers\":[",
           l->tp, l->cp, l->pp, r->vpp, l->dp, l->ep, l->etp ? l->etp : l->tp, r->micro_batch, l->global_batch, l->seq,
           sim_recompute_name(l->recompute), l->sp && l->tp > 1 ? "true" : "false", l->zero, sim_dtype_name(l->dtype));
    Layout x = *l;
    x.vpp = r->vpp;
    for (int s = 0; s < l->pp; s++) printf("%s%d", s ? "," : "", sim_stage_layer_count(&o->model, &x, s));
    printf("]},");
    printf("\"step_time_s\":%.6g,\"breakdown_s\":{\"forward\":%.6g,\"backward\":%.6g,\"recompute\":%.6g,\"tp_comm\":%.6g,"
           "\"cp_comm\":%.6g,\"pp_comm\":%.6g,\"dp_comm\":%.6g,\"ep_comm\":%.6g,\"bubble\":%.6g,\"optimizer\":%.6g,\"straggler\":%.6g},",
           r->step_time, r->forward, r->backward, r->recompute, r->tp_comm, r->cp_comm, r->pp_comm, r->dp_comm,
           r->ep_comm, r->bubble, r->optimizer, r->straggler);
    printf("\"ep_all_to_all_s\":%.6g,\"ep_hidden_s\":%.6g,\"ep_sm_tax_s\":%.6g,\"schedule\":\"%s\",", r->ep_total, r->ep_hidden, r->ep_sm_tax,
           r->vpp > 1 ? "interleaved" : l->schedule == SCHED_GPIPE ? "gpipe" : l->schedule == SCHED_DUALPIPE ? "dualpipe" : "1f1b");
    printf("\"mfu\":%.5f,\"hfu\":%.5f,\"tflops_per_gpu\":%.4g,\"tokens_per_s\":%.6g,", r->mfu, r->hfu, r->tflops_per_gpu,
           r->tokens_per_s);
    printf("\"software\":\"%s\",\"global_batch_note\":\"%s\",\"warnings\":[", o->software, o->batch_note);
    int flags = sim_result_flags(o->gpu.name, o->software, l, r), nw = 0;
    for (int bit = 1; bit <= SIM_WARN_MFU; bit <<= 1)
        if (flags & bit) {
            char w[512];
            sim_result_warning(bit, o->gpu.name, o->software, l, r, w, sizeof w);
            printf("%s{\"kind\":\"%s\",\"text\":\"%s\"}", nw++ ? "," : "",
                   bit == SIM_WARN_FEW_MB ? "few_microbatches" : bit == SIM_WARN_BUBBLE ? "bubble" : "mfu_unvalidated", w);
        }
    printf("],");
    printf("\"memory_gib\":{\"weights\":%.4f,\"grads\":%.4f,\"optimizer\":%.4f,\"fp8_copies\":%.4f,\"activations\":%.4f,"
           "\"buffers\":%.4f,\"reserve\":%.4f,\"total\":%.4f,\"capacity\":%g,\"headroom\":%.3f,\"stage\":%d},",
           mm->weights / GIB, mm->grads / GIB, mm->optimizer / GIB, mm->fp8_copies / GIB, mm->activations / GIB,
           mm->comm_buffers / GIB, mm->reserve / GIB, mm->total / GIB, o->gpu.hbm_gib, o->mem_headroom, mm->stage);
    double n = sim_model_active_params(&o->model);
    if (o->tokens > 0)
        printf("\"tokens\":%.6g,\"days\":%.6g,\"zflops_6nd\":%.6g,\"zflops_8nd\":%.6g,", o->tokens, days,
               6 * n * o->tokens / 1e21, 8 * n * o->tokens / 1e21);
    else
        printf("\"tokens\":null,\"days\":null,"); /* give --tokens for days to train */
    int spares = sim_opts_spares(o);
    ReliabilityResult rel, none;
    sim_opts_reliability(o, spares, &rel);
    sim_opts_reliability(o, 0, &none);
    FailureRates fr;
    sim_opts_failure_rates(o, &fr);
    printf("\"reliability\":{\"failures_per_gpu_day\":%.5g,\"mtbf_h\":%.4g,\"hot_spares\":%d,\"in_memory_checkpoints\":%s,\"checkpoint_interval_s\":%.4g,"
           "\"checkpoint_s\":%.4g,\"goodput\":%.5f,\"goodput_without_spares\":%.5f",
           24 * (fr.gpu + fr.hbm + fr.nic + fr.network + fr.host + fr.software), rel.mtbf_h, spares,
           o->in_memory ? "true" : "false", rel.interval_s, rel.ckpt_s, rel.goodput, none.goodput);
    if (o->tokens > 0)
        printf(",\"days_with_failures\":%.6g,\"days_with_failures_without_spares\":%.6g", days / rel.goodput,
               days / none.goodput);
    printf("}}\n");
}

/* `sim validate FILE --case NAME`: the whole simulation of one published run. */
static int validate_one(const char *file, const char *name) {
    ValCase vc;
    if (sim_validate_find(file, name, &vc)) return -1;
    if (vc.why[0]) return myr_error("%s: not simulated: %s", name, vc.why);
    SimOpts o;
    memset(&o, 0, sizeof o);
    SimResult r;
    if (sim_validate_case(&vc, &r, &o.gpu)) return -1;
    o.model = vc.m;
    o.layout = vc.l;
    snprintf(o.software, sizeof o.software, "%s", vc.software);
    o.gpus = vc.gpus;
    o.mem_headroom = SIM_DEFAULT_HEADROOM;
    if (vc.cluster_name[0] ? sim_load_cluster(vc.cluster_name, &o.cluster) : sim_load_default_cluster(vc.gpu_name, &o.cluster))
        return -1;
    snprintf(o.cluster_note, sizeof o.cluster_note, "cluster %s", o.cluster.name);
    printf("%s: software %s; published %s %g = %.4f s per step; predicted %.4f s (%+.1f%%)\n\n", name, vc.software,
           vc.metric, vc.value, vc.measured_s, r.step_time, 100 * (r.step_time - vc.measured_s) / vc.measured_s);
    print_text(&o, &r);
    return 0;
}

typedef struct {
    const char *files[16];
    int n;
} FileList;

static int add_file(void *ctx, const char *arg) {
    FileList *fl = ctx;
    if (fl->n == 16) return myr_error("at most 16 files (got %s)", arg);
    fl->files[fl->n++] = arg;
    return 0;
}

/* Every file's table, then leave-one-source-out over the step-time rows of all of them. */
static int validate_files(const FileList *fl, int json, int loso) {
    ValCase *cases = NULL;
    int n = 0;
    for (int i = 0; i < fl->n; i++)
        if (sim_validate_load(fl->files[i], &cases, &n)) { free(cases); return -1; }
    loso = loso && n > 0;
    if (json && fl->n > 1) printf("{\"files\":[");
    for (int i = 0; i < fl->n; i++) {
        ValStats st;
        if (json && i) printf(",");
        int last = i == fl->n - 1;
        int rc = json && last && loso && fl->n == 1 ? sim_validate_stats_open(fl->files[i], stdout, &st)
                                                    : sim_validate_stats(fl->files[i], json, stdout, &st);
        if (rc) { free(cases); return -1; }
        if (!json && fl->n > 1) printf("\n");
    }
    if (json && fl->n > 1) printf("]%s", loso ? "," : "}\n");
    else if (json && loso) printf(",");
    if (loso) {
        LosoSummary sum;
        if (sim_validate_loso(cases, n, json, stdout, &sum)) { free(cases); return -1; }
        if (json) printf("}\n");
    }
    free(cases);
    return 0;
}

static int validate_main(int argc, char **argv) {
    const char *one = NULL;
    FileList fl = {{0}, 0};
    int json = 0, no_loso = 0;
    const Opt rows[] = {OPT_SWITCH("--json", &json, "print JSON instead of the table"),
                        OPT_STR("--case", "NAME", &one, "simulate one row in full (breakdown, memory)"),
                        OPT_SWITCH("--no-loso", &no_loso, "skip the leave-one-source-out re-fits (faster)"), OPT_END};
    OptCommand cmd = {.name = "sim validate",
                      .usage = "usage: myriad sim validate FILE.csv [FILE.csv ...] [--json] [--no-loso] [--case NAME]\n"
                               "  Predicts every published run in the files (../shared/validation/) and prints the error,\n"
                               "  in-sample (the shipped constants) and leave-one-source-out (every FITTED constant\n"
                               "  re-fitted without the rows of one source, over the step-time rows of all files given).",
                      .rows = rows,
                      .positional = add_file,
                      .ctx = &fl};
    opts_parse(&cmd, argc, argv);
    if (!fl.n) myr_die("sim validate needs a FILE.csv (e.g. ../shared/validation/published_modern.csv)");
    if (one) {
        if (fl.n > 1) myr_die("--case reads one file; give only the file that holds %s", one);
        if (validate_one(fl.files[0], one)) myr_die_last();
        return 0;
    }
    if (validate_files(&fl, json, !no_loso)) myr_die_last();
    return 0;
}

int cmd_sim(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "validate")) return validate_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "goodput")) return sim_goodput_main(argc - 1, argv + 1);
    SimOpts o;
    int rc = sim_opts_parse(argc, argv, &o, 0);
    if (rc == 1) return 0;
    if (rc == 2) { sim_software_list(stdout); return 0; }
    if (rc) myr_die_last();
    if (!o.json && o.tokens <= 0 && (o.hot_spares >= 0 || o.in_memory || o.failure_rate > 0 || o.mtbf_h > 0))
        myr_die("sim: --hot-spares, --in-memory-ckpt, --failure-rate and --mtbf change the goodput of a training run: "
                "give --tokens X (or --json)");
    SimResult r;
    if (o.search_mb || o.search_vpp) {
        SearchOpts so = {0};
        so.search_mb = o.search_mb;
        so.search_vpp = o.search_vpp;
        so.mem_cap = (1 - o.mem_headroom) * o.gpu.hbm_gib * GIB;
        if (sim_step_search_ex(&o.model, &o.cluster, &o.gpu, &o.layout, &so, &r)) myr_die_last();
    }
    TraceWriter *tw = NULL;
    if (o.trace_path && !(tw = trace_open(o.trace_path))) myr_die_last();
    if (sim_step(&o.model, &o.cluster, &o.gpu, &o.layout, &r, tw)) myr_die_last();
    if (tw && trace_close(tw)) myr_die_last();
    if (r.mem.total > o.gpu.hbm_gib * GIB && !o.ignore_memory)
        myr_die("layout needs %.1f GiB per GPU, has %g (%s): weights %.1f, grads %.1f, optimizer %.1f, fp8 copies %.1f, "
                "activations %.1f, buffers %.1f, reserve %.1f GiB; try more tp/pp, --recompute full, --zero 1-3 or a "
                "smaller --micro-batch (--ignore-memory to simulate anyway)",
                r.mem.total / GIB, o.gpu.hbm_gib, o.gpu.name, r.mem.weights / GIB, r.mem.grads / GIB,
                r.mem.optimizer / GIB, r.mem.fp8_copies / GIB, r.mem.activations / GIB, r.mem.comm_buffers / GIB,
                r.mem.reserve / GIB);
    if (o.json) print_json(&o, &r);
    else print_text(&o, &r);
    return 0;
}
