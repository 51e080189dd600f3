/* data_parallel.c: bucketed, overlapped gradient reduction and ZeRO 0-3 (see the header). */
#include "parallel/data_parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "util/error.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A failed collective has already named rank, group and operation; nothing can continue. */
static void must(int rc) {
    if (rc) myr_die_last();
}

static void transient_add(DataParallel *dp, long long bytes) {
    dp->transient_bytes += bytes;
    if (dp->transient_bytes > dp->peak_transient_bytes) dp->peak_transient_bytes = dp->transient_bytes;
}

static size_t own_lo(const DataParallel *dp, const DpBucket *b) { return b->lo + (size_t)b->rank * b->piece; }

/* Unit u holds routed experts. */
static int expert_unit(const ParamTable *t, int u) {
    for (int i = 0; i < t->count; i++)
        if (t->info[i].unit == u) return t->info[i].expert;
    return 0;
}

/* ---- buckets ---- */

/* The buckets of table t in backward order (head first): units [unit_lo, unit_hi] and whether
 * they hold routed experts; out has room for t->units. Returns the count. */
static int plan_buckets(const ParamTable *t, const DpOptions *o, DpBucket *out) {
    int U = t->units;
    size_t limit = o->zero >= 2 ? 1 : (size_t)(o->bucket_mb * 1048576.0 / sizeof(real));
    if (limit < 1) limit = 1;
    /* walk units from the head down (backward order), closing a bucket once it is big enough */
    int n = 0, hi_unit = U - 1;
    for (int u = U - 1; u >= 0; u--) {
        int expert = expert_unit(t, u);
        if (expert && hi_unit > u) { /* close the dense units above: experts form their own bucket */
            out[n++] = (DpBucket){.unit_lo = u + 1, .unit_hi = hi_unit};
            hi_unit = u;
        }
        size_t size = t->unit_hi[hi_unit] - t->unit_lo[u];
        if (size >= limit || u == 0 || o->zero >= 2 || expert || (u > 0 && expert_unit(t, u - 1))) {
            out[n++] = (DpBucket){.unit_lo = u, .unit_hi = hi_unit, .expert = expert};
            hi_unit = u - 1;
        }
    }
    for (int i = 0; i < n; i++) out[i].lo = t->unit_lo[out[i].unit_lo], out[i].hi = t->unit_hi[out[i].unit_hi];
    return n;
}

double dp_inflight_bytes(const ParamTable *t, const DpOptions *o) {
    DpBucket *b = calloc((size_t)t->units + 1, sizeof *b);
    int n = plan_buckets(t, o, b), cap = o->max_inflight > 0 ? o->max_inflight : DP_MAX_INFLIGHT;
    double sum = 0;
    for (int k = 0; k < cap && k < n; k++) { /* the cap largest */
        int best = -1;
        for (int i = 0; i < n; i++)
            if (b[i].hi > b[i].lo && (best < 0 || b[i].hi - b[i].lo > b[best].hi - b[best].lo)) best = i;
        if (best < 0) break;
        sum += (double)(b[best].hi - b[best].lo) * sizeof(real);
        b[best].hi = b[best].lo;
    }
    free(b);
    return sum;
}

static void build_buckets(DataParallel *dp) {
    const ParamTable *t = &dp->m->table;
    int U = t->units;
    dp->b = calloc((unsigned)U, sizeof(DpBucket));
    dp->bucket_of_unit = calloc((unsigned)U, sizeof(int));
    int n = plan_buckets(t, &dp->o, dp->b);
    for (int i = 0; i < n; i++) {
        DpBucket *b = &dp->b[i];
        b->lo = t->unit_lo[b->unit_lo];
        b->hi = t->unit_hi[b->unit_hi];
        b->group = b->expert ? dp->expert_group : dp->group;
        b->rank = comm_rank(b->group);
        b->size = comm_size(b->group);
        b->piece = (b->hi - b->lo) / (size_t)b->size;
    }
    /* store in layout order (bucket 0 = lowest units) */
    for (int i = 0; i < n / 2; i++) {
        DpBucket tmp = dp->b[i];
        dp->b[i] = dp->b[n - 1 - i];
        dp->b[n - 1 - i] = tmp;
    }
    dp->nbuckets = n;
    for (int i = 0; i < n; i++)
        for (int u = dp->b[i].unit_lo; u <= dp->b[i].unit_hi; u++) dp->bucket_of_unit[u] = i;
    dp->shard_off = calloc((size_t)(n > 0 ? n : 1), sizeof(size_t));
    dp->shard_elems = 0;
    for (int i = 0; i < n; i++) {
        dp->shard_off[i] = dp->shard_elems;
        dp->shard_elems += dp->b[i].piece;
    }
}

