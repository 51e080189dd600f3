/* schedule.c: pipeline schedules as data (GPipe, 1F1B, interleaved 1F1B): layout validation,
 * each stage's compute order, the send/recv placed around it, the layer split over virtual
 * stages, and an event-driven executor that checks the lists (deadlock, matching, data
 * dependencies) and measures the bubble and the live activations. */
#include "parallel/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static const char *const kind_names[] = {"gpipe", "1f1b", "interleaved"};

const char *schedule_name(ScheduleKind kind) { return kind >= 0 && kind <= 2 ? kind_names[kind] : "?"; }

int schedule_parse(const char *name, ScheduleKind *kind) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, kind_names[i])) {
            *kind = (ScheduleKind)i;
            return 0;
        }
    return myr_error("unknown pipeline schedule '%s'; use gpipe, 1f1b or interleaved", name);
}

int schedule_validate(ScheduleKind kind, int pp, int vpp, int micro) {
    if (kind < SCHEDULE_GPIPE || kind > SCHEDULE_INTERLEAVED) return myr_error("unknown pipeline schedule %d", kind);
    if (pp < 1) return myr_error("pp is %d; it must be at least 1", pp);
    if (vpp < 1) return myr_error("vpp is %d; it must be at least 1", vpp);
    if (micro < 1) return myr_error("%d micro-batches; a step needs at least 1", micro);
    if (vpp > 1 && kind != SCHEDULE_INTERLEAVED)
        return myr_error("vpp %d needs the interleaved schedule (--schedule interleaved), not %s", vpp,
                         schedule_name(kind));
    if (kind == SCHEDULE_1F1B && micro < pp)
        return myr_error("the 1f1b schedule needs at least pp = %d micro-batches per step, got %d "
                         "(use more micro-batches or the gpipe schedule)", pp, micro);
    if (kind == SCHEDULE_INTERLEAVED) {
        if (pp < 2) return myr_error("the interleaved schedule needs pp >= 2, got pp %d", pp);
        if (vpp < 2)
            return myr_error("the interleaved schedule needs vpp >= 2 model chunks per stage, got %d "
                             "(with one chunk use 1f1b)", vpp);
        if (micro % pp)
            return myr_error("the interleaved schedule needs the micro-batches (%d) to be a multiple of pp %d", micro,
                             pp);
    }
    return 0;
}

/* ---- compute order of one stage: op = (mb * v + chunk) * 2 + is_backward */

static int compute_order(ScheduleKind kind, int p, int v, int m, int s, int *ops) {
    int n = 0;
    if (kind == SCHEDULE_GPIPE) { /* all forwards; backwards last micro-batch first (GPipe, fig. 2) */
        for (int i = 0; i < m; i++) ops[n++] = i * 2;
        for (int i = m - 1; i >= 0; i--) ops[n++] = i * 2 + 1;
        return n;
    }
    if (kind == SCHEDULE_1F1B) { /* p-1-s warm-up forwards, one forward one backward, cool-down */
        int warm = p - 1 - s < m ? p - 1 - s : m, f = 0, b = 0;
        for (; f < warm; f++) ops[n++] = f * 2;
        while (f < m) ops[n++] = f++ * 2, ops[n++] = b++ * 2 + 1;
        while (b < m) ops[n++] = b++ * 2 + 1;
        return n;
    }
    /* interleaved (Megatron-LM): the k-th forward runs chunk (k mod pv) / p of micro-batch
     * (k / pv) * p + k mod p; the k-th backward the same micro-batch on chunk v-1-(k mod pv)/p.
     * Warm-up: 2(p-1-s) + (v-1)p forwards. */
    int total = m * v, warm = 2 * (p - 1 - s) + (v - 1) * p;
    if (warm > total) warm = total;
#define MB(k) (((k) / (p * v)) * p + (k) % p)
#define FCHUNK(k) (((k) % (p * v)) / p)
    int f = 0, b = 0;
    for (; f < warm; f++) ops[n++] = (MB(f) * v + FCHUNK(f)) * 2;
    while (f < total) {
        ops[n++] = (MB(f) * v + FCHUNK(f)) * 2, f++;
        ops[n++] = (MB(b) * v + (v - 1 - FCHUNK(b))) * 2 + 1, b++;
    }
    for (; b < total; b++) ops[n++] = (MB(b) * v + (v - 1 - FCHUNK(b))) * 2 + 1;
#undef MB
#undef FCHUNK
    return n;
}

