/* goodput_cmd.c: `myriad sim goodput`: the effective training time a fault-injected run will have
 * (goodput_predict.c), its inputs from the flags or measured on a calibration run's event log
 * (the `goodput`, `recovery`, `resumed` and `finished` events of `myriad run --events`), every
 * measured input printed with the run it was measured on. docs/SIMULATOR.md, "Goodput of a fault
 * soak". */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/goodput_predict.h"
#include "util/error.h"
#include "util/opts.h"

typedef struct {
    long long steps, recomputed_steps;
    double step_s, productive_s, fixed_s, wall_s, effective;
    double recovery_s[CLOCK_KINDS], detection_s[CLOCK_KINDS];
    int nrec[CLOCK_KINDS];
} Calibration;

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* The calibration run: its steps, its step time and productive part per first-time step, its
 * start and finish, and the mean down time (recovery less its replay) of each kind of failure. */
static int read_calibration(const char *path, Calibration *c) {
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "r");
    if (!f) return myr_error("sim goodput: cannot read the calibration event log %s: %m", path);
    char *line = NULL;
    size_t cap = 0;
    cJSON *goodput = NULL;
    int finished = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *e = cJSON_Parse(line);
        const cJSON *name = e ? cJSON_GetObjectItemCaseSensitive(e, "event") : NULL;
        if (!cJSON_IsString(name)) { cJSON_Delete(e); continue; }
        if (!strcmp(name->valuestring, "goodput")) {
            cJSON_Delete(goodput);
            goodput = e;
            continue;
        }
        if (!strcmp(name->valuestring, "finished")) {
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "status");
            finished = cJSON_IsString(st) && !strcmp(st->valuestring, "ok");
            c->steps = (long long)num(e, "steps");
        } else if (!strcmp(name->valuestring, "resumed")) c->recomputed_steps += (long long)num(e, "recomputed_steps");
        else if (!strcmp(name->valuestring, "recovery") && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "completed"))) {
            const cJSON *fk = cJSON_GetObjectItemCaseSensitive(e, "failure");
            const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "phases");
            int k = !cJSON_IsString(fk) ? -1 : !strcmp(fk->valuestring, "rank-exit") ? CLOCK_KILL
                                             : !strcmp(fk->valuestring, "hang")      ? CLOCK_HANG
                                             : !strcmp(fk->valuestring, "host-lost") ? CLOCK_HOST : -1;
            if (k >= 0 && ph) {
                c->recovery_s[k] += num(e, "total_s") - num(ph, "replay");
                c->detection_s[k] += num(ph, "detection");
                c->nrec[k]++;
            }
        }
        cJSON_Delete(e);
    }
    free(line);
    fclose(f);
    if (!goodput || !finished || c->steps < 1) {
        cJSON_Delete(goodput);
        return myr_error("sim goodput: %s is not the event log of a finished `myriad run` (no goodput event, or no finished "
                         "event with status ok and its steps): run the calibration with --events FILE to its end", path);
    }
    const cJSON *sec = cJSON_GetObjectItemCaseSensitive(goodput, "seconds");
    const cJSON *a0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(goodput, "attempts"), 0);
    double S = (double)c->steps;
    /* per-step overheads of all steps computed (first-time and again) shared over them */
    double over = num(sec, "checkpoint") + num(sec, "data") + num(sec, "eval") + num(sec, "straggler");
    c->productive_s = num(sec, "productive") / S;
    c->step_s = c->productive_s + over / (S + (double)c->recomputed_steps);
    /* exposed to no fault: the first attempt's start and the finish */
    static const char *start[] = {"preflight", "launch", "mpi_init", "setup", "restore_memory", "restore_disk", "rejoin"};
    for (size_t i = 0; i < sizeof start / sizeof *start; i++) c->fixed_s += num(a0, start[i]);
    c->fixed_s += num(sec, "finish");
    c->wall_s = num(goodput, "wall_s");
    c->effective = num(goodput, "effective");
    for (int k = 0; k < CLOCK_KINDS; k++)
        if (c->nrec[k]) c->recovery_s[k] /= c->nrec[k], c->detection_s[k] /= c->nrec[k];
    cJSON_Delete(goodput);
    return 0;
}

