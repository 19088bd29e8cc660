/*
 * cpu_ops.c - the row-wise and elementwise ops: GET_ROWS, RMS_NORM,
 * LAYER_NORM, ADD, MUL, SCALE, SWIGLU, GELU and KV_STORE. Semantics are in
 * plugin_api.h.
 */
#include "cpu_backend.h"

#include "cpu_blocks.h"
#include "cpu_convert.h"
#include "cpu_quant.h"
#include "cpu_vec.h"

#include <math.h>
#include <string.h>

/* Elementwise ops split rows into pieces of this many elements, so that a
 * single long row (one token) is still shared among the threads. */
#define PIECE 1024

typedef void (*piece_fn)(const loom_node *node, int64_t row, int64_t e0, int64_t len);

static void for_each_piece(const loom_node *node, const cpu_task *task, piece_fn fn)
{
	int64_t n = node->dst->ne[0];
	int64_t per_row = (n + PIECE - 1) / PIECE;
	int64_t lo, hi;

	cpu_split(cpu_nrows(node->dst) * per_row, task->ith, task->nth, &lo, &hi);
	for (int64_t u = lo; u < hi; u++) {
		int64_t e0 = (u % per_row) * PIECE;
		fn(node, u / per_row, e0, n - e0 < PIECE ? n - e0 : PIECE);
	}
}

static float *row_f32(const loom_tensor *t, int64_t r)
{
	return (float *)cpu_row(t, r);
}

/* An I32 index vector of n entries. */
static bool is_index_vector(const loom_tensor *t, int64_t n)
{
	return cpu_tensor_is(t, LOOM_DTYPE_I32) && cpu_is_vector(t) && t->ne[0] == n;
}

static bool is_matrix(const loom_tensor *t)
{
	return t->ne[2] == 1 && t->ne[3] == 1;
}

/* ---- GET_ROWS ---- */

/* The table may be a weight in one of the backend's layouts: a tied
 * head's repacked copy serves as the token embedding too. */
static bool get_rows_supports(const loom_node *node)
{
	const loom_tensor *table = node->src[0], *idx = node->src[1], *dst = node->dst;

	if (!cpu_weight_ok(table) || !is_matrix(table))
		return false;
	if (table->dtype != LOOM_DTYPE_F32 && table->dtype != LOOM_DTYPE_F16 &&
	    table->dtype != LOOM_DTYPE_BF16 && cpu_quant_type_of(table->dtype) == NULL)
		return false;
	return cpu_tensor_is(dst, LOOM_DTYPE_F32) && is_matrix(dst) && dst->ne[0] == table->ne[0] &&
	       is_index_vector(idx, dst->ne[1]);
}

static void convert_row(loom_dtype type, const void *src, float *dst, int64_t n)
{
	switch (type) {
	case LOOM_DTYPE_F32:
		memcpy(dst, src, (size_t)n * sizeof(float));
		break;
	case LOOM_DTYPE_F16:
		cpu_fp16_to_f32_row(src, dst, n);
		break;
	case LOOM_DTYPE_BF16:
		cpu_bf16_to_f32_row(src, dst, n);
		break;
	default:
		cpu_quant_type_of(type)->dequantize(src, dst, n);
		break;
	}
}

/* Row o of a weight in a rearranged layout, a block at a time. */
static void convert_repacked_row(const loom_tensor *table, int64_t o, float *dst)
{
	const loom_dtype_layout l = loom_dtype_layout_of(table->dtype);
	union {
		cpu_block_q4_0 q4_0;
		cpu_block_q8_0 q8_0;
		cpu_block_q4_k q4_k;
		cpu_block_q6_k q6_k;
	} block;

	for (int64_t b = 0; b < table->ne[0] / l.block; b++) {
		cpu_repacked_block(table, o, b, &block);
		convert_row(table->dtype, &block, dst + b * l.block, l.block);
	}
}

static void get_rows_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *table = node->src[0], *dst = node->dst;
	const int32_t *idx = node->src[1]->data;
	int64_t lo, hi;

	cpu_split(dst->ne[1], task->ith, task->nth, &lo, &hi);
	for (int64_t i = lo; i < hi; i++) {
		if (idx[i] < 0 || idx[i] >= table->ne[1]) {
			cpu_task_fail(task);
			continue;
		}
		if (cpu_layout_rearranges(table->layout))
			convert_repacked_row(table, idx[i], row_f32(dst, i));
		else
			convert_row(table->dtype, cpu_row(table, idx[i]), row_f32(dst, i), table->ne[0]);
	}
}

