/* mem_checkpoint.c: in-memory checkpoints for training (see mem_checkpoint.h): buddy choice
 * across hosts, the per-step copy and its replica exchange, and the collective restore. */
#include "train/mem_checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/crc32c.h"
#include "ckpt/memckpt.h"
#include "kernels/kernels.h"
#include "util/background.h"
#include "util/error.h"

enum { KEEP = 2, MAX_ENTRIES = 64, PACK_CHUNK = 4 << 20 };

/* Copies are recycled: a rank keeps its KEEP newest copies (and those of each rank it keeps
 * replicas for) mapped, and writes a new one over the oldest after renaming it out of sight,
 * so a step costs a copy into already-faulted pages, not a fresh allocation (which the kernel
 * zeroes and faults in page by page) and a deletion. */
typedef struct {
    MemFile f;
    long step;
    int used;
} Slot;
#define CHUNK_FLOATS ((size_t)1 << 26) /* 256 MiB per message: MPI counts are ints */

struct MemCkpt {
    const TrainState *st;
    Comm *g; /* a private group over the world: replica traffic never matches anyone else's */
    int rank, size, nhosts;
    char dir[4096];
    uint64_t layout;
    uint64_t *payload; /* [size] payload bytes of every rank's copy */
    int *host_of;      /* [size] host index of every rank (ranks of one host read the same files) */
    int buddy;         /* where my replica goes (-1: nowhere, one host) */
    int *from, nfrom;  /* whose replicas I keep */
    /* packing in flight: a thread copies the state of step pstep into `own` while the next step's
     * forward and backward run (they only read parameters and optimizer state) */
    pthread_t thr;
    int packing;
    long pstep;
    uint32_t crc;
    StateRun *runs; /* the state to copy, in order, and where each run goes in the copy */
    size_t *run_off, pbytes, nchunks;
    int nruns;
    uint32_t *chunk_crc;
    atomic_size_t next_chunk; /* the next chunk nobody has taken */
    /* exchange in flight: my committed copy being sent, replicas being received */
    long xstep;
    Slot own[KEEP], (*rx)[KEEP]; /* my copies; the replicas of each rank in `from` */
    MemFile *cur, **rxcur;       /* the copy being packed / sent; the replicas being received */
    CommRequest **reqs;
    int nreqs;
    CommRequest *committed; /* a barrier entered once this rank's copy is committed */
    long synced_step;       /* the copy that barrier is about */
    long complete_step;     /* newest copy known committed on every rank; -1 none */
    double seconds;
    char *meta;             /* the run's settings (train_setup.c's meta), kept beside the copies */
    int meta_written;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Whole files move as floats (header and payloads are multiples of 4 bytes), in chunks. */
static int nchunks(size_t bytes) { return (int)((bytes / 4 + CHUNK_FLOATS - 1) / CHUNK_FLOATS); }

static int post(MemCkpt *m, void *buf, size_t bytes, int peer, int send) {
    size_t n = bytes / 4;
    for (size_t off = 0; off < n; off += CHUNK_FLOATS) {
        size_t c = n - off < CHUNK_FLOATS ? n - off : CHUNK_FLOATS;
        float *p = (float *)buf + off;
        if (send ? comm_isend(m->g, p, c, COMM_F32, peer, &m->reqs[m->nreqs])
                 : comm_irecv(m->g, p, c, COMM_F32, peer, &m->reqs[m->nreqs]))
            return -1;
        m->nreqs++;
    }
    return 0;
}

static int transfer(MemCkpt *m, void *buf, size_t bytes, int peer, int send) {
    size_t n = bytes / 4;
    for (size_t off = 0; off < n; off += CHUNK_FLOATS) {
        size_t c = n - off < CHUNK_FLOATS ? n - off : CHUNK_FLOATS;
        float *p = (float *)buf + off;
        if (send ? comm_send(m->g, p, c, COMM_F32, peer) : comm_recv(m->g, p, c, COMM_F32, peer)) return -1;
    }
    return 0;
}

static const char *my_host(char *buf, size_t n) {
    const char *h = getenv("MYRIAD_HOST"); /* emulated hosts (namespaces) share one kernel host name */
    if (h && *h) snprintf(buf, n, "%s", h);
    else if (gethostname(buf, n - 1)) snprintf(buf, n, "localhost");
    buf[n - 1] = 0;
    return buf;
}

/* What a copy's bytes depend on: the model and the layout (and the world size), not the run's
 * other settings (steps, learning rate, ...): those are checked like a disk checkpoint's, against
 * the settings kept beside the copies (RUN_META), so that a resume with more --steps finds them. */
static uint64_t copy_key(const char *meta, int world) {
    uint64_t h = (uint64_t)world * 0x9E3779B97F4A7C15ull;
    cJSON *o = cJSON_Parse(meta);
    char *model = o ? cJSON_PrintUnformatted(cJSON_GetObjectItem(o, "model")) : NULL;
    char *layout = o ? cJSON_PrintUnformatted(cJSON_GetObjectItem(o, "layout")) : NULL;
    if (model && layout) h = memckpt_hash(layout, memckpt_hash(model, h));
    else h = memckpt_hash(meta, h);
    free(model), free(layout);
    cJSON_Delete(o);
    return h;
}

#define RUN_META "run-meta.json"

/* The settings of the run writing the copies, beside them (each rank of a host writes the same
 * text; a private temporary name, then a rename). */
static void write_run_meta(MemCkpt *m) {
    char tmp[4200], path[4200];
    snprintf(path, sizeof path, "%s/%s", m->dir, RUN_META);
    snprintf(tmp, sizeof tmp, "%s/.%s.%d", m->dir, RUN_META, m->rank);
    FILE *f = fopen(tmp, "w");
    if (!f) return; /* the copies still work; only a resume's settings check loses its reference */
    int bad = fputs(m->meta, f) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) unlink(tmp);
    m->meta_written = 1;
}

