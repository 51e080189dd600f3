/* doctor_report.c: the doctor's outputs: the human table, the JSON document (read back by
 * `myriad run --preflight` and as a --baseline), and reading a baseline. Format:
 * docs/OPERATIONS.md. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "ops/doctor.h"
#include "util/error.h"

static const char *scope_name(DoctorScope s) { return s == SCOPE_RANK ? "rank" : s == SCOPE_HOST ? "host" : "pair"; }

static void turns_note(char *out, size_t n, const DoctorSetup *s) {
    if (s->concurrent) snprintf(out, n, "all ranks measured at once (--concurrent)");
    else if (s->shared_kernels) snprintf(out, n, "hosts share a kernel: ranks, hosts and pairs took turns");
    else snprintf(out, n, "ranks of a host took turns; hosts measured at once");
}

static void minmax(const DoctorResults *r, DoctorCheck c, double *lo, double *hi) {
    *lo = INFINITY, *hi = -INFINITY;
    for (int i = 0; i < r->nsamples[c]; i++) {
        double v = r->samples[c][i].value;
        if (!(v > 0)) continue;
        if (v < *lo) *lo = v;
        if (v > *hi) *hi = v;
    }
}

void doctor_print_table(const DoctorResults *r, const DoctorVerdict *v, const DoctorSetup *s) {
    char note[96];
    turns_note(note, sizeof note, s);
    printf("myriad doctor: %d ranks on %d hosts, %d repetitions, %.1f s (%s)\n", r->nranks, r->nhosts, s->reps,
           s->seconds, note);
    printf("compute checks on %s (%s, rank 0: %s): GEMM %zu^3, memory %s of %.0f MiB\n", s->device, s->dtype,
           s->device_name, s->gemm_n, s->memory, s->triad_bytes / 1048576.0);
    printf("%-34s %-8s %10s %10s %10s %6s %6s %10s\n", "check", "unit", "median", "min", "max", "noise", "limit", "baseline");
    for (int c = 0; c < CHK_N; c++) {
        const DoctorCheckInfo *ci = doctor_check_info((DoctorCheck)c);
        char label[64], med[16] = "n/a", lo_s[16] = "-", hi_s[16] = "-", base[16] = "-";
        snprintf(label, sizeof label, "%s (per %s, %d)", ci->name, scope_name(ci->scope), r->nsamples[c]);
        double lo, hi;
        minmax(r, (DoctorCheck)c, &lo, &hi);
        if (s->skip && s->skip[c]) snprintf(med, sizeof med, "skipped");
        else if (isfinite(v->median[c])) snprintf(med, sizeof med, "%.4g", v->median[c]);
        if (isfinite(lo)) snprintf(lo_s, sizeof lo_s, "%.4g", lo), snprintf(hi_s, sizeof hi_s, "%.4g", hi);
        if (r->baseline[c] > 0) snprintf(base, sizeof base, "%.4g", r->baseline[c]);
        printf("%-34s %-8s %10s %10s %10s %5.2fx %5.0f%% %10s\n", label, ci->unit, med, lo_s, hi_s, v->noise[c],
               100 * v->effective[c], base);
    }
    for (int c = 0; c < CHK_N; c++) /* only where something was judged, and the raise shows at 0.1% */
        if (lround(1000 * v->effective[c]) > lround(1000 * r->threshold[c]) && (isfinite(v->median[c]) || r->baseline[c] > 0))
            printf("note: %s repetitions scatter (best/median %.3fx): its limit is %.1f%%, not %.1f%% (--noise-k %g)\n",
                   doctor_check_info((DoctorCheck)c)->name, v->noise[c], 100 * v->effective[c], 100 * r->threshold[c],
                   r->noise_k);
    printf("\n%-24s %5s", "host", "ranks");
    for (int c = 0; c < CHK_N; c++) printf(" %15s", doctor_check_info((DoctorCheck)c)->name);
    printf("  verdict\n");
    for (int h = 0; h < r->nhosts; h++) {
        int nr = 0;
        for (int k = 0; k < r->nranks; k++) nr += r->rank_host[k] == h;
        printf("%-24s %5d", r->hosts[h], nr);
        for (int c = 0; c < CHK_N; c++) {
            double x = v->host_value[c][h];
            if (isfinite(x)) printf(" %15.4g", x);
            else printf(" %15s", "-");
        }
        printf("  %s\n", doctor_host_flagged(v, h) ? "FLAGGED" : "ok");
    }
    printf("(host figures: the worst rank for per-rank checks, the best peer for pair checks)\n");
    int bad = 0;
    for (int h = 0; h < r->nhosts; h++) bad += doctor_host_flagged(v, h);
    for (int i = 0; i < v->nflags; i++) printf("flagged %s: %s\n", r->hosts[v->flags[i].host], v->flags[i].reason);
    if (bad) printf("%d of %d hosts flagged\n", bad, r->nhosts);
    else if (r->nhosts == 1) printf("the host is healthy\n");
    else printf("all %d hosts healthy\n", r->nhosts);
    fflush(stdout);
}