/* ---- reductions ---- */

static real *bucket_grads(DataParallel *dp, DpBucket *b) { return dp->o.zero >= 2 ? b->grad : dp->m->grads + b->lo; }

static void finish(DataParallel *dp, DpBucket *b);

/* At most max_inflight reductions in flight: the oldest is completed before another starts. */
static void limit_inflight(DataParallel *dp) {
    int cap = dp->o.max_inflight > 0 ? dp->o.max_inflight : DP_MAX_INFLIGHT;
    for (;;) {
        int n = 0;
        DpBucket *oldest = NULL;
        for (int i = 0; i < dp->nbuckets; i++) {
            DpBucket *x = &dp->b[i];
            if (!x->pending || !x->req) continue;
            n++;
            if (!oldest || x->launched < oldest->launched) oldest = x;
        }
        if (n < cap) return;
        must(dcomm_wait(&oldest->req));
        finish(dp, oldest);
    }
}

static void launch(DataParallel *dp, DpBucket *b) {
    limit_inflight(dp);
    b->launched = ++dp->launches;
    size_t n = b->hi - b->lo;
    real *src = bucket_grads(dp, b);
    void *buf = src;
    CommDtype dt = COMM_F32;
    if (b->expert && dp->expert_scale != 1.0) scale_inplace(src, (real)dp->expert_scale, n);
    if (dp->o.grad_dtype == COMM_BF16) {
        if (!b->bf16) {
            b->bf16 = dev_alloc_bytes(n * sizeof(uint16_t));
            if (dp->o.zero >= 2) transient_add(dp, (long long)(n * sizeof(uint16_t)));
        }
        dev_f32_to_bf16(b->bf16, src, n);
        buf = b->bf16;
        dt = COMM_BF16;
    }
    if (dp->o.zero == 0) must(dcomm_iall_reduce(b->group, buf, n, dt, COMM_AVG, &b->req));
    else must(dcomm_ireduce_scatter(b->group, buf, b->piece, dt, COMM_AVG, &b->req));
    b->pending = 1;
}

/* The reduction of b has completed: bring bf16 back, and for zero >= 2 fold the own piece into
 * the gradient shard and free the bucket's transient buffer. */
static void finish(DataParallel *dp, DpBucket *b) {
    size_t n = b->hi - b->lo, r0 = (size_t)b->rank * b->piece;
    real *src = bucket_grads(dp, b);
    if (b->bf16) {
        if (dp->o.zero == 0) dev_bf16_to_f32(src, b->bf16, n);
        else dev_bf16_to_f32(src + r0, b->bf16 + r0, b->piece);
    }
    if (dp->o.zero >= 2) {
        add_inplace(dp->grad_shard + dp->shard_off[b - dp->b], src + r0, b->piece);
        dev_free(b->grad);
        b->grad = NULL;
        transient_add(dp, -(long long)(n * sizeof(real)));
        if (b->bf16) {
            dev_free(b->bf16);
            b->bf16 = NULL;
            transient_add(dp, -(long long)(n * sizeof(uint16_t)));
        }
    }
    b->pending = 0;
}

