/* step.c: the model of one training step for a layout. It checks the layout, prices one layer's
 * forward and backward for one micro-batch (GEMMs by shape, memory-bound kernels by bytes,
 * tensor/context/expert-parallel collectives by the alpha-beta model), runs the pipeline schedule
 * event by event (pipeline.c), adds the data-parallel gradient reduction (overlapped with the last
 * backward when the layout allows) and the optimizer, and reports time, breakdown, MFU and memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "util/error.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

int sim_check_layout(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, const Layout *l) {
    if (l->tp < 1 || l->cp < 1 || l->pp < 1 || l->vpp < 1 || l->dp < 1 || l->ep < 1)
        return myr_error("tp, cp, pp, vpp, dp and ep must all be at least 1");
    if (l->tp > c->scaleup_domain)
        return myr_error("tp %d exceeds the %d-GPU scale-up domain (tensor parallelism needs NVLink; use tp <= %d and "
                         "more pp)", l->tp, c->scaleup_domain, c->scaleup_domain);
    if (m->heads % l->tp) return myr_error("tp %d does not divide the %d attention heads", l->tp, m->heads);
    if (m->kv_heads % l->tp && l->tp % m->kv_heads)
        return myr_error("tp %d and the %d kv heads must divide one another", l->tp, m->kv_heads);
    if (m->layers % (l->pp * l->vpp))
        return myr_error("pp %d x vpp %d does not divide the %d layers", l->pp, l->vpp, m->layers);
    if (l->seq < 1) return myr_error("sequence length must be positive");
    if (l->seq % l->cp) return myr_error("cp %d does not divide the sequence length %d", l->cp, l->seq);
    if (l->global_batch < 1) return myr_error("global batch must be positive");
    if (l->global_batch % l->dp)
        return myr_error("global batch %d is not a multiple of dp %d", l->global_batch, l->dp);
    int per_dp = l->global_batch / l->dp;
    if (l->micro_batch > 0 && per_dp % l->micro_batch)
        return myr_error("micro batch %d does not divide the %d sequences per data-parallel rank", l->micro_batch, per_dp);
    if (l->ep > 1) {
        if (m->experts <= 1) return myr_error("ep %d needs a mixture-of-experts model (this one is dense)", l->ep);
        if (m->experts % l->ep) return myr_error("ep %d does not divide the %d experts", l->ep, m->experts);
        if (l->dp % l->ep) return myr_error("ep %d must divide dp %d (experts are spread over data-parallel ranks)", l->ep, l->dp);
    }
    if (l->zero < 0 || l->zero > 3) return myr_error("zero must be 0, 1, 2 or 3");
    if (g->peak_tflops[l->dtype] <= 0 && !(l->dtype == DT_BF16 && g->peak_tflops[DT_FP16] > 0) &&
        !(l->dtype == DT_FP16 && g->peak_tflops[DT_BF16] > 0))
        return myr_error("%s has no %s tensor cores (choose another --dtype)", g->name, sim_dtype_name(l->dtype));
    if (l->vpp > 1 && l->pp == 1) return myr_error("vpp %d needs pipeline parallelism (pp > 1)", l->vpp);
    if (l->vpp > 1 && l->schedule == SCHED_GPIPE) return myr_error("the GPipe schedule has no interleaving (vpp 1)");
    if (l->vpp > 1 && l->micro_batch > 0 && (per_dp / l->micro_batch) % l->pp)
        return myr_error("the interleaved schedule needs micro-batches (%d) to be a multiple of pp %d",
                         per_dp / l->micro_batch, l->pp);
    long gpus = (long)l->tp * l->cp * l->pp * l->dp;
    if (c->gpus > 0 && gpus > c->gpus)
        return myr_error("layout needs %ld GPUs, the cluster %s has %d", gpus, c->name, c->gpus);
    return 0;
}

/* Rank order: tp fastest, then cp, then dp (ep is the fastest part of dp), then pp (Megatron-LM). */
static Group grp(int size, int stride) { Group g = {size, stride}; return g; }

typedef struct {
    double gemm_f, gemm_b;   /* weight GEMMs and attention core */
    double mem_f, mem_b;     /* memory-bound kernels */
    double tp_f, tp_b;       /* tensor-parallel collectives (not overlapped) */
    double cp_f, cp_b;       /* exposed context-parallel KV exchange */
    double ep_f, ep_b;       /* expert-parallel all-to-all */
    double core_f, core_mem_f; /* attention core alone (what selective recompute re-runs) */
} LayerCost;

