/* cluster.c: building the cluster model (generated, JSON, openb CSV) and keeping its free-resource
 * counters exact as tasks come and go and nodes change state. */
#include "sched/cluster.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/csv.h"
#include "util/error.h"

int node_free_milli(const Node *n) {
    int s = 0;
    for (int g = 0; g < n->ngpu; g++) s += n->gpu_free[g];
    return s;
}

int cluster_type_index(const Cluster *c, const char *name) {
    for (int t = 0; t < c->ntypes; t++)
        if (!strcmp(c->type_names[t], name)) return t;
    return -1;
}

static int intern_type(Cluster *c, const char *name) {
    int t = cluster_type_index(c, name);
    if (t >= 0) return t;
    if (c->ntypes == SCHED_MAX_TYPES) return myr_error("cluster has more than %d GPU types", SCHED_MAX_TYPES);
    snprintf(c->type_names[c->ntypes], sizeof c->type_names[0], "%s", name);
    return c->ntypes++;
}

static Node *add_node(Cluster *c, int *cap) {
    if (c->nnodes == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        Node *n = realloc(c->nodes, (size_t)*cap * sizeof *n);
        if (!n) return NULL;
        c->nodes = n;
    }
    Node *n = &c->nodes[c->nnodes++];
    memset(n, 0, sizeof *n);
    n->type = -1;
    n->leaf = n->spine = -1;
    return n;
}

static void counters_node(Cluster *c, const Node *n, int sign) {
    if (n->type < 0 || !node_schedulable(n)) return;
    int w = __builtin_popcount(n->whole_mask) * sign;
    c->leaf_free[n->leaf] += w;
    c->spine_free[n->spine] += w;
    c->type_free[n->type] += w;
    c->total_free += w;
}

/* Validates nodes, fills leaf/spine ids left unset (by index), compacts ids and builds CSR lists and
 * counters. */
