/* test_hf_synthetic.c - Hugging Face checkpoints the suite writes from the
 * synthetic GGUF models: every dtype (F32, F16, BF16, norms included),
 * sharded and not, Llama's rotate-half Q/K layout, GPT-2's transposed
 * Conv1D weights, Phi-2's separate q, k and v, Gemma's w norms: one or
 * more per contract. Each must compute what its source computes:
 *   F32: the GGUF's logits within 1e-4 (only summation order differs);
 *   F16, BF16: the logits of the same checkpoint converted to GGUF by
 *     `loom convert` (whose f32 output is byte-identical to llama.cpp's,
 *     test_convert), and the f32 source's within a bound for the rounding
 *     of the weights (0.1 for f16, 0.5 for bf16: 8 bits of mantissa on
 *     random weights), so that neither path can be wrong alone. Against the
 *     converted file the weights are the same, but Llama's Q/K rows are in
 *     the other RoPE order, so attention sums in another order; activations
 *     rounded to the weights' type before each product then flip by an ulp
 *     now and then: 2e-2 for f16 (as test_golden's f16 files), 0.1 for bf16
 *     (8x coarser), 1e-4 for f32.
 * gpt-oss's experts are MXFP4 in both, as its published checkpoints keep
 * them (transformers' blocks and scales, each expert's gate and up rows
 * interleaved): only the other tensors round. */
#include "check_main.h"
#include "cpu_ref.h"
#include "family_models.h"
#include "fixture.h"
#include "plugin_host.h"
#include "st_writer.h"
#include "testdata.h"

#include "model/meta.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How a GGUF tensor becomes a Hugging Face one. */
enum transform {
	AS_IS,
	UNPERMUTE_Q, /* llama's Q rows back to rotate-half order, per head */
	UNPERMUTE_K,
	CONV1D,      /* stored {n_in, n_out}-major (GPT-2) */
	MINUS_ONE,   /* GGUF stores Gemma's norms as 1 + w, HF as w */
	FUSED_Q,     /* rows (or elements) of the fused q, k, v: Phi-2 */
	FUSED_K,
	FUSED_V,
	ONE_ROW,     /* a vector stored as a {1, n} matrix */
	EXPERTS,     /* {n_in, n_out, n_expert}: one tensor an expert ("%d" twice) */
	STACK,       /* {n_in, n_out, n_expert} as one tensor [n_expert, n_out, n_in] */
	GATE_UP_STACK, /* ffn_gate_exps and ffn_up_exps as one stack, each expert's gate rows then up's */
	/* An MXFP4 stack as transformers' NAME_blocks and NAME_scales; an f32
	 * one as its dequantized parameter [n_expert, n_in, n_out] (gpt-oss's
	 * dequantized checkpoints). */
	MXFP4_PARTS,
	MXFP4_GATE_UP, /* ffn_gate_exps and ffn_up_exps so, gate and up alternating along n_out */
	GATE_UP_BIAS,  /* their bias tables as one, each expert's biases alternating gate, up */
};

/* A tensor: GGUF name, Hugging Face name ("%d" for the layer). */
typedef struct tensor_map {
	const char *gguf, *hf;
	enum transform how;
} tensor_map;

/* A config.json member from a GGUF key ("%s" for the architecture). */
/* NUMBER: a value GGUF files leave to the loader (llama.cpp knows it by
 * the architecture), written in the key's place; ROPE_SCALING: the GGUF's
 * RoPE scaling type and factor as an object, null without; LONGROPE: the
 * GGUF's rope_factors_long and _short tensors as Phi-3's rope_scaling
 * lists. */
enum value_kind { INT, FLOAT, ROT_FRACTION, NULL_VALUE, FALSE_VALUE, TRUE_VALUE, NUMBER, ROPE_SCALING, LONGROPE };
typedef struct config_map {
	const char *hf, *gguf;
	enum value_kind kind;
} config_map;

typedef struct family {
	const char *arch, *model_type;
	const tensor_map *globals, *layer;
	const config_map *config;
	const config_map *extra_config; /* members of the family's own beside config's (one it has replaces), or NULL */
	const tensor_map *layer_rest;   /* a layer's further tensors, a map shared with other families, or NULL */
} family;

#define END {NULL, NULL, 0}
#define L "model.layers.%d."

static const config_map llama_like_config[] = {
	{"hidden_size", "%s.embedding_length", INT},
	{"intermediate_size", "%s.feed_forward_length", INT},
	{"num_hidden_layers", "%s.block_count", INT},
	{"num_attention_heads", "%s.attention.head_count", INT},
	{"num_key_value_heads", "%s.attention.head_count_kv", INT},
	{"head_dim", "%s.attention.key_length", INT},
	{"max_position_embeddings", "%s.context_length", INT},
	{"rms_norm_eps", "%s.attention.layer_norm_rms_epsilon", FLOAT},
	{"rope_theta", "%s.rope.freq_base", FLOAT},
	{"rope_scaling", NULL, NULL_VALUE},
	END,
};
static const config_map layernorm_config[] = {
	{"hidden_size", "%s.embedding_length", INT},
	{"intermediate_size", "%s.feed_forward_length", INT},
	{"num_hidden_layers", "%s.block_count", INT},
	{"num_attention_heads", "%s.attention.head_count", INT},
	{"num_key_value_heads", "%s.attention.head_count_kv", INT},
	{"max_position_embeddings", "%s.context_length", INT},
	{"layer_norm_eps", "%s.attention.layer_norm_epsilon", FLOAT},
	{"norm_epsilon", "%s.attention.layer_norm_epsilon", FLOAT},
	{"rope_theta", "%s.rope.freq_base", FLOAT},
	{"partial_rotary_factor", "%s.rope.dimension_count", ROT_FRACTION},
	END,
};
static const config_map gpt2_config[] = {
	{"n_embd", "%s.embedding_length", INT},
	{"n_layer", "%s.block_count", INT},
	{"n_head", "%s.attention.head_count", INT},
	{"n_positions", "%s.context_length", INT},
	/* null: the width comes from the c_fc weight's shape. */
	{"n_inner", NULL, NULL_VALUE},
	{"layer_norm_epsilon", "%s.attention.layer_norm_epsilon", FLOAT},
	END,
};

static const tensor_map llama_globals[] = {
	{"token_embd.weight", "model.embed_tokens.weight", AS_IS},
	{"output_norm.weight", "model.norm.weight", AS_IS},
	{"output.weight", "lm_head.weight", AS_IS},
	END,
};
/* The attention of a llama layer: q and k permuted for adjacent-pair
 * RoPE in GGUF. Its SwiGLU FFN, shared by the families after it. */
static const tensor_map llama_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_q.weight", L "self_attn.q_proj.weight", UNPERMUTE_Q},
	{"attn_k.weight", L "self_attn.k_proj.weight", UNPERMUTE_K},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	END,
};
static const tensor_map swiglu_ffn[] = {
	{"ffn_norm.weight", L "post_attention_layernorm.weight", AS_IS},
	{"ffn_gate.weight", L "mlp.gate_proj.weight", AS_IS},
	{"ffn_up.weight", L "mlp.up_proj.weight", AS_IS},
	{"ffn_down.weight", L "mlp.down_proj.weight", AS_IS},
	END,
};
/* Neox RoPE in both formats: no reordering. Qwen2's q/k/v biases, Qwen3's
 * QK-norm, Gemma's 1 + w norms; all three tie the head. */
static const tensor_map tied_globals[] = {
	{"token_embd.weight", "model.embed_tokens.weight", AS_IS},
	{"output_norm.weight", "model.norm.weight", AS_IS},
	END,
};
/* Attention with q/k/v biases (Qwen2, GLM-4). */
static const tensor_map biased_attention[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_q.weight", L "self_attn.q_proj.weight", AS_IS},
	{"attn_q.bias", L "self_attn.q_proj.bias", AS_IS},
	{"attn_k.weight", L "self_attn.k_proj.weight", AS_IS},
	{"attn_k.bias", L "self_attn.k_proj.bias", AS_IS},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_v.bias", L "self_attn.v_proj.bias", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	END,
};
static const tensor_map qwen3_attention[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_q.weight", L "self_attn.q_proj.weight", AS_IS},
	{"attn_k.weight", L "self_attn.k_proj.weight", AS_IS},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_q_norm.weight", L "self_attn.q_norm.weight", AS_IS},
	{"attn_k_norm.weight", L "self_attn.k_norm.weight", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	END,
};
static const tensor_map gemma_globals[] = {
	{"token_embd.weight", "model.embed_tokens.weight", AS_IS},
	{"output_norm.weight", "model.norm.weight", MINUS_ONE},
	END,
};
static const tensor_map gemma_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", MINUS_ONE},
	{"attn_q.weight", L "self_attn.q_proj.weight", AS_IS},
	{"attn_k.weight", L "self_attn.k_proj.weight", AS_IS},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"ffn_norm.weight", L "post_attention_layernorm.weight", MINUS_ONE},
	{"ffn_gate.weight", L "mlp.gate_proj.weight", AS_IS},
	{"ffn_up.weight", L "mlp.up_proj.weight", AS_IS},
	{"ffn_down.weight", L "mlp.down_proj.weight", AS_IS},
	END,
};
/* Gemma 2's and 3's: a norm before and after attention and the MLP, all
 * four 1 + w in GGUF, Gemma 3's per-head q and k norms too. */
static const tensor_map gemma2_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", MINUS_ONE},
	{"attn_q.weight", L "self_attn.q_proj.weight", AS_IS},
	{"attn_k.weight", L "self_attn.k_proj.weight", AS_IS},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"post_attention_norm.weight", L "post_attention_layernorm.weight", MINUS_ONE},
	{"ffn_norm.weight", L "pre_feedforward_layernorm.weight", MINUS_ONE},
	{"ffn_gate.weight", L "mlp.gate_proj.weight", AS_IS},
	{"ffn_up.weight", L "mlp.up_proj.weight", AS_IS},
	{"ffn_down.weight", L "mlp.down_proj.weight", AS_IS},
	{"post_ffw_norm.weight", L "post_feedforward_layernorm.weight", MINUS_ONE},
	END,
};
static const tensor_map gemma3_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", MINUS_ONE},
	{"attn_q.weight", L "self_attn.q_proj.weight", AS_IS},
	{"attn_k.weight", L "self_attn.k_proj.weight", AS_IS},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_q_norm.weight", L "self_attn.q_norm.weight", MINUS_ONE},
	{"attn_k_norm.weight", L "self_attn.k_norm.weight", MINUS_ONE},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"post_attention_norm.weight", L "post_attention_layernorm.weight", MINUS_ONE},
	{"ffn_norm.weight", L "pre_feedforward_layernorm.weight", MINUS_ONE},
	{"ffn_gate.weight", L "mlp.gate_proj.weight", AS_IS},
	{"ffn_up.weight", L "mlp.up_proj.weight", AS_IS},
	{"ffn_down.weight", L "mlp.down_proj.weight", AS_IS},
	{"post_ffw_norm.weight", L "post_feedforward_layernorm.weight", MINUS_ONE},
	END,
};
/* Phi-3's: q, k and v one matrix, gate and up one, in both formats. */
static const tensor_map phi3_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_qkv.weight", L "self_attn.qkv_proj.weight", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"ffn_norm.weight", L "post_attention_layernorm.weight", AS_IS},
	{"ffn_up.weight", L "mlp.gate_up_proj.weight", AS_IS},
	{"ffn_down.weight", L "mlp.down_proj.weight", AS_IS},
	END,
};
/* GLM-4's FFN after its biased attention (adjacent RoPE pairs in both
 * formats: no reordering): the post-norms under transformers' names, gate
 * and up in one. */
static const tensor_map glm4_ffn[] = {
	{"post_attention_norm.weight", L "post_self_attn_layernorm.weight", AS_IS},
	{"ffn_norm.weight", L "post_attention_layernorm.weight", AS_IS},
	{"ffn_up.weight", L "mlp.gate_up_proj.weight", AS_IS},
	{"ffn_down.weight", L "mlp.down_proj.weight", AS_IS},
	{"post_ffw_norm.weight", L "post_mlp_layernorm.weight", AS_IS},
	END,
};
/* OLMo 2's: no norms before, norms after, q and k normed whole. */
static const tensor_map olmo2_layer[] = {
	{"attn_q.weight", L "self_attn.q_proj.weight", AS_IS},
	{"attn_k.weight", L "self_attn.k_proj.weight", AS_IS},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_q_norm.weight", L "self_attn.q_norm.weight", AS_IS},
	{"attn_k_norm.weight", L "self_attn.k_norm.weight", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"post_attention_norm.weight", L "post_attention_layernorm.weight", AS_IS},
	{"ffn_gate.weight", L "mlp.gate_proj.weight", AS_IS},
	{"ffn_up.weight", L "mlp.up_proj.weight", AS_IS},
	{"ffn_down.weight", L "mlp.down_proj.weight", AS_IS},
	{"post_ffw_norm.weight", L "post_feedforward_layernorm.weight", AS_IS},
	END,
};
/* Cohere 2's: one LayerNorm (no bias) before attention and the MLP side
 * by side; its RoPE rotates adjacent pairs in both formats. */
