/* make_seeds.c - writes the seed files no reference data holds:
 *
 *     fuzz_make_seeds MODEL_DIR SAFETENSORS_DIR
 *
 * MODEL_DIR gets small llama GGUF files (one or two layers, n_embd 32, so
 * that a fuzzing run loads and decodes hundreds a second), in each weight
 * type the writer encodes, and one model of each family the test suite
 * runs (family_models.h); SAFETENSORS_DIR a few .safetensors files. The
 * directories must exist (tests/fuzz/seeds.sh makes them). */
#include "family_models.h"
#include "st_writer.h"
#include "synth_model.h"

#include <stdio.h>
#include <stdlib.h>

static void write_model(const char *dir, const char *name, loom_dtype type, int n_layer, bool tied)
{
	synth_config c = synth_default_config();
	c.n_vocab = SYNTH_MIN_VOCAB + 4;
	c.n_embd = 32;
	c.n_head = 1; /* heads of 32 values, so that quantized KV caches take them */
	c.n_head_kv = 1;
	c.n_ff = 64;
	c.n_layer = n_layer;
	c.n_ctx = 64;
	c.weight_type = type;
	c.tied = tied;
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	synth_model *sm = synth_model_build(&c, NULL);
	if (!synth_model_write(sm, path)) {
		fprintf(stderr, "fuzz_make_seeds: cannot write %s\n", path);
		exit(1);
	}
	synth_model_free(sm);
}

/* The layers a family seed keeps at most: deeper ones repeat the same
 * layers (Gemma 2's 26 would take it past libFuzzer's 1 MiB inputs). */
#define FAMILY_SEED_LAYERS 8

/* The test suite's family models as written, not quantized by loom: each
 * family's Q8_0 model and gpt-oss's with MXFP4 experts, so that mutations
 * reach the experts' routing and products, windowed and soft-capped
 * attention, sinks and the contracts' other block features. */
static void write_families(const char *dir)
{
	int n;
	const family_model *all = family_models(&n);
	for (int i = 0; i < n; i++) {
		family_model f = all[i];
		if (f.scheme != NULL ||
		    (f.config.weight_type != LOOM_DTYPE_Q8_0 && f.config.expert_type != LOOM_DTYPE_MXFP4))
			continue;
		if (f.config.n_layer > FAMILY_SEED_LAYERS && f.config.window_layers == NULL)
			f.config.n_layer = FAMILY_SEED_LAYERS;
		char path[4096];
		snprintf(path, sizeof(path), "%s/family-%s.gguf", dir, f.name);
		if (!family_model_write(NULL, &f, path)) {
			fprintf(stderr, "fuzz_make_seeds: cannot write %s\n", path);
			exit(1);
		}
	}
}

static void write_safetensors(const char *dir, const char *name, const st_tensor_spec *t, int n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!st_write_file(path, t, n)) {
		fprintf(stderr, "fuzz_make_seeds: cannot write %s\n", path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: fuzz_make_seeds MODEL_DIR SAFETENSORS_DIR\n");
		return 2;
	}
	write_model(argv[1], "synth-f32.gguf", LOOM_DTYPE_F32, 1, false);
	write_model(argv[1], "synth-f16-tied.gguf", LOOM_DTYPE_F16, 2, true);
	write_model(argv[1], "synth-bf16.gguf", LOOM_DTYPE_BF16, 1, false);
	write_model(argv[1], "synth-q8_0.gguf", LOOM_DTYPE_Q8_0, 2, false);
	write_families(argv[1]);

	static const float values[6] = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f, 8.0f};
	const st_tensor_spec tensors[] = {
		{.name = "model.embed_tokens.weight", .dtype = "F32", .n_dims = 2, .shape = {3, 2}, .data = values},
		{.name = "model.norm.weight", .dtype = "F16", .n_dims = 1, .shape = {4}},
		{.name = "lm_head.weight", .dtype = "BF16", .n_dims = 2, .shape = {2, 3}},
		{.name = "scalar", .dtype = "I64", .n_dims = 0},
	};
	write_safetensors(argv[2], "tensors.safetensors", tensors, 4);
	write_safetensors(argv[2], "one.safetensors", tensors, 1);
	write_safetensors(argv[2], "empty.safetensors", tensors, 0);
	return 0;
}
