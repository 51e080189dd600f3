/* json_load.c: finding and reading the simulator's JSON inputs (configs/hardware, configs/clusters,
 * configs/models). Malformed JSON is reported with file, line and what the parser expected;
 * missing or mistyped fields are reported with the file and the field name. */
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "sim/sim.h"
#include "util/error.h"

static int file_exists(const char *p) { return access(p, R_OK) == 0; }

int sim_config_path(const char *kind, const char *name, char *out, size_t cap) {
    size_t len = strlen(name);
    if (strchr(name, '/') || (len > 5 && !strcmp(name + len - 5, ".json"))) {
        snprintf(out, cap, "%s", name);
        if (!file_exists(out)) return myr_error("cannot read %s (check the path)", name);
        return 0;
    }
    const char *env = getenv("MYRIAD_CONFIG_DIR");
    if (env && *env) {
        snprintf(out, cap, "%s/%s/%s.json", env, kind, name);
        if (file_exists(out)) return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(out, cap, "%s/../configs/%s/%s.json", exe, kind, name);
            if (file_exists(out)) return 0;
        }
    }
    snprintf(out, cap, "configs/%s/%s.json", kind, name);
    if (file_exists(out)) return 0;
    return myr_error("unknown %s '%s': no configs/%s/%s.json (list them with: ls configs/%s)", kind, name, kind,
                     name, kind);
}

/* A small JSON syntax checker used only to explain a parse failure: it finds the first offending
 * character and says what the grammar expected there (cJSON's error pointer can land one past it). */
typedef struct {
    const char *p;
    const char *why;
} Syntax;

static void skip_ws(Syntax *x) { while (*x->p == ' ' || *x->p == '\t' || *x->p == '\n' || *x->p == '\r') x->p++; }
static int fail(Syntax *x, const char *why) { x->why = why; return -1; }

static int check_string(Syntax *x) {
    if (*x->p != '"') return fail(x, *x->p == '\'' ? "a double-quoted string (JSON has no single quotes)" : "a double-quoted string");
    x->p++;
    while (*x->p != '"') {
        if (!*x->p || *x->p == '\n') return fail(x, "a closing '\"' (the string is not terminated)");
        if ((unsigned char)*x->p < 0x20) return fail(x, "no control characters inside a string (escape them)");
        if (*x->p == '\\') {
            x->p++;
            if (!*x->p || !strchr("\"\\/bfnrtu", *x->p)) return fail(x, "a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
        }
        x->p++;
    }
    x->p++;
    return 0;
}

static int check_value(Syntax *x, int depth);

static int check_number(Syntax *x) {
    if (*x->p == '-') x->p++;
    if (!isdigit((unsigned char)*x->p)) return fail(x, "a digit");
    while (isdigit((unsigned char)*x->p)) x->p++;
    if (*x->p == '.') {
        x->p++;
        if (!isdigit((unsigned char)*x->p)) return fail(x, "a digit after the decimal point");
        while (isdigit((unsigned char)*x->p)) x->p++;
    }
    if (*x->p == 'e' || *x->p == 'E') {
        x->p++;
        if (*x->p == '+' || *x->p == '-') x->p++;
        if (!isdigit((unsigned char)*x->p)) return fail(x, "a digit in the exponent");
        while (isdigit((unsigned char)*x->p)) x->p++;
    }
    return 0;
}

static int check_value(Syntax *x, int depth) {
    if (depth > 200) return fail(x, "less nesting (more than 200 levels)");
    skip_ws(x);
    char c = *x->p;
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        x->p++;
        skip_ws(x);
        if (*x->p == close) { x->p++; return 0; }
        for (;;) {
            skip_ws(x);
            if (c == '{') {
                if (*x->p == '}') return fail(x, "another member after ',' (trailing comma before '}')");
                if (check_string(x)) return x->why[0] == 'a' && *x->p != '\'' ? fail(x, "a \"key\" string") : -1;
                skip_ws(x);
                if (*x->p != ':') return fail(x, "':' after the key");
                x->p++;
            } else if (*x->p == ']') {
                return fail(x, "another element after ',' (trailing comma before ']')");
            }
            if (check_value(x, depth + 1)) return -1;
            skip_ws(x);
            if (*x->p == ',') { x->p++; continue; }
            if (*x->p == close) { x->p++; return 0; }
            if (!*x->p) return fail(x, c == '{' ? "',' or '}' (the document ended early)" : "',' or ']' (the document ended early)");
            return fail(x, c == '{' ? "',' or '}' (a comma is missing?)" : "',' or ']' (a comma is missing?)");
        }
    }
    if (c == '"') return check_string(x);
    if (c == '-' || isdigit((unsigned char)c)) return check_number(x);
    if (!strncmp(x->p, "true", 4)) { x->p += 4; return 0; }
    if (!strncmp(x->p, "false", 5)) { x->p += 5; return 0; }
    if (!strncmp(x->p, "null", 4)) { x->p += 4; return 0; }
    if (c == '/') return fail(x, "a value (JSON has no comments)");
    if (c == '\'') return fail(x, "a double-quoted string (JSON has no single quotes)");
    if (!c) return fail(x, "a value (the document ended early)");
    return fail(x, "a value: a number, \"string\", true, false, null, {object} or [array]");
}

