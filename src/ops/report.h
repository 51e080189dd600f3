/* report.h: `myriad report`: one self-contained HTML page (inline SVG, no scripts, no network)
 * that pictures a run from its logs: the training log (`train --log`, one JSON object per step)
 * and the launcher's event log (`run --events`). report_load.c reads them into RunData,
 * report_svg.c draws plots, report_html.c lays out the page. Fields read: docs/OPERATIONS.md. */
#ifndef MYRIAD_OPS_REPORT_H
#define MYRIAD_OPS_REPORT_H

#include <stdio.h>

typedef struct {
    double *x, *y;
    int n, cap;
} Series;

typedef enum { TL_ATTEMPT, TL_FAILURE, TL_RECOVERY, TL_FAULT, TL_STRAGGLER, TL_LANES } TimelineLane;

typedef struct {
    double t;
    char event[32];
    char label[200]; /* one line for the marker's tooltip and the event table */
    TimelineLane lane;
} RunEvent;

typedef struct {
    double t0, t1; /* launch .. end (t1 < 0: still open at the end of the log) */
    int attempt;
    char hosts[200];
} RunAttempt;

typedef struct {
    int rank;
    long long step;
    double seconds;
    long long seq; /* order read (a later report of the same rank and step wins) */
} RankStep;

typedef struct {
    double t;
    int rank;
    char host[64], section[32];
    double relative, individual; /* NAN when absent */
} Straggler;

typedef struct {
    char key[48];
    char *value; /* owned; whole (a launch command can be long: the page wraps it, never cuts it) */
} ConfigItem;

/* The time ledger from the launcher's `goodput` event (docs/LAUNCHER.md, Time ledger). */
#define REPORT_CAUSES 32
typedef struct {
    double t0, t1;
    int cause; /* index into RunData.cause */
    int attempt;
} CauseSegment;

typedef struct {
    /* training log: one point per step (the last line of a step wins: a resumed run recomputes) */
    Series loss, val_loss, tokens_per_s, mfu, step_ms;
    /* launcher events */
    RunEvent *events;
    int nevents;
    RunAttempt *attempts;
    int nattempts;
    RankStep *cells; /* per-rank step seconds */
    int ncells, cells_cap;
    Straggler *stragglers;
    int nstragglers;
    int have_finished;
    double goodput, productive_s, wall_s;
    int restarts;
    long long steps;
    char status[16];
    /* the time ledger: causes in the event's order, their seconds, the segments in time */
    int have_ledger, ncauses;
    char cause[REPORT_CAUSES][24];
    double cause_s[REPORT_CAUSES], ledger_wall_s, effective;
    CauseSegment *segments;
    int nsegments;
    /* layout and configuration */
    ConfigItem *config;
    int nconfig;
    char sources[8][256]; /* files read, for the page footer */
    int nsources;
    int train_lines, event_lines;
} RunData;

/* Read a run directory (its *.jsonl files and config.json) or one JSON-lines file, adding to d
 * (zero it first; several paths may be added). 0, or -1 with myr_error() naming the file and line. */
int report_load(const char *path, RunData *d);
/* Sort and de-duplicate what was loaded (call once, after the last report_load). */
void report_finish(RunData *d);
void report_free(RunData *d);

/* Text as HTML/SVG character data or attribute value (<, >, &, " escaped). */
void report_escape(FILE *f, const char *s);

/* ---- SVG plots (report_svg.c); each writes one <svg class="plot" data-plot=ID ...> ---- */
typedef struct {
    const char *name, *color;
    const Series *s;
    int points; /* 1: markers only (validation loss), 0: a line */
} PlotSeries;

void svg_line_plot(FILE *f, const char *id, const char *title, const char *xlabel, const char *ylabel,
                   const PlotSeries *series, int nseries);
void svg_heatmap(FILE *f, const char *id, const RankStep *cells, int ncells);
void svg_timeline(FILE *f, const char *id, const RunData *d);
void svg_goodput(FILE *f, const char *id, const RunData *d);
void svg_time_ledger(FILE *f, const char *id, const RunData *d);   /* the causes as one stacked bar */
void svg_cause_timeline(FILE *f, const char *id, const RunData *d); /* the causes in time, by attempt */
const char *report_cause_color(const char *cause);

/* ---- the page (report_html.c) ---- */
int report_write_html(FILE *f, const RunData *d, const char *title);

#endif
