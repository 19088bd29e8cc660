/* quantize_at_load.h - a model's weights quantized as it loads. */
#ifndef LOOM_QUANTIZE_AT_LOAD_H
#define LOOM_QUANTIZE_AT_LOAD_H

#include "model/model.h"

/* Replaces m's file, opened to LOOM_STAGE_CONTRACT, by its GGUF image with
 * the weights quantized to scheme, in memory: what `loom convert --type`
 * writes. m then binds that instead. */
loom_status loom_quantize_at_load(loom_model *m, const char *scheme);

#endif