/* Where and why `buf` is not JSON; returns the offending position. */
static const char *diagnose(const char *buf, const char **why) {
    Syntax x = {buf, NULL};
    if (check_value(&x, 0) == 0) {
        skip_ws(&x);
        if (*x.p) { *why = "the end of the document after the top-level value"; return x.p; }
        *why = NULL;
        return NULL;
    }
    *why = x.why;
    return x.p;
}

static cJSON *parse_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { myr_error("cannot open %s", path); return NULL; }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (len < 0 || len > (64 << 20)) { fclose(f); myr_error("%s: unreadable or too large", path); return NULL; }
    char *buf = malloc((size_t)len + 1);
    if (!buf) { fclose(f); myr_error("out of memory reading %s", path); return NULL; }
    size_t got = fread(buf, 1, (size_t)len, f);
    fclose(f);
    buf[got] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(buf, &end, 1);
    if (!root) {
        const char *why = NULL;
        const char *at = diagnose(buf, &why);
        if (!at) { /* our checker accepts it: fall back to cJSON's pointer */
            at = end ? end : cJSON_GetErrorPtr();
            why = "valid JSON";
        }
        if (!at || at < buf || at > buf + got) at = buf + got;
        int line = 1, col = 1;
        for (const char *p = buf; p < at; p++) {
            if (*p == '\n') { line++; col = 1; } else col++;
        }
        myr_error("%s:%d:%d: malformed JSON: expected %s", path, line, col, why);
        free(buf);
        return NULL;
    }
    free(buf);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        myr_error("%s:1: expected a JSON object at the top level", path);
        return NULL;
    }
    return root;
}

/* Optional number field: keeps *out when absent; -1 when present but not a number. */
static int get_num(const char *path, const cJSON *obj, const char *key, double *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it || cJSON_IsNull(it)) return 0;
    if (!cJSON_IsNumber(it)) return myr_error("%s: field \"%s\" must be a number", path, key);
    *out = it->valuedouble;
    return 0;
}
static int get_int(const char *path, const cJSON *obj, const char *key, int *out) {
    double v = *out;
    if (get_num(path, obj, key, &v)) return -1;
    if (v != (int)v) return myr_error("%s: field \"%s\" must be an integer", path, key);
    *out = (int)v;
    return 0;
}
static int get_bool(const char *path, const cJSON *obj, const char *key, int *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it || cJSON_IsNull(it)) return 0;
    if (!cJSON_IsBool(it)) return myr_error("%s: field \"%s\" must be true or false", path, key);
    *out = cJSON_IsTrue(it);
    return 0;
}
static int get_str(const char *path, const cJSON *obj, const char *key, char *out, size_t cap) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it || cJSON_IsNull(it)) return 0;
    if (!cJSON_IsString(it)) return myr_error("%s: field \"%s\" must be a string", path, key);
    snprintf(out, cap, "%s", it->valuestring);
    return 0;
}
static int need(const char *path, const cJSON *obj, const char *key) {
    if (!cJSON_GetObjectItemCaseSensitive(obj, key)) return myr_error("%s: missing field \"%s\"", path, key);
    return 0;
}

