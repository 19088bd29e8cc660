/* family_models.c - the family models' shapes (see family_models.h). */
#include "family_models.h"

#include <string.h>

const int32_t family_prompt[FAMILY_PROMPT_LEN] = {1,  262, 271, 259, 280, 290, 17,  99, 263, 275,
						  288, 5,   266, 279, 40,  270, 283, 261, 296, 200};

/* Gemma 2 as llama.cpp knows it: 26 layers (its 2B; it refuses other
 * depths), tied embeddings, post-norms, both soft-caps at values that bend
 * these small models' scores and logits, and a window of 6 on every other
 * layer, under the 20 tokens of the prompt. */
static synth_config gemma2(loom_dtype type)
{
	synth_config c = synth_default_config();
	c.n_embd = 64;
	c.n_layer = 26;
	c.n_head = 4;
	c.n_head_kv = 2;
	c.head_dim = 32;
	c.n_ff = 128;
	c.norm_eps = 1e-6f;
	c.tied = true;
	c.post_norms = true;
	c.attn_softcap = 4.0f;
	c.final_softcap = 3.0f;
	c.sliding_window = 6;
	c.weight_type = type;
	c.seed = 2;
	return c;
}

/* Mixtral as llama.cpp runs it: a llama file with 8 experts a layer, 2
 * of them a token, their weights renormalised. */
static synth_config mixtral(loom_dtype type)
{
	synth_config c = synth_default_config();
	c.n_embd = 64;
	c.n_layer = 2;
	c.n_head = 4;
	c.n_head_kv = 2;
	c.n_ff = 96;
	c.n_expert = 8;
	c.n_expert_used = 2;
	c.weight_type = type;
	c.seed = 3;
	return c;
}

static family_model models[4];

const family_model *family_models(int *n)
{
	if (models[0].name == NULL) {
		models[0] = (family_model){"gemma2-f32", "gemma2", "gemma2", true, gemma2(LOOM_DTYPE_F32)};
		models[1] = (family_model){"gemma2-q8_0", "gemma2", "gemma2", true, gemma2(LOOM_DTYPE_Q8_0)};
		models[2] = (family_model){"mixtral-f32", "llama", "llama", false, mixtral(LOOM_DTYPE_F32)};
		models[3] = (family_model){"mixtral-q8_0", "llama", "llama", false, mixtral(LOOM_DTYPE_Q8_0)};
	}
	*n = (int)(sizeof(models) / sizeof(models[0]));
	return models;
}

const family_model *family_model_named(const char *name)
{
	int n;
	const family_model *all = family_models(&n);
	for (int i = 0; i < n; i++)
		if (strcmp(all[i].name, name) == 0)
			return &all[i];
	return NULL;
}

bool family_model_write(const family_model *f, const char *path)
{
	synth_faults arch = {.arch = f->arch};
	synth_model *sm = synth_model_build(&f->config, &arch);
	bool ok = synth_model_write(sm, path);
	synth_model_free(sm);
	return ok;
}
