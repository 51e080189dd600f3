/* sim.c: the event-driven simulator. Owns the event heap, the pending queues (one sorted array per
 * policy queue, lazy deletion), the running set sorted by expected end (for EASY backfill's shadow
 * time), the scheduling pass (order, gang placement, delay scheduling, backfill, preemption), node
 * failures with hot spares, and the time integrals behind the metrics. */
#include "sched/sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/placement.h"
#include "util/error.h"
#include "util/rng.h"

#define MAX_PRIO 16

enum { EV_ARRIVE, EV_FINISH, EV_FAIL, EV_REPAIR, EV_WAKE };

typedef struct {
    double t;
    long seq;
    int kind, id, epoch;
} Event;

typedef struct {
    Event *a;
    int n, cap;
    long seq;
} Heap;

/* Pending jobs of one queue, best first (keys descending). Started jobs become -1 (tombstones keep
 * their key so binary search still works) and are compacted away in bulk. */
typedef struct {
    int *ids;
    double *keys;
    int len, head, ndead, cap;
} PendQ;

typedef struct {
    int g, milli, cpu, mem, tier;
    uint32_t mask;
    int ntasks;
} FailedShape;

typedef struct {
    Cluster *c;
    Job *jobs;
    int njobs;
    const Policy *pol;
    const SimConfig *cfg;
    Placer pl;
    Placer pl_plain; /* same rules without FGD: the cheap feasibility checks of preemption */
    Policy pol_plain;
    Workload wl;
    Heap h;
    PendQ q[SCHED_MAX_QUEUES];
    int nq, npending;
    int *run;         /* running job ids sorted by run_end */
    double *run_end;
    int nrun;
    double now, t0;
    double q_gpu[SCHED_MAX_QUEUES], q_cpu[SCHED_MAX_QUEUES], q_mem[SCHED_MAX_QUEUES], q_served[SCHED_MAX_QUEUES];
    double cap_gpu, cap_cpu, cap_mem, weight_sum;
    long prio_milli[MAX_PRIO]; /* GPU milli of running, still-preemptible jobs by priority */
    TaskSlot *tmp;
    int *cand;
    double *cand_loss;
    int *deferred, ndeferred;
    char *wake_set;
    signed char *pref;
    long node_max, leaf_max, spine_max;
    int spares_now, nactive, ndone;
    uint64_t rng;
    /* failed-shape cache for one pass: shapes that could not be placed, with the fewest tasks tried */
    FailedShape fc[16];
    int nfc;
    int preempt_tries;
    unsigned fc_next;
    /* integrals */
    double last_t, alloc_int, frag_blocked_int, blocked_time, frag_cur;
    double *fgd_node;      /* per-node FGD fragmentation, valid for fgd_ver[n] */
    uint32_t *fgd_ver;
    double fgd_cur;
    /* the measurement window, first to last arrival: what the cluster looked like while jobs kept
     * coming, without the drain tail after the last arrival (openb pods that live for months) */
    double win_end, win_alloc_int, win_fgd_int, win_wait_time;
    double *lat;
    long nlat, latcap;
    long preemptions, failures, spare_swaps, failure_requeues;
    double lost_gpu_s;
    double *repair_at; /* per node: when a failed node comes back */
    int *failed_list;  /* scratch: failed nodes by repair time (reserve) */
} Sim;

void sim_config_default(SimConfig *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->repair_s = 4 * 3600;
    cfg->checkpoint_s = 1800;
    cfg->tier_slowdown[0] = cfg->tier_slowdown[1] = 1.0;
    cfg->tier_slowdown[2] = 1.10;
    cfg->tier_slowdown[3] = 1.25;
    cfg->seed = 1;
    cfg->max_preemptions = 3;
}

/* ---- event heap ---- */
static bool ev_less(const Event *a, const Event *b) { return a->t < b->t || (a->t == b->t && a->seq < b->seq); }

static int heap_push(Heap *h, double t, int kind, int id, int epoch) {
    if (h->n == h->cap) {
        int cap = h->cap ? h->cap * 2 : 4096;
        Event *a = realloc(h->a, sizeof(Event) * cap);
        if (!a) return myr_error("out of memory");
        h->a = a, h->cap = cap;
    }
    Event e = {t, h->seq++, kind, id, epoch};
    int i = h->n++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!ev_less(&e, &h->a[p])) break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = e;
    return 0;
}

static Event heap_pop(Heap *h) {
    Event top = h->a[0], last = h->a[--h->n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const Event *mv = &last;
        if (l < h->n && ev_less(&h->a[l], mv)) m = l, mv = &h->a[l];
        if (r < h->n && ev_less(&h->a[r], mv)) m = r;
        if (m == i) break;
        h->a[i] = h->a[m];
        i = m;
    }
    if (h->n) h->a[i] = last;
    return top;
}

/* ---- randomness (failures) ---- */

