/* report_svg.c: the report's plots as inline SVG, written directly (no libraries). Every plot is
 * an <svg class="plot" data-plot=ID> whose data-* attributes give its axes (data ranges and the
 * plot area in pixels), and every mark carries the number it shows (data-x/data-y, data-s, ...),
 * so a test can read the picture back and compare it with the logs (docs/OPERATIONS.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/report.h"

#define W 900
#define H 300
#define ML 78 /* margins: left, right, top, bottom */
#define MR 24
#define MT 34
#define MB 46

void report_escape(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* Tick spacing of 1, 2 or 5 x 10^k giving at most `max` intervals over [lo, hi]. */
static double tick_step(double lo, double hi, int max) {
    double raw = (hi - lo) / max, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static void fmt_num(char *buf, size_t n, double v, double step) {
    if (fabs(v) < step * 1e-6) v = 0; /* no "-0" from accumulated steps */
    if (v != 0 && (fabs(v) >= 1e6 || fabs(v) < 1e-3)) snprintf(buf, n, "%.3g", v);
    else snprintf(buf, n, "%.6g", round(v * 1e6) / 1e6);
}

typedef struct {
    double x0, x1, y0, y1;              /* data ranges */
    double left, top, width, height;    /* plot area, px */
} Axes;

static double px(const Axes *a, double x) { return a->left + (x - a->x0) / (a->x1 - a->x0) * a->width; }
static double py(const Axes *a, double y) { return a->top + a->height - (y - a->y0) / (a->y1 - a->y0) * a->height; }

static void open_svg(FILE *f, const char *id, const char *title, int height, const Axes *a) {
    fprintf(f, "<svg class=\"plot\" data-plot=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\"",
            id, W, height, W, height);
    if (a)
        fprintf(f, " data-xmin=\"%.17g\" data-xmax=\"%.17g\" data-ymin=\"%.17g\" data-ymax=\"%.17g\" data-left=\"%g\" "
                   "data-top=\"%g\" data-width=\"%g\" data-height=\"%g\"",
                a->x0, a->x1, a->y0, a->y1, a->left, a->top, a->width, a->height);
    fprintf(f, ">\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", W, height);
    fprintf(f, "<text x=\"%d\" y=\"20\" class=\"title\">", ML);
    report_escape(f, title);
    fprintf(f, "</text>\n");
}

static void no_data(FILE *f, int y, const char *why) {
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"nodata\">", W / 2, y);
    report_escape(f, why);
    fprintf(f, "</text>\n");
}

/* Axes frame, grid and tick labels. */
static void draw_axes(FILE *f, const Axes *a, const char *xlabel, const char *ylabel) {
    fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" class=\"frame\"/>\n", a->left, a->top, a->width, a->height);
    char buf[32];
    double st = tick_step(a->x0, a->x1, 8);
    for (double v = ceil(a->x0 / st) * st; v <= a->x1 + st * 1e-9; v += st) {
        fmt_num(buf, sizeof buf, v, st);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%g\" x2=\"%.2f\" y2=\"%g\" class=\"grid\"/><text x=\"%.2f\" y=\"%g\" class=\"xt\">%s</text>\n",
                px(a, v), a->top, px(a, v), a->top + a->height, px(a, v), a->top + a->height + 16, buf);
    }
    st = tick_step(a->y0, a->y1, 5);
    for (double v = ceil(a->y0 / st) * st; v <= a->y1 + st * 1e-9; v += st) {
        fmt_num(buf, sizeof buf, v, st);
        fprintf(f, "<line x1=\"%g\" y1=\"%.2f\" x2=\"%g\" y2=\"%.2f\" class=\"grid\"/><text x=\"%g\" y=\"%.2f\" class=\"yt\">%s</text>\n",
                a->left, py(a, v), a->left + a->width, py(a, v), a->left - 6, py(a, v) + 4, buf);
    }
    fprintf(f, "<text x=\"%g\" y=\"%g\" class=\"xl\">", a->left + a->width / 2, a->top + a->height + 38);
    report_escape(f, xlabel);
    fprintf(f, "</text><text transform=\"translate(16 %g) rotate(-90)\" class=\"yl\">", a->top + a->height / 2);
    report_escape(f, ylabel);
    fprintf(f, "</text>\n");
}

