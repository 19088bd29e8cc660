/*
 * family_models.h - random-weight models of the families loom takes as
 * contract files, each written the same way every time, and the prompt
 * they are run on. The tests compare loom on them with reference files
 * under tests/reference/ that another implementation computed on the very
 * same files (tests/reference/README.md says how they were made).
 */
#ifndef LOOM_TEST_FAMILY_MODELS_H
#define LOOM_TEST_FAMILY_MODELS_H

#include "synth_model.h"

#include "loom.h"
#include "loom/plugin_api.h"

#include <stdbool.h>

typedef struct family_model {
	const char *name; /* "gemma2-f32": the reference file's name too */
	const char *arch; /* general.architecture */
	const char *contract; /* the contract that runs it (arch/NAME.yaml) */
	bool gelu;        /* its FFN's activation is a GELU */
	/* What computed its reference file: "llama.cpp" (llama_reference.c),
	 * or "numpy" (numpy_reference.py, for families llama.cpp lacks). */
	const char *reference;
	synth_config config;
	/* A loom_quantize scheme ("q4_k_m") the written config is quantized
	 * to, as llama-quantize's mixes do it; NULL: written as configured. */
	const char *scheme;
} family_model;

/* Every family model; *n gets their number. */
const family_model *family_models(int *n);
/* The one called name, or NULL. */
const family_model *family_model_named(const char *name);

/* The prompt every family model is run on, FAMILY_PROMPT_LEN token ids;
 * longer than the models' sliding windows, so windowed layers drop keys. */
#define FAMILY_PROMPT_LEN 20
extern const int32_t family_prompt[FAMILY_PROMPT_LEN];

/* Writes the model's GGUF file to path, quantized by rt (a runtime on any
 * backend; unused when the model has no scheme); false, with
 * loom_last_error() set where loom failed, if the write fails. */
bool family_model_write(loom_runtime *rt, const family_model *f, const char *path);

#endif
