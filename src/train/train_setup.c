/* train_setup.c: what a `myriad train` run builds once its layout is known: the model (from
 * the seed or --init) cut into this rank's pipeline chunks and tensor-parallel slices, the
 * training and validation data, a DataParallel engine per chunk, the pipeline, the trainer, the
 * checkpoint state and the in-memory checkpoints; and the banner that says what will run. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/cpu/cpu_gemm.h"
#include "kernels/kernels.h"
#include "model/hf_weights.h"
#include "model/weight_init.h"
#include "parallel/context_parallel.h"
#include "parallel/expert_parallel.h"
#include "parallel/schedule.h"
#include "parallel/tensor_parallel.h"
#include "train/samples.h"
#include "train/device_peak.h"
#include "train/train_job.h"
#include "util/error.h"

/* No rank ever holds the whole model: the config comes from the options or --init's
 * config.json (only headers of its weight files are read here); this rank plans the layers of its
 * pipeline chunks and its tensor-parallel slices (units padded to split over dp), checks that
 * they fit in memory, and allocates only what it keeps (no whole local parameters at ZeRO-3, no
 * whole gradients at ZeRO 2 and 3). The weights are filled later, box by box, into exactly those
 * pieces (fill_weights). */
static void build_model(TrainJob *j) {
    const TrainOptions *o = &j->o;
    ModelConfig cfg;
    j->hf = NULL;
    if (o->init_dir) {
        if (train_agree_failure(j, hf_source_open(o->init_dir, &j->hf) != 0)) train_exit_all(1);
        cfg = *hf_source_config(j->hf);
    } else {
        train_options_model_config(o, &cfg);
    }
    /* a layout choice, not the model's: no file read or written holds the padding */
    cfg.vocab_pad = train_options_vocab_pad(o, kernels_device());
    int pp = j->pp, vpp = j->vpp, V = pp * vpp;
    int *start = calloc((size_t)V, sizeof(int)), *count = calloc((size_t)V, sizeof(int));
    if (schedule_stage_layers(cfg.layers, pp, vpp, o->n_stage_layers ? o->stage_layers : NULL, o->n_stage_layers,
                              start, count))
        train_layout_error(j->rank, "%s", myr_last_error());
    j->chunks = calloc((size_t)vpp, sizeof(Model));
    for (int c = 0; c < vpp; c++) {
        int vs = c * pp + j->pp_rank;
        StageSpec spec = {start[vs], start[vs] + count[vs], vs == 0, vs == V - 1};
        Model *m = &j->chunks[c];
        if (model_plan_ep(m, &cfg, j->shard_ranks, j->tp, j->tp_rank, j->ep, j->ep_rank, &spec))
            train_layout_error(j->rank, "%s", myr_last_error());
        m->tp.sp = o->sp;
        m->cp.size = j->cp, m->cp.rank = j->cp_rank; /* the plan counts this rank's share of a sequence */
        m->doc_mask = o->doc_sep >= 0, m->doc_sep = o->doc_sep;
        m->recompute = (Recompute)o->recompute;
    }
    free(start);
    free(count);
    j->cfg = cfg;
    if (o->doc_sep >= j->cfg.vocab)
        train_layout_error(j->rank, "--doc-mask %d is not a token of the vocabulary (0..%d)", o->doc_sep, j->cfg.vocab - 1);
    if (j->cfg.experts && o->sp)
        train_layout_error(j->rank, "--sp with --experts is not supported (the MoE block needs all rows)");
    if (o->seq > j->cfg.max_seq)
        train_layout_error(j->rank, "--seq %d exceeds the model's %d positions (max_seq); use a shorter --seq or a "
                           "larger --max-seq", o->seq, j->cfg.max_seq);
    /* the tokenizer: its ids must fit the embedding (every rank checks; rank 0 says so) */
    j->tok_path = samples_find_tokenizer(o->tokenizer, o->init_dir, o->data);
    if (samples_load_tokenizer(j->tok_path, j->cfg.vocab, 0, &j->tok)) train_layout_error(j->rank, "%s", myr_last_error());
    train_memory_check(j);
    int zero = j->distributed ? o->dpo.zero : 0;
    for (int c = 0; c < vpp; c++) {
        Model *m = &j->chunks[c];
        model_alloc_parts(m, zero < 3, zero < 2);
        if (j->tp > 1) tp_attach(m, j->groups.tp);
        if (j->ep > 1) ep_attach(m, j->groups.ep, o->a2a_barrier);
        if (j->cp > 1) cp_attach(m, j->groups.cp);
    }
}

/* The weights of this rank's pieces: read from --init's files (each rank only the bytes of its
 * slices), else the seeded initialization (every element's value a function of the seed and its
 * global index: the same model for every layout). Collective (every rank agrees it worked). */
