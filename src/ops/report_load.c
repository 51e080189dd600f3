/* report_load.c: reading a run's logs for `myriad report`. A line with "event" is a launcher
 * event (`myriad run --events`); a line with "step" and "loss" is a training-log step
 * (`myriad train --log`). Fields read, including the per-rank step seconds and `straggler`
 * events of the straggler detector: docs/OPERATIONS.md. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops/report.h"
#include "util/error.h"

static void series_add(Series *s, double x, double y) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->x = realloc(s->x, (size_t)s->cap * sizeof *s->x);
        s->y = realloc(s->y, (size_t)s->cap * sizeof *s->y);
    }
    s->x[s->n] = x, s->y[s->n] = y, s->n++;
}

static int num(const cJSON *o, const char *key, double *out) {
    const cJSON *v = cJSON_GetObjectItem(o, key);
    if (!cJSON_IsNumber(v)) return 0;
    *out = v->valuedouble;
    return 1;
}

static const char *str(const cJSON *o, const char *key) {
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, key));
    return s ? s : "";
}

static void add_config(RunData *d, const char *key, const char *value) {
    for (int i = 0; i < d->nconfig; i++)
        if (!strcmp(d->config[i].key, key)) return; /* the first word stands */
    d->config = realloc(d->config, (size_t)(d->nconfig + 1) * sizeof *d->config);
    ConfigItem *c = &d->config[d->nconfig++];
    snprintf(c->key, sizeof c->key, "%s", key);
    c->value = strdup(value);
}

static void set_config(RunData *d, const char *key, const char *value) {
    for (int i = 0; i < d->nconfig; i++)
        if (!strcmp(d->config[i].key, key)) {
            free(d->config[i].value);
            d->config[i].value = strdup(value);
            return;
        }
    add_config(d, key, value);
}

/* ---- training log */

/* The run's configuration as `train --log` records it on the log's first line ("config": the
 * resolved settings, defaults included, and the command): nested objects flattened, the layout's
 * sizes under their flag names (tp, pp, dp, ...), the model's as model.NAME. */
static void config_from_log(RunData *d, const cJSON *cfg, const char *prefix) {
    const cJSON *v;
    cJSON_ArrayForEach(v, cfg) {
        char key[48], val[64];
        const char *text = val;
        snprintf(key, sizeof key, "%s%s", prefix, v->string ? v->string : "");
        if (cJSON_IsObject(v)) {
            char sub[sizeof key + 1];
            snprintf(sub, sizeof sub, "%s.", key);
            config_from_log(d, v, !strcmp(key, "layout") ? "" : sub);
            continue;
        }
        if (cJSON_IsString(v)) text = v->valuestring;
        else if (cJSON_IsBool(v)) text = cJSON_IsTrue(v) ? "true" : "false";
        else if (cJSON_IsNumber(v)) snprintf(val, sizeof val, "%.10g", v->valuedouble);
        else continue;
        add_config(d, key, text);
    }
}

static void train_line(RunData *d, const cJSON *o) {
    double step = 0, v;
    num(o, "step", &step);
    const cJSON *cfg = cJSON_GetObjectItem(o, "config");
    if (cJSON_IsObject(cfg)) config_from_log(d, cfg, "");
    if (num(o, "loss", &v)) series_add(&d->loss, step, v);
    if (num(o, "val_loss", &v)) series_add(&d->val_loss, step, v);
    if (num(o, "tokens_per_s", &v)) series_add(&d->tokens_per_s, step, v);
    if (num(o, "mfu", &v)) series_add(&d->mfu, step, v);
    const cJSON *peak = cJSON_GetObjectItem(o, "mfu_peak"); /* the denominator, when it was set or changed */
    if (cJSON_IsObject(peak) && num(peak, "flops", &v)) {
        char b[160];
        snprintf(b, sizeof b, "%.4g GFLOP/s (%s)", v / 1e9, str(peak, "source"));
        set_config(d, "MFU denominator", b); /* the last one stands: a raised denominator replaces it */
    }
    if (num(o, "ms", &v)) series_add(&d->step_ms, step, v);
    d->train_lines++;
}

/* ---- launcher events */

static void add_event(RunData *d, double t, const char *name, TimelineLane lane, const char *label) {
    d->events = realloc(d->events, (size_t)(d->nevents + 1) * sizeof *d->events);
    RunEvent *e = &d->events[d->nevents++];
    e->t = t, e->lane = lane;
    snprintf(e->event, sizeof e->event, "%s", name);
    snprintf(e->label, sizeof e->label, "%s", label);
}