static const tensor_map cohere2_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_q.weight", L "self_attn.q_proj.weight", AS_IS},
	{"attn_k.weight", L "self_attn.k_proj.weight", AS_IS},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"ffn_gate.weight", L "mlp.gate_proj.weight", AS_IS},
	{"ffn_up.weight", L "mlp.up_proj.weight", AS_IS},
	{"ffn_down.weight", L "mlp.down_proj.weight", AS_IS},
	END,
};
/* Phi-2: GGUF fuses q, k and v, Hugging Face keeps them apart. */
static const tensor_map phi2_globals[] = {
	{"token_embd.weight", "model.embed_tokens.weight", AS_IS},
	{"output_norm.weight", "model.final_layernorm.weight", AS_IS},
	{"output_norm.bias", "model.final_layernorm.bias", AS_IS},
	{"output.weight", "lm_head.weight", AS_IS},
	{"output.bias", "lm_head.bias", AS_IS},
	END,
};
static const tensor_map phi2_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_norm.bias", L "input_layernorm.bias", AS_IS},
	{"attn_qkv.weight", L "self_attn.q_proj.weight", FUSED_Q},
	{"attn_qkv.weight", L "self_attn.k_proj.weight", FUSED_K},
	{"attn_qkv.weight", L "self_attn.v_proj.weight", FUSED_V},
	{"attn_qkv.bias", L "self_attn.q_proj.bias", FUSED_Q},
	{"attn_qkv.bias", L "self_attn.k_proj.bias", FUSED_K},
	{"attn_qkv.bias", L "self_attn.v_proj.bias", FUSED_V},
	{"attn_output.weight", L "self_attn.dense.weight", AS_IS},
	{"attn_output.bias", L "self_attn.dense.bias", AS_IS},
	{"ffn_up.weight", L "mlp.fc1.weight", AS_IS},
	{"ffn_up.bias", L "mlp.fc1.bias", AS_IS},
	{"ffn_down.weight", L "mlp.fc2.weight", AS_IS},
	{"ffn_down.bias", L "mlp.fc2.bias", AS_IS},
	END,
};
static const tensor_map ln_globals[] = {
	{"token_embd.weight", "model.embed_tokens.weight", AS_IS},
	{"output_norm.weight", "model.norm.weight", AS_IS},
	{"output_norm.bias", "model.norm.bias", AS_IS},
	{"output.weight", "lm_head.weight", AS_IS},
	END,
};
static const tensor_map stablelm_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_norm.bias", L "input_layernorm.bias", AS_IS},
	{"attn_q.weight", L "self_attn.q_proj.weight", AS_IS},
	{"attn_q.bias", L "self_attn.q_proj.bias", AS_IS},
	{"attn_k.weight", L "self_attn.k_proj.weight", AS_IS},
	{"attn_k.bias", L "self_attn.k_proj.bias", AS_IS},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_v.bias", L "self_attn.v_proj.bias", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"ffn_norm.weight", L "post_attention_layernorm.weight", AS_IS},
	{"ffn_norm.bias", L "post_attention_layernorm.bias", AS_IS},
	{"ffn_gate.weight", L "mlp.gate_proj.weight", AS_IS},
	{"ffn_up.weight", L "mlp.up_proj.weight", AS_IS},
	{"ffn_down.weight", L "mlp.down_proj.weight", AS_IS},
	END,
};
static const tensor_map starcoder2_globals[] = {
	{"token_embd.weight", "model.embed_tokens.weight", AS_IS},
	{"output_norm.weight", "model.norm.weight", AS_IS},
	{"output_norm.bias", "model.norm.bias", AS_IS},
	END,
};
static const tensor_map starcoder2_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_norm.bias", L "input_layernorm.bias", AS_IS},
	{"attn_q.weight", L "self_attn.q_proj.weight", AS_IS},
	{"attn_q.bias", L "self_attn.q_proj.bias", AS_IS},
	{"attn_k.weight", L "self_attn.k_proj.weight", AS_IS},
	{"attn_k.bias", L "self_attn.k_proj.bias", AS_IS},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_v.bias", L "self_attn.v_proj.bias", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"attn_output.bias", L "self_attn.o_proj.bias", AS_IS},
	{"ffn_norm.weight", L "post_attention_layernorm.weight", AS_IS},
	{"ffn_norm.bias", L "post_attention_layernorm.bias", AS_IS},
	{"ffn_up.weight", L "mlp.c_fc.weight", AS_IS},
	{"ffn_up.bias", L "mlp.c_fc.bias", AS_IS},
	{"ffn_down.weight", L "mlp.c_proj.weight", AS_IS},
	{"ffn_down.bias", L "mlp.c_proj.bias", AS_IS},
	END,
};
static const tensor_map gpt2_globals[] = {
	{"token_embd.weight", "transformer.wte.weight", AS_IS},
	{"position_embd.weight", "transformer.wpe.weight", AS_IS},
	{"output_norm.weight", "transformer.ln_f.weight", AS_IS},
	{"output_norm.bias", "transformer.ln_f.bias", AS_IS},
	{"output.weight", "lm_head.weight", AS_IS},
	END,
};
static const tensor_map gpt2_layer[] = {
	{"attn_norm.weight", "transformer.h.%d.ln_1.weight", AS_IS},
	{"attn_norm.bias", "transformer.h.%d.ln_1.bias", AS_IS},
	{"attn_qkv.weight", "transformer.h.%d.attn.c_attn.weight", CONV1D},
	{"attn_qkv.bias", "transformer.h.%d.attn.c_attn.bias", AS_IS},
	{"attn_output.weight", "transformer.h.%d.attn.c_proj.weight", CONV1D},
	{"attn_output.bias", "transformer.h.%d.attn.c_proj.bias", AS_IS},
	{"ffn_norm.weight", "transformer.h.%d.ln_2.weight", AS_IS},
	{"ffn_norm.bias", "transformer.h.%d.ln_2.bias", AS_IS},
	{"ffn_up.weight", "transformer.h.%d.mlp.c_fc.weight", CONV1D},
	{"ffn_up.bias", "transformer.h.%d.mlp.c_fc.bias", AS_IS},
	{"ffn_down.weight", "transformer.h.%d.mlp.c_proj.weight", CONV1D},
	{"ffn_down.bias", "transformer.h.%d.mlp.c_proj.bias", AS_IS},
	END,
};

/* Mixtures of experts: the GGUF's {n_in, n_out, n_expert} stacks are one
 * tensor an expert in Hugging Face's checkpoints ("%d": layer, expert). */
static const tensor_map mixtral_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_q.weight", L "self_attn.q_proj.weight", UNPERMUTE_Q},
	{"attn_k.weight", L "self_attn.k_proj.weight", UNPERMUTE_K},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"ffn_norm.weight", L "post_attention_layernorm.weight", AS_IS},
	{"ffn_gate_inp.weight", L "block_sparse_moe.gate.weight", AS_IS},
	{"ffn_gate_exps.weight", L "block_sparse_moe.experts.%d.w1.weight", EXPERTS},
	{"ffn_up_exps.weight", L "block_sparse_moe.experts.%d.w3.weight", EXPERTS},
	{"ffn_down_exps.weight", L "block_sparse_moe.experts.%d.w2.weight", EXPERTS},
	END,
};
static const tensor_map qwen2moe_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_q.weight", L "self_attn.q_proj.weight", AS_IS},
	{"attn_q.bias", L "self_attn.q_proj.bias", AS_IS},
	{"attn_k.weight", L "self_attn.k_proj.weight", AS_IS},
	{"attn_k.bias", L "self_attn.k_proj.bias", AS_IS},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_v.bias", L "self_attn.v_proj.bias", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"ffn_norm.weight", L "post_attention_layernorm.weight", AS_IS},
	{"ffn_gate_inp.weight", L "mlp.gate.weight", AS_IS},
	{"ffn_gate_exps.weight", L "mlp.experts.%d.gate_proj.weight", EXPERTS},
	{"ffn_up_exps.weight", L "mlp.experts.%d.up_proj.weight", EXPERTS},
	{"ffn_down_exps.weight", L "mlp.experts.%d.down_proj.weight", EXPERTS},
	{"ffn_gate_inp_shexp.weight", L "mlp.shared_expert_gate.weight", ONE_ROW},
	{"ffn_gate_shexp.weight", L "mlp.shared_expert.gate_proj.weight", AS_IS},
	{"ffn_up_shexp.weight", L "mlp.shared_expert.up_proj.weight", AS_IS},
	{"ffn_down_shexp.weight", L "mlp.shared_expert.down_proj.weight", AS_IS},
	END,
};
/* Granite MoE's: the llama block, its experts in stacks, each expert's
 * gate and up one matrix. */
static const tensor_map granitemoe_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_q.weight", L "self_attn.q_proj.weight", UNPERMUTE_Q},
	{"attn_k.weight", L "self_attn.k_proj.weight", UNPERMUTE_K},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"ffn_norm.weight", L "post_attention_layernorm.weight", AS_IS},
	{"ffn_gate_inp.weight", L "block_sparse_moe.router.layer.weight", AS_IS},
	{"ffn_gate_exps.weight", L "block_sparse_moe.input_linear.weight", GATE_UP_STACK},
	{"ffn_down_exps.weight", L "block_sparse_moe.output_linear.weight", STACK},
	END,
};
/* Qwen3-MoE's and OLMoE's: their q and k norms differ in width, not name. */
static const tensor_map qk_norm_moe_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_q.weight", L "self_attn.q_proj.weight", AS_IS},
	{"attn_k.weight", L "self_attn.k_proj.weight", AS_IS},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_q_norm.weight", L "self_attn.q_norm.weight", AS_IS},
	{"attn_k_norm.weight", L "self_attn.k_norm.weight", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"ffn_norm.weight", L "post_attention_layernorm.weight", AS_IS},
	{"ffn_gate_inp.weight", L "mlp.gate.weight", AS_IS},
	{"ffn_gate_exps.weight", L "mlp.experts.%d.gate_proj.weight", EXPERTS},
	{"ffn_up_exps.weight", L "mlp.experts.%d.up_proj.weight", EXPERTS},
	{"ffn_down_exps.weight", L "mlp.experts.%d.down_proj.weight", EXPERTS},
	END,
};
/* dots.llm1's: qwen3's attention, a dense first layer, then experts with
 * a selection bias and shared experts. */
static const tensor_map dots1_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_q.weight", L "self_attn.q_proj.weight", AS_IS},
	{"attn_k.weight", L "self_attn.k_proj.weight", AS_IS},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_q_norm.weight", L "self_attn.q_norm.weight", AS_IS},
	{"attn_k_norm.weight", L "self_attn.k_norm.weight", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"ffn_norm.weight", L "post_attention_layernorm.weight", AS_IS},
	{"ffn_gate.weight", L "mlp.gate_proj.weight", AS_IS},
	{"ffn_up.weight", L "mlp.up_proj.weight", AS_IS},
	{"ffn_down.weight", L "mlp.down_proj.weight", AS_IS},
	{"ffn_gate_inp.weight", L "mlp.gate.weight", AS_IS},
	{"exp_probs_b.bias", L "mlp.gate.e_score_correction_bias", AS_IS},
	{"ffn_gate_exps.weight", L "mlp.experts.%d.gate_proj.weight", EXPERTS},
	{"ffn_up_exps.weight", L "mlp.experts.%d.up_proj.weight", EXPERTS},
	{"ffn_down_exps.weight", L "mlp.experts.%d.down_proj.weight", EXPERTS},
	{"ffn_gate_shexp.weight", L "mlp.shared_experts.gate_proj.weight", AS_IS},
	{"ffn_up_shexp.weight", L "mlp.shared_experts.up_proj.weight", AS_IS},
	{"ffn_down_shexp.weight", L "mlp.shared_experts.down_proj.weight", AS_IS},
	END,
};
/* gpt-oss's, as openai/gpt-oss-20b's checkpoint keeps it. */
static const tensor_map gpt_oss_layer[] = {
	{"attn_norm.weight", L "input_layernorm.weight", AS_IS},
	{"attn_q.weight", L "self_attn.q_proj.weight", AS_IS},
	{"attn_q.bias", L "self_attn.q_proj.bias", AS_IS},
	{"attn_k.weight", L "self_attn.k_proj.weight", AS_IS},
	{"attn_k.bias", L "self_attn.k_proj.bias", AS_IS},
	{"attn_v.weight", L "self_attn.v_proj.weight", AS_IS},
	{"attn_v.bias", L "self_attn.v_proj.bias", AS_IS},
	{"attn_output.weight", L "self_attn.o_proj.weight", AS_IS},
	{"attn_output.bias", L "self_attn.o_proj.bias", AS_IS},
	{"attn_sinks.weight", L "self_attn.sinks", AS_IS},
	{"ffn_norm.weight", L "post_attention_layernorm.weight", AS_IS},
	{"ffn_gate_inp.weight", L "mlp.router.weight", AS_IS},
	{"ffn_gate_inp.bias", L "mlp.router.bias", AS_IS},
	{"ffn_gate_exps.weight", L "mlp.experts.gate_up_proj", MXFP4_GATE_UP},
	{"ffn_gate_exps.bias", L "mlp.experts.gate_up_proj_bias", GATE_UP_BIAS},
	{"ffn_down_exps.weight", L "mlp.experts.down_proj", MXFP4_PARTS},
	{"ffn_down_exps.bias", L "mlp.experts.down_proj_bias", AS_IS},
	END,
};
#undef L

