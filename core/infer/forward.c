/* forward.c - the forward pass of one step, as a graph of backend ops,
 * driven by the model's contract. */
#include "infer/context.h"

#include "runtime/error.h"

#include <math.h>
#include <string.h>

/* ---- graph construction helpers ----------------------------------------- */

/* The arenas are sized by loom_forward_max_*; running past them is a bug in
 * those counts, reported by loom_forward_build, never a write out of bounds. */
static loom_tensor *new_tensor(loom_context *ctx)
{
	loom_tensor *t = &ctx->tensors[ctx->n_tensors < ctx->max_tensors ? ctx->n_tensors : ctx->max_tensors - 1];
	ctx->n_tensors++;
	memset(t, 0, sizeof(*t));
	return t;
}

/* A view of rows [0, n) of a scratch slot, shaped {ne0, ne1, ne2}. */
static loom_tensor *slot(loom_context *ctx, loom_slot s, loom_dtype type, int64_t ne0, int64_t ne1, int64_t ne2)
{
	static const char *const names[LOOM_SLOT_COUNT] = {
		[LOOM_SLOT_TOKENS] = "tokens", [LOOM_SLOT_POS] = "positions", [LOOM_SLOT_CELLS] = "cells",
		[LOOM_SLOT_OUT_IDS] = "out_ids", [LOOM_SLOT_CELLS_SWA] = "cells_swa",
		[LOOM_SLOT_MASK] = "mask",	 [LOOM_SLOT_MASK_SWA] = "mask_swa",
		[LOOM_SLOT_X] = "x",
		[LOOM_SLOT_XB] = "xb",		 [LOOM_SLOT_Q] = "q",		[LOOM_SLOT_K] = "k",
		[LOOM_SLOT_V] = "v",		 [LOOM_SLOT_ATTN] = "attn",	[LOOM_SLOT_PROJ] = "proj",
		[LOOM_SLOT_GATE] = "gate",	 [LOOM_SLOT_UP] = "up",		[LOOM_SLOT_XOUT] = "xout",
		[LOOM_SLOT_ROUTER] = "router",	 [LOOM_SLOT_CHOICE] = "expert_choice",
		[LOOM_SLOT_EXPERT_IDS] = "expert_ids",
		[LOOM_SLOT_EXPERT_W] = "expert_weights", [LOOM_SLOT_EXPERTS] = "experts",
		[LOOM_SLOT_LOGITS] = "logits",
	};
	loom_tensor *t = new_tensor(ctx);
	loom_tensor_set_contiguous(t, type, ne0, ne1, ne2, 1);
	t->data = (char *)ctx->scratch.base + ctx->slot_offset[s];
	t->name = names[s];
	return t;
}

static loom_tensor *f32_rows(loom_context *ctx, loom_slot s, int64_t width, int n)
{
	return slot(ctx, s, LOOM_DTYPE_F32, width, n, 1);
}

/* Cells [first, n_kv) of a cache tensor. */
static loom_tensor *cache_view(loom_context *ctx, const loom_tensor *cache, uint32_t first, uint32_t n_kv)
{
	loom_tensor *t = new_tensor(ctx);
	*t = *cache;
	t->data = (char *)t->data + (size_t)first * t->nb[1];
	t->ne[1] = n_kv - first;
	t->nb[2] = t->nb[1] * (n_kv - first);
	t->nb[3] = t->nb[2];
	return t;
}

/* Sources are const here: backends read weights and never write them. */
static loom_node *add_node(loom_context *ctx, loom_op op, loom_tensor *dst, const loom_tensor *a,
			   const loom_tensor *b)
{
	loom_node *n = &ctx->nodes[ctx->n_nodes < ctx->max_nodes ? ctx->n_nodes : ctx->max_nodes - 1];
	ctx->n_nodes++;
	memset(n, 0, sizeof(*n));
	n->op = op;
	n->dst = dst;
	n->src[0] = (loom_tensor *)a;
	n->src[1] = (loom_tensor *)b;
	return n;
}

static void matmul(loom_context *ctx, loom_tensor *dst, const loom_tensor *weight, loom_tensor *x)
{
	add_node(ctx, LOOM_OP_MATMUL, dst, weight, x);
}

/* A weight the contract's choices use, else NULL. */
static const loom_tensor *used(const loom_tensor *t)
{
	return t->data != NULL ? t : NULL;
}

