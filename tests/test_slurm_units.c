/* test_slurm_units.c: the Slurm pieces that need no daemons, against hand-computed cases: host list
 * expansion and compression (Slurm's syntax), node states that mean "lost", the sbatch script of
 * `myriad run --slurm-script` (content, quoting, `bash -n`, bad layouts), and the placement of
 * `sched place --from-slurm` on a parsed sinfo --json / scontrol show topology. The same paths
 * run against real daemons in tests/test_slurm.sh. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch/slurm.h"
#include "launch/slurm_script.h"
#include "sched/slurm_place.h"
#include "test.h"
#include "util/error.h"
#include "util/hostlist.h"

static char *joined(const HostList *h) {
    static char buf[4096];
    buf[0] = 0;
    for (int i = 0; i < h->n; i++) strcat(buf, i ? " " : ""), strcat(buf, h->names[i]);
    return buf;
}

static void test_hostlist_expand(void) {
    HostList h = {0};
    CHECK(hostlist_expand(&h, "n[1-3,07-09],gpu-a[01-02]-x,login", 0) == 0, "%s", myr_last_error());
    CHECK(!strcmp(joined(&h), "n1 n2 n3 n07 n08 n09 gpu-a01-x gpu-a02-x login"), "%s", joined(&h));
    hostlist_free(&h);
    CHECK(hostlist_expand(&h, "r[1-2]n[9-10]", 0) == 0, "%s", myr_last_error());
    CHECK(!strcmp(joined(&h), "r1n9 r1n10 r2n9 r2n10"), "%s", joined(&h));
    CHECK(hostlist_find(&h, "r2n9") == 2 && hostlist_find(&h, "r2n1") == -1, "find");
    hostlist_free(&h);
    static const char *bad[] = {"n[1-", "n[3-1]", "n]1", "n[a]", "n[1-2", "n[[1]]", "n[1-99999999]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(hostlist_expand(&h, bad[i], 1000) != 0, "'%s' accepted", bad[i]);
        CHECK(strstr(myr_last_error(), "host list") != NULL, "'%s': %s", bad[i], myr_last_error());
        hostlist_free(&h);
    }
}

static void test_hostlist_compress_round_trip(void) {
    char *names[] = {"n5", "n1", "login", "n2", "n08", "n3", "n07", "n2"};
    char out[256];
    CHECK(hostlist_compress(names, 8, out, sizeof out) == 0, "fits");
    CHECK(!strcmp(out, "n[1-3,5],login,n[07-08]"), "%s", out);
    HostList h = {0};
    CHECK(hostlist_expand(&h, out, 0) == 0, "%s", myr_last_error());
    CHECK(!strcmp(joined(&h), "n1 n2 n3 n5 login n07 n08"), "%s", joined(&h));
    hostlist_free(&h);
    CHECK(hostlist_compress(names, 8, out, 8) != 0, "too small a buffer is refused");
    char *one[] = {"n4"};
    CHECK(hostlist_compress(one, 1, out, sizeof out) == 0 && !strcmp(out, "n4"), "%s", out);
}

static void test_node_states(void) {
    static const char *ok[] = {"idle", "mixed", "allocated", "completing", "planned"};
    static const char *bad[] = {"down*", "down", "drained", "draining", "idle*", "mixed*", "fail", "failing", "unknown"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) CHECK(!slurm_state_unusable(ok[i]), "%s", ok[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK(slurm_state_unusable(bad[i]), "%s", bad[i]);
    /* declared down (removed from jobs) is more than not responding */
    CHECK(slurm_state_down("down*") && slurm_state_down("drained") && !slurm_state_down("mixed*") && !slurm_state_down("idle*"),
          "down vs not responding");
}

static char *script_text(SlurmScript *sc, int *rc) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    *rc = slurm_script_write(f, sc);
    fclose(f);
    return buf;
}

