/* report_html.c: the report page: summary, the plots (report_svg.c), the event and straggler
 * tables, the layout and configuration, and every plotted number once more as a JSON block
 * (<script type="application/json">: data, never run) for tools and tests. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/report.h"

static const char *style =
    "body{font:14px/1.4 -apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:24px auto;max-width:940px;color:#222}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}"
    ".src{color:#666;font-size:12px}.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}"
    ".card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:110px}.card b{display:block;font-size:18px}"
    "svg.plot{display:block;margin:6px 0;border:1px solid #eee}svg text{font:11px Helvetica,Arial,sans-serif;fill:#333}"
    "svg .title{font-size:13px;font-weight:bold}svg .xt,svg .xl{text-anchor:middle}svg .yt{text-anchor:end}"
    "svg .yl{text-anchor:middle}svg .nodata{text-anchor:middle;fill:#888;font-size:13px}"
    "svg .frame{fill:none;stroke:#999}svg .grid{stroke:#eee}svg .attempt{fill:#cfdcf0;stroke:#4a74b4}"
    "table{border-collapse:collapse;font-size:12px;width:100%}td,th{border-bottom:1px solid #eee;padding:3px 6px;"
    "text-align:left;vertical-align:top}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}"
    "code{word-break:break-all}";

static double mean(const Series *s) {
    double t = 0;
    for (int i = 0; i < s->n; i++) t += s->y[i];
    return s->n ? t / s->n : NAN;
}

static void card(FILE *f, const char *what, const char *value) {
    fprintf(f, "<div class=\"card\">%s<b>", what);
    report_escape(f, value);
    fprintf(f, "</b></div>\n");
}

static void cards(FILE *f, const RunData *d) {
    char b[64];
    fprintf(f, "<div class=\"cards\">\n");
    snprintf(b, sizeof b, "%d", d->loss.n);
    card(f, "steps logged", b);
    if (d->loss.n) snprintf(b, sizeof b, "%.4f", d->loss.y[d->loss.n - 1]), card(f, "final loss", b);
    if (d->val_loss.n) {
        double best = INFINITY;
        for (int i = 0; i < d->val_loss.n; i++) best = fmin(best, d->val_loss.y[i]);
        snprintf(b, sizeof b, "%.4f", best), card(f, "best val loss", b);
    }
    if (d->tokens_per_s.n) snprintf(b, sizeof b, "%.0f", mean(&d->tokens_per_s)), card(f, "mean tokens/s", b);
    if (d->mfu.n) snprintf(b, sizeof b, "%.3g%%", 100 * mean(&d->mfu)), card(f, "mean MFU", b);
    if (d->have_ledger) snprintf(b, sizeof b, "%.1f%%", 100 * d->effective), card(f, "effective training time", b);
    if (d->have_finished) {
        snprintf(b, sizeof b, "%.1f%%", 100 * d->goodput), card(f, "goodput", b);
        snprintf(b, sizeof b, "%d", d->restarts), card(f, "restarts", b);
        card(f, "status", d->status);
    }
    if (d->event_lines) snprintf(b, sizeof b, "%d", d->nstragglers), card(f, "stragglers", b);
    fprintf(f, "</div>\n");
}

/* A number as the shortest text that reads back to the same double (cJSON rounds to 15 digits
 * when that is within an epsilon, so the block could not be compared with the logs exactly). */
static cJSON *exact(double v) {
    if (!isfinite(v)) return cJSON_CreateNull();
    char buf[32];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    return cJSON_CreateRaw(buf);
}

static cJSON *series_json(const Series *s) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < s->n; i++) {
        cJSON *p = cJSON_CreateArray();
        cJSON_AddItemToArray(p, exact(s->x[i]));
        cJSON_AddItemToArray(p, exact(s->y[i]));
        cJSON_AddItemToArray(a, p);
    }
    return a;
}

