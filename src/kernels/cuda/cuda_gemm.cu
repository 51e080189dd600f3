/* cuda_gemm.cu: matrix products through cuBLASLt, and the linear layer on them.
 * cuBLASLt is loaded with dlopen at cuda_init, not linked: its 540 MB library took over a second
 * to relocate at every start of the binary (measured: 58.9 s for 50 starts of an empty program
 * linked against it, 1.1 s without), and a CPU-only run must not need it at all.
 * Row-major C[M,N] = op(A) op(B) is cuBLASLt's column-major C^T = op(B)^T op(A)^T: the operands
 * swap and each stored matrix is read as its transpose. The algorithm for each distinct problem
 * (shapes, types, epilogue, pointer alignment) is chosen once by the heuristic and cached; with
 * one stream and a fixed workspace cuBLASLt gives the same bits every run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#ifndef MYRIAD_CUDA_EMU
#include <dlfcn.h>
#endif

#include "kernels/cuda/cuda_colsum.cuh"
#include "kernels/cuda/cuda_common.cuh"

#define LT_FUNCS(X)                                                                                        \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtGetStatusString)                 \
    X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)            \
    X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatmulPreferenceCreate)        \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                            \
    X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

static struct {
#define LT_FIELD(f) decltype(&f) f##_;
    LT_FUNCS(LT_FIELD)
#undef LT_FIELD
} lt;

#ifndef MYRIAD_CUDA_EMU
static void *lt_library;
#endif
static cublasLtHandle_t lt_handle;
static void *workspace;
enum { WORKSPACE_BYTES = 32 << 20 };

#define STR2(x) #x
#define STR(x) STR2(x)
#ifndef MYRIAD_CUDA_LIBDIR
#define MYRIAD_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

static int lt_load(char *err, size_t errlen) {
#ifdef MYRIAD_CUDA_EMU
#define LT_TAKE(f) lt.f##_ = &f;
    LT_FUNCS(LT_TAKE)
#undef LT_TAKE
    return 0;
#else
    const char *name = "libcublasLt.so." STR(CUBLAS_VER_MAJOR);
    const char *env = getenv("MYRIAD_CUBLASLT");
    char path[4096];
    const char *tried[3];
    int ntried = 0;
    if (env && *env) tried[ntried++] = env;
    tried[ntried++] = name; /* LD_LIBRARY_PATH, the binary's RUNPATH, the loader cache */
    snprintf(path, sizeof path, "%s/%s", MYRIAD_CUDA_LIBDIR, name);
    tried[ntried++] = path; /* the toolkit this binary was built with */
    const char *dl_err = "";
    for (int i = 0; i < ntried && !lt_library; i++) {
        lt_library = dlopen(tried[i], RTLD_NOW | RTLD_LOCAL);
        if (!lt_library) dl_err = dlerror();
    }
    if (!lt_library) {
        snprintf(err, errlen,
                 "cannot load cuBLASLt (%s): %s; install the CUDA toolkit's cuBLAS or point MYRIAD_CUBLASLT at %s",
                 name, dl_err, name);
        return -1;
    }
#define LT_SYM(f)                                                                                 \
    lt.f##_ = (decltype(&f))dlsym(lt_library, #f);                                                \
    if (!lt.f##_) {                                                                                  \
        snprintf(err, errlen, "cuBLASLt (%s) lacks %s; it is older than the headers myriad was built with", name, #f); \
        return -1;                                                                                \
    }
    LT_FUNCS(LT_SYM)
#undef LT_SYM
    size_t v = lt.cublasLtGetVersion_();
    if (v / 10000 != CUBLAS_VER_MAJOR) {
        snprintf(err, errlen, "cuBLASLt version %zu does not match the major version %d myriad was built with", v,
                 CUBLAS_VER_MAJOR);
        return -1;
    }
    return 0;
#endif
}

static void lt_check(cublasStatus_t s, const char *what) {
    if (s != CUBLAS_STATUS_SUCCESS) myr_die("cuBLASLt %s failed: %s", what, lt.cublasLtGetStatusString_(s));
}

int cuda_gemm_init(char *err, size_t errlen) {
    if (!lt.cublasLtCreate_ && lt_load(err, errlen)) return -1;
    cublasStatus_t s = lt.cublasLtCreate_(&lt_handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cannot start cuBLASLt: %s", lt.cublasLtGetStatusString_(s));
        return -1;
    }
    if (cudaMalloc(&workspace, WORKSPACE_BYTES) != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, errlen, "out of GPU memory for the %d MiB cuBLASLt workspace", WORKSPACE_BYTES >> 20);
        return -1;
    }
    return 0;
}

