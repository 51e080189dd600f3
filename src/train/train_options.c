/* train_options.c: flag and config-file parsing for `myriad train`. */
#include "train/train_options.h"
#include "train/ckpt_policy.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model/hf_config.h"
#include "kernels/kernels.h"
#include "io/path_check.h"
#include "model/hf_weights.h"
#include "model/presets.h"
#include "parallel/schedule.h"
#include "train/mem_checkpoint.h"
#include "comm/comm_opts.h"
#include "util/opts.h"
#include "util/error.h"

#define UNSET INT_MIN /* an MoE flag not given (any given value is checked by model_config_validate) */
#define BIG 2147483647.0   /* "no upper limit" for an int */
#define HUGE_STEPS 1e15    /* "no upper limit" for a step count */

static void defaults(TrainOptions *o) {
    memset(o, 0, sizeof *o);
    o->layers = o->hidden = o->heads = o->kv_heads = o->ffn = o->vocab = o->max_seq = -1;
    o->batch = o->seq = -1;
    o->steps = -1;
    o->shuffle = 1;
    o->seed = 1337;
    optim_options_default(&o->optim);
    o->eval_batches = 20;
    o->sample_tokens = -1;
    o->print_every = 0;
    o->threads = 0;
    o->device = NULL;
    o->dtype = -1;
    o->tf32 = 0;
    o->vocab_pad = -1;
    o->dpo.zero = 0;
    o->save_dtype = HF_SAVE_F32;
    o->save_shard_bytes = HF_DEFAULT_SHARD_BYTES;
    o->dpo.bucket_mb = 25;
    o->dpo.grad_dtype = COMM_F32;
    o->dpo.overlap = 1;
    o->comm = comm_default_options();
    o->pp = 1;
    o->vpp = 1;
    o->ep = 1;
    o->cp = 1;
    o->doc_sep = -1;
    o->experts = o->top_k = o->shared_experts = o->expert_ffn = o->moe_every = UNSET;
    o->capacity_factor = o->aux_loss_coef = NAN; /* not given */
    o->schedule = SCHEDULE_1F1B;
    o->mem_ckpt_every = -1;
    o->on_nan = TRAIN_ON_NAN_STOP;
    o->max_nan_skips = 5;
    o->inject_nan_step = -1;
}

/* ---- values with their own syntax (OPT_CALL: dst is the TrainOptions) ---- */

static int parse_arch(void *dst, const char *v) {
    TrainOptions *o = dst;
    if (model_arch_parse(v, &o->arch)) return -1;
    o->arch_given = 1;
    return 0;
}

static int parse_seed(void *dst, const char *v) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end || errno || v[0] == '-')
        return myr_error("--seed expects an integer in [0, 18446744073709551615], got '%s'", v);
    ((TrainOptions *)dst)->seed = x;
    return 0;
}

/* --save-every / --mem-ckpt-every: N >= 0, or auto (the Young/Daly interval, train/ckpt_policy.h) */
static int parse_every(const char *flag, const char *v, int *out) {
    if (!strcmp(v, "auto")) {
        *out = CKPT_EVERY_AUTO;
        return 0;
    }
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < 0 || x > 1000000000)
        return myr_error("%s expects a number of steps >= 0 or auto, got '%s'", flag, v);
    *out = (int)x;
    return 0;
}
static int parse_save_every(void *dst, const char *v) { return parse_every("--save-every", v, &((TrainOptions *)dst)->save_every); }
static int parse_mem_every(void *dst, const char *v) {
    return parse_every("--mem-ckpt-every", v, &((TrainOptions *)dst)->mem_ckpt_every);
}
static int parse_mtbf(void *dst, const char *v) {
    double s = ckpt_policy_parse_duration(v);
    if (s <= 0) return myr_error("--mtbf expects a duration > 0 (seconds, or with s, m, h or d: 3600, 90m, 2h), got '%s'", v);
    ((TrainOptions *)dst)->mtbf_s = s;
    return 0;
}

static int parse_lr_schedule(void *dst, const char *v) {
    return lr_schedule_parse(v, &((TrainOptions *)dst)->optim.schedule.kind);
}

static int parse_schedule(void *dst, const char *v) {
    TrainOptions *o = dst;
    ScheduleKind k;
    if (schedule_parse(v, &k)) return -1;
    o->schedule = (int)k;
    o->schedule_given = 1;
    return 0;
}

static int parse_stage_layers(void *dst, const char *v) {
    TrainOptions *o = dst;
    o->n_stage_layers = 0;
    for (const char *q = v; *q;) {
        char *end;
        long n = strtol(q, &end, 10);
        if (end == q || n < 1 || n > 1 << 20 || o->n_stage_layers == 256 || (*end && *end != ','))
            return myr_error("--stage-layers expects positive layer counts separated by commas, got '%s'", v);
        o->stage_layers[o->n_stage_layers++] = (int)n;
        q = *end == ',' ? end + 1 : end;
    }
    if (!o->n_stage_layers) return myr_error("--stage-layers expects positive layer counts separated by commas");
    return 0;
}

