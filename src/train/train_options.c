/* train_options.c: flag and config-file parsing for `myriad train`. */
#include "train/train_options.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/hf_config.h"
#include "kernels/kernels.h"
#include "model/presets.h"
#include "parallel/schedule.h"
#include "util/args.h"
#include "util/error.h"

void train_usage(void) {
    printf(
        "usage: myriad train --data PATH --batch B --seq T --steps N [options]\n"
        "model (one of):\n"
        "  --init DIR              start from DIR/config.json + DIR/model.safetensors (Hugging Face layout)\n"
        "  --preset NAME           %s\n"
        "  --arch gpt2|llama --layers N --hidden N --heads N --kv-heads N --ffn N --vocab N [--max-seq N]\n"
        "  --experts E [--top-k K (2)] [--shared-experts S] [--capacity-factor F (1.25) | --dropless]\n"
        "      [--aux-loss-coef C (0.01)] [--moe-every N (1)] [--expert-ffn N (ffn)]\n"
        "                          mixture of experts: layer l is MoE when (l+1) %% N == 0 (docs/MOE.md)\n"
        "  --config FILE.json      flags as JSON keys ({\"batch\": 8, \"no-shuffle\": true, ...}) or a\n"
        "                          Hugging Face config.json for the shape; command-line flags override it\n"
        "data:\n"
        "  --data PATH             llm.c token shards: a file, a directory or a glob; a directory made by\n"
        "                          `myriad data prepare` trains on train_*.bin and evaluates on val_*.bin\n"
        "  --val-data PATH         validation shards (default: DIR/val_*.bin, see above)\n"
        "  --batch B --seq T       global batch in sequences, sequence length in tokens\n"
        "  --steps N --seed N      steps to run; seed for init and the shuffle (default 1337)\n"
        "  --no-shuffle            batch k = tokens [k*B*T, k*B*T + B*T + 1) of the concatenated shards\n"
        "optimizer (AdamW as torch.optim.AdamW; decay only on tensors with >= 2 dims):\n"
        "  --lr X (3e-4) --lr-schedule constant|cosine --warmup N (0) --min-lr X (0)\n"
        "  --weight-decay X (0.1) --beta1 X (0.9) --beta2 X (0.95) --eps X (1e-8) --clip X (1.0; 0 = off)\n"
        "output:\n"
        "  --eval-every N [--eval-batches K]  validation loss every N steps (and at the end) over K batches\n"
        "  --log FILE.jsonl        one JSON object per step: step, loss, lr, grad_norm, tokens_per_s, mfu, ms\n"
        "  --save DIR              write the final model as DIR/config.json + DIR/model.safetensors\n"
        "  --save-every N          also a sharded checkpoint DIR/step-NNNNNNNN every N steps (async;\n"
        "                          --sync-save to wait), keeping the newest --keep K (default all)\n"
        "  --mem-ckpt-every N      copy the training state to shared memory every N steps, replicated on\n"
        "                          another host; --resume auto restores from it (same layout) before disk\n"
        "                          (default 1 under `myriad run` with --save, else 0 = off)\n"
        "  --stop-after N          stop after step N of the --steps schedule (saving a checkpoint), to\n"
        "                          continue later with --resume\n"
        "  --resume DIR|auto       continue from a checkpoint (auto: the newest valid one in --save DIR),\n"
        "                          in this or any other parallel layout\n"
        "  --sample N              print N sampled tokens as text at the end (byte-level vocab only)\n"
        "  --threads N             compute threads (default: all cores); results do not depend on it\n"
        "  --print-every N         progress lines when stderr is not a terminal\n"
        "  --peak-tflops X         MFU denominator (default: the GPU's dense peak for the dtype; on the CPU,\n"
        "                          this machine's measured sgemm rate)\n"
        "device (docs/GPU.md):\n"
        "  --device cpu|cuda       where the step runs (default: cuda when this binary has CUDA and a GPU\n"
        "                          is visible, else cpu); ranks on a machine share its GPUs round-robin\n"
        "  --dtype fp32|bf16       activation precision (default: bf16 on cuda, fp32 on cpu); weights,\n"
        "                          gradients and AdamW state stay fp32; on the cpu bf16 is emulated (slow)\n"
        "  --tf32                  fp32 GEMMs on the GPU may use TF32 tensor cores (default: off)\n"
        "parallelism (launch with `myriad run -n N -- train ...` or `mpirun -np N bin/myriad train ...`):\n"
        "  --tp N                  tensor parallel: attention by heads, MLP by columns, vocab-parallel\n"
        "                          embedding and loss; tp ranks are consecutive (world = tp x dp x pp)\n"
        "  --sp                    sequence parallel (with --tp): norms and residuals split along the sequence,\n"
        "                          all-reduces become reduce-scatter + all-gather\n"
        "  --pp N [--vpp V]        pipeline parallel: layers split into N stages (V model chunks per rank)\n"
        "  --schedule gpipe|1f1b|interleaved  pipeline schedule (default 1f1b; interleaved with --vpp)\n"
        "  --stage-layers a,b,..   layers of each virtual stage (default: even)\n"
        "  --trace FILE.json       Chrome trace of one pipeline step (every rank's forwards, backwards and\n"
        "                          transfers per micro-batch); opens in Perfetto\n"
        "  --recompute none|selective|full  activation recomputation: selective recomputes the attention\n"
        "                          core in backward, full keeps only each layer's input\n"
        "  --ep N                  expert parallel: experts split over N ranks inside the data-parallel\n"
        "                          ranks (tokens travel by all-to-all); world = tp x dp x ep x pp\n"
        "  --moe-routing FILE      write step 1's expert assignment to FILE.<rank> (routing determinism)\n"
        "  --a2a-barrier           measurement aid: a barrier before each all-to-all, so the log's a2a_ms is\n"
        "                          the transfer and a2a_wait_ms the wait for other ranks\n"
        "  --dp N                  data-parallel ranks (default: world / (tp x pp)); each takes a slice of\n"
        "                          every batch\n"
        "  --zero 0|1|2|3          ZeRO: shard optimizer state (1), + gradients (2), + parameters (3)\n"
        "  --micro-batch b         sequences per micro-batch on each rank (gradient accumulation; the\n"
        "                          pipeline's micro-batches; default: the whole slice, 1 with --pp)\n"
        "  --bucket-mb X (25)      gradient bucket size; --no-overlap reduces after backward instead of during it\n"
        "  --grad-dtype fp32|bf16  gradients on the wire (bf16 is summed in fp32)\n"
        "%s\n",
        model_preset_names(), comm_flags_help());
}

