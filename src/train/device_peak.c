/* device_peak.c: the dense peak FLOP/s of a GPU for a run's dtype, by device name: the MFU
 * denominator of a GPU run (--peak-tflops overrides; on the CPU the measured sgemm rate is used).
 * Dense means without 2:4 sparsity (datasheets headline the sparse figure, twice the dense one).
 * fp32 GEMMs run as fp32 unless --tf32, so the fp32 row is the plain fp32 (CUDA-core) rate.
 * Sources (NVIDIA datasheets; the same figures as the simulator's configs/hardware files):
 *   H100 SXM5: 989.4 TF bf16, 494.7 TF tf32, 67 TF fp32 (H100 Tensor Core GPU datasheet, 2023)
 *   H100 PCIe: 756.5 TF bf16, 378 TF tf32, 51 TF fp32 (same datasheet)
 *   H100 NVL:  835.5 TF bf16, 417.5 TF tf32, 60 TF fp32 (same datasheet)
 *   H200 SXM:  as H100 SXM5 (H200 Tensor Core GPU datasheet, 2024); H200 NVL: 835.5 / 417.5 / 60
 *   H800 SXM:  as H100 SXM5 (compute unchanged; NVLink reduced)
 *   GH200:     989.4 / 494.7 / 67 (GH200 Grace Hopper Superchip datasheet, 2024)
 *   A100 (SXM4 and PCIe, 40 and 80 GB): 312 TF bf16, 156 TF tf32, 19.5 TF fp32 (A100 datasheet, 2021)
 *   A800: as A100
 *   B200: 2250 TF bf16, 1100 TF tf32, 75 TF fp32 (DGX B200 datasheet, 2024: per-GPU dense)
 *   L40S: 362 TF bf16, 183 TF tf32, 91.6 TF fp32 (L40S datasheet, 2023)
 *   L4: 121 TF bf16, 60 TF tf32, 30.3 TF fp32 (L4 datasheet, 2023)
 * Entries are matched in order by a substring of the name the driver reports ("NVIDIA H200",
 * "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", ...), the more specific first. */
#include "train/device_peak.h"

#include <string.h>

typedef struct {
    const char *match; /* substring of the device name */
    double bf16, tf32, fp32; /* dense TFLOP/s */
} PeakRow;

static const PeakRow peaks[] = {
    {"H200 NVL", 835.5, 417.5, 60},   {"H200", 989.4, 494.7, 67},      {"H100 NVL", 835.5, 417.5, 60},
    {"H100 PCIe", 756.5, 378, 51},    {"GH200", 989.4, 494.7, 67},     {"H100", 989.4, 494.7, 67},
    {"H800", 989.4, 494.7, 67},       {"A100", 312, 156, 19.5},        {"A800", 312, 156, 19.5},
    {"B200", 2250, 1100, 75},         {"L40S", 362, 183, 91.6},        {"L4", 121, 60, 30.3},
};

double device_peak_tflops(const char *name, Dtype dtype, int tf32) {
    for (size_t i = 0; i < sizeof peaks / sizeof peaks[0]; i++)
        if (strstr(name, peaks[i].match)) return dtype == DTYPE_BF16 ? peaks[i].bf16 : tf32 ? peaks[i].tf32 : peaks[i].fp32;
    return 0;
}
