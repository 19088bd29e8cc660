/*
 * cpu_gemm.c - the table of matmul tile kernels (cpu_gemm.h), and the
 * kernels for F32, F16 and BF16 weights: f32 multiply-adds of the weights
 * and the activations, both widened from the weight's type for F16 and
 * BF16 (the activations converted to it, as llama.cpp's are).
 * The quantized types' kernels are in cpu_gemm_legacy.c and cpu_gemm_k.c.
 */
#include "cpu_gemm_tile.h"

#include "cpu_half.h"
#include "cpu_quant.h"
#include "cpu_vec.h"

size_t cpu_gemm_act_row_bytes(loom_dtype weight_type, int64_t n)
{
	const cpu_quant_type *qt = cpu_quant_type_of(weight_type);

	if (qt != NULL)
		return loom_dtype_row_bytes(qt->act_type, n);
	if (weight_type == LOOM_DTYPE_F16 || weight_type == LOOM_DTYPE_BF16)
		return (size_t)n * sizeof(uint16_t);
	return 0;
}

void cpu_gemm_act_convert(loom_dtype weight_type, const float *x, char *row, int64_t e0, int64_t n)
{
	const cpu_quant_type *qt = cpu_quant_type_of(weight_type);

	if (qt != NULL)
		cpu_quantize_act(qt->act_type, x + e0, row + loom_dtype_row_bytes(qt->act_type, e0), n);
	else if (weight_type == LOOM_DTYPE_F16)
		cpu_f32_to_fp16_row(x + e0, (uint16_t *)row + e0, n);
	else if (weight_type == LOOM_DTYPE_BF16)
		cpu_f32_to_bf16_row(x + e0, (uint16_t *)row + e0, n);
}

enum weight_kind { W_F32, W_F16, W_BF16 };

/* Lines ahead of its reads that each row of a decode's kernel asks for:
 * 16 rows x 8 lines in flight cover the memory's latency (4 did as well,
 * 16 less well, a whole block of rows ahead much less). */
#define GEMV_AHEAD 8

/* Bytes of one element of the weights, and of the activations: f32 for F32
 * weights, the weights' own 16-bit format for F16 and BF16. */
CPU_INLINE size_t element_bytes(enum weight_kind kind)
{
	return kind == W_F32 ? sizeof(float) : sizeof(uint16_t);
}

#if defined(__AVX512F__)

CPU_INLINE __m512 load16(const char *row, int64_t i, __mmask16 m, enum weight_kind kind)
{
	if (kind == W_F16)
		return cpu_load_fp16_x16((const uint16_t *)row + i, m);
	if (kind == W_BF16)
		return cpu_load_bf16_x16((const uint16_t *)row + i, m);
	return _mm512_maskz_loadu_ps(m, (const float *)row + i);
}

/* 16 whole elements: a plain load the conversion takes as its operand,
 * where a masked one is an instruction of its own. */
CPU_INLINE __m512 load16_whole(const char *row, int64_t i, enum weight_kind kind)
{
	const __m256i *p = (const __m256i *)((const uint16_t *)row + i);

	if (kind == W_F16)
		return _mm512_cvtph_ps(_mm256_loadu_si256(p));
	if (kind == W_BF16)
		return cpu_bf16_x16_to_f32(_mm256_loadu_si256(p));
	return _mm512_loadu_ps((const float *)row + i);
}

/* Elements [i, i + 16) of the tile's rows (whole: no mask), the weights
 * asked for prefetch_ahead bytes on when prefetch. */
#define TILE_FLOAT_STEP(whole, prefetch)                                                   \
	do {                                                                              \
		__m512 wv[CPU_GEMM_ROWS];                                                     \
		CPU_UNROLLED for (int r = 0; r < CPU_GEMM_ROWS; r++) {                        \
			if (prefetch)                                                             \
				cpu_tile_prefetch(a, w[r] + i * eb, 16 * eb);                         \
			wv[r] = whole ? load16_whole(w[r], i, kind) : load16(w[r], i, m, kind);   \
		}                                                                             \
		CPU_UNROLLED for (int t = 0; t < nt; t++) {                                   \
			__m512 xv = whole ? load16_whole(x[t], i, kind) : load16(x[t], i, m, kind); \
			CPU_UNROLLED for (int r = 0; r < CPU_GEMM_ROWS; r++)                      \
				acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);                   \
		}                                                                             \
	} while (0)

