/*
 * synth_model.h - random-weight llama models, built in memory and written
 * as GGUF files, for tests that need a model of a chosen shape.
 *
 *     synth_config c = synth_default_config();
 *     c.n_embd = 96;
 *     c.weight_type = LOOM_DTYPE_Q8_0;
 *     synth_model *sm = synth_model_build(&c, NULL);
 *     synth_model_write(sm, path);        (then loom_model_load(rt, path, ...))
 *     ... ref_model_create(sm) reads the same tensor bytes ...
 *     synth_model_free(sm);
 *
 * The file is a complete llama GGUF: hyperparameters under "llama.*", a
 * SentencePiece-style vocabulary ("<unk>", "<s>", "</s>", the 256 byte
 * tokens "<0x00>".."<0xFF>", then "▁the", "▁a", ... with scores) and every
 * tensor the llama contract asks for. 2-D weights are stored in
 * weight_type (F32, F16, BF16 or Q8_0, encoded with round-to-nearest-even;
 * Q8_0 blocks are {fp16 d; int8 qs[32]} with d = amax / 127); norm weights
 * are F32. Values come from a seeded generator, so a config always gives the
 * same bytes, and the underlying values do not depend on weight_type.
 *
 * synth_faults breaks one thing on purpose, for tests of load errors.
 * Misuse (a config that cannot be laid out) aborts with a message.
 */
#ifndef LOOM_TEST_SYNTH_MODEL_H
#define LOOM_TEST_SYNTH_MODEL_H

#include "loom/plugin_api.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct synth_config {
	int n_vocab;   /* tokens and embedding rows; at least SYNTH_MIN_VOCAB */
	int n_embd;
	int n_layer;
	int n_head;
	int n_head_kv;
	int head_dim;  /* 0: n_embd / n_head */
	int n_rot;     /* rotated dimensions per head; 0: head_dim */
	int n_ff;
	int n_ctx;     /* the training context written to the file */
	float rope_theta;
	float norm_eps;
	const char *rope_scaling;  /* rope.scaling.type ("linear", "yarn"); NULL: none */
	float rope_scaling_factor; /* rope.scaling.factor, with rope_scaling */
	float rope_freq_factor;    /* nonzero: rope_freqs.weight, n_rot / 2 copies of it */
	const float *rope_freqs;   /* or these n_rot / 2 values of it */
	float rope_attn_factor;    /* nonzero: rope.scaling.attn_factor */
	loom_dtype weight_type; /* of every 2-D weight */
	bool tied;     /* no output.weight: the head reuses token_embd */
	bool post_norms; /* blk.N.post_attention_norm and post_ffw_norm (llama.cpp's
			  * Gemma 2 names): each output normalised before its residual add */
	/* Granite's multipliers, written as {arch}.embedding_scale,
	 * .residual_scale, .attention.scale and .logit_scale when nonzero. */
	float embedding_mult, residual_mult, attention_mult, logit_scale;
	/* Gemma's query_pre_attn_scalar, as {arch}.attention.query_pre_attn_scalar
	 * when nonzero: q.k times it^-1/2. */
	float attention_scale_base;
	/* Gemma 2's soft-caps ({arch}.attn_logit_softcapping,
	 * .final_logit_softcapping) and sliding window
	 * ({arch}.attention.sliding_window), written when nonzero. */
	float attn_softcap, final_softcap;
	int sliding_window;
	/* The windowed layers as llama.cpp's list form of
	 * {arch}.attention.sliding_window_pattern (a u32 flag a layer, 1
	 * windowed), written when set; n_window_layers of them. */
	const uint32_t *window_layers;
	int n_window_layers;
	/* A mixture of experts in every layer ({arch}.expert_count,
	 * .expert_used_count; blk.N.ffn_gate_inp and ffn_{gate,up,down}_exps
	 * in place of the dense FFN), when n_expert > 0. */
	int n_expert, n_expert_used;
	/* Its experts' width ({arch}.expert_feed_forward_length; 0: n_ff), and
	 * a shared expert of this width with its sigmoid gate
	 * ({arch}.expert_shared_feed_forward_length; blk.N.ffn_gate_inp_shexp,
	 * ffn_{gate,up,down}_shexp), when nonzero (Qwen2-MoE). */
	int n_ff_expert, n_ff_shared;
	/* DeepSeek's mixture, as dots.llm1 has it: the first n_dense_layers
	 * layers keep the dense FFN ({arch}.leading_dense_block_count);
	 * n_shared_experts experts every token runs, ungated, as one of their
	 * summed width ({arch}.expert_shared_count; ffn_{gate,up,down}_shexp);
	 * with selection_bias the experts are chosen by their router logits'
	 * sigmoids plus blk.N.exp_probs_b.bias and weighted by the sigmoids,
	 * renormalised, times expert_weights_scale
	 * ({arch}.expert_gating_func 2, .expert_weights_norm,
	 * .expert_weights_scale). */
	int n_dense_layers, n_shared_experts;
	bool selection_bias;
	float expert_weights_scale;
	/* blk.N.attn_{q,k,v}.bias (Qwen2). */
	bool qkv_bias;
	/* gpt-oss's: blk.N.attn_output.bias, blk.N.attn_sinks.weight (a logit
	 * a head, spread 1), and the router's and every expert's biases
	 * (ffn_gate_inp.bias, ffn_{gate,up,down}_exps.bias). */
	bool o_bias, sinks, expert_biases;
	/* The experts' type (0: weight_type): MXFP4 for gpt-oss's files. */
	loom_dtype expert_type;
	/* Cohere 2's block: LayerNorm's epsilon key
	 * ({arch}.attention.layer_norm_epsilon) in place of RMSNorm's, and a
	 * parallel residual (no blk.N.ffn_norm). */
	bool layer_norm, parallel;
	/* Phi-3's: one blk.N.attn_qkv and one ffn_up of gate's rows then
	 * up's (no ffn_gate); LongRoPE's rope_factors_long and _short, each
	 * n_rot / 2 copies of its value, when nonzero. */
	bool fused_qkv, fused_gate_up;
	float rope_factor_long, rope_factor_short;
	/* OLMo 2's block: no attn_norm or ffn_norm (use with post_norms). */
	bool no_pre_norms;
	/* blk.N.attn_q_norm and attn_k_norm: 1 per head (head_dim), 2 over
	 * the whole of q and of k (OLMo 2, OLMoE). */
	int qk_norm;
	/* NULL-terminated texts of control tokens (a chat format's markers)
	 * that take the vocabulary's last ids; NULL: none. */
	const char *const *control_tokens;
	/* tokenizer.chat_template (a model's Jinja template); NULL: none. */
	const char *chat_template;
	uint64_t seed;
} synth_config;