static int cluster_finish(Cluster *c, int nodes_per_leaf, int leaves_per_spine) {
    if (c->nnodes == 0) return myr_error("cluster has no nodes");
    if (nodes_per_leaf < 1) nodes_per_leaf = 32;
    if (leaves_per_spine < 1) leaves_per_spine = 8;
    int maxleaf = -1, maxspine = -1;
    for (int i = 0; i < c->nnodes; i++) {
        Node *n = &c->nodes[i];
        if (n->ngpu < 0 || n->ngpu > SCHED_MAX_GPUS_PER_NODE)
            return myr_error("node %s: %d GPUs (supported 0..%d)", n->name, n->ngpu, SCHED_MAX_GPUS_PER_NODE);
        if (n->ngpu > 0 && n->type < 0) return myr_error("node %s has GPUs but no GPU type", n->name);
        if (n->ngpu == 0) n->type = -1;
        if (n->cpu_milli < 0 || n->mem_mib < 0) return myr_error("node %s: negative CPU or memory", n->name);
        if (n->leaf < 0) n->leaf = i / nodes_per_leaf;
        if (n->spine < 0) n->spine = n->leaf / leaves_per_spine;
        if (n->leaf > maxleaf) maxleaf = n->leaf;
        if (n->spine > maxspine) maxspine = n->spine;
        for (int g = 0; g < n->ngpu; g++) n->gpu_free[g] = GPU_MILLI;
        n->whole_mask = (uint16_t)((1u << n->ngpu) - 1);
        n->cpu_free = n->cpu_milli;
        n->mem_free = n->mem_mib;
    }
    /* compact leaf ids (in order of first appearance); a leaf belongs to exactly one spine */
    int *leaf_map = malloc(sizeof(int) * (maxleaf + 1)), *spine_map = malloc(sizeof(int) * (maxspine + 1));
    int *leaf_spine_raw = malloc(sizeof(int) * (maxleaf + 1));
    if (!leaf_map || !spine_map || !leaf_spine_raw) return myr_error("out of memory");
    for (int i = 0; i <= maxleaf; i++) leaf_map[i] = -1, leaf_spine_raw[i] = -1;
    for (int i = 0; i <= maxspine; i++) spine_map[i] = -1;
    c->nleaves = c->nspines = 0;
    for (int i = 0; i < c->nnodes; i++) {
        Node *n = &c->nodes[i];
        if (leaf_spine_raw[n->leaf] >= 0 && leaf_spine_raw[n->leaf] != n->spine) {
            int other = leaf_spine_raw[n->leaf];
            free(leaf_map), free(spine_map), free(leaf_spine_raw);
            return myr_error("node %s: leaf %d is under spine %d and %d (a leaf belongs to one spine)", n->name,
                             n->leaf, other, n->spine);
        }
        leaf_spine_raw[n->leaf] = n->spine;
        if (leaf_map[n->leaf] < 0) leaf_map[n->leaf] = c->nleaves++;
        if (spine_map[n->spine] < 0) spine_map[n->spine] = c->nspines++;
    }
    c->leaf_spine = malloc(sizeof(int) * c->nleaves);
    c->leaf_off = calloc(c->nleaves + 1, sizeof(int));
    c->leaf_nodes = malloc(sizeof(int) * c->nnodes);
    c->spine_off = calloc(c->nspines + 1, sizeof(int));
    c->spine_leaves = malloc(sizeof(int) * c->nleaves);
    c->leaf_free = calloc(c->nleaves, sizeof(int));
    c->spine_free = calloc(c->nspines, sizeof(int));
    if (!c->leaf_spine || !c->leaf_off || !c->leaf_nodes || !c->spine_off || !c->spine_leaves || !c->leaf_free ||
        !c->spine_free)
        return myr_error("out of memory");
    for (int i = 0; i < c->nnodes; i++) {
        Node *n = &c->nodes[i];
        n->leaf = leaf_map[n->leaf];
        n->spine = spine_map[n->spine];
        c->leaf_spine[n->leaf] = n->spine;
        c->leaf_off[n->leaf + 1]++;
    }
    free(leaf_map), free(spine_map), free(leaf_spine_raw);
    for (int l = 0; l < c->nleaves; l++) c->leaf_off[l + 1] += c->leaf_off[l];
    int *fill = calloc(c->nleaves + c->nspines + 1, sizeof(int));
    if (!fill) return myr_error("out of memory");
    for (int i = 0; i < c->nnodes; i++) {
        int l = c->nodes[i].leaf;
        c->leaf_nodes[c->leaf_off[l] + fill[l]++] = i;
    }
    for (int l = 0; l < c->nleaves; l++) c->spine_off[c->leaf_spine[l] + 1]++;
    for (int s = 0; s < c->nspines; s++) c->spine_off[s + 1] += c->spine_off[s];
    memset(fill, 0, sizeof(int) * (c->nspines + 1));
    for (int l = 0; l < c->nleaves; l++) {
        int s = c->leaf_spine[l];
        c->spine_leaves[c->spine_off[s] + fill[s]++] = l;
    }
    free(fill);
    c->total_gpus = 0;
    memset(c->type_gpus, 0, sizeof c->type_gpus);
    for (int i = 0; i < c->nnodes; i++) {
        c->total_gpus += c->nodes[i].ngpu;
        if (c->nodes[i].type >= 0) c->type_gpus[c->nodes[i].type] += c->nodes[i].ngpu;
        counters_node(c, &c->nodes[i], +1);
    }
    if (c->total_gpus == 0) return myr_error("cluster has no GPUs");
    static unsigned long next_uid;
    c->uid = ++next_uid;
    return 0;
}