/* Gemma 2's and 3's windows, caps and scales. Their windowed layers'
 * pattern and Gemma 3's local RoPE base are not in GGUF files: the
 * published configs' values. */
static const config_map gemma2_config[] = {
	{"attn_logit_softcapping", "%s.attn_logit_softcapping", FLOAT},
	{"final_logit_softcapping", "%s.final_logit_softcapping", FLOAT},
	{"sliding_window", "%s.attention.sliding_window", INT},
	{"query_pre_attn_scalar", "%s.attention.key_length", INT},
	END,
};
static const config_map gemma3_config[] = {
	{"rope_scaling", NULL, ROPE_SCALING},
	{"rope_local_base_freq", "10000", NUMBER},
	{"sliding_window", "%s.attention.sliding_window", INT},
	{"sliding_window_pattern", "6", NUMBER},
	{"query_pre_attn_scalar", "%s.attention.key_length", INT},
	{"attn_logit_softcapping", NULL, NULL_VALUE},
	{"final_logit_softcapping", NULL, NULL_VALUE},
	END,
};
/* Phi-3's LongRoPE, as Phi-3-mini-128k's config.json has it; its
 * original context the trained one (no growth: cos and sin unscaled). */
static const config_map phi3_config[] = {
	{"original_max_position_embeddings", "%s.context_length", INT},
	{"rope_scaling", NULL, LONGROPE},
	{"partial_rotary_factor", "%s.rope.dimension_count", ROT_FRACTION},
	{"sliding_window", "%s.attention.sliding_window", INT},
	END,
};
static const config_map cohere2_config[] = {
	{"logit_scale", "%s.logit_scale", FLOAT},
	{"sliding_window", "%s.attention.sliding_window", INT},
	{"sliding_window_pattern", "4", NUMBER},
	END,
};
static const config_map olmo3_config[] = {
	{"sliding_window", "%s.attention.sliding_window", INT},
	END,
};
static const config_map smollm3_config[] = {
	{"no_rope_layer_interval", "4", NUMBER},
	{"tie_word_embeddings", NULL, TRUE_VALUE},
	END,
};
static const config_map glm4_config[] = {
	{"partial_rotary_factor", "%s.rope.dimension_count", ROT_FRACTION},
	{"attention_bias", NULL, TRUE_VALUE},
	END,
};
static const config_map granite_config[] = {
	{"embedding_multiplier", "%s.embedding_scale", FLOAT},
	{"residual_multiplier", "%s.residual_scale", FLOAT},
	{"attention_multiplier", "%s.attention.scale", FLOAT},
	{"logits_scaling", "%s.logit_scale", FLOAT},
	END,
};
static const config_map mixtral_config[] = {
	{"num_local_experts", "%s.expert_count", INT},
	{"num_experts_per_tok", "%s.expert_used_count", INT},
	END,
};
static const config_map qwen2moe_config[] = {
	{"num_experts", "%s.expert_count", INT},
	{"num_experts_per_tok", "%s.expert_used_count", INT},
	{"moe_intermediate_size", "%s.expert_feed_forward_length", INT},
	{"shared_expert_intermediate_size", "%s.expert_shared_feed_forward_length", INT},
	{"norm_topk_prob", NULL, FALSE_VALUE},
	END,
};
static const config_map qwen3moe_config[] = {
	{"num_experts", "%s.expert_count", INT},
	{"num_experts_per_tok", "%s.expert_used_count", INT},
	{"moe_intermediate_size", "%s.expert_feed_forward_length", INT},
	{"norm_topk_prob", NULL, TRUE_VALUE},
	END,
};
static const config_map dots1_config[] = {
	{"n_routed_experts", "%s.expert_count", INT},
	{"num_experts_per_tok", "%s.expert_used_count", INT},
	{"moe_intermediate_size", "%s.expert_feed_forward_length", INT},
	{"n_shared_experts", "%s.expert_shared_count", INT},
	{"first_k_dense_replace", "%s.leading_dense_block_count", INT},
	{"routed_scaling_factor", "%s.expert_weights_scale", FLOAT},
	{"norm_topk_prob", NULL, TRUE_VALUE},
	END,
};
static const config_map granitemoe_config[] = {
	{"num_local_experts", "%s.expert_count", INT},
	{"num_experts_per_tok", "%s.expert_used_count", INT},
	{"embedding_multiplier", "%s.embedding_scale", FLOAT},
	{"residual_multiplier", "%s.residual_scale", FLOAT},
	{"attention_multiplier", "%s.attention.scale", FLOAT},
	{"logits_scaling", "%s.logit_scale", FLOAT},
	END,
};
/* gpt-oss's intermediate_size is its experts' width. */
static const config_map gpt_oss_config[] = {
	{"hidden_size", "%s.embedding_length", INT},
	{"intermediate_size", "%s.expert_feed_forward_length", INT},
	{"num_hidden_layers", "%s.block_count", INT},
	{"num_attention_heads", "%s.attention.head_count", INT},
	{"num_key_value_heads", "%s.attention.head_count_kv", INT},
	{"head_dim", "%s.attention.key_length", INT},
	{"max_position_embeddings", "%s.context_length", INT},
	{"rms_norm_eps", "%s.attention.layer_norm_rms_epsilon", FLOAT},
	{"rope_theta", "%s.rope.freq_base", FLOAT},
	{"rope_scaling", NULL, NULL_VALUE},
	{"num_local_experts", "%s.expert_count", INT},
	{"num_experts_per_tok", "%s.expert_used_count", INT},
	{"sliding_window", "%s.attention.sliding_window", INT},
	END,
};
static const config_map olmoe_config[] = {
	{"num_experts", "%s.expert_count", INT},
	{"num_experts_per_tok", "%s.expert_used_count", INT},
	{"norm_topk_prob", NULL, FALSE_VALUE},
	END,
};

static const family families[] = {
	{"llama", "llama", llama_globals, llama_layer, llama_like_config, NULL, swiglu_ffn},
	{"gpt2", "gpt2", gpt2_globals, gpt2_layer, gpt2_config, NULL, NULL},
	{"qwen2", "qwen2", tied_globals, biased_attention, llama_like_config, NULL, swiglu_ffn},
	{"qwen3", "qwen3", tied_globals, qwen3_attention, llama_like_config, NULL, swiglu_ffn},
	{"gemma", "gemma", gemma_globals, gemma_layer, llama_like_config, NULL, NULL},
	{"phi2", "phi", phi2_globals, phi2_layer, layernorm_config, NULL, NULL},
	{"stablelm", "stablelm", ln_globals, stablelm_layer, layernorm_config, NULL, NULL},
	{"starcoder2", "starcoder2", starcoder2_globals, starcoder2_layer, layernorm_config, NULL, NULL},
	{"llama", "mixtral", llama_globals, mixtral_layer, llama_like_config, mixtral_config, NULL},
	{"qwen2moe", "qwen2_moe", llama_globals, qwen2moe_layer, llama_like_config, qwen2moe_config, NULL},
	{"qwen3moe", "qwen3_moe", llama_globals, qk_norm_moe_layer, llama_like_config, qwen3moe_config, NULL},
	{"olmoe", "olmoe", llama_globals, qk_norm_moe_layer, llama_like_config, olmoe_config, NULL},
	{"dots1", "dots1", llama_globals, dots1_layer, llama_like_config, dots1_config, NULL},
	{"granitemoe", "granitemoe", llama_globals, granitemoe_layer, llama_like_config, granitemoe_config, NULL},
	{"gpt-oss", "gpt_oss", llama_globals, gpt_oss_layer, gpt_oss_config, NULL, NULL},
	{"gemma2", "gemma2", gemma_globals, gemma2_layer, llama_like_config, gemma2_config, NULL},
	{"gemma3", "gemma3_text", gemma_globals, gemma3_layer, llama_like_config, gemma3_config, NULL},
	{"olmo2", "olmo2", llama_globals, olmo2_layer, llama_like_config, NULL, NULL},
	{"cohere2", "cohere2", tied_globals, cohere2_layer, layernorm_config, cohere2_config, NULL},
	{"granite", "granite", llama_globals, llama_layer, llama_like_config, granite_config, swiglu_ffn},
	{"phi3", "phi3", llama_globals, phi3_layer, llama_like_config, phi3_config, NULL},
	{"olmo2", "olmo3", llama_globals, olmo2_layer, llama_like_config, olmo3_config, NULL},
	{"smollm3", "smollm3", tied_globals, llama_layer, llama_like_config, smollm3_config, swiglu_ffn},
	{"glm4", "glm4", llama_globals, biased_attention, llama_like_config, glm4_config, glm4_ffn},
};
enum {
	LLAMA, GPT2, QWEN2, QWEN3, GEMMA, PHI2, STABLELM, STARCODER2, MIXTRAL, QWEN2MOE, QWEN3MOE, OLMOE, DOTS1,
	GRANITEMOE, GPT_OSS, GEMMA2, GEMMA3, OLMO2, COHERE2, GRANITE, PHI3, OLMO3, SMOLLM3, GLM4
};

/* What config.json says of RoPE scaling: the source's (none), Llama 3's,
 * or gpt-oss's YaRN, with truncate false, as its config.json has it (the
 * source is then the family model with transformers' frequencies as its
 * rope_freqs tensor), or true (the ramp rounded to whole pairs); or
 * LongRoPE with an original context half the trained one, whose cos and
 * sin scale transformers computes (the source then has it as
 * rope.scaling.attn_factor); or RoPE on half of each head (Phi-4-mini's
 * partial_rotary_factor, 0.75 there). */
enum rope_case { AS_SOURCE, LLAMA3, YARN_UNTRUNCATED, YARN_TRUNCATED, LONGROPE_GROWN, HALF_ROTARY };

typedef struct synth_case {
	const char *name;
	int family;          /* index in families */
	const char *dtype;   /* of every tensor in the checkpoint */
	int n_shards;        /* 0: one model.safetensors */
	float tol_source;    /* against the f32 GGUF */
	float tol_converted; /* against the checkpoint converted to GGUF */
	enum rope_case rope; /* the RoPE scaling config.json asks for */
	/* The source: this family model (family_models.h, written here), or
	 * NULL for the shared models/synthetic/ARCH-f32.gguf. */
	const char *family_model;
	/* config.json's layer_types, a letter a layer: S sliding_attention,
	 * F full_attention (NULL: none, the pattern decides); own_windows: not
	 * the source's windowed layers, so the logits must move from the
	 * source's, and the converted file keep them. */
	const char *layer_types;
	bool own_windows;
	/* A multimodal checkpoint's text model: its tensors' "model." as this
	 * prefix, its config in text_config (NULL: a text-only one). */
	const char *text_prefix;
	/* config.json's no_rope_layers, a letter a layer: R rotates, N has no
	 * RoPE (NULL: none, the interval decides). */
	const char *rope_layers;
	/* What loom convert says refusing it (NULL: it converts): layers
	 * without RoPE that no GGUF of the family can say; the logits must
	 * then move from the source's. */
	const char *convert_refused;
} synth_case;

