/*
 * cpu_matmul.c - LOOM_OP_MATMUL: dst[t][o] = sum_i W[o][i] * x[t][i].
 *
 * Two phases, as llama.cpp's CPU backend does it:
 *  1. The activations are rounded to the weight's dot type once per matmul:
 *     rows of F16 or BF16 for F16 or BF16 weights, blocks
 *     of the quantized types' activation type (Q8_0, Q8_1 or Q8_K,
 *     cpu_quant.h) for those; F32 weights read them in place. All threads
 *     share this work, then meet at a barrier; a single token's row, each
 *     thread converts for itself, and no barrier is needed.
 *  2. The output rows are split among the threads in panels of
 *     CPU_GEMM_ROWS weight rows; each panel meets the tokens a tile at a
 *     time (cpu_gemm.c). A weight repacked at load (cpu_repack.h) is
 *     multiplied in its groups of CPU_REPACK_ROWS rows instead, for every
 *     token count; with many tokens, a weight the variant could have
 *     repacked with the same results is, a group at a time, each thread
 *     into its own part of the scratch memory. Either way phase 1 also
 *     makes of the quantized activations what the repacked kernels need
 *     (cpu_repacked_prepare).
 */
#include "cpu_backend.h"

#include "cpu_amx.h"
#include "cpu_gemm.h"
#include "cpu_quant.h"
#include "cpu_repack.h"

/* Activations are converted in pieces of this many elements (a whole number
 * of blocks of every activation type), so that a single token's row is
 * still shared among the threads. */
#define CONVERT_CHUNK 256
/* Up to this many tokens a matmul is a decode's, for the work split. */
#define DECODE_TOKENS 4
_Static_assert(CONVERT_CHUNK % CPU_QK_K == 0, "pieces must hold whole Q8_K blocks");

/* Tokens whose converted activations fit in about this many bytes are
 * multiplied with a panel of weights together, so they stay in L2 while
 * the panels stream past. */
#define TOKEN_BLOCK_BYTES (256 * 1024)

static bool matmul_supports(const loom_node *node)
{
	const loom_tensor *w = node->src[0], *x = node->src[1], *y = node->dst;

	if (!cpu_weight_ok(w) || cpu_gemm_kernel(w->dtype) == NULL)
		return false;
	if (!loom_tensor_is(x, LOOM_DTYPE_F32) || !loom_tensor_is(y, LOOM_DTYPE_F32))
		return false;
	if (w->ne[2] != 1 || w->ne[3] != 1)
		return false;
	if (x->ne[0] != w->ne[0] || y->ne[0] != w->ne[1])
		return false;
	for (int i = 1; i < LOOM_MAX_DIMS; i++)
		if (x->ne[i] != y->ne[i])
			return false;
	return cpu_rows_uniform(x) && cpu_rows_uniform(y);
}

/* Tokens from which repacking a group per matmul pays for itself. */
#define REPACK_MIN_TOKENS 8

/* Rows 0..CPU_REPACK_ROWS-1 of w, as a tensor of their own. */
static loom_tensor first_group(const loom_tensor *w)
{
	loom_tensor g = *w;

	g.ne[1] = w->ne[1] < CPU_REPACK_ROWS ? w->ne[1] : CPU_REPACK_ROWS;
	g.layout = 0;
	return g;
}

/* The repacked layout the multiplication uses: the weight's own, or the
 * one its groups are repacked into per matmul, only where that gives the
 * tile kernels' results bit for bit (so that a weight's results do not
 * depend on how many tokens come at once); 0 for none. *group_bytes gets
 * the bytes of a group repacked per matmul (0 if none is). */
static uint32_t repacked_layout(const loom_node *node, size_t *group_bytes)
{
	const loom_tensor *w = node->src[0], *x = node->src[1];
	uint32_t layout = 0;

	*group_bytes = 0;
	if (cpu_layout_rearranges(w->layout))
		return w->layout;
	if (loom_tensor_nrows(x) < REPACK_MIN_TOKENS)
		return 0;
	loom_tensor g = first_group(w);
	size_t bytes = cpu_repacked_bytes(&g, &layout);
	if (bytes == 0 || !cpu_layout_exact(layout))
		return 0;
	*group_bytes = bytes;
	return layout;
}

/* Bytes of a row of what the repacked kernels make of the activations
 * (cpu_repacked_prepare). */
static size_t prepared_row_bytes(const loom_node *node)
{
	size_t group_bytes;
	uint32_t layout = repacked_layout(node, &group_bytes);

	return layout != 0 ? cpu_repacked_act_bytes(layout, node->src[0]->ne[0]) : 0;
}