void svg_line_plot(FILE *f, const char *id, const char *title, const char *xlabel, const char *ylabel,
                   const PlotSeries *series, int nseries) {
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    int total = 0;
    for (int k = 0; k < nseries; k++)
        for (int i = 0; i < series[k].s->n; i++) {
            double x = series[k].s->x[i], y = series[k].s->y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            x0 = fmin(x0, x), x1 = fmax(x1, x), y0 = fmin(y0, y), y1 = fmax(y1, y), total++;
        }
    if (!total) {
        open_svg(f, id, title, 90, NULL);
        no_data(f, 60, "no data: the training log (train --log FILE.jsonl) has none of these fields");
        fprintf(f, "</svg>\n");
        return;
    }
    if (x1 == x0) x0 -= 0.5, x1 += 0.5;
    double pad = y1 > y0 ? 0.06 * (y1 - y0) : fmax(fabs(y0) * 0.05, 1e-9);
    Axes a = {x0, x1, y0 - pad, y1 + pad, ML, MT, W - ML - MR, H - MT - MB};
    open_svg(f, id, title, H, &a);
    draw_axes(f, &a, xlabel, ylabel);
    for (int k = 0; k < nseries; k++) {
        const Series *s = series[k].s;
        if (!s->n) continue;
        if (series[k].points) {
            fprintf(f, "<g data-series=\"%s\" fill=\"%s\">\n", series[k].name, series[k].color);
            for (int i = 0; i < s->n; i++)
                if (isfinite(s->y[i]))
                    fprintf(f, "<circle cx=\"%.3f\" cy=\"%.3f\" r=\"3.5\" data-x=\"%.17g\" data-y=\"%.17g\"/>\n", px(&a, s->x[i]),
                            py(&a, s->y[i]), s->x[i], s->y[i]);
            fprintf(f, "</g>\n");
        } else {
            fprintf(f, "<polyline data-series=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"", series[k].name,
                    series[k].color);
            for (int i = 0; i < s->n; i++)
                if (isfinite(s->y[i])) fprintf(f, "%s%.3f,%.3f", i ? " " : "", px(&a, s->x[i]), py(&a, s->y[i]));
            fprintf(f, "\"/>\n");
        }
        fprintf(f, "<rect x=\"%g\" y=\"%d\" width=\"12\" height=\"4\" fill=\"%s\"/><text x=\"%g\" y=\"%d\" class=\"legend\">%s</text>\n",
                W - MR - 150.0 + 0, 12 + 12 * k, series[k].color, W - MR - 134.0, 17 + 12 * k, series[k].name);
    }
    fprintf(f, "</svg>\n");
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* A 5-stop perceptual ramp (dark blue -> green -> yellow) for 0..1. */
static void ramp(double u, char *out, size_t n) {
    static const double stops[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
    u = u < 0 ? 0 : u > 1 ? 1 : u;
    double p = u * 4;
    int i = p >= 4 ? 3 : (int)p;
    double t = p - i;
    snprintf(out, n, "#%02x%02x%02x", (int)(stops[i][0] + t * (stops[i + 1][0] - stops[i][0])),
             (int)(stops[i][1] + t * (stops[i + 1][1] - stops[i][1])), (int)(stops[i][2] + t * (stops[i + 1][2] - stops[i][2])));
}

#define HEAT_MAX_COLS 300
#define HEAT_MAX_ROWS 128

void svg_heatmap(FILE *f, const char *id, const RankStep *cells, int ncells) {
    const char *title = "Per-rank step time (seconds; columns: the steps logged, rows: ranks)";
    if (!ncells) {
        open_svg(f, id, title, 90, NULL);
        no_data(f, 60, "no data: the event log has no per-rank step seconds (step_s; see docs/OPERATIONS.md)");
        fprintf(f, "</svg>\n");
        return;
    }
    /* distinct ranks and steps: the detector logs windows (a step every W), so columns are the
     * steps that occur, not every step of the range */
    int maxrank = 0, nsteps = 0;
    double lo = INFINITY, hi = -INFINITY;
    long long *steps = malloc((size_t)ncells * sizeof *steps);
    for (int i = 0; i < ncells; i++) {
        if (cells[i].rank > maxrank) maxrank = cells[i].rank;
        lo = fmin(lo, cells[i].seconds), hi = fmax(hi, cells[i].seconds);
        steps[nsteps++] = cells[i].step;
    }
    qsort(steps, (size_t)nsteps, sizeof *steps, cmp_ll);
    int k = 0;
    for (int i = 0; i < nsteps; i++)
        if (!k || steps[i] != steps[k - 1]) steps[k++] = steps[i];
    nsteps = k;
    /* bins: a column per step (or per group of steps), a row per rank (or group): the slowest wins */
    int cols = nsteps > HEAT_MAX_COLS ? HEAT_MAX_COLS : nsteps, rows = maxrank + 1 > HEAT_MAX_ROWS ? HEAT_MAX_ROWS : maxrank + 1;
    double step_per_col = (double)nsteps / cols, rank_per_row = (double)(maxrank + 1) / rows;
    double *v = malloc((size_t)cols * rows * sizeof *v);
    for (int i = 0; i < cols * rows; i++) v[i] = NAN;
    for (int i = 0; i < ncells; i++) {
        long long *at = bsearch(&cells[i].step, steps, (size_t)nsteps, sizeof *steps, cmp_ll);
        int c = (int)((at - steps) / step_per_col), r = (int)(cells[i].rank / rank_per_row);
        if (c >= cols) c = cols - 1;
        if (r >= rows) r = rows - 1;
        double *x = &v[(size_t)r * cols + c];
        if (isnan(*x) || cells[i].seconds > *x) *x = cells[i].seconds;
    }
    double cw = (double)(W - ML - MR - 60) / cols, ch = rows * 14 > 360 ? 360.0 / rows : 14;
    int height = MT + (int)(rows * ch) + MB + 10;
    Axes a = {0, cols, 0, rows, ML, MT, cols * cw, rows * ch}; /* x in columns */
    open_svg(f, id, title, height, &a);
    fprintf(f, "<g data-steps-per-column=\"%.17g\" data-ranks-per-row=\"%.17g\" data-smin=\"%.17g\" data-smax=\"%.17g\">\n",
            step_per_col, rank_per_row, lo, hi);
    char col[16];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double x = v[(size_t)r * cols + c];
            if (isnan(x)) continue;
            long long step = steps[(int)(c * step_per_col)];
            ramp(hi > lo ? (x - lo) / (hi - lo) : 0.5, col, sizeof col);
            fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" data-rank=\"%d\" data-step=\"%lld\" "
                       "data-s=\"%.17g\"><title>rank %d, step %lld: %.4g s</title></rect>\n",
                    ML + c * cw, MT + r * ch, cw + 0.05, ch + 0.05, col, (int)(r * rank_per_row), step, x,
                    (int)(r * rank_per_row), step, x);
        }
    fprintf(f, "</g>\n");
    /* axis labels: a few rank rows and step columns */
    int every = rows > 16 ? (rows + 15) / 16 : 1;
    for (int r = 0; r < rows; r += every)
        fprintf(f, "<text x=\"%d\" y=\"%.2f\" class=\"yt\">%d</text>\n", ML - 6, MT + (r + 0.7) * ch, (int)(r * rank_per_row));
    every = cols > 10 ? (cols + 9) / 10 : 1;
    for (int c = 0; c < cols; c += every)
        fprintf(f, "<text x=\"%.2f\" y=\"%g\" class=\"xt\">%lld</text>\n", ML + (c + 0.5) * cw, a.top + a.height + 16,
                steps[(int)(c * step_per_col)]);
    fprintf(f, "<text x=\"%g\" y=\"%g\" class=\"xl\">step</text><text transform=\"translate(16 %g) rotate(-90)\" class=\"yl\">rank</text>\n",
            a.left + a.width / 2, a.top + a.height + 36, a.top + a.height / 2);
    free(steps);
    /* colour scale */
    double lx = ML + cols * cw + 20;
    for (int i = 0; i < 20; i++) {
        ramp(1 - i / 19.0, col, sizeof col);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"%.2f\" fill=\"%s\"/>\n", lx, MT + i * (a.height / 20), a.height / 20 + 0.5, col);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"legend\">%.3g s</text><text x=\"%.1f\" y=\"%.1f\" class=\"legend\">%.3g s</text>\n",
            lx - 4, MT - 4, hi, lx - 4, MT + a.height + 12, lo);
    fprintf(f, "</svg>\n");
    free(v);
}