/* Finish every launched reduction that has completed (frees zero >= 2 buffers early). */
static void poll(DataParallel *dp) {
    must(comm_progress());
    for (int i = dp->nbuckets - 1; i >= 0; i--) {
        DpBucket *b = &dp->b[i];
        if (!b->pending || !b->req) continue;
        int done = 0;
        must(dcomm_test(&b->req, &done));
        if (done) finish(dp, b);
    }
}

/* ---- zero 3 parameter gathering ---- */

/* the head reads the embedding of this same model object (not a pipeline stage's copy) */
static int tied(const DataParallel *dp) {
    return dp->m->cfg.tied_embeddings && dp->m->stage.first && dp->m->stage.last;
}

static void gather_unit(DataParallel *dp, int u) {
    if (dp->o.zero < 3 || dp->gathered[u]) return;
    const ParamTable *t = &dp->m->table;
    DpBucket *b = &dp->b[dp->bucket_of_unit[u]];
    size_t n = t->unit_hi[u] - t->unit_lo[u];
    real *buf = dev_alloc(n);
    transient_add(dp, (long long)(n * sizeof(real)));
    dev_to_dev(buf + (size_t)dp->rank * b->piece, dp->param_shard + dp->shard_off[b - dp->b], b->piece * sizeof(real));
    must(dcomm_all_gather(dp->group, buf + (size_t)dp->rank * b->piece, buf, b->piece, COMM_F32));
    dp->gathered[u] = buf;
    model_tensors_bind_unit(&dp->m->p, t, &dp->m->cfg, u, buf);
    if (dp->m->lowp && !dp->m->lp) { /* bf16 without a whole working copy: this unit's, rounded once */
        act *w = dev_alloc_act(n);
        transient_add(dp, (long long)(n * act_size()));
        act_from_f32(w, buf, n);
        dp->gathered_act[u] = w;
        model_tensors_bind_unit_act(&dp->m->w, t, &dp->m->cfg, u, w);
    }
}

static void release_unit(DataParallel *dp, int u) {
    if (dp->o.zero < 3 || !dp->gathered[u]) return;
    const ParamTable *t = &dp->m->table;
    dev_free(dp->gathered[u]);
    dp->gathered[u] = NULL;
    transient_add(dp, -(long long)((t->unit_hi[u] - t->unit_lo[u]) * sizeof(real)));
    if (dp->gathered_act[u]) {
        dev_free(dp->gathered_act[u]);
        dp->gathered_act[u] = NULL;
        transient_add(dp, -(long long)((t->unit_hi[u] - t->unit_lo[u]) * act_size()));
    }
}

/* ---- model hooks ---- */

static void hook_before_forward(void *ctx, int u) {
    DataParallel *dp = ctx;
    int head = dp->m->table.units - 1;
    if (u == head && tied(dp)) gather_unit(dp, 0); /* the head reads the tied embedding */
    gather_unit(dp, u);
}

static void hook_after_forward(void *ctx, int u) {
    DataParallel *dp = ctx;
    if (!(u == 0 && tied(dp))) release_unit(dp, u);
    if (comm_pending()) poll(dp);
}

static void ensure_grad_buffer(DataParallel *dp, int u) {
    DpBucket *b = &dp->b[dp->bucket_of_unit[u]];
    if (dp->o.zero < 2) return;
    if (b->pending && !b->deferred) { /* the previous micro-batch's reduction of this unit still owns the buffer */
        if (b->req) must(dcomm_wait(&b->req));
        finish(dp, b);
    }
    if (b->grad) return;
    size_t n = b->hi - b->lo;
    b->grad = dev_alloc(n);
    transient_add(dp, (long long)(n * sizeof(real)));
    model_tensors_bind_unit(&dp->m->g, &dp->m->table, &dp->m->cfg, u, b->grad);
}

static void hook_before_backward(void *ctx, int u) {
    DataParallel *dp = ctx;
    int head = dp->m->table.units - 1;
    if (u == head && tied(dp)) {
        gather_unit(dp, 0);
        ensure_grad_buffer(dp, 0); /* the head adds into the tied embedding's gradient */
    }
    gather_unit(dp, u);
    ensure_grad_buffer(dp, u);
}

