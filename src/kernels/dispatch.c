/* dispatch.c: kernels.h over the selected backend table (backend.h): backend selection, device
 * memory with this process's accounting (bytes in use and at peak; out-of-memory names the bytes
 * asked and free), the copy functions, and one indirect call per op. Under MYRIAD_DEVICE_GUARD=1
 * (device_guard.c) device memory is opened around each call; under MYRIAD_DEVICE_GUARD=strict it is
 * never opened: every pointer argument goes through DA(), the device's own address of it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/device_guard.h"
#include "util/error.h"

static const KernelBackend *kb = &cpu_f32_table;

/* Chosen here, above both CPU tables: cpu_bf16.c builds its table from cpu_f32_table. */
const KernelBackend *cpu_backend(Dtype dtype) {
    if (dtype == DTYPE_F32) return &cpu_f32_table;
    return cpu_bf16_backend(); /* NULL in the f64 build */
}
static KernelBackend guarded_table; /* the CPU table with guarded memory */
static int guarded;       /* GUARD_CLOSED: memory opened around each call */
static int guard_mode;    /* what kernels_select installed (GUARD_OFF when it is not the CPU) */

/* The device's address of a pointer argument (itself unless strict-guarded device memory). */
#define DA(p) ((__typeof__(p))guard_addr(p))

/* kernels and copies this thread has dispatched: the CPU compute stream's work (cpu_stream.h) */
static _Thread_local uint64_t dispatched;
const uint64_t *cpu_dispatch_count(void) { return &dispatched; }

#define OPEN()                      \
    do {                            \
        dispatched++;               \
        if (guarded) guard_open();  \
    } while (0)
#define CLOSE() \
    if (guarded) guard_close()
#define VCALL(op, ...)      \
    do {                    \
        OPEN();             \
        kb->op(__VA_ARGS__); \
        CLOSE();            \
    } while (0)

/* ---- accounting: pointer -> bytes (open addressing; deleted slots marked) ---- */

static pthread_mutex_t acct_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *p;
    size_t bytes;
} *slots;
static size_t nslots, nused;
static size_t in_use, peak_use;
static char tombstone;

static size_t slot_of(void *p) { return ((uintptr_t)p >> 6) * 0x9E3779B97F4A7C15ull % nslots; }

static void acct_add(void *p, size_t bytes) {
    pthread_mutex_lock(&acct_lock);
    if (2 * (nused + 1) > nslots) { /* grow (and drop tombstones) */
        size_t old = nslots;
        __typeof__(slots) prev = slots;
        nslots = nslots ? 2 * nslots : 1024;
        while (2 * (nused + 1) > nslots) nslots *= 2;
        slots = calloc(nslots, sizeof *slots);
        nused = 0;
        for (size_t i = 0; i < old; i++)
            if (prev[i].p && prev[i].p != &tombstone) {
                size_t k = slot_of(prev[i].p);
                while (slots[k].p) k = (k + 1) % nslots;
                slots[k] = prev[i];
                nused++;
            }
        free(prev);
    }
    size_t k = slot_of(p);
    while (slots[k].p && slots[k].p != &tombstone) k = (k + 1) % nslots;
    if (!slots[k].p) nused++;
    slots[k].p = p;
    slots[k].bytes = bytes;
    in_use += bytes;
    if (in_use > peak_use) peak_use = in_use;
    pthread_mutex_unlock(&acct_lock);
}

/* forget p; its bytes (0 if unknown) */
static size_t acct_remove(void *p) {
    size_t bytes = 0;
    pthread_mutex_lock(&acct_lock);
    if (nslots) {
        size_t k = slot_of(p);
        while (slots[k].p && slots[k].p != p) k = (k + 1) % nslots;
        if (slots[k].p == p) {
            bytes = slots[k].bytes;
            in_use -= bytes;
            slots[k].p = &tombstone;
        }
    }
    pthread_mutex_unlock(&acct_lock);
    return bytes;
}