static const char *lane_names[TL_LANES] = {"attempts", "failures", "recovery", "faults injected", "stragglers"};
static const char *lane_colors[TL_LANES] = {"#4a74b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"};

void svg_timeline(FILE *f, const char *id, const RunData *d) {
    const char *title = "Timeline: attempts, failures, recovery, injected faults, stragglers (seconds since launch)";
    if (!d->nevents) {
        open_svg(f, id, title, 90, NULL);
        no_data(f, 60, "no data: no launcher event log (myriad run --events FILE.jsonl)");
        fprintf(f, "</svg>\n");
        return;
    }
    double t1 = 0;
    for (int i = 0; i < d->nevents; i++) t1 = fmax(t1, d->events[i].t);
    for (int i = 0; i < d->nattempts; i++) t1 = fmax(t1, d->attempts[i].t1);
    double lane_h = 34;
    int height = MT + (int)(TL_LANES * lane_h) + MB;
    Axes a = {0, t1 > 0 ? t1 * 1.02 : 1, 0, TL_LANES, 120, MT, W - 120 - MR, TL_LANES * lane_h};
    open_svg(f, id, title, height, &a);
    fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" class=\"frame\"/>\n", a.left, a.top, a.width, a.height);
    char buf[32];
    double st = tick_step(a.x0, a.x1, 10);
    for (double v = 0; v <= a.x1 + 1e-9; v += st) {
        fmt_num(buf, sizeof buf, v, st);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%g\" x2=\"%.2f\" y2=\"%g\" class=\"grid\"/><text x=\"%.2f\" y=\"%g\" class=\"xt\">%s</text>\n",
                px(&a, v), a.top, px(&a, v), a.top + a.height, px(&a, v), a.top + a.height + 16, buf);
    }
    fprintf(f, "<text x=\"%g\" y=\"%g\" class=\"xl\">seconds since the launcher started</text>\n", a.left + a.width / 2,
            a.top + a.height + 36);
    for (int l = 0; l < TL_LANES; l++)
        fprintf(f, "<text x=\"%g\" y=\"%.1f\" class=\"yt\" fill=\"%s\">%s</text>\n", a.left - 8, a.top + (l + 0.6) * lane_h,
                lane_colors[l], lane_names[l]);
    for (int i = 0; i < d->nattempts; i++) {
        const RunAttempt *at = &d->attempts[i];
        double x0 = px(&a, at->t0), x1 = px(&a, at->t1 >= at->t0 ? at->t1 : at->t0);
        fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" class=\"attempt\" data-attempt=\"%d\" "
                   "data-t0=\"%.17g\" data-t1=\"%.17g\"><title>attempt %d: %.3f .. %.3f s %s</title></rect>\n",
                x0, a.top + 8, fmax(x1 - x0, 1.5), lane_h - 16, at->attempt, at->t0, at->t1, at->attempt, at->t0, at->t1,
                at->hosts);
    }
    for (int i = 0; i < d->nevents; i++) {
        const RunEvent *e = &d->events[i];
        double x = px(&a, e->t), y = a.top + (e->lane + 0.5) * lane_h;
        fprintf(f, "<g data-event=\"%s\" data-t=\"%.17g\"><title>%.3f s ", e->event, e->t, e->t);
        report_escape(f, e->label);
        if (e->lane == TL_ATTEMPT) fprintf(f, "</title><line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#222\" stroke-width=\"2\"/></g>\n", x,
                                           y - 12, x, y + 12);
        else fprintf(f, "</title><circle cx=\"%.2f\" cy=\"%.1f\" r=\"6\" fill=\"%s\" stroke=\"#fff\"/></g>\n", x, y, lane_colors[e->lane]);
    }
    fprintf(f, "</svg>\n");
}

