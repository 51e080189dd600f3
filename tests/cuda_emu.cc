/* cuda_emu.cc: the execution model of cuda_emu.h: threads, blocks, shared memory, cp.async and
 * the warp-level instructions (the CUDA runtime and cuBLASLt are in cuda_emu_runtime.cc).
 * Threads of a block are fibers on one OS thread (on x86-64 a six-register stack switch of our
 * own: swapcontext saves the signal mask with a system call at every switch, which was 86% of
 * the emulation's time; elsewhere ucontext). The scheduler runs each runnable
 * fiber until it blocks at a barrier or ends; when every live thread of the block waits at
 * __syncthreads they all go on; when every live lane of a warp waits at a warp collective, that
 * warp goes on. Anything else is a deadlock (a barrier inside divergent code) and aborts, as does
 * a warp collective some lanes of the warp have left. Rounds alternate forward and reverse thread
 * order, so a read of shared memory that lacks its barrier sees the wrong data in one of them.
 *
 * What a real GPU punishes, and how the emulator makes it visible here instead:
 *  - cp.async is asynchronous: each thread's copies join its open group, cp.async.commit_group
 *    closes the group, cp.async.wait_group N returns once at most the N most recent committed
 *    groups of that thread are still pending (uncommitted copies are not waited for). The
 *    emulator lands a copy as late as that allows: at the wait that covers it (copies a thread
 *    never waits for, at the end of its block). The destination is poisoned (NaN) at issue, so a
 *    read before the right wait sees NaN, and an ldmatrix of it, or a second cp.async to it,
 *    aborts naming the address.
 *  - ldmatrix row addresses and cp.async addresses must be aligned (16 bytes; a 4- or 8-byte
 *    cp.async to its size) and in shared memory (cp.async: from global), else the device faults
 *    or reads the wrong bytes: checked at each call. Typed loads and stores (float4, uint2, a
 *    uint32_t over two bf16) are checked by -fsanitize=alignment; the death callback below says
 *    which kernel, block and thread the report came from.
 *  - more than 48 KiB of dynamic shared memory needs cudaFuncSetAttribute for that kernel, or the
 *    launch fails (cudaErrorInvalidValue): the launch is refused the same way here.
 *  - shared memory does not survive a block: dynamic shared memory is set to NaN bytes before
 *    every block, and each static one (MYR_SHARED) when the block first reaches its declaration.
 *    Static and dynamic shared memory together are held to the launch's limit.
 *  - blocks run in no fixed order (and at the same time): here they run reversed, or in a shuffle
 *    seeded by MYRIAD_EMU_SEED and the launch's number, never in grid order, so a kernel that
 *    reads what an earlier block wrote in the same launch computes garbage. */
#include "cuda_emu.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include <algorithm>
#include <numeric>
#include <vector>

/* from the sanitizer runtime when the emulation is built with -fsanitize=alignment */
extern "C" __attribute__((weak)) void __sanitizer_set_death_callback(void (*)(void));
/* a misaligned access report names the kernel's source line and the stack that led there */
extern "C" const char *__ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }

