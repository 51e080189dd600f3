/* ckpt_commit.c: the commit protocol. Every rank's shard is durable (written, fsynced,
 * renamed) -> all ranks agree that all succeeded -> rank 0 merges the piece tables into
 * manifest.json (temp name, fsync, rename, fsync dir: the commit point) -> DIR/latest is
 * replaced the same way -> --keep retention deletes older checkpoints. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt_internal.h"
#include "ckpt/ckpt_writer.h"
#include "ckpt/crc32c.h"
#include "io/atomic_file.h"
#include "util/error.h"

int ckpt_check_meta(const char *meta_json) {
    if (!meta_json) return 0;
    cJSON *m = cJSON_Parse(meta_json);
    int ok = cJSON_IsObject(m);
    cJSON_Delete(m);
    return ok ? 0 : myr_error("checkpoint metadata must be a JSON object, got: %.60s", meta_json);
}

int ckpt_check_world(const CkptWriter *w, Comm *world) {
    int rank = world ? comm_rank(world) : 0, size = world ? comm_size(world) : 1;
    if (rank != w->rank || size != w->nranks)
        return myr_error("checkpoint writer began as rank %d of %d but commits in a group where it is rank %d of %d",
                         w->rank, w->nranks, rank, size);
    return 0;
}

/* ---- collectives on bytes (comm.h moves f32 words; bits are copied, never converted) */
static int agree_failed(Comm *world, int failed, int *any) {
    *any = failed;
    if (!world || comm_size(world) == 1) return 0;
    float f = failed ? 1.0f : 0.0f, g = 0;
    if (comm_all_reduce(world, &f, &g, 1, COMM_F32, COMM_MAX)) return -1;
    *any = g > 0;
    return 0;
}

/* Rank 0 receives every rank's table (tables[r] malloc'd); others send theirs. */
static int gather_tables(Comm *world, char *mine, char ***out) {
    int n = comm_size(world), me = comm_rank(world);
    uint32_t len = (uint32_t)strlen(mine) + 1;
    float lw, *lens = malloc(sizeof(float) * n);
    if (!lens) return myr_error("out of memory");
    memcpy(&lw, &len, 4);
    if (comm_all_gather(world, &lw, lens, 1, COMM_F32)) {
        free(lens);
        return -1;
    }
    int rc = 0;
    if (me != 0) {
        size_t words = (len + 3) / 4;
        float *buf = calloc(words, 4);
        if (!buf) rc = myr_error("out of memory");
        else {
            memcpy(buf, mine, len);
            rc = comm_send(world, buf, words, COMM_F32, 0);
        }
        free(buf);
    } else {
        char **t = calloc(n, sizeof *t);
        if (!t) rc = myr_error("out of memory");
        for (int r = 0; r < n && rc == 0; r++) {
            uint32_t l;
            memcpy(&l, &lens[r], 4);
            size_t words = (l + 3) / 4;
            t[r] = calloc(words ? words : 1, 4);
            if (!t[r]) rc = myr_error("out of memory");
            else if (r == 0) memcpy(t[r], mine, len);
            else rc = comm_recv(world, t[r], words, COMM_F32, r);
            if (rc == 0 && (l == 0 || t[r][l - 1] != 0)) rc = myr_error("checkpoint: rank %d sent a damaged piece table", r);
        }
        *out = t;
    }
    free(lens);
    return rc;
}

/* A save that failed leaves nothing behind: once every rank has removed its own shard (a barrier),
 * rank 0 removes what is left in the step directory (temporary files; nothing there is valid: a
 * re-save of a step invalidated its old manifest first), then every rank removes the directory
 * (each node's, where the directory is not shared). */