/* The weight rows' next 16 elements stay in registers while each token's
 * pass over them: 4 x 6 accumulators, 4 weights and a token's elements
 * take 29 of the 32 registers, and each element loaded serves 4 or 6
 * multiply-adds. The whole steps go without masks, and a tile that
 * prefetches (the first of a panel) is an instance of its own, so that the
 * loop has no test but its bound: 67 -> 89 GMAC/s for F16 on one core. */
CPU_INLINE void tile_float(const cpu_gemm_args *a, enum weight_kind kind, const int nt, const bool prefetch)
{
	const size_t eb = element_bytes(kind);
	const char *w[CPU_GEMM_ROWS], *x[CPU_GEMM_FLOAT_TOKENS];
	__m512 acc[CPU_GEMM_ROWS][CPU_GEMM_FLOAT_TOKENS];
	const __mmask16 m = cpu_tail_mask(a->n % 16);
	int64_t i = 0;

	CPU_UNROLLED for (int r = 0; r < CPU_GEMM_ROWS; r++) {
		w[r] = cpu_tile_weight_row(a, r);
		CPU_UNROLLED for (int t = 0; t < nt; t++)
			acc[r][t] = _mm512_setzero_ps();
	}
	CPU_UNROLLED for (int t = 0; t < nt; t++)
		x[t] = cpu_tile_act_row(a, t);
	for (; i + 16 <= a->n; i += 16)
		TILE_FLOAT_STEP(true, prefetch);
	if (i < a->n)
		TILE_FLOAT_STEP(false, prefetch);
	/* Constant bounds on the loop over rows: an index the compiler cannot
	 * see through would keep the accumulators in memory. */
	CPU_UNROLLED for (int t = 0; t < nt; t++)
		CPU_UNROLLED for (int r = 0; r < CPU_GEMM_ROWS; r++)
			if (r < a->nr)
				cpu_tile_out_row(a, t)[r] = _mm512_reduce_add_ps(acc[r][t]);
}

/* A decode's rows, R at a time: R accumulators advance side by side, where
 * a tile's 4 x 1 would wait on the multiply-add's latency. Each output
 * element gets a tile's own sequence of operations (one accumulator, the
 * elements 16 at a time in order, the same reduction), so the results are
 * the tiles' bit for bit. Each row asks for the line GEMV_AHEAD lines past
 * the one it reads; near its end, for that line of the row R rows on (the
 * next call's), when there is one (next). */
CPU_INLINE void gemv_rows(const cpu_gemm_args *a, enum weight_kind kind, const int R, const char *w, float *y,
			  bool next)
{
	const size_t eb = element_bytes(kind), row_bytes = (size_t)a->n * eb;
	const int64_t step = (int64_t)(64 / eb); /* elements in a cache line */
	__m512 acc[CPU_GEMV_ROWS];
	int64_t i = 0;

	CPU_UNROLLED for (int r = 0; r < R; r++)
		acc[r] = _mm512_setzero_ps();
	for (; i + step <= a->n; i += step) {
		size_t ahead = (size_t)i * eb + GEMV_AHEAD * 64;
		if (ahead >= row_bytes)
			ahead = next ? ahead - row_bytes + (size_t)R * a->w_stride : 0;
		CPU_UNROLLED for (int h = 0; h < step; h += 16) {
			__m512 xv = load16_whole(a->x, i + h, kind);
			CPU_UNROLLED for (int r = 0; r < R; r++) {
				const char *row = w + (size_t)r * a->w_stride;
				if (h == 0 && ahead != 0)
					_mm_prefetch(row + ahead, _MM_HINT_T0);
				acc[r] = _mm512_fmadd_ps(load16_whole(row, i + h, kind), xv, acc[r]);
			}
		}
	}
	for (; i < a->n; i += 16) {
		__mmask16 m = a->n - i >= 16 ? 0xffff : cpu_tail_mask(a->n - i);
		__m512 xv = load16(a->x, i, m, kind);
		CPU_UNROLLED for (int r = 0; r < R; r++)
			acc[r] = _mm512_fmadd_ps(load16(w + (size_t)r * a->w_stride, i, m, kind), xv, acc[r]);
	}
	CPU_UNROLLED for (int r = 0; r < R; r++)
		y[r] = _mm512_reduce_add_ps(acc[r]);
}