static void hook_after_backward(void *ctx, int u) {
    DataParallel *dp = ctx;
    release_unit(dp, u);
    DpBucket *b = &dp->b[dp->bucket_of_unit[u]];
    int reduce = (dp->o.zero >= 2 || dp->last_micro) && !b->deferred;
    if (b->deferred && u == b->unit_lo) b->pending = 1; /* launched in dp_finish_backward */
    if (u == b->unit_lo && reduce) { /* the bucket's last unit is done: its gradients are final */
        if (dp->o.overlap) launch(dp, b);
        else b->pending = 1; /* launched in dp_finish_backward */
    }
    if (comm_pending()) poll(dp);
}

/* Gradients of a unit hold only this micro-batch when zero >= 2 reduces them per micro-batch;
 * otherwise they accumulate, and sums over the tensor-parallel group wait for the last one. */
static int hook_sum_replicated_now(void *ctx, int u) {
    DataParallel *dp = ctx;
    return dp->last_micro || (dp->o.zero >= 2 && !dp->b[dp->bucket_of_unit[u]].deferred);
}

/* ---- public ---- */

int dp_create(DataParallel *dp, Comm *group, Model *m, const DpOptions *o) {
    return dp_create_ep(dp, group, group, 1, m, o);
}

int dp_create_ep(DataParallel *dp, Comm *group, Comm *expert_group, int ep, Model *m, const DpOptions *o) {
    memset(dp, 0, sizeof *dp);
    dp->group = group;
    dp->rank = comm_rank(group);
    dp->size = comm_size(group);
    dp->expert_group = expert_group ? expert_group : group;
    dp->expert_scale = 1.0 / ep;
    dp->o = *o;
    dp->m = m;
    if (o->zero < 0 || o->zero > 3) return myr_error("--zero %d is out of range (use 0, 1, 2 or 3)", o->zero);
    if (ep > 1 && o->zero >= 2)
        return myr_error("--zero %d with --ep is not supported (experts are reduced over their own group): use --zero 0 "
                         "or 1", o->zero);
    for (int u = 0; u < m->table.units; u++)
        if ((m->table.unit_hi[u] - m->table.unit_lo[u]) % (size_t)dp->size)
            return myr_error("internal: model units are not padded to the data-parallel size %d", dp->size);
    build_buckets(dp);
    dp->gathered = calloc((size_t)m->table.units, sizeof(real *));
    dp->gathered_act = calloc((size_t)m->table.units, sizeof(act *));
    if (o->zero == 0) {
        dp->nopt = 1;
        dp->opt = calloc(1, sizeof(AdamW));
        adamw_create(&dp->opt[0], 0, m->table.total);
    } else {
        dp->nopt = dp->nbuckets;
        dp->opt = calloc((size_t)dp->nbuckets, sizeof(AdamW));
        for (int i = 0; i < dp->nbuckets; i++) {
            size_t lo = own_lo(dp, &dp->b[i]);
            adamw_create(&dp->opt[i], lo, lo + dp->b[i].piece);
        }
    }
    if (o->zero >= 2) {
        dp->grad_shard = dev_alloc(dp->shard_elems);
        dev_free(m->grads);
        m->grads = NULL;
    }
    if (o->zero >= 3) {
        /* the shard alone: a model allocated without its whole parameters (model_alloc_parts)
         * is filled in the shard (train_state_fill_params); one allocated whole hands its values over */
        dp->param_shard = dev_alloc(dp->shard_elems);
        for (int i = 0; m->params && i < dp->nbuckets; i++)
            dev_to_dev(dp->param_shard + dp->shard_off[i], m->params + own_lo(dp, &dp->b[i]),
                       dp->b[i].piece * sizeof(real));
        dev_free(m->params);
        m->params = NULL;
    }
    dp->hooks = (ModelHooks){hook_before_forward, hook_after_forward, hook_before_backward, hook_after_backward,
                             hook_sum_replicated_now, dp};
    m->hooks = &dp->hooks;
    return 0;
}