static void remove_failed_step_dir(CkptWriter *w, Comm *world) {
    int many = world && comm_size(world) > 1;
    if (many) comm_barrier(world);
    DIR *d = w->rank == 0 ? opendir(w->step_dir) : NULL;
    if (d) {
        for (struct dirent *e; (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char f[4400];
            snprintf(f, sizeof f, "%s/%s", w->step_dir, e->d_name);
            unlink(f);
        }
        closedir(d);
    }
    if (many) comm_barrier(world);
    rmdir(w->step_dir);
}

int ckpt_finish_commit(CkptWriter *w, Comm *world, const char *meta_json, int rc, char *table) {
    char err[1024] = "";
    if (rc) snprintf(err, sizeof err, "%s", myr_last_error());
    int any = rc != 0;
    if (agree_failed(world, rc != 0, &any)) any = 1, snprintf(err, sizeof err, "%s", myr_last_error());
    int nranks = w->nranks;
    if (any) {
        char file[64], path[4096];
        ckpt_rank_file(w, file, sizeof file);
        snprintf(path, sizeof path, "%s/%s", w->step_dir, file);
        if (rc == 0) unlink(path); /* our shard is useless without the others */
        remove_failed_step_dir(w, world);
        if (!err[0])
            snprintf(err, sizeof err, "another rank failed to write its shard of checkpoint step %" PRId64
                                      " (see its error)", w->step);
        myr_error("%s; %s was not committed (and is removed), the previous checkpoint stays the newest valid one", err,
                  w->step_dir);
        free(table);
        ckpt_writer_abort(w);
        return -1;
    }
    char **tables = NULL;
    int mine_only = !world || comm_size(world) == 1;
    if (mine_only) {
        tables = malloc(sizeof *tables);
        if (tables) tables[0] = table, table = NULL;
        else rc = myr_error("out of memory");
    } else {
        ckpt_crash_point();
        rc = gather_tables(world, table, &tables);
    }
    if (rc == 0 && w->rank == 0) rc = ckpt_commit_manifest(w->dir, w->step, nranks, tables, meta_json, &w->opt);
    if (rc) snprintf(err, sizeof err, "%s", myr_last_error());
    if (tables)
        for (int r = 0; r < nranks; r++) free(tables[r]);
    free(tables);
    free(table);
    int64_t step = w->step;
    int fail_any = rc != 0;
    if (agree_failed(world, rc != 0, &fail_any)) {
        ckpt_writer_abort(w);
        return -1;
    }
    if (fail_any) {
        /* a manifest that did not commit leaves shards no reader will take: removed, unless the
         * manifest is in place (only `latest` failed: the checkpoint is valid) */
        char manifest[4200];
        snprintf(manifest, sizeof manifest, "%s/manifest.json", w->step_dir);
        int committed = access(manifest, F_OK) == 0;
        float flag = (float)committed; /* rank 0's view decides, for all */
        if (world && comm_size(world) > 1 && comm_broadcast(world, &flag, &flag, 1, COMM_F32, 0) == 0)
            committed = flag > 0;
        if (!committed) {
            char file[64], path[4096];
            ckpt_rank_file(w, file, sizeof file);
            snprintf(path, sizeof path, "%s/%s", w->step_dir, file);
            unlink(path);
            remove_failed_step_dir(w, world);
        }
        ckpt_writer_abort(w);
        if (rc) return myr_error("%s", err);
        return myr_error("rank 0 failed to commit the manifest of checkpoint step %" PRId64 " (see its error)", step);
    }
    ckpt_writer_abort(w);
    return 0;
}

/* ---- manifest */
static int json_int(const cJSON *j, int64_t *v) {
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (d < 0 || d > 9007199254740992.0 || d != (double)(int64_t)d) return -1;
    *v = (int64_t)d;
    return 0;
}

static int cmp_i64pair(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static int boxes_overlap(const cJSON *a, const cJSON *b, int ndim) {
    for (int d = 0; d < ndim; d++) {
        int64_t sa = 0, ea = 0, sb = 0, eb = 0;
        json_int(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "start"), d), &sa);
        json_int(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "extent"), d), &ea);
        json_int(cJSON_GetArrayItem(cJSON_GetObjectItem(b, "start"), d), &sb);
        json_int(cJSON_GetArrayItem(cJSON_GetObjectItem(b, "extent"), d), &eb);
        if (ea == 0 || eb == 0 || sa + ea <= sb || sb + eb <= sa) return 0;
    }
    return 1;
}

/* Pieces must cover each tensor exactly once: element counts add up to the tensor's, flat
 * ranges do not overlap each other, boxes do not overlap each other (checked pairwise up to
 * 4096 boxes); a flat range overlapping a box leaves a gap elsewhere, caught by the sum. */