static const synth_case cases[] = {
	{"llama-f32", LLAMA, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, NULL, NULL, false, NULL, NULL, NULL},
	{"llama-f16-sharded", LLAMA, "F16", 3, 0.1f, 2e-2f, AS_SOURCE, NULL, NULL, false, NULL, NULL, NULL},
	{"llama-bf16", LLAMA, "BF16", 0, 0.5f, 0.1f, AS_SOURCE, NULL, NULL, false, NULL, NULL, NULL},
	{"gpt2-f32-sharded", GPT2, "F32", 2, 1e-4f, 1e-4f, AS_SOURCE, NULL, NULL, false, NULL, NULL, NULL},
	{"gpt2-f16", GPT2, "F16", 0, 0.1f, 2e-2f, AS_SOURCE, NULL, NULL, false, NULL, NULL, NULL},
	{"gpt2-bf16-sharded", GPT2, "BF16", 4, 0.5f, 0.1f, AS_SOURCE, NULL, NULL, false, NULL, NULL, NULL},
	/* The source has no scaling: this one must differ from it. */
	{"llama-f32-llama3-rope", LLAMA, "F32", 0, 0.0f, 1e-4f, LLAMA3, NULL, NULL, false, NULL, NULL, NULL},
	/* Every other contract's Hugging Face section. */
	{"qwen2-f32", QWEN2, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, NULL, NULL, false, NULL, NULL, NULL},
	{"qwen3-bf16", QWEN3, "BF16", 2, 0.5f, 0.1f, AS_SOURCE, NULL, NULL, false, NULL, NULL, NULL},
	{"gemma-f32", GEMMA, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, NULL, NULL, false, NULL, NULL, NULL},
	{"phi2-f32", PHI2, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, NULL, NULL, false, NULL, NULL, NULL},
	{"stablelm-f16", STABLELM, "F16", 0, 0.1f, 2e-2f, AS_SOURCE, NULL, NULL, false, NULL, NULL, NULL},
	{"starcoder2-f32", STARCODER2, "F32", 3, 1e-4f, 1e-4f, AS_SOURCE, NULL, NULL, false, NULL, NULL, NULL},
	/* Mixtures of experts, each expert's matrices a tensor of their own,
	 * from the family models whose GGUFs match llama.cpp and numpy
	 * (test_families). */
	{"mixtral-f32", MIXTRAL, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "mixtral-f32", NULL, false, NULL, NULL, NULL},
	{"mixtral-bf16-sharded", MIXTRAL, "BF16", 3, 0.5f, 0.1f, AS_SOURCE, "mixtral-f32", NULL, false, NULL, NULL,
	 NULL},
	{"qwen2moe-f32", QWEN2MOE, "F32", 2, 1e-4f, 1e-4f, AS_SOURCE, "qwen2moe-f32", NULL, false, NULL, NULL, NULL},
	{"qwen3moe-f16", QWEN3MOE, "F16", 0, 0.1f, 2e-2f, AS_SOURCE, "qwen3moe-f32", NULL, false, NULL, NULL, NULL},
	{"olmoe-f32", OLMOE, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "olmoe-f32", NULL, false, NULL, NULL, NULL},
	{"dots1-f16", DOTS1, "F16", 2, 0.1f, 2e-2f, AS_SOURCE, "dots1-f32", NULL, false, NULL, NULL, NULL},
	{"granitemoe-bf16", GRANITEMOE, "BF16", 0, 0.5f, 0.1f, AS_SOURCE, "granitemoe-f32", NULL, false, NULL, NULL,
	 NULL},
	/* The experts' bytes are the GGUF's, reordered: only the rest rounds,
	 * in bf16 the router's logits too, which then may choose another
	 * expert for a token (1.22 from the source). */
	{"gpt-oss-mxfp4-f32", GPT_OSS, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "gpt-oss-mxfp4", NULL, false, NULL, NULL,
	 NULL},
	{"gpt-oss-mxfp4-bf16", GPT_OSS, "BF16", 2, 2.0f, 0.1f, AS_SOURCE, "gpt-oss-mxfp4", NULL, false, NULL, NULL,
	 NULL},
	/* Its YaRN as openai/gpt-oss-20b's config.json asks for it. */
	{"gpt-oss-mxfp4-yarn", GPT_OSS, "F32", 0, 1e-4f, 1e-4f, YARN_UNTRUNCATED, "gpt-oss-mxfp4", NULL, false, NULL,
	 NULL, NULL},
	/* The dense families with windows, caps, post-norms and multipliers
	 * (test_families' models): Gemma 3 as google/gemma-3-1b-it's
	 * config.json has it (model_type gemma3_text), with linear scaling
	 * of its global layers' RoPE. */
	{"gemma2-f32", GEMMA2, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "gemma2-f32", NULL, false, NULL, NULL, NULL},
	{"gemma3-f32", GEMMA3, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "gemma3-f32", NULL, false, NULL, NULL, NULL},
	{"gemma3-bf16-sharded", GEMMA3, "BF16", 2, 0.5f, 0.1f, AS_SOURCE, "gemma3-f32", NULL, false, NULL, NULL, NULL},
	{"olmo2-f32", OLMO2, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "olmo2-f32", NULL, false, NULL, NULL, NULL},
	{"cohere2-f16", COHERE2, "F16", 0, 0.1f, 2e-2f, AS_SOURCE, "cohere2-f32", NULL, false, NULL, NULL, NULL},
	{"granite-f32", GRANITE, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "granite-f32", NULL, false, NULL, NULL, NULL},
	/* Windowed layers listed, as gemma-3-270m's and gpt-oss-20b's
	 * config.json list them: the source's, then others (layers 2 and 7
	 * global, which no period gives: the converted file keeps them as
	 * llama.cpp's list of flags). */
	{"gemma3-f32-layer-types", GEMMA3, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "gemma3-f32", "SSSSSFSS", false, NULL,
	 NULL, NULL},
	{"gpt-oss-mxfp4-layer-types", GPT_OSS, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "gpt-oss-mxfp4", "SFSF", false,
	 NULL, NULL, NULL},
	{"gemma3-f32-own-windows", GEMMA3, "F32", 0, 0.0f, 1e-4f, AS_SOURCE, "gemma3-f32", "SSFSSSSF", true, NULL,
	 NULL, NULL},
	/* LongRoPE's factors as config.json's lists (Phi-3-mini-128k,
	 * Phi-3.5, Phi-4-mini), unscaled, and with the context grown 2x. */
	{"phi3-f32-longrope", PHI3, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "phi3-f32", NULL, false, NULL, NULL, NULL},
	{"phi3-f32-longrope-grown", PHI3, "F32", 2, 1e-4f, 1e-4f, LONGROPE_GROWN, "phi3-f32", NULL, false, NULL, NULL,
	 NULL},
	{"phi3-f32-half-rotary", PHI3, "F32", 0, 1e-4f, 1e-4f, HALF_ROTARY, "phi3-f32", NULL, false, NULL, NULL, NULL},
	/* Gemma 3's text model inside its multimodal checkpoints
	 * (Gemma3ForConditionalGeneration: 4B, 12B, 27B), as Google published
	 * them and as transformers 4.52 and later save them, a vision tower
	 * beside it; text_config leaves max_position_embeddings to
	 * transformers' default. */
	{"gemma3-multimodal", GEMMA3, "BF16", 2, 0.5f, 0.1f, AS_SOURCE, "gemma3-f32", NULL, false,
	 "language_model.model.", NULL, NULL},
	{"gemma3-multimodal-f32", GEMMA3, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "gemma3-f32", NULL, false,
	 "model.language_model.", NULL, NULL},
	/* gpt-oss with its experts dequantized, as transformers' parameters
	 * (unsloth/gpt-oss-20b-BF16; the f32 source's experts written so):
	 * turned at load. In bf16 its router's
	 * logits round too, and choose other experts for a token, as the MXFP4
	 * bf16 checkpoint's do. */
	{"gpt-oss-f32-turned", GPT_OSS, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "gpt-oss-f32", NULL, false, NULL, NULL,
	 NULL},
	{"gpt-oss-bf16-turned", GPT_OSS, "BF16", 2, 2.0f, 0.1f, AS_SOURCE, "gpt-oss-f32", NULL, false, NULL, NULL,
	 NULL},
	/* OLMo 3 (Olmo3ForCausalLM) as allenai/Olmo-3-1025-7B's config.json
	 * has it: its windowed layers listed; and with its Instruct models'
	 * YaRN. */
	{"olmo3-f32", OLMO3, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "olmo3-f32", "SSSF", false, NULL, NULL, NULL},
	{"olmo3-bf16-sharded", OLMO3, "BF16", 2, 0.5f, 0.1f, AS_SOURCE, "olmo3-f32", "SSSF", false, NULL, NULL, NULL},
	{"olmo3-f32-yarn", OLMO3, "F32", 0, 1e-4f, 1e-4f, YARN_UNTRUNCATED, "olmo3-f32", "SSSF", false, NULL, NULL,
	 NULL},
	/* SmolLM3 as HuggingFaceTB/SmolLM3-3B's config.json has it: its
	 * layers without RoPE listed (every fourth) beside the interval; and
	 * other layers listed, which its GGUF files (llama.cpp fixes the
	 * period) cannot say. */
	{"smollm3-f32", SMOLLM3, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "smollm3-f32", NULL, false, NULL, "RRRNRRRN", NULL},
	{"smollm3-bf16-sharded", SMOLLM3, "BF16", 2, 0.5f, 0.1f, AS_SOURCE, "smollm3-f32", NULL, false, NULL,
	 "RRRNRRRN",
	 NULL},
	{"smollm3-f32-own-nope", SMOLLM3, "F32", 0, 0.0f, 0.0f, AS_SOURCE, "smollm3-f32", NULL, false, NULL, "RNRRRRRN",
	 "leaves RoPE off other layers than a GGUF file"},
	/* GLM-4-0414 as THUDM/GLM-4-9B-0414's config.json has it
	 * (partial_rotary_factor 0.5, attention_bias true). */
	{"glm4-f32", GLM4, "F32", 0, 1e-4f, 1e-4f, AS_SOURCE, "glm4-f32", NULL, false, NULL, NULL, NULL},
	{"glm4-bf16-sharded", GLM4, "BF16", 2, 0.5f, 0.1f, AS_SOURCE, "glm4-f32", NULL, false, NULL, NULL, NULL},
	/* Mistral Small 3.1's (Mistral3ForConditionalGeneration). */
	{"mistral3-multimodal", LLAMA, "BF16", 2, 0.5f, 0.1f, AS_SOURCE, NULL, NULL, false, "language_model.model.",
	 NULL, NULL},
};
#define N_CASES ((int)(sizeof(cases) / sizeof(cases[0])))

/* Llama 3 scaling of the test's config, computed here in double. */
#define L3_FACTOR 8.0
#define L3_LOW 1.0
#define L3_HIGH 4.0
#define L3_ORIG 64.0
static double llama3_factor(int i, int n_rot, double theta)
{
	double wavelen = 2 * 3.14159265358979323846 * pow(theta, 2.0 * i / n_rot);
	if (wavelen < L3_ORIG / L3_HIGH)
		return 1.0;
	if (wavelen > L3_ORIG / L3_LOW)
		return L3_FACTOR;
	double smooth = (L3_ORIG / wavelen - L3_LOW) / (L3_HIGH - L3_LOW);
	return 1.0 / ((1.0 - smooth) / L3_FACTOR + smooth);
}

/* gpt-oss's YaRN, as its config.json gives it. */
#define YARN_FACTOR 32.0
#define YARN_BETA_FAST 32.0
#define YARN_BETA_SLOW 1.0
#define YARN_ORIG 4096.0

/* Its frequencies as transformers computes them with truncate: false
 * (modeling_rope_utils' YaRN, in double), as each pair's divisor: the ramp
 * between the pairs whose wavelengths turn beta_fast and beta_slow times
 * in the original context, its ends where those fall, not rounded. */
static void yarn_untruncated_divisors(int n_rot, double theta, float *out)
{
	const double pi = 3.14159265358979323846;
	double low = n_rot * log(YARN_ORIG / (YARN_BETA_FAST * 2 * pi)) / (2 * log(theta));
	double high = n_rot * log(YARN_ORIG / (YARN_BETA_SLOW * 2 * pi)) / (2 * log(theta));
	low = fmax(low, 0.0);
	high = fmin(high, n_rot - 1.0);
	for (int i = 0; i < n_rot / 2; i++) {
		double ramp = fmin(1.0, fmax(0.0, (i - low) / (high - low)));
		double extrapolation = 1.0 - ramp;
		double inv_freq = (1.0 - extrapolation) / YARN_FACTOR + extrapolation;
		out[i] = (float)(1.0 / inv_freq);
	}
}

/* The checkpoint being assembled: tensor specs and the bytes they own. */
/* Gemma 2's 26 layers of 11 tensors are the most. */
#define MAX_TENSORS 320

typedef struct checkpoint {
	st_tensor_spec t[MAX_TENSORS];
	void *owned[MAX_TENSORS];
	int n;
	char names[MAX_TENSORS][96];
} checkpoint;

static int64_t meta_int(const loom_model_file *f, const char *key)
{
	int64_t v;
	ck_assert_msg(loom_meta_get_int(f, key, &v) == LOOM_OK, "%s: %s", key, loom_last_error());
	return v;
}

static double meta_float(const loom_model_file *f, const char *key)
{
	double v;
	ck_assert_msg(loom_meta_get_float(f, key, &v) == LOOM_OK, "%s: %s", key, loom_last_error());
	return v;
}

/* values (rows x cols f32, row-major) stored as dtype; transposed writes the
 * cols x rows matrix (GPT-2's Conv1D). */
static void add(checkpoint *c, const char *name, const char *dtype, const float *values, int64_t rows, int64_t cols,
		bool vector, bool transposed)
{
	ck_assert(c->n < MAX_TENSORS);
	size_t es = strcmp(dtype, "F32") == 0 ? 4 : 2, n = (size_t)(rows * cols);
	unsigned char *bytes = malloc(n * es);
	ck_assert(bytes != NULL);
	for (int64_t r = 0; r < rows; r++) {
		for (int64_t k = 0; k < cols; k++) {
			float x = values[r * cols + k];
			size_t at = transposed ? (size_t)(k * rows + r) : (size_t)(r * cols + k);
			if (es == 4) {
				memcpy(bytes + at * 4, &x, 4);
			} else {
				uint16_t h = strcmp(dtype, "F16") == 0 ? ref_f32_to_fp16(x) : ref_f32_to_bf16(x);
				memcpy(bytes + at * 2, &h, 2);
			}
		}
	}
	snprintf(c->names[c->n], sizeof(c->names[0]), "%s", name);
	st_tensor_spec *t = &c->t[c->n];
	*t = (st_tensor_spec){.name = c->names[c->n], .dtype = dtype, .data = bytes};
	if (vector) {
		t->n_dims = 1;
		t->shape[0] = rows * cols;
	} else {
		t->n_dims = 2;
		t->shape[0] = transposed ? cols : rows;
		t->shape[1] = transposed ? rows : cols;
	}
	c->owned[c->n++] = bytes;
}