/* Rows [0, n_rows) of a->w against the one activation row a->x: whole
 * blocks of R rows, then the rest a row at a time. */
CPU_INLINE void gemv_blocks(const cpu_gemm_args *a, enum weight_kind kind, const int R, int64_t n_rows)
{
	int64_t r = 0;

	for (; r + R <= n_rows; r += R)
		gemv_rows(a, kind, R, a->w + (size_t)r * a->w_stride, a->y + r, r + 2 * R <= n_rows);
	for (; r < n_rows; r++)
		gemv_rows(a, kind, 1, a->w + (size_t)r * a->w_stride, a->y + r, false);
}

/* Rows a whole number of 4 KiB apart (a 2048-wide F16 matrix, or 4096,
 * 8192: most models' own) put every row's current line in one L1 set: 16
 * of them are more than its ways, and the lines evict each other before
 * they are used. Half as many side by side fit (tiny1b-f16 decode 1.12x;
 * such rows from memory 46 -> 52 GB/s). */
#define L1_SET_SPAN 4096

CPU_INLINE void gemv_float(const cpu_gemm_args *a, enum weight_kind kind, int64_t n_rows)
{
	if (a->w_stride % L1_SET_SPAN == 0)
		gemv_blocks(a, kind, CPU_GEMV_ROWS / 2, n_rows);
	else
		gemv_blocks(a, kind, CPU_GEMV_ROWS, n_rows);
}

static void gemv_f32(const cpu_gemm_args *a, int64_t n_rows)
{
	gemv_float(a, W_F32, n_rows);
}

static void gemv_f16(const cpu_gemm_args *a, int64_t n_rows)
{
	gemv_float(a, W_F16, n_rows);
}

static void gemv_bf16(const cpu_gemm_args *a, int64_t n_rows)
{
	gemv_float(a, W_BF16, n_rows);
}

cpu_gemv_fn cpu_gemv_kernel(loom_dtype weight_type)
{
	switch (weight_type) {
	case LOOM_DTYPE_F32: return gemv_f32;
	case LOOM_DTYPE_F16: return gemv_f16;
	case LOOM_DTYPE_BF16: return gemv_bf16;
	default: return NULL;
	}
}

#elif defined(__AVX2__)

CPU_INLINE __m256 load8(const char *row, int64_t i, enum weight_kind kind)
{
	if (kind == W_F16)
		return cpu_load_fp16_x8((const uint16_t *)row + i);
	if (kind == W_BF16)
		return cpu_load_bf16_x8((const uint16_t *)row + i);
	return _mm256_loadu_ps((const float *)row + i);
}

CPU_INLINE float element_at(const char *row, int64_t i, enum weight_kind kind)
{
	if (kind == W_F16)
		return cpu_fp16_to_f32(((const uint16_t *)row)[i]);
	if (kind == W_BF16)
		return cpu_bf16_to_f32(((const uint16_t *)row)[i]);
	return ((const float *)row)[i];
}

CPU_INLINE void tile_float(const cpu_gemm_args *a, enum weight_kind kind, const int nt)
{
	const size_t eb = element_bytes(kind);
	const char *w[CPU_GEMM_ROWS], *x[CPU_GEMM_FLOAT_TOKENS];
	__m256 acc[CPU_GEMM_ROWS][CPU_GEMM_FLOAT_TOKENS];
	int64_t i = 0;

	CPU_UNROLLED for (int r = 0; r < CPU_GEMM_ROWS; r++) {
		w[r] = cpu_tile_weight_row(a, r);
		CPU_UNROLLED for (int t = 0; t < nt; t++)
			acc[r][t] = _mm256_setzero_ps();
	}
	CPU_UNROLLED for (int t = 0; t < nt; t++)
		x[t] = cpu_tile_act_row(a, t);
	for (; i + 8 <= a->n; i += 8) {
		__m256 xv[CPU_GEMM_FLOAT_TOKENS];
		CPU_UNROLLED for (int t = 0; t < nt; t++)
			xv[t] = load8(x[t], i, kind);
		CPU_UNROLLED for (int r = 0; r < CPU_GEMM_ROWS; r++) {
			if (a->prefetch_ahead != 0)
				cpu_tile_prefetch(a, w[r] + i * eb, 8 * eb);
			__m256 wv = load8(w[r], i, kind);
			CPU_UNROLLED for (int t = 0; t < nt; t++)
				acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
		}
	}
	CPU_UNROLLED for (int t = 0; t < nt; t++) {
		for (int r = 0; r < a->nr; r++) {
			float sum = cpu_hsum_x8(acc[r][t]);
			for (int64_t j = i; j < a->n; j++)
				sum += element_at(w[r], j, kind) * element_at(x[t], j, kind);
			cpu_tile_out_row(a, t)[r] = sum;
		}
	}
}

