/* place.c: `myriad sched place`: launch files for one job (hostfile, rankfile) and topology
 * exports (Slurm topology.conf, Volcano HyperNode YAML). */
#include "sched/place.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/placement.h"
#include "io/path_check.h"
#include "sched/policy.h"
#include "sched/slurm_place.h"
#include "util/opts.h"
#include "util/error.h"

typedef struct { int node, dev, leaf; } GpuRef;

static int by_leaf_node_dev(const void *a, const void *b) {
    const GpuRef *x = a, *y = b;
    if (x->leaf != y->leaf) return x->leaf - y->leaf;
    if (x->node != y->node) return x->node - y->node;
    return x->dev - y->dev;
}

int place_rank_layout(const Cluster *c, const Job *j, int tp, int pp, int dp, int *rank_node, int *rank_dev) {
    int n = tp * pp * dp;
    if (tp < 1 || pp < 1 || dp < 1) return myr_error("tp, pp and dp must be >= 1");
    if (job_whole_gpus(j) != n) return myr_error("job has %ld GPUs but tp*pp*dp = %d", job_whole_gpus(j), n);
    GpuRef *g = malloc(sizeof(GpuRef) * n);
    if (!g) return myr_error("out of memory");
    int k = 0;
    for (int t = 0; t < j->ntasks; t++)
        for (uint16_t m = j->slots[t].mask; m; m &= m - 1) {
            g[k].node = j->slots[t].node, g[k].dev = __builtin_ctz(m), g[k].leaf = c->nodes[j->slots[t].node].leaf;
            k++;
        }
    qsort(g, n, sizeof *g, by_leaf_node_dev);
    for (int grp = 0; grp < pp * dp; grp++) {
        int d = grp / pp, p = grp % pp; /* consecutive groups: the stages of one replica */
        for (int t = 0; t < tp; t++) {
            const GpuRef *x = &g[grp * tp + t];
            if (x->node != g[grp * tp].node) {
                free(g);
                return myr_error("a tensor-parallel group of %d GPUs would span nodes %s and %s (use tp dividing the "
                                 "GPUs per node)", tp, c->nodes[g[grp * tp].node].name, c->nodes[x->node].name);
            }
            int r = t + tp * d + tp * dp * p;
            rank_node[r] = x->node, rank_dev[r] = x->dev;
        }
    }
    free(g);
    return 0;
}

int place_pp_cross_leaf(const Cluster *c, int tp, int pp, int dp, const int *rank_node) {
    int cross = 0;
    for (int d = 0; d < dp; d++)
        for (int p = 0; p + 1 < pp; p++) {
            int a = rank_node[tp * d + tp * dp * p], b = rank_node[tp * d + tp * dp * (p + 1)];
            if (c->nodes[a].leaf != c->nodes[b].leaf) cross++;
        }
    return cross;
}

int place_write_hostfile(FILE *f, const Cluster *c, int nranks, const int *rank_node) {
    int *slots = calloc(c->nnodes, sizeof(int)), *order = malloc(sizeof(int) * (nranks + 1)), no = 0;
    for (int r = 0; r < nranks; r++)
        if (slots[rank_node[r]]++ == 0) order[no++] = rank_node[r];
    for (int i = 0; i < no; i++) fprintf(f, "%s slots=%d\n", c->nodes[order[i]].name, slots[order[i]]);
    free(slots), free(order);
    return ferror(f) ? myr_error("cannot write hostfile") : 0;
}

int place_write_rankfile(FILE *f, const Cluster *c, int nranks, const int *rank_node, const int *rank_dev) {
    fprintf(f, "# Open MPI rankfile: slot = local GPU index (bind rank r to that device)\n");
    for (int r = 0; r < nranks; r++) fprintf(f, "rank %d=%s slot=%d\n", r, c->nodes[rank_node[r]].name, rank_dev[r]);
    return ferror(f) ? myr_error("cannot write rankfile") : 0;
}

int place_write_slurm_topology(FILE *f, const Cluster *c) {
    fprintf(f, "# Slurm topology.conf (TopologyPlugin=topology/tree), written by myriad sched place\n");
    for (int l = 0; l < c->nleaves; l++) {
        fprintf(f, "SwitchName=leaf%d Nodes=", l);
        for (int k = c->leaf_off[l]; k < c->leaf_off[l + 1]; k++)
            fprintf(f, "%s%s", k > c->leaf_off[l] ? "," : "", c->nodes[c->leaf_nodes[k]].name);
        fputc('\n', f);
    }
    for (int s = 0; s < c->nspines; s++) {
        fprintf(f, "SwitchName=spine%d Switches=", s);
        for (int k = c->spine_off[s]; k < c->spine_off[s + 1]; k++)
            fprintf(f, "%sleaf%d", k > c->spine_off[s] ? "," : "", c->spine_leaves[k]);
        fputc('\n', f);
    }
    if (c->nspines > 1) {
        fprintf(f, "SwitchName=root Switches=");
        for (int s = 0; s < c->nspines; s++) fprintf(f, "%sspine%d", s ? "," : "", s);
        fputc('\n', f);
    }
    return ferror(f) ? myr_error("cannot write topology.conf") : 0;
}