int mem_ckpt_init(MemCkpt **out, const TrainState *st, const char *job_id, const char *layout_meta, int fresh,
                  char *note, size_t n) {
    MemCkpt *m = calloc(1, sizeof *m);
    m->st = st;
    m->size = st->world ? comm_size(st->world) : 1;
    m->rank = st->world ? comm_rank(st->world) : 0;
    m->xstep = -1;
    m->buddy = -1;
    m->complete_step = -1;
    for (int k = 0; k < KEEP; k++) m->own[k].f.fd = -1;
    m->layout = copy_key(layout_meta, m->size);
    m->meta = strdup(layout_meta);
    note[0] = 0;
    char host[256];
    if (memckpt_dir(m->dir, sizeof m->dir, memckpt_hash(job_id, 0), my_host(host, sizeof host))) goto fail;
    m->payload = calloc((size_t)m->size, sizeof *m->payload);
    uint64_t *hosts = calloc((size_t)m->size, sizeof *hosts), mine[2] = {memckpt_hash(host, 0), train_state_bytes(st)};
    uint64_t *all = calloc((size_t)m->size * 2, sizeof *all);
    if (st->world) {
        int *ranks = malloc((size_t)m->size * sizeof *ranks);
        for (int r = 0; r < m->size; r++) ranks[r] = r;
        int rc = comm_group_from_ranks(st->world, ranks, m->size, "mem-ckpt", &m->g) ||
                 comm_all_gather(m->g, mine, all, 4, COMM_F32); /* 16 bytes each, moved as 4 floats */
        free(ranks);
        if (rc) goto fail;
    } else memcpy(all, mine, sizeof mine);
    for (int r = 0; r < m->size; r++) hosts[r] = all[2 * r], m->payload[r] = all[2 * r + 1];
    free(all);
    /* hosts in order of first appearance; rank r (the k-th on host i) sends its replica to the
     * (k mod count)-th rank of host i + 1, so losing one host never loses both copies */
    int *hi = malloc((size_t)m->size * sizeof *hi), *li = malloc((size_t)m->size * sizeof *li);
    int *count = calloc((size_t)m->size, sizeof *count);
    for (int r = 0; r < m->size; r++) {
        hi[r] = -1;
        for (int q = 0; q < r && hi[r] < 0; q++)
            if (hosts[q] == hosts[r]) hi[r] = hi[q];
        if (hi[r] < 0) hi[r] = m->nhosts++;
        li[r] = count[hi[r]]++;
    }
    m->host_of = malloc((size_t)m->size * sizeof *m->host_of);
    memcpy(m->host_of, hi, (size_t)m->size * sizeof *hi);
    m->from = malloc((size_t)m->size * sizeof *m->from);
    for (int r = 0; r < m->size && m->nhosts > 1; r++) {
        int h = (hi[r] + 1) % m->nhosts, k = li[r] % count[h], b = -1;
        for (int q = 0; q < m->size && b < 0; q++)
            if (hi[q] == h && li[q] == k) b = q;
        if (r == m->rank) m->buddy = b;
        if (b == m->rank) m->from[m->nfrom++] = r;
    }
    m->rx = calloc((size_t)m->nfrom + 1, sizeof *m->rx);
    m->rxcur = calloc((size_t)m->nfrom + 1, sizeof *m->rxcur);
    uint64_t biggest = 0;
    for (int r = 0; r < m->size; r++) biggest = m->payload[r] > biggest ? m->payload[r] : biggest;
    m->reqs = calloc((size_t)(m->nfrom + 1) * nchunks(MEMCKPT_HEADER + biggest), sizeof *m->reqs);
    for (int i = 0; i < m->nfrom; i++)
        for (int k = 0; k < KEEP; k++) m->rx[i][k].f.fd = -1;
    /* a fresh start of the same job: the lowest rank of each host clears the host's stale copies */
    if (fresh && li[m->rank] == 0) memckpt_remove(m->dir, -1);
    free(hi), free(li), free(count), free(hosts);
    if (fresh && m->g && comm_barrier(m->g)) goto fail;
    if (m->nhosts == 1 && m->size > 1)
        snprintf(note, n, "all %d ranks run on one host: in-memory copies are kept on it but not replicated (a host "
                          "loss falls back to disk)", m->size);
    *out = m;
    return 0;
fail:
    free(m->payload), free(m->reqs), free(m->from), free(m->rx), free(m->rxcur), free(m->host_of);
    free(m);
    return -1;
}

