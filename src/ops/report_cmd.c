/* report_cmd.c: `myriad report RUN_DIR|LOG.jsonl... -o report.html`: read the logs
 * (report_load.c), write one self-contained HTML page (report_html.c) atomically. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "io/atomic_file.h"
#include "ops/report.h"
#include "util/opts.h"
#include "util/error.h"

typedef struct {
    const char *v[64];
    int n;
} Inputs;

static int add_input(void *ctx, const char *arg) {
    Inputs *in = ctx;
    if (in->n == 64) return myr_error("at most 64 inputs");
    in->v[in->n++] = arg;
    return 0;
}

/* -o: a value that looks like an option is a forgotten file name (`-o --title`), not a file */
static int set_out(void *dst, const char *v) {
    if (v[0] == '-') return myr_error("-o %s looks like an option, not a file (write ./%s to mean a file)", v, v);
    *(const char **)dst = v;
    return 0;
}

int cmd_report(int argc, char **argv) {
    const char *out = NULL, *title = "myriad run report";
    Inputs in = {{0}, 0};
    const Opt rows[] = {
        OPT_ALIAS(OPT_CALL("--out", "FILE", &out, set_out, "the HTML page to write (required; replaced atomically)"), "-o"),
        OPT_STR("--title", "TEXT", &title, "the page's title (default \"myriad run report\")"),
        OPT_END};
    OptCommand cmd = {
        .name = "report",
        .usage = "usage: myriad report RUN_DIR|LOG.jsonl [more...] -o report.html [--title TEXT]\n"
                 "One self-contained HTML page (inline SVG, no scripts, no network) picturing a run: loss and\n"
                 "validation loss, tokens/s and MFU, per-rank step times, the restart/failure/straggler timeline,\n"
                 "goodput, the layout and configuration. Inputs: the training log (train --log FILE.jsonl), the\n"
                 "launcher's event log (run --events FILE.jsonl), or a directory holding them (its *.jsonl and\n"
                 "config.json). See docs/OPERATIONS.md.",
        .rows = rows,
        .positional = add_input,
        .ctx = &in};
    opts_parse(&cmd, argc, argv);
    const char **inputs = in.v;
    int ninputs = in.n;
    if (!ninputs) myr_die("report: give a run directory or log, e.g. myriad report run.jsonl events.jsonl -o report.html");
    if (!out) myr_die("report: give the output file with -o report.html");
    RunData d;
    memset(&d, 0, sizeof d);
    for (int i = 0; i < ninputs; i++)
        if (report_load(inputs[i], &d) != 0) myr_die_last();
    report_finish(&d);
    char *page = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&page, &len);
    if (!mem || report_write_html(mem, &d, title) != 0 || fclose(mem) != 0) myr_die("report: out of memory writing the page");
    AtomicFile a;
    if (atomic_open(&a, out) || atomic_write(&a, page, len) || atomic_commit(&a)) myr_die("report: -o %s: %s", out, myr_last_error());
    fprintf(stderr, "myriad report: wrote %s (%zu bytes: %d steps, %d events, %d per-rank step times, %d stragglers)\n", out,
            len, d.loss.n, d.nevents, d.ncells, d.nstragglers);
    free(page);
    report_free(&d);
    return 0;
}
