/* cuda_emu_runtime.cc: the CUDA runtime and cuBLASLt calls the backend makes, for the emulation
 * of cuda_emu.h, on host memory.
 *
 * Streams and events, minimally but not as no-ops: kernels, memsets and copies between device
 * buffers run at once, in the order issued (each first completes what its stream still has
 * queued). What stays queued is the one kind of work whose lateness the host can see without a
 * kernel: an asynchronous copy to or from pinned host memory (cudaMallocHost). Its destination
 * reads as NaN bytes, and its source is read, only when it completes, as late as CUDA allows: at
 * cudaStreamSynchronize of its stream, cudaDeviceSynchronize, cudaEventSynchronize or
 * cudaStreamWaitEvent of an event recorded after it, the next operation on its stream, or a
 * cudaFree/cudaFreeHost. So a host read of a copy's result before the synchronization, or a
 * kernel that overwrites a copy's source on another stream before the copy is waited for, gives
 * a wrong result here as it may on the device. (Copies to or from pageable memory are synchronous
 * for the host in CUDA; here too.) */
#include "cuda_emu.h"

#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace emu {
struct QueuedCopy {
    void *dst;
    const void *src;
    size_t bytes;
    long seq; /* its place on the stream */
};
struct Stream {
    std::deque<QueuedCopy> queue;
    long issued = 0; /* operations queued on it so far */
};
struct Event {
    Stream *stream = nullptr; /* where it was last recorded, and after how many operations */
    long seq = 0;
};

static std::mutex mu; /* a checkpoint's copy thread may synchronize a stream while the main thread works */
static Stream legacy_stream; /* stream 0 */
static std::vector<Stream *> streams = {&legacy_stream};
static std::map<uintptr_t, size_t> pinned; /* cudaMallocHost blocks: start -> bytes */
static std::unordered_map<const void *, size_t> smem_optin; /* kernel -> MaxDynamicSharedMemorySize */
static cudaError_t last_error = cudaSuccess;

static Stream *stream_of(cudaStream_t s) { return s ? (Stream *)s : &legacy_stream; }

static bool is_pinned(const void *p, size_t n) {
    auto it = pinned.upper_bound((uintptr_t)p);
    if (it == pinned.begin()) return false;
    --it;
    return (uintptr_t)p + n <= it->first + it->second;
}

/* completes the stream's queued copies up to operation `upto` (caller holds mu) */
static void complete(Stream *s, long upto) {
    while (!s->queue.empty() && s->queue.front().seq <= upto) {
        const QueuedCopy &c = s->queue.front();
        memmove(c.dst, c.src, c.bytes);
        s->queue.pop_front();
    }
}
static void complete_all() {
    for (Stream *s : streams) complete(s, s->issued);
}

void stream_order(cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu);
    Stream *s = stream_of(stream);
    complete(s, s->issued);
}

size_t dynamic_smem_allowed(const void *kernel) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = smem_optin.find(kernel);
    return it == smem_optin.end() ? DYNAMIC_SMEM_DEFAULT : std::max(it->second, (size_t)DYNAMIC_SMEM_DEFAULT);
}

void set_last_error(cudaError_t e) { last_error = e; }
} // namespace emu

using namespace emu;

static int emu_devices = 1; /* tests may set 0 through MYRIAD_EMU_DEVICES */