/* The file for (rank, step): a new one while the pool has room, else its oldest copy renamed to
 * the temporary name of the new step (it leaves scans at once; its pages stay mapped). */
static MemFile *take_slot(MemCkpt *m, Slot *pool, int rank, long step) {
    Slot *s = &pool[0];
    for (int k = 1; k < KEEP; k++)
        if (!pool[k].used ? s->used : (s->used && pool[k].step < s->step)) s = &pool[k];
    if ((s->used || s->f.map) && memckpt_recycle(&s->f, m->dir, rank, step)) { /* a copy or a spare */
        memckpt_close(&s->f);
        s->used = 0;
    }
    if (!s->f.map && memckpt_create(&s->f, m->dir, rank, step, m->payload[rank])) return NULL;
    s->used = 1;
    s->step = step;
    return &s->f;
}

static void drop_slot(Slot *pool, MemFile *f) {
    for (int k = 0; k < KEEP; k++)
        if (&pool[k].f == f) {
            memckpt_close(f);
            pool[k].used = 0;
        }
}

/* Wait for the exchange in flight and commit the replicas that arrived. */
static int finish_exchange(MemCkpt *m) {
    int rc = 0;
    for (int i = 0; i < m->nreqs; i++)
        if (comm_wait(&m->reqs[i])) rc = -1;
    m->nreqs = 0;
    for (int i = 0; i < m->nfrom && m->xstep >= 0; i++) {
        if (!rc && !memckpt_commit_received(m->rxcur[i], m->from[i], m->xstep)) memckpt_prune(m->dir, m->from[i], KEEP);
        else rc = -1, drop_slot(m->rx[i], m->rxcur[i]);
    }
    m->xstep = -1;
    return rc;
}

