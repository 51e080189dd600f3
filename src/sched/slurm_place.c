/* slurm_place.c: one job placed on a live Slurm cluster (see slurm_place.h). */
#include "sched/slurm_place.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/subprocess.h"

/* ---------- reading Slurm's state ---------- */

/* GPUs in a gres string: "gpu:4", "gpu:a100:4(S:0-1)", "gpu:2,nic:1" -> 4, 4, 2. */
static int gres_gpus(const char *g) {
    int total = 0;
    while (g && *g) {
        const char *end = strchr(g, ',');
        size_t len = end ? (size_t)(end - g) : strlen(g);
        if (len > 4 && !strncmp(g, "gpu:", 4)) {
            char item[128];
            snprintf(item, sizeof item, "%.*s", (int)(len < 127 ? len : 127), g);
            char *paren = strchr(item, '(');
            if (paren) *paren = 0;
            char *last = strrchr(item, ':');
            char *num_end;
            long n = strtol(last + 1, &num_end, 10);
            if (num_end != last + 1 && *num_end == 0 && n > 0) total += (int)n;
        }
        g = end ? end + 1 : NULL;
    }
    return total;
}

static int json_int_or(const cJSON *o, const char *key, int dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valueint : dflt;
}

int slurm_view_parse_nodes(SlurmView *v, const char *json, const char *partition) {
    cJSON *root = cJSON_Parse(json);
    if (!root) return myr_error("sched place: Slurm's node list is not JSON (expected the output of sinfo --json)");
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
    if (!cJSON_IsArray(nodes)) {
        cJSON_Delete(root);
        return myr_error("sched place: sinfo --json output has no \"nodes\" array (Slurm 21.08 or newer is needed)");
    }
    int n = cJSON_GetArraySize(nodes);
    v->nodes = calloc((size_t)(n > 0 ? n : 1), sizeof *v->nodes);
    v->nnodes = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, nodes) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
        const cJSON *state = cJSON_GetObjectItemCaseSensitive(o, "state");
        const cJSON *flags = cJSON_GetObjectItemCaseSensitive(o, "state_flags");
        const cJSON *gres = cJSON_GetObjectItemCaseSensitive(o, "gres");
        const cJSON *parts = cJSON_GetObjectItemCaseSensitive(o, "partitions");
        if (!cJSON_IsString(name) || !cJSON_IsString(state)) {
            cJSON_Delete(root);
            return myr_error("sched place: a node in sinfo --json has no \"name\" or \"state\"");
        }
        SlurmNode *sn = &v->nodes[v->nnodes++];
        snprintf(sn->name, sizeof sn->name, "%s", name->valuestring);
        snprintf(sn->state, sizeof sn->state, "%s", state->valuestring);
        for (char *p = sn->state; *p; p++) *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
        sn->flags = cJSON_IsArray(flags) && cJSON_GetArraySize(flags) > 0;
        sn->gpus = cJSON_IsString(gres) ? gres_gpus(gres->valuestring) : 0;
        sn->cpus = json_int_or(o, "cpus", 0);
        sn->leaf = -1;
        int in_part = !partition;
        const cJSON *p;
        if (partition && cJSON_IsArray(parts))
            cJSON_ArrayForEach(p, parts) in_part |= cJSON_IsString(p) && !strcmp(p->valuestring, partition);
        sn->free = in_part && !strcmp(sn->state, "idle") && !sn->flags;
    }
    cJSON_Delete(root);
    if (!v->nnodes) return myr_error("sched place: Slurm lists no nodes");
    return 0;
}

static int find_switch(const SlurmView *v, const char *name) {
    for (int i = 0; i < v->nsw; i++)
        if (!strcmp(v->sw[i].name, name)) return i;
    return -1;
}

/* The value of KEY= in one topology line ("" when absent). */
static void field(const char *line, const char *key, char *out, size_t cap) {
    out[0] = 0;
    size_t klen = strlen(key);
    for (const char *p = line; (p = strstr(p, key));) {
        if ((p == line || p[-1] == ' ') && p[klen] == '=') {
            p += klen + 1;
            size_t len = strcspn(p, " \n");
            snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), p);
            return;
        }
        p += klen;
    }
}

