/* trace_openb.c: the openb v2023 pod-list CSV reader and load rescaling. Each row is one pod:
 * name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,deletion_time,
 * scheduled_time]. A row that does not parse is reported as file:line with the column at fault. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/csv.h"
#include "sched/trace.h"
#include "util/error.h"
#include "util/rng.h"

static double gauss(uint64_t *s) { return sqrt(-2 * log(splitmix64_uniform(s))) * cos(2 * M_PI * splitmix64_uniform(s)); }

/* "A|B|C" -> bit mask over the cluster's types; *unknown gets the names the cluster lacks. */
static uint32_t parse_spec(const char *spec, const Cluster *c, char *unknown, int n) {
    uint32_t mask = 0;
    unknown[0] = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save, *tok = strtok_r(buf, "|", &save); tok; tok = strtok_r(NULL, "|", &save)) {
        int t = cluster_type_index(c, tok);
        if (t >= 0) mask |= 1u << t;
        else snprintf(unknown + strlen(unknown), n - strlen(unknown), "%s%s", unknown[0] ? "|" : "", tok);
    }
    return mask;
}

static int bad_row(CsvReader *r, TraceOptions *o) {
    if (!o->skip_bad) return -1;
    fprintf(o->warn ? o->warn : stderr, "myriad: skipping row: %s\n", myr_last_error());
    o->bad_rows++;
    r->error = 0;
    return 0;
}

int trace_load_openb(JobSet *js, const char *path, const Cluster *c, TraceOptions *o) {
    CsvReader r;
    if (csv_open(&r, path)) return -1;
    int cn = csv_col(&r, "name"), ccpu = csv_col(&r, "cpu_milli"), cmem = csv_col(&r, "memory_mib"),
        cgpu = csv_col(&r, "num_gpu"), cmilli = csv_col(&r, "gpu_milli"), cspec = csv_col(&r, "gpu_spec"),
        cqos = csv_col(&r, "qos"), ccre = csv_col(&r, "creation_time"), cdel = csv_col(&r, "deletion_time"),
        csch = csv_col(&r, "scheduled_time");
    if (cn < 0 || ccpu < 0 || cmem < 0 || cgpu < 0 || cmilli < 0) {
        csv_close(&r);
        return myr_error("%s: header must have name,cpu_milli,memory_mib,num_gpu,gpu_milli (openb pod list)", path);
    }
    bool timed = ccre >= 0 && cdel >= 0;
    o->synthesized_times = !timed;
    uint64_t rng = o->seed * 0x9E3779B97F4A7C15ULL + 11;
    int first = js->n, rc = -1;
    double t_synth = 0;
    while (csv_next(&r) > 0) {
        if (r.nfields != r.ncols) {
            myr_error("%s:%d: %d fields, the header has %d", path, r.line, r.nfields, r.ncols);
            if (bad_row(&r, o)) goto out;
            continue;
        }
        int cpu, mem, ngpu, milli;
        if (csv_int(&r, ccpu, &cpu) || csv_int(&r, cmem, &mem) || csv_int(&r, cgpu, &ngpu) || csv_int(&r, cmilli, &milli)) {
            if (bad_row(&r, o)) goto out;
            continue;
        }
        if (ngpu < 0 || ngpu > SCHED_MAX_GPUS_PER_NODE || milli < 0 || milli > GPU_MILLI || cpu < 0 || mem < 0 ||
            (ngpu > 0 && milli == 0)) {
            myr_error("%s:%d: num_gpu %d / gpu_milli %d / cpu %d / mem %d out of range (num_gpu 0..%d, gpu_milli 1..1000)",
                      path, r.line, ngpu, milli, cpu, mem, SCHED_MAX_GPUS_PER_NODE);
            if (bad_row(&r, o)) goto out;
            continue;
        }
        double submit = 0, duration = 0;
        if (timed) {
            double cre, del, sch = -1;
            if (csv_double(&r, ccre, &cre) || csv_double(&r, cdel, &del)) {
                if (bad_row(&r, o)) goto out;
                continue;
            }
            if (csch >= 0 && *csv_field(&r, csch) && csv_double(&r, csch, &sch)) {
                if (bad_row(&r, o)) goto out;
                continue;
            }
            if (del < cre) {
                myr_error("%s:%d: deletion_time %.0f is before creation_time %.0f", path, r.line, del, cre);
                if (bad_row(&r, o)) goto out;
                continue;
            }
            submit = cre;
            /* the pod ran from scheduling (creation if never scheduled) to deletion */
            duration = del - (sch >= cre ? sch : cre);
            if (duration < 1) duration = 1;
        } else {
            /* openb lifetimes: median 540 s, p90 6,574 s -> log-normal sigma ln(6574/540)/1.2816 */
            submit = t_synth;
            t_synth += -log(splitmix64_uniform(&rng));
            duration = fmin(540.0 * exp(1.95 * gauss(&rng)), 150 * 86400.0);
            if (duration < 1) duration = 1;
        }
        Job *j = jobset_add(js);
        if (!j) { myr_error("out of memory"); goto out; }
        snprintf(j->name, sizeof j->name, "%s", csv_field(&r, cn));
        j->submit = submit;
        j->duration = j->est_duration = duration;
        j->ntasks = 1;
        j->gpus_per_task = ngpu;
        j->gpu_milli = ngpu == 0 ? GPU_MILLI : ngpu == 1 ? milli : GPU_MILLI;
        j->cpu_milli = cpu;
        j->mem_mib = mem;
        const char *qos = csv_field(&r, cqos);
        if (!strcmp(qos, "LS") || !strcmp(qos, "Guaranteed")) j->priority = 2, j->preemptible = false;
        else if (!strcmp(qos, "BE")) j->priority = 0;
        else j->priority = 1;
        const char *spec = csv_field(&r, cspec);
        if (*spec && strcmp(spec, "nan") && ngpu > 0) {
            char unknown[128];
            j->type_mask = parse_spec(spec, c, unknown, sizeof unknown);
            if (!j->type_mask) { /* rejected later with this reason, not a malformed row */
                j->type_mask = 0;
                j->state = JOB_REJECTED;
                snprintf(j->reason, sizeof j->reason, "asks for GPU type %s, which the cluster does not have", unknown);
            }
        }
    }
    if (r.error) goto out;
    if (js->n == first) { myr_error("%s: no pods", path); goto out; }
    rc = 0;
out:
    csv_close(&r);
    return rc;
}