static cJSON *num_or_null(double x) { return isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull(); }

char *doctor_json(const DoctorResults *r, const DoctorVerdict *v, const DoctorSetup *s) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "doctor", 1);
    cJSON_AddNumberToObject(root, "ranks", r->nranks);
    cJSON *hosts = cJSON_AddArrayToObject(root, "hosts");
    for (int h = 0; h < r->nhosts; h++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "host", r->hosts[h]);
        cJSON *rk = cJSON_AddArrayToObject(o, "ranks");
        for (int k = 0; k < r->nranks; k++)
            if (r->rank_host[k] == h) cJSON_AddItemToArray(rk, cJSON_CreateNumber(k));
        cJSON_AddBoolToObject(o, "flagged", doctor_host_flagged(v, h));
        cJSON_AddItemToArray(hosts, o);
    }
    cJSON *st = cJSON_AddObjectToObject(root, "setup");
    char note[96];
    turns_note(note, sizeof note, s);
    cJSON_AddStringToObject(st, "device", s->device);
    cJSON_AddStringToObject(st, "dtype", s->dtype);
    cJSON_AddStringToObject(st, "device_name", s->device_name);
    cJSON_AddStringToObject(st, "memory_check", s->memory);
    cJSON_AddNumberToObject(st, "reps", s->reps);
    cJSON_AddNumberToObject(st, "gemm_n", (double)s->gemm_n);
    cJSON_AddNumberToObject(st, "triad_bytes", (double)s->triad_bytes);
    cJSON_AddNumberToObject(st, "msg_bytes", (double)s->msg_bytes);
    cJSON_AddNumberToObject(st, "peers", s->peers);
    cJSON_AddNumberToObject(st, "noise_k", r->noise_k);
    cJSON_AddStringToObject(st, "turns", note);
    cJSON_AddNumberToObject(st, "seconds", round(s->seconds * 1000) / 1000);
    cJSON *ph = cJSON_AddObjectToObject(st, "phase_seconds");
    cJSON_AddNumberToObject(ph, "compute", round(s->phase_s[0] * 1000) / 1000);
    cJSON_AddNumberToObject(ph, "intra_host", round(s->phase_s[1] * 1000) / 1000);
    cJSON_AddNumberToObject(ph, "host_pairs", round(s->phase_s[2] * 1000) / 1000);
    cJSON *checks = cJSON_AddArrayToObject(root, "checks");
    for (int c = 0; c < CHK_N; c++) {
        const DoctorCheckInfo *ci = doctor_check_info((DoctorCheck)c);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "check", ci->name);
        cJSON_AddStringToObject(o, "unit", ci->unit);
        cJSON_AddStringToObject(o, "scope", scope_name(ci->scope));
        cJSON_AddBoolToObject(o, "higher_is_better", ci->higher_better);
        if (s->skip && s->skip[c]) cJSON_AddBoolToObject(o, "skipped", 1);
        cJSON_AddNumberToObject(o, "threshold", r->threshold[c]);
        cJSON_AddNumberToObject(o, "noise", round(v->noise[c] * 10000) / 10000);
        cJSON_AddNumberToObject(o, "effective_threshold", round(v->effective[c] * 10000) / 10000);
        cJSON_AddItemToObject(o, "median", num_or_null(v->median[c]));
        cJSON_AddItemToObject(o, "reference", num_or_null(v->reference[c]));
        cJSON_AddItemToObject(o, "baseline", num_or_null(r->baseline[c] > 0 ? r->baseline[c] : NAN));
        cJSON *vals = cJSON_AddArrayToObject(o, "values");
        for (int i = 0; i < r->nsamples[c]; i++) {
            const DoctorSample *sm = &r->samples[c][i];
            cJSON *e = cJSON_CreateObject();
            if (ci->scope == SCOPE_RANK) {
                cJSON_AddNumberToObject(e, "rank", sm->a);
                cJSON_AddStringToObject(e, "host", r->hosts[r->rank_host[sm->a]]);
            } else if (ci->scope == SCOPE_HOST) cJSON_AddStringToObject(e, "host", r->hosts[sm->a]);
            else {
                cJSON *pr = cJSON_AddArrayToObject(e, "hosts");
                cJSON_AddItemToArray(pr, cJSON_CreateString(r->hosts[sm->a]));
                cJSON_AddItemToArray(pr, cJSON_CreateString(r->hosts[sm->b]));
            }
            cJSON_AddNumberToObject(e, "value", sm->value);
            if (s->raw && r->raw[c]) {
                cJSON *reps = cJSON_AddArrayToObject(e, "samples");
                for (int k = 0; k < r->nraw[c]; k++)
                    cJSON_AddItemToArray(reps, cJSON_CreateNumber(r->raw[c][(size_t)i * r->nraw[c] + k]));
            }
            cJSON_AddItemToArray(vals, e);
        }
        cJSON *hv = cJSON_AddArrayToObject(o, "host_values");
        for (int h = 0; h < r->nhosts; h++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "host", r->hosts[h]);
            cJSON_AddItemToObject(e, "value", num_or_null(v->host_value[c][h]));
            cJSON_AddItemToArray(hv, e);
        }
        cJSON_AddItemToArray(checks, o);
    }
    cJSON *fl = cJSON_AddArrayToObject(root, "flagged");
    for (int i = 0; i < v->nflags; i++) {
        const DoctorFlag *f = &v->flags[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "host", r->hosts[f->host]);
        cJSON_AddStringToObject(o, "check", doctor_check_info(f->check)->name);
        cJSON_AddStringToObject(o, "against", f->vs_baseline ? "baseline" : "median");
        cJSON_AddNumberToObject(o, "deficit", round(f->deficit * 10000) / 10000);
        cJSON_AddStringToObject(o, "reason", f->reason);
        cJSON_AddItemToArray(fl, o);
    }
    cJSON_AddBoolToObject(root, "healthy", v->nflags == 0);
    char *out = cJSON_Print(root);
    cJSON_Delete(root);
    return out;
}

