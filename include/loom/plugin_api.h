/*
 * plugin_api.h - the ABI between libloom and its plugins.
 *
 * A plugin is a shared object that exports exactly one symbol,
 *
 *     const loom_plugin_desc *loom_plugin_entry(void);
 *
 * returning a pointer to a static descriptor. The core reads abi_version
 * before touching anything else and refuses a plugin whose number is not
 * exactly LOOM_PLUGIN_ABI_VERSION, saying both numbers and to rebuild it.
 *
 * The rules that number keeps:
 *   - It goes up, and every plugin is rebuilt, when anything a plugin
 *     already relies on changes: a struct's fields or their order (beyond
 *     the growth below), a slot's signature or meaning, an enum value's
 *     number, or an op's sources, parameters or result - including an op
 *     parameter that was unused gaining a meaning an older plugin would
 *     ignore (ROPE's YaRN parameters were one, the Q4_0 cache another:
 *     version 2; ATTENTION's soft-cap and sinks, and six sources a node,
 *     version 3).
 *   - It stays when a slot is added at a vtable's end (an older plugin's
 *     struct_size stops before it, and the core treats the slot as absent:
 *     the core only calls a slot that lies inside struct_size and is not
 *     NULL), or when an op or dtype is added under a new number, never a
 *     reused one (a plugin's supports() refuses a node it does not know).
 *   - An op's meaning is its text below; a change to it is a change of the
 *     ABI, so that a plugin never computes an op by an older meaning.
 *
 * Plugins include only this header (and loom.h for the shared enums); they
 * link against nothing of loom's. Everything they need from the core comes
 * through the loom_host table passed to probe/init/open.
 */
#ifndef LOOM_PLUGIN_API_H
#define LOOM_PLUGIN_API_H

#include "loom.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_PLUGIN_ABI_VERSION 3
#define LOOM_PLUGIN_ENTRY_SYMBOL "loom_plugin_entry"

/* A plugin's one export: LOOM_PLUGIN_DEFINE(descriptor) at file scope
 * defines loom_plugin_entry() returning &descriptor, visible and unmangled
 * (from C or C++). */
#ifdef __cplusplus
#define LOOM_PLUGIN_EXTERN_ extern "C"
#else
#define LOOM_PLUGIN_EXTERN_
#endif
#define LOOM_PLUGIN_DEFINE(descriptor)                                        \
	LOOM_PLUGIN_EXTERN_ LOOM_API const loom_plugin_desc *loom_plugin_entry(void); \
	LOOM_PLUGIN_EXTERN_ LOOM_API const loom_plugin_desc *loom_plugin_entry(void)  \
	{                                                                     \
		return &(descriptor);                                         \
	}

/* True if slot `member` of vtable `vt` exists in the plugin's version of the
 * table and is set. */
#define LOOM_VT_HAS(vt, member)                                                   \
	((vt) != NULL && (vt)->struct_size >= offsetof(__typeof__(*(vt)), member) + \
						      sizeof((vt)->member) &&        \
	 (vt)->member != NULL)

/* ------------------------------------------------------------------------ */
/* Services the core offers to plugins.                                     */