void kernels_memory_usage(size_t *now, size_t *peak) {
    pthread_mutex_lock(&acct_lock);
    if (now) *now = in_use;
    if (peak) *peak = peak_use;
    pthread_mutex_unlock(&acct_lock);
}

/* ---- selection ---- */

int kernels_select(KernelOptions *o) {
    const KernelBackend *next = NULL;
    char why[512] = "";
    if (!o->device) o->device = kernels_cuda_usable(NULL, 0) ? "cuda" : "cpu";
    int cuda = !strcmp(o->device, "cuda");
    if (!cuda && strcmp(o->device, "cpu"))
        return myr_error("unknown --device '%s' (use cpu or cuda)", o->device);
    if (o->dtype < 0) o->dtype = cuda ? DTYPE_BF16 : DTYPE_F32;
    if (o->dtype != DTYPE_F32 && o->dtype != DTYPE_BF16) return myr_error("unknown dtype %d", o->dtype);
    if (cuda) {
        next = cuda_backend(o, why, sizeof why);
        if (!next) return myr_error("--device cuda: %s", why);
    } else {
        next = cpu_backend((Dtype)o->dtype);
        if (!next)
            return myr_error("--dtype %s is not available in this build (the double-precision test library)",
                             dtype_name((Dtype)o->dtype));
    }
    if (in_use && next != kb) return myr_error("internal: kernels_select after device memory was allocated");
    guarded = 0;
    guard_mode = GUARD_OFF;
    kb = next;
    int mode = cuda ? GUARD_OFF : guard_requested();
    if (mode != GUARD_OFF) {
        guarded_table = *next;
        guarded_table.alloc = mode == GUARD_STRICT ? guard_strict_alloc : guard_alloc;
        guarded_table.free = mode == GUARD_STRICT ? guard_strict_free : guard_free;
        guarded_table.host_accessible = 0;
        guarded_table.snapshot_async = guard_snapshot_async;
        guarded_table.snapshot_wait = guard_snapshot_wait;
        kb = &guarded_table;
        guarded = mode == GUARD_CLOSED;
        guard_mode = mode;
    }
    return 0;
}

int kernels_local_rank(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "PMIX_LOCAL_RANK", "MPI_LOCALRANKID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

int kernels_cuda_usable(char *why, size_t why_size) { return cuda_backend_usable(why, why_size); }

const char *kernels_device(void) { return kb->device; }
Dtype kernels_dtype(void) { return kb->dtype; }
const char *dtype_name(Dtype dt) { return dt == DTYPE_BF16 ? "bf16" : "fp32"; }

int dtype_parse(const char *s, Dtype *out) {
    if (!strcmp(s, "fp32")) *out = DTYPE_F32;
    else if (!strcmp(s, "bf16")) *out = DTYPE_BF16;
    else return -1;
    return 0;
}

/* MYRIAD_TEST_DEVICE_FREE=BYTES reports that much free device memory (tests of the memory check
 * on machines without a small GPU); never set in normal runs. */
int kernels_device_info(DeviceInfo *out) {
    if (kb->device_info(out)) return -1;
    const char *fake = getenv("MYRIAD_TEST_DEVICE_FREE");
    if (fake && *fake) out->free_bytes = (size_t)strtoull(fake, NULL, 10);
    return 0;
}

/* ---- reuse of freed device blocks ----
 * Freed blocks are kept and handed out again: pipeline slots and MoE layers allocate and free
 * buffers every micro-batch. A GPU's allocator is slow and its free waits for the device; on the
 * CPU, malloc hands blocks of megabytes back to the kernel (mmap, heap trimming), so the next
 * micro-batch's slot faulted every page in again: in a VM, where a page fault is dear, up to 4 of a
 * 2-stage pipeline's 8 forwards ran 3x slower (bench/sim_results.md, own runs). A request takes the
 * smallest kept block of at least its size and at most a quarter more (MoE buffers vary with the
 * routing from one micro-batch to the next), so a block wastes at most a fifth; blocks are
 * allocated at their exact size, so one-off allocations (parameters, optimizer state) waste
 * nothing. One compute stream orders a reused block's new work after its old work. The cache is
 * emptied when an allocation fails. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *p;
    size_t bytes;
} *cache;
static size_t ncache, cache_cap;

/* A kept block for `want` bytes (its capacity in *bytes), or NULL. */
static void *cache_take(size_t want, size_t *bytes) {
    void *p = NULL;
    size_t best = 0;
    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < ncache; i++)
        if (cache[i].bytes >= want && cache[i].bytes - want <= want / 4 && (!p || cache[i].bytes < cache[best].bytes)) {
            p = cache[i].p;
            best = i;
        }
    if (p) {
        *bytes = cache[best].bytes;
        cache[best] = cache[--ncache];
    }
    pthread_mutex_unlock(&cache_lock);
    return p;
}

