/* step.c: the model of one training step for a layout. It checks the layout (layout_check.c),
 * prices one layer (layer.c), builds each virtual pipeline stage from its layers (stages.c, uneven
 * splits included), adds the embedding, logits and loss, the per-layer ZeRO-3/FSDP collectives
 * that compute cannot hide, runs the pipeline schedule event by event (pipeline.c), adds the
 * data-parallel reduction and parameter gather (dp_comm.c) and the optimizer, and reports time,
 * breakdown, MFU and memory. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "sim/sim.h"
#include "util/error.h"

static Group grp(int size, int stride) { Group g = {size, stride}; return g; }

/* Layer time added by recomputation in backward. */
static void recompute_cost(const Layout *l, const LayerCost *lc, double *rec, double *rec_comm) {
    *rec = *rec_comm = 0;
    if (l->recompute == RECOMPUTE_FULL) {
        *rec = lc->gemm_f + lc->attn_f + lc->elem_f + lc->fp8_f + lc->cp_f + lc->ep_f;
        *rec_comm = lc->tp_f;
    } else if (l->recompute == RECOMPUTE_SELECTIVE) {
        if (l->selective_ds) {
            *rec = lc->rec_ds; /* DeepSeek-V3: RMSNorms, MLA up-projections, the SwiGLU output */
        } else if (l->selective_op) {
            /* torchtitan: every second matmul and all the elementwise ops, collectives included */
            *rec = lc->rec_op + lc->rec_op_fp8 + lc->elem_f;
            *rec_comm = lc->tp_f / 2;
        } else {
            *rec = lc->attn_f; /* Megatron: the attention core (checkpoint_core_attention; fused kernels too) */
        }
    }
}

void sim_normalize_layout(Layout *l) {
    if (l->tp == 1) l->sp = 0;
    if (l->micro_batch <= 0) l->micro_batch = 1;
    if (l->vpp < 1) l->vpp = 1;
}

/* One layer kind's times per micro-batch with the schedule's all-to-all overlap applied. */
typedef struct {
    LayerCost lc;
    double f, b;          /* forward; backward incl. recompute */
    double rec, rec_comm;
    double ep_f, ep_b;    /* exposed dispatch/combine (incl. the SM tax of hiding it) */
    double ep_hidden;     /* per micro-batch, forward + backward: what compute hid */
    double ep_tax;        /* compute lost to the SMs the hidden communication held */
    double wgrad;         /* weight-gradient part of the backward (DualPipe's W) */
} KindTimes;

/* frac: share of the ops that run as overlapped pairs (a forward of one micro-batch with a backward
 * of another: Megatron-core's 1F1B a2a overlap in the steady phase, DualPipe's F&B chunks). A pair
 * hides the all-to-all of both behind their compute; while it runs, the communication kernels hold
 * comm_sms of the SMs (DeepSeek-V3 Sec. 3.2.2: 20 of 132), which the compute loses. */
static void kind_times(const Layout *l, const GpuSpec *g, const LayerCost *lc, double frac, KindTimes *k) {
    memset(k, 0, sizeof *k);
    k->lc = *lc;
    recompute_cost(l, lc, &k->rec, &k->rec_comm);
    double comp_f = lc->gemm_f + lc->attn_f + lc->elem_f + lc->fp8_f + lc->tp_f + lc->cp_f;
    double comp_b = lc->gemm_b + lc->attn_b + lc->elem_b + lc->fp8_b + lc->tp_b + lc->cp_b + k->rec + k->rec_comm;
    double C = lc->ep_f + lc->ep_b;
    k->ep_f = lc->ep_f;
    k->ep_b = lc->ep_b;
    if (frac > 0 && C > 0) {
        double exposed = fmax(0, C - (comp_f + comp_b)), hidden = C - exposed;
        double tax = hidden * (g->sms > 0 ? (double)l->comm_sms / g->sms : 0);
        k->ep_f = (1 - frac) * lc->ep_f + frac * (exposed + tax) * lc->ep_f / C;
        k->ep_b = (1 - frac) * lc->ep_b + frac * (exposed + tax) * lc->ep_b / C;
        k->ep_hidden = frac * hidden;
        k->ep_tax = frac * tax;
    }
    k->f = comp_f + k->ep_f;
    k->b = comp_b + k->ep_b;
    k->wgrad = 0.5 * lc->gemm_b; /* wgrad GEMMs: one of the two backward products */
}

