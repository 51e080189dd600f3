/* doctor_run.h: the doctor's measurement schedule over the world (turns, repetitions, pairs). */
#ifndef MYRIAD_OPS_DOCTOR_RUN_H
#define MYRIAD_OPS_DOCTOR_RUN_H

#include "ops/doctor.h"

typedef struct {
    int reps;           /* repetitions of every check; figures are the best of them */
    int gemm_n;         /* GEMM size n (n x n x n); 0: the device's default */
    size_t triad_bytes; /* the three triad arrays together (a GPU: the two copy buffers); 0: default */
    size_t msg_bytes;   /* p2p message and all-reduce buffer */
    int peers;          /* each host meets at most this many others */
    int concurrent;     /* 1: no turns (ranks of one machine measure at once) */
    int skip[CHK_N];    /* checks not measured (p2p_lat and p2p_bw are measured together) */
} DoctorPlan;

/* Collective over comm_world(): measure everything, fill res (samples, hosts) and setup on every
 * rank. Thresholds and baselines are left for the caller. Dies on a communication failure. */
int doctor_run(const DoctorPlan *p, DoctorResults *res, DoctorSetup *setup);
void doctor_results_free(DoctorResults *r);

#endif
