/* train_options.h: the options of `myriad train`, parsed from an optional JSON config file
 * (--config: keys are flag names without "--"; or a Hugging Face config.json for the shape)
 * and then the command line, which overrides the file. */
#ifndef MYRIAD_TRAIN_TRAIN_OPTIONS_H
#define MYRIAD_TRAIN_TRAIN_OPTIONS_H

#include <stdint.h>

#include "comm/comm.h"
#include "model/config.h"
#include "train/trainer.h"
#include "util/error.h"

enum { TRAIN_ON_NAN_STOP = 0, TRAIN_ON_NAN_SKIP = 1 };
/* The exit code of a run stopped by a non-finite value (--on-nan stop, or too many skips);
 * `myriad run` does not restart it: the same step would fail again. */
#define TRAIN_EXIT_NONFINITE MYRIAD_EXIT_NONFINITE

typedef struct {
    /* model: --init DIR, else --preset NAME and/or shape flags (-1 = not given) */
    const char *init_dir, *preset;
    int arch_given;
    ModelArch arch;
    int layers, hidden, heads, kv_heads, ffn, vocab, max_seq;
    /* mixture of experts (INT_MIN / NAN = not given) */
    int experts, top_k, shared_experts, expert_ffn, moe_every, dropless;
    double capacity_factor, aux_loss_coef;
    const char *moe_routing; /* --moe-routing FILE: each rank writes FILE.<rank> with step 1's routing */
    int hf_shape_given; /* --config was a Hugging Face config.json */
    ModelConfig hf_shape;
    /* data */
    const char *data, *val_data;
    int batch, seq;
    long steps;
    int shuffle;
    uint64_t seed;
    /* optimisation */
    OptimOptions optim;
    /* evaluation, logging, output */
    int eval_every, eval_batches, sample_tokens, print_every, threads;
    int eval_batches_given;
    const char *log_path, *save_dir, *trace_path;
    const char *tokenizer; /* --tokenizer T.json (else tokenizer.json beside --init or --data) */
    int save_every, keep, sync_save; /* sharded checkpoints into --save DIR every N steps */
    int save_dtype;                  /* the export's weights: HF_SAVE_F32 or HF_SAVE_BF16 (--save-dtype) */
    uint64_t save_shard_bytes;       /* --save-shard-size: one model.safetensors up to this, else shards */
    int mem_ckpt_every;              /* in-memory checkpoints every N steps; -1 = default, 0 = off */
                                     /* save_every, mem_ckpt_every: CKPT_EVERY_AUTO (-2) = auto (ckpt_policy.h) */
    double mtbf_s;                   /* --mtbf: seconds between failures for the auto intervals (0: not given) */
    const char *resume;              /* DIR, a step directory, or "auto" (= --save DIR) */
    long stop_after;                 /* stop (saving a checkpoint) once this many steps are done; 0 = run to --steps */
    const char *allow_changed;       /* --allow-changed a,b: settings a resume may change */
    /* non-finite loss or gradient norm (src/train/train_loop.c, docs/TRAINING.md) */
    int on_nan;                      /* TRAIN_ON_NAN_STOP or TRAIN_ON_NAN_SKIP */
    int max_nan_skips, max_nan_skips_given; /* consecutive skipped steps before stopping anyway */
    long inject_nan_step;            /* --inject-nan: step (from 1) whose gradient turns NaN; -1 = none */
    int inject_nan_rank;
    double peak_tflops; /* 0: the device's datasheet peak for the dtype (GPU), or measured (CPU) */
    /* device (docs/GPU.md) */
    const char *device; /* --device cpu|cuda; NULL: cuda when a GPU is usable, else cpu */
    int dtype;          /* --dtype fp32|bf16 as a Dtype; -1: bf16 on cuda, fp32 on cpu */
    int tf32;           /* --tf32: fp32 GEMMs on the GPU may use TF32 */
    int vocab_pad;      /* --vocab-pad N: vocabulary rows per tp rank a multiple of N; -1: 128 on cuda, 1 (none) on cpu */
    /* parallelism */
    int dp;             /* data-parallel size; 0 = the world size / tp */
    int ep;             /* expert-parallel size (inside the data-parallel ranks; 1 = none) */
    int cp;             /* context-parallel size: each sequence split over cp ranks (ring attention; 1 = none) */
    int doc_sep;        /* --doc-mask TOKEN: documents start at this token (-1: no document masks) */
    int a2a_barrier;    /* --a2a-barrier: time all-to-alls apart from waiting for other ranks */
    int tp;             /* tensor-parallel size (1 = none) */
    int sp;             /* sequence parallel (with tp > 1) */
    int recompute;      /* Recompute (model.h) */
    int pp, vpp;        /* pipeline stages, virtual stages (model chunks) per rank */
    int schedule;       /* ScheduleKind (parallel/schedule.h) */
    int schedule_given; /* --schedule appeared (else 1f1b, or interleaved when vpp > 1) */
    int stage_layers[256], n_stage_layers; /* --stage-layers a,b,c: layers of each virtual stage */
    int micro_batch;    /* sequences per micro-batch (0 = the whole per-rank slice) */
    DpOptions dpo;      /* --zero, --bucket-mb, --grad-dtype, --no-overlap */
    CommOptions comm;   /* --comm-timeout, --ranks-per-node, --comm-algo */
} TrainOptions;

/* Parse argv (argv[0] = "train"); dies with a one-line message on bad input. */
void train_options_parse(TrainOptions *o, int argc, char **argv);
/* The model shape these options describe (not for --init). Dies with the reason if invalid. */
void train_options_model_config(const TrainOptions *o, ModelConfig *c);
/* The --vocab-pad of a run on `device` ("cpu" or "cuda", as selected): given, else 128 on cuda
 * (aligned GEMM strides, as llm.c pads 50257 to 50304), 1 = none on cpu (nothing to gain). */
int train_options_vocab_pad(const TrainOptions *o, const char *device);
void train_usage(void);
/* Whether --allow-changed names `what` (batch, seq, seed, lr, schedule, steps, data). */
int train_option_allows_change(const TrainOptions *o, const char *what);

#endif
