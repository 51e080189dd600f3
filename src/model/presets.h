/* presets.h: named model shapes (--preset NAME). */
#ifndef MYRIAD_MODEL_PRESETS_H
#define MYRIAD_MODEL_PRESETS_H

#include "model/config.h"

/* Fill *c with the preset's shape and family defaults; -1 + reason (listing the names) if unknown. */
int model_preset(const char *name, ModelConfig *c);
/* Comma-separated preset names, for help texts. */
const char *model_preset_names(void);

#endif
