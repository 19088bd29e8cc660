/* fuzz_model.c - a whole model file through loom.h: load it, make a small
 * context, decode a short prompt and one more token. Mutated weights reach
 * every kernel of the chosen backend this way.
 *
 * The file's last byte (tensor data in any real file) also picks the KV
 * cache's type, so that the cache quantizers see the activations too.
 *
 * What a decode that succeeds hands back must be finite: loom reports a
 * step whose logits are not as an error instead. */
#include "fuzz_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static loom_runtime *runtime;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	runtime = fuzz_runtime();
	return 0;
}

static void check_logits(loom_context *ctx, int32_t i, int32_t n_vocab)
{
	const float *logits = loom_get_logits(ctx, i);
	if (logits == NULL)
		abort();
	for (int32_t v = 0; v < n_vocab; v++)
		if (!isfinite(logits[v])) {
			fprintf(stderr, "fuzz_model: decode succeeded with logit %d of token %d = %g\n", v, i,
				(double)logits[v]);
			abort();
		}
}

static void decode(loom_model *model, loom_dtype kv_type)
{
	loom_context_params cp = loom_context_default_params();
	cp.n_ctx = 16;
	cp.n_batch = 4;
	cp.kv_type = kv_type;
	loom_context *ctx;
	if (loom_context_create(model, &cp, &ctx) != LOOM_OK)
		return;

	int32_t n_vocab = loom_model_n_vocab(model);
	loom_token prompt[4] = {1, 2, 3, 4};
	int8_t want_logits[4] = {1, 0, 0, 1};
	for (int i = 0; i < 4; i++)
		prompt[i] %= n_vocab;
	loom_batch batch = {.n_tokens = 4, .tokens = prompt, .logits = want_logits};
	if (loom_decode(ctx, &batch) == LOOM_OK) {
		check_logits(ctx, 0, n_vocab);
		check_logits(ctx, 3, n_vocab);
		loom_token next = n_vocab - 1;
		batch = (loom_batch){.n_tokens = 1, .tokens = &next};
		if (loom_decode(ctx, &batch) == LOOM_OK)
			check_logits(ctx, 0, n_vocab);
	}
	loom_context_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const loom_dtype kv_types[] = {LOOM_DTYPE_F16, LOOM_DTYPE_F32, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0};
	loom_model *model;
	if (size == 0)
		return 0;
	if (loom_model_load(runtime, fuzz_write_file("model.gguf", data, size), NULL, &model) != LOOM_OK)
		return 0;
	if (loom_model_n_vocab(model) > 0)
		decode(model, kv_types[data[size - 1] % 4]);
	loom_model_free(model);
	return 0;
}