void train_fill_weights(TrainJob *j) {
    double t0 = train_now_s();
    int rc;
    if (j->hf) {
        rc = train_state_fill_params(&j->state, hf_source_box, j->hf);
    } else {
        WeightInit *w;
        rc = weight_init_create(&w, &j->cfg, j->o.seed);
        if (!rc) rc = train_state_fill_params(&j->state, weight_init_box, w);
        weight_init_free(w);
    }
    if (train_agree_failure(j, rc != 0)) train_exit_all(1);
    if (j->hf) { /* each rank read its own slices: the most any rank read, as a share of the checkpoint */
        float share = (float)((double)hf_source_bytes_read(j->hf) / (double)hf_source_total_bytes(j->hf));
        if (j->distributed && comm_all_reduce(comm_world(), &share, &share, 1, COMM_F32, COMM_MAX)) myr_die_last();
        if (j->rank0)
            fprintf(stderr, "myriad train: loaded %s in %.2f s; each rank read at most %.1f%% of its %.1f MiB (its own "
                    "slices)\n", hf_source_describe(j->hf), train_now_s() - t0, 100 * share,
                    hf_source_total_bytes(j->hf) / 1048576.0);
    }
    if (j->hf) {
        hf_source_close(j->hf);
        j->hf = NULL;
    }
}