/* Several calibration runs pooled (e.g. one before the runs predicted and one after, so that a
 * machine whose load drifts is measured across the same stretch): step times weighted by steps,
 * recoveries by their count, the start and finish averaged over the runs. */
static void pool(Calibration *into, const Calibration *c, int nth) {
    if (nth == 0) { *into = *c; return; }
    double a = (double)into->steps, b = (double)c->steps;
    into->step_s = (into->step_s * a + c->step_s * b) / (a + b);
    into->productive_s = (into->productive_s * a + c->productive_s * b) / (a + b);
    into->fixed_s = (into->fixed_s * nth + c->fixed_s) / (nth + 1);
    into->wall_s += c->wall_s;
    into->effective = (into->effective * nth + c->effective) / (nth + 1);
    into->steps += c->steps, into->recomputed_steps += c->recomputed_steps;
    for (int k = 0; k < CLOCK_KINDS; k++) {
        int n = into->nrec[k] + c->nrec[k];
        if (!n) continue;
        into->recovery_s[k] = (into->recovery_s[k] * into->nrec[k] + c->recovery_s[k] * c->nrec[k]) / n;
        into->detection_s[k] = (into->detection_s[k] * into->nrec[k] + c->detection_s[k] * c->nrec[k]) / n;
        into->nrec[k] = n;
    }
}

/* a soak of minutes has a calibration run beside it every ~30 s (bench/goodput_predict.sh) */
#define MAX_CALIBRATIONS 64

typedef struct {
    const char *path[MAX_CALIBRATIONS];
    int n;
} CalFiles;

static int add_cal(void *dst, const char *v) {
    CalFiles *f = dst;
    if (f->n == MAX_CALIBRATIONS)
        return myr_error("at most %d --calibration files: pool fewer, longer calibration runs", MAX_CALIBRATIONS);
    f->path[f->n++] = v;
    return 0;
}

typedef struct {
    double s[CLOCK_KINDS];
} RecoveryFlags;

static int add_recovery(void *dst, const char *v) {
    RecoveryFlags *r = dst;
    char *copy = strdup(v), *save = NULL;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '='), *end = NULL;
        int k = -1;
        if (eq) *eq = 0;
        for (int i = 0; i < CLOCK_KINDS && eq; i++)
            if (!strcmp(t, fault_clock_kind_name(i))) k = i;
        double x = eq ? strtod(eq + 1, &end) : -1;
        if (k < 0 || !end || end == eq + 1 || *end || !(x >= 0))
            rc = myr_error("--recovery '%s' is not KIND=SECONDS[,...] (KIND kill, hang or host; seconds >= 0)", v);
        else r->s[k] = x;
    }
    free(copy);
    return rc;
}

static int add_rate(void *dst, const char *v) { return fault_clock_parse(dst, v); }

static const char *src(int given, const char *cal) { return given ? "given" : cal ? "calibration" : "default"; }