extern "C" {
cudaError_t cudaGetDeviceCount(int *n) {
    const char *e = getenv("MYRIAD_EMU_DEVICES");
    if (e) emu_devices = atoi(e);
    *n = emu_devices;
    return emu_devices ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "CPU emulation of a CUDA device");
    p->multiProcessorCount = 4;
    p->major = 9;
    p->minor = 0;
    p->totalGlobalMem = (size_t)16 << 30;
    p->sharedMemPerBlock = DYNAMIC_SMEM_DEFAULT;
    p->sharedMemPerBlockOptin = DYNAMIC_SMEM_OPTIN_MAX;
    p->maxThreadsPerBlock = 1024;
    p->warpSize = 32;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t *fr, size_t *tot) { *fr = (size_t)8 << 30; *tot = (size_t)16 << 30; return cudaSuccess; }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
    std::lock_guard<std::mutex> lock(mu);
    Stream *st = new Stream;
    streams.push_back(st);
    *s = (cudaStream_t)st;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mu);
    Stream *st = stream_of(s);
    complete(st, st->issued); /* queued work still completes */
    if (st != &legacy_stream) {
        streams.erase(std::find(streams.begin(), streams.end(), st));
        delete st;
    }
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mu);
    Stream *st = stream_of(s);
    complete(st, st->issued);
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
    std::lock_guard<std::mutex> lock(mu);
    complete_all();
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = (cudaEvent_t) new Event; return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete (Event *)e; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mu);
    Event *ev = (Event *)e;
    ev->stream = stream_of(s);
    ev->seq = ev->stream->issued;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(mu);
    Event *ev = (Event *)e;
    if (ev->stream) complete(ev->stream, ev->seq);
    return cudaSuccess;
}
/* Work queued on `s` later must follow what the event covers: completing that now is one of the
 * orders the device may choose (copies queued on `s` still wait for `s`). */
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t e, unsigned) { return cudaEventSynchronize(e); }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t, cudaEvent_t) { *ms = 1.0f; return cudaSuccess; }

cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (*p) memset(*p, 0xa5, bytes); /* device memory starts as garbage */
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p) { /* synchronizes the device, as in CUDA */
    std::lock_guard<std::mutex> lock(mu);
    complete_all();
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu);
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    pinned[(uintptr_t)*p] = bytes ? bytes : 1;
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) {
    std::lock_guard<std::mutex> lock(mu);
    complete_all();
    pinned.erase((uintptr_t)p);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mu);
    Stream *st = stream_of(s);
    complete(st, st->issued);
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *src, size_t n, cudaMemcpyKind, cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mu);
    Stream *st = stream_of(s);
    complete(st, st->issued);
    if (n && (is_pinned(d, n) || is_pinned(src, n))) {
        memset(d, 0xff, n); /* NaN bytes until the copy completes */
        st->queue.push_back({d, src, n, ++st->issued});
    } else {
        memmove(d, src, n);
    }
    return cudaSuccess;
}
/* the legacy stream's synchronous copy: non-blocking streams are not waited for */
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) {
    std::lock_guard<std::mutex> lock(mu);
    complete(&legacy_stream, legacy_stream.issued);
    memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { cudaError_t e = last_error; last_error = cudaSuccess; return e; }
cudaError_t cudaPeekAtLastError(void) { return last_error; }
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    default: return "emulated CUDA error";
    }
}
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    default: return "cudaErrorEmulated";
    }
}
/* MaxDynamicSharedMemorySize: what a launch of that kernel may then ask (the emulated device is
 * an sm_90 part: 227 KiB at most) */
cudaError_t cudaFuncSetAttribute(const void *kernel, cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
    if (!kernel || value < 0 || (size_t)value > DYNAMIC_SMEM_OPTIN_MAX) return cudaErrorInvalidValue;
    std::lock_guard<std::mutex> lock(mu);
    smem_optin[kernel] = (size_t)value;
    return cudaSuccess;
}
}

/* ---- cuBLASLt: descriptors hold the attributes; cublasLtMatmul is a reference column-major
 * GEMM with the BIAS and GELU_AUX epilogues, D = epilogue(alpha op(A) op(B) + beta C) ---- */
struct EmuDesc {
    cublasComputeType_t compute;
    int transa, transb;
    cublasLtEpilogue_t epilogue;
    const void *bias;
    void *aux;
    int64_t aux_ld;
    int32_t bias_type;
};
struct EmuLayout {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
};