/* --inject-nan STEP[:RANK]: step counted from 1, rank 0 by default */
static int parse_inject_nan(void *dst, const char *v) {
    TrainOptions *o = dst;
    char *end;
    long long step = strtoll(v, &end, 10), rank = 0;
    if (end != v && *end == ':') {
        const char *r = end + 1;
        rank = strtoll(r, &end, 10);
        if (end == r) end = (char *)"x";
    }
    if (end == v || *end || step < 1 || rank < 0 || rank > 1 << 24)
        return myr_error("--inject-nan expects STEP[:RANK] with STEP >= 1 and RANK >= 0, got '%s'", v);
    o->inject_nan_step = (long)step;
    o->inject_nan_rank = (int)rank;
    return 0;
}

static int parse_device(void *dst, const char *v) {
    if (strcmp(v, "cpu") && strcmp(v, "cuda")) return myr_error("unknown --device '%s' (use cpu or cuda)", v);
    ((TrainOptions *)dst)->device = v;
    return 0;
}

static int parse_dtype(void *dst, const char *v) {
    Dtype dt;
    if (dtype_parse(v, &dt)) return myr_error("unknown --dtype '%s' (use fp32 or bf16)", v);
    ((TrainOptions *)dst)->dtype = (int)dt;
    return 0;
}

/* --save-shard-size SIZE: bytes, or with a unit as Hugging Face's max_shard_size takes it (KB, MB,
 * GB: powers of 1000; KiB, MiB, GiB: of 1024) */
