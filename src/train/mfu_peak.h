/* mfu_peak.h: the denominator of a training run's MFU, chosen once before the first line of
 * output and said there, and the one place MFU is computed (console, log, heartbeat -> Prometheus,
 * and so the report all carry the same per-step figure).
 *
 * Sources, in order: --peak-tflops; on a GPU its datasheet dense peak for the dtype
 * (device_peak.c); on the CPU this machine's best measured sgemm rate from the per-machine cache
 * (kernels/cpu/cpu_peak.h: written by `myriad bench sgemm` and by earlier runs), else measured at
 * start-up until stable and cached. Ranks sharing a GPU count it once; CPU ranks sharing a machine
 * share its cores, so a CPU job's devices are its machines and the rate is measured with as many
 * threads as the machine's ranks use together (at most its CPUs). */
#ifndef MYRIAD_TRAIN_MFU_PEAK_H
#define MYRIAD_TRAIN_MFU_PEAK_H

#include "train/train_job.h"

/* Sets j->peak_flops, peak_devices, peak_source (short, for the banner) and peak_detail (where it
 * came from, for the first line). Collective over the world (rank 0 measures while the others
 * sleep, then sends every rank the figure). */
void mfu_peak_choose(TrainJob *j);

/* The MFU of a step of dt seconds. A measured CPU denominator below the rate the step itself
 * achieved was measured low (the model's FLOPs are at most what ran): it is raised to that
 * rate (said once per raise on rank 0, and cached), so MFU never reads above 100% from a
 * measurement artefact. Returns 0 when the peak is unknown. */
double mfu_of_step(TrainJob *j, double dt, long step);

#endif
