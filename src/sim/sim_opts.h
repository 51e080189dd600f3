/* sim_opts.h: command-line options shared by `myriad sim` and `myriad plan`: model (config or
 * shape flags), cluster, GPU, layout, tokens, output switches. */
#ifndef MYRIAD_SIM_SIM_OPTS_H
#define MYRIAD_SIM_SIM_OPTS_H

#include "sim/sim.h"

typedef struct {
    SimModel model;
    ClusterSpec cluster;
    GpuSpec gpu;
    Layout layout;
    int gpus;
    double tokens;
    int json, search_mb, search_vpp, ignore_memory;
    const char *trace_path;
    int hot_spares, in_memory;
    /* plan only */
    int top_k, why;
    const char *compare[2];
    int set_tp, set_pp, set_cp, set_dp, set_ep, set_vpp, set_recompute, set_zero, set_sp;
} SimOpts;

/* Parse argv (argv[0] = subcommand). plan != 0 accepts plan's options (each command's option
 * table is in sim_opts.c). Returns 0; 1 after printing --help; -1 with a reason on bad input
 * (a malformed flag dies at once with its message). */
int sim_opts_parse(int argc, char **argv, SimOpts *o, int plan);
/* Parse "300e9", "300B", "2T", "15T", "1.5M" into a count; -1 on junk. */
int sim_parse_count(const char *s, double *out);
/* Reliability of a run of these options (default failure rates, Young/Daly interval). */
void sim_opts_reliability(const SimOpts *o, ReliabilityResult *out);

#endif