/* The transfer a compute op needs before it (input) or makes after it (output), if any. */
static int transfer_in(int p, int v, int s, int code, ScheduleOp *t) {
    int mb = code / 2 / v, c = code / 2 % v, bwd = code & 1, k = c * p + s, V = p * v;
    if (!bwd && k == 0) return 0;
    if (bwd && k == V - 1) return 0;
    *t = (ScheduleOp){bwd ? OP_RECV_GRAD : OP_RECV_ACT, mb, c, bwd ? (s + 1) % p : (s + p - 1) % p};
    return 1;
}
static int transfer_out(int p, int v, int s, int code, ScheduleOp *t) {
    int mb = code / 2 / v, c = code / 2 % v, bwd = code & 1, k = c * p + s, V = p * v;
    if (!bwd && k == V - 1) return 0;
    if (bwd && k == 0) return 0;
    *t = (ScheduleOp){bwd ? OP_SEND_GRAD : OP_SEND_ACT, mb, c, bwd ? (s + p - 1) % p : (s + 1) % p};
    return 1;
}

int schedule_build(Schedule *sc, ScheduleKind kind, int pp, int vpp, int micro) {
    memset(sc, 0, sizeof *sc);
    if (schedule_validate(kind, pp, vpp, micro) < 0) return -1;
    int p = pp, v = vpp, m = micro, per = 2 * m * v;
    sc->kind = kind, sc->pp = p, sc->vpp = v, sc->micro = m;
    sc->blocking_safe = kind != SCHEDULE_INTERLEAVED; /* the line argument in docs/PIPELINE.md */
    sc->nops = calloc((size_t)p, sizeof(int));
    sc->ops = calloc((size_t)p, sizeof(ScheduleOp *));
    int *order = malloc(sizeof(int) * (size_t)per);
    if (!sc->nops || !sc->ops || !order) goto oom;
    for (int s = 0; s < p; s++) {
        ScheduleOp *ops = sc->ops[s] = malloc(sizeof(ScheduleOp) * (size_t)per * 3);
        if (!ops) goto oom;
        int n = compute_order(kind, p, v, m, s, order), k = 0;
        ScheduleOp pending, in; /* pending: the previous compute's output, not yet sent */
        int have_pending = 0;
        for (int i = 0; i < n; i++) {
            int have_in = transfer_in(p, v, s, order[i], &in);
            /* between two computes: activation before gradient, else send before receive */
            if (have_pending && have_in && pending.kind == OP_SEND_GRAD && in.kind == OP_RECV_ACT)
                ops[k++] = in, ops[k++] = pending;
            else {
                if (have_pending) ops[k++] = pending;
                if (have_in) ops[k++] = in;
            }
            ops[k++] = (ScheduleOp){order[i] & 1 ? OP_BACKWARD : OP_FORWARD, order[i] / 2 / v, order[i] / 2 % v, -1};
            have_pending = transfer_out(p, v, s, order[i], &pending);
        }
        if (have_pending) ops[k++] = pending;
        sc->nops[s] = k;
    }
    free(order);
    return 0;
oom:
    free(order);
    schedule_free(sc);
    return myr_error("schedule: out of memory (pp %d, vpp %d, %d micro-batches)", pp, vpp, micro);
}

void schedule_free(Schedule *sc) {
    if (sc->ops)
        for (int s = 0; s < sc->pp; s++) free(sc->ops[s]);
    free(sc->ops);
    free(sc->nops);
    memset(sc, 0, sizeof *sc);
}