void svg_goodput(FILE *f, const char *id, const RunData *d) {
    const char *title = "Goodput: productive time (steps that count) against wall time";
    if (!d->have_finished || !(d->wall_s > 0)) {
        open_svg(f, id, title, 90, NULL);
        no_data(f, 60, "no data: no 'finished' event (run under myriad run --events FILE.jsonl)");
        fprintf(f, "</svg>\n");
        return;
    }
    open_svg(f, id, title, 130, NULL);
    double bw = W - ML - MR, good = bw * fmin(fmax(d->productive_s / d->wall_s, 0), 1);
    fprintf(f, "<g data-goodput=\"%.17g\" data-productive-s=\"%.17g\" data-wall-s=\"%.17g\">\n", d->goodput, d->productive_s, d->wall_s);
    fprintf(f, "<rect x=\"%d\" y=\"40\" width=\"%.2f\" height=\"34\" fill=\"#2ca02c\"><title>productive %.3f s</title></rect>\n", ML, good,
            d->productive_s);
    fprintf(f, "<rect x=\"%.2f\" y=\"40\" width=\"%.2f\" height=\"34\" fill=\"#bbb\"><title>lost %.3f s</title></rect>\n", ML + good,
            bw - good, d->wall_s - d->productive_s);
    fprintf(f, "</g><text x=\"%d\" y=\"96\" class=\"legend\">goodput %.1f%%: %.2f s productive of %.2f s wall; %d restart%s; %lld steps; "
               "status %s</text>\n",
            ML, 100 * d->goodput, d->productive_s, d->wall_s, d->restarts, d->restarts == 1 ? "" : "s", d->steps, d->status);
    fprintf(f, "</svg>\n");
}

