/* cpu_repack.c - weights in the CPU backends' own layouts (cpu_repack.h). */
#include "cpu_repack.h"

#include "cpu_blocks.h"
#include "cpu_convert.h"

#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#include <immintrin.h>

#define CPU_INLINE static inline __attribute__((always_inline))
#define WORDS (CPU_QK / 8) /* 32-bit words of nibbles in a Q4_0 block */
/* The hardware prefetchers stop at every 4 KiB page; the multiply asks for
 * a group's blocks this many blocks ahead of its reads. */
#define PREFETCH_BLOCKS 8

typedef struct q4_0_x16 {
	uint8_t qs[WORDS][CPU_REPACK_ROWS][4];
	uint16_t d[CPU_REPACK_ROWS];
} q4_0_x16;

typedef struct q8_0_x16 {
	uint8_t qs[2 * WORDS][CPU_REPACK_ROWS][4];
	uint16_t d[CPU_REPACK_ROWS];
} q8_0_x16;

_Static_assert(sizeof(q4_0_x16) == CPU_REPACK_ROWS * sizeof(cpu_block_q4_0),
	       "a repacked group takes the bytes of the blocks it holds");
_Static_assert(sizeof(q8_0_x16) == CPU_REPACK_ROWS * sizeof(cpu_block_q8_0),
	       "a repacked group takes the bytes of the blocks it holds");

static int64_t groups_of(const loom_tensor *w)
{
	return (w->ne[1] + CPU_REPACK_ROWS - 1) / CPU_REPACK_ROWS;
}

size_t cpu_repacked_bytes(const loom_tensor *w, uint32_t *layout)
{
	if (w->layout != 0 || w->ne[2] != 1 || w->ne[3] != 1)
		return 0;
	if (w->ne[0] % CPU_QK_K == 0) {
		size_t block = cpu_repacked_k_block_bytes(w->dtype, layout);
		if (block != 0)
			return (size_t)groups_of(w) * (size_t)(w->ne[0] / CPU_QK_K) * block;
	}
	if (w->ne[0] % CPU_QK != 0)
		return 0;
	size_t blocks = (size_t)groups_of(w) * (size_t)(w->ne[0] / CPU_QK);
	if (w->dtype == LOOM_DTYPE_Q4_0) {
		*layout = CPU_LAYOUT_Q4_0_X16;
		return blocks * sizeof(q4_0_x16);
	}
	if (w->dtype == LOOM_DTYPE_Q8_0) {
		*layout = CPU_LAYOUT_Q8_0_X16;
		return blocks * sizeof(q8_0_x16);
	}
	return 0;
}

static bool k_layout(uint32_t layout)
{
	return layout == CPU_LAYOUT_Q4_K_X16 || layout == CPU_LAYOUT_Q6_K_X16;
}

void cpu_repack(const loom_tensor *w, void *dst)
{
	int64_t n_blocks = w->ne[0] / CPU_QK;
	uint32_t layout = 0;

	memset(dst, 0, cpu_repacked_bytes(w, &layout));
	if (k_layout(layout)) {
		cpu_repack_k(w, layout, dst);
		return;
	}
	for (int64_t o = 0; o < w->ne[1]; o++) {
		const char *row = (const char *)w->data + o * w->nb[1];
		int64_t first = (o / CPU_REPACK_ROWS) * n_blocks;
		int r = (int)(o % CPU_REPACK_ROWS);
		for (int64_t b = 0; b < n_blocks; b++) {
			if (layout == CPU_LAYOUT_Q4_0_X16) {
				const cpu_block_q4_0 *in = (const cpu_block_q4_0 *)row + b;
				q4_0_x16 *g = (q4_0_x16 *)dst + first + b;
				for (int k = 0; k < WORDS; k++)
					memcpy(g->qs[k][r], in->qs + 4 * k, 4);
				g->d[r] = in->d;
			} else {
				const cpu_block_q8_0 *in = (const cpu_block_q8_0 *)row + b;
				q8_0_x16 *g = (q8_0_x16 *)dst + first + b;
				for (int k = 0; k < 2 * WORDS; k++)
					for (int i = 0; i < 4; i++)
						g->qs[k][r][i] = (uint8_t)(in->qs[4 * k + i] ^ 0x80);
				g->d[r] = in->d;
			}
		}
	}
}

bool cpu_layout_supported(loom_dtype type, uint32_t layout)
{
	return layout == 0 || (layout == CPU_LAYOUT_Q4_0_X16 && type == LOOM_DTYPE_Q4_0) ||
	       (layout == CPU_LAYOUT_Q8_0_X16 && type == LOOM_DTYPE_Q8_0) ||
	       (layout == CPU_LAYOUT_Q4_K_X16 && type == LOOM_DTYPE_Q4_K) ||
	       (layout == CPU_LAYOUT_Q6_K_X16 && type == LOOM_DTYPE_Q6_K);
}