static size_t align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

#if defined(CPU_HAS_AMX)
/* The quantized activation rows (quantized weights only), the activations
 * in the tiles' form, then each thread's panel. */
static size_t amx_rows_bytes(const loom_node *node)
{
	const loom_tensor *w = node->src[0], *x = node->src[1];

	return cpu_amx_quant_takes(w->dtype) ? align64((size_t)loom_tensor_nrows(x) * cpu_gemm_act_row_bytes(w->dtype, x->ne[0])) : 0;
}

static size_t amx_scratch_size(const loom_node *node, int n_threads)
{
	const loom_tensor *w = node->src[0];

	return amx_rows_bytes(node) + align64(cpu_amx_shared_bytes(w, loom_tensor_nrows(node->src[1]))) +
	       (size_t)n_threads * align64(cpu_amx_panel_bytes(w));
}
#endif

/* A single token's activations are converted by every thread for itself:
 * a barrier, which a shared conversion needs, costs more than the
 * conversion of one row. */
static bool converts_alone(const loom_node *node)
{
	return loom_tensor_nrows(node->src[1]) == 1;
}

/* The converted activations and what the repacked kernels make of them. */
static size_t activations_bytes(const loom_node *node)
{
	const loom_tensor *w = node->src[0], *x = node->src[1];

	return align64((size_t)loom_tensor_nrows(x) * cpu_gemm_act_row_bytes(w->dtype, x->ne[0])) +
	       align64((size_t)loom_tensor_nrows(x) * prepared_row_bytes(node));
}

/* The activations (one copy, or one per thread), then each thread's
 * repacked group. */
static size_t matmul_scratch_size(const loom_node *node, int n_threads)
{
	size_t group_bytes;

#if defined(CPU_HAS_AMX)
	if (cpu_amx_takes(node->src[0], loom_tensor_nrows(node->src[1])))
		return amx_scratch_size(node, n_threads);
#endif
	repacked_layout(node, &group_bytes);
	return (size_t)(converts_alone(node) ? n_threads : 1) * activations_bytes(node) +
	       (size_t)n_threads * align64(group_bytes);
}

/* Phase 1 into the activations at area: this thread's share of the
 * (token, piece) pairs, or all of them when it converts alone. */