static void cache_put(void *p, size_t bytes) {
    pthread_mutex_lock(&cache_lock);
    if (ncache == cache_cap) {
        cache_cap = cache_cap ? 2 * cache_cap : 64;
        cache = realloc(cache, cache_cap * sizeof *cache);
    }
    cache[ncache].p = p;
    cache[ncache++].bytes = bytes;
    pthread_mutex_unlock(&cache_lock);
}

static void cache_release(void) {
    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < ncache; i++) kb->free(cache[i].p);
    ncache = 0;
    pthread_mutex_unlock(&cache_lock);
}

/* ---- memory and copies ---- */

/* MYRIAD_MAX_ALLOC=BYTES: any single device or pinned allocation larger dies naming it. The
 * tests set it below the whole model's size to show that no rank ever allocates the whole model
 * (docs/TRAINING.md, "Memory"). */
static void check_ceiling(size_t bytes, const char *what) {
    static long long ceiling = -1;
    if (ceiling < 0) {
        const char *v = getenv("MYRIAD_MAX_ALLOC");
        ceiling = v && *v ? atoll(v) : 0;
    }
    if (ceiling > 0 && (long long)bytes > ceiling)
        myr_die("a %s allocation of %zu bytes exceeds MYRIAD_MAX_ALLOC=%lld", what, bytes, ceiling);
}

void *dev_alloc_bytes(size_t bytes) {
    check_ceiling(bytes, "device");
    if (!bytes) bytes = 1;
    size_t want = bytes;
    void *p = cache_take(want, &bytes);
    if (p) VCALL(memset_zero, DA(p), want); /* zeroed like a new block */
    if (!p) p = kb->alloc(bytes);
    if (!p && ncache) {
        cache_release();
        p = kb->alloc(bytes);
    }
    if (!p) {
        DeviceInfo d;
        int known = kernels_device_info(&d) == 0;
        myr_die("out of %s memory allocating %.1f MiB (%.1f MiB free of %.1f MiB%s%s): reduce --batch or --seq, "
                "--micro-batch, or the model, or use --recompute, --zero or more ranks",
                kb->device, bytes / 1048576.0, known ? d.free_bytes / 1048576.0 : 0.0,
                known ? d.total_bytes / 1048576.0 : 0.0, known ? " on " : "", known ? d.name : "");
    }
    acct_add(p, bytes);
    return p;
}

real *dev_alloc(size_t count) { return dev_alloc_bytes(count * sizeof(real)); }
act *dev_alloc_act(size_t count) { return dev_alloc_bytes(count * kb->act_size); }

void dev_free(void *p) {
    if (!p) return;
    size_t bytes = acct_remove(p);
    if (bytes) cache_put(p, bytes);
    else kb->free(p);
}

void dev_zero_bytes(void *p, size_t bytes) {
    if (bytes) VCALL(memset_zero, DA(p), bytes);
}
void dev_zero(real *p, size_t count) { dev_zero_bytes(p, count * sizeof(real)); }
void dev_zero_act(act *p, size_t count) { dev_zero_bytes(p, count * kb->act_size); }
size_t act_size(void) { return kb->act_size; }

