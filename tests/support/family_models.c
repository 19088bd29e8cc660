/* family_models.c - the family models' shapes (see family_models.h). */
#include "family_models.h"

#include <stdio.h>
#include <string.h>

const int32_t family_prompt[FAMILY_PROMPT_LEN] = {1,  262, 271, 259, 280, 290, 17,  99, 263, 275,
						  288, 5,   266, 279, 40,  270, 283, 261, 296, 200};

/* The shape most family models share: 64 wide, 4 heads over 2 kv heads,
 * an FFN 96 wide, n_layer layers, every weight of type, the values drawn
 * from seed. */
static synth_config small(loom_dtype type, int n_layer, uint64_t seed)
{
	synth_config c = synth_default_config();
	c.n_embd = 64;
	c.n_layer = n_layer;
	c.n_head = 4;
	c.n_head_kv = 2;
	c.n_ff = 96;
	c.weight_type = type;
	c.seed = seed;
	return c;
}

/* Gemma 2 as llama.cpp knows it: 26 layers (its 2B; it refuses other
 * depths), tied embeddings, post-norms, both soft-caps at values that bend
 * these small models' scores and logits, and a window of 6 on every other
 * layer, under the 20 tokens of the prompt. */
static synth_config gemma2(loom_dtype type)
{
	synth_config c = small(type, 26, 2);
	c.head_dim = 32;
	c.n_ff = 128;
	c.norm_eps = 1e-6f;
	c.tied = true;
	c.post_norms = true;
	c.attn_softcap = 4.0f;
	c.final_softcap = 3.0f;
	c.sliding_window = 6;
	return c;
}

/* Mixtral as llama.cpp runs it: a llama file with 8 experts a layer, 2
 * of them a token, their weights renormalised. */
static synth_config mixtral(loom_dtype type)
{
	synth_config c = small(type, 2, 3);
	c.n_expert = 8;
	c.n_expert_used = 2;
	return c;
}

/* Granite 3 as llama.cpp runs it (its llama block): the embeddings times
 * 12, each block output times 0.22, q.k times 0.0078125 in place of
 * 1/sqrt(head_dim), the logits divided by 8 (Granite 3 2B's values). With
 * experts: Granite MoE, 8 experts a layer, 2 a token, renormalised. */
static synth_config granite(loom_dtype type, int n_expert)
{
	synth_config c = small(type, 2, 4);
	c.embedding_mult = 12.0f;
	c.residual_mult = 0.22f;
	c.attention_mult = 0.0078125f;
	c.logit_scale = 8.0f;
	c.n_expert = n_expert;
	c.n_expert_used = n_expert > 0 ? 2 : 0;
	return c;
}

/* OLMo 2 as llama.cpp runs it: no pre-norms, post-norms, an RMSNorm over
 * the whole of q and of k (llama.cpp's takes k's width as n_embd: as many
 * kv heads as heads). */
static synth_config olmo2(loom_dtype type)
{
	synth_config c = small(type, 2, 5);
	c.n_head_kv = 4;
	c.norm_eps = 1e-6f;
	c.no_pre_norms = true;
	c.post_norms = true;
	c.qk_norm = 2;
	return c;
}

/* OLMo 3 as transformers computes it, in the olmo2 file llama.cpp's
 * converter writes for it: OLMo 2's block with grouped-query attention
 * (its 32B's; the k norm as wide as k), and a window of 6 on three layers
 * of four, listed as the converter lists them (its layer_types). */
static const uint32_t olmo3_windowed[] = {1, 1, 1, 0};

static synth_config olmo3(loom_dtype type)
{
	synth_config c = olmo2(type);
	c.n_layer = 4;
	c.n_head_kv = 2;
	c.seed = 14;
	c.sliding_window = 6;
	c.window_layers = olmo3_windowed;
	c.n_window_layers = 4;
	return c;
}

/* SmolLM3 as transformers computes it: the llama block, 8 layers of
 * which 3 and 7 have no RoPE (its no_rope_layer_interval of 4), tied
 * embeddings, grouped-query attention. */
static synth_config smollm3(loom_dtype type)
{
	synth_config c = small(type, 8, 15);
	c.norm_eps = 1e-6f;
	c.rope_theta = 2000000.0f;
	c.tied = true;
	return c;
}

/* GLM-4 as transformers computes it: four norms a layer (pre and post),
 * q/k/v biases, RoPE on half of each head in adjacent pairs, one matrix
 * for gate and up, grouped-query attention. */
static synth_config glm4(loom_dtype type)
{
	synth_config c = small(type, 3, 16);
	c.n_rot = 8;
	c.norm_eps = 1e-5f;
	c.post_norms = true;
	c.qkv_bias = true;
	c.fused_gate_up = true;
	return c;
}