/* ---- pending queues ---- */
static double job_key(const Sim *s, const Job *j) {
    const Policy *p = s->pol;
    switch (p->order) {
    case ORDER_FIFO: return -j->submit;
    case ORDER_PRIORITY: return j->priority * (p->aging_s > 0 ? p->aging_s : 1e12) - j->submit;
    case ORDER_SJF: {
        double gh = job_gpu_milli(j) / 1000.0 * j->est_duration / 3600.0;
        return j->priority * (p->aging_s > 0 ? p->aging_s : 1e12) - j->submit - p->sjf_s * log2(1 + gh);
    }
    }
    return -j->submit;
}

static int pq_insert(PendQ *q, int id, double key) {
    if (q->head > 0 && (q->head == q->len || key > q->keys[q->head])) { /* new best: slot in front */
        q->head--;
        q->ids[q->head] = id, q->keys[q->head] = key;
        return 0;
    }
    if (q->len == q->cap) {
        int cap = q->cap ? q->cap * 2 : 1024;
        int *ids = realloc(q->ids, sizeof(int) * cap);
        if (!ids) return myr_error("out of memory");
        q->ids = ids;
        double *keys = realloc(q->keys, sizeof(double) * cap);
        if (!keys) return myr_error("out of memory");
        q->keys = keys, q->cap = cap;
    }
    /* first position whose key is smaller (ties keep arrival order) */
    int lo = q->head, hi = q->len;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (q->keys[mid] >= key) lo = mid + 1;
        else hi = mid;
    }
    memmove(q->ids + lo + 1, q->ids + lo, sizeof(int) * (q->len - lo));
    memmove(q->keys + lo + 1, q->keys + lo, sizeof(double) * (q->len - lo));
    q->ids[lo] = id, q->keys[lo] = key;
    q->len++;
    return 0;
}

static void pq_tidy(PendQ *q) {
    while (q->head < q->len && q->ids[q->head] < 0) q->head++, q->ndead--;
    if (q->head == q->len) { q->head = q->len = q->ndead = 0; return; }
    if (q->ndead > 64 && q->ndead > (q->len - q->head) / 2) {
        int w = 0;
        for (int i = q->head; i < q->len; i++)
            if (q->ids[i] >= 0) q->ids[w] = q->ids[i], q->keys[w] = q->keys[i], w++;
        q->len = w, q->head = 0, q->ndead = 0;
    } else if (q->head > 4096 && q->head > q->len / 2) {
        int n = q->len - q->head;
        memmove(q->ids, q->ids + q->head, sizeof(int) * n);
        memmove(q->keys, q->keys + q->head, sizeof(double) * n);
        q->len = n, q->head = 0;
    }
}

static int queue_of(const Sim *s, const Job *j) { return j->queue >= 0 && j->queue < s->nq ? j->queue : 0; }

static int enqueue(Sim *s, Job *j) {
    j->state = JOB_PENDING;
    j->eligible_at = s->now;
    s->wake_set[j->id] = 0;
    s->npending++;
    return pq_insert(&s->q[queue_of(s, j)], j->id, job_key(s, j));
}

