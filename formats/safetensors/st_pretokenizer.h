/* st_pretokenizer.h - what a tokenizer.json does to text before its model
 * (normalizer, pre_tokenizer) and after (decoder), as GGUF's keys say it:
 * tokenizer.ggml.pre names one of the core's pre-tokenizers
 * (core/pretokenizer.c), tokenizer.ggml.add_space_prefix the "▁" that
 * SentencePiece-style text starts with. */
#ifndef LOOM_ST_PRETOKENIZER_H
#define LOOM_ST_PRETOKENIZER_H

#include "loom/plugin_api.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

typedef struct st_pipeline {
	const char *pre;       /* tokenizer.ggml.pre */
	bool add_space_prefix; /* "llama": text starts with "▁" */
	/* "llama": Metaspace cuts the text before each "▁", so no merge
	 * spans words; the caller checks that the vocabulary makes that
	 * no restriction. */
	bool split_words;
} st_pipeline;

/* For a SentencePiece-style BPE (model.type "BPE", byte_fallback): spaces
 * become "▁" (Replace or Metaspace), optionally one goes first (Prepend or
 * Metaspace's prepend_scheme). Anything that changes text otherwise is an
 * error naming it; path names tokenizer.json in messages. */
bool st_pipeline_llama(const loom_host *host, const char *path, const cJSON *tokenizer,
		       st_pipeline *out);

/* For a byte-level BPE: the core pre-tokenizer whose expressions are the
 * pre_tokenizer's, given model.ignore_merges. An unknown one is an error
 * quoting it. */
bool st_pipeline_gpt2(const loom_host *host, const char *path, const cJSON *tokenizer,
		      bool ignore_merges, st_pipeline *out);

/* For WordPiece: BERT's normalizer (lower case) and pre-tokenizer, which
 * the core's WordPiece does itself. */
bool st_pipeline_bert(const loom_host *host, const char *path, const cJSON *tokenizer,
		      st_pipeline *out);

#endif