static void layer_cost(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, const Network *net,
                       const Layout *l, int b, LayerCost *o) {
    memset(o, 0, sizeof *o);
    SimDtype dt = l->dtype;
    double e = sim_dtype_bytes(dt);
    double t = l->tp, cp = l->cp;
    double sl = l->seq / cp, S = l->seq;
    double T = b * sl; /* local tokens */
    double h = m->hidden, hd = (double)m->hidden / m->heads, kv = m->kv_heads * hd;
    double heads_local = m->heads / t;
    double kv_local = kv >= t * hd ? kv / t : kv; /* fewer kv heads than tp: replicated */
    /* weight GEMMs: (M, N, K); backward = dgrad (M, K, N) + wgrad (K, N, M) */
    double G[6][3];
    int ng = 0;
    G[ng][0] = T; G[ng][1] = (h / t) + 2 * kv_local; G[ng][2] = h; ng++;   /* QKV */
    G[ng][0] = T; G[ng][1] = h; G[ng][2] = h / t; ng++;                    /* output projection */
    double f = m->experts > 1 ? m->expert_ffn : m->ffn;
    double mlp_batch = 1, Tm = T;
    if (m->experts > 1) {
        mlp_batch = (double)m->experts / l->ep;                /* local experts */
        Tm = T * m->top_k * l->ep / m->experts;                /* tokens per local expert (balanced) */
        G[ng][0] = T; G[ng][1] = m->experts; G[ng][2] = h; ng++; /* router */
    }
    int mlp_first = ng;
    if (m->llama) { G[ng][0] = Tm; G[ng][1] = 2 * f / t; G[ng][2] = h; ng++; }
    else { G[ng][0] = Tm; G[ng][1] = f / t; G[ng][2] = h; ng++; }
    G[ng][0] = Tm; G[ng][1] = h; G[ng][2] = f / t; ng++;
    for (int i = 0; i < ng; i++) {
        double batch = i >= mlp_first ? mlp_batch : 1;
        o->gemm_f += sim_gemm_time(g, dt, G[i][0], G[i][1], G[i][2], batch);
        o->gemm_b += sim_gemm_time(g, dt, G[i][0], G[i][2], G[i][1], batch) +
                     sim_gemm_time(g, dt, G[i][2], G[i][1], G[i][0], batch);
    }
    /* attention core: QK^T (sl x S x hd) and PV (sl x hd x S) per local head and sequence */
    double nb = b * heads_local;
    double core = sim_gemm_time(g, dt, sl, S, hd, nb) + sim_gemm_time(g, dt, sl, hd, S, nb);
    double core_mem = 0;
    if (l->flash) {
        core *= 0.5; /* causal: fused kernels skip the masked half */
        o->core_f = core;
        o->gemm_f += core;
        o->gemm_b += 2.5 * core; /* FlashAttention-2 backward: 5 matmuls vs 2 */
    } else {
        /* fused scale-mask-softmax (read + write) and dropout (read, write, 1-byte mask) on sl x S scores */
        double scores = nb * sl * S;
        core_mem = sim_membound_time(g, e * (m->llama ? 2.0 : 4.5) * scores, m->llama ? 1 : 2);
        o->core_f = core;
        o->gemm_f += core;
        o->gemm_b += 2 * core;
        o->mem_f += core_mem;
        o->mem_b += 2 * core_mem;
    }
    o->core_mem_f = core_mem;
    /* other memory-bound kernels: norms, residual (+bias, dropout) on T h (/t with sp), activation */
    double rows = l->sp && t > 1 ? T / t : T;
    double elems = (m->llama ? 10.0 : 11.0) * rows * h;
    elems += (m->llama ? 3.0 : 2.0) * Tm * mlp_batch * f / t;
    if (m->llama) elems += 2.0 * T * (h / t + kv_local); /* rotary on q and k */
    int kernels = m->llama ? 6 : 6;
    double mem = sim_membound_time(g, e * elems, kernels);
    o->mem_f += mem;
    o->mem_b += 2 * mem;
    /* tensor parallel: 2 all-reduces (or all-gather + reduce-scatter with sp) forward, 2 backward */
    if (t > 1) {
        double bytes = T * h * e;
        /* with sp each all-reduce becomes an all-gather + a reduce-scatter of the same bytes */
        double one = l->sp ? 2 * sim_coll_time(net, COLL_ALLGATHER, ALG_AUTO, bytes, grp(l->tp, 1))
                           : sim_coll_time(net, COLL_ALLREDUCE, ALG_AUTO, bytes, grp(l->tp, 1));
        o->tp_f = 2 * one;
        o->tp_b = 2 * one;
    }
    /* context parallel: ring exchange of K and V chunks, overlapped with the attention core */
    if (cp > 1) {
        double kvbytes = 2.0 * T * kv_local * e;
        double ring = (cp - 1) * sim_coll_time(net, COLL_P2P, ALG_AUTO, kvbytes, grp(2, l->tp));
        o->cp_f = fmax(0, ring - core);
        o->cp_b = fmax(0, 2 * ring - 2 * core);
    }
    /* expert parallel: dispatch + combine all-to-all forward, the same backward */
    if (l->ep > 1) {
        double bytes = T * m->top_k * h * e;
        double a2a = sim_coll_time(net, COLL_ALLTOALL, ALG_AUTO, bytes, grp(l->ep, l->tp * l->cp));
        o->ep_f = 2 * a2a;
        o->ep_b = 2 * a2a;
    }
    (void)c;
}