/* Every plotted number, for tools and tests; "</" is escaped so the block cannot end early. */
static void data_block(FILE *f, const RunData *d) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "loss", series_json(&d->loss));
    cJSON_AddItemToObject(o, "val_loss", series_json(&d->val_loss));
    cJSON_AddItemToObject(o, "tokens_per_s", series_json(&d->tokens_per_s));
    cJSON_AddItemToObject(o, "mfu", series_json(&d->mfu));
    cJSON *cells = cJSON_AddArrayToObject(o, "rank_step_s");
    for (int i = 0; i < d->ncells; i++) {
        cJSON *c = cJSON_CreateArray();
        cJSON_AddItemToArray(c, cJSON_CreateNumber(d->cells[i].rank));
        cJSON_AddItemToArray(c, cJSON_CreateNumber((double)d->cells[i].step));
        cJSON_AddItemToArray(c, exact(d->cells[i].seconds));
        cJSON_AddItemToArray(cells, c);
    }
    cJSON *ev = cJSON_AddArrayToObject(o, "timeline");
    for (int i = 0; i < d->nevents; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToObject(e, "t", exact(d->events[i].t));
        cJSON_AddStringToObject(e, "event", d->events[i].event);
        cJSON_AddItemToArray(ev, e);
    }
    cJSON *st = cJSON_AddArrayToObject(o, "stragglers");
    for (int i = 0; i < d->nstragglers; i++) {
        const Straggler *s = &d->stragglers[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToObject(e, "t", exact(s->t));
        cJSON_AddNumberToObject(e, "rank", s->rank);
        cJSON_AddStringToObject(e, "host", s->host);
        cJSON_AddStringToObject(e, "section", s->section);
        if (isfinite(s->relative)) cJSON_AddItemToObject(e, "relative", exact(s->relative));
        if (isfinite(s->individual)) cJSON_AddItemToObject(e, "individual", exact(s->individual));
        cJSON_AddItemToArray(st, e);
    }
    if (d->have_finished) {
        cJSON *g = cJSON_AddObjectToObject(o, "goodput");
        cJSON_AddItemToObject(g, "goodput", exact(d->goodput));
        cJSON_AddItemToObject(g, "productive_s", exact(d->productive_s));
        cJSON_AddItemToObject(g, "wall_s", exact(d->wall_s));
        cJSON_AddNumberToObject(g, "restarts", d->restarts);
    }
    if (d->have_ledger) {
        cJSON *g = cJSON_AddObjectToObject(o, "ledger");
        cJSON_AddItemToObject(g, "wall_s", exact(d->ledger_wall_s));
        cJSON_AddItemToObject(g, "effective", exact(d->effective));
        cJSON *sec = cJSON_AddObjectToObject(g, "seconds");
        for (int k = 0; k < d->ncauses; k++) cJSON_AddItemToObject(sec, d->cause[k], exact(d->cause_s[k]));
        cJSON *tl = cJSON_AddArrayToObject(g, "timeline");
        for (int i = 0; i < d->nsegments; i++) {
            cJSON *r = cJSON_CreateArray();
            cJSON_AddItemToArray(r, exact(d->segments[i].t0));
            cJSON_AddItemToArray(r, exact(d->segments[i].t1));
            cJSON_AddItemToArray(r, cJSON_CreateString(d->cause[d->segments[i].cause]));
            cJSON_AddItemToArray(r, cJSON_CreateNumber(d->segments[i].attempt));
            cJSON_AddItemToArray(tl, r);
        }
    }
    cJSON *cfg = cJSON_AddObjectToObject(o, "config");
    for (int i = 0; i < d->nconfig; i++) cJSON_AddStringToObject(cfg, d->config[i].key, d->config[i].value);
    char *s = cJSON_PrintUnformatted(o);
    fprintf(f, "<script type=\"application/json\" id=\"report-data\">\n");
    for (const char *p = s; *p; p++) {
        if (p[0] == '<' && p[1] == '/') fputs("<\\/", f), p++;
        else fputc(*p, f);
    }
    fprintf(f, "\n</script>\n");
    free(s);
    cJSON_Delete(o);
}