/* The copy is cut into chunks that the copy thread and the main thread both take, in any order,
 * each with its own CRC (joined in order at the end). The thread runs at the lowest priority:
 * beside the step's compute it takes what the compute leaves idle (a free core, waits for peers)
 * instead of slicing time off it, and when the main thread needs the copy (mem_ckpt_sync) it
 * packs the chunks still left at its own priority, so a starved thread never stalls the step. */
static void pack_chunk(MemCkpt *m, size_t k) {
    size_t lo = k * PACK_CHUNK, hi = lo + PACK_CHUNK < m->pbytes ? lo + PACK_CHUNK : m->pbytes;
    int a = 0, b = m->nruns - 1; /* the last run starting at or before lo */
    while (a < b) {
        int mid = (a + b + 1) / 2;
        if (m->run_off[mid] <= lo) a = mid;
        else b = mid - 1;
    }
    uint32_t crc = 0;
    for (int i = a; lo < hi && i < m->nruns; i++) {
        size_t in = lo - m->run_off[i], take = m->runs[i].bytes - in < hi - lo ? m->runs[i].bytes - in : hi - lo;
        crc = crc32c_copy(crc, m->cur->map + MEMCKPT_HEADER + lo, m->runs[i].src + in, take);
        lo += take;
    }
    m->chunk_crc[k] = crc;
}

static void pack_chunks(MemCkpt *m) {
    dev_snapshot_wait(); /* the state's host copy (a GPU's snapshot, overlapping the step) has landed */
    for (size_t k; (k = atomic_fetch_add(&m->next_chunk, 1)) < m->nchunks;) pack_chunk(m, k);
}

static void *pack_thread(void *arg) {
    background_thread_priority();
    pack_chunks(arg);
    return NULL;
}

/* The live state as runs with their offsets in the copy; the bytes train_state_unpack reads back. */
static int list_runs(MemCkpt *m) {
    free(m->runs);
    m->nruns = train_state_runs(m->st, &m->runs);
    if (m->nruns < 0) return -1;
    m->run_off = realloc(m->run_off, ((size_t)m->nruns + 1) * sizeof *m->run_off);
    size_t off = 0;
    for (int i = 0; i < m->nruns; i++) m->run_off[i] = off, off += m->runs[i].bytes;
    if (off != m->payload[m->rank])
        return myr_error("in-memory checkpoint: the state lists %zu bytes, %llu expected", off,
                         (unsigned long long)m->payload[m->rank]);
    m->pbytes = off;
    m->nchunks = (off + PACK_CHUNK - 1) / PACK_CHUNK;
    m->chunk_crc = realloc(m->chunk_crc, (m->nchunks + 1) * sizeof *m->chunk_crc);
    return m->chunk_crc ? 0 : myr_error("out of memory");
}

int mem_ckpt_save(MemCkpt *m, long step) {
    double t0 = now_s();
    if (!m->meta_written) write_run_meta(m);
    int exchanged = m->xstep >= 0; /* the same on every rank: all have buddies when there are hosts to spread over */
    if (mem_ckpt_sync(m) || finish_exchange(m)) return -1;
    /* Before this rank writes over its older copy, every rank has committed the replicas of the
     * last save (a barrier): then at any instant some step has both every own copy and every
     * replica, so losing any one host leaves a complete step (the newest reported step minus one).
     * Without it a fast rank could recycle its copy of step s-1 while a slow one still waited for
     * the replicas of step s: a host lost then left no complete step at all. */
    if (exchanged && comm_barrier(m->g)) return -1;
    if (list_runs(m) || !(m->cur = take_slot(m, m->own, m->rank, step))) return -1;
    m->pstep = step;
    atomic_store(&m->next_chunk, 0);
    if (pthread_create(&m->thr, NULL, pack_thread, m)) {
        drop_slot(m->own, m->cur);
        return myr_error("in-memory checkpoint: cannot start the copy thread");
    }
    m->packing = 1;
    m->seconds += now_s() - t0;
    return 0;
}

