/* cuda_context.cu: the CUDA backend's context: device selection and facts, the one stream every
 * op runs on, scratch memory, settings (TF32, attention choice), and the memory
 * calls (device allocations with in-use/peak counters, copies, pinned host memory, dtype
 * conversion). The CUDA runtime is linked statically; the driver (libcuda) is loaded by it at the
 * first call, so a machine without a GPU or driver runs the binary and gets 0 devices here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_common.cuh"

static struct {
    int initialized, device, sm_count, cc_major, cc_minor;
    cudaStream_t stream;
    void *scratch;
    size_t scratch_bytes;
    int tf32, attention;
    size_t in_use, peak;
} ctx = {0, 0, 1, 0, 0, NULL, NULL, 0, 0, CUDA_ATTN_AUTO, 0, 0};

/* cudaMalloc'd sizes, to count bytes in use (cudaFree does not say) */
typedef struct {
    void *p;
    size_t bytes;
} Allocation;
static Allocation *allocs;
static size_t nallocs, cap_allocs;

void cuda_fail(cudaError_t e, const char *what, const char *file, int line) {
    myr_die("CUDA error %s (%s) in %s at %s:%d", cudaGetErrorName(e), cudaGetErrorString(e), what, file, line);
}

extern "C" size_t cuda_dtype_size(int dt) { return dt == CUDA_BF16 ? 2 : 4; }

extern "C" int cuda_device_count_why(char *why, size_t why_size) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        if (why && why_size)
            snprintf(why, why_size, "no CUDA device is usable: %s (%s)", cudaGetErrorString(e),
                     e == cudaErrorInsufficientDriver
                         ? "no NVIDIA driver, or one too old for the CUDA runtime myriad was built with"
                         : cudaGetErrorName(e));
        return 0;
    }
    if (n == 0 && why && why_size) snprintf(why, why_size, "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)");
    return n;
}

extern "C" int cuda_device_count(void) { return cuda_device_count_why(NULL, 0); }

extern "C" int cuda_device_info(int device, CudaDeviceInfo *info, char *err, size_t errlen) {
    memset(info, 0, sizeof *info);
    int n = cuda_device_count();
    if (device < 0 || device >= n) {
        snprintf(err, errlen, "CUDA device %d does not exist (%d visible)", device, n);
        return -1;
    }
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cannot read CUDA device %d: %s", device, cudaGetErrorString(e));
        return -1;
    }
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->sm_count = prop.multiProcessorCount;
    info->cc_major = prop.major;
    info->cc_minor = prop.minor;
    info->total_bytes = prop.totalGlobalMem;
    int cur = -1;
    cudaGetDevice(&cur);
    if (cur == device) {
        size_t fr = 0, tot = 0;
        if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) info->free_bytes = fr;
        else cudaGetLastError();
    }
    return 0;
}

int cuda_gemm_init(char *err, size_t errlen); /* cuda_gemm.cu */
void cuda_gemm_shutdown();

extern "C" int cuda_init(int device, char *err, size_t errlen) {
    if (ctx.initialized) return 0;
    CudaDeviceInfo info;
    if (cuda_device_info(device, &info, err, errlen)) return -1;
    if (info.cc_major < 8) {
        snprintf(err, errlen, "CUDA device %d (%s) has compute capability %d.%d; myriad needs 8.0 or newer (A100, H100)",
                 device, info.name, info.cc_major, info.cc_minor);
        return -1;
    }
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cannot start CUDA on device %d: %s", device, cudaGetErrorString(e));
        return -1;
    }
    ctx.device = device;
    ctx.sm_count = info.sm_count;
    ctx.cc_major = info.cc_major;
    ctx.cc_minor = info.cc_minor;
    if (cuda_gemm_init(err, errlen)) return -1;
    const char *attn = getenv("MYRIAD_CUDA_ATTN");
    if (attn && !strcmp(attn, "simple")) ctx.attention = CUDA_ATTN_SIMPLE;
    else if (attn && !strcmp(attn, "tc")) ctx.attention = CUDA_ATTN_TC;
    ctx.initialized = 1;
    return 0;
}

extern "C" int cuda_initialized(void) { return ctx.initialized; }

extern "C" void cuda_shutdown(void) {
    if (!ctx.initialized) return;
    cudaStreamSynchronize(ctx.stream);
    cuda_gemm_shutdown();
    if (ctx.scratch) cudaFree(ctx.scratch);
    ctx.scratch = NULL;
    ctx.scratch_bytes = 0;
    cudaStreamDestroy(ctx.stream);
    ctx.initialized = 0;
}

void cuda_require_init(const char *what) {
    if (!ctx.initialized) myr_die("%s: the CUDA backend is not initialised (cuda_init first)", what);
}

cudaStream_t cuda_current_stream() { return ctx.stream; }
int cuda_sm_count() { return ctx.sm_count; }
int cuda_cc_major() { return ctx.cc_major; }
int cuda_tf32_allowed() { return ctx.tf32; }
int cuda_attention_choice() { return ctx.attention; }

