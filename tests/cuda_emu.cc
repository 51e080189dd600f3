/* cuda_emu.cc: the execution model and the CUDA runtime / cuBLASLt calls of cuda_emu.h.
 * Threads of a block are fibers on one OS thread (on x86-64 a six-register stack switch of our
 * own: swapcontext saves the signal mask with a system call at every switch, which was 86% of
 * the emulation's time; elsewhere ucontext). The scheduler runs each runnable
 * fiber until it blocks at a barrier or ends; when every live thread of the block waits at
 * __syncthreads they all go on; when every live lane of a warp waits at a warp collective, that
 * warp goes on. Anything else is a deadlock (a barrier inside divergent code) and aborts, as does
 * a warp collective some lanes of the warp have left. Rounds alternate forward and reverse thread
 * order, so a read of shared memory that lacks its barrier sees the wrong data in one of them. */
#include "cuda_emu.h"

#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include <vector>

namespace emu {
enum { RUNNABLE, AT_BLOCK, AT_WARP, DONE };
struct Fiber {
    Thread t;
#if defined(__x86_64__)
    void *sp;
#else
    ucontext_t ctx;
#endif
    char *stack;
    int state;
};
enum { STACK_BYTES = 256 << 10, SLOT_BYTES = 64 };

Thread *current;
uint3 block_idx;
dim3 block_dim, grid_dim;
static std::vector<Fiber> fibers;
static Fiber *running;
static const std::function<void()> *kernel_body;
static std::vector<unsigned char> dyn_smem, slots;
static size_t dyn_bytes;

#if defined(__x86_64__)
/* emu_switch(save, load): push the callee-saved registers, store the stack pointer in *save,
 * switch to `load` and pop the registers saved there; `ret` resumes that context. */
extern "C" void emu_switch(void **save, void *load);
asm(".text\n"
    ".globl emu_switch\n"
    ".type emu_switch,@function\n"
    "emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size emu_switch,.-emu_switch\n");
static void *scheduler_sp;

static void fiber_main() {
    (*kernel_body)();
    running->state = DONE;
    emu_switch(&running->sp, scheduler_sp); /* never resumed */
    abort();
}

/* a fresh stack that emu_switch "returns" into fiber_main from, aligned as after a call */
static void fiber_start(Fiber &f) {
    uintptr_t top = ((uintptr_t)f.stack + STACK_BYTES) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;                    /* fiber_main's return address: it never returns */
    *--sp = (void *)fiber_main;      /* where the first switch's ret goes */
    for (int i = 0; i < 6; i++) *--sp = NULL; /* rbp rbx r12 r13 r14 r15 */
    f.sp = sp;
}
static void resume(Fiber &f) { emu_switch(&scheduler_sp, f.sp); }
static void block_on(int state) {
    running->state = state;
    emu_switch(&running->sp, scheduler_sp);
}
#else
static ucontext_t scheduler;
static void fiber_main() {
    (*kernel_body)();
    running->state = DONE;
    /* returning resumes the scheduler through uc_link */
}
static void fiber_start(Fiber &f) {
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = STACK_BYTES;
    f.ctx.uc_link = &scheduler;
    makecontext(&f.ctx, fiber_main, 0);
}
static void resume(Fiber &f) { swapcontext(&scheduler, &f.ctx); }
static void block_on(int state) {
    running->state = state;
    swapcontext(&running->ctx, &scheduler);
}
#endif

void syncthreads() { block_on(AT_BLOCK); }
void warp_barrier() { block_on(AT_WARP); }
int lane() { return current->lane; }
unsigned char *warp_slots() { return &slots[(size_t)current->warp * 32 * SLOT_BYTES]; }
unsigned char *dynamic_smem() { return dyn_smem.data(); }

static void fail(const char *why) {
    fprintf(stderr, "cuda_emu: %s in block (%u,%u,%u); thread states:", why, block_idx.x, block_idx.y, block_idx.z);
    for (size_t i = 0; i < fibers.size(); i++) fprintf(stderr, " %d", fibers[i].state);
    fprintf(stderr, "\n");
    abort();
}

static void run_block(int nthreads) {
    for (int i = 0; i < nthreads; i++) {
        Fiber &f = fibers[i];
        f.state = RUNNABLE;
        fiber_start(f);
    }
    memset(dyn_smem.data(), 0xff, dyn_smem.size()); /* unwritten shared memory reads as NaN */
    int nwarps = (nthreads + 31) / 32;
    for (long round = 0;; round++) {
        for (int k = 0; k < nthreads; k++) {
            int i = round % 2 ? nthreads - 1 - k : k;
            Fiber &f = fibers[i];
            if (f.state != RUNNABLE) continue;
            running = &f;
            current = &f.t;
            resume(f);
        }
        int done = 0, at_block = 0, at_warp = 0;
        for (int i = 0; i < nthreads; i++) {
            done += fibers[i].state == DONE;
            at_block += fibers[i].state == AT_BLOCK;
            at_warp += fibers[i].state == AT_WARP;
        }
        if (done == nthreads) return;
        if (at_warp == 0) { /* every live thread is at __syncthreads */
            for (int i = 0; i < nthreads; i++)
                if (fibers[i].state == AT_BLOCK) fibers[i].state = RUNNABLE;
            continue;
        }
        int released = 0;
        for (int w = 0; w < nwarps; w++) {
            int lo = w * 32, hi = lo + 32 < nthreads ? lo + 32 : nthreads, waiting = 0, gone = 0, live = 0;
            for (int i = lo; i < hi; i++) {
                waiting += fibers[i].state == AT_WARP;
                gone += fibers[i].state == DONE;
                live += fibers[i].state != DONE;
            }
            if (waiting == 0 || waiting != live) continue;
            if (gone) fail("a warp collective after some lanes of the warp returned");
            for (int i = lo; i < hi; i++) fibers[i].state = RUNNABLE;
            released = 1;
        }
        if (!released) fail("deadlock: threads wait at different barriers (a barrier in divergent code?)");
    }
}

void launch(dim3 grid, dim3 block, size_t smem, const std::function<void()> &body) {
    int nthreads = block.x * block.y * block.z;
    if (nthreads < 1 || nthreads > 1024) {
        fprintf(stderr, "cuda_emu: invalid block of %d threads\n", nthreads);
        abort();
    }
    if (smem > 227 * 1024) {
        fprintf(stderr, "cuda_emu: %zu bytes of dynamic shared memory asked (227 KiB at most)\n", smem);
        abort();
    }
    if (grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.y > 65535 || grid.z > 65535) {
        fprintf(stderr, "cuda_emu: invalid grid %u x %u x %u\n", grid.x, grid.y, grid.z);
        abort();
    }
    while ((int)fibers.size() < nthreads) {
        Fiber f;
        memset(&f, 0, sizeof f);
        f.stack = (char *)malloc(STACK_BYTES);
        fibers.push_back(f);
    }
    dyn_smem.assign(smem ? smem : 1, 0xff);
    dyn_bytes = smem;
    slots.assign((size_t)((nthreads + 31) / 32) * 32 * SLOT_BYTES, 0);
    kernel_body = &body;
    block_dim = block;
    grid_dim = grid;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                block_idx = make_uint3(x, y, z);
                for (int i = 0; i < nthreads; i++) {
                    Thread &t = fibers[i].t;
                    t.tid = make_uint3(i % block.x, (i / block.x) % block.y, i / (block.x * block.y));
                    t.lane = i % 32;
                    t.warp = i / 32;
                }
                run_block(nthreads);
            }
    current = NULL;
}

