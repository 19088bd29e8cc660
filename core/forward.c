/* forward.c - the forward pass of one step, as a graph of backend ops,
 * driven by the model's contract. */
#include "context.h"

#include "error.h"

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
	loom_tensor *t = new_tensor(ctx);
	loom_tensor_set_contiguous(t, type, ne0, ne1, ne2, 1);
	t->data = (char *)ctx->scratch.base + ctx->slot_offset[s];
	return t;
}

static loom_tensor *f32_rows(loom_context *ctx, loom_slot s, int64_t width, int n)
{
	return slot(ctx, s, LOOM_DTYPE_F32, width, n, 1);
}

/* The first n_kv cells of a cache tensor. */
static loom_tensor *cache_view(loom_context *ctx, const loom_tensor *cache, uint32_t n_kv)
{
	loom_tensor *t = new_tensor(ctx);
	*t = *cache;
	t->ne[1] = n_kv;
	t->nb[2] = t->nb[1] * n_kv;
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

static void norm(loom_context *ctx, loom_tensor *dst, loom_tensor *x, const loom_tensor *weight)
{
	const loom_model *m = ctx->model;
	loom_node *n = add_node(ctx, LOOM_OP_RMS_NORM, dst, x, weight);
	n->fp[0] = m->hp.norm_eps;
}

static void rope(loom_context *ctx, loom_tensor *x, loom_tensor *pos)
{
	const loom_model *m = ctx->model;
	loom_node *n = add_node(ctx, LOOM_OP_ROPE, x, x, pos);
	n->ip[0] = (int32_t)m->hp.n_rot;
	n->ip[1] = m->contract->rope_style;
	n->fp[0] = m->hp.rope_theta;
	n->fp[1] = 1.0f;
}

/* ---- the block ------------------------------------------------------------ */

/* x += attention(norm(x)) */
static void attention_block(loom_context *ctx, const loom_layer *l, int il, int n, uint32_t n_kv)
{
	const loom_hparams *hp = &ctx->model->hp;
	const int64_t hd = hp->head_dim, q_dim = hp->n_head * hd, kv_dim = hp->n_head_kv * hd;
	loom_tensor *x = f32_rows(ctx, LOOM_SLOT_X, hp->n_embd, n);
	loom_tensor *xb = f32_rows(ctx, LOOM_SLOT_XB, hp->n_embd, n);
	loom_tensor *pos = slot(ctx, LOOM_SLOT_POS, LOOM_DTYPE_I32, n, 1, 1);
	loom_tensor *cells = slot(ctx, LOOM_SLOT_CELLS, LOOM_DTYPE_I32, n, 1, 1);

	norm(ctx, xb, x, &l->attn_norm);

	loom_tensor *q = f32_rows(ctx, LOOM_SLOT_Q, q_dim, n);
	loom_tensor *k = f32_rows(ctx, LOOM_SLOT_K, kv_dim, n);
	loom_tensor *v = f32_rows(ctx, LOOM_SLOT_V, kv_dim, n);
	matmul(ctx, q, &l->attn_q, xb);
	matmul(ctx, k, &l->attn_k, xb);
	matmul(ctx, v, &l->attn_v, xb);

	/* RoPE sees q and k as {head_dim, heads, tokens}. */
	rope(ctx, slot(ctx, LOOM_SLOT_Q, LOOM_DTYPE_F32, hd, hp->n_head, n), pos);
	rope(ctx, slot(ctx, LOOM_SLOT_K, LOOM_DTYPE_F32, hd, hp->n_head_kv, n), pos);

	loom_kv_cache *kv = &ctx->kv;
	add_node(ctx, LOOM_OP_KV_STORE, &kv->k[il], k, cells);
	add_node(ctx, LOOM_OP_KV_STORE, &kv->v[il], v, cells);

	loom_tensor *attn = f32_rows(ctx, LOOM_SLOT_ATTN, q_dim, n);
	loom_node *a = add_node(ctx, LOOM_OP_ATTENTION, attn,
				slot(ctx, LOOM_SLOT_Q, LOOM_DTYPE_F32, hd, hp->n_head, n),
				cache_view(ctx, &kv->k[il], n_kv));
	a->src[2] = cache_view(ctx, &kv->v[il], n_kv);
	a->src[3] = slot(ctx, LOOM_SLOT_MASK, LOOM_DTYPE_F32, n_kv, n, 1);
	a->ip[0] = (int32_t)hp->n_head;
	a->ip[1] = (int32_t)hp->n_head_kv;
	a->fp[0] = 1.0f / sqrtf((float)hd);

	loom_tensor *proj = f32_rows(ctx, LOOM_SLOT_PROJ, hp->n_embd, n);
	matmul(ctx, proj, &l->attn_output, attn);
	add_node(ctx, LOOM_OP_ADD, x, x, proj);
}

/* x += ffn(norm(x)) */
static void ffn_block(loom_context *ctx, const loom_layer *l, int n)
{
	const loom_hparams *hp = &ctx->model->hp;
	loom_tensor *x = f32_rows(ctx, LOOM_SLOT_X, hp->n_embd, n);
	loom_tensor *xb = f32_rows(ctx, LOOM_SLOT_XB, hp->n_embd, n);
	loom_tensor *gate = f32_rows(ctx, LOOM_SLOT_GATE, hp->n_ff, n);
	loom_tensor *up = f32_rows(ctx, LOOM_SLOT_UP, hp->n_ff, n);
	loom_tensor *proj = f32_rows(ctx, LOOM_SLOT_PROJ, hp->n_embd, n);

	norm(ctx, xb, x, &l->ffn_norm);
	matmul(ctx, gate, &l->ffn_gate, xb);
	matmul(ctx, up, &l->ffn_up, xb);
	/* SwiGLU: silu(gate) * up, written over gate. */
	add_node(ctx, LOOM_OP_SWIGLU, f32_rows(ctx, LOOM_SLOT_GATE, hp->n_ff, n), gate, up);
	matmul(ctx, proj, &l->ffn_down, gate);
	add_node(ctx, LOOM_OP_ADD, x, x, proj);
}

int loom_forward_max_nodes(const loom_model *m)
{
	return 20 * (int)m->hp.n_layer + 8;
}

int loom_forward_max_tensors(const loom_model *m)
{
	return 32 * (int)m->hp.n_layer + 16;
}

loom_status loom_forward_build(loom_context *ctx, int n, uint32_t n_kv, int n_out, loom_graph *graph)
{
	const loom_model *m = ctx->model;
	const loom_hparams *hp = &m->hp;

	ctx->n_nodes = 0;
	ctx->n_tensors = 0;

	/* Token embeddings into the residual stream. */
	add_node(ctx, LOOM_OP_GET_ROWS, f32_rows(ctx, LOOM_SLOT_X, hp->n_embd, n),
		 &m->token_embd, slot(ctx, LOOM_SLOT_TOKENS, LOOM_DTYPE_I32, n, 1, 1));

	for (int il = 0; il < hp->n_layer; il++) {
		attention_block(ctx, &m->layers[il], il, n, n_kv);
		ffn_block(ctx, &m->layers[il], n);
	}

	/* Only the rows whose logits are wanted go through the head. */
	loom_tensor *x = f32_rows(ctx, LOOM_SLOT_X, hp->n_embd, n);
	if (n_out != n) {
		loom_tensor *sel = f32_rows(ctx, LOOM_SLOT_XOUT, hp->n_embd, n_out);
		add_node(ctx, LOOM_OP_GET_ROWS, sel, x, slot(ctx, LOOM_SLOT_OUT_IDS, LOOM_DTYPE_I32, n_out, 1, 1));
		x = sel;
	}
	loom_tensor *xb = f32_rows(ctx, LOOM_SLOT_XB, hp->n_embd, n_out);
	norm(ctx, xb, x, &m->output_norm);
	matmul(ctx, f32_rows(ctx, LOOM_SLOT_LOGITS, hp->n_vocab, n_out), &m->output, xb);

	if (ctx->n_nodes > ctx->max_nodes || ctx->n_tensors > ctx->max_tensors)
		return loom_error(LOOM_ERR_BACKEND, "internal: the step graph outgrew its arena");
	graph->n_nodes = ctx->n_nodes;
	graph->nodes = ctx->nodes;
	return LOOM_OK;
}
