/* sim_opts.h: command-line options shared by `myriad sim` and `myriad plan`: model (config or
 * shape flags), cluster (default: the GPU's, sized to --gpus), GPU, layout, tokens, reliability
 * and output switches. */
#ifndef MYRIAD_SIM_SIM_OPTS_H
#define MYRIAD_SIM_SIM_OPTS_H

#include "sim/sim.h"

/* One default global batch for sim and plan: 2^22 tokens per step, in whole sequences (GPT-3 175B
 * used 3.2 M tokens, Llama 3 405B 4 M to 16 M). */
#define SIM_DEFAULT_BATCH_TOKENS 4194304.0
#define SIM_DEFAULT_HEADROOM 0.10

typedef struct {
    SimModel model;
    ClusterSpec cluster;
    GpuSpec gpu;
    Layout layout;
    int gpus;
    double tokens;
    int json, search_mb, search_vpp, ignore_memory;
    const char *trace_path;
    int hot_spares;         /* nodes; -1 = the default (sim_default_hot_spares) */
    int in_memory;
    double mem_headroom;    /* fraction of HBM no recommended layout may use */
    int batch_defaulted;    /* --global-batch not given */
    char batch_note[256];   /* how the default global batch was chosen (sim: raised to fill the pipeline) */
    char software[32];      /* the software preset by name (--software, default megatron-core) */
    int software_given;
    double failure_rate;    /* --failure-rate: interruptions per GPU-day (0 = Llama 3's rates) */
    double mtbf_h;          /* --mtbf: the job's mean time between interruptions, hours (0 = from the rates) */
    char cluster_note[320]; /* which cluster was used, and what was built */
    /* plan only */
    int top_k, why;
    const char *compare[2];
    /* layout dimensions given on the command line (plan keeps them fixed) */
    int set_tp, set_pp, set_cp, set_dp, set_ep, set_etp, set_vpp, set_mb, set_recompute, set_zero, set_sp, set_stages;
} SimOpts;

/* Parse argv (argv[0] = subcommand). plan != 0 accepts plan's options (the option table is in
 * sim_opts.c). Returns 0; 1 after printing --help; 2 for --software list; -1 with a reason on bad
 * input (a malformed or unknown flag dies at once with its message). */
int sim_opts_parse(int argc, char **argv, SimOpts *o, int plan);
/* Parse "300e9", "300B", "2T", "15T", "1.5M" into a count; -1 on junk. */
int sim_parse_count(const char *s, double *out);
/* Failure rates of these options: Llama 3's by component, scaled to --failure-rate or --mtbf. */
void sim_opts_failure_rates(const SimOpts *o, FailureRates *f);
/* Reliability of a run of these options with `spares` hot-spare nodes (-1: the options' own). */
void sim_opts_reliability(const SimOpts *o, int spares, ReliabilityResult *out);
/* The hot spares a run of these options gets when --hot-spares is not given. */
int sim_opts_spares(const SimOpts *o);

#endif
