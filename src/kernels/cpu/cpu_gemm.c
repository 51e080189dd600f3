/* cpu_gemm.c: the backend's general matrix multiply, C[M,N] (= or +=) op(A)[M,K] @ op(B)[K,N],
 * row-major. Two engines: our own packed fp32 GEMM for AVX-512 CPUs (BLIS-style loops around a
 * 12x32 register-tile micro-kernel) and the BLAS library (always, in the fp64 build used by the
 * gradient check and on CPUs without AVX-512).
 *
 * Why not always OpenBLAS: Debian 12's OpenBLAS 0.3.21 does not recognise recent Xeons (e.g.
 * family 6 model 207) and, unless OPENBLAS_CORETYPE is set, falls back to its SSE3 "Prescott"
 * kernels, about 5x slower than its AVX-512 ones; ours reaches 60-80% of OpenBLAS's AVX-512
 * rate. So gemm() uses OpenBLAS when it runs an AVX-512 core, ours otherwise (gemm_is_native).
 * Attention's small per-head products always use ours when built, on the calling thread
 * (gemm_serial).
 *
 * Determinism: threads take chunks of output columns (or rows) fixed by the shape; every
 * element is accumulated over K in the same blocks, in the same order, whichever thread
 * computes it, so the result does not depend on the thread count. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/cpu/cpu_gemm.h"
#include "kernels/cpu/cpu_kernels.h"

#if defined(__AVX512F__) && !defined(MYRIAD_F64)
#include <immintrin.h>

enum { MR = 12, NR = 32, KC = 256, MC = 240, NC = 1024 };

/* Per-thread packing buffers, grown on demand and kept for the life of the thread. */
static _Thread_local float *pack_a, *pack_b;

static float *pack_buffers(void) {
    if (!pack_a) {
        pack_a = aligned_alloc(64, (size_t)MC * KC * sizeof(float));
        pack_b = aligned_alloc(64, (size_t)KC * NC * sizeof(float));
        if (!pack_a || !pack_b) abort();
    }
    return pack_a;
}

/* A rows [i0, i0+mc), k [p0, p0+kc) into MR-row panels, k-major inside a panel, zero-padded. */
static void pack_a_block(float *dst, const float *A, int lda, int trans_a, int i0, int mc, int p0, int kc) {
    for (int ip = 0; ip < mc; ip += MR) {
        int rows = mc - ip < MR ? mc - ip : MR;
        float *panel = dst + (size_t)ip * kc;
        if (!trans_a) {
            for (int r = 0; r < rows; r++) {
                const float *src = A + (size_t)(i0 + ip + r) * lda + p0;
                for (int k = 0; k < kc; k++) panel[k * MR + r] = src[k];
            }
        } else {
            for (int k = 0; k < kc; k++) {
                const float *src = A + (size_t)(p0 + k) * lda + i0 + ip;
                for (int r = 0; r < rows; r++) panel[k * MR + r] = src[r];
            }
        }
        for (int r = rows; r < MR; r++)
            for (int k = 0; k < kc; k++) panel[k * MR + r] = 0;
    }
}

/* B k [p0, p0+kc), columns [j0, j0+nc) into NR-column panels, k-major, zero-padded. */
static void pack_b_block(float *dst, const float *B, int ldb, int trans_b, int p0, int kc, int j0, int nc) {
    for (int jp = 0; jp < nc; jp += NR) {
        int cols = nc - jp < NR ? nc - jp : NR;
        float *panel = dst + (size_t)jp * kc;
        if (!trans_b) {
            for (int k = 0; k < kc; k++) {
                const float *src = B + (size_t)(p0 + k) * ldb + j0 + jp;
                float *d = panel + (size_t)k * NR;
                int c = 0;
                for (; c < cols; c++) d[c] = src[c];
                for (; c < NR; c++) d[c] = 0;
            }
        } else {
            for (int c = 0; c < cols; c++) {
                const float *src = B + (size_t)(j0 + jp + c) * ldb + p0;
                for (int k = 0; k < kc; k++) panel[k * NR + c] = src[k];
            }
            for (int c = cols; c < NR; c++)
                for (int k = 0; k < kc; k++) panel[k * NR + c] = 0;
        }
    }
}

/* acc[MR][NR] = sum_k a[k][r] * b[k][c]; then C (= when overwrite, else +=) acc, masked to mr x nr. */
static void micro_kernel(int kc, const float *restrict a, const float *restrict b, float *c, int ldc, int overwrite,
                         int mr, int nr) {
    __m512 acc[MR][2];
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
        for (int r = 0; r < MR; r++) {
            __m512 ar = _mm512_set1_ps(a[r]);
            acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
        }
        a += MR;
        b += NR;
    }
    __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    for (int r = 0; r < MR; r++) {
        if (r >= mr) break;
        float *row = c + (size_t)r * ldc;
        if (overwrite) {
            _mm512_mask_storeu_ps(row, m0, acc[r][0]);
            _mm512_mask_storeu_ps(row + 16, m1, acc[r][1]);
        } else {
            _mm512_mask_storeu_ps(row, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, row), acc[r][0]));
            _mm512_mask_storeu_ps(row + 16, m1, _mm512_add_ps(_mm512_maskz_loadu_ps(m1, row + 16), acc[r][1]));
        }
    }
}

