/* ckpt_policy.c: automatic checkpoint intervals (ckpt_policy.h). */
#include "train/ckpt_policy.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h" /* the Young/Daly interval and Llama 3's failure rates: the simulator's own */

/* nominal speeds for the estimates before anything is measured (bench/ckpt_results.md: a save at
 * ~1.2 GB/s on the development VM, an async save's memcpy at several GB/s, the in-memory copy
 * mostly beside the computation) */
#define EST_ASYNC_BPS 4e9
#define EST_SYNC_BPS 1e9
#define EST_MEM_BPS 8e9

double ckpt_policy_parse_duration(const char *s) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v > 0) || !isfinite(v)) return -1;
    double unit = 1;
    if (!strcmp(end, "") || !strcmp(end, "s")) unit = 1;
    else if (!strcmp(end, "m")) unit = 60;
    else if (!strcmp(end, "h")) unit = 3600;
    else if (!strcmp(end, "d")) unit = 86400;
    else return -1;
    return v * unit;
}

/* The Young/Daly interval in steps for a save stall delta (s), the MTBF and the step time. */
static int interval_steps(double delta, double mtbf, double step_s) {
    double tau = sim_daly_interval(delta > 0 ? delta : 1e-6, mtbf);
    double n = step_s > 0 ? round(tau / step_s) : 1;
    if (!(n >= 1)) n = 1;
    if (n > INT_MAX / 4) n = INT_MAX / 4;
    return (int)n;
}

static void choose(CkptPolicy *p) {
    if (p->auto_disk) p->save_every = interval_steps(p->disk_s, p->mtbf_s, p->step_s);
    if (p->auto_mem) p->mem_every = interval_steps(p->mem_s, p->mtbf_s, p->step_s);
}

void ckpt_policy_init(CkptPolicy *p, int auto_disk, int auto_mem, double mtbf_arg, double disk_bytes, double mem_bytes,
                      int async_disk, int ranks, long steps, double est_step_s, int *save_every, int *mem_every) {
    memset(p, 0, sizeof *p);
    p->auto_disk = auto_disk, p->auto_mem = auto_mem, p->steps = steps;
    const char *seen = getenv("MYRIAD_MTBF_S"), *fails = getenv("MYRIAD_FAILURES");
    if (mtbf_arg > 0) {
        p->mtbf_s = mtbf_arg;
        snprintf(p->mtbf_source, sizeof p->mtbf_source, "--mtbf");
    } else if (seen && atof(seen) > 0) {
        p->mtbf_s = atof(seen);
        snprintf(p->mtbf_source, sizeof p->mtbf_source, "observed by myriad run: %s failure%s so far", fails ? fails : "?",
                 fails && !strcmp(fails, "1") ? "" : "s");
    } else {
        FailureRates f;
        sim_failure_rates_default(&f);
        p->mtbf_s = sim_job_mtbf_hours(&f, ranks > 0 ? ranks : 1) * 3600;
        snprintf(p->mtbf_source, sizeof p->mtbf_source, "Llama 3's failure rates for %d rank%s (no --mtbf, none seen yet)",
                 ranks, ranks == 1 ? "" : "s");
    }
    p->disk_s = disk_bytes / (async_disk ? EST_ASYNC_BPS : EST_SYNC_BPS);
    p->mem_s = mem_bytes / EST_MEM_BPS;
    p->step_s = est_step_s > 0 ? est_step_s : 1; /* replaced by the measured steps at the first re-choice */
    choose(p);
    /* until measured, disk saves no more often than the re-choices: the first one (or none, when the
     * estimate says so) measures what a save costs here */
    if (p->save_every < POLICY_EVERY) p->save_every = POLICY_EVERY;
    if (auto_disk) *save_every = p->save_every;
    if (auto_mem) *mem_every = p->mem_every;
}

static void fmt_steps(char *buf, size_t n, int every, long steps) {
    if (every >= steps) snprintf(buf, n, "%d steps (none before the end of the %ld-step run)", every, steps);
    else snprintf(buf, n, "%d step%s", every, every == 1 ? "" : "s");
}