static void test_sbatch_script(void) {
    char *opts[] = {"-n", "4", "--spares", "1", "--events", "ev log.jsonl"};
    char *cmd[] = {"train", "--tp", "2", "--dp", "2", "--save", "ck", "--data", "it's.bin"};
    SlurmScript sc = {.nranks = 4, .nodes = 4, .gpus_per_task = 1, .spares = 1, .switches = "2", .signal_lead_s = 90,
                      .myriad = "/opt/my riad/bin/myriad", .workdir = "/work/run", .run_opts = opts, .nrun_opts = 6,
                      .cmd = cmd, .ncmd = 9};
    int rc;
    char *s = script_text(&sc, &rc);
    CHECK(rc == 0, "%s", myr_last_error());
    static const char *want[] = {"#!/bin/bash\n", "#SBATCH --nodes=5\n", "#SBATCH --ntasks-per-node=1\n",
                                 "#SBATCH --gpus-per-task=1\n", "#SBATCH --switches=2\n", "#SBATCH --requeue\n",
                                 "#SBATCH --no-kill\n", "#SBATCH --signal=B:USR1@90\n",
                                 "'/opt/my riad/bin/myriad' run -n 4 --spares 1 --events 'ev log.jsonl' -- train --tp 2 "
                                 "--dp 2 --save ck --data 'it'\\''s.bin' --resume auto &\n",
                                 "if [ $rc -eq 75 ]; then\n", "scontrol requeue \"$SLURM_JOB_ID\""};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK(strstr(s, want[i]) != NULL, "missing: %s", want[i]);
    /* the shell accepts it */
    char path[] = "/tmp/myriad-sbatch-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, s, strlen(s)) == (ssize_t)strlen(s), "write %s", path);
    close(fd);
    char shell[256];
    snprintf(shell, sizeof shell, "bash -n %s", path);
    CHECK(system(shell) == 0, "bash -n rejects the script");
    unlink(path);
    free(s);
    /* tasks per node from the node count; a wrong product, or no --save, is refused with the reason */
    sc.nodes = 2, sc.spares = 0;
    s = script_text(&sc, &rc);
    CHECK(rc == 0 && strstr(s, "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n"), "2 nodes x 2");
    free(s);
    sc.nodes = 3;
    free(script_text(&sc, &rc));
    CHECK(rc != 0 && strstr(myr_last_error(), "do not spread evenly over 3 nodes"), "%s", myr_last_error());
    sc.nodes = 4, sc.tasks_per_node = 2;
    free(script_text(&sc, &rc));
    CHECK(rc != 0 && strstr(myr_last_error(), "--nodes 4 x --tasks-per-node 2 = 8 tasks, but -n 4"), "%s", myr_last_error());
    sc.tasks_per_node = 0;
    char *nosave[] = {"train", "--tp", "2"};
    sc.cmd = nosave, sc.ncmd = 3;
    free(script_text(&sc, &rc));
    CHECK(rc != 0 && strstr(myr_last_error(), "needs --save DIR"), "%s", myr_last_error());
}

/* Six nodes in three leaves of two ({n1,n2} {n3,n4} {n5,n6}); spine0 over the first two leaves,
 * spine1 over the third, root over both; n2 and n3 allocated; n6 in partition "big" only. */
static const char *nodes_json =
    "{\"nodes\": ["
    "{\"name\": \"n1\", \"state\": \"idle\", \"state_flags\": [], \"gres\": \"gpu:1\", \"cpus\": 2, \"partitions\": [\"debug\"]},"
    "{\"name\": \"n2\", \"state\": \"allocated\", \"state_flags\": [], \"gres\": \"gpu:1\", \"cpus\": 2, \"partitions\": [\"debug\"]},"
    "{\"name\": \"n3\", \"state\": \"mixed\", \"state_flags\": [], \"gres\": \"gpu:1\", \"cpus\": 2, \"partitions\": [\"debug\"]},"
    "{\"name\": \"n4\", \"state\": \"idle\", \"state_flags\": [], \"gres\": \"gpu:1\", \"cpus\": 2, \"partitions\": [\"debug\"]},"
    "{\"name\": \"n5\", \"state\": \"idle\", \"state_flags\": [], \"gres\": \"gpu:1\", \"cpus\": 2, \"partitions\": [\"debug\", \"big\"]},"
    "{\"name\": \"n6\", \"state\": \"idle\", \"state_flags\": [], \"gres\": \"gpu:1\", \"cpus\": 2, \"partitions\": [\"debug\", \"big\"]}]}";
