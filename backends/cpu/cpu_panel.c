/*
 * cpu_panel.c - packed panels for Q4_0 and Q8_0 weights (cpu_panel.h), on
 * CPUs with AVX-512 VNNI.
 *
 * A packed block holds, for each 4 bytes k of a block's weights, a 64-byte
 * row of the 16 rows' bytes k: Q8_0's signed weights of element group k
 * (elements 4k..4k+3), Q4_0's packed nibbles as they are (groups k and
 * k + 4, unpacked as the tokens meet them). Then come the corrections
 * -128 * sum(w) and the rows' scales as f32. Copying whole 32-bit words
 * keeps packing cheap next to the multiplications it serves. The sums keep
 * the order of the row kernels (cpu_quant_legacy.c), so the panel path
 * gives the same results as the tiles:
 *   Q4_0: one f32 sum per row, each block's integer total added by FMA;
 *   Q8_0: 8 f32 lanes per row, lane j taking group j of every block, then
 *         reduced as (j, j + 4) pairs and (0, 2) + (1, 3).
 */
#include "cpu_panel.h"

#include "cpu_blocks.h"
#include "cpu_convert.h"

#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#include <immintrin.h>

#define GROUPS (CPU_QK / 4)
#define CPU_INLINE static inline __attribute__((always_inline))

/* Q4_0: one correction per row and block. */
typedef struct q4_0_packed {
	uint8_t qs[GROUPS / 2][CPU_PANEL_ROWS][4];
	int32_t corr[CPU_PANEL_ROWS];
	float d[CPU_PANEL_ROWS];
} q4_0_packed;

/* Q8_0: one correction per group, row and block. */
typedef struct q8_0_packed {
	int8_t w[GROUPS][CPU_PANEL_ROWS][4];
	int32_t corr[GROUPS][CPU_PANEL_ROWS];
	float d[CPU_PANEL_ROWS];
} q8_0_packed;

static size_t q4_0_packed_bytes(int64_t n)
{
	return (size_t)(n / CPU_QK) * sizeof(q4_0_packed);
}

static size_t q8_0_packed_bytes(int64_t n)
{
	return (size_t)(n / CPU_QK) * sizeof(q8_0_packed);
}

/* The 32-bit words of a row's block into word k of row r of the panel. */
CPU_INLINE void put_words(uint8_t (*dst)[CPU_PANEL_ROWS][4], int r, const void *src, int n_words)
{
	for (int k = 0; k < n_words; k++)
		memcpy(dst[k][r], (const char *)src + 4 * k, 4);
}

static void q4_0_pack(const char *w, size_t w_stride, int nr, int64_t n, void *panel)
{
	q4_0_packed *out = panel;

	if (nr < CPU_PANEL_ROWS)
		memset(panel, 0, q4_0_packed_bytes(n));
	for (int r = 0; r < nr; r++) {
		const cpu_block_q4_0 *row = (const cpu_block_q4_0 *)(w + (size_t)r * w_stride);
		for (int64_t b = 0; b < n / CPU_QK; b++) {
			__m128i qs = _mm_loadu_si128((const __m128i *)row[b].qs);
			__m128i lo = _mm_and_si128(qs, _mm_set1_epi8(15));
			__m128i hi = _mm_and_si128(_mm_srli_epi16(qs, 4), _mm_set1_epi8(15));
			__m128i sums = _mm_sad_epu8(_mm_add_epi8(lo, hi), _mm_setzero_si128());
			int32_t sum = _mm_cvtsi128_si32(sums) + _mm_extract_epi32(sums, 2) - 8 * CPU_QK;
			put_words(out[b].qs, r, row[b].qs, GROUPS / 2);
			out[b].corr[r] = -128 * sum;
			out[b].d[r] = cpu_fp16_to_f32(row[b].d);
		}
	}
}

static void q8_0_pack(const char *w, size_t w_stride, int nr, int64_t n, void *panel)
{
	q8_0_packed *out = panel;

	if (nr < CPU_PANEL_ROWS)
		memset(panel, 0, q8_0_packed_bytes(n));
	for (int r = 0; r < nr; r++) {
		const cpu_block_q8_0 *row = (const cpu_block_q8_0 *)(w + (size_t)r * w_stride);
		for (int64_t b = 0; b < n / CPU_QK; b++) {
			put_words((uint8_t (*)[CPU_PANEL_ROWS][4])out[b].w, r, row[b].qs, GROUPS);
			out[b].d[r] = cpu_fp16_to_f32(row[b].d);
		}
	}
	/* The corrections from the packed groups, all rows at once. */
	for (int64_t b = 0; b < n / CPU_QK; b++) {
		for (int j = 0; j < GROUPS; j++) {
			__m512i q = _mm512_loadu_si512((const void *)out[b].w[j]);
			__m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), q);
			__m512i corr = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7));
			_mm512_storeu_si512((void *)out[b].corr[j], corr);
		}
	}
}

/* Group j of an activation block, its 4 bytes in every lane. */
CPU_INLINE __m512i act_group(const cpu_block_q8_0 *x, int j)
{
	int32_t v;

	memcpy(&v, x->qs + 4 * j, sizeof(v));
	return _mm512_set1_epi32(v);
}

CPU_INLINE void store_rows(float *y, __m512 v, int nr)
{
	_mm512_mask_storeu_ps(y, (__mmask16)((1u << nr) - 1), v);
}

