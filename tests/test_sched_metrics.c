/* test_sched_metrics.c: hand-computed cases for the simulator's measures: GPU allocation and FGD
 * fragmentation time-averaged over the arrival window (and allocation over the makespan), the
 * offered load of a trace with each run counted up to the arrival window, and FGD placement of a
 * CPU-only task (it must not strand a node's free GPUs). */
#include <math.h>
#include <string.h>

#include "sched/placement.h"
#include "sched/sim.h"
#include "sched/trace.h"
#include "test.h"
#include "util/error.h"

static Job *add(JobSet *js, double t, int g, int milli, double dur) {
    Job *j = jobset_add(js);
    j->submit = t, j->ntasks = 1, j->gpus_per_task = g, j->gpu_milli = milli, j->duration = j->est_duration = dur;
    j->topo_tier = 3;
    return j;
}

/* Every job validated, then the whole trace under FIFO with the default configuration. */
static int run_fifo(Cluster *c, JobSet *js, Metrics *m) {
    for (int i = 0; i < js->n; i++) CHECK(job_validate(&js->jobs[i], c, 0) == 0, "valid job %d", i);
    Policy p;
    policy_builtin(&p, "fifo");
    SimConfig cfg;
    sim_config_default(&cfg);
    return sim_run(c, js, &p, &cfg, m);
}

/* One node with 2 GPUs. A (0.5 GPU, 0-100 s) arrives at 0, B (1 GPU, 100 s) at 50, so the window is
 * [0, 50]. The workload is half 0.5-GPU, half 1-GPU tasks. First fit puts A on device 0, leaving 500
 * milli there and device 1 whole: a 0.5 task can use everything (0 unusable), a 1-GPU task cannot use
 * the 500 (500 unusable), so the node's FGD fragmentation is 0.5 x 500 = 250 milli of 2,000 = 12.5 %
 * throughout the window, and allocation 500 / 2,000 = 25 %. B runs 50-150 on device 1; over the
 * makespan of 150 s allocation is (500 x 50 + 1,500 x 50 + 1,000 x 50) / (2,000 x 150) = 50 %. */
static void test_window_alloc_and_fgd_fragmentation(void) {
    Cluster c;
    cluster_generate(&c, 1, 2, "T4", 64000, 262144, 32, 8);
    JobSet js = {0};
    add(&js, 0, 1, 500, 100);
    add(&js, 50, 1, 1000, 100);
    Metrics m;
    CHECK(run_fifo(&c, &js, &m) == 0, "sim");
    CHECK(js.jobs[0].slots[0].dev == 0 && js.jobs[1].slots[0].mask == 0x2, "A on dev0, B on dev1");
    CHECK_CLOSE(m.window_s, 50, 0, 1e-9, "window");
    CHECK_CLOSE(m.gpu_alloc_rate, 0.25, 0, 1e-12, "allocation over the window");
    CHECK_CLOSE(m.fragmentation, 0.125, 0, 1e-12, "FGD fragmentation over the window");
    CHECK_CLOSE(m.makespan_s, 150, 0, 1e-9, "makespan");
    CHECK_CLOSE(m.gpu_alloc_makespan, 0.5, 0, 1e-12, "allocation over the makespan");
    CHECK(m.waiting_time_frac == 0 && m.frag_head == 0, "nothing waited");
    jobset_free(&js);
    cluster_free(&c);
}

/* With every job arriving at once the window is the whole run: one 1-GPU job of 10 s on 2 GPUs
 * with a 1-GPU workload: allocation 50 %, fragmentation 0 (the free device is whole). */
static void test_window_is_the_run_when_all_arrive_at_once(void) {
    Cluster c;
    cluster_generate(&c, 1, 2, "T4", 64000, 262144, 32, 8);
    JobSet js = {0};
    add(&js, 5, 1, 1000, 10);
    Metrics m;
    CHECK(run_fifo(&c, &js, &m) == 0, "sim");
    CHECK_CLOSE(m.window_s, 10, 0, 1e-9, "window = makespan");
    CHECK_CLOSE(m.gpu_alloc_rate, 0.5, 0, 1e-12, "allocation");
    CHECK_CLOSE(m.fragmentation, 0, 0, 1e-12, "fragmentation");
    jobset_free(&js);
    cluster_free(&c);
}

