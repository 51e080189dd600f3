/* cuda_absent.c: the CUDA provider of a binary built without CUDA (make CUDA=0, or no nvcc
 * found): `--device cuda` then says so. With CUDA the .cu side defines these (MYRIAD_CUDA). */
#ifndef MYRIAD_CUDA
#include <stdio.h>

#include "kernels/backend.h"

static const char *absent = "this binary was built without CUDA (nvcc was not found, or make CUDA=0): rebuild with "
                            "`make` on a machine with the CUDA toolkit at /usr/local/cuda, or use --device cpu";

const KernelBackend *cuda_backend(const KernelOptions *o, char *why, size_t why_size) {
    (void)o;
    if (why && why_size) snprintf(why, why_size, "%s", absent);
    return NULL;
}

int cuda_backend_usable(char *why, size_t why_size) {
    if (why && why_size) snprintf(why, why_size, "%s", absent);
    return 0;
}
#endif