static void hypernode(FILE *f, const char *name, int tier, const char *tier_name) {
    fprintf(f, "---\napiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata:\n  name: %s\nspec:\n  tier: %d\n"
               "  tierName: %s\n  members:\n", name, tier, tier_name);
}

static void member(FILE *f, const char *type, const char *name) {
    fprintf(f, "  - type: %s\n    selector:\n      exactMatch:\n        name: \"%s\"\n", type, name);
}

int place_write_hypernodes(FILE *f, const Cluster *c) {
    char nm[32];
    for (int l = 0; l < c->nleaves; l++) {
        snprintf(nm, sizeof nm, "leaf%d", l);
        hypernode(f, nm, 1, "leaf");
        for (int k = c->leaf_off[l]; k < c->leaf_off[l + 1]; k++) member(f, "Node", c->nodes[c->leaf_nodes[k]].name);
    }
    for (int s = 0; s < c->nspines; s++) {
        snprintf(nm, sizeof nm, "spine%d", s);
        hypernode(f, nm, 2, "spine");
        for (int k = c->spine_off[s]; k < c->spine_off[s + 1]; k++) {
            snprintf(nm, sizeof nm, "leaf%d", c->spine_leaves[k]);
            member(f, "HyperNode", nm);
        }
    }
    if (c->nspines > 1) {
        hypernode(f, "root", 3, "cluster");
        for (int s = 0; s < c->nspines; s++) {
            snprintf(nm, sizeof nm, "spine%d", s);
            member(f, "HyperNode", nm);
        }
    }
    return ferror(f) ? myr_error("cannot write HyperNode YAML") : 0;
}

static FILE *open_out(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) myr_die("sched place: cannot create %s (%s)", path, strerror(errno));
    return f;
}

static void close_out(FILE *f, const char *path) {
    if (fclose(f)) myr_die("sched place: writing %s failed (%s)", path, strerror(errno));
}

