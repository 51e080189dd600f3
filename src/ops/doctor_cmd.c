/* doctor_cmd.c: `myriad doctor`: options, then measure (doctor_run.c), judge (doctor_analyze.c)
 * and report (doctor_report.c) on rank 0. Run it over the hosts of a job:
 * `myriad run -n N --hosts FILE -- doctor`, or let `myriad run --preflight` run it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "comm/comm_opts.h"
#include "io/atomic_file.h"
#include "io/path_check.h"
#include "kernels/kernels.h"
#include "ops/doctor.h"
#include "ops/doctor_run.h"
#include "util/opts.h"
#include "util/error.h"

typedef struct {
    DoctorPlan plan;
    const char *device, *dtype;
    double threshold[CHK_N], noise_k;
    const char *baseline_path, *out_path;
    int json, strict, raw;
} DoctorOpts;

/* "0.10" or "10%": a fraction in (0, 1); stored negated, meaning "set explicitly" (a per-check
 * flag wins over --threshold wherever it came on the line). */
static int set_threshold(void *dst, const char *v) {
    size_t n = strlen(v);
    int pct = n && v[n - 1] == '%';
    char buf[32], *end;
    snprintf(buf, sizeof buf, "%.*s", (int)(pct ? n - 1 : n), v);
    double x = strtod(buf, &end);
    if (pct) x /= 100;
    if (end == buf || *end || !(x > 0 && x < 1))
        return myr_error("a threshold is a fraction between 0 and 1 (0.10) or a percentage (10%%), not '%s'", v);
    *(double *)dst = -x;
    return 0;
}

static int set_skip(void *dst, const char *v) {
    int *skip = dst;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        int c = doctor_check_by_name(t);
        if (c < 0)
            return myr_error("--skip: unknown check '%s'; checks: gemm, triad, p2p_bw, p2p_lat, allreduce_intra, "
                             "allreduce_inter", t);
        skip[c] = 1;
    }
    return 0;
}

static int set_triad_mb(void *dst, const char *v) {
    char *end;
    double mb = strtod(v, &end);
    if (end == v || *end || !(mb >= 0.03 && mb <= 65536)) return myr_error("--triad-mb must be between 0.03 and 65536, not '%s'", v);
    *(size_t *)dst = (size_t)(mb * (1 << 20));
    return 0;
}

/* --out: a value that looks like an option is a forgotten file name (`--out --json`), not a file */
static int set_out(void *dst, const char *v) {
    if (v[0] == '-') return myr_error("--out %s looks like an option, not a file (write ./%s to mean a file)", v, v);
    *(const char **)dst = v;
    return 0;
}

static void parse(DoctorOpts *o, CommOptions *co, int argc, char **argv) {
    *o = (DoctorOpts){.plan = {.reps = 10, .msg_bytes = 1u << 20, .peers = 8}}; /* sizes: the device's defaults */
    for (int c = 0; c < CHK_N; c++) o->threshold[c] = DOCTOR_DEFAULT_THRESHOLD;
    o->noise_k = DOCTOR_DEFAULT_NOISE_K;
    double all = 0;
    long long msg_bytes = (long long)o->plan.msg_bytes;
    double *t = o->threshold;
    const Opt rows[] = {
        OPT_SWITCH("--json", &o->json, "print the JSON document instead of the table"),
        OPT_CALL("--out", "FILE", &o->out_path, set_out, "also write the JSON document to FILE (rank 0's file system)"),
        OPT_STR("--baseline", "FILE", &o->baseline_path,
                "compare with the references of an earlier `doctor --json` (healthy hosts)"),
        OPT_CALL("--threshold", "F", &all, set_threshold, "flag a host more than F worse, for every check (default 0.10; 10% works)"),
        OPT_CALL("--threshold-gemm", "F", &t[CHK_GEMM], set_threshold, "the same for one check (overrides --threshold)"),
        OPT_CALL("--threshold-triad", "F", &t[CHK_TRIAD], set_threshold, "the same for the triad"),
        OPT_CALL("--threshold-p2p_bw", "F", &t[CHK_P2P_BW], set_threshold, "the same for p2p bandwidth"),
        OPT_CALL("--threshold-p2p_lat", "F", &t[CHK_P2P_LAT], set_threshold, "the same for p2p latency"),
        OPT_CALL("--threshold-allreduce_intra", "F", &t[CHK_AR_INTRA], set_threshold, "the same for intra-host all-reduce"),
        OPT_CALL("--threshold-allreduce_inter", "F", &t[CHK_AR_INTER], set_threshold, "the same for inter-host all-reduce"),
        OPT_CALL("--skip", "LIST", o->plan.skip, set_skip,
                 "checks not to run, comma-separated: gemm, triad, p2p_bw, p2p_lat,\n"
                 "allreduce_intra, allreduce_inter"),
        OPT_DOUBLE("--noise-k", "K", &o->noise_k, 0, 100,
                   "raise a check's limit to noise^K when its repetitions scatter, noise being\n"
                   "best/median repetition of its noisiest sample (default 2; 0: thresholds only)"),
        OPT_INT("--reps", "R", &o->plan.reps, 1, 99, "repetitions of every check; figures are the best one (default 10)"),
        OPT_STR("--device", "cpu|cuda", &o->device,
                "where the GEMM and memory checks run (default: cuda when a GPU is usable, else cpu)"),
        OPT_STR("--dtype", "fp32|bf16", &o->dtype, "a GPU's GEMM element type (default bf16; the CPU's check is fp32)"),
        OPT_INT("--gemm-n", "N", &o->plan.gemm_n, 16, 16384, "GEMM size N x N x N (default 384 on a CPU, 8192 on a GPU)"),
        OPT_CALL("--triad-mb", "M", &o->plan.triad_bytes, set_triad_mb,
                 "memory check: the triad's three arrays together, MiB (default 48); on a GPU\n"
                 "the two buffers of a device-to-device copy (default 2048)"),
        OPT_I64("--msg-bytes", "B", &msg_bytes, 4, 1 << 30, "p2p message and all-reduce size (default 1048576)"),
        OPT_INT("--peers", "K", &o->plan.peers, 1, 1 << 20, "each host is paired with at most K others (default 8)"),
        OPT_SWITCH("--concurrent", &o->plan.concurrent, "ranks sharing a machine measure at once (default: they take turns)"),
        OPT_SWITCH("--strict", &o->strict, "exit with status 3 when a host is flagged"),
        OPT_SWITCH("--raw", &o->raw, "add every repetition's figure to the JSON (\"samples\")"),
        OPT_SECTION("communication:"),
        COMM_OPTS(co),
        OPT_END};
    OptCommand cmd = {
        .name = "doctor",
        .usage = "usage: myriad doctor [options]\n"
                 "Run it over the hosts of a job: `myriad run -n N --hosts FILE -- doctor [options]` (or mpirun).\n"
                 "Pre-flight health check of the job's hosts: per rank GEMM rate and memory bandwidth (triad;\n"
                 "on a GPU its GEMM and a device-to-device copy),\n"
                 "per host pair p2p latency and bandwidth, all-reduce bus bandwidth inside hosts and across\n"
                 "host pairs. A host more than a threshold worse than the median of its cohort (or than the\n"
                 "baseline) is flagged with the reason. See docs/OPERATIONS.md.",
        .rows = rows};
    opts_parse(&cmd, argc, argv);
    o->plan.msg_bytes = (size_t)msg_bytes;
    if (all < 0) all = -all;
    for (int c = 0; c < CHK_N; c++) /* a per-check flag wins over --threshold, wherever it came */
        o->threshold[c] = o->threshold[c] < 0 ? -o->threshold[c] : all > 0 ? all : o->threshold[c];
}