int mem_ckpt_sync(MemCkpt *m) {
    if (!m || !m->packing) return 0;
    double t0 = now_s();
    pack_chunks(m); /* whatever the thread has not taken yet */
    pthread_join(m->thr, NULL);
    m->packing = 0;
    m->crc = 0;
    for (size_t k = 0; k < m->nchunks; k++) {
        size_t len = (k + 1) * PACK_CHUNK < m->pbytes ? PACK_CHUNK : m->pbytes - k * PACK_CHUNK;
        m->crc = crc32c_combine(m->crc, m->chunk_crc[k], len);
    }
    MemFile *f = m->cur;
    MemHeader h = {m->rank, m->size, m->pstep, m->layout, m->payload[m->rank], m->crc};
    if (memckpt_commit(f, &h)) {
        drop_slot(m->own, f);
        return -1;
    }
    memckpt_prune(m->dir, m->rank, KEEP);
    m->synced_step = m->pstep;
    if (!m->g) m->complete_step = m->pstep;
    else if (comm_ibarrier(m->g, &m->committed)) return -1;
    if (m->buddy >= 0 || m->nfrom > 0) { /* replicas travel during the rest of this step */
        m->xstep = m->pstep;
        if (m->buddy >= 0 && post(m, f->map, f->bytes, m->buddy, 1)) return -1;
        for (int i = 0; i < m->nfrom; i++) {
            MemFile *r = m->rxcur[i] = take_slot(m, m->rx[i], m->from[i], m->pstep);
            if (!r || post(m, r->map, r->bytes, m->from[i], 0)) return -1;
        }
    }
    m->seconds += now_s() - t0;
    return 0;
}

int mem_ckpt_confirm(MemCkpt *m) {
    if (!m || !m->committed) return 0;
    double t0 = now_s();
    int rc = comm_wait(&m->committed);
    if (!rc) m->complete_step = m->synced_step;
    m->seconds += now_s() - t0;
    return rc;
}

void mem_ckpt_job_name(const char *save_dir, char *job, size_t n) {
    char cwd[4096];
    const char *env_job = getenv("MYRIAD_JOB_ID");
    if (env_job && *env_job) snprintf(job, n, "%s", env_job);
    else if (save_dir[0] == '/' || !getcwd(cwd, sizeof cwd)) snprintf(job, n, "%s", save_dir);
    else snprintf(job, n, "%s/%s", cwd, save_dir);
}

int mem_ckpt_job_has_copies(const char *save_dir) {
    char job[8192], dir[4200];
    mem_ckpt_job_name(save_dir, job, sizeof job);
    memckpt_job_dir(dir, sizeof dir, memckpt_hash(job, 0));
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char host[4500];
        snprintf(host, sizeof host, "%s/%s", dir, e->d_name);
        DIR *h = opendir(host);
        for (struct dirent *f; h && !found && (f = readdir(h));) found = strstr(f->d_name, ".mem") != NULL;
        if (h) closedir(h);
    }
    closedir(d);
    return found;
}

long mem_ckpt_complete_step(const MemCkpt *m) { return m ? m->complete_step : -1; }

void mem_ckpt_before_update(void *ctx) {
    if (mem_ckpt_sync(ctx)) myr_die_last();
}

double mem_ckpt_seconds(const MemCkpt *m) { return m->seconds; }

static int holds(const int64_t *all, int r, int q, long step) {
    for (int e = 0; e < MAX_ENTRIES; e++) {
        const int64_t *p = all + ((size_t)r * MAX_ENTRIES + e) * 2;
        if (p[0] == q && p[1] == step) return 1;
    }
    return 0;
}

