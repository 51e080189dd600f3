/* moe_router_row.h: the router's per-token math, written once for both backends (cpu_moe.c and
 * cuda_moe.cu include it): softmax over E expert logits + top-k with renormalised gates, and its
 * backward. Sums run in double on both sides so the two backends pick the same experts on near
 * ties. The includer defines MOE_ELEM (the element type: real on the CPU, float on the device)
 * and MOE_ROW_FN (the function qualifiers: `static inline`, or `static __device__ inline`). */
#ifndef MYRIAD_MOE_ROUTER_ROW_H
#define MYRIAD_MOE_ROUTER_ROW_H

#include <math.h>
#include <stdint.h>

/* p: one token's E logits, replaced by its probabilities; t: its k experts, best first (k passes
 * of arg-max; a strict > keeps the lower index on ties); gates: p of the chosen over their sum. */
MOE_ROW_FN void moe_router_topk_row(MOE_ELEM *p, int32_t *t, MOE_ELEM *gates, int E, int k) {
    double mx = p[0], sum = 0;
    for (int e = 1; e < E; e++) mx = p[e] > mx ? p[e] : mx;
    for (int e = 0; e < E; e++) sum += exp((double)p[e] - mx);
    for (int e = 0; e < E; e++) p[e] = (MOE_ELEM)(exp((double)p[e] - mx) / sum);
    double chosen = 0;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++) taken |= t[i] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = e;
        }
        t[j] = best;
        chosen += p[best];
    }
    for (int j = 0; j < k; j++) gates[j] = (MOE_ELEM)(p[t[j]] / chosen);
}

/* d: on entry d(probs) from the auxiliary loss, on exit d(logits). gate j = p[t_j] / S with
 * S = sum of the chosen p, so d p[t_i] += (dg_i - sum_j dg_j g_j) / S; then the softmax:
 * dlogit = p * (dp - sum(dp * p)). */
MOE_ROW_FN void moe_router_backward_row(MOE_ELEM *d, const MOE_ELEM *p, const int32_t *t, const MOE_ELEM *g,
                                        const MOE_ELEM *dg, int E, int k) {
    double S = 0, dot = 0;
    for (int j = 0; j < k; j++) S += p[t[j]], dot += (double)dg[j] * g[j];
    for (int j = 0; j < k; j++) d[t[j]] += (MOE_ELEM)((dg[j] - dot) / S);
    double s = 0;
    for (int e = 0; e < E; e++) s += (double)d[e] * p[e];
    for (int e = 0; e < E; e++) d[e] = (MOE_ELEM)(p[e] * (d[e] - s));
}

#endif
