/* goodput_predict.c: the effective training time of a run under a Poisson fault clock.
 *
 * A job computes S steps of up time tau each (productive part tau_p); F seconds of its wall time
 * (the first attempt's start, the finish) are exposed to no fault. Faults strike the up time as a
 * Poisson process of rate lambda = 1/M (util/fault_clock.h: one exponential wait per attempt; the
 * same as wall-time arrivals lost during recoveries). Each fault costs
 *   - down time R_k of its kind k (detection, teardown, relaunch, MPI init, setup, restore, rejoin),
 *     measured; kinds drawn uniformly, R = mean R_k; a hang's R_k is measured from a hang at a step
 *     report and is detected --hang-timeout after the stopped rank's last report, so a hang at a
 *     uniform point of a step is found tau/2 sooner on average: R = mean R_k - p_hang tau / 2;
 *   - lost up time rho: the work since the newest committed copy, computed again. With a copy every
 *     c steps, the copy of step k committed f steps later (f = commit_lag <= 1) and the fault at a
 *     uniform point of the cycle, in step j (1..c) after the last copy step at offset u: it loses
 *     the (j - 1) complete steps since that copy step and u, plus the c steps before that copy when
 *     it struck step 1 before the copy committed (probability f / c): rho = tau (c/2 + f)
 *     ((c-1)/2 + 1/2 + f); every-step copies (c = 1, f = 1) lose 1.5 steps per fault.
 * The total up time U = S tau + (lost work) and the fault count N satisfy E[N] = lambda E[U] (the
 * compensated Poisson count N(t) - lambda t is a martingale and the job's end is a stopping time),
 * and E[lost work] = rho E[N], so
 *   E[U] = S tau / (1 - lambda rho),   E[N] = lambda E[U],   E[T] = F + E[U] + E[N] R,
 *   effective = S tau_p / E[T]
 * (the ratio of expectations; the run's own ratio scatters around it with the schedule: the
 * wall time is a compound Poisson sum, each fault costing its kind's R_k + rho / (1 - lambda rho),
 * so sigma(T) = sqrt(E[N] E[cost^2]) over the kinds drawn, and sigma = effective sigma(T) / E[T]).
 * The replay walks the seed's draws instead: attempt a lasts draw a's up time (or to the end),
 * its lost work is exactly the steps after the newest committed copy plus the step in flight, its
 * hang is found the draw's offset into its step sooner. */
#include "sim/goodput_predict.h"

#include <math.h>
#include <string.h>

#include "util/error.h"

int goodput_model_check(const GoodputModel *m) {
    if (m->steps < 1) return myr_error("sim goodput: --steps must be >= 1");
    if (!(m->step_s > 0) || !(m->productive_s >= 0) || m->productive_s > m->step_s * (1 + 1e-9))
        return myr_error("sim goodput: the step time (%g s) must be > 0 and hold its productive part (%g s)", m->step_s,
                         m->productive_s);
    if (!(m->fixed_s >= 0)) return myr_error("sim goodput: the fixed start and finish time must be >= 0 s");
    if (!(m->clock.mtbf_s > 0) || m->clock.nkinds < 1) return myr_error("sim goodput: give the fault rate (--inject-rate KINDS:MTBF_S)");
    for (int k = 0; k < CLOCK_KINDS; k++)
        if (m->clock.kinds[k] && !(m->recovery_s[k] >= 0))
            return myr_error("sim goodput: no recovery time for %s faults: give --recovery %s=SECONDS or a calibration "
                             "run (--calibration EVENTS) that had one", fault_clock_kind_name(k), fault_clock_kind_name(k));
    if (m->copy_every < 1) return myr_error("sim goodput: the copy interval must be >= 1 step (--mem-ckpt-every or --save-every)");
    if (!(m->commit_lag >= 0 && m->commit_lag <= 1)) return myr_error("sim goodput: the commit lag must be in [0, 1] steps");
    return 0;
}

double goodput_lost_per_fault(const GoodputModel *m) { return m->step_s * (m->copy_every / 2.0 + m->commit_lag); }

static double mean_recovery(const GoodputModel *m) {
    double r = 0;
    for (int k = 0; k < CLOCK_KINDS; k++)
        if (m->clock.kinds[k]) r += m->recovery_s[k] - (k == CLOCK_HANG ? m->step_s / 2 : 0);
    return r / m->clock.nkinds;
}