/* DualPipe (DeepSeek-V3 Sec. 3.2.1): device d runs stage d for half the micro-batches and stage
 * pp-1-d (the other direction) for the other half, forward and backward chunks of different
 * micro-batches overlapped in pairs; bubble (PP/2 - 1)(F&B + B - 3W) (Table 2), F&B the time of an
 * overlapped pair, B a full backward, W its weight-gradient part. */
static void dualpipe(int p, int M, const double *fwd, const double *bwd, const double *wgr, PipeResult *pr) {
    memset(pr, 0, sizeof *pr);
    for (int d = 0; d < p; d++) {
        int e = p - 1 - d;
        double work = 0.5 * M * (fwd[d] + bwd[d]) + 0.5 * M * (fwd[e] + bwd[e]);
        double F = 0.5 * (fwd[d] + fwd[e]), B = 0.5 * (bwd[d] + bwd[e]), W = 0.5 * (wgr[d] + wgr[e]);
        double bubble = fmax(0, (p / 2.0 - 1) * (F + B + B - 3 * W));
        pr->busy[d] = work;
        pr->finish[d] = work + bubble;
        pr->last_bwd[d] = B;
        if (pr->finish[d] > pr->makespan) pr->makespan = pr->finish[d];
    }
}

/* Expected maximum of n independent standard normals (Blom 1958: the quantile (n - 0.375)/(n + 0.25)),
 * the quantile found by Newton's method on the normal CDF. */
double sim_expected_max_normal(double n) {
    if (n <= 1) return 0;
    double p = (n - 0.375) / (n + 0.25), x = sqrt(2 * log(n));
    for (int i = 0; i < 50; i++) {
        double cdf = 0.5 * erfc(-x / sqrt(2)), pdf = exp(-0.5 * x * x) / sqrt(2 * M_PI);
        double dx = (cdf - p) / pdf;
        x -= dx;
        if (fabs(dx) < 1e-12) break;
    }
    return x;
}