#define UNSET INT_MIN /* an MoE flag not given (any given value is checked by model_config_validate) */

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
    o->dpo.zero = 0;
    o->dpo.bucket_mb = 25;
    o->dpo.grad_dtype = COMM_F32;
    o->dpo.overlap = 1;
    o->comm = comm_default_options();
    o->pp = 1;
    o->vpp = 1;
    o->ep = 1;
    o->experts = o->top_k = o->shared_experts = o->expert_ffn = o->moe_every = UNSET;
    o->capacity_factor = o->aux_loss_coef = NAN; /* not given */
    o->schedule = SCHEDULE_1F1B;
    o->mem_ckpt_every = -1;
}

/* Consume argv[*i] (and its value); returns 0 if the flag is unknown. */
static int parse_flag(TrainOptions *o, int argc, char **argv, int *i) {
    const char *f = argv[*i];
    OptimOptions *p = &o->optim;
#define IS(name) (!strcmp(f, name))
    if (IS("--init")) o->init_dir = args_value(argc, argv, i);
    else if (IS("--preset")) o->preset = args_value(argc, argv, i);
    else if (IS("--arch")) {
        if (model_arch_parse(args_value(argc, argv, i), &o->arch)) myr_die_last();
        o->arch_given = 1;
    } else if (IS("--layers")) o->layers = args_next_int(argc, argv, i);
    else if (IS("--hidden")) o->hidden = args_next_int(argc, argv, i);
    else if (IS("--heads")) o->heads = args_next_int(argc, argv, i);
    else if (IS("--kv-heads")) o->kv_heads = args_next_int(argc, argv, i);
    else if (IS("--ffn")) o->ffn = args_next_int(argc, argv, i);
    else if (IS("--vocab")) o->vocab = args_next_int(argc, argv, i);
    else if (IS("--max-seq")) o->max_seq = args_next_int(argc, argv, i);
    else if (IS("--experts")) o->experts = args_next_int(argc, argv, i);
    else if (IS("--top-k")) o->top_k = args_next_int(argc, argv, i);
    else if (IS("--shared-experts")) o->shared_experts = args_next_int(argc, argv, i);
    else if (IS("--expert-ffn")) o->expert_ffn = args_next_int(argc, argv, i);
    else if (IS("--moe-every")) o->moe_every = args_next_int(argc, argv, i);
    else if (IS("--capacity-factor")) o->capacity_factor = args_next_double(argc, argv, i);
    else if (IS("--dropless")) o->dropless = 1;
    else if (IS("--aux-loss-coef")) o->aux_loss_coef = args_next_double(argc, argv, i);
    else if (IS("--moe-routing")) o->moe_routing = args_value(argc, argv, i);
    else if (IS("--ep")) o->ep = args_next_int(argc, argv, i);
    else if (IS("--a2a-barrier")) o->a2a_barrier = 1;
    else if (IS("--data")) o->data = args_value(argc, argv, i);
    else if (IS("--val-data")) o->val_data = args_value(argc, argv, i);
    else if (IS("--batch")) o->batch = args_next_int(argc, argv, i);
    else if (IS("--seq")) o->seq = args_next_int(argc, argv, i);
    else if (IS("--steps")) o->steps = args_next_i64(argc, argv, i);
    else if (IS("--seed")) o->seed = (uint64_t)args_next_i64(argc, argv, i);
    else if (IS("--no-shuffle")) o->shuffle = 0;
    else if (IS("--lr")) p->schedule.lr = args_next_double(argc, argv, i);
    else if (IS("--lr-schedule")) {
        if (lr_schedule_parse(args_value(argc, argv, i), &p->schedule.kind)) myr_die_last();
    } else if (IS("--warmup")) p->schedule.warmup = args_next_i64(argc, argv, i);
    else if (IS("--min-lr")) p->schedule.min_lr = args_next_double(argc, argv, i);
    else if (IS("--weight-decay")) p->adam.weight_decay = args_next_double(argc, argv, i);
    else if (IS("--beta1")) p->adam.beta1 = args_next_double(argc, argv, i);
    else if (IS("--beta2")) p->adam.beta2 = args_next_double(argc, argv, i);
    else if (IS("--eps")) p->adam.eps = args_next_double(argc, argv, i);
    else if (IS("--clip")) p->clip = args_next_double(argc, argv, i);
    else if (IS("--eval-every")) o->eval_every = args_next_int(argc, argv, i);
    else if (IS("--eval-batches")) o->eval_batches = args_next_int(argc, argv, i);
    else if (IS("--log")) o->log_path = args_value(argc, argv, i);
    else if (IS("--save")) o->save_dir = args_value(argc, argv, i);
    else if (IS("--trace")) o->trace_path = args_value(argc, argv, i);
    else if (IS("--save-every")) o->save_every = args_next_int(argc, argv, i);
    else if (IS("--keep")) o->keep = args_next_int(argc, argv, i);
    else if (IS("--sync-save")) o->sync_save = 1;
    else if (IS("--mem-ckpt-every")) o->mem_ckpt_every = args_next_int(argc, argv, i);
    else if (IS("--stop-after")) o->stop_after = args_next_i64(argc, argv, i);
    else if (IS("--resume")) o->resume = args_value(argc, argv, i);
    else if (IS("--sample")) o->sample_tokens = args_next_int(argc, argv, i);
    else if (IS("--threads")) o->threads = args_next_int(argc, argv, i);
    else if (IS("--print-every")) o->print_every = args_next_int(argc, argv, i);
    else if (IS("--peak-tflops")) o->peak_tflops = args_next_double(argc, argv, i);
    else if (IS("--device")) {
        o->device = args_value(argc, argv, i);
        if (strcmp(o->device, "cpu") && strcmp(o->device, "cuda"))
            myr_die("unknown --device '%s' (use cpu or cuda)", o->device);
    } else if (IS("--dtype")) {
        const char *v = args_value(argc, argv, i);
        Dtype dt;
        if (dtype_parse(v, &dt)) myr_die("unknown --dtype '%s' (use fp32 or bf16)", v);
        o->dtype = (int)dt;
    } else if (IS("--tf32")) o->tf32 = 1;
    else if (IS("--dp")) o->dp = args_next_int(argc, argv, i);
    else if (IS("--tp")) o->tp = args_next_int(argc, argv, i);
    else if (IS("--sp")) o->sp = 1;
    else if (IS("--pp")) o->pp = args_next_int(argc, argv, i);
    else if (IS("--vpp")) o->vpp = args_next_int(argc, argv, i);
    else if (IS("--schedule")) {
        ScheduleKind k;
        if (schedule_parse(args_value(argc, argv, i), &k)) myr_die_last();
        o->schedule = (int)k;
    } else if (IS("--stage-layers")) {
        const char *v = args_value(argc, argv, i);
        o->n_stage_layers = 0;
        for (const char *q = v; *q;) {
            char *end;
            long n = strtol(q, &end, 10);
            if (end == q || n < 1 || o->n_stage_layers == 256)
                myr_die("--stage-layers expects positive layer counts separated by commas, got '%s'", v);
            o->stage_layers[o->n_stage_layers++] = (int)n;
            q = *end == ',' ? end + 1 : end;
            if (*end && *end != ',') myr_die("--stage-layers expects positive layer counts separated by commas, got '%s'", v);
        }
    }
    else if (IS("--recompute")) {
        const char *v = args_value(argc, argv, i);
        if (!strcmp(v, "none")) o->recompute = 0;
        else if (!strcmp(v, "selective")) o->recompute = 1;
        else if (!strcmp(v, "full")) o->recompute = 2;
        else myr_die("--recompute '%s' is not known (use none, selective or full)", v);
    }
    else if (IS("--zero")) o->dpo.zero = args_next_int(argc, argv, i);
    else if (IS("--micro-batch")) o->micro_batch = args_next_int(argc, argv, i);
    else if (IS("--bucket-mb")) o->dpo.bucket_mb = args_next_double(argc, argv, i);
    else if (IS("--no-overlap")) o->dpo.overlap = 0;
    else if (IS("--grad-dtype")) {
        const char *v = args_value(argc, argv, i);
        if (!strcmp(v, "fp32")) o->dpo.grad_dtype = COMM_F32;
        else if (!strcmp(v, "bf16")) o->dpo.grad_dtype = COMM_BF16;
        else myr_die("--grad-dtype '%s' is not supported (use fp32 or bf16)", v);
    } else if (comm_parse_flag(&o->comm, argc, argv, i)) {
    } else return 0;
#undef IS
    return 1;
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

/* A flags file: every key becomes "--key value" (true booleans become "--key"). Strings are
 * kept alive for the whole run (options point into them). */
static void apply_config_file(TrainOptions *o, const char *path) {
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
        if (cJSON_IsBool(it)) {
            if (cJSON_IsTrue(it)) argv[argc++] = strdup(flag);
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
        if (!parse_flag(o, argc, argv, &i))
            myr_die("--config %s: unknown key \"%s\" (keys are train flags without --)", path, argv[i] + 2);
    }
    cJSON_Delete(root);
    free(text);
}

void train_options_parse(TrainOptions *o, int argc, char **argv) {
    defaults(o);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            train_usage();
            exit(0);
        }
        if (!strcmp(argv[i], "--config")) apply_config_file(o, args_value(argc, argv, &i));
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config")) { i++; continue; }
        if (!parse_flag(o, argc, argv, &i)) myr_die("train: unknown option '%s' (see myriad train --help)", argv[i]);
    }
    if (!o->data) myr_die("train: --data PATH is required (token shards; make some with `myriad data prepare`)");
    if (o->batch <= 0) myr_die("train: --batch B (sequences per step, > 0) is required");
    if (o->seq <= 0) myr_die("train: --seq T (tokens per sequence, > 0) is required");
    if (o->steps < 0) myr_die("train: --steps N is required");
    if (o->threads < 0) myr_die("--threads must be positive");
    if (o->eval_every < 0 || o->eval_batches <= 0) myr_die("--eval-every must be >= 0 and --eval-batches > 0");
    if (o->optim.schedule.lr < 0 || o->optim.schedule.min_lr < 0) myr_die("--lr and --min-lr must be >= 0");
    if (o->optim.adam.beta1 < 0 || o->optim.adam.beta1 >= 1 || o->optim.adam.beta2 < 0 || o->optim.adam.beta2 >= 1)
        myr_die("--beta1 and --beta2 must be in [0, 1)");
    if (o->optim.adam.eps <= 0) myr_die("--eps must be positive");
    if (o->optim.schedule.warmup < 0) myr_die("--warmup must be >= 0");
    if (o->dpo.zero < 0 || o->dpo.zero > 3) myr_die("--zero %d is out of range (use 0, 1, 2 or 3)", o->dpo.zero);
    if (o->dp < 0) myr_die("--dp must be positive");
    if (o->tp < 0) myr_die("--tp must be positive");
    if (o->tp == 0) o->tp = 1;
    if (o->ep < 1) myr_die("--ep must be positive");
    if (o->dropless && !isnan(o->capacity_factor))
        myr_die("--dropless and --capacity-factor contradict each other: give one");
    if (!isnan(o->capacity_factor) && !(o->capacity_factor > 0))
        myr_die("--capacity-factor must be positive (or use --dropless for no capacity limit)");
    if (!isnan(o->aux_loss_coef) && !(o->aux_loss_coef >= 0)) myr_die("--aux-loss-coef must be >= 0");
    if (o->moe_every != UNSET && o->moe_every < 1) myr_die("--moe-every must be at least 1 (1: every layer is MoE)");
    if (o->expert_ffn != UNSET && o->expert_ffn < 1) myr_die("--expert-ffn must be positive");
    if (o->pp < 1 || o->vpp < 1) myr_die("--pp and --vpp must be positive");
    if (o->save_every < 0 || o->keep < 0) myr_die("--save-every and --keep must be >= 0");
    if (o->save_every > 0 && !o->save_dir) myr_die("--save-every needs --save DIR (where the checkpoints go)");
    if (o->mem_ckpt_every < -1) myr_die("--mem-ckpt-every must be >= 0 (0 = off)");
    if (o->mem_ckpt_every > 0 && !o->save_dir)
        myr_die("--mem-ckpt-every needs --save DIR (it names the job and holds the disk checkpoints to fall back to)");
    /* default: every step under the fault-tolerant launcher (`myriad run`), off otherwise */
    if (o->mem_ckpt_every < 0) o->mem_ckpt_every = getenv("MYRIAD_HB_ADDR") && o->save_dir ? 1 : 0;
    if (o->resume && !strcmp(o->resume, "auto") && !o->save_dir)
        myr_die("--resume auto looks in --save DIR: give --save DIR or --resume DIR");
    if (o->sp && o->tp < 2) myr_die("--sp splits the sequence over the tensor-parallel group: it needs --tp 2 or more");
    if (o->micro_batch < 0) myr_die("--micro-batch must be positive");
    if (o->dpo.bucket_mb <= 0) myr_die("--bucket-mb must be positive");
    o->optim.schedule.steps = o->steps;
    int moe_flags = o->experts != UNSET || o->top_k != UNSET || o->shared_experts != UNSET ||
                    o->expert_ffn != UNSET || o->moe_every != UNSET || o->dropless || !isnan(o->capacity_factor) ||
                    !isnan(o->aux_loss_coef);
    int shape_flags = o->arch_given || o->layers > 0 || o->hidden > 0 || o->heads > 0 || o->kv_heads > 0 ||
                      o->ffn > 0 || o->vocab > 0 || moe_flags;
    if (o->init_dir && (shape_flags || o->preset || o->hf_shape_given))
        myr_die("train: --init takes the shape from DIR/config.json; drop --preset and the shape flags");
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
