/* checkpoint.c: maps this rank's parameter and optimizer pieces onto boxes of the global tensors. */
#include "train/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "util/error.h"

typedef int (*PieceFn)(void *ctx, const char *name, int ndim, const int64_t *shape, const CkptSlice *box, real *data);

/* The model's boxes (params.h) as checkpoint slices, prefixed ("param/NAME"). */
typedef struct {
    const char *prefix;
    int ndim;
    PieceFn fn;
    void *ctx;
} BoxToSlice;

static int box_to_slice(void *ctx, const char *name, const int64_t gshape[2], const TensorBox *b, real *data) {
    const BoxToSlice *a = ctx;
    char full[96];
    snprintf(full, sizeof full, "%s/%s", a->prefix, name);
    int64_t start[2] = {b->r0, b->c0}, ext[2] = {b->nr, b->nc};
    CkptSlice box = ckpt_box(a->ndim, start, ext);
    return a->fn(a->ctx, full, a->ndim, gshape, &box, data);
}

/* Elements [la, lb) of tensor p's local data (at `data`, local row-major) as boxes of the global
 * tensor, each handed to fn with its data. */
static int for_each_box(const Model *m, const ParamInfo *p, const char *prefix, int64_t la, int64_t lb, real *data,
                        PieceFn fn, void *ctx) {
    BoxToSlice a = {prefix, p->ndim, fn, ctx};
    return param_range_boxes(&m->cfg, p, m->tp.size, m->tp.rank, la, lb, data, box_to_slice, &a);
}

/* ---- the state as host memory ----
 * The walks below hand the checkpoint layer pointers into the training state. On the CPU those
 * are the device buffers themselves; where host code may not touch device memory each state
 * buffer (parameters or the ZeRO-3 shard, AdamW moments) has a pinned host mirror: refreshed
 * from the device before a save or an in-memory copy (once per optimizer step), and copied back
 * after a load or an in-memory restore fills it. */
typedef struct {
    real *dev, *host;
    size_t count;
} Mirror;

struct StateMirrors {
    Mirror *m;
    int n;
    long step;   /* optimizer step the mirrors hold (-1: not current) */
    int pending; /* filled by snapshots still in flight (dev_snapshot_wait before reading) */
};

struct StateMirrors *train_state_mirrors(void) {
    struct StateMirrors *s = calloc(1, sizeof *s);
    s->step = -1;
    return s;
}

void train_state_mirrors_free(struct StateMirrors *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) host_free_pinned(s->m[i].host);
    free(s->m);
    free(s);
}

static int mirrored(const TrainState *st) { return st->mirrors && !dev_host_accessible(); }

/* The host view of device buffer `dev` (itself when host code may read it, or before the
 * mirrors exist: the byte-counting walks never read). */
static real *view(const TrainState *st, real *dev) {
    if (!mirrored(st)) return dev;
    for (int i = 0; i < st->mirrors->n; i++)
        if (st->mirrors->m[i].dev == dev) return st->mirrors->m[i].host;
    return dev;
}

static void add_mirror(struct StateMirrors *s, real *dev, size_t count) {
    for (int i = 0; i < s->n; i++)
        if (s->m[i].dev == dev) return;
    s->m = realloc(s->m, (size_t)(s->n + 1) * sizeof *s->m);
    s->m[s->n++] = (Mirror){dev, host_alloc_pinned((count ? count : 1) * sizeof(real)), count};
}

static long opt_step(const TrainState *st) { return st->dp ? st->dp[0].opt[0].step : st->opt->step; }

/* Every state buffer mirrored and its mirror current; async: by snapshots that overlap the next
 * step's compute (readers wait with dev_snapshot_wait), else complete on return. */
