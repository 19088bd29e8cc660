/* st_merges.h - a tokenizer.json's BPE merges (model.merges) as GGUF holds
 * them: token scores for SentencePiece-style vocabularies ("llama"), the
 * merge list itself for byte-level ones ("gpt2"). */
#ifndef LOOM_ST_MERGES_H
#define LOOM_ST_MERGES_H

#include "loom/plugin_api.h"
#include "st_meta.h"
#include "st_vocab.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

/* Sets the score of every token of v (indexed) from merges (model.merges,
 * NULL if absent), so that the core's score-ordered merging gives what
 * Hugging Face's rank-ordered BPE gives; an error if it cannot (see
 * st_merges.c). path names tokenizer.json in messages. */
bool st_merges_to_scores(const loom_host *host, const char *path, const cJSON *merges,
			 st_vocab *v);

/* Writes merges as tokenizer.ggml.merges ("left right" strings, in rank
 * order) into meta, after checking that each part and its result are
 * tokens of v (indexed), as Hugging Face requires. */
bool st_merges_to_meta(const loom_host *host, const char *path, const cJSON *merges,
		       const st_vocab *v, st_meta *meta);

#endif