int mem_ckpt_restore(MemCkpt *m, long min_step, long *step, int *used_replica, int *rejected, char *desc, size_t n) {
    int size = m->size, me = m->rank;
    MemEntry ent[MAX_ENTRIES];
    int ne = memckpt_scan(m->dir, size, m->layout, ent, MAX_ENTRIES);
    int64_t mine[MAX_ENTRIES * 2], *all = malloc((size_t)size * MAX_ENTRIES * 2 * sizeof *all);
    for (int e = 0; e < MAX_ENTRIES; e++) mine[2 * e] = e < ne ? ent[e].rank : -1, mine[2 * e + 1] = e < ne ? ent[e].step : -1;
    if (m->g ? comm_all_gather(m->g, mine, all, MAX_ENTRIES * 4, COMM_F32) : (memcpy(all, mine, sizeof mine), 0)) {
        free(all);
        return -1;
    }
    char *bad = calloc((size_t)size * size, 1); /* bad[q * size + r]: r's copy of q failed verification */
    int *holder = malloc((size_t)size * sizeof *holder), result = 0;
    *rejected = 0;
    /* candidate steps, newest first: any step some rank holds a copy of */
    long last = -1;
    for (;;) {
        long cand = -1;
        for (size_t i = 0; i < (size_t)size * MAX_ENTRIES; i++)
            if (all[2 * i] >= 0 && all[2 * i + 1] >= min_step && (last < 0 || all[2 * i + 1] < last) && all[2 * i + 1] > cand)
                cand = (long)all[2 * i + 1];
        if (cand < 0) break;
        last = cand;
        memset(bad, 0, (size_t)size * size); /* rejections are per copy, i.e. per step */
        for (int round = 0; round < 4; round++) {
            int complete = 1, replicas = 0;
            for (int q = 0; q < size; q++) { /* its own copy first, else the lowest other holder */
                holder[q] = -1;
                if (holds(all, q, q, cand) && !bad[(size_t)q * size + q]) holder[q] = q;
                for (int r = 0; r < size && holder[q] < 0; r++)
                    if (holds(all, r, q, cand) && !bad[(size_t)q * size + r]) holder[q] = r;
                complete &= holder[q] >= 0;
                replicas += holder[q] != q;
            }
            if (!complete) break;
            /* every rank gets its copy: read locally, or sent by its holder (all ranks walk q in the
             * same order and each step pairs one sender with one receiver, so nothing deadlocks) */
            unsigned char *buf = NULL;
            size_t bytes = 0;
            MemFile f = {.fd = -1};
            int ok = 1;
            for (int q = 0; q < size; q++) {
                size_t qb = MEMCKPT_HEADER + m->payload[q];
                if (q == me && holder[q] == me) {
                    if (memckpt_open(&f, m->dir, q, cand)) ok = 0;
                    else buf = f.map, bytes = f.bytes;
                } else if (q == me) {
                    buf = malloc(qb), bytes = qb;
                    if (!buf || transfer(m, buf, qb, holder[q], 0)) ok = -1;
                } else if (holder[q] == me) {
                    MemFile s = {.fd = -1};
                    unsigned char *src = NULL;
                    if (!memckpt_open(&s, m->dir, q, cand) && s.bytes == qb) src = s.map;
                    else src = calloc(1, qb); /* vanished or wrong size: send zeros, the receiver rejects them */
                    int rc = transfer(m, src, qb, q, 1);
                    if (s.map) memckpt_close(&s);
                    else free(src);
                    if (rc) ok = -1;
                }
            }
            if (ok < 0) { /* MPI failed: nothing sensible left to do here */
                if (f.map) memckpt_close(&f);
                else free(buf);
                result = -1;
                goto out;
            }
            char why[256] = "";
            if (ok && memckpt_verify(buf, bytes, me, size, cand, m->layout)) ok = 0;
            if (!ok) snprintf(why, sizeof why, "%s", myr_last_error());
            int32_t verdict = ok ? -1 : holder[me], *verdicts = malloc((size_t)size * sizeof *verdicts);
            int rc = m->g ? comm_all_gather(m->g, &verdict, verdicts, 1, COMM_F32) : (verdicts[0] = verdict, 0);
            int all_ok = 1;
            for (int q = 0; q < size && !rc; q++)
                if (verdicts[q] >= 0) { /* that file is bad for every rank of the holder's host */
                    all_ok = 0;
                    for (int r = 0; r < size; r++)
                        if (m->host_of[r] == m->host_of[verdicts[q]]) bad[(size_t)q * size + r] = 1;
                    (*rejected)++;
                }
            free(verdicts);
            if (!ok)
                fprintf(stderr, "myriad train: rank %d: in-memory copy of step %ld from %s rejected: %s; trying another\n",
                        me, cand, holder[me] == me ? "its own memory" : "a replica", why);
            if (!rc && all_ok && train_state_unpack(m->st, buf + MEMCKPT_HEADER, cand)) rc = -1;
            if (f.map) memckpt_close(&f);
            else free(buf);
            if (rc) {
                result = -1;
                goto out;
            }
            if (all_ok) {
                *step = cand;
                m->complete_step = cand;
                *used_replica = replicas > 0;
                snprintf(desc, n, "memory (%d of %d ranks from their own copy, %d from a replica on another host; %d "
                         "damaged copies rejected)", size - replicas, size, replicas, *rejected);
                result = 1;
                goto out;
            }
        }
    }
out:
    free(all), free(bad), free(holder);
    return result;
}

