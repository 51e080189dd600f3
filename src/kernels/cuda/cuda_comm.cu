/* cuda_comm.cu: what the communication layer needs from the device: the bf16 reduction of the
 * comm layer's chunked algorithm (CUDA-aware MPI: kernels.h dev_reduce_bf16), and the
 * communication stream with the events that order it against the compute stream (NCCL runs on
 * it; kernels.h, "streams and events"). */
#include "kernels/cuda/cuda_common.cuh"

/* out[k] = bf16(op over the nsrc copies, in copy order, in fp32); the CPU backend's
 * cpu_reduce_bf16 bit for bit (the same additions in the same order, IEEE division). */
__global__ void reduce_bf16_kernel(uint16_t *out, const uint16_t *src, int nsrc, size_t n, int op, int divisor) {
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        const bf16 *s = reinterpret_cast<const bf16 *>(src);
        float acc = to_f32(s[k]);
        for (int j = 1; j < nsrc; j++) {
            float v = to_f32(s[(size_t)j * n + k]);
            acc = op == 2 ? (v > acc ? v : acc) : acc + v;
        }
        if (op == 1 && divisor > 1) acc /= (float)divisor;
        reinterpret_cast<bf16 *>(out)[k] = from_f32<bf16>(acc);
    }
}

extern "C" void cuda_reduce_bf16(uint16_t *out, const uint16_t *src, int nsrc, size_t n, int op, int divisor) {
    if (n) MYR_LAUNCH(reduce_bf16_kernel, grid_for(n, 256), 256, 0, out, src, nsrc, n, op, divisor);
}

/* ---- the communication stream and events ---- */

static cudaStream_t comm_stream;
static int comm_device = -1;
static thread_local int thread_on_device; /* a watchdog thread queries events: on our device, not 0 */

static void on_device() {
    if (!thread_on_device && comm_device >= 0) {
        CUDA_CHECK(cudaSetDevice(comm_device));
        thread_on_device = 1;
    }
}

static cudaStream_t stream_of(int which) {
    if (!which) return cuda_current_stream();
    if (!comm_stream) {
        CUDA_CHECK(cudaGetDevice(&comm_device));
        thread_on_device = 1;
        CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
    }
    return comm_stream;
}

extern "C" void *cuda_stream_handle(int which) { return (void *)stream_of(which); }

extern "C" void *cuda_event_create(void) {
    on_device();
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return (void *)e;
}

extern "C" void cuda_event_destroy(void *e) { CUDA_CHECK(cudaEventDestroy((cudaEvent_t)e)); }
extern "C" void cuda_event_record(void *e, int which) { CUDA_CHECK(cudaEventRecord((cudaEvent_t)e, stream_of(which))); }
extern "C" void cuda_stream_wait_event(int which, void *e) {
    CUDA_CHECK(cudaStreamWaitEvent(stream_of(which), (cudaEvent_t)e, 0));
}

extern "C" int cuda_event_query(void *e) {
    on_device();
    cudaError_t r = cudaEventQuery((cudaEvent_t)e);
    if (r == cudaErrorNotReady) return 0;
    CUDA_CHECK(r);
    return 1;
}

extern "C" void cuda_event_sync(void *e) {
    on_device();
    CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)e));
}
