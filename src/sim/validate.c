/* validate.c: `myriad sim validate FILE.csv`: compare the simulator with published measurements.
 * Two formats (header names select them):
 *   step time (published_a100.csv, published_modern.csv): one run per row (validate_row.c turns it
 *     into model, layout, software, GPU and cluster); `metric` is iter_time_s, tokens_per_s_per_gpu
 *     or tflops_per_gpu (Megatron-LM's FLOP convention, sim_megatron_flops), converted to seconds per
 *     step; what the source did not publish (micro-batch, interleaving, recompute) is searched,
 *     fastest that fits in the GPU's memory. The error is that of the step time. Each row also
 *     reports its predicted memory and whether it fits (the run did). A row that cannot be
 *     simulated is listed with the reason and left out of the statistics, never dropped silently.
 *   memory (memory_a100.csv, Korthikanti et al. 2022 Fig. 1): weights+gradients+optimizer and
 *     activations; the interleaving of those runs is taken from the matching row of
 *     published_a100.csv next to the file (same paper, same runs), or 1 when there is none. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "sim/validate.h"
#include "util/error.h"

#define MAXROW 256
#define GIB (1024.0 * 1024.0 * 1024.0)

static int split(char *line, char **cols, int max) {
    int n = 0;
    char *p = line;
    line[strcspn(line, "\r\n")] = 0;
    while (n < max) {
        if (*p == '"') { /* quoted cell: up to the closing quote ("" inside is a quote) */
            cols[n++] = ++p;
            char *w = p;
            while (*p && !(*p == '"' && p[1] != '"')) {
                if (*p == '"') p++;
                *w++ = *p++;
            }
            if (*p == '"') p++;
            *w = 0;
            if (*p != ',') break;
            p++;
            continue;
        }
        cols[n++] = p;
        char *c = strchr(p, ',');
        if (!c) break;
        *c = 0;
        p = c + 1;
    }
    return n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* vpp of the run with the same shape and layout in published_a100.csv beside `path`. */
static int companion_vpp(const char *path, int layers, int hidden, int tp, int pp, int gpus) {
    char other[1024];
    snprintf(other, sizeof other, "%s", path);
    char *slash = strrchr(other, '/');
    snprintf(slash ? slash + 1 : other, sizeof other - (slash ? (size_t)(slash + 1 - other) : 0), "published_a100.csv");
    FILE *f = fopen(other, "r");
    if (!f) return 1;
    char line[8192], hdr[8192];
    int vpp = 1;
    if (!fgets(hdr, sizeof hdr, f)) { fclose(f); return 1; }
    ValHeader h;
    h.ncol = split(hdr, h.names, VAL_MAXCOL);
    int cl = val_col(&h, "layers"), ch = val_col(&h, "hidden"), ct = val_col(&h, "tp"), cp = val_col(&h, "pp"),
        cg = val_col(&h, "gpus"), cv = val_col(&h, "vpp");
    while (cl >= 0 && ch >= 0 && ct >= 0 && cp >= 0 && cg >= 0 && cv >= 0 && fgets(line, sizeof line, f)) {
        char *c[VAL_MAXCOL];
        int n = split(line, c, VAL_MAXCOL);
        if (n != h.ncol) continue;
        if (atoi(c[cl]) == layers && atoi(c[ch]) == hidden && atoi(c[ct]) == tp && atoi(c[cp]) == pp &&
            atoi(c[cg]) == gpus && c[cv][0]) {
            vpp = atoi(c[cv]);
            break;
        }
    }
    fclose(f);
    return vpp > 0 ? vpp : 1;
}

