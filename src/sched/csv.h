/* csv.h: a small line-numbered CSV reader for the scheduler's trace and node-list inputs
 * (plain comma-separated fields, no quoting, header row naming the columns). Every error it
 * records names the file and line so a bad row can be found and fixed. */
#ifndef MYRIAD_SCHED_CSV_H
#define MYRIAD_SCHED_CSV_H

#include <stdio.h>

#define CSV_MAX_FIELDS 32

typedef struct {
    FILE *f;
    const char *path;
    char *buf;
    size_t cap;
    int line;       /* 1-based line number of the current row */
    int ncols;      /* columns in the header */
    char *header[CSV_MAX_FIELDS];
    char *field[CSV_MAX_FIELDS];
    int nfields;    /* fields in the current row */
    int error;
} CsvReader;

int csv_open(CsvReader *r, const char *path);
void csv_close(CsvReader *r);
/* Column index of a header name, -1 if absent. */
int csv_col(const CsvReader *r, const char *name);
/* Reads the next non-empty row: 1, or 0 at end of file. */
int csv_next(CsvReader *r);
/* The field (empty string when the row is short or col < 0). */
const char *csv_field(const CsvReader *r, int col);
/* Parse a field as an integer / number; on junk records "path:line: column X ..." and returns -1. */
int csv_int(CsvReader *r, int col, int *out);
int csv_double(CsvReader *r, int col, double *out);

#endif
