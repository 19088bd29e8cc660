/* model.h - a loaded model: its file, contract, hyperparameters,
 * vocabulary and weights.
 *
 * Loading goes one way (docs/internals.md): open the file through its
 * format plugin (open.c), find the contract, read the vocabulary and the
 * hyperparameters (hparams.c), bind each of the contract's roles to a file
 * tensor (bind.c), then place the weights in backend memory (place.c).
 * load.c drives it; quantizing at load (convert/) sits between the
 * hyperparameters and binding and swaps in another file. */
#ifndef LOOM_MODEL_H
#define LOOM_MODEL_H

#include "loom/plugin_api.h"
#include "model/contract.h"
#include "model/tensor.h"
#include "runtime/runtime.h"
#include "text/vocab.h"

#include <pthread.h>

typedef struct loom_hparams {
	int64_t n_vocab;
	int64_t n_embd;
	int64_t n_layer;
	int64_t n_ff;
	int64_t n_head;
	int64_t n_head_kv;
	int64_t head_dim;
	int64_t n_rot;
	int64_t n_ctx_train;
	float norm_eps;
	float rope_theta;
	/* RoPE scaling (the ROPE op's parameters): frequencies times
	 * rope_freq_scale; YaRN mixes in the unscaled angles when
	 * yarn_ext_factor > 0. */
	float rope_freq_scale;
	float yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
	int64_t n_ctx_orig;
	/* YaRN's ramp between whole pairs, as ggml and the ROPE op compute it;
	 * false: between the pairs' exact wavelengths (transformers'
	 * truncate: false), which forward.c gives the op as frequency factors. */
	bool yarn_truncate;
	/* Llama 3 scaling, or YaRN without truncation, as frequency factors,
	 * for files that give its parameters instead of a rope_freqs tensor:
	 * n_rot / 2, or NULL. */
	float *rope_freq_factors;
	/* LongRoPE's factors (n_rot / 2 each) from a file that lists them
	 * (Hugging Face's rope_scaling), not as tensors; NULL otherwise. */
	float *rope_long_factors, *rope_short_factors;
	/* Soft-capping of the logits, c tanh(logits / c); 0: none. */
	float final_logit_softcap;
	/* Scalar multipliers (Granite's): the embeddings, each block output
	 * before its residual add, q.k (0: the contract's attention_scale),
	 * and the logits' divisor. */
	float embedding_mult, residual_mult, attention_mult, logit_scale;
	/* q.k's factor as base^-1/2 (Gemma's query_pre_attn_scalar); 0: none. */
	float attention_scale_base;
	/* Soft-capping of the attention scores; 0: none. */
	float attn_logit_softcap;
	/* Sliding windows: a windowed layer (loom_layer_windowed) sees the
	 * last n_swa positions; 0: no layer is windowed. Which layers: the
	 * file's list of them (n_layer flags, 1 windowed), else the pattern's
	 * period. */
	int64_t n_swa, swa_pattern;
	uint8_t *swa_layers;
	/* The windowed layers' RoPE base, unscaled; 0: as the other layers. */
	float rope_theta_swa;
	/* Layers without RoPE (loom_layer_has_rope): the file's list (n_layer
	 * flags, 1 rotates), else every nope_interval-th; 0: none. */
	int64_t nope_interval;
	uint8_t *rope_layers;
	/* A mixture of experts (loom_layer_moe): n_expert experts of n_ff_exp,
	 * n_expert_used a token, their weights renormalised when
	 * expert_weights_norm and times expert_weights_scale; the first
	 * n_dense_layers layers dense. n_expert 0: every layer dense. */
	int64_t n_expert, n_expert_used, n_ff_exp, n_dense_layers;
	int64_t n_ff_shared; /* the shared expert's width (block.experts.shared_expert) */
	int64_t n_expert_shared; /* the shared experts it stands for, as the file counts them; 0: unsaid */
	int expert_gating; /* loom_gating: the file's expert_gating_func, else the contract's */
	bool expert_weights_norm;
	float expert_weights_scale;
	/* block.activation swiglu_oai's clamp and gate sharpness (gpt-oss). */
	float swiglu_alpha, swiglu_limit;
	/* A factor on the logits (Cohere's); 1: none. */
	float logit_mult;
} loom_hparams;