void schedule_op_str(const ScheduleOp *op, int vpp, char *buf, size_t cap) {
    static const char *const tag[] = {"F", "B", "sa", "ra", "sg", "rg"};
    if (vpp > 1) snprintf(buf, cap, "%s%d.%d", tag[op->kind], op->mb, op->chunk);
    else snprintf(buf, cap, "%s%d", tag[op->kind], op->mb);
}

int schedule_stage_str(const Schedule *sc, int stage, char *buf, size_t cap) {
    size_t len = 0;
    if (cap) buf[0] = 0;
    for (int i = 0; i < sc->nops[stage]; i++) {
        char one[32];
        schedule_op_str(&sc->ops[stage][i], sc->vpp, one, sizeof one);
        int w = snprintf(buf + len, cap - len, "%s%s", i ? " " : "", one);
        if (w < 0 || (size_t)w >= cap - len) return myr_error("schedule: text of stage %d exceeds %zu bytes", stage, cap);
        len += (size_t)w;
    }
    return 0;
}

int schedule_stage_layers(int layers, int pp, int vpp, const int *explicit_counts, int n_explicit, int *start,
                          int *count) {
    if (pp < 1 || vpp < 1) return myr_error("pp %d and vpp %d must be at least 1", pp, vpp);
    int V = pp * vpp;
    if (explicit_counts) {
        if (n_explicit != V)
            return myr_error("--stage-layers lists %d stages; pp %d x vpp %d needs %d", n_explicit, pp, vpp, V);
        long long sum = 0;
        for (int k = 0; k < V; k++) {
            if (explicit_counts[k] < 1)
                return myr_error("--stage-layers gives virtual stage %d %d layers; each needs at least 1", k,
                                 explicit_counts[k]);
            sum += explicit_counts[k];
        }
        if (sum != layers)
            return myr_error("--stage-layers adds up to %lld layers but the model has %d", sum, layers);
        for (int k = 0, at = 0; k < V; at += explicit_counts[k], k++) start[k] = at, count[k] = explicit_counts[k];
        return 0;
    }
    if (layers < V || layers % V)
        return myr_error("%d layers are not divisible by pp %d x vpp %d = %d (change the layout or give "
                         "--stage-layers)", layers, pp, vpp, V);
    for (int k = 0; k < V; k++) start[k] = k * (layers / V), count[k] = layers / V;
    return 0;
}

/* ---- the executor */

typedef struct {
    const Schedule *sc;
    int p, v, m, V, rendezvous;
    double tf, tb;
    int *pos;                  /* next op per stage */
    double *clock;             /* per stage */
    char *fdone, *bdone;       /* [s][mb][chunk] */
    char *have_act, *have_grad;
    int *sent_by;              /* per message: sending stage, -1 not yet, -2 received */
    double *sent_at;
    int live0, peak0, messages;
    double *start;             /* optional: [s][mb][chunk][fwd 0 / bwd 1] start time of each compute */
} Exec;

static int vstage(const Exec *e, int s, int chunk) { return chunk * e->p + s; }
static size_t slot(const Exec *e, int s, int mb, int chunk) { return ((size_t)s * e->m + mb) * e->v + chunk; }
/* message id: activation or gradient of micro-batch mb across boundary b (virtual b <-> b+1) */
static int message(const Exec *e, int grad, int mb, int b) { return (grad * e->m + mb) * (e->V - 1) + b; }

/* Where a send/recv op's message crosses, and the stage that must be at the other end. */
static void endpoints(const Exec *e, int s, const ScheduleOp *op, int *msg, int *other) {
    int k = vstage(e, s, op->chunk);
    int grad = op->kind == OP_SEND_GRAD || op->kind == OP_RECV_GRAD;
    int b = (op->kind == OP_SEND_ACT || op->kind == OP_RECV_GRAD) ? k : k - 1;
    int other_k = (op->kind == OP_SEND_ACT || op->kind == OP_RECV_GRAD) ? k + 1 : k - 1;
    *msg = b >= 0 && b < e->V - 1 ? message(e, grad, op->mb, b) : -1;
    *other = other_k >= 0 && other_k < e->V ? other_k % e->p : -1;
}