static void close_attempt(RunData *d, double t) {
    if (d->nattempts && d->attempts[d->nattempts - 1].t1 < 0) d->attempts[d->nattempts - 1].t1 = t;
}

static void add_cell(RunData *d, int rank, long long step, double s) {
    if (rank < 0 || !(s >= 0) || !isfinite(s)) return;
    if (d->ncells == d->cells_cap) {
        d->cells_cap = d->cells_cap ? 2 * d->cells_cap : 1024;
        d->cells = realloc(d->cells, (size_t)d->cells_cap * sizeof *d->cells);
    }
    d->cells[d->ncells] = (RankStep){rank, step, s, d->ncells};
    d->ncells++;
}

/* Per-rank step seconds in any event: {"rank": R, "step": S, "step_s": x}, {"step": S,
 * "step_s": [x0, x1, ...]} (indexed by rank), or {"step": S, "ranks": [{"rank": R, "step_s": x}]};
 * the step may be given as "last_step" (the end of a window) instead. */
static void rank_steps(RunData *d, const cJSON *o) {
    double step;
    if (!num(o, "step", &step) && !num(o, "last_step", &step)) return;
    const cJSON *ss = cJSON_GetObjectItem(o, "step_s"), *ranks = cJSON_GetObjectItem(o, "ranks");
    double rank;
    if (cJSON_IsNumber(ss) && num(o, "rank", &rank)) add_cell(d, (int)rank, (long long)step, ss->valuedouble);
    else if (cJSON_IsArray(ss)) {
        int r = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, ss) {
            if (cJSON_IsNumber(x)) add_cell(d, r, (long long)step, x->valuedouble);
            r++;
        }
    } else if (cJSON_IsArray(ranks)) {
        const cJSON *x;
        double v;
        cJSON_ArrayForEach(x, ranks) if (num(x, "rank", &rank) && num(x, "step_s", &v)) add_cell(d, (int)rank, (long long)step, v);
    }
}

static void straggler_event(RunData *d, double t, const cJSON *o) {
    Straggler s = {.t = t, .rank = -1, .relative = NAN, .individual = NAN};
    double v;
    if (num(o, "rank", &v)) s.rank = (int)v;
    snprintf(s.host, sizeof s.host, "%s", str(o, "host"));
    snprintf(s.section, sizeof s.section, "%s", str(o, "section"));
    const cJSON *sc = cJSON_GetObjectItem(o, "scores");
    const cJSON *from = cJSON_IsObject(sc) ? sc : o;
    if (num(from, "relative", &v)) s.relative = v;
    if (num(from, "individual", &v)) s.individual = v;
    d->stragglers = realloc(d->stragglers, (size_t)(d->nstragglers + 1) * sizeof *d->stragglers);
    d->stragglers[d->nstragglers++] = s;
    char label[200];
    snprintf(label, sizeof label, "straggler: rank %d (%s), %s, relative %.2f, individual %.2f", s.rank, s.host, s.section,
             s.relative, s.individual);
    add_event(d, t, "straggler", TL_STRAGGLER, label);
}

/* The launch command's training flags as configuration ("--tp 2" -> tp = 2). */
static void config_from_cmd(RunData *d, const char *cmd) {
    char *copy = strdup(cmd), *save = NULL, *prev = NULL;
    int after_sub = 0;
    for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        if (!after_sub) { /* skip the launcher's own arguments: flags count from the subcommand on */
            const char *base = strrchr(tok, '/');
            if (prev && strstr(prev, "myriad")) after_sub = 1, add_config(d, "subcommand", tok);
            prev = (char *)(base ? base + 1 : tok);
            continue;
        }
        if (!strncmp(tok, "--", 2)) {
            char *next = save && *save && strncmp(save, "--", 2) ? strtok_r(NULL, " ", &save) : NULL;
            add_config(d, tok + 2, next ? next : "on");
        }
    }
    free(copy);
}

/* The time ledger: the last `goodput` event wins (one per launcher run; a report of several runs
 * shows the last). */