/* nt (a constant) tokens from x on. */
CPU_INLINE void q4_0_tokens(const q4_0_packed *p, int64_t n_blocks, const char *x, size_t x_stride,
			    const int nt, float *y, size_t y_stride, int nr)
{
	__m512 acc[8];

	for (int t = 0; t < nt; t++)
		acc[t] = _mm512_setzero_ps();
	for (int64_t b = 0; b < n_blocks; b++) {
		__m512i w[GROUPS];
		for (int k = 0; k < GROUPS / 2; k++) {
			__m512i qs = _mm512_loadu_si512((const void *)p[b].qs[k]);
			__m512i lo = _mm512_and_si512(qs, _mm512_set1_epi8(15));
			__m512i hi = _mm512_and_si512(_mm512_srli_epi16(qs, 4), _mm512_set1_epi8(15));
			w[k] = _mm512_sub_epi8(lo, _mm512_set1_epi8(8));
			w[k + GROUPS / 2] = _mm512_sub_epi8(hi, _mm512_set1_epi8(8));
		}
		__m512i corr = _mm512_loadu_si512((const void *)p[b].corr);
		__m512 d = _mm512_loadu_ps(p[b].d);
		for (int t = 0; t < nt; t++) {
			const cpu_block_q8_0 *xb = (const cpu_block_q8_0 *)(x + (size_t)t * x_stride) + b;
			__m512i sum = corr;
			for (int j = 0; j < GROUPS; j++)
				sum = _mm512_dpbusd_epi32(sum, act_group(xb, j), w[j]);
			__m512 scale = _mm512_mul_ps(d, _mm512_set1_ps(cpu_fp16_to_f32(xb->d)));
			acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, acc[t]);
		}
	}
	for (int t = 0; t < nt; t++)
		store_rows((float *)((char *)y + (size_t)t * y_stride), acc[t], nr);
}

CPU_INLINE void q8_0_tokens(const q8_0_packed *p, int64_t n_blocks, const char *x, size_t x_stride,
			    const int nt, float *y, size_t y_stride, int nr)
{
	__m512 acc[2][GROUPS];

	for (int t = 0; t < nt; t++)
		for (int j = 0; j < GROUPS; j++)
			acc[t][j] = _mm512_setzero_ps();
	for (int64_t b = 0; b < n_blocks; b++) {
		__m512i w[GROUPS];
		for (int j = 0; j < GROUPS; j++)
			w[j] = _mm512_loadu_si512((const void *)p[b].w[j]);
		__m512 d = _mm512_loadu_ps(p[b].d);
		for (int t = 0; t < nt; t++) {
			const cpu_block_q8_0 *xb = (const cpu_block_q8_0 *)(x + (size_t)t * x_stride) + b;
			__m512 scale = _mm512_mul_ps(d, _mm512_set1_ps(cpu_fp16_to_f32(xb->d)));
			for (int j = 0; j < GROUPS; j++) {
				__m512i corr = _mm512_loadu_si512((const void *)p[b].corr[j]);
				__m512i sum = _mm512_dpbusd_epi32(corr, act_group(xb, j), w[j]);
				acc[t][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, acc[t][j]);
			}
		}
	}
	for (int t = 0; t < nt; t++) {
		__m512 s[4];
		for (int j = 0; j < 4; j++)
			s[j] = _mm512_add_ps(acc[t][j], acc[t][j + 4]);
		__m512 sum = _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3]));
		store_rows((float *)((char *)y + (size_t)t * y_stride), sum, nr);
	}
}

static void q4_0_multiply(const void *panel, int64_t n, const char *x, size_t x_stride, int nt, float *y,
			  size_t y_stride, int nr)
{
	for (int t = 0; t < nt;) {
		const char *xt = x + (size_t)t * x_stride;
		float *yt = (float *)((char *)y + (size_t)t * y_stride);
		if (nt - t >= 8) {
			q4_0_tokens(panel, n / CPU_QK, xt, x_stride, 8, yt, y_stride, nr);
			t += 8;
		} else if (nt - t >= 4) {
			q4_0_tokens(panel, n / CPU_QK, xt, x_stride, 4, yt, y_stride, nr);
			t += 4;
		} else {
			q4_0_tokens(panel, n / CPU_QK, xt, x_stride, 1, yt, y_stride, nr);
			t += 1;
		}
	}
}

static void q8_0_multiply(const void *panel, int64_t n, const char *x, size_t x_stride, int nt, float *y,
			  size_t y_stride, int nr)
{
	for (int t = 0; t < nt;) {
		const char *xt = x + (size_t)t * x_stride;
		float *yt = (float *)((char *)y + (size_t)t * y_stride);
		if (nt - t >= 2) {
			q8_0_tokens(panel, n / CPU_QK, xt, x_stride, 2, yt, y_stride, nr);
			t += 2;
		} else {
			q8_0_tokens(panel, n / CPU_QK, xt, x_stride, 1, yt, y_stride, nr);
			t += 1;
		}
	}
}

static const cpu_panel_kernel q4_0_kernel = {q4_0_packed_bytes, q4_0_pack, q4_0_multiply};
static const cpu_panel_kernel q8_0_kernel = {q8_0_packed_bytes, q8_0_pack, q8_0_multiply};

const cpu_panel_kernel *cpu_panel_kernel_of(loom_dtype weight_type)
{
	if (weight_type == LOOM_DTYPE_Q4_0)
		return &q4_0_kernel;
	if (weight_type == LOOM_DTYPE_Q8_0)
		return &q8_0_kernel;
	return NULL;
}

#else

const cpu_panel_kernel *cpu_panel_kernel_of(loom_dtype weight_type)
{
	(void)weight_type;
	return NULL;
}

#endif
