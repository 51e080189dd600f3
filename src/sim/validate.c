/* validate.c: `myriad sim validate FILE.csv`: compare the simulator with published measurements.
 * Two formats (header names select the columns):
 *   step time (..., tp, pp, vpp, dp, global_batch, micro_batch, recompute, seq_parallel, dtype, ...,
 *     iter_time_s): predict the iteration time; an empty micro_batch or vpp is searched (fastest
 *     that fits), as the source did not publish it;
 *   memory (..., weights_grads_optimizer_gib, activations_gib): predict both categories. The
 *     interleaving of those runs is taken from the matching row of published_a100.csv next to the
 *     file (same paper, same runs), or 1 when there is none.
 * The published runs used Megatron-LM of 2021-22: unfused attention (softmax and dropout kernels),
 * fp32 gradient accumulation, no distributed optimizer and no overlap of the data-parallel
 * all-reduce; the simulator is set up accordingly (a description of the software, not a fit). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "util/error.h"

#define MAXCOL 40
#define MAXROW 256

typedef struct {
    char *names[MAXCOL];
    int ncol;
} Header;

static int split(char *line, char **cols, int max) {
    int n = 0;
    char *p = line;
    line[strcspn(line, "\r\n")] = 0;
    while (n < max) {
        cols[n++] = p;
        char *c = strchr(p, ',');
        if (!c) break;
        *c = 0;
        p = c + 1;
    }
    return n;
}

static int col(const Header *h, const char *name) {
    for (int i = 0; i < h->ncol; i++)
        if (!strcmp(h->names[i], name)) return i;
    return -1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void load_cluster(const char *gpu_name, ClusterSpec *c, GpuSpec *g, int *have) {
    if (sim_load_cluster("selene", c)) sim_cluster_defaults(c);
    c->gpus = 0;
    *have = sim_load_gpu(gpu_name, g) == 0;
}

/* The software of a source's runs (see sim_software_preset). */
static void published_software(Layout *l, const char *source) {
    sim_software_preset(l, strncmp(source, "narayanan2021", 13) ? "megatron-2022" : "megatron-2021");
}