/* <unk>, <s>, </s> and the 256 byte tokens, plus one normal token. */
#define SYNTH_MIN_VOCAB 260

/* Token ids of the vocabulary's fixed part. */
enum {
	SYNTH_TOKEN_UNK = 0,
	SYNTH_TOKEN_BOS = 1,
	SYNTH_TOKEN_EOS = 2,
	SYNTH_TOKEN_BYTE0 = 3 /* <0x00>; <0xFF> is SYNTH_TOKEN_BYTE0 + 255 */
};

/* A small F32 model: n_vocab 300, n_embd 64, 2 layers, 4 heads, 2 kv heads,
 * n_ff 160, untied, n_ctx 128. */
synth_config synth_default_config(void);

/* One defect each (all fields zero / NULL: none). */
typedef struct synth_faults {
	const char *arch;          /* general.architecture and the key prefix; NULL: "llama" */
	const char *omit_key;      /* a metadata key left out */
	const char *set_key;       /* an integer key written as set_value instead */
	uint32_t set_value;
	const char *string_key;    /* a numeric key written as a string instead */
	const char *omit_tensor;   /* a tensor left out */
	const char *grow_tensor;   /* a tensor whose last dimension is one too large */
	const char *retype_tensor; /* a tensor stored as retype (pseudo-random bytes) */
	loom_dtype retype;
	int extra_tokens;          /* vocabulary entries beyond the n_vocab embedding rows
				    * (negative: fewer, as in a padded embedding) */
} synth_faults;

typedef struct synth_model synth_model;

/* Builds the model in memory; faults may be NULL. */
synth_model *synth_model_build(const synth_config *cfg, const synth_faults *faults);
void synth_model_free(synth_model *sm); /* NULL is fine */

const synth_config *synth_model_config(const synth_model *sm);

/* Writes the GGUF file; false if the write fails. */
bool synth_model_write(const synth_model *sm, const char *path);

/* The stored bytes of a tensor and their type; NULL if the model has no such
 * tensor. ne0 is the contiguous dimension, as in the file. */
const void *synth_model_tensor(const synth_model *sm, const char *name, loom_dtype *type,
			       int64_t *ne0, int64_t *ne1);

/* An F32 tensor's values, to change before the model is written (a test
 * that wants weights of its own design); NULL if there is no such F32
 * tensor. */
float *synth_model_f32_tensor(synth_model *sm, const char *name, int64_t *ne0, int64_t *ne1);

/* Encodes n f32 values as type (F32, F16, BF16, Q8_0 or MXFP4, as ggml's
 * reference quantizers; n a multiple of 32 for the last two) into dst. */
void synth_encode(loom_dtype type, const float *src, void *dst, int64_t n);

#endif
