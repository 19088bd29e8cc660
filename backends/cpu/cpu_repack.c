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
 * the groups' bytes this far ahead of its reads (8 blocks). */
#define PREFETCH_AHEAD (8 * sizeof(q4_0_x16))

typedef struct q4_0_x16 {
	uint8_t qs[WORDS][CPU_REPACK_ROWS][4];
	uint16_t d[CPU_REPACK_ROWS];
} q4_0_x16;

_Static_assert(sizeof(q4_0_x16) == CPU_REPACK_ROWS * sizeof(cpu_block_q4_0),
	       "a repacked group takes the bytes of the blocks it holds");

static int64_t groups_of(const loom_tensor *w)
{
	return (w->ne[1] + CPU_REPACK_ROWS - 1) / CPU_REPACK_ROWS;
}

size_t cpu_repacked_bytes(const loom_tensor *w, uint32_t *layout)
{
	if (w->dtype != LOOM_DTYPE_Q4_0 || w->layout != 0 || w->ne[0] % CPU_QK != 0 || w->ne[2] != 1 ||
	    w->ne[3] != 1)
		return 0;
	*layout = CPU_LAYOUT_Q4_0_X16;
	return (size_t)groups_of(w) * (size_t)(w->ne[0] / CPU_QK) * sizeof(q4_0_x16);
}

void cpu_repack(const loom_tensor *w, void *dst)
{
	int64_t n_blocks = w->ne[0] / CPU_QK;
	q4_0_x16 *out = dst;

	memset(dst, 0, (size_t)groups_of(w) * (size_t)n_blocks * sizeof(q4_0_x16));
	for (int64_t o = 0; o < w->ne[1]; o++) {
		const cpu_block_q4_0 *row = (const cpu_block_q4_0 *)((const char *)w->data + o * w->nb[1]);
		q4_0_x16 *group = out + (o / CPU_REPACK_ROWS) * n_blocks;
		int r = (int)(o % CPU_REPACK_ROWS);
		for (int64_t b = 0; b < n_blocks; b++) {
			for (int k = 0; k < WORDS; k++)
				memcpy(group[b].qs[k][r], row[b].qs + 4 * k, 4);
			group[b].d[r] = row[b].d;
		}
	}
}

bool cpu_layout_supported(loom_dtype type, uint32_t layout)
{
	return layout == 0 || (layout == CPU_LAYOUT_Q4_0_X16 && type == LOOM_DTYPE_Q4_0);
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
CPU_INLINE void group_tokens(const q4_0_x16 *g, int64_t n_blocks, const char *x, size_t x_stride,
			     const int32_t *xsum, size_t xsum_stride, const int nt, float *y, size_t y_stride,
			     __mmask16 rows)
{
	__m512 acc[8];

	for (int t = 0; t < nt; t++)
		acc[t] = _mm512_setzero_ps();
	for (int64_t b = 0; b < n_blocks; b++) {
		__m512i w[2 * WORDS];
		for (size_t o = 0; o < sizeof(q4_0_x16); o += 64)
			_mm_prefetch((const char *)&g[b] + PREFETCH_AHEAD + o, _MM_HINT_T0);
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

void cpu_repacked_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x,
			   size_t x_stride, const int32_t *xsum, size_t xsum_stride, int64_t nt, float *y,
			   size_t y_stride)
{
	int64_t n_blocks = w->ne[0] / CPU_QK;
	const q4_0_x16 *groups = w->data;

	for (int64_t gi = g_lo; gi < g_hi; gi++) {
		int64_t o = gi * CPU_REPACK_ROWS, left = w->ne[1] - o;
		__mmask16 rows = left >= CPU_REPACK_ROWS ? 0xffff : (__mmask16)((1u << left) - 1);
		const q4_0_x16 *g = groups + gi * n_blocks;
		for (int64_t t = 0; t < nt;) {
			const char *xt = x + (size_t)t * x_stride;
			const int32_t *st = (const int32_t *)((const char *)xsum + (size_t)t * xsum_stride);
			float *yt = (float *)((char *)y + (size_t)t * y_stride) + o;
			if (nt - t >= 8) {
				group_tokens(g, n_blocks, xt, x_stride, st, xsum_stride, 8, yt, y_stride, rows);
				t += 8;
			} else if (nt - t >= 4) {
				group_tokens(g, n_blocks, xt, x_stride, st, xsum_stride, 4, yt, y_stride, rows);
				t += 4;
			} else {
				group_tokens(g, n_blocks, xt, x_stride, st, xsum_stride, 1, yt, y_stride, rows);
				t += 1;
			}
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

void cpu_repacked_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x,
			   size_t x_stride, const int32_t *xsum, size_t xsum_stride, int64_t nt, float *y,
			   size_t y_stride)
{
	(void)w, (void)g_lo, (void)g_hi, (void)x, (void)x_stride, (void)xsum, (void)xsum_stride;
	(void)nt, (void)y, (void)y_stride;
}

#endif