static double peak_of(const GpuSpec *g, SimDtype dt) {
    double p = g->peak_tflops[dt];
    if (p <= 0) p = g->peak_tflops[dt == DT_BF16 ? DT_FP16 : DT_BF16];
    return p * 1e12;
}

int sim_step(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, const Layout *lin, SimResult *r,
             TraceWriter *trace) {
    if (sim_check_layout(m, c, g, lin)) return -1;
    Layout L = *lin;
    Layout *l = &L;
    if (l->tp == 1) l->sp = 0;
    if (l->micro_batch <= 0) l->micro_batch = 1;
    memset(r, 0, sizeof *r);
    Network net;
    sim_network(c, g, &net);
    int b = l->micro_batch;
    int per_dp = l->global_batch / l->dp;
    int M = per_dp / b;
    int p = l->pp, v = l->vpp, V = p * v;
    if (p > 1024) return myr_error("pp %d is above the simulator's 1024 stages", p);
    double e = sim_dtype_bytes(l->dtype);
    LayerCost lc;
    layer_cost(m, c, g, &net, l, b, &lc);
    double T = (double)b * l->seq / l->cp;
    double rec_f = 0, rec_tp = 0;
    if (l->recompute == RECOMPUTE_FULL) { rec_f = lc.gemm_f + lc.mem_f + lc.cp_f + lc.ep_f; rec_tp = lc.tp_f; }
    else if (l->recompute == RECOMPUTE_SELECTIVE && !l->flash) rec_f = lc.core_f + lc.core_mem_f;
    double layer_f = lc.gemm_f + lc.mem_f + lc.tp_f + lc.cp_f + lc.ep_f;
    double layer_b = lc.gemm_b + lc.mem_b + lc.tp_b + lc.cp_b + lc.ep_b + rec_f + rec_tp;
    /* embedding (first virtual stage) and logits + cross-entropy (last) */
    double emb_f = sim_membound_time(g, 3.0 * T * m->hidden * e, 2);
    double emb_b = 2 * emb_f;
    double vl = (double)m->vocab / l->tp;
    double logit_f = sim_gemm_time(g, l->dtype, T, vl, m->hidden, 1) + sim_membound_time(g, 3.0 * 4.0 * T * vl, 3);
    double logit_b = sim_gemm_time(g, l->dtype, T, m->hidden, vl, 1) + sim_gemm_time(g, l->dtype, m->hidden, vl, T, 1) +
                     sim_membound_time(g, 2.0 * 4.0 * T * vl, 2);
    double per_chunk = (double)m->layers / V;
    double *fwd = malloc(sizeof(double) * V), *bwd = malloc(sizeof(double) * V);
    if (!fwd || !bwd) { free(fwd); free(bwd); return myr_error("out of memory"); }
    for (int k = 0; k < V; k++) {
        fwd[k] = per_chunk * layer_f;
        bwd[k] = per_chunk * layer_b;
    }
    /* without gradient-accumulation fusion every micro-batch's low-precision weight gradients are
     * added into the fp32 main gradients by a separate pass: read main + read grad + write main */
    double *accum = calloc((size_t)V, sizeof(double));
    if (!accum) { free(fwd); free(bwd); return myr_error("out of memory"); }
    if (!l->fused_grad_accum)
        for (int k = 0; k < V; k++) {
            double params = sim_stage_params(m, l, k % p) / v;
            accum[k] = sim_membound_time(g, params * (2.0 * l->grad_bytes + e), 1);
            bwd[k] += accum[k];
        }
    fwd[0] += emb_f; bwd[0] += emb_b;
    fwd[V - 1] += logit_f; bwd[V - 1] += logit_b;
    /* pipeline transfers: one micro-batch's activations (scatter-gather: 1/tp per rank) */
    double p2p = 0;
    if (p > 1) {
        double bytes = T * m->hidden * e / l->tp;
        p2p = sim_coll_time(&net, COLL_P2P, ALG_AUTO, bytes, grp(2, l->tp * l->cp * l->dp));
        if (!l->sp && l->tp > 1) p2p += sim_coll_time(&net, COLL_ALLGATHER, ALG_AUTO, bytes * l->tp, grp(l->tp, 1));
    }
    /* blocking point-to-point (no --overlap-p2p-comm): each op also waits out one exchange */
    int blocking = p > 1 && !l->overlap_p2p;
    if (blocking)
        for (int k = 0; k < V; k++) { fwd[k] += p2p; bwd[k] += p2p; }
    PipeResult *pr = malloc(sizeof *pr), *pr0 = malloc(sizeof *pr0);
    int rc = (!pr || !pr0) ? myr_error("out of memory") : 0;
    if (!rc) rc = sim_pipeline(p, v, M, l->vpp > 1 ? SCHED_INTERLEAVED : l->schedule, fwd, bwd, p2p, pr, trace);
    if (!rc) rc = p > 1 ? sim_pipeline(p, v, M, l->vpp > 1 ? SCHED_INTERLEAVED : l->schedule, fwd, bwd, 0, pr0, NULL) : 0;
    if (rc) { free(fwd); free(bwd); free(accum); free(pr); free(pr0); return -1; }
    if (p == 1) *pr0 = *pr;
    /* data-parallel gradient reduction and optimizer, per stage; the step ends with the slowest */
    Group dpg = grp(l->dp, l->tp * l->cp);
    int crit = 0;
    double end = -1, crit_dp = 0, crit_opt = 0;
    int edp = l->dp / l->ep; /* experts are replicated over dp / ep ranks */
    Group edpg = grp(edp, l->tp * l->cp * l->ep);
    for (int s = 0; s < p; s++) {
        if (s > 1 && s < p - 1) continue; /* middle stages are alike */
        double dense, expert;
        sim_stage_params_split(m, l, s, &dense, &expert);
        double params = dense + expert;
        double wb = e == 4 ? 4 : 2;
        double dpt = 0, opt_params = params;
        if (l->dp > 1) {
            CollKind red = l->zero == 0 ? COLL_ALLREDUCE : COLL_REDUCE_SCATTER;
            double red_t = sim_coll_time(&net, red, ALG_AUTO, dense * l->grad_bytes, dpg) +
                           sim_coll_time(&net, red, ALG_AUTO, expert * l->grad_bytes, edpg);
            if (l->overlap_dp) {
                double last_bucket = red_t * fmin(1.0, 40e6 / params);
                red_t = fmax(last_bucket, red_t - pr->last_bwd[s]);
            }
            dpt = red_t;
            if (l->zero >= 1) {
                opt_params = dense / l->dp + expert / edp;
                double ag = sim_coll_time(&net, COLL_ALLGATHER, ALG_AUTO, dense * wb, dpg) +
                            sim_coll_time(&net, COLL_ALLGATHER, ALG_AUTO, expert * wb, edpg);
                if (l->zero >= 3) ag *= 2; /* parameters gathered for forward and again for backward */
                if (l->overlap_dp) ag = fmax(ag * fmin(1.0, 40e6 / params), ag - fwd[s]);
                dpt += ag;
            }
        }
        /* Megatron's mixed-precision optimizer, per local parameter: unscale and inf/nan check
         * (read + write the gradient), global norm (read), Adam (read fp32 master, m, v and the
         * gradient; write master, m, v), copy to the low-precision weights (read 4, write 2); and
         * zeroing the local gradient buffer for the next step */
        double opt = sim_membound_time(g, opt_params * (4.0 * l->grad_bytes + 30.0) + params * l->grad_bytes, 8);
        double fin = pr->finish[s] + dpt + opt;
        if (fin > end) { end = fin; crit = s; crit_dp = dpt; crit_opt = opt; }
    }
    r->step_time = end;
    double chunks = (double)M * v;
    double busy = pr->busy[crit];
    r->forward = chunks * per_chunk * (lc.gemm_f + lc.mem_f) + (crit == 0 ? M * emb_f : 0) + (crit == p - 1 ? M * logit_f : 0);
    r->backward = chunks * per_chunk * (lc.gemm_b + lc.mem_b) + (crit == 0 ? M * emb_b : 0) + (crit == p - 1 ? M * logit_b : 0);
    for (int c = 0; c < v; c++) r->backward += M * accum[c * p + crit];
    r->recompute = chunks * per_chunk * rec_f;
    r->tp_comm = chunks * per_chunk * (lc.tp_f + lc.tp_b + rec_tp);
    r->cp_comm = chunks * per_chunk * (lc.cp_f + lc.cp_b);
    r->ep_comm = chunks * per_chunk * (lc.ep_f + lc.ep_b);
    r->pp_comm = pr->finish[crit] - pr0->finish[crit];
    if (r->pp_comm < 0) r->pp_comm = 0;
    r->bubble = pr->finish[crit] - busy - r->pp_comm;
    if (r->bubble < 0) r->bubble = 0;
    if (blocking) r->pp_comm += 2 * chunks * p2p; /* inside `busy`: the stage waited on its own transfers */
    r->dp_comm = crit_dp;
    r->optimizer = crit_opt;
    r->gpus = l->tp * l->cp * l->pp * l->dp;
    double fwd_flops = sim_model_fwd_flops(m, l->seq);
    double layer_share = (fwd_flops - 2.0 * l->seq * (double)m->hidden * m->vocab) / fwd_flops;
    double rec_share = l->recompute == RECOMPUTE_FULL ? layer_share
                       : l->recompute == RECOMPUTE_SELECTIVE && !l->flash
                           ? m->layers * 4.0 * l->seq * (double)l->seq * m->hidden / fwd_flops : 0;
    r->model_flops = 3.0 * fwd_flops * l->global_batch;
    r->hw_flops = (3.0 + rec_share) * fwd_flops * l->global_batch;
    double peak = peak_of(g, l->dtype);
    r->mfu = r->model_flops / (r->step_time * r->gpus * peak);
    r->hfu = r->hw_flops / (r->step_time * r->gpus * peak);
    r->tflops_per_gpu = r->hw_flops / (r->step_time * r->gpus) / 1e12;
    r->tokens_per_s = (double)l->global_batch * l->seq / r->step_time;
    r->micro_batch = b;
    r->vpp = v;
    r->microbatches = M;
    sim_memory(m, l, &r->mem);
    if (trace) {
        trace_lane(trace, p, "data parallel + optimizer");
        for (int s = 0; s < p; s++) {
            if (s > 1 && s < p - 1) continue;
            trace_event(trace, p, s == crit ? "dp reduce + optimizer (critical stage)" : "dp reduce + optimizer",
                        pr->finish[s], end - pr->finish[s]);
        }
    }
    free(fwd); free(bwd); free(accum); free(pr); free(pr0);
    return 0;
}

