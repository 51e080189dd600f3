/* validate.h: the pieces of `myriad sim validate` shared by the driver (validate.c) and the row
 * parser (validate_row.c). */
#ifndef MYRIAD_SIM_VALIDATE_H
#define MYRIAD_SIM_VALIDATE_H

#include "sim/sim.h"

#define VAL_MAXCOL 40

typedef struct {
    char *names[VAL_MAXCOL];
    int ncol;
} ValHeader;

int val_col(const ValHeader *h, const char *name); /* column index or -1 (validate_row.c) */

/* One step-time row as the simulator sees it. */
typedef struct {
    char name[96];
    char source[64];   /* the `source` column: the unit left out by leave-one-source-out */
    SimModel m;
    Layout l;
    char software[32], gpu_name[64], cluster_name[64]; /* cluster "" = the GPU's default */
    int gpus;
    int search_mb, search_vpp, search_recompute; /* not published: searched (fastest that fits) */
    char metric[32];
    double value;      /* the published figure */
    double measured_s; /* seconds per step it implies */
    char why[256];     /* non-empty: the row cannot be simulated, and why */
} ValCase;

/* Fill vc from a data row; -1 with a reason for a malformed cell. */
int val_row_case(const ValHeader *h, char **cols, ValCase *vc);
/* Simulate a case (GPU, cluster sized to its GPUs, unpublished values searched). */
int sim_validate_case(ValCase *vc, SimResult *r, GpuSpec *g);

typedef struct {
    double errs[512];
    int n, skipped, fit;
    double median, max;
} ValStats;
int sim_validate_stats(const char *path, int json, FILE *out, ValStats *st);
/* The same as JSON with the file's object left open: the caller appends members and the '}'. */
int sim_validate_stats_open(const char *path, FILE *out, ValStats *st);
/* The row named `name` of a step-time file. */
int sim_validate_find(const char *path, const char *name, ValCase *vc);
/* Every step-time row of a file (a memory file: 0 rows), appended to *cases (realloc'd). */
int sim_validate_load(const char *path, ValCase **cases, int *n);

/* ---------- FITTED constants (validate_fit.c) ----------
 * The values of the model that were fitted to published runs rather than taken from a source.
 * Validation can override them; leave-one-source-out re-fits each without the rows of one source. */
typedef enum { FIT_SUSTAINED_HB = 0, FIT_SUSTAINED_A100, FIT_MLPERF_GEMM, FIT_MOE_IMBALANCE, FIT_N } FitId;
typedef struct {
    const char *key;   /* short name (tables, JSON) */
    const char *what;  /* what it means and which rows it is fitted on */
    const char *lives; /* where the shipped value is */
    double lo, hi;     /* search range */
    double prior;      /* the value without data to fit it on (the neutral one) */
} FitInfo;
typedef struct {
    int set[FIT_N];    /* 0 = the shipped value (configs, presets) */
    double v[FIT_N];
} FitValues;
const FitInfo *val_fit_info(int id);
double val_fit_shipped(int id);                     /* the value in configs/ and the presets */
int val_fit_uses(const ValCase *vc, int id);        /* the row's prediction depends on the constant */
int val_fit_trains(const ValCase *vc, int id);      /* the row is in the constant's fitting set */
/* A case ready to simulate many times: GPU and cluster loaded and sized once. */
typedef struct {
    const ValCase *vc;
    GpuSpec g;
    ClusterSpec c;
    int ok;            /* loaded (else vc->why or the load error says why) */
    char why[256];
} ValPrepared;
int val_prepare(const ValCase *vc, ValPrepared *p);
/* Simulate a prepared case with the constants of fv; the layout chosen by the search in *chosen
 * (may be NULL). */
int val_simulate(const ValPrepared *p, const FitValues *fv, SimResult *r, Layout *chosen);

/* ---------- leave-one-source-out (validate_loso.c) ---------- */
typedef struct {
    int rows;                 /* predicted rows */
    int nsources;
    double in_median, in_max; /* shipped constants */
    double loso_median, loso_max;
    FitValues all;            /* fitted on every row */
    int all_rows[FIT_N];      /* rows each constant was fitted on */
} LosoSummary;
/* Fit every FITTED constant on all rows and on all rows but one source's, predict that source, and
 * print the table (text or the body of a JSON object: "loso":{...}). */
int sim_validate_loso(const ValCase *cases, int n, int json, FILE *out, LosoSummary *sum);

#endif