static int memory_row(const char *path, const ValHeader *h, char **c, int json, int first, FILE *out, double *errs,
                      int *nerr) {
#define I(name) atoi(c[val_col(h, name)])
#define D(name) atof(c[val_col(h, name)])
#define S(name) c[val_col(h, name)]
    SimModel m = {0};
    sim_model_set_arch(&m, ARCH_GPT);
    snprintf(m.name, sizeof m.name, "%s", S("case"));
    m.layers = I("layers"); m.hidden = I("hidden"); m.heads = I("heads"); m.kv_heads = m.heads;
    m.ffn = 4 * m.hidden; m.vocab = I("vocab"); m.seq = I("seq"); m.top_k = 1;
    Layout l;
    sim_layout_defaults(&l);
    sim_software_preset(&l, "megatron-2022");
    l.tp = I("tp"); l.pp = I("pp"); l.seq = m.seq; l.dp = I("gpus") / (l.tp * l.pp);
    l.micro_batch = S("micro_batch")[0] ? I("micro_batch") : 1;
    l.sp = !strcmp(S("seq_parallel"), "yes");
    l.dtype = DT_FP16;
    if (sim_recompute_parse(S("recompute"), &l.recompute)) return -1;
    l.vpp = companion_vpp(path, m.layers, m.hidden, l.tp, l.pp, I("gpus"));
    /* enough micro-batches to fill the pipeline (the figure's runs did) */
    l.global_batch = l.dp * l.micro_batch * l.pp * 8;
    SimMemory mem;
    sim_memory(&m, &l, &mem);
    double wgo = (mem.weights + mem.grads + mem.optimizer) / GIB, act = mem.activations / GIB;
    double pw = D("weights_grads_optimizer_gib"), pa = D("activations_gib");
    double ew = (wgo - pw) / pw, ea = (act - pa) / pa;
    errs[(*nerr)++] = fabs(ew);
    errs[(*nerr)++] = fabs(ea);
    if (json)
        fprintf(out, "%s{\"case\":\"%s\",\"vpp\":%d,\"wgo_gib\":%.4f,\"wgo_published\":%.4f,\"wgo_error\":%.4f,"
                     "\"act_gib\":%.4f,\"act_published\":%.4f,\"act_error\":%.4f}",
                first ? "" : ",", m.name, l.vpp, wgo, pw, ew, act, pa, ea);
    else
        fprintf(out, "%-22s %10.2f %10.2f %+6.1f%%   %10.2f %10.2f %+6.1f%%\n", m.name, wgo, pw, 100 * ew, act, pa, 100 * ea);
    return 0;
#undef I
#undef D
#undef S
}

int sim_validate_case(ValCase *vc, SimResult *r, GpuSpec *g) {
    ClusterSpec cl;
    if (sim_load_gpu(vc->gpu_name, g)) return -1;
    if (vc->cluster_name[0] ? sim_load_cluster(vc->cluster_name, &cl) : sim_load_default_cluster(vc->gpu_name, &cl))
        return -1;
    if (sim_cluster_fit(&cl, vc->gpus, NULL, 0)) return -1;
    SearchOpts so = {0};
    so.search_mb = vc->search_mb;
    so.search_vpp = vc->search_vpp;
    so.search_recompute = vc->search_recompute;
    return sim_step_search_ex(&vc->m, &cl, g, &vc->l, &so, r);
}

static void step_row(ValCase *vc, int json, int first, FILE *out, ValStats *st) {
    SimResult r;
    GpuSpec g;
    if (!vc->why[0] && sim_validate_case(vc, &r, &g)) snprintf(vc->why, sizeof vc->why, "%s", myr_last_error());
    if (vc->why[0]) {
        st->skipped++;
        if (json) fprintf(out, "%s{\"case\":\"%s\",\"simulated\":false,\"reason\":\"%s\"}", first ? "" : ",", vc->name, vc->why);
        else fprintf(out, "%-44s not simulated: %s\n", vc->name, vc->why);
        return;
    }
    const Layout *l = &vc->l;
    double err = (r.step_time - vc->measured_s) / vc->measured_s;
    double pred_value = vc->value * vc->measured_s / r.step_time; /* every metric is per second */
    if (!strcmp(vc->metric, "iter_time_s")) pred_value = r.step_time;
    int fits = r.mem.total <= g.hbm_gib * GIB;
    st->errs[st->n++] = fabs(err);
    st->fit += fits;
    char lay[64];
    snprintf(lay, sizeof lay, "%d/%d/%d/%d/%d mb%d %s", l->tp, l->cp, l->pp, r.vpp, l->dp, r.micro_batch,
             l->recompute == RECOMPUTE_FULL ? "full" : l->recompute == RECOMPUTE_SELECTIVE ? "sel" : "none");
    if (json)
        fprintf(out, "%s{\"case\":\"%s\",\"simulated\":true,\"software\":\"%s\",\"gpu\":\"%s\",\"gpus\":%d,\"tp\":%d,\"cp\":%d,"
                     "\"pp\":%d,\"vpp\":%d,\"dp\":%d,\"micro_batch\":%d,\"recompute\":\"%s\",\"metric\":\"%s\","
                     "\"published\":%.6g,\"predicted\":%.6g,\"predicted_s\":%.6g,\"measured_s\":%.6g,\"error\":%.4f,"
                     "\"memory_gib\":%.3f,\"hbm_gib\":%g,\"fits\":%s,\"dtype\":\"%s\",\"mfu_measured\":%.4f}",
                first ? "" : ",", vc->name, vc->software, g.name, vc->gpus, l->tp, l->cp, l->pp, r.vpp, l->dp, r.micro_batch,
                sim_recompute_name(l->recompute), vc->metric, vc->value, pred_value, r.step_time, vc->measured_s, err,
                r.mem.total / GIB, g.hbm_gib, fits ? "true" : "false", sim_dtype_name(l->dtype), r.mfu * r.step_time / vc->measured_s);
    else
        fprintf(out, "%-44s %5d %-24s %9.4g %9.4g %+7.1f%% %6.1f/%-3g%s\n", vc->name, vc->gpus, lay, vc->value, pred_value,
                100 * err, r.mem.total / GIB, g.hbm_gib, fits ? "" : " DOES NOT FIT");
}