/* Reject fields the loader does not know: a typo must not silently fall back to a default. */
static int check_keys(const char *path, const char *where, const cJSON *obj, const char *const *known) {
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        int ok = !strcmp(it->string, "sources") || !strcmp(it->string, "source") || !strcmp(it->string, "notes");
        for (const char *const *k = known; *k && !ok; k++) ok = !strcmp(it->string, *k);
        if (!ok) {
            char list[768] = "";
            size_t n = 0;
            for (const char *const *k = known; *k && n < sizeof list - 40; k++)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", *k);
            return myr_error("%s: unknown field \"%s\"%s%s (known: %s)", path, it->string, where[0] ? " in " : "", where, list);
        }
    }
    return 0;
}

static const char *const gpu_keys[] = {"name", "peak_tflops", "hbm_gib", "hbm_tbps", "scaleup_gbps", "nics", "nic_gbps",
                                       "tdp_w", "sms", "gemm_eff", "gemm_eff_fp8", "sustained", "attn_eff", "attn_eff_fa2", "hbm_eff",
                                       "kernel_us", "ce_ns_per_logit", "tile", "gemm_table", "measured", NULL};
static const char *const dtype_keys[] = {"fp32", "tf32", "bf16", "fp16", "fp8", NULL};
static const char *const cluster_keys[] = {"name", "gpu", "gpus", "gpus_per_node", "scaleup_domain", "scaleup_gbps",
                                           "scaleup_latency_us", "nics_per_gpu", "nic_gbps", "fabric", "sharp", "topology",
                                           "planes", "tiers", "net_eff", "scaleup_eff", "pue", "host_w_per_gpu",
                                           "gpu_hour_usd", "switch_usd", "optic_usd", "nic_usd", "gpu_usd", "storage_gbps",
                                           "host_mem_gbps", "measured", "straggler_cv", NULL};
static const char *const tier_keys[] = {"name", "radix", "oversubscription", "latency_us", "gpus_below", NULL};
static const char *const model_keys[] = {"name", "arch", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq",
                                         "experts", "top_k", "expert_ffn", "tied_embeddings", "dropout", "shared_experts",
                                         "shared_ffn", "dense_layers", "route_nodes", "q_lora_rank", "kv_lora_rank",
                                         "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "mtp_layers", NULL};

void sim_gpu_defaults(GpuSpec *g) {
    memset(g, 0, sizeof *g);
    g->nics = 1;
    g->sms = 108;
    g->gemm_eff = 0.80;
    g->attn_eff = 0.5;
    g->sustained = 1.0;
    g->hbm_eff = 0.80;
    g->kernel_us = 4.0;
    g->tile = 128;
}

/* "gemm_table": [[M, N, K, GFLOP/s], ...] measured by myriad bench calibrate */
static int get_gemm_table(const char *path, const cJSON *root, GpuSpec *g) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "gemm_table");
    if (!t) return 0;
    if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) > 64)
        return myr_error("%s: \"gemm_table\" must be an array of at most 64 [M, N, K, GFLOP/s] rows", path);
    g->ngemm = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, t) {
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != 4)
            return myr_error("%s: gemm_table[%d] must be [M, N, K, GFLOP/s]", path, g->ngemm);
        for (int j = 0; j < 4; j++) {
            const cJSON *x = cJSON_GetArrayItem(row, j);
            if (!cJSON_IsNumber(x) || x->valuedouble <= 0)
                return myr_error("%s: gemm_table[%d][%d] must be a positive number", path, g->ngemm, j);
            g->gemm_table[g->ngemm][j] = x->valuedouble;
        }
        g->gemm_table[g->ngemm][3] *= 1e9;
        g->ngemm++;
    }
    return 0;
}