static int glob_matches(const char *pattern) {
    glob_t g;
    int n = glob(pattern, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    globfree(&g);
    return n;
}

/* A directory made by `myriad data prepare` holds train_*.bin and val_*.bin: train on the
 * first, validate on the second. Any other spec is used as given. */
static void resolve_data(const TrainOptions *o, char *train, char *val, size_t n) {
    struct stat st;
    snprintf(train, n, "%s", o->data);
    val[0] = 0;
    if (o->val_data) snprintf(val, n, "%s", o->val_data);
    if (stat(o->data, &st) || !S_ISDIR(st.st_mode)) return;
    char pattern[4096];
    snprintf(pattern, sizeof pattern, "%s/train_*.bin", o->data);
    if (!glob_matches(pattern)) return;
    snprintf(train, n, "%s", pattern);
    snprintf(pattern, sizeof pattern, "%s/val_*.bin", o->data);
    if (!o->val_data && glob_matches(pattern)) snprintf(val, n, "%s", pattern);
}

static void open_data(TrainJob *j) {
    const TrainOptions *o = &j->o;
    char train_spec[4096], val_spec[4096];
    resolve_data(o, train_spec, val_spec, sizeof train_spec);
    j->train = j->val = NULL;
    /* the same files for every rank: one message when they are missing or bad */
    int bad = tokens_open(train_spec, &j->train) != 0;
    if (!bad && val_spec[0]) bad = tokens_open(val_spec, &j->val) != 0;
    if (!bad) bad = loader_init(&j->loader, j->train, o->batch, o->seq, o->shuffle, o->seed) != 0;
    if (train_agree_failure(j, bad)) train_exit_all(1);
}

/* Data parallelism: one engine per chunk over the dp group; then the pipeline over the chunks. */
static void attach_parallelism(TrainJob *j) {
    int vpp = j->vpp;
    j->dp = NULL;
    j->tensor_weight = calloc((size_t)vpp, sizeof(double *));
    if (j->distributed) {
        j->dp = calloc((size_t)vpp, sizeof(DataParallel));
        for (int c = 0; c < vpp; c++) {
            Model *m = &j->chunks[c];
            if (dp_create_ep(&j->dp[c], j->dense_group, j->expert_group, j->ep, m, &j->o.dpo))
                train_layout_error(j->rank, "%s", myr_last_error());
            /* count each parameter once in the norm: replicated tensors appear on every tp rank,
             * a tied embedding's copy on the last stage duplicates the first stage's */
            j->tensor_weight[c] = malloc((size_t)m->table.count * sizeof(double));
            for (int i = 0; i < m->table.count; i++) {
                const ParamInfo *p = &m->table.info[i];
                j->tensor_weight[c][i] = p->tied_copy ? 0.0 : p->shard == SHARD_NONE ? 1.0 / j->tp : 1.0;
            }
            j->dp[c].tensor_weight = j->tensor_weight[c];
        }
    }
    j->pl = NULL;
    if (j->pp > 1) {
        if (pipeline_create(&j->pipeline, j->chunks, j->dp, vpp, j->pp, j->pp_rank, j->groups.pp, j->groups.embed,
                            (ScheduleKind)j->o.schedule, j->n_micro, j->micro, j->o.seq))
            train_layout_error(j->rank, "%s", myr_last_error());
        j->pl = &j->pipeline;
    }
}

static void print_banner(const TrainJob *j) {
    const TrainOptions *o = &j->o;
    const ModelConfig *c = &j->cfg;
    char pad[96] = "";
    int rows = model_vocab_rows(c, j->tp, 0);
    if (rows * j->tp > c->vocab) /* said only where it adds rows */
        snprintf(pad, sizeof pad, " (padded: %d rows%s, --vocab-pad %d)", rows * j->tp, j->tp > 1 ? " over tp" : "",
                 c->vocab_pad);
    fprintf(stderr,
            "myriad train: %s, %d layers, hidden %d, heads %d/%d, vocab %d%s | %llu training tokens, batch %d x %d | "
            "%d threads, peak %.1f GFLOP/s (%s)\n",
            model_arch_name(c->arch), c->layers, c->hidden, c->heads, c->kv_heads, c->vocab, pad,
            (unsigned long long)tokens_count(j->train), o->batch, o->seq, kernels_threads(), j->peak_flops / 1e9,
            j->peak_source);
    train_memory_print(j);
    if (j->dp)
        fprintf(stderr,
                "layout: tp %d%s x cp %d x dp %d x ep %d x pp %d%s; %d sequences per dp rank (micro-batch %d), zero %d, "
                "%s gradients, overlap %s\n",
                j->tp, o->sp ? " (sequence parallel)" : "", j->cp, j->dp_size, j->ep, j->pp,
                j->pp > 1 ? (j->vpp > 1 ? " (interleaved)" : (o->schedule == SCHEDULE_GPIPE ? " (gpipe)" : " (1f1b)"))
                          : "",
                j->rows, j->micro, o->dpo.zero, comm_dtype_name(o->dpo.grad_dtype), o->dpo.overlap ? "on" : "off");
}

/* The checkpoint manifest's caller metadata: the model, the layout it was saved in, and the
 * settings that shape the math of later steps, which a resume compares (train_resume.c). */
static void write_meta(TrainJob *j) {
    const TrainOptions *o = &j->o;
    const ModelConfig *c = &j->cfg;
    const LrSchedule *ls = &o->optim.schedule;
    snprintf(j->meta, sizeof j->meta,
             "{\"seed\": %llu, \"model\": {\"arch\": \"%s\", \"layers\": %d, \"hidden\": %d, \"heads\": %d, "
             "\"kv_heads\": %d, \"ffn\": %d, \"vocab\": %d, \"max_seq\": %d, \"experts\": %d}, \"layout\": {\"tp\": "
             "%d, \"pp\": %d, \"vpp\": %d, \"dp\": %d, \"ep\": %d, \"cp\": %d, \"zero\": %d, \"vocab_pad\": %d}, "
             "\"batch\": %d, \"seq\": %d, "
             "\"lr\": %.17g, \"lr_schedule\": \"%s\", \"warmup\": %ld, \"min_lr\": %.17g, \"steps\": %ld, "
             "\"shuffle\": %s, \"train_tokens\": %llu}",
             (unsigned long long)o->seed, model_arch_name(c->arch), c->layers, c->hidden, c->heads, c->kv_heads,
             c->ffn, c->vocab, c->max_seq, c->experts, j->tp, j->pp, j->vpp, j->dp_size, j->ep, j->cp, o->dpo.zero,
             c->vocab_pad, o->batch, o->seq, ls->lr, ls->kind == LR_COSINE ? "cosine" : "constant", ls->warmup,
             ls->min_lr, o->steps, o->shuffle ? "true" : "false", (unsigned long long)tokens_count(j->train));
}

/* In-memory checkpoints: the job is named by MYRIAD_JOB_ID or the absolute --save DIR. */
static void open_mem_checkpoints(TrainJob *j) {
    const TrainOptions *o = &j->o;
    j->mem = NULL;
    if (o->mem_ckpt_every <= 0) return;
    char job[8192], note[256];
    mem_ckpt_job_name(o->save_dir, job, sizeof job);
    if (mem_ckpt_init(&j->mem, &j->state, job, j->meta, !o->resume, note, sizeof note)) myr_die_last();
    if (j->rank0 && note[0]) fprintf(stderr, "myriad train: in-memory checkpoints: %s\n", note);
    j->t.before_update = mem_ckpt_before_update;
    j->t.before_update_ctx = j->mem;
}

void train_job_setup(TrainJob *j) {
    const TrainOptions *o = &j->o;
    build_model(j);
    open_data(j);
    attach_parallelism(j);
    j->flops_per_step = model_flops_per_token(&j->cfg, o->seq) * o->batch * o->seq;
    if (j->rank0) print_banner(j);

    trainer_create(&j->t, &j->chunks[0], &o->optim, j->dp, j->micro);
    j->t.pipeline = j->pl;
    j->t.agree = j->distributed ? comm_world() : NULL; /* every rank takes the same non-finite decision */
    if (o->inject_nan_step > 0) {
        if (o->inject_nan_rank >= j->world)
            train_layout_error(j->rank, "--inject-nan %ld:%d: there is no rank %d (the world has %d)", o->inject_nan_step,
                               o->inject_nan_rank, o->inject_nan_rank, j->world);
        if (j->rank == o->inject_nan_rank) j->t.poison_step = o->inject_nan_step - 1;
    }
    j->state = (TrainState){j->chunks, j->dp, j->dp ? NULL : &j->t.opt, j->vpp,
                            j->distributed ? comm_world() : NULL, train_state_mirrors()};
    write_meta(j);
    if (!o->resume) train_fill_weights(j); /* a resume fills them from its checkpoint (or here when none) */
    if (o->save_every > 0 && !o->sync_save) train_ckpt_reserve_async(&j->state);
    open_mem_checkpoints(j);
}