/* ---- running set ---- */
static int run_pos(const Sim *s, double end, int id) {
    int lo = 0, hi = s->nrun;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s->run_end[mid] < end || (s->run_end[mid] == end && s->run[mid] < id)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void run_insert(Sim *s, int id, double end) {
    int p = run_pos(s, end, id);
    memmove(s->run + p + 1, s->run + p, sizeof(int) * (s->nrun - p));
    memmove(s->run_end + p + 1, s->run_end + p, sizeof(double) * (s->nrun - p));
    s->run[p] = id, s->run_end[p] = end;
    s->nrun++;
}

static void run_remove(Sim *s, int id, double end) {
    int p = run_pos(s, end, id);
    if (p >= s->nrun || s->run[p] != id) { /* fall back to a scan: cannot happen if ends are kept */
        for (p = 0; p < s->nrun && s->run[p] != id; p++) {}
        if (p == s->nrun) return;
    }
    memmove(s->run + p, s->run + p + 1, sizeof(int) * (s->nrun - p - 1));
    memmove(s->run_end + p, s->run_end + p + 1, sizeof(double) * (s->nrun - p - 1));
    s->nrun--;
}

/* ---- job lifecycle ---- */
static double gpus_of(const Job *j) { return job_gpu_milli(j) / 1000.0; }
static int prio_idx(int p) { return p < 0 ? 0 : p >= MAX_PRIO ? MAX_PRIO - 1 : p; }
static bool can_be_victim(const Sim *s, const Job *j) {
    return j->preemptible && j->preemptions < s->cfg->max_preemptions;
}

static double slowdown_for(const Sim *s, const Job *j, int tier) {
    return j->ntasks > 1 && tier > 0 ? s->cfg->tier_slowdown[tier] : 1.0;
}

static void account(Sim *s, const Job *j, int sign) {
    int q = queue_of(s, j);
    s->q_gpu[q] += sign * gpus_of(j);
    s->q_cpu[q] += sign * (double)j->cpu_milli * j->ntasks;
    s->q_mem[q] += sign * (double)j->mem_mib * j->ntasks;
    if (can_be_victim(s, j)) s->prio_milli[prio_idx(j->priority)] += sign * job_gpu_milli(j);
}

static void start_job(Sim *s, Job *j, const TaskSlot *slots, int tier) {
    memcpy(j->slots, slots, sizeof(TaskSlot) * j->ntasks);
    place_apply(s->c, j, j->slots);
    j->state = JOB_RUNNING;
    j->tier = tier;
    if (tier > j->max_tier_seen) j->max_tier_seen = tier;
    j->slowdown = slowdown_for(s, j, tier);
    if (j->first_start < 0) j->first_start = s->now;
    j->run_start = s->now;
    double end = s->now + j->work_left * j->slowdown;
    j->run_end = end;
    heap_push(&s->h, end, EV_FINISH, j->id, j->epoch);
    run_insert(s, j->id, end);
    account(s, j, +1);
    if (s->cfg->hook) s->cfg->hook(s->cfg->hook_ctx, SIM_START, j, NULL, s->now);
}

/* Takes j off the cluster (release = give its resources back; false when already released). */
static void stop_job(Sim *s, Job *j, bool release) {
    if (s->cfg->hook) s->cfg->hook(s->cfg->hook_ctx, SIM_STOP, j, NULL, s->now);
    if (release) place_release(s->c, j, j->slots);
    run_remove(s, j->id, j->run_end);
    account(s, j, -1);
    s->q_served[queue_of(s, j)] += gpus_of(j) * (s->now - j->run_start);
    j->epoch++;
}

/* Work since the last checkpoint is lost; the rest is kept. */
static void interrupt(Sim *s, Job *j) {
    double prog = (s->now - j->run_start) / j->slowdown;
    if (prog > j->work_left) prog = j->work_left;
    if (prog < 0) prog = 0;
    double saved = s->cfg->checkpoint_s > 0 ? floor(prog / s->cfg->checkpoint_s) * s->cfg->checkpoint_s : 0;
    double lost = (prog - saved) * j->slowdown * gpus_of(j);
    j->work_left -= saved;
    j->lost_gpu_s += lost;
    s->lost_gpu_s += lost;
}

static double loss_if_stopped(const Sim *s, const Job *j) {
    double prog = (s->now - j->run_start) / j->slowdown;
    double saved = s->cfg->checkpoint_s > 0 ? floor(prog / s->cfg->checkpoint_s) * s->cfg->checkpoint_s : 0;
    return (prog - saved) * j->slowdown * gpus_of(j);
}

/* ---- preemption ---- */
static const Sim *sort_sim;
static int by_loss(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    double lx = sort_sim->cand_loss[x], ly = sort_sim->cand_loss[y];
    if (lx != ly) return lx < ly ? -1 : 1;
    const Job *jx = &sort_sim->jobs[sort_sim->cand[x]], *jy = &sort_sim->jobs[sort_sim->cand[y]];
    if (jx->priority != jy->priority) return jx->priority - jy->priority;
    return x - y;
}

static void sift_down(int *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && by_loss(&h[l], &h[m]) < 0) m = l;
        if (r < n && by_loss(&h[r], &h[m]) < 0) m = r;
        if (m == i) return;
        int t = h[i];
        h[i] = h[m], h[m] = t;
        i = m;
    }
}

/* Frees room for j by stopping running gangs of strictly lower priority, choosing the set that
 * loses the fewest GPU-hours (greedy by loss, then pruned); starts j. Returns 1 if it did. */