/* Whether layer il's FFN is a mixture of experts. */
static inline bool loom_layer_moe(const loom_hparams *hp, int64_t il)
{
	return hp->n_expert > 0 && il >= hp->n_dense_layers;
}

/* A gating's number in GGUF files' expert_gating_func (llama.cpp's
 * enum): 1 softmax, 2 sigmoid, 3 the softmax of the chosen. */
static inline int loom_gating_func_number(int gating)
{
	return gating == LOOM_GATING_SIGMOID ? 2 : gating == LOOM_GATING_SOFTMAX_SELECTED ? 3 : 1;
}

/* Whether layer il attends through a sliding window. */
static inline bool loom_layer_windowed(const loom_hparams *hp, int64_t il)
{
	if (hp->n_swa <= 0)
		return false;
	if (hp->swa_layers != NULL)
		return hp->swa_layers[il] != 0;
	return hp->swa_pattern == 0 || (il + 1) % hp->swa_pattern != 0;
}

/* Whether layer il may rotate q and k (SmolLM3 leaves every fourth
 * layer without positions); the contract's positions and global_rope
 * decide too. */
static inline bool loom_layer_has_rope(const loom_hparams *hp, int64_t il)
{
	if (hp->rope_layers != NULL)
		return hp->rope_layers[il] != 0;
	return hp->nope_interval == 0 || (il + 1) % hp->nope_interval != 0;
}

/* Weights of one block; shapes in ggml order {n_in, n_out}. A tensor the
 * contract's choices do not use has data == NULL. With fused QKV, attn_q,
 * attn_k and attn_v (and their biases) are row ranges of the one matrix. */
typedef struct loom_layer {
	loom_tensor attn_norm, attn_norm_b;     /* {n_embd} */
	loom_tensor attn_q, attn_q_b;           /* {n_embd, n_head * head_dim} */
	loom_tensor attn_k, attn_k_b;           /* {n_embd, n_head_kv * head_dim} */
	loom_tensor attn_v, attn_v_b;           /* {n_embd, n_head_kv * head_dim} */
	loom_tensor attn_q_norm, attn_k_norm;   /* {head_dim} */
	loom_tensor attn_output, attn_output_b; /* {n_head * head_dim, n_embd} */
	loom_tensor ffn_norm, ffn_norm_b;       /* {n_embd} */
	loom_tensor ffn_gate, ffn_gate_b;       /* {n_embd, n_ff} */
	loom_tensor ffn_up, ffn_up_b;           /* {n_embd, n_ff} */
	loom_tensor ffn_down, ffn_down_b;       /* {n_ff, n_embd} */
	loom_tensor attn_post_norm, ffn_post_norm; /* {n_embd}: block.post_norm */
	loom_tensor attn_sinks;                 /* {n_head}: block.attention_sinks */
	/* A mixture-of-experts layer's router and experts (ffn_gate/up/down
	 * then unused): {n_embd, n_expert}, {n_embd, n_ff_exp, n_expert},
	 * {n_ff_exp, n_embd, n_expert}. */
	loom_tensor ffn_gate_inp, ffn_gate_exps, ffn_up_exps, ffn_down_exps;
	/* Its shared expert: the gate's weights {n_embd}, then the FFN
	 * {n_embd, n_ff_shared}, {n_ff_shared, n_embd}. */
	loom_tensor ffn_gate_inp_shexp, ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;
	/* The router's and the experts' biases (block.biases router, experts):
	 * {n_expert}, {n_ff_exp, n_expert} twice, {n_embd, n_expert}. */
	loom_tensor ffn_gate_inp_b, ffn_gate_exps_b, ffn_up_exps_b, ffn_down_exps_b;
	loom_tensor ffn_exp_probs_b; /* block.experts.selection_bias */
} loom_layer;

/* A weight the backend repacked: its buffer, its layout, and the file
 * tensor it was made from (-1 when not from the opened file's mapping). */