/* bytes (malloc'd, now the checkpoint's) as a tensor of n_dims dims. */
static void add_raw(checkpoint *c, const char *name, const char *dtype, void *bytes, int n_dims,
		    const int64_t shape[4])
{
	ck_assert(c->n < MAX_TENSORS);
	snprintf(c->names[c->n], sizeof(c->names[0]), "%s", name);
	st_tensor_spec *t = &c->t[c->n];
	*t = (st_tensor_spec){.name = c->names[c->n], .dtype = dtype, .n_dims = n_dims, .data = bytes};
	memcpy(t->shape, shape, sizeof(t->shape));
	c->owned[c->n++] = bytes;
}

/* An MXFP4 stack {n, rows, n_expert} (or gate's and up's, their rows
 * alternating) as transformers keeps it: NAME_blocks [n_expert, rows,
 * n / 32, 16], element 2j of a block in byte j's low nibble and 2j + 1 in
 * its high one, and NAME_scales [n_expert, rows, n / 32], the blocks'
 * exponents (convert_hf_to_gguf.py's nibble reordering, undone). */
static void add_mxfp4_parts(checkpoint *c, const char *name, const loom_file_tensor *w, const loom_file_tensor *up)
{
	ck_assert(w->dtype == LOOM_DTYPE_MXFP4 && w->n_dims == 3 && (up == NULL || up->dtype == LOOM_DTYPE_MXFP4));
	const int64_t nb = w->ne[0] / 32, rows = w->ne[1] * (up != NULL ? 2 : 1), x = w->ne[2];
	uint8_t *q = malloc((size_t)(x * rows * nb) * 16), *e = malloc((size_t)(x * rows * nb));
	ck_assert(q != NULL && e != NULL);
	for (int64_t ex = 0; ex < x; ex++)
		for (int64_t r = 0; r < rows; r++) {
			const loom_file_tensor *from = up != NULL && r % 2 == 1 ? up : w;
			const int64_t src_row = up != NULL ? r / 2 : r;
			const uint8_t *blk = (const uint8_t *)from->data + (size_t)((ex * w->ne[1] + src_row) * nb) * 17;
			for (int64_t b = 0; b < nb; b++, blk += 17) {
				const size_t at = (size_t)((ex * rows + r) * nb + b);
				uint8_t v[32];
				for (int j = 0; j < 16; j++) {
					v[j] = blk[1 + j] & 15;
					v[j + 16] = blk[1 + j] >> 4;
				}
				e[at] = blk[0];
				for (int j = 0; j < 16; j++)
					q[at * 16 + (size_t)j] = (uint8_t)(v[2 * j] | v[2 * j + 1] << 4);
			}
		}
	char part[128];
	snprintf(part, sizeof(part), "%s_blocks", name);
	add_raw(c, part, "U8", q, 4, (const int64_t[4]){x, rows, nb, 16});
	snprintf(part, sizeof(part), "%s_scales", name);
	add_raw(c, part, "U8", e, 3, (const int64_t[4]){x, rows, nb, 0});
}

/* Gate's and up's bias tables {F, n_expert} as one [n_expert, 2 F], each
 * expert's biases alternating gate, up. */
static void add_gate_up_bias(checkpoint *c, const char *name, const char *dtype, const loom_file_tensor *gate,
			     const loom_file_tensor *up)
{
	ck_assert(gate->dtype == LOOM_DTYPE_F32 && up->dtype == LOOM_DTYPE_F32 && gate->ne[0] == up->ne[0]);
	const int64_t f = gate->ne[0], x = gate->ne[1];
	float *both = malloc((size_t)(2 * f * x) * sizeof(float));
	ck_assert(both != NULL);
	for (int64_t ex = 0; ex < x; ex++)
		for (int64_t i = 0; i < f; i++) {
			both[ex * 2 * f + 2 * i] = ((const float *)gate->data)[ex * f + i];
			both[ex * 2 * f + 2 * i + 1] = ((const float *)up->data)[ex * f + i];
		}
	add(c, name, dtype, both, x, 2 * f, false, false);
	free(both);
}

/* An f32 stack {n_in, n_out, n_expert} (or gate's and up's, alternating
 * along n_out) as transformers' parameter [n_expert, n_in, n_out]. */
static void add_turned(checkpoint *c, const char *name, const char *dtype, const loom_file_tensor *w,
		       const loom_file_tensor *up)
{
	const bool gate_up = up != NULL;
	ck_assert(w->dtype == LOOM_DTYPE_F32 && w->n_dims == 3);
	ck_assert(up == NULL || (up->dtype == LOOM_DTYPE_F32 && up->ne[1] == w->ne[1]));
	const int64_t n_in = w->ne[0], rows = w->ne[1], x = w->ne[2], n_out = rows * (gate_up ? 2 : 1);
	float *all = malloc((size_t)(x * n_in * n_out) * sizeof(float));
	ck_assert(all != NULL);
	for (int64_t e = 0; e < x; e++)
		for (int64_t o = 0; o < n_out; o++) {
			const loom_file_tensor *from = gate_up && o % 2 == 1 ? up : w;
			const float *row = (const float *)from->data + (e * rows + (gate_up ? o / 2 : o)) * n_in;
			for (int64_t i = 0; i < n_in; i++)
				all[(e * n_in + i) * n_out + o] = row[i];
		}
	add(c, name, dtype, all, x * n_in, n_out, false, false);
	st_tensor_spec *spec = &c->t[c->n - 1];
	spec->n_dims = 3;
	spec->shape[0] = x;
	spec->shape[1] = n_in;
	spec->shape[2] = n_out;
	free(all);
}

/* GGUF llama files store Q and K rows permuted for adjacent-pair RoPE;
 * Hugging Face keeps each head's rotate-half order: rows 2j, 2j+1 of a
 * head go back to j and j + head_dim/2 (convert_hf_to_gguf's permute,
 * undone). */
static void unpermute(float *dst, const float *src, int64_t rows, int64_t cols, int64_t n_heads)
{
	const int64_t head_dim = rows / n_heads, half = head_dim / 2;
	for (int64_t h = 0; h < n_heads; h++)
		for (int64_t j = 0; j < half; j++) {
			memcpy(dst + (h * head_dim + j) * cols, src + (h * head_dim + 2 * j) * cols, (size_t)cols * 4);
			memcpy(dst + (h * head_dim + half + j) * cols, src + (h * head_dim + 2 * j + 1) * cols,
			       (size_t)cols * 4);
		}
}

/* Whether a tensor map (NULL: none) has experts' stacks. */
static bool maps_experts(const tensor_map *m)
{
	for (; m != NULL && m->gguf != NULL; m++)
		if (strstr(m->gguf, "_exps.") != NULL)
			return true;
	return false;
}

/* Whether a layer may lack the tensor: a mixture of experts whose first
 * layers are dense has the dense FFN there and the experts' tensors in
 * the rest. */
static bool ffn_of_some_layers(const family *fam, const char *gguf)
{
	const bool experts = maps_experts(fam->layer) || maps_experts(fam->layer_rest);
	return experts && strncmp(gguf, "ffn_norm", 8) != 0 &&
	       (strncmp(gguf, "ffn_", 4) == 0 || strncmp(gguf, "exp_probs_b", 11) == 0);
}

/* One GGUF tensor (f32) under its Hugging Face name; none where the GGUF
 * lacks it (a tied head, a layer without experts). */
static void add_mapped(checkpoint *c, const loom_model_file *f, const family *fam, const tensor_map *m, int il,
		       const char *dtype)
{
	char g[96], h[96], key[96];
	if (il >= 0) {
		snprintf(g, sizeof(g), "blk.%d.%s", il, m->gguf);
		snprintf(h, sizeof(h), m->hf, il);
	} else {
		snprintf(g, sizeof(g), "%s", m->gguf);
		snprintf(h, sizeof(h), "%s", m->hf);
	}
	const loom_file_tensor *t = test_find_file_tensor(f, g);
	ck_assert_msg(t != NULL || il < 0 || ffn_of_some_layers(fam, m->gguf), "the synthetic model lacks %s", g);
	if (t == NULL)
		return;
	if (m->how == MXFP4_PARTS || m->how == MXFP4_GATE_UP || m->how == GATE_UP_BIAS) {
		const loom_file_tensor *up = NULL;
		if (m->how != MXFP4_PARTS) {
			snprintf(key, sizeof(key), "blk.%d.ffn_up_exps.%s", il, m->how == GATE_UP_BIAS ? "bias" : "weight");
			up = test_find_file_tensor(f, key);
			ck_assert_msg(up != NULL, "the synthetic model lacks %s", key);
		}
		if (m->how == GATE_UP_BIAS)
			add_gate_up_bias(c, h, dtype, t, up);
		else if (t->dtype == LOOM_DTYPE_F32)
			add_turned(c, h, dtype, t, up);
		else
			add_mxfp4_parts(c, h, t, up);
		return;
	}
	ck_assert_msg(t->dtype == LOOM_DTYPE_F32, "%s is not f32", g);
	if (m->how == STACK || m->how == GATE_UP_STACK) {
		ck_assert_int_eq(t->n_dims, 3);
		const int64_t x = t->ne[2], rows = t->ne[1], cols = t->ne[0];
		const bool both = m->how == GATE_UP_STACK;
		const loom_file_tensor *up = NULL;
		if (both) {
			snprintf(key, sizeof(key), "blk.%d.ffn_up_exps.weight", il);
			up = test_find_file_tensor(f, key);
			ck_assert(up != NULL && up->dtype == LOOM_DTYPE_F32 && up->ne[1] == rows);
		}
		const int64_t per = (both ? 2 : 1) * rows * cols;
		float *all = malloc((size_t)(x * per) * sizeof(float));
		ck_assert(all != NULL);
		for (int64_t e = 0; e < x; e++) {
			memcpy(all + e * per, (const float *)t->data + e * rows * cols, (size_t)(rows * cols) * sizeof(float));
			if (both)
				memcpy(all + e * per + rows * cols, (const float *)up->data + e * rows * cols,
				       (size_t)(rows * cols) * sizeof(float));
		}
		add(c, h, dtype, all, x * per / cols, cols, false, false);
		st_tensor_spec *spec = &c->t[c->n - 1];
		spec->n_dims = 3;
		spec->shape[0] = x;
		spec->shape[1] = per / cols;
		spec->shape[2] = cols;
		free(all);
		return;
	}
	if (m->how == EXPERTS) {
		ck_assert_int_eq(t->n_dims, 3);
		const float *w = t->data;
		for (int64_t e = 0; e < t->ne[2]; e++) {
			snprintf(h, sizeof(h), m->hf, il, (int)e);
			add(c, h, dtype, w + e * t->ne[0] * t->ne[1], t->ne[1], t->ne[0], false, false);
		}
		return;
	}
	const bool vector = t->n_dims == 1 && m->how != ONE_ROW;
	int64_t rows = vector ? t->ne[0] : t->ne[1], cols = vector ? 1 : t->ne[0];
	const float *src = t->data;
	float *tmp = malloc((size_t)(rows * cols) * sizeof(float));
	ck_assert(tmp != NULL);
	memcpy(tmp, src, (size_t)(rows * cols) * sizeof(float));
	if (m->how == UNPERMUTE_Q || m->how == UNPERMUTE_K) {
		snprintf(key, sizeof(key), m->how == UNPERMUTE_Q ? "%s.attention.head_count" : "%s.attention.head_count_kv",
			 fam->arch);
		unpermute(tmp, src, rows, cols, meta_int(f, key));
	} else if (m->how == MINUS_ONE) {
		for (int64_t i = 0; i < rows; i++)
			tmp[i] -= 1.0f;
	} else if (m->how == FUSED_Q || m->how == FUSED_K || m->how == FUSED_V) {
		/* n_head == n_head_kv here: three equal parts. */
		int64_t part = rows / 3, first = (m->how - FUSED_Q) * part;
		memmove(tmp, tmp + first * cols, (size_t)(part * cols) * sizeof(float));
		rows = part;
	}
	if (vector)
		add(c, h, dtype, tmp, 1, rows, true, false);
	else
		add(c, h, dtype, tmp, rows, cols, false, m->how == CONV1D);
	free(tmp);
}

/* A multimodal checkpoint's names for its text model's tensors, and a
 * vision tower's tensors beside them, which no contract reads. */
static void nest_text_model(checkpoint *c, const char *prefix)
{
	for (int i = 0; i < c->n; i++) {
		char name[96];
		const char *old = c->names[i];
		if (strncmp(old, "model.", 6) == 0)
			snprintf(name, sizeof(name), "%s%s", prefix, old + 6);
		else if (strcmp(old, "lm_head.weight") == 0 && strncmp(prefix, "language_model.", 15) == 0)
			snprintf(name, sizeof(name), "language_model.lm_head.weight");
		else
			continue;
		snprintf(c->names[i], sizeof(c->names[0]), "%s", name);
	}
	static const float patch[4] = {0.5f, -0.25f, 0.125f, 1.0f};
	add(c, "vision_tower.vision_model.embeddings.patch_embedding.weight", "F32", patch, 2, 2, false, false);
	add(c, "multi_modal_projector.mm_input_projection_weight", "F32", patch, 2, 2, false, false);
}