int sim_load_gpu(const char *name, GpuSpec *g) {
    char path[1024];
    if (sim_config_path("hardware", name, path, sizeof path)) return -1;
    cJSON *root = parse_file(path);
    if (!root) return -1;
    sim_gpu_defaults(g);
    int rc = check_keys(path, "", root, gpu_keys);
    snprintf(g->name, sizeof g->name, "%s", name);
    if (!rc) rc |= get_str(path, root, "name", g->name, sizeof g->name);
    rc |= need(path, root, "peak_tflops");
    const cJSON *peak = cJSON_GetObjectItemCaseSensitive(root, "peak_tflops");
    if (!rc && !cJSON_IsObject(peak)) rc = myr_error("%s: \"peak_tflops\" must be an object {\"bf16\": ...}", path);
    if (!rc) rc = check_keys(path, "peak_tflops", peak, dtype_keys);
    for (int d = 0; !rc && d < DT_COUNT; d++) rc |= get_num(path, peak, sim_dtype_name(d), &g->peak_tflops[d]);
    if (!rc) rc |= need(path, root, "hbm_gib") | need(path, root, "hbm_tbps");
    if (!rc) {
        rc |= get_num(path, root, "hbm_gib", &g->hbm_gib);
        rc |= get_num(path, root, "hbm_tbps", &g->hbm_tbps);
        rc |= get_num(path, root, "scaleup_gbps", &g->scaleup_gbps);
        rc |= get_int(path, root, "nics", &g->nics);
        rc |= get_num(path, root, "nic_gbps", &g->nic_gbps);
        rc |= get_num(path, root, "tdp_w", &g->tdp_w);
        rc |= get_int(path, root, "sms", &g->sms);
        rc |= get_num(path, root, "gemm_eff", &g->gemm_eff);
        rc |= get_num(path, root, "gemm_eff_fp8", &g->gemm_eff_fp8);
        rc |= get_num(path, root, "sustained", &g->sustained);
        rc |= get_num(path, root, "attn_eff", &g->attn_eff);
        rc |= get_num(path, root, "attn_eff_fa2", &g->attn_eff_fa2);
        rc |= get_num(path, root, "hbm_eff", &g->hbm_eff);
        rc |= get_num(path, root, "kernel_us", &g->kernel_us);
        rc |= get_num(path, root, "ce_ns_per_logit", &g->ce_ns_per_logit);
        rc |= get_int(path, root, "tile", &g->tile);
        if (!rc) rc = get_gemm_table(path, root, g);
    }
    cJSON_Delete(root);
    if (rc) return -1;
    if (g->peak_tflops[DT_BF16] <= 0 && g->peak_tflops[DT_FP16] <= 0)
        return myr_error("%s: peak_tflops needs bf16 or fp16", path);
    if (g->hbm_gib <= 0 || g->hbm_tbps <= 0) return myr_error("%s: hbm_gib and hbm_tbps must be positive", path);
    if (g->sms <= 0 || g->gemm_eff <= 0 || g->gemm_eff > 1 || g->hbm_eff <= 0 || g->hbm_eff > 1 || g->attn_eff <= 0 ||
        g->attn_eff > 1 || g->sustained <= 0 || g->sustained > 1 || g->gemm_eff_fp8 < 0 || g->gemm_eff_fp8 > 1 || g->attn_eff_fa2 < 0 || g->attn_eff_fa2 > 1 ||
        g->tile < 1 || g->kernel_us < 0 || g->ce_ns_per_logit < 0)
        return myr_error("%s: sms and tile must be positive, kernel_us and ce_ns_per_logit >= 0 and gemm_eff, gemm_eff_fp8, attn_eff, "
                         "attn_eff_fa2, hbm_eff in (0, 1]", path);
    return 0;
}