/* ---- the plan cache: one entry per distinct problem ---- */
typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, in_dt, c_dt, beta, epilogue, bias_dt, compute, align;
} PlanKey;
typedef struct {
    PlanKey key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c; /* layouts of the first operand (row-major B), the second (A), C and D */
    cublasLtMatmulAlgo_t algo;
    int ok; /* the heuristic found an algorithm (else callers take another route) */
} Plan;
static Plan *plans;
static int nplans, cap_plans;

void cuda_gemm_shutdown() {
    for (int i = 0; i < nplans; i++) {
        lt.cublasLtMatmulDescDestroy_(plans[i].desc);
        lt.cublasLtMatrixLayoutDestroy_(plans[i].a);
        lt.cublasLtMatrixLayoutDestroy_(plans[i].b);
        lt.cublasLtMatrixLayoutDestroy_(plans[i].c);
    }
    free(plans);
    plans = NULL;
    nplans = cap_plans = 0;
    if (workspace) cudaFree(workspace);
    workspace = NULL;
    if (lt_handle) lt.cublasLtDestroy_(lt_handle);
    lt_handle = NULL;
}

static cudaDataType_t lt_type(int dt) { return dt == CUDA_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

static int alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int al = 16;
    while (al > 1 && a % al) al /= 2;
    return al;
}

enum { EPI_NONE = 0, EPI_BIAS = 1, EPI_GELU_BIAS = 2, EPI_GELU = 3 };