bool cpu_layout_exact(uint32_t layout)
{
	return layout != CPU_LAYOUT_Q8_0_X16;
}

bool cpu_repacked_needs_sums(uint32_t layout)
{
	return layout == CPU_LAYOUT_Q4_0_X16 || layout == CPU_LAYOUT_Q8_0_X16;
}

/* Group j (elements 4j..4j+3) of an activation block in every lane. */
CPU_INLINE __m512i act_group(const cpu_block_q8_0 *x, int j)
{
	int32_t v;

	memcpy(&v, x->qs + 4 * j, sizeof(v));
	return _mm512_set1_epi32(v);
}

/*
 * The weights meet dpbusd unsigned (q, 0..15) and the activations signed;
 * q - 8 is q less 8 * sum(x), and that correction, per token and block,
 * starts each block's integer sums. The sums follow llama.cpp's Q4_0 order
 * (cpu_quant_legacy.c): a row's block total, exact, added to one f32 sum
 * per row by FMA, so the result equals the standard layout's bit for bit.
 */
CPU_INLINE void q4_0_tokens(const q4_0_x16 *g, int64_t n_blocks, const char *x, size_t x_stride,
			     const int32_t *xsum, size_t xsum_stride, const int nt, float *y, size_t y_stride,
			     __mmask16 rows)
{
	__m512 acc[8];

	for (int t = 0; t < nt; t++)
		acc[t] = _mm512_setzero_ps();
	for (int64_t b = 0; b < n_blocks; b++) {
		__m512i w[2 * WORDS];
		for (size_t o = 0; o < sizeof(q4_0_x16); o += 64)
			_mm_prefetch((const char *)&g[b + PREFETCH_BLOCKS] + o, _MM_HINT_T0);
		for (int k = 0; k < WORDS; k++) {
			__m512i qs = _mm512_loadu_si512((const void *)g[b].qs[k]);
			w[k] = _mm512_and_si512(qs, _mm512_set1_epi8(15));
			w[k + WORDS] = _mm512_and_si512(_mm512_srli_epi16(qs, 4), _mm512_set1_epi8(15));
		}
		__m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g[b].d));
		for (int t = 0; t < nt; t++) {
			const cpu_block_q8_0 *xb = (const cpu_block_q8_0 *)(x + (size_t)t * x_stride) + b;
			int32_t s = *(const int32_t *)((const char *)xsum + (size_t)t * xsum_stride + 4 * (size_t)b);
			__m512i sum = _mm512_set1_epi32(-8 * s);
			for (int j = 0; j < 2 * WORDS; j++)
				sum = _mm512_dpbusd_epi32(sum, w[j], act_group(xb, j));
			__m512 scale = _mm512_mul_ps(d, _mm512_set1_ps(cpu_fp16_to_f32(xb->d)));
			acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, acc[t]);
		}
	}
	for (int t = 0; t < nt; t++)
		_mm512_mask_storeu_ps((float *)((char *)y + (size_t)t * y_stride), rows, acc[t]);
}

/*
 * Q8_0: the weights meet dpbusd as w + 128, which adds 128 * sum(x) over
 * the block; each block's integer sum starts from the negation. Unlike the
 * row kernel (llama.cpp's order: 8 f32 lanes per row, each group of 4
 * scaled on its own), a block's 32 products are summed exactly in
 * integers and scaled once, so a row takes one FMA per block: fewer
 * roundings than llama.cpp's, and the fewest operations.
 */
CPU_INLINE void q8_0_tokens(const q8_0_x16 *g, int64_t n_blocks, const char *x, size_t x_stride,
			    const int32_t *xsum, size_t xsum_stride, const int nt, float *y, size_t y_stride,
			    __mmask16 rows)
{
	__m512 acc[8];

	for (int t = 0; t < nt; t++)
		acc[t] = _mm512_setzero_ps();
	for (int64_t b = 0; b < n_blocks; b++) {
		__m512i w[2 * WORDS];
		for (size_t o = 0; o < sizeof(q8_0_x16); o += 64)
			_mm_prefetch((const char *)&g[b + PREFETCH_BLOCKS] + o, _MM_HINT_T0);
		for (int j = 0; j < 2 * WORDS; j++)
			w[j] = _mm512_loadu_si512((const void *)g[b].qs[j]);
		__m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g[b].d));
		for (int t = 0; t < nt; t++) {
			const cpu_block_q8_0 *xb = (const cpu_block_q8_0 *)(x + (size_t)t * x_stride) + b;
			int32_t s = *(const int32_t *)((const char *)xsum + (size_t)t * xsum_stride + 4 * (size_t)b);
			__m512i sum = _mm512_set1_epi32(-128 * s);
			for (int j = 0; j < 2 * WORDS; j++)
				sum = _mm512_dpbusd_epi32(sum, w[j], act_group(xb, j));
			__m512 scale = _mm512_mul_ps(d, _mm512_set1_ps(cpu_fp16_to_f32(xb->d)));
			acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, acc[t]);
		}
	}
	for (int t = 0; t < nt; t++)
		_mm512_mask_storeu_ps((float *)((char *)y + (size_t)t * y_stride), rows, acc[t]);
}

