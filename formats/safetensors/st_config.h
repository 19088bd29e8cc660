/* st_config.h - a Hugging Face config.json as metadata. */
#ifndef LOOM_ST_CONFIG_H
#define LOOM_ST_CONFIG_H

#include "loom/plugin_api.h"
#include "st_meta.h"

#include <stdbool.h>

/* Reads dir/config.json into meta: general.architecture from "model_type"
 * (left unset without one), and every member under its own name, nested
 * objects flattened into dotted keys ("rope_scaling.factor"). Integral
 * numbers within 2^53 become I64, other numbers F64; arrays of numbers or
 * of strings become arrays; nulls and other arrays are left out, and so are
 * keys under "general." and "tokenizer." (the plugin's own). false after
 * host->set_error naming the file. */
bool st_config_load(const loom_host *host, const char *dir, st_meta *meta);

#endif
