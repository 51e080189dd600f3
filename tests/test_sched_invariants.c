/* test_sched_invariants.c: randomized invariant tests. Many generated traces (gangs, GPU fractions,
 * CPU/memory, priorities, queues, hard and soft topology constraints, node failures, hot spares) run
 * under many policies while an independent ledger, fed only by the simulator's start/stop/preempt
 * notifications, checks: no GPU, GPU fraction, CPU or memory over-allocated; every gang started
 * whole (one valid slot per task, disjoint devices) on up nodes; hard topology never violated
 * (tier recomputed here from node ids); no victim of equal or higher priority; every job finishes
 * (nothing waits forever) and the ledger is empty at the end. */
#include <stdlib.h>
#include <string.h>

#include "sched/sim.h"
#include "test.h"

typedef struct {
    const Cluster *c;
    int *milli;  /* used milli per node*16 + device */
    int *cpu, *mem;
    int violations;
    char first[256];
} Ledger;

static void violate(Ledger *l, const char *what, const Job *j) {
    if (!l->violations++) snprintf(l->first, sizeof l->first, "%s (job %d)", what, j->id);
}

static int tier_of(const Cluster *c, const Job *j) {
    int same_node = 1, same_leaf = 1, same_spine = 1;
    const Node *a = &c->nodes[j->slots[0].node];
    for (int t = 1; t < j->ntasks; t++) {
        const Node *b = &c->nodes[j->slots[t].node];
        same_node &= j->slots[t].node == j->slots[0].node;
        same_leaf &= b->leaf == a->leaf;
        same_spine &= b->spine == a->spine;
    }
    return same_node ? 0 : same_leaf ? 1 : same_spine ? 2 : 3;
}

static void hook(void *ctx, int kind, const Job *j, const Job *by, double t) {
    Ledger *l = ctx;
    const Cluster *c = l->c;
    if (kind == SIM_RESERVE) return; /* (tests/test_sched_backfill.c checks reservations) */
    if (kind == SIM_PREEMPT) {
        if (!(j->priority < by->priority)) violate(l, "preempted a job of equal or higher priority", j);
        return;
    }
    int sign = kind == SIM_START ? 1 : -1;
    for (int k = 0; k < j->ntasks; k++) {
        const TaskSlot *s = &j->slots[k];
        if (s->node < 0 || s->node >= c->nnodes) { violate(l, "slot on no node", j); return; }
        const Node *n = &c->nodes[s->node];
        if (kind == SIM_START && n->state != NODE_UP) violate(l, "task started on a node that is not up", j);
        if (j->gpus_per_task > 0) {
            if (j->gpu_milli < 1000) {
                if (s->mask || s->dev < 0 || s->dev >= n->ngpu) { violate(l, "bad fractional slot", j); continue; }
                l->milli[s->node * 16 + s->dev] += sign * j->gpu_milli;
            } else {
                if (__builtin_popcount(s->mask) != j->gpus_per_task || (s->mask >> n->ngpu)) violate(l, "task has wrong device count", j);
                for (int d = 0; d < n->ngpu; d++)
                    if ((s->mask >> d) & 1) l->milli[s->node * 16 + d] += sign * 1000;
            }
            if (j->type_mask && !((j->type_mask >> n->type) & 1)) violate(l, "wrong GPU type", j);
        }
        l->cpu[s->node] += sign * j->cpu_milli;
        l->mem[s->node] += sign * j->mem_mib;
        if (l->cpu[s->node] > n->cpu_milli || l->mem[s->node] > n->mem_mib) violate(l, "CPU or memory over-allocated", j);
        for (int d = 0; d < n->ngpu; d++)
            if (l->milli[s->node * 16 + d] > 1000) violate(l, "GPU over-allocated", j);
    }
    if (kind == SIM_START && j->topo_hard && tier_of(c, j) > j->topo_tier) violate(l, "hard topology violated", j);
}

static uint64_t rs;
static double ur(void) {
    rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
    return (rs >> 11) * (1.0 / 9007199254740992.0);
}
static int ri(int n) { return (int)(ur() * n); }

static void gen_trace(JobSet *js, int njobs) {
    double t = 0;
    for (int i = 0; i < njobs; i++) {
        Job *j = jobset_add(js);
        t += ur() * 40;
        j->submit = t;
        int kind = ri(10);
        if (kind < 3) j->ntasks = 1, j->gpus_per_task = 1, j->gpu_milli = 100 + ri(9) * 100; /* sharing */
        else if (kind < 7) j->ntasks = 1, j->gpus_per_task = 1 << ri(3);
        else if (kind < 9) j->ntasks = 2 + ri(6), j->gpus_per_task = 4;
        else j->ntasks = 1, j->gpus_per_task = 0; /* CPU only */
        j->cpu_milli = 1000 * (1 + ri(8));
        j->mem_mib = 1024 * (1 + ri(32));
        j->duration = j->est_duration = 10 + ur() * ur() * 2000;
        j->priority = ri(3);
        j->preemptible = ri(4) != 0;
        j->queue = ri(3);
        if (j->ntasks > 1 && ri(3) == 0) j->topo_tier = 1 + ri(2), j->topo_hard = true;
        if (ri(8) == 0 && j->gpus_per_task > 0) j->type_mask = 1u << ri(2);
    }
}