int doctor_load_baseline(const char *path, double baseline[CHK_N]) {
    FILE *f = fopen(path, "rb");
    if (!f) return myr_error("doctor: cannot open --baseline %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)(n > 0 ? n : 0) + 1);
    size_t got = n > 0 ? fread(text, 1, (size_t)n, f) : 0;
    fclose(f);
    text[got] = 0;
    cJSON *root = cJSON_Parse(text);
    free(text);
    cJSON *checks = root ? cJSON_GetObjectItem(root, "checks") : NULL;
    if (!cJSON_IsArray(checks)) {
        cJSON_Delete(root);
        return myr_error("doctor: --baseline %s is not the JSON of `myriad doctor --json` (no \"checks\" array); "
                         "write one with `myriad run -n N --hosts FILE -- doctor --json > %s` on healthy hosts",
                         path, path);
    }
    /* a CPU's figures are no reference for a GPU's, nor bf16's for fp32's (files before the
     * device was recorded were measured on the CPU in fp32) */
    cJSON *st = cJSON_GetObjectItem(root, "setup"), *dev = st ? cJSON_GetObjectItem(st, "device") : NULL;
    cJSON *dty = st ? cJSON_GetObjectItem(st, "dtype") : NULL, *mem = st ? cJSON_GetObjectItem(st, "memory_check") : NULL;
    const char *bdev = cJSON_IsString(dev) ? dev->valuestring : "cpu", *bdt = cJSON_IsString(dty) ? dty->valuestring : "fp32";
    const char *bmem = cJSON_IsString(mem) ? mem->valuestring : "triad";
    const char *now_dt = doctor_gemm_dtype(), *now_mem = doctor_memory_check();
    if (strcmp(bdev, kernels_device()) || strcmp(bdt, now_dt) || strcmp(bmem, now_mem)) {
        int rc = myr_error("doctor: --baseline %s was measured on %s (%s GEMM, memory %s), this run measures on %s (%s, "
                           "memory %s); make a baseline with the same --device and --dtype",
                           path, bdev, bdt, bmem, kernels_device(), now_dt, now_mem);
        cJSON_Delete(root);
        return rc;
    }
    int found = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, checks) {
        cJSON *name = cJSON_GetObjectItem(c, "check"), *ref = cJSON_GetObjectItem(c, "reference");
        int k = cJSON_IsString(name) ? doctor_check_by_name(name->valuestring) : -1;
        if (k >= 0 && cJSON_IsNumber(ref) && ref->valuedouble > 0) baseline[k] = ref->valuedouble, found++;
    }
    cJSON_Delete(root);
    if (!found) return myr_error("doctor: --baseline %s holds no measured check (every \"reference\" is null); measure healthy hosts "
                                   "with `myriad doctor --json`", path);
    return 0;
}