/* add_mapped for each tensor of map (NULL: none). */
static void add_all_mapped(checkpoint *c, const loom_model_file *f, const family *fam, const tensor_map *map, int il,
			   const char *dtype)
{
	for (const tensor_map *m = map; m != NULL && m->gguf != NULL; m++)
		add_mapped(c, f, fam, m, il, dtype);
}

static void write_tensors(checkpoint *c, const loom_model_file *f, const family *fam, const char *dtype)
{
	char key[96];
	snprintf(key, sizeof(key), "%s.block_count", fam->arch);
	add_all_mapped(c, f, fam, fam->globals, -1, dtype);
	for (int il = 0; il < (int)meta_int(f, key); il++) {
		add_all_mapped(c, f, fam, fam->layer, il, dtype);
		add_all_mapped(c, f, fam, fam->layer_rest, il, dtype);
	}
}

/* rope_scaling as Hugging Face spells the GGUF's: its type and factor. */
static void add_rope_scaling(cJSON *j, const loom_model_file *f, const family *fam)
{
	char key[96];
	loom_string type;
	snprintf(key, sizeof(key), "%s.rope.scaling.type", fam->arch);
	if (loom_meta_get_string(f, key, &type) != LOOM_OK) {
		cJSON_AddNullToObject(j, "rope_scaling");
		return;
	}
	cJSON *r = cJSON_AddObjectToObject(j, "rope_scaling");
	char *name = loom_string_dup(type);
	cJSON_AddStringToObject(r, "rope_type", name);
	free(name);
	snprintf(key, sizeof(key), "%s.rope.scaling.factor", fam->arch);
	cJSON_AddNumberToObject(r, "factor", meta_float(f, key));
}

/* One LongRoPE list from the GGUF's factors tensor name. */
static void add_factor_list(cJSON *r, const loom_model_file *f, const char *tensor, const char *list)
{
	const loom_file_tensor *t = test_find_file_tensor(f, tensor);
	ck_assert_msg(t != NULL && t->dtype == LOOM_DTYPE_F32, "the synthetic model lacks f32 %s", tensor);
	cJSON *a = cJSON_AddArrayToObject(r, list);
	for (int64_t i = 0; i < t->ne[0]; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(((const float *)t->data)[i]));
}

/* config.json's members from list, of the GGUF's values. */
static void add_config(cJSON *j, const loom_model_file *f, const family *fam, const config_map *list)
{
	for (const config_map *m = list; m->hf != NULL; m++) {
		char key[96], head_key[96], embd_key[96];
		cJSON_DeleteItemFromObjectCaseSensitive(j, m->hf);
		if (m->gguf != NULL && m->kind != NUMBER)
			snprintf(key, sizeof(key), m->gguf, fam->arch);
		if (m->kind == NULL_VALUE) {
			cJSON_AddNullToObject(j, m->hf);
		} else if (m->kind == NUMBER) {
			cJSON_AddNumberToObject(j, m->hf, atof(m->gguf));
		} else if (m->kind == ROPE_SCALING) {
			add_rope_scaling(j, f, fam);
		} else if (m->kind == LONGROPE) {
			cJSON *r = cJSON_AddObjectToObject(j, m->hf);
			cJSON_AddStringToObject(r, "type", "longrope");
			add_factor_list(r, f, "rope_factors_long.weight", "long_factor");
			add_factor_list(r, f, "rope_factors_short.weight", "short_factor");
		} else if (m->kind == FALSE_VALUE) {
			cJSON_AddFalseToObject(j, m->hf);
		} else if (m->kind == TRUE_VALUE) {
			cJSON_AddTrueToObject(j, m->hf);
		} else if (loom_meta_find(f, key) == NULL) {
			continue;
		} else if (m->kind == INT) {
			cJSON_AddNumberToObject(j, m->hf, (double)meta_int(f, key));
		} else if (m->kind == FLOAT) {
			cJSON_AddNumberToObject(j, m->hf, meta_float(f, key));
		} else {
			snprintf(head_key, sizeof(head_key), "%s.attention.head_count", fam->arch);
			snprintf(embd_key, sizeof(embd_key), "%s.embedding_length", fam->arch);
			double head_dim = (double)meta_int(f, embd_key) / (double)meta_int(f, head_key);
			cJSON_AddNumberToObject(j, m->hf, (double)meta_int(f, key) / head_dim);
		}
	}
}

/* layer_types from a letter a layer (synth_case's), X for a type loom
 * does not run. */
static void add_layer_types(cJSON *j, const char *letters)
{
	cJSON *list = cJSON_AddArrayToObject(j, "layer_types");
	for (const char *c = letters; *c != '\0'; c++)
		cJSON_AddItemToArray(list, cJSON_CreateString(*c == 'S'   ? "sliding_attention"
							      : *c == 'F' ? "full_attention"
									  : "linear_attention"));
}

/* no_rope_layers from a letter a layer (synth_case's): 1 rotates. */
static void add_rope_layers(cJSON *j, const char *letters)
{
	cJSON *list = cJSON_AddArrayToObject(j, "no_rope_layers");
	for (const char *c = letters; *c != '\0'; c++)
		cJSON_AddItemToArray(list, cJSON_CreateNumber(*c == 'R'));
}

/* Whether a multimodal checkpoint of the family leaves its context to
 * transformers' default (Gemma 3's text_config does). */
static bool context_left_out(const family *fam)
{
	return strcmp(fam->arch, "gemma3") == 0;
}

/* A multimodal checkpoint's config.json around the text model's: its
 * members in text_config, less what transformers' defaults give; the
 * outer model_type Gemma 3's or Mistral Small 3.1's. */
static cJSON *nest_text_config(cJSON *text, const family *fam)
{
	const bool gemma = context_left_out(fam);
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "model_type", gemma ? "gemma3" : "mistral3");
	cJSON_ReplaceItemInObjectCaseSensitive(text, "model_type", cJSON_CreateString(gemma ? "gemma3_text" : "mistral"));
	if (gemma)
		cJSON_DeleteItemFromObject(text, "max_position_embeddings");
	cJSON_AddItemToObject(root, "text_config", text);
	cJSON *vision = cJSON_AddObjectToObject(root, "vision_config");
	cJSON_AddStringToObject(vision, "model_type", "siglip_vision_model");
	cJSON_AddNumberToObject(vision, "hidden_size", 1152);
	cJSON_AddNumberToObject(vision, "num_hidden_layers", 27);
	cJSON_AddNumberToObject(vision, "num_attention_heads", 16);
	return root;
}

static char *config_json(const loom_model_file *f, const family *fam, const synth_case *sc)
{
	const enum rope_case rope = sc->rope;
	const char *layer_types = sc->layer_types;
	const bool nested = sc->text_prefix != NULL;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "model_type", fam->model_type);
	add_config(j, f, fam, fam->config);
	if (fam->extra_config != NULL)
		add_config(j, f, fam, fam->extra_config);
	if (layer_types != NULL) {
		cJSON_DeleteItemFromObject(j, "sliding_window_pattern");
		add_layer_types(j, layer_types);
	}
	if (sc->rope_layers != NULL)
		add_rope_layers(j, sc->rope_layers);
	if (rope == YARN_UNTRUNCATED || rope == YARN_TRUNCATED) {
		cJSON_DeleteItemFromObject(j, "rope_scaling");
		cJSON *r = cJSON_AddObjectToObject(j, "rope_scaling");
		cJSON_AddStringToObject(r, "rope_type", "yarn");
		cJSON_AddNumberToObject(r, "factor", YARN_FACTOR);
		cJSON_AddNumberToObject(r, "beta_fast", YARN_BETA_FAST);
		cJSON_AddNumberToObject(r, "beta_slow", YARN_BETA_SLOW);
		cJSON_AddNumberToObject(r, "original_max_position_embeddings", YARN_ORIG);
		cJSON_AddBoolToObject(r, "truncate", rope == YARN_TRUNCATED);
	}
	if (rope == LONGROPE_GROWN) {
		const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(j, "max_position_embeddings");
		ck_assert(ctx != NULL);
		cJSON_ReplaceItemInObjectCaseSensitive(j, "original_max_position_embeddings",
						       cJSON_CreateNumber(ctx->valuedouble / 2));
	}
	if (rope == LLAMA3) {
		cJSON_DeleteItemFromObject(j, "rope_scaling");
		cJSON *r = cJSON_AddObjectToObject(j, "rope_scaling");
		cJSON_AddStringToObject(r, "rope_type", "llama3");
		cJSON_AddNumberToObject(r, "factor", L3_FACTOR);
		cJSON_AddNumberToObject(r, "low_freq_factor", L3_LOW);
		cJSON_AddNumberToObject(r, "high_freq_factor", L3_HIGH);
		cJSON_AddNumberToObject(r, "original_max_position_embeddings", L3_ORIG);
	}
	if (nested)
		j = nest_text_config(j, fam);
	char *text = cJSON_Print(j);
	cJSON_Delete(j);
	return text;
}

static void copy_file(const char *from, const char *to_dir, const char *name)
{
	size_t size;
	char *bytes = test_read_file(from, &size), path[4200];
	ck_assert_msg(bytes != NULL, "cannot read %s", from);
	snprintf(path, sizeof(path), "%s/%s", to_dir, name);
	FILE *out = fopen(path, "wb");
	ck_assert(out != NULL && fwrite(bytes, 1, size, out) == size && fclose(out) == 0);
	free(bytes);
}

static void write_json(cJSON *root, const char *dir, const char *name)
{
	char *text = cJSON_Print(root), path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *out = fopen(path, "w");
	ck_assert(out != NULL && fputs(text, out) >= 0 && fclose(out) == 0);
	free(text);
	cJSON_Delete(root);
}

/* A SentencePiece-style tokenizer.json (BPE with byte fallback, as
 * Llama's) as long as the GGUF's vocabulary, its unknown, control and byte
 * pieces the GGUF's. The synthetic words ("▁th" of "▁t" and "h", no piece
 * "h") are no vocabulary a BPE can reproduce, so each normal piece is
 * "▁q" and its id in three digits: none merges from others. */
static void write_sentencepiece_tokenizer(const loom_model_file *f, const char *dir)
{
	const void *tokens, *types;
	uint64_t n, n_types;
	ck_assert(loom_meta_get_array(f, "tokenizer.ggml.tokens", LOOM_META_STRING, &tokens, &n) == LOOM_OK);
	ck_assert(loom_meta_get_array(f, "tokenizer.ggml.token_type", LOOM_META_I32, &types, &n_types) == LOOM_OK);
	ck_assert(n_types == n);
	cJSON *root = cJSON_CreateObject(), *added = cJSON_AddArrayToObject(root, "added_tokens");
	/* Llama's normalizer: "▁" before the text and for every space. */
	cJSON *norm = cJSON_AddObjectToObject(root, "normalizer"), *steps = cJSON_AddArrayToObject(norm, "normalizers");
	cJSON_AddStringToObject(norm, "type", "Sequence");
	cJSON *prepend = cJSON_CreateObject(), *replace = cJSON_CreateObject();
	cJSON_AddStringToObject(prepend, "type", "Prepend");
	cJSON_AddStringToObject(prepend, "prepend", "\xe2\x96\x81");
	cJSON_AddStringToObject(replace, "type", "Replace");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(replace, "pattern"), "String", " ");
	cJSON_AddStringToObject(replace, "content", "\xe2\x96\x81");
	cJSON_AddItemToArray(steps, prepend);
	cJSON_AddItemToArray(steps, replace);
	cJSON *model = cJSON_AddObjectToObject(root, "model");
	cJSON_AddStringToObject(model, "type", "BPE");
	cJSON_AddTrueToObject(model, "byte_fallback");
	cJSON_AddStringToObject(model, "unk_token", "<unk>");
	cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
	cJSON_AddArrayToObject(model, "merges");
	ck_assert(n <= 1000);
	for (uint64_t i = 0; i < n; i++) {
		char *piece = loom_string_dup(((const loom_string *)tokens)[i]), word[16];
		const int32_t type = ((const int32_t *)types)[i];
		snprintf(word, sizeof(word), "\xe2\x96\x81q%03d", (int)i);
		cJSON_AddNumberToObject(vocab, type == 1 ? word : piece, (double)i);
		if (type == 2 || type == 3) { /* unknown, control */
			cJSON *a = cJSON_CreateObject();
			cJSON_AddNumberToObject(a, "id", (double)i);
			cJSON_AddStringToObject(a, "content", piece);
			cJSON_AddTrueToObject(a, "special");
			cJSON_AddItemToArray(added, a);
		}
		free(piece);
	}
	write_json(root, dir, "tokenizer.json");
}

/* The tokenizer: for SentencePiece-style vocabularies the stories
 * checkpoints' tokenizer.json (the synthetic models share their 512-token
 * vocabulary, which the test checks piece by piece), or one of the GGUF's
 * own pieces (own_vocab); for byte-level ones a tokenizer.json of the
 * GGUF's vocabulary and merges. */