static void state_to_host(const TrainState *st, int async) {
    if (!mirrored(st)) return;
    struct StateMirrors *s = st->mirrors;
    for (int c = 0; c < st->nchunks; c++) {
        DataParallel *dp = st->dp ? &st->dp[c] : NULL;
        if (dp && dp->o.zero >= 3) add_mirror(s, dp->param_shard, dp->shard_elems);
        else add_mirror(s, st->chunks[c].params, st->chunks[c].table.total);
        int nopt = dp ? dp->nopt : 1;
        for (int i = 0; i < nopt; i++) {
            AdamW *o = dp ? &dp->opt[i] : st->opt;
            add_mirror(s, o->m, o->hi - o->lo);
            add_mirror(s, o->v, o->hi - o->lo);
        }
    }
    if (s->step == opt_step(st)) { /* already holds (or is receiving) this step's state */
        if (!async && s->pending) dev_snapshot_wait(), s->pending = 0;
        return;
    }
    if (s->pending) dev_snapshot_wait(); /* an earlier snapshot must land before these copies */
    for (int i = 0; i < s->n; i++) {
        size_t bytes = s->m[i].count * sizeof(real);
        if (async) dev_snapshot_async(s->m[i].host, s->m[i].dev, bytes);
        else dev_to_host(s->m[i].host, s->m[i].dev, bytes);
    }
    s->pending = async;
    s->step = opt_step(st);
}

/* The mirrors (filled by a load) back into the device buffers. */
static void state_to_device(const TrainState *st) {
    if (!mirrored(st)) return;
    struct StateMirrors *s = st->mirrors;
    if (s->pending) dev_snapshot_wait(), s->pending = 0;
    for (int i = 0; i < s->n; i++) host_to_dev(s->m[i].dev, s->m[i].host, s->m[i].count * sizeof(real));
    s->step = -1; /* the step count changes after a load */
}

/* Which pieces a walk visits: those this rank writes to a checkpoint (replicas once), those it
 * holds (what a load fills), or those it owns (as HOLDS, but of everything data parallelism
 * replicates, i.e. parameters below ZeRO 3 and AdamW moments at ZeRO 0, only this rank's ZeRO
 * pieces: the rest is all-gathered back, dp_gather_replicated). */
enum { HOLDS = 0, WRITES = 1, OWNS = 2 };

/* Every piece of kind `what` (0 params, 1 adam m, 2 adam v) that this rank writes, holds or
 * owns (mode), over element ranges of each chunk's flat layout. */
static int for_each_piece(const TrainState *st, int what, int mode, PieceFn fn, void *ctx) {
    static const char *prefix[] = {"param", "adam_m", "adam_v"};
    int writing = mode == WRITES;
    for (int c = 0; c < st->nchunks; c++) {
        Model *m = &st->chunks[c];
        DataParallel *dp = st->dp ? &st->dp[c] : NULL;
        int zero = dp ? dp->o.zero : 0;
        /* whole local ranges (replicated over dp) or this rank's ZeRO pieces */
        int full = mode == OWNS ? 0 : what == 0 ? zero < 3 : zero == 0;
        int nb = dp ? dp->nbuckets : 1;
        for (int b = 0; b < nb; b++) {
            /* a bucket's place in its group: routed experts are replicated over the expert group only */
            int b_rank = dp ? dp->b[b].rank : 0;
            if (full && writing && b_rank != 0) continue;
            size_t lo, hi;
            if (!dp) lo = 0, hi = m->table.total;
            else if (full) lo = dp->b[b].lo, hi = dp->b[b].hi;
            else lo = dp->b[b].lo + (size_t)b_rank * dp->b[b].piece, hi = lo + dp->b[b].piece;
            /* where element x of [lo, hi) lives */
            real *base;
            if (what == 0) base = zero >= 3 ? view(st, dp->param_shard) + dp->shard_off[b] : view(st, m->params);
            else {
                AdamW *o = dp ? &dp->opt[zero == 0 ? 0 : b] : st->opt;
                base = view(st, what == 1 ? o->m : o->v);
            }
            for (int i = 0; i < m->table.count; i++) {
                const ParamInfo *p = &m->table.info[i];
                if (p->tied_copy && writing) continue; /* saved from the first stage; read back into both */
                if (writing && p->shard == SHARD_NONE && m->tp.rank != 0) continue; /* tp replicas */
                size_t a = p->offset > lo ? p->offset : lo, e = p->offset + p->numel < hi ? p->offset + p->numel : hi;
                if (a >= e) continue;
                real *data;
                if (what == 0) data = zero >= 3 ? base + (a - lo) : base + a;
                else {
                    AdamW *o = dp ? &dp->opt[zero == 0 ? 0 : b] : st->opt;
                    data = base + (a - o->lo);
                }
                if (for_each_box(m, p, prefix[what], (int64_t)(a - p->offset), (int64_t)(e - p->offset), data, fn, ctx))
                    return -1;
            }
        }
    }
    return 0;
}