/* Tokens [t, nt) through one group, as many at once as the type's kernel
 * takes; returns how many it did. */
CPU_INLINE int64_t group_tokens(uint32_t layout, const void *g, int64_t n_blocks, const char *x,
				size_t x_stride, const int32_t *xsum, size_t xsum_stride, int64_t left, float *y,
				size_t y_stride, __mmask16 rows)
{
	if (layout == CPU_LAYOUT_Q8_0_X16) {
		if (left >= 8) {
			q8_0_tokens(g, n_blocks, x, x_stride, xsum, xsum_stride, 8, y, y_stride, rows);
			return 8;
		}
		if (left >= 4) {
			q8_0_tokens(g, n_blocks, x, x_stride, xsum, xsum_stride, 4, y, y_stride, rows);
			return 4;
		}
		q8_0_tokens(g, n_blocks, x, x_stride, xsum, xsum_stride, 1, y, y_stride, rows);
		return 1;
	}
	if (left >= 8) {
		q4_0_tokens(g, n_blocks, x, x_stride, xsum, xsum_stride, 8, y, y_stride, rows);
		return 8;
	}
	if (left >= 4) {
		q4_0_tokens(g, n_blocks, x, x_stride, xsum, xsum_stride, 4, y, y_stride, rows);
		return 4;
	}
	q4_0_tokens(g, n_blocks, x, x_stride, xsum, xsum_stride, 1, y, y_stride, rows);
	return 1;
}

void cpu_repacked_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x,
			   size_t x_stride, const int32_t *xsum, size_t xsum_stride, int64_t nt, float *y,
			   size_t y_stride)
{
	if (k_layout(w->layout)) {
		cpu_repacked_multiply_k(w, g_lo, g_hi, x, x_stride, nt, y, y_stride);
		return;
	}
	int64_t n_blocks = w->ne[0] / CPU_QK;
	size_t group_bytes = (size_t)n_blocks *
			     (w->layout == CPU_LAYOUT_Q8_0_X16 ? sizeof(q8_0_x16) : sizeof(q4_0_x16));

	for (int64_t gi = g_lo; gi < g_hi; gi++) {
		int64_t o = gi * CPU_REPACK_ROWS, left = w->ne[1] - o;
		__mmask16 rows = left >= CPU_REPACK_ROWS ? 0xffff : (__mmask16)((1u << left) - 1);
		const char *g = (const char *)w->data + (size_t)gi * group_bytes;
		for (int64_t t = 0; t < nt;) {
			const char *xt = x + (size_t)t * x_stride;
			const int32_t *st = (const int32_t *)((const char *)xsum + (size_t)t * xsum_stride);
			float *yt = (float *)((char *)y + (size_t)t * y_stride) + o;
			t += group_tokens(w->layout, g, n_blocks, xt, x_stride, st, xsum_stride, nt - t, yt, y_stride,
					  rows);
		}
	}
}

#else

size_t cpu_repacked_bytes(const loom_tensor *w, uint32_t *layout)
{
	(void)w;
	(void)layout;
	return 0;
}

void cpu_repack(const loom_tensor *w, void *dst)
{
	(void)w;
	(void)dst;
}

bool cpu_layout_supported(loom_dtype type, uint32_t layout)
{
	(void)type;
	return layout == 0;
}

bool cpu_layout_exact(uint32_t layout)
{
	(void)layout;
	return true;
}

bool cpu_repacked_needs_sums(uint32_t layout)
{
	(void)layout;
	return false;
}

void cpu_repacked_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x,
			   size_t x_stride, const int32_t *xsum, size_t xsum_stride, int64_t nt, float *y,
			   size_t y_stride)
{
	(void)w, (void)g_lo, (void)g_hi, (void)x, (void)x_stride, (void)xsum, (void)xsum_stride;
	(void)nt, (void)y, (void)y_stride;
}

#endif