typedef struct loom_host {
	uint32_t struct_size;
	/* Log a message (printf-style) attributed to the plugin. */
	void (*log)(loom_log_level level, const char *plugin, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	/* Record the reason for a failure that the plugin is about to report by
	 * its return value; it becomes loom_last_error() for the caller. */
	void (*set_error)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
} loom_host;

/* ------------------------------------------------------------------------ */
/* Element types' traits: name and block geometry, shared by the core and   */
/* plugins (header-only so that plugins need not link the core).            */

typedef struct loom_dtype_traits {
	const char *name;  /* NULL for numbers that name no type */
	int64_t block;     /* elements per block */
	size_t block_bytes;
} loom_dtype_traits;

static inline loom_dtype_traits loom_dtype_traits_make_(const char *name, int64_t block, size_t block_bytes)
{
	loom_dtype_traits l;
	l.name = name;
	l.block = block;
	l.block_bytes = block_bytes;
	return l;
}

/* A switch rather than a designated table, so that C++ (the CUDA backend)
 * compiles this header too. */
static inline loom_dtype_traits loom_dtype_traits_of(int type)
{
	switch (type) {
	case LOOM_DTYPE_F32: return loom_dtype_traits_make_("f32", 1, 4);
	case LOOM_DTYPE_F16: return loom_dtype_traits_make_("f16", 1, 2);
	case LOOM_DTYPE_Q4_0: return loom_dtype_traits_make_("q4_0", 32, 18);
	case LOOM_DTYPE_Q4_1: return loom_dtype_traits_make_("q4_1", 32, 20);
	case LOOM_DTYPE_Q5_0: return loom_dtype_traits_make_("q5_0", 32, 22);
	case LOOM_DTYPE_Q5_1: return loom_dtype_traits_make_("q5_1", 32, 24);
	case LOOM_DTYPE_Q8_0: return loom_dtype_traits_make_("q8_0", 32, 34);
	case LOOM_DTYPE_Q8_1: return loom_dtype_traits_make_("q8_1", 32, 36);
	case LOOM_DTYPE_Q2_K: return loom_dtype_traits_make_("q2_k", 256, 84);
	case LOOM_DTYPE_Q3_K: return loom_dtype_traits_make_("q3_k", 256, 110);
	case LOOM_DTYPE_Q4_K: return loom_dtype_traits_make_("q4_k", 256, 144);
	case LOOM_DTYPE_Q5_K: return loom_dtype_traits_make_("q5_k", 256, 176);
	case LOOM_DTYPE_Q6_K: return loom_dtype_traits_make_("q6_k", 256, 210);
	case LOOM_DTYPE_Q8_K: return loom_dtype_traits_make_("q8_k", 256, 292);
	case LOOM_DTYPE_I8: return loom_dtype_traits_make_("i8", 1, 1);
	case LOOM_DTYPE_I16: return loom_dtype_traits_make_("i16", 1, 2);
	case LOOM_DTYPE_I32: return loom_dtype_traits_make_("i32", 1, 4);
	case LOOM_DTYPE_I64: return loom_dtype_traits_make_("i64", 1, 8);
	case LOOM_DTYPE_F64: return loom_dtype_traits_make_("f64", 1, 8);
	case LOOM_DTYPE_BF16: return loom_dtype_traits_make_("bf16", 1, 2);
	case LOOM_DTYPE_MXFP4: return loom_dtype_traits_make_("mxfp4", 32, 17);
	default: return loom_dtype_traits_make_(NULL, 0, 0);
	}
}

/* Bytes of a row of n elements; 0 if the type is unknown or n is not a
 * multiple of its block. */
static inline size_t loom_dtype_row_bytes(int type, int64_t n)
{
	loom_dtype_traits l = loom_dtype_traits_of(type);
	if (l.block == 0 || n < 0 || n % l.block != 0)
		return 0;
	return (size_t)(n / l.block) * l.block_bytes;
}

/* ------------------------------------------------------------------------ */
/* Tensors and graphs: what a backend computes.                             */

#define LOOM_MAX_DIMS 4

/* A view of backend memory. ne[0] is the contiguous dimension (as in ggml):
 * a weight matrix of n_out rows of n_in elements has ne = {n_in, n_out}.
 * nb[i] is the stride of dimension i in bytes; for block-quantized types
 * nb[0] is the block size in bytes and ne[0] must be a multiple of the block
 * length. data is a backend address: a host pointer on CPU backends, a device
 * pointer on GPU backends. */
typedef struct loom_tensor {
	loom_dtype dtype;
	int64_t ne[LOOM_MAX_DIMS];
	size_t nb[LOOM_MAX_DIMS];
	void *data;
	const char *name; /* for error messages; may be NULL */
	/* 0: the dtype's own (GGUF) layout, described by ne and nb. Anything
	 * else: a layout of the backend's own, given by its weight_repack;
	 * only that backend reads such a tensor, as MATMUL's src0, or as
	 * GET_ROWS's table where its supports() takes it there (a tied head's
	 * copy serving as the token embedding). */
	uint32_t layout;
} loom_tensor;

/* The operations of a forward step. Unless stated, tensors are F32, rows are
 * ne[0] long and there are ne[1]*ne[2]*ne[3] of them, and dst may not alias a
 * source. Parameters live in node->ip[] (integers) and node->fp[] (floats). */
typedef enum loom_op {
	LOOM_OP_NONE = 0,

	/* dst row i = src0 row src1[i], converted to F32.
	 * src0: table (any dtype the backend supports); src1: I32 indices [n].
	 * An index outside the table makes compute fail (LOOM_ERR_INVALID_ARGUMENT). */
	LOOM_OP_GET_ROWS = 1,

	/* dst row = src0 row / sqrt(mean(row^2) + fp[0]) (* src1 if given).
	 * src1 (optional): F32 weight of ne[0] elements, broadcast over rows.
	 * dst may alias src0. */
	LOOM_OP_RMS_NORM = 2,

	/* dst[t][o] = sum_i src0[o][i] * src1[t][i]
	 * src0: weight, ne = {n_in, n_out}, any supported dtype;
	 * src1: F32 activations, ne = {n_in, n_tokens}; dst: F32 {n_out, n_tokens}.
	 * Backends may round src1 to the weight's dot type first (F16 for F16,
	 * Q8_0 for Q8_0, ...), as llama.cpp does. */
	LOOM_OP_MATMUL = 3,

	/* dst = src0 + src1; src1 has the same shape or one row (broadcast).
	 * dst may alias src0. */
	LOOM_OP_ADD = 4,

	/* dst = src0 * src1, elementwise; src1 same shape or one row. dst may
	 * alias src0. */
	LOOM_OP_MUL = 5,

	/* Rotary position embedding, in place allowed (dst may alias src0).
	 * src0: ne = {head_dim, n_heads, n_tokens}; src1: I32 positions [n_tokens];
	 * src2 (optional): F32 frequency factors [n_rot/2] (Llama 3's).
	 * ip[0] = n_rot (dimensions rotated, even, <= head_dim; the rest pass
	 * through); ip[1] = style (LOOM_ROPE_*); fp[0] = theta base;
	 * fp[1] = frequency scale (1 = none). For dimension pair i (0-based,
	 * i < n_rot/2) the angle is pos * fp[1] * base^(-2i/n_rot) / ff[i]
	 * (ff[i] = 1 without src2), fp[1] > 0. (llama.cpp computes
	 * base^(-2i/n_rot) as a running f32 product; the CPU backends do the
	 * same, so their angles match it bit for bit.)
	 * YaRN, as ggml's rope: fp[2] = ext_factor (0 = none), fp[3] =
	 * attn_factor (cos and sin are multiplied by it; 0 means 1), fp[4] =
	 * beta_fast, fp[5] = beta_slow, ip[2] = the original context length.
	 * With ext_factor e > 0 pair i's angle mixes the scaled angle a_s and
	 * the unscaled a_u as fma(a_s, 1 - r, a_u r), r = e * ramp(i), ramp going
	 * from 1 to 0 between the pairs whose wavelengths fit beta_fast and
	 * beta_slow turns into the original context, and the attn_factor is
	 * multiplied by 1 + 0.1 ln(1 / fp[1]). */
	LOOM_OP_ROPE = 6,

	/* Store new keys or values in the cache: dst row src1[t] = src0 row t,
	 * converted to dst's dtype (F32 or F16). src0: F32 {kv_dim, n_tokens};
	 * src1: I32 cell indices [n_tokens]; dst: the cache {kv_dim, n_cells}.
	 * A cell index outside the cache makes compute fail. */
	LOOM_OP_KV_STORE = 7,

	/* Scaled dot-product attention over cached keys and values.
	 * src0: Q, F32 {head_dim, n_head, n_tokens};
	 * src1: K cache {head_dim * n_head_kv, n_kv} (F32 or F16);
	 * src2: V cache, same shape and type as K;
	 * src3: mask, F32 {n_kv, n_tokens}: 0 to attend, -INFINITY to skip
	 * (optional: NULL attends to every cell); a row that attends to no
	 * cell gives zeros;
	 * src4 (optional): sinks, F32 [n_head]: head h's softmax also takes
	 * the logit sink[h], which adds e^sink[h] to its denominator and
	 * nothing to its output (gpt-oss);
	 * dst: F32 {head_dim * n_head, n_tokens}.
	 * ip[0] = n_head, ip[1] = n_head_kv (query head h reads kv head
	 * h / (n_head / n_head_kv)); fp[0] = scale applied to q.k;
	 * fp[1] = soft-cap c (0: none): a score s = scale * q.k becomes
	 * c tanh(s * f32(1 / c)) before the mask is added (Gemma 2). */
	LOOM_OP_ATTENTION = 8,

	/* dst = silu(src0) * src1, elementwise (SwiGLU's gate). dst may alias
	 * src0. */
	LOOM_OP_SWIGLU = 9,

	/* dst = src0 * fp[0]. dst may alias src0. */
	LOOM_OP_SCALE = 10,

	/* dst = src0 converted to dst's dtype, row by row; same shape. Any
	 * supported dtype to F32, and F32 to any supported dtype, quantizing
	 * with the backend's reference quantizer for that type (what
	 * `loom quantize` writes). */
	LOOM_OP_CONVERT = 11,

	/* dst row = (src0 row - mean) / sqrt(var + fp[0]) (* src1) (+ src2),
	 * var the mean of squared deviations. src1, src2 (optional): F32
	 * weight and bias of ne[0] elements, broadcast over rows; the weight
	 * multiplies, then the bias adds, each rounded to f32 (as ggml's
	 * norm, mul and add). dst may alias src0. */
	LOOM_OP_LAYER_NORM = 12,

	/* dst = gelu(src0), elementwise: ip[0] = 0 for the tanh approximation
	 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), 1 for the exact
	 * 0.5 x (1 + erf(x / sqrt(2))). dst may alias src0. */
	LOOM_OP_GELU = 13,

	/* dst = fp[0] * tanh(src0 * f32(1 / fp[0])), elementwise: soft-capping
	 * (Gemma 2's final logits), which bounds values to (-fp[0], fp[0])
	 * smoothly, the product rounded to f32 before the tanh as ggml's
	 * scale, tanh, scale compute it. fp[0] > 0. dst may alias src0. */
	LOOM_OP_SOFTCAP = 14,

	/* dst row r = the indices of the ip[0] = k largest values of src0 row
	 * r, largest first, the lower index first among equal values.
	 * src0: F32 {n, rows}; dst: I32 {k, rows}, 1 <= k <= n. (A mixture of
	 * experts' choice of experts from its router's logits.) */
	LOOM_OP_TOPK = 15,

	/* The weights of a mixture of experts' chosen experts: dst[r][j] for
	 * expert src1[r][j], from router logits src0 row r.
	 * src0: F32 {n_expert, rows}; src1: I32 {k, rows} (TOPK's);
	 * dst: F32 {k, rows}. ip[0] = gating (LOOM_GATING_*): the softmax of
	 * the whole row taken at the chosen experts, the softmax of the
	 * chosen logits alone, or the sigmoid of each. ip[1] != 0: each row's
	 * weights divided by their sum (summed in double, rounded to f32).
	 * fp[0] = a factor on every weight, applied last (1: none). A softmax
	 * is ggml's: e_i = expf(x_i - max) in f32, their sum in double, and
	 * p_i = e_i * f32(1 / sum). An index outside [0, n_expert) makes
	 * compute fail. */
	LOOM_OP_MOE_WEIGHTS = 16,

	/* A matmul per chosen expert: dst[t][j] = W[src2[t][j]] x[t][j'],
	 * j' = j, or 0 where src1 has one row per token (broadcast to every
	 * chosen expert).
	 * src0: the experts' weights {n_in, n_out, n_expert}, any dtype MATMUL
	 * takes, expert e's matrix at e * nb[2]; src1: F32 {n_in, 1 or k,
	 * n_tokens}; src2: I32 {k, n_tokens}; src3 (optional): the experts'
	 * biases, F32 {n_out, n_expert}, expert e's row added to its products
	 * (gpt-oss); dst: F32 {n_out, k, n_tokens}. Rounding as MATMUL's for
	 * the weight's type. An index outside [0, n_expert) makes compute
	 * fail. */
	LOOM_OP_MATMUL_ID = 17,

	/* dst row t = sum over j of src1[t][j] * src0[t][j], each product
	 * rounded to f32 and added in order of j (ggml's mul, then adds).
	 * src0: F32 {n, k, n_tokens}; src1: F32 {k, n_tokens};
	 * dst: F32 {n, n_tokens}. (A mixture of experts' outputs, weighted.) */
	LOOM_OP_MOE_SUM = 18,

	/* dst = 1 / (1 + expf(-src0)), elementwise (a shared expert's gate).
	 * dst may alias src0. */
	LOOM_OP_SIGMOID = 19,

	/* gpt-oss's clamped SwiGLU: g = min(src0, fp[1]), u = src1 clamped to
	 * [-fp[1], fp[1]], dst = g / (1 + expf(-fp[0] g)) * (u + 1), as ggml's
	 * swiglu_oai (fp[0] = alpha, 1.702; fp[1] = limit, 7). src1 has
	 * src0's shape; dst may alias src0. */
	LOOM_OP_SWIGLU_OAI = 20,

	LOOM_OP_COUNT
} loom_op;

typedef enum loom_gating {
	LOOM_GATING_SOFTMAX = 0,          /* softmax over every expert (Mixtral, Qwen) */
	LOOM_GATING_SOFTMAX_SELECTED = 1, /* softmax over the chosen experts (gpt-oss) */
	LOOM_GATING_SIGMOID = 2           /* sigmoid of each chosen logit */
} loom_gating;

typedef enum loom_rope_style {
	LOOM_ROPE_NORMAL = 0, /* rotate adjacent pairs (2i, 2i+1) */
	LOOM_ROPE_NEOX = 2    /* rotate (i, i + n_rot/2) */
} loom_rope_style;

typedef enum loom_gelu_kind {
	LOOM_GELU_TANH = 0, /* the tanh approximation (GPT-2, Phi-2, Gemma) */
	LOOM_GELU_ERF = 1   /* the exact form */
} loom_gelu_kind;

#define LOOM_NODE_MAX_SRC 6
#define LOOM_NODE_MAX_PARAMS 8

typedef struct loom_node {
	loom_op op;
	loom_tensor *dst;
	loom_tensor *src[LOOM_NODE_MAX_SRC];
	int32_t ip[LOOM_NODE_MAX_PARAMS];
	float fp[LOOM_NODE_MAX_PARAMS];
} loom_node;

/* One forward step, in execution order. A node reads only tensors written by
 * earlier nodes, weights, or inputs the core uploaded before compute. */
typedef struct loom_graph {
	int n_nodes;
	loom_node *nodes;
} loom_graph;

/* ------------------------------------------------------------------------ */
/* The vocabulary every backend shares: an op's name, a tensor's rows, and  */
/* the shape predicates supports() is written with.                        */

/* "MATMUL", ...; "an unknown op" for a number this header does not have. */
static inline const char *loom_op_name(loom_op op)
{
	static const char *const names[LOOM_OP_COUNT] = {
		"NONE",	   "GET_ROWS",	 "RMS_NORM", "MATMUL", "ADD",	  "MUL",	"ROPE",
		"KV_STORE", "ATTENTION", "SWIGLU",   "SCALE",  "CONVERT", "LAYER_NORM", "GELU",
		"SOFTCAP",  "TOPK",	 "MOE_WEIGHTS", "MATMUL_ID", "MOE_SUM", "SIGMOID", "SWIGLU_OAI",
	};
	return (int)op >= 0 && op < LOOM_OP_COUNT ? names[op] : "an unknown op";
}

/* Rows of a tensor: ne[1] * ne[2] * ne[3]. */
static inline int64_t loom_tensor_nrows(const loom_tensor *t)
{
	return t->ne[1] * t->ne[2] * t->ne[3];
}

/* Address of row r, counting rows over dimensions 1..3 in order. Views (a
 * head of a fused projection, a window of the cache) have strides of their
 * own, so a row's place comes from nb, never from r * ne[0]. */
static inline void *loom_tensor_row(const loom_tensor *t, int64_t r)
{
	int64_t i1 = r % t->ne[1], i2 = (r / t->ne[1]) % t->ne[2], i3 = r / (t->ne[1] * t->ne[2]);
	return (char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/* A known dtype in its standard layout (layout 0), positive extents, ne[0]
 * a whole number of blocks, packed along dimension 0; the strides of
 * dimensions 1..3 are free. What a kernel may assume of a tensor it did not
 * lay out itself. */
static inline bool loom_tensor_standard(const loom_tensor *t)
{
	if (t == NULL || t->layout != 0)
		return false;
	loom_dtype_traits l = loom_dtype_traits_of(t->dtype);
	if (l.block == 0)
		return false;
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		if (t->ne[i] < 1)
			return false;
	return t->ne[0] % l.block == 0 && t->nb[0] == l.block_bytes;
}

/* loom_tensor_standard, of this dtype. */
static inline bool loom_tensor_is(const loom_tensor *t, loom_dtype type)
{
	return loom_tensor_standard(t) && t->dtype == type;
}

static inline bool loom_tensor_same_shape(const loom_tensor *a, const loom_tensor *b)
{
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		if (a->ne[i] != b->ne[i])
			return false;
	return true;
}

/* ne = {n, 1, 1, 1}. */
static inline bool loom_tensor_is_vector(const loom_tensor *t)
{
	return t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1;
}

/* ne[2] and ne[3] are 1. */
static inline bool loom_tensor_is_matrix(const loom_tensor *t)
{
	return t->ne[2] == 1 && t->ne[3] == 1;
}

/* The types and shapes the mixture-of-experts ops' texts above give, for
 * supports(): what every backend checks, beside limits of its own. */
static inline bool loom_topk_node_ok(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *y = node->dst;
	return loom_tensor_is(x, LOOM_DTYPE_F32) && loom_tensor_is(y, LOOM_DTYPE_I32) && node->ip[0] >= 1 &&
	       node->ip[0] <= x->ne[0] && y->ne[0] == node->ip[0] && loom_tensor_nrows(x) == loom_tensor_nrows(y);
}

static inline bool loom_moe_weights_node_ok(const loom_node *node)
{
	const loom_tensor *logits = node->src[0], *ids = node->src[1], *w = node->dst;
	const int32_t gating = node->ip[0];
	return loom_tensor_is(logits, LOOM_DTYPE_F32) && loom_tensor_is(ids, LOOM_DTYPE_I32) &&
	       loom_tensor_is(w, LOOM_DTYPE_F32) &&
	       (gating == LOOM_GATING_SOFTMAX || gating == LOOM_GATING_SOFTMAX_SELECTED || gating == LOOM_GATING_SIGMOID) &&
	       isfinite(node->fp[0]) && loom_tensor_same_shape(ids, w) &&
	       loom_tensor_nrows(logits) == loom_tensor_nrows(w) && w->ne[0] <= logits->ne[0];
}

/* MATMUL_ID's activations, indices, biases and results against its
 * weights' shape (the weights' type and layout are the backend's to
 * judge). */
static inline bool loom_matmul_id_node_ok(const loom_node *node)
{
	const loom_tensor *w = node->src[0], *x = node->src[1], *ids = node->src[2], *bias = node->src[3];
	const loom_tensor *y = node->dst;
	if (w->ne[3] != 1 || !loom_tensor_is(x, LOOM_DTYPE_F32) || !loom_tensor_is(ids, LOOM_DTYPE_I32) ||
	    !loom_tensor_is(y, LOOM_DTYPE_F32))
		return false;
	const int64_t k = ids->ne[0], n_tokens = ids->ne[1];
	if (ids->ne[2] != 1 || ids->ne[3] != 1)
		return false;
	if (x->ne[0] != w->ne[0] || (x->ne[1] != 1 && x->ne[1] != k) || x->ne[2] != n_tokens || x->ne[3] != 1)
		return false;
	if (bias != NULL && (!loom_tensor_is(bias, LOOM_DTYPE_F32) || bias->ne[0] != w->ne[1] || bias->ne[1] != w->ne[2] ||
			     bias->ne[2] != 1 || bias->ne[3] != 1))
		return false;
	return y->ne[0] == w->ne[1] && y->ne[1] == k && y->ne[2] == n_tokens && y->ne[3] == 1;
}

static inline bool loom_moe_sum_node_ok(const loom_node *node)
{
	const loom_tensor *y = node->src[0], *w = node->src[1], *dst = node->dst;
	return loom_tensor_is(y, LOOM_DTYPE_F32) && loom_tensor_is(w, LOOM_DTYPE_F32) &&
	       loom_tensor_is(dst, LOOM_DTYPE_F32) && y->ne[3] == 1 && w->ne[0] == y->ne[1] &&
	       loom_tensor_nrows(w) == y->ne[2] && dst->ne[0] == y->ne[0] && loom_tensor_nrows(dst) == y->ne[2];
}

/* ------------------------------------------------------------------------ */
/* Backend plugins.                                                         */

/* A block of backend memory. base is the address tensors point into. A
 * backend that computes in host memory (one without device_info) gives
 * host addresses: the core reads a step's logits there, in place, once
 * compute has returned. */
typedef struct loom_buffer {
	void *handle; /* the backend's own */
	void *base;
	size_t size;
} loom_buffer;

typedef struct loom_backend_options {
	uint32_t struct_size;
	int n_threads;      /* compute threads (CPU backends) */
	int device;         /* device index (GPU backends) */
	/* Options from the plugin's entry in plugins.yaml, as key/value strings. */
	int n_options;
	const char *const *option_keys;
	const char *const *option_values;
} loom_backend_options;

typedef struct loom_backend_vtable {
	uint32_t struct_size;

	/* Create a backend instance; NULL on failure (with host->set_error). */
	void *(*init)(const loom_host *host, const loom_backend_options *opts);
	void (*free)(void *backend);

	/* Memory. alloc gives zeroed memory; upload/download copy between host
	 * memory and a buffer at a byte offset. */
	loom_status (*buffer_alloc)(void *backend, size_t size, loom_buffer *out);
	void (*buffer_free)(void *backend, loom_buffer *buf);
	loom_status (*buffer_upload)(void *backend, loom_buffer *buf, size_t offset,
				     const void *src, size_t size);
	loom_status (*buffer_download)(void *backend, const loom_buffer *buf, size_t offset,
				       void *dst, size_t size);

	/* (optional) Use host memory in place, e.g. a read-only mmap of the
	 * model file, as a buffer. The core never uploads into such a buffer
	 * (the mapping may be read-only); it may wrap writable memory of its
	 * own as an op's destination (a CONVERT's). NULL slot or
	 * LOOM_ERR_UNSUPPORTED: the core allocates a buffer and uploads (or
	 * downloads) instead. */
	loom_status (*buffer_from_host)(void *backend, void *host_ptr, size_t size,
					loom_buffer *out);

	/* Can this backend run this node with these dtypes and shapes? */
	bool (*supports)(void *backend, const loom_node *node);

	/* Run every node of the graph, in order, and wait for the result. The
	 * core never calls compute on one instance from two threads at once. */
	loom_status (*compute)(void *backend, const loom_graph *graph);

	/* (optional) Offered, once at load, every weight that MATMUL
	 * reads (as src0). The backend may copy it into a layout of its own,
	 * faster to multiply: it allocates *out (freed later with buffer_free),
	 * fills it and sets *layout to a nonzero value of its choosing; the
	 * core then points the tensor at out->base with that layout, other
	 * fields unchanged. A head tied to the token embedding is offered too:
	 * the core then asks supports() whether GET_ROWS reads rows of the
	 * copy, and if so gives it that copy as the table, the file's being
	 * let go. LOOM_ERR_UNSUPPORTED keeps the standard layout;
	 * any other error fails the load. NULL slot: no weight is repacked. */
	loom_status (*weight_repack)(void *backend, const loom_tensor *w, loom_buffer *out, uint32_t *layout);

	/* (optional) The device this instance runs on (loom.h's
	 * loom_device_info), for `loom info` and
	 * for the core to check, before it allocates, that a model and its
	 * context fit. NULL slot: the host's memory, which the core does not
	 * budget. */
	loom_status (*device_info)(void *backend, loom_device_info *out);

	/* (optional) compute, also writing into node_ns[i] the nanoseconds
	 * node i took: from the end of the node before it (the start of the
	 * graph for the first) to its own end, on the backend's clock. For
	 * profiles (`loom bench -v`, loom_context_profile); it may cost a
	 * little more than compute. NULL slot: profiles have a step's time but
	 * not its nodes'. */
	loom_status (*compute_timed)(void *backend, const loom_graph *graph, uint64_t *node_ns);

	/* (optional) Allocate now whatever compute would allocate to run this
	 * graph (the work memory of its ops), keeping it for later steps. The
	 * core calls it when a context is made, with the largest steps that
	 * context will run (one token and a full batch, over the whole
	 * cache), once supports() has accepted their every node, so that a
	 * device without room for them refuses the context rather than its
	 * first step. It computes nothing. NULL slot: memory is found at
	 * compute. */
	loom_status (*reserve)(void *backend, const loom_graph *graph);
} loom_backend_vtable;

/* ------------------------------------------------------------------------ */
/* Format plugins.                                                          */

typedef enum loom_meta_type {
	LOOM_META_U8 = 0,
	LOOM_META_I8 = 1,
	LOOM_META_U16 = 2,
	LOOM_META_I16 = 3,
	LOOM_META_U32 = 4,
	LOOM_META_I32 = 5,
	LOOM_META_F32 = 6,
	LOOM_META_BOOL = 7,
	LOOM_META_STRING = 8,
	LOOM_META_ARRAY = 9,
	LOOM_META_U64 = 10,
	LOOM_META_I64 = 11,
	LOOM_META_F64 = 12
} loom_meta_type;

/* A string that need not be NUL-terminated (it may point into a mapping). */
typedef struct loom_string {
	uint64_t len;
	const char *data;
} loom_string;

/* A typed metadata value (GGUF's value types). Scalars are widened: integers
 * into u or i, floats into f, bool into b. Arrays point to `count` elements
 * of elem_type stored natively and aligned: uint8_t for BOOL, loom_string
 * for STRING, the C type otherwise. Nested arrays are not supported. */
typedef struct loom_meta_value {
	loom_meta_type type;
	loom_meta_type elem_type; /* arrays only */
	uint64_t count;           /* arrays only */
	union {
		uint64_t u;
		int64_t i;
		double f;
		bool b;
		loom_string s;
		const void *array;
	} v;
} loom_meta_value;

/* Bytes of one element of an array of t (loom_string for STRING; GGUF
 * stores each scalar in the same width); 0 for ARRAY and unknown types. */
static inline size_t loom_meta_elem_size(loom_meta_type t)
{
	switch (t) {
	case LOOM_META_U8: case LOOM_META_I8: case LOOM_META_BOOL: return 1;
	case LOOM_META_U16: case LOOM_META_I16: return 2;
	case LOOM_META_U32: case LOOM_META_I32: case LOOM_META_F32: return 4;
	case LOOM_META_U64: case LOOM_META_I64: case LOOM_META_F64: return 8;
	case LOOM_META_STRING: return sizeof(loom_string);
	case LOOM_META_ARRAY: break;
	}
	return 0;
}

typedef struct loom_meta_kv {
	loom_string key;
	loom_meta_value value;
} loom_meta_kv;

typedef struct loom_file_tensor {
	loom_string name;
	loom_dtype dtype;
	int n_dims;
	int64_t ne[LOOM_MAX_DIMS]; /* unused dimensions are 1 */
	uint64_t n_bytes;
	uint64_t file_offset;      /* absolute offset of the data in the file */
	const void *data;          /* the bytes in a read-only mapping */
} loom_file_tensor;

/* An open model file. Metadata uses GGUF's key names (general.*,
 * {arch}.*, tokenizer.ggml.*); a format that stores them differently
 * translates. The plugin owns everything reachable from here until close. */
typedef struct loom_model_file {
	uint32_t struct_size;
	const char *format;  /* e.g. "gguf v3" */
	uint64_t n_meta;
	const loom_meta_kv *meta;
	uint64_t n_tensors;
	const loom_file_tensor *tensors;
	/* The mapping the tensors point into, so the core can hand it to a
	 * backend in one piece (buffer_from_host). */
	const void *mapping;
	uint64_t mapping_size;
} loom_model_file;

typedef struct loom_format_vtable {
	uint32_t struct_size;
	/* Open and check the whole file (every offset, size and count against
	 * the file's length). NULL on failure, with host->set_error saying what
	 * and where. */
	loom_model_file *(*open)(const loom_host *host, const char *path);
	void (*close)(loom_model_file *file);

	/* (optional) Write a new file of this format holding content's
	 * metadata and tensors (each tensor's bytes read from its data
	 * pointer; file_offset and mapping are ignored). The file appears
	 * whole or not at all. NULL slot: the format cannot be written. */
	loom_status (*write)(const loom_host *host, const char *path, const loom_model_file *content);

	/* (optional) The section of the architecture contracts (their
	 * hparams.NAME and tensors.NAME) that names this format's metadata
	 * keys and tensors: "gguf" for GGUF's names, "safetensors" for Hugging
	 * Face's. A format plugin of its own naming translates to one of these.
	 * NULL: the format's files can be inspected (metadata, tensor table,
	 * vocabulary) but not run. */
	const char *contract_section;

	/* (optional) The core keeps its own copy of these bytes of an opened
	 * file (a backend repacked or uploaded them): the plugin may drop them
	 * from memory, a mapped file's pages from the process, so that a model
	 * is resident once. The bytes must still read correctly if touched
	 * again. NULL slot: nothing is released. */
	void (*release)(loom_model_file *file, const void *data, uint64_t n_bytes);
} loom_format_vtable;

/* ------------------------------------------------------------------------ */
/* The descriptor every plugin exports.                                     */

/* What a probe looks at. Backends get path == NULL and head_len == 0 and
 * score this machine; formats get the file's path and its first bytes.
 * Both get the options of their plugins.yaml entry, the same strings init
 * gets (check struct_size before reading them: older cores lack them). */
typedef struct loom_probe_args {
	uint32_t struct_size;
	const loom_host *host;
	const char *path;
	const unsigned char *head;
	size_t head_len;
	int n_options;
	const char *const *option_keys;
	const char *const *option_values;
} loom_probe_args;

typedef struct loom_plugin_desc {
	uint32_t abi_version; /* LOOM_PLUGIN_ABI_VERSION the plugin was built with */
	uint32_t kind;        /* loom_plugin_kind */
	const char *name;     /* "cpu-avx2", "gguf", ... */
	const char *version;  /* the plugin's own version string */
	const char *description;
	/* 0 = unusable on this machine (and `why` says why, NUL-terminated, at
	 * most why_size bytes); below 0 = unusable because the plugin's
	 * plugins.yaml entry is wrong, e.g. a bad option (reported as a
	 * warning); higher is better. */
	int (*probe)(const loom_probe_args *args, char *why, size_t why_size);
	/* loom_backend_vtable or loom_format_vtable, by kind. */
	const void *vtable;
	void *reserved[4];
} loom_plugin_desc;

typedef const loom_plugin_desc *(*loom_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_PLUGIN_API_H */
