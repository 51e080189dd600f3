/* hf_weights.c: loading / saving one process's whole Model through the streamed reader and
 * writer (hf_source.c, hf_export.c); the name mapping they share is hf_slots.c. */
#include "model/hf_weights.h"

#include <stdio.h>

#include "util/error.h"

/* ---- one process's whole Model ---- */

int hf_load_weights(const char *path, Model *m) {
    HfSource *s;
    if (hf_source_open_file(path, &m->cfg, &s)) return -1;
    real *image = model_params_view(m);
    int rc = param_table_boxes(&m->cfg, &m->table, m->tp.size, m->tp.rank, image, 0, hf_source_box, s);
    model_params_view_done(m, image, !rc);
    hf_source_close(s);
    return rc;
}

int hf_load(const char *dir, Model *m) { return hf_load_aligned(dir, m, 1); }

/* Read DIR into a new whole model: parameters, and gradients when it will train. */
static int load_new(const char *dir, Model *m, int unit_align, int grads) {
    HfSource *s;
    if (hf_source_open(dir, &s)) return -1;
    StageSpec whole = {0, hf_source_config(s)->layers, 1, 1};
    if (model_plan_ep(m, hf_source_config(s), unit_align, 1, 0, 1, 0, &whole)) {
        char why[1024];
        snprintf(why, sizeof why, "%s", myr_last_error());
        hf_source_close(s);
        return myr_error("%s/config.json: %s", dir, why);
    }
    model_alloc_parts(m, 1, grads);
    real *image = model_params_view(m);
    int rc = param_table_boxes(&m->cfg, &m->table, 1, 0, image, 0, hf_source_box, s);
    model_params_view_done(m, image, !rc);
    hf_source_close(s);
    if (rc) model_destroy(m);
    return rc;
}

int hf_load_aligned(const char *dir, Model *m, int unit_align) { return load_new(dir, m, unit_align, 1); }

int hf_load_inference(const char *dir, Model *m) { return load_new(dir, m, 1, 0); }

int hf_save_as(const char *dir, const Model *m, HfSaveDtype dtype, uint64_t shard_bytes) {
    HfExport *e;
    if (hf_export_plan(&m->cfg, dtype, shard_bytes, &e)) return -1;
    int rc = hf_export_create(e, dir);
    real *image = rc ? NULL : model_params_view(m);
    if (!rc) rc = hf_export_open(e, dir);
    if (!rc) rc = param_table_boxes(&m->cfg, &m->table, m->tp.size, m->tp.rank, image, 1, hf_export_box, e);
    if (hf_export_close(e) && !rc) rc = -1;
    if (image) model_params_view_done((Model *)m, image, 0);
    if (!rc) rc = hf_export_commit(e, dir, &m->cfg);
    if (rc) hf_export_abort(e, dir);
    hf_export_free(e);
    return rc;
}

int hf_save(const char *dir, const Model *m) { return hf_save_as(dir, m, HF_SAVE_F32, HF_DEFAULT_SHARD_BYTES); }