#else

/* The reference: one plain dot product per output element. */

static float dot_16bit(const uint16_t *w, const uint16_t *x, int64_t n, enum weight_kind kind)
{
	float sum = 0.0f;
	for (int64_t i = 0; i < n; i++)
		sum += kind == W_F16 ? cpu_fp16_to_f32(w[i]) * cpu_fp16_to_f32(x[i])
				     : cpu_bf16_to_f32(w[i]) * cpu_bf16_to_f32(x[i]);
	return sum;
}

static float dot_one(const cpu_gemm_args *a, const char *w, const char *x, enum weight_kind kind)
{
	if (kind == W_F32)
		return cpu_dot_f32((const float *)w, (const float *)x, a->n);
	return dot_16bit((const uint16_t *)w, (const uint16_t *)x, a->n, kind);
}

static void tile_float(const cpu_gemm_args *a, enum weight_kind kind, int nt)
{
	for (int t = 0; t < nt; t++)
		for (int r = 0; r < a->nr; r++)
			cpu_tile_out_row(a, t)[r] = dot_one(a, cpu_tile_weight_row(a, r), cpu_tile_act_row(a, t), kind);
}

#endif

#if !defined(__AVX512F__)
cpu_gemv_fn cpu_gemv_kernel(loom_dtype weight_type)
{
	(void)weight_type;
	return NULL;
}
#endif

#if defined(__AVX512F__)
#define TILE_FLOAT(kind, nt) \
	(a->prefetch_ahead != 0 ? tile_float(a, kind, nt, true) : tile_float(a, kind, nt, false))
#else
#define TILE_FLOAT(kind, nt) tile_float(a, kind, nt)
#endif
#define TILE_F32(nt) TILE_FLOAT(W_F32, nt)
#define TILE_F16(nt) TILE_FLOAT(W_F16, nt)
#define TILE_BF16(nt) TILE_FLOAT(W_BF16, nt)
CPU_GEMM_FLOAT_TILED(f32, TILE_F32)
CPU_GEMM_FLOAT_TILED(f16, TILE_F16)
CPU_GEMM_FLOAT_TILED(bf16, TILE_BF16)

static const cpu_gemm_fn kernels[LOOM_DTYPE_COUNT] = {
	[LOOM_DTYPE_F32] = cpu_gemm_f32,   [LOOM_DTYPE_F16] = cpu_gemm_f16,   [LOOM_DTYPE_BF16] = cpu_gemm_bf16,
	[LOOM_DTYPE_Q4_0] = cpu_gemm_q4_0, [LOOM_DTYPE_Q4_1] = cpu_gemm_q4_1, [LOOM_DTYPE_Q5_0] = cpu_gemm_q5_0,
	[LOOM_DTYPE_Q5_1] = cpu_gemm_q5_1, [LOOM_DTYPE_Q8_0] = cpu_gemm_q8_0, [LOOM_DTYPE_Q2_K] = cpu_gemm_q2_k,
	[LOOM_DTYPE_Q3_K] = cpu_gemm_q3_k, [LOOM_DTYPE_Q4_K] = cpu_gemm_q4_k, [LOOM_DTYPE_Q5_K] = cpu_gemm_q5_k,
	[LOOM_DTYPE_Q6_K] = cpu_gemm_q6_k, [LOOM_DTYPE_MXFP4] = cpu_gemm_mxfp4,
};

cpu_gemm_fn cpu_gemm_kernel(loom_dtype weight_type)
{
	if ((int)weight_type < 0 || weight_type >= LOOM_DTYPE_COUNT)
		return NULL;
	return kernels[weight_type];
}

int cpu_gemm_tokens(loom_dtype weight_type)
{
	bool is_float = weight_type == LOOM_DTYPE_F32 || weight_type == LOOM_DTYPE_F16 || weight_type == LOOM_DTYPE_BF16;
	return is_float ? CPU_GEMM_FLOAT_TOKENS : CPU_GEMM_TOKENS;
}