typedef struct loom_repacked_weight {
	loom_buffer buf;
	uint32_t layout;
	int64_t file_tensor;
} loom_repacked_weight;

/* Where a load's time went, in seconds, for `loom run -v`. */
typedef struct loom_load_times {
	double open;   /* the file's header, metadata, tensor table, vocabulary */
	double read;   /* the weights' pages brought into memory */
	double repack; /* the backend's layouts written */
	double upload; /* the weights copied into backend memory */
	double total;
} loom_load_times;

/* A weight's bytes that bind.c made in host memory (a matrix turned, a
 * vector widened to f32), until place.c uploads them. */
typedef struct loom_host_copy {
	void *data;
	size_t size;
} loom_host_copy;

struct loom_model {
	loom_runtime *rt;
	/* The tokens by their bytes, for grammars: built on first use. */
	struct loom_token_trie *trie;
	pthread_mutex_t trie_lock;
	char *path;               /* as given to loom_model_load, for messages */
	const loom_plugin *format;
	loom_model_file *opened;  /* the format plugin's, closed at free */
	loom_model_file *file;    /* the tensors and metadata in use: opened, or an adopted one */
	void *adopted;            /* what keeps an adopted file alive, released at free */
	void (*release_adopted)(void *adopted);
	char *arch;
	loom_contract *contract;  /* NULL for metadata-only models (and vocab-only ones
				   * of an architecture without a contract) */
	loom_vocab *vocab;
	loom_chat_kind chat_template;      /* loom_chat_template_resolve */
	const char *chat_template_source; /* where it came from, in words (`loom info`) */
	loom_hparams hp;
	int fmt;                  /* the contract section naming the file's keys and tensors */
	int rope_style;           /* loom_rope_style of the file's Q and K rows */

	/* The weights, bound to their roles (bind.c); data points into the
	 * file, or into host copies until place.c puts them in backend memory. */
	loom_tensor token_embd;   /* {n_embd, n_vocab} */
	loom_tensor pos_embd;     /* {n_embd, n_ctx_train}: learned positions */
	loom_tensor output_norm, output_norm_b; /* {n_embd} */
	loom_tensor output;       /* {n_embd, n_vocab}; token_embd when tied */
	loom_tensor output_b;     /* {n_vocab} */
	loom_tensor rope_freqs;   /* {n_rot / 2}, from the file or its Llama 3 scaling */
	loom_tensor rope_factors_long, rope_factors_short; /* {n_rot / 2}: LongRoPE's (Phi-3), or unused */
	loom_layer *layers;
	char **names;             /* the bound tensors' names */
	size_t n_names, cap_names;
	loom_host_copy *copies;   /* bind's host copies (turned, widened), freed once placed */
	size_t n_copies, cap_copies;

	/* Backend memory (place.c). */
	loom_buffer weights;      /* the file mapping in place, or the file's tensors uploaded */
	bool weights_allocated;   /* weights came from buffer_alloc */
	loom_buffer *owned;       /* the host copies, uploaded */
	size_t n_owned;
	loom_repacked_weight *repacked; /* weights in the backend's own layouts */
	int n_repacked;
	bool in_backend_layouts;  /* the file holds the backend's layouts (`loom convert --layout`) */
	size_t released_bytes;    /* of the mapping, handed back once the backend had its own copy */
	loom_load_times load_times;
};

/* How far loom_model_open goes. */
typedef enum loom_model_stage {
	LOOM_STAGE_METADATA, /* the file: metadata and the tensor table */
	LOOM_STAGE_VOCAB,    /* and the vocabulary */
	LOOM_STAGE_CONTRACT  /* and the contract and hyperparameters: all but the weights */
} loom_model_stage;

/* Opens path up to stage (open.c). On failure *out is NULL. */
loom_status loom_model_open(loom_runtime *rt, const char *path, loom_model_stage stage, loom_model **out);

/* Makes m read its tensors and metadata from file, laid out as contract
 * section fmt names them, instead of the file it opened; release(owner)
 * runs when m is freed. For quantizing at load, before the weights are
 * bound. */
void loom_model_adopt_file(loom_model *m, loom_model_file *file, int fmt, void *owner, void (*release)(void *));

#endif