static void test_random_traces_keep_invariants(void) {
    static const char *builtins[] = {"fifo", "backfill", "gang-binpack-topo", "best"};
    int runs = 0, total_violations = 0, unfinished = 0, leaked = 0, preemptions = 0, failures = 0, hard_jobs = 0;
    for (int trace = 0; trace < 24; trace++) {
        for (int pi = 0; pi < 6; pi++) {
            rs = 1000003ULL * (trace + 1) + pi;
            /* 12 nodes of 4 GPUs, two GPU types, leaves of 3 nodes, spines of 2 leaves */
            char json[] = "/tmp/myriad_inv_XXXXXX";
            Cluster c;
            if (cluster_generate(&c, 12, 4, "A", 32000, 131072, 3, 2)) { CHECK(0, "cluster"); return; }
            snprintf(c.type_names[1], sizeof c.type_names[1], "B");
            c.ntypes = 2;
            for (int n = 6; n < 12; n++) { /* second half is type B */
                c.type_free[0] -= 4, c.type_free[1] += 4, c.type_gpus[0] -= 4, c.type_gpus[1] += 4;
                c.nodes[n].type = 1;
            }
            (void)json;
            Policy p;
            policy_builtin(&p, builtins[pi % 4]);
            if (pi >= 4) { /* mixes the built-ins do not cover */
                p.order = pi == 4 ? ORDER_PRIORITY : ORDER_SJF;
                p.aging_s = 600, p.sjf_s = 300;
                p.backfill = pi == 5;
                p.place = pi == 4 ? PLACE_SPREAD : PLACE_BINPACK;
                p.topology = true;
                p.preemption = true;
                p.delay_s = 120;
                p.fair = pi == 4 ? FAIR_DRF : FAIR_PROPORTIONAL;
                p.nqueues = 3;
                for (int q = 0; q < 3; q++) p.queue_weight[q] = 1 + q;
                p.hot_spares = 1;
            }
            JobSet js = {0};
            gen_trace(&js, 150);
            for (int i = 0; i < js.n; i++) {
                job_validate(&js.jobs[i], &c, p.hot_spares);
                hard_jobs += js.jobs[i].topo_hard && js.jobs[i].state != JOB_REJECTED;
            }
            Ledger l = {.c = &c};
            l.milli = calloc(c.nnodes * 16, sizeof(int));
            l.cpu = calloc(c.nnodes, sizeof(int));
            l.mem = calloc(c.nnodes, sizeof(int));
            SimConfig cfg;
            sim_config_default(&cfg);
            cfg.mtbf_node_s = trace % 2 ? 3 * 86400.0 : 0; /* failures in half the runs */
            cfg.repair_s = 1800;
            cfg.checkpoint_s = trace % 3 ? 300 : 0;
            cfg.seed = trace + 1;
            cfg.hook = hook;
            cfg.hook_ctx = &l;
            Metrics m;
            CHECK(sim_run(&c, &js, &p, &cfg, &m) == 0, "sim");
            runs++;
            if (l.violations) {
                fprintf(stderr, "  trace %d policy %d: %d violations, first: %s\n", trace, pi, l.violations, l.first);
                total_violations += l.violations;
            }
            unfinished += m.jobs_unfinished;
            for (int i = 0; i < js.n; i++)
                if (js.jobs[i].state != JOB_REJECTED && js.jobs[i].state != JOB_DONE) unfinished++;
            for (int k = 0; k < c.nnodes * 16; k++) leaked += l.milli[k] != 0;
            for (int n = 0; n < c.nnodes; n++) leaked += l.cpu[n] != 0 || l.mem[n] != 0;
            preemptions += m.preemptions;
            failures += m.failures;
            free(l.milli), free(l.cpu), free(l.mem);
            jobset_free(&js);
            cluster_free(&c);
        }
    }
    CHECK(total_violations == 0, "%d invariant violations over %d runs", total_violations, runs);
    CHECK(unfinished == 0, "%d jobs never finished", unfinished);
    CHECK(leaked == 0, "%d ledger entries not returned at the end", leaked);
    /* the generator must really exercise what is checked */
    CHECK(preemptions > 0 && failures > 0 && hard_jobs > 0, "coverage: %d preemptions, %d failures, %d hard jobs",
          preemptions, failures, hard_jobs);
    printf("# %d runs, %d preemptions, %d node failures, %d hard-constrained jobs\n", runs, preemptions, failures, hard_jobs);
}

/* A low-priority job under a steady stream of higher-priority ones still starts: aging bounds its wait. */
static void test_aging_bounds_wait(void) {
    Cluster c;
    cluster_generate(&c, 1, 4, "GPU", 128000, 1048576, 32, 8);
    JobSet js = {0};
    Job *low = jobset_add(&js);
    low->submit = 5, low->ntasks = 1, low->gpus_per_task = 4, low->duration = low->est_duration = 10, low->priority = 0;
    for (int i = 0; i < 400; i++) { /* overlapping 2-GPU high-priority jobs keep the node busy */
        Job *h = jobset_add(&js);
        h->submit = i * 50, h->ntasks = 1, h->gpus_per_task = 2, h->duration = h->est_duration = 100, h->priority = 1;
    }
    for (int i = 0; i < js.n; i++) job_validate(&js.jobs[i], &c, 0);
    for (int aging = 0; aging < 2; aging++) {
        Policy p;
        policy_builtin(&p, "fifo");
        p.order = ORDER_PRIORITY;
        p.aging_s = aging ? 1000 : 0;
        Metrics m;
        SimConfig cfg;
        sim_config_default(&cfg);
        sim_run(&c, &js, &p, &cfg, &m);
        double wait = js.jobs[0].first_start - js.jobs[0].submit;
        if (aging) CHECK(wait <= 1000 + 100, "with aging the low job waits at most one aging step + one run: %g", wait);
        else CHECK(wait > 10000, "strict priority starves it while the stream lasts: %g", wait);
        for (int i = 0; i < js.n; i++) js.jobs[i].state = JOB_FUTURE;
    }
    jobset_free(&js);
    cluster_free(&c);
}

int main(void) {
    RUN(test_random_traces_keep_invariants);
    RUN(test_aging_bounds_wait);
    return TEST_SUMMARY();
}