static int add_piece(void *ctx, const char *name, int ndim, const int64_t *shape, const CkptSlice *box, real *data) {
    return ckpt_add_piece((CkptWriter *)ctx, name, CKPT_F32, ndim, shape, box, data);
}

int train_ckpt_save(const TrainState *st, const char *dir, long step, int keep, int async, const char *meta_json) {
    if (ckpt_async_wait()) return -1; /* the previous save must be complete (and valid) first */
    int rank = st->world ? comm_rank(st->world) : 0, n = st->world ? comm_size(st->world) : 1;
    /* checksum blocks sized to the state: about 256 per rank's share, 4 KiB to 1 MiB, the same on
     * every rank (from the whole model's size), so partial reads after resharding stay cheap */
    ParamTable whole;
    param_table_build(&whole, &st->chunks[0].cfg, 1);
    double share = (double)whole.total * 12 / n / 256;
    param_table_free(&whole);
    int64_t block = 4096;
    while (block < (1 << 20) && block * 2 <= share) block *= 2;
    CkptWriteOptions opt = {block, keep};
    CkptWriter *w;
    if (ckpt_writer_begin(dir, step, rank, n, &opt, &w)) return -1;
    state_to_host(st, 0);
    for (int what = 0; what < 3; what++)
        if (for_each_piece(st, what, WRITES, add_piece, w)) {
            ckpt_writer_abort(w);
            return -1;
        }
    return async ? ckpt_writer_commit_async(w, st->world, meta_json) : ckpt_writer_commit(w, st->world, meta_json);
}

static int read_piece(void *ctx, const char *name, int ndim, const int64_t *shape, const CkptSlice *box, real *data) {
    Ckpt *c = ctx;
    if (ckpt_expect(c, name, CKPT_F32, ndim, shape)) return -1;
    return ckpt_read_slice(c, name, box, data);
}

/* A mixture-of-experts model resumes only from a checkpoint with the same experts: the router's
 * rows say how many the writer had (checked first, for an error naming the counts). */
static int check_experts(const TrainState *st, Ckpt *c) {
    for (int k = 0; k < st->nchunks; k++) {
        const Model *m = &st->chunks[k];
        for (int l = m->stage.layer_lo; l < m->stage.layer_hi; l++) {
            char name[96];
            CkptDtype dt;
            int ndim;
            int64_t shape[8];
            snprintf(name, sizeof name, "param/layers.%d.router_w", l);
            int has = ckpt_tensor_info(c, name, &dt, &ndim, shape) == 0;
            int moe = model_layer_is_moe(&m->cfg, l);
            if (moe && !has)
                return myr_error("%s: layer %d has no experts in the checkpoint but the model has %d (resume with the "
                                 "checkpoint's --experts / --moe-every)", ckpt_path(c), l, m->cfg.experts);
            if (!moe && has)
                return myr_error("%s: the checkpoint has %lld experts in layer %d but the model's layer %d is dense "
                                 "(resume with the checkpoint's --experts / --moe-every)", ckpt_path(c),
                                 (long long)shape[0], l, l);
            if (moe && shape[0] != m->cfg.experts)
                return myr_error("%s: the checkpoint has %lld experts per MoE layer, the model has %d (--experts must "
                                 "match the checkpoint)", ckpt_path(c), (long long)shape[0], m->cfg.experts);
        }
    }
    return 0;
}

/* the optimizer's step count (bias correction) continues from the checkpoint */
static void set_opt_step(const TrainState *st, long step) {
    for (int k = 0; k < st->nchunks; k++) {
        DataParallel *dp = st->dp ? &st->dp[k] : NULL;
        if (!dp) st->opt->step = step;
        for (int i = 0; dp && i < dp->nopt; i++) dp->opt[i].step = step;
    }
}