static int divisors_upto(int n, int cap, int *out, int max_out) {
    int k = 0;
    for (int d = 1; d <= n && d <= cap && k < max_out; d++)
        if (n % d == 0) out[k++] = d;
    return k;
}

int sim_step_search(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, Layout *l, int search_vpp,
                    SimResult *r) {
    int per_dp = l->dp > 0 ? l->global_batch / l->dp : 0;
    int bs[64], nb, vs[16], nv;
    if (l->micro_batch > 0) { bs[0] = l->micro_batch; nb = 1; }
    else nb = divisors_upto(per_dp > 0 ? per_dp : 1, 16, bs, 64);
    if (search_vpp && l->pp > 1) nv = divisors_upto(m->layers / l->pp > 0 ? m->layers / l->pp : 1, 8, vs, 16);
    else { vs[0] = l->vpp; nv = 1; }
    double cap = g->hbm_gib * GIB;
    int found = 0, found_fit = 0;
    SimResult best = {0};
    Layout best_l = *l;
    char err[512] = "";
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < nv; j++) {
            Layout x = *l;
            x.micro_batch = bs[i];
            x.vpp = vs[j];
            SimResult t;
            if (sim_step(m, c, g, &x, &t, NULL)) {
                if (!err[0]) snprintf(err, sizeof err, "%s", myr_last_error());
                continue;
            }
            int fits = t.mem.total <= cap;
            int better = !found || (fits && !found_fit) ||
                         (fits == found_fit && (fits ? t.step_time < best.step_time : t.mem.total < best.mem.total));
            if (better) { best = t; best_l = x; found = 1; found_fit = fits; }
        }
    if (!found) return myr_error("%s", err[0] ? err : "no valid micro-batch / vpp for this layout");
    *l = best_l;
    *r = best;
    return 0;
}
