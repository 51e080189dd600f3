/* prepare_tok.c: `myriad data prepare --tokenizer`.
 *
 * Pipeline: the main thread reads documents (doc_reader.c) and packs them into work items of
 * about a megabyte; worker threads encode items (each with its own TokEncoder); the main
 * thread writes finished items strictly in order into the train and val shard streams. Items
 * are formed from the input bytes alone, never from timing, so the output is the same for any
 * --threads. At most 2 x threads + 2 items are in flight: memory stays bounded.
 *
 * A document longer than a piece (1 MiB) is cut after a '\n' that precedes an ASCII letter or
 * digit, when the tokenizer allows it (tokenizer_can_cut); each piece carries the next 64 KiB
 * as lookahead, and the encoder proves the cut is a boundary of the whole document's
 * tokenization (tok_encode_piece) or fails loudly. Each document gets the family's
 * separators (tokenizer_doc_affixes) and goes whole to train or to val by a hash of --seed and
 * its number. Shards get final names only once everything was encoded (shard_stream.h). */
#include "data/prepare_tok.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data/doc_reader.h"
#include "data/shard_stream.h"
#include "io/atomic_file.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

enum {
    ITEM_BYTES = 1 << 20,     /* text per work item */
    ITEM_PARTS = 1 << 14,     /* documents (or pieces) per work item, at most */
    MAX_SCAN = 64 << 20,      /* a document is searched this far for a place to cut */
    MAX_WHOLE = 256 << 20,    /* the longest document a tokenizer that cannot cut may have */
};

typedef struct {
    size_t off, len, la;          /* text [off, off + len) of the item, then `la` bytes of lookahead */
    uint8_t doc_start, doc_end, val;
    size_t n_ids;                 /* filled in by the worker */
    char where[192];              /* file (and line) of the document, for messages */
} Part;

typedef struct {
    uint64_t seq;
    int state;                    /* FREE, QUEUED, RUNNING, DONE */
    ByteBuf text;
    Part *parts;
    size_t n_parts, cap_parts;
    IdBuf ids;
    int failed;
    char err[800];
    uint64_t in_bytes, docs, bytes;
} Item;

enum { FREE, QUEUED, RUNNING, DONE };

typedef struct {
    const Tokenizer *tok;
    IdBuf prefix, suffix;
    Item *items;
    int n_items;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    int stop;
} Pool;

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }

/* ---------- workers ---------- */

static void encode_item(Pool *p, TokEncoder *e, Item *it) {
    it->ids.n = 0;
    for (size_t i = 0; i < it->n_parts; i++) {
        Part *pt = &it->parts[i];
        size_t before = it->ids.n;
        int rc = 0;
        if (pt->doc_start)
            for (size_t k = 0; k < p->prefix.n && !rc; k++) rc = idbuf_push(&it->ids, p->prefix.p[k]);
        if (!rc) rc = tok_encode_piece(e, it->text.p + pt->off, pt->len, pt->la, pt->doc_start, &it->ids);
        if (!rc && pt->doc_end)
            for (size_t k = 0; k < p->suffix.n && !rc; k++) rc = idbuf_push(&it->ids, p->suffix.p[k]);
        if (rc) {
            it->failed = 1;
            snprintf(it->err, sizeof it->err, "%s: %s", pt->where, *myr_last_error() ? myr_last_error() : "out of memory");
            return;
        }
        pt->n_ids = it->ids.n - before;
    }
}