/* 1 GPU; jobs at 0 (50 s) and 100 (1,000 s). The window is 100 s and the long run counts 100 s:
 * load (50 + 100) / 100 = 1.5. For 1.25, stretch by k: (50 + min(1000, 100k)) / (100k) = 1.25
 * gives k = 2, so the second job arrives at 200. */
static void test_offered_load_counts_runs_up_to_the_window(void) {
    Cluster c;
    cluster_generate(&c, 1, 1, "T4", 64000, 262144, 32, 8);
    JobSet js = {0};
    add(&js, 0, 1, 1000, 50);
    add(&js, 100, 1, 1000, 1000);
    CHECK_CLOSE(trace_offered_load(&js, &c), 1.5, 1e-12, 0, "load before");
    CHECK(trace_set_load(&js, &c, 1.25) == 0, "reachable");
    CHECK_CLOSE(js.jobs[1].submit, 200, 1e-9, 0, "second arrival");
    CHECK(js.jobs[0].submit == 0, "first arrival stays");
    CHECK_CLOSE(trace_offered_load(&js, &c), 1.25, 1e-9, 0, "load after");
    /* two 1-GPU jobs on 1 GPU offer at most 2 (both at once): 2 and above are refused, unchanged */
    CHECK(trace_set_load(&js, &c, 2.0) == -1 && strstr(myr_last_error(), "out of reach"), "%s", myr_last_error());
    CHECK_CLOSE(js.jobs[1].submit, 200, 1e-9, 0, "arrivals untouched on refusal");
    /* a light-tailed case is the textbook rate x mean GPU-seconds / GPUs: 4 jobs of 10 s over 40 s */
    JobSet l = {0};
    for (int i = 0; i < 4; i++) add(&l, 10.0 * i, 1, 1000, 10);
    CHECK_CLOSE(trace_offered_load(&l, &c), 40.0 / 30.0, 1e-12, 0, "4 x 10 GPU-s over a 30 s window");
    jobset_free(&l);
    jobset_free(&js);
    cluster_free(&c);
}

/* Two nodes of 2 GPUs and 8 cores. Node 0 has both GPUs free, node 1 none. The workload is 1-GPU
 * tasks with 4 cores. A CPU-only task of 6 cores on node 0 leaves 2 cores, so node 0's 2,000 free
 * milli become unusable (+2,000); on node 1 there is no free GPU to strand (+0). First fit takes
 * node 0; FGD must take node 1. */
static void test_fgd_places_cpu_only_tasks(void) {
    Cluster c;
    cluster_generate(&c, 2, 2, "T4", 8000, 262144, 32, 8);
    cluster_take(&c, 1, 0x3, -1, 1000, 0, 0);
    Job j;
    memset(&j, 0, sizeof j);
    j.ntasks = 1, j.gpus_per_task = 0, j.gpu_milli = 1000, j.cpu_milli = 6000, j.topo_tier = 3;
    Workload w = {.n = 1, .g = {1}, .milli = {1000}, .cpu = {4000}, .p = {1.0}};
    CHECK_CLOSE(fgd_node_frag(&c.nodes[0], &w), 0, 0, 1e-12, "node 0 before");
    Policy p;
    policy_builtin(&p, "fifo");
    TaskSlot s[1];
    Placer pl;
    placer_init(&pl, &c, &p, &w);
    CHECK(place_find(&pl, &c, &j, 3, s) == 0 && s[0].node == 0, "first fit -> node 0 (%d)", s[0].node);
    placer_free(&pl);
    p.fgd = true;
    placer_init(&pl, &c, &p, &w);
    CHECK(place_find(&pl, &c, &j, 3, s) == 0 && s[0].node == 1, "FGD -> node 1 (%d)", s[0].node);
    placer_free(&pl);
    cluster_free(&c);
}

int main(void) {
    RUN(test_window_alloc_and_fgd_fragmentation);
    RUN(test_window_is_the_run_when_all_arrive_at_once);
    RUN(test_offered_load_counts_runs_up_to_the_window);
    RUN(test_fgd_places_cpu_only_tasks);
    return TEST_SUMMARY();
}