static void goodput_event(RunData *d, const cJSON *o) {
    const cJSON *sec = cJSON_GetObjectItem(o, "seconds"), *it;
    if (!cJSON_IsObject(sec)) return;
    d->have_ledger = 1, d->ncauses = 0, d->nsegments = 0;
    num(o, "wall_s", &d->ledger_wall_s), num(o, "effective", &d->effective);
    cJSON_ArrayForEach(it, sec) {
        if (!cJSON_IsNumber(it) || d->ncauses == REPORT_CAUSES) continue;
        snprintf(d->cause[d->ncauses], sizeof d->cause[0], "%s", it->string);
        d->cause_s[d->ncauses++] = it->valuedouble;
    }
    const cJSON *tl = cJSON_GetObjectItem(o, "timeline");
    free(d->segments);
    d->segments = calloc((size_t)cJSON_GetArraySize(tl) + 1, sizeof *d->segments);
    cJSON_ArrayForEach(it, tl) {
        const cJSON *a = cJSON_GetArrayItem(it, 0), *b = cJSON_GetArrayItem(it, 1), *c = cJSON_GetArrayItem(it, 2),
                    *at = cJSON_GetArrayItem(it, 3);
        if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !cJSON_IsString(c)) continue;
        int k = 0;
        while (k < d->ncauses && strcmp(d->cause[k], c->valuestring)) k++;
        if (k == d->ncauses) continue;
        d->segments[d->nsegments++] = (CauseSegment){a->valuedouble, b->valuedouble, k, cJSON_IsNumber(at) ? at->valueint : 0};
    }
}

static void event_line(RunData *d, const cJSON *o) {
    double t = 0, v;
    num(o, "t", &t);
    const char *ev = str(o, "event");
    char label[200];
    d->event_lines++;
    rank_steps(d, o);
    if (!strcmp(ev, "launch")) {
        close_attempt(d, t);
        d->attempts = realloc(d->attempts, (size_t)(d->nattempts + 1) * sizeof *d->attempts);
        RunAttempt *a = &d->attempts[d->nattempts++];
        a->t0 = t, a->t1 = -1, a->attempt = num(o, "attempt", &v) ? (int)v : d->nattempts - 1;
        a->hosts[0] = 0;
        const cJSON *h;
        cJSON_ArrayForEach(h, cJSON_GetObjectItem(o, "hosts")) if (cJSON_IsString(h)) {
            size_t used = strlen(a->hosts);
            snprintf(a->hosts + used, sizeof a->hosts - used, "%s%s", used ? " " : "", h->valuestring);
        }
        if (d->nattempts == 1) {
            add_config(d, "launcher", str(o, "launcher"));
            if (a->hosts[0]) add_config(d, "hosts", a->hosts);
            add_config(d, "command", str(o, "cmd"));
            config_from_cmd(d, str(o, "cmd"));
        }
        snprintf(label, sizeof label, "launch: attempt %d%s%s", a->attempt, a->hosts[0] ? " on " : "", a->hosts);
        add_event(d, t, ev, TL_ATTEMPT, label);
    } else if (!strcmp(ev, "connected")) {
        if (num(o, "ranks", &v)) {
            char n[32];
            snprintf(n, sizeof n, "%.0f", v);
            add_config(d, "ranks", n);
        }
        add_event(d, t, ev, TL_ATTEMPT, "connected: every rank said hello");
    } else if (!strcmp(ev, "exit") || !strcmp(ev, "heartbeat-timeout")) {
        if (num(o, "rank", &v)) {
            double step = -1;
            num(o, "step", &step);
            snprintf(label, sizeof label, "%s: rank %.0f on %s at step %.0f%s%s", ev, v, str(o, "host"), step,
                     *str(o, "why") ? ", " : "", str(o, "why"));
            add_event(d, t, ev, TL_FAILURE, label);
        } else {
            double code = 0;
            num(o, "code", &code);
            snprintf(label, sizeof label, "%s exited with code %.0f", str(o, "what"), code);
            add_event(d, t, ev, code ? TL_FAILURE : TL_ATTEMPT, label);
            close_attempt(d, t);
        }
    } else if (!strcmp(ev, "kill")) {
        add_event(d, t, ev, TL_FAILURE, "teardown: every rank killed");
        close_attempt(d, t);
    } else if (!strcmp(ev, "giving-up") || !strcmp(ev, "auth-refused") || !strcmp(ev, "exit-stuck") ||
               !strcmp(ev, "interrupted")) {
        snprintf(label, sizeof label, "%s: %s%s", ev, str(o, "why"), str(o, "reason"));
        add_event(d, t, ev, TL_FAILURE, label);
    } else if (!strcmp(ev, "restart")) {
        snprintf(label, sizeof label, "restart after: %s", str(o, "after"));
        add_event(d, t, ev, TL_RECOVERY, label);
    } else if (!strcmp(ev, "spare-used")) {
        snprintf(label, sizeof label, "spare %s replaces %s%s%s%s", str(o, "spare"), str(o, "lost"), *str(o, "why") ? " (" : "",
                 str(o, "why"), *str(o, "why") ? ")" : "");
        add_event(d, t, ev, TL_RECOVERY, label);
    } else if (!strcmp(ev, "resumed")) {
        double first = 0, rec = 0;
        num(o, "first_step", &first), num(o, "recomputed_steps", &rec);
        snprintf(label, sizeof label, "resumed from %s at step %.0f (%.0f recomputed)", str(o, "source"), first, rec);
        add_event(d, t, ev, TL_RECOVERY, label);
    } else if (!strcmp(ev, "preflight")) {
        int nf = cJSON_GetArraySize(cJSON_GetObjectItem(o, "flagged"));
        snprintf(label, sizeof label, "pre-flight check: %d finding%s%s", nf, nf == 1 ? "" : "s",
                 cJSON_IsTrue(cJSON_GetObjectItem(o, "ok")) ? "" : ", run refused");
        add_event(d, t, ev, TL_RECOVERY, label);
    } else if (!strcmp(ev, "inject") || !strcmp(ev, "link-cut")) {
        snprintf(label, sizeof label, "%s: %s%s%s", ev, str(o, "fault"), *str(o, "host") ? " " : "", str(o, "host"));
        add_event(d, t, ev, TL_FAULT, label);
    } else if (!strcmp(ev, "straggler")) {
        straggler_event(d, t, o);
    } else if (!strcmp(ev, "goodput")) {
        goodput_event(d, o);
    } else if (!strcmp(ev, "finished")) {
        d->have_finished = 1;
        num(o, "goodput", &d->goodput), num(o, "productive_s", &d->productive_s), num(o, "wall_s", &d->wall_s);
        if (num(o, "restarts", &v)) d->restarts = (int)v;
        if (num(o, "steps", &v)) d->steps = (long long)v;
        snprintf(d->status, sizeof d->status, "%s", str(o, "status"));
        snprintf(label, sizeof label, "finished: %s, goodput %.1f%%", d->status, 100 * d->goodput);
        add_event(d, t, ev, TL_ATTEMPT, label);
        close_attempt(d, t);
    }
}

