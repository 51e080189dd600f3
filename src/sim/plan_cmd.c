/* plan_cmd.c: `myriad plan`: the best layouts of a model on a cluster, ranked by days to train
 * including failures (the goodput with the default or given hot spares, and without spares, side
 * by side), and `myriad plan --compare A.json B.json`: two cluster designs side by side (best
 * layout, time, goodput, network bill of materials, power, energy and money of the run). Every
 * layout flag on the line fixes that dimension; no recommended layout uses more than the memory
 * headroom allows; when nothing fits, the binding constraints are named with counts. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "sim/sim_opts.h"
#include "util/error.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static void fixed_of(const SimOpts *o, PlanFixed *fx) {
    memset(fx, 0, sizeof *fx);
    fx->tp = o->set_tp; fx->cp = o->set_cp; fx->pp = o->set_pp; fx->vpp = o->set_vpp && !o->search_vpp;
    fx->ep = o->set_ep; fx->etp = o->set_etp; fx->micro_batch = o->set_mb; fx->recompute = o->set_recompute;
    fx->sp = o->set_sp; fx->stages = o->set_stages;
    fx->batch_default = o->batch_defaulted;
    fx->mem_cap = (1 - o->mem_headroom) * o->gpu.hbm_gib * GIB;
}

static int run_plan(const SimOpts *o, PlanResult *pr) {
    if (o->set_dp) return myr_error("--dp is what plan derives from --gpus and the other dimensions; leave it out");
    PlanFixed fx;
    fixed_of(o, &fx);
    return sim_plan(&o->model, &o->cluster, &o->gpu, o->gpus, &o->layout, &fx, o->tokens, o->top_k, pr);
}

static void stages_text(const SimModel *m, const PlanEntry *e, char *buf, size_t cap) {
    Layout x = e->layout;
    x.vpp = e->res.vpp;
    if (!sim_uneven(&x)) { snprintf(buf, cap, "even"); return; }
    int p = x.pp;
    snprintf(buf, cap, "%d/%d/%d", sim_stage_layer_count(m, &x, 0), p > 2 ? sim_stage_layer_count(m, &x, 1) : 0,
             sim_stage_layer_count(m, &x, p - 1));
}

static void print_plan(const SimOpts *o, const PlanResult *pr, const ReliabilityResult *rel, const ReliabilityResult *none,
                       int spares) {
    double tokens = o->tokens > 0 ? o->tokens : 1e12;
    printf("plan for %s (%.1f B parameters) on %d x %s, %.4g tokens\n", o->model.name, sim_model_params(&o->model) / 1e9,
           o->gpus, o->gpu.name, tokens);
    printf("%s\n", o->cluster_note);
    printf("software %s%s\n", o->software, o->software_given ? "" : " (the default: today's Megatron-Core stack; "
           "--software NAME ranks with the preset of your software, --software list)");
    printf("global batch %d x %d tokens%s; memory limit %.1f GiB (%g GiB less %.0f%% headroom)\n", o->layout.global_batch,
           o->layout.seq, o->batch_defaulted ? " (default: 2^22 tokens, each layout's rounded to a multiple of dp and raised to dp x pp "
           "sequences where that is more)" : "",
           (1 - o->mem_headroom) * o->gpu.hbm_gib, o->gpu.hbm_gib, 100 * o->mem_headroom);
    printf("failures: job MTBF %.2f h%s; with %d hot spare nodes%s goodput %.1f%%, without spares %.1f%%\n", rel->mtbf_h,
           o->failure_rate > 0 ? " (--failure-rate)" : o->mtbf_h > 0 ? " (--mtbf)" : " (the Llama 3 rates)", spares,
           o->hot_spares < 0 ? " (default)" : "", 100 * rel->goodput, 100 * none->goodput);
    int refused = 0;
    for (int i = 0; i < PLAN_NREASONS; i++) refused += i == PLAN_GPUS ? 0 : pr->count[i];
    printf("%d layouts of %d GPUs considered, %d turned down", pr->considered, o->gpus, refused);
    if (pr->count[PLAN_MEMORY]) printf(" (%d above the memory limit; e.g. %s)", pr->count[PLAN_MEMORY], pr->example[PLAN_MEMORY]);
    printf("\n%-3s %3s %3s %3s %4s %5s %3s %3s %5s %-9s %-8s %8s %6s %7s %8s %9s %9s %s\n", "#", "tp", "cp", "pp", "vpp", "dp",
           "ep", "mb", "batch", "recompute", "stages", "step s", "MFU", "mem GiB", "days", "+failures", "no spares", "flags");
    int any = 0;
    for (int i = 0; i < pr->nbest; i++) {
        const PlanEntry *e = &pr->best[i];
        char st[32];
        stages_text(&o->model, e, st, sizeof st);
        int f = sim_result_flags(o->gpu.name, o->software, &e->layout, &e->res);
        any |= f;
        char fl[8];
        snprintf(fl, sizeof fl, "%s%s%s", f & SIM_WARN_FEW_MB ? "m" : "", f & SIM_WARN_BUBBLE ? "b" : "",
                 f & SIM_WARN_MFU ? "v" : "");
        printf("%-3d %3d %3d %3d %4d %5d %3d %3d %5d %-9s %-8s %8.3f %5.1f%% %7.1f %8.2f %9.2f %9.2f %s\n", i + 1,
               e->layout.tp, e->layout.cp, e->layout.pp, e->res.vpp, e->layout.dp, e->layout.ep, e->res.micro_batch,
               e->layout.global_batch, sim_recompute_name(e->layout.recompute), st, e->res.step_time, 100 * e->res.mfu,
               e->res.mem.total / GIB, e->days, e->days / rel->goodput, e->days / none->goodput, fl[0] ? fl : "-");
    }
    if (any & SIM_WARN_FEW_MB) printf("m: fewer micro-batches than pipeline stages (a larger --global-batch fills the pipeline)\n");
    if (any & SIM_WARN_BUBBLE) printf("b: pipeline bubble above 25%% of the step\n");
    if (any & SIM_WARN_MFU) {
        const char *run;
        int exact;
        int fp8 = o->layout.dtype == DT_FP8;
        double best = sim_validated_mfu(o->gpu.name, o->software, fp8, &run, &exact);
        if (exact)
            printf("v: MFU above the best validated %s run of %s on %s: %.1f%% (%s); the model was never checked this fast\n",
                   fp8 ? "fp8" : "16-bit", o->software, o->gpu.name, 100 * best, run);
        else if (best > 0)
            printf("v: unvalidated: no published %s run of %s on %s in the validation sets (the GPU's best: %.1f%%, %s; "
                   "--software names the preset of your software)\n", fp8 ? "fp8" : "16-bit", o->software, o->gpu.name,
                   100 * best, run);
        else printf("v: unvalidated: no published run on %s in the validation sets\n", o->gpu.name);
    }
    if (!pr->nbest) {
        char why[2048];
        sim_plan_why_none(pr, why, sizeof why);
        printf("%s\n", why);
    } else if (pr->best[0].res.bubble > 0.25 * pr->best[0].res.step_time) {
        const PlanEntry *e = &pr->best[0];
        printf("note: %d micro-batches per pipeline leave a %.0f%% bubble; a larger --global-batch fills the pipeline\n",
               e->res.microbatches, 100 * e->res.bubble / e->res.step_time);
    }
    if (o->why) {
        printf("\nrejected layouts:\n");
        for (int i = 0; i < pr->nrejected; i++) printf("  %s\n", pr->rejected[i]);
    }
}

static void print_plan_json(const SimOpts *o, const PlanResult *pr, const ReliabilityResult *rel,
                            const ReliabilityResult *none, int spares) {
    printf("{\"software\":\"%s\",", o->software);
    printf("\"model\":\"%s\",\"gpus\":%d,\"cluster\":\"%s\",\"cluster_note\":\"%s\",\"global_batch\":%d,"
           "\"memory_limit_gib\":%.4f,\"hot_spares\":%d,\"goodput\":%.5f,\"goodput_without_spares\":%.5f,\"considered\":%d,"
           "\"turned_down\":{",
           o->model.name, o->gpus, o->cluster.name, o->cluster_note, o->layout.global_batch,
           (1 - o->mem_headroom) * o->gpu.hbm_gib, spares, rel->goodput, none->goodput, pr->considered);
    for (int i = 0; i < PLAN_NREASONS; i++) printf("%s\"%s\":%d", i ? "," : "", sim_plan_reason_name(i), pr->count[i]);
    printf("},\"layouts\":[");
    for (int i = 0; i < pr->nbest; i++) {
        const PlanEntry *e = &pr->best[i];
        Layout x = e->layout;
        x.vpp = e->res.vpp;
        int f = sim_result_flags(o->gpu.name, o->software, &e->layout, &e->res);
        printf("%s{\"tp\":%d,\"cp\":%d,\"pp\":%d,\"vpp\":%d,\"dp\":%d,\"ep\":%d,\"micro_batch\":%d,\"global_batch\":%d,"
               "\"recompute\":\"%s\",\"sp\":%s,\"first_stage_layers\":%d,\"last_stage_layers\":%d,\"step_time_s\":%.6g,"
               "\"mfu\":%.5f,\"memory_gib\":%.4f,\"days\":%.6g,\"days_with_failures\":%.6g,"
               "\"days_with_failures_without_spares\":%.6g,\"flags\":{\"few_microbatches\":%s,\"bubble\":%s,"
               "\"mfu_unvalidated\":%s}}",
               i ? "," : "", e->layout.tp, e->layout.cp, e->layout.pp, e->res.vpp, e->layout.dp, e->layout.ep,
               e->res.micro_batch, e->layout.global_batch, sim_recompute_name(e->layout.recompute),
               e->layout.sp && e->layout.tp > 1 ? "true" : "false", sim_stage_layer_count(&o->model, &x, 0),
               sim_stage_layer_count(&o->model, &x, x.pp - 1), e->res.step_time, e->res.mfu, e->res.mem.total / GIB,
               e->days, e->days / rel->goodput, e->days / none->goodput, (f & SIM_WARN_FEW_MB) ? "true" : "false",
               (f & SIM_WARN_BUBBLE) ? "true" : "false", (f & SIM_WARN_MFU) ? "true" : "false");
    }
    printf("]");
    if (!pr->nbest) {
        char why[2048];
        sim_plan_why_none(pr, why, sizeof why);
        printf(",\"why_none\":\"%s\"", why);
    }
    printf("}\n");
}

static int compare(SimOpts *o) {
    SimOpts side[2];
    PlanResult pr[2];
    ClusterCost cost[2];
    ReliabilityResult rel[2];
    for (int i = 0; i < 2; i++) {
        side[i] = *o;
        if (sim_load_cluster(o->compare[i], &side[i].cluster)) return -1;
        if (sim_load_gpu(side[i].cluster.gpu, &side[i].gpu)) return -1;
        if (sim_cluster_fit(&side[i].cluster, o->gpus, NULL, 0)) return -1;
        side[i].top_k = 1;
        if (run_plan(&side[i], &pr[i])) return -1;
        sim_cost(&side[i].cluster, &side[i].gpu, o->gpus, &cost[i]);
        sim_opts_reliability(&side[i], -1, &rel[i]);
    }
    double tokens = o->tokens > 0 ? o->tokens : 1e12;
    printf("%s (%.1f B) on %d GPUs, %.4g tokens\n\n", o->model.name, sim_model_params(&o->model) / 1e9, o->gpus, tokens);
    printf("%-26s %26s %26s\n", "", side[0].cluster.name, side[1].cluster.name);
#define ROW(label, fmt, a, b) printf("%-26s " fmt " " fmt "\n", label, a, b)
    ROW("GPU", "%26s", side[0].gpu.name, side[1].gpu.name);
    ROW("fabric", "%26s", side[0].cluster.roce ? "RoCE" : "InfiniBand", side[1].cluster.roce ? "RoCE" : "InfiniBand");
    ROW("topology", "%26s", side[0].cluster.rail_optimized ? "rail-optimized" : "fat-tree",
        side[1].cluster.rail_optimized ? "rail-optimized" : "fat-tree");
    double days[2], run_days[2];
    for (int i = 0; i < 2; i++) {
        days[i] = pr[i].nbest ? pr[i].best[0].days : NAN;
        run_days[i] = days[i] / rel[i].goodput;
    }
    char lay[2][64];
    for (int i = 0; i < 2; i++) {
        if (pr[i].nbest) {
            const PlanEntry *e = &pr[i].best[0];
            snprintf(lay[i], sizeof lay[i], "tp%d pp%d vpp%d dp%d mb%d", e->layout.tp, e->layout.pp, e->res.vpp,
                     e->layout.dp, e->res.micro_batch);
        } else snprintf(lay[i], sizeof lay[i], "none fits");
    }
    ROW("best layout", "%26s", lay[0], lay[1]);
    ROW("step time (s)", "%26.3f", pr[0].nbest ? pr[0].best[0].res.step_time : NAN, pr[1].nbest ? pr[1].best[0].res.step_time : NAN);
    ROW("MFU", "%26.3f", pr[0].nbest ? pr[0].best[0].res.mfu : NAN, pr[1].nbest ? pr[1].best[0].res.mfu : NAN);
    ROW("days (no failures)", "%26.2f", days[0], days[1]);
    ROW("goodput", "%26.3f", rel[0].goodput, rel[1].goodput);
    ROW("days (with failures)", "%26.2f", run_days[0], run_days[1]);
    ROW("network tiers", "%26d", cost[0].tiers, cost[1].tiers);
    ROW("switches", "%26.0f", cost[0].switches, cost[1].switches);
    ROW("optics", "%26.0f", cost[0].optics, cost[1].optics);
    ROW("network capex ($M)", "%26.2f", cost[0].network_usd / 1e6, cost[1].network_usd / 1e6);
    ROW("power (MW, with PUE)", "%26.2f", cost[0].power_kw / 1e3, cost[1].power_kw / 1e3);
    ROW("energy of the run (GWh)", "%26.2f", cost[0].power_kw * run_days[0] * 24 / 1e6, cost[1].power_kw * run_days[1] * 24 / 1e6);
    ROW("$ of the run (M, rental)", "%26.2f", o->gpus * run_days[0] * 24 * side[0].cluster.gpu_hour_usd / 1e6,
        o->gpus * run_days[1] * 24 * side[1].cluster.gpu_hour_usd / 1e6);
#undef ROW
    for (int i = 0; i < 2; i++) sim_plan_free(&pr[i]);
    return 0;
}

int cmd_plan(int argc, char **argv) {
    SimOpts o;
    int rc = sim_opts_parse(argc, argv, &o, 1);
    if (rc == 1) return 0;
    if (rc == 2) { sim_software_list(stdout); return 0; }
    if (rc) myr_die_last();
    if (o.compare[0]) {
        if (compare(&o)) myr_die_last();
        return 0;
    }
    PlanResult pr;
    if (run_plan(&o, &pr)) myr_die_last();
    int spares = sim_opts_spares(&o);
    ReliabilityResult rel, none;
    sim_opts_reliability(&o, spares, &rel);
    sim_opts_reliability(&o, 0, &none);
    if (o.json) print_plan_json(&o, &pr, &rel, &none, spares);
    else print_plan(&o, &pr, &rel, &none, spares);
    int nothing = pr.nbest == 0;
    sim_plan_free(&pr);
    return nothing ? 1 : 0;
}