int goodput_expect(const GoodputModel *m, GoodputPrediction *p) {
    if (goodput_model_check(m)) return -1;
    memset(p, 0, sizeof *p);
    double lambda = 1 / m->clock.mtbf_s, rho = goodput_lost_per_fault(m), R = mean_recovery(m);
    if (lambda * rho >= 1)
        return myr_error("sim goodput: a fault every %g s loses %g s of work on average: the job never finishes "
                         "(copy more often, or a lower fault rate)", m->clock.mtbf_s, rho);
    double W = (double)m->steps * m->step_s;
    p->up_s = W / (1 - lambda * rho);
    p->faults = lambda * p->up_s;
    p->lost_s = p->up_s - W;
    p->down_s = p->faults * R;
    p->wall_s = m->fixed_s + p->up_s + p->down_s;
    p->productive_s = (double)m->steps * m->productive_s;
    p->effective = p->productive_s / p->wall_s;
    /* the wall time's spread: a compound Poisson sum over the faults, each costing its kind's R_k
     * and its lost work (and the faults that work exposes): Var = E[N] E[cost^2] */
    double extra = rho / (1 - lambda * rho), sq = 0;
    for (int k = 0; k < CLOCK_KINDS; k++)
        if (m->clock.kinds[k]) {
            double cost = m->recovery_s[k] - (k == CLOCK_HANG ? m->step_s / 2 : 0) + extra;
            sq += cost * cost / m->clock.nkinds;
        }
    p->sigma = p->effective * sqrt(p->faults * sq) / p->wall_s;
    return 0;
}

/* The replay over draws from next(ctx, &d) (0: no more faults). */
static int replay(const GoodputModel *m, int (*next)(void *, ClockDraw *), void *ctx, GoodputPrediction *p) {
    if (goodput_model_check(m)) return -1;
    memset(p, 0, sizeof *p);
    double tau = m->step_s, wall = m->fixed_s;
    long long s = 0, c_every = m->copy_every; /* s: the step the attempt resumes after */
    for (;;) {
        ClockDraw d;
        double left = (double)(m->steps - s) * tau;
        if (!next(ctx, &d) || d.after_s >= left) { /* the job ends before this attempt's fault */
            wall += left, p->up_s += left;
            break;
        }
        long long done = (long long)floor(d.after_s / tau); /* steps completed in this attempt */
        double into = d.after_s - (double)done * tau;
        /* the copy of step k (a multiple of c) is committed once step k + lag is done: the newest is
         * the largest such k <= s + done - lag, or the attempt's own restore point s */
        long long newest = (long long)floor((double)(s + done) - m->commit_lag + 1e-9);
        newest -= ((newest % c_every) + c_every) % c_every;
        if (newest < s) newest = s;
        p->lost_s += d.after_s - (double)(newest - s) * tau;
        p->up_s += d.after_s;
        double R = m->recovery_s[d.kind] - (d.kind == CLOCK_HANG ? into : 0);
        if (R < 0) R = 0;
        p->down_s += R;
        wall += d.after_s + R;
        p->faults += 1;
        s = newest;
        if (p->faults > 1e8) return myr_error("sim goodput: more than 1e8 faults before the end: the job never finishes");
    }
    p->wall_s = wall;
    p->productive_s = (double)m->steps * m->productive_s;
    p->effective = p->productive_s / p->wall_s;
    return 0;
}

static int next_from_clock(void *ctx, ClockDraw *d) {
    fault_clock_draw(ctx, d);
    return 1;
}

int goodput_replay(const GoodputModel *m, GoodputPrediction *p) {
    FaultClock c = m->clock;
    fault_clock_reset(&c);
    return replay(m, next_from_clock, &c, p);
}

typedef struct {
    const ClockDraw *d;
    int n, i;
} DrawList;

static int next_from_list(void *ctx, ClockDraw *d) {
    DrawList *l = ctx;
    if (l->i >= l->n) return 0;
    *d = l->d[l->i++];
    return 1;
}

int goodput_replay_draws(const GoodputModel *m, const ClockDraw *draws, int n, GoodputPrediction *p) {
    DrawList l = {draws, n, 0};
    return replay(m, next_from_list, &l, p);
}
