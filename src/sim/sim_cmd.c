/* sim_cmd.c: the `myriad sim` and `myriad sim validate` commands: parse the model, cluster and
 * layout flags, simulate one step and print (or --json) its time, breakdown, MFU, memory and the
 * days to train, optionally writing a Chrome trace. Option parsing shared with `myriad plan`
 * lives in sim_opts.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "sim/sim_opts.h"
#include "util/opts.h"
#include "util/error.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static int set_file(void *ctx, const char *arg) {
    const char **file = ctx;
    if (*file) return myr_error("one file at a time (got %s and %s)", *file, arg);
    *file = arg;
    return 0;
}

static int validate_main(int argc, char **argv) {
    const char *file = NULL;
    int json = 0;
    const Opt rows[] = {OPT_SWITCH("--json", &json, "print JSON instead of the table"), OPT_END};
    OptCommand cmd = {.name = "sim validate",
                      .usage = "usage: myriad sim validate FILE.csv [--json]\n"
                               "  Predicts every published run in FILE.csv (../shared/validation/) and prints the error.",
                      .rows = rows,
                      .positional = set_file,
                      .ctx = &file};
    opts_parse(&cmd, argc, argv);
    if (!file) myr_die("sim validate needs a FILE.csv (e.g. ../shared/validation/published_a100.csv)");
    double med, mx;
    if (sim_validate_file(file, json, stdout, &med, &mx)) myr_die_last();
    return 0;
}

static void print_text(const SimOpts *o, const SimResult *r, const ReliabilityResult *rel, const ReliabilityResult *alt) {
    const SimModel *m = &o->model;
    const Layout *l = &o->layout;
    printf("model %s: %.1f B parameters (%.1f B active), %d layers, hidden %d, heads %d/%d, ffn %d, vocab %d\n",
           m->name, sim_model_params(m) / 1e9, sim_model_active_params(m) / 1e9, m->layers, m->hidden, m->heads,
           m->kv_heads, m->ffn, m->vocab);
    printf("cluster %s: %d x %s, scale-up domain %d, %s %s", o->cluster.name, r->gpus, o->gpu.name,
           o->cluster.scaleup_domain, o->cluster.roce ? "RoCE" : "InfiniBand",
           o->cluster.rail_optimized ? "rail-optimized" : "fat-tree");
    for (int k = 0; k < o->cluster.ntiers; k++) printf("%s%s %g:1", k ? ", " : " (", o->cluster.tier[k].name, o->cluster.tier[k].oversub);
    printf(")%s\n", o->cluster.sharp ? ", SHARP" : "");
    printf("layout: tp %d cp %d pp %d vpp %d dp %d ep %d; micro batch %d x %d per step; global batch %d x %d tokens;\n"
           "        recompute %s, sp %s, zero %d, %s, %s attention, %s schedule\n",
           l->tp, l->cp, l->pp, r->vpp, l->dp, l->ep, r->micro_batch, r->microbatches, l->global_batch, l->seq,
           sim_recompute_name(l->recompute), l->sp && l->tp > 1 ? "on" : "off", l->zero, sim_dtype_name(l->dtype),
           l->flash ? "flash" : "unfused", r->vpp > 1 ? "interleaved 1F1B" : l->schedule == SCHED_GPIPE ? "GPipe" : "1F1B");
    double st = r->step_time;
    printf("\nstep time %10.4f s\n", st);
    const char *names[] = {"forward", "backward", "recompute", "TP comm (exposed)", "CP comm (exposed)",
                           "PP comm (exposed)", "DP comm (exposed)", "EP comm (exposed)", "bubble", "optimizer"};
    double vals[] = {r->forward, r->backward, r->recompute, r->tp_comm, r->cp_comm, r->pp_comm, r->dp_comm,
                     r->ep_comm, r->bubble, r->optimizer};
    for (int i = 0; i < 10; i++) printf("  %-19s %10.4f s %6.1f%%\n", names[i], vals[i], 100 * vals[i] / st);
    printf("MFU %.1f%%  HFU %.1f%%  %.1f TFLOP/s per GPU (incl. recompute)  %.0f tokens/s\n", 100 * r->mfu,
           100 * r->hfu, r->tflops_per_gpu, r->tokens_per_s);
    const SimMemory *mm = &r->mem;
    printf("\nmemory per GPU (stage %d, the fullest): weights %.1f, grads %.1f, optimizer %.1f, activations %.1f,\n"
           "        buffers/workspace %.1f; total %.1f GiB of %g GiB\n",
           mm->stage, mm->weights / GIB, mm->grads / GIB, mm->optimizer / GIB, mm->activations / GIB,
           mm->comm_buffers / GIB, mm->total / GIB, o->gpu.hbm_gib);
    if (o->tokens > 0) {
        double days = o->tokens / r->tokens_per_s / 86400;
        double n = sim_model_active_params(m);
        printf("\ntraining %.4g tokens: compute 6ND = %.0f ZFLOPs, 8ND (with full recompute) = %.0f ZFLOPs\n",
               o->tokens, 6 * n * o->tokens / 1e21, 8 * n * o->tokens / 1e21);
        printf("  %.1f days without failures\n", days);
        printf("  job MTBF %.1f h; %d hot spare nodes; checkpoints %s every %.0f min (%.1f s each; Young %.0f min): "
               "goodput %.1f%% -> %.1f days\n",
               rel->mtbf_h, o->hot_spares, o->in_memory ? "in memory" : "to storage", rel->interval_s / 60, rel->ckpt_s,
               rel->young_s / 60, 100 * rel->goodput, days / rel->goodput);
        printf("  (checkpoints %s instead: every %.1f min, goodput %.1f%% -> %.1f days)\n",
               o->in_memory ? "to storage" : "in memory", alt->interval_s / 60, 100 * alt->goodput, days / alt->goodput);
        ClusterCost cc;
        sim_cost(&o->cluster, &o->gpu, r->gpus, &cc);
        double run_h = days / rel->goodput * 24;
        printf("  power %.2f MW (TDP + host, PUE %.2f), energy %.2f GWh, $%.2f M at $%.2f per GPU-hour\n", cc.power_kw / 1e3,
               o->cluster.pue, cc.power_kw * run_h / 1e6, r->gpus * run_h * o->cluster.gpu_hour_usd / 1e6,
               o->cluster.gpu_hour_usd);
    }
}

static void print_json(const SimOpts *o, const SimResult *r, const ReliabilityResult *rel) {
    const SimMemory *mm = &r->mem;
    const Layout *l = &o->layout;
    double days = o->tokens > 0 ? o->tokens / r->tokens_per_s / 86400 : 0;
    printf("{\"model\":\"%s\",\"cluster\":\"%s\",\"gpu\":\"%s\",\"gpus\":%d,", o->model.name, o->cluster.name,
           o->gpu.name, r->gpus);
    printf("\"layout\":{\"tp\":%d,\"cp\":%d,\"pp\":%d,\"vpp\":%d,\"dp\":%d,\"ep\":%d,\"micro_batch\":%d,"
           "\"global_batch\":%d,\"seq\":%d,\"recompute\":\"%s\",\"sp\":%s,\"zero\":%d,\"dtype\":\"%s\"},",
           l->tp, l->cp, l->pp, r->vpp, l->dp, l->ep, r->micro_batch, l->global_batch, l->seq,
           sim_recompute_name(l->recompute), l->sp && l->tp > 1 ? "true" : "false", l->zero, sim_dtype_name(l->dtype));
    printf("\"step_time_s\":%.6g,\"breakdown_s\":{\"forward\":%.6g,\"backward\":%.6g,\"recompute\":%.6g,\"tp_comm\":%.6g,"
           "\"cp_comm\":%.6g,\"pp_comm\":%.6g,\"dp_comm\":%.6g,\"ep_comm\":%.6g,\"bubble\":%.6g,\"optimizer\":%.6g},",
           r->step_time, r->forward, r->backward, r->recompute, r->tp_comm, r->cp_comm, r->pp_comm, r->dp_comm,
           r->ep_comm, r->bubble, r->optimizer);
    printf("\"mfu\":%.5f,\"hfu\":%.5f,\"tflops_per_gpu\":%.4g,\"tokens_per_s\":%.6g,", r->mfu, r->hfu, r->tflops_per_gpu,
           r->tokens_per_s);
    printf("\"memory_gib\":{\"weights\":%.4f,\"grads\":%.4f,\"optimizer\":%.4f,\"activations\":%.4f,\"buffers\":%.4f,"
           "\"total\":%.4f,\"capacity\":%g,\"stage\":%d},",
           mm->weights / GIB, mm->grads / GIB, mm->optimizer / GIB, mm->activations / GIB, mm->comm_buffers / GIB,
           mm->total / GIB, o->gpu.hbm_gib, mm->stage);
    double n = sim_model_active_params(&o->model);
    if (o->tokens > 0)
        printf("\"tokens\":%.6g,\"days\":%.6g,\"zflops_6nd\":%.6g,\"zflops_8nd\":%.6g,", o->tokens, days,
               6 * n * o->tokens / 1e21, 8 * n * o->tokens / 1e21);
    else
        printf("\"tokens\":null,\"days\":null,"); /* give --tokens for days to train */
    printf("\"reliability\":{\"mtbf_h\":%.4g,\"hot_spares\":%d,\"in_memory_checkpoints\":%s,\"checkpoint_interval_s\":%.4g,"
           "\"checkpoint_s\":%.4g,\"goodput\":%.5f",
           rel->mtbf_h, o->hot_spares, o->in_memory ? "true" : "false", rel->interval_s, rel->ckpt_s, rel->goodput);
    if (o->tokens > 0) printf(",\"days_with_failures\":%.6g", days / rel->goodput);
    printf("}}\n");
}