int mem_ckpt_survey(MemCkpt *m, MemSurvey *sv) {
    int size = m->size;
    memset(sv, 0, sizeof *sv);
    sv->newest = sv->oldest = sv->complete = sv->missing_rank = -1;
    MemEntry ent[MAX_ENTRIES];
    int ne = memckpt_scan(m->dir, size, m->layout, ent, MAX_ENTRIES), their_world = 0;
    int64_t mine[MAX_ENTRIES * 2 + 2], *all = malloc((size_t)size * (MAX_ENTRIES * 2 + 2) * sizeof *all);
    for (int e = 0; e < MAX_ENTRIES; e++) mine[2 * e] = e < ne ? ent[e].rank : -1, mine[2 * e + 1] = e < ne ? ent[e].step : -1;
    mine[2 * MAX_ENTRIES] = memckpt_count_foreign(m->dir, size, m->layout, &their_world);
    mine[2 * MAX_ENTRIES + 1] = their_world;
    /* the settings kept beside the copies: this host's, as text (padded to whole floats) */
    char meta[2048] = "";
    FILE *f;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", m->dir, RUN_META);
    if ((f = fopen(path, "r"))) {
        size_t got = fread(meta, 1, sizeof meta - 1, f);
        meta[got] = 0;
        fclose(f);
    }
    const int W = MAX_ENTRIES * 2 + 2;
    int rc = m->g ? comm_all_gather(m->g, mine, all, (size_t)W * 2, COMM_F32) : (memcpy(all, mine, sizeof mine), 0);
    /* the lowest rank whose host has the settings file sends it to all */
    float have = meta[0] ? -(float)m->rank : -(float)size;
    if (!rc && m->g) rc = comm_all_reduce(m->g, &have, &have, 1, COMM_F32, COMM_MAX);
    if (!rc && m->g && -have < size) rc = comm_broadcast(m->g, meta, meta, sizeof meta / 4, COMM_F32, (int)-have);
    if (rc) {
        free(all);
        return -1;
    }
    snprintf(sv->meta, sizeof sv->meta, "%s", meta);
    for (int r = 0; r < size; r++) {
        const int64_t *a = all + (size_t)r * W;
        for (int e = 0; e < MAX_ENTRIES; e++) {
            if (a[2 * e] < 0) continue;
            sv->copies++;
            if (a[2 * e + 1] > sv->newest) sv->newest = a[2 * e + 1];
            if (sv->oldest < 0 || a[2 * e + 1] < sv->oldest) sv->oldest = a[2 * e + 1];
        }
        sv->foreign += (int)a[2 * MAX_ENTRIES];
        if (a[2 * MAX_ENTRIES + 1]) sv->foreign_world = (int)a[2 * MAX_ENTRIES + 1];
    }
    /* the newest step every rank's copy exists of (its own, or a replica another rank keeps) */
    for (long step = sv->newest; step >= 0 && step >= sv->oldest && sv->complete < 0; step--) {
        int missing = -1;
        for (int q = 0; q < size && missing < 0; q++) {
            int held = 0;
            for (int r = 0; r < size && !held; r++)
                for (int e = 0; e < MAX_ENTRIES && !held; e++) {
                    const int64_t *a = all + (size_t)r * W;
                    held = a[2 * e] == q && a[2 * e + 1] == step;
                }
            if (!held) missing = q;
        }
        if (missing < 0) sv->complete = step;
        else if (step == sv->newest) sv->missing_rank = missing;
    }
    snprintf(sv->dir, sizeof sv->dir, "%s", m->dir);
    char *slash = strrchr(sv->dir, '/');
    if (slash) *slash = 0; /* the job's directory, above the hosts' */
    free(all);
    return 0;
}