static int validate_rows(const char *path, int json, FILE *out, ValStats *st, const char *want, ValCase *found);
static int keep_open; /* JSON: leave the file's object open (the caller appends to it) */

int sim_validate_file(const char *path, int json, FILE *out, double *median_err, double *max_err) {
    ValStats st;
    if (sim_validate_stats(path, json, out, &st)) return -1;
    if (median_err) *median_err = st.median;
    if (max_err) *max_err = st.max;
    return 0;
}

int sim_validate_stats(const char *path, int json, FILE *out, ValStats *st) {
    return validate_rows(path, json, out, st, NULL, NULL);
}

int sim_validate_stats_open(const char *path, FILE *out, ValStats *st) {
    keep_open = 1;
    int rc = validate_rows(path, 1, out, st, NULL, NULL);
    keep_open = 0;
    return rc;
}

int sim_validate_find(const char *path, const char *name, ValCase *vc) {
    ValStats st;
    vc->name[0] = 0;
    if (validate_rows(path, 0, NULL, &st, name, vc)) return -1;
    if (!vc->name[0]) return myr_error("%s has no row named '%s'", path, name);
    return 0;
}

int sim_validate_load(const char *path, ValCase **cases, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return myr_error("cannot open %s", path);
    char hdrline[8192];
    if (!fgets(hdrline, sizeof hdrline, f)) { fclose(f); return myr_error("%s is empty", path); }
    ValHeader h;
    h.ncol = split(hdrline, h.names, VAL_MAXCOL);
    if (val_col(&h, "activations_gib") >= 0) { fclose(f); return 0; } /* a memory file: no step rows */
    static char line[1 << 16];
    int rowno = 1;
    while (fgets(line, sizeof line, f)) {
        rowno++;
        if (line[0] == '\n' || line[0] == '#') continue;
        char *c[VAL_MAXCOL];
        int k = split(line, c, VAL_MAXCOL);
        if (k != h.ncol) { fclose(f); return myr_error("%s:%d: %d columns, header has %d", path, rowno, k, h.ncol); }
        ValCase *grown = realloc(*cases, sizeof **cases * (size_t)(*n + 1));
        if (!grown) { fclose(f); return myr_error("out of memory"); }
        *cases = grown;
        if (val_row_case(&h, c, &(*cases)[*n])) { fclose(f); return myr_error("%s:%d: %s", path, rowno, myr_last_error()); }
        (*n)++;
    }
    fclose(f);
    return 0;
}