static void *worker(void *arg) {
    Pool *p = arg;
    TokEncoder *e = tok_encoder_new(p->tok);
    for (;;) {
        pthread_mutex_lock(&p->mu);
        Item *pick = NULL;
        while (!p->stop) {
            for (int i = 0; i < p->n_items; i++)
                if (p->items[i].state == QUEUED && (!pick || p->items[i].seq < pick->seq)) pick = &p->items[i];
            if (pick) break;
            pthread_cond_wait(&p->work, &p->mu);
        }
        if (!pick) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        pick->state = RUNNING;
        pthread_mutex_unlock(&p->mu);
        if (e) encode_item(p, e, pick);
        else {
            pick->failed = 1;
            snprintf(pick->err, sizeof pick->err, "out of memory for an encoder");
        }
        pthread_mutex_lock(&p->mu);
        pick->state = DONE;
        pthread_cond_broadcast(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
    tok_encoder_free(e);
    return NULL;
}

/* ---------- reading: documents -> items ---------- */

typedef struct {
    DocReader *r;
    int can_cut;
    const char *cut_why;
    size_t piece, la;
    ByteBuf doc;          /* the unread part of the current document */
    int open, complete, first;
    uint64_t doc_no;      /* documents started */
    int val;
    double val_fraction;
    uint64_t seed;
    char where[192];
    int input_done;
} Reader;

static int is_doc_val(const Reader *rd, uint64_t doc) {
    uint64_t z = rd->seed + (doc + 1) * 0x9E3779B97F4A7C15ULL; /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53 < rd->val_fraction;
}

static int add_part(Item *it, Reader *rd, size_t len, size_t la, int doc_end) {
    if (it->n_parts == it->cap_parts) {
        size_t cap = it->cap_parts ? 2 * it->cap_parts : 64;
        Part *p = realloc(it->parts, cap * sizeof *p);
        if (!p) return myr_error("out of memory");
        it->parts = p;
        it->cap_parts = cap;
    }
    Part *p = &it->parts[it->n_parts++];
    memset(p, 0, sizeof *p);
    p->off = it->text.n;
    p->len = len;
    p->la = la;
    p->doc_start = (uint8_t)rd->first;
    p->doc_end = (uint8_t)doc_end;
    p->val = (uint8_t)rd->val;
    snprintf(p->where, sizeof p->where, "%s", rd->where);
    if (bytebuf_append(&it->text, rd->doc.p, len + la)) return myr_error("out of memory");
    it->bytes += len;
    rd->first = 0;
    return 0;
}

/* A place to cut doc[0, n): after a '\n' before [A-Za-z0-9], with `la` bytes after it. The
 * last such place up to `piece` (not before piece / 4), else the first one after it. */
static int cut_before(const uint8_t *s, size_t c) {
    return s[c - 1] == '\n' && ((unsigned)((s[c] | 0x20) - 'a') < 26 || (unsigned)(s[c] - '0') < 10);
}

static size_t find_cut(const uint8_t *s, size_t n, size_t piece, size_t la) {
    if (n < la + 2) return 0;
    size_t hi = n - la;
    for (size_t c = (piece < hi ? piece : hi); c > piece / 4 && c >= 1; c--)
        if (cut_before(s, c)) return c;
    for (size_t c = piece + 1; c <= hi; c++)
        if (cut_before(s, c)) return c;
    return 0;
}

/* Read from the document until it holds `want` bytes or ends. */
static int fill_doc(Reader *rd, size_t want) {
    while (!rd->complete && rd->doc.n < want) {
        int rc = doc_read(rd->r, &rd->doc, want - rd->doc.n);
        if (rc < 0) return -1;
        if (rc == 0) rd->complete = 1;
    }
    return 0;
}

/* Pack the next item; returns the number of parts (0: no input left). */
static int fill_item(Reader *rd, Item *it) {
    it->text.n = it->n_parts = 0;
    it->docs = it->bytes = 0;
    while (it->text.n < ITEM_BYTES && it->n_parts < ITEM_PARTS) {
        if (interrupted) return myr_error("interrupted");
        if (!rd->open) {
            int rc = doc_next(rd->r);
            if (rc < 0) return -1;
            if (rc == 0) {
                rd->input_done = 1;
                break;
            }
            rd->open = 1;
            rd->complete = 0;
            rd->first = 1;
            rd->doc.n = 0;
            rd->val = is_doc_val(rd, rd->doc_no++);
            snprintf(rd->where, sizeof rd->where, "%s", doc_where(rd->r));
            it->docs++;
        }
        size_t want = rd->piece + rd->la;
        if (fill_doc(rd, want)) return -1;
        while (!rd->complete) { /* too long for one piece: cut it */
            size_t cut = rd->can_cut ? find_cut(rd->doc.p, rd->doc.n, rd->piece, rd->la) : 0;
            if (cut) {
                if (add_part(it, rd, cut, rd->la, 0)) return -1;
                memmove(rd->doc.p, rd->doc.p + cut, rd->doc.n - cut);
                rd->doc.n -= cut;
                break;
            }
            if (!rd->can_cut && rd->doc.n > MAX_WHOLE)
                return myr_error("%s: a document over %d MiB, and this tokenizer cannot encode one in pieces (%s); split "
                                 "it into smaller documents", rd->where, MAX_WHOLE >> 20, rd->cut_why);
            if (rd->can_cut && rd->doc.n > MAX_SCAN)
                return myr_error("%s: no line break followed by a letter or digit in %d MiB, so the document cannot be "
                                 "encoded in pieces; split it into smaller documents", rd->where, MAX_SCAN >> 20);
            want = rd->doc.n + rd->piece;
            if (fill_doc(rd, want)) return -1;
        }
        if (rd->complete) {
            if (add_part(it, rd, rd->doc.n, 0, 1)) return -1;
            rd->doc.n = 0;
            rd->open = 0;
        }
    }
    it->in_bytes = doc_input_bytes(rd->r);
    return (int)it->n_parts;
}

/* ---------- writing ---------- */

static int write_item(const Item *it, ShardStream *train, ShardStream *val, uint64_t *tokens, uint64_t *val_docs) {
    size_t at = 0;
    for (size_t i = 0; i < it->n_parts; i++) {
        const Part *pt = &it->parts[i];
        *val_docs += pt->val && pt->doc_start;
        if (shard_stream_write(pt->val ? val : train, it->ids.p + at, pt->n_ids)) return -1;
        at += pt->n_ids;
    }
    *tokens += at;
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void progress(double t0, uint64_t in_bytes, uint64_t total, uint64_t docs, uint64_t tokens) {
    double dt = now_s() - t0, rate = dt > 0 ? in_bytes / dt : 0;
    double frac = total ? (double)in_bytes / total : 0;
    int eta = rate > 0 && total > in_bytes ? (int)((total - in_bytes) / rate) : 0;
    fprintf(stderr, "\rdata prepare: %3.0f%% %.1f/%.1f MB, %.1f MB/s, %" PRIu64 " documents, %.1fM tokens, ETA %d:%02d:%02d ",
            100 * frac, in_bytes / 1e6, total / 1e6, rate / 1e6, docs, tokens / 1e6, eta / 3600, eta / 60 % 60, eta % 60);
}

/* ---------- setup ---------- */

static int affix(const Tokenizer *t, const char *spec, IdBuf *out) {
    out->n = 0;
    if (!strcmp(spec, "none")) return 0;
    int32_t id = tokenizer_token_id(t, spec, strlen(spec));
    if (id < 0) return myr_error("token \"%s\" (--doc-prefix/--doc-suffix) is not in the tokenizer's vocabulary", spec);
    return idbuf_push(out, id);
}

static int copy_tokenizer(const char *from, const char *dir) {
    char to[4200];
    snprintf(to, sizeof to, "%s/tokenizer.json", dir);
    return atomic_copy(from, to);
}

static size_t env_size(const char *name, size_t dflt) {
    const char *v = getenv(name);
    long long x = v ? atoll(v) : 0;
    return x > 0 ? (size_t)x : dflt;
}

int prepare_tokenized(const PrepareTokOptions *o, char *const *paths, const uint64_t *sizes, int n) {
    double t0 = now_s();
    Tokenizer *tok;
    if (tokenizer_load(o->tokenizer, &tok)) myr_die_last();
    Pool pool = {.tok = tok};
    if (tokenizer_doc_affixes(tok, &pool.prefix, &pool.suffix) && !o->doc_prefix && !o->doc_suffix) myr_die_last();
    if (o->doc_prefix && affix(tok, o->doc_prefix, &pool.prefix)) myr_die_last();
    if (o->doc_suffix && affix(tok, o->doc_suffix, &pool.suffix)) myr_die_last();
    int32_t vocab = tokenizer_vocab_size(tok);
    int version = o->version ? o->version : vocab <= 65536 ? 1 : 7;
    if (version == 1 && vocab > 65536)
        myr_die("--version 1 stores uint16 tokens, but %s has %d ids; use --version 7 (or leave it out)", o->tokenizer, vocab);
    int threads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    uint64_t total_in = 0;
    for (int i = 0; i < n; i++) total_in += sizes[i];

    Reader rd = {.val_fraction = o->val_fraction, .seed = o->seed};
    rd.can_cut = tokenizer_can_cut(tok, &rd.cut_why);
    /* MYRIAD_PREPARE_PIECE_BYTES: a smaller piece makes tests cut small documents */
    rd.piece = env_size("MYRIAD_PREPARE_PIECE_BYTES", 1 << 20);
    rd.la = rd.piece / 4 < 64 ? 64 : rd.piece / 4 > 65536 ? 65536 : rd.piece / 4;
    if (doc_reader_open(&rd.r, paths, n, o->jsonl_field)) myr_die_last();
    ShardStream train, val;
    if (shard_stream_init(&train, o->out, "train", version, (uint64_t)o->shard_tokens) ||
        shard_stream_init(&val, o->out, "val", version, (uint64_t)o->shard_tokens))
        myr_die_last();

    pool.n_items = 2 * threads + 2;
    pool.items = calloc((size_t)pool.n_items, sizeof *pool.items);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    if (!pool.items || !tids) myr_die("out of memory");
    pthread_mutex_init(&pool.mu, NULL);
    pthread_cond_init(&pool.work, NULL);
    pthread_cond_init(&pool.done, NULL);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&tids[i], NULL, worker, &pool)) myr_die("cannot start %d encoding threads", threads);
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    int tty = isatty(2);
    double last_print = 0;
    uint64_t next_seq = 0, write_seq = 0, tokens = 0, docs = 0, bytes = 0, in_bytes = 0, val_docs = 0;
    int rc = 0;
    char err[1000] = "";
    for (;;) {
        /* keep every free slot busy */
        while (!rc && !rd.input_done) {
            Item *slot = NULL;
            pthread_mutex_lock(&pool.mu);
            for (int i = 0; i < pool.n_items && !slot; i++)
                if (pool.items[i].state == FREE) slot = &pool.items[i];
            pthread_mutex_unlock(&pool.mu);
            if (!slot) break;
            int parts = fill_item(&rd, slot);
            if (parts < 0) {
                rc = -1;
                snprintf(err, sizeof err, "%s", myr_last_error());
                break;
            }
            if (parts == 0) break;
            pthread_mutex_lock(&pool.mu);
            slot->seq = next_seq++;
            slot->failed = 0;
            slot->state = QUEUED;
            pthread_cond_signal(&pool.work);
            pthread_mutex_unlock(&pool.mu);
        }
        if (write_seq == next_seq) break; /* nothing in flight */
        /* write the oldest item once it is done */
        Item *it = NULL;
        pthread_mutex_lock(&pool.mu);
        for (;;) {
            for (int i = 0; i < pool.n_items && !it; i++)
                if (pool.items[i].state == DONE && pool.items[i].seq == write_seq) it = &pool.items[i];
            if (it) break;
            pthread_cond_wait(&pool.done, &pool.mu);
        }
        pthread_mutex_unlock(&pool.mu);
        if (!rc && it->failed) {
            rc = -1;
            snprintf(err, sizeof err, "%s", it->err);
        }
        if (!rc && write_item(it, &train, &val, &tokens, &val_docs)) {
            rc = -1;
            snprintf(err, sizeof err, "%s", myr_last_error());
        }
        if (!rc && interrupted) {
            rc = -1;
            snprintf(err, sizeof err, "interrupted");
        }
        docs += it->docs;
        bytes += it->bytes;
        in_bytes = it->in_bytes;
        pthread_mutex_lock(&pool.mu);
        it->state = FREE;
        pthread_mutex_unlock(&pool.mu);
        write_seq++;
        if (tty && now_s() - last_print > 0.5) {
            progress(t0, in_bytes, total_in, docs, tokens);
            last_print = now_s();
        }
    }
    pthread_mutex_lock(&pool.mu);
    pool.stop = 1;
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
    if (tty && last_print > 0) progress(t0, in_bytes, total_in, docs, tokens), fputc('\n', stderr);
    if (!rc && (shard_stream_finish(&train) || shard_stream_finish(&val) || shard_stream_commit(&train) ||
                shard_stream_commit(&val) || copy_tokenizer(o->tokenizer, o->out))) {
        rc = -1;
        snprintf(err, sizeof err, "%s", myr_last_error());
    }
    shard_stream_abort(&train); /* after a commit: only frees */
    shard_stream_abort(&val);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (rc) {
        if (interrupted) {
            fprintf(stderr, "myriad: data prepare interrupted; no shard was written (what %s held before is untouched)\n",
                    o->out);
            exit(130);
        }
        myr_die("%s (no shard was written)", err);
    }
    int stale = shards_remove_stale(o->out, "train", train.committed) + shards_remove_stale(o->out, "val", val.committed);
    double dt = now_s() - t0;
    char skipped[64] = "";
    if (o->skipped_binary) snprintf(skipped, sizeof skipped, " (%d binary skipped)", o->skipped_binary);
    printf("data prepare: %d input file%s%s, %" PRIu64 " document%s (%" PRIu64 " val), %.1f MB -> train %" PRIu64
           " tokens in %d shard%s (%s/train_*.bin), val %" PRIu64 " tokens in %d shard%s (%s/val_*.bin); %s (%s), "
           "version %d; %.1f MB/s on %d thread%s",
           n, n == 1 ? "" : "s", skipped, docs, docs == 1 ? "" : "s", val_docs, bytes / 1e6, train.total, train.committed,
           train.committed == 1 ? "" : "s", o->out, val.total, val.committed, val.committed == 1 ? "" : "s", o->out,
           o->tokenizer, tokenizer_describe(tok), version, dt > 0 ? bytes / 1e6 / dt : 0.0, threads,
           threads == 1 ? "" : "s");
    if (stale) printf("; removed %d stale shard%s", stale, stale == 1 ? "" : "s");
    printf("\n");
    for (int i = 0; i < pool.n_items; i++) {
        bytebuf_free(&pool.items[i].text);
        idbuf_free(&pool.items[i].ids);
        free(pool.items[i].parts);
    }
    free(pool.items);
    free(tids);
    idbuf_free(&pool.prefix);
    idbuf_free(&pool.suffix);
    bytebuf_free(&rd.doc);
    doc_reader_close(rd.r);
    tokenizer_free(tok);
    return 0;
}
