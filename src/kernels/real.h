/* real.h: the floating-point type of master weights, gradients, optimizer state and fp32
 * activations. Training runs in fp32 (`real` = float). The same sources compile with
 * -DMYRIAD_F64 into a double-precision library used only by the finite-difference gradient
 * check, so the check exercises exactly the code that trains. (bf16 activations are the
 * separate `act` type of kernels.h.) */
#ifndef MYRIAD_KERNELS_REAL_H
#define MYRIAD_KERNELS_REAL_H

#include <math.h>

#ifdef MYRIAD_F64
typedef double real;
#define R_EXP exp
#define R_LOG log
#define R_TANH tanh
#define R_SQRT sqrt
#define R_COSH cosh
#else
typedef float real;
#define R_EXP expf
#define R_LOG logf
#define R_TANH tanhf
#define R_SQRT sqrtf
#define R_COSH coshf
#endif

#endif