void ckpt_policy_describe(const CkptPolicy *p, char *buf, size_t cap) {
    buf[0] = 0;
    if (!p->auto_disk && !p->auto_mem) return;
    size_t len = (size_t)snprintf(buf, cap, "checkpoint policy (Young/Daly, MTBF %.4g s from %s; step %.4g s %s):", p->mtbf_s,
                                  p->mtbf_source, p->step_s, p->step_measured ? "measured" : "until measured");
    char n[96];
    if (p->auto_disk && len < cap) {
        fmt_steps(n, sizeof n, p->save_every, p->steps);
        len += (size_t)snprintf(buf + len, cap - len, " --save-every auto = %s (a save stalls the steps %.3g s, %s)", n,
                                p->disk_s, p->disk_measured ? "measured" : "estimated");
    }
    if (p->auto_mem && len < cap) {
        fmt_steps(n, sizeof n, p->mem_every, p->steps);
        snprintf(buf + len, cap - len, "%s --mem-ckpt-every auto = %s (a copy stalls them %.3g s, %s)", p->auto_disk ? ";" : "",
                 n, p->mem_s, p->mem_measured ? "measured" : "estimated");
    }
}

void ckpt_policy_measure(CkptPolicy *p, double step_s, double disk_s, int disk_saved, double mem_s, int mem_saved) {
    if (step_s > 0) p->acc_step_s += step_s, p->acc_steps++;
    p->acc_disk_s += disk_s > 0 ? disk_s : 0;
    p->acc_disk += disk_saved;
    p->acc_mem_s += mem_s > 0 ? mem_s : 0;
    p->acc_mem += mem_saved;
}

static void blend(double *x, int *measured, double sample) {
    *x = *measured ? 0.5 * *x + 0.5 * sample : sample;
    *measured = 1;
}

int ckpt_policy_update(CkptPolicy *p, Comm *world, long step, int *save_every, int *mem_every) {
    if ((!p->auto_disk && !p->auto_mem) || step % POLICY_EVERY) return 0;
    /* per-save and per-step figures of this rank, then the slowest rank's: every rank the same */
    float v[6] = {p->acc_steps ? (float)(p->acc_step_s / p->acc_steps) : 0, p->acc_disk ? (float)(p->acc_disk_s / p->acc_disk) : 0,
                  p->acc_mem ? (float)(p->acc_mem_s / p->acc_mem) : 0, (float)p->acc_steps, (float)p->acc_disk, (float)p->acc_mem};
    if (world && comm_all_reduce(world, v, v, 6, COMM_F32, COMM_MAX)) return 0;
    p->acc_step_s = p->acc_disk_s = p->acc_mem_s = 0;
    p->acc_steps = p->acc_disk = p->acc_mem = 0;
    if (v[3] > 0) blend(&p->step_s, &p->step_measured, v[0]);
    if (v[4] > 0) blend(&p->disk_s, &p->disk_measured, v[1]);
    if (v[5] > 0) blend(&p->mem_s, &p->mem_measured, v[2]);
    int old_disk = p->save_every, old_mem = p->mem_every;
    choose(p);
    /* hysteresis once the choice rests on measurements: keep an interval within 20% of the new
     * optimum (Daly's goodput is flat around it), so that noise does not move the saves around */
    if (p->chosen_measured && p->auto_disk && abs(p->save_every - old_disk) <= 0.2 * old_disk) p->save_every = old_disk;
    if (p->chosen_measured && p->auto_mem && abs(p->mem_every - old_mem) <= 0.2 * old_mem) p->mem_every = old_mem;
    p->chosen_measured = p->step_measured;
    if (p->save_every == old_disk && p->mem_every == old_mem) return 0;
    if (p->auto_disk) *save_every = p->save_every;
    if (p->auto_mem) *mem_every = p->mem_every;
    return 1;
}