/* ---- warp-level matrix instructions, as the PTX ISA describes their fragments ---- */
static float bf16_lo(uint32_t r) { uint32_t u = r << 16; float f; memcpy(&f, &u, 4); return f; }
static float bf16_hi(uint32_t r) { uint32_t u = r & 0xffff0000u; float f; memcpy(&f, &u, 4); return f; }

struct MmaSlot {
    uint32_t a[4], b[2];
    float c[4];
};

/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: lane l holds, with g = l / 4, q = l % 4,
 * A (16x16): a0 = (g, 2q..2q+1), a1 = (g+8, 2q..), a2 = (g, 2q+8..), a3 = (g+8, 2q+8..);
 * B (16x8): b0 = (k 2q..2q+1, n g), b1 = (k 2q+8.., n g); C/D (16x8): c0,c1 = (g, 2q..2q+1),
 * c2,c3 = (g+8, 2q..2q+1). */
void mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
    static_assert(sizeof(MmaSlot) <= 64, "slot");
    MmaSlot mine;
    memcpy(mine.a, a, sizeof mine.a);
    memcpy(mine.b, b, sizeof mine.b);
    memcpy(mine.c, c, sizeof mine.c);
    unsigned char *s = warp_slots();
    memcpy(s + SLOT_BYTES * lane(), &mine, sizeof mine);
    warp_barrier();
    MmaSlot all[32];
    for (int l = 0; l < 32; l++) memcpy(&all[l], s + SLOT_BYTES * l, sizeof(MmaSlot));
    warp_barrier();
    auto A = [&](int row, int k) {
        int l = (row % 8) * 4 + (k % 8) / 2, reg = (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
        return k % 2 ? bf16_hi(all[l].a[reg]) : bf16_lo(all[l].a[reg]);
    };
    auto B = [&](int k, int n) {
        int l = n * 4 + (k % 8) / 2, reg = k >= 8 ? 1 : 0;
        return k % 2 ? bf16_hi(all[l].b[reg]) : bf16_lo(all[l].b[reg]);
    };
    int g = lane() / 4, q = lane() % 4;
    for (int i = 0; i < 4; i++) {
        int row = g + (i >= 2 ? 8 : 0), col = 2 * q + (i % 2);
        float acc = c[i];
        for (int k = 0; k < 16; k++) acc += A(row, k) * B(k, col);
        d[i] = acc;
    }
}

/* ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lanes 8i..8i+7 give the row addresses of
 * matrix i (16 bytes a row); lane l receives in r[i] the elements (l / 4, 2 (l % 4) .. +1) of
 * matrix i, or with .trans (2 (l % 4) .. +1, l / 4). */
void ldmatrix_x4(uint32_t r[4], const void *row_address, bool trans) {
    unsigned char *s = warp_slots();
    memcpy(s + SLOT_BYTES * lane(), &row_address, sizeof row_address);
    warp_barrier();
    const uint16_t *rows[32];
    for (int l = 0; l < 32; l++) memcpy(&rows[l], s + SLOT_BYTES * l, sizeof(void *));
    warp_barrier();
    int l = lane();
    for (int i = 0; i < 4; i++) {
        uint16_t lo, hi;
        if (!trans) {
            const uint16_t *row = rows[8 * i + l / 4];
            lo = row[2 * (l % 4)];
            hi = row[2 * (l % 4) + 1];
        } else {
            lo = rows[8 * i + 2 * (l % 4)][l / 4];
            hi = rows[8 * i + 2 * (l % 4) + 1][l / 4];
        }
        r[i] = (uint32_t)lo | ((uint32_t)hi << 16);
    }
}
} // namespace emu

unsigned __ballot_sync(unsigned, int pred) {
    unsigned char *s = emu::warp_slots();
    int p = pred != 0;
    memcpy(s + emu::SLOT_BYTES * emu::lane(), &p, sizeof p);
    emu::warp_barrier();
    unsigned bits = 0;
    for (int l = 0; l < 32; l++) {
        int v;
        memcpy(&v, s + emu::SLOT_BYTES * l, sizeof v);
        if (v) bits |= 1u << l;
    }
    emu::warp_barrier();
    return bits;
}

unsigned __match_any_sync(unsigned, unsigned value) {
    unsigned char *s = emu::warp_slots();
    memcpy(s + emu::SLOT_BYTES * emu::lane(), &value, sizeof value);
    emu::warp_barrier();
    unsigned bits = 0;
    for (int l = 0; l < 32; l++) {
        unsigned v;
        memcpy(&v, s + emu::SLOT_BYTES * l, sizeof v);
        if (v == value) bits |= 1u << l;
    }
    emu::warp_barrier();
    return bits;
}

/* ---- the CUDA runtime calls the backend makes, on host memory ---- */
static cudaError_t last_error = cudaSuccess;
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
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t *fr, size_t *tot) { *fr = (size_t)8 << 30; *tot = (size_t)16 << 30; return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = (cudaStream_t)0x1; return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (*p) memset(*p, 0xa5, bytes); /* device memory starts as garbage */
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaMallocHost(void **p, size_t bytes) { *p = malloc(bytes); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaFreeHost(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) { memset(p, v, n); return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) {
    memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) { memmove(d, s, n); return cudaSuccess; }
cudaError_t cudaGetLastError(void) { cudaError_t e = last_error; last_error = cudaSuccess; return e; }
cudaError_t cudaPeekAtLastError(void) { return last_error; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated CUDA error"; }
const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }
cudaError_t cudaFuncSetAttribute(const void *, cudaFuncAttribute, int) { return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = (cudaEvent_t)0x1; return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { *e = (cudaEvent_t)0x1; return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; } /* one in-order stream */
cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; } /* one in-order stream: all done */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t, cudaEvent_t) { *ms = 1.0f; return cudaSuccess; }
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
                              const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t) {
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