int sim_step(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, const Layout *lin, SimResult *r,
             TraceWriter *trace) {
    if (sim_check_layout(m, c, g, lin)) return -1;
    Layout L = *lin;
    Layout *l = &L;
    sim_normalize_layout(l);
    memset(r, 0, sizeof *r);
    Network net;
    sim_network(c, g, &net);
    int b = l->micro_batch;
    int M = l->global_batch / l->dp / b;
    int p = l->pp, v = l->vpp, V = p * v;
    int dual = l->schedule == SCHED_DUALPIPE && p > 1;
    SimDtype ad = l->dtype == DT_FP8 ? DT_BF16 : l->dtype;
    double e = sim_dtype_bytes(ad);
    /* the overlapped share of the ops: DualPipe all of them; 1F1B with a2a overlap the steady phase
     * of the first stage (its warm-up forwards and cool-down backwards run alone) */
    double frac = 0;
    if (dual) frac = 1;
    else if (l->ep_overlap) {
        int warm = v > 1 ? 2 * (p - 1) + (v - 1) * (l->vpp_group > 0 ? l->vpp_group : p) : p - 1;
        frac = fmax(0, (double)(M * v - warm)) / (M * v);
    }
    LayerCost lcd, lcm;
    sim_layer_cost_kind(m, g, &net, l, b, 0, &lcd);
    if (m->experts > 1) sim_layer_cost_kind(m, g, &net, l, b, 1, &lcm);
    else lcm = lcd;
    KindTimes kd, km;
    kind_times(l, g, &lcd, frac, &kd);
    kind_times(l, g, &lcm, frac, &km);
    const LayerCost *lct = m->experts > 1 ? &lcm : &lcd; /* the typical layer (debug print) */
    double T = lcd.tokens;
    if (getenv("MYRIAD_SIM_DEBUG"))
        fprintf(stderr, "layer x mb: gemm %.3g/%.3g attn %.3g/%.3g elem %.3g/%.3g fp8 %.3g/%.3g tp %.3g/%.3g cp %.3g/%.3g ep %.3g/%.3g wcast %.3g\n",
                lct->gemm_f, lct->gemm_b, lct->attn_f, lct->attn_b, lct->elem_f, lct->elem_b, lct->fp8_f, lct->fp8_b, lct->tp_f,
                lct->tp_b, lct->cp_f, lct->cp_b, lct->ep_f, lct->ep_b, lct->weight_cast);
    /* ZeRO 3 without pipelining (FSDP): every micro-batch gathers each layer's parameters before
     * its forward (prefetched under the previous layer) and, resharded, again before its backward;
     * the gradients are reduce-scattered after the last micro-batch's backward (dp_comm.c) */
    DpPlan dpp;
    sim_dp_plan(m, &net, l, &dpp);
    dpp.lay_b = m->experts > 1 ? km.b : kd.b;
    double fsdp_f = 0, fsdp_b = 0;
    if (dpp.per_layer) {
        double lay_f = m->experts > 1 ? km.f : kd.f;
        fsdp_f = fmax(0, dpp.layer_ag - lay_f);
        fsdp_b = l->reshard ? fmax(0, dpp.layer_ag - dpp.lay_b) : 0;
    }
    int *count = malloc(sizeof(int) * (size_t)V), *nd = malloc(sizeof(int) * (size_t)V), *nm = malloc(sizeof(int) * (size_t)V);
    double *fwd = malloc(sizeof(double) * V), *bwd = malloc(sizeof(double) * V), *accum = calloc((size_t)V, sizeof(double));
    double *done = malloc(sizeof(double) * V), *wgr = calloc((size_t)V, sizeof(double));
    PipeResult *pr = malloc(sizeof *pr), *pr0 = malloc(sizeof *pr0);
    int rc = (!count || !nd || !nm || !fwd || !bwd || !accum || !done || !wgr || !pr || !pr0) ? myr_error("out of memory") : 0;
    if (!rc) rc = sim_vstage_layers(m, l, count);
    if (rc) goto out;
    for (int k = 0; k < V; k++) {
        sim_vstage_kinds(m, count, k, &nd[k], &nm[k]);
        fwd[k] = nd[k] * (kd.f + fsdp_f) + nm[k] * (km.f + fsdp_f);
        bwd[k] = nd[k] * (kd.b + fsdp_b) + nm[k] * (km.b + fsdp_b);
        wgr[k] = nd[k] * kd.wgrad + nm[k] * km.wgrad;
    }
    if (dpp.per_layer) fwd[0] += dpp.layer_ag; /* nothing to hide the first layer's gather under */
    /* fp8 weights without a per-step cache (torchao) are cast at every use (forward, and transposed
     * for dgrad); fp8 parameters (fp8_gather) need no cast */
    int cast_per_use = l->dtype == DT_FP8 && !l->fp8_cache && !l->fp8_gather;
    if (cast_per_use)
        for (int k = 0; k < V; k++) {
            double wc = nd[k] * lcd.weight_cast + nm[k] * lcm.weight_cast;
            fwd[k] += wc / 2;
            bwd[k] += wc / 2;
        }
    /* without gradient-accumulation fusion every micro-batch's low-precision weight gradients are
     * added into the fp32 main gradients by a separate pass: read main + read grad + write main */
    if (!l->fused_grad_accum)
        for (int k = 0; k < V; k++) {
            double d0, e0, d1, e1;
            sim_layer_params_split_kind(m, l, 0, &d0, &e0);
            sim_layer_params_split_kind(m, l, 1, &d1, &e1);
            double params = nd[k] * (d0 + e0) + nm[k] * (d1 + e1);
            accum[k] = sim_membound_time(g, params * (2.0 * l->grad_bytes + e), 1);
            bwd[k] += accum[k];
        }
    /* embedding (first virtual stage) and logits + cross-entropy (last). Megatron's vocab-parallel
     * cross-entropy as eager ops on fp32 logits: cast (r2 w4), max (r4), subtract (r4 w4), exp (r4 w4),
     * sum (r4) = 30 bytes per logit forward; softmax (r4 w4), minus one-hot, times the loss
     * gradient (r4 w4), cast back (r4 w2) = 22 backward. Fused (TE/Megatron cross_entropy_loss_fusion,
     * torch.compile, myriad's kernel): read the logits for the max, read them for the exponentials and
     * write those (3 logit sizes), then scale them into the gradient (2) */
    double emb_f = sim_membound_time(g, 3.0 * T * m->hidden * e, 2), emb_b = 2 * emb_f;
    /* vocab-parallel embedding: each tp rank fills its vocabulary's rows, then they are summed */
    if (l->tp > 1)
        emb_f += l->sp ? sim_coll_time(&net, COLL_REDUCE_SCATTER, ALG_AUTO, T * m->hidden * e, grp(l->tp, 1))
                       : sim_coll_time(&net, COLL_ALLREDUCE, ALG_AUTO, T * m->hidden * e, grp(l->tp, 1));
    double vl = (double)m->vocab / l->tp;
    double el = l->dtype == DT_FP32 ? 4.0 : 2.0; /* bytes of a logit */
    double ce_f = l->fused_ce ? 3.0 * el : 30.0, ce_b = l->fused_ce ? 2.0 * el : 22.0;
    double ce_fwd = sim_membound_time(g, ce_f * T * vl, l->fused_ce ? 1 : 5);
    double ce_bwd = sim_membound_time(g, ce_b * T * vl, l->fused_ce ? 1 : 4);
    /* a measured fused kernel (myriad's, calibrated: on a CPU its exponentials, not its bytes, set
     * the pace) computes the loss and the logits' gradient in one pass, in the forward */
    if (l->fused_ce && g->ce_ns_per_logit > 0) {
        ce_fwd = fmax(ce_fwd + ce_bwd, g->ce_ns_per_logit * 1e-9 * T * vl);
        ce_bwd = 0;
    }
    double logit_f = sim_gemm_time(g, ad, T, vl, m->hidden, 1) + ce_fwd;
    double logit_b = sim_gemm_time(g, ad, T, m->hidden, vl, 1) + sim_gemm_time(g, ad, m->hidden, vl, T, 1) + ce_bwd;
    /* DeepSeek-V3's multi-token prediction (Sec. 2.2) on the last stage: per depth the projection of
     * [norm(h); norm(emb)] (2h -> h), one more layer and one more pass of the shared output head */
    if (m->mtp > 0) {
        const KindTimes *kk = m->experts > 1 ? &km : &kd;
        double proj_f = sim_gemm_time(g, ad, T, m->hidden / l->tp, 2.0 * m->hidden, 1);
        double proj_b = 2 * proj_f;
        double head_f = logit_f, head_b = logit_b;
        logit_f += m->mtp * (proj_f + kk->f + head_f);
        logit_b += m->mtp * (proj_b + kk->b + head_b);
    }
    /* DualPipe: stage 0 and the last stage are on the same devices (both directions' ends) */
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
    int blocking = p > 1 && !l->overlap_p2p && !dual;
    if (blocking)
        for (int k = 0; k < V; k++) { fwd[k] += p2p; bwd[k] += p2p; }
    PipeSchedule sched = v > 1 ? SCHED_INTERLEAVED : l->schedule;
    if (dual) {
        /* DualPipe hides the pipeline transfers in its overlapped chunks (Sec. 3.2.1) */
        dualpipe(p, M, fwd, bwd, wgr, pr);
        *pr0 = *pr;
        for (int k = 0; k < V; k++) done[k] = pr->finish[k];
    } else {
        rc = sim_pipeline_group(p, v, M, l->vpp_group, sched, fwd, bwd, p2p, done, pr, trace);
        if (!rc) rc = p > 1 ? sim_pipeline_group(p, v, M, l->vpp_group, sched, fwd, bwd, 0, NULL, pr0, NULL) : 0;
        if (rc) goto out;
        if (p == 1) *pr0 = *pr;
    }
    /* data-parallel reduction, parameter gather, fp8 weight casts and the optimizer, per stage; the
     * step ends with the slowest stage */
    int crit = 0;
    double end = -1, crit_dp = 0, crit_opt = 0;
    for (int s = 0; s < p; s++) {
        if (s > 1 && s < p - 1 && !sim_uneven(l) && !dual) continue; /* middle stages are alike */
        int held[2] = {s, p - 1 - s}, nh = dual && p - 1 - s != s ? 2 : 1;
        double dpt = 0, opt = 0;
        for (int i = 0; i < nh; i++) {
            int st = held[i];
            /* the mirror stage's gradients complete with the device's last chunk */
            PipeResult *use = pr;
            double keep = pr->finish[st];
            if (i) pr->finish[st] = pr->finish[s];
            dpt += sim_dp_exposed(m, g, &net, l, &dpp, st, count, fwd, bwd, done, use, M);
            pr->finish[st] = keep;
            opt += sim_optimizer_time(m, g, l, st, count);
            if (l->dtype == DT_FP8 && l->fp8_cache) {
                /* Transformer Engine casts each weight once per step (cached over the micro-batches) */
                double wc = 0;
                for (int k = st; k < V; k += p) wc += nd[k] * lcd.weight_cast + nm[k] * lcm.weight_cast;
                /* fp8 parameters arrive cast by the optimizer; only their transposes are made here */
                opt += wc * (l->fp8_gather ? 1.0 / 3 : 1.0);
            }
        }
        double fin = pr->finish[s] + dpt + opt;
        if (fin > end) { end = fin; crit = s; crit_dp = dpt; crit_opt = opt; }
    }
    /* a synchronous step waits for its slowest GPU: with per-GPU step times of coefficient of
     * variation cv (clocks, power and thermal limits, OS and NCCL jitter; PRISM, Golden et al. 2025:
     * up to 14% GEMM variation across a fleet, 9% GPU time variability at 64K GPUs), the compute
     * of the step takes cv x E[max of N normals] longer (the slowest GPU sets every stage's pace) */
    int ngpu = l->tp * l->cp * l->pp * l->dp;
    r->straggler = c->straggler_cv > 0 ? c->straggler_cv * sim_expected_max_normal(ngpu) * pr->finish[crit] : 0;
    end += r->straggler;
    r->step_time = end;
    double busy = pr->busy[crit];
    /* the critical stage's layers by kind (DualPipe: both of its stages, each for half the
     * micro-batches: counted as half of each) */
    double cd = 0, cm = 0, share = 1;
    int has_first = crit == 0, has_last = crit == p - 1;
    if (dual) {
        share = 0.5;
        for (int k = 0; k < V; k += 1)
            if (k == crit || k == p - 1 - crit) { cd += nd[k]; cm += nm[k]; }
        has_first = has_last = crit == 0 || crit == p - 1;
    } else
        for (int k = crit; k < V; k += p) { cd += nd[k]; cm += nm[k]; }
    double mbs = M * share;
#define BOTH(expr_d, expr_m) (cd * (expr_d) + cm * (expr_m))
    r->forward = mbs * BOTH(lcd.gemm_f + lcd.attn_f + lcd.elem_f + lcd.fp8_f, lcm.gemm_f + lcm.attn_f + lcm.elem_f + lcm.fp8_f) +
                 (has_first ? mbs * emb_f : 0) + (has_last ? mbs * logit_f : 0);
    r->backward = mbs * BOTH(lcd.gemm_b + lcd.attn_b + lcd.elem_b + lcd.fp8_b, lcm.gemm_b + lcm.attn_b + lcm.elem_b + lcm.fp8_b) +
                  (has_first ? mbs * emb_b : 0) + (has_last ? mbs * logit_b : 0);
    for (int k = crit; k < V; k += p) r->backward += M * accum[k];
    if (cast_per_use) r->forward += mbs * BOTH(lcd.weight_cast, lcm.weight_cast);
    r->recompute = mbs * BOTH(kd.rec, km.rec);
    r->tp_comm = mbs * BOTH(lcd.tp_f + lcd.tp_b + kd.rec_comm, lcm.tp_f + lcm.tp_b + km.rec_comm);
    r->cp_comm = mbs * BOTH(lcd.cp_f + lcd.cp_b, lcm.cp_f + lcm.cp_b);
    r->ep_comm = mbs * BOTH(kd.ep_f + kd.ep_b, km.ep_f + km.ep_b);
#undef BOTH
    /* the all-to-all in full and what was hidden, on the stage with the most MoE layers (the one the
     * all-to-all costs most; the critical stage may hold none) */
    double most = 0;
    for (int s = 0; s < p; s++) {
        double n = 0;
        if (dual) n = 0.5 * (nm[s] + (p - 1 - s != s ? nm[p - 1 - s] : 0));
        else for (int k = s; k < V; k += p) n += nm[k];
        if (n > most) most = n;
    }
    r->ep_total = M * most * (lcm.ep_f + lcm.ep_b) * (m->experts > 1);
    r->ep_hidden = M * most * km.ep_hidden * (m->experts > 1);
    r->ep_sm_tax = M * most * km.ep_tax * (m->experts > 1);
    r->pp_comm = pr->finish[crit] - pr0->finish[crit];
    if (r->pp_comm < 0) r->pp_comm = 0;
    r->bubble = pr->finish[crit] - busy - r->pp_comm;
    if (r->bubble < 0) r->bubble = 0;
    if (blocking) r->pp_comm += 2 * mbs * v * p2p; /* inside `busy`: the stage waited on its own transfers */
    /* per-layer ZeRO-3 waits are inside the ops: report them with the data-parallel communication */
    double fsdp_in_ops = mbs * ((cd + cm) * (fsdp_f + fsdp_b) + (crit == 0 && dpp.per_layer ? dpp.layer_ag : 0));
    r->dp_comm = crit_dp + fsdp_in_ops;
    r->optimizer = crit_opt;
    /* what is left of `busy` after the named parts (rounding) goes to the forward */
    double named = r->forward + r->backward + r->recompute + r->tp_comm + r->cp_comm + r->ep_comm + fsdp_in_ops +
                   (blocking ? 2 * mbs * v * p2p : 0);
    r->forward += busy - named;
    r->gpus = l->tp * l->cp * l->pp * l->dp;
    double fwd_flops = sim_model_fwd_flops(m, l->seq);
    double layer_share = (fwd_flops - 2.0 * l->seq * (double)m->hidden * m->vocab * (1 + m->mtp)) / fwd_flops;
    double rec_share = l->recompute == RECOMPUTE_FULL ? layer_share
                       : l->recompute == RECOMPUTE_SELECTIVE && l->flash == ATTN_UNFUSED && !l->selective_op
                           ? m->layers * 4.0 * l->seq * (double)l->seq * m->hidden / fwd_flops : 0;
    r->model_flops = 3.0 * fwd_flops * l->global_batch;
    r->hw_flops = (3.0 + rec_share) * fwd_flops * l->global_batch;
    double peak = sim_peak_flops(g, l->dtype);
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
            if (s > 1 && s < p - 1 && !sim_uneven(l)) continue;
            trace_event(trace, p, s == crit ? "dp reduce + optimizer (critical stage)" : "dp reduce + optimizer",
                        pr->finish[s], end - pr->finish[s]);
        }
    }
out:
    free(count); free(nd); free(nm); free(fwd); free(bwd); free(accum); free(done); free(wgr); free(pr); free(pr0);
    return rc;
}