namespace emu {
enum { RUNNABLE, AT_BLOCK, AT_WARP, DONE };
struct AsyncCopy {
    unsigned char *dst;
    const unsigned char *src;
    int bytes, src_bytes;
    long group; /* the number of groups its thread had committed when it was issued */
};
struct Fiber {
    Thread t;
#if defined(__x86_64__)
    void *sp;
#else
    ucontext_t ctx;
#endif
    char *stack;
    int state;
    std::vector<AsyncCopy> copies; /* this thread's cp.async still in flight, in issue order */
    long commits;                  /* cp.async groups this thread has committed */
};
enum { STACK_BYTES = 256 << 10, SLOT_BYTES = 64, DYN_ALIGN = 128, POISON = 0xff /* NaN in fp32 and bf16 */ };

Thread *current;
uint3 block_idx;
dim3 block_dim, grid_dim;
static std::vector<Fiber> fibers;
static Fiber *running;
static const std::function<void()> *kernel_body;
static std::vector<unsigned char> slots;
static const char *kernel_name;
static long launch_no;       /* launches so far: picks each launch's block order */
static long block_no;        /* blocks run so far, for the static shared memory's first entry */
static unsigned long seed_base = 1;
/* dynamic shared memory of the running launch with one flag per 4 bytes telling that a cp.async
 * to it is in flight; the static shared variables seen so far (SharedSite), and how many bytes
 * of them this launch has used */
static unsigned char *dyn_base;
static size_t dyn_capacity, dyn_bytes, dyn_allowed;
static std::vector<unsigned char> dyn_inflight;
static std::vector<SharedSite *> static_sites;
static size_t static_bytes;

void fail(const char *fmt, ...) {
    fprintf(stderr, "cuda_emu: ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    if (kernel_name) {
        fprintf(stderr, "cuda_emu: in kernel %s, launch %ld (MYRIAD_EMU_SEED=%lu), block (%u,%u,%u)", kernel_name,
                launch_no, seed_base, block_idx.x, block_idx.y, block_idx.z);
        if (current) fprintf(stderr, ", thread (%u,%u,%u)", current->tid.x, current->tid.y, current->tid.z);
        fprintf(stderr, "; thread states:");
        for (size_t i = 0; i < fibers.size() && i < (size_t)block_dim.x * block_dim.y * block_dim.z; i++)
            fprintf(stderr, " %d", fibers[i].state);
        fprintf(stderr, "\n");
    }
    abort();
}

static void on_sanitizer_death() {
    if (kernel_name && current)
        fprintf(stderr, "cuda_emu: the report above comes from kernel %s, block (%u,%u,%u), thread (%u,%u,%u)\n",
                kernel_name, block_idx.x, block_idx.y, block_idx.z, current->tid.x, current->tid.y, current->tid.z);
}

/* ---- shared memory ---- */

/* the in-flight flags of [p, p + n) if it lies inside this block's shared memory, else NULL */
static unsigned char *inflight_flags(const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p, d = (uintptr_t)dyn_base;
    if (dyn_bytes && a >= d && a + n <= d + dyn_bytes) return &dyn_inflight[(a - d) / 4];
    for (SharedSite *s : static_sites) {
        uintptr_t b = (uintptr_t)s->addr;
        if (s->block == block_no && a >= b && a + n <= b + s->bytes) return &s->inflight[(a - b) / 4];
    }
    return NULL;
}

unsigned char *dynamic_smem() { return dyn_base; }

/* Shared memory holds nothing a block did not write itself: garbage (here NaN) when it starts.
 * A static variable is poisoned when the block's first thread reaches its declaration: no
 * thread of the block can touch it before. */
void shared_enter(SharedSite *site, void *addr, size_t bytes) {
    if (site->block == block_no) return;
    if (!site->addr) {
        site->addr = addr;
        site->bytes = bytes;
        site->inflight = (unsigned char *)calloc(bytes / 4 + 1, 1);
        static_sites.push_back(site);
    }
    site->block = block_no;
    memset(addr, POISON, bytes);
    if (site->launch != launch_no + 1) { /* + 1: a fresh site holds 0 */
        site->launch = launch_no + 1;
        static_bytes += bytes;
        /* the device checks this at launch: static + dynamic <= 48 KiB, or, with the attribute,
         * static + the attribute's dynamic size <= the device's 227 KiB */
        size_t limit = dyn_allowed > DYNAMIC_SMEM_DEFAULT ? DYNAMIC_SMEM_OPTIN_MAX : DYNAMIC_SMEM_DEFAULT;
        size_t dyn = dyn_allowed > DYNAMIC_SMEM_DEFAULT ? dyn_allowed : dyn_bytes;
        if (static_bytes + dyn > limit)
            fail("%zu bytes of static and %zu of dynamic shared memory exceed the %zu a block may have: the "
                 "device refuses this launch", static_bytes, dyn, limit);
    }
}

/* ---- cp.async ---- */

static void land(const AsyncCopy &c) {
    memcpy(c.dst, c.src, c.src_bytes);
    memset(c.dst + c.src_bytes, 0, c.bytes - c.src_bytes); /* src-size < cp-size: the rest is zero-filled */
    unsigned char *flags = inflight_flags(c.dst, c.bytes);
    memset(flags, 0, c.bytes / 4);
}

/* lands this thread's copies of the groups committed before its last `pending` commits */
static void land_groups_before(Fiber &f, long pending) {
    long upto = f.commits - pending;
    size_t k = 0;
    while (k < f.copies.size() && f.copies[k].group < upto) land(f.copies[k++]);
    f.copies.erase(f.copies.begin(), f.copies.begin() + k);
}

static void land_all(Fiber &f) {
    for (const AsyncCopy &c : f.copies) land(c);
    f.copies.clear();
}

static Fiber &async_thread(const char *what) {
    if (!running) fail("%s outside a kernel", what);
    return *running;
}

void cp_async(void *dst, const void *src, int bytes, int src_bytes) {
    Fiber &f = async_thread("cp.async");
    if (bytes != 4 && bytes != 8 && bytes != 16) fail("cp.async of %d bytes (PTX allows 4, 8 or 16)", bytes);
    if (src_bytes < 0 || src_bytes > bytes) fail("cp.async of %d bytes with src-size %d", bytes, src_bytes);
    if ((uintptr_t)dst % bytes)
        fail("cp.async destination %p is not %d-byte aligned (cp.async of %d bytes needs both addresses aligned "
             "to %d)", dst, bytes, bytes, bytes);
    if ((uintptr_t)src % bytes)
        fail("cp.async source %p is not %d-byte aligned (cp.async of %d bytes needs both addresses aligned to %d)",
             src, bytes, bytes, bytes);
    unsigned char *flags = inflight_flags(dst, bytes);
    if (!flags) fail("cp.async destination %p is not in this block's shared memory", dst);
    if (inflight_flags(src, 1)) fail("cp.async source %p is in shared memory (cp.async copies global -> shared)", src);
    for (int g = 0; g < bytes / 4; g++)
        if (flags[g])
            fail("a second cp.async to shared memory at %p while one is still in flight there (which lands last "
                 "is undefined: wait for the first)", dst);
    memset(flags, 1, bytes / 4);
    memset(dst, POISON, bytes); /* what a read before the covering wait may see */
    f.copies.push_back({(unsigned char *)dst, (const unsigned char *)src, bytes, src_bytes, f.commits});
}

void cp_async_commit() { async_thread("cp.async.commit_group").commits++; }

void cp_async_wait(int n) {
    if (n < 0) fail("cp.async.wait_group %d", n);
    land_groups_before(async_thread("cp.async.wait_group"), n);
}

void cp_async_wait_all() { /* cp.async.wait_all is commit_group + wait_group 0 */
    cp_async_commit();
    cp_async_wait(0);
}

/* ---- fibers ---- */
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
    running->state = DONE; /* its copies in flight land when the block ends (run_block) */
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

/* ---- blocks and launches ---- */

static void run_block(int nthreads) {
    for (int i = 0; i < nthreads; i++) {
        Fiber &f = fibers[i];
        f.state = RUNNABLE;
        f.copies.clear();
        f.commits = 0;
        fiber_start(f);
    }
    memset(dyn_base, POISON, dyn_capacity); /* static shared memory: shared_enter */
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
        running = NULL;
        current = NULL;
        int done = 0, at_block = 0, at_warp = 0;
        for (int i = 0; i < nthreads; i++) {
            done += fibers[i].state == DONE;
            at_block += fibers[i].state == AT_BLOCK;
            at_warp += fibers[i].state == AT_WARP;
        }
        if (done == nthreads) { /* copies a thread left in flight land as late as possible: now */
            for (int i = 0; i < nthreads; i++) land_all(fibers[i]);
            return;
        }
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

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The order the blocks of this launch run in: even launches reversed, odd ones shuffled; grid
 * order never (for two blocks or more), since the device promises no order at all. */
static void block_order(std::vector<uint32_t> &order, size_t n) {
    order.resize(n);
    std::iota(order.begin(), order.end(), 0u);
    if (n < 2) return;
    if (launch_no % 2 == 0) {
        std::reverse(order.begin(), order.end());
        return;
    }
    uint64_t s = seed_base * 0x2545f4914f6cdd1dull + (uint64_t)launch_no;
    for (size_t i = n - 1; i > 0; i--) std::swap(order[i], order[splitmix64(&s) % (i + 1)]);
    bool identity = true;
    for (size_t i = 0; i < n && identity; i++) identity = order[i] == i;
    if (identity) std::reverse(order.begin(), order.end());
}

/* a launch the device refuses: nothing runs, the error waits for cudaGetLastError */
static void refuse(cudaError_t e, const char *name, const char *fmt, ...) {
    fprintf(stderr, "cuda_emu: launch of %s refused: ", name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    set_last_error(e);
}

void launch(const char *name, const void *kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            const std::function<void()> &body) {
    static bool started;
    if (!started) {
        started = true;
        const char *e = getenv("MYRIAD_EMU_SEED");
        if (e) seed_base = strtoul(e, NULL, 10);
        if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(on_sanitizer_death);
    }
    stream_order(stream); /* what was queued before on this stream happens first */
    long nthreads = (long)block.x * block.y * block.z;
    if (nthreads < 1 || nthreads > 1024 || block.z > 64) {
        refuse(cudaErrorInvalidConfiguration, name, "a block of %u x %u x %u threads (at most 1024, z at most 64)",
               block.x, block.y, block.z);
        return;
    }
    if (grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
        refuse(cudaErrorInvalidConfiguration, name, "a grid of %u x %u x %u blocks", grid.x, grid.y, grid.z);
        return;
    }
    size_t allowed = dynamic_smem_allowed(kernel);
    if (smem > allowed) {
        if (smem <= DYNAMIC_SMEM_OPTIN_MAX)
            refuse(cudaErrorInvalidValue, name,
                   "%zu bytes of dynamic shared memory, %zu allowed for this kernel: above 48 KiB the device needs "
                   "cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) first",
                   smem, allowed);
        else
            refuse(cudaErrorInvalidValue, name, "%zu bytes of dynamic shared memory (the device has %d per block)",
                   smem, (int)DYNAMIC_SMEM_OPTIN_MAX);
        return;
    }
    while ((long)fibers.size() < nthreads) {
        fibers.emplace_back();
        fibers.back().stack = (char *)malloc(STACK_BYTES);
    }
    size_t cap = (smem + 15) / 16 * 16 + 16; /* something to point at when no dynamic memory is asked */
    if (cap > dyn_capacity) {
        free(dyn_base);
        dyn_base = (unsigned char *)aligned_alloc(DYN_ALIGN, (cap + DYN_ALIGN - 1) / DYN_ALIGN * DYN_ALIGN);
        dyn_capacity = cap;
    }
    dyn_bytes = smem;
    dyn_allowed = allowed;
    static_bytes = 0;
    dyn_inflight.assign((smem + 3) / 4, 0);
    slots.assign((size_t)((nthreads + 31) / 32) * 32 * SLOT_BYTES, 0);
    kernel_body = &body;
    kernel_name = name;
    block_dim = block;
    grid_dim = grid;
    std::vector<uint32_t> order;
    block_order(order, (size_t)grid.x * grid.y * grid.z);
    for (uint32_t l : order) {
        block_idx = make_uint3(l % grid.x, (l / grid.x) % grid.y, l / (grid.x * grid.y));
        for (int i = 0; i < nthreads; i++) {
            Thread &t = fibers[i].t;
            t.tid = make_uint3(i % block.x, (i / block.x) % block.y, i / (block.x * block.y));
            t.lane = i % 32;
            t.warp = i / 32;
        }
        block_no++;
        run_block((int)nthreads);
    }
    current = NULL;
    kernel_name = NULL;
    launch_no++;
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
 * matrix i, or with .trans (2 (l % 4) .. +1, l / 4). Each row must be 16-byte aligned shared
 * memory that no cp.async is still writing. */
void ldmatrix_x4(uint32_t r[4], const void *row_address, bool trans) {
    if ((uintptr_t)row_address % 16)
        fail("ldmatrix row address %p of lane %d is not 16-byte aligned", row_address, lane());
    const unsigned char *flags = inflight_flags(row_address, 16);
    if (!flags) fail("ldmatrix row address %p of lane %d is not in this block's shared memory", row_address, lane());
    for (int g = 0; g < 4; g++)
        if (flags[g])
            fail("ldmatrix reads shared memory at %p (lane %d) that a cp.async is still writing: a missing or "
                 "miscounted cp.async.wait_group, or no __syncthreads after it",
                 row_address, lane());
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

