/* mfu_peak.c: the MFU denominator of a training run and MFU itself (see mfu_peak.h). */
#include "train/mfu_peak.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cpu/cpu_peak.h"
#include "train/device_peak.h"
#include "util/error.h"

/* A wait that sleeps: the ranks not measuring must leave the cores to the one that is. */
static void quiet_broadcast(Comm *c, double *value) {
    float buf[2];
    memcpy(buf, value, sizeof buf);
    CommRequest *req;
    if (comm_ibroadcast(c, buf, buf, 2, COMM_F32, 0, &req)) myr_die_last(); /* 8 bytes, copied as they are */
    for (int done = 0;;) {
        if (comm_test(&req, &done)) myr_die_last();
        if (done) break;
        nanosleep(&(struct timespec){0, 200000}, NULL);
    }
    memcpy(value, buf, sizeof buf);
}

/* The CPU's rate: cached (the best this machine was seen to do), else measured now and cached. */
static void cpu_peak(TrainJob *j) {
    Comm *world = j->distributed ? comm_world() : NULL;
    int local = world ? comm_local_size(world) : 1, nodes = world ? comm_node_count(world) : 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int own = kernels_threads(), threads = own * (local > 0 ? local : 1);
    if (cpus > 0 && threads > cpus) threads = (int)cpus;
    if (threads < own) threads = own;
    j->peak_devices = nodes;
    double flops = 0;
    if (j->rank0) {
        char key[512], source[256], path[4096];
        cpu_peak_key(threads, key, sizeof key);
        cpu_peak_cache_path(path, sizeof path);
        if (!cpu_peak_cache_get(key, &flops, source, sizeof source)) {
            snprintf(j->peak_source, sizeof j->peak_source, "cached sgemm");
            snprintf(j->peak_detail, sizeof j->peak_detail,
                     "this machine's best sgemm at %d threads, cached (%s) in %s", threads, source, path);
        } else {
            CpuPeakMeasure m;
            kernels_set_threads(threads);
            int failed = cpu_peak_measure(1024, 2.0, &m);
            kernels_set_threads(own);
            if (failed) myr_die("cannot allocate the buffers to measure this machine's sgemm rate");
            flops = m.flops;
            char note[4400] = "";
            int put = cpu_peak_cache_put(key, flops, "myriad train start-up");
            if (put < 0) snprintf(note, sizeof note, "; not cached: %s", myr_last_error());
            else snprintf(note, sizeof note, ", cached in %s", path);
            snprintf(j->peak_source, sizeof j->peak_source, "measured sgemm");
            snprintf(j->peak_detail, sizeof j->peak_detail,
                     "measured now at %d threads (best of %d 1024^3 GEMMs in %.1f s, %s)%s; `myriad bench sgemm` "
                     "measures more shapes", threads, m.runs, m.seconds,
                     m.stable ? "stable" : "the time budget ran out first", note);
        }
        j->peak_measured = 1;
    }
    if (world) quiet_broadcast(world, &flops);
    j->peak_flops = flops;
    j->peak_measured = 1;
}

void mfu_peak_choose(TrainJob *j) {
    const TrainOptions *o = &j->o;
    j->peak_devices = j->world;
    j->peak_measured = 0;
    j->peak_raised = 0;
    j->peak_said = 0;
    if (o->peak_tflops > 0) {
        j->peak_flops = o->peak_tflops * 1e12;
        snprintf(j->peak_source, sizeof j->peak_source, "--peak-tflops");
        snprintf(j->peak_detail, sizeof j->peak_detail, "given by --peak-tflops");
    } else if (!strcmp(kernels_device(), "cuda")) {
        double t = device_peak_tflops(j->device.name, kernels_dtype(), o->tf32);
        j->peak_flops = t * 1e12;
        snprintf(j->peak_source, sizeof j->peak_source, "%s", t > 0 ? "datasheet dense peak" : "unknown: MFU not reported");
        if (t > 0)
            snprintf(j->peak_detail, sizeof j->peak_detail, "the datasheet's dense %s peak of the %s (src/train/device_peak.c)",
                     kernels_dtype() == DTYPE_BF16 ? "bf16" : o->tf32 ? "tf32" : "fp32", j->device.name);
        else
            snprintf(j->peak_detail, sizeof j->peak_detail, "no datasheet peak is known for this GPU "
                     "(src/train/device_peak.c): MFU is not reported; give --peak-tflops X");
    } else
        cpu_peak(j);
    if (!strcmp(kernels_device(), "cuda")) { /* local ranks share the visible GPUs round-robin */
        const char *v = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        int local = v && atoi(v) > 0 ? atoi(v) : 1, gpus = j->device.count > 0 ? j->device.count : 1;
        int used = local < gpus ? local : gpus, nodes = (j->world + local - 1) / local;
        j->peak_devices = used * nodes;
    }
}

double mfu_of_step(TrainJob *j, double dt, long step) {
    if (!(j->peak_flops > 0) || !(dt > 0)) return 0;
    double achieved = j->flops_per_step / dt, peak = j->peak_flops * j->peak_devices;
    if (achieved <= peak || !j->peak_measured) return achieved / peak;
    /* the model's FLOPs are at most what the GEMMs did, so the measured rate was low */
    double old = j->peak_flops;
    j->peak_flops = achieved / j->peak_devices;
    j->peak_raised++;
    snprintf(j->peak_source, sizeof j->peak_source, "raised to a step's rate");
    if (j->rank0 && j->peak_flops > j->peak_said * 1.02) { /* said when it moves, not for every 0.1% */
        j->peak_said = j->peak_flops;
        char key[512], path[4096], note[4400] = "";
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        int threads = kernels_threads() * (j->distributed && comm_local_size(comm_world()) > 0
                                               ? comm_local_size(comm_world()) : 1);
        if (cpus > 0 && threads > cpus) threads = (int)cpus;
        cpu_peak_key(threads, key, sizeof key);
        cpu_peak_cache_path(path, sizeof path);
        if (cpu_peak_cache_put(key, j->peak_flops, "a myriad train step's model FLOP rate") < 0)
            snprintf(note, sizeof note, " (not cached: %s)", myr_last_error());
        else snprintf(note, sizeof note, " and cached in %s", path);
        fprintf(stderr, "myriad train: step %ld did %.1f GFLOP/s of model FLOPs per device, more than the MFU "
                "denominator %.1f GFLOP/s (measured while the machine was busier): the denominator is raised to "
                "%.1f%s\n", step + 1, j->peak_flops / 1e9, old / 1e9, j->peak_flops / 1e9, note);
    }
    return 1.0;
}