int cluster_generate(Cluster *c, int nnodes, int gpus_per_node, const char *gpu_type, int cpu_milli, int mem_mib,
                     int nodes_per_leaf, int leaves_per_spine) {
    memset(c, 0, sizeof *c);
    if (nnodes < 1) return myr_error("generated cluster needs at least one node (got %d)", nnodes);
    if (gpus_per_node < 1 || gpus_per_node > SCHED_MAX_GPUS_PER_NODE)
        return myr_error("gpus per node must be 1..%d (got %d)", SCHED_MAX_GPUS_PER_NODE, gpus_per_node);
    int t = intern_type(c, gpu_type && *gpu_type ? gpu_type : "GPU");
    int cap = 0;
    for (int i = 0; i < nnodes; i++) {
        Node *n = add_node(c, &cap);
        if (!n) return myr_error("out of memory");
        snprintf(n->name, sizeof n->name, "node%04d", i);
        n->type = t;
        n->ngpu = gpus_per_node;
        n->cpu_milli = cpu_milli;
        n->mem_mib = mem_mib;
    }
    return cluster_finish(c, nodes_per_leaf, leaves_per_spine);
}

static int json_int(const cJSON *o, const char *key, int dflt, int *out, const char *where) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) { *out = dflt; return 0; }
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int)v->valuedouble)
        return myr_error("%s: \"%s\" must be an integer", where, key);
    *out = (int)v->valuedouble;
    return 0;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { myr_error("cannot open %s: %s", path, strerror(errno)); return NULL; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc(n + 1);
    if (!s || fread(s, 1, n, f) != (size_t)n) { fclose(f); free(s); myr_error("cannot read %s", path); return NULL; }
    s[n] = 0;
    fclose(f);
    return s;
}

static int parse_state(const char *s, NodeState *out) {
    if (!strcmp(s, "up")) *out = NODE_UP;
    else if (!strcmp(s, "failed")) *out = NODE_FAILED;
    else if (!strcmp(s, "draining")) *out = NODE_DRAINING;
    else if (!strcmp(s, "spare")) *out = NODE_SPARE;
    else return -1;
    return 0;
}

int cluster_load_json(Cluster *c, const char *path) {
    memset(c, 0, sizeof *c);
    char *text = read_text(path);
    if (!text) return -1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return myr_error("%s: not a JSON object (a cluster is {\"generate\":{...}} or {\"nodes\":[...]})", path);
    }
    int rc = -1, cap = 0, npl = 32, lps = 8;
    const cJSON *topo = cJSON_GetObjectItemCaseSensitive(root, "topology");
    if (topo && (json_int(topo, "nodes_per_leaf", 32, &npl, path) || json_int(topo, "leaves_per_spine", 8, &lps, path)))
        goto out;
    const cJSON *gen = cJSON_GetObjectItemCaseSensitive(root, "generate");
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
    for (const cJSON *k = root->child; k; k = k->next)
        if (strcmp(k->string, "topology") && strcmp(k->string, "generate") && strcmp(k->string, "nodes")) {
            myr_error("%s: unknown key \"%s\" (expected generate, nodes, topology)", path, k->string);
            goto out;
        }
    if (!gen && !nodes) { myr_error("%s: needs \"generate\" or \"nodes\"", path); goto out; }
    if (gen) {
        int nn = 0, g = 0, cpu = 0, mem = 0;
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(gen, "gpu_type");
        if (json_int(gen, "nodes", 0, &nn, path) || json_int(gen, "gpus_per_node", 8, &g, path) ||
            json_int(gen, "cpu_milli", 128000, &cpu, path) || json_int(gen, "mem_mib", 1048576, &mem, path))
            goto out;
        if (nn < 1) { myr_error("%s: generate.nodes must be >= 1", path); goto out; }
        int t = intern_type(c, cJSON_IsString(ty) ? ty->valuestring : "GPU");
        if (t < 0) goto out;
        for (int i = 0; i < nn; i++) {
            Node *n = add_node(c, &cap);
            if (!n) { myr_error("out of memory"); goto out; }
            snprintf(n->name, sizeof n->name, "node%04d", i);
            n->type = t, n->ngpu = g, n->cpu_milli = cpu, n->mem_mib = mem;
        }
    }
    if (nodes) {
        if (!cJSON_IsArray(nodes)) { myr_error("%s: \"nodes\" must be an array", path); goto out; }
        int idx = 0;
        for (const cJSON *o = nodes->child; o; o = o->next, idx++) {
            char where[96];
            snprintf(where, sizeof where, "%s: nodes[%d]", path, idx);
            Node *n = add_node(c, &cap);
            if (!n) { myr_error("out of memory"); goto out; }
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name");
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "gpu_type");
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "state");
            if (cJSON_IsString(nm)) snprintf(n->name, sizeof n->name, "%s", nm->valuestring);
            else snprintf(n->name, sizeof n->name, "node%04d", c->nnodes - 1);
            if (json_int(o, "gpus", 0, &n->ngpu, where) || json_int(o, "cpu_milli", 128000, &n->cpu_milli, where) ||
                json_int(o, "mem_mib", 1048576, &n->mem_mib, where) || json_int(o, "leaf", -1, &n->leaf, where) ||
                json_int(o, "spine", -1, &n->spine, where))
                goto out;
            if (n->ngpu > 0) {
                if (!cJSON_IsString(ty)) { myr_error("%s: has GPUs but no \"gpu_type\"", where); goto out; }
                if ((n->type = intern_type(c, ty->valuestring)) < 0) goto out;
            }
            if (st && (!cJSON_IsString(st) || parse_state(st->valuestring, &n->state))) {
                myr_error("%s: \"state\" must be up, failed, draining or spare", where);
                goto out;
            }
        }
    }
    rc = cluster_finish(c, npl, lps);