/* dst = weight x (+ bias). */
static void linear(loom_context *ctx, loom_tensor *dst, const loom_tensor *weight, const loom_tensor *bias,
		   loom_tensor *x)
{
	matmul(ctx, dst, weight, x);
	if (used(bias))
		add_node(ctx, LOOM_OP_ADD, dst, dst, bias);
}

/* t *= factor, in place. */
static void scale(loom_context *ctx, loom_tensor *t, float factor)
{
	loom_node *n = add_node(ctx, LOOM_OP_SCALE, t, t, NULL);
	n->fp[0] = factor;
}

/* The contract's norm: RMSNorm, or LayerNorm with its optional bias. */
static void norm(loom_context *ctx, loom_tensor *dst, loom_tensor *x, const loom_tensor *weight,
		 const loom_tensor *bias)
{
	const loom_model *m = ctx->model;
	bool layer = m->contract->norm == LOOM_NORM_LAYERNORM;
	loom_node *n = add_node(ctx, layer ? LOOM_OP_LAYER_NORM : LOOM_OP_RMS_NORM, dst, x, weight);
	if (layer && bias != NULL)
		n->src[2] = (loom_tensor *)used(bias);
	n->fp[0] = m->hp.norm_eps;
}

/* The RoPE frequency factors: LongRoPE's long ones for a context past the
 * original one, its short ones within it (Phi-3, as llama.cpp chooses);
 * else Llama 3's, or none. */
static const loom_tensor *frequency_factors(const loom_context *ctx)
{
	const loom_model *m = ctx->model;
	const loom_tensor *chosen = ctx->params.n_ctx > (uint32_t)m->hp.n_ctx_orig ? &m->rope_factors_long
										   : &m->rope_factors_short;
	return chosen->data != NULL ? chosen : &m->rope_freqs;
}

/* Whether layer il rotates its q and k: with rope, unless it is a layer
 * without a window in a family whose global layers go unrotated, or one
 * the file leaves without RoPE. */
static bool layer_rotates(const loom_model *m, int il)
{
	return m->contract->positions == LOOM_POSITIONS_ROPE &&
	       (m->contract->global_rope || loom_layer_windowed(&m->hp, il)) && loom_layer_has_rope(&m->hp, il);
}

/* RoPE of layer il: a windowed layer with a base of its own rotates by
 * that base, unscaled (Gemma 3's local layers). */
static loom_node *rope(loom_context *ctx, int il, loom_tensor *x, loom_tensor *pos)
{
	const loom_model *m = ctx->model;
	loom_node *n = add_node(ctx, LOOM_OP_ROPE, x, x, pos);
	const loom_hparams *hp = &m->hp;
	n->src[2] = (loom_tensor *)used(frequency_factors(ctx));
	n->ip[0] = (int32_t)hp->n_rot;
	n->ip[1] = m->rope_style;
	n->ip[2] = (int32_t)hp->n_ctx_orig;
	n->fp[0] = hp->rope_theta;
	n->fp[1] = hp->rope_freq_scale;
	n->fp[2] = hp->yarn_ext_factor;
	n->fp[3] = hp->yarn_attn_factor;
	n->fp[4] = hp->yarn_beta_fast;
	n->fp[5] = hp->yarn_beta_slow;
	if (hp->yarn_ext_factor > 0.0f && !hp->yarn_truncate) {
		/* The frequencies come scaled as factors (hparams.c); cos and sin
		 * keep YaRN's magnitude correction. */
		n->fp[1] = 1.0f;
		n->fp[2] = 0.0f;
		n->fp[3] = hp->yarn_attn_factor * (1.0f + 0.1f * logf(1.0f / hp->rope_freq_scale));
	}
	if (hp->rope_theta_swa > 0.0f && loom_layer_windowed(hp, il)) {
		n->src[2] = NULL;
		n->fp[0] = hp->rope_theta_swa;
		n->fp[1] = 1.0f;
		n->fp[2] = 0.0f;
		n->fp[3] = 0.0f;
	}
	return n;
}

/* RMSNorm of each row of x, in place: each head's ({head_dim, heads,
 * tokens}) or each token's q or k whole. */