int slurm_view_parse_topology(SlurmView *v, const char *text) {
    char *copy = strdup(text ? text : ""), *save = NULL;
    int cap = 0;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[64], level[16], nodes[8192], sws[8192];
        field(line, "SwitchName", name, sizeof name);
        if (!name[0]) continue;
        field(line, "Level", level, sizeof level);
        field(line, "Nodes", nodes, sizeof nodes);
        field(line, "Switches", sws, sizeof sws);
        if (v->nsw == cap) cap = cap ? 2 * cap : 16, v->sw = realloc(v->sw, (size_t)cap * sizeof *v->sw);
        SlurmSwitch *s = &v->sw[v->nsw++];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, "%s", name);
        s->level = level[0] ? atoi(level) : (sws[0] ? 1 : 0);
        s->parent = -1;
        if ((nodes[0] && hostlist_expand(&s->nodes, nodes, 0)) || (sws[0] && hostlist_expand(&s->children, sws, 0))) {
            free(copy);
            return myr_error("sched place: switch %s: %s", name, myr_last_error());
        }
    }
    free(copy);
    if (v->nsw == 0) { /* topology/none: the whole cluster is one switch */
        v->sw = calloc(1, sizeof *v->sw);
        v->nsw = 1;
        snprintf(v->sw[0].name, sizeof v->sw[0].name, "(no topology)");
        v->sw[0].parent = -1;
        for (int i = 0; i < v->nnodes; i++) hostlist_add(&v->sw[0].nodes, v->nodes[i].name);
    }
    for (int i = 0; i < v->nsw; i++)
        for (int k = 0; k < v->sw[i].children.n; k++) {
            int c = find_switch(v, v->sw[i].children.names[k]);
            if (c < 0) return myr_error("sched place: switch %s lists an unknown switch %s", v->sw[i].name, v->sw[i].children.names[k]);
            v->sw[c].parent = i;
        }
    /* a node's leaf: the lowest switch that lists it */
    for (int i = 0; i < v->nnodes; i++) {
        SlurmNode *n = &v->nodes[i];
        for (int s = 0; s < v->nsw; s++)
            if (hostlist_find(&v->sw[s].nodes, n->name) >= 0 && (n->leaf < 0 || v->sw[s].level < v->sw[n->leaf].level))
                n->leaf = s;
    }
    return 0;
}

void slurm_view_free(SlurmView *v) {
    for (int i = 0; i < v->nsw; i++) hostlist_free(&v->sw[i].nodes), hostlist_free(&v->sw[i].children);
    free(v->sw), free(v->nodes);
    memset(v, 0, sizeof *v);
}

/* ---------- choosing the nodes ---------- */

static int below(const SlurmView *v, int sw, int top) {
    for (; sw >= 0; sw = v->sw[sw].parent)
        if (sw == top) return 1;
    return 0;
}

typedef struct {
    int leaf, cap;
} LeafCap;