static void events_table(FILE *f, const RunData *d) {
    if (!d->nevents) return;
    fprintf(f, "<details><summary>%d events</summary><table><tr><th class=\"n\">t (s)</th><th>event</th><th>what</th></tr>\n", d->nevents);
    for (int i = 0; i < d->nevents; i++) {
        fprintf(f, "<tr><td class=\"n\">%.3f</td><td>%s</td><td>", d->events[i].t, d->events[i].event);
        report_escape(f, d->events[i].label);
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</table></details>\n");
}

static void stragglers_table(FILE *f, const RunData *d) {
    if (!d->nstragglers) {
        fprintf(f, "<p>%s</p>\n", d->event_lines ? "No straggler was reported." : "No launcher event log was given.");
        return;
    }
    fprintf(f, "<table><tr><th class=\"n\">t (s)</th><th class=\"n\">rank</th><th>host</th><th>section</th><th class=\"n\">relative</th>"
                "<th class=\"n\">individual</th></tr>\n");
    for (int i = 0; i < d->nstragglers; i++) {
        const Straggler *s = &d->stragglers[i];
        fprintf(f, "<tr><td class=\"n\">%.3f</td><td class=\"n\">%d</td><td>", s->t, s->rank);
        report_escape(f, s->host);
        fprintf(f, "</td><td>");
        report_escape(f, s->section);
        fprintf(f, "</td><td class=\"n\">%.3f</td><td class=\"n\">%.3f</td></tr>\n", s->relative, s->individual);
    }
    fprintf(f, "</table>\n");
}

static void config_table(FILE *f, const RunData *d) {
    if (!d->nconfig) {
        fprintf(f, "<p>No launch event, training-log configuration or config.json was found.</p>\n");
        return;
    }
    fprintf(f, "<table>\n");
    for (int i = 0; i < d->nconfig; i++) {
        fprintf(f, "<tr><th>");
        report_escape(f, d->config[i].key);
        fprintf(f, "</th><td><code>");
        report_escape(f, d->config[i].value);
        fprintf(f, "</code></td></tr>\n");
    }
    fprintf(f, "</table>\n");
}

int report_write_html(FILE *f, const RunData *d, const char *title) {
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
    report_escape(f, title);
    fprintf(f, "</title><style>%s</style></head><body>\n<h1>", style);
    report_escape(f, title);
    fprintf(f, "</h1>\n<p class=\"src\">from ");
    for (int i = 0; i < d->nsources; i++) {
        fprintf(f, "%s<code>", i ? ", " : "");
        report_escape(f, d->sources[i]);
        fprintf(f, "</code>");
    }
    fprintf(f, "</p>\n");
    cards(f, d);
    fprintf(f, "<h2>Loss</h2>\n");
    PlotSeries loss[] = {{"loss", "#1f77b4", &d->loss, 0}, {"val_loss", "#d62728", &d->val_loss, 1}};
    svg_line_plot(f, "loss", "Training loss and validation loss", "step", "loss", loss, 2);
    fprintf(f, "<h2>Throughput</h2>\n");
    PlotSeries tps[] = {{"tokens_per_s", "#2ca02c", &d->tokens_per_s, 0}};
    svg_line_plot(f, "tokens_per_s", "Tokens per second", "step", "tokens/s", tps, 1);
    PlotSeries mfu[] = {{"mfu", "#9467bd", &d->mfu, 0}};
    svg_line_plot(f, "mfu", "Model FLOPs utilisation (fraction of the peak)", "step", "MFU", mfu, 1);
    fprintf(f, "<h2>Ranks</h2>\n");
    svg_heatmap(f, "rank_step_time", d->cells, d->ncells);
    fprintf(f, "<h2>Restarts, failures and stragglers</h2>\n");
    svg_timeline(f, "timeline", d);
    events_table(f, d);
    stragglers_table(f, d);
    fprintf(f, "<h2>Goodput</h2>\n");
    svg_goodput(f, "goodput", d);
    svg_time_ledger(f, "time_ledger", d);
    svg_cause_timeline(f, "cause_timeline", d);
    fprintf(f, "<h2>Layout and configuration</h2>\n");
    config_table(f, d);
    data_block(f, d);
    fprintf(f, "</body></html>\n");
    return ferror(f) ? -1 : 0;
}
