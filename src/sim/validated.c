/* validated.c: the best measured run of each class (GPU family, software preset, 16-bit or fp8) in
 * the validation sets (../shared/validation/published_a100.csv and published_modern.csv), as model
 * FLOPs utilization by the simulator's convention (3 x forward FLOPs, attention counted as full
 * s x s, over the dtype's dense peak). `plan` and `sim` mark a predicted MFU above it: the model
 * was never checked against a run that fast. The table is the product's copy (the sets are not
 * shipped); tests/test_sim.c recomputes it from the sets when they are present and checks it. */
#include <string.h>

#include "sim/sim.h"

typedef struct {
    const char *family, *software;
    int fp8;
    double mfu;
    const char *run; /* the measured run (validation row) */
} ValidatedRun;

static const ValidatedRun runs[] = {
    {"a100", "megatron-2021", 0, 0.3920, "gpt-529.6b (Narayanan et al. 2021, Table 1)"},
    {"a100", "megatron-2022", 0, 0.5627, "gpt-1t-selective (Korthikanti et al. 2022, Table 5)"},
    {"a100", "torchtitan-eager", 0, 0.5518, "llama3-8b-fsdp64-selop-64gpu (torchtitan 2024, A100)"},
    {"h100", "megatron-core", 0, 0.4943, "gpt-16b-192gpu (Megatron-LM README, H100 weak scaling)"},
    {"h100", "mlperf", 1, 0.4841, "gpt3-175b-eos-dgxh100-256gpu (MLPerf Training v4.1, NVIDIA)"},
    {"h100", "nemo", 1, 0.3944, "llama2-7b-8gpu-fp8 (NeMo 24.07 performance summary)"},
    {"h100", "nemo-2", 1, 0.4229, "llama3-8b-8gpu-fp8cs (Megatron-Bridge 25.11 performance summary)"},
    {"h100", "torchtitan", 0, 0.3153, "llama3.1-70b-fsdp32-tp8-bf16-vanillaTP-256gpu (torchtitan AsyncTP 2025)"},
    {"h100", "torchtitan", 1, 0.2709, "llama3.1-8b-t1-fsdp-compile-float8-8gpu (torchtitan 2024-12)"},
    {"h100", "torchtitan-eager", 0, 0.3659, "llama3.1-8b-t1-fsdp-eager-8gpu (torchtitan 2024-12)"},
    {"h200", "torchtitan", 1, 0.3201, "llama3.1-8b-fsdp32-float8-32gpu (torchtitan on H200, 2025-06)"},
    {"b200", "mlperf", 1, 0.4324, "gpt3-175b-nyx-dgxb200-64gpu (MLPerf Training v4.1 preview)"},
    {"b200", "nemo-2", 1, 0.3827, "gpt3-175b-512gpu-fp8 (NeMo 25.02 performance summary)"},
};

const char *sim_gpu_family(const char *gpu) {
    if (!strncmp(gpu, "a100", 4)) return "a100";
    if (!strcmp(gpu, "h100-sxm") || !strcmp(gpu, "h100-gt500") || !strcmp(gpu, "h800")) return "h100";
    if (!strcmp(gpu, "h200")) return "h200";
    if (!strcmp(gpu, "b200")) return "b200";
    return NULL;
}

double sim_validated_mfu(const char *gpu, const char *software, int fp8, const char **run, int *exact) {
    const char *fam = sim_gpu_family(gpu);
    double best = 0, any = 0;
    const char *brun = NULL, *arun = NULL;
    if (run) *run = NULL;
    if (exact) *exact = 0;
    if (!fam) return 0;
    if (!strcmp(software, "current")) software = "megatron-core";
    software = sim_software_class(software);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        if (strcmp(runs[i].family, fam)) continue;
        if (runs[i].mfu > any) { any = runs[i].mfu; arun = runs[i].run; }
        if (!strcmp(runs[i].software, software) && runs[i].fp8 == fp8 && runs[i].mfu > best) {
            best = runs[i].mfu;
            brun = runs[i].run;
        }
    }
    if (best > 0) {
        if (exact) *exact = 1;
        if (run) *run = brun;
        return best;
    }
    if (run) *run = arun;
    return any;
}