void sim_cluster_defaults(ClusterSpec *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "default");
    snprintf(c->gpu, sizeof c->gpu, "a100-80g");
    c->gpus_per_node = 8;
    c->scaleup_domain = 8;
    c->scaleup_latency_us = 3.0;
    c->planes = 1;
    c->ntiers = 2;
    snprintf(c->tier[0].name, sizeof c->tier[0].name, "leaf");
    c->tier[0].radix = 40; c->tier[0].oversub = 1; c->tier[0].latency_us = 6.0;
    snprintf(c->tier[1].name, sizeof c->tier[1].name, "spine");
    c->tier[1].radix = 40; c->tier[1].oversub = 1; c->tier[1].latency_us = 7.0;
    c->net_eff = 0.90;
    c->scaleup_eff = 0.80;
    c->pue = 1.2;
    c->host_w_per_gpu = 150;
    c->gpu_hour_usd = 2.0;
    c->switch_usd = 20000;
    c->optic_usd = 500;
    c->nic_usd = 1500;
    c->gpu_usd = 15000;
    c->storage_gbps = 100;
    c->host_mem_gbps = 20;
}

int sim_load_cluster(const char *name, ClusterSpec *c) {
    char path[1024];
    if (sim_config_path("clusters", name, path, sizeof path)) return -1;
    cJSON *root = parse_file(path);
    if (!root) return -1;
    sim_cluster_defaults(c);
    snprintf(c->name, sizeof c->name, "%s", name);
    int rc = check_keys(path, "", root, cluster_keys);
    char fabric[32] = "infiniband", topo[32] = "fat-tree";
    if (rc) { cJSON_Delete(root); return -1; }
    rc |= get_str(path, root, "name", c->name, sizeof c->name);
    rc |= get_str(path, root, "gpu", c->gpu, sizeof c->gpu);
    rc |= get_int(path, root, "gpus", &c->gpus);
    rc |= get_int(path, root, "gpus_per_node", &c->gpus_per_node);
    rc |= get_int(path, root, "scaleup_domain", &c->scaleup_domain);
    rc |= get_num(path, root, "scaleup_gbps", &c->scaleup_gbps);
    rc |= get_num(path, root, "scaleup_latency_us", &c->scaleup_latency_us);
    rc |= get_int(path, root, "nics_per_gpu", &c->nics_per_gpu);
    rc |= get_num(path, root, "nic_gbps", &c->nic_gbps);
    rc |= get_str(path, root, "fabric", fabric, sizeof fabric);
    rc |= get_bool(path, root, "sharp", &c->sharp);
    rc |= get_str(path, root, "topology", topo, sizeof topo);
    rc |= get_int(path, root, "planes", &c->planes);
    c->net_eff = -1;
    rc |= get_num(path, root, "net_eff", &c->net_eff);
    rc |= get_num(path, root, "scaleup_eff", &c->scaleup_eff);
    rc |= get_num(path, root, "pue", &c->pue);
    rc |= get_num(path, root, "host_w_per_gpu", &c->host_w_per_gpu);
    rc |= get_num(path, root, "gpu_hour_usd", &c->gpu_hour_usd);
    rc |= get_num(path, root, "switch_usd", &c->switch_usd);
    rc |= get_num(path, root, "optic_usd", &c->optic_usd);
    rc |= get_num(path, root, "nic_usd", &c->nic_usd);
    rc |= get_num(path, root, "gpu_usd", &c->gpu_usd);
    rc |= get_num(path, root, "storage_gbps", &c->storage_gbps);
    rc |= get_num(path, root, "host_mem_gbps", &c->host_mem_gbps);
    rc |= get_num(path, root, "straggler_cv", &c->straggler_cv);

    const cJSON *tiers = cJSON_GetObjectItemCaseSensitive(root, "tiers");
    if (!rc && tiers) {
        if (!cJSON_IsArray(tiers) || cJSON_GetArraySize(tiers) < 1 || cJSON_GetArraySize(tiers) > SIM_MAX_TIERS)
            rc = myr_error("%s: \"tiers\" must be an array of 1 to %d switch tiers (leaf first)", path, SIM_MAX_TIERS);
        else {
            c->ntiers = cJSON_GetArraySize(tiers);
            for (int i = 0; i < c->ntiers && !rc; i++) {
                const cJSON *t = cJSON_GetArrayItem(tiers, i);
                NetTier *nt = &c->tier[i];
                nt->radix = i ? c->tier[i - 1].radix : 40;
                nt->oversub = 1;
                nt->latency_us = 6.0 + i;
                snprintf(nt->name, sizeof nt->name, "tier%d", i + 1);
                if (!cJSON_IsObject(t)) { rc = myr_error("%s: tiers[%d] must be an object", path, i); break; }
                char where[32];
                snprintf(where, sizeof where, "tiers[%d]", i);
                if (check_keys(path, where, t, tier_keys)) { rc = -1; break; }
                rc |= get_str(path, t, "name", nt->name, sizeof nt->name);
                rc |= get_int(path, t, "radix", &nt->radix);
                rc |= get_num(path, t, "oversubscription", &nt->oversub);
                rc |= get_num(path, t, "latency_us", &nt->latency_us);
                rc |= get_num(path, t, "gpus_below", &nt->gpus_below);
                if (!rc && (nt->radix < 2 || nt->oversub < 1))
                    rc = myr_error("%s: tiers[%d]: radix must be >= 2 and oversubscription >= 1", path, i);
            }
        }
    }
    cJSON_Delete(root);
    if (rc) return -1;
    if (!strcmp(fabric, "infiniband") || !strcmp(fabric, "ib")) c->roce = 0;
    else if (!strcmp(fabric, "roce") || !strcmp(fabric, "ethernet")) c->roce = 1;
    else return myr_error("%s: fabric must be \"infiniband\" or \"roce\", got \"%s\"", path, fabric);
    if (c->net_eff < 0) c->net_eff = c->roce ? 0.85 : 0.90; /* see docs/SIMULATOR.md, defaults */
    if (c->net_eff <= 0 || c->net_eff > 1 || c->scaleup_eff <= 0 || c->scaleup_eff > 1)
        return myr_error("%s: net_eff and scaleup_eff must be in (0, 1]", path);
    if (!strcmp(topo, "fat-tree")) c->rail_optimized = 0;
    else if (!strcmp(topo, "rail-optimized")) c->rail_optimized = 1;
    else if (!strcmp(topo, "rail-only")) c->rail_optimized = c->rail_only = 1;
    else return myr_error("%s: topology must be \"fat-tree\", \"rail-optimized\" or \"rail-only\", got \"%s\"", path, topo);
    if (c->straggler_cv < 0 || c->straggler_cv > 0.5) return myr_error("%s: straggler_cv must be in [0, 0.5]", path);
    if (c->roce && c->sharp) return myr_error("%s: SHARP in-network reduction needs InfiniBand (set sharp false)", path);
    if (c->gpus_per_node < 1 || c->scaleup_domain < 1 || c->planes < 1)
        return myr_error("%s: gpus_per_node, scaleup_domain and planes must be positive", path);
    if (c->scaleup_domain % c->gpus_per_node && c->gpus_per_node % c->scaleup_domain)
        return myr_error("%s: scaleup_domain %d and gpus_per_node %d must divide one another", path,
                         c->scaleup_domain, c->gpus_per_node);
    return 0;
}