const cpu_op cpu_op_get_rows = {.supports = get_rows_supports, .run = get_rows_run};

/* ---- RMS_NORM ---- */

static bool rms_norm_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *w = node->src[1], *y = node->dst;

	if (!cpu_tensor_is(x, LOOM_DTYPE_F32) || !cpu_tensor_is(y, LOOM_DTYPE_F32) ||
	    !cpu_same_shape(x, y))
		return false;
	return w == NULL ||
	       (cpu_tensor_is(w, LOOM_DTYPE_F32) && cpu_is_vector(w) && w->ne[0] == x->ne[0]);
}

/* As ggml: squares summed in double, the mean rounded to f32, and the
 * weight applied as a separate f32 multiply. */
static void rms_norm_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *x = node->src[0], *w = node->src[1], *y = node->dst;
	int64_t n = x->ne[0], lo, hi;
	float eps = node->fp[0];

	cpu_split(cpu_nrows(x), task->ith, task->nth, &lo, &hi);
	for (int64_t r = lo; r < hi; r++) {
		const float *xr = row_f32(x, r);
		float mean = (float)(cpu_sum_squares(xr, n) / (double)n);
		float scale = 1.0f / sqrtf(mean + eps);
		cpu_scale_row(xr, scale, w != NULL ? w->data : NULL, row_f32(y, r), n);
	}
}

const cpu_op cpu_op_rms_norm = {.supports = rms_norm_supports, .run = rms_norm_run};

/* ---- LAYER_NORM ---- */

static bool is_row_param(const loom_tensor *p, int64_t n)
{
	return p == NULL || (cpu_tensor_is(p, LOOM_DTYPE_F32) && cpu_is_vector(p) && p->ne[0] == n);
}

static bool layer_norm_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *y = node->dst;

	return cpu_tensor_is(x, LOOM_DTYPE_F32) && cpu_tensor_is(y, LOOM_DTYPE_F32) && cpu_same_shape(x, y) &&
	       is_row_param(node->src[1], x->ne[0]) && is_row_param(node->src[2], x->ne[0]);
}

/* As ggml's norm: the sum and the sum of squared deviations in double,
 * mean and variance rounded to f32; then ggml's separate mul and add. */
static void layer_norm_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *x = node->src[0], *w = node->src[1], *b = node->src[2], *y = node->dst;
	int64_t n = x->ne[0], lo, hi;
	float eps = node->fp[0];

	cpu_split(cpu_nrows(x), task->ith, task->nth, &lo, &hi);
	for (int64_t r = lo; r < hi; r++) {
		const float *xr = row_f32(x, r);
		float *yr = row_f32(y, r);
		double sum = 0.0, sum2 = 0.0;
		for (int64_t i = 0; i < n; i++)
			sum += xr[i];
		float mean = (float)(sum / (double)n);
		for (int64_t i = 0; i < n; i++) {
			float v = xr[i] - mean;
			yr[i] = v;
			sum2 += (double)(v * v);
		}
		float scale = 1.0f / sqrtf((float)(sum2 / (double)n) + eps);
		cpu_scale_row(yr, scale, NULL, yr, n);
		if (w != NULL)
			for (int64_t i = 0; i < n; i++)
				yr[i] *= ((const float *)w->data)[i];
		if (b != NULL)
			for (int64_t i = 0; i < n; i++)
				yr[i] += ((const float *)b->data)[i];
	}
}

const cpu_op cpu_op_layer_norm = {.supports = layer_norm_supports, .run = layer_norm_run};

/* ---- ADD, MUL ---- */

static bool binary_supports(const loom_node *node)
{
	const loom_tensor *a = node->src[0], *b = node->src[1], *y = node->dst;

	if (!cpu_tensor_is(a, LOOM_DTYPE_F32) || !cpu_tensor_is(b, LOOM_DTYPE_F32) ||
	    !cpu_tensor_is(y, LOOM_DTYPE_F32) || !cpu_same_shape(a, y))
		return false;
	return cpu_same_shape(a, b) || (cpu_is_vector(b) && b->ne[0] == a->ne[0]);
}

