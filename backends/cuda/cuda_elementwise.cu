/*
 * cuda_elementwise.cu - ADD, MUL, SCALE, SWIGLU, SWIGLU_OAI, GELU, SOFTCAP and SIGMOID: one thread per
 * element, the same expression as the CPU backend's scalar code.
 *
 * The grid's x covers a row's elements and its y the rows, stepping by
 * gridDim.y past the 65535 a grid's y may hold. Each thread reads its
 * element before writing it, so dst may alias src0 (or src1).
 *
 * An op whose result the next node multiplies by quantized weights writes
 * it as Q8_1 too (cuda_q8_1_reuse.h): a warp's lanes hold 32 consecutive
 * elements of a row, one Q8_1 block.
 */
#include "cuda_backend.cuh"
#include "cuda_quantize_q8_1.cuh"

#define EW_THREADS 256
#define EW_MAX_GRID_Y 65535

enum ew_kind { EW_ADD, EW_MUL, EW_SCALE, EW_SWIGLU, EW_GELU_TANH, EW_GELU_ERF, EW_SOFTCAP, EW_SIGMOID, EW_SWIGLU_OAI };

#define GELU_SQRT_2_OVER_PI 0.79788456080286535588f
#define GELU_COEF_A 0.044715f
#define SQRT_HALF 0.70710678118654752440f

/* Whether the op reads a second operand. */
static constexpr bool ew_binary(ew_kind k)
{
	return k == EW_ADD || k == EW_MUL || k == EW_SWIGLU || k == EW_SWIGLU_OAI;
}

/* param: SCALE's factor, SOFTCAP's cap, SWIGLU_OAI's limit; param2: SWIGLU_OAI's
 * alpha. */
template <ew_kind K> static __device__ __forceinline__ float ew_apply(float a, float b, float param, float param2)
{
	switch (K) {
	case EW_ADD:
		return a + b;
	case EW_MUL:
		return a * b;
	case EW_SCALE:
		return a * param;
	case EW_SWIGLU:
		return a / (1.0f + expf(-a)) * b;
	case EW_GELU_TANH:
		return 0.5f * a * (1.0f + tanhf(GELU_SQRT_2_OVER_PI * a * (1.0f + GELU_COEF_A * a * a)));
	case EW_GELU_ERF:
		return 0.5f * a * (1.0f + erff(a * SQRT_HALF));
	case EW_SOFTCAP:
		return param * tanhf(a * (1.0f / param));
	case EW_SIGMOID:
		return 1.0f / (1.0f + expf(-a));
	case EW_SWIGLU_OAI:
		a = fminf(a, param);
		return a / (1.0f + expf(param2 * -a)) * (fminf(fmaxf(b, -param), param) + 1.0f);
	}
	return 0.0f;
}

/* Row (i1, i2, i3) of t. The operands share dst's shape, so a row index is
 * split into its dimensions once for all three. */
static __device__ __forceinline__ char *row_at(const cuda_rows &t, int64_t i1, int64_t i2, int64_t i3)
{
	return t.data + i1 * t.nb1 + i2 * t.nb2 + i3 * t.nb3;
}

static_assert(EW_THREADS % 32 == 0, "a warp's 32 elements a Q8_1 block");

/* b_one_row: src1 is a single row, used for every row of src0. q8: NULL, or
 * where row r's Q8_1 blocks go (n a multiple of 32). */
template <ew_kind K>
static __global__ void ew_kernel(cuda_rows y, cuda_rows a, cuda_rows b, bool b_one_row, int64_t n, int64_t nrows,
				 float param, float param2, cuda_block_q8_1 *q8)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	for (int64_t r = blockIdx.y; r < nrows; r += gridDim.y) {
		int64_t i1 = r % y.ne1, i2 = (r / y.ne1) % y.ne2, i3 = r / (y.ne1 * y.ne2);
		float av = ((const float *)row_at(a, i1, i2, i3))[i], bv = 0.0f;
		if (ew_binary(K))
			bv = ((const float *)(b_one_row ? b.data : row_at(b, i1, i2, i3)))[i];
		float v = ew_apply<K>(av, bv, param, param2);
		((float *)row_at(y, i1, i2, i3))[i] = v;
		if (q8 != NULL)
			cuda_q8_1_from_warp(v, q8 + (r * n + i) / CUDA_QK);
	}
}