static int check_coverage(const char *name, cJSON *t) {
    cJSON *shape = cJSON_GetObjectItem(t, "shape"), *pieces = cJSON_GetObjectItem(t, "pieces");
    int ndim = cJSON_GetArraySize(shape);
    int64_t sh[CKPT_MAX_NDIM], numel = 1, sum = 0;
    for (int d = 0; d < ndim; d++) json_int(cJSON_GetArrayItem(shape, d), &sh[d]), numel *= sh[d];
    int np = cJSON_GetArraySize(pieces), nflat = 0, nbox = 0;
    int64_t *flat = malloc(sizeof(int64_t) * 2 * (np + 1));
    const cJSON **box = malloc(sizeof *box * (np + 1));
    if (!flat || !box) {
        free(flat);
        free((void *)box);
        return myr_error("out of memory");
    }
    cJSON *p;
    cJSON_ArrayForEach(p, pieces) {
        cJSON *f = cJSON_GetObjectItem(p, "flat");
        if (f) {
            json_int(cJSON_GetArrayItem(f, 0), &flat[2 * nflat]);
            json_int(cJSON_GetArrayItem(f, 1), &flat[2 * nflat + 1]);
            sum += flat[2 * nflat + 1];
            nflat++;
        } else {
            cJSON *e = cJSON_GetObjectItem(p, "extent");
            int64_t n = 1, x = 0;
            for (int d = 0; d < ndim; d++) json_int(cJSON_GetArrayItem(e, d), &x), n *= x;
            sum += n;
            box[nbox++] = p;
        }
    }
    int rc = 0;
    qsort(flat, nflat, 2 * sizeof(int64_t), cmp_i64pair);
    for (int i = 1; i < nflat && !rc; i++)
        if (flat[2 * i] < flat[2 * i - 2] + flat[2 * i - 1] && flat[2 * i + 1] && flat[2 * i - 1])
            rc = myr_error("checkpoint tensor %s: pieces overlap (flat ranges starting at %" PRId64 " and %" PRId64
                           "); each element must be saved by exactly one rank",
                           name, flat[2 * i - 2], flat[2 * i]);
    if (nbox <= 4096)
        for (int i = 0; i < nbox && !rc; i++)
            for (int j = i + 1; j < nbox && !rc; j++)
                if (boxes_overlap(box[i], box[j], ndim))
                    rc = myr_error("checkpoint tensor %s: two box pieces overlap; each element must be saved by exactly "
                                   "one rank", name);
    if (!rc && sum != numel)
        rc = myr_error("checkpoint tensor %s: the pieces hold %" PRId64 " elements, the tensor has %" PRId64
                       " (every element must be saved by exactly one rank)", name, sum, numel);
    free(flat);
    free((void *)box);
    return rc;
}

static char *build_manifest(int64_t step, int nranks, char *const *tables, const char *meta_json, int64_t block) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", CKPT_FORMAT_NAME);
    cJSON_AddNumberToObject(root, "version", CKPT_VERSION);
    cJSON_AddNumberToObject(root, "step", (double)step);
    cJSON_AddNumberToObject(root, "nranks", nranks);
    cJSON_AddNumberToObject(root, "block_bytes", (double)block);
    cJSON_AddNumberToObject(root, "align", CKPT_ALIGN);
    cJSON_AddStringToObject(root, "checksum", "crc32c");
    cJSON *meta = cJSON_Parse(meta_json ? meta_json : "{}");
    if (!cJSON_IsObject(meta)) {
        cJSON_Delete(meta);
        cJSON_Delete(root);
        myr_error("checkpoint metadata must be a JSON object, got: %.60s", meta_json);
        return NULL;
    }
    cJSON_AddItemToObject(root, "meta", meta);
    cJSON *files = cJSON_AddArrayToObject(root, "files");
    cJSON *tensors = cJSON_AddObjectToObject(root, "tensors");
    for (int r = 0; r < nranks; r++) {
        cJSON *t = cJSON_Parse(tables[r]);
        if (!t) {
            cJSON_Delete(root);
            myr_error("checkpoint: the piece table of rank %d is not valid JSON", r);
            return NULL;
        }
        cJSON *f = cJSON_CreateObject();
        cJSON_AddItemToObject(f, "name", cJSON_Duplicate(cJSON_GetObjectItem(t, "file"), 1));
        cJSON_AddItemToObject(f, "bytes", cJSON_Duplicate(cJSON_GetObjectItem(t, "bytes"), 1));
        cJSON_AddItemToArray(files, f);
        cJSON *p;
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(t, "pieces")) {
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(p, "name"));
            cJSON *dt = cJSON_GetObjectItem(p, "dtype"), *shape = cJSON_GetObjectItem(p, "shape");
            cJSON *tensor = cJSON_GetObjectItemCaseSensitive(tensors, name);
            if (!tensor) {
                tensor = cJSON_AddObjectToObject(tensors, name);
                cJSON_AddItemToObject(tensor, "dtype", cJSON_Duplicate(dt, 1));
                cJSON_AddItemToObject(tensor, "shape", cJSON_Duplicate(shape, 1));
                cJSON_AddArrayToObject(tensor, "pieces");
            } else if (!cJSON_Compare(cJSON_GetObjectItem(tensor, "dtype"), dt, 1) ||
                       !cJSON_Compare(cJSON_GetObjectItem(tensor, "shape"), shape, 1)) {
                char *a = cJSON_PrintUnformatted(shape), *b = cJSON_PrintUnformatted(cJSON_GetObjectItem(tensor, "shape"));
                myr_error("checkpoint tensor %s: rank %d saves it as %s %s, an earlier rank as %s %s", name, r,
                          cJSON_GetStringValue(dt), a, cJSON_GetStringValue(cJSON_GetObjectItem(tensor, "dtype")), b);
                free(a);
                free(b);
                cJSON_Delete(t);
                cJSON_Delete(root);
                return NULL;
            }
            cJSON *q = cJSON_CreateObject();
            cJSON_AddNumberToObject(q, "file", r);
            cJSON_AddItemToObject(q, "offset", cJSON_Duplicate(cJSON_GetObjectItem(p, "offset"), 1));
            cJSON_AddItemToObject(q, "bytes", cJSON_Duplicate(cJSON_GetObjectItem(p, "bytes"), 1));
            if (cJSON_GetObjectItem(p, "block")) {
                cJSON_AddItemToObject(q, "block", cJSON_Duplicate(cJSON_GetObjectItem(p, "block"), 1));
                cJSON_AddItemToObject(q, "crc32c", cJSON_Duplicate(cJSON_GetObjectItem(p, "crc32c"), 1));
            }
            const char *keys[] = {"flat", "start", "extent"};
            for (int k = 0; k < 3; k++) {
                cJSON *v = cJSON_GetObjectItem(p, keys[k]);
                if (v) cJSON_AddItemToObject(q, keys[k], cJSON_Duplicate(v, 1));
            }
            cJSON_AddItemToArray(cJSON_GetObjectItem(tensor, "pieces"), q);
        }
        cJSON_Delete(t);
    }
    cJSON *t;
    cJSON_ArrayForEach(t, tensors) if (check_coverage(t->string, t)) {
        cJSON_Delete(root);
        return NULL;
    }
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    if (!s) myr_error("out of memory printing the checkpoint manifest");
    return s;
}