int cmd_sched_place(int argc, char **argv) {
    const char *cluster_spec = NULL, *policy_spec = "gang-binpack-topo", *hostfile = NULL, *rankfile = NULL,
               *slurm = NULL, *hyper = NULL;
    int tp = 1, pp = 1, dp = 1, from_slurm = 0;
    SlurmJobShape slurm_shape = {0};
    const char *partition = NULL, *nodes_file = NULL, *topo_file = NULL;
    const Opt rows[] = {
        OPT_STR("--cluster", "C", &cluster_spec, "cluster JSON, openb node CSV (*.csv) or gen:NODESxGPUS (required)"),
        OPT_INT("--tp", "T", &tp, 1, 1 << 16, "tensor-parallel GPUs of the job, inside one node (default 1)"),
        OPT_INT("--pp", "P", &pp, 1, 1 << 20, "pipeline stages of the job (default 1)"),
        OPT_INT("--dp", "D", &dp, 1, 1 << 24, "data-parallel replicas of the job (default 1)"),
        OPT_STR("--policy", "P", &policy_spec, "placement policy (default gang-binpack-topo)"),
        OPT_SECTION("outputs (the summary always goes to stdout):"),
        OPT_STR("--hostfile", "F", &hostfile, "mpirun hostfile (host slots=N), hosts in rank order"),
        OPT_STR("--rankfile", "F", &rankfile, "Open MPI rankfile: rank r=host slot=GPU"),
        OPT_STR("--slurm-topology", "F", &slurm, "Slurm topology.conf for the whole cluster"),
        OPT_STR("--hypernodes", "F", &hyper, "Volcano HyperNode YAML for the whole cluster"),
        OPT_SECTION("the live Slurm cluster instead of --cluster (prints a node list for sbatch --nodelist):"),
        OPT_SWITCH("--from-slurm", &from_slurm, "place on the idle nodes of sinfo --json under the switches of\n"
                                                "scontrol show topology: every tensor-parallel group under one leaf\n"
                                                "switch, the job under the lowest switch that holds it"),
        OPT_INT("--tasks-per-node", "K", &slurm_shape.tasks_per_node, 1, 1 << 16,
                "ranks per node (default: the GPUs of a node, 1 without GPUs)"),
        OPT_STR("--partition", "P", &partition, "only nodes of partition P"),
        OPT_STR("--sinfo-json", "F", &nodes_file, "read the nodes from F (saved sinfo --json) instead of asking Slurm"),
        OPT_STR("--topology", "F", &topo_file, "read the switches from F (saved scontrol show topology)"),
        OPT_TEXT("(with --from-slurm, --hostfile F gets the nodes in rank order, for myriad run --hosts F)"),
        OPT_END};
    OptCommand cmd = {.name = "sched place",
                      .usage = "usage: myriad sched place --cluster C [--tp T --pp P --dp D] [--policy P] [outputs]\n"
                               "       myriad sched place --from-slurm [--tp T --pp P --dp D] [--hostfile F]\n"
                               "  places one job of tp*pp*dp GPUs on the (empty) cluster, prints a summary (nodes, tier\n"
                               "  spanned, pipeline hops across leaves) and writes the files asked for:",
                      .rows = rows};
    opts_parse(&cmd, argc, argv);
    if (from_slurm) {
        if (cluster_spec || rankfile || slurm || hyper)
            myr_die("sched place: --from-slurm reads the cluster from Slurm; drop --cluster, --rankfile, "
                    "--slurm-topology and --hypernodes");
        if (hostfile && path_check_file("--hostfile", hostfile)) myr_die("sched place: %s", myr_last_error());
        slurm_shape.tp = tp, slurm_shape.pp = pp, slurm_shape.dp = dp;
        return sched_place_from_slurm(&slurm_shape, partition, hostfile, nodes_file, topo_file);
    }
    if (partition || nodes_file || topo_file || slurm_shape.tasks_per_node)
        myr_die("sched place: --partition, --sinfo-json, --topology and --tasks-per-node go with --from-slurm");
    if (!cluster_spec) myr_die("sched place: --cluster is required (see myriad sched place --help)");
    Cluster c;
    if (cluster_load(&c, cluster_spec)) myr_die_last();
    /* every output path is checked before anything is written: one bad path, nothing half done */
    const char *outs[4] = {slurm, hyper, hostfile, rankfile}, *names[4] = {"--slurm-topology", "--hypernodes",
                                                                          "--hostfile", "--rankfile"};
    for (int k = 0; k < 4; k++)
        if (outs[k] && path_check_file(names[k], outs[k])) myr_die("sched place: %s", myr_last_error());
    long n = (long)tp * pp * dp;
    int gpn = 0;
    for (int k = 0; k < c.nnodes; k++) if (c.nodes[k].ngpu > gpn) gpn = c.nodes[k].ngpu;
    if (tp > gpn || gpn % tp) myr_die("sched place: --tp %d must divide the GPUs per node (%d) so a TP group stays in one node", tp, gpn);
    Policy pol;
    if (policy_load(&pol, policy_spec)) myr_die_last();
    pol.fgd = false;
    JobSet js = {0};
    Job *j = jobset_add(&js);
    snprintf(j->name, sizeof j->name, "placed");
    if (n <= gpn) j->ntasks = 1, j->gpus_per_task = (int)n;
    else {
        if (n % gpn) myr_die("sched place: tp*pp*dp = %ld GPUs must be a multiple of the GPUs per node (%d) for a multi-node job", n, gpn);
        j->ntasks = (int)(n / gpn), j->gpus_per_task = gpn;
    }
    if (job_validate(j, &c, 0)) myr_die("sched place: a job of %ld GPUs is rejected: %s", n, j->reason);
    Placer pl;
    if (placer_init(&pl, &c, &pol, NULL)) myr_die_last();
    j->slots = malloc(sizeof(TaskSlot) * j->ntasks);
    int tier = place_find(&pl, &c, j, SCHED_TIERS - 1, j->slots);
    if (tier < 0) myr_die("sched place: no room for %ld GPUs on this cluster now", n);
    int *rn = malloc(sizeof(int) * n), *rd = malloc(sizeof(int) * n);
    if (place_rank_layout(&c, j, tp, pp, dp, rn, rd)) myr_die_last();
    if (slurm) { FILE *f = open_out(slurm); if (place_write_slurm_topology(f, &c)) myr_die_last(); close_out(f, slurm); }
    if (hyper) { FILE *f = open_out(hyper); if (place_write_hypernodes(f, &c)) myr_die_last(); close_out(f, hyper); }
    if (hostfile) { FILE *f = open_out(hostfile); if (place_write_hostfile(f, &c, (int)n, rn)) myr_die_last(); close_out(f, hostfile); }
    if (rankfile) { FILE *f = open_out(rankfile); if (place_write_rankfile(f, &c, (int)n, rn, rd)) myr_die_last(); close_out(f, rankfile); }
    static const char *tiers[] = {"one node", "one leaf", "one spine", "several spines"};
    printf("placed %ld GPUs (tp %d x pp %d x dp %d) on %d nodes in %s; pipeline hops across leaves: %d of %d\n", n, tp, pp,
           dp, j->ntasks, tiers[tier], place_pp_cross_leaf(&c, tp, pp, dp, rn), dp * (pp - 1));
    free(rn), free(rd);
    placer_free(&pl);
    jobset_free(&js);
    cluster_free(&c);
    return 0;
}
