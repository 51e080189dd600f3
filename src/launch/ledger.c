/* ledger.c: the time ledger's bookkeeping (ledger.h): a mark that only moves forward, per-cause
 * rows per attempt and in total, the segments for the timeline, the JSON and the summary line. */
#include "launch/ledger.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[LEDGER_CAUSES] = {
    "productive", "recomputed", "detection", "teardown", "launch", "mpi_init", "setup", "restore_memory",
    "restore_disk", "rejoin", "checkpoint", "data", "eval", "straggler", "preflight", "spare_wait", "reshard", "finish"};

const char *ledger_cause_name(int cause) { return cause >= 0 && cause < LEDGER_CAUSES ? names[cause] : "?"; }

void ledger_init(Ledger *l, double t_start) {
    memset(l, 0, sizeof *l);
    l->t_start = l->t_mark = t_start;
    ledger_set_attempt(l, 0);
}

void ledger_free(Ledger *l) {
    free(l->att);
    free(l->seg);
    memset(l, 0, sizeof *l);
}

void ledger_set_attempt(Ledger *l, int attempt) {
    if (attempt < 0) attempt = 0;
    while (l->natt <= attempt) {
        if (l->natt == l->cap) {
            l->cap = l->cap ? 2 * l->cap : 8;
            l->att = realloc(l->att, (size_t)l->cap * sizeof *l->att);
        }
        memset(&l->att[l->natt++], 0, sizeof *l->att);
    }
    l->cur = attempt;
}

static void add(Ledger *l, int cause, double sec) {
    l->total.seconds[cause] += sec;
    l->att[l->cur].seconds[cause] += sec;
}

/* a segment [mark, t) of `cause`, merged into the previous one when it continues it */
static void segment(Ledger *l, int cause, double t) {
    double a = l->t_mark - l->t_start, b = t - l->t_start;
    if (l->nseg) {
        LedgerSegment *p = &l->seg[l->nseg - 1];
        if (p->cause == cause && p->attempt == l->cur) { /* the same cause continued */
            p->t1 = b;
            return;
        }
    }
    if (l->nseg == l->capseg) {
        l->capseg = l->capseg ? 2 * l->capseg : 64;
        l->seg = realloc(l->seg, (size_t)l->capseg * sizeof *l->seg);
    }
    l->seg[l->nseg++] = (LedgerSegment){a, b, cause, l->cur};
}

double ledger_account(Ledger *l, int cause, double t) {
    if (!(t > l->t_mark)) return 0;
    double d = t - l->t_mark;
    add(l, cause, d);
    segment(l, cause, t);
    l->t_mark = t;
    return d;
}

void ledger_step(Ledger *l, double t, int rest_cause, const int *sub_cause, const double *sub, int nsub) {
    if (!(t > l->t_mark)) return;
    double left = t - l->t_mark;
    for (int i = 0; i < nsub && left > 0; i++) {
        double d = sub[i] > 0 ? (sub[i] < left ? sub[i] : left) : 0;
        add(l, sub_cause[i], d);
        left -= d;
    }
    add(l, rest_cause, left);
    segment(l, rest_cause, t);
    l->t_mark = t;
}

double ledger_row_sum(const LedgerRow *r) {
    double s = 0;
    for (int c = 0; c < LEDGER_CAUSES; c++) s += r->seconds[c];
    return s;
}

cJSON *ledger_row_json(const LedgerRow *r) {
    cJSON *o = cJSON_CreateObject();
    for (int c = 0; c < LEDGER_CAUSES; c++) cJSON_AddNumberToObject(o, names[c], round(r->seconds[c] * 1000) / 1000);
    return o;
}

cJSON *ledger_timeline_json(const Ledger *l) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < l->nseg; i++) {
        const LedgerSegment *s = &l->seg[i];
        cJSON *row = cJSON_CreateArray();
        cJSON_AddItemToArray(row, cJSON_CreateNumber(round(s->t0 * 1000) / 1000));
        cJSON_AddItemToArray(row, cJSON_CreateNumber(round(s->t1 * 1000) / 1000));
        cJSON_AddItemToArray(row, cJSON_CreateString(names[s->cause]));
        cJSON_AddItemToArray(row, cJSON_CreateNumber(s->attempt));
        cJSON_AddItemToArray(a, row);
    }
    return a;
}

void ledger_summary(const LedgerRow *r, double wall, char *buf, size_t cap) {
    int order[LEDGER_CAUSES], n = 0;
    for (int c = 0; c < LEDGER_CAUSES; c++)
        if (r->seconds[c] >= 0.0005) order[n++] = c;
    for (int i = 1; i < n; i++) /* largest first (insertion sort: 18 causes) */
        for (int k = i; k > 0 && r->seconds[order[k]] > r->seconds[order[k - 1]]; k--) {
            int t = order[k];
            order[k] = order[k - 1], order[k - 1] = t;
        }
    size_t len = (size_t)snprintf(buf, cap, "wall %.2f s:", wall);
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s %s %.2f s (%.1f%%)", i ? "," : "", names[order[i]],
                                r->seconds[order[i]], wall > 0 ? 100 * r->seconds[order[i]] / wall : 0);
}