/* OLMoE: pre-norms, the whole-width QK-norm, 8 experts a layer (64 in the
 * real one), 2 a token, their weights as the softmax gives them (no
 * renormalising). */
static synth_config olmoe(loom_dtype type)
{
	synth_config c = olmo2(type);
	c.no_pre_norms = false;
	c.post_norms = false;
	c.n_expert = 8;
	c.n_expert_used = 2;
	c.seed = 6;
	return c;
}

/* Qwen2-MoE as llama.cpp runs it: qwen2's q, k and v biases, 8 experts a
 * layer of width 32 (Qwen1.5-MoE has 60 of 1408), 2 a token, not
 * renormalised, and a shared expert of width 128 gated by the sigmoid of
 * its own logit. */
static synth_config qwen2moe(loom_dtype type)
{
	synth_config c = small(type, 2, 7);
	c.norm_eps = 1e-6f;
	c.qkv_bias = true;
	c.n_expert = 8;
	c.n_expert_used = 2;
	c.n_ff_expert = 32;
	c.n_ff_shared = 128;
	return c;
}

/* Qwen3-MoE as transformers computes it: qwen3's per-head QK-norm, 8
 * experts a layer of width 32 (Qwen3-30B-A3B has 128 of 768), 2 a token,
 * renormalised. */
static synth_config qwen3moe(loom_dtype type)
{
	synth_config c = small(type, 2, 8);
	c.head_dim = 32;
	c.norm_eps = 1e-6f;
	c.rope_theta = 1000000.0f;
	c.qk_norm = 1;
	c.n_expert = 8;
	c.n_expert_used = 2;
	c.n_ff_expert = 32;
	return c;
}

/* Gemma 3 as transformers computes it: 8 layers, of which 5 (layers 0-4,
 * 6, 7) see a window of 6 positions with RoPE base 10000, unscaled, and
 * layer 5 everything with base 1e6 and linear scaling by 8 (Gemma 3 4B's);
 * per-head QK-norm, post-norms, tied embeddings, no soft-caps. */
static synth_config gemma3(loom_dtype type)
{
	synth_config c = small(type, 8, 9);
	c.head_dim = 32;
	c.n_ff = 128;
	c.norm_eps = 1e-6f;
	c.rope_theta = 1000000.0f;
	c.rope_scaling = "linear";
	c.rope_scaling_factor = 8.0f;
	c.tied = true;
	c.post_norms = true;
	c.qk_norm = 1;
	c.sliding_window = 6;
	return c;
}

/* gpt-oss as transformers computes it: biases on q, k, v and o, a sink
 * a head, a window of 6 on layers 0 and 2 (of 4), 8 experts a layer of
 * width 32 with biases, 2 a token, the softmax of their router logits
 * (with its bias), the clamped SwiGLU. No YaRN: transformers' gpt-oss
 * ramps its frequencies without rounding the ramp's ends (truncate:
 * false), which ggml's rope does; the ROPE op's YaRN is checked apart. */
static synth_config gpt_oss(loom_dtype type)
{
	synth_config c = small(type, 4, 10);
	c.head_dim = 16;
	c.rope_theta = 150000.0f;
	c.qkv_bias = true;
	c.o_bias = true;
	c.sinks = true;
	c.sliding_window = 6;
	c.n_expert = 8;
	c.n_expert_used = 2;
	c.n_ff_expert = 32;
	c.n_ff = 32; /* its files' feed_forward_length is the experts' width */
	c.expert_biases = true;
	return c;
}

/* gpt-oss as its published files keep it: the experts in MXFP4. */
static synth_config gpt_oss_mxfp4(void)
{
	synth_config c = gpt_oss(LOOM_DTYPE_F32);
	c.expert_type = LOOM_DTYPE_MXFP4;
	return c;
}

/* Cohere 2 (Command R7B) as llama.cpp runs it: LayerNorm without biases,
 * a parallel residual, windows of 6 on three layers of four, which alone
 * rotate q and k (every fourth layer has no positions at all), tied
 * embeddings, the logits times 0.25. */
static synth_config cohere2(loom_dtype type)
{
	synth_config c = small(type, 4, 11);
	c.layer_norm = true;
	c.parallel = true;
	c.tied = true;
	c.sliding_window = 6;
	c.logit_scale = 0.25f;
	return c;
}

/* Phi-3 as llama.cpp runs it: fused q/k/v and fused gate-up, a window of
 * 6 on every layer, LongRoPE's factors (the short ones for these contexts,
 * which stay within the original 128 positions). */
static synth_config phi3(loom_dtype type)
{
	synth_config c = small(type, 2, 12);
	c.n_head_kv = 4;
	c.fused_qkv = true;
	c.fused_gate_up = true;
	c.sliding_window = 6;
	c.rope_factor_long = 4.0f;
	c.rope_factor_short = 1.5f;
	return c;
}