out:
    cJSON_Delete(root);
    if (rc) cluster_free(c);
    return rc;
}

int cluster_load_openb_csv(Cluster *c, const char *path, int nodes_per_leaf, int leaves_per_spine) {
    memset(c, 0, sizeof *c);
    CsvReader r;
    if (csv_open(&r, path)) return -1;
    int col_sn = csv_col(&r, "sn"), col_cpu = csv_col(&r, "cpu_milli"), col_mem = csv_col(&r, "memory_mib"),
        col_gpu = csv_col(&r, "gpu"), col_model = csv_col(&r, "model");
    if (col_sn < 0 || col_cpu < 0 || col_mem < 0 || col_gpu < 0 || col_model < 0) {
        csv_close(&r);
        return myr_error("%s: header must have sn,cpu_milli,memory_mib,gpu,model (openb node list)", path);
    }
    int cap = 0, rc = -1;
    while (csv_next(&r) > 0) {
        Node *n = add_node(c, &cap);
        if (!n) { myr_error("out of memory"); goto out; }
        snprintf(n->name, sizeof n->name, "%s", csv_field(&r, col_sn));
        if (csv_int(&r, col_cpu, &n->cpu_milli) || csv_int(&r, col_mem, &n->mem_mib) || csv_int(&r, col_gpu, &n->ngpu))
            goto out;
        const char *model = csv_field(&r, col_model);
        if (n->ngpu > 0) {
            if (!*model || !strcmp(model, "nan")) {
                myr_error("%s:%d: node %s has %d GPUs but no model", path, r.line, n->name, n->ngpu);
                goto out;
            }
            if ((n->type = intern_type(c, model)) < 0) goto out;
        }
    }
    if (r.error) goto out;
    rc = cluster_finish(c, nodes_per_leaf, leaves_per_spine);
out:
    csv_close(&r);
    if (rc) cluster_free(c);
    return rc;
}

/* "gen:NODESxGPUS": both whole positive numbers, nothing around them. */
static int parse_gen(const char *spec, int *nodes, int *gpus) {
    const char *p = spec + 4;
    char *end;
    errno = 0;
    long n = strtol(p, &end, 10);
    if (end == p || *end != 'x' || n < 1 || n > 1000000 || errno) goto bad;
    p = end + 1;
    long g = strtol(p, &end, 10);
    if (end == p || *end || g < 1 || g > SCHED_MAX_GPUS_PER_NODE || errno) goto bad;
    *nodes = (int)n, *gpus = (int)g;
    return 0;
bad:
    return myr_error("--cluster %s: expected gen:NODESxGPUS with 1..1000000 nodes of 1..%d GPUs (e.g. gen:256x8)", spec,
                     SCHED_MAX_GPUS_PER_NODE);
}

