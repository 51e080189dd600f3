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
        if (l->selective_op) {
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
    SimDtype ad = l->dtype == DT_FP8 ? DT_BF16 : l->dtype;
    double e = sim_dtype_bytes(ad);
    LayerCost lc;
    sim_layer_cost(m, g, &net, l, b, &lc);
    double T = lc.tokens;
    if (getenv("MYRIAD_SIM_DEBUG"))
        fprintf(stderr, "layer x mb: gemm %.3g/%.3g attn %.3g/%.3g elem %.3g/%.3g fp8 %.3g/%.3g tp %.3g/%.3g cp %.3g/%.3g ep %.3g/%.3g wcast %.3g\n",
                lc.gemm_f, lc.gemm_b, lc.attn_f, lc.attn_b, lc.elem_f, lc.elem_b, lc.fp8_f, lc.fp8_b, lc.tp_f, lc.tp_b, lc.cp_f,
                lc.cp_b, lc.ep_f, lc.ep_b, lc.weight_cast);
    double rec, rec_comm;
    recompute_cost(l, &lc, &rec, &rec_comm);
    double lay_f = lc.gemm_f + lc.attn_f + lc.elem_f + lc.fp8_f + lc.tp_f + lc.cp_f + lc.ep_f;
    double lay_b = lc.gemm_b + lc.attn_b + lc.elem_b + lc.fp8_b + lc.tp_b + lc.cp_b + lc.ep_b + rec + rec_comm;
    /* ZeRO 3 without pipelining (FSDP): every micro-batch gathers each layer's parameters before
     * its forward (prefetched under the previous layer) and, resharded, again before its backward;
     * the gradients are reduce-scattered after the last micro-batch's backward (dp_comm.c) */
    DpPlan dpp;
    sim_dp_plan(m, &net, l, &dpp);
    dpp.lay_b = lay_b;
    double fsdp_f = 0, fsdp_b = 0;
    if (dpp.per_layer) {
        fsdp_f = fmax(0, dpp.layer_ag - lay_f);
        fsdp_b = l->reshard ? fmax(0, dpp.layer_ag - lay_b) : 0;
    }
    int *count = malloc(sizeof(int) * (size_t)V);
    double *fwd = malloc(sizeof(double) * V), *bwd = malloc(sizeof(double) * V), *accum = calloc((size_t)V, sizeof(double));
    double *done = malloc(sizeof(double) * V);
    PipeResult *pr = malloc(sizeof *pr), *pr0 = malloc(sizeof *pr0);
    int rc = (!count || !fwd || !bwd || !accum || !done || !pr || !pr0) ? myr_error("out of memory") : 0;
    if (!rc) rc = sim_vstage_layers(m, l, count);
    if (rc) goto out;
    for (int k = 0; k < V; k++) {
        fwd[k] = count[k] * (lay_f + fsdp_f);
        bwd[k] = count[k] * (lay_b + fsdp_b);
    }
    if (dpp.per_layer) fwd[0] += dpp.layer_ag; /* nothing to hide the first layer's gather under */
    /* fp8 weights without a per-step cache (torchao) are cast at every use (forward, and transposed
     * for dgrad); fp8 parameters (fp8_gather) need no cast */
    int cast_per_use = l->dtype == DT_FP8 && !l->fp8_cache && !l->fp8_gather;
    if (cast_per_use)
        for (int k = 0; k < V; k++) { fwd[k] += count[k] * lc.weight_cast / 2; bwd[k] += count[k] * lc.weight_cast / 2; }
    /* without gradient-accumulation fusion every micro-batch's low-precision weight gradients are
     * added into the fp32 main gradients by a separate pass: read main + read grad + write main */
    if (!l->fused_grad_accum)
        for (int k = 0; k < V; k++) {
            double params = sim_model_layer_params(m) / l->tp * count[k];
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
    PipeSchedule sched = v > 1 ? SCHED_INTERLEAVED : l->schedule;
    rc = sim_pipeline_ex(p, v, M, sched, fwd, bwd, p2p, done, pr, trace);
    if (!rc) rc = p > 1 ? sim_pipeline(p, v, M, sched, fwd, bwd, 0, pr0, NULL) : 0;
    if (rc) goto out;
    if (p == 1) *pr0 = *pr;
    /* data-parallel reduction, parameter gather, fp8 weight casts and the optimizer, per stage; the
     * step ends with the slowest stage */
    int crit = 0;
    double end = -1, crit_dp = 0, crit_opt = 0;
    for (int s = 0; s < p; s++) {
        if (s > 1 && s < p - 1 && !sim_uneven(l)) continue; /* middle stages are alike */
        double dpt = sim_dp_exposed(m, g, &net, l, &dpp, s, count, fwd, bwd, done, pr, M);
        double opt = sim_optimizer_time(m, g, l, s, count);
        if (l->dtype == DT_FP8 && l->fp8_cache) {
            /* Transformer Engine casts each weight once per step (cached over the micro-batches) */
            int layers = 0;
            for (int k = s; k < V; k += p) layers += count[k];
            /* fp8 parameters arrive cast by the optimizer; only their transposes are made here */
            opt += layers * lc.weight_cast * (l->fp8_gather ? 1.0 / 3 : 1.0);
        }
        double fin = pr->finish[s] + dpt + opt;
        if (fin > end) { end = fin; crit = s; crit_dp = dpt; crit_opt = opt; }
    }
    r->step_time = end;
    double busy = pr->busy[crit];
    double crit_layers = 0;
    for (int k = crit; k < V; k += p) crit_layers += count[k];
    double mbs = M;
    r->forward = mbs * crit_layers * (lc.gemm_f + lc.attn_f + lc.elem_f + lc.fp8_f) + (crit == 0 ? M * emb_f : 0) +
                 (crit == p - 1 ? M * logit_f : 0);
    r->backward = mbs * crit_layers * (lc.gemm_b + lc.attn_b + lc.elem_b + lc.fp8_b) + (crit == 0 ? M * emb_b : 0) +
                  (crit == p - 1 ? M * logit_b : 0);
    for (int k = crit; k < V; k += p) r->backward += M * accum[k];
    if (cast_per_use) r->forward += mbs * crit_layers * lc.weight_cast;
    r->recompute = mbs * crit_layers * rec;
    r->tp_comm = mbs * crit_layers * (lc.tp_f + lc.tp_b + rec_comm);
    r->cp_comm = mbs * crit_layers * (lc.cp_f + lc.cp_b);
    r->ep_comm = mbs * crit_layers * (lc.ep_f + lc.ep_b);
    r->pp_comm = pr->finish[crit] - pr0->finish[crit];
    if (r->pp_comm < 0) r->pp_comm = 0;
    r->bubble = pr->finish[crit] - busy - r->pp_comm;
    if (r->bubble < 0) r->bubble = 0;
    if (blocking) r->pp_comm += 2 * mbs * v * p2p; /* inside `busy`: the stage waited on its own transfers */
    /* per-layer ZeRO-3 waits are inside the ops: report them with the data-parallel communication */
    double fsdp_in_ops = mbs * (crit_layers * (fsdp_f + fsdp_b) + (crit == 0 && dpp.per_layer ? dpp.layer_ag : 0));
    r->dp_comm = crit_dp + fsdp_in_ops;
    r->optimizer = crit_opt;
    /* what is left of `busy` after the named parts (rounding) goes to the forward */
    double named = r->forward + r->backward + r->recompute + r->tp_comm + r->cp_comm + r->ep_comm + fsdp_in_ops +
                   (blocking ? 2 * mbs * v * p2p : 0);
    r->forward += busy - named;
    r->gpus = l->tp * l->cp * l->pp * l->dp;
    double fwd_flops = sim_model_fwd_flops(m, l->seq);
    double layer_share = (fwd_flops - 2.0 * l->seq * (double)m->hidden * m->vocab) / fwd_flops;
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
    free(count); free(fwd); free(bwd); free(accum); free(done); free(pr); free(pr0);
    return rc;
}
