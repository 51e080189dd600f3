/* policy.c: built-in policies and the JSON policy reader. Unknown keys and bad values are errors
 * naming the key: a typo must not silently fall back to a default. */
#include "sched/policy.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static void defaults(Policy *p) {
    memset(p, 0, sizeof *p);
    p->order = ORDER_FIFO;
    p->backfill_depth = 500;
    p->place = PLACE_FIRSTFIT;
    p->nqueues = 1;
    strcpy(p->queue_names[0], "default");
    p->queue_weight[0] = 1;
}

int policy_builtin(Policy *p, const char *name) {
    defaults(p);
    snprintf(p->name, sizeof p->name, "%s", name);
    if (!strcmp(name, "fifo")) return 0;
    if (!strcmp(name, "backfill")) { p->backfill = true; return 0; }
    if (!strcmp(name, "gang-binpack-topo")) {
        p->backfill = true;
        p->place = PLACE_BINPACK;
        p->topology = true;
        return 0;
    }
    if (!strcmp(name, "best")) {
        p->order = ORDER_SJF;
        p->aging_s = 3600;
        p->sjf_s = 1800;
        p->backfill = true;
        p->place = PLACE_BINPACK;
        p->topology = true;
        p->fgd = true;
        p->preemption = true;
        p->delay_s = 60;
        return 0;
    }
    return myr_error("unknown policy '%s' (built-ins: fifo, backfill, gang-binpack-topo, best; or a JSON file)", name);
}

static int get_enum(const cJSON *v, const char *key, const char *const *names, int n, int *out) {
    if (!cJSON_IsString(v)) return myr_error("policy: \"%s\" must be a string", key);
    for (int i = 0; i < n; i++)
        if (!strcmp(v->valuestring, names[i])) { *out = i; return 0; }
    char list[160] = "";
    for (int i = 0; i < n; i++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    return myr_error("policy: \"%s\" is '%s'; expected one of %s", key, v->valuestring, list);
}

static int get_num(const cJSON *v, const char *key, double lo, double *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble < lo) return myr_error("policy: \"%s\" must be a number >= %g", key, lo);
    *out = v->valuedouble;
    return 0;
}

static int get_bool(const cJSON *v, const char *key, bool *out) {
    if (!cJSON_IsBool(v)) return myr_error("policy: \"%s\" must be true or false", key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int parse(Policy *p, const cJSON *root) {
    static const char *const orders[] = {"fifo", "priority", "sjf"};
    static const char *const places[] = {"firstfit", "binpack", "spread"};
    static const char *const fairs[] = {"none", "drf", "proportional"};
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(root, "base");
    if (base) {
        if (!cJSON_IsString(base)) return myr_error("policy: \"base\" must name a built-in policy");
        char keep[48];
        memcpy(keep, p->name, sizeof keep);
        if (policy_builtin(p, base->valuestring)) return -1;
        memcpy(p->name, keep, sizeof keep);
    }
    for (const cJSON *v = root->child; v; v = v->next) {
        const char *k = v->string;
        double d = 0;
        int e = 0;
        if (!strcmp(k, "base") || !strcmp(k, "name") || !strcmp(k, "comment")) continue;
        else if (!strcmp(k, "order")) { if (get_enum(v, k, orders, 3, &e)) return -1; p->order = e; }
        else if (!strcmp(k, "placement")) { if (get_enum(v, k, places, 3, &e)) return -1; p->place = e; }
        else if (!strcmp(k, "fairshare")) { if (get_enum(v, k, fairs, 3, &e)) return -1; p->fair = e; }
        else if (!strcmp(k, "aging_s")) { if (get_num(v, k, 0, &p->aging_s)) return -1; }
        else if (!strcmp(k, "sjf_s")) { if (get_num(v, k, 0, &p->sjf_s)) return -1; }
        else if (!strcmp(k, "delay_s")) { if (get_num(v, k, 0, &p->delay_s)) return -1; }
        else if (!strcmp(k, "backfill")) { if (get_bool(v, k, &p->backfill)) return -1; }
        else if (!strcmp(k, "topology")) { if (get_bool(v, k, &p->topology)) return -1; }
        else if (!strcmp(k, "fgd")) { if (get_bool(v, k, &p->fgd)) return -1; }
        else if (!strcmp(k, "preemption")) { if (get_bool(v, k, &p->preemption)) return -1; }
        else if (!strcmp(k, "gang")) {
            bool g = true;
            if (get_bool(v, k, &g)) return -1;
            if (!g) return myr_error("policy: \"gang\": false is not supported (tasks of a job always start together)");
        }
        else if (!strcmp(k, "backfill_depth")) { if (get_num(v, k, 1, &d)) return -1; p->backfill_depth = (int)d; }
        else if (!strcmp(k, "hot_spares")) { if (get_num(v, k, 0, &d)) return -1; p->hot_spares = (int)d; }
        else if (!strcmp(k, "queues")) {
            if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 || cJSON_GetArraySize(v) > SCHED_MAX_QUEUES)
                return myr_error("policy: \"queues\" must be an array of 1..%d {\"name\", \"weight\"}", SCHED_MAX_QUEUES);
            p->nqueues = 0;
            for (const cJSON *q = v->child; q; q = q->next) {
                const cJSON *nm = cJSON_GetObjectItemCaseSensitive(q, "name");
                const cJSON *w = cJSON_GetObjectItemCaseSensitive(q, "weight");
                if (!cJSON_IsString(nm) || (w && (!cJSON_IsNumber(w) || w->valuedouble <= 0)))
                    return myr_error("policy: queues[%d] needs a \"name\" and a positive \"weight\"", p->nqueues);
                snprintf(p->queue_names[p->nqueues], sizeof p->queue_names[0], "%s", nm->valuestring);
                p->queue_weight[p->nqueues++] = w ? w->valuedouble : 1.0;
            }
        } else
            return myr_error("policy: unknown key \"%s\" (see docs/SCHEDULER.md for the keys)", k);
    }
    return 0;
}

int policy_load(Policy *p, const char *spec) {
    if (!strchr(spec, '.') && !strchr(spec, '/')) return policy_builtin(p, spec);
    defaults(p);
    FILE *f = fopen(spec, "rb");
    if (!f) return myr_error("cannot open policy %s: %s", spec, strerror(errno));
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *root = cJSON_Parse(buf);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return myr_error("policy %s: not a JSON object", spec);
    }
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(root, "name");
    snprintf(p->name, sizeof p->name, "%s", cJSON_IsString(nm) ? nm->valuestring : spec);
    int rc = parse(p, root);
    cJSON_Delete(root);
    if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", myr_last_error());
        return myr_error("%s: %s", spec, msg);
    }
    return 0;
}

const char *policy_describe(const Policy *p, char *buf, int n) {
    static const char *orders[] = {"fifo", "priority", "sjf"}, *places[] = {"firstfit", "binpack", "spread"},
                      *fairs[] = {"none", "drf", "proportional"};
    snprintf(buf, n, "order=%s%s placement=%s%s%s%s delay=%gs fairshare=%s spares=%d", orders[p->order],
             p->backfill ? " +easy-backfill" : "", places[p->place], p->topology ? " +topology" : "",
             p->fgd ? " +fgd" : "", p->preemption ? " +preemption" : "", p->delay_s, fairs[p->fair], p->hot_spares);
    return buf;
}
