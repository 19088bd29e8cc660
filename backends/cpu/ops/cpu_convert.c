/*
 * cpu_convert.c - CONVERT: rows of one dtype re-encoded in another,
 * through f32 - decoded as GET_ROWS decodes, encoded with the reference
 * quantizers (cpu_quant.h). This is how `loom quantize` writes its blocks.
 */
#include "cpu_backend.h"

#include "cpu_half.h"
#include "cpu_quant.h"

#include <string.h>

static bool decodable(loom_dtype t)
{
	return t == LOOM_DTYPE_F32 || t == LOOM_DTYPE_F16 || t == LOOM_DTYPE_BF16 || cpu_quant_type_of(t) != NULL;
}

static bool encodable(loom_dtype t)
{
	return t == LOOM_DTYPE_F32 || t == LOOM_DTYPE_F16 || cpu_quant_type_of(t) != NULL;
}

static bool convert_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *y = node->dst;
	if (!loom_tensor_standard(x) || !loom_tensor_standard(y) || !decodable(x->dtype) || !encodable(y->dtype))
		return false;
	for (int d = 0; d < LOOM_MAX_DIMS; d++)
		if (x->ne[d] != y->ne[d])
			return false;
	return cpu_rows_uniform(x) && cpu_rows_uniform(y);
}

/* One f32 row per thread. */
static size_t convert_scratch(const loom_node *node, int n_threads)
{
	return (size_t)n_threads * cpu_align_up((size_t)node->dst->ne[0] * sizeof(float));
}

/* A row of any decodable type but f32 (read in place) as f32. */
static void decode(loom_dtype type, const void *src, float *dst, int64_t n)
{
	if (type == LOOM_DTYPE_F16)
		cpu_fp16_to_f32_row(src, dst, n);
	else if (type == LOOM_DTYPE_BF16)
		cpu_bf16_to_f32_row(src, dst, n);
	else
		cpu_quant_type_of(type)->dequantize(src, dst, n);
}

static void encode(loom_dtype type, const float *src, void *dst, int64_t n)
{
	if (type == LOOM_DTYPE_F32)
		memcpy(dst, src, (size_t)n * sizeof(float));
	else if (type == LOOM_DTYPE_F16)
		cpu_f32_to_fp16_row(src, dst, n);
	else
		cpu_quant_type_of(type)->quantize(src, dst, n);
}

static void convert_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *x = node->src[0], *y = node->dst;
	const int64_t n = y->ne[0];
	float *row = (float *)(task->scratch + (size_t)task->ith * cpu_align_up((size_t)n * sizeof(float)));
	int64_t lo, hi;

	cpu_split(loom_tensor_nrows(y), task->ith, task->nth, &lo, &hi);
	for (int64_t r = lo; r < hi; r++) {
		/* f32 rows are encoded where they lie. */
		const float *from = x->dtype == LOOM_DTYPE_F32 ? (const float *)loom_tensor_row(x, r) : row;
		if (from == row)
			decode(x->dtype, loom_tensor_row(x, r), row, n);
		encode(y->dtype, from, loom_tensor_row(y, r), n);
	}
}

const cpu_op cpu_op_convert = {.supports = convert_supports, .scratch_size = convert_scratch, .run = convert_run};
