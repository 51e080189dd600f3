/* validate_fit.c: the simulator's FITTED constants, the rows each is fitted on, and simulating a
 * published run with any value of them (what leave-one-source-out needs, validate_loso.c).
 *   sustained (Hopper, Blackwell): GEMM rate of training steps over single-GPU cuBLASLt
 *     microbenchmarks on h100-sxm, h100-gt500, h200, h800, b200 (configs/hardware "sustained");
 *     fitted on the dense rows of those GPUs that no other constant explains (not MLPerf, not MoE).
 *   sustained (A100): the same for a100-40g / a100-80g; fitted on the A100 rows.
 *   mlperf GEMM speed-up: the mlperf preset's GEMMs over the other Megatron/NeMo runs' (sw_eff,
 *     software.c); fitted on the MLPerf rows, given the sustained values.
 *   MoE routing imbalance: the busiest expert's tokens over the mean, dropless routing (software.c
 *     layout default); fitted on the MoE rows, given the sustained values.
 * Without a row to fit on, a constant takes its prior: the value that assumes nothing (1.0). */
#include <math.h>
#include <string.h>

#include "sim/sim.h"
#include "sim/validate.h"
#include "util/error.h"

static const FitInfo fits[FIT_N] = {
    {"sustained_hb",
     "GEMM rate in multi-GPU training steps over single-GPU cuBLASLt microbenchmarks, Hopper and Blackwell "
     "(h100-sxm, h100-gt500, h200, h800, b200); fitted on their dense rows that are not MLPerf",
     "configs/hardware/{h100-sxm,h100-gt500,h200,h800,b200}.json \"sustained\"", 0.30, 1.00, 1.00},
    {"sustained_a100", "the same on A100 (a100-40g, a100-80g); fitted on the A100 rows",
     "configs/hardware/{a100-40g,a100-80g}.json \"sustained\"", 0.50, 1.00, 1.00},
    {"mlperf_gemm", "GEMM speed of NVIDIA's tuned MLPerf submissions over the other Megatron/NeMo runs; fitted on "
     "the MLPerf rows", "src/sim/software.c, preset mlperf (sw_eff)", 1.00, 1.60, 1.00},
    {"moe_imbalance", "busiest expert's tokens over the mean with dropless routing; fitted on the MoE rows",
     "src/sim/software.c, sim_layout_defaults (moe_imbalance)", 1.00, 2.00, 1.00},
};

const FitInfo *val_fit_info(int id) { return id >= 0 && id < FIT_N ? &fits[id] : NULL; }

/* 0: Hopper/Blackwell, 1: A100, -1: a GPU no constant covers (e.g. a calibrated CPU) */
static int gpu_class(const char *gpu) {
    if (!strncmp(gpu, "a100", 4)) return 1;
    static const char *hb[] = {"h100-sxm", "h100-gt500", "h200", "h800", "b200"};
    for (size_t i = 0; i < sizeof hb / sizeof hb[0]; i++)
        if (!strcmp(gpu, hb[i])) return 0;
    return -1;
}

double val_fit_shipped(int id) {
    GpuSpec g;
    Layout l;
    switch (id) {
    case FIT_SUSTAINED_HB: return sim_load_gpu("h100-sxm", &g) ? NAN : g.sustained;
    case FIT_SUSTAINED_A100: return sim_load_gpu("a100-80g", &g) ? NAN : g.sustained;
    case FIT_MLPERF_GEMM: sim_layout_defaults(&l); sim_software_preset(&l, "mlperf"); return l.sw_eff;
    case FIT_MOE_IMBALANCE: sim_layout_defaults(&l); return l.moe_imbalance;
    }
    return NAN;
}

static int is_moe(const ValCase *vc) { return vc->m.experts > 1 && vc->l.capacity_factor <= 0; }
static int is_mlperf(const ValCase *vc) { return !strcmp(vc->software, "mlperf"); }

int val_fit_uses(const ValCase *vc, int id) {
    switch (id) {
    case FIT_SUSTAINED_HB: return gpu_class(vc->gpu_name) == 0;
    case FIT_SUSTAINED_A100: return gpu_class(vc->gpu_name) == 1;
    case FIT_MLPERF_GEMM: return is_mlperf(vc);
    case FIT_MOE_IMBALANCE: return is_moe(vc);
    }
    return 0;
}

int val_fit_trains(const ValCase *vc, int id) {
    if (vc->why[0] || !val_fit_uses(vc, id)) return 0;
    if (id == FIT_SUSTAINED_HB || id == FIT_SUSTAINED_A100) return !is_mlperf(vc) && !is_moe(vc);
    return 1;
}

int val_prepare(const ValCase *vc, ValPrepared *p) {
    memset(p, 0, sizeof *p);
    p->vc = vc;
    if (vc->why[0]) { snprintf(p->why, sizeof p->why, "%s", vc->why); return -1; }
    int rc = sim_load_gpu(vc->gpu_name, &p->g);
    if (!rc) rc = vc->cluster_name[0] ? sim_load_cluster(vc->cluster_name, &p->c) : sim_load_default_cluster(vc->gpu_name, &p->c);
    if (!rc) rc = sim_cluster_fit(&p->c, vc->gpus, NULL, 0);
    if (rc) { snprintf(p->why, sizeof p->why, "%s", myr_last_error()); return -1; }
    p->ok = 1;
    return 0;
}

int val_simulate(const ValPrepared *p, const FitValues *fv, SimResult *r, Layout *chosen) {
    if (!p->ok) return myr_error("%s", p->why);
    const ValCase *vc = p->vc;
    GpuSpec g = p->g;
    Layout l = vc->l;
    int cls = gpu_class(vc->gpu_name);
    if (fv && cls == 0 && fv->set[FIT_SUSTAINED_HB]) g.sustained = fv->v[FIT_SUSTAINED_HB];
    if (fv && cls == 1 && fv->set[FIT_SUSTAINED_A100]) g.sustained = fv->v[FIT_SUSTAINED_A100];
    if (fv && is_mlperf(vc) && fv->set[FIT_MLPERF_GEMM]) l.sw_eff = fv->v[FIT_MLPERF_GEMM];
    if (fv && is_moe(vc) && fv->set[FIT_MOE_IMBALANCE]) l.moe_imbalance = fv->v[FIT_MOE_IMBALANCE];
    SearchOpts so = {0};
    so.search_mb = vc->search_mb;
    so.search_vpp = vc->search_vpp;
    so.search_recompute = vc->search_recompute;
    if (sim_step_search_ex(&vc->m, &p->c, &g, &l, &so, r)) return -1;
    if (chosen) *chosen = l;
    return 0;
}