/* dots.llm1 as transformers computes it: qwen3's attention, a dense
 * first layer (of 3), then 8 experts a layer of width 32, 2 a token, chosen
 * by their router sigmoids plus a bias and weighted by the sigmoids,
 * renormalised and times 2.5 (dots.llm1's routed_scaling_factor), and 2
 * shared experts run as one of width 64, ungated. */
static synth_config dots1(loom_dtype type)
{
	synth_config c = small(type, 3, 13);
	c.head_dim = 32;
	c.norm_eps = 1e-6f;
	c.qk_norm = 1;
	c.n_expert = 8;
	c.n_expert_used = 2;
	c.n_ff_expert = 32;
	c.n_dense_layers = 1;
	c.n_shared_experts = 2;
	c.selection_bias = true;
	c.expert_weights_scale = 2.5f;
	return c;
}

/* A family's shape widened to the K-quants' 256-value blocks, so that a
 * Q4_K_M mix quantizes every matrix as it would a real model's (64-wide
 * rows fall back to the legacy types): 256 wide, heads of 64, an FFN 512
 * wide, experts (and a shared expert) 256 wide. */
static synth_config wide(synth_config c)
{
	c.n_embd = 256;
	c.n_ff = 512;
	c.head_dim = c.head_dim != 0 ? 64 : 0;
	c.n_ff_expert = c.n_ff_expert != 0 ? 256 : 0;
	c.n_ff_shared = c.n_ff_shared != 0 ? 256 : 0;
	return c;
}

static family_model models[48];
static int models_count;

static void add(int *n, const char *name, const char *arch, const char *contract, bool gelu, const char *reference,
		synth_config config)
{
	models[(*n)++] = (family_model){name, arch, contract, gelu, reference, config, NULL};
}

/* The family's F32 model widened and quantized to Q4_K_M. */
static void add_q4_k_m(int *n, const char *name, const char *arch, const char *contract, bool gelu,
		       const char *reference, synth_config f32)
{
	models[(*n)++] = (family_model){name, arch, contract, gelu, reference, wide(f32), "q4_k_m"};
}