static int try_preempt(Sim *s, Job *j, int max_tier) {
    long need = job_gpu_milli(j);
    if (need == 0) return 0;
    long lower = 0;
    for (int p = 0; p < prio_idx(j->priority) && p < MAX_PRIO; p++) lower += s->prio_milli[p];
    long avail = s->c->total_free * GPU_MILLI;
    if (job_is_fractional(j)) avail = s->c->total_gpus * GPU_MILLI - s->c->alloc_milli;
    if (lower == 0 || avail + lower < need) return 0;
    int nc = 0;
    for (int i = 0; i < s->nrun; i++) {
        Job *r = &s->jobs[s->run[i]];
        if (r->priority < j->priority && can_be_victim(s, r) && r->gpus_per_task > 0) {
            s->cand[nc] = r->id;
            s->cand_loss[nc] = loss_if_stopped(s, r);
            nc++;
        }
    }
    int *idx = malloc(sizeof(int) * (nc ? nc : 1));
    char *victim = calloc(nc ? nc : 1, 1);
    /* cheapest victims first, popped from a binary heap: only the few taken are ever ordered */
    int *heap = malloc(sizeof(int) * (nc ? nc : 1)), hn = nc;
    for (int i = 0; i < nc; i++) heap[i] = i;
    sort_sim = s;
    for (int i = nc / 2 - 1; i >= 0; i--) sift_down(heap, hn, i);
    long freed = 0;
    int found = -1, nrel = 0;
    int checks = 0;
    for (int k = 0; hn > 0 && checks < 16; k++) {
        idx[k] = heap[0];
        heap[0] = heap[--hn];
        sift_down(heap, hn, 0);
        Job *v = &s->jobs[s->cand[idx[k]]];
        place_release(s->c, v, v->slots);
        nrel = k + 1;
        freed += job_gpu_milli(v);
        if (avail + freed < need) continue;
        checks++;
        if (place_find(&s->pl_plain, s->c, j, max_tier, s->tmp) >= 0) { found = k; break; }
    }
    free(heap);
    if (found < 0) {
        for (int k = nrel - 1; k >= 0; k--) {
            Job *v = &s->jobs[s->cand[idx[k]]];
            place_apply(s->c, v, v->slots);
        }
        free(idx), free(victim);
        return 0;
    }
    /* prune: give back, most costly first, every victim j can do without */
    long surplus = avail + freed - need; /* a victim bigger than this cannot be spared: skip the check */
    for (int k = nrel - 1; k >= 0; k--) {
        Job *v = &s->jobs[s->cand[idx[k]]];
        if (job_gpu_milli(v) > surplus) { victim[k] = 1; continue; }
        place_apply(s->c, v, v->slots);
        if (place_find(&s->pl_plain, s->c, j, max_tier, s->tmp) < 0) {
            place_release(s->c, v, v->slots);
            victim[k] = 1;
        } else
            surplus -= job_gpu_milli(v);
    }
    int tier = place_find(&s->pl, s->c, j, max_tier, s->tmp);
    if (tier < 0) tier = place_find(&s->pl_plain, s->c, j, max_tier, s->tmp);
    for (int k = 0; k < nrel; k++) {
        if (!victim[k]) continue;
        Job *v = &s->jobs[s->cand[idx[k]]];
        if (s->cfg->hook) s->cfg->hook(s->cfg->hook_ctx, SIM_PREEMPT, v, j, s->now);
        interrupt(s, v);
        stop_job(s, v, false);
        v->preemptions++;
        s->preemptions++;
        v->state = JOB_PENDING; /* queued after the pass: inserting now would move entries under the cursors */
        s->deferred[s->ndeferred++] = v->id;
    }
    free(idx), free(victim);
    start_job(s, j, s->tmp, tier);
    s->nfc = 0; /* resources were freed: earlier placement failures may succeed now */
    return 1;
}

/* ---- the scheduling pass ---- */
/* Placement impossibility is monotone in every requirement: if a gang of T tasks of (g, milli, cpu,
 * mem) found no room, a gang asking at least as much of each, with the same GPU types and tier
 * limit, finds none either until something is released. This cache of failed shapes is reset at
 * every pass and after every preemption, and makes deep backfill scans cheap. */
static bool dominates(const Job *j, const FailedShape *f) {
    bool frac = j->gpu_milli < GPU_MILLI, ffrac = f->milli < GPU_MILLI;
    return frac == ffrac && (j->gpus_per_task == 0) == (f->g == 0) && j->gpus_per_task >= f->g &&
           j->gpu_milli >= f->milli && j->cpu_milli >= f->cpu && j->mem_mib >= f->mem && j->type_mask == f->mask &&
           j->ntasks >= f->ntasks;
}

static int shape_failed(const Sim *s, const Job *j, int tier) {
    for (int i = 0; i < s->nfc; i++)
        if (s->fc[i].tier == tier && dominates(j, &s->fc[i])) return 1;
    return 0;
}

static void shape_fail_add(Sim *s, const Job *j, int tier) {
    int i = s->nfc < 16 ? s->nfc++ : (int)(s->fc_next++ & 15); /* round-robin; keeps the failure RNG untouched */
    s->fc[i].g = j->gpus_per_task, s->fc[i].milli = j->gpu_milli, s->fc[i].cpu = j->cpu_milli;
    s->fc[i].mem = j->mem_mib, s->fc[i].mask = j->type_mask, s->fc[i].tier = tier, s->fc[i].ntasks = j->ntasks;
}

typedef struct {
    Job *resv;
    double shadow;
    long extra;
} Reservation;

static const Sim *repair_sim;
static int by_repair(const void *a, const void *b) {
    double x = repair_sim->repair_at[*(const int *)a], y = repair_sim->repair_at[*(const int *)b];
    return x < y ? -1 : x > y ? 1 : *(const int *)a - *(const int *)b;
}

/* EASY: the reserved job starts when enough GPUs come back: GPUs come back when running jobs end
 * (by expected end) and when failed nodes are repaired (a repaired node refills the hot-spare
 * pool first). Without the repairs, a job needing more GPUs than the nodes now up could never
 * reach its count: its shadow time was infinite, so every later job backfilled ahead of it and the
 * reservation was void for as long as any node was down (docs/SCHEDULER.md, "Node failures and
 * reservations"). */
static void reserve_walk(Sim *s, Job *j, Reservation *r);
static void reserve(Sim *s, Job *j, Reservation *r) {
    reserve_walk(s, j, r);
    if (s->cfg->hook) s->cfg->hook(s->cfg->hook_ctx, SIM_RESERVE, j, NULL, r->shadow);
}

