/* data_cmd.c: `myriad data prepare` and `myriad data info`. Prepare lists the inputs; with
 * --tokenizer it hands them to prepare_tok.c (a model's tokenizer, documents, threads),
 * without it it writes byte-level shards (token = byte) right here. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "data/input_kind.h"
#include "data/prepare_tok.h"
#include "data/shard_stream.h"
#include "data/shards.h"
#include "io/path_check.h"
#include "util/opts.h"
#include "util/error.h"

/* ---------- input listing ---------- */

typedef struct {
    char **paths;
    uint64_t *sizes;
    int n, cap;
} FileList;

static int list_push(FileList *l, const char *path, uint64_t size) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        char **p = realloc(l->paths, l->cap * sizeof *p);
        if (p) l->paths = p;
        uint64_t *s = realloc(l->sizes, l->cap * sizeof *s);
        if (s) l->sizes = s;
        if (!p || !s) return myr_error("out of memory listing inputs");
    }
    if (!(l->paths[l->n] = strdup(path))) return myr_error("out of memory listing inputs");
    l->sizes[l->n++] = size;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Is `path` inside directory `dir_real` (a realpath)? Keeps our own output out of the input. */
static int inside(const char *path, const char *dir_real) {
    if (!dir_real) return 0;
    char real[PATH_MAX];
    if (!realpath(path, real)) return 0;
    size_t n = strlen(dir_real);
    return !strncmp(real, dir_real, n) && real[n] == '/';
}

static int add_input(FileList *l, const char *path, const char *skip_dir) {
    struct stat st;
    if (stat(path, &st)) return myr_error("cannot open input %s: %s (check the path)", path, strerror(errno));
    if (S_ISREG(st.st_mode)) return inside(path, skip_dir) ? 0 : list_push(l, path, (uint64_t)st.st_size);
    if (!S_ISDIR(st.st_mode)) return myr_error("input %s is neither a file nor a directory", path);
    DIR *dir = opendir(path);
    if (!dir) return myr_error("cannot list input directory %s: %s", path, strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0, rc = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        if (e->d_name[0] == '.') continue; /* ., .., .git, editor droppings */
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(names, cap * sizeof *p);
            if (!p) { rc = myr_error("out of memory listing %s", path); break; }
            names = p;
        }
        if (!(names[n] = strdup(e->d_name))) { rc = myr_error("out of memory listing %s", path); break; }
        n++;
    }
    closedir(dir);
    if (!rc) qsort(names, n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        if (!rc) {
            size_t len = strlen(path) + strlen(names[i]) + 2;
            char *child = malloc(len);
            if (!child) rc = myr_error("out of memory");
            else {
                snprintf(child, len, "%s/%s", path, names[i]);
                struct stat cs;
                /* recurse into directories and regular files only (no sockets, fifos, ...) */
                if (stat(child, &cs) == 0 && (S_ISREG(cs.st_mode) || S_ISDIR(cs.st_mode)))
                    rc = add_input(l, child, skip_dir);
                free(child);
            }
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

/* ---------- streaming bytes into a split's shards ---------- */

typedef struct {
    const char *dir, *split; /* "train" / "val" */
    int version;
    uint64_t total, per_shard, done;
    int shard, open;
    ShardWriter w;
} SplitWriter;

static void shard_name(char *buf, size_t len, const char *dir, const char *split, int i) {
    snprintf(buf, len, "%s/%s_%06d.bin", dir, split, i);
}

static int split_open_next(SplitWriter *s) {
    char path[PATH_MAX];
    shard_name(path, sizeof path, s->dir, s->split, s->shard);
    uint64_t left = s->total - s->done, n = left < s->per_shard ? left : s->per_shard;
    if (shard_writer_open(&s->w, path, s->version, n)) return -1;
    s->open = 1;
    return 0;
}

static int split_close(SplitWriter *s) {
    s->open = 0;
    if (shard_writer_commit(&s->w)) return -1;
    s->shard++;
    return 0;
}

static int split_feed(SplitWriter *s, const uint8_t *bytes, uint64_t n) {
    while (n > 0) {
        if (!s->open && split_open_next(s)) return -1;
        uint64_t room = s->w.expected - s->w.written, take = n < room ? n : room;
        if (shard_writer_append_bytes(&s->w, bytes, take)) return -1;
        s->done += take;
        bytes += take;
        n -= take;
        if (s->w.written == s->w.expected && split_close(s)) return -1;
    }
    return 0;
}

/* Close out the split: an empty split still writes its one empty shard. */
static int split_finish(SplitWriter *s) {
    if (s->done != s->total) return myr_error("internal: %s split short by %" PRIu64 " tokens", s->split,
                                              s->total - s->done);
    if (s->shard == 0 && !s->open && split_open_next(s)) return -1;
    if (s->open && split_close(s)) return -1;
    return 0;
}

static int mkdir_p(const char *dir) {
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return myr_error("--out path too long");
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || !*p) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0755) && errno != EEXIST)
                return myr_error("cannot create directory %s: %s", buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) return myr_error("--out %s is not a directory", dir);
    return 0;
}