const family_model *family_models(int *n)
{
	if (models[0].name == NULL) {
		const char *const cpp = "llama.cpp", *const np = "numpy";
		int k = 0;
		add(&k, "gemma2-f32", "gemma2", "gemma2", true, cpp, gemma2(LOOM_DTYPE_F32));
		add(&k, "gemma2-q8_0", "gemma2", "gemma2", true, cpp, gemma2(LOOM_DTYPE_Q8_0));
		add(&k, "mixtral-f32", "llama", "llama", false, cpp, mixtral(LOOM_DTYPE_F32));
		add(&k, "mixtral-q8_0", "llama", "llama", false, cpp, mixtral(LOOM_DTYPE_Q8_0));
		add(&k, "granite-f32", "granite", "granite", false, cpp, granite(LOOM_DTYPE_F32, 0));
		add(&k, "granite-q8_0", "granite", "granite", false, cpp, granite(LOOM_DTYPE_Q8_0, 0));
		add(&k, "granitemoe-f32", "granitemoe", "granite", false, cpp, granite(LOOM_DTYPE_F32, 8));
		add(&k, "granitemoe-q8_0", "granitemoe", "granite", false, cpp, granite(LOOM_DTYPE_Q8_0, 8));
		add(&k, "olmo2-f32", "olmo2", "olmo2", false, cpp, olmo2(LOOM_DTYPE_F32));
		add(&k, "olmo2-q8_0", "olmo2", "olmo2", false, cpp, olmo2(LOOM_DTYPE_Q8_0));
		add(&k, "olmoe-f32", "olmoe", "olmoe", false, cpp, olmoe(LOOM_DTYPE_F32));
		add(&k, "olmoe-q8_0", "olmoe", "olmoe", false, cpp, olmoe(LOOM_DTYPE_Q8_0));
		add(&k, "qwen2moe-f32", "qwen2moe", "qwen2moe", false, cpp, qwen2moe(LOOM_DTYPE_F32));
		add(&k, "qwen2moe-q8_0", "qwen2moe", "qwen2moe", false, cpp, qwen2moe(LOOM_DTYPE_Q8_0));
		add(&k, "qwen3moe-f32", "qwen3moe", "qwen3moe", false, np, qwen3moe(LOOM_DTYPE_F32));
		add(&k, "qwen3moe-q8_0", "qwen3moe", "qwen3moe", false, np, qwen3moe(LOOM_DTYPE_Q8_0));
		add(&k, "gemma3-f32", "gemma3", "gemma3", true, np, gemma3(LOOM_DTYPE_F32));
		add(&k, "gemma3-q8_0", "gemma3", "gemma3", true, np, gemma3(LOOM_DTYPE_Q8_0));
		add(&k, "gpt-oss-f32", "gpt-oss", "gpt-oss", false, np, gpt_oss(LOOM_DTYPE_F32));
		add(&k, "gpt-oss-q8_0", "gpt-oss", "gpt-oss", false, np, gpt_oss(LOOM_DTYPE_Q8_0));
		add(&k, "gpt-oss-mxfp4", "gpt-oss", "gpt-oss", false, np, gpt_oss_mxfp4());
		add(&k, "cohere2-f32", "cohere2", "cohere2", false, cpp, cohere2(LOOM_DTYPE_F32));
		add(&k, "cohere2-q8_0", "cohere2", "cohere2", false, cpp, cohere2(LOOM_DTYPE_Q8_0));
		add(&k, "phi3-f32", "phi3", "phi3", false, cpp, phi3(LOOM_DTYPE_F32));
		add(&k, "phi3-q8_0", "phi3", "phi3", false, cpp, phi3(LOOM_DTYPE_Q8_0));
		add(&k, "dots1-f32", "dots1", "dots1", false, np, dots1(LOOM_DTYPE_F32));
		add(&k, "dots1-q8_0", "dots1", "dots1", false, np, dots1(LOOM_DTYPE_Q8_0));
		add(&k, "olmo3-f32", "olmo2", "olmo2", false, np, olmo3(LOOM_DTYPE_F32));
		add(&k, "olmo3-q8_0", "olmo2", "olmo2", false, np, olmo3(LOOM_DTYPE_Q8_0));
		add(&k, "smollm3-f32", "smollm3", "smollm3", false, np, smollm3(LOOM_DTYPE_F32));
		add(&k, "smollm3-q8_0", "smollm3", "smollm3", false, np, smollm3(LOOM_DTYPE_Q8_0));
		add(&k, "glm4-f32", "glm4", "glm4", false, np, glm4(LOOM_DTYPE_F32));
		add(&k, "glm4-q8_0", "glm4", "glm4", false, np, glm4(LOOM_DTYPE_Q8_0));
		const loom_dtype f32 = LOOM_DTYPE_F32;
		add_q4_k_m(&k, "gemma2-q4_k_m", "gemma2", "gemma2", true, cpp, gemma2(f32));
		add_q4_k_m(&k, "mixtral-q4_k_m", "llama", "llama", false, cpp, mixtral(f32));
		add_q4_k_m(&k, "granitemoe-q4_k_m", "granitemoe", "granite", false, cpp, granite(f32, 8));
		add_q4_k_m(&k, "olmo2-q4_k_m", "olmo2", "olmo2", false, cpp, olmo2(f32));
		add_q4_k_m(&k, "olmoe-q4_k_m", "olmoe", "olmoe", false, cpp, olmoe(f32));
		add_q4_k_m(&k, "qwen2moe-q4_k_m", "qwen2moe", "qwen2moe", false, cpp, qwen2moe(f32));
		add_q4_k_m(&k, "cohere2-q4_k_m", "cohere2", "cohere2", false, cpp, cohere2(f32));
		add_q4_k_m(&k, "phi3-q4_k_m", "phi3", "phi3", false, cpp, phi3(f32));
		add_q4_k_m(&k, "qwen3moe-q4_k_m", "qwen3moe", "qwen3moe", false, np, qwen3moe(f32));
		add_q4_k_m(&k, "gemma3-q4_k_m", "gemma3", "gemma3", true, np, gemma3(f32));
		add_q4_k_m(&k, "gpt-oss-q4_k_m", "gpt-oss", "gpt-oss", false, np, gpt_oss(f32));
		add_q4_k_m(&k, "dots1-q4_k_m", "dots1", "dots1", false, np, dots1(f32));
		add_q4_k_m(&k, "olmo3-q4_k_m", "olmo2", "olmo2", false, np, olmo3(f32));
		add_q4_k_m(&k, "smollm3-q4_k_m", "smollm3", "smollm3", false, np, smollm3(f32));
		add_q4_k_m(&k, "glm4-q4_k_m", "glm4", "glm4", false, np, glm4(f32));
		models_count = k;
	}
	*n = models_count;
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

bool family_model_write(loom_runtime *rt, const family_model *f, const char *path)
{
	char unquantized[4200];
	snprintf(unquantized, sizeof(unquantized), "%s.unquantized", path);
	synth_faults arch = {.arch = f->arch};
	synth_model *sm = synth_model_build(&f->config, &arch);
	bool ok = synth_model_write(sm, f->scheme != NULL ? unquantized : path);
	synth_model_free(sm);
	if (!ok || f->scheme == NULL)
		return ok;
	loom_quantize_params qp = loom_quantize_default_params();
	qp.scheme = f->scheme;
	ok = rt != NULL && loom_quantize(rt, unquantized, path, &qp) == LOOM_OK;
	remove(unquantized);
	return ok;
}