static const char *topo_text =
    "SwitchName=leaf0 Level=0 LinkSpeed=1 Nodes=n[1-2]\n"
    "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=n[3-4]\n"
    "SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=n[5-6]\n"
    "SwitchName=spine0 Level=1 LinkSpeed=1 Nodes=n[1-4] Switches=leaf[0-1]\n"
    "SwitchName=spine1 Level=1 LinkSpeed=1 Nodes=n[5-6] Switches=leaf2\n"
    "SwitchName=root Level=2 LinkSpeed=1 Nodes=n[1-6] Switches=spine[0-1]\n";

static void load(SlurmView *v, const char *json, const char *topo) {
    memset(v, 0, sizeof *v);
    CHECK(slurm_view_parse_nodes(v, json, NULL) == 0, "%s", myr_last_error());
    CHECK(slurm_view_parse_topology(v, topo) == 0, "%s", myr_last_error());
}

static const char *placed(const SlurmView *v, const SlurmPlacement *p) {
    static char buf[256];
    buf[0] = 0;
    for (int r = 0; r < p->nranks; r++) strcat(buf, r ? " " : ""), strcat(buf, v->nodes[p->node[r]].name);
    return buf;
}

static void test_place_avoids_allocated_keeps_tp_in_leaf(void) {
    SlurmView v;
    load(&v, nodes_json, topo_text);
    CHECK(v.nnodes == 6 && v.nsw == 6 && v.nodes[0].gpus == 1 && v.nodes[0].free && !v.nodes[1].free && !v.nodes[2].free,
          "parsed");
    CHECK(!strcmp(v.sw[v.nodes[4].leaf].name, "leaf2") && !strcmp(v.sw[v.sw[v.nodes[4].leaf].parent].name, "spine1"), "tree");
    SlurmPlacement p;
    /* tp 2 over nodes of one GPU: the only leaf with two idle nodes (first-fit would take n1 + n4) */
    SlurmJobShape tp2 = {.tp = 2, .pp = 1, .dp = 1};
    CHECK(slurm_place(&v, &tp2, &p) == 0, "%s", myr_last_error());
    CHECK(!strcmp(placed(&v, &p), "n5 n6") && p.leaves == 1 && !strcmp(v.sw[p.top].name, "leaf2"), "%s", placed(&v, &p));
    slurm_placement_free(&p);
    /* two TP groups of two nodes each: only one leaf has a free pair */
    SlurmJobShape tp2dp2 = {.tp = 2, .pp = 1, .dp = 2};
    CHECK(slurm_place(&v, &tp2dp2, &p) != 0 && strstr(myr_last_error(), "every tensor-parallel group of 2 nodes under one leaf"),
          "%s", myr_last_error());
    /* one node: bin-packing takes a lone free node (n1), keeping the free pair n5,n6 whole */
    SlurmJobShape one = {.tp = 1, .pp = 1, .dp = 1};
    CHECK(slurm_place(&v, &one, &p) == 0 && !strcmp(placed(&v, &p), "n1"), "%s", placed(&v, &p));
    slurm_placement_free(&p);
    /* dp 4 without TP: any four idle nodes, under the root */
    SlurmJobShape dp4 = {.tp = 1, .pp = 1, .dp = 4};
    CHECK(slurm_place(&v, &dp4, &p) == 0 && !strcmp(v.sw[p.top].name, "root") && p.leaves == 3, "top %s leaves %d",
          v.sw[p.top].name, p.leaves);
    slurm_placement_free(&p);
    SlurmJobShape dp5 = {.tp = 1, .pp = 1, .dp = 5};
    CHECK(slurm_place(&v, &dp5, &p) != 0 && strstr(myr_last_error(), "needs 5 nodes of 1 ranks and only 4 nodes are idle"),
          "%s", myr_last_error());
    slurm_view_free(&v);
}