int cluster_load(Cluster *c, const char *spec) {
    int nn = 0, g = 0;
    if (!strncmp(spec, "gen:", 4)) {
        if (parse_gen(spec, &nn, &g)) return -1;
        return cluster_generate(c, nn, g, "GPU", 128000, 1048576, 32, 8);
    }
    size_t len = strlen(spec);
    if (len > 4 && !strcmp(spec + len - 4, ".csv")) return cluster_load_openb_csv(c, spec, 32, 8);
    return cluster_load_json(c, spec);
}

void cluster_free(Cluster *c) {
    free(c->nodes), free(c->leaf_spine), free(c->leaf_off), free(c->leaf_nodes), free(c->spine_off);
    free(c->spine_leaves), free(c->leaf_free), free(c->spine_free);
    memset(c, 0, sizeof *c);
}

static int *dup_ints(const int *a, int n) {
    int *b = malloc(sizeof(int) * (n > 0 ? n : 1));
    if (b && n > 0) memcpy(b, a, sizeof(int) * n);
    return b;
}

int cluster_clone(Cluster *d, const Cluster *s) {
    *d = *s;
    d->nodes = malloc(sizeof(Node) * s->nnodes);
    if (!d->nodes) return myr_error("out of memory");
    memcpy(d->nodes, s->nodes, sizeof(Node) * s->nnodes);
    d->leaf_spine = dup_ints(s->leaf_spine, s->nleaves);
    d->leaf_off = dup_ints(s->leaf_off, s->nleaves + 1);
    d->leaf_nodes = dup_ints(s->leaf_nodes, s->nnodes);
    d->spine_off = dup_ints(s->spine_off, s->nspines + 1);
    d->spine_leaves = dup_ints(s->spine_leaves, s->nleaves);
    d->leaf_free = dup_ints(s->leaf_free, s->nleaves);
    d->spine_free = dup_ints(s->spine_free, s->nspines);
    return 0;
}

void cluster_set_state(Cluster *c, int node, NodeState s) {
    Node *n = &c->nodes[node];
    counters_node(c, n, -1);
    n->state = s;
    n->version++;
    counters_node(c, n, +1);
}

void cluster_take(Cluster *c, int node, uint16_t mask, int dev, int milli, int cpu, int mem) {
    Node *n = &c->nodes[node];
    counters_node(c, n, -1);
    n->version++;
    if (mask) {
        n->whole_mask &= (uint16_t)~mask;
        for (uint16_t m = mask; m; m &= m - 1) n->gpu_free[__builtin_ctz(m)] = 0;
        c->alloc_milli += (long)__builtin_popcount(mask) * GPU_MILLI;
    } else if (dev >= 0) {
        n->gpu_free[dev] -= milli;
        n->whole_mask &= (uint16_t)~(1u << dev);
        c->alloc_milli += milli;
    }
    n->cpu_free -= cpu;
    n->mem_free -= mem;
    counters_node(c, n, +1);
}

void cluster_give(Cluster *c, int node, uint16_t mask, int dev, int milli, int cpu, int mem) {
    Node *n = &c->nodes[node];
    counters_node(c, n, -1);
    n->version++;
    if (mask) {
        n->whole_mask |= mask;
        for (uint16_t m = mask; m; m &= m - 1) n->gpu_free[__builtin_ctz(m)] = GPU_MILLI;
        c->alloc_milli -= (long)__builtin_popcount(mask) * GPU_MILLI;
    } else if (dev >= 0) {
        n->gpu_free[dev] += milli;
        if (n->gpu_free[dev] == GPU_MILLI) n->whole_mask |= (uint16_t)(1u << dev);
        c->alloc_milli -= milli;
    }
    n->cpu_free += cpu;
    n->mem_free += mem;
    counters_node(c, n, +1);
}