/* src1's row for row r of src0: itself, or the one row broadcast. */
static const float *operand_row(const loom_tensor *b, int64_t r)
{
	return cpu_nrows(b) == 1 ? (const float *)b->data : row_f32(b, r);
}

static void add_piece(const loom_node *node, int64_t r, int64_t e0, int64_t len)
{
	const float *a = row_f32(node->src[0], r) + e0;
	const float *b = operand_row(node->src[1], r) + e0;
	float *y = row_f32(node->dst, r) + e0;

	for (int64_t i = 0; i < len; i++)
		y[i] = a[i] + b[i];
}

static void mul_piece(const loom_node *node, int64_t r, int64_t e0, int64_t len)
{
	const float *a = row_f32(node->src[0], r) + e0;
	const float *b = operand_row(node->src[1], r) + e0;
	float *y = row_f32(node->dst, r) + e0;

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

	return cpu_tensor_is(x, LOOM_DTYPE_F32) && cpu_tensor_is(y, LOOM_DTYPE_F32) &&
	       cpu_same_shape(x, y);
}

static void scale_piece(const loom_node *node, int64_t r, int64_t e0, int64_t len)
{
	cpu_scale_row(row_f32(node->src[0], r) + e0, node->fp[0], NULL, row_f32(node->dst, r) + e0,
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

	return cpu_tensor_is(g, LOOM_DTYPE_F32) && cpu_tensor_is(u, LOOM_DTYPE_F32) &&
	       cpu_tensor_is(y, LOOM_DTYPE_F32) && cpu_same_shape(g, y) && cpu_same_shape(u, y);
}

static void swiglu_piece(const loom_node *node, int64_t r, int64_t e0, int64_t len)
{
	cpu_swiglu_row(row_f32(node->src[0], r) + e0, row_f32(node->src[1], r) + e0,
		       row_f32(node->dst, r) + e0, len);
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
	cpu_gelu_row(row_f32(node->src[0], r) + e0, row_f32(node->dst, r) + e0, len,
		     (loom_gelu_kind)node->ip[0]);
}

static void gelu_run(const loom_node *node, const cpu_task *task)
{
	for_each_piece(node, task, gelu_piece);
}

const cpu_op cpu_op_gelu = {.supports = gelu_supports, .run = gelu_run};

/* ---- KV_STORE ---- */

static bool kv_store_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *idx = node->src[1], *cache = node->dst;

	if (!cpu_tensor_is(x, LOOM_DTYPE_F32) || !is_matrix(x))
		return false;
	if (!cpu_tensor_is(cache, LOOM_DTYPE_F32) && !cpu_tensor_is(cache, LOOM_DTYPE_F16) &&
	    !cpu_tensor_is(cache, LOOM_DTYPE_Q8_0) && !cpu_tensor_is(cache, LOOM_DTYPE_Q4_0))
		return false;
	return is_matrix(cache) && cache->ne[0] == x->ne[0] && is_index_vector(idx, x->ne[1]);
}

static void kv_store_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *x = node->src[0], *cache = node->dst;
	const int32_t *idx = node->src[1]->data;
	int64_t n = x->ne[0], lo, hi;

	cpu_split(x->ne[1], task->ith, task->nth, &lo, &hi);
	for (int64_t t = lo; t < hi; t++) {
		if (idx[t] < 0 || idx[t] >= cache->ne[1]) {
			cpu_task_fail(task);
			continue;
		}
		void *dst = cpu_row(cache, idx[t]);
		switch (cache->dtype) {
		case LOOM_DTYPE_F16:
			cpu_f32_to_fp16_row(row_f32(x, t), dst, n);
			break;
		case LOOM_DTYPE_Q8_0: /* as ggml's CPU rounds to a Q8_0 cache */
			cpu_quantize_act_q8_0(row_f32(x, t), dst, n);
			break;
		case LOOM_DTYPE_Q4_0:
			cpu_quantize_row_q4_0(row_f32(x, t), dst, n);
			break;
		default:
			memcpy(dst, row_f32(x, t), (size_t)n * sizeof(float));
		}
	}
}

const cpu_op cpu_op_kv_store = {.supports = kv_store_supports, .run = kv_store_run};