static void test_place_pipeline_and_partition(void) {
    /* every node idle: tp 2 x pp 2 takes one spine's two leaves, one stage per leaf */
    char *all_idle = strdup(nodes_json);
    for (char *q; (q = strstr(all_idle, "\"allocated\"")) || (q = strstr(all_idle, "\"mixed\""));)
        memcpy(q, q[1] == 'a' ? "\"idle\"     " : "\"idle\" ", q[1] == 'a' ? 11 : 7);
    SlurmView v;
    load(&v, all_idle, topo_text);
    SlurmPlacement p;
    SlurmJobShape tp2pp2 = {.tp = 2, .pp = 2, .dp = 1};
    CHECK(slurm_place(&v, &tp2pp2, &p) == 0, "%s", myr_last_error());
    CHECK(!strcmp(placed(&v, &p), "n1 n2 n3 n4") && !strcmp(v.sw[p.top].name, "spine0") && p.pp_cross_leaf == 1 &&
              p.slurm_order_ok, "%s top %s hops %d", placed(&v, &p), v.sw[p.top].name, p.pp_cross_leaf);
    slurm_placement_free(&p);
    /* more ranks than GPUs on a node: no node qualifies */
    SlurmJobShape k2 = {.tp = 2, .pp = 2, .dp = 1, .tasks_per_node = 2};
    CHECK(slurm_place(&v, &k2, &p) != 0, "2 ranks on nodes of 1 GPU");
    slurm_view_free(&v);
    /* two GPUs per node: tp 2 inside a node, the whole pipeline under one leaf */
    for (char *q = all_idle; (q = strstr(q, "gpu:1"));) q[4] = '2';
    load(&v, all_idle, topo_text);
    CHECK(slurm_place(&v, &k2, &p) == 0 && !strcmp(placed(&v, &p), "n1 n1 n2 n2") && p.pp_cross_leaf == 0 && p.leaves == 1,
          "%s", placed(&v, &p));
    slurm_placement_free(&p);
    SlurmJobShape bad = {.tp = 3, .pp = 1, .dp = 2};
    CHECK(slurm_place(&v, &bad, &p) != 0 && strstr(myr_last_error(), "--tp 3 must divide"), "%s", myr_last_error());
    slurm_view_free(&v);
    /* only partition "big" (n5, n6) counts */
    memset(&v, 0, sizeof v);
    CHECK(slurm_view_parse_nodes(&v, all_idle, "big") == 0 && slurm_view_parse_topology(&v, topo_text) == 0, "parse");
    SlurmJobShape dp3 = {.tp = 1, .pp = 1, .dp = 6};
    CHECK(slurm_place(&v, &dp3, &p) != 0 && strstr(myr_last_error(), "only 2 nodes are idle"), "%s", myr_last_error());
    slurm_view_free(&v);
    /* no topology (topology/none): one flat switch; GPUs from a typed gres */
    const char *typed = "{\"nodes\": [{\"name\": \"a1\", \"state\": \"IDLE\", \"state_flags\": [], "
                        "\"gres\": \"gpu:h100:8(S:0-1),nic:2\"}, {\"name\": \"a2\", \"state\": \"idle\", "
                        "\"state_flags\": [\"DRAIN\"], \"gres\": \"gpu:h100:8(S:0-1)\"}]}";
    load(&v, typed, "");
    CHECK(v.nodes[0].gpus == 8 && v.nodes[0].free && !v.nodes[1].free && v.nsw == 1, "gpus %d", v.nodes[0].gpus);
    SlurmJobShape tp8 = {.tp = 8, .pp = 1, .dp = 1};
    CHECK(slurm_place(&v, &tp8, &p) == 0 && p.nnodes == 1 && !strcmp(v.nodes[p.node[7]].name, "a1"), "tp8");
    slurm_placement_free(&p);
    slurm_view_free(&v);
    free(all_idle);
    CHECK(slurm_view_parse_nodes(&v, "{\"nodes\": 3}", NULL) != 0 && strstr(myr_last_error(), "no \"nodes\" array"), "%s",
          myr_last_error());
    slurm_view_free(&v);
}

int main(void) {
    RUN(test_hostlist_expand);
    RUN(test_hostlist_compress_round_trip);
    RUN(test_node_states);
    RUN(test_sbatch_script);
    RUN(test_place_avoids_allocated_keeps_tp_in_leaf);
    RUN(test_place_pipeline_and_partition);
    return TEST_SUMMARY();
}