int sim_load_model(const char *name, SimModel *m) {
    char path[1024];
    if (sim_config_path("models", name, path, sizeof path)) return -1;
    cJSON *root = parse_file(path);
    if (!root) return -1;
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    char arch[16] = "gpt2";
    int tied = -1, dropout = -1;
    int rc = check_keys(path, "", root, model_keys);
    const char *req[] = {"layers", "hidden", "heads", "vocab"};
    for (int i = 0; i < 4 && !rc; i++) rc |= need(path, root, req[i]);
    m->seq = 2048;
    m->top_k = 1;
    if (!rc) {
        rc |= get_str(path, root, "name", m->name, sizeof m->name);
        rc |= get_str(path, root, "arch", arch, sizeof arch);
        rc |= get_int(path, root, "layers", &m->layers);
        rc |= get_int(path, root, "hidden", &m->hidden);
        rc |= get_int(path, root, "heads", &m->heads);
        m->kv_heads = m->heads;
        rc |= get_int(path, root, "kv_heads", &m->kv_heads);
        rc |= get_int(path, root, "ffn", &m->ffn);
        rc |= get_int(path, root, "vocab", &m->vocab);
        rc |= get_int(path, root, "seq", &m->seq);
        rc |= get_int(path, root, "experts", &m->experts);
        rc |= get_int(path, root, "top_k", &m->top_k);
        rc |= get_int(path, root, "expert_ffn", &m->expert_ffn);
        rc |= get_int(path, root, "shared_experts", &m->shared_experts);
        rc |= get_int(path, root, "shared_ffn", &m->shared_ffn);
        rc |= get_int(path, root, "dense_layers", &m->dense_layers);
        rc |= get_int(path, root, "route_nodes", &m->route_nodes);
        rc |= get_int(path, root, "q_lora_rank", &m->q_lora);
        rc |= get_int(path, root, "kv_lora_rank", &m->kv_lora);
        rc |= get_int(path, root, "qk_nope_head_dim", &m->qk_nope);
        rc |= get_int(path, root, "qk_rope_head_dim", &m->qk_rope);
        rc |= get_int(path, root, "v_head_dim", &m->v_head);
        rc |= get_int(path, root, "mtp_layers", &m->mtp);
        rc |= get_bool(path, root, "tied_embeddings", &tied);
        rc |= get_bool(path, root, "dropout", &dropout);
    }
    cJSON_Delete(root);
    if (rc) return -1;
    SimArch ar;
    if (sim_arch_parse(arch, &ar)) return myr_error("%s: arch must be \"gpt2\", \"llama\" or \"nemotron\", got \"%s\"", path, arch);
    sim_model_set_arch(m, ar);
    if (tied >= 0) m->tied = tied;
    if (dropout >= 0) m->dropout = dropout;
    if (!m->ffn) m->ffn = 4 * m->hidden;
    if (m->experts > 1 && !m->expert_ffn) m->expert_ffn = m->ffn;
    if (m->layers < 1 || m->hidden < 1 || m->heads < 1 || m->kv_heads < 1 || m->vocab < 1 || m->seq < 1)
        return myr_error("%s: layers, hidden, heads, kv_heads, vocab and seq must be positive", path);
    if (m->hidden % m->heads || m->heads % m->kv_heads)
        return myr_error("%s: hidden must be a multiple of heads, and heads a multiple of kv_heads", path);
    if (m->experts > 1 && (m->top_k < 1 || m->top_k > m->experts))
        return myr_error("%s: top_k must be between 1 and experts", path);
    if (m->shared_experts < 0 || m->shared_ffn < 0 || m->dense_layers < 0 || m->route_nodes < 0 || m->mtp < 0 ||
        m->q_lora < 0 || m->kv_lora < 0 || m->qk_nope < 0 || m->qk_rope < 0 || m->v_head < 0)
        return myr_error("%s: shared_experts, shared_ffn, dense_layers, route_nodes, mtp_layers and the MLA ranks and "
                         "head dims must not be negative", path);
    if ((m->shared_experts || m->dense_layers || m->route_nodes) && m->experts <= 1)
        return myr_error("%s: shared_experts, dense_layers and route_nodes describe a mixture of experts: give experts", path);
    if (m->dense_layers >= m->layers) return myr_error("%s: dense_layers %d must be below the %d layers", path, m->dense_layers, m->layers);
    if (m->kv_lora > 0 && (m->qk_nope < 1 || m->qk_rope < 1 || m->v_head < 1))
        return myr_error("%s: multi-head latent attention (kv_lora_rank) needs qk_nope_head_dim, qk_rope_head_dim and "
                         "v_head_dim", path);
    return 0;
}
