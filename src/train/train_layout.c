/* train_layout.c: the processes and the parallel layout of a `myriad train` run, checked before
 * any training work: MPI start (when launched by mpirun/srun), world size against
 * tp x pp x dp x ep, batch and micro-batch divisibility, the pipeline schedule, then the mesh
 * (src/parallel/mesh.c: tp fastest, then dp, then pp) and its communication groups. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "parallel/schedule.h"
#include "train/mfu_peak.h"
#include "train/train_job.h"
#include "util/error.h"

double train_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void train_layout_error(int rank, const char *fmt, ...) {
    if (rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fputs("myriad: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        fflush(stderr);
        va_end(ap);
    }
    train_exit_all(1);
}

void train_exit_all(int code) {
    fflush(stdout);
    fflush(stderr);
    if (comm_is_initialized()) {
        comm_barrier(comm_world());
        comm_finalize(); /* a rank that exits without it makes mpirun report an abnormal end */
    }
    exit(code);
}

int train_agree_failure(TrainJob *j, int failed) {
    if (!j->distributed || !comm_is_initialized()) {
        if (failed) fprintf(stderr, "myriad: %s\n", myr_last_error());
        return failed;
    }
    /* the lowest failing rank speaks: usually rank 0, and always one voice for a shared cause */
    float neg = failed ? -(float)j->rank : -(float)j->world; /* max of -rank = the lowest failing rank */
    if (comm_all_reduce(comm_world(), &neg, &neg, 1, COMM_F32, COMM_MAX)) myr_die_last();
    int first = (int)-neg;
    if (first == j->world) return 0;
    if (first == j->rank) {
        if (j->rank) fprintf(stderr, "myriad: rank %d: %s\n", j->rank, myr_last_error());
        else fprintf(stderr, "myriad: %s\n", myr_last_error());
    }
    return 1;
}

/* Launched by mpirun / srun (a world of several processes), as opposed to a plain run. */
static int launched_by_mpi(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") || getenv("SLURM_STEP_ID");
}

/* MPI, when this run has several processes (or a layout that needs them). */
static void start_processes(TrainJob *j, int *argc, char ***argv) {
    TrainOptions *o = &j->o;
    j->distributed = launched_by_mpi() || o->dp > 1 || j->tp > 1 || j->pp > 1 || j->ep > 1;
    j->world = 1, j->rank = 0;
    if (!j->distributed) return;
    if (!launched_by_mpi()) {
        int need = (o->dp > 0 ? o->dp : 1) * j->tp * j->pp * j->ep;
        myr_die("this layout needs %d processes: launch with `myriad run -n %d -- train ...` or `mpirun -np %d "
                "bin/myriad train ...`", need, need, need);
    }
    if (comm_init(argc, argv, &o->comm)) myr_die_last();
    j->world = comm_size(comm_world());
    j->rank = comm_rank(comm_world());
}

int train_layout_plan(const TrainOptions *o, int tp, int pp, int ep, int vpp, int world, TrainLayoutPlan *out) {
    if (world % tp) return myr_error("--tp %d does not divide the world size %d", tp, world);
    if (world % (tp * pp))
        return myr_error("--tp %d x --pp %d = %d does not divide the world size %d", tp, pp, tp * pp, world);
    if (world % (tp * pp * ep))
        return myr_error("--tp %d x --pp %d x --ep %d = %d does not divide the world size %d", tp, pp, ep, tp * pp * ep,
                         world);
    int dp_size = out->dp_size = o->dp > 0 ? o->dp : world / (tp * pp * ep);
    if (world % dp_size)
        return myr_error("--dp %d does not divide the world size %d (launch %d processes, or choose --dp dividing %d)",
                         dp_size, world, dp_size * tp * pp * ep, world);
    if (tp * pp * dp_size * ep != world)
        return myr_error("--tp %d x --pp %d x --dp %d x --ep %d = %d does not equal the world size %d", tp, pp, dp_size,
                         ep, tp * pp * dp_size * ep, world);
    /* expert parallelism lives inside data parallelism: dense parameters are replicated over
     * dp x ep ranks, each taking its own slice of the batch */
    out->dense_dp = dp_size * ep;
    if (o->batch % out->dense_dp)
        return myr_error("--batch %d is not divisible by --dp %d x --ep %d: each data-parallel rank takes an equal slice",
                         o->batch, dp_size, ep);
    out->rows = o->batch / out->dense_dp;
    out->micro = o->micro_batch > 0 ? o->micro_batch : (pp > 1 ? 1 : out->rows);
    if (out->rows % out->micro)
        return myr_error("--batch %d is not divisible by dp %d x --micro-batch %d (each rank's %d sequences split into "
                         "micro-batches of %d)", o->batch, dp_size, out->micro, out->rows, out->micro);
    out->n_micro = out->rows / out->micro;
    if ((pp > 1 || vpp > 1) && schedule_validate((ScheduleKind)o->schedule, pp, vpp, out->n_micro)) return -1;
    if (o->sp && (out->micro * o->seq) % tp)
        return myr_error("--sp needs the %d tokens of a micro-batch divisible by --tp %d", out->micro * o->seq, tp);
    return 0;
}

