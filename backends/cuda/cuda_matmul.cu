/*
 * cuda_matmul.cu - LOOM_OP_MATMUL: dst[t][o] = sum_i W[o][i] * x[t][i], for
 * weights of F32, F16, BF16, the quantized types Q4_0 .. Q6_K and MXFP4
 * in their GGUF layout. Quantized weights meet Q8_1 activations (in work memory) in
 * integer dot products (cuda_matmul_quant.cu); the others meet the f32
 * activations, rounded to F16 or BF16 for those weights, in f32 or tensor
 * core products (cuda_matmul_float.cu). Both run as matrix-vector products
 * for a few tokens and as tiles for many.
 */
#include "cuda_matmul.cuh"

#include "cuda_blocks.cuh"
#include "cuda_vecdot.cuh"

#include <climits>

bool cuda_matmul_f32_strides_ok(const loom_tensor *t)
{
	for (int i = 1; i < LOOM_MAX_DIMS; i++)
		if (t->nb[i] % sizeof(float) != 0)
			return false;
	return true;
}

bool cuda_matmul_weight_ok(const loom_tensor *w)
{
	loom_dtype type = w->dtype;
	if (!loom_tensor_standard(w) ||
	    !(type == LOOM_DTYPE_F32 || type == LOOM_DTYPE_F16 || type == LOOM_DTYPE_BF16 || cuda_matmul_is_quant(type)))
		return false;
	/* The kernels read F32 rows 4 bytes at a time, the quantized types'
	 * as cuda_vecdot_align says, F16/BF16's 2. */
	size_t align = type == LOOM_DTYPE_F32		? sizeof(float)
		       : cuda_matmul_is_quant(type) ? (size_t)cuda_vecdot_align(type)
						    : sizeof(uint16_t);
	return (uintptr_t)w->data % align == 0 && w->nb[1] % align == 0 && (w->ne[2] == 1 || w->nb[2] % align == 0) &&
	       w->ne[0] <= INT_MAX && w->ne[1] <= INT_MAX;
}

static bool matmul_supports(const loom_node *node)
{
	const loom_tensor *w = node->src[0], *x = node->src[1], *y = node->dst;

	if (!cuda_matmul_weight_ok(w))
		return false;
	if (!loom_tensor_is(x, LOOM_DTYPE_F32) || !loom_tensor_is(y, LOOM_DTYPE_F32))
		return false;
	if (w->ne[2] != 1 || w->ne[3] != 1 || x->ne[0] != w->ne[0] || y->ne[0] != w->ne[1])
		return false;
	for (int i = 1; i < LOOM_MAX_DIMS; i++)
		if (x->ne[i] != y->ne[i])
			return false;
	if (!cuda_matmul_f32_strides_ok(x) || !cuda_matmul_f32_strides_ok(y))
		return false;
	return loom_tensor_nrows(x) <= CUDA_MATMUL_MAX_TOKENS;
}

/* The Q8_1 activations of quantized weights, and the part sums of a split
 * product, for any step up to this one's tokens (cuda_matmul_split.h). */
static size_t matmul_work_size(const loom_node *node)
{
	const loom_tensor *w = node->src[0], *x = node->src[1];

	if (!cuda_matmul_is_quant(w->dtype))
		return 0;
	return cuda_matmul_quant_work((int)w->ne[1], (int)loom_tensor_nrows(x), (int)x->ne[0]);
}

static loom_status matmul_run(cuda_backend *be, const loom_node *node, void *work, int node_index)
{
	loom_dtype type = node->src[0]->dtype;
	cuda_matmul_shape s = cuda_matmul_shape_of(node);

	if (cuda_matmul_is_quant(type))
		return cuda_matmul_quant(be, type, &s, s.n_tokens, work, node_index);
	return cuda_matmul_float(be, type, &s);
}

const cuda_op cuda_op_matmul = {
	.supports = matmul_supports,
	.work_size = matmul_work_size,
	.run = matmul_run,
};