static int fail(const Exec *e, int s, const char *what) {
    char buf[32];
    schedule_op_str(&e->sc->ops[s][e->pos[s]], e->v, buf, sizeof buf);
    return myr_error("schedule %s (pp %d, vpp %d, %d micro-batches): stage %d, op %d (%s): %s",
                     schedule_name(e->sc->kind), e->p, e->v, e->m, s, e->pos[s], buf, what);
}

/* Run stage s's head op if it can; 1 if it ran, 0 if blocked, -1 on an invalid op. */
static int step(Exec *e, int s) {
    const ScheduleOp *op = &e->sc->ops[s][e->pos[s]];
    if (op->mb < 0 || op->mb >= e->m || op->chunk < 0 || op->chunk >= e->v) return fail(e, s, "bad micro-batch or chunk");
    size_t at = slot(e, s, op->mb, op->chunk);
    int k = vstage(e, s, op->chunk);
    if (op->kind == OP_FORWARD) {
        if (e->fdone[at]) return fail(e, s, "forward runs twice");
        if (k > 0 && !e->have_act[at]) return fail(e, s, "forward before its input activation was received");
        if (e->start) e->start[at * 2] = e->clock[s];
        e->fdone[at] = 1, e->clock[s] += e->tf / e->v;
        if (s == 0 && ++e->live0 > e->peak0) e->peak0 = e->live0;
    } else if (op->kind == OP_BACKWARD) {
        if (!e->fdone[at] || e->bdone[at]) return fail(e, s, "backward without its forward, or twice");
        if (k < e->V - 1 && !e->have_grad[at]) return fail(e, s, "backward before its output gradient was received");
        if (e->start) e->start[at * 2 + 1] = e->clock[s];
        e->bdone[at] = 1, e->clock[s] += e->tb / e->v;
        if (s == 0) e->live0--;
    } else {
        int msg, other;
        endpoints(e, s, op, &msg, &other);
        if (msg < 0 || other != op->peer) return fail(e, s, "no such transfer, or the wrong peer stage");
        int is_send = op->kind == OP_SEND_ACT || op->kind == OP_SEND_GRAD;
        if (is_send && !(op->kind == OP_SEND_ACT ? e->fdone[at] : e->bdone[at]))
            return fail(e, s, "send before the compute that produces it");
        if (is_send && e->sent_by[msg] != -1) return fail(e, s, "message sent twice");
        if (!is_send && e->sent_by[msg] == -2) return fail(e, s, "message received twice");
        if (e->rendezvous) { /* both ends must stand at the matching op */
            int t = op->peer;
            if (e->pos[t] >= e->sc->nops[t]) return 0;
            const ScheduleOp *q = &e->sc->ops[t][e->pos[t]];
            int qmsg, qother;
            if (q->kind < OP_SEND_ACT) return 0;
            endpoints(e, t, q, &qmsg, &qother);
            int q_send = q->kind == OP_SEND_ACT || q->kind == OP_SEND_GRAD;
            if (qmsg != msg || q_send == is_send || qother != s || t == s) return 0;
            if (q_send && !(q->kind == OP_SEND_ACT ? e->fdone[slot(e, t, q->mb, q->chunk)]
                                                   : e->bdone[slot(e, t, q->mb, q->chunk)]))
                return fail(e, t, "send before the compute that produces it");
            double when = e->clock[s] > e->clock[t] ? e->clock[s] : e->clock[t];
            e->clock[s] = e->clock[t] = when;
            const ScheduleOp *recv = is_send ? q : op;
            int rs = is_send ? t : s;
            size_t rat = slot(e, rs, recv->mb, recv->chunk);
            if (recv->kind == OP_RECV_ACT) e->have_act[rat] = 1;
            else e->have_grad[rat] = 1;
            e->sent_by[msg] = -2, e->messages++;
            e->pos[t]++;
        } else if (is_send) {
            e->sent_by[msg] = s, e->sent_at[msg] = e->clock[s];
        } else {
            if (e->sent_by[msg] == -1) return 0; /* not sent yet: wait */
            if (e->sent_by[msg] != op->peer) return fail(e, s, "received from a stage that did not send it");
            if (e->sent_at[msg] > e->clock[s]) e->clock[s] = e->sent_at[msg];
            if (op->kind == OP_RECV_ACT) e->have_act[at] = 1;
            else e->have_grad[at] = 1;
            e->sent_by[msg] = -2, e->messages++;
        }
    }
    e->pos[s]++;
    return 1;
}

