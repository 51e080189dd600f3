/* train_cmd.c: `myriad train`: builds the model, reads batches, steps the trainer, reports
 * progress, evaluates, samples and saves. */
#include <glob.h>
#include <stdarg.h>
#include <stdnoreturn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "comm/comm.h"
#include "parallel/data_parallel.h"
#include "parallel/expert_parallel.h"
#include "parallel/mesh.h"
#include "parallel/pipeline.h"
#include "parallel/schedule.h"
#include "parallel/tensor_parallel.h"
#include "trace/trace.h"
#include "data/loader.h"
#include "kernels/kernels.h"
#include "launch/heartbeat.h"
#include "model/hf_weights.h"
#include "model/moe.h"
#include "train/checkpoint.h"
#include "train/mem_checkpoint.h"
#include "train/evaluate.h"
#include "train/progress.h"
#include "train/samples.h"
#include "train/train_options.h"
#include "util/error.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Peak resident set size of this process (VmHWM), in bytes; 0 if unknown. */
static double peak_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = atof(line + 6);
    fclose(f);
    return kb * 1024;
}

/* Measured peak memory beside the analytic sum: parameters, gradients, AdamW m and v, and the
 * activations the forward stores for backward (model_activation_count). */
static void print_memory(const Model *m, int B, int T) {
    double MiB = 1048576.0, psize = (double)model_num_params(m) * sizeof(real);
    double acts = (double)model_activation_count(m, B, T) * sizeof(real);
    double analytic = 4 * psize + acts;
    double rss = peak_rss_bytes();
    printf("memory: peak RSS %.1f MiB = %.3f x analytic %.1f MiB (parameters %.1f + gradients %.1f + AdamW "
           "state %.1f + stored activations %.1f)\n",
           rss / MiB, rss / analytic, analytic / MiB, psize / MiB, psize / MiB, 2 * psize / MiB, acts / MiB);
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

/* A bad layout is found by every rank alike: rank 0 says so (one line), the others stay until it
 * has (a barrier), since the first rank to exit non-zero makes mpirun kill the rest. */
static noreturn void layout_error(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static noreturn void layout_error(int rank, const char *fmt, ...) {
    if (rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fputs("myriad: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        fflush(stderr);
        va_end(ap);
    }
    if (comm_is_initialized()) comm_barrier(comm_world());
    exit(1);
}

/* Launched by mpirun / srun (a world of several processes), as opposed to a plain run. */
static int launched_by_mpi(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") || getenv("SLURM_STEP_ID");
}

/* Every rank's parameter/gradient/optimizer bytes, gathered and printed by rank 0. */
static void print_dp_memory(DataParallel *dp, int B, int T, int rank0) {
    double mine[6];
    dp_memory(dp, &mine[0], &mine[1], &mine[2], &mine[3]);
    mine[4] = peak_rss_bytes();
    mine[5] = (double)dp->peak_transient_bytes;
    int n = dp->size;
    double *all = malloc((size_t)n * 6 * sizeof(double));
    if (comm_all_gather(dp->group, mine, all, 12, COMM_F32)) myr_die_last();
    if (rank0) {
        double MiB = 1048576.0;
        printf("memory per rank (zero %d, %d ranks, %.2fM parameters; formula: %s):\n", dp->o.zero, n,
               model_num_params(dp->m) / 1e6,
               dp->o.zero == 0   ? "16 psi"
               : dp->o.zero == 1 ? "(8 + 8/N) psi"
               : dp->o.zero == 2 ? "(4 + 12/N) psi"
                                 : "16 psi / N + largest gathered unit");
        printf("  rank  params MiB  grads MiB  optim MiB  total MiB  formula MiB  ratio  transient MiB  peak RSS MiB\n");
        for (int r = 0; r < n; r++) {
            double *v = all + 6 * r, tot = v[0] + v[1] + v[2];
            printf("  %4d  %10.2f %10.2f %10.2f %10.2f %12.2f %6.3f %14.2f %13.1f\n", r, v[0] / MiB, v[1] / MiB,
                   v[2] / MiB, tot / MiB, v[3] / MiB, tot / v[3], v[5] / MiB, v[4] / MiB);
        }
    }
    free(all);
    (void)B;
    (void)T;
}

/* Validation loss over this rank's rows of K batches, averaged over the data-parallel ranks. */
static double validation_loss(const TrainOptions *o, Model *m, DataParallel *dp, Pipeline *pl, const TokenData *val,
                              int data_rank, int rows) {
    double loss;
    uint64_t toks;
    if (!pl) {
        if (evaluate_loss(m, val, o->batch, o->seq, o->eval_batches, data_rank * rows, rows, &loss, &toks))
            myr_die_last();
    } else { /* through the pipeline, one batch at a time */
        BatchLoader l;
        if (loader_init(&l, val, o->batch, o->seq, 0, 0)) myr_die_last();
        int K = o->eval_batches < (int)l.windows ? o->eval_batches : (int)l.windows;
        size_t n = (size_t)rows * o->seq;
        int32_t *x = malloc(n * sizeof(int32_t)), *y = malloc(n * sizeof(int32_t));
        double sum = 0;
        for (int k = 0; k < K; k++) {
            if (loader_batch(&l, (uint64_t)k, data_rank * rows, rows, x, y)) myr_die_last();
            if (check_tokens(x, (int)n, m->cfg.vocab, "validation", k) ||
                check_tokens(y, (int)n, m->cfg.vocab, "validation", k))
                myr_die_last();
            sum += pipeline_forward(pl, x, y, rows);
        }
        loss = sum / K;
        free(x);
        free(y);
        loader_free(&l);
    }
    if (dp) {
        loss = dp_mean(dp, loss);
        for (int c = 0; c < (pl ? pl->vpp : 1); c++) dp_release_gathered(&dp[c]);
    }
    return loss;
}

/* The step's mixture-of-experts figures, summed over the ranks (tensor-parallel ranks route the
 * same tokens: counted once), into the report; and the counters zeroed for the next step. */
static void moe_report(Model *chunks, int n, int tp, int pp, int world, StepReport *rep) {
    const ModelConfig *c = &chunks[0].cfg;
    int LE = c->layers * c->experts;
    float *v = calloc((size_t)LE + 2, sizeof(float)); /* counts are exact in fp32 below 2^24 */
    for (int k = 0; k < n; k++) {
        MoeStats *st = &chunks[k].moe_stats;
        for (int i = 0; i < LE; i++) v[i] += (float)st->tokens[i];
        v[LE] += (float)st->dropped;
        v[LE + 1] += (float)(st->aux_sum / (st->forwards ? st->forwards : 1));
    }
    if (world > 1 && comm_all_reduce(comm_world(), v, v, (size_t)LE + 2, COMM_F32, COMM_SUM)) myr_die_last();
    int moe_layers = 0;
    double mn = 1e300, mx = 0, sum = 0;
    for (int l = 0; l < c->layers; l++) {
        if (!model_layer_is_moe(c, l)) continue;
        moe_layers++;
        for (int e = 0; e < c->experts; e++) {
            double x = v[l * c->experts + e] / tp;
            mn = x < mn ? x : mn, mx = x > mx ? x : mx, sum += x;
        }
    }
    rep->have_moe = 1;
    if (!moe_layers) mn = 0; /* --moe-every beyond the layers: no MoE layer */
    rep->moe_tokens_min = mn, rep->moe_tokens_max = mx;
    rep->moe_tokens_mean = moe_layers ? sum / ((double)moe_layers * c->experts) : 0;
    rep->moe_dropped = v[LE] / tp;
    rep->moe_aux = v[LE + 1] / ((double)world / pp); /* each stage's sum over its layers, averaged over replicas */
    rep->a2a_bytes = 0, rep->a2a_ms = 0, rep->a2a_wait_ms = 0;
    for (int k = 0; k < n; k++) {
        rep->a2a_bytes += chunks[k].moe_stats.a2a_bytes;
        rep->a2a_ms += chunks[k].moe_stats.a2a_s * 1e3;
        rep->a2a_wait_ms += chunks[k].moe_stats.a2a_wait_s * 1e3;
        moe_stats_reset(&chunks[k]);
    }
    free(v);
}

int cmd_train(int argc, char **argv) {
    TrainOptions o;
    train_options_parse(&o, argc, argv);

    /* processes and layout, checked before any training work */
    int tp = o.tp, pp = o.pp, vpp = o.vpp, ep = o.ep;
    int distributed = launched_by_mpi() || o.dp > 1 || tp > 1 || pp > 1 || ep > 1;
    int world = 1, rank = 0;
    if (distributed) {
        if (!launched_by_mpi()) {
            int need = (o.dp > 0 ? o.dp : 1) * tp * pp * ep;
            myr_die("this layout needs %d processes: launch with `myriad run -n %d -- train ...` or `mpirun -np %d "
                    "bin/myriad train ...`", need, need, need);
        }
        if (comm_init(&argc, &argv, &o.comm)) myr_die_last();
        world = comm_size(comm_world());
        rank = comm_rank(comm_world());
    }
    if (world % tp) layout_error(rank, "--tp %d does not divide the world size %d", tp, world);
    if (world % (tp * pp))
        layout_error(rank, "--tp %d x --pp %d = %d does not divide the world size %d", tp, pp, tp * pp, world);
    if (world % (tp * pp * ep))
        layout_error(rank, "--tp %d x --pp %d x --ep %d = %d does not divide the world size %d", tp, pp, ep,
                     tp * pp * ep, world);
    int dp_size = o.dp > 0 ? o.dp : world / (tp * pp * ep);
    if (world % dp_size)
        layout_error(rank, "--dp %d does not divide the world size %d (launch %d processes, or choose --dp dividing %d)",
                     dp_size, world, dp_size * tp * pp * ep, world);
    if (tp * pp * dp_size * ep != world)
        layout_error(rank, "--tp %d x --pp %d x --dp %d x --ep %d = %d does not equal the world size %d", tp, pp,
                     dp_size, ep, tp * pp * dp_size * ep, world);
    /* expert parallelism lives inside data parallelism: dense parameters are replicated over
     * dp x ep ranks, each taking its own slice of the batch */
    int dense_dp = dp_size * ep;
    if (o.batch % dense_dp)
        layout_error(rank, "--batch %d is not divisible by --dp %d x --ep %d: each data-parallel rank takes an equal "
                     "slice", o.batch, dp_size, ep);
    int rows = o.batch / dense_dp;
    int micro = o.micro_batch > 0 ? o.micro_batch : (pp > 1 ? 1 : rows);
    if (rows % micro)
        layout_error(rank, "--batch %d is not divisible by dp %d x --micro-batch %d (each rank's %d sequences split "
                     "into micro-batches of %d)", o.batch, dp_size, micro, rows, micro);
    int n_micro = rows / micro;
    if ((pp > 1 || vpp > 1) && schedule_validate((ScheduleKind)o.schedule, pp, vpp, n_micro))
        layout_error(rank, "%s", myr_last_error());
    if (o.sp && (micro * o.seq) % tp)
        layout_error(rank, "--sp needs the %d tokens of a micro-batch divisible by --tp %d", micro * o.seq, tp);
    int rank0 = rank == 0;
    if (o.threads) kernels_set_threads(o.threads);
    else kernels_set_threads(kernels_threads());

    /* the mesh (src/parallel/mesh.c): tp fastest, then dp, then pp */
    ParallelMesh mesh;
    MeshGroups groups = {0};
    int tp_rank = 0, dp_rank = 0, pp_rank = 0, ep_rank = 0;
    Comm *dense_group = NULL; /* dp x ep: the ranks replicating dense parameters */
    if (distributed) {
        if (mesh_init(&mesh, world, rank, tp, 1, ep, dp_size, pp)) layout_error(rank, "%s", myr_last_error());
        if (mesh_build_groups(&mesh, comm_world(), &groups)) myr_die_last();
        tp_rank = mesh.tp_rank;
        dp_rank = mesh.dp_rank;
        pp_rank = mesh.pp_rank;
        ep_rank = mesh.ep_rank;
        dense_group = groups.dp;
        if (ep > 1 && comm_group_by_axes(comm_world(), &mesh.m, MESH_DP | MESH_EP, &dense_group)) myr_die_last();
    }

    /* model: the whole model is built (from the seed or --init); this rank keeps the layers of
     * its pipeline chunks and its tensor-parallel slices; units are padded to split over dp */
    Model whole;
    if (o.init_dir) {
        if (hf_load(o.init_dir, &whole)) myr_die_last();
    } else {
        ModelConfig c;
        train_options_model_config(&o, &c);
        if (model_create(&whole, &c)) myr_die_last();
        model_init_weights(&whole, o.seed);
    }
    int V = pp * vpp, *start = calloc((size_t)V, sizeof(int)), *count = calloc((size_t)V, sizeof(int));
    if (schedule_stage_layers(whole.cfg.layers, pp, vpp, o.n_stage_layers ? o.stage_layers : NULL, o.n_stage_layers,
                              start, count))
        layout_error(rank, "%s", myr_last_error());
    Model *chunks = calloc((size_t)vpp, sizeof(Model));
    for (int c = 0; c < vpp; c++) {
        int vs = c * pp + pp_rank;
        StageSpec spec = {start[vs], start[vs] + count[vs], vs == 0, vs == V - 1};
        if (model_create_ep(&chunks[c], &whole.cfg, dense_dp, tp, tp_rank, ep, ep_rank, &spec))
            layout_error(rank, "%s", myr_last_error());
        model_copy_shards(&chunks[c], &whole, 1);
        if (tp > 1) tp_attach(&chunks[c], groups.tp);
        if (ep > 1) ep_attach(&chunks[c], groups.ep, o.a2a_barrier);
        chunks[c].tp.sp = o.sp;
        chunks[c].recompute = (Recompute)o.recompute;
    }
    free(start);
    free(count);
    ModelConfig cfg = whole.cfg;
    model_destroy(&whole);
    /* the tokenizer: its ids must fit the embedding (every rank checks; rank 0 says so) */
    const char *tok_path = samples_find_tokenizer(o.tokenizer, o.init_dir, o.data);
    Tokenizer *tok = NULL;
    if (samples_load_tokenizer(tok_path, cfg.vocab, &tok)) layout_error(rank, "%s", myr_last_error());
    if (cfg.experts && o.sp) layout_error(rank, "--sp with --experts is not supported (the MoE block needs all rows)");
    Model *m = &chunks[0];
    if (o.seq > cfg.max_seq)
        myr_die("--seq %d exceeds the model's %d positions (max_seq); use a shorter --seq or a larger --max-seq", o.seq,
                cfg.max_seq);

    /* data */
    char train_spec[4096], val_spec[4096];
    resolve_data(&o, train_spec, val_spec, sizeof train_spec);
    TokenData *train = NULL, *val = NULL;
    if (tokens_open(train_spec, &train)) myr_die_last();
    if (val_spec[0] && tokens_open(val_spec, &val)) myr_die_last();
    if (val && !o.val_data && tokens_count(val) < (uint64_t)o.batch * o.seq + 1) {
        /* a prepared directory's val split can be empty (--val-fraction 0) or smaller than a batch */
        if (rank0)
            fprintf(stderr, "note: %s holds %llu tokens, less than one batch: no validation\n", val_spec,
                    (unsigned long long)tokens_count(val));
        tokens_close(val);
        val = NULL;
    }
    BatchLoader loader;
    if (loader_init(&loader, train, o.batch, o.seq, o.shuffle, o.seed)) myr_die_last();
    if (o.eval_every > 0 && !val) myr_die("--eval-every needs validation data: give --val-data PATH");

    /* data parallelism: one engine per chunk over the dp group */
    DataParallel *dp = NULL;
    double **tensor_weight = calloc((size_t)vpp, sizeof(double *));
    if (distributed) {
        dp = calloc((size_t)vpp, sizeof(DataParallel));
        for (int c = 0; c < vpp; c++) {
            if (dp_create_ep(&dp[c], dense_group, groups.dp, ep, &chunks[c], &o.dpo))
                layout_error(rank, "%s", myr_last_error());
            /* count each parameter once in the norm: replicated tensors appear on every tp rank,
             * a tied embedding's copy on the last stage duplicates the first stage's */
            tensor_weight[c] = malloc((size_t)chunks[c].table.count * sizeof(double));
            for (int i = 0; i < chunks[c].table.count; i++) {
                const ParamInfo *p = &chunks[c].table.info[i];
                tensor_weight[c][i] = p->tied_copy ? 0.0 : p->shard == SHARD_NONE ? 1.0 / tp : 1.0;
            }
            dp[c].tensor_weight = tensor_weight[c];
        }
    }
    Pipeline pipeline, *pl = NULL;
    if (pp > 1) {
        if (pipeline_create(&pipeline, chunks, dp, vpp, pp, pp_rank, groups.pp, groups.embed, (ScheduleKind)o.schedule,
                            n_micro, micro, o.seq))
            layout_error(rank, "%s", myr_last_error());
        pl = &pipeline;
    }
    int data_rank = dp_rank + dp_size * ep_rank; /* which slice of the global batch: this rank's place in dp x ep */

    double peak = o.peak_tflops > 0 ? o.peak_tflops * 1e12 : kernels_measure_peak_flops(1024, 3);
    double flops_per_step = model_flops_per_token(&cfg, o.seq) * o.batch * o.seq;
    if (rank0) {
        ModelConfig *c = &cfg;
        fprintf(stderr,
                "myriad train: %s, %d layers, hidden %d, heads %d/%d, vocab %d | %llu training tokens, batch %d x %d | "
                "%d threads, peak %.1f GFLOP/s (%s)\n",
                model_arch_name(c->arch), c->layers, c->hidden, c->heads, c->kv_heads, c->vocab,
                (unsigned long long)tokens_count(train), o.batch, o.seq, kernels_threads(), peak / 1e9,
                o.peak_tflops > 0 ? "--peak-tflops" : "measured sgemm");
        if (dp)
            fprintf(stderr, "layout: tp %d%s x dp %d x ep %d x pp %d%s; %d sequences per dp rank (micro-batch %d), zero %d, "
                            "%s gradients, overlap %s\n",
                    tp, o.sp ? " (sequence parallel)" : "", dp_size, ep, pp,
                    pp > 1 ? (vpp > 1 ? " (interleaved)" : (o.schedule == SCHEDULE_GPIPE ? " (gpipe)" : " (1f1b)")) : "",
                    rows, micro, o.dpo.zero, comm_dtype_name(o.dpo.grad_dtype), o.dpo.overlap ? "on" : "off");
    }

    Trainer t;
    trainer_create(&t, m, &o.optim, dp, micro);
    t.pipeline = pl;
    TrainState state = {chunks, dp, dp ? NULL : &t.opt, vpp, distributed ? comm_world() : NULL};
    char meta[1024];
    snprintf(meta, sizeof meta,
             "{\"seed\": %llu, \"model\": {\"arch\": \"%s\", \"layers\": %d, \"hidden\": %d, \"heads\": %d, "
             "\"kv_heads\": %d, \"ffn\": %d, \"vocab\": %d, \"max_seq\": %d, \"experts\": %d}, \"layout\": {\"tp\": %d, "
             "\"pp\": %d, \"vpp\": %d, \"dp\": %d, \"ep\": %d, \"zero\": %d}, \"batch\": %d, \"seq\": %d}",
             (unsigned long long)o.seed, model_arch_name(cfg.arch), cfg.layers, cfg.hidden, cfg.heads, cfg.kv_heads,
             cfg.ffn, cfg.vocab, cfg.max_seq, cfg.experts, tp, pp, vpp, dp_size, ep, o.dpo.zero, o.batch, o.seq);
    long first_step = 0;
    if (o.save_every > 0 && !o.sync_save) train_ckpt_reserve_async(&state);
    /* in-memory checkpoints: the job is named by MYRIAD_JOB_ID or the absolute --save DIR */
    MemCkpt *mem = NULL;
    if (o.mem_ckpt_every > 0) {
        char job[8192], cwd[4096], note[256];
        const char *env_job = getenv("MYRIAD_JOB_ID");
        if (env_job && *env_job) snprintf(job, sizeof job, "%s", env_job);
        else if (o.save_dir[0] == '/' || !getcwd(cwd, sizeof cwd)) snprintf(job, sizeof job, "%s", o.save_dir);
        else snprintf(job, sizeof job, "%s/%s", cwd, o.save_dir);
        if (mem_ckpt_init(&mem, &state, job, meta, !o.resume, note, sizeof note)) myr_die_last();
        if (rank0 && note[0]) fprintf(stderr, "myriad train: in-memory checkpoints: %s\n", note);
        t.before_update = mem_ckpt_before_update;
        t.before_update_ctx = mem;
    }
    /* what the launcher's event log should say about this start (sent once connected) */
    const char *events[4];
    int nevents = 0;
    if (o.resume) {
        double tr = now_s();
        const char *path = strcmp(o.resume, "auto") ? o.resume : o.save_dir;
        int is_auto = !strcmp(o.resume, "auto");
        Ckpt *ck = NULL;
        long disk_step = ckpt_open(path, &ck) ? -1 : (long)ckpt_step(ck);
        int restored = 0;
        if (mem && is_auto) { /* memory first when it is at least as new as the disk */
            long s;
            int replica = 0, rejected = 0;
            char desc[256];
            int r = mem_ckpt_restore(mem, disk_step < 0 ? 0 : disk_step, &s, &replica, &rejected, desc, sizeof desc);
            if (r < 0) myr_die_last();
            if (r == 1) {
                restored = 1;
                first_step = s;
                if (rank0) fprintf(stderr, "resumed from %s at step %ld\n", desc, s);
                if (rejected) events[nevents++] = "mem-copy-rejected";
                events[nevents++] = replica ? "restored-from-replica" : "restored-from-memory";
            }
        }
        if (!restored && (first_step = train_resume_disk(&state, path, is_auto, ck, rank0, events, &nevents)) < 0)
            myr_die_last();
        if (restored && ck) ckpt_close(ck);
        if (rank0) fprintf(stderr, "restore took %.3f s (%s)\n", now_s() - tr, restored ? "memory" : "disk");
        int reused = mem ? mem_ckpt_adopt(mem, first_step) : 0;
        if (rank0 && reused)
            fprintf(stderr, "myriad train: in-memory checkpoints: rank 0 writes its next copies over %d of its earlier "
                    "ones (no new shared memory)\n", reused);
        t.step = first_step;
        for (int c = 0; dp && c < vpp; c++) dp_release_gathered(&dp[c]);
    }
    Progress progress;
    progress_open(&progress, rank0 ? o.log_path : NULL, o.steps, o.print_every);
    if (!rank0) progress.quiet = 1;
    size_t n = (size_t)rows * o.seq;
    int32_t *x = malloc(n * sizeof(int32_t)), *y = malloc(n * sizeof(int32_t));
    double last_val = NAN, comm_total = 0, step_total = 0, bubble_total = 0;
    TraceBuffer trace;
    long trace_step = o.steps > 1 ? 1 : 0; /* the first step after warm-up */
    /* under `myriad run --max-restarts/--hang-timeout/...` every rank reports each step to the
     * launcher (a no-op otherwise) */
    if (hb_connect_from_env()) fprintf(stderr, "myriad train: heartbeat: %s (continuing without it)\n", myr_last_error());
    for (int i = 0; rank0 && i < nevents; i++) hb_event(events[i]);
    hb_start(first_step);
    long last_step = o.stop_after > 0 && o.stop_after < o.steps ? o.stop_after : o.steps;
    for (long s = first_step; s < last_step; s++) {
        if (loader_batch(&loader, (uint64_t)s, data_rank * rows, rows, x, y)) myr_die_last();
        if (check_tokens(x, (int)n, cfg.vocab, "training", s) || check_tokens(y, (int)n, cfg.vocab, "training", s))
            myr_die_last();
        if (pl && o.trace_path && s == trace_step) {
            trace_init(&trace, rank);
            trace_sync_origin(&trace, comm_world());
            pl->trace = &trace;
        }
        FILE *routing = NULL;
        if (o.moe_routing && cfg.experts && s == first_step && tp_rank == 0) { /* the first step's routing */
            char path[4096];
            snprintf(path, sizeof path, "%s.%d", o.moe_routing, rank);
            if (!(routing = fopen(path, "w"))) myr_die("--moe-routing: cannot create %s", path);
            for (int c = 0; c < vpp; c++) chunks[c].moe_routing = routing, chunks[c].moe_seq0 = data_rank * rows;
        }
        double t0 = now_s();
        StepResult r = trainer_step(&t, x, y, rows, o.seq);
        double dt = now_s() - t0;
        if (routing) {
            for (int c = 0; c < vpp; c++) chunks[c].moe_routing = NULL;
            fclose(routing);
        }
        if (pl && pl->trace) {
            pl->trace = NULL;
            if (trace_write_gathered(comm_world(), &trace, o.trace_path)) myr_die_last();
            if (rank0) fprintf(stderr, "wrote the trace of step %ld to %s\n", s + 1, o.trace_path);
            trace_free(&trace);
        }
        StepReport rep = {.step = s, .steps = o.steps, .loss = r.loss, .lr = r.lr, .grad_norm = r.grad_norm,
                          .ms = dt * 1e3, .tokens_per_s = o.batch * o.seq / dt,
                          .mfu = flops_per_step / dt / (peak * world), .comm_ms = dp ? t.last_exposed_comm_s * 1e3 : -1};
        if (cfg.experts) moe_report(chunks, vpp, tp, pp, world, &rep);
        double tc = now_s();
        if (ckpt_async_poll()) myr_die_last(); /* commit the save in flight once every shard is durable */
        if (o.save_every > 0 && ((s + 1) % o.save_every == 0 || s + 1 == last_step)) {
            if (train_ckpt_save(&state, o.save_dir, s + 1, o.keep, !o.sync_save, meta)) myr_die_last();
        }
        /* the copy of step s + 1 is packed during step s + 2 and committed before its update, so a
         * rank killed at any time loses at most the one step it had reported since */
        if (mem && (s + 1) % o.mem_ckpt_every == 0 && mem_ckpt_save(mem, s + 1)) myr_die_last();
        if (mem && mem_ckpt_confirm(mem)) myr_die_last();
        rep.ckpt_ms = (now_s() - tc) * 1e3;
        if (s > first_step || o.steps == 1) { /* the first step includes warm-up */
            comm_total += dp ? t.last_exposed_comm_s : 0;
            step_total += dt;
            if (pl) bubble_total += 1 - pl->compute_s / pl->run_s;
        }
        if (o.eval_every > 0 && ((s + 1) % o.eval_every == 0 || s + 1 == o.steps)) {
            last_val = validation_loss(&o, m, dp, pl, val, data_rank, rows);
            rep.have_val = 1;
            rep.val_loss = last_val;
        }
        progress_step(&progress, &rep);
        hb_step(s + 1, r.loss);
    }
    progress_close(&progress);
    if (ckpt_async_wait()) myr_die_last();
    if (mem) {
        double ms = 1e3 * mem_ckpt_seconds(mem);
        long saves = (last_step / o.mem_ckpt_every) - (first_step / o.mem_ckpt_every);
        if (rank0 && saves > 0)
            fprintf(stderr, "in-memory checkpoints: %ld saves, %.1f ms each on rank 0\n", saves, ms / saves);
        if (mem_ckpt_finish(mem, last_step == o.steps)) myr_die_last();
    }
    if (val && o.eval_every == 0) last_val = validation_loss(&o, m, dp, pl, val, data_rank, rows);
    long timed = o.steps - first_step > 1 ? o.steps - first_step - 1 : o.steps - first_step;
    if (o.steps > 0 && rank0 && !pl && tp == 1) print_memory(m, rows, o.seq);
    if (dp) {
        print_dp_memory(&dp[0], rows, o.seq, rank0);
        if (rank0 && timed > 0)
            printf("communication: exposed %.1f ms of %.1f ms per step (%.1f%%), steps %ld..%ld\n",
                   1e3 * comm_total / timed, 1e3 * step_total / timed, 100 * comm_total / step_total,
                   o.steps - timed + 1, o.steps);
    }
    if (pl && timed > 0) {
        /* the bubble each stage measured (idle share of the schedule's run) and the most
         * micro-batches whose activations were alive at once, as the allocator counted them */
        double mine[2] = {bubble_total / timed, (double)m->peak_live_slots};
        double *all = malloc((size_t)pp * 2 * sizeof(double));
        if (comm_all_gather(groups.pp, mine, all, 4, COMM_F32)) myr_die_last();
        if (rank0) {
            double avg = 0;
            printf("pipeline: bubble measured per stage:");
            for (int k = 0; k < pp; k++) printf(" %.3f", all[2 * k]), avg += all[2 * k] / pp;
            printf(" (mean %.3f; analytic (p-1)/(v*m+p-1) = %.3f); live activation sets on chunk 0 per stage:", avg,
                   (pp - 1.0) / (vpp * n_micro + pp - 1.0));
            for (int k = 0; k < pp; k++) printf(" %.0f", all[2 * k + 1]);
            printf("\n");
        }
        free(all);
    }
    for (int c = 0; dp && c < vpp; c++) {
        dp_materialize_params(&dp[c]);
        chunks[c].hooks = NULL; /* everything resident from here */
    }
    if (val && rank0) printf("final validation loss %.4f (%.3f bits per token)\n", last_val, last_val / 0.6931471805599453);
    /* sampling and saving need the whole model: gather the pieces */
    Model *final = m;
    if (tp > 1 || pp > 1 || ep > 1) {
        if (model_create(&whole, &cfg)) myr_die_last();
        if (model_parallel_gather(chunks, vpp, &whole, groups.tp, groups.pp, ep > 1 ? groups.ep : NULL))
            myr_die_last();
        final = &whole;
    }
    int sample = o.sample_tokens >= 0 ? o.sample_tokens : 0;
    if (sample > 0 && rank0) samples_print(final, val ? val : train, sample, o.seed, tok);
    if (o.save_dir && rank0) {
        if (hf_save(o.save_dir, final)) myr_die_last();
        if (tok_path && samples_save_tokenizer(tok_path, o.save_dir)) myr_die_last();
        printf("saved %s/config.json and %s/model.safetensors%s%s%s\n", o.save_dir, o.save_dir,
               tok_path ? " and " : "", tok_path ? o.save_dir : "", tok_path ? "/tokenizer.json" : "");
    }
    tokenizer_free(tok);
    if (final != m) model_destroy(&whole);
    free(x);
    free(y);
    loader_free(&loader);
    tokens_close(train);
    if (val) tokens_close(val);
    trainer_destroy(&t);
    if (pl) pipeline_destroy(pl);
    for (int c = 0; c < vpp; c++) {
        if (dp) dp_destroy(&dp[c]);
        free(tensor_weight[c]);
        model_destroy(&chunks[c]);
    }
    free(tensor_weight);
    free(dp);
    free(chunks);
    if (dense_group && dense_group != groups.dp) comm_group_free(dense_group);
    hb_finish();
    if (distributed) comm_finalize();
    return 0;
}