static void head_norm(loom_context *ctx, loom_tensor *x, const loom_tensor *weight)
{
	loom_node *n = add_node(ctx, LOOM_OP_RMS_NORM, x, x, weight);
	n->fp[0] = ctx->model->hp.norm_eps;
}

static void gelu(loom_context *ctx, loom_tensor *x)
{
	loom_node *n = add_node(ctx, LOOM_OP_GELU, x, x, NULL);
	n->ip[0] = ctx->model->contract->activation == LOOM_ACT_GELU ? LOOM_GELU_ERF : LOOM_GELU_TANH;
}

/* ---- the block ------------------------------------------------------------ */

/* PROJ = attention(xb), keys and values stored in layer il's cache. */
static void attention_block(loom_context *ctx, const loom_layer *l, int il, int n, uint32_t n_kv, loom_tensor *xb)
{
	const loom_model *m = ctx->model;
	const loom_hparams *hp = &m->hp;
	const int64_t hd = hp->head_dim, q_dim = hp->n_head * hd, kv_dim = hp->n_head_kv * hd;
	loom_tensor *pos = slot(ctx, LOOM_SLOT_POS, LOOM_DTYPE_I32, n, 1, 1);

	loom_tensor *q = f32_rows(ctx, LOOM_SLOT_Q, q_dim, n);
	loom_tensor *k = f32_rows(ctx, LOOM_SLOT_K, kv_dim, n);
	loom_tensor *v = f32_rows(ctx, LOOM_SLOT_V, kv_dim, n);
	linear(ctx, q, &l->attn_q, &l->attn_q_b, xb);
	linear(ctx, k, &l->attn_k, &l->attn_k_b, xb);
	linear(ctx, v, &l->attn_v, &l->attn_v_b, xb);

	/* A per-head QK-norm and RoPE see q and k as {head_dim, heads, tokens}. */
	loom_tensor *q_heads = slot(ctx, LOOM_SLOT_Q, LOOM_DTYPE_F32, hd, hp->n_head, n);
	loom_tensor *k_heads = slot(ctx, LOOM_SLOT_K, LOOM_DTYPE_F32, hd, hp->n_head_kv, n);
	if (m->contract->qk_norm != LOOM_QK_NORM_NONE) {
		bool full = m->contract->qk_norm == LOOM_QK_NORM_FULL;
		head_norm(ctx, full ? q : q_heads, &l->attn_q_norm);
		head_norm(ctx, full ? k : k_heads, &l->attn_k_norm);
	}
	if (layer_rotates(m, il)) {
		rope(ctx, il, q_heads, pos);
		rope(ctx, il, k_heads, pos);
	}

	/* A windowed layer keeps its keys and values in the windowed cache,
	 * and reads only the cells from the first any token of the step may
	 * see: the window's cost, however deep the context. */
	const bool windowed = loom_layer_windowed(hp, il);
	loom_kv_cache *kv = windowed ? &ctx->kv_swa : &ctx->kv;
	loom_tensor *cells = slot(ctx, windowed ? LOOM_SLOT_CELLS_SWA : LOOM_SLOT_CELLS, LOOM_DTYPE_I32, n, 1, 1);
	add_node(ctx, LOOM_OP_KV_STORE, &kv->k[il], k, cells);
	add_node(ctx, LOOM_OP_KV_STORE, &kv->v[il], v, cells);

	const uint32_t first = windowed ? ctx->swa_first : 0;
	if (windowed)
		n_kv = ctx->n_kv_swa;
	loom_tensor *attn = f32_rows(ctx, LOOM_SLOT_ATTN, q_dim, n);
	loom_node *a = add_node(ctx, LOOM_OP_ATTENTION, attn, q_heads, cache_view(ctx, &kv->k[il], first, n_kv));
	a->src[2] = cache_view(ctx, &kv->v[il], first, n_kv);
	loom_tensor *mask = slot(ctx, windowed ? LOOM_SLOT_MASK_SWA : LOOM_SLOT_MASK, LOOM_DTYPE_F32, n_kv, n, 1);
	mask->data = (char *)mask->data + (size_t)first * sizeof(float);
	mask->ne[0] = n_kv - first;
	a->src[3] = mask;
	a->src[4] = (loom_tensor *)used(&l->attn_sinks);
	a->ip[0] = (int32_t)hp->n_head;
	a->ip[1] = (int32_t)hp->n_head_kv;
	a->fp[0] = hp->attention_mult > 0.0f	    ? hp->attention_mult
		   : hp->attention_scale_base > 0.0f ? 1.0f / sqrtf(hp->attention_scale_base)
		   : m->contract->attn_scale_default ? 1.0f / sqrtf((float)hd)
						     : m->contract->attn_scale;
	a->fp[1] = hp->attn_logit_softcap;

	linear(ctx, f32_rows(ctx, LOOM_SLOT_PROJ, hp->n_embd, n), &l->attn_output, &l->attn_output_b, attn);
}