/* Offered load of the arrivals stretched by k about the first arrival: the arrival rate times the mean
 * GPU-seconds per job, over the cluster's GPUs, with each run counted up to the arrival window's
 * length W. For light-tailed run times this is the textbook offered load. openb's are heavy-tailed
 * (the longest 1% of pods hold 92% of the GPU-seconds, some live 145 days); such a pod loads a window
 * of hours only for those hours, and counting its months would set the arrival rate so low that the
 * replay never queues. Cutting each run at the window's end instead (submit to last arrival) is
 * satisfied by a burst: it packed 20,000 pods into ~500 s, shorter than the median pod. min(run, W) / W
 * never grows with W, so the load falls monotonically as the arrivals stretch, and bisection finds it. */
static double capped_load(const JobSet *js, const Cluster *c, double lo, double k) {
    double hi = -INFINITY, work = 0;
    for (int i = 0; i < js->n; i++)
        if (js->jobs[i].state != JOB_REJECTED) hi = fmax(hi, lo + (js->jobs[i].submit - lo) * k);
    double w = hi - lo;
    if (!(w > 0)) return INFINITY;
    for (int i = 0; i < js->n; i++) {
        const Job *j = &js->jobs[i];
        if (j->state != JOB_REJECTED) work += job_gpu_milli(j) / 1000.0 * fmin(j->duration, w);
    }
    return work / (w * (double)c->total_gpus);
}

static double first_submit(const JobSet *js) {
    double lo = INFINITY;
    for (int i = 0; i < js->n; i++) lo = fmin(lo, js->jobs[i].submit);
    return lo;
}

double trace_offered_load(const JobSet *js, const Cluster *c) { return capped_load(js, c, first_submit(js), 1.0); }

double trace_window_demand(const JobSet *js, const Cluster *c) {
    double lo = first_submit(js), hi = -INFINITY, work = 0;
    for (int i = 0; i < js->n; i++)
        if (js->jobs[i].state != JOB_REJECTED) hi = fmax(hi, js->jobs[i].submit);
    if (!(hi > lo)) return NAN;
    for (int i = 0; i < js->n; i++) {
        const Job *j = &js->jobs[i];
        if (j->state != JOB_REJECTED) work += job_gpu_milli(j) / 1000.0 * fmax(0, fmin(j->submit + j->duration, hi) - j->submit);
    }
    return work / ((hi - lo) * (double)c->total_gpus);
}

int trace_set_load(JobSet *js, const Cluster *c, double load) {
    double lo = first_submit(js);
    if (!(load > 0) || !isfinite(capped_load(js, c, lo, 1.0))) return 0;
    /* As the window shrinks to nothing every run covers it, so the load tends to the GPUs of all jobs at
     * once over the cluster's: the most any arrival rate can offer. */
    double gpus = 0;
    int n = 0;
    for (int i = 0; i < js->n; i++)
        if (js->jobs[i].state != JOB_REJECTED) gpus += job_gpu_milli(&js->jobs[i]) / 1000.0, n++;
    double most = gpus / (double)c->total_gpus;
    if (!(load < most))
        return myr_error("offered load %g is out of reach: even arriving at once, the %d jobs ask for %.0f GPUs, %.3f of "
                         "the cluster's %ld; use more than %.0f jobs (--resample) or a lower --load",
                         load, n, gpus, most, c->total_gpus, floor(n * load / (most > 0 ? most : 1e-9)));
    /* load falls as the arrival window stretches (k grows): bisect on log k */
    double a = -40, b = 40;
    for (int it = 0; it < 200; it++) {
        double m = (a + b) / 2;
        if (capped_load(js, c, lo, exp(m)) > load) a = m;
        else b = m;
    }
    double k = exp((a + b) / 2);
    for (int i = 0; i < js->n; i++) js->jobs[i].submit = lo + (js->jobs[i].submit - lo) * k;
    return 0;
}

int trace_resample(JobSet *out, const JobSet *in, int n, uint64_t seed) {
    int *ok = malloc(sizeof(int) * (in->n + 1)), nok = 0;
    if (!ok) return myr_error("out of memory");
    for (int i = 0; i < in->n; i++)
        if (in->jobs[i].state != JOB_REJECTED) ok[nok++] = i;
    if (!nok) { free(ok); return myr_error("no usable jobs to resample"); }
    uint64_t rng = seed * 0xD1B54A32D192ED03ULL + 5;
    double t = 0;
    for (int k = 0; k < n; k++) {
        const Job *src = &in->jobs[ok[splitmix64_next(&rng) % (uint64_t)nok]];
        Job *j = jobset_add(out);
        if (!j) { free(ok); return myr_error("out of memory"); }
        int id = j->id;
        *j = *src;
        j->id = id;
        j->slots = NULL;
        snprintf(j->name, sizeof j->name, "r%06d", k);
        j->submit = t;
        t += -log(splitmix64_uniform(&rng));
    }
    free(ok);
    return 0;
}