int cmd_sim(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "validate")) return validate_main(argc - 1, argv + 1);
    SimOpts o;
    int rc = sim_opts_parse(argc, argv, &o, 0);
    if (rc == 1) return 0;
    if (rc) myr_die_last();
    if (!o.json && o.tokens <= 0 && (o.hot_spares || o.in_memory))
        myr_die("sim: --hot-spares and --in-memory-ckpt change the goodput of a training run: give --tokens X (or --json)");
    SimResult r;
    if (o.search_mb || o.search_vpp) {
        if (sim_step_search(&o.model, &o.cluster, &o.gpu, &o.layout, o.search_vpp, &r)) myr_die_last();
    }
    TraceWriter *tw = NULL;
    if (o.trace_path && !(tw = trace_open(o.trace_path))) myr_die_last();
    if (sim_step(&o.model, &o.cluster, &o.gpu, &o.layout, &r, tw)) myr_die_last();
    if (tw && trace_close(tw)) myr_die_last();
    if (r.mem.total > o.gpu.hbm_gib * GIB && !o.ignore_memory)
        myr_die("layout needs %.1f GiB per GPU, has %g (%s): weights %.1f, grads %.1f, optimizer %.1f, activations %.1f, "
                "buffers %.1f GiB; try more tp/pp, --recompute full, --zero 1-3 or a smaller --micro-batch "
                "(--ignore-memory to simulate anyway)",
                r.mem.total / GIB, o.gpu.hbm_gib, o.gpu.name, r.mem.weights / GIB, r.mem.grads / GIB,
                r.mem.optimizer / GIB, r.mem.activations / GIB, r.mem.comm_buffers / GIB);
    ReliabilityResult rel, alt;
    sim_opts_reliability(&o, &rel);
    o.in_memory = !o.in_memory;
    sim_opts_reliability(&o, &alt);
    o.in_memory = !o.in_memory;
    if (o.json) print_json(&o, &r, &rel);
    else print_text(&o, &r, &rel, &alt);
    return 0;
}