static Plan *plan_for(const PlanKey *k) {
    for (int i = 0; i < nplans; i++)
        if (!memcmp(&plans[i].key, k, sizeof *k)) return &plans[i];
    if (nplans == cap_plans) {
        cap_plans = cap_plans ? 2 * cap_plans : 64;
        plans = (Plan *)realloc(plans, cap_plans * sizeof *plans);
        if (!plans) myr_die("out of host memory");
    }
    Plan *p = &plans[nplans];
    memset(p, 0, sizeof *p);
    p->key = *k;
    cublasComputeType_t compute = (cublasComputeType_t)k->compute;
    lt_check(lt.cublasLtMatmulDescCreate_(&p->desc, compute, CUDA_R_32F), "MatmulDescCreate");
    /* column-major: first operand = the row-major B, second = the row-major A */
    cublasOperation_t opa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    lt_check(lt.cublasLtMatmulDescSetAttribute_(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), "TRANSA");
    lt_check(lt.cublasLtMatmulDescSetAttribute_(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), "TRANSB");
    cublasLtEpilogue_t epi = k->epilogue == EPI_BIAS        ? CUBLASLT_EPILOGUE_BIAS
                             : k->epilogue == EPI_GELU_BIAS ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                             : k->epilogue == EPI_GELU      ? CUBLASLT_EPILOGUE_GELU_AUX
                                                            : CUBLASLT_EPILOGUE_DEFAULT;
    lt_check(lt.cublasLtMatmulDescSetAttribute_(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "EPILOGUE");
    if (k->epilogue == EPI_BIAS || k->epilogue == EPI_GELU_BIAS) {
        int32_t bt = lt_type(k->bias_dt);
        lt_check(lt.cublasLtMatmulDescSetAttribute_(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt),
                 "BIAS_DATA_TYPE");
    }
    if (k->epilogue == EPI_GELU_BIAS || k->epilogue == EPI_GELU) {
        int64_t ld = k->ldc;
        lt_check(lt.cublasLtMatmulDescSetAttribute_(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld),
                 "AUX_LD");
    }
    /* stored shapes, column-major view: row-major [r, c] with ld is column-major [c, r] */
    if (k->tb) lt_check(lt.cublasLtMatrixLayoutCreate_(&p->a, lt_type(k->in_dt), k->K, k->N, k->ldb), "layout A");
    else lt_check(lt.cublasLtMatrixLayoutCreate_(&p->a, lt_type(k->in_dt), k->N, k->K, k->ldb), "layout A");
    if (k->ta) lt_check(lt.cublasLtMatrixLayoutCreate_(&p->b, lt_type(k->in_dt), k->M, k->K, k->lda), "layout B");
    else lt_check(lt.cublasLtMatrixLayoutCreate_(&p->b, lt_type(k->in_dt), k->K, k->M, k->lda), "layout B");
    lt_check(lt.cublasLtMatrixLayoutCreate_(&p->c, lt_type(k->c_dt), k->N, k->M, k->ldc), "layout C");

    cublasLtMatmulPreference_t pref;
    lt_check(lt.cublasLtMatmulPreferenceCreate_(&pref), "PreferenceCreate");
    uint64_t ws = WORKSPACE_BYTES;
    lt_check(lt.cublasLtMatmulPreferenceSetAttribute_(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
             "MAX_WORKSPACE");
    uint32_t al = (uint32_t)k->align;
    cublasLtMatmulPreferenceAttributes_t aligns[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++)
        lt_check(lt.cublasLtMatmulPreferenceSetAttribute_(pref, aligns[i], &al, sizeof al), "MIN_ALIGNMENT");
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t s = lt.cublasLtMatmulAlgoGetHeuristic_(lt_handle, p->desc, p->a, p->b, p->c, p->c, pref, 1, &res,
                                                         &found);
    lt.cublasLtMatmulPreferenceDestroy_(pref);
    p->ok = s == CUBLAS_STATUS_SUCCESS && found > 0;
    if (p->ok) p->algo = res.algo;
    nplans++;
    return p;
}

/* 0, or -1 when cuBLASLt has no algorithm for this combination (nothing is run) */
static int gemm_run(int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb, int in_dt,
                    int accumulate, void *C, int ldc, int c_dt, int epilogue, const void *bias, int bias_dt,
                    void *aux) {
    cuda_require_init("gemm");
    if (M <= 0 || N <= 0) return 0;
    if (K <= 0) { /* an empty sum: C = 0 (or unchanged when accumulating) */
        if (!accumulate)
            for (int i = 0; i < M; i++) cuda_zero((char *)C + (size_t)i * ldc * cuda_dtype_size(c_dt), (size_t)N * cuda_dtype_size(c_dt));
        return epilogue == EPI_NONE ? 0 : -1; /* an epilogue over an empty sum: let the caller's fallback run */
    }
    PlanKey k;
    memset(&k, 0, sizeof k);
    k.ta = ta, k.tb = tb, k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc;
    k.in_dt = in_dt, k.c_dt = c_dt, k.beta = accumulate != 0, k.epilogue = epilogue, k.bias_dt = bias_dt;
    k.compute = in_dt == CUDA_F32 && cuda_tf32_allowed() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    int al = alignment(A);
    if (alignment(B) < al) al = alignment(B);
    if (alignment(C) < al) al = alignment(C);
    if (aux && alignment(aux) < al) al = alignment(aux);
    k.align = al;
    Plan *p = plan_for(&k);
    if (!p->ok) return -1;
    if (bias)
        lt_check(lt.cublasLtMatmulDescSetAttribute_(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
                 "BIAS_POINTER");
    if (aux)
        lt_check(lt.cublasLtMatmulDescSetAttribute_(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                                   sizeof aux),
                 "AUX_POINTER");
    float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    lt_check(lt.cublasLtMatmul_(lt_handle, p->desc, &alpha, B, p->a, A, p->b, &beta, C, p->c, C, p->c, &p->algo,
                               workspace, WORKSPACE_BYTES, cuda_current_stream()),
             "Matmul");
    return 0;
}

static void gemm_or_die(int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb, int in_dt,
                        int accumulate, void *C, int ldc, int c_dt) {
    if (gemm_run(ta, tb, M, N, K, A, lda, B, ldb, in_dt, accumulate, C, ldc, c_dt, EPI_NONE, NULL, 0, NULL))
        myr_die("cuBLASLt has no algorithm for a %s GEMM M=%d N=%d K=%d (trans %d%d, lda %d ldb %d ldc %d)",
                in_dt == CUDA_BF16 ? "bf16" : "fp32", M, N, K, ta, tb, lda, ldb, ldc);
}

extern "C" void cuda_gemm(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                          int in_dt, int accumulate, void *C, int ldc, int c_dt) {
    gemm_or_die(trans_a, trans_b, M, N, K, A, lda, B, ldb, in_dt, accumulate, C, ldc, c_dt);
}

/* ---- the linear layer ----
 * The fp32 bias rides in cuBLASLt's epilogue (added in fp32 before the one rounding of the
 * output). Where cuBLASLt takes no fp32 bias for the output type, the product goes to fp32
 * scratch and one kernel adds the bias (and applies GELU) and rounds: the same numbers, one more
 * pass over the output. */
template <typename TO>
__global__ void bias_round_kernel(TO *out, TO *pre, const float *acc, const float *bias, int N, int OC, int gelu) {
    size_t total = (size_t)N * OC;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        float x = acc[i] + (bias ? bias[i % OC] : 0.0f);
        if (!gelu) {
            out[i] = from_f32<TO>(x);
            continue;
        }
        TO p = from_f32<TO>(x);
        pre[i] = p;
        float v = to_f32(p), u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        out[i] = from_f32<TO>(v / (1.0f + expf(-2.0f * u)));
    }
}

static long fallbacks;
extern "C" long cuda_matmul_fallbacks(void) { return fallbacks; }

static void forward_via_fp32(void *out, void *pre, int out_dt, const void *inp, const void *w, const float *bias,
                             int in_dt, int N, int IC, int OC, int gelu) {
    fallbacks++;
    float *acc = (float *)cuda_scratch((size_t)N * OC * sizeof(float));
    gemm_or_die(0, 1, N, OC, IC, inp, IC, w, IC, in_dt, 0, acc, OC, CUDA_F32);
    size_t n = (size_t)N * OC;
    DT_SWITCH(out_dt, TO,
              MYR_LAUNCH(bias_round_kernel<TO>, grid_for(n, 256), 256, 0, (TO *)out, (TO *)pre, acc, bias, N, OC, gelu));
}

extern "C" void cuda_matmul_forward(void *out, int out_dt, const void *inp, const void *w, const float *bias, int in_dt,
                                    int N, int IC, int OC) {
    if (N <= 0 || OC <= 0) return;
    if (!gemm_run(0, 1, N, OC, IC, inp, IC, w, IC, in_dt, 0, out, OC, out_dt, bias ? EPI_BIAS : EPI_NONE, bias,
                  CUDA_F32, NULL))
        return;
    if (!bias) {
        gemm_or_die(0, 1, N, OC, IC, inp, IC, w, IC, in_dt, 0, out, OC, out_dt); /* dies naming the shapes */
        return;
    }
    forward_via_fp32(out, NULL, out_dt, inp, w, bias, in_dt, N, IC, OC, 0);
}

extern "C" void cuda_matmul_forward_gelu(void *out, void *pre, const void *inp, const void *w, const float *bias, int dt,
                                         int N, int IC, int OC) {
    if (N <= 0 || OC <= 0) return;
    /* the epilogue's auxiliary output needs a leading dimension divisible by 8 */
    if (OC % 8 == 0 && !gemm_run(0, 1, N, OC, IC, inp, IC, w, IC, dt, 0, out, OC, dt, bias ? EPI_GELU_BIAS : EPI_GELU,
                                 bias, CUDA_F32, pre))
        return;
    forward_via_fp32(out, pre, dt, inp, w, bias, dt, N, IC, OC, 1);
}

extern "C" void cuda_matmul_backward(void *dinp, int dinp_dt, float *dw, float *dbias, const void *dout, const void *inp,
                                     const void *w, int dt, int N, int IC, int OC, int accumulate_dinp) {
    if (dinp) gemm_or_die(0, 0, N, IC, OC, dout, OC, w, IC, dt, accumulate_dinp, dinp, IC, dinp_dt);
    gemm_or_die(1, 0, OC, IC, N, dout, OC, inp, IC, dt, 1, dw, IC, CUDA_F32);
    if (dbias) cuda_bias_backward(dbias, dout, dt, N, OC);
}

/* ---- the measured GEMM rate ---- */
template <typename T> __global__ void fill_kernel(T *x, size_t n, unsigned seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        x[i] = from_f32<T>((float)(h & 0xffff) / 65536.0f - 0.5f); /* random data: zeros run faster */
    }
}

extern "C" double cuda_measure_peak_flops(int n, int reps, int dt) {
    cuda_require_init("cuda_measure_peak_flops");
    size_t nn = (size_t)n * n, es = cuda_dtype_size(dt);
    void *a = cuda_alloc(nn * es), *b = cuda_alloc(nn * es), *c = cuda_alloc(nn * es);
    DT_SWITCH(dt, T, MYR_LAUNCH(fill_kernel<T>, grid_for(nn, 256), 256, 0, (T *)a, nn, 1u);
              MYR_LAUNCH(fill_kernel<T>, grid_for(nn, 256), 256, 0, (T *)b, nn, 2u));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) { /* the first run chooses the algorithm and warms up */
        CUDA_CHECK(cudaEventRecord(e0, cuda_current_stream()));
        cuda_gemm(0, 0, n, n, n, a, n, b, n, dt, 0, c, n, dt);
        CUDA_CHECK(cudaEventRecord(e1, cuda_current_stream()));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (r > 0 && ms < best) best = ms;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cuda_free(a);
    cuda_free(b);
    cuda_free(c);
    return 2.0 * n * (double)n * n / (best * 1e-3);
}
