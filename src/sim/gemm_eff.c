/* gemm_eff.c: time of one GEMM and of memory-bound kernels on one GPU.
 * A GEMM C[M,N] += A[M,K] B[K,N] runs as 128x128 output tiles spread over the SMs in waves; its
 * efficiency is the GPU's best achievable fraction (gemm_eff; gemm_eff_fp8 for fp8) times
 *   tile padding   M N / (ceil(M/tm) tm ceil(N/tn) tn), tile sides 128 (16..128 for skinny operands)
 *   wave fill      tiles / (ceil(tiles/SMs) SMs)
 *   K ramp         K / (K + 64)         (prologue/epilogue of the K loop; short K cannot hide them)
 * and its time is the larger of compute at that efficiency and the HBM traffic of A, B and C
 * (roofline), plus a fixed per-kernel cost. Memory-bound kernels (norms, activations, dropout,
 * softmax, optimizer) stream their bytes at hbm_eff of the HBM bandwidth. */
#include <math.h>

#include "sim/sim.h"

#include <float.h>

#define K_RAMP 64.0

double sim_peak_flops(const GpuSpec *g, SimDtype dt) {
    double p = g->peak_tflops[dt];
    if (p <= 0 && dt == DT_BF16) p = g->peak_tflops[DT_FP16];
    if (p <= 0 && dt == DT_FP16) p = g->peak_tflops[DT_BF16];
    if (p <= 0 && dt == DT_FP8) p = g->peak_tflops[DT_BF16];
    if (p <= 0 && dt == DT_TF32) p = g->peak_tflops[DT_FP32];
    return p * 1e12;
}

/* cuBLAS picks narrower tiles for skinny operands: a power of two from 16 to the tile side */
static double tile_for(double dim, double tile) {
    double t = 16;
    while (t < dim && t < tile) t *= 2;
    return t;
}

static double eff_batched(const GpuSpec *g, double M, double N, double K, double batch) {
    double tile = g->tile > 0 ? g->tile : 128;
    double am = tile_for(M, tile), an = tile_for(N, tile);
    double tm = ceil(M / am), tn = ceil(N / an);
    double pad = (M * N) / (tm * am * tn * an);
    double tiles = tm * tn * batch;
    double waves = ceil(tiles / g->sms);
    double fill = tiles / (waves * g->sms);
    double ramp = K / (K + K_RAMP);
    return g->gemm_eff * pad * fill * ramp;
}

double sim_gemm_eff(const GpuSpec *g, double M, double N, double K) { return eff_batched(g, M, N, K, 1); }

/* Rate of the measured shape nearest to (M, N, K) in log space (myriad bench calibrate). */
static double measured_rate(const GpuSpec *g, double M, double N, double K) {
    double best = DBL_MAX, rate = 0;
    for (int i = 0; i < g->ngemm; i++) {
        const double *r = g->gemm_table[i];
        double d = fabs(log(M / r[0])) + fabs(log(N / r[1])) + fabs(log(K / r[2]));
        if (d < best) { best = d; rate = r[3]; }
    }
    return rate;
}

double sim_gemm_time(const GpuSpec *g, SimDtype dt, double M, double N, double K, double batch) {
    if (M <= 0 || N <= 0 || K <= 0 || batch <= 0) return 0;
    double flops = 2.0 * M * N * K * batch;
    if (g->ngemm > 0) return flops / measured_rate(g, M, N, K) + g->kernel_us * 1e-6 * batch;
    double eb = dt == DT_FP8 ? 1.0 : sim_dtype_bytes(dt);
    double bytes = eb * (M * K + K * N) * batch + 2.0 * M * N * batch; /* fp8 GEMMs write 16-bit outputs */
    if (dt != DT_FP8) bytes = eb * (M * K + K * N + M * N) * batch;
    double eff = eff_batched(g, M, N, K, batch);
    if (dt == DT_FP8 && g->gemm_eff_fp8 > 0) eff *= g->gemm_eff_fp8 / g->gemm_eff;
    if (g->sustained > 0) eff *= g->sustained;
    double compute = flops / (sim_peak_flops(g, dt) * eff);
    double memory = bytes / (g->hbm_tbps * 1e12 * g->hbm_eff);
    return fmax(compute, memory) + g->kernel_us * 1e-6;
}

double sim_membound_time(const GpuSpec *g, double bytes, int kernels) {
    return bytes / (g->hbm_tbps * 1e12 * g->hbm_eff) + kernels * g->kernel_us * 1e-6;
}
