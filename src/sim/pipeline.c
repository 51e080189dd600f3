/* pipeline.c: event-by-event simulation of one step's pipeline schedule, per micro-batch.
 * Each stage runs its operations (forward or backward of one model chunk for one micro-batch) in
 * the order its schedule prescribes: GPipe (all forwards, then all backwards), 1F1B (PipeDream-
 * Flush: p-s-1 warm-up forwards, then alternate), interleaved 1F1B (Narayanan et al. 2021, as in
 * Megatron-LM: v chunks per stage, micro-batches in groups of p). An operation starts when its
 * stage is free and its input has arrived: the forward of virtual stage k needs the forward of k-1
 * (plus one activation transfer), the backward of k needs the backward of k+1 (plus one gradient
 * transfer), the last virtual stage's backward needs its own forward. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "util/error.h"

/* An op is encoded as (mb * v + chunk) * 2 + is_backward.
 * Interleaved 1F1B (Megatron-core): micro-batches go through a virtual stage in groups of N
 * (microbatch_group_size_per_vp_stage, default pp: depth-first; Llama 3's schedule sets it freely,
 * Dubey et al. 2024 Sec. 3.3.2): for each group, chunk 0 of all its micro-batches, then chunk 1, ...;
 * backward the same with the chunks reversed; a last group may be shorter. Warm-up forwards
 * 2 (p - s - 1) + (v - 1) N, then one forward and one backward in turn. */
static void group_op(int k, int m, int v, int N, int back, int *mb, int *chunk) {
    int g = k / (N * v), first = g * N, size = m - first < N ? m - first : N, idx = k - g * N * v;
    *mb = first + idx % size;
    *chunk = idx / size;
    if (back) *chunk = v - 1 - *chunk;
}

static int build_order(int p, int v, int m, int N, PipeSchedule sched, int s, int *ops) {
    int n = 0;
    if (sched == SCHED_GPIPE || v == 1) {
        int warm = sched == SCHED_GPIPE ? m : (p - s - 1 < m ? p - s - 1 : m);
        int f = 0, b = 0;
        for (; f < warm; f++) ops[n++] = (f * v) * 2;
        while (f < m) { ops[n++] = (f * v) * 2; f++; ops[n++] = (b * v) * 2 + 1; b++; }
        while (b < m) { ops[n++] = (b * v) * 2 + 1; b++; }
        return n;
    }
    if (N < 1) N = p;
    int total = m * v;
    int warm = (p - s - 1) * 2 + (v - 1) * N;
    if (warm > total) warm = total;
    int f = 0, b = 0, mb, ch;
#define PUT(k, back) (group_op((k), m, v, N, (back), &mb, &ch), ops[n++] = (mb * v + ch) * 2 + (back))
    for (; f < warm; f++) PUT(f, 0);
    while (f < total) { PUT(f, 0); f++; PUT(b, 1); b++; }
    while (b < total) { PUT(b, 1); b++; }
#undef PUT
    return n;
}

/* Peak activation weight a stage holds, walking its op order alone (no timing): each forward of
 * virtual stage k adds weight[k] (its layers), each backward removes it. */
double sim_pipeline_peak_weight_group(int p, int v, int m, int group, PipeSchedule sched, int stage, const double *weight) {
    if (sched == SCHED_GPIPE) v = 1;
    int per = 2 * m * v;
    int *ops = malloc(sizeof(int) * (size_t)per);
    if (!ops) return 0;
    int n = build_order(p, v, m, group, sched, stage, ops);
    double held = 0, peak = 0;
    for (int i = 0; i < n; i++) {
        int chunk = (ops[i] >> 1) % v;
        double w = weight[chunk * p + stage];
        held += (ops[i] & 1) ? -w : w;
        if (held > peak) peak = held;
    }
    free(ops);
    return peak;
}

double sim_pipeline_peak_weight(int p, int v, int m, PipeSchedule sched, int stage, const double *weight) {
    return sim_pipeline_peak_weight_group(p, v, m, 0, sched, stage, weight);
}

int sim_pipeline(int p, int v, int m, PipeSchedule sched, const double *fwd, const double *bwd, double p2p,
                 PipeResult *out, TraceWriter *trace) {
    return sim_pipeline_ex(p, v, m, sched, fwd, bwd, p2p, NULL, out, trace);
}

