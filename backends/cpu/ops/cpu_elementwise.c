/*
 * cpu_elementwise.c - ADD, MUL, SCALE, SWIGLU, SWIGLU_OAI, GELU, SOFTCAP and SIGMOID, element by element
 * over pieces of rows. Semantics are in plugin_api.h.
 */
#include "cpu_backend.h"

#include "cpu_vec.h"

#include <math.h>

/* Elementwise ops split rows into pieces of this many elements, so that a
 * single long row (one token) is still shared among the threads. */
#define PIECE 1024

typedef void (*piece_fn)(const loom_node *node, int64_t row, int64_t e0, int64_t len);

static void for_each_piece(const loom_node *node, const cpu_task *task, piece_fn fn)
{
	int64_t n = node->dst->ne[0];
	int64_t per_row = (n + PIECE - 1) / PIECE;
	int64_t lo, hi;

	cpu_split(loom_tensor_nrows(node->dst) * per_row, task->ith, task->nth, &lo, &hi);
	for (int64_t u = lo; u < hi; u++) {
		int64_t e0 = (u % per_row) * PIECE;
		fn(node, u / per_row, e0, n - e0 < PIECE ? n - e0 : PIECE);
	}
}

/* ---- ADD, MUL ---- */

static bool binary_supports(const loom_node *node)
{
	const loom_tensor *a = node->src[0], *b = node->src[1], *y = node->dst;

	if (!loom_tensor_is(a, LOOM_DTYPE_F32) || !loom_tensor_is(b, LOOM_DTYPE_F32) ||
	    !loom_tensor_is(y, LOOM_DTYPE_F32) || !loom_tensor_same_shape(a, y))
		return false;
	return loom_tensor_same_shape(a, b) || (loom_tensor_is_vector(b) && b->ne[0] == a->ne[0]);
}

/* src1's row for row r of src0: itself, or the one row broadcast. */
static const float *operand_row(const loom_tensor *b, int64_t r)
{
	return loom_tensor_nrows(b) == 1 ? (const float *)b->data : cpu_row_f32(b, r);
}

static void add_piece(const loom_node *node, int64_t r, int64_t e0, int64_t len)
{
	const float *a = cpu_row_f32(node->src[0], r) + e0;
	const float *b = operand_row(node->src[1], r) + e0;
	float *y = cpu_row_f32(node->dst, r) + e0;

	for (int64_t i = 0; i < len; i++)
		y[i] = a[i] + b[i];
}

static void mul_piece(const loom_node *node, int64_t r, int64_t e0, int64_t len)
{
	const float *a = cpu_row_f32(node->src[0], r) + e0;
	const float *b = operand_row(node->src[1], r) + e0;
	float *y = cpu_row_f32(node->dst, r) + e0;

	for (int64_t i = 0; i < len; i++)
		y[i] = a[i] * b[i];
}

static void add_run(const loom_node *node, const cpu_task *task)
{
	for_each_piece(node, task, add_piece);
}

static void mul_run(const loom_node *node, const cpu_task *task)
{
	for_each_piece(node, task, mul_piece);
}

const cpu_op cpu_op_add = {.supports = binary_supports, .run = add_run};
const cpu_op cpu_op_mul = {.supports = binary_supports, .run = mul_run};

/* ---- SCALE ---- */

static bool scale_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *y = node->dst;

	return loom_tensor_is(x, LOOM_DTYPE_F32) && loom_tensor_is(y, LOOM_DTYPE_F32) &&
	       loom_tensor_same_shape(x, y);
}

static void scale_piece(const loom_node *node, int64_t r, int64_t e0, int64_t len)
{
	cpu_scale_row(cpu_row_f32(node->src[0], r) + e0, node->fp[0], NULL, cpu_row_f32(node->dst, r) + e0,
		      len);
}

static void scale_run(const loom_node *node, const cpu_task *task)
{
	for_each_piece(node, task, scale_piece);
}

const cpu_op cpu_op_scale = {.supports = scale_supports, .run = scale_run};

/* ---- SWIGLU ---- */