/* ---- files */

static void config_json(RunData *d, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *root = cJSON_Parse(buf);
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        char key[48], val[160];
        snprintf(key, sizeof key, "model.%s", it->string);
        if (cJSON_IsNumber(it)) snprintf(val, sizeof val, "%.10g", it->valuedouble);
        else if (cJSON_IsString(it)) snprintf(val, sizeof val, "%s", it->valuestring);
        else if (cJSON_IsBool(it)) snprintf(val, sizeof val, "%s", cJSON_IsTrue(it) ? "true" : "false");
        else continue;
        add_config(d, key, val);
    }
    cJSON_Delete(root);
}

static int load_jsonl(RunData *d, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return myr_error("report: cannot open %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0, used = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        lineno++;
        int complete = line[len - 1] == '\n';
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ')) line[--len] = 0;
        if (!len) continue;
        cJSON *o = cJSON_Parse(line);
        if (!o) {
            if (!complete) break; /* a last line cut short by a crash: the lines before it stand */
            myr_error("report: %s:%ld: not a JSON object (%.60s); a training log (--log) or event log (--events) has "
                      "one JSON object per line", path, lineno, line);
            free(line), fclose(f);
            return -1;
        }
        if (cJSON_IsString(cJSON_GetObjectItem(o, "event"))) event_line(d, o), used++;
        else if (cJSON_IsNumber(cJSON_GetObjectItem(o, "step")) && cJSON_IsNumber(cJSON_GetObjectItem(o, "loss")))
            train_line(d, o), used++;
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    if (!used)
        return myr_error("report: %s holds no training-log steps (\"step\", \"loss\") and no launcher events (\"event\")", path);
    if (d->nsources < 8) snprintf(d->sources[d->nsources++], sizeof d->sources[0], "%s", path);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int report_load(const char *path, RunData *d) {
    struct stat st;
    if (stat(path, &st) != 0) return myr_error("report: %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return load_jsonl(d, path);
    DIR *dir = opendir(path);
    if (!dir) return myr_error("report: cannot read directory %s: %s", path, strerror(errno));
    char **names = NULL;
    int n = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        size_t l = strlen(e->d_name);
        if (l > 6 && !strcmp(e->d_name + l - 6, ".jsonl")) {
            names = realloc(names, (size_t)(n + 1) * sizeof *names);
            names[n++] = strdup(e->d_name);
        }
    }
    closedir(dir);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    int rc = 0;
    char full[4096];
    for (int i = 0; i < n; i++) {
        snprintf(full, sizeof full, "%s/%s", path, names[i]);
        if (!rc && load_jsonl(d, full) != 0) rc = -1;
        free(names[i]);
    }
    free(names);
    if (rc) return -1;
    if (!n) return myr_error("report: %s holds no .jsonl logs; pass the training log (train --log) and/or the event log "
                             "(run --events), or a directory holding them", path);
    /* the model's config.json: in the directory, or in a subdirectory (train --save RUN_DIR/model) */
    snprintf(full, sizeof full, "%s/config.json", path);
    if (access(full, R_OK) != 0 && (dir = opendir(path))) {
        for (struct dirent *e; (e = readdir(dir));) {
            if (e->d_name[0] == '.') continue;
            snprintf(full, sizeof full, "%s/%s/config.json", path, e->d_name);
            if (access(full, R_OK) == 0) break;
        }
        closedir(dir);
    }
    config_json(d, full);
    return 0;
}

/* ---- ordering: by x, the last line of an x winning */

typedef struct {
    double key;
    int idx;
} Order;

static int cmp_order(const void *a, const void *b) {
    const Order *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->idx - y->idx;
}

static void series_finish(Series *s) {
    Order *o = malloc((size_t)(s->n + 1) * sizeof *o);
    for (int i = 0; i < s->n; i++) o[i] = (Order){s->x[i], i};
    qsort(o, (size_t)s->n, sizeof *o, cmp_order);
    double *x = malloc((size_t)(s->n + 1) * sizeof *x), *y = malloc((size_t)(s->n + 1) * sizeof *y);
    int k = 0;
    for (int i = 0; i < s->n; i++) {
        if (i + 1 < s->n && o[i + 1].key == o[i].key) continue; /* a later line of the same step follows */
        x[k] = s->x[o[i].idx], y[k] = s->y[o[i].idx], k++;
    }
    free(s->x), free(s->y), free(o);
    s->x = x, s->y = y, s->n = k, s->cap = k;
}

static int cmp_cell(const void *a, const void *b) {
    const RankStep *x = a, *y = b;
    if (x->rank != y->rank) return x->rank - y->rank;
    if (x->step != y->step) return (x->step > y->step) - (x->step < y->step);
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static int cmp_event(const void *a, const void *b) {
    const RunEvent *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

void report_finish(RunData *d) {
    Series *all[] = {&d->loss, &d->val_loss, &d->tokens_per_s, &d->mfu, &d->step_ms};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) series_finish(all[i]);
    /* cells by (rank, step), the last report of a (rank, step) winning */
    qsort(d->cells, (size_t)d->ncells, sizeof *d->cells, cmp_cell);
    int k = 0;
    for (int i = 0; i < d->ncells; i++) {
        if (i + 1 < d->ncells && d->cells[i + 1].rank == d->cells[i].rank && d->cells[i + 1].step == d->cells[i].step) continue;
        d->cells[k++] = d->cells[i];
    }
    d->ncells = k;
    qsort(d->events, (size_t)d->nevents, sizeof *d->events, cmp_event);
    double last = d->nevents ? d->events[d->nevents - 1].t : 0;
    close_attempt(d, last);
}

void report_free(RunData *d) {
    Series *all[] = {&d->loss, &d->val_loss, &d->tokens_per_s, &d->mfu, &d->step_ms};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]->x), free(all[i]->y);
    for (int i = 0; i < d->nconfig; i++) free(d->config[i].value);
    free(d->events), free(d->attempts), free(d->cells), free(d->stragglers), free(d->config), free(d->segments);
    memset(d, 0, sizeof *d);
}