static int parse_shard_size(void *dst, const char *v) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    static const struct {
        const char *unit;
        double scale;
    } units[] = {{"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
                 {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    double scale = 0;
    for (size_t i = 0; end != v && i < sizeof units / sizeof units[0]; i++)
        if (!strcasecmp(end, units[i].unit)) scale = units[i].scale;
    if (end == v || errno || !(x > 0) || scale == 0 || x * scale < 1 || x * scale > 1e18)
        return myr_error("--save-shard-size expects a size such as 5GB, 500MB, 2GiB or a byte count, got '%s'", v);
    ((TrainOptions *)dst)->save_shard_bytes = (uint64_t)(x * scale);
    return 0;
}

static const char *const recompute_names[] = {"none", "selective", "full", NULL};
static const char *const save_dtype_names[] = {"fp32", "bf16", NULL};
static const int save_dtype_values[] = {HF_SAVE_F32, HF_SAVE_BF16};
static const char *const grad_dtype_names[] = {"fp32", "bf16", NULL};
static const int grad_dtype_values[] = {COMM_F32, COMM_BF16};
static const char *const on_nan_names[] = {"stop", "skip", NULL};

/* The option table of `myriad train`: parsing, ranges and --help (src/util/opts.h). */
#define TRAIN_ROWS(o, p)                                                                                              \
    OPT_SECTION("model (one of --init, --preset, shape flags; --config may give any of them):"),                    \
    OPT_STR("--init", "DIR", &(o)->init_dir,                                                                        \
            "start from DIR/config.json + DIR/model.safetensors (Hugging Face layout)"),                           \
    OPT_STR("--preset", "NAME", &(o)->preset, preset_help),                                                         \
    OPT_CALL("--arch", "gpt2|llama", (o), parse_arch, "model family of the shape flags (default gpt2)"),            \
    OPT_INT("--layers", "N", &(o)->layers, 1, 1 << 20, "transformer blocks"),                                       \
    OPT_INT("--hidden", "N", &(o)->hidden, 1, 1 << 24, "model width"),                                               \
    OPT_INT("--heads", "N", &(o)->heads, 1, 1 << 20, "attention heads"),                                            \
    OPT_INT("--kv-heads", "N", &(o)->kv_heads, 1, 1 << 20, "key/value heads (grouped-query attention; default heads)"), \
    OPT_INT("--ffn", "N", &(o)->ffn, 1, 1 << 26, "MLP width (default 4 x hidden)"),                                 \
    OPT_INT("--vocab", "N", &(o)->vocab, 1, 1 << 28, "vocabulary size"),                                            \
    OPT_INT("--max-seq", "N", &(o)->max_seq, 1, 1 << 24, "positions of the model (default --seq)"),                 \
    OPT_INT("--experts", "E", &(o)->experts, 0, 1 << 16,                                                             \
            "mixture of experts: E routed experts per MoE layer (docs/MOE.md; 0 = dense)"),                         \
    OPT_INT("--top-k", "K", &(o)->top_k, 1, 1 << 16, "experts per token (default 2)"),                               \
    OPT_INT("--shared-experts", "S", &(o)->shared_experts, 0, 1 << 16, "experts every token also runs (default 0)"), \
    OPT_POSITIVE("--capacity-factor", "F", &(o)->capacity_factor, 1e6,                                               \
                 "tokens an expert takes per sequence, x its fair share (default 1.25)"),                           \
    OPT_SWITCH("--dropless", &(o)->dropless, "no capacity limit (instead of --capacity-factor)"),                   \
    OPT_DOUBLE("--aux-loss-coef", "C", &(o)->aux_loss_coef, 0, 1e6, "load-balancing loss weight (default 0.01)"),  \
    OPT_INT("--moe-every", "N", &(o)->moe_every, 1, 1 << 20, "layer l is MoE when (l+1) % N == 0 (default 1)"),    \
    OPT_INT("--expert-ffn", "N", &(o)->expert_ffn, 1, 1 << 26, "expert MLP width (default --ffn)"),                 \
    OPT_STR("--config", "FILE.json", &config_path,                                                                  \
            "flags as JSON keys ({\"batch\": 8, \"no-shuffle\": true, ...}) or a Hugging Face\n"                       \
            "config.json for the shape; command-line flags override it"),                                            \
    OPT_SECTION("data:"),                                                                                            \
    OPT_STR("--data", "PATH", &(o)->data,                                                                            \
            "llm.c token shards: a file, a directory or a glob; a directory made by\n"                               \
            "`myriad data prepare` trains on DIR/train_*.bin and validates on DIR/val_*.bin"),                       \
    OPT_STR("--val-data", "PATH", &(o)->val_data, "validation shards (default: DIR/val_*.bin of a --data DIR)"),    \
    OPT_INT("--batch", "B", &(o)->batch, 1, BIG, "global batch in sequences (required)"),                           \
    OPT_INT("--seq", "T", &(o)->seq, 1, 1 << 24, "sequence length in tokens (required)"),                           \
    OPT_LONG("--steps", "N", &(o)->steps, 0, HUGE_STEPS, "optimizer steps of the run (required)"),                  \
    OPT_CALL("--seed", "N", (o), parse_seed, "seed of the initial weights and of the shuffle (default 1337)"),      \
    OPT_SWITCH_TO("--no-shuffle", &(o)->shuffle, 0,                                                                  \
                  "batch k = tokens [k*B*T, k*B*T + B*T + 1) of the concatenated shards"),                           \
    OPT_SECTION("optimizer (AdamW as torch.optim.AdamW; decay only on tensors with >= 2 dims):"),                  \
    OPT_DOUBLE("--lr", "X", &(p)->schedule.lr, 0, 1e6, "peak learning rate (default 3e-4)"),                        \
    OPT_CALL("--lr-schedule", "constant|cosine", (o), parse_lr_schedule, "learning-rate schedule (default constant)"), \
    OPT_LONG("--warmup", "N", &(p)->schedule.warmup, 0, HUGE_STEPS, "linear warm-up steps (default 0)"),           \
    OPT_DOUBLE("--min-lr", "X", &(p)->schedule.min_lr, 0, 1e6, "final learning rate of the cosine schedule (default 0)"), \
    OPT_DOUBLE("--weight-decay", "X", &(p)->adam.weight_decay, 0, 1e6, "decoupled weight decay (default 0.1)"),   \
    OPT_BELOW(OPT_DOUBLE("--beta1", "X", &(p)->adam.beta1, 0, 1, "AdamW beta1 (default 0.9)")),                    \
    OPT_BELOW(OPT_DOUBLE("--beta2", "X", &(p)->adam.beta2, 0, 1, "AdamW beta2 (default 0.95)")),                   \
    OPT_POSITIVE("--eps", "X", &(p)->adam.eps, 1, "AdamW epsilon (default 1e-8)"),                                  \
    OPT_DOUBLE("--clip", "X", &(p)->clip, 0, 1e12, "clip the global gradient norm to X (default 1.0; 0 = off)"),   \
    OPT_SECTION("non-finite values (docs/TRAINING.md):"),                                                            \
    OPT_CHOICE("--on-nan", "stop|skip", &(o)->on_nan, on_nan_names,                                                  \
               "a step whose loss or gradient norm is not finite: stop there (default; exit\n"                       \
               "code 3, nothing saved over the last good checkpoint) or skip its update"),                           \
    OPT_GIVEN(OPT_INT("--max-nan-skips", "N", &(o)->max_nan_skips, 1, 1 << 20,                                      \
            "with --on-nan skip: at most N non-finite steps in a row are skipped;\n"                                      \
            "the next one stops the run (default 5)"), &(o)->max_nan_skips_given),   \
    OPT_CALL("--inject-nan", "STEP[:RANK]", (o), parse_inject_nan,                                                   \
             "testing: turn one gradient of RANK (default 0) to NaN at STEP (counted from 1)"),                     \
    OPT_SECTION("output and checkpoints:"),                                                                          \
    OPT_INT("--eval-every", "N", &(o)->eval_every, 0, BIG,                                                           \
            "validation loss every N steps and at the end (needs validation data; 0 = only at the end)"),           \
    OPT_GIVEN(OPT_INT("--eval-batches", "K", &(o)->eval_batches, 1, BIG, "validation batches per evaluation (default 20)"), \
              &(o)->eval_batches_given),                                                                             \
    OPT_STR("--log", "FILE.jsonl", &(o)->log_path,                                                                   \
            "one JSON object per step: step (from 1), loss, lr, grad_norm, tokens_per_s,\n"                          \
            "mfu, ms (non-finite numbers are written as null)"),                                                    \
    OPT_STR("--save", "DIR", &(o)->save_dir,                                                                        \
            "write the final model as DIR/config.json + DIR/model.safetensors (or shards\n"                         \
            "with model.safetensors.index.json above --save-shard-size), every rank its own slices"), \
    OPT_CHOICE_V("--save-dtype", "fp32|bf16", &(o)->save_dtype, save_dtype_names, save_dtype_values,              \
                 "dtype of the exported weights (default fp32)"),                                                  \
    OPT_CALL("--save-shard-size", "SIZE", (o), parse_shard_size,                                                      \
             "largest export file before it is cut into shards (default 5GB, as Hugging Face)"),                   \
    OPT_CALL("--save-every", "N|auto", (o), parse_save_every,                                                        \
             "also a sharded checkpoint DIR/step-NNNNNNNN every N steps (async; 0 = none;\n"                         \
             "auto: the Young/Daly interval from the measured save cost and --mtbf)"),                              \
    OPT_INT("--keep", "K", &(o)->keep, 0, BIG, "keep the newest K step checkpoints (default 0 = all)"),             \
    OPT_SWITCH("--sync-save", &(o)->sync_save, "wait for each checkpoint instead of writing it in the background"), \
    OPT_CALL("--mem-ckpt-every", "N|auto", (o), parse_mem_every,                                                     \
             "copy the training state to shared memory every N steps, replicated on another\n"                      \
             "host; --resume auto restores from it before disk (default 1 under `myriad run`\n"                    \
             "with --save, else 0 = off; auto: the Young/Daly interval, as --save-every auto)"),                    \
    OPT_CALL("--mtbf", "DURATION", (o), parse_mtbf,                                                                  \
             "mean time between failures for the auto intervals (3600, 90m, 2h; default: what\n"                    \
             "myriad run saw so far, else Llama 3's failure rates for the job's size)"),                            \
    OPT_LONG("--stop-after", "N", &(o)->stop_after, 1, HUGE_STEPS,                                                   \
             "stop after step N of the --steps schedule, writing the checkpoint\n"                                   \
             "DIR/step-N (needs --save DIR), to continue later with --resume"),                                      \
    OPT_STR("--resume", "DIR|auto", &(o)->resume,                                                                     \
            "continue from a checkpoint (auto: the newest valid one in --save DIR), in this\n"                       \
            "or any other parallel layout; a changed batch, seq or seed is refused"),                               \
    OPT_STR("--allow-changed", "LIST", &(o)->allow_changed,                                                          \
            "resume although these settings differ from the checkpoint's (comma list of\n"                           \
            "batch, seq, seed, lr, schedule, steps, data); said in the log"),                                        \
    OPT_INT("--sample", "N", &(o)->sample_tokens, 0, 1 << 20,                                                          \
            "print N sampled tokens as text at the end, decoded by the tokenizer"),                                  \
    OPT_STR("--tokenizer", "T.json", &(o)->tokenizer,                                                                 \
            "the model's tokenizer (default: tokenizer.json in --init DIR or --data DIR);\n"                        \
            "checked against the vocabulary, used by --sample, copied into --save DIR"),                             \
    OPT_INT("--threads", "N", &(o)->threads, 1, 1024, "compute threads (default: all cores); results do not depend on it"), \
    OPT_INT("--print-every", "N", &(o)->print_every, 1, BIG, "progress lines every N steps when stderr is not a terminal"), \
    OPT_POSITIVE("--peak-tflops", "X", &(o)->peak_tflops, 1e6,                                                      \
                 "MFU denominator (default: the GPU's dense peak for the dtype; on the CPU,\n"                          \
                 "this machine's best sgemm rate, cached per machine: docs/TRAINING.md)"),                              \
    OPT_SECTION("device (docs/GPU.md):"),                                                                            \
    OPT_CALL("--device", "cpu|cuda", (o), parse_device,                                                              \
             "where the step runs (default: cuda when this binary has CUDA and a GPU is\n"                             \
             "visible, else cpu); ranks on a machine share its GPUs round-robin"),                                   \
    OPT_CALL("--dtype", "fp32|bf16", (o), parse_dtype,                                                               \
             "activation precision (default: bf16 on cuda, fp32 on cpu); weights, gradients\n"                          \
             "and AdamW state stay fp32; on the cpu bf16 is emulated (slow)"),                                       \
    OPT_SWITCH("--tf32", &(o)->tf32, "fp32 GEMMs on the GPU may use TF32 tensor cores (default: off)"),             \
    OPT_INT("--vocab-pad", "N", &(o)->vocab_pad, 1, 65536,                                                           \
            "padded vocabulary: each tp rank's rows of the embedding and LM head (the logits'\n"                    \
            "stride) a multiple of N; padding is never predicted, stays 0 and is not exported\n"                   \
            "(default: 128 on cuda, 1 = none on cpu)"),                                                              \
    OPT_SECTION("parallelism (launch with `myriad run -n N -- train ...` or `mpirun -np N bin/myriad train ...`):"), \
    OPT_INT("--tp", "N", &(o)->tp, 1, 1 << 16,                                                                        \
            "tensor parallel: attention by heads, MLP by columns, vocab-parallel embedding\n"                         \
            "and loss; tp ranks are consecutive (world = tp x dp x ep x pp)"),                                       \
    OPT_INT("--cp", "N", &(o)->cp, 1, 1 << 16,                                                                        \
            "context parallel: each sequence cut into 2N chunks, rank r keeping chunks r and\n"                      \
            "2N-1-r; ring attention over the cp ranks (world = tp x cp x dp x ep x pp)"),                            \
    OPT_INT("--doc-mask", "TOKEN", &(o)->doc_sep, 0, 1 << 30,                                                        \
            "packed documents: a document starts at each TOKEN (e.g. GPT-2's <|endoftext|>\n"                       \
            "50256); attention stays inside documents, positions restart at each"),                                 \
    OPT_SWITCH("--sp", &(o)->sp, "sequence parallel (with --tp): norms and residuals split along the sequence"),    \
    OPT_INT("--pp", "N", &(o)->pp, 1, 1 << 16, "pipeline parallel: layers split into N stages"),                    \
    OPT_INT("--vpp", "V", &(o)->vpp, 1, 1 << 10,                                                                     \
            "model chunks per pipeline rank (V > 1 runs the interleaved schedule)"),                                  \
    OPT_CALL("--schedule", "gpipe|1f1b|interleaved", (o), parse_schedule,                                            \
             "pipeline schedule (default: 1f1b, interleaved when --vpp > 1)"),                                      \
    OPT_CALL("--stage-layers", "a,b,..", (o), parse_stage_layers, "layers of each virtual stage (default: even)"),  \
    OPT_STR("--trace", "FILE.json", &(o)->trace_path,                                                                \
            "Chrome trace of one pipeline step (needs --pp 2 or more); opens in Perfetto"),                         \
    OPT_CHOICE("--recompute", "none|selective|full", &(o)->recompute, recompute_names,                               \
               "activation recomputation: selective recomputes the attention core in\n"                              \
               "backward, full keeps only each layer's input (default none)"),                                       \
    OPT_INT("--ep", "N", &(o)->ep, 1, 1 << 16,                                                                        \
            "expert parallel: experts split over N ranks inside the data-parallel ranks"),                            \
    OPT_STR("--moe-routing", "FILE", &(o)->moe_routing,                                                              \
            "write step 1's expert assignment to FILE.<rank> (needs --experts)"),                                   \
    OPT_SWITCH("--a2a-barrier", &(o)->a2a_barrier,                                                                    \
               "measurement aid (needs --ep 2 or more): a barrier before each all-to-all"),                         \
    OPT_INT("--dp", "N", &(o)->dp, 1, 1 << 24, "data-parallel ranks (default: world / (tp x ep x pp))"),            \
    OPT_INT("--zero", "0|1|2|3", &(o)->dpo.zero, 0, 3,                                                               \
            "ZeRO: shard optimizer state (1), + gradients (2), + parameters (3)"),                                   \
    OPT_INT("--micro-batch", "b", &(o)->micro_batch, 1, BIG,                                                          \
            "sequences per micro-batch on each rank (gradient accumulation; the\n"                                    \
            "pipeline's micro-batches; default: the whole slice, 1 with --pp)"),                                     \
    OPT_POSITIVE("--bucket-mb", "X", &(o)->dpo.bucket_mb, 1e6, "gradient bucket size in MiB (default 25)"),         \
    OPT_SWITCH_TO("--no-overlap", &(o)->dpo.overlap, 0, "reduce gradients after backward instead of during it"),     \
    OPT_CHOICE_V("--grad-dtype", "fp32|bf16", &(o)->dpo.grad_dtype, grad_dtype_names, grad_dtype_values,            \
                 "gradients on the wire (bf16 is summed in fp32)"),                                                   \
    COMM_OPTS(&(o)->comm)

static const char train_usage_line[] = "usage: myriad train --data PATH --batch B --seq T --steps N [options]";
static const char *config_path; /* --config, applied before the command line */
static char preset_help[1024];

/* The command with its rows bound to *o; the rows live in *rows (TRAIN_ROW_CAP of them). */
enum { TRAIN_ROW_CAP = 128 };
static void train_command(TrainOptions *o, Opt *rows, OptCommand *cmd) {
    snprintf(preset_help, sizeof preset_help, "%s", model_preset_names());
    OptimOptions *p = &o->optim;
    const Opt table[] = {TRAIN_ROWS(o, p), OPT_END};
    size_t n = sizeof table / sizeof table[0];
    if (n > TRAIN_ROW_CAP) myr_die("internal: train has %zu options, more than %d", n, TRAIN_ROW_CAP);
    memcpy(rows, table, sizeof table);
    *cmd = (OptCommand){.name = "train", .usage = train_usage_line, .rows = rows};
}

void train_usage(void) {
    TrainOptions o;
    Opt rows[TRAIN_ROW_CAP];
    OptCommand cmd;
    defaults(&o);
    train_command(&o, rows, &cmd);
    opts_help(&cmd, stdout);
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) myr_die("--config %s: cannot open (check the path)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) myr_die("--config %s: read failed", path);
    buf[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* A flags file: every key becomes "--key value" (true booleans become "--key") and goes through
 * the same rows as the command line. Strings are kept alive for the whole run (options point
 * into them). */
static void apply_config_file(const OptCommand *cmd, TrainOptions *o, const char *path) {
    myr_die_quietly(0); /* a file: it may be missing on one host only, so every rank reports */
    size_t len;
    char *text = read_file(path, &len);
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root || !cJSON_IsObject(root)) {
        const char *at = cJSON_GetErrorPtr();
        int line = 1;
        if (at) for (const char *c = text; c < at && *c; c++) line += *c == '\n';
        myr_die("--config %s: malformed JSON near line %d (expected an object of flag names)", path, line);
    }
    if (cJSON_GetObjectItem(root, "model_type")) {
        if (hf_config_parse(text, len, path, &o->hf_shape)) myr_die_last();
        o->hf_shape_given = 1;
        cJSON_Delete(root);
        free(text);
        return;
    }
    int n = cJSON_GetArraySize(root);
    char **argv = calloc((size_t)2 * n + 1, sizeof(char *));
    int argc = 0;
    for (cJSON *it = root->child; it; it = it->next) {
        char flag[128], value[64];
        snprintf(flag, sizeof flag, "--%s", it->string);
        if (!strcmp(it->string, "config")) myr_die("--config %s: a config file cannot name another (\"config\")", path);
        if (cJSON_IsBool(it)) {
            const Opt *row = opts_find(cmd->rows, flag);
            if (row && row->kind != OPT_KIND_SWITCH)
                myr_die("--config %s: key \"%s\" takes a value (%s), not true/false", path, it->string,
                        row->meta ? row->meta : "a value");
            if (cJSON_IsTrue(it)) argv[argc++] = strdup(flag);
            else if (!row) argv[argc++] = strdup(flag); /* unknown: refused below */
            continue;
        }
        argv[argc++] = strdup(flag);
        if (cJSON_IsString(it)) argv[argc++] = strdup(it->valuestring);
        else if (cJSON_IsNumber(it)) {
            double v = it->valuedouble;
            if (v == (long long)v) snprintf(value, sizeof value, "%lld", (long long)v);
            else snprintf(value, sizeof value, "%.17g", v);
            argv[argc++] = strdup(value);
        } else myr_die("--config %s: key \"%s\" must be a string, number or boolean", path, it->string);
    }
    for (int i = 0; i < argc; i++) {
        if (!opts_apply(cmd, argc, argv, &i))
            myr_die("--config %s: unknown key \"%s\" (keys are train flags without --)", path, argv[i] + 2);
    }
    cJSON_Delete(root);
    free(text);
}

/* Settings --allow-changed may name (what a resume compares with the checkpoint's manifest). */
static const char *const changeable[] = {"batch", "seq", "seed", "lr", "schedule", "steps", "data", NULL};

int train_option_allows_change(const TrainOptions *o, const char *what) {
    if (!o->allow_changed) return 0;
    size_t n = strlen(what);
    for (const char *p = o->allow_changed; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, what, n)) return 1;
        p += len + (e != NULL);
    }
    return 0;
}

static void check_allow_changed(const TrainOptions *o) {
    if (!o->allow_changed) return;
    if (!o->resume) myr_die("train: --allow-changed only applies to a --resume");
    for (const char *p = o->allow_changed; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int known = 0;
        for (int k = 0; changeable[k] && !known; k++) known = strlen(changeable[k]) == len && !strncmp(changeable[k], p, len);
        if (!known)
            myr_die("train: --allow-changed '%.*s' is not a setting a resume compares (use batch, seq, seed, lr, "
                    "schedule, steps or data, comma-separated)", (int)len, p);
        p += len + (e != NULL);
    }
}

void train_options_parse(TrainOptions *o, int argc, char **argv) {
    defaults(o);
    Opt rows[TRAIN_ROW_CAP];
    OptCommand cmd;
    train_command(o, rows, &cmd);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            opts_help(&cmd, stdout);
            exit(0);
        }
    }
    /* the config file first, so that the command line overrides it */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--config") && i + 1 < argc) apply_config_file(&cmd, o, argv[++i]);
    opts_parse(&cmd, argc, argv);
    if (!o->data) myr_die("train: --data PATH is required (token shards; make some with `myriad data prepare`)");
    /* paths are kept without trailing slashes (what is built from them and printed has no "//") */
    const char **paths[] = {&o->data, &o->val_data, &o->save_dir, &o->init_dir, &o->resume};
    for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++)
        if (*paths[k]) *paths[k] = path_trim(strdup(*paths[k]));
    if (o->batch < 0) myr_die("train: --batch B (sequences per step, >= 1) is required");
    if (o->seq < 0) myr_die("train: --seq T (tokens per sequence, >= 1) is required");
    if (o->steps < 0) myr_die("train: --steps N is required");
    /* flags that only act together with others: refused alone rather than silently ignored */
    if (o->optim.schedule.kind != LR_COSINE && o->optim.schedule.min_lr > 0)
        myr_die("train: --min-lr is where the cosine schedule ends; add --lr-schedule cosine (or drop --min-lr)");
    if (o->save_every != 0 && !o->save_dir) myr_die("train: --save-every needs --save DIR (where the checkpoints go)");
    if (o->mtbf_s > 0 && o->save_every != CKPT_EVERY_AUTO && o->mem_ckpt_every != CKPT_EVERY_AUTO)
        myr_die("train: --mtbf sets the automatic checkpoint intervals: add --save-every auto or --mem-ckpt-every auto "
                "(or drop --mtbf)");
    if (o->stop_after > 0 && !o->save_dir)
        myr_die("train: --stop-after writes a checkpoint to continue from: give --save DIR");
    if (o->stop_after > o->steps)
        myr_die("train: --stop-after %ld is beyond --steps %ld (it stops inside the --steps schedule)", o->stop_after,
                o->steps);
    if ((o->keep > 0 || o->sync_save) && o->save_every == 0 && o->stop_after == 0)
        myr_die("train: --keep and --sync-save apply to step checkpoints: add --save-every N or --stop-after N");
    if ((o->mem_ckpt_every > 0 || o->mem_ckpt_every == CKPT_EVERY_AUTO) && !o->save_dir)
        myr_die("train: --mem-ckpt-every needs --save DIR (it names the job and holds the disk checkpoints to fall back to)");
    /* default: every step under the fault-tolerant launcher (`myriad run`), off otherwise */
    if (o->mem_ckpt_every == -1) { /* unset (CKPT_EVERY_AUTO is -2) */
        o->mem_ckpt_every = getenv("MYRIAD_HB_ADDR") && o->save_dir ? 1 : 0;
        /* a resume by hand of a job that `myriad run` left copies of (interrupted, killed): they are
         * read like under the launcher (and deleted when the run completes), no new ones made */
        if (!o->mem_ckpt_every && o->save_dir && o->resume && !strcmp(o->resume, "auto") &&
            mem_ckpt_job_has_copies(o->save_dir))
            o->mem_ckpt_every = INT_MAX;
    }
    if (o->resume && !strcmp(o->resume, "auto") && !o->save_dir)
        myr_die("train: --resume auto looks in --save DIR: give --save DIR or --resume DIR");
    check_allow_changed(o);
    if (o->tp == 0) o->tp = 1;
    if (o->sp && o->tp < 2) myr_die("train: --sp splits the sequence over the tensor-parallel group: it needs --tp 2 or more");
    if (o->trace_path && o->pp < 2)
        myr_die("train: --trace records the pipeline schedule of one step: it needs --pp 2 or more");
    if (o->schedule_given && o->pp < 2) myr_die("train: --schedule is the pipeline's: it needs --pp 2 or more");
    if (!o->schedule_given && o->vpp > 1) o->schedule = SCHEDULE_INTERLEAVED; /* as --help says */
    if (o->a2a_barrier && o->ep < 2) myr_die("train: --a2a-barrier times expert-parallel all-to-alls: it needs --ep 2 or more");
    if (o->dropless && !isnan(o->capacity_factor))
        myr_die("train: --dropless and --capacity-factor contradict each other: give one");
    if (o->inject_nan_step > o->steps)
        myr_die("train: --inject-nan %ld is beyond --steps %ld (no such step)", o->inject_nan_step, o->steps);
    if (o->on_nan != TRAIN_ON_NAN_SKIP && o->max_nan_skips_given)
        myr_die("train: --max-nan-skips applies to --on-nan skip");
    o->optim.schedule.steps = o->steps;
    int moe_flags = o->experts != UNSET || o->top_k != UNSET || o->shared_experts != UNSET ||
                    o->expert_ffn != UNSET || o->moe_every != UNSET || o->dropless || !isnan(o->capacity_factor) ||
                    !isnan(o->aux_loss_coef);
    int shape_flags = o->arch_given || o->layers > 0 || o->hidden > 0 || o->heads > 0 || o->kv_heads > 0 ||
                      o->ffn > 0 || o->vocab > 0 || o->max_seq > 0 || moe_flags;
    if (o->init_dir && (shape_flags || o->preset || o->hf_shape_given))
        myr_die("train: --init takes the shape from DIR/config.json; drop --preset and the shape flags");
}