static void reserve_walk(Sim *s, Job *j, Reservation *r) {
    r->resv = j;
    /* free GPU on schedulable nodes: whole devices for whole-GPU jobs, any milli for fractions */
    long need = job_gpu_milli(j), avail = s->c->total_free * GPU_MILLI;
    if (job_is_fractional(j)) avail = s->c->total_gpus * GPU_MILLI - s->c->alloc_milli;
    r->shadow = INFINITY;
    r->extra = 0;
    if (avail >= need) { r->shadow = s->now; r->extra = avail - need; return; }
    int nf = 0;
    for (int n = 0; n < s->c->nnodes; n++)
        if (s->c->nodes[n].state == NODE_FAILED && s->c->nodes[n].ngpu > 0) s->failed_list[nf++] = n;
    repair_sim = s;
    if (nf > 1) qsort(s->failed_list, nf, sizeof(int), by_repair);
    int spares_to_fill = s->pol->hot_spares - s->spares_now, i = 0, k = 0;
    while (i < s->nrun || k < nf) {
        double t;
        if (k >= nf || (i < s->nrun && s->run_end[i] <= s->repair_at[s->failed_list[k]])) {
            avail += job_gpu_milli(&s->jobs[s->run[i]]);
            t = s->run_end[i++];
        } else {
            const Node *x = &s->c->nodes[s->failed_list[k]];
            t = s->repair_at[s->failed_list[k++]];
            if (spares_to_fill > 0) { spares_to_fill--; continue; } /* it becomes a spare */
            /* whole free devices of the repaired node (jobs may have been placed there before) */
            avail += (long)__builtin_popcount(x->whole_mask) * GPU_MILLI;
        }
        if (avail >= need) {
            r->shadow = t;
            r->extra = avail - need;
            return;
        }
    }
}

/* 1 started, 0 cannot be placed now, 2 placeable but held back (delay scheduling or backfill rule). */
static int try_schedule(Sim *s, Job *j, Reservation *r) {
    const Policy *p = s->pol;
    int max_tier = j->topo_hard ? j->topo_tier : SCHED_TIERS - 1;
    int tier = -1;
    double est_left = j->est_duration * (j->work_left / (j->duration > 0 ? j->duration : 1));
    /* behind a reservation, a job that could not backfill even at full speed is not worth placing */
    if (r->resv && s->now + est_left > r->shadow && job_gpu_milli(j) > r->extra && !(p->preemption && j->priority > r->resv->priority))
        return 2;
    if (!shape_failed(s, j, max_tier)) {
        tier = place_find(&s->pl, s->c, j, max_tier, s->tmp);
        if (tier < 0) shape_fail_add(s, j, max_tier);
    }
    /* preemption is tried for a bounded number of blocked jobs per pass (its search is the costly part) */
    if (tier < 0) return p->preemption && s->preempt_tries-- > 0 && try_preempt(s, j, max_tier) ? 1 : 0;
    if (p->delay_s > 0 && tier > s->pref[j->id] && s->now < j->eligible_at + p->delay_s) {
        if (!s->wake_set[j->id]) {
            heap_push(&s->h, j->eligible_at + p->delay_s, EV_WAKE, j->id, 0);
            s->wake_set[j->id] = 1;
        }
        return 2;
    }
    if (r->resv) {
        double run = est_left * slowdown_for(s, j, tier);
        long g = job_gpu_milli(j);
        if (s->now + run <= r->shadow) {
        } else if (g <= r->extra) r->extra -= g;
        else return 2;
    }
    start_job(s, j, s->tmp, tier);
    return 1;
}

static double share_of(const Sim *s, int q) {
    if (s->pol->fair == FAIR_DRF) {
        double g = s->q_gpu[q] / s->cap_gpu, c = s->cap_cpu > 0 ? s->q_cpu[q] / s->cap_cpu : 0,
               m = s->cap_mem > 0 ? s->q_mem[q] / s->cap_mem : 0;
        double d = g > c ? g : c;
        return (d > m ? d : m) / s->pol->queue_weight[q];
    }
    return s->q_gpu[q] / (s->cap_gpu * s->pol->queue_weight[q] / s->weight_sum); /* used / deserved */
}

