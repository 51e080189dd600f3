/* train_layout.c: the processes and the parallel layout of a `myriad train` run, checked before
 * any training work: MPI start (when launched by mpirun/srun), world size against
 * tp x cp x pp x dp x ep, batch, micro-batch and sequence divisibility, the pipeline schedule, then
 * the mesh (src/parallel/mesh.c: tp fastest, then cp, dp, ep, pp) and its communication groups. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "parallel/device_comm.h"
#include "parallel/schedule.h"
#include "train/mfu_peak.h"
#include "train/train_job.h"
#include "train/train_phases.h"
#include "util/error.h"

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
    j->distributed = launched_by_mpi() || o->dp > 1 || j->tp > 1 || j->pp > 1 || j->ep > 1 || j->cp > 1;
    j->world = 1, j->rank = 0;
    if (!j->distributed) return;
    if (!launched_by_mpi()) {
        int need = (o->dp > 0 ? o->dp : 1) * j->tp * j->pp * j->ep * j->cp;
        myr_die("this layout needs %d processes: launch with `myriad run -n %d -- train ...` or `mpirun -np %d "
                "bin/myriad train ...`", need, need, need);
    }
    if (comm_init(argc, argv, &o->comm)) myr_die_last();
    j->world = comm_size(comm_world());
    j->rank = comm_rank(comm_world());
}

/* The layout's pure checks (no device, no communicator): the run's own and `myriad run`'s before
 * any rank starts (train_precheck.c). World size, batch and micro-batch divisibility, the pipeline
 * schedule, the context-parallel split. */
int train_layout_plan(const TrainOptions *o, int tp, int pp, int ep, int vpp, int world, TrainLayoutPlan *out) {
    int cp = o->cp > 0 ? o->cp : 1;
    if (world % tp) return myr_error("--tp %d does not divide the world size %d", tp, world);
    if (world % (tp * pp))
        return myr_error("--tp %d x --pp %d = %d does not divide the world size %d", tp, pp, tp * pp, world);
    if (world % (tp * pp * ep))
        return myr_error("--tp %d x --pp %d x --ep %d = %d does not divide the world size %d", tp, pp, ep, tp * pp * ep,
                         world);
    if (world % (tp * pp * ep * cp))
        return myr_error("--tp %d x --pp %d x --ep %d x --cp %d = %d does not divide the world size %d", tp, pp, ep, cp,
                         tp * pp * ep * cp, world);
    int dp_size = out->dp_size = o->dp > 0 ? o->dp : world / (tp * pp * ep * cp);
    if (world % dp_size)
        return myr_error("--dp %d does not divide the world size %d (launch %d processes, or choose --dp dividing %d)",
                         dp_size, world, dp_size * tp * pp * ep * cp, world);
    if (tp * pp * dp_size * ep * cp != world)
        return myr_error("--tp %d x --pp %d x --dp %d x --ep %d x --cp %d = %d does not equal the world size %d", tp, pp,
                         dp_size, ep, cp, tp * pp * dp_size * ep * cp, world);
    if (o->doc_sep >= 0) {
        if (pp > 1)
            return myr_error("--doc-mask with --pp is not supported yet (each micro-batch in flight would need its own "
                             "document masks); use it without --pp");
        if (o->seq % 2) return myr_error("--doc-mask needs an even --seq (got %d)", o->seq);
    }
    if (cp > 1 && o->seq % (2 * cp))
        return myr_error("--cp %d needs --seq divisible by 2 x cp = %d (each sequence is cut into 2 x cp chunks; --seq "
                         "is %d)", cp, 2 * cp, o->seq);
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
    if (o->sp && (out->micro * (o->seq / cp)) % tp)
        return myr_error("--sp needs the %d tokens of a micro-batch%s divisible by --tp %d", out->micro * (o->seq / cp),
                         cp > 1 ? " on a cp rank" : "", tp);
    return 0;
}