int train_options_vocab_pad(const TrainOptions *o, const char *device) {
    if (o->vocab_pad > 0) return o->vocab_pad;
    return device && !strcmp(device, "cuda") ? 128 : 1;
}

void train_options_model_config(const TrainOptions *o, ModelConfig *c) {
    if (o->hf_shape_given) *c = o->hf_shape;
    else if (o->preset) {
        if (model_preset(o->preset, c)) myr_die_last();
    } else {
        memset(c, 0, sizeof *c);
        model_config_defaults(c, o->arch_given ? o->arch : ARCH_GPT2);
        c->layers = c->hidden = c->heads = c->kv_heads = c->ffn = c->vocab = c->max_seq = 0;
    }
    if (o->arch_given && o->arch != c->arch) {
        ModelConfig shape = *c;
        model_config_defaults(c, o->arch);
        c->layers = shape.layers; c->hidden = shape.hidden; c->heads = shape.heads; c->kv_heads = shape.kv_heads;
        c->ffn = shape.ffn; c->vocab = shape.vocab; c->max_seq = shape.max_seq;
    }
    if (o->layers > 0) c->layers = o->layers;
    if (o->hidden > 0) c->hidden = o->hidden;
    if (o->heads > 0) c->heads = o->heads;
    /* kv heads default to heads (plain multi-head attention) unless given or kept from a preset */
    if (o->kv_heads > 0) c->kv_heads = o->kv_heads;
    else if (c->arch == ARCH_GPT2 || o->heads > 0 || c->kv_heads <= 0) c->kv_heads = c->heads;
    if (o->ffn > 0) c->ffn = o->ffn;
    else if (c->ffn <= 0 && c->hidden > 0) c->ffn = 4 * c->hidden;
    if (o->vocab > 0) c->vocab = o->vocab;
    if (o->max_seq > 0) c->max_seq = o->max_seq;
    else if (c->max_seq <= 0) c->max_seq = o->seq;
    /* mixture of experts: flags override a config's; defaults once experts are asked for */
    if (o->experts != UNSET) {
        if (o->experts > 0 && c->experts == 0) {
            c->top_k = o->experts >= 2 ? 2 : 1;
            c->capacity_factor = 1.25f;
            c->aux_loss_coef = 0.01f;
            c->moe_every = 1;
        }
        c->experts = o->experts;
    }
    int moe_given = o->top_k != UNSET || o->shared_experts != UNSET || o->expert_ffn != UNSET ||
                    o->moe_every != UNSET || o->dropless || !isnan(o->capacity_factor) || !isnan(o->aux_loss_coef);
    if (moe_given && c->experts <= 0)
        myr_die("train: --top-k, --shared-experts, --capacity-factor, --dropless, --aux-loss-coef, --moe-every and "
                "--expert-ffn need --experts E (a mixture-of-experts model)");
    if (o->top_k != UNSET) c->top_k = o->top_k;
    if (o->shared_experts != UNSET) c->shared_experts = o->shared_experts;
    if (o->expert_ffn != UNSET) c->expert_ffn = o->expert_ffn;
    if (o->moe_every != UNSET) c->moe_every = o->moe_every;
    if (o->dropless) c->capacity_factor = 0;
    if (!isnan(o->capacity_factor)) c->capacity_factor = (float)o->capacity_factor;
    if (!isnan(o->aux_loss_coef)) c->aux_loss_coef = (float)o->aux_loss_coef;
    if (c->layers <= 0 || c->hidden <= 0 || c->heads <= 0 || c->vocab <= 0)
        myr_die("train: no model shape: give --init DIR, --preset NAME, or --layers --hidden --heads --vocab");
    if (model_config_validate(c)) myr_die_last();
}
