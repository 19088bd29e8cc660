/*
 * cuda_convert.cu - LOOM_OP_CONVERT: rows of one dtype re-encoded in
 * another through f32, decoded as GET_ROWS decodes and encoded with the
 * reference quantizers (cuda_quantize_weights.cuh), so that the blocks
 * come out as the CPU backend's (and `loom quantize`'s). Every dtype
 * decoded is also encoded: F32, F16, BF16 and the block types.
 */
#include "cuda_backend.cuh"

#include "cuda_dequant.cuh"
#include "cuda_quantize_weights.cuh"

#define ELEMENT_THREADS 256
#define ELEMENT_MAX_GRID_X 1024
#define ELEMENT_MAX_GRID_Y 65535
/* Threads of one block quantizer each: the K-quant search keeps about 2
 * KiB per thread in local memory. */
#define BLOCK_THREADS 64
#define BLOCK_MAX_GRID 65535

/* Into F32, F16 or BF16: one thread per element, the grid's y walking the
 * rows and its x the n elements of a row. */
template <loom_dtype SRC>
__global__ void convert_elements(cuda_rows src, cuda_rows dst, loom_dtype dst_type, int64_t n, int64_t n_rows)
{
	for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y) {
		const char *x = cuda_row(src, r);
		char *y = cuda_row(dst, r);
		for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
		     i += (int64_t)gridDim.x * blockDim.x) {
			float v = cuda_dequant(SRC, x, i);
			if (dst_type == LOOM_DTYPE_F16)
				((uint16_t *)y)[i] = cuda_f16_encode(v);
			else if (dst_type == LOOM_DTYPE_BF16)
				((uint16_t *)y)[i] = cuda_bf16_encode(v);
			else
				((float *)y)[i] = v;
		}
	}
}

/* Into a block type: one thread per destination block, which decodes the
 * block's elements of the source row first. */
template <loom_dtype DST>
__global__ void __launch_bounds__(BLOCK_THREADS)
convert_blocks(cuda_rows src, loom_dtype src_type, cuda_rows dst, int64_t blocks_per_row, int64_t n_blocks)
{
	constexpr int len = cuda_dequant_block_len(DST);
	float x[len];

	for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n_blocks;
	     k += (int64_t)gridDim.x * blockDim.x) {
		int64_t r = k / blocks_per_row, b = k % blocks_per_row;
		const char *row = cuda_row(src, r);
		for (int e = 0; e < len; e++)
			x[e] = cuda_dequant(src_type, row, b * len + e);
		cuda_quantize_block(DST, x, cuda_row(dst, r), b);
	}
}

static bool convert_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *y = node->dst;

	return loom_tensor_standard(x) && loom_tensor_standard(y) && cuda_dequant_supports(x->dtype) &&
	       cuda_dequant_supports(y->dtype) && loom_tensor_same_shape(x, y);
}

typedef void (*element_kernel)(cuda_rows, cuda_rows, loom_dtype, int64_t, int64_t);
typedef void (*block_kernel)(cuda_rows, loom_dtype, cuda_rows, int64_t, int64_t);

static element_kernel element_kernel_for(loom_dtype src_type)
{
#define ELEMENT_CASE(t) \
	case t:         \
		return convert_elements<t>;
	switch (src_type) {
	CUDA_DEQUANT_DTYPES(ELEMENT_CASE)
	default:
		return NULL;
	}
#undef ELEMENT_CASE
}

/* NULL for the types of one element per block. */
static block_kernel block_kernel_for(loom_dtype dst_type)
{
#define BLOCK_CASE(t) \
	case t:       \
		return convert_blocks<t>;
	switch (dst_type) {
	CUDA_QUANTIZE_DTYPES(BLOCK_CASE)
	default:
		return NULL;
	}
#undef BLOCK_CASE
}

static loom_status convert_run(cuda_backend *be, const loom_node *node, void *work, int node_index)
{
	const loom_tensor *x = node->src[0], *y = node->dst;
	int64_t n = y->ne[0], n_rows = loom_tensor_nrows(y);
	block_kernel blocks = block_kernel_for(y->dtype);
	(void)work;
	(void)node_index;

	if (blocks != NULL) {
		int64_t per_row = n / cuda_dequant_block_len(y->dtype), n_blocks = per_row * n_rows;
		int64_t grid = (n_blocks + BLOCK_THREADS - 1) / BLOCK_THREADS;
		blocks<<<(unsigned)(grid < BLOCK_MAX_GRID ? grid : BLOCK_MAX_GRID), BLOCK_THREADS, 0, be->stream>>>(
			cuda_rows_of(x), x->dtype, cuda_rows_of(y), per_row, n_blocks);
	} else {
		int64_t blocks_x = (n + ELEMENT_THREADS - 1) / ELEMENT_THREADS;
		dim3 grid((unsigned)(blocks_x < ELEMENT_MAX_GRID_X ? blocks_x : ELEMENT_MAX_GRID_X),
			  (unsigned)(n_rows < ELEMENT_MAX_GRID_Y ? n_rows : ELEMENT_MAX_GRID_Y));
		element_kernel_for(x->dtype)<<<grid, ELEMENT_THREADS, 0, be->stream>>>(
			cuda_rows_of(x), cuda_rows_of(y), y->dtype, n, n_rows);
	}
	return cuda_launched(be, "convert");
}

const cuda_op cuda_op_convert = {convert_supports, NULL, convert_run};