typedef struct {
    const char **inputs;
    int n;
} Inputs;

static int add_positional(void *ctx, const char *arg) {
    Inputs *in = ctx;
    in->inputs[in->n++] = path_trim(strdup(arg));
    return 0;
}

static int prepare(int argc, char **argv) {
    const char *out = NULL;
    double val_fraction = 0.1;
    int version = 0;
    long long shard_tokens = 100000000;
    PrepareTokOptions to = {0};
    long long seed = 1337;
    int strict = 0, include_binary = 0;
    static const char *const versions[] = {"1", "7", NULL};
    static const int version_values[] = {1, 7};
    Inputs in = {calloc(argc, sizeof(char *)), 0};
    if (!in.inputs) myr_die("out of memory");
    const Opt rows[] = {
        OPT_STR("--tokenizer", "T.json", &to.tokenizer,
                "a Hugging Face tokenizer.json (GPT-2, Llama 2, Llama 3, ...): see below"),
        OPT_STR("--out", "DIR", &out, "where the shards go (created if missing; required)"),
        OPT_STR("--jsonl-field", "NAME", &to.jsonl_field,
                "read JSON lines, each line one document: the text in field NAME"),
        OPT_BELOW(OPT_DOUBLE("--val-fraction", "F", &val_fraction, 0, 1,
                             "the validation share (default 0.1; 0 writes an empty val shard, and\n"
                             "training then has no validation data): the last F of the bytes, or\n"
                             "with --tokenizer that share of the documents, chosen by --seed")),
        OPT_I64("--seed", "N", &seed, 0, 1e18, "which documents are validation (--tokenizer; default 1337)"),
        OPT_INT("--threads", "N", &to.threads, 1, 1024, "encoding threads (--tokenizer; default: all cores)"),
        OPT_STR("--doc-prefix", "TOKEN|none", &to.doc_prefix, "override the token before each document (--tokenizer)"),
        OPT_STR("--doc-suffix", "TOKEN|none", &to.doc_suffix, "override the token after each document (--tokenizer)"),
        OPT_CHOICE_V("--version", "1|7", &version, versions, version_values,
                     "1: uint16 tokens, 7: uint32 tokens (default: 1 when the vocabulary fits)"),
        OPT_I64("--shard-tokens", "N", &shard_tokens, 1, 2147483647, "at most N tokens per shard (default 100000000)"),
        OPT_SWITCH("--strict", &strict, "refuse binary inputs instead of skipping them (one line each)"),
        OPT_SWITCH("--include-binary", &include_binary,
                   "read every input as text, binary-looking ones too (a text with stray NUL bytes)"),
        OPT_END};
    OptCommand cmd = {
        .name = "data prepare",
        .usage = "usage: myriad data prepare [--tokenizer T.json] INPUT... --out DIR [options]\n"
                 "  Writes llm.c token shards DIR/train_000000.bin ... and DIR/val_000000.bin ... . INPUT is a\n"
                 "  file or a directory (read recursively, sorted, hidden entries skipped).\n"
                 "  With --tokenizer: every file is one document, or with --jsonl-field every line of every file\n"
                 "  is one; files may be gzip-compressed. Each document gets the family's separator (GPT-2:\n"
                 "  <|endoftext|> before it; Llama: BOS) and goes whole to train or val. Tokens are uint16 when\n"
                 "  the vocabulary fits, else uint32 (version 7). The output is the same for any --threads; the\n"
                 "  tokenizer.json is copied to DIR. Shards appear only when all input is encoded (an error\n"
                 "  leaves none).\n"
                 "  Without --tokenizer: a byte-level tokenizer (vocab 256: token = byte value); inputs are\n"
                 "  concatenated in order.\n"
                 "  Binary files (a NUL byte or a known magic number in their first 64 KiB: safetensors, token\n"
                 "  shards, parquet, zip, gzip without --tokenizer, images, executables, ...) are skipped with one\n"
                 "  line each and counted in the summary; --strict refuses them, --include-binary reads them.",
        .rows = rows,
        .footer = "  Train on the result with `myriad train --data DIR`: a directory made here trains on\n"
                  "  DIR/train_*.bin and validates on DIR/val_*.bin (`--data 'DIR/train_*.bin'` trains on the same\n"
                  "  shards without validation data).\n",
        .positional = add_positional,
        .ctx = &in};
    opts_parse(&cmd, argc, argv);
    const char **inputs = in.inputs;
    int n_inputs = in.n;
    if (!out) myr_die("data prepare: --out DIR is required (see --help)");
    out = path_trim(strdup(out));
    if (n_inputs == 0) myr_die("data prepare: give at least one input text file or directory (see --help)");
    if (!to.tokenizer && (to.jsonl_field || to.doc_prefix || to.doc_suffix || to.threads))
        myr_die("data prepare: --jsonl-field, --threads and --doc-prefix/--doc-suffix need --tokenizer T.json");
    to.seed = (uint64_t)seed;
    if (mkdir_p(out)) myr_die_last();

    char out_real[PATH_MAX];
    const char *skip = realpath(out, out_real) ? out_real : NULL;
    FileList files = {0};
    for (int i = 0; i < n_inputs; i++)
        if (add_input(&files, inputs[i], skip)) myr_die_last();
    if (files.n == 0) myr_die("data prepare: the inputs contain no files");
    /* binary files would become tokens of noise: left out (said), or refused with --strict */
    if (strict && include_binary) myr_die("data prepare: --strict refuses binary inputs, --include-binary reads them: give one");
    int kept = 0, skipped = 0;
    for (int i = 0; i < files.n && !include_binary; i++) {
        char why[256];
        int bin = input_is_binary(files.paths[i], to.tokenizer != NULL, why, sizeof why);
        if (bin < 0) myr_die_last();
        if (bin && strict)
            myr_die("data prepare: %s is binary (%s), not text; leave it out of the inputs, or drop --strict to skip "
                    "binary files", files.paths[i], why);
        if (bin) {
            fprintf(stderr, "data prepare: skipping %s: %s, not text\n", files.paths[i], why);
            free(files.paths[i]);
            skipped++;
            continue;
        }
        files.paths[kept] = files.paths[i], files.sizes[kept] = files.sizes[i], kept++;
    }
    if (!include_binary) files.n = kept;
    if (files.n == 0)
        myr_die("data prepare: the inputs hold no text files (%d binary skipped, listed above): give text files "
                "or directories of them", skipped);
    to.skipped_binary = skipped;
    for (int i = 0; i < files.n && !to.jsonl_field; i++) {
        const char *p = files.paths[i];
        size_t len = strlen(p);
        if ((len > 6 && !strcmp(p + len - 6, ".jsonl")) || (len > 9 && !strcmp(p + len - 9, ".jsonl.gz")))
            myr_die("data prepare: %s looks like JSON lines; give --jsonl-field NAME (the field holding the text)%s", p,
                    to.tokenizer ? "" : " and --tokenizer T.json");
    }
    if (to.tokenizer) {
        to.out = out;
        to.val_fraction = val_fraction;
        to.shard_tokens = shard_tokens;
        to.version = version;
        int rc = prepare_tokenized(&to, files.paths, files.sizes, files.n);
        for (int i = 0; i < files.n; i++) free(files.paths[i]);
        free(files.paths);
        free(files.sizes);
        free((void *)inputs);
        return rc;
    }
    if (!version) version = 1;
    uint64_t total = 0;
    for (int i = 0; i < files.n; i++) total += files.sizes[i];
    uint64_t n_val = (uint64_t)((long double)total * val_fraction);
    SplitWriter train = {.dir = out, .split = "train", .version = version, .total = total - n_val,
                         .per_shard = (uint64_t)shard_tokens};
    SplitWriter val = {.dir = out, .split = "val", .version = version, .total = n_val, .per_shard = (uint64_t)shard_tokens};

    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(CHUNK);
    if (!buf) myr_die("out of memory");
    int rc = 0;
    for (int i = 0; i < files.n && !rc; i++) {
        FILE *fp = fopen(files.paths[i], "rb");
        if (!fp) {
            rc = myr_error("cannot open input %s: %s", files.paths[i], strerror(errno));
            break;
        }
        uint64_t got_total = 0;
        for (size_t got; !rc && (got = fread(buf, 1, CHUNK, fp)) > 0;) {
            got_total += got;
            if (got_total > files.sizes[i]) break;
            /* bytes go to train until its share is full, the rest to val */
            uint64_t to_train = train.total - train.done;
            if (to_train > got) to_train = got;
            rc = split_feed(&train, buf, to_train);
            if (!rc) rc = split_feed(&val, buf + to_train, got - to_train);
        }
        if (!rc && ferror(fp)) rc = myr_error("reading %s failed", files.paths[i]);
        if (!rc && got_total != files.sizes[i])
            rc = myr_error("input %s changed size while being read (%" PRIu64 " bytes, expected %" PRIu64
                           "); run again", files.paths[i], got_total, files.sizes[i]);
        fclose(fp);
    }
    if (!rc) rc = split_finish(&train);
    if (!rc) rc = split_finish(&val);
    if (rc) {
        if (train.open) shard_writer_abort(&train.w);
        if (val.open) shard_writer_abort(&val.w);
        myr_die_last();
    }
    int stale = shards_remove_stale(out, "train", train.shard) + shards_remove_stale(out, "val", val.shard);
    char skipped_note[64] = "";
    if (skipped) snprintf(skipped_note, sizeof skipped_note, " (%d binary skipped)", skipped);
    printf("data prepare: %d input file%s%s, %" PRIu64 " bytes -> train %" PRIu64 " tokens in %d shard%s (%s/train_*.bin), "
           "val %" PRIu64 " tokens in %d shard%s (%s/val_*.bin); byte-level vocab 256, version %d",
           files.n, files.n == 1 ? "" : "s", skipped_note, total, train.total, train.shard, train.shard == 1 ? "" : "s", out,
           val.total, val.shard, val.shard == 1 ? "" : "s", out, version);
    if (stale) printf("; removed %d stale shard%s", stale, stale == 1 ? "" : "s");
    printf("\n");
    for (int i = 0; i < files.n; i++) free(files.paths[i]);
    free(files.paths);
    free(files.sizes);
    free(buf);
    free((void *)inputs);
    return 0;
}