/* Next queue to draw from, or -1. Skips tombstones. */
static int pick_queue(Sim *s, int *cur) {
    int best = -1;
    double bv = 0;
    for (int qi = 0; qi < s->nq; qi++) {
        PendQ *q = &s->q[qi];
        while (cur[qi] < q->len && q->ids[cur[qi]] < 0) cur[qi]++;
        if (cur[qi] >= q->len) continue;
        if (s->nq == 1) return qi;
        double v = s->pol->fair == FAIR_NONE ? -q->keys[cur[qi]] : share_of(s, qi);
        if (best < 0 || v < bv) best = qi, bv = v;
    }
    return best;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void pass(Sim *s) {
    if (s->npending == 0) { s->frag_cur = 0; return; }
    double t0 = now_ms();
    int cur[SCHED_MAX_QUEUES];
    for (int qi = 0; qi < s->nq; qi++) cur[qi] = s->q[qi].head;
    Reservation r = {NULL, INFINITY, 0};
    Job *head = NULL;
    int behind = 0;
    s->nfc = 0;
    s->preempt_tries = 2;
    for (;;) {
        int qi = pick_queue(s, cur);
        if (qi < 0) break;
        PendQ *q = &s->q[qi];
        int pos = cur[qi]++;
        Job *j = &s->jobs[q->ids[pos]];
        if (r.resv && ++behind > s->pol->backfill_depth) break;
        int rc = try_schedule(s, j, &r);
        if (rc == 1) {
            q->ids[pos] = -1;
            q->ndead++;
            s->npending--;
            continue;
        }
        if (!head) head = j;
        if (rc == 0 && !r.resv) {
            if (!s->pol->backfill) break;
            reserve(s, j, &r);
        }
    }
    for (int k = 0; k < s->ndeferred; k++) enqueue(s, &s->jobs[s->deferred[k]]);
    s->ndeferred = 0;
    for (int qi = 0; qi < s->nq; qi++) pq_tidy(&s->q[qi]);
    double dt = now_ms() - t0;
    if (s->nlat == s->latcap) {
        s->latcap = s->latcap ? s->latcap * 2 : 65536;
        s->lat = realloc(s->lat, sizeof(double) * s->latcap);
    }
    s->lat[s->nlat++] = dt;
    /* fragmentation: idle GPU the head-of-queue job cannot use */
    s->frag_cur = 0;
    if (head && s->npending > 0) {
        long u = 0;
        for (int n = 0; n < s->c->nnodes; n++) u += place_unusable_milli(&s->c->nodes[n], head);
        s->frag_cur = (double)u;
    }
}

/* FGD fragmentation of the whole cluster now: the sum of the per-node measure, recomputed only for
 * nodes whose version changed since the last call. */
static double cluster_fgd(Sim *s) {
    double f = 0;
    for (int n = 0; n < s->c->nnodes; n++) {
        const Node *x = &s->c->nodes[n];
        if (s->fgd_ver[n] != x->version + 1) {
            s->fgd_node[n] = node_schedulable(x) ? fgd_node_frag(x, &s->wl) : 0;
            s->fgd_ver[n] = x->version + 1;
        }
        f += s->fgd_node[n];
    }
    return f;
}

/* ---- failures ---- */
static int pick_spare(const Sim *s, int failed) {
    const Node *f = &s->c->nodes[failed];
    int best = -1;
    for (int n = 0; n < s->c->nnodes; n++) {
        const Node *x = &s->c->nodes[n];
        if (x->state != NODE_SPARE || x->type != f->type || x->ngpu != f->ngpu || x->cpu_milli < f->cpu_milli ||
            x->mem_mib < f->mem_mib)
            continue;
        if (best < 0 || (x->leaf == f->leaf && s->c->nodes[best].leaf != f->leaf)) best = n;
    }
    return best;
}

static void node_fail(Sim *s, int n) {
    Node *nd = &s->c->nodes[n];
    if (nd->state == NODE_FAILED) return;
    if (nd->state == NODE_SPARE) s->spares_now--;
    cluster_set_state(s->c, n, NODE_FAILED);
    s->failures++;
    heap_push(&s->h, s->now + s->cfg->repair_s, EV_REPAIR, n, 0);
    s->repair_at[n] = s->now + s->cfg->repair_s;
    int na = 0;
    for (int i = 0; i < s->nrun; i++) {
        const Job *j = &s->jobs[s->run[i]];
        for (int t = 0; t < j->ntasks; t++)
            if (j->slots[t].node == n) { s->cand[na++] = j->id; break; }
    }
    if (!na) return;
    int spare = s->spares_now > 0 ? pick_spare(s, n) : -1;
    if (spare >= 0) {
        cluster_set_state(s->c, spare, NODE_UP);
        s->spares_now--;
        s->spare_swaps++;
    }
    for (int a = 0; a < na; a++) {
        Job *j = &s->jobs[s->cand[a]];
        interrupt(s, j);
        if (spare >= 0) { /* restart in place from the checkpoint, the failed node's tasks on the spare */
            stop_job(s, j, true);
            for (int t = 0; t < j->ntasks; t++)
                if (j->slots[t].node == n) j->slots[t].node = spare;
            j->restarts++;
            TaskSlot *moved = s->tmp;
            memcpy(moved, j->slots, sizeof(TaskSlot) * j->ntasks);
            start_job(s, j, moved, place_tier(s->c, moved, j->ntasks));
        } else {
            stop_job(s, j, true);
            j->restarts++;
            s->failure_requeues++;
            enqueue(s, j);
        }
    }
}

static void node_repair(Sim *s, int n) {
    if (s->c->nodes[n].state != NODE_FAILED) return;
    if (s->spares_now < s->pol->hot_spares) {
        cluster_set_state(s->c, n, NODE_SPARE);
        s->spares_now++;
    } else
        cluster_set_state(s->c, n, NODE_UP);
}

/* ---- main loop ---- */
static void advance(Sim *s, double t) {
    double dt = t - s->last_t;
    if (dt <= 0) return;
    s->alloc_int += (double)s->c->alloc_milli * dt;
    if (s->npending > 0) s->blocked_time += dt, s->frag_blocked_int += s->frag_cur * dt;
    double w = fmin(t, s->win_end) - s->last_t; /* the part of [last_t, t] inside the window */
    if (w > 0) {
        s->win_alloc_int += (double)s->c->alloc_milli * w;
        s->win_fgd_int += s->fgd_cur * w;
        if (s->npending > 0) s->win_wait_time += w;
    }
    s->last_t = t;
}

static void sim_free(Sim *s) {
    placer_free(&s->pl);
    placer_free(&s->pl_plain);
    free(s->h.a);
    for (int q = 0; q < SCHED_MAX_QUEUES; q++) free(s->q[q].ids), free(s->q[q].keys);
    free(s->run), free(s->run_end), free(s->tmp), free(s->cand), free(s->cand_loss), free(s->deferred), free(s->fgd_node), free(s->fgd_ver), free(s->wake_set);
    free(s->pref), free(s->lat), free(s->repair_at), free(s->failed_list);
}

int sim_run(Cluster *c, JobSet *js, const Policy *pol, const SimConfig *cfg, Metrics *m) {
    Sim S, *s = &S;
    memset(s, 0, sizeof *s);
    memset(m, 0, sizeof *m);
    double wall0 = now_ms();
    s->c = c, s->jobs = js->jobs, s->njobs = js->n, s->pol = pol, s->cfg = cfg;
    s->nq = pol->nqueues > 0 ? pol->nqueues : 1;
    s->rng = cfg->seed * 0x2545F4914F6CDD1DULL + 7;
    int maxt = 1;
    for (int i = 0; i < js->n; i++) if (js->jobs[i].ntasks > maxt) maxt = js->jobs[i].ntasks;
    s->run = malloc(sizeof(int) * (js->n + 1));
    s->run_end = malloc(sizeof(double) * (js->n + 1));
    s->tmp = malloc(sizeof(TaskSlot) * maxt);
    s->cand = malloc(sizeof(int) * (js->n + 1));
    s->cand_loss = malloc(sizeof(double) * (js->n + 1));
    s->deferred = malloc(sizeof(int) * (js->n + 1));
    s->fgd_node = calloc(c->nnodes, sizeof(double));
    s->fgd_ver = calloc(c->nnodes, sizeof(uint32_t));
    s->wake_set = calloc(js->n + 1, 1);
    s->pref = malloc(js->n + 1);
    s->repair_at = calloc(c->nnodes, sizeof(double));
    s->failed_list = malloc(sizeof(int) * c->nnodes);
    if (!s->repair_at || !s->failed_list || !s->run || !s->run_end || !s->tmp || !s->cand || !s->cand_loss || !s->deferred || !s->fgd_node || !s->fgd_ver || !s->wake_set || !s->pref) {
        sim_free(s);
        return myr_error("out of memory for %d jobs", js->n);
    }
    workload_from_jobs(&s->wl, js->jobs, js->n);
    s->pol_plain = *pol;
    s->pol_plain.fgd = false;
    if (placer_init(&s->pl, c, pol, &s->wl) || placer_init(&s->pl_plain, c, &s->pol_plain, NULL)) { sim_free(s); return -1; }

    /* largest GPU count of a node, a leaf and a spine: a job's preferred tier is the lowest that could hold it */
    long *leaf = calloc(c->nleaves, sizeof(long)), *spine = calloc(c->nspines, sizeof(long));
    for (int n = 0; n < c->nnodes; n++) {
        const Node *x = &c->nodes[n];
        if (x->ngpu > s->node_max) s->node_max = x->ngpu;
        leaf[x->leaf] += x->ngpu, spine[x->spine] += x->ngpu;
        s->cap_cpu += x->cpu_milli, s->cap_mem += x->mem_mib;
    }
    for (int l = 0; l < c->nleaves; l++) if (leaf[l] > s->leaf_max) s->leaf_max = leaf[l];
    for (int k = 0; k < c->nspines; k++) if (spine[k] > s->spine_max) s->spine_max = spine[k];
    free(leaf), free(spine);
    s->cap_gpu = (double)c->total_gpus;
    for (int q = 0; q < s->nq; q++) s->weight_sum += pol->queue_weight[q] > 0 ? pol->queue_weight[q] : 1;

    /* hot spares: the last GPU nodes are held back */
    for (int n = c->nnodes - 1; n >= 0 && s->spares_now < pol->hot_spares; n--)
        if (c->nodes[n].state == NODE_UP && c->nodes[n].ngpu > 0) {
            cluster_set_state(c, n, NODE_SPARE);
            s->spares_now++;
        }

    s->t0 = INFINITY;
    for (int i = 0; i < js->n; i++) {
        Job *j = &js->jobs[i];
        if (j->state != JOB_FUTURE) continue;
        if (!j->slots) j->slots = malloc(sizeof(TaskSlot) * j->ntasks);
        if (!j->slots) { sim_free(s); return myr_error("out of memory"); }
        if (j->est_duration <= 0) j->est_duration = j->duration;
        j->work_left = j->duration;
        j->first_start = -1;
        j->finish = -1;
        j->epoch = 0;
        j->slowdown = 1;
        double g = gpus_of(j);
        int pref = j->ntasks == 1 ? 0 : g <= s->node_max ? 0 : g <= s->leaf_max ? 1 : g <= s->spine_max ? 2 : 3;
        if (!j->topo_hard && j->topo_tier > pref) pref = j->topo_tier == SCHED_TIERS - 1 && pol->topology ? pref : j->topo_tier;
        if (!pol->topology && j->topo_tier == SCHED_TIERS - 1) pref = SCHED_TIERS - 1;
        s->pref[i] = (signed char)pref;
        heap_push(&s->h, j->submit, EV_ARRIVE, i, 0);
        if (j->submit < s->t0) s->t0 = j->submit;
        if (s->nactive == 0 || j->submit > s->win_end) s->win_end = j->submit;
        s->nactive++;
    }
    if (!s->nactive) s->t0 = 0;
    if (!(s->win_end > s->t0)) s->win_end = INFINITY; /* all jobs arrive at once: the window is the whole run */
    s->last_t = s->t0;
    if (cfg->mtbf_node_s > 0 && s->nactive)
        heap_push(&s->h, s->t0 - log(splitmix64_uniform(&s->rng)) * cfg->mtbf_node_s / c->nnodes, EV_FAIL, 0, 0);

    for (int i = 0; i < cfg->nfail_script; i++)
        if (cfg->fail_nodes[i] >= 0 && cfg->fail_nodes[i] < c->nnodes)
            heap_push(&s->h, cfg->fail_times[i], EV_FAIL, cfg->fail_nodes[i], 1);
    double last_finish = s->t0;
    while (s->h.n > 0 && s->ndone < s->nactive) {
        double t = s->h.a[0].t;
        advance(s, t);
        s->now = t;
        while (s->h.n > 0 && s->h.a[0].t == t) {
            Event e = heap_pop(&s->h);
            Job *j = e.kind == EV_ARRIVE || e.kind == EV_FINISH ? &s->jobs[e.id] : NULL;
            switch (e.kind) {
            case EV_ARRIVE: enqueue(s, j); break;
            case EV_FINISH:
                if (j->state != JOB_RUNNING || j->epoch != e.epoch) break;
                stop_job(s, j, true);
                j->state = JOB_DONE;
                j->finish = t;
                j->work_left = 0;
                s->ndone++;
                last_finish = t;
                break;
            case EV_FAIL:
                if (e.epoch == 1) { /* scripted */
                    node_fail(s, e.id);
                    break;
                }
                node_fail(s, (int)(splitmix64_next(&s->rng) % (uint64_t)c->nnodes));
                if (s->ndone < s->nactive)
                    heap_push(&s->h, t - log(splitmix64_uniform(&s->rng)) * cfg->mtbf_node_s / c->nnodes, EV_FAIL, 0, 0);
                break;
            case EV_REPAIR: node_repair(s, e.id); break;
            case EV_WAKE: break;
            }
        }
        pass(s);
        if (t < s->win_end) s->fgd_cur = cluster_fgd(s);
    }

    /* metrics */
    metrics_from_jobs(m, js->jobs, js->n, pol);
    m->makespan_s = last_finish - s->t0;
    double span = m->makespan_s > 0 ? m->makespan_s : 1;
    m->gpu_alloc_makespan = s->alloc_int / ((double)c->total_gpus * GPU_MILLI * span);
    m->frag_head = s->blocked_time > 0 ? s->frag_blocked_int / ((double)c->total_gpus * GPU_MILLI * s->blocked_time) : 0;
    double win = fmin(s->win_end, last_finish) - s->t0;
    m->window_s = win;
    if (win > 0) {
        m->gpu_alloc_rate = s->win_alloc_int / ((double)c->total_gpus * GPU_MILLI * win);
        m->fragmentation = s->win_fgd_int / ((double)c->total_gpus * GPU_MILLI * win);
        m->waiting_time_frac = s->win_wait_time / win;
    }
    m->preemptions = s->preemptions;
    m->failures = s->failures;
    m->spare_swaps = s->spare_swaps;
    m->failure_requeues = s->failure_requeues;
    m->gpu_hours_lost = s->lost_gpu_s / 3600.0;
    m->decisions = s->nlat;
    if (s->nlat) {
        m->decision_ms_p50 = percentile(s->lat, (int)s->nlat, 50);
        m->decision_ms_p99 = percentile(s->lat, (int)s->nlat, 99);
        m->decision_ms_max = s->lat[s->nlat - 1];
    }
    if (s->nq > 1) {
        double sum = 0, sq = 0;
        for (int q = 0; q < s->nq; q++) {
            double x = s->q_served[q] / pol->queue_weight[q];
            sum += x, sq += x * x;
        }
        m->jain_queues = sq > 0 ? sum * sum / (s->nq * sq) : 1;
    } else
        m->jain_queues = 1;
    m->sim_wall_s = (now_ms() - wall0) / 1e3;
    sim_free(s);
    return 0;
}