/* The gated FFN's activation: gate = act(gate) * up, in place. */
static void gated_activation(loom_context *ctx, loom_tensor *gate, loom_tensor *up)
{
	const loom_model *m = ctx->model;
	if (m->contract->activation == LOOM_ACT_SWIGLU_OAI) {
		loom_node *n = add_node(ctx, LOOM_OP_SWIGLU_OAI, gate, gate, up);
		n->fp[0] = m->hp.swiglu_alpha;
		n->fp[1] = m->hp.swiglu_limit;
		return;
	}
	if (m->contract->ffn == LOOM_FFN_SWIGLU) {
		add_node(ctx, LOOM_OP_SWIGLU, gate, gate, up);
		return;
	}
	gelu(ctx, gate);
	add_node(ctx, LOOM_OP_MUL, gate, gate, up);
}

/* dst = each chosen expert's weights x (+ its bias). */
static void expert_matmul(loom_context *ctx, loom_tensor *dst, const loom_tensor *experts, const loom_tensor *bias,
			  loom_tensor *x, loom_tensor *ids)
{
	loom_node *n = add_node(ctx, LOOM_OP_MATMUL_ID, dst, experts, x);
	n->src[2] = ids;
	n->src[3] = (loom_tensor *)used(bias);
}

/* Elements [first, first + width) of n rows of a slot whose rows are `row`
 * floats apart: {width, n}. */
static loom_tensor *row_part(loom_context *ctx, loom_slot s, int64_t row, int64_t first, int64_t width, int n)
{
	loom_tensor *t = f32_rows(ctx, s, width, n);
	t->data = (char *)t->data + first * (int64_t)sizeof(float);
	t->nb[1] = (size_t)row * sizeof(float);
	t->nb[2] = t->nb[3] = t->nb[1] * (size_t)n;
	return t;
}

/* The first `pieces` pieces of `width` floats of n rows of a slot whose
 * rows are `row` floats apart: {width, pieces, n}. */
static loom_tensor *row_pieces(loom_context *ctx, loom_slot s, int64_t row, int64_t width, int64_t pieces, int n)
{
	loom_tensor *t = slot(ctx, s, LOOM_DTYPE_F32, width, pieces, n);
	t->nb[2] = (size_t)row * sizeof(float);
	t->nb[3] = t->nb[2] * (size_t)n;
	return t;
}

/* PROJ = a mixture of experts of xb: the router's logits choose each
 * token's experts and weigh them, each chosen expert runs the gated FFN
 * on the token, and their outputs are summed by weight. A shared expert
 * runs on every token as one slot more and is added last (as llama.cpp
 * adds it), weighted by the sigmoid of its gate when it has one. */