static int by_cap_desc(const void *a, const void *b) {
    const LeafCap *x = a, *y = b;
    return x->cap != y->cap ? y->cap - x->cap : x->leaf - y->leaf;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

int slurm_place(const SlurmView *v, const SlurmJobShape *shape, SlurmPlacement *out) {
    memset(out, 0, sizeof *out);
    int tp = shape->tp, pp = shape->pp, dp = shape->dp;
    if (tp < 1 || pp < 1 || dp < 1) return myr_error("sched place: --tp, --pp and --dp must be >= 1");
    int k = shape->tasks_per_node;
    if (k <= 0) { /* the GPUs of the idle nodes, which must agree */
        for (int i = 0; i < v->nnodes; i++)
            if (v->nodes[i].free && v->nodes[i].gpus) {
                if (k && v->nodes[i].gpus != k)
                    return myr_error("sched place: idle nodes have %d and %d GPUs; say how many ranks go on a node with "
                                     "--tasks-per-node", k, v->nodes[i].gpus);
                k = v->nodes[i].gpus;
            }
        if (k <= 0) k = 1;
    }
    long n = (long)tp * pp * dp;
    if (n % k) return myr_error("sched place: tp*pp*dp = %ld ranks do not fill nodes of %d ranks (--tasks-per-node)", n, k);
    int u; /* nodes of one tensor-parallel group, which must share a leaf */
    if (tp <= k) {
        if (k % tp) return myr_error("sched place: --tp %d must divide the %d ranks of a node or be a multiple of it", tp, k);
        u = 1;
    } else {
        if (tp % k) return myr_error("sched place: --tp %d must divide the %d ranks of a node or be a multiple of it", tp, k);
        u = tp / k;
    }
    int nn = (int)(n / k), nfree = 0;
    /* usable nodes per leaf: whole TP groups only */
    int *count = calloc((size_t)v->nsw, sizeof *count), *cap = calloc((size_t)v->nsw, sizeof *cap);
    for (int i = 0; i < v->nnodes; i++)
        if (v->nodes[i].free && v->nodes[i].leaf >= 0 && (!v->nodes[i].gpus || v->nodes[i].gpus >= k))
            count[v->nodes[i].leaf]++, nfree++;
    for (int l = 0; l < v->nsw; l++) {
        int c = count[l] / u * u;
        for (int s = 0; s < v->nsw; s++)
            if (below(v, l, s)) cap[s] += c;
    }
    /* the lowest switch that can hold the job; among equals the tightest fit (bin-packing keeps
     * the emptier parts of the tree for larger jobs) */
    int top = -1;
    for (int s = 0; s < v->nsw; s++)
        if (cap[s] >= nn && (top < 0 || v->sw[s].level < v->sw[top].level ||
                             (v->sw[s].level == v->sw[top].level && cap[s] < cap[top])))
            top = s;
    if (top < 0) {
        int best = 0;
        for (int s = 0; s < v->nsw; s++) best = cap[s] > best ? cap[s] : best;
        free(count), free(cap);
        if (nfree < nn)
            return myr_error("sched place: the job needs %d nodes of %d ranks and only %d nodes are idle now", nn, k, nfree);
        return myr_error("sched place: the job needs %d nodes with every tensor-parallel group of %d node%s under one "
                         "leaf switch; %d idle nodes are, at most %d of them usable that way now", nn, u, u == 1 ? "" : "s",
                         nfree, best);
    }
    /* the leaves below it, fullest first (fewest leaves), each giving whole TP groups */
    LeafCap *lc = malloc((size_t)v->nsw * sizeof *lc);
    int nl = 0;
    for (int l = 0; l < v->nsw; l++)
        if (count[l] && below(v, l, top)) lc[nl].leaf = l, lc[nl].cap = count[l] / u * u, nl++;
    qsort(lc, (size_t)nl, sizeof *lc, by_cap_desc);
    int *chosen = malloc((size_t)nn * sizeof *chosen), *group_of = malloc((size_t)nn * sizeof *group_of), got = 0;
    for (int j = 0; j < nl && got < nn; j++) {
        int take = lc[j].cap < nn - got ? lc[j].cap : nn - got;
        if (take) out->leaves++;
        for (int i = 0; i < v->nnodes && take; i++)
            if (v->nodes[i].free && v->nodes[i].leaf == lc[j].leaf && (!v->nodes[i].gpus || v->nodes[i].gpus >= k))
                group_of[got] = j, chosen[got++] = i, take--;
    }
    /* rank order: Slurm's node order when it keeps each TP group under one leaf, else by leaf */
    int *sorted = malloc((size_t)nn * sizeof *sorted);
    memcpy(sorted, chosen, (size_t)nn * sizeof *sorted);
    qsort(sorted, (size_t)nn, sizeof *sorted, cmp_int);
    out->slurm_order_ok = 1;
    for (int g = 0; g < nn; g += u)
        for (int i = g; i < g + u; i++) out->slurm_order_ok &= v->nodes[sorted[i]].leaf == v->nodes[sorted[g]].leaf;
    const int *order = out->slurm_order_ok ? sorted : chosen;
    out->nranks = (int)n, out->nnodes = nn, out->top = top;
    out->node = malloc((size_t)n * sizeof *out->node);
    for (long r = 0; r < n; r++) out->node[r] = order[r / k];
    for (int d = 0; d < dp; d++) /* Megatron rank order: rank = t + tp*d + tp*dp*p */
        for (int p = 0; p + 1 < pp; p++)
            out->pp_cross_leaf += v->nodes[out->node[tp * d + tp * dp * p]].leaf != v->nodes[out->node[tp * d + tp * dp * (p + 1)]].leaf;
    free(lc), free(chosen), free(group_of), free(sorted), free(count), free(cap);
    return 0;
}

void slurm_placement_free(SlurmPlacement *p) {
    free(p->node);
    memset(p, 0, sizeof *p);
}

/* ---------- the command ---------- */

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        myr_error("sched place: cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *s = malloc(cap);
    size_t r;
    while ((r = fread(s + len, 1, cap - len - 1, f)) > 0)
        if ((len += r) + 1 == cap) s = realloc(s, cap *= 2);
    s[len] = 0;
    fclose(f);
    return s;
}

/* Output of a Slurm command (sinfo --json, scontrol show topology), or NULL with myr_error(). */
static char *slurm_output(char *const argv[]) {
    Subproc p;
    if (subproc_run(&p, argv, 0, 60)) {
        char why[400];
        snprintf(why, sizeof why, "%s", myr_last_error());
        subproc_free(&p);
        myr_error("sched place --from-slurm: %s (is this a Slurm login node? SLURM_CONF set?)", why);
        return NULL;
    }
    char *out = p.out;
    p.out = NULL;
    subproc_free(&p);
    return out;
}

int sched_place_from_slurm(const SlurmJobShape *shape_in, const char *partition, const char *hostfile,
                           const char *nodes_file, const char *topo_file) {
    SlurmJobShape shape = *shape_in;
    char *sinfo_argv[] = {"sinfo", "--json", NULL}, *topo_argv[] = {"scontrol", "show", "topology", NULL};
    char *nodes = nodes_file ? read_text(nodes_file) : slurm_output(sinfo_argv);
    if (!nodes) myr_die_last();
    char *topo = topo_file ? read_text(topo_file) : slurm_output(topo_argv);
    if (!topo) myr_die_last();
    SlurmView v = {0};
    if (slurm_view_parse_nodes(&v, nodes, partition) || slurm_view_parse_topology(&v, topo)) myr_die_last();
    free(nodes), free(topo);
    SlurmPlacement pl;
    if (slurm_place(&v, &shape, &pl)) myr_die_last();
    int k = pl.nranks / pl.nnodes, nfree = 0;
    for (int i = 0; i < v.nnodes; i++) nfree += v.nodes[i].free;
    char **names = malloc((size_t)pl.nnodes * sizeof *names);
    for (int j = 0; j < pl.nnodes; j++) names[j] = v.nodes[pl.node[j * k]].name;
    char list[16384];
    if (hostlist_compress(names, pl.nnodes, list, sizeof list)) myr_die("sched place: node list too long");
    printf("%s\n", list);
    int u = shape.tp > k ? shape.tp / k : 1;
    printf("# placed %d ranks (tp %d x pp %d x dp %d, %d per node) on %d of %d idle nodes, under %s %s (level %d), "
           "%d leaf switch%s; every tensor-parallel group of %d node%s under one leaf; pipeline hops across leaves: "
           "%d of %d\n", pl.nranks, shape.tp, shape.pp, shape.dp, k, pl.nnodes, nfree,
           v.sw[pl.top].level ? "switch" : "leaf switch", v.sw[pl.top].name, v.sw[pl.top].level, pl.leaves,
           pl.leaves == 1 ? "" : "es", u, u == 1 ? "" : "s", pl.pp_cross_leaf, shape.dp * (shape.pp - 1));
    printf("# sbatch --nodes=%d --ntasks-per-node=%d --nodelist=%s --switches=%d\n", pl.nnodes, k, list, pl.leaves);
    if (pl.slurm_order_ok) printf("# rank order: Slurm's node order (myriad run needs no --hosts)\n");
    else printf("# rank order differs from Slurm's node order: run with myriad run --hosts FILE (write it with --hostfile)\n");
    if (hostfile) {
        FILE *f = fopen(hostfile, "w");
        if (!f) myr_die("sched place: cannot write %s: %s", hostfile, strerror(errno));
        for (int j = 0; j < pl.nnodes; j++) fprintf(f, "%s slots=%d\n", names[j], k);
        if (fclose(f)) myr_die("sched place: cannot write %s", hostfile);
    }
    free(names);
    slurm_placement_free(&pl);
    slurm_view_free(&v);
    return 0;
}