/* The whole product restricted to rows [m0, m1) and columns [n0, n1) of C. */
static void gemm_block(int trans_a, int trans_b, int m0, int m1, int n0, int n1, int K, const float *A, int lda,
                       const float *B, int ldb, int accumulate, float *C, int ldc) {
    float *pa = pack_buffers(), *pb = pack_b;
    for (int jc = n0; jc < n1; jc += NC) {
        int nc = n1 - jc < NC ? n1 - jc : NC;
        for (int pc = 0; pc < K; pc += KC) {
            int kc = K - pc < KC ? K - pc : KC;
            int overwrite = !accumulate && pc == 0;
            pack_b_block(pb, B, ldb, trans_b, pc, kc, jc, nc);
            for (int ic = m0; ic < m1; ic += MC) {
                int mc = m1 - ic < MC ? m1 - ic : MC;
                pack_a_block(pa, A, lda, trans_a, ic, mc, pc, kc);
                for (int jr = 0; jr < nc; jr += NR)
                    for (int ir = 0; ir < mc; ir += MR)
                        micro_kernel(kc, pa + (size_t)ir * kc, pb + (size_t)jr * kc, C + (size_t)(ic + ir) * ldc + jc + jr,
                                     ldc, overwrite, mc - ir < MR ? mc - ir : MR, nc - jr < NR ? nc - jr : NR);
            }
        }
    }
}

static const int native_built = 1;
#else
static const int native_built = 0;
static void gemm_block(int trans_a, int trans_b, int m0, int m1, int n0, int n1, int K, const real *A, int lda,
                       const real *B, int ldb, int accumulate, real *C, int ldc) {
    abort(); /* never called: native_built is 0 */
}
#endif

void openblas_set_num_threads(int num_threads); /* from OpenBLAS; not in cblas.h everywhere */

/* The same rectangle through BLAS, on the calling thread. */
static void blas_block(int trans_a, int trans_b, int m0, int m1, int n0, int n1, int K, const real *A, int lda,
                       const real *B, int ldb, int accumulate, real *C, int ldc) {
    const real *a = trans_a ? A + m0 : A + (size_t)m0 * lda;
    const real *b = trans_b ? B + (size_t)n0 * ldb : B + n0;
    cblas_gemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m1 - m0,
               n1 - n0, K, 1, a, lda, b, ldb, accumulate ? 1 : 0, C + (size_t)m0 * ldc + n0, ldc);
}

/* BLAS runs single-threaded inside our OpenMP threads: Debian's OpenBLAS is the pthreads
 * build, and its pool and libgomp's (whose idle workers spin after every parallel region)
 * fought over the 2 cores, a sixth of the step's time in spinning and sched_yield. */
static void blas_one_thread(void) {
    static int done;
    if (!done) {
        openblas_set_num_threads(1);
        done = 1;
    }
}

/* Chunk the larger output dimension into pieces fixed by the shape (never by the thread
 * count), handed out dynamically; each chunk is one independent product, so who computes it
 * does not change the bits. */
static void gemm_run(int parallel, int native, int trans_a, int trans_b, int M, int N, int K, const real *A,
                     int lda, const real *B, int ldb, int accumulate, real *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        if (!accumulate)
            for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, (size_t)N * sizeof(real));
        return;
    }
    if (!native) blas_one_thread();
    /* Not too many chunks: each re-packs the operand it shares with the others (a quarter of
     * the time with 8 chunks on the 768-wide products); enough that a core taken by another
     * process does not leave the other one waiting long. */
    int split_rows = M > N;
    int len = split_rows ? M : N, unit = 32;
    int pieces = len >= 2048 ? 8 : len >= 512 ? 4 : len >= 128 ? 2 : 1;
    int chunk = (len + pieces - 1) / pieces;
    chunk = (chunk + unit - 1) / unit * unit;
    int chunks = (len + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic, 1) if (parallel && chunks > 1)
    for (int ch = 0; ch < chunks; ch++) {
        int lo = ch * chunk, hi = lo + chunk < len ? lo + chunk : len;
        int m0 = split_rows ? lo : 0, m1 = split_rows ? hi : M, n0 = split_rows ? 0 : lo, n1 = split_rows ? N : hi;
        if (native) gemm_block(trans_a, trans_b, m0, m1, n0, n1, K, A, lda, B, ldb, accumulate, C, ldc);
        else blas_block(trans_a, trans_b, m0, m1, n0, n1, K, A, lda, B, ldb, accumulate, C, ldc);
    }
}

/* OpenBLAS's own AVX-512 kernels (chosen when it recognises the CPU, or when OPENBLAS_CORETYPE
 * names them) are faster than ours on large products; any other core it picked is not. The
 * choice is made once per process, so it never changes results between steps or threads. */
int gemm_is_native(void) {
    static int use_native = -1;
    if (use_native < 0) {
        const char *core = openblas_get_corename();
        use_native = native_built && !(core && (!strcasecmp(core, "skylakex") || !strcasecmp(core, "cooperlake") ||
                                                !strcasecmp(core, "sapphirerapids")));
        /* MYRIAD_GEMM=blas: OpenBLAS even where ours is built, so an AVX-512 machine can run the
         * path every AVX2-only CPU takes (tests reproduce those machines' bits with it) */
        const char *force = getenv("MYRIAD_GEMM");
        if (force && !strcmp(force, "blas")) use_native = 0;
    }
    return use_native;
}

void gemm(int trans_a, int trans_b, int M, int N, int K, const real *A, int lda, const real *B, int ldb,
          int accumulate, real *C, int ldc) {
    gemm_run(1, gemm_is_native(), trans_a, trans_b, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
}

/* Attention's small per-head products: our kernel whenever it is built (no BLAS call overhead
 * per small product), on the calling thread. */
void gemm_serial(int trans_a, int trans_b, int M, int N, int K, const real *A, int lda, const real *B, int ldb,
                 int accumulate, real *C, int ldc) {
    gemm_run(0, native_built, trans_a, trans_b, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
}