int train_ckpt_load(const TrainState *st, Ckpt *c, long step) {
    if (check_experts(st, c)) return -1;
    state_to_host(st, 0);
    for (int what = 0; what < 3; what++)
        if (for_each_piece(st, what, HOLDS, read_piece, c)) {
            if (st->mirrors) st->mirrors->step = -1; /* partly overwritten */
            return -1;
        }
    state_to_device(st);
    set_opt_step(st, step);
    return 0;
}

/* The parameter pieces a rank holds, handed to a TensorBoxFn (the "param/" prefix dropped). */
typedef struct {
    TensorBoxFn fn;
    void *ctx;
} SliceToBox;

static int slice_to_box(void *ctx, const char *name, int ndim, const int64_t *shape, const CkptSlice *s, real *data) {
    const SliceToBox *a = ctx;
    TensorBox b = {s->start[0], s->extent[0], ndim == 2 ? s->start[1] : 0, ndim == 2 ? s->extent[1] : 1};
    int64_t g[2] = {shape[0], ndim == 2 ? shape[1] : 1};
    return a->fn(a->ctx, name + strlen("param/"), g, &b, data);
}

int train_state_fill_params(const TrainState *st, TensorBoxFn fn, void *ctx) {
    SliceToBox a = {fn, ctx};
    state_to_host(st, 0);
    int rc = for_each_piece(st, 0, HOLDS, slice_to_box, &a);
    if (st->mirrors) st->mirrors->step = -1; /* the parameters changed under the mirrors' step */
    if (!rc) state_to_device(st);
    return rc;
}

int train_state_walk_params(const TrainState *st, TensorBoxFn fn, void *ctx) {
    SliceToBox a = {fn, ctx};
    state_to_host(st, 0);
    return for_each_piece(st, 0, WRITES, slice_to_box, &a);
}

typedef struct {
    double bytes, per_piece; /* per_piece: extra bytes for each piece (a shard file's alignment) */
} ByteCount;

static int count_piece(void *ctx, const char *name, int ndim, const int64_t *shape, const CkptSlice *box, real *data) {
    ByteCount *c = ctx;
    c->bytes += (double)ckpt_slice_numel(box, ndim) * sizeof(float) + c->per_piece;
    return 0;
}

/* Bytes of the pieces a walk of `mode` visits, plus per_piece for each. */
static double walk_bytes(const TrainState *st, int mode, double per_piece) {
    ByteCount c = {0, per_piece};
    for (int what = 0; what < 3; what++) for_each_piece(st, what, mode, count_piece, &c);
    return c.bytes;
}

void train_ckpt_reserve_async(const TrainState *st) {
    ckpt_async_reserve((uint64_t)(4096 + walk_bytes(st, WRITES, 64))); /* + 64-byte piece alignment */
}

double train_ckpt_own_bytes(const TrainState *st) { return walk_bytes(st, HOLDS, 0); }

/* The in-memory copy holds the pieces the rank owns back to back: everything it holds, except
 * that what data parallelism replicates is kept only in the rank's ZeRO pieces (at dp 2: a
 * quarter less to copy every step at zero 1, half at zero 0). Unpacking into the same layout and
 * all-gathering those pieces restores every bit a load would. The copy is made from
 * train_state_runs (see mem_checkpoint.c); unpacking walks the pieces. */
static int unpack_piece(void *ctx, const char *name, int ndim, const int64_t *shape, const CkptSlice *box, real *data) {
    const unsigned char **p = ctx;
    size_t bytes = (size_t)ckpt_slice_numel(box, ndim) * sizeof(real);
    memcpy(data, *p, bytes);
    *p += bytes;
    return 0;
}

size_t train_state_bytes(const TrainState *st) { return (size_t)walk_bytes(st, OWNS, 0); }

typedef struct {
    StateRun *r;
    int n, cap;
} RunList;

static int add_run(void *ctx, const char *name, int ndim, const int64_t *shape, const CkptSlice *box, real *data) {
    RunList *l = ctx;
    size_t bytes = (size_t)ckpt_slice_numel(box, ndim) * sizeof(real);
    const unsigned char *src = (const unsigned char *)data;
    if (l->n && l->r[l->n - 1].src + l->r[l->n - 1].bytes == src) {
        l->r[l->n - 1].bytes += bytes;
        return 0;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        StateRun *r = realloc(l->r, (size_t)cap * sizeof *r);
        if (!r) return myr_error("out of memory listing the training state");
        l->r = r, l->cap = cap;
    }
    l->r[l->n++] = (StateRun){src, bytes};
    return 0;
}

