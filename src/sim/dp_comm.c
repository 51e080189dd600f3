/* dp_comm.c: data-parallel communication and the optimizer step.
 * Weights are replicated over dp x cp ranks (context parallelism splits tokens, not weights), so
 * gradients are reduced and ZeRO shards are cut over dp x cp (Megatron-LM's
 * data_parallel_group_with_context_parallel; torchtitan's dp_shard_cp mesh); experts are
 * replicated over dp x cp / ep.
 *   zero 0: all-reduce of the gradients (grad_bytes each);
 *   zero 1-2 (distributed optimizer): reduce-scatter of the gradients, all-gather of the updated
 *     parameters (2 bytes, 1 with fp8 parameter gathers);
 *   zero 3 with pp > 1 (FSDP under a pipeline: torchtitan keeps the stage's parameters gathered
 *     for all micro-batches and reduces once): as zero 1-2;
 *   zero 3 with pp = 1 (FSDP): per layer, see step.c; the gradients' reduce-scatter runs layer by
 *     layer behind the last micro-batch's backward.
 * Overlap (overlap_dp): a virtual stage's reduction may start when its last backward ends; it is
 * cut in 40 M-element buckets that follow the backward through the chunk, and the chunks' reductions
 * queue on the network one after the other (Megatron-LM's --overlap-grad-reduce, one bucket set per
 * model chunk). The parameter all-gather hides under the stage's warm-up forwards except for its
 * first bucket (--overlap-param-gather; FSDP prefetch). Without overlap everything waits after the
 * pipeline. */
#include <math.h>

#include "sim/sim.h"


static Group grp(int size, int stride) { Group g = {size, stride}; return g; }

void sim_dp_plan(const SimModel *m, const Network *net, const Layout *l, DpPlan *d) {
    d->dense = grp(l->dp * l->cp, l->tp);
    int edp = l->dp * l->cp / l->ep;
    d->expert = grp(edp > 0 ? edp : 1, l->tp * l->ep);
    d->per_layer = l->zero >= 3 && l->pp == 1 && l->dp * l->cp > 1;
    d->layer_ag = d->layer_rs = 0;
    if (d->per_layer) {
        double dense, expert;
        Layout one = *l;
        one.pp = 1;
        one.first_layers = one.last_layers = one.n_stage_layers = 0;
        sim_layer_params_split(m, &one, &dense, &expert);
        double wb = l->fp8_gather && l->dtype == DT_FP8 ? 1.0 : 2.0;
        d->layer_ag = sim_coll_time(net, COLL_ALLGATHER, ALG_AUTO, dense * wb, d->dense) +
                      sim_coll_time(net, COLL_ALLGATHER, ALG_AUTO, expert * wb, d->expert);
        d->layer_rs = sim_coll_time(net, COLL_REDUCE_SCATTER, ALG_AUTO, dense * l->grad_bytes, d->dense) +
                      sim_coll_time(net, COLL_REDUCE_SCATTER, ALG_AUTO, expert * l->grad_bytes, d->expert);
    }
}

/* Reduction time of `dense` + `expert` parameters' gradients. */
static double reduce_time(const Network *net, const Layout *l, const DpPlan *d, double dense, double expert) {
    CollKind k = l->zero == 0 ? COLL_ALLREDUCE : COLL_REDUCE_SCATTER;
    return sim_coll_time(net, k, ALG_AUTO, dense * l->grad_bytes, d->dense) +
           sim_coll_time(net, k, ALG_AUTO, expert * l->grad_bytes, d->expert);
}