static void convert_activations(const loom_node *node, const cpu_task *task, size_t row_bytes, char *area)
{
	const loom_tensor *w = node->src[0], *x = node->src[1];
	int64_t n = x->ne[0];
	int64_t per_row = (n + CONVERT_CHUNK - 1) / CONVERT_CHUNK;
	int64_t lo = 0, hi = loom_tensor_nrows(x) * per_row;
	size_t group_bytes, prepared = prepared_row_bytes(node);
	uint32_t layout = repacked_layout(node, &group_bytes);

	if (!converts_alone(node))
		cpu_split(hi, task->ith, task->nth, &lo, &hi);
	for (int64_t u = lo; u < hi; u++) {
		int64_t t = u / per_row, e0 = (u % per_row) * CONVERT_CHUNK;
		int64_t len = n - e0 < CONVERT_CHUNK ? n - e0 : CONVERT_CHUNK;
		const float *src = (const float *)((const char *)x->data + t * x->nb[1]);
		char *row = area + t * row_bytes;
		cpu_gemm_act_convert(w->dtype, src, row, e0, len);
		if (prepared != 0) {
			char *out = area + align64((size_t)loom_tensor_nrows(x) * row_bytes) + (size_t)t * prepared;
			cpu_repacked_prepare(layout, (const cpu_block_q8_0 *)row + e0 / CPU_QK,
					     len / CPU_QK, (cpu_repacked_act *)out + e0 / CPU_QK);
		}
	}
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* Phase 2 for panels [p_lo, p_hi) and tokens [t_lo, t_hi). The first tile
 * of a panel reads its weights from memory; the others find them in
 * cache. */
static void multiply_block(const cpu_gemm_args *base, cpu_gemm_fn kernel, int tile_tokens, int64_t n_out,
			   int64_t p_lo, int64_t p_hi, int64_t t_lo, int64_t t_hi)
{
	for (int64_t p = p_lo; p < p_hi; p++) {
		int64_t o = p * CPU_GEMM_ROWS;
		for (int64_t t = t_lo; t < t_hi; t += tile_tokens) {
			cpu_gemm_args a = *base;
			a.w += (size_t)o * base->w_stride;
			a.x += (size_t)t * base->x_stride;
			a.y = (float *)((char *)base->y + (size_t)t * base->y_stride) + o;
			a.nr = (int)min64(CPU_GEMM_ROWS, n_out - o);
			a.nt = (int)min64(tile_tokens, t_hi - t);
			a.prefetch_ahead = t == t_lo ? cpu_gemm_prefetch_distance(base->w_stride) : 0;
			kernel(&a);
		}
	}
}

#if defined(CPU_HAS_AMX)
/* The AMX tiles' matmul (cpu_amx.h), in the same two phases: the
 * activations quantized as for the other kernels and what the tiles also
 * need of them (or, for F16/BF16 weights, put in the tiles' pairs), then
 * the 16-row groups of weights, shared out one at a time. */
static void amx_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *w = node->src[0], *x = node->src[1], *y = node->dst;
	const bool quant = cpu_amx_quant_takes(w->dtype);
	int64_t n_tok = loom_tensor_nrows(x);
	size_t row_bytes = quant ? cpu_gemm_act_row_bytes(w->dtype, x->ne[0]) : 0;
	char *rows = (char *)task->scratch, *shared = rows + amx_rows_bytes(node);
	char *panel = shared + align64(cpu_amx_shared_bytes(w, n_tok)) + (size_t)task->ith * align64(cpu_amx_panel_bytes(w));
	int64_t width = quant ? x->ne[0] : cpu_amx_padded_elements(w);
	int64_t tokens = quant ? n_tok : cpu_amx_padded_tokens(n_tok);
	int64_t per_row = (width + CONVERT_CHUNK - 1) / CONVERT_CHUNK;
	int64_t lo, hi;

	cpu_split(tokens * per_row, task->ith, task->nth, &lo, &hi);
	for (int64_t u = lo; u < hi; u++) {
		int64_t t = u / per_row, e0 = (u % per_row) * CONVERT_CHUNK;
		int64_t len = min64(width - e0, CONVERT_CHUNK);
		const float *src = t < n_tok ? (const float *)((const char *)x->data + t * x->nb[1]) : NULL;
		if (quant) {
			char *row = rows + t * row_bytes;
			cpu_gemm_act_convert(w->dtype, src, row, e0, len);
			cpu_amx_quant_prepare(w, row, t, e0, len, n_tok, shared);
		} else {
			cpu_amx_float_convert(w, src, t, e0, len, shared);
		}
	}
	if (quant && task->ith == 0)
		cpu_amx_quant_pad(w, n_tok, shared);
	cpu_task_barrier(task);

	int64_t n_groups = (w->ne[1] + CPU_REPACK_ROWS - 1) / CPU_REPACK_ROWS;
	while (cpu_take_work(task, n_groups, 1, &lo, &hi))
		cpu_amx_multiply(w, lo, hi, rows, row_bytes, shared, panel, n_tok, y->data, y->nb[1]);
}
#endif

/* The next items of a matmul's total for this thread (*first: it has
 * taken none yet): a decode's as cpu_take_decode gives them; a prefill's
 * items are dear: chunks of about 1/16 of a thread's share, so that a
 * thread slowed down can hand some of its share to the others. */
static bool take_work(const cpu_task *task, int64_t n_tok, int64_t total, int64_t chunk, bool *first, int64_t *lo,
		      int64_t *hi)
{
	if (n_tok <= DECODE_TOKENS)
		return cpu_take_decode(task, total, first, lo, hi);
	return cpu_take_work(task, total, chunk < 1 ? 1 : chunk, lo, hi);
}

static void matmul_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *w = node->src[0], *x = node->src[1], *y = node->dst;
	size_t row_bytes = cpu_gemm_act_row_bytes(w->dtype, x->ne[0]);
	int64_t n_out = w->ne[1], n_tok = loom_tensor_nrows(x);
	cpu_gemm_args base = {
		.n = w->ne[0],
		.w = w->data,
		.w_stride = w->nb[1],
		.x = x->data,
		.x_stride = x->nb[1],
		.y = y->data,
		.y_stride = y->nb[1],
	};

#if defined(CPU_HAS_AMX)
	if (cpu_amx_takes(w, n_tok)) {
		amx_run(node, task);
		return;
	}