static int simulate(const Schedule *sc, double t_fwd, double t_bwd, int rendezvous, ScheduleSimResult *r,
                    double *start) {
    memset(r, 0, sizeof *r);
    Exec e = {.sc = sc, .p = sc->pp, .v = sc->vpp, .m = sc->micro, .V = sc->pp * sc->vpp, .rendezvous = rendezvous,
              .tf = t_fwd, .tb = t_bwd, .start = start};
    size_t cells = (size_t)e.p * e.m * e.v, msgs = (size_t)2 * e.m * (e.V > 1 ? e.V - 1 : 1);
    e.pos = calloc((size_t)e.p, sizeof(int));
    e.clock = calloc((size_t)e.p, sizeof(double));
    e.fdone = calloc(cells * 4, 1);
    e.sent_by = malloc(sizeof(int) * msgs);
    e.sent_at = calloc(msgs, sizeof(double));
    int rc = 0;
    if (!e.pos || !e.clock || !e.fdone || !e.sent_by || !e.sent_at) {
        rc = myr_error("schedule: out of memory simulating");
        goto done;
    }
    e.bdone = e.fdone + cells, e.have_act = e.fdone + 2 * cells, e.have_grad = e.fdone + 3 * cells;
    for (size_t i = 0; i < msgs; i++) e.sent_by[i] = -1;
    for (;;) {
        int progressed = 0, finished = 1;
        for (int s = 0; s < e.p; s++)
            while (e.pos[s] < sc->nops[s]) {
                int got = step(&e, s);
                if (got < 0) {
                    rc = -1;
                    goto done;
                }
                if (!got) break;
                progressed = 1;
            }
        for (int s = 0; s < e.p; s++) finished &= e.pos[s] >= sc->nops[s];
        if (finished) break;
        if (!progressed) { /* name where every unfinished stage stands */
            char where[512];
            size_t len = 0;
            for (int s = 0; s < e.p && len < sizeof where - 40; s++) {
                if (e.pos[s] >= sc->nops[s]) continue;
                char op[32];
                schedule_op_str(&sc->ops[s][e.pos[s]], e.v, op, sizeof op);
                len += snprintf(where + len, sizeof where - len, "%sstage %d at op %d (%s)", len ? ", " : "", s,
                                e.pos[s], op);
            }
            rc = myr_error("schedule %s (pp %d, vpp %d, %d micro-batches): deadlock with %s: %s",
                           schedule_name(sc->kind), e.p, e.v, e.m,
                           rendezvous ? "blocking send/recv" : "nonblocking sends", where);
            goto done;
        }
    }
    for (size_t i = 0; i < msgs; i++)
        if (e.sent_by[i] >= 0) {
            rc = myr_error("schedule %s: a message was sent by stage %d but never received", schedule_name(sc->kind),
                           e.sent_by[i]);
            goto done;
        }
    for (size_t i = 0; i < cells; i++)
        if (!e.fdone[i] || !e.bdone[i]) {
            rc = myr_error("schedule %s: stage %zu never ran forward and backward of micro-batch %zu chunk %zu",
                           schedule_name(sc->kind), i / ((size_t)e.m * e.v), i / e.v % e.m, i % e.v);
            goto done;
        }
    for (int s = 0; s < e.p; s++)
        if (e.clock[s] > r->makespan) r->makespan = e.clock[s];
    r->bubble = r->makespan > 0 ? 1.0 - e.m * (t_fwd + t_bwd) / r->makespan : 0;
    int vv = sc->kind == SCHEDULE_INTERLEAVED ? e.v : 1;
    r->bubble_analytic = (double)(e.p - 1) / (vv * e.m + e.p - 1);
    r->peak_live_chunks0 = e.peak0;
    r->peak_live_mb0 = (double)e.peak0 / e.v;
    r->messages = e.messages;
done:
    free(e.pos), free(e.clock), free(e.fdone), free(e.sent_by), free(e.sent_at);
    return rc;
}

