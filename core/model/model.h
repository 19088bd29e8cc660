/* model.h - a loaded model: file, contract, hyperparameters, weights. */
#ifndef LOOM_MODEL_H
#define LOOM_MODEL_H

#include "loom/plugin_api.h"
#include "model/contract.h"
#include "model/tensor.h"
#include "runtime/runtime.h"
#include "text/vocab.h"

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
	/* Llama 3 scaling as frequency factors, for files that give its
	 * parameters instead of a rope_freqs tensor: n_rot / 2, or NULL. */
	float *rope_freq_factors;
} loom_hparams;

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
} loom_layer;

struct loom_model {
	loom_runtime *rt;
	const loom_plugin *format;
	loom_model_file *file;      /* the tensors and metadata in use */
	loom_model_file *opened;    /* the format plugin's, closed at free */
	struct loom_export *export; /* the GGUF layout quantizing at load made */
	struct loom_quantized *quantized;
	char *arch;
	loom_contract *contract; /* NULL for vocab-only models */
	loom_vocab *vocab;
	loom_chat_kind chat_template; /* loom_chat_template_resolve */
	loom_hparams hp;

	loom_buffer weights;     /* the file mapping in place, or a copy */
	bool weights_allocated;  /* weights came from buffer_alloc */
	loom_buffer *repacked;   /* copies in the backend's own layouts */
	int n_repacked;
	loom_buffer *owned;      /* weights the core made: transposed, offset */
	int n_owned, cap_owned;
	int fmt;                 /* the contract section of the file's format */
	int rope_style;          /* loom_rope_style for this file's layout */
	loom_tensor token_embd;  /* {n_embd, n_vocab} */
	loom_tensor pos_embd;    /* {n_embd, n_ctx_train}: learned positions */
	loom_tensor output_norm, output_norm_b; /* {n_embd} */
	loom_tensor output;      /* {n_embd, n_vocab}; token_embd when tied */
	loom_tensor output_b;    /* {n_vocab} */
	loom_tensor rope_freqs;  /* {n_rot / 2}, if the file has it */
	loom_layer *layers;
};

/* The file's tensor for role (of layer il, or -1) in contract section fmt:
 * the first of the contract's spellings the file has. name gets that
 * spelling, or the first one when none is there (for messages). */
const loom_file_tensor *loom_model_find_role(const loom_model *m, int fmt, loom_role role, int il, char *name,
					     size_t size);

/* Opens path with its vocabulary, contract and hyperparameters, but no
 * weights: for writing it in another layout. */
loom_status loom_model_load_layout(loom_runtime *rt, const char *path, loom_model **out);

#endif
