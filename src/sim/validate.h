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

int val_col(const ValHeader *h, const char *name); /* column index or -1 */

/* One step-time row as the simulator sees it. */
typedef struct {
    char name[96];
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
/* The row named `name` of a step-time file. */
int sim_validate_find(const char *path, const char *name, ValCase *vc);

#endif