/* The plan's checks on every rank alike, then what needs the selected backend. */
static void check_layout(TrainJob *j) {
    TrainLayoutPlan p;
    if (train_layout_plan(&j->o, j->tp, j->pp, j->ep, j->vpp, j->world, &p)) train_layout_error(j->rank, "%s", myr_last_error());
    j->dp_size = p.dp_size, j->dense_dp = p.dense_dp, j->rows = p.rows, j->micro = p.micro, j->n_micro = p.n_micro;
    char why[160];
    if ((j->o.doc_sep >= 0 || j->cp > 1) && !attention_block_supported(why, sizeof why)) {
        if (j->cp > 1) train_layout_error(j->rank, "--cp %d: %s; use --device cpu --dtype fp32", j->cp, why);
        train_layout_error(j->rank, "--doc-mask: %s; use --device cpu --dtype fp32", why);
    }
}

static void build_mesh(TrainJob *j) {
    j->tp_rank = j->dp_rank = j->pp_rank = j->ep_rank = j->cp_rank = 0;
    j->dense_group = j->expert_group = NULL;
    j->shard_ranks = j->dense_dp * j->cp;
    if (j->distributed) {
        if (mesh_init(&j->mesh, j->world, j->rank, j->tp, j->cp, j->ep, j->dp_size, j->pp))
            train_layout_error(j->rank, "%s", myr_last_error());
        if (mesh_build_groups(&j->mesh, comm_world(), &j->groups)) myr_die_last();
        j->tp_rank = j->mesh.tp_rank;
        j->dp_rank = j->mesh.dp_rank;
        j->pp_rank = j->mesh.pp_rank;
        j->ep_rank = j->mesh.ep_rank;
        j->cp_rank = j->mesh.cp_rank;
        /* the cp ranks of a sequence hold the same parameters and each a share of its tokens: their
         * gradients are reduced together with data parallelism's (Megatron: dp x cp), and ZeRO
         * shards over them */
        j->dense_group = j->expert_group = j->groups.dp;
        if (j->cp > 1 && comm_group_by_axes(comm_world(), &j->mesh.m, MESH_DP | MESH_CP, &j->expert_group))
            myr_die_last();
        if (j->cp > 1) j->dense_group = j->expert_group;
        unsigned dense = MESH_DP | MESH_EP | (j->cp > 1 ? MESH_CP : 0);
        if (j->ep > 1 && comm_group_by_axes(comm_world(), &j->mesh.m, dense, &j->dense_group)) myr_die_last();
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
    j->comm_desc[0] = 0; /* what moves device buffers between ranks (--comm), said on the first line */
    if (j->distributed) {
        char desc[256];
        if (dcomm_setup(desc, sizeof desc)) train_layout_error(j->rank, "%s", myr_last_error());
        snprintf(j->comm_desc, sizeof j->comm_desc, ", comm %s", desc);
    }
}

/* The run's first line: the device, the transport, and the MFU denominator with where it came from. */
static void print_device(const TrainJob *j) {
    const DeviceInfo *d = &j->device;
    const char *dev = kernels_device();
    char where[32] = "cpu";
    if (!strcmp(dev, "cuda")) snprintf(where, sizeof where, "cuda:%d", d->ordinal);
    char peak[32];
    if (j->peak_flops >= 1e12) snprintf(peak, sizeof peak, "%.1f TFLOP/s", j->peak_flops / 1e12);
    else if (j->peak_flops >= 1e9) snprintf(peak, sizeof peak, "%.1f GFLOP/s", j->peak_flops / 1e9);
    else snprintf(peak, sizeof peak, "%.3g GFLOP/s", j->peak_flops / 1e9);
    fprintf(stderr, "myriad train: device %s: %s, %.1f GiB (%.1f GiB free), %s%s%s | MFU denominator %s x %d "
            "device%s: %s\n", where, d->name, d->total_bytes / 1073741824.0, d->free_bytes / 1073741824.0,
            dtype_name(kernels_dtype()),
            kernels_dtype() == DTYPE_BF16 && strcmp(dev, "cuda") ? " activations (emulated)" : " activations",
            j->comm_desc, peak, j->peak_devices, j->peak_devices == 1 ? "" : "s", j->peak_detail);
}

void train_job_layout(TrainJob *j, int *argc, char ***argv) {
    j->tp = j->o.tp, j->pp = j->o.pp, j->vpp = j->o.vpp, j->ep = j->o.ep, j->cp = j->o.cp;
    start_processes(j, argc, argv);
    train_phase_end(TRAIN_PHASE_MPI), train_phase_begin(TRAIN_PHASE_SETUP); /* the time ledger's MPI init */
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
