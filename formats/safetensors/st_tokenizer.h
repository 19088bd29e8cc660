/* st_tokenizer.h - a Hugging Face tokenizer (tokenizer.json and its
 * companions) presented under the GGUF tokenizer.ggml.* keys, as
 * llama.cpp's convert_hf_to_gguf.py writes them. */
#ifndef LOOM_ST_TOKENIZER_H
#define LOOM_ST_TOKENIZER_H

#include "loom/plugin_api.h"
#include "st_meta.h"

#include <stdbool.h>

/* Read DIR/tokenizer.json and, if present, tokenizer_config.json,
 * special_tokens_map.json, generation_config.json and chat_template.jinja,
 * and add the tokenizer's keys to meta (which already holds config.json's
 * values). No tokenizer.json: adds nothing and returns true. false: bad
 * input or out of memory, with host->set_error naming the file. */
bool st_tokenizer_load(const loom_host *host, const char *dir, st_meta *meta);

#endif