void dp_destroy(DataParallel *dp) {
    for (int i = 0; i < dp->nbuckets; i++) {
        dev_free(dp->b[i].bf16);
        dev_free(dp->b[i].grad);
    }
    for (int u = 0; dp->gathered && u < dp->m->table.units; u++) dev_free(dp->gathered[u]), dev_free(dp->gathered_act[u]);
    for (int i = 0; i < dp->nopt; i++) adamw_destroy(&dp->opt[i]);
    free(dp->opt);
    free(dp->gathered);
    free(dp->gathered_act);
    free(dp->b);
    free(dp->bucket_of_unit);
    free(dp->shard_off);
    dev_free(dp->grad_shard);
    dev_free(dp->param_shard);
    if (dp->m->hooks == &dp->hooks) dp->m->hooks = NULL;
}

void dp_begin_step(DataParallel *dp) {
    if (dp->o.zero >= 2) dev_zero(dp->grad_shard, dp->shard_elems);
    else model_zero_grad(dp->m);
    dp->last_micro = 1;
}

void dp_set_last_micro(DataParallel *dp, int last) { dp->last_micro = last; }

void dp_defer_unit(DataParallel *dp, int unit) { dp->b[dp->bucket_of_unit[unit]].deferred = 1; }

int dp_finish_backward(DataParallel *dp) {
    double t0 = now_s();
    /* without overlap nothing was launched yet: launch in backward order (head first) */
    for (int i = dp->nbuckets - 1; i >= 0; i--)
        if (dp->b[i].pending && !dp->b[i].req) launch(dp, &dp->b[i]);
    for (int i = dp->nbuckets - 1; i >= 0; i--) {
        DpBucket *b = &dp->b[i];
        if (!b->pending) continue;
        must(dcomm_wait(&b->req));
        finish(dp, b);
    }
    release_unit(dp, 0); /* a tied embedding stayed gathered for the whole backward */
    dp->exposed_comm_s = now_s() - t0;
    return 0;
}

/* piece of bucket i that this rank owns, in the gradients as they are after reduction */
static real *own_grad(DataParallel *dp, int i) {
    return dp->o.zero >= 2 ? dp->grad_shard + dp->shard_off[i] : dp->m->grads + own_lo(dp, &dp->b[i]);
}

double dp_mean(DataParallel *dp, double x) {
    /* doubles travel bit-exactly as pairs of 32-bit words, then are added in rank order */
    double *all = malloc((size_t)dp->size * sizeof(double));
    must(comm_all_gather(dp->group, &x, all, 2, COMM_F32));
    double s = 0;
    for (int r = 0; r < dp->size; r++) s += all[r];
    free(all);
    return s / dp->size;
}

/* Squares of bucket i's own piece, each tensor's share weighted (tensors are sorted by offset). */
static double piece_sum_squares(DataParallel *dp, int i) {
    const real *g = own_grad(dp, i);
    if (!dp->tensor_weight) return sum_squares(g, dp->b[i].piece);
    size_t lo = own_lo(dp, &dp->b[i]), hi = lo + dp->b[i].piece;
    const ParamTable *t = &dp->m->table;
    double s = 0;
    for (int k = 0; k < t->count; k++) {
        const ParamInfo *p = &t->info[k];
        size_t a = p->offset > lo ? p->offset : lo, b = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        if (a < b) s += dp->tensor_weight[k] * sum_squares(g + (a - lo), b - a);
    }
    return s;
}

double dp_grad_sum_squares(DataParallel *dp) {
    double local = 0;
    for (int i = 0; i < dp->nbuckets; i++) local += piece_sum_squares(dp, i);
    return dp_mean(dp, local) * dp->size;
}

