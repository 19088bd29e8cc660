/* context.h - a context: KV cache, activations, logits, the step graph. */
#ifndef LOOM_CONTEXT_H
#define LOOM_CONTEXT_H

#include "infer/kv_cache.h"
#include "model/model.h"

/* Activation and input slots in the context's scratch buffer; each holds
 * up to n_batch rows. */
typedef enum loom_slot {
	/* The step's small inputs, uploaded together: keep them first. */
	LOOM_SLOT_TOKENS,  /* i32 token ids */
	LOOM_SLOT_POS,     /* i32 positions */
	LOOM_SLOT_CELLS,   /* i32 cache cells the batch's keys and values go to */
	LOOM_SLOT_OUT_IDS, /* i32 batch rows whose logits are wanted */
	LOOM_SLOT_CELLS_SWA, /* i32 the windowed layers' cache cells the batch's tokens go to */
	LOOM_SLOT_MASK,    /* f32 attention mask, n_cells per row */
	LOOM_SLOT_MASK_SWA, /* the windowed layers' mask; rows of 0 when no layer is windowed */
	LOOM_SLOT_X,       /* the residual stream, n_embd */
	LOOM_SLOT_XB,      /* normalised stream, n_embd */
	LOOM_SLOT_Q,       /* n_head * head_dim */
	LOOM_SLOT_K,       /* n_head_kv * head_dim */
	LOOM_SLOT_V,
	LOOM_SLOT_ATTN,    /* attention output, n_head * head_dim */
	LOOM_SLOT_PROJ,    /* a block's output before the residual add, n_embd */
	LOOM_SLOT_GATE,    /* n_ff, or n_ff_exp for each chosen expert */
	LOOM_SLOT_UP,
	LOOM_SLOT_ROUTER,  /* a mixture of experts' router logits, n_expert */
	LOOM_SLOT_CHOICE,  /* the scores experts are chosen by, when not the logits (selection_bias) */
	LOOM_SLOT_EXPERT_IDS, /* i32: the experts each token goes to, n_expert_used */
	LOOM_SLOT_EXPERT_W,   /* their weights */
	LOOM_SLOT_EXPERTS,    /* their outputs, n_embd each */
	LOOM_SLOT_XOUT,    /* the stream of rows whose logits are wanted */
	LOOM_SLOT_LOGITS,  /* n_vocab */
	LOOM_SLOT_COUNT
} loom_slot;

/* Told after node i of graph has run, and may read or set what it wrote
 * before the next node runs (node_watch.h); false stops the step. */
typedef bool (*loom_node_watch_fn)(void *user, loom_context *ctx, const loom_graph *graph, int i);

struct loom_context {
	loom_model *model;
	loom_context_params params;
	/* The cache: every token's cells, with the layers without a window;
	 * a model with windowed layers keeps those in kv_swa, which holds
	 * only the cells their windows still see (n_cells 0: no such layer). */
	loom_kv_cache kv;
	loom_kv_cache kv_swa;

	loom_buffer scratch;
	size_t scratch_bytes;
	size_t slot_offset[LOOM_SLOT_COUNT];
	size_t slot_row_bytes[LOOM_SLOT_COUNT];

	/* Host copies of the inputs of one batch. tokens, pos, cells and
	 * out_ids point into `inputs`, laid out as the scratch buffer's first
	 * slots, so a step's small inputs go to the backend in one upload. */
	unsigned char *inputs;
	size_t inputs_bytes;
	int32_t *tokens, *pos, *cells, *out_ids, *cells_swa;
	int32_t *seq;
	float *mask, *mask_swa; /* mask_swa: NULL when no layer is windowed */
	/* The first cell a windowed layer's attention reads: no token of the
	 * step sees an earlier one (a multiple of LOOM_KV_WINDOW_STEP, so
	 * that it moves once in that many tokens). */
	uint32_t swa_first;
	/* The cells of kv_swa a windowed layer's attention reads up to (its
	 * loom_kv_window) this step. */
	uint32_t n_kv_swa;

	/* Logits of the last batch: row logit_row[i] for batch token i (-1:
	 * none). On a backend that computes in host memory they are read where
	 * the step wrote them, the scratch buffer's LOGITS slot; else copied
	 * from there into memory of the context's own. */
	float *logits;
	bool logits_in_place;
	int32_t *logit_row;
	int32_t n_batch_tokens;

	/* Asked before each step (loom_context_set_abort). */
	loom_abort_fn abort_fn;
	void *abort_user;

	/* The graph of the step being built, and the tensors it points to. */
	loom_node *nodes;
	int n_nodes, max_nodes;
	loom_tensor *tensors;
	int n_tensors, max_tensors;
	/* What the forward graph in nodes was built for (loom_forward_build's
	 * arguments): a step of the same shape, every decode step until the
	 * cache's window grows, runs it again. Building it writes ~100 KB
	 * that streaming the weights has evicted: 1% of a small model's step. */
	struct {
		bool valid;
		int n, n_out, output;
		uint32_t n_kv, n_kv_swa, swa_first;
		int head_first, head_end; /* the output head's nodes [first, end) */
	} built;

	/* loom_context_profile's sums while profiling; node_ns (max_nodes)
	 * takes a step's node times, compute_ms the backend's compute calls. */
	bool profiling;
	loom_profile profile;
	double compute_ms;
	uint64_t *node_ns;

	/* When set, steps run a node at a time, this told after each
	 * (node_watch.h). */
	loom_node_watch_fn node_watch;
	void *node_watch_user;
};

/* What a step gives back for the rows it was asked about. */
typedef enum loom_step_output {
	LOOM_STEP_LOGITS, /* n_vocab logits (the LOGITS slot) */
	LOOM_STEP_HIDDEN  /* the final norm's output, n_embd (the XB slot): embeddings */
} loom_step_output;

/* Builds the forward graph of a batch of n tokens that attends to cells
 * [0, n_kv) and wants `output` for n_out of its rows (all rows, in order,
 * when n_out == n, else the rows listed in the OUT_IDS slot). */
loom_status loom_forward_build(loom_context *ctx, int n, uint32_t n_kv, int n_out, loom_step_output output,
			       loom_graph *graph);

/* The graph that turns the keys of n cells of cache kv (the CELLS slot)
 * by the positions in the POS slot, in every layer it holds: RoPE of
 * p + d is RoPE of p turned by d. */
loom_status loom_forward_build_shift(loom_context *ctx, const loom_kv_cache *kv, int n, loom_graph *graph);

/* loom_decode, giving `output` for the rows the batch asks about: logits
 * into the context (loom_get_logits), or hidden states into hidden (n_embd
 * floats per row asked about, in batch order). */
loom_status loom_decode_step(loom_context *ctx, const loom_batch *batch, loom_step_output output, float *hidden);

/* Asks the backend about every node the context's steps can have;
 * UNSUPPORTED names the first it cannot run, with its tensors' types. */
loom_status loom_forward_check(loom_context *ctx);
/* The same for one graph. */
loom_status loom_forward_check_graph(const loom_context *ctx, const loom_graph *graph);

/* Tensors and nodes needed per step, to size the arenas. */
int loom_forward_max_nodes(const loom_model *m);
int loom_forward_max_tensors(const loom_model *m);

#endif