static int validate_rows(const char *path, int json, FILE *out, ValStats *st, const char *want, ValCase *found) {
    memset(st, 0, sizeof *st);
    FILE *f = fopen(path, "r");
    if (!f) return myr_error("cannot open %s", path);
    char hdrline[8192];
    if (!fgets(hdrline, sizeof hdrline, f)) { fclose(f); return myr_error("%s is empty", path); }
    ValHeader h;
    h.ncol = split(hdrline, h.names, VAL_MAXCOL);
    int is_mem = val_col(&h, "activations_gib") >= 0;
    int is_step = val_col(&h, "iter_time_s") >= 0 || val_col(&h, "metric") >= 0;
    if (!is_mem && !is_step) {
        fclose(f);
        return myr_error("%s: header has neither iter_time_s/metric nor activations_gib (not a validation file)", path);
    }
    const char *need_step[] = {"case", "layers", "hidden", "heads", "vocab", "seq", "gpus", "tp", "pp", "vpp",
                               "global_batch", "micro_batch", "recompute", "seq_parallel", NULL};
    const char *need_mem[] = {"case", "layers", "hidden", "heads", "vocab", "seq", "gpus", "tp", "pp", "micro_batch",
                              "recompute", "seq_parallel", "weights_grads_optimizer_gib", "activations_gib", NULL};
    for (const char **n = is_mem ? need_mem : need_step; *n; n++)
        if (val_col(&h, *n) < 0) { fclose(f); return myr_error("%s: missing column '%s'", path, *n); }
    int rowno = 1, first = 1;
    static char line[1 << 16];
    if (want) {}
    else if (json) fprintf(out, "{\"file\":\"%s\",\"kind\":\"%s\",\"rows\":[", path, is_mem ? "memory" : "step_time");
    else if (is_mem)
        fprintf(out, "%-22s %10s %10s %7s   %10s %10s %7s\n", "case", "wgo GiB", "published", "err", "act GiB", "published", "err");
    else
        fprintf(out, "%-44s %5s %-24s %9s %9s %8s %s\n", "case", "gpus", "tp/cp/pp/vpp/dp mb rc", "published", "predicted",
                "error", "mem GiB/HBM");
    while (fgets(line, sizeof line, f)) {
        rowno++;
        if (line[0] == '\n' || line[0] == '#') continue;
        char *c[VAL_MAXCOL];
        int n = split(line, c, VAL_MAXCOL);
        if (n != h.ncol) { fclose(f); return myr_error("%s:%d: %d columns, header has %d", path, rowno, n, h.ncol); }
        if (st->n + st->skipped >= MAXROW - 2) break;
        if (want) {
            ValCase vc;
            if (!is_mem && !val_row_case(&h, c, &vc) && !strcmp(vc.name, want)) { *found = vc; break; }
            continue;
        }
        if (is_mem) {
            if (memory_row(path, &h, c, json, first, out, st->errs, &st->n)) {
                fclose(f);
                return myr_error("%s:%d: %s", path, rowno, myr_last_error());
            }
        } else {
            ValCase vc;
            if (val_row_case(&h, c, &vc)) { fclose(f); return myr_error("%s:%d: %s", path, rowno, myr_last_error()); }
            step_row(&vc, json, first, out, st);
        }
        first = 0;
    }
    fclose(f);
    if (want) return 0;
    if (!st->n) return myr_error("%s has no data rows the simulator could predict", path);
    qsort(st->errs, st->n, sizeof st->errs[0], cmp_double);
    st->median = st->n % 2 ? st->errs[st->n / 2] : 0.5 * (st->errs[st->n / 2 - 1] + st->errs[st->n / 2]);
    st->max = st->errs[st->n - 1];
    if (json) {
        fprintf(out, "],\"median_abs_error\":%.4f,\"max_abs_error\":%.4f,\"predicted\":%d,\"not_simulated\":%d", st->median,
                st->max, is_mem ? st->n / 2 : st->n, st->skipped);
        if (!is_mem) fprintf(out, ",\"fit_in_memory\":%d", st->fit);
        if (!keep_open) fprintf(out, "}\n");
    } else if (is_mem) {
        fprintf(out, "median |error| %.1f%%, max |error| %.1f%% over %d values\n", 100 * st->median, 100 * st->max, st->n);
    } else {
        fprintf(out, "median |error| %.1f%%, max |error| %.1f%% over %d predicted runs; %d not simulated; %d of %d "
                     "predicted to fit in memory\n", 100 * st->median, 100 * st->max, st->n, st->skipped, st->fit, st->n);
    }
    return 0;
}