int sim_pipeline_ex(int p, int v, int m, PipeSchedule sched, const double *fwd, const double *bwd, double p2p,
                    double *chunk_done, PipeResult *out, TraceWriter *trace) {
    return sim_pipeline_group(p, v, m, 0, sched, fwd, bwd, p2p, chunk_done, out, trace);
}

int sim_pipeline_group(int p, int v, int m, int group, PipeSchedule sched, const double *fwd, const double *bwd,
                       double p2p, double *chunk_done, PipeResult *out, TraceWriter *trace) {
    if (p < 1 || p > 1024 || v < 1 || m < 1) return myr_error("pipeline: need 1 <= pp <= 1024 and micro-batches >= 1");
    if (v > 1 && sched != SCHED_GPIPE && group <= 0 && m % p)
        return myr_error("interleaved schedule needs the number of micro-batches (%d) to be a multiple of pp %d", m, p);
    if (sched == SCHED_GPIPE) v = 1;
    memset(out, 0, sizeof *out);
    int per = 2 * m * v;
    int V = p * v;
    int *ops = malloc(sizeof(int) * (size_t)per * p);
    int *idx = calloc((size_t)p, sizeof(int));
    double *clock = calloc((size_t)p, sizeof(double));
    double *fdone = malloc(sizeof(double) * (size_t)V * m);
    double *bdone = malloc(sizeof(double) * (size_t)V * m);
    int *held = calloc((size_t)p, sizeof(int));
    if (!ops || !idx || !clock || !fdone || !bdone || !held) {
        free(ops); free(idx); free(clock); free(fdone); free(bdone); free(held);
        return myr_error("pipeline: out of memory (pp %d, vpp %d, %d micro-batches)", p, v, m);
    }
    for (long i = 0; i < (long)V * m; i++) fdone[i] = bdone[i] = -1;
    for (int s = 0; s < p; s++) build_order(p, v, m, group, sched, s, ops + (size_t)s * per);
    if (trace)
        for (int s = 0; s < p; s++) {
            char name[32];
            snprintf(name, sizeof name, "stage %d", s);
            trace_lane(trace, s, name);
        }
    long remaining = (long)per * p;
    int rc = 0;
    while (remaining > 0) {
        long progressed = 0;
        for (int s = 0; s < p; s++) {
            while (idx[s] < per) {
                int op = ops[(size_t)s * per + idx[s]];
                int bw = op & 1, chunk = (op >> 1) % v, mb = (op >> 1) / v;
                int vs = chunk * p + s;
                double ready;
                if (!bw) {
                    if (vs == 0) ready = 0;
                    else {
                        double d = fdone[(size_t)(vs - 1) * m + mb];
                        if (d < 0) break;
                        ready = d + p2p;
                    }
                } else if (vs == V - 1) {
                    double d = fdone[(size_t)vs * m + mb];
                    if (d < 0) break;
                    ready = d;
                } else {
                    double d = bdone[(size_t)(vs + 1) * m + mb];
                    if (d < 0) break;
                    ready = d + p2p;
                }
                double dur = bw ? bwd[vs] : fwd[vs];
                double start = fmax(clock[s], ready);
                clock[s] = start + dur;
                (bw ? bdone : fdone)[(size_t)vs * m + mb] = clock[s];
                out->busy[s] += dur;
                held[s] += bw ? -1 : 1;
                if (held[s] > out->peak_inflight[s]) out->peak_inflight[s] = held[s];
                if (bw) out->last_bwd[s] = dur;
                if (bw && chunk_done) chunk_done[vs] = clock[s];
                if (trace) {
                    char name[64];
                    if (v > 1) snprintf(name, sizeof name, "%c mb%d chunk%d", bw ? 'B' : 'F', mb, chunk);
                    else snprintf(name, sizeof name, "%c mb%d", bw ? 'B' : 'F', mb);
                    trace_event(trace, s, name, start, dur);
                }
                idx[s]++;
                progressed++;
            }
        }
        if (!progressed) { rc = myr_error("pipeline: schedule deadlocked (internal error)"); break; }
        remaining -= progressed;
    }
    for (int s = 0; s < p; s++) {
        out->finish[s] = clock[s];
        if (clock[s] > out->makespan) out->makespan = clock[s];
    }
    free(ops); free(idx); free(clock); free(fdone); free(bdone); free(held);
    return rc;
}