int train_state_runs(const TrainState *st, StateRun **out) {
    RunList l = {0};
    state_to_host(st, 1); /* the runs are host memory; the copy thread waits for the snapshots (dev_snapshot_wait) */
    for (int what = 0; what < 3; what++)
        if (for_each_piece(st, what, OWNS, add_run, &l)) {
            free(l.r);
            return -1;
        }
    *out = l.r;
    return l.n;
}

int train_state_unpack(const TrainState *st, const void *src, long step) {
    const unsigned char *p = src;
    state_to_host(st, 0);
    for (int what = 0; what < 3; what++) for_each_piece(st, what, OWNS, unpack_piece, &p);
    state_to_device(st);
    for (int c = 0; st->dp && c < st->nchunks; c++)
        if (dp_gather_replicated(&st->dp[c])) return -1;
    set_opt_step(st, step);
    return 0;
}

long train_resume_disk(const TrainState *st, const char *path, int is_auto, Ckpt *first, int rank0,
                       const char **events, int *nevents) {
    Ckpt *ck = first;
    int64_t below = 0;
    int fallbacks = 0, rank = st->world ? comm_rank(st->world) : 0;
    for (;;) {
        CkptOpenOptions oo = {0, below};
        if (!ck && ckpt_open_ex(path, &oo, &ck)) {
            const char *e = myr_last_error();
            if (is_auto && !below && (strstr(e, "no step-* directories") || strstr(e, "not found"))) {
                if (rank0) fprintf(stderr, "myriad train: --resume auto: no checkpoint in %s yet; starting from step 0\n", path);
                events[(*nevents)++] = "started-from-scratch";
                return 0;
            }
            return -1;
        }
        long step = (long)ckpt_step(ck);
        /* 0 loaded, 1 a checksum failure (fall back), 2 anything else (another model...: stop) */
        float verdict = 0;
        char why[512] = "";
        if (train_ckpt_load(st, ck, step)) {
            snprintf(why, sizeof why, "%s", myr_last_error());
            verdict = strstr(why, "checksum mismatch") ? 1 : 2;
        }
        float worst = verdict;
        if (st->world && comm_all_reduce(st->world, &verdict, &worst, 1, COMM_F32, COMM_MAX)) return -1;
        if (worst == 0) {
            /* each rank reads its own slices: compare what it read with what it holds */
            double ratio = ckpt_bytes_read(ck) / train_ckpt_own_bytes(st);
            if (st->world) {
                int n = comm_size(st->world);
                double *all = malloc((size_t)n * sizeof(double));
                if (comm_all_gather(st->world, &ratio, all, 2, COMM_F32)) return -1;
                for (int r = 0; r < n; r++) ratio = all[r] > ratio ? all[r] : ratio;
                free(all);
            }
            if (rank0)
                fprintf(stderr, "resumed from %s at step %ld; bytes read per rank at most %.3f x its own share%s%s\n",
                        ckpt_path(ck), step, ratio, ckpt_notes(ck)[0] ? "; " : "", ckpt_notes(ck));
            events[(*nevents)++] = fallbacks ? "disk-fallback" : "restored-from-disk";
            ckpt_close(ck);
            return step;
        }
        if (worst == 2) { /* not damage: another model or layout problem, which no older step cures */
            ckpt_close(ck);
            return verdict == 2 ? myr_error("%s", why) : myr_error("another rank cannot load %s (see its message)", path);
        }
        if (verdict == 1) fprintf(stderr, "myriad train: rank %d: %s\n", rank, why);
        if (rank0)
            fprintf(stderr, "myriad train: checkpoint %s failed verification: falling back to the previous one\n",
                    ckpt_path(ck));
        if (!is_auto && strstr(path, "step-")) {
            ckpt_close(ck);
            return myr_error("checkpoint %s is corrupt and it was named explicitly; resume from its directory to fall "
                             "back to an older step", path);
        }
        fallbacks++;
        below = step;
        ckpt_close(ck);
        ck = NULL;
    }
}