static bool write_tokenizer(const loom_model_file *f, const char *dir, bool own_vocab)
{
	loom_string kind;
	ck_assert(loom_meta_get_string(f, "tokenizer.ggml.model", &kind) == LOOM_OK);
	if (loom_string_eq(kind, "llama") && own_vocab) {
		write_sentencepiece_tokenizer(f, dir);
		return true;
	}
	if (loom_string_eq(kind, "llama")) {
		char from[4096];
		if (!test_data_path(from, sizeof(from), "models/stories260K-hf/tokenizer.json"))
			return false;
		copy_file(from, dir, "tokenizer.json");
		return true;
	}
	const void *tokens, *merges;
	uint64_t n, n_merges;
	ck_assert(loom_meta_get_array(f, "tokenizer.ggml.tokens", LOOM_META_STRING, &tokens, &n) == LOOM_OK);
	ck_assert(loom_meta_get_array(f, "tokenizer.ggml.merges", LOOM_META_STRING, &merges, &n_merges) == LOOM_OK);
	cJSON *root = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(root, "model");
	cJSON_AddStringToObject(model, "type", "BPE");
	cJSON *vocab = cJSON_AddObjectToObject(model, "vocab"), *list = cJSON_AddArrayToObject(model, "merges");
	for (uint64_t i = 0; i < n; i++) {
		char *s = loom_string_dup(((const loom_string *)tokens)[i]);
		cJSON_AddNumberToObject(vocab, s, (double)i);
		free(s);
	}
	for (uint64_t i = 0; i < n_merges; i++) {
		char *s = loom_string_dup(((const loom_string *)merges)[i]);
		cJSON_AddItemToArray(list, cJSON_CreateString(s));
		free(s);
	}
	cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
	cJSON_AddStringToObject(pre, "type", "ByteLevel");
	cJSON_AddFalseToObject(pre, "add_prefix_space");
	cJSON_AddTrueToObject(pre, "use_regex");
	write_json(root, dir, "tokenizer.json");
	return true;
}

/* The checkpoint's vocabulary is the source's, piece by piece. */
static void check_same_pieces(const loom_model *a, const loom_model *b)
{
	ck_assert_int_eq(loom_model_n_vocab(a), loom_model_n_vocab(b));
	for (loom_token t = 0; t < loom_model_n_vocab(a); t++) {
		char x[256], y[256];
		size_t nx = 0, ny = 0;
		ck_assert(loom_token_to_piece(a, t, true, x, sizeof(x), &nx) == LOOM_OK);
		ck_assert(loom_token_to_piece(b, t, true, y, sizeof(y), &ny) == LOOM_OK);
		ck_assert_msg(nx == ny && memcmp(x, y, nx) == 0, "token %d: '%.*s' in the GGUF, '%.*s' in the checkpoint", t,
			      (int)nx, x, (int)ny, y);
	}
}

/* Logits of every position of a fixed token sequence. */
static float *logits_of(loom_model *m, int n_vocab)
{
	static const loom_token toks[] = {1, 17, 290, 42, 99, 250, 7, 280, 3, 64};
	const int n = (int)(sizeof(toks) / sizeof(toks[0]));
	int8_t want[16];
	memset(want, 1, sizeof(want));
	loom_context *ctx = test_context(m, 64, 64, LOOM_DTYPE_F32);
	loom_batch b = {.n_tokens = n, .tokens = (loom_token *)toks, .logits = want};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "decode: %s", loom_last_error());
	float *out = malloc((size_t)(n * n_vocab) * sizeof(float));
	for (int p = 0; p < n; p++)
		memcpy(out + (size_t)(p * n_vocab), loom_get_logits(ctx, p), (size_t)n_vocab * sizeof(float));
	loom_context_free(ctx);
	return out;
}

static float max_diff(const float *a, const float *b, size_t n)
{
	float m = 0;
	for (size_t i = 0; i < n; i++) {
		float d = fabsf(a[i] - b[i]);
		m = d > m || isnan(d) ? (isnan(d) ? INFINITY : d) : m;
	}
	return m;
}

/* The converted file carries the scaling as llama.cpp's rope_freqs
 * tensor, equal to the formula; and the scaling changed the logits. */
static void check_llama3_factors(const char *converted, float to_unscaled)
{
	loom_model_file *f = test_open_gguf(converted);
	ck_assert_msg(f != NULL, "%s: %s", converted, test_plugin_error());
	const loom_file_tensor *t = test_file_tensor(f, "rope_freqs.weight");
	const int n_rot = (int)meta_int(f, "llama.rope.dimension_count");
	const double theta = meta_float(f, "llama.rope.freq_base");
	ck_assert_int_eq(t->ne[0], n_rot / 2);
	int blended = 0;
	for (int i = 0; i < n_rot / 2; i++) {
		double want = llama3_factor(i, n_rot, theta), got = ((const float *)t->data)[i];
		ck_assert_msg(fabs(got - want) <= 1e-6 * want, "rope_freqs[%d] = %.9g, expected %.9g", i, got, want);
		blended += want > 1.0 && want < L3_FACTOR;
	}
	ck_assert_msg(blended > 0, "no pair falls between the two wavelengths");
	test_close_gguf(f);
	ck_assert_msg(to_unscaled > 1e-3f, "Llama 3 scaling left the logits unchanged (%g)", to_unscaled);
}

/* Whether y, a period n of sliding_window_pattern (layer i windowed unless
 * (i + 1) % n == 0), windows the layers x, llama.cpp's list of u32 flags,
 * does: loom convert writes the period where one gives the list. */
static bool same_windowed_layers(const loom_meta_value *x, const loom_meta_value *y)
{
	if (x->type != LOOM_META_ARRAY || x->elem_type != LOOM_META_U32 || y->type != LOOM_META_U32 || y->v.u == 0)
		return false;
	const uint32_t *flags = x->v.array;
	for (uint64_t il = 0; il < x->count; il++)
		if ((flags[il] != 0) != ((il + 1) % y->v.u != 0))
			return false;
	return true;
}

/* Every hyperparameter key of the source GGUF (vocab_size aside, which
 * llama.cpp takes from the token list, and `unsaid`, which the checkpoint
 * left to its defaults) is in the converted file with the same type and
 * value, or for the windowed layers the same layers. */
static void check_converted_keys(const char *src, const char *converted, const char *arch, const char *unsaid)
{
	loom_model_file *a = test_open_gguf(src), *b = test_open_gguf(converted);
	ck_assert_msg(a != NULL && b != NULL, "open: %s", test_plugin_error());
	size_t n = strlen(arch);
	for (uint64_t i = 0; i < a->n_meta; i++) {
		loom_string k = a->meta[i].key;
		if (k.len <= n || memcmp(k.data, arch, n) != 0 || k.data[n] != '.' || loom_string_eq(k, "llama.vocab_size") ||
		    (unsaid != NULL && loom_string_eq(k, unsaid)))
			continue;
		char *key = loom_string_dup(k);
		const loom_meta_value *x = &a->meta[i].value, *y = loom_meta_find(b, key);
		ck_assert_msg(y != NULL, "the converted file lacks %s", key);
		if (same_windowed_layers(x, y)) {
			free(key);
			continue;
		}
		ck_assert_msg(x->type == y->type, "%s: %s, the source has %s", key, loom_meta_type_name(y->type),
			      loom_meta_type_name(x->type));
		bool same = x->type == LOOM_META_F32 ? fabs(x->v.f - y->v.f) <= 1e-6 * fabs(x->v.f) : x->v.u == y->v.u;
		ck_assert_msg(same, "%s differs in the converted file", key);
		free(key);
	}
	test_close_gguf(a);
	test_close_gguf(b);
}

/* A multimodal checkpoint's text_config left its context to
 * transformers' default (131072 for Gemma 3), which the converted file
 * has; the other keys are the source's. */
static void check_nested_defaults(const char *src, const char *converted, const char *arch)
{
	char key[96];
	snprintf(key, sizeof(key), "%s.context_length", arch);
	check_converted_keys(src, converted, arch, key);
	loom_model_file *f = test_open_gguf(converted);
	ck_assert_msg(f != NULL, "%s: %s", converted, test_plugin_error());
	ck_assert_int_eq(meta_int(f, key), 131072);
	test_close_gguf(f);
}

/* dir's config.json, parsed. */
static cJSON *read_config(const char *dir)
{
	char path[4200];
	size_t size;
	snprintf(path, sizeof(path), "%s/config.json", dir);
	char *text = test_read_file(path, &size);
	ck_assert(text != NULL);
	cJSON *root = cJSON_Parse(text);
	free(text);
	ck_assert(root != NULL);
	return root;
}

/* The checkpoint asks for YaRN without truncation: the converted file
 * keeps that in loom's key beside llama.cpp's YaRN keys, and the same
 * checkpoint with truncate: true (the ramp's ends rounded, as ggml does)
 * computes something else, far outside the tolerance the untruncated one
 * met. */
static void check_yarn_untruncated(loom_runtime *rt, const char *dir, const char *converted, const char *arch,
				   const float *source_logits, int n_vocab, float tol)
{
	loom_model_file *f = test_open_gguf(converted);
	ck_assert_msg(f != NULL, "%s: %s", converted, test_plugin_error());
	char key[96];
	snprintf(key, sizeof(key), "%s.rope.scaling.truncate", arch);
	const loom_meta_value *v = loom_meta_find(f, key);
	ck_assert_msg(v != NULL && v->type == LOOM_META_BOOL && !v->v.b, "the converted file lacks %s = false", key);
	test_close_gguf(f);

	cJSON *root = read_config(dir);
	cJSON *scaling = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
	ck_assert(scaling != NULL);
	cJSON_ReplaceItemInObjectCaseSensitive(scaling, "truncate", cJSON_CreateTrue());
	write_json(root, dir, "config.json");
	loom_model *rounded = NULL;
	ck_assert_msg(loom_model_load(rt, dir, NULL, &rounded) == LOOM_OK, "%s: %s", dir, loom_last_error());
	float *r = logits_of(rounded, n_vocab);
	float apart = max_diff(source_logits, r, (size_t)n_vocab * 10);
	printf("hf yarn truncated: max |dlogit| to transformers' untruncated frequencies %.3g\n", apart);
	ck_assert_msg(apart > 100 * tol, "rounding YaRN's ramp moved the logits by %g only", apart);
	free(r);
	loom_model_free(rounded);
}

/* A checkpoint no GGUF of its family can say: loom runs it as it asks,
 * which moves the logits from the source's, and loom convert refuses it,
 * saying why, and writes no file. */
static void check_convert_refused(loom_runtime *rt, loom_model *source, loom_model *hf, const char *dir,
				  const char *converted, const char *why)
{
	const int n_vocab = loom_model_n_vocab(source);
	float *a = logits_of(source, n_vocab), *b = logits_of(hf, n_vocab);
	float apart = max_diff(a, b, (size_t)n_vocab * 10);
	printf("hf %s: max |dlogit| to the source %.3g, convert refused\n", dir, apart);
	ck_assert_msg(apart > 1e-2f, "%s: its own layers left the logits within %g of the source's", dir, apart);
	ck_assert_int_eq(loom_convert(rt, dir, converted, NULL), LOOM_ERR_UNSUPPORTED);
	ck_assert_msg(strstr(loom_last_error(), why) != NULL, "convert said: %s", loom_last_error());
	ck_assert_msg(access(converted, F_OK) != 0, "a refused convert left %s", converted);
	free(a);
	free(b);
}