/* World size, batch and micro-batch divisibility, the pipeline schedule: every rank alike. */
static void check_layout(TrainJob *j) {
    TrainLayoutPlan p;
    if (train_layout_plan(&j->o, j->tp, j->pp, j->ep, j->vpp, j->world, &p)) train_layout_error(j->rank, "%s", myr_last_error());
    j->dp_size = p.dp_size, j->dense_dp = p.dense_dp, j->rows = p.rows, j->micro = p.micro, j->n_micro = p.n_micro;
}

static void build_mesh(TrainJob *j) {
    j->tp_rank = j->dp_rank = j->pp_rank = j->ep_rank = 0;
    j->dense_group = NULL;
    if (j->distributed) {
        if (mesh_init(&j->mesh, j->world, j->rank, j->tp, 1, j->ep, j->dp_size, j->pp))
            train_layout_error(j->rank, "%s", myr_last_error());
        if (mesh_build_groups(&j->mesh, comm_world(), &j->groups)) myr_die_last();
        j->tp_rank = j->mesh.tp_rank;
        j->dp_rank = j->mesh.dp_rank;
        j->pp_rank = j->mesh.pp_rank;
        j->ep_rank = j->mesh.ep_rank;
        j->dense_group = j->groups.dp;
        if (j->ep > 1 && comm_group_by_axes(comm_world(), &j->mesh.m, MESH_DP | MESH_EP, &j->dense_group))
            myr_die_last();
    }
    j->data_rank = j->dp_rank + j->dp_size * j->ep_rank;
}

/* The kernel backend (--device, --dtype) for this process, before any device memory, and the
 * run's first line: which device, its name and memory. */
static void select_device(TrainJob *j) {
    TrainOptions *o = &j->o;
    KernelOptions ko = {o->device, o->dtype, kernels_local_rank(), o->tf32};
    if (kernels_select(&ko)) train_layout_error(j->rank, "%s", myr_last_error());
    o->device = ko.device;
    o->dtype = ko.dtype;
    DeviceInfo d;
    if (kernels_device_info(&d)) train_layout_error(j->rank, "%s", myr_last_error());
    j->device = d;
}

/* The run's first line: the device, and the MFU denominator with where it came from. */
static void print_device(const TrainJob *j) {
    const DeviceInfo *d = &j->device;
    const char *dev = kernels_device();
    char where[32] = "cpu";
    if (!strcmp(dev, "cuda")) snprintf(where, sizeof where, "cuda:%d", d->ordinal);
    char peak[32];
    if (j->peak_flops >= 1e12) snprintf(peak, sizeof peak, "%.1f TFLOP/s", j->peak_flops / 1e12);
    else if (j->peak_flops >= 1e9) snprintf(peak, sizeof peak, "%.1f GFLOP/s", j->peak_flops / 1e9);
    else snprintf(peak, sizeof peak, "%.3g GFLOP/s", j->peak_flops / 1e9);
    fprintf(stderr, "myriad train: device %s: %s, %.1f GiB (%.1f GiB free), %s%s | MFU denominator %s x %d "
            "device%s: %s\n", where, d->name, d->total_bytes / 1073741824.0, d->free_bytes / 1073741824.0,
            dtype_name(kernels_dtype()),
            kernels_dtype() == DTYPE_BF16 && strcmp(dev, "cuda") ? " activations (emulated)" : " activations",
            peak, j->peak_devices, j->peak_devices == 1 ? "" : "s", j->peak_detail);
}

void train_job_layout(TrainJob *j, int *argc, char ***argv) {
    j->tp = j->o.tp, j->pp = j->o.pp, j->vpp = j->o.vpp, j->ep = j->o.ep;
    start_processes(j, argc, argv);
    select_device(j);
    check_layout(j);
    j->rank0 = j->rank == 0;
    kernels_set_threads(j->o.threads ? j->o.threads : kernels_threads());
    mfu_peak_choose(j);
    if (j->rank0) print_device(j);
    if (j->rank0 && j->o.tf32 && strcmp(kernels_device(), "cuda"))
        fprintf(stderr, "myriad train: warning: --tf32 does nothing on the %s (it lets fp32 GEMMs use a GPU's TF32 "
                "tensor cores): its fp32 GEMMs stay fp32\n", kernels_device());
    build_mesh(j);
}