static int write_small_atomic(const char *path, const char *const *parts, int n) {
    AtomicFile f;
    if (atomic_open(&f, path)) return -1;
    for (int i = 0; i < n; i++)
        if (atomic_write(&f, parts[i], strlen(parts[i]))) {
            atomic_abort(&f);
            return -1;
        }
    ckpt_crash_point();
    return atomic_commit(&f);
}

/* Remove a step directory: the manifest first (so a half-deleted one is invalid), then the rest. */
static void remove_step_dir(const char *dir, int64_t step) {
    char name[64], path[4096];
    ckpt_step_dirname(step, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s/manifest.json", dir, name);
    unlink(path);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ckpt_fsync_dir(path);
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char f[4400];
            snprintf(f, sizeof f, "%s/%s", path, e->d_name);
            unlink(f);
        }
        closedir(d);
    }
    rmdir(path);
}

/* Keep the `keep` newest complete checkpoints up to `step`; older ones and older incomplete
 * directories (leftovers of interrupted saves) go. Newer directories are left alone. */
static void apply_retention(const char *dir, int64_t step, int keep) {
    int64_t *steps;
    int n = ckpt_list_steps(dir, step, &steps);
    if (n < 0) return;
    int kept = 1; /* the new one */
    for (int i = 0; i < n; i++) {
        char name[64], path[4096];
        ckpt_step_dirname(steps[i], name, sizeof name);
        snprintf(path, sizeof path, "%s/%s/manifest.json", dir, name);
        int complete = access(path, F_OK) == 0;
        if (complete && kept < keep) {
            kept++;
            continue;
        }
        ckpt_crash_point();
        remove_step_dir(dir, steps[i]);
    }
    free(steps);
    ckpt_fsync_dir(dir);
}

int ckpt_commit_manifest(const char *dir, int64_t step, int nranks, char *const *tables, const char *meta_json,
                         const CkptWriteOptions *opt) {
    int64_t block = opt && opt->block_bytes ? opt->block_bytes : CKPT_DEFAULT_BLOCK;
    char *body = build_manifest(step, nranks, tables, meta_json, block);
    if (!body) return -1;
    char name[64], path[4096], crc[16];
    ckpt_step_dirname(step, name, sizeof name);
    snprintf(crc, sizeof crc, "%08" PRIx32, crc32c(body, strlen(body)));
    snprintf(path, sizeof path, "%s/%s/manifest.json", dir, name);
    const char *parts[] = {CKPT_MANIFEST_PREFIX, crc, CKPT_MANIFEST_MIDDLE, body, "}\n"};
    ckpt_crash_point();
    int rc = write_small_atomic(path, parts, 5); /* the commit point */
    free(body);
    if (rc) return ckpt_error_prefix("committing checkpoint %s/%s", dir, name);
    ckpt_crash_point();
    snprintf(path, sizeof path, "%s/latest", dir);
    char line[80];
    snprintf(line, sizeof line, "%s\n", name);
    const char *lp[] = {line};
    if (write_small_atomic(path, lp, 1))
        return ckpt_error_prefix("checkpoint %s/%s is committed but %s could not be updated", dir, name, path);
    ckpt_crash_point();
    if (opt && opt->keep > 0) apply_retention(dir, step, opt->keep);
    return 0;
}
