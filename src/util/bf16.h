/* bf16.h: inline bfloat16 <-> fp32 conversion, the one rounding rule of the project: the comm
 * layer's bf16 wire (comm_f32_to_bf16 / comm_bf16_to_f32 wrap these) and the CPU backend's bf16
 * activations (src/kernels/cpu/cpu_bf16.c). bf16 is the top half of an fp32. */
#ifndef MYRIAD_UTIL_BF16_H
#define MYRIAD_UTIL_BF16_H

#include <stdint.h>
#include <string.h>

static inline float bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* Round to nearest, ties to even; a NaN stays a (quiet) NaN. */
static inline uint16_t f32_to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
    uint32_t nan = (u >> 16) | 0x40;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

#endif