static void moe_block(loom_context *ctx, const loom_layer *l, int n, loom_tensor *xb)
{
	const loom_model *m = ctx->model;
	const loom_hparams *hp = &m->hp;
	const int64_t k = hp->n_expert_used, F = hp->n_ff_exp, E = hp->n_embd;
	const bool shared = m->contract->shared_expert, gated = m->contract->shared_expert_gated;
	const int64_t slots = k + shared, summed = k + gated;
	loom_tensor *logits = f32_rows(ctx, LOOM_SLOT_ROUTER, hp->n_expert, n);
	loom_tensor *ids = slot(ctx, LOOM_SLOT_EXPERT_IDS, LOOM_DTYPE_I32, k, n, 1);
	loom_tensor *weights = row_part(ctx, LOOM_SLOT_EXPERT_W, slots, 0, k, n);

	linear(ctx, logits, &l->ffn_gate_inp, &l->ffn_gate_inp_b, xb);
	loom_tensor *choice = logits;
	if (m->contract->selection_bias) {
		/* Chosen by sigmoid + bias, weighted by the sigmoid alone. */
		choice = f32_rows(ctx, LOOM_SLOT_CHOICE, hp->n_expert, n);
		add_node(ctx, LOOM_OP_SIGMOID, choice, logits, NULL);
		add_node(ctx, LOOM_OP_ADD, choice, choice, &l->ffn_exp_probs_b);
	}
	add_node(ctx, LOOM_OP_TOPK, ids, choice, NULL)->ip[0] = (int32_t)k;
	loom_node *w = add_node(ctx, LOOM_OP_MOE_WEIGHTS, weights, logits, ids);
	w->ip[0] = hp->expert_gating;
	w->ip[1] = hp->expert_weights_norm;
	w->fp[0] = hp->expert_weights_scale;

	/* xb as {n_embd, 1, n}: one row a token, for all its experts. */
	loom_tensor *x = new_tensor(ctx);
	*x = *xb;
	x->ne[1] = 1;
	x->ne[2] = n;
	x->nb[2] = xb->nb[1];
	x->nb[3] = xb->nb[1] * (size_t)n;
	loom_tensor *gate = slot(ctx, LOOM_SLOT_GATE, LOOM_DTYPE_F32, F, k, n);
	loom_tensor *up = slot(ctx, LOOM_SLOT_UP, LOOM_DTYPE_F32, F, k, n);
	loom_tensor *out = row_pieces(ctx, LOOM_SLOT_EXPERTS, E * slots, E, k, n);
	expert_matmul(ctx, up, &l->ffn_up_exps, &l->ffn_up_exps_b, x, ids);
	expert_matmul(ctx, gate, &l->ffn_gate_exps, &l->ffn_gate_exps_b, x, ids);
	gated_activation(ctx, gate, up);
	expert_matmul(ctx, out, &l->ffn_down_exps, &l->ffn_down_exps_b, gate, ids);
	loom_tensor *shared_out = NULL;
	if (shared) {
		loom_tensor *sgate = f32_rows(ctx, LOOM_SLOT_GATE, hp->n_ff_shared, n);
		loom_tensor *sup = f32_rows(ctx, LOOM_SLOT_UP, hp->n_ff_shared, n);
		shared_out = row_part(ctx, LOOM_SLOT_EXPERTS, E * slots, E * k, E, n);
		matmul(ctx, sup, &l->ffn_up_shexp, xb);
		matmul(ctx, sgate, &l->ffn_gate_shexp, xb);
		gated_activation(ctx, sgate, sup);
		matmul(ctx, shared_out, &l->ffn_down_shexp, sgate);
	}
	if (gated) {
		loom_tensor *g = row_part(ctx, LOOM_SLOT_EXPERT_W, slots, k, 1, n);
		matmul(ctx, g, &l->ffn_gate_inp_shexp, xb);
		add_node(ctx, LOOM_OP_SIGMOID, g, g, NULL);
	}
	/* A gated shared expert is summed as one more chosen expert; a plain
	 * one is added after. */
	loom_tensor *proj = f32_rows(ctx, LOOM_SLOT_PROJ, E, n);
	add_node(ctx, LOOM_OP_MOE_SUM, proj, row_pieces(ctx, LOOM_SLOT_EXPERTS, E * slots, E, summed, n),
		 row_part(ctx, LOOM_SLOT_EXPERT_W, slots, 0, summed, n));
	if (shared && !gated)
		add_node(ctx, LOOM_OP_ADD, proj, proj, shared_out);
}

/* PROJ = ffn(xb): SwiGLU, GeGLU or a plain MLP. */
static void ffn_block(loom_context *ctx, const loom_layer *l, int n, loom_tensor *xb)
{
	const loom_model *m = ctx->model;
	const loom_hparams *hp = &m->hp;
	loom_tensor *gate = f32_rows(ctx, LOOM_SLOT_GATE, hp->n_ff, n);
	loom_tensor *up = f32_rows(ctx, LOOM_SLOT_UP, hp->n_ff, n);
	loom_tensor *hidden = up;

	linear(ctx, up, &l->ffn_up, &l->ffn_up_b, xb);
	if (m->contract->ffn == LOOM_FFN_MLP) {
		gelu(ctx, up);
	} else {
		linear(ctx, gate, &l->ffn_gate, &l->ffn_gate_b, xb);
		gated_activation(ctx, gate, up);
		hidden = gate;
	}
	linear(ctx, f32_rows(ctx, LOOM_SLOT_PROJ, hp->n_embd, n), &l->ffn_down, &l->ffn_down_b, hidden);
}