static void write_out(const char *path, const char *json) {
    if (atomic_write_text(path, json))
        myr_die("doctor: --out %s: %s", path, myr_last_error());
}

int cmd_doctor(int argc, char **argv) {
    DoctorOpts o;
    CommOptions co = comm_default_options();
    parse(&o, &co, argc, argv);
    /* the device first: a missing GPU is a one-line error before MPI starts */
    Dtype dt = DTYPE_F32;
    if (o.dtype && dtype_parse(o.dtype, &dt)) myr_die("doctor: --dtype must be fp32 or bf16, not '%s'", o.dtype);
    KernelOptions ko = {o.device, o.dtype ? (int)dt : -1, kernels_local_rank(), 0};
    if (kernels_select(&ko)) myr_die("doctor: %s", myr_last_error());
    if (comm_init(&argc, &argv, &co) < 0) myr_die_last();
    Comm *w = comm_world();
    int me = comm_rank(w);
    double baseline[CHK_N] = {0};
    /* rank 0 reads the baseline and checks that --out can be written before anything is measured;
     * every rank learns whether it could */
    float ok = 1;
    if (me == 0 && o.baseline_path && doctor_load_baseline(o.baseline_path, baseline) < 0) ok = 0;
    if (me == 0 && ok && o.out_path && path_check_file("doctor: --out", o.out_path) < 0) ok = 0;
    if (comm_broadcast(w, &ok, &ok, 1, COMM_F32, 0) < 0) myr_die_last();
    if (!ok) {
        if (me == 0) myr_die_last();
        comm_finalize();
        return 1;
    }
    DoctorResults res;
    DoctorSetup setup;
    doctor_run(&o.plan, &res, &setup);
    setup.raw = o.raw;
    setup.skip = o.plan.skip;
    int flagged = 0;
    if (me == 0) {
        memcpy(res.threshold, o.threshold, sizeof res.threshold);
        memcpy(res.baseline, baseline, sizeof res.baseline);
        res.noise_k = o.noise_k;
        DoctorVerdict v;
        if (doctor_analyze(&res, &v) < 0) myr_die_last();
        char *json = doctor_json(&res, &v, &setup);
        if (o.out_path) write_out(o.out_path, json);
        if (o.json) printf("%s\n", json), fflush(stdout);
        else doctor_print_table(&res, &v, &setup);
        flagged = v.nflags > 0;
        free(json);
        doctor_verdict_free(&v);
    }
    doctor_results_free(&res);
    float f = (float)flagged;
    if (comm_broadcast(w, &f, &f, 1, COMM_F32, 0) < 0) myr_die_last();
    if (comm_finalize() < 0) myr_die_last();
    return o.strict && f > 0 ? 3 : 0;
}
