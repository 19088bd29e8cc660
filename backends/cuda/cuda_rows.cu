/*
 * cuda_rows.cu - GET_ROWS and KV_STORE: one indexed row copy that decodes
 * (and for an F16 cache encodes) on the way, gathering the table rows
 * that the indices name or scattering rows into the cache cells they name.
 * Semantics are in plugin_api.h.
 */
#include "cuda_backend.cuh"

#include "cuda_dequant.cuh"

#define ROWS_THREADS 256
#define ROWS_MAX_GRID_X 1024 /* longer rows are walked in strides */
#define ROWS_MAX_GRID_Y 65535

/* Row r of src to row r of dst, one side's row looked up in idx: dst row r
 * = src row idx[r] (gather) or dst row idx[r] = src row r (scatter). An
 * index outside [0, limit) marks the node and its row is left alone. The
 * grid's y walks the rows, its x the n elements of a row. */
template <loom_dtype SRC, loom_dtype DST, bool SCATTER>
__global__ void copy_rows(cuda_rows src, cuda_rows dst, const int32_t *idx, int64_t limit, int64_t n,
			  int64_t n_rows, int *bad_node, int node)
{
	for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y) {
		int32_t k = idx[r];
		if (k < 0 || k >= limit) {
			if (blockIdx.x == 0 && threadIdx.x == 0)
				cuda_fail(bad_node, node);
			continue;
		}
		const char *x = cuda_row(src, SCATTER ? r : k);
		char *y = cuda_row(dst, SCATTER ? k : r);
		for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
		     i += (int64_t)gridDim.x * blockDim.x) {
			float v = cuda_dequant(SRC, x, i);
			if (DST == LOOM_DTYPE_F16)
				((uint16_t *)y)[i] = cuda_f16_encode(v);
			else
				((float *)y)[i] = v;
		}
	}
}

typedef void (*copy_rows_kernel)(cuda_rows, cuda_rows, const int32_t *, int64_t, int64_t, int64_t, int *, int);

static loom_status launch(cuda_backend *be, copy_rows_kernel kernel, const loom_tensor *src, const loom_tensor *dst,
			  const loom_tensor *idx, int64_t limit, int node_index, const char *what)
{
	int64_t n = dst->ne[0], n_rows = idx->ne[0];
	int64_t blocks_x = (n + ROWS_THREADS - 1) / ROWS_THREADS;
	dim3 grid((unsigned)(blocks_x < ROWS_MAX_GRID_X ? blocks_x : ROWS_MAX_GRID_X),
		  (unsigned)(n_rows < ROWS_MAX_GRID_Y ? n_rows : ROWS_MAX_GRID_Y));

	kernel<<<grid, ROWS_THREADS, 0, be->stream>>>(cuda_rows_of(src), cuda_rows_of(dst), (const int32_t *)idx->data,
						       limit, n, n_rows, be->bad_node, node_index);
	return cuda_launched(be, what);
}

/* An I32 index vector of n entries. */
static bool is_index_vector(const loom_tensor *t, int64_t n)
{
	return loom_tensor_is(t, LOOM_DTYPE_I32) && loom_tensor_is_vector(t) && t->ne[0] == n;
}

static bool is_matrix(const loom_tensor *t)
{
	return t->ne[2] == 1 && t->ne[3] == 1;
}

/* ---- GET_ROWS ---- */

static bool get_rows_supports(const loom_node *node)
{
	const loom_tensor *table = node->src[0], *idx = node->src[1], *dst = node->dst;

	if (!loom_tensor_standard(table) || !is_matrix(table) || !cuda_dequant_supports(table->dtype))
		return false;
	return loom_tensor_is(dst, LOOM_DTYPE_F32) && is_matrix(dst) && dst->ne[0] == table->ne[0] &&
	       is_index_vector(idx, dst->ne[1]);
}

static copy_rows_kernel gather_kernel(loom_dtype table_type)
{
#define GATHER_CASE(t) \
	case t:        \
		return copy_rows<t, LOOM_DTYPE_F32, false>;
	switch (table_type) {
	CUDA_DEQUANT_DTYPES(GATHER_CASE)
	default:
		return NULL;
	}
#undef GATHER_CASE
}

static loom_status get_rows_run(cuda_backend *be, const loom_node *node, void *work, int node_index)
{
	const loom_tensor *table = node->src[0];
	(void)work;
	return launch(be, gather_kernel(table->dtype), table, node->dst, node->src[1], table->ne[1], node_index,
		      "get_rows");
}

const cuda_op cuda_op_get_rows = {get_rows_supports, NULL, get_rows_run};

/* ---- KV_STORE ---- */

static bool kv_store_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *idx = node->src[1], *cache = node->dst;

	if (!loom_tensor_is(x, LOOM_DTYPE_F32) || !is_matrix(x))
		return false;
	if (!loom_tensor_is(cache, LOOM_DTYPE_F32) && !loom_tensor_is(cache, LOOM_DTYPE_F16))
		return false;
	return is_matrix(cache) && cache->ne[0] == x->ne[0] && is_index_vector(idx, x->ne[1]);
}

static loom_status kv_store_run(cuda_backend *be, const loom_node *node, void *work, int node_index)
{
	const loom_tensor *cache = node->dst;
	copy_rows_kernel kernel = cache->dtype == LOOM_DTYPE_F16 ? copy_rows<LOOM_DTYPE_F32, LOOM_DTYPE_F16, true>
								 : copy_rows<LOOM_DTYPE_F32, LOOM_DTYPE_F32, true>;
	(void)work;
	return launch(be, kernel, node->src[0], cache, node->src[1], cache->ne[1], node_index, "kv_store");
}

const cuda_op cuda_op_kv_store = {kv_store_supports, NULL, kv_store_run};