/* x += attn(norm(x)); then x += ffn(norm(x)) with the FFN's own norm, or,
 * with a parallel residual, x += ffn of the same normalised input. With
 * post-norms each output is normalised before it is added (Gemma 2). */
static void layer(loom_context *ctx, const loom_layer *l, int il, int n, uint32_t n_kv)
{
	const loom_hparams *hp = &ctx->model->hp;
	loom_tensor *x = f32_rows(ctx, LOOM_SLOT_X, hp->n_embd, n);
	loom_tensor *xb = f32_rows(ctx, LOOM_SLOT_XB, hp->n_embd, n);
	loom_tensor *proj = f32_rows(ctx, LOOM_SLOT_PROJ, hp->n_embd, n);

	const bool post = ctx->model->contract->post_norm, pre = ctx->model->contract->pre_norm;

	if (pre)
		norm(ctx, xb, x, &l->attn_norm, &l->attn_norm_b);
	attention_block(ctx, l, il, n, n_kv, pre ? xb : x);
	if (post)
		norm(ctx, proj, proj, &l->attn_post_norm, NULL);
	if (hp->residual_mult != 1.0f)
		scale(ctx, proj, hp->residual_mult);
	add_node(ctx, LOOM_OP_ADD, x, x, proj);
	const bool sequential = ctx->model->contract->residual == LOOM_RESIDUAL_SEQUENTIAL;
	if (sequential && pre)
		norm(ctx, xb, x, &l->ffn_norm, &l->ffn_norm_b);
	loom_tensor *ffn_in = pre ? xb : x;
	if (loom_layer_moe(hp, il))
		moe_block(ctx, l, n, ffn_in);
	else
		ffn_block(ctx, l, n, ffn_in);
	if (post)
		norm(ctx, proj, proj, &l->ffn_post_norm, NULL);
	if (hp->residual_mult != 1.0f)
		scale(ctx, proj, hp->residual_mult);
	add_node(ctx, LOOM_OP_ADD, x, x, proj);
}

int loom_forward_max_nodes(const loom_model *m)
{
	return 36 * (int)m->hp.n_layer + 16;
}

int loom_forward_max_tensors(const loom_model *m)
{
	return 48 * (int)m->hp.n_layer + 24;
}