double sim_dp_exposed(const SimModel *m, const GpuSpec *g, const Network *net, const Layout *l, const DpPlan *d, int s,
                      const int *count, const double *fwd, const double *bwd, const double *done, const PipeResult *pr,
                      int M) {
    if (l->dp * l->cp <= 1) return 0;
    int p = l->pp, v = l->vpp;
    double finish = pr->finish[s];
    if (d->per_layer) {
        /* FSDP: in the last micro-batch's backward the network carries each layer's gather (for
         * the layer below, resharded) and its gradients' reduce-scatter while the GPU computes the
         * layer; the gathers' own waits are already inside the backward ops. What the compute
         * cannot hide, and the last layer's reduce-scatter, wait here. */
        double layers = count[s];
        double agr = l->reshard ? d->layer_ag : 0, per = agr + d->layer_rs;
        if (!l->overlap_dp) return layers * d->layer_rs;
        return fmax(0, layers - 1) * (fmax(0, per - d->lay_b) - fmax(0, agr - d->lay_b)) + d->layer_rs;
    }
    double dense_all = 0, expert_all = 0, t = 0;
    /* chunks in the order their gradients complete */
    int order[1024];
    int n = 0;
    for (int c = 0; c < v && n < 1024; c++) order[n++] = c * p + s;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && done[order[j]] < done[order[j - 1]]; j--) {
            int x = order[j]; order[j] = order[j - 1]; order[j - 1] = x;
        }
    for (int i = 0; i < n; i++) {
        int k = order[i];
        double dense, expert;
        sim_vstage_params_split(m, l, k, count, &dense, &expert);
        dense_all += dense;
        expert_all += expert;
        double red = reduce_time(net, l, d, dense, expert);
        if (!l->overlap_dp) { t = fmax(t, finish) + red; continue; }
        double params = dense + expert;
        double first = fmin(1.0, l->bucket / (params > 0 ? params : 1)); /* one bucket's share */
        double start = done[k] - bwd[k] * (1 - first);                 /* first bucket ready */
        t = fmax(fmax(t, start) + red, done[k] + red * first);
    }
    double exposed = fmax(0, t - finish);
    if (l->zero >= 1) {
        double wb = l->fp8_gather && l->dtype == DT_FP8 ? 1.0 : 2.0;
        if (sim_dtype_bytes(l->dtype) == 4) wb = 4;
        double ag = sim_coll_time(net, COLL_ALLGATHER, ALG_AUTO, dense_all * wb, d->dense) +
                    sim_coll_time(net, COLL_ALLGATHER, ALG_AUTO, expert_all * wb, d->expert);
        if (l->overlap_dp) {
            double params = dense_all + expert_all;
            int warm = v == 1 ? p - s : 2 * (p - s - 1) + (v - 1) * p + 1;
            if (warm > M * v) warm = M * v;
            double window = warm * fwd[s];
            ag = fmax(ag * fmin(1.0, l->bucket / (params > 0 ? params : 1)), ag - window);
        }
        exposed += ag;
    }
    (void)g;
    return exposed;
}

/* Optimizer step of stage s, memory-bound over its local (ZeRO-sharded) parameters.
 * Megatron-LM's mixed-precision optimizer: unscale + inf/nan check (read + write the gradient),
 * global norm (read), Adam (read fp32 master, m, v and the gradient; write master, m, v), copy to
 * the 16-bit weights (read 4, write 2): (4 g + 30) bytes per local parameter, plus g per parameter
 * to zero the gradient buffer. A plain fp32 AdamW on fp32 parameters (torch, FSDP): clip-norm read
 * 4, fused AdamW read p, g, m, v and write p, m, v (28): 32 bytes per local parameter. */
double sim_optimizer_time(const SimModel *m, const GpuSpec *g, const Layout *l, int s, const int *count) {
    double dense = 0, expert = 0;
    for (int k = s; k < l->pp * l->vpp; k += l->pp) {
        double d, e;
        sim_vstage_params_split(m, l, k, count, &d, &e);
        dense += d;
        expert += e;
    }
    double params = dense + expert;
    double dpc = (double)l->dp * l->cp, edp = dpc / l->ep;
    double local = l->zero >= 1 ? dense / dpc + expert / (edp > 0 ? edp : 1) : params;
    double bytes = l->optimizer_passes ? 32.0 * local : local * (4.0 * l->grad_bytes + 30.0) + params * l->grad_bytes;
    if (l->zero >= 2 && !l->optimizer_passes) bytes = local * (5.0 * l->grad_bytes + 30.0);
    return sim_membound_time(g, bytes, 8);
}
