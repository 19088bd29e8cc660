/* model.h - a loaded model: file, contract, hyperparameters, weights. */
#ifndef LOOM_MODEL_H
#define LOOM_MODEL_H

#include "contract.h"
#include "plugin_api.h"
#include "runtime.h"
#include "vocab.h"

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
} loom_hparams;

/* Weights of one block; shapes in ggml order {n_in, n_out}. */
typedef struct loom_layer {
	loom_tensor attn_norm;   /* {n_embd} */
	loom_tensor attn_q;      /* {n_embd, n_head * head_dim} */
	loom_tensor attn_k;      /* {n_embd, n_head_kv * head_dim} */
	loom_tensor attn_v;      /* {n_embd, n_head_kv * head_dim} */
	loom_tensor attn_output; /* {n_head * head_dim, n_embd} */
	loom_tensor ffn_norm;    /* {n_embd} */
	loom_tensor ffn_gate;    /* {n_embd, n_ff} */
	loom_tensor ffn_up;      /* {n_embd, n_ff} */
	loom_tensor ffn_down;    /* {n_ff, n_embd} */
} loom_layer;

struct loom_model {
	loom_runtime *rt;
	const loom_plugin *format;
	loom_model_file *file;
	char *arch;
	loom_contract *contract; /* NULL for vocab-only models */
	loom_vocab *vocab;
	loom_hparams hp;

	loom_buffer weights;     /* the file mapping in place, or a copy */
	bool weights_allocated;  /* weights came from buffer_alloc */
	loom_buffer *repacked;   /* copies in the backend's own layouts */
	int n_repacked;
	loom_tensor token_embd;  /* {n_embd, n_vocab} */
	loom_tensor output_norm; /* {n_embd} */
	loom_tensor output;      /* {n_embd, n_vocab}; token_embd when tied */
	loom_layer *layers;
};

/* Strides for a contiguous tensor of the given type and shape. */
void loom_tensor_set_contiguous(loom_tensor *t, loom_dtype type, int64_t ne0, int64_t ne1,
				int64_t ne2, int64_t ne3);

#endif