loom_status loom_forward_build(loom_context *ctx, int n, uint32_t n_kv, int n_out, loom_step_output output,
			       loom_graph *graph)
{
	const loom_model *m = ctx->model;
	const loom_hparams *hp = &m->hp;

	if (ctx->built.valid && ctx->built.n == n && ctx->built.n_kv == n_kv && ctx->built.n_out == n_out &&
	    ctx->built.output == (int)output && ctx->built.swa_first == ctx->swa_first &&
	    ctx->built.n_kv_swa == ctx->n_kv_swa) {
		graph->n_nodes = ctx->n_nodes;
		graph->nodes = ctx->nodes;
		return LOOM_OK;
	}
	ctx->built.valid = false;
	ctx->n_nodes = 0;
	ctx->n_tensors = 0;

	/* Token embeddings (scaled, plus learned positions) into the residual
	 * stream. */
	loom_tensor *x = f32_rows(ctx, LOOM_SLOT_X, hp->n_embd, n);
	add_node(ctx, LOOM_OP_GET_ROWS, x, &m->token_embd, slot(ctx, LOOM_SLOT_TOKENS, LOOM_DTYPE_I32, n, 1, 1));
	/* The contract's scale and the file's multiplier, in one pass. */
	float embd_scale = (m->contract->embd_scale_sqrt ? sqrtf((float)hp->n_embd) : m->contract->embd_scale) *
			   hp->embedding_mult;
	if (embd_scale != 1.0f)
		scale(ctx, x, embd_scale);
	if (m->contract->positions == LOOM_POSITIONS_LEARNED) {
		loom_tensor *p = f32_rows(ctx, LOOM_SLOT_PROJ, hp->n_embd, n);
		add_node(ctx, LOOM_OP_GET_ROWS, p, &m->pos_embd, slot(ctx, LOOM_SLOT_POS, LOOM_DTYPE_I32, n, 1, 1));
		add_node(ctx, LOOM_OP_ADD, x, x, p);
	}

	for (int il = 0; il < hp->n_layer; il++)
		layer(ctx, &m->layers[il], il, n, n_kv);

	/* Only the rows whose logits are wanted go through the head. */
	if (n_out != n) {
		loom_tensor *sel = f32_rows(ctx, LOOM_SLOT_XOUT, hp->n_embd, n_out);
		add_node(ctx, LOOM_OP_GET_ROWS, sel, x, slot(ctx, LOOM_SLOT_OUT_IDS, LOOM_DTYPE_I32, n_out, 1, 1));
		x = sel;
	}
	loom_tensor *xb = f32_rows(ctx, LOOM_SLOT_XB, hp->n_embd, n_out);
	norm(ctx, xb, x, &m->output_norm, &m->output_norm_b);
	ctx->built.head_first = ctx->n_nodes;
	if (output == LOOM_STEP_LOGITS) {
		loom_tensor *logits = f32_rows(ctx, LOOM_SLOT_LOGITS, hp->n_vocab, n_out);
		linear(ctx, logits, &m->output, &m->output_b, xb);
		/* Granite's divisor and Cohere's factor (a file has one or neither). */
		if (hp->logit_scale != 1.0f || hp->logit_mult != 1.0f)
			scale(ctx, logits, hp->logit_mult / hp->logit_scale);
		if (hp->final_logit_softcap > 0.0f) {
			loom_node *cap = add_node(ctx, LOOM_OP_SOFTCAP, logits, logits, NULL);
			cap->fp[0] = hp->final_logit_softcap;
		}
	}
	ctx->built.head_end = ctx->n_nodes;

	if (ctx->n_nodes > ctx->max_nodes || ctx->n_tensors > ctx->max_tensors)
		return loom_error(LOOM_ERR_BACKEND, "internal: the step graph outgrew its arena");
	ctx->built.valid = true;
	ctx->built.n = n;
	ctx->built.n_kv = n_kv;
	ctx->built.swa_first = ctx->swa_first;
	ctx->built.n_kv_swa = ctx->n_kv_swa;
	ctx->built.n_out = n_out;
	ctx->built.output = (int)output;
	graph->n_nodes = ctx->n_nodes;
	graph->nodes = ctx->nodes;
	return LOOM_OK;
}

loom_status loom_forward_build_shift(loom_context *ctx, const loom_kv_cache *kv, int n, loom_graph *graph)
{
	const loom_model *m = ctx->model;
	const loom_hparams *hp = &m->hp;
	const int64_t kv_dim = hp->n_head_kv * hp->head_dim;

	ctx->built.valid = false;
	ctx->n_nodes = 0;
	ctx->n_tensors = 0;
	loom_tensor *cells = slot(ctx, LOOM_SLOT_CELLS, LOOM_DTYPE_I32, n, 1, 1);
	loom_tensor *delta = slot(ctx, LOOM_SLOT_POS, LOOM_DTYPE_I32, n, 1, 1);
	for (int il = 0; il < hp->n_layer; il++) {
		if (!layer_rotates(m, il) || !loom_kv_holds(kv, m, il))
			continue;
		loom_tensor *rows = f32_rows(ctx, LOOM_SLOT_K, kv_dim, n);
		add_node(ctx, LOOM_OP_GET_ROWS, rows, &kv->k[il], cells);
		/* A turn by delta, at unit length: YaRN's magnitude correction
		 * was applied when the keys were stored. */
		loom_node *r = rope(ctx, il, slot(ctx, LOOM_SLOT_K, LOOM_DTYPE_F32, hp->head_dim, hp->n_head_kv, n), delta);
		if (r->fp[2] > 0.0f)
			r->fp[3] = 1.0f / (1.0f + 0.1f * logf(1.0f / r->fp[1]));
		else
			r->fp[3] = 1.0f;
		add_node(ctx, LOOM_OP_KV_STORE, &kv->k[il], rows, cells);
	}
	if (ctx->n_nodes > ctx->max_nodes || ctx->n_tensors > ctx->max_tensors)
		return loom_error(LOOM_ERR_BACKEND, "internal: the shift graph outgrew its arena");
	graph->n_nodes = ctx->n_nodes;
	graph->nodes = ctx->nodes;
	return LOOM_OK;
}