static int set_path(void *ctx, const char *arg) {
    const char **path = ctx;
    if (*path) return myr_error("give exactly one PATH (got %s and %s)", *path, arg);
    *path = path_trim(strdup(arg));
    return 0;
}

static int info(int argc, char **argv) {
    const char *path = NULL;
    const Opt rows[] = {OPT_END};
    OptCommand cmd = {.name = "data info",
                      .usage = "usage: myriad data info PATH\n"
                               "  Validates the shards PATH names (a file, a directory of *.bin or a glob) and prints each\n"
                               "  shard's version, token count and largest token, then the total.",
                      .rows = rows,
                      .positional = set_path,
                      .ctx = &path};
    opts_parse(&cmd, argc, argv);
    if (!path) myr_die("data info: give exactly one PATH (a shard, a directory or a glob; see --help)");
    TokenData *d;
    if (tokens_open(path, &d)) myr_die_last();
    enum { CHUNK = 1 << 16 };
    int32_t *buf = malloc(CHUNK * sizeof *buf);
    if (!buf) myr_die("out of memory");
    uint64_t pos = 0;
    for (int s = 0; s < tokens_num_shards(d); s++) {
        uint64_t n = tokens_shard_count(d, s);
        int32_t max = -1;
        for (uint64_t done = 0; done < n;) {
            uint64_t m = n - done < CHUNK ? n - done : CHUNK;
            if (tokens_read(d, pos + done, m, buf)) myr_die_last();
            for (uint64_t i = 0; i < m; i++)
                if (buf[i] > max) max = buf[i];
            done += m;
        }
        pos += n;
        int v = tokens_shard_version(d, s);
        printf("%s: version %d (%s tokens), %" PRIu64 " tokens", tokens_shard_path(d, s), v,
               v == 1 ? "uint16" : "uint32", n);
        if (n) printf(", max token %d", max);
        printf("\n");
    }
    printf("total: %d shard%s, %" PRIu64 " tokens\n", tokens_num_shards(d), tokens_num_shards(d) == 1 ? "" : "s",
           tokens_count(d));
    free(buf);
    tokens_close(d);
    return 0;
}

int cmd_data(int argc, char **argv) {
    static const char usage[] = "usage: myriad data <prepare|info> [options]   (myriad data <sub> --help)\n"
                                "  prepare   text files and directories -> byte-level llm.c token shards\n"
                                "  info      validate shards and print their versions and token counts\n";
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "prepare")) return prepare(argc - 1, argv + 1);
    if (!strcmp(argv[1], "info")) return info(argc - 1, argv + 1);
    myr_die("data: unknown subcommand '%s' (use prepare or info)", argv[1]);
}