int dp_poison_grad(DataParallel *dp) {
    const ParamTable *t = &dp->m->table;
    for (int i = 0; i < dp->nbuckets; i++) {
        size_t lo = own_lo(dp, &dp->b[i]), hi = lo + dp->b[i].piece;
        for (int k = 0; k < t->count; k++) { /* the first element of a counted tensor in the piece */
            const ParamInfo *p = &t->info[k];
            size_t a = p->offset > lo ? p->offset : lo;
            if (a >= hi || a >= p->offset + p->numel) continue;
            if (dp->tensor_weight && dp->tensor_weight[k] == 0) continue;
            real nan = (real)NAN; /* the gradients may live in device memory */
            host_to_dev(own_grad(dp, i) + (a - lo), &nan, sizeof nan);
            return 1;
        }
    }
    return 0;
}

void dp_scale_grads(DataParallel *dp, real s) {
    if (dp->o.zero == 0) scale_inplace(dp->m->grads, s, dp->m->table.total);
    else
        for (int i = 0; i < dp->nbuckets; i++) scale_inplace(own_grad(dp, i), s, dp->b[i].piece);
}

int dp_optimizer_step(DataParallel *dp, const AdamWConfig *cfg, double lr) {
    Model *m = dp->m;
    if (dp->o.zero == 0) {
        adamw_step(&dp->opt[0], cfg, lr, m->params, m->grads, &m->table);
        return 0;
    }
    for (int i = 0; i < dp->nbuckets; i++) {
        real *p = dp->o.zero >= 3 ? dp->param_shard + dp->shard_off[i] : m->params + own_lo(dp, &dp->b[i]);
        adamw_step_slice(&dp->opt[i], cfg, lr, p, own_grad(dp, i), &m->table);
    }
    return dp->o.zero <= 2 ? dp_gather_params(dp) : 0;
}

/* Each bucket's own piece of buf (laid out like the parameters) all-gathered into the bucket. */
static void gather_buckets(DataParallel *dp, real *buf) {
    DevRequest **reqs = calloc((size_t)dp->nbuckets, sizeof *reqs);
    for (int i = 0; i < dp->nbuckets; i++)
        must(dcomm_iall_gather(dp->b[i].group, buf + dp->b[i].lo, dp->b[i].piece, COMM_F32, &reqs[i]));
    for (int i = 0; i < dp->nbuckets; i++) must(dcomm_wait(&reqs[i]));
    free(reqs);
}

int dp_gather_replicated(DataParallel *dp) {
    if (dp->o.zero >= 3) return 0;
    gather_buckets(dp, dp->m->params);
    if (dp->o.zero == 0) gather_buckets(dp, dp->opt[0].m), gather_buckets(dp, dp->opt[0].v);
    return 0;
}

int dp_gather_params(DataParallel *dp) {
    if (dp->o.zero == 0 || dp->o.zero >= 3) return 0;
    gather_buckets(dp, dp->m->params);
    return 0;
}

void dp_release_gathered(DataParallel *dp) {
    for (int u = 0; u < dp->m->table.units; u++) release_unit(dp, u);
}

void dp_memory(const DataParallel *dp, double *params, double *grads, double *optim, double *expected) {
    double total = (double)dp->m->table.total * sizeof(real), shard = (double)dp->shard_elems * sizeof(real);
    double psi = (double)model_num_params(dp->m), N = dp->size;
    double largest_unit = 0;
    for (int u = 0; u < dp->m->table.units; u++) {
        double n = (double)(dp->m->table.unit_hi[u] - dp->m->table.unit_lo[u]) * sizeof(real);
        if (n > largest_unit) largest_unit = n;
    }
    switch (dp->o.zero) {
    case 0: *params = total; *grads = total; *optim = 2 * total; *expected = 16 * psi; break;
    case 1: *params = total; *grads = total; *optim = 2 * shard; *expected = (8 + 8 / N) * psi; break;
    case 2: *params = total; *grads = shard; *optim = 2 * shard; *expected = (4 + 12 / N) * psi; break;
    default:
        *params = shard + largest_unit; /* the shard plus one gathered unit at a time */
        *grads = shard;
        *optim = 2 * shard;
        *expected = 16 * psi / N + largest_unit;
    }
}
