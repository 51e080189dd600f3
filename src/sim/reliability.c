/* reliability.c: failures, checkpoints and goodput of a long training job.
 * Failure rates per GPU-hour by component default to the Llama 3 report (Dubey et al. 2024,
 * Sec. 3.3.4, Table 5): 419 unexpected interruptions in 54 days on 16,384 H100s, i.e.
 * 21,233,664 GPU-hours: faulty GPU (incl. SRAM, system processor, thermal, SDC) 196, HBM3 72,
 * software (bugs, NCCL watchdog, dependencies) 63, network switch/cable 35, NIC 7, host (maintenance,
 * SSD, PSU, chassis, IO board, CPU, DRAM) 46. Failures are exponential and independent, so a job of
 * N GPUs has MTBF 1 / (N sum(rates)).
 * Checkpoint interval: Young (1974) tau = sqrt(2 delta M); Daly (2006) higher-order estimate
 *   tau = sqrt(2 delta M) [1 + 1/3 sqrt(delta / 2M) + 1/9 (delta / 2M)] - delta   (delta < 2M), else M.
 * Goodput: Daly's expected wall time per unit of work, T_w / T_s = M e^{R/M} (e^{(tau+delta)/M} - 1) / tau,
 * with restart cost R = relaunch + restore + (for hardware faults) waiting for a replacement node
 * when no hot spare is free. Spares: nodes under repair form an M/G/inf queue, Poisson with mean
 * (node failure rate x repair time); a spare is free when fewer than `spares` nodes are in repair. */
#include <math.h>

#include "sim/sim.h"

#define LLAMA3_GPU_HOURS (16384.0 * 54 * 24)

void sim_failure_rates_default(FailureRates *f) {
    f->gpu = 196 / LLAMA3_GPU_HOURS;
    f->hbm = 72 / LLAMA3_GPU_HOURS;
    f->software = 63 / LLAMA3_GPU_HOURS;
    f->network = 35 / LLAMA3_GPU_HOURS;
    f->nic = 7 / LLAMA3_GPU_HOURS;
    f->host = 46 / LLAMA3_GPU_HOURS;
}

static double total_rate(const FailureRates *f) { return f->gpu + f->hbm + f->software + f->network + f->nic + f->host; }

double sim_job_mtbf_hours(const FailureRates *f, int gpus) { return 1.0 / (gpus * total_rate(f)); }

double sim_young_interval(double delta, double mtbf) { return sqrt(2.0 * delta * mtbf); }

double sim_daly_interval(double delta, double mtbf) {
    if (delta >= 2.0 * mtbf) return mtbf;
    double x = delta / (2.0 * mtbf);
    return sqrt(2.0 * delta * mtbf) * (1.0 + sqrt(x) / 3.0 + x / 9.0) - delta;
}

double sim_daly_goodput(double tau, double delta, double restart, double mtbf) {
    double wall = mtbf * exp(restart / mtbf) * (exp((tau + delta) / mtbf) - 1.0) / tau;
    return 1.0 / wall;
}

/* P(Poisson(mean) < k) */
static double poisson_below(double mean, int k) {
    if (mean > 500) return 0.5 * erfc((mean - (k - 0.5)) / sqrt(2 * mean)); /* normal approximation */
    double term = exp(-mean), sum = 0;
    for (int i = 0; i < k; i++) {
        sum += term;
        term *= mean / (i + 1);
    }
    return sum > 1 ? 1 : sum;
}

void sim_reliability(const FailureRates *f, const ReliabilityInput *in, ReliabilityResult *o) {
    double rate = total_rate(f);
    double hw = rate - f->software;
    o->mtbf_h = sim_job_mtbf_hours(f, in->gpus);
    double M = o->mtbf_h * 3600;
    if (in->in_memory) {
        /* each GPU copies its shard to host / peer memory (Gemini, Wang et al. SOSP 2023); storage
         * persistence runs in the background */
        o->ckpt_s = in->state_bytes / in->gpus / (in->host_mem_gbps * 1e9);
        o->restore_s = o->ckpt_s;
    } else {
        o->ckpt_s = in->state_bytes / (in->storage_gbps * 1e9);
        o->restore_s = o->ckpt_s;
    }
    double nodes_in_repair = in->gpus * hw * in->repair_hours; /* failed GPUs ~ failed nodes */
    o->p_spare_available = in->hot_spares > 0 ? poisson_below(nodes_in_repair, in->hot_spares) : 0;
    double wait = (hw / rate) * (1.0 - o->p_spare_available) * in->repair_hours * 3600;
    o->restart_s = in->restart_s + o->restore_s + wait;
    o->young_s = sim_young_interval(o->ckpt_s, M);
    o->daly_s = sim_daly_interval(o->ckpt_s, M);
    o->interval_s = o->daly_s;
    o->goodput = sim_daly_goodput(o->interval_s, o->ckpt_s, o->restart_s, M);
}

/* Hot spares a run keeps by default: enough nodes that one is free when a hardware fault strikes
 * with probability >= 99%, counting the nodes in repair as Poisson with mean N x (hardware fault
 * rate) x repair time (the M/G/inf queue above; production clusters size spare blocks against the
 * nodes under repair this way: Meta, "Sparing Strategies to Minimize Reliability Impact on Large
 * Training Jobs", MLSys 2026). At least one node for multi-node jobs. */
int sim_default_hot_spares(int gpus, int gpus_per_node) {
    FailureRates f;
    sim_failure_rates_default(&f);
    return sim_default_hot_spares_for(&f, gpus, gpus_per_node);
}

int sim_default_hot_spares_for(const FailureRates *f, int gpus, int gpus_per_node) {
    if (gpus_per_node < 1) gpus_per_node = 8;
    if (gpus <= gpus_per_node) return 0;
    double mean = gpus * (total_rate(f) - f->software) * 4.0;
    if (mean > 500) return (int)ceil(mean + 2.33 * sqrt(mean)) + 1; /* normal approximation (exp(-mean) underflows) */
    /* P(Poisson(mean) < k) >= 0.99, summed term by term */
    double term = exp(-mean), below = term;
    int k = 1;
    while (below < 0.99 && k < 100000) { term *= mean / k; below += term; k++; }
    return k;
}
