/*
 * cpu_rows.c - GET_ROWS and KV_STORE: the indexed row copies, gathering the
 * table rows the indices name (decoding them to f32 on the way) or
 * scattering rows into the cache cells they name (encoding them to the
 * cache's type). Semantics are in plugin_api.h.
 */
#include "cpu_backend.h"

#include "cpu_blocks.h"
#include "cpu_half.h"
#include "cpu_quant.h"

#include <string.h>

/* ---- GET_ROWS ---- */

/* The table may be a weight in one of the backend's layouts: a tied
 * head's repacked copy serves as the token embedding too. */
static bool get_rows_supports(const loom_node *node)
{
	const loom_tensor *table = node->src[0], *idx = node->src[1], *dst = node->dst;

	if (!cpu_weight_ok(table) || !loom_tensor_is_matrix(table))
		return false;
	if (table->dtype != LOOM_DTYPE_F32 && table->dtype != LOOM_DTYPE_F16 &&
	    table->dtype != LOOM_DTYPE_BF16 && cpu_quant_type_of(table->dtype) == NULL)
		return false;
	return loom_tensor_is(dst, LOOM_DTYPE_F32) && loom_tensor_is_matrix(dst) && dst->ne[0] == table->ne[0] &&
	       cpu_is_index_vector(idx, dst->ne[1]);
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
	const loom_dtype_traits l = loom_dtype_traits_of(table->dtype);
	union {
		cpu_block_q4_0 q4_0;
		cpu_block_q5_0 q5_0;
		cpu_block_q8_0 q8_0;
		cpu_block_mxfp4 mxfp4;
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
			convert_repacked_row(table, idx[i], cpu_row_f32(dst, i));
		else
			convert_row(table->dtype, loom_tensor_row(table, idx[i]), cpu_row_f32(dst, i), table->ne[0]);
	}
}

const cpu_op cpu_op_get_rows = {.supports = get_rows_supports, .run = get_rows_run};

/* ---- KV_STORE ---- */

static bool kv_store_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *idx = node->src[1], *cache = node->dst;

	if (!loom_tensor_is(x, LOOM_DTYPE_F32) || !loom_tensor_is_matrix(x))
		return false;
	if (!loom_tensor_is(cache, LOOM_DTYPE_F32) && !loom_tensor_is(cache, LOOM_DTYPE_F16) &&
	    !loom_tensor_is(cache, LOOM_DTYPE_Q8_0) && !loom_tensor_is(cache, LOOM_DTYPE_Q4_0))
		return false;
	return loom_tensor_is_matrix(cache) && cache->ne[0] == x->ne[0] && cpu_is_index_vector(idx, x->ne[1]);
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
		void *dst = loom_tensor_row(cache, idx[t]);
		switch (cache->dtype) {
		case LOOM_DTYPE_F16:
			cpu_f32_to_fp16_row(cpu_row_f32(x, t), dst, n);
			break;
		case LOOM_DTYPE_Q8_0: /* as ggml's CPU rounds to a Q8_0 cache */
			cpu_quantize_act_q8_0(cpu_row_f32(x, t), dst, n);
			break;
		case LOOM_DTYPE_Q4_0:
			cpu_quantize_row_q4_0(cpu_row_f32(x, t), dst, n);
			break;
		default:
			memcpy(dst, cpu_row_f32(x, t), (size_t)n * sizeof(float));
		}
	}
}

const cpu_op cpu_op_kv_store = {.supports = kv_store_supports, .run = kv_store_run};