int sim_goodput_main(int argc, char **argv) {
    GoodputModel m = {.copy_every = -1, .commit_lag = 1, .step_s = -1, .productive_s = -1, .fixed_s = -1};
    RecoveryFlags rf;
    for (int k = 0; k < CLOCK_KINDS; k++) rf.s[k] = m.recovery_s[k] = -1;
    CalFiles cf = {{0}, 0};
    double hang_timeout = -1;
    int mem_every = -1, save_every = -1, json = 0;
    long long steps = 0;
    const Opt rows[] = {
        OPT_CALL("--inject-rate", "SPEC", &m.clock, add_rate, "the run's fault clock, as given to `myriad run` (KINDS:MTBF_S[,seed=N])"),
        OPT_LONG("--steps", "N", &steps, 1, 1000000000000LL, "steps the run computes (its train --steps)"),
        OPT_CALL("--calibration", "EVENTS", &cf, add_cal,
                 "event log of another finished run of the same job (myriad run --events) with\n"
                 "failures of each kind: the step time, start, finish and recovery times measured\n"
                 "there (repeatable, up to 64 runs: pooled)"),
        OPT_INT("--mem-ckpt-every", "C", &mem_every, 0, 1 << 30, "the run's in-memory copy interval in steps (default 1, myriad run's default)"),
        OPT_INT("--save-every", "D", &save_every, 0, 1 << 30, "its disk checkpoint interval (the copy interval when --mem-ckpt-every 0)"),
        OPT_DOUBLE("--step-s", "S", &m.step_s, 0, 1e9, "up time of one step (instead of the calibration's)"),
        OPT_DOUBLE("--productive-s", "S", &m.productive_s, 0, 1e9, "its productive part (default: the whole step)"),
        OPT_DOUBLE("--fixed-s", "S", &m.fixed_s, 0, 1e9, "the first start and the finish (instead of the calibration's)"),
        OPT_CALL("--recovery", "KIND=S,...", &rf, add_recovery, "down time of one fault of a kind: detection to rejoin (kill, hang, host)"),
        OPT_DOUBLE("--hang-timeout", "S", &hang_timeout, 0, 1e9,
                   "the run's --hang-timeout: a hang's detection, in place of the calibration's"),
        OPT_DOUBLE("--commit-lag", "STEPS", &m.commit_lag, 0, 1, "steps from a copy's step to its commit (default 1)"),
        OPT_SWITCH("--json", &json, "print JSON"),
        OPT_END};
    OptCommand cmd = {.name = "sim goodput",
                      .usage = "usage: myriad sim goodput --inject-rate KINDS:MTBF_S[,seed=N] --steps N [--calibration EVENTS.jsonl] [...]\n"
                               "  Predicts the effective training time (productive / wall, the time ledger's) of a\n"
                               "  `myriad run --inject-rate` soak: the expectation over fault schedules and the\n"
                               "  replay of the seed's own schedule (docs/SIMULATOR.md, Goodput of a fault soak).",
                      .rows = rows};
    opts_parse(&cmd, argc, argv);
    if (!(m.clock.mtbf_s > 0)) myr_die("sim goodput needs the fault clock: --inject-rate KINDS:MTBF_S (e.g. kill+hang:20,seed=3)");
    if (steps < 1) myr_die("sim goodput needs --steps N (the run's train --steps)");
    m.steps = steps;
    Calibration c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < cf.n; i++) {
        Calibration one;
        if (read_calibration(cf.path[i], &one)) myr_die_last();
        pool(&c, &one, i);
    }
    const char *cal_path = cf.n ? cf.path[0] : NULL;
    int given_step = m.step_s >= 0, given_prod = m.productive_s >= 0, given_fixed = m.fixed_s >= 0;
    if (!given_step) m.step_s = cal_path ? c.step_s : -1;
    if (!given_prod) m.productive_s = given_step || !cal_path ? m.step_s : c.productive_s;
    if (!given_fixed) m.fixed_s = cal_path ? c.fixed_s : 0;
    if (m.step_s < 0) myr_die("sim goodput needs the step time: --step-s S or --calibration EVENTS");
    for (int k = 0; k < CLOCK_KINDS; k++) {
        m.recovery_s[k] = rf.s[k] >= 0 ? rf.s[k] : c.nrec[k] ? c.recovery_s[k] : -1;
        if (k == CLOCK_HANG && rf.s[k] < 0 && c.nrec[k] && hang_timeout >= 0)
            m.recovery_s[k] += hang_timeout - c.detection_s[k]; /* its detection is the run's timeout */
    }
    m.copy_every = mem_every > 0 ? mem_every : mem_every == 0 ? save_every : 1;
    if (mem_every == 0 && save_every <= 0)
        myr_die("sim goodput: --mem-ckpt-every 0 restores from disk: give the run's --save-every D");
    GoodputPrediction e, r;
    if (goodput_expect(&m, &e) || goodput_replay(&m, &r)) myr_die_last();
    if (json) {
        printf("{\"mtbf_s\":%.6g,\"seed\":%llu,\"steps\":%lld,\"step_s\":%.6g,\"productive_s\":%.6g,\"fixed_s\":%.6g,"
               "\"copy_every\":%d,\"commit_lag\":%.6g,\"lost_per_fault_s\":%.6g,\"recovery_s\":{",
               m.clock.mtbf_s, (unsigned long long)m.clock.seed, m.steps, m.step_s, m.productive_s, m.fixed_s, m.copy_every,
               m.commit_lag, goodput_lost_per_fault(&m));
        for (int k = 0, n = 0; k < CLOCK_KINDS; k++)
            if (m.clock.kinds[k]) printf("%s\"%s\":%.6g", n++ ? "," : "", fault_clock_kind_name(k), m.recovery_s[k]);
        printf("},\"expected\":{\"effective\":%.6g,\"sigma\":%.6g,\"wall_s\":%.6g,\"faults\":%.6g,\"up_s\":%.6g,\"down_s\":%.6g,"
               "\"lost_s\":%.6g},\"replay\":{\"effective\":%.6g,\"wall_s\":%.6g,\"faults\":%.0f,\"up_s\":%.6g,\"down_s\":%.6g,"
               "\"lost_s\":%.6g}}\n",
               e.effective, e.sigma, e.wall_s, e.faults, e.up_s, e.down_s, e.lost_s, r.effective, r.wall_s, r.faults, r.up_s,
               r.down_s, r.lost_s);
        return 0;
    }
    if (cal_path) {
        printf("calibration:");
        for (int i = 0; i < cf.n; i++) printf(" %s", cf.path[i]);
        printf(" (%lld steps, %.1f s wall, effective %.1f%%; recoveries:", c.steps, c.wall_s, 100 * c.effective);
        if (!(c.nrec[0] + c.nrec[1] + c.nrec[2])) printf(" none");
        for (int k = 0; k < CLOCK_KINDS; k++)
            if (c.nrec[k]) printf(" %d %s, mean %.3f s (detection %.3f s)", c.nrec[k], fault_clock_kind_name(k), c.recovery_s[k], c.detection_s[k]);
        printf(")\n");
    }
    printf("inputs: step %.4f s up time (%s), productive %.4f s (%s); start and finish %.3f s (%s)\n", m.step_s,
           src(given_step, cal_path), m.productive_s, src(given_prod || given_step, cal_path), m.fixed_s, src(given_fixed, cal_path));
    printf("        recovery per fault:");
    for (int k = 0; k < CLOCK_KINDS; k++)
        if (m.clock.kinds[k])
            printf(" %s %.3f s (%s%s)", fault_clock_kind_name(k), m.recovery_s[k], src(rf.s[k] >= 0, cal_path),
                   k == CLOCK_HANG && hang_timeout >= 0 && rf.s[k] < 0 ? ", detection = --hang-timeout" : "");
    printf("\n        a copy every %d step%s, committed %.2g step%s later: %.4f s of work lost per fault\n", m.copy_every,
           m.copy_every == 1 ? "" : "s", m.commit_lag, m.commit_lag == 1 ? "" : "s", goodput_lost_per_fault(&m));
    printf("faults every %g s of up time (%d kind%s): expected %.1f faults, wall %.1f s, effective training time %.2f%% "
           "(+-%.2f pp over fault schedules)\n",
           m.clock.mtbf_s, m.clock.nkinds, m.clock.nkinds == 1 ? "" : "s", e.faults, e.wall_s, 100 * e.effective, 100 * e.sigma);
    printf("the schedule of seed %llu: %.0f faults, wall %.1f s, effective training time %.2f%%\n",
           (unsigned long long)m.clock.seed, r.faults, r.wall_s, 100 * r.effective);
    return 0;
}