/* b is NULL for the unary ops. */
template <ew_kind K>
static loom_status ew_launch(cuda_backend *be, int node_index, const loom_tensor *a, const loom_tensor *b,
			     const loom_tensor *y, float param, float param2, const char *what)
{
	int64_t n = y->ne[0], nrows = loom_tensor_nrows(y);
	dim3 grid((unsigned)((n + EW_THREADS - 1) / EW_THREADS),
		  (unsigned)(nrows < EW_MAX_GRID_Y ? nrows : EW_MAX_GRID_Y));
	cuda_rows b_rows = cuda_rows_of(b != NULL ? b : a);
	ew_kernel<K><<<grid, EW_THREADS, 0, be->stream>>>(cuda_rows_of(y), cuda_rows_of(a), b_rows,
							  b != NULL && loom_tensor_nrows(b) == 1, n, nrows, param, param2,
							  cuda_q8_1_fused_out(be, node_index));
	return cuda_launched(be, what);
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

static loom_status add_run(cuda_backend *be, const loom_node *node, void *, int node_index)
{
	return ew_launch<EW_ADD>(be, node_index, node->src[0], node->src[1], node->dst, 0.0f, 0.0f, "add");
}

static loom_status mul_run(cuda_backend *be, const loom_node *node, void *, int node_index)
{
	return ew_launch<EW_MUL>(be, node_index, node->src[0], node->src[1], node->dst, 0.0f, 0.0f, "mul");
}

const cuda_op cuda_op_add = {binary_supports, NULL, add_run};
const cuda_op cuda_op_mul = {binary_supports, NULL, mul_run};

/* ---- SCALE ---- */

static bool unary_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *y = node->dst;

	return loom_tensor_is(x, LOOM_DTYPE_F32) && loom_tensor_is(y, LOOM_DTYPE_F32) && loom_tensor_same_shape(x, y);
}

static loom_status scale_run(cuda_backend *be, const loom_node *node, void *, int node_index)
{
	return ew_launch<EW_SCALE>(be, node_index, node->src[0], NULL, node->dst, node->fp[0], 0.0f, "scale");
}

const cuda_op cuda_op_scale = {unary_supports, NULL, scale_run};

/* ---- SWIGLU ---- */

static bool swiglu_supports(const loom_node *node)
{
	const loom_tensor *g = node->src[0], *u = node->src[1], *y = node->dst;

	return loom_tensor_is(g, LOOM_DTYPE_F32) && loom_tensor_is(u, LOOM_DTYPE_F32) &&
	       loom_tensor_is(y, LOOM_DTYPE_F32) && loom_tensor_same_shape(g, y) && loom_tensor_same_shape(u, y);
}

static loom_status swiglu_run(cuda_backend *be, const loom_node *node, void *, int node_index)
{
	return ew_launch<EW_SWIGLU>(be, node_index, node->src[0], node->src[1], node->dst, 0.0f, 0.0f, "swiglu");
}

const cuda_op cuda_op_swiglu = {swiglu_supports, NULL, swiglu_run};

/* ---- GELU ---- */

static bool gelu_supports(const loom_node *node)
{
	return unary_supports(node) && (node->ip[0] == LOOM_GELU_TANH || node->ip[0] == LOOM_GELU_ERF);
}

static loom_status gelu_run(cuda_backend *be, const loom_node *node, void *, int node_index)
{
	if (node->ip[0] == LOOM_GELU_ERF)
		return ew_launch<EW_GELU_ERF>(be, node_index, node->src[0], NULL, node->dst, 0.0f, 0.0f, "gelu");
	return ew_launch<EW_GELU_TANH>(be, node_index, node->src[0], NULL, node->dst, 0.0f, 0.0f, "gelu");
}

const cuda_op cuda_op_gelu = {gelu_supports, NULL, gelu_run};

/* ---- SOFTCAP ---- */

static bool softcap_supports(const loom_node *node)
{
	return unary_supports(node) && node->fp[0] > 0.0f && isfinite(node->fp[0]);
}

static loom_status softcap_run(cuda_backend *be, const loom_node *node, void *, int node_index)
{
	return ew_launch<EW_SOFTCAP>(be, node_index, node->src[0], NULL, node->dst, node->fp[0], 0.0f, "softcap");
}

const cuda_op cuda_op_softcap = {softcap_supports, NULL, softcap_run};

/* ---- SIGMOID ---- */

static loom_status sigmoid_run(cuda_backend *be, const loom_node *node, void *, int node_index)
{
	return ew_launch<EW_SIGMOID>(be, node_index, node->src[0], NULL, node->dst, 0.0f, 0.0f, "sigmoid");
}

const cuda_op cuda_op_sigmoid = {unary_supports, NULL, sigmoid_run};

/* ---- SWIGLU_OAI ---- */

static bool swiglu_oai_supports(const loom_node *node)
{
	return swiglu_supports(node) && isfinite(node->fp[0]) && node->fp[1] > 0.0f && isfinite(node->fp[1]);
}

static loom_status swiglu_oai_run(cuda_backend *be, const loom_node *node, void *, int node_index)
{
	return ew_launch<EW_SWIGLU_OAI>(be, node_index, node->src[0], node->src[1], node->dst, node->fp[1], node->fp[0],
					"swiglu_oai");
}

const cuda_op cuda_op_swiglu_oai = {swiglu_oai_supports, NULL, swiglu_oai_run};