int schedule_simulate(const Schedule *sc, double t_fwd, double t_bwd, int rendezvous, ScheduleSimResult *r) {
    return simulate(sc, t_fwd, t_bwd, rendezvous, r, NULL);
}

/* ---- lists for blocking transfers on any schedule. Every event gets a key (time, class, id):
 * a compute its start time in the nonblocking execution (class 1), a transfer the start time of
 * the compute that consumes it (class 0, so it sorts just before that compute; id = message).
 * Each stage's list is its events sorted by key, so all lists are projections of one global
 * sequence in which a transfer is one event shared by its two ends: executing that sequence in
 * order never waits forever, whatever the blocking semantics. */

typedef struct {
    double time;
    int cls, id;
    ScheduleOp op;
} Keyed;

static int by_key(const void *pa, const void *pb) {
    const Keyed *a = pa, *b = pb;
    if (a->time != b->time) return a->time < b->time ? -1 : 1;
    if (a->cls != b->cls) return a->cls - b->cls;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    return (a->op.kind == OP_SEND_ACT || a->op.kind == OP_SEND_GRAD) ? -1 : 1; /* never both ends on one stage */
}

int schedule_build_blocking(Schedule *sc, ScheduleKind kind, int pp, int vpp, int micro, double t_fwd, double t_bwd) {
    if (!(t_fwd > 0) || !(t_bwd > 0)) return myr_error("schedule: forward and backward times must be positive");
    if (schedule_build(sc, kind, pp, vpp, micro) < 0) return -1;
    int p = pp, v = vpp, m = micro, V = p * v;
    size_t cells = (size_t)p * m * v;
    double *start = calloc(cells * 2, sizeof(double));
    Keyed *items = malloc(sizeof(Keyed) * (size_t)6 * m * v);
    ScheduleSimResult r;
    int rc = 0;
    if (!start || !items) rc = myr_error("schedule: out of memory");
    else rc = simulate(sc, t_fwd, t_bwd, 0, &r, start);
#define START(st, mb, c, bwd) start[(((size_t)(st) * m + (mb)) * v + (c)) * 2 + (bwd)]
    for (int s = 0; s < p && rc == 0; s++) {
        int n = 0;
        for (int i = 0; i < sc->nops[s]; i++) {
            const ScheduleOp *op = &sc->ops[s][i];
            int k = op->chunk * p + s;
            double t;
            int id = 0;
            switch (op->kind) {
            case OP_FORWARD: t = START(s, op->mb, op->chunk, 0); break;
            case OP_BACKWARD: t = START(s, op->mb, op->chunk, 1); break;
            case OP_RECV_ACT: t = START(s, op->mb, op->chunk, 0), id = (0 * m + op->mb) * V + k - 1; break;
            case OP_RECV_GRAD: t = START(s, op->mb, op->chunk, 1), id = (1 * m + op->mb) * V + k; break;
            case OP_SEND_ACT: t = START((k + 1) % p, op->mb, (k + 1) / p, 0), id = (0 * m + op->mb) * V + k; break;
            default: /* OP_SEND_GRAD */ t = START((k - 1) % p, op->mb, (k - 1) / p, 1), id = (1 * m + op->mb) * V + k - 1;
            }
            int compute = op->kind == OP_FORWARD || op->kind == OP_BACKWARD;
            items[n++] = (Keyed){t, compute, compute ? 0 : id, *op};
        }
        qsort(items, (size_t)n, sizeof *items, by_key);
        for (int i = 0; i < n; i++) sc->ops[s][i] = items[i].op;
    }
#undef START
    free(start), free(items);
    if (rc < 0) schedule_free(sc);
    else sc->blocking_safe = 1;
    return rc;
}
