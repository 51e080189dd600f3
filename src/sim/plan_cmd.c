/* plan_cmd.c: `myriad plan`: the best layouts of a model on a cluster, ranked by days to train,
 * and `myriad plan --compare A.json B.json`: two cluster designs side by side (best layout, time,
 * goodput, network bill of materials, power, energy and money of the run). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "sim/sim_opts.h"
#include "util/error.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static int run_plan(SimOpts *o, PlanResult *pr) {
    if (sim_plan(&o->model, &o->cluster, &o->gpu, o->gpus, &o->layout, o->tokens, o->top_k, pr)) return -1;
    return 0;
}

static void print_plan(const SimOpts *o, const PlanResult *pr) {
    printf("plan for %s (%.1f B parameters) on %d x %s (%s), %.4g tokens\n", o->model.name,
           sim_model_params(&o->model) / 1e9, o->gpus, o->gpu.name, o->cluster.name, o->tokens > 0 ? o->tokens : 1e12);
    printf("%d layouts considered: %d invalid, %d do not fit in %g GiB%s%s%s\n", pr->considered, pr->invalid, pr->no_fit,
           o->gpu.hbm_gib, pr->why_no_fit[0] ? " (" : "", pr->why_no_fit, pr->why_no_fit[0] ? ")" : "");
    printf("%-3s %3s %3s %3s %4s %5s %3s %3s %5s %-9s %9s %6s %8s %9s\n", "#", "tp", "cp", "pp", "vpp", "dp", "ep", "mb",
           "batch", "recompute", "step s", "MFU", "mem GiB", "days");
    for (int i = 0; i < pr->nbest; i++) {
        const PlanEntry *e = &pr->best[i];
        printf("%-3d %3d %3d %3d %4d %5d %3d %3d %5d %-9s %9.3f %5.1f%% %8.1f %9.2f\n", i + 1, e->layout.tp, e->layout.cp,
               e->layout.pp, e->res.vpp, e->layout.dp, e->layout.ep, e->res.micro_batch, e->layout.global_batch,
               sim_recompute_name(e->layout.recompute), e->res.step_time, 100 * e->res.mfu, e->res.mem.total / GIB, e->days);
    }
    if (!pr->nbest) printf("no layout fits: use more GPUs, a GPU with more memory, or --zero 3\n");
    if (o->why) {
        printf("\nrejected layouts:\n");
        for (int i = 0; i < pr->nrejected; i++) printf("  %s\n", pr->rejected[i]);
    }
}

static void print_plan_json(const SimOpts *o, const PlanResult *pr) {
    printf("{\"model\":\"%s\",\"gpus\":%d,\"considered\":%d,\"invalid\":%d,\"no_fit\":%d,\"layouts\":[", o->model.name,
           o->gpus, pr->considered, pr->invalid, pr->no_fit);
    for (int i = 0; i < pr->nbest; i++) {
        const PlanEntry *e = &pr->best[i];
        printf("%s{\"tp\":%d,\"cp\":%d,\"pp\":%d,\"vpp\":%d,\"dp\":%d,\"ep\":%d,\"micro_batch\":%d,\"global_batch\":%d,"
               "\"recompute\":\"%s\",\"step_time_s\":%.6g,\"mfu\":%.5f,\"memory_gib\":%.4f,\"days\":%.6g}",
               i ? "," : "", e->layout.tp, e->layout.cp, e->layout.pp, e->res.vpp, e->layout.dp, e->layout.ep,
               e->res.micro_batch, e->layout.global_batch, sim_recompute_name(e->layout.recompute), e->res.step_time,
               e->res.mfu, e->res.mem.total / GIB, e->days);
    }
    printf("]}\n");
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
        side[i].top_k = 1;
        if (run_plan(&side[i], &pr[i])) return -1;
        sim_cost(&side[i].cluster, &side[i].gpu, o->gpus, &cost[i]);
        sim_opts_reliability(&side[i], &rel[i]);
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
    if (rc) myr_die_last();
    if (o.compare[0]) {
        if (compare(&o)) myr_die_last();
        return 0;
    }
    PlanResult pr;
    if (run_plan(&o, &pr)) myr_die_last();
    if (o.json) print_plan_json(&o, &pr);
    else print_plan(&o, &pr);
    int none = pr.nbest == 0;
    sim_plan_free(&pr);
    return none ? 1 : 0;
}
