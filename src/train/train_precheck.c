/* train_precheck.c: a train command line checked for `myriad run` before any rank starts (see
 * train_job.h): a bad layout or shape is then one line from the launcher, not one per rank
 * followed by mpirun's abort messages. The same checks as the run's own (train_layout_plan,
 * schedule_stage_layers, model_plan_ep), so the two cannot disagree. */
#include <stdio.h>
#include <stdlib.h>

#include "model/hf_config.h"
#include "parallel/schedule.h"
#include "train/train_job.h"
#include "util/error.h"

static int check(const TrainOptions *o, int world, TrainLayoutPlan *plan) {
    int tp = o->tp > 0 ? o->tp : 1, pp = o->pp, ep = o->ep, vpp = o->vpp;
    TrainLayoutPlan p;
    if (train_layout_plan(o, tp, pp, ep, vpp, world, &p)) return -1;
    *plan = p;
    ModelConfig cfg;
    if (o->init_dir) {
        char path[4200];
        snprintf(path, sizeof path, "%s/config.json", o->init_dir);
        if (hf_config_read(path, &cfg)) return 0; /* the run says what is wrong with --init (its files) */
    } else
        train_options_model_config(o, &cfg); /* dies with the reason, as the run would */
    int V = pp * vpp, rc = 0;
    int *start = calloc((size_t)V, sizeof(int)), *count = calloc((size_t)V, sizeof(int));
    if (schedule_stage_layers(cfg.layers, pp, vpp, o->n_stage_layers ? o->stage_layers : NULL, o->n_stage_layers, start,
                              count))
        rc = -1;
    for (int vs = 0; !rc && vs < V; vs++) {
        StageSpec spec = {start[vs], start[vs] + count[vs], vs == 0, vs == V - 1};
        Model m;
        rc = model_plan_ep(&m, &cfg, p.dense_dp, tp, 0, ep, 0, &spec);
        if (!rc) param_table_free(&m.table);
        free(m.moe_stats.tokens);
    }
    free(start), free(count);
    if (rc) return -1;
    if (cfg.experts && o->sp) return myr_error("--sp with --experts is not supported (the MoE block needs all rows)");
    if (o->seq > cfg.max_seq)
        return myr_error("--seq %d exceeds the model's %d positions (max_seq); use a shorter --seq or a larger --max-seq",
                         o->seq, cfg.max_seq);
    return 0;
}

/* MYRIAD_PRECHECK_LAYOUT=1 also prints the layout on stdout, one line, for `myriad run --elastic`
 * (src/launch/elastic.c): the data-parallel size, the ranks of one data-parallel replica (world /
 * dp), the global batch, the per-rank micro-batch and micro-batches per step, and whether disk
 * checkpoints are saved during the run (a resized job restores from them). */
void train_precheck_if_asked(const TrainOptions *o) {
    const char *w = getenv("MYRIAD_PRECHECK_WORLD");
    if (!w || !*w) return;
    int world = atoi(w) > 0 ? atoi(w) : 1;
    TrainLayoutPlan p;
    if (check(o, world, &p)) myr_die_last();
    const char *lay = getenv("MYRIAD_PRECHECK_LAYOUT");
    if (lay && *lay == '1')
        printf("layout dp=%d group=%d batch=%d micro=%d accum=%d saves=%d\n", p.dp_size, world / p.dp_size, o->batch,
               p.micro, p.n_micro, o->save_dir && o->save_every != 0);
    exit(0);
}