static bool swiglu_supports(const loom_node *node)
{
	const loom_tensor *g = node->src[0], *u = node->src[1], *y = node->dst;

	return loom_tensor_is(g, LOOM_DTYPE_F32) && loom_tensor_is(u, LOOM_DTYPE_F32) &&
	       loom_tensor_is(y, LOOM_DTYPE_F32) && loom_tensor_same_shape(g, y) && loom_tensor_same_shape(u, y);
}

static void swiglu_piece(const loom_node *node, int64_t r, int64_t e0, int64_t len)
{
	cpu_swiglu_row(cpu_row_f32(node->src[0], r) + e0, cpu_row_f32(node->src[1], r) + e0,
		       cpu_row_f32(node->dst, r) + e0, len);
}

static void swiglu_run(const loom_node *node, const cpu_task *task)
{
	for_each_piece(node, task, swiglu_piece);
}

const cpu_op cpu_op_swiglu = {.supports = swiglu_supports, .run = swiglu_run};

/* ---- GELU ---- */

static bool gelu_supports(const loom_node *node)
{
	return scale_supports(node) && (node->ip[0] == LOOM_GELU_TANH || node->ip[0] == LOOM_GELU_ERF);
}

static void gelu_piece(const loom_node *node, int64_t r, int64_t e0, int64_t len)
{
	cpu_gelu_row(cpu_row_f32(node->src[0], r) + e0, cpu_row_f32(node->dst, r) + e0, len,
		     (loom_gelu_kind)node->ip[0]);
}

static void gelu_run(const loom_node *node, const cpu_task *task)
{
	for_each_piece(node, task, gelu_piece);
}

const cpu_op cpu_op_gelu = {.supports = gelu_supports, .run = gelu_run};

/* ---- SOFTCAP ---- */

static bool softcap_supports(const loom_node *node)
{
	return scale_supports(node) && node->fp[0] > 0.0f && isfinite(node->fp[0]);
}

static void softcap_piece(const loom_node *node, int64_t r, int64_t e0, int64_t len)
{
	cpu_softcap_row(cpu_row_f32(node->src[0], r) + e0, cpu_row_f32(node->dst, r) + e0, len, node->fp[0]);
}

static void softcap_run(const loom_node *node, const cpu_task *task)
{
	for_each_piece(node, task, softcap_piece);
}

const cpu_op cpu_op_softcap = {.supports = softcap_supports, .run = softcap_run};

/* ---- SIGMOID ---- */

static void sigmoid_piece(const loom_node *node, int64_t r, int64_t e0, int64_t len)
{
	const float *x = cpu_row_f32(node->src[0], r) + e0;
	float *y = cpu_row_f32(node->dst, r) + e0;

	for (int64_t i = 0; i < len; i++)
		y[i] = 1.0f / (1.0f + expf(-x[i]));
}

static void sigmoid_run(const loom_node *node, const cpu_task *task)
{
	for_each_piece(node, task, sigmoid_piece);
}

const cpu_op cpu_op_sigmoid = {.supports = scale_supports, .run = sigmoid_run};

/* ---- SWIGLU_OAI ---- */

static bool swiglu_oai_supports(const loom_node *node)
{
	return binary_supports(node) && loom_tensor_same_shape(node->src[0], node->src[1]) && isfinite(node->fp[0]) &&
	       node->fp[1] > 0.0f && isfinite(node->fp[1]);
}

static void swiglu_oai_piece(const loom_node *node, int64_t r, int64_t e0, int64_t len)
{
	const float *g = cpu_row_f32(node->src[0], r) + e0, *u = cpu_row_f32(node->src[1], r) + e0;
	const float alpha = node->fp[0], limit = node->fp[1];
	float *y = cpu_row_f32(node->dst, r) + e0;

	for (int64_t i = 0; i < len; i++) {
		float x = fminf(g[i], limit), v = fminf(fmaxf(u[i], -limit), limit);
		y[i] = x / (1.0f + expf(alpha * -x)) * (v + 1.0f);
	}
}

static void swiglu_oai_run(const loom_node *node, const cpu_task *task)
{
	for_each_piece(node, task, swiglu_oai_piece);
}

const cpu_op cpu_op_swiglu_oai = {.supports = swiglu_oai_supports, .run = swiglu_oai_run};