void dev_to_host(void *host, const void *dev, size_t bytes) {
    if (bytes) VCALL(copy, DA(host), DA(dev), bytes, COPY_D2H);
}
void host_to_dev(void *dev, const void *host, size_t bytes) {
    if (bytes) VCALL(copy, DA(dev), DA(host), bytes, COPY_H2D);
}
void dev_to_dev(void *dst, const void *src, size_t bytes) {
    if (bytes) VCALL(copy, DA(dst), DA(src), bytes, COPY_D2D);
}
void host_to_dev_async(void *dev, const void *host, size_t bytes) {
    if (bytes) VCALL(copy_async, DA(dev), DA(host), bytes, COPY_H2D);
}
void dev_to_host_async(void *host, const void *dev, size_t bytes) {
    if (bytes) VCALL(copy_async, DA(host), DA(dev), bytes, COPY_D2H);
}

void *host_alloc_pinned(size_t bytes) {
    check_ceiling(bytes, "pinned host");
    void *p = kb->host_alloc_pinned(bytes ? bytes : 1);
    if (!p) myr_die("out of host memory allocating %.1f MiB of pinned memory", bytes / 1048576.0);
    return p;
}
void host_free_pinned(void *p) {
    if (p) kb->host_free_pinned(p);
}
void dev_sync(void) { kb->sync(); }

/* streams and events: no device memory is touched, so no guard (the watchdog queries from its thread) */
void *dev_stream_handle(DevStream s) { return kb->stream_handle(s); }
DevEvent *dev_event_create(void) { return kb->event_create(); }
void dev_event_destroy(DevEvent *e) {
    if (e) kb->event_destroy(e);
}
void dev_event_record(DevEvent *e, DevStream s) { kb->event_record(e, s); }
void dev_stream_wait_event(DevStream s, DevEvent *e) { kb->stream_wait_event(s, e); }
int dev_event_query(DevEvent *e) { return kb->event_query(e); }
void dev_event_sync(DevEvent *e) { kb->event_sync(e); }

void dev_snapshot_async(void *host, const void *dev, size_t bytes) {
    if (!bytes) return;
    if (kb->snapshot_async) VCALL(snapshot_async, DA(host), DA(dev), bytes);
    else VCALL(copy, DA(host), DA(dev), bytes, COPY_D2H);
}

void dev_snapshot_wait(void) {
    if (kb->snapshot_wait) kb->snapshot_wait();
}
int dev_host_accessible(void) { return kb->host_accessible; }

/* A transport library may be handed device memory on a GPU (if it can read it: CUDA-aware MPI,
 * NCCL), on the plain CPU backend, and under the strict guard through the device's own mapping;
 * not under MYRIAD_DEVICE_GUARD=1, whose memory is closed outside kernel calls. */
int dev_transport_capable(void) { return guard_mode != GUARD_CLOSED; }
void *dev_transport_address(const void *p) { return guard_mode == GUARD_CLOSED ? NULL : guard_addr(p); }

void act_from_f32(act *dst, const real *src, size_t n) {
    if (n) VCALL(act_from_f32, DA(dst), DA(src), n);
}
void act_to_f32(real *dst, const act *src, size_t n) {
    if (n) VCALL(act_to_f32, DA(dst), DA(src), n);
}
void dev_f32_to_bf16(uint16_t *dst, const real *src, size_t n) {
    if (n) VCALL(f32_to_bf16, DA(dst), DA(src), n);
}
void dev_bf16_to_f32(real *dst, const uint16_t *src, size_t n) {
    if (n) VCALL(bf16_to_f32, DA(dst), DA(src), n);
}