extern "C" void cuda_set_tf32(int allow) { ctx.tf32 = allow != 0; }
extern "C" void cuda_set_attention_impl(int impl) { ctx.attention = impl; }
extern "C" void cuda_synchronize(void) { CUDA_CHECK(cudaStreamSynchronize(ctx.stream)); }
extern "C" void *cuda_stream(void) { return (void *)ctx.stream; }

void *cuda_scratch(size_t bytes) {
    if (bytes <= ctx.scratch_bytes) return ctx.scratch;
    size_t grown = ctx.scratch_bytes * 2 > bytes ? ctx.scratch_bytes * 2 : bytes;
    grown = (grown + 4095) / 4096 * 4096;
    if (ctx.scratch) {
        CUDA_CHECK(cudaStreamSynchronize(ctx.stream)); /* earlier kernels may still use it */
        CUDA_CHECK(cudaFree(ctx.scratch));
    }
    ctx.scratch = NULL;
    if (cudaMalloc(&ctx.scratch, grown) != cudaSuccess) {
        cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        myr_die("out of GPU memory: %.1f MiB of scratch asked, %.1f MiB free (reduce --batch or --seq)",
                grown / 1048576.0, fr / 1048576.0);
    }
    ctx.scratch_bytes = grown;
    return ctx.scratch;
}

/* ---- memory ---- */
static void remember(void *p, size_t bytes) {
    if (nallocs == cap_allocs) {
        cap_allocs = cap_allocs ? 2 * cap_allocs : 256;
        allocs = (Allocation *)realloc(allocs, cap_allocs * sizeof *allocs);
        if (!allocs) myr_die("out of host memory");
    }
    allocs[nallocs].p = p;
    allocs[nallocs].bytes = bytes;
    nallocs++;
    ctx.in_use += bytes;
    if (ctx.in_use > ctx.peak) ctx.peak = ctx.in_use;
}

extern "C" void *cuda_try_alloc(size_t bytes) {
    cuda_require_init("cuda_alloc");
    if (bytes == 0) bytes = 1;
    bytes = (bytes + 255) / 256 * 256;
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx.stream));
    remember(p, bytes);
    return p;
}

extern "C" void *cuda_alloc(size_t bytes) {
    void *p = cuda_try_alloc(bytes);
    if (!p) {
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        myr_die("out of GPU memory: %.1f MiB asked, %.1f MiB free of %.1f MiB (reduce --batch or --seq, the model "
                "size, or use more ranks)",
                bytes / 1048576.0, fr / 1048576.0, tot / 1048576.0);
    }
    return p;
}

extern "C" void cuda_free(void *p) {
    if (!p) return;
    for (size_t i = nallocs; i-- > 0;)
        if (allocs[i].p == p) {
            ctx.in_use -= allocs[i].bytes;
            allocs[i] = allocs[--nallocs];
            break;
        }
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream)); /* kernels in flight may still read it */
    CUDA_CHECK(cudaFree(p));
}

extern "C" size_t cuda_bytes_in_use(void) { return ctx.in_use; }
extern "C" size_t cuda_bytes_peak(void) { return ctx.peak; }
extern "C" void cuda_reset_peak(void) { ctx.peak = ctx.in_use; }

extern "C" void cuda_zero(void *p, size_t bytes) { CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx.stream)); }

extern "C" void cuda_copy_to_device(void *dst, const void *src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx.stream));
}
extern "C" void cuda_copy_to_host(void *dst, const void *src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}
extern "C" void cuda_copy_to_host_async(void *dst, const void *src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream));
}
extern "C" void cuda_copy_device(void *dst, const void *src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx.stream));
}

extern "C" void *cuda_host_try_alloc(size_t bytes) {
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

extern "C" void *cuda_host_alloc(size_t bytes) {
    void *p = cuda_host_try_alloc(bytes);
    if (!p) {
        myr_die("cannot pin %.1f MiB of host memory for GPU transfers (raise the locked-memory limit: ulimit -l)",
                bytes / 1048576.0);
    }
    return p;
}
extern "C" void cuda_host_free(void *p) {
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

/* ---- dtype conversion ---- */
template <typename TO, typename TI> __global__ void convert_kernel(TO *dst, const TI *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = from_f32<TO>(to_f32(src[i]));
}

extern "C" void cuda_convert(void *dst, int dst_dt, const void *src, int src_dt, size_t n) {
    if (n == 0) return;
    if (dst_dt == src_dt) {
        cuda_copy_device(dst, src, n * cuda_dtype_size(dst_dt));
        return;
    }
    DT_SWITCH2(dst_dt, TO, src_dt, TI,
               MYR_LAUNCH((convert_kernel<TO, TI>), grid_for(n, 256), 256, 0, (TO *)dst, (const TI *)src, n));
}