#endif
	const bool alone = converts_alone(node);
	char *area = (char *)task->scratch + (alone ? (size_t)task->ith * activations_bytes(node) : 0);
	if (row_bytes != 0) {
		convert_activations(node, task, row_bytes, area);
		base.x = area;
		base.x_stride = row_bytes;
		if (!alone)
			cpu_task_barrier(task);
	}

	int64_t lo, hi;
	size_t group_bytes;
	uint32_t layout = repacked_layout(node, &group_bytes);
	if (layout != 0) {
		const void *prepared = area + align64((size_t)n_tok * row_bytes);
		int64_t n_groups = (n_out + CPU_REPACK_ROWS - 1) / CPU_REPACK_ROWS;
		const bool repacked = w->layout == layout; /* at load; else a group per take, here */
		int64_t chunk = repacked ? n_groups / ((int64_t)task->nth * 16) : 1;
		void *mine = (char *)task->scratch + (size_t)(alone ? task->nth : 1) * activations_bytes(node) +
			     (size_t)task->ith * align64(group_bytes);
		bool first = true;
		while (take_work(task, n_tok, n_groups, chunk, &first, &lo, &hi)) {
			if (repacked) {
				cpu_repacked_multiply(w, lo, hi, base.x, base.x_stride, prepared, prepared_row_bytes(node),
						      n_tok, base.y, base.y_stride);
				continue;
			}
			/* One group, repacked here: rows o.. as a weight of their own. */
			int64_t o = lo * CPU_REPACK_ROWS;
			loom_tensor g = first_group(w);
			g.ne[1] = min64(CPU_REPACK_ROWS, n_out - o);
			g.data = (char *)w->data + (size_t)o * w->nb[1];
			cpu_repack(&g, mine);
			g.data = mine;
			g.layout = layout;
			cpu_repacked_multiply(&g, 0, 1, base.x, base.x_stride, prepared, prepared_row_bytes(node), n_tok,
					      base.y + o, base.y_stride);
		}
		return;
	}

	cpu_gemv_fn gemv = n_tok == 1 ? cpu_gemv_kernel(w->dtype) : NULL;
	if (gemv != NULL) {
		int64_t n_blocks = (n_out + CPU_GEMV_ROWS - 1) / CPU_GEMV_ROWS;
		bool first = true;
		while (take_work(task, n_tok, n_blocks, 1, &first, &lo, &hi)) {
			cpu_gemm_args a = base;
			a.w += (size_t)(lo * CPU_GEMV_ROWS) * base.w_stride;
			a.y += lo * CPU_GEMV_ROWS;
			gemv(&a, min64(hi * CPU_GEMV_ROWS, n_out) - lo * CPU_GEMV_ROWS);
		}
		return;
	}

	int64_t n_panels = (n_out + CPU_GEMM_ROWS - 1) / CPU_GEMM_ROWS;
	size_t act_bytes = row_bytes != 0 ? row_bytes : (size_t)x->ne[0] * sizeof(float);
	int tile_tokens = cpu_gemm_tokens(w->dtype);
	int64_t tok_block = (int64_t)(TOKEN_BLOCK_BYTES / act_bytes);

	tok_block = tok_block < tile_tokens ? tile_tokens : tok_block / tile_tokens * tile_tokens;
	bool first = true;
	while (take_work(task, n_tok, n_panels, n_panels / ((int64_t)task->nth * 16), &first, &lo, &hi))
		for (int64_t t = 0; t < n_tok; t += tok_block)
			multiply_block(&base, cpu_gemm_kernel(w->dtype), tile_tokens, n_out, lo, hi, t,
				       min64(n_tok, t + tok_block));
}

/* Every layout keeps a weight's rows in order, each in about its share of
 * the bytes: the rows of a thread's first share lie at that fraction of
 * them. */
bool cpu_matmul_first_weights(const loom_node *node, int ith, int nth, cpu_fetch *f)
{
	const loom_tensor *w = node->src[0];
	int64_t share = cpu_decode_share(w->ne[1], nth);
	size_t bytes = loom_dtype_row_bytes(w->dtype, w->ne[0]) * (size_t)w->ne[1];

	if (loom_tensor_nrows(node->src[1]) > DECODE_TOKENS || share == 0)
		return false;
	f->next = (const char *)w->data + (size_t)((double)bytes * (double)(ith * share) / (double)w->ne[1]);
	f->left = (size_t)((double)bytes * (double)share / (double)w->ne[1]);
	f->left = f->left < CPU_FETCH_MAX_BYTES ? f->left : CPU_FETCH_MAX_BYTES;
	return true;
}

const cpu_op cpu_op_matmul = {
	.supports = matmul_supports,
	.scratch_size = matmul_scratch_size,
	.run = matmul_run,
};