START_TEST(synthetic_checkpoint_computes_its_source)
{
	const synth_case *sc = &cases[_i];
	const family *fam = &families[sc->family];
	char src[4096], rel[128], dir[4096], converted[4200];
	snprintf(rel, sizeof(rel), "hf-%s", sc->name); /* apart from test_families' */
	snprintf(dir, sizeof(dir), "%s", test_tmp_dir(rel));
	float divisors[64];
	if (sc->family_model != NULL) {
		/* With YaRN untruncated the source has transformers' frequencies
		 * written out, and its magnitude correction on cos and sin. */
		family_model fm = *family_model_named(sc->family_model);
		if (sc->rope == HALF_ROTARY)
			fm.config.n_rot = fm.config.n_embd / fm.config.n_head / 2;
		if (sc->rope == LONGROPE_GROWN) {
			const double orig = fm.config.n_ctx / 2.0;
			fm.config.rope_attn_factor = (float)sqrt(1.0 + log(2.0) / log(orig));
		}
		if (sc->rope == YARN_UNTRUNCATED) {
			const int head_dim = fm.config.head_dim != 0 ? fm.config.head_dim : fm.config.n_embd / fm.config.n_head;
			const int n_rot = fm.config.n_rot != 0 ? fm.config.n_rot : head_dim;
			ck_assert(n_rot / 2 <= 64);
			yarn_untruncated_divisors(n_rot, fm.config.rope_theta, divisors);
			fm.config.rope_freqs = divisors;
			fm.config.rope_attn_factor = (float)(0.1 * log(YARN_FACTOR) + 1.0);
		}
		snprintf(src, sizeof(src), "%s/source.gguf", dir);
		ck_assert(family_model_write(NULL, &fm, src));
	} else {
		snprintf(rel, sizeof(rel), "models/synthetic/%s-f32.gguf", fam->arch);
		if (!test_data_path(src, sizeof(src), rel))
			return;
	}
	loom_model_file *f = test_open_gguf(src);
	ck_assert_msg(f != NULL, "%s: %s", src, test_plugin_error());
	checkpoint *c = calloc(1, sizeof(*c));
	write_tensors(c, f, fam, sc->dtype);
	if (sc->text_prefix != NULL)
		nest_text_model(c, sc->text_prefix);
	char path[4200], *config = config_json(f, fam, sc);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	ck_assert(sc->n_shards > 0 ? st_write_sharded(dir, c->t, c->n, sc->n_shards) : st_write_file(path, c->t, c->n));
	ck_assert(st_write_config(dir, config));
	bool have_tokenizer = write_tokenizer(f, dir, sc->family_model != NULL);
	free(config);
	for (int i = 0; i < c->n; i++)
		free(c->owned[i]);
	free(c);
	test_close_gguf(f);
	if (!have_tokenizer)
		return;

	loom_runtime *rt = test_runtime("cpu-avx2", 2);
	if (rt == NULL)
		rt = test_runtime("cpu-generic", 2);
	loom_model *source = NULL, *hf = NULL, *conv = NULL;
	ck_assert_msg(loom_model_load(rt, src, NULL, &source) == LOOM_OK, "%s: %s", src, loom_last_error());
	ck_assert_msg(loom_model_load(rt, dir, NULL, &hf) == LOOM_OK, "%s: %s", dir, loom_last_error());
	snprintf(converted, sizeof(converted), "%s/converted.gguf", dir);
	if (sc->convert_refused != NULL) {
		check_convert_refused(rt, source, hf, dir, converted, sc->convert_refused);
		loom_model_free(source);
		loom_model_free(hf);
		loom_runtime_free(rt);
		return;
	}
	ck_assert_msg(loom_convert(rt, dir, converted, NULL) == LOOM_OK, "convert: %s", loom_last_error());
	ck_assert_msg(loom_model_load(rt, converted, NULL, &conv) == LOOM_OK, "%s: %s", converted, loom_last_error());
	const int n_vocab = loom_model_n_vocab(source);
	if (sc->family_model == NULL)
		check_same_pieces(source, hf);
	else
		ck_assert_int_eq(loom_model_n_vocab(hf), n_vocab);
	float *a = logits_of(source, n_vocab), *b = logits_of(hf, n_vocab), *d = logits_of(conv, n_vocab);
	size_t n = (size_t)n_vocab * 10;
	float to_source = max_diff(a, b, n), to_converted = max_diff(b, d, n);
	printf("hf %-20s %-24s max |dlogit| to the f32 GGUF %.3g, to its converted GGUF %.3g\n", sc->name,
	       loom_model_format(hf), to_source, to_converted);
	if (sc->rope == LLAMA3)
		check_llama3_factors(converted, to_source);
	else if (sc->rope == YARN_UNTRUNCATED)
		check_yarn_untruncated(rt, dir, converted, fam->arch, a, n_vocab, sc->tol_source);
	else if (sc->text_prefix == NULL || !context_left_out(fam))
		check_converted_keys(src, converted, fam->arch, NULL);
	else
		check_nested_defaults(src, converted, fam->arch);
	if (sc->own_windows)
		ck_assert_msg(to_source > 1e-2f, "%s: its own windowed layers left the logits within %g of the source's",
			      sc->name, to_source);
	else if (sc->rope != LLAMA3)
		ck_assert_msg(to_source <= sc->tol_source, "%s: %g from the source model (tolerance %g)", sc->name,
			      to_source, sc->tol_source);
	ck_assert_msg(to_converted <= sc->tol_converted, "%s: %g from its converted GGUF (tolerance %g)", sc->name,
		      to_converted, sc->tol_converted);
	free(a);
	free(b);
	free(d);
	loom_model_free(source);
	loom_model_free(hf);
	loom_model_free(conv);
	loom_runtime_free(rt);
}
END_TEST

/* What a broken checkpoint does to a tensor: changes it, or leaves it
 * out (false). */
typedef bool (*tensor_edit)(st_tensor_spec *t, int how);

/* The checkpoint of a family model, each tensor through edit; returns how
 * many it left out. */
static int write_edited_checkpoint(const char *dir, const char *model, int fam, tensor_edit edit, int how)
{
	char src[4200], path[4200];
	snprintf(src, sizeof(src), "%s/source.gguf", dir);
	ck_assert(family_model_write(NULL, family_model_named(model), src));
	loom_model_file *f = test_open_gguf(src);
	ck_assert_msg(f != NULL, "%s: %s", src, test_plugin_error());
	checkpoint *c = calloc(1, sizeof(*c));
	write_tensors(c, f, &families[fam], "F32");
	int kept = 0;
	for (int i = 0; i < c->n; i++)
		if (edit(&c->t[i], how))
			c->t[kept++] = c->t[i];
	const synth_case plain = {.rope = AS_SOURCE};
	char *config = config_json(f, &families[fam], &plain);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	ck_assert(st_write_file(path, c->t, kept));
	ck_assert(st_write_config(dir, config));
	ck_assert(write_tokenizer(f, dir, true));
	free(config);
	for (int i = 0; i < c->n; i++)
		free(c->owned[i]);
	const int left_out = c->n - kept;
	free(c);
	test_close_gguf(f);
	return left_out;
}

/* gpt-oss's MXFP4 down projection of layer 2 with its scales a block
 * short (how 0), or its blocks left out (1). */
static bool break_mxfp4(st_tensor_spec *t, int how)
{
	if (how == 0 && strcmp(t->name, "model.layers.2.mlp.experts.down_proj_scales") == 0)
		t->shape[2]--;
	return !(how == 1 && strcmp(t->name, "model.layers.2.mlp.experts.down_proj_blocks") == 0);
}

START_TEST(mxfp4_parts_that_do_not_fit_are_refused)
{
	static const char *const want[] = {
		"tensors 'model.layers.2.mlp.experts.down_proj_blocks' and 'model.layers.2.mlp.experts.down_proj_scales' "
		"are not the parts of one MXFP4 tensor",
		"tensor 'model.layers.2.mlp.experts.down_proj_blocks' is missing beside "
		"'model.layers.2.mlp.experts.down_proj_scales'",
	};
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	for (int mutate = 0; mutate < 2; mutate++) {
		char rel[64], dir[4096];
		snprintf(rel, sizeof(rel), "hf-gpt-oss-broken-%d", mutate);
		snprintf(dir, sizeof(dir), "%s", test_tmp_dir(rel));
		ck_assert_int_eq(write_edited_checkpoint(dir, "gpt-oss-mxfp4", GPT_OSS, break_mxfp4, mutate), mutate);
		loom_model *m = NULL;
		ck_assert_int_eq(loom_model_load(rt, dir, NULL, &m), LOOM_ERR_BAD_FORMAT);
		ck_assert_ptr_null(m);
		ck_assert_msg(strstr(loom_last_error(), want[mutate]) != NULL, "%s", loom_last_error());
	}
	loom_runtime_free(rt);
}
END_TEST

/* Mixtral's expert 5 of layer 1, its up matrix left out. */
static bool drop_an_expert(st_tensor_spec *t, int how)
{
	(void)how;
	return strcmp(t->name, "model.layers.1.block_sparse_moe.experts.5.w3.weight") != 0;
}

/* A checkpoint whose experts lack one (a shard left out, a file cut
 * short) is refused with the missing tensor's name, not run without it. */
START_TEST(a_missing_expert_is_named)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", test_tmp_dir("hf-mixtral-missing-expert"));
	ck_assert_int_eq(write_edited_checkpoint(dir, "mixtral-f32", MIXTRAL, drop_an_expert, 0), 1);

	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = NULL;
	ck_assert_int_eq(loom_model_load(rt, dir, NULL, &m), LOOM_ERR_BAD_FORMAT);
	ck_assert_ptr_null(m);
	ck_assert_msg(strstr(loom_last_error(), "tensor 'model.layers.1.block_sparse_moe.experts.5.w3.weight' "
				 "(ffn_up_exps, expert 5 of 8) is missing") != NULL, "%s", loom_last_error());
	loom_runtime_free(rt);
}
END_TEST

static bool keep_all(st_tensor_spec *t, int how)
{
	(void)t;
	(void)how;
	return true;
}

/* A layer type loom does not run (Qwen3-Next's linear attention), or a
 * list of another length than the layers, is refused by name, not run as
 * the pattern would have it. */
/* A checkpoint of family model `model` whose config.json edit(root, i)
 * changes is refused at load, saying want. */
static void check_config_refused(loom_runtime *rt, const char *rel, const char *model, int fam,
				 void (*edit)(cJSON *root, int i), int i, const char *want)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", test_tmp_dir(rel));
	ck_assert_int_eq(write_edited_checkpoint(dir, model, fam, keep_all, 0), 0);
	cJSON *root = read_config(dir);
	edit(root, i);
	write_json(root, dir, "config.json");
	loom_model *m = NULL;
	ck_assert_int_ne(loom_model_load(rt, dir, NULL, &m), LOOM_OK);
	ck_assert_ptr_null(m);
	ck_assert_msg(strstr(loom_last_error(), want) != NULL, "%s", loom_last_error());
}

static void unrunnable_layer_types(cJSON *root, int i)
{
	add_layer_types(root, i == 0 ? "SSXSSFSS" : "SSSF");
}

/* no_rope_layers four long for eight layers, or of strings. */
static void bad_no_rope_layers(cJSON *root, int i)
{
	if (i == 0) {
		add_rope_layers(root, "RRRN");
		return;
	}
	cJSON *list = cJSON_AddArrayToObject(root, "no_rope_layers");
	for (int il = 0; il < 8; il++)
		cJSON_AddItemToArray(list, cJSON_CreateString("rope"));
}

/* A family model's checkpoint edited two ways (edit(root, i), i = 0, 1),
 * each refused at load saying want[i]. */
typedef struct config_edit {
	const char *model;
	int family;
	void (*edit)(cJSON *root, int i);
	const char *want[2];
} config_edit;

static void check_edits_refused(const char *prefix, const config_edit *edits, size_t n)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	for (size_t k = 0; k < n; k++)
		for (int i = 0; i < 2; i++) {
			char rel[64];
			snprintf(rel, sizeof(rel), "%s-%zu-%d", prefix, k, i);
			check_config_refused(rt, rel, edits[k].model, edits[k].family, edits[k].edit, i, edits[k].want[i]);
		}
	loom_runtime_free(rt);
}

/* Per-layer lists of config.json that loom cannot run, each refused by
 * name: layer_types with a type loom lacks or too short, no_rope_layers
 * too short or of strings. */
START_TEST(bad_layer_lists_are_refused)
{
	static const config_edit lists[] = {
		{"gemma3-f32", GEMMA3, unrunnable_layer_types,
		 {"layer_types: layer 2 is of type 'linear_attention', not one loom runs (sliding_attention, full_attention)",
		  "metadata key 'layer_types' has 4 entries for 8 layers"}},
		{"smollm3-f32", SMOLLM3, bad_no_rope_layers,
		 {"metadata key 'no_rope_layers' has 4 entries for 8 layers",
		  "metadata key 'no_rope_layers' is not a list of numbers"}},
	};
	check_edits_refused("hf-bad-list", lists, sizeof(lists) / sizeof(lists[0]));
}
END_TEST

/* config.json's number key set to v, or to a string (i = 1). */
static void set_number_or_string(cJSON *root, const char *key, double v, int i)
{
	cJSON_DeleteItemFromObject(root, key);
	if (i == 0)
		cJSON_AddNumberToObject(root, key, v);
	else
		cJSON_AddStringToObject(root, key, "two");
}

static void bad_experts_used(cJSON *root, int i)
{
	set_number_or_string(root, "num_experts_per_tok", 9, i);
}

static void bad_window(cJSON *root, int i)
{
	set_number_or_string(root, "sliding_window", 0, i);
}

/* Expert and window values of config.json that loom cannot run, each
 * refused by name: more experts a token than a layer has, a window of 0
 * for a family whose layers are windowed, either as a string. */
START_TEST(bad_expert_and_window_values_are_refused)
{
	static const config_edit values[] = {
		{"mixtral-f32", MIXTRAL, bad_experts_used, {"9 experts a token out of 8", "'num_experts_per_tok'"}},
		{"gemma3-f32", GEMMA3, bad_window, {"sliding_window = 0", "'sliding_window'"}},
		{"gpt-oss-mxfp4", GPT_OSS, bad_window, {"sliding_window = 0", "'sliding_window'"}},
	};
	check_edits_refused("hf-bad-value", values, sizeof(values) / sizeof(values[0]));
}
END_TEST

static Suite *hf_synthetic_suite(void)
{
	Suite *s = suite_create("hf_synthetic");
	TCase *tc = tcase_create("checkpoints");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, synthetic_checkpoint_computes_its_source, 0, N_CASES);
	tcase_add_test(tc, a_missing_expert_is_named);
	tcase_add_test(tc, mxfp4_parts_that_do_not_fit_are_refused);
	tcase_add_test(tc, bad_layer_lists_are_refused);
	tcase_add_test(tc, bad_expert_and_window_values_are_refused);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(hf_synthetic_suite)