extern "C" {
cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) { *h = (cublasLtHandle_t)0x1; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }
size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }
const char *cublasLtGetStatusString(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? "success" : "emulated failure"; }
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c, cudaDataType_t scale) {
    if (scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    EmuDesc *e = (EmuDesc *)calloc(1, sizeof(EmuDesc));
    e->compute = c;
    e->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    e->bias_type = -1;
    *d = (cublasLtMatmulDesc_t)e;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { free(d); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *buf,
                                              size_t n) {
    EmuDesc *e = (EmuDesc *)d;
    switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA: memcpy(&e->transa, buf, n); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: memcpy(&e->transb, buf, n); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: memcpy(&e->epilogue, buf, n); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: memcpy(&e->bias, buf, n); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: memcpy(&e->aux, buf, n); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: memcpy(&e->aux_ld, buf, n); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: memcpy(&e->bias_type, buf, n); break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    if ((int64_t)rows > ld) return CUBLAS_STATUS_INVALID_VALUE; /* column-major: ld >= rows */
    EmuLayout *e = (EmuLayout *)calloc(1, sizeof(EmuLayout));
    e->type = t, e->rows = rows, e->cols = cols, e->ld = ld;
    *l = (cublasLtMatrixLayout_t)e;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { free(l); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = (cublasLtMatmulPreference_t)calloc(1, 8);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { free(p); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                                    const void *, size_t) {
    return CUBLAS_STATUS_SUCCESS;
}
/* Follows the strict reading of cublasLt.h: a bias has the output's type (the backend must then
 * take its fallback route for an fp32 bias on a bf16 output). */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t Dd,
                                              cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t r[],
                                              int *found) {
    EmuDesc *e = (EmuDesc *)desc;
    int has_bias = e->epilogue == CUBLASLT_EPILOGUE_BIAS || e->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    if (has_bias && e->bias_type >= 0 && e->bias_type != (int32_t)((EmuLayout *)Dd)->type) {
        *found = 0;
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    memset(&r[0], 0, sizeof r[0]);
    r[0].state = CUBLAS_STATUS_SUCCESS;
    *found = 1;
    return CUBLAS_STATUS_SUCCESS;
}

static float load(const void *p, cudaDataType t, size_t i) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    if (t == CUDA_R_16BF) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    fprintf(stderr, "cuda_emu: cuBLASLt type %d not emulated\n", (int)t);
    abort();
}
static void store(void *p, cudaDataType t, size_t i, float v) {
    if (t == CUDA_R_32F) ((float *)p)[i] = v;
    else ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t Ad, const void *B, cublasLtMatrixLayout_t Bd, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cd, void *D, cublasLtMatrixLayout_t Dd,
                              const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t stream) {
    stream_order(stream);
    EmuDesc *e = (EmuDesc *)desc;
    EmuLayout *a = (EmuLayout *)Ad, *b = (EmuLayout *)Bd, *c = (EmuLayout *)Cd, *d = (EmuLayout *)Dd;
    float al = *(const float *)alpha, be = *(const float *)beta;
    /* op(A) is m x k, op(B) is k x n, D is m x n */
    uint64_t m = e->transa ? a->cols : a->rows, k = e->transa ? a->rows : a->cols;
    uint64_t kb = e->transb ? b->cols : b->rows, n = e->transb ? b->rows : b->cols;
    if (kb != k || d->rows != m || d->cols != n || c->rows != m || c->cols != n || a->type != b->type)
        return CUBLAS_STATUS_INVALID_VALUE;
    int has_bias = e->epilogue == CUBLASLT_EPILOGUE_BIAS || e->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    int gelu = e->epilogue == CUBLASLT_EPILOGUE_GELU_AUX || e->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    if (has_bias && !e->bias) return CUBLAS_STATUS_INVALID_VALUE;
    if (gelu && (!e->aux || e->aux_ld % 8 || e->aux_ld < (int64_t)m)) return CUBLAS_STATUS_INVALID_VALUE;
    cudaDataType bias_t = e->bias_type >= 0 ? (cudaDataType)e->bias_type : d->type;
    for (uint64_t j = 0; j < n; j++)
        for (uint64_t i = 0; i < m; i++) {
            float s = 0;
            for (uint64_t p = 0; p < k; p++) {
                float x = e->transa ? load(A, a->type, i * a->ld + p) : load(A, a->type, p * a->ld + i);
                float y = e->transb ? load(B, b->type, p * b->ld + j) : load(B, b->type, j * b->ld + p);
                s += x * y;
            }
            float v = al * s + (be != 0 ? be * load(C, c->type, j * c->ld + i) : 0.0f);
            if (has_bias) v += load(e->bias, bias_t, i);
            if (gelu) {
                store(e->aux, d->type, j * e->aux_ld + i, v);
                float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
                v = 0.5f * v * (1.0f + tanhf(u));
            }
            store(D, d->type, j * d->ld + i, v);
        }
    return CUBLAS_STATUS_SUCCESS;
}
}