int mem_ckpt_adopt(MemCkpt *m, long step) {
    MemEntry ent[MAX_ENTRIES];
    int ne = memckpt_scan(m->dir, m->size, m->layout, ent, MAX_ENTRIES), k = 0; /* newest first */
    for (int e = 0; e < ne; e++) {
        if (ent[e].rank != m->rank) continue;
        if (ent[e].step > step) { /* beyond the restored step: incomplete elsewhere, rewritten soon */
            memckpt_delete(m->dir, m->rank, ent[e].step);
            continue;
        }
        Slot *sl = &m->own[k];
        if (k == KEEP || sl->used || memckpt_open_mode(&sl->f, m->dir, m->rank, ent[e].step, 1)) continue;
        if (sl->f.bytes != MEMCKPT_HEADER + m->payload[m->rank]) {
            memckpt_close(&sl->f);
            continue;
        }
        sl->used = 1, sl->step = ent[e].step, k++;
    }
    /* the copy the killed process was writing (a temporary file) serves as a spare slot: one at
     * most (a process writes one copy at a time; taking a second would map the same file twice) */
    if (k < KEEP && !memckpt_open_leftover(&m->own[k].f, m->dir, m->rank, MEMCKPT_HEADER + m->payload[m->rank])) k++;
    return k;
}

int mem_ckpt_finish(MemCkpt *m, int job_done) {
    int rc = mem_ckpt_sync(m);
    rc |= mem_ckpt_confirm(m);
    rc |= finish_exchange(m);
    if (job_done) { /* the job is over: its copies go (each rank its own and the replicas it keeps) */
        if (m->g) comm_barrier(m->g);
        memckpt_remove(m->dir, m->rank);
        for (int i = 0; i < m->nfrom; i++) memckpt_remove(m->dir, m->from[i]);
        if (m->g) comm_barrier(m->g);
        char meta[4200];
        snprintf(meta, sizeof meta, "%s/%s", m->dir, RUN_META);
        unlink(meta); /* every rank of the host tries; one succeeds */
        rmdir(m->dir);
        char *slash = strrchr(m->dir, '/');
        if (slash) *slash = 0, rmdir(m->dir);
    }
    for (int k = 0; k < KEEP; k++) {
        if (m->own[k].used || m->own[k].f.map) memckpt_close(&m->own[k].f);
        for (int i = 0; i < m->nfrom; i++)
            if (m->rx[i][k].used) memckpt_close(&m->rx[i][k].f);
    }
    if (m->g) comm_group_free(m->g);
    free(m->meta);
    free(m->payload), free(m->reqs), free(m->from), free(m->rx), free(m->rxcur), free(m->host_of);
    free(m->runs), free(m->run_off), free(m->chunk_crc);
    free(m);
    return rc;
}