/* vpp of the run with the same shape and layout in published_a100.csv beside `path`. */
static int companion_vpp(const char *path, int layers, int hidden, int tp, int pp, int gpus) {
    char other[1024];
    snprintf(other, sizeof other, "%s", path);
    char *slash = strrchr(other, '/');
    snprintf(slash ? slash + 1 : other, sizeof other - (slash ? (size_t)(slash + 1 - other) : 0), "published_a100.csv");
    FILE *f = fopen(other, "r");
    if (!f) return 1;
    char line[4096], hdr[4096];
    int vpp = 1;
    if (!fgets(hdr, sizeof hdr, f)) { fclose(f); return 1; }
    Header h;
    h.ncol = split(hdr, h.names, MAXCOL);
    int cl = col(&h, "layers"), ch = col(&h, "hidden"), ct = col(&h, "tp"), cp = col(&h, "pp"), cg = col(&h, "gpus"),
        cv = col(&h, "vpp");
    while (cl >= 0 && ch >= 0 && ct >= 0 && cp >= 0 && cg >= 0 && cv >= 0 && fgets(line, sizeof line, f)) {
        char *c[MAXCOL];
        int n = split(line, c, MAXCOL);
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

int sim_validate_file(const char *path, int json, FILE *out, double *median_err, double *max_err) {
    FILE *f = fopen(path, "r");
    if (!f) return myr_error("cannot open %s", path);
    char hdrline[4096];
    if (!fgets(hdrline, sizeof hdrline, f)) { fclose(f); return myr_error("%s is empty", path); }
    Header h;
    h.ncol = split(hdrline, h.names, MAXCOL);
    int is_mem = col(&h, "activations_gib") >= 0;
    int is_step = col(&h, "iter_time_s") >= 0;
    if (!is_mem && !is_step) {
        fclose(f);
        return myr_error("%s: header has neither iter_time_s nor activations_gib (not a validation file)", path);
    }
    const char *need_step[] = {"case", "layers", "hidden", "heads", "vocab", "seq", "gpu", "gpus", "tp", "pp", "vpp", "dp",
                               "global_batch", "micro_batch", "recompute", "seq_parallel", "dtype", "iter_time_s", NULL};
    const char *need_mem[] = {"case", "layers", "hidden", "heads", "vocab", "seq", "gpus", "tp", "pp", "micro_batch",
                              "recompute", "seq_parallel", "weights_grads_optimizer_gib", "activations_gib", NULL};
    for (const char **n = is_mem ? need_mem : need_step; *n; n++)
        if (col(&h, *n) < 0) { fclose(f); return myr_error("%s: missing column '%s'", path, *n); }
    double errs[2 * MAXROW];
    int nerr = 0, rowno = 1;
    char line[4096];
    if (json) fprintf(out, "{\"file\":\"%s\",\"kind\":\"%s\",\"rows\":[", path, is_mem ? "memory" : "step_time");
    else if (is_mem)
        fprintf(out, "%-22s %10s %10s %7s   %10s %10s %7s\n", "case", "wgo GiB", "published", "err", "act GiB", "published", "err");
    else
        fprintf(out, "%-22s %6s %4s %4s %10s %10s %8s %7s\n", "case", "gpus", "mb", "vpp", "predicted", "measured", "error", "TF/GPU");
    int first = 1;
    while (fgets(line, sizeof line, f)) {
        rowno++;
        if (line[0] == '\n' || line[0] == '#') continue;
        char *c[MAXCOL];
        int n = split(line, c, MAXCOL);
        if (n != h.ncol) { fclose(f); return myr_error("%s:%d: %d columns, header has %d", path, rowno, n, h.ncol); }
#define I(name) atoi(c[col(&h, name)])
#define D(name) atof(c[col(&h, name)])
#define S(name) c[col(&h, name)]
        SimModel m = {0};
        snprintf(m.name, sizeof m.name, "%s", S("case"));
        m.layers = I("layers"); m.hidden = I("hidden"); m.heads = I("heads");
        m.kv_heads = col(&h, "kv_heads") >= 0 && S("kv_heads")[0] ? I("kv_heads") : m.heads;
        m.ffn = col(&h, "ffn") >= 0 && S("ffn")[0] ? I("ffn") : 4 * m.hidden;
        m.vocab = I("vocab"); m.seq = I("seq"); m.top_k = 1;
        Layout l;
        sim_layout_defaults(&l);
        published_software(&l, col(&h, "source") >= 0 ? S("source") : "");
        l.tp = I("tp"); l.pp = I("pp"); l.seq = m.seq;
        l.dp = I("gpus") / (l.tp * l.pp);
        l.micro_batch = S("micro_batch")[0] ? I("micro_batch") : 0;
        l.sp = !strcmp(S("seq_parallel"), "yes");
        if (sim_recompute_parse(S("recompute"), &l.recompute)) { fclose(f); return myr_error("%s:%d: %s", path, rowno, myr_last_error()); }
        l.dtype = DT_FP16;
        if (col(&h, "dtype") >= 0 && sim_dtype_parse(S("dtype"), &l.dtype)) { fclose(f); return myr_error("%s:%d: %s", path, rowno, myr_last_error()); }
        ClusterSpec cl;
        GpuSpec g;
        int have_gpu;
        load_cluster(col(&h, "gpu") >= 0 ? S("gpu") : "a100-80g", &cl, &g, &have_gpu);
        if (!have_gpu) { fclose(f); return myr_error("%s:%d: %s", path, rowno, myr_last_error()); }
        if (is_mem) {
            l.vpp = companion_vpp(path, m.layers, m.hidden, l.tp, l.pp, I("gpus"));
            /* enough micro-batches to fill the pipeline (the figure's runs did) */
            l.global_batch = l.dp * (l.micro_batch > 0 ? l.micro_batch : 1) * l.pp * 8;
            SimMemory mem;
            sim_memory(&m, &l, &mem);
            double gib = 1024.0 * 1024.0 * 1024.0;
            double wgo = (mem.weights + mem.grads + mem.optimizer) / gib, act = mem.activations / gib;
            double pw = D("weights_grads_optimizer_gib"), pa = D("activations_gib");
            double ew = (wgo - pw) / pw, ea = (act - pa) / pa;
            errs[nerr++] = fabs(ew);
            errs[nerr++] = fabs(ea);
            if (json)
                fprintf(out, "%s{\"case\":\"%s\",\"vpp\":%d,\"wgo_gib\":%.4f,\"wgo_published\":%.4f,\"wgo_error\":%.4f,"
                             "\"act_gib\":%.4f,\"act_published\":%.4f,\"act_error\":%.4f}",
                        first ? "" : ",", m.name, l.vpp, wgo, pw, ew, act, pa, ea);
            else
                fprintf(out, "%-22s %10.2f %10.2f %+6.1f%%   %10.2f %10.2f %+6.1f%%\n", m.name, wgo, pw, 100 * ew, act, pa, 100 * ea);
        } else {
            int search_vpp = !S("vpp")[0];
            l.vpp = search_vpp ? 1 : I("vpp");
            if (col(&h, "dp") >= 0 && S("dp")[0]) l.dp = I("dp");
            l.global_batch = I("global_batch");
            SimResult r;
            if (sim_step_search(&m, &cl, &g, &l, search_vpp, &r)) {
                fclose(f);
                return myr_error("%s:%d (%s): %s", path, rowno, m.name, myr_last_error());
            }
            double meas = D("iter_time_s");
            double err = (r.step_time - meas) / meas;
            errs[nerr++] = fabs(err);
            if (json)
                fprintf(out, "%s{\"case\":\"%s\",\"gpus\":%d,\"micro_batch\":%d,\"vpp\":%d,\"predicted_s\":%.4f,"
                             "\"measured_s\":%.4f,\"error\":%.4f,\"tflops_per_gpu\":%.1f}",
                        first ? "" : ",", m.name, r.gpus, r.micro_batch, r.vpp, r.step_time, meas, err, r.tflops_per_gpu);
            else
                fprintf(out, "%-22s %6d %4d %4d %9.3fs %9.3fs %+7.1f%% %7.1f\n", m.name, r.gpus, r.micro_batch, r.vpp,
                        r.step_time, meas, 100 * err, r.tflops_per_gpu);
        }
        first = 0;
        if (nerr >= 2 * MAXROW - 2) break;
#undef I
#undef D
#undef S
    }
    fclose(f);
    if (!nerr) return myr_error("%s has no data rows", path);
    qsort(errs, nerr, sizeof errs[0], cmp_double);
    double med = nerr % 2 ? errs[nerr / 2] : 0.5 * (errs[nerr / 2 - 1] + errs[nerr / 2]);
    double mx = errs[nerr - 1];
    if (json) fprintf(out, "],\"median_abs_error\":%.4f,\"max_abs_error\":%.4f}\n", med, mx);
    else fprintf(out, "median |error| %.1f%%, max |error| %.1f%% over %d %s\n", 100 * med, 100 * mx, nerr,
                 is_mem ? "values" : "runs");
    if (median_err) *median_err = med;
    if (max_err) *max_err = mx;
    return 0;
}