/* One colour per ledger cause: productive green, lost work red, recovery blues, rank-side causes
 * oranges; an unknown cause grey. */
const char *report_cause_color(const char *cause) {
    static const struct {
        const char *cause, *color;
    } c[] = {{"productive", "#2ca02c"}, {"recomputed", "#d62728"},     {"detection", "#8c1d40"},
             {"teardown", "#e377c2"},   {"launch", "#1f77b4"},         {"mpi_init", "#4a90d9"},
             {"setup", "#7fb2e5"},      {"restore_memory", "#17becf"}, {"restore_disk", "#0b7a87"},
             {"rejoin", "#aec7e8"},     {"checkpoint", "#ff7f0e"},     {"data", "#ffbb78"},
             {"eval", "#bcbd22"},       {"straggler", "#9467bd"},      {"preflight", "#8c564b"},
             {"spare_wait", "#c49c94"}, {"reshard", "#f7b6d2"},        {"finish", "#7f7f7f"}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if (!strcmp(c[i].cause, cause)) return c[i].color;
    return "#c7c7c7";
}

static void no_ledger(FILE *f, const char *id, const char *title) {
    open_svg(f, id, title, 90, NULL);
    no_data(f, 60, "no data: no 'goodput' event (run under myriad run --events FILE.jsonl)");
    fprintf(f, "</svg>\n");
}

void svg_time_ledger(FILE *f, const char *id, const RunData *d) {
    const char *title = "Where the wall time went: the time ledger by cause (they add up to the wall time)";
    if (!d->have_ledger || !(d->ledger_wall_s > 0)) {
        no_ledger(f, id, title);
        return;
    }
    int rows = 0;
    for (int k = 0; k < d->ncauses; k++) rows += d->cause_s[k] > 0;
    int height = 120 + 18 * ((rows + 2) / 3);
    open_svg(f, id, title, height, NULL);
    double bw = W - ML - MR, x = ML;
    fprintf(f, "<g data-wall-s=\"%.17g\" data-effective=\"%.17g\">\n", d->ledger_wall_s, d->effective);
    for (int k = 0; k < d->ncauses; k++) {
        if (!(d->cause_s[k] > 0)) continue;
        double w = bw * d->cause_s[k] / d->ledger_wall_s;
        fprintf(f, "<rect x=\"%.2f\" y=\"36\" width=\"%.2f\" height=\"34\" fill=\"%s\" data-cause=\"%s\" "
                   "data-seconds=\"%.17g\"><title>%s %.3f s (%.1f%%)</title></rect>\n",
                x, w, report_cause_color(d->cause[k]), d->cause[k], d->cause_s[k], d->cause[k], d->cause_s[k],
                100 * d->cause_s[k] / d->ledger_wall_s);
        x += w;
    }
    fprintf(f, "</g>\n");
    int i = 0;
    for (int k = 0; k < d->ncauses; k++) {
        if (!(d->cause_s[k] > 0)) continue;
        double lx = ML + (i % 3) * 270, ly = 92 + 18 * (i / 3);
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%.0f\" y=\"%.0f\" "
                   "class=\"legend\">%s %.2f s (%.1f%%)</text>\n",
                lx, ly - 10, report_cause_color(d->cause[k]), lx + 16, ly, d->cause[k], d->cause_s[k],
                100 * d->cause_s[k] / d->ledger_wall_s);
        i++;
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"legend\">effective training time %.1f%% of %.2f s wall</text>\n", ML,
            height - 10, 100 * d->effective, d->ledger_wall_s);
    fprintf(f, "</svg>\n");
}

