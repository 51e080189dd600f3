/* synth.c: the synthetic large-model cluster workload. Gang sizes follow a power-of-two mix with
 * median 1 GPU and mean ~28 GPUs (Kalos: 26.8 / 1 / 1024; Seren 5.68 / 1 / 1024; Helios 3.72 / 1 /
 * 2048), extended to 4,096-GPU gangs; run times are log-normal with a median that grows with gang
 * size from ~150 s (Kalos 124 s, Helios 206 s for all jobs) and a heavy tail; arrivals are Poisson,
 * then stretched or squeezed (one factor) so that the offered load is exactly o->load on this
 * sample by the definition a trace's --load uses (trace_set_load: each run counted up to the length
 * of the arrival window, the window allocation is measured over). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/trace.h"
#include "util/error.h"
#include "util/rng.h"

static double gauss(uint64_t *s) { return sqrt(-2 * log(splitmix64_uniform(s))) * cos(2 * M_PI * splitmix64_uniform(s)); }

static const int sizes[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
static const double probs[] = {0.5158, 0.06, 0.07, 0.17, 0.05, 0.04, 0.04, 0.025, 0.015, 0.008, 0.004, 0.0015, 0.0007};
#define NSIZES (int)(sizeof sizes / sizeof sizes[0])

int synth_generate(JobSet *js, const Cluster *c, const SynthOptions *o) {
    if (o->jobs < 1) return myr_error("synthetic workload needs --jobs >= 1");
    if (!(o->load > 0)) return myr_error("synthetic workload needs --load > 0 (offered load, e.g. 0.8)");
    int gpn = 0;
    for (int n = 0; n < c->nnodes; n++) if (c->nodes[n].ngpu > gpn) gpn = c->nodes[n].ngpu;
    long maxg = o->max_gpus > 0 ? o->max_gpus : 4096;
    if (maxg > c->total_gpus) maxg = c->total_gpus;
    int nq = o->nqueues > 0 ? o->nqueues : 1;
    uint64_t rng = o->seed * 0x2545F4914F6CDD1DULL + 3;
    int first = js->n;
    double work = 0;
    for (int i = 0; i < o->jobs; i++) {
        double u = splitmix64_uniform(&rng), acc = 0;
        int k = 0;
        for (k = 0; k < NSIZES - 1; k++) {
            acc += probs[k];
            if (u < acc) break;
        }
        long g = sizes[k];
        while (g > maxg) g /= 2;
        Job *j = jobset_add(js);
        if (!j) return myr_error("out of memory");
        snprintf(j->name, sizeof j->name, "syn-%06d", i);
        if (g <= gpn) j->ntasks = 1, j->gpus_per_task = (int)g;
        else j->ntasks = (int)(g / gpn), j->gpus_per_task = gpn;
        if (g == 1 && o->frac_share > 0 && splitmix64_uniform(&rng) < o->frac_share)
            j->gpu_milli = splitmix64_uniform(&rng) < 0.5 ? 250 : 500;
        j->cpu_milli = 8000 * j->gpus_per_task;
        j->mem_mib = 65536 * j->gpus_per_task;
        /* median run time 150 s for one GPU, x(1+log2 g)^1.5 for bigger gangs; sigma 1.8 */
        double med = 150.0 * pow(1.0 + log2((double)g), 1.5);
        j->duration = fmin(fmax(med * exp(1.8 * gauss(&rng)), 10.0), 14 * 86400.0);
        j->est_duration = j->duration;
        double pr = splitmix64_uniform(&rng);
        j->priority = pr < 0.2 ? 0 : pr < 0.9 ? 1 : 2;
        j->preemptible = j->priority < 2;
        j->queue = (int)(splitmix64_next(&rng) % (uint64_t)nq);
        /* multi-node gangs prefer the lowest tier that holds them; a fifth of those that fit in a
         * leaf insist on it (hard constraint, as Volcano's networkTopology mode: hard) */
        if (j->ntasks > 1 && g <= 256 && splitmix64_uniform(&rng) < 0.2) j->topo_tier = 1, j->topo_hard = true;
        work += job_gpu_milli(j) / 1000.0 * j->duration;
    }
    /* Poisson arrivals at rate load * GPUs / mean(GPU-seconds per job): whole runs counted, the
     * textbook offered load; then rescaled to the window-capped one the simulator reports. Without
     * that the label and the sample disagreed: with heavy-tailed runs much of a whole run's work
     * falls after the last arrival, so "load 0.80" offered less inside the window (less still on a
     * small sample, where a few long runs hold most of the work) */
    double rate = o->load * (double)c->total_gpus / (work / o->jobs), t = 0;
    for (int i = first; i < js->n; i++) {
        js->jobs[i].submit = t;
        t += -log(splitmix64_uniform(&rng)) / rate;
    }
    return o->jobs > 1 ? trace_set_load(js, c, o->load) : 0;
}