void act_to_host_f32(float *host, const act *dev, size_t n) {
    if (!n) return;
    real *tmp = dev_alloc(n), *h = sizeof(real) == sizeof(float) ? (real *)host : malloc(n * sizeof(real));
    act_to_f32(tmp, dev, n);
    dev_to_host(h, tmp, n * sizeof(real));
    if ((void *)h != (void *)host) {
        for (size_t i = 0; i < n; i++) host[i] = (float)h[i];
        free(h);
    }
    dev_free(tmp);
}

void kernels_set_threads(int threads) { kb->set_threads(threads); }
int kernels_threads(void) { return kb->threads(); }

/* ---- ops ---- */

void matmul_forward(void *out, int out_f32, const act *inp, const act *w, const real *bias, int N, int IC, int OC) {
    VCALL(matmul_forward, DA(out), out_f32, DA(inp), DA(w), DA(bias), N, IC, OC);
}
void matmul_backward(void *dinp, int dinp_f32, real *dw, real *dbias, const act *dout, const act *inp, const act *w,
                     int N, int IC, int OC, int accumulate_dinp) {
    VCALL(matmul_backward, DA(dinp), dinp_f32, DA(dw), DA(dbias), DA(dout), DA(inp), DA(w), N, IC, OC, accumulate_dinp);
}
void lm_head_forward(act *logits, const act *inp, const act *w, int N, int IC, int V, int Vr) {
    if (kb->lm_head_forward) VCALL(lm_head_forward, DA(logits), DA(inp), DA(w), N, IC, V, Vr);
    else matmul_forward(logits, 0, inp, w, NULL, N, IC, Vr);
}
void lm_head_backward(real *dinp, real *dw, const act *dlogits, const act *inp, const act *w, int N, int IC, int V,
                      int Vr) {
    if (kb->lm_head_backward) VCALL(lm_head_backward, DA(dinp), DA(dw), DA(dlogits), DA(inp), DA(w), N, IC, V, Vr);
    else matmul_backward(dinp, 1, dw, NULL, dlogits, inp, w, N, IC, Vr, 0);
}
void layernorm_forward(act *out, real *mean, real *rstd, const real *inp, const real *w, const real *b, int N, int C,
                       real eps) {
    VCALL(layernorm_forward, DA(out), DA(mean), DA(rstd), DA(inp), DA(w), DA(b), N, C, eps);
}
void layernorm_backward(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                        const real *mean, const real *rstd, int N, int C) {
    VCALL(layernorm_backward, DA(dinp), DA(dw), DA(db), DA(dout), DA(inp), DA(w), DA(mean), DA(rstd), N, C);
}
void rmsnorm_forward(act *out, real *rstd, const real *inp, const real *w, int N, int C, real eps) {
    VCALL(rmsnorm_forward, DA(out), DA(rstd), DA(inp), DA(w), N, C, eps);
}
void rmsnorm_backward(real *dinp, real *dw, const real *dout, const real *inp, const real *w, const real *rstd, int N,
                      int C) {
    VCALL(rmsnorm_backward, DA(dinp), DA(dw), DA(dout), DA(inp), DA(w), DA(rstd), N, C);
}
void gelu_forward(act *out, const act *inp, size_t n) { VCALL(gelu_forward, DA(out), DA(inp), n); }
void gelu_backward(act *dinp, const act *inp, const act *dout, size_t n) { VCALL(gelu_backward, DA(dinp), DA(inp), DA(dout), n); }
void swiglu_forward(act *out, const act *inp, int N, int F) { VCALL(swiglu_forward, DA(out), DA(inp), N, F); }
void swiglu_backward(act *dinp, const act *inp, const act *dout, int N, int F) {
    VCALL(swiglu_backward, DA(dinp), DA(inp), DA(dout), N, F);
}
void residual_forward(real *out, const real *a, const real *b, size_t n) { VCALL(residual_forward, DA(out), DA(a), DA(b), n); }
void add_inplace(real *acc, const real *x, size_t n) { VCALL(add_inplace, DA(acc), DA(x), n); }
void embedding_forward(real *out, const int32_t *tokens, const real *tok, const real *pos, int N, int T, int C) {
    VCALL(embedding_forward, DA(out), DA(tokens), DA(tok), DA(pos), N, T, C);
}
void embedding_backward(real *dtok, real *dpos, const real *dout, const int32_t *tokens, int N, int T, int C) {
    VCALL(embedding_backward, DA(dtok), DA(dpos), DA(dout), DA(tokens), N, T, C);
}
void embedding_shard_forward(real *out, const int32_t *tokens, const real *tok_shard, int vocab_lo, int vocab_n,
                             int N, int C) {
    VCALL(embedding_shard_forward, DA(out), DA(tokens), DA(tok_shard), vocab_lo, vocab_n, N, C);
}
void embedding_shard_backward(real *dtok_shard, const real *dout, const int32_t *tokens, int vocab_lo, int vocab_n,
                              int N, int C) {
    VCALL(embedding_shard_backward, DA(dtok_shard), DA(dout), DA(tokens), vocab_lo, vocab_n, N, C);
}
void position_forward_add(real *out, const real *pos, int row0, int N, int T, int C) {
    VCALL(position_forward_add, DA(out), DA(pos), row0, N, T, C);
}
void position_backward(real *dpos, const real *dout, int row0, int N, int T, int C) {
    VCALL(position_backward, DA(dpos), DA(dout), row0, N, T, C);
}
void bias_add(real *out, const real *bias, int N, int C) { VCALL(bias_add, DA(out), DA(bias), N, C); }
void bias_backward(real *dbias, const real *dout, int N, int C) { VCALL(bias_backward, DA(dbias), DA(dout), N, C); }
void vocab_shard_row_max(const act *logits, int N, int V, int ld, double *max) {
    VCALL(vocab_shard_row_max, DA(logits), N, V, ld, DA(max));
}
void vocab_shard_row_sumexp(const act *logits, int N, int V, int ld, const double *max, double *sum) {
    VCALL(vocab_shard_row_sumexp, DA(logits), N, V, ld, DA(max), DA(sum));
}
void vocab_shard_target_logit(const act *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                              double *out) {
    VCALL(vocab_shard_target_logit, DA(logits), DA(targets), vocab_lo, N, V, ld, DA(out));
}
void vocab_shard_grad(act *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld, const double *max,
                      const double *sum, double scale) {
    VCALL(vocab_shard_grad, DA(logits), DA(targets), vocab_lo, N, V, ld, DA(max), DA(sum), scale);
}
double vocab_shard_losses(real *losses, const double *max, const double *sum, const double *target, int N) {
    OPEN();
    double r = kb->vocab_shard_losses(DA(losses), DA(max), DA(sum), DA(target), N);
    CLOSE();
    return r;
}
void rope_tables(real *cos_t, real *sin_t, int max_seq, int hd, const float *inv_freq) {
    VCALL(rope_tables, DA(cos_t), DA(sin_t), max_seq, hd, inv_freq); /* inv_freq: host floats */
}
void rope_apply(act *qkv, const real *cos_t, const real *sin_t, int N, int T, int heads, int kv_heads, int hd,
                int stride, int inverse) {
    VCALL(rope_apply, DA(qkv), DA(cos_t), DA(sin_t), N, T, heads, kv_heads, hd, stride, inverse);
}
size_t attention_saved_count(int B, int T, int H) { return kb->attention_saved_count(B, T, H); }
void attention_forward(act *out, real *saved, const act *qkv, int B, int T, int H, int KV, int hd) {
    VCALL(attention_forward, DA(out), DA(saved), DA(qkv), B, T, H, KV, hd);
}
void attention_backward(act *dqkv, const act *dout, const act *qkv, const act *out, const real *saved, int B, int T,
                        int H, int KV, int hd) {
    VCALL(attention_backward, DA(dqkv), DA(dout), DA(qkv), DA(out), DA(saved), B, T, H, KV, hd);
}
int attention_block_supported(char *why, size_t why_size) {
    if (kb->attention_block_forward && kb->attention_block_delta && kb->attention_block_backward) return 1;
    if (why) snprintf(why, why_size, "the %s %s backend has no blockwise (ring) attention kernels yet", kb->device,
                      dtype_name(kb->dtype));
    return 0;
}
static void need_block_attention(void) {
    char why[160];
    if (!attention_block_supported(why, sizeof why)) myr_die("context parallelism: %s; use --device cpu --dtype fp32", why);
}
void attention_block_forward(real *out, real *lse, const act *q, const act *k, const act *v, const AttnBlock *s) {
    need_block_attention();
    VCALL(attention_block_forward, out, lse, q, k, v, s);
}
void attention_block_delta(real *delta, const act *dout, const act *out, const AttnBlock *s) {
    need_block_attention();
    VCALL(attention_block_delta, delta, dout, out, s);
}
void attention_block_backward(real *dq, real *dk, real *dv, const act *dout, const act *q, const act *k,
                              const act *v, const real *lse, const real *delta, const AttnBlock *s) {
    need_block_attention();
    VCALL(attention_block_backward, dq, dk, dv, dout, q, k, v, lse, delta, s);
}
void dev_copy_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t row_bytes, int rows) {
    for (int r = 0; r < rows; r++)
        dev_to_dev((char *)dst + (size_t)r * dst_pitch, (const char *)src + (size_t)r * src_pitch, row_bytes);
}
double cross_entropy_forward_backward(act *logits, real *losses, const int32_t *targets, int N, int V, int ld,
                                      int want_grad, double grad_scale) {
    OPEN();
    double r = kb->cross_entropy_forward_backward(DA(logits), DA(losses), DA(targets), N, V, ld, want_grad, grad_scale);
    CLOSE();
    return r;
}
void moe_router_topk(real *probs, int32_t *topk, real *gates, int N, int E, int k) {
    VCALL(moe_router_topk, DA(probs), DA(topk), DA(gates), N, E, k);
}
void moe_router_backward(real *dlogits, const real *probs, const int32_t *topk, const real *gates, const real *dgates,
                         const real *daux, int N, int T, int E, int k) {
    VCALL(moe_router_backward, DA(dlogits), DA(probs), DA(topk), DA(gates), DA(dgates), DA(daux), N, T, E, k);
}
void moe_gather_rows(act *out, const act *x, const int32_t *idx, const real *scale, int R, int C) {
    VCALL(moe_gather_rows, DA(out), DA(x), DA(idx), DA(scale), R, C);
}
void moe_scatter_rows(act *out, const act *x, const int32_t *idx, int R, int C) {
    VCALL(moe_scatter_rows, DA(out), DA(x), DA(idx), R, C);
}
void moe_combine(real *out, const act *x, const int32_t *idx, const real *w, int R, int C) {
    VCALL(moe_combine, DA(out), DA(x), DA(idx), DA(w), R, C);
}
void moe_row_dot(real *out, const act *a, const int32_t *idx, const act *b, int R, int C) {
    VCALL(moe_row_dot, DA(out), DA(a), DA(idx), DA(b), R, C);
}
void moe_scatter_scalars(real *dst, const real *src, const int32_t *slot, int A) {
    VCALL(moe_scatter_scalars, DA(dst), DA(src), DA(slot), A);
}
void adamw_update(real *p, const real *g, real *m, real *v, size_t n, const AdamWScalars *s) {
    VCALL(adamw_update, DA(p), DA(g), DA(m), DA(v), n, DA(s));
}
double sum_squares(const real *x, size_t n) {
    OPEN();
    double r = kb->sum_squares(DA(x), n);
    CLOSE();
    return r;
}
void scale_inplace(real *x, real s, size_t n) { VCALL(scale_inplace, DA(x), s, n); }
void dev_reduce_bf16(uint16_t *out, const uint16_t *src, int nsrc, size_t n, int op, int divisor) {
    if (n) VCALL(reduce_bf16, DA(out), DA(src), nsrc, n, op, divisor);
}