void svg_cause_timeline(FILE *f, const char *id, const RunData *d) {
    const char *title = "The time ledger in time: what each stretch of the run was, by attempt (seconds since launch)";
    if (!d->have_ledger || !d->nsegments) {
        no_ledger(f, id, title);
        return;
    }
    int natt = 0;
    for (int i = 0; i < d->nsegments; i++) natt = d->segments[i].attempt + 1 > natt ? d->segments[i].attempt + 1 : natt;
    double lane_h = 26, t1 = d->segments[d->nsegments - 1].t1;
    int height = MT + (int)(natt * lane_h) + MB;
    Axes a = {0, t1 > 0 ? t1 : 1, 0, natt, 120, MT, W - 120 - MR, natt * lane_h};
    open_svg(f, id, title, height, &a);
    fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" class=\"frame\"/>\n", a.left, a.top, a.width, a.height);
    char buf[32];
    double st = tick_step(a.x0, a.x1, 10);
    for (double v = 0; v <= a.x1 + 1e-9; v += st) {
        fmt_num(buf, sizeof buf, v, st);
        fprintf(f, "<text x=\"%.2f\" y=\"%g\" class=\"xt\">%s</text>\n", px(&a, v), a.top + a.height + 16, buf);
    }
    for (int l = 0; l < natt; l++)
        fprintf(f, "<text x=\"%g\" y=\"%.1f\" class=\"yt\">attempt %d</text>\n", a.left - 8, a.top + (l + 0.65) * lane_h, l);
    for (int i = 0; i < d->nsegments; i++) {
        const CauseSegment *s = &d->segments[i];
        double x0 = px(&a, s->t0), x1 = px(&a, s->t1);
        const char *c = d->cause[s->cause];
        fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" data-cause=\"%s\" "
                   "data-t0=\"%.17g\" data-t1=\"%.17g\" data-attempt=\"%d\"><title>attempt %d: %s %.3f .. %.3f s</title></rect>\n",
                x0, a.top + s->attempt * lane_h + 4, fmax(x1 - x0, 0.5), lane_h - 8, report_cause_color(c), c, s->t0, s->t1,
                s->attempt, s->attempt, c, s->t0, s->t1);
    }
    fprintf(f, "</svg>\n");
}
