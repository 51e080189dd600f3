/* csv.c: the line-numbered CSV reader (see csv.h). */
#include "sched/csv.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static int split(char *s, char **out) {
    int n = 0;
    for (;;) {
        if (n < CSV_MAX_FIELDS) out[n] = s;
        n++;
        char *comma = strchr(s, ',');
        if (!comma) break;
        *comma = 0;
        s = comma + 1;
    }
    return n;
}

static int read_line(CsvReader *r) {
    ssize_t len = getline(&r->buf, &r->cap, r->f);
    if (len < 0) return 0;
    r->line++;
    while (len > 0 && (r->buf[len - 1] == '\n' || r->buf[len - 1] == '\r')) r->buf[--len] = 0;
    return 1;
}

int csv_open(CsvReader *r, const char *path) {
    memset(r, 0, sizeof *r);
    r->path = path;
    r->f = fopen(path, "r");
    if (!r->f) return myr_error("cannot open %s: %s", path, strerror(errno));
    if (!read_line(r)) { fclose(r->f); r->f = NULL; return myr_error("%s: empty file (expected a header row)", path); }
    /* keep the header in its own storage: the row buffer is reused */
    char *h = strdup(r->buf);
    if (!h) return myr_error("out of memory");
    r->ncols = split(h, r->header);
    if (r->ncols > CSV_MAX_FIELDS) { free(h); fclose(r->f); r->f = NULL; return myr_error("%s: more than %d columns", path, CSV_MAX_FIELDS); }
    return 0;
}

void csv_close(CsvReader *r) {
    if (r->f) fclose(r->f);
    if (r->ncols) free(r->header[0]);
    free(r->buf);
    memset(r, 0, sizeof *r);
}

int csv_col(const CsvReader *r, const char *name) {
    for (int i = 0; i < r->ncols && i < CSV_MAX_FIELDS; i++)
        if (!strcmp(r->header[i], name)) return i;
    return -1;
}

int csv_next(CsvReader *r) {
    while (read_line(r)) {
        if (!r->buf[0]) continue;
        r->nfields = split(r->buf, r->field);
        return 1;
    }
    return 0;
}

const char *csv_field(const CsvReader *r, int col) {
    if (col < 0 || col >= r->nfields || col >= CSV_MAX_FIELDS) return "";
    return r->field[col];
}

int csv_int(CsvReader *r, int col, int *out) {
    const char *s = csv_field(r, col);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || errno || *end || v < INT_MIN || v > INT_MAX) {
        r->error = 1;
        return myr_error("%s:%d: column %s is '%s', expected an integer", r->path, r->line,
                         col >= 0 && col < r->ncols ? r->header[col] : "?", s);
    }
    *out = (int)v;
    return 0;
}

int csv_double(CsvReader *r, int col, double *out) {
    const char *s = csv_field(r, col);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || errno || *end || !isfinite(v)) {
        r->error = 1;
        return myr_error("%s:%d: column %s is '%s', expected a number", r->path, r->line,
                         col >= 0 && col < r->ncols ? r->header[col] : "?", s);
    }
    *out = v;
    return 0;
}
