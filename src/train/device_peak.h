/* device_peak.h: datasheet dense peaks of GPUs by name (device_peak.c, with sources). */
#ifndef MYRIAD_TRAIN_DEVICE_PEAK_H
#define MYRIAD_TRAIN_DEVICE_PEAK_H

#include "kernels/kernels.h"

/* Dense TFLOP/s of the GPU named `name` for GEMMs in `dtype` (fp32: TF32 when tf32); 0 when the
 * name is not in the table (the caller then asks for --peak-tflops). */
double device_peak_tflops(const char *name, Dtype dtype, int tf32);

#endif
