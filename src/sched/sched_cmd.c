/* sched_cmd.c: `myriad sched simulate | place`: the scheduler's command line. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "sched/job_report.h"
#include "sched/place.h"
#include "sched/sim.h"
#include "sched/trace.h"
#include "util/opts.h"
#include "util/error.h"

static const char simulate_usage[] = "usage: myriad sched simulate --policy P (--trace FILE | --synthetic) [options]";

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "myriad: sched simulate: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see myriad sched simulate --help)\n");
    return 2;
}

static int cmd_simulate(int argc, char **argv) {
    const char *cluster_spec = NULL, *trace = NULL, *policy_spec = NULL, *jobs_out = NULL;
    int synthetic = 0, json = 0, skip_bad = 0;
    int gpus = 0, njobs = 10000, resample = 0, seed = 1, queues = 4, spares = -1, max_gang = 4096;
    int load_given = 0, mtbf_given = 0, gpus_given = 0, jobs_given = 0, queues_given = 0, frac_given = 0, gang_given = 0;
    double load = 0, mtbf_days = 0, repair_h = 4, ckpt = 1800, frac = 0;
    const Opt rows[] = {
        OPT_STR("--policy", "P", &policy_spec, "fifo | backfill | gang-binpack-topo | best | a policy JSON file (required)"),
        OPT_STR("--cluster", "C", &cluster_spec,
                "cluster JSON, openb node CSV (*.csv) or gen:NODESxGPUS\n"
                "(default with --synthetic: gen:(GPUS/8)x8, leaves of 32 nodes, spines of 8 leaves)"),
        OPT_STR("--trace", "FILE", &trace, "openb v2023 pod CSV (../shared/traces/openb/openb_pod_list_*.csv)"),
        OPT_GIVEN(OPT_POSITIVE("--load", "X", &load, 100,
                               "rescale arrivals to offered load X: the GPU-seconds the jobs ask within the\n"
                               "arrival window (each run counted up to its length) over the cluster's GPU-\n"
                               "seconds in it (synthetic: default 0.8; traces without times: 0.9)"), &load_given),
        OPT_INT("--resample", "N", &resample, 0, 1 << 26,
                "replay N pods drawn with replacement from the trace (Poisson arrivals; set --load)"),
        OPT_SWITCH("--skip-bad", &skip_bad, "report malformed trace rows and skip them (default: the first one is fatal)"),
        OPT_SWITCH("--synthetic", &synthetic, "generate a large-model workload instead of --trace:"),
        OPT_GIVEN(OPT_INT("--gpus", "N", &gpus, 8, 1 << 24, "  GPUs of the generated cluster (a multiple of 8)"), &gpus_given),
        OPT_GIVEN(OPT_INT("--jobs", "N", &njobs, 1, 1 << 24, "  jobs (default 10000)"), &jobs_given),
        OPT_INT("--seed", "S", &seed, 0, 2147483647, "  seed of the workload and of node failures (default 1)"),
        OPT_GIVEN(OPT_DOUBLE("--frac", "F", &frac, 0, 1, "  share of 1-GPU jobs asking a GPU fraction (default 0)"), &frac_given),
        OPT_GIVEN(OPT_INT("--queues", "Q", &queues, 1, SCHED_MAX_QUEUES, "  queues the jobs are spread over (default 4)"), &queues_given),
        OPT_GIVEN(OPT_INT("--max-gang", "G", &max_gang, 1, 1 << 24, "  largest gang in GPUs (default 4096)"), &gang_given),
        OPT_GIVEN(OPT_DOUBLE("--mtbf-days", "D", &mtbf_days, 0, 1e9,
                             "node mean time between failures (default 250 with --synthetic, else off; 0 = off)"), &mtbf_given),
        OPT_DOUBLE("--repair-h", "H", &repair_h, 0, 1e6, "hours to repair a failed node (default 4)"),
        OPT_DOUBLE("--checkpoint-s", "S", &ckpt, 0, 1e9,
                   "jobs checkpoint every S s; work since the last checkpoint is lost on a stop (1800)"),
        OPT_INT("--hot-spares", "N", &spares, 0, 1 << 24, "override the policy's hot spare nodes"),
        OPT_SWITCH("--json", &json, "print one JSON object instead of the table"),
        OPT_STR("--jobs-out", "FILE", &jobs_out,
                "write one CSV row per job, like Slurm's sacct: submit, start, end, wait, GPUs,\n"
                "nodes, restarts, preemptions (docs/SCHEDULER.md)"),
        OPT_END};
    OptCommand cmd = {.name = "sched simulate", .usage = simulate_usage, .rows = rows};
    opts_parse(&cmd, argc, argv);
    if (!policy_spec) return usage_error("%s", "--policy is required");
    if (!!trace == !!synthetic) return usage_error("%s", "give exactly one of --trace FILE or --synthetic");
    if (synthetic && !gpus_given && !cluster_spec) return usage_error("%s", "--synthetic needs --gpus N (or --cluster)");
    if (!synthetic && !cluster_spec) return usage_error("%s", "--trace needs --cluster");
    if (!synthetic && (gpus_given || jobs_given || queues_given || frac_given || gang_given))
        myr_die("sched simulate: --gpus, --jobs, --queues, --frac and --max-gang describe the --synthetic workload");
    if (synthetic && (resample || skip_bad)) myr_die("sched simulate: --resample and --skip-bad apply to a --trace");
    if (synthetic && gpus_given && cluster_spec) myr_die("sched simulate: give --gpus N or --cluster C, not both");
    if (!load_given) load = -1;
    if (!mtbf_given) mtbf_days = -1;
    if (jobs_out) { /* refuse an unwritable path now, not after the simulation */
        FILE *f = fopen(jobs_out, "w");
        if (!f) myr_die("sched simulate: --jobs-out %s: cannot create (%s)", jobs_out, strerror(errno));
        fclose(f);
    }

    Policy pol;
    if (policy_load(&pol, policy_spec)) myr_die_last();
    if (spares >= 0) pol.hot_spares = spares;
    Cluster c;
    char genspec[64];
    if (!cluster_spec) {
        if (gpus % 8) myr_die("--gpus %d is not a multiple of 8 (nodes have 8 GPUs; or give --cluster)", gpus);
        snprintf(genspec, sizeof genspec, "gen:%dx8", gpus / 8);
        cluster_spec = genspec;
    }
    if (cluster_load(&c, cluster_spec)) myr_die_last();
    if (pol.hot_spares >= c.nnodes) myr_die("hot_spares %d leaves no node to run jobs (cluster has %d)", pol.hot_spares, c.nnodes);

    JobSet js = {0};
    char workload[256];
    if (synthetic) {
        if (pol.nqueues < queues && pol.nqueues == 1) { /* give the synthetic queues equal weights */
            pol.nqueues = queues;
            for (int q = 0; q < queues; q++) snprintf(pol.queue_names[q], sizeof pol.queue_names[0], "q%d", q), pol.queue_weight[q] = 1;
        }
        SynthOptions so = {.jobs = njobs, .load = load > 0 ? load : 0.8, .seed = (uint64_t)seed, .max_gpus = max_gang,
                           .frac_share = frac, .nqueues = pol.nqueues};
        if (synth_generate(&js, &c, &so)) myr_die_last();
        snprintf(workload, sizeof workload, "synthetic %d jobs on %ld GPUs, offered load %.2f, seed %d", njobs, c.total_gpus,
                 so.load, seed);
        if (mtbf_days < 0) mtbf_days = 250;
    } else {
        TraceOptions to = {.skip_bad = skip_bad, .seed = (uint64_t)seed};
        if (trace_load_openb(&js, trace, &c, &to)) myr_die("%s (use --skip-bad to skip malformed rows)", myr_last_error());
        if (resample > 0) {
            JobSet all = js;
            memset(&js, 0, sizeof js);
            if (trace_resample(&js, &all, resample, (uint64_t)seed)) myr_die_last();
            jobset_free(&all);
            if (load <= 0) load = 0.9;
        }
        double before = trace_offered_load(&js, &c);
        if (to.synthesized_times && load <= 0) load = 0.9;
        if (load > 0 && trace_set_load(&js, &c, load)) myr_die_last();
        const char *base = strrchr(trace, '/');
        snprintf(workload, sizeof workload, "%s (%d jobs%s%s, offered load %.3f -> %.3f)", base ? base + 1 : trace, js.n,
                 resample ? " resampled" : "", to.synthesized_times ? ", times synthesised" : "", before,
                 trace_offered_load(&js, &c));
        if (mtbf_days < 0) mtbf_days = 0;
    }
    /* admission: reject (with the reason) what can never run here */
    int rejected = 0;
    for (int i = 0; i < js.n; i++) {
        Job *j = &js.jobs[i];
        if (j->state != JOB_REJECTED) job_validate(j, &c, pol.hot_spares);
        if (j->state == JOB_REJECTED) {
            if (rejected < 5) fprintf(stderr, "myriad: job %s rejected: %s\n", j->name, j->reason);
            rejected++;
        }
    }
    if (rejected > 5) fprintf(stderr, "myriad: ... %d jobs rejected in all\n", rejected);

    SimConfig cfg;
    sim_config_default(&cfg);
    cfg.mtbf_node_s = mtbf_days * 86400;
    cfg.repair_s = repair_h * 3600;
    cfg.checkpoint_s = ckpt;
    cfg.seed = (uint64_t)seed;
    Metrics m;
    double offered = trace_offered_load(&js, &c); /* what the window is offered, as --load defines it */
    double demand = trace_window_demand(&js, &c); /* the part of it allocation can reach in the window */
    if (sim_run(&c, &js, &pol, &cfg, &m)) myr_die_last();
    m.offered_load = offered, m.window_demand = demand;
    if (jobs_out && job_report_write(jobs_out, &js)) myr_die_last();
    if (json) metrics_print_json(stdout, &m, pol.name, workload);
    else {
        char desc[256];
        metrics_print_table(stdout, &m, pol.name, workload);
        printf("  policy         %s\n", policy_describe(&pol, desc, sizeof desc));
    }
    jobset_free(&js);
    cluster_free(&c);
    return 0;
}

int cmd_sched(int argc, char **argv) {
    static const char *usage = "usage: myriad sched <simulate|place> [options]   (myriad sched <sub> --help)\n"
                               "  simulate   trace-driven or synthetic simulation of a scheduling policy\n"
                               "  place      place one job and write an mpirun hostfile/rankfile, Slurm topology.conf\n"
                               "             and Volcano HyperNode YAML for the cluster\n";
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "simulate")) return cmd_simulate(argc - 1, argv + 1);
    if (!strcmp(argv[1], "place")) return cmd_sched_place(argc - 1, argv + 1);
    fprintf(stderr, "myriad: sched: unknown subcommand '%s'\n%s", argv[1], usage);
    return 2;
}
