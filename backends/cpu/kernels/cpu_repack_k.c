/*
 * cpu_repack_k.c - Q4_K and Q6_K in 16-row groups (cpu_repack.h).
 *
 * A K-quant dot product in llama.cpp's order (cpu_quant_k.c) sums each
 * row's super-block in 8 integer lanes of 4-element groups, each group
 * scaled by its sub-block's scale (maddubs, then dpwssd by the scale).
 * Here 16 rows lie side by side, one 512-bit register holding one
 * 4-element group of all 16 rows, and a super-block is summed otherwise:
 * dpbusd adds each sub-block's products exactly, the sub-block's scale
 * multiplies that sum once, and the row's total goes to f32 once. Fewer
 * multiplies than the lanes take, in an order of their own: results agree
 * with the standard layout's to rounding, not bit for bit, and are the
 * same for a token whatever tokens come with it.
 */
#include "cpu_repack.h"

#include "cpu_blocks.h"
#include "cpu_quant.h"
#include "cpu_simd.h"

#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#include <immintrin.h>

#define ROWS CPU_REPACK_ROWS
#define LANES 8  /* the row kernels' integer lanes, 4 elements each */
#define CHUNKS 8 /* 32-element chunks in a super-block */

/*
 * Q4_K: qs byte 32k + 4l + i (k = 0..3) holds element 64k + 4l + i in its
 * low nibble (sub-block 2k) and 64k + 32 + 4l + i in its high (2k + 1), so
 * qs[l][k] holds lane l of chunks 2k and 2k + 1. sc[j] is sub-block j's
 * scale for every row; m[p] the mins of sub-blocks 2p and 2p + 1, in
 * pairs. 2368 bytes for 16 blocks of 144.
 */
typedef struct q4_k_x16 {
	uint8_t qs[LANES][4][ROWS][4];
	uint8_t sc[8][ROWS];
	uint8_t m[4][ROWS][2];
	uint16_t d[ROWS];
	uint16_t dmin[ROWS];
} q4_k_x16;

/*
 * Q6_K: in half h, chunk 4h + k (k = 0..3) takes its low 4 bits from the
 * ql bytes 64h + 32 (k % 2) + 4l + i, low nibbles for k < 2, and its top 2
 * from bits 2k..2k+1 of qh byte 32h + 4l + i. Sub-blocks are 16 elements,
 * so lanes 0..3 of chunk c take the scale of sub-block 2c and lanes 4..7
 * that of 2c + 1: sc[s][c] holds sub-block 2c + s's. 3360 bytes, as many
 * as the 16 blocks.
 */
typedef struct q6_k_x16 {
	uint8_t ql[2][LANES][2][ROWS][4];
	uint8_t qh[2][LANES][ROWS][4];
	int8_t sc[2][CHUNKS][ROWS];
	uint16_t d[ROWS];
} q6_k_x16;

_Static_assert(sizeof(q6_k_x16) == ROWS * sizeof(cpu_block_q6_k),
	       "a repacked Q6_K group takes the bytes of the blocks it holds");

size_t cpu_repacked_k_block_bytes(loom_dtype type, uint32_t *layout)
{
	if (type == LOOM_DTYPE_Q4_K) {
		*layout = CPU_LAYOUT_Q4_K_X16;
		return sizeof(q4_k_x16);
	}
	if (type == LOOM_DTYPE_Q6_K) {
		*layout = CPU_LAYOUT_Q6_K_X16;
		return sizeof(q6_k_x16);
	}
	return 0;
}

static void repack_q4_k(const cpu_block_q4_k *in, q4_k_x16 *g, int r)
{
	for (int l = 0; l < LANES; l++)
		for (int k = 0; k < 4; k++)
			memcpy(g->qs[l][k][r], in->qs + 32 * k + 4 * l, 4);
	for (int j = 0; j < 8; j++) {
		uint8_t sc, m;
		cpu_k_scale_min(in->scales, j, &sc, &m);
		g->sc[j][r] = sc;
		g->m[j / 2][r][j % 2] = m;
	}
	g->d[r] = in->d;
	g->dmin[r] = in->dmin;
}

static void repack_q6_k(const cpu_block_q6_k *in, q6_k_x16 *g, int r)
{
	for (int h = 0; h < 2; h++) {
		for (int l = 0; l < LANES; l++) {
			for (int kk = 0; kk < 2; kk++)
				memcpy(g->ql[h][l][kk][r], in->ql + 64 * h + 32 * kk + 4 * l, 4);
			memcpy(g->qh[h][l][r], in->qh + 32 * h + 4 * l, 4);
		}
	}
	for (int j = 0; j < 16; j++)
		g->sc[j % 2][j / 2][r] = in->scales[j];
	g->d[r] = in->d;
}

void cpu_repack_k(const loom_tensor *w, uint32_t layout, void *dst, int64_t g_lo, int64_t g_hi)
{
	int64_t n_super = w->ne[0] / CPU_QK_K;
	int64_t o_hi = g_hi * ROWS < w->ne[1] ? g_hi * ROWS : w->ne[1];

	for (int64_t o = g_lo * ROWS; o < o_hi; o++) {
		const char *row = (const char *)w->data + o * w->nb[1];
		int64_t first = (o / ROWS) * n_super;
		int r = (int)(o % ROWS);
		for (int64_t b = 0; b < n_super; b++) {
			if (layout == CPU_LAYOUT_Q4_K_X16)
				repack_q4_k((const cpu_block_q4_k *)row + b, (q4_k_x16 *)dst + first + b, r);
			else
				repack_q6_k((const cpu_block_q6_k *)row + b, (q6_k_x16 *)dst + first + b, r);
		}
	}
}

static void unpack_q4_k(const q4_k_x16 *g, int r, cpu_block_q4_k *out)
{
	uint8_t sc[8], m[8];

	for (int l = 0; l < LANES; l++)
		for (int k = 0; k < 4; k++)
			memcpy(out->qs + 32 * k + 4 * l, g->qs[l][k][r], 4);
	for (int j = 0; j < 8; j++) {
		sc[j] = g->sc[j][r];
		m[j] = g->m[j / 2][r][j % 2];
	}
	/* The 6-bit scales and mins packed back as cpu_k_scale_min reads them:
	 * sub-blocks 0..3 whole in bytes 0..7, 4..7's low four bits in bytes
	 * 8..11 and their top two above 0..7's. */
	for (int j = 0; j < 4; j++) {
		out->scales[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
		out->scales[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
		out->scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
	}
	out->d = g->d[r];
	out->dmin = g->dmin[r];
}

static void unpack_q6_k(const q6_k_x16 *g, int r, cpu_block_q6_k *out)
{
	for (int h = 0; h < 2; h++) {
		for (int l = 0; l < LANES; l++) {
			for (int kk = 0; kk < 2; kk++)
				memcpy(out->ql + 64 * h + 32 * kk + 4 * l, g->ql[h][l][kk][r], 4);
			memcpy(out->qh + 32 * h + 4 * l, g->qh[h][l][r], 4);
		}
	}
	for (int j = 0; j < 16; j++)
		out->scales[j] = g->sc[j % 2][j / 2][r];
	out->d = g->d[r];
}

void cpu_repacked_block_k(const loom_tensor *w, int64_t o, int64_t b, void *block)
{
	int64_t at = (o / ROWS) * (w->ne[0] / CPU_QK_K) + b;

	if (w->layout == CPU_LAYOUT_Q4_K_X16)
		unpack_q4_k((const q4_k_x16 *)w->data + at, (int)(o % ROWS), block);
	else
		unpack_q6_k((const q6_k_x16 *)w->data + at, (int)(o % ROWS), block);
}

/* ---- multiplication ---- */

CPU_INLINE const cpu_block_q8_k *act_block(const char *x, size_t x_stride, int t, int64_t b)
{
	return (const cpu_block_q8_k *)(x + (size_t)t * x_stride) + b;
}

/* Four activation bytes, elements 4g..4g+3, in every lane. */
CPU_INLINE __m512i act_group(const int8_t *qs, int g)
{
	int32_t v;

	memcpy(&v, qs + 4 * g, sizeof(v));
	return _mm512_set1_epi32(v);
}

/* Part `part` of `parts` of a super-block ahead, asked for while this one
 * is multiplied (the hardware prefetchers stop at every 4 KiB page):
 * Q6_K spreads the parts over its loads, so that the requests do not all
 * wait for the line fill buffers at once. */
CPU_INLINE void prefetch_part(const void *next, size_t bytes, int part, int parts)
{
	size_t lo = bytes * (size_t)part / (size_t)parts / 64 * 64;
	size_t hi = part + 1 == parts ? bytes : bytes * (size_t)(part + 1) / (size_t)parts / 64 * 64;

	for (size_t o = lo; o < hi; o += 64)
		_mm_prefetch((const char *)next + o, _MM_HINT_T0);
}

/*
 * Q4_K, nt tokens. A super-block's main term is summed exactly, as one
 * integer per row and token: dpbusd adds four weights times four
 * activation bytes into a sub-block's sum, the sub-block's scale
 * multiplies that sum once, and the total goes to f32 once. The high
 * nibbles are taken in place (v & 0xf0, 16 q), saving a shift per load;
 * their sums are divided by 16 again, exactly. The min terms, m times
 * Q8_K's sums of x, make a second exact integer. That is half the
 * multiplies of the row kernels' maddubs, then dpwssd by the scale, per
 * 4-element group.
 *
 * One or two tokens hold all 8 sub-blocks' sums at once and read the
 * super-block in address order; more tokens would run out of registers
 * and take one pair of sub-blocks (a quarter of qs, 256 bytes apart) at a
 * time.
 */
CPU_INLINE void q4_k_tokens(const q4_k_x16 *g, int64_t n_super, const char *x, size_t x_stride,
			     const int nt, float *y, size_t y_stride, __mmask16 rows)
{
	const int pairs = nt <= 2 ? 4 : 1; /* pairs of sub-blocks summed together */
	const __m512i low = _mm512_set1_epi8(0x0f), high = _mm512_set1_epi8((char)0xf0);
	__m512 acc[4], acc_m[4];

	for (int t = 0; t < nt; t++)
		acc[t] = acc_m[t] = _mm512_setzero_ps();
	for (int64_t b = 0; b < n_super; b++) {
		const q4_k_x16 *gb = g + b;
		__m512i total[4];

		/* The super-block after next, asked for whole as this one starts:
		 * spread over this one's loads, as Q6_K's are, the requests came
		 * too late for this kernel (3584 x 1024 from memory, one thread:
		 * 33 GB/s against 37). */
		prefetch_part(gb + 2, sizeof(q4_k_x16), 0, 1);
		for (int t = 0; t < nt; t++)
			total[t] = _mm512_setzero_si512();
		for (int k0 = 0; k0 < 4; k0 += pairs) {
			__m512i sum[4][8];
			for (int t = 0; t < nt; t++)
				for (int j = 0; j < 2 * pairs; j++)
					sum[t][j] = _mm512_setzero_si512();
			/* Unrolled whole, so that every sum's index is a constant and
			 * the sums stay in registers. */
#pragma GCC unroll 8
			for (int l = 0; l < LANES; l++) {
#pragma GCC unroll 4
				for (int u = 0; u < pairs; u++) {
					int k = k0 + u;
					__m512i v = _mm512_loadu_si512((const void *)gb->qs[l][k]);
					__m512i lo = _mm512_and_si512(v, low), hi = _mm512_and_si512(v, high);
					for (int t = 0; t < nt; t++) {
						const int8_t *qs = act_block(x, x_stride, t, b)->qs;
						sum[t][2 * u] = _mm512_dpbusd_epi32(sum[t][2 * u], lo, act_group(qs, 16 * k + l));
						sum[t][2 * u + 1] =
							_mm512_dpbusd_epi32(sum[t][2 * u + 1], hi, act_group(qs, 16 * k + 8 + l));
					}
				}
			}
			for (int u = 0; u < pairs; u++) {
				int k = k0 + u;
				__m512i sc_lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)gb->sc[2 * k]));
				__m512i sc_hi = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)gb->sc[2 * k + 1]));
				for (int t = 0; t < nt; t++) {
					total[t] = _mm512_add_epi32(total[t], _mm512_mullo_epi32(sc_lo, sum[t][2 * u]));
					total[t] = _mm512_add_epi32(
						total[t], _mm512_mullo_epi32(sc_hi, _mm512_srai_epi32(sum[t][2 * u + 1], 4)));
				}
			}
		}

		__m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb->d));
		__m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb->dmin));
		for (int t = 0; t < nt; t++) {
			const cpu_block_q8_k *xb = act_block(x, x_stride, t, b);
			/* Sub-block j's sum of x (Q8_K's bsums 2j and 2j + 1), in pairs
			 * of sub-blocks as the mins are. */
			int32_t pair_sums[4];
			_mm_storeu_si128((__m128i *)pair_sums,
					 _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)xb->bsums),
							_mm_loadu_si128((const __m128i *)(xb->bsums + 8))));
			__m512i mins = _mm512_setzero_si512();
			for (int p = 0; p < 4; p++) {
				__m512i m = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)gb->m[p]));
				mins = _mm512_add_epi32(mins, _mm512_madd_epi16(m, _mm512_set1_epi32(pair_sums[p])));
			}
			acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(xb->d)), _mm512_cvtepi32_ps(total[t]),
						 acc[t]);
			acc_m[t] = _mm512_fmadd_ps(_mm512_mul_ps(dmin, _mm512_set1_ps(-xb->d)), _mm512_cvtepi32_ps(mins),
						   acc_m[t]);
		}
	}
	for (int t = 0; t < nt; t++)
		_mm512_mask_storeu_ps((float *)((char *)y + (size_t)t * y_stride), rows, _mm512_add_ps(acc[t], acc_m[t]));
}

/* Lane l of the four chunks of half h of a Q6_K super-block, as bytes
 * q + 32 (0..63). */
CPU_INLINE void q6_k_unpack(const q6_k_x16 *gb, int h, int l, __m512i q[4])
{
	const __m512i low4 = _mm512_set1_epi8(15), top2 = _mm512_set1_epi8(0x30);
	__m512i ql0 = _mm512_loadu_si512((const void *)gb->ql[h][l][0]);
	__m512i ql1 = _mm512_loadu_si512((const void *)gb->ql[h][l][1]);
	__m512i qh = _mm512_loadu_si512((const void *)gb->qh[h][l]);

	q[0] = _mm512_or_si512(_mm512_and_si512(ql0, low4), _mm512_and_si512(_mm512_slli_epi16(qh, 4), top2));
	q[1] = _mm512_or_si512(_mm512_and_si512(ql1, low4), _mm512_and_si512(_mm512_slli_epi16(qh, 2), top2));
	q[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql0, 4), low4), _mm512_and_si512(qh, top2));
	q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql1, 4), low4),
			       _mm512_and_si512(_mm512_srli_epi16(qh, 2), top2));
}

/*
 * Q6_K, nt tokens, as Q4_K's: dpbusd sums each sub-block of 16 of the
 * stored weights (q + 32, unsigned) times x, the sub-block's scale
 * multiplies the sum once, and the super-block's scaled sums, less 32
 * times the scales times Q8_K's sums of x over each sub-block (its bsums,
 * by madd, two sub-blocks at a time), go to f32 once: one dpbusd per
 * group where the row kernels take maddubs, the offset and dpwssd.
 *
 * One or two tokens hold the sums of a half's 8 sub-blocks at once; more
 * tokens would run out of registers and take a half's lanes 0..3, then
 * 4..7 (4 sub-blocks each).
 */
CPU_INLINE void q6_k_tokens(const q6_k_x16 *g, int64_t n_super, const char *x, size_t x_stride,
			     const int nt, float *y, size_t y_stride, __mmask16 rows)
{
	const int runs = nt <= 2 ? 1 : 2;      /* runs of lanes a half is taken in */
	const int per_chunk = 2 / runs;         /* sub-blocks of a chunk a run sums */
	__m512 acc[4];

	for (int t = 0; t < nt; t++)
		acc[t] = _mm512_setzero_ps();
	for (int64_t b = 0; b < n_super; b++) {
		const q6_k_x16 *gb = g + b;
		__m512i total[4];

		for (int t = 0; t < nt; t++)
			total[t] = _mm512_setzero_si512();
		for (int h = 0; h < 2; h++) {
			for (int r = 0; r < runs; r++) {
				__m512i sum[4][8];
				for (int t = 0; t < nt; t++)
					for (int j = 0; j < 4 * per_chunk; j++)
						sum[t][j] = _mm512_setzero_si512();
				/* Unrolled whole, so that every sum's index is a constant
				 * and the sums stay in registers. */
#pragma GCC unroll 8
				for (int l = 0; l < LANES; l++) {
					if (l / (LANES / runs) != r)
						continue;
					prefetch_part(gb + 2, sizeof(q6_k_x16), LANES * h + l, 2 * LANES);
					__m512i q[4];
					q6_k_unpack(gb, h, l, q);
#pragma GCC unroll 4
					for (int k = 0; k < 4; k++) {
						int c = 4 * h + k, j = per_chunk * k + (per_chunk == 2 && l >= 4);
						for (int t = 0; t < nt; t++) {
							const int8_t *qs = act_block(x, x_stride, t, b)->qs;
							sum[t][j] = _mm512_dpbusd_epi32(sum[t][j], q[k], act_group(qs, 8 * c + l));
						}
					}
				}
				for (int k = 0; k < 4; k++) {
					for (int s = 0; s < per_chunk; s++) {
						int c = 4 * h + k, sub = runs == 1 ? s : r; /* sub-block 2c + sub */
						__m512i sc = _mm512_cvtepi8_epi32(
							_mm_loadu_si128((const __m128i *)gb->sc[sub][c]));
						for (int t = 0; t < nt; t++)
							total[t] = _mm512_add_epi32(
								total[t], _mm512_mullo_epi32(sc, sum[t][per_chunk * k + s]));
					}
				}
			}
		}
		/* The offsets: sc times Q8_K's sum of x, sub-blocks 2c and 2c + 1
		 * of each row side by side for madd. */
		__m512i sc_pairs[CHUNKS];
		for (int c = 0; c < CHUNKS; c++) {
			__m128i even = _mm_loadu_si128((const __m128i *)gb->sc[0][c]);
			__m128i odd = _mm_loadu_si128((const __m128i *)gb->sc[1][c]);
			__m256i interleaved = _mm256_set_m128i(_mm_unpackhi_epi8(even, odd), _mm_unpacklo_epi8(even, odd));
			sc_pairs[c] = _mm512_cvtepi8_epi16(interleaved);
		}
		for (int t = 0; t < nt; t++) {
			const char *bsums = (const char *)act_block(x, x_stride, t, b)->bsums;
			__m512i offset = _mm512_setzero_si512();
			for (int c = 0; c < CHUNKS; c++) {
				int32_t pair;
				memcpy(&pair, bsums + 4 * c, sizeof(pair));
				offset = _mm512_add_epi32(offset, _mm512_madd_epi16(sc_pairs[c], _mm512_set1_epi32(pair)));
			}
			total[t] = _mm512_sub_epi32(total[t], _mm512_slli_epi32(offset, 5));
		}
		__m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb->d));
		for (int t = 0; t < nt; t++)
			acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(act_block(x, x_stride, t, b)->d)),
						 _mm512_cvtepi32_ps(total[t]), acc[t]);
	}
	for (int t = 0; t < nt; t++)
		_mm512_mask_storeu_ps((float *)((char *)y + (size_t)t * y_stride), rows, acc[t]);
}

/* Tokens [t, t + left) through one group, up to 4 at once; returns how
 * many it did. */
#define K_TOKENS(kernel, type)                                                                 \
	do {                                                                                   \
		if (left >= 4) {                                                               \
			kernel((const type *)g, n_super, x, x_stride, 4, y, y_stride, rows);   \
			return 4;                                                              \
		}                                                                              \
		if (left >= 2) {                                                               \
			kernel((const type *)g, n_super, x, x_stride, 2, y, y_stride, rows);   \
			return 2;                                                              \
		}                                                                              \
		kernel((const type *)g, n_super, x, x_stride, 1, y, y_stride, rows);           \
		return 1;                                                                      \
	} while (0)

static int64_t group_tokens(uint32_t layout, const void *g, int64_t n_super, const char *x, size_t x_stride,
			    int64_t left, float *y, size_t y_stride, __mmask16 rows)
{
	if (layout == CPU_LAYOUT_Q4_K_X16)
		K_TOKENS(q4_k_tokens, q4_k_x16);
	K_TOKENS(q6_k_tokens, q6_k_x16);
}

void cpu_repacked_multiply_k(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x, size_t x_stride,
			     int64_t nt, float *y, size_t y_stride)
{
	int64_t n_super = w->ne[0] / CPU_QK_K;
	uint32_t layout = 0;
	size_t group_bytes = (size_t)n_super * cpu_repacked_k_block_bytes(w->dtype, &layout);

	for (int64_t gi = g_lo; gi < g_hi; gi++) {
		int64_t o = gi * ROWS, left = w->ne[1] - o;
		__mmask16 rows = cpu_rows_mask(left);
		const char *g = (const char *)w->data + (size_t)gi * group_bytes;
		for (int64_t t = 0; t < nt;) {
			float *yt = (float *)((char *)y + (size_t)t * y_stride) + o;
			t += group_tokens(w->layout, g, n_super, x + (size_t)t * x_stride, x_stride, nt - t, yt,
					  y_stride, rows);
		}
	}
}

#if defined(__AMX_INT8__)
/* 16 rows' bytes, widened to f32. */
CPU_INLINE __m512 bytes_to_f32(const uint8_t *p, bool is_signed)
{
	__m128i v = _mm_loadu_si128((const __m128i *)p);
	return _mm512_cvtepi32_ps(is_signed ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v));
}

/* Q4_K: qs[l][k] holds lane l of chunks 2k (low nibbles) and 2k + 1
 * (high), element 4-groups 16k + l and 16k + 8 + l of the super-block.
 * Q6_K: chunk 4h + k, lane l is element 4-group 8 (4h + k) + l; its low
 * bits are the low (k < 2) or high nibbles of ql[h][l][k % 2], its top
 * two bits 2k..2k+1 of qh[h][l]. */
void cpu_repacked_unpack_k(const loom_tensor *w, int64_t gi, const cpu_unpacked_group *out)
{
	int64_t n_super = w->ne[0] / CPU_QK_K;
	const __m512i low4 = _mm512_set1_epi8(15), three = _mm512_set1_epi8(3);

	uint32_t layout = 0;
	const size_t block_bytes = cpu_repacked_k_block_bytes(w->dtype, &layout);
	const char *group = (const char *)w->data + (size_t)(gi * n_super) * block_bytes;

	for (int64_t b = 0; b < n_super; b++) {
		__m512i *q = (__m512i *)(out->q + b * CPU_QK_K * ROWS);
		/* two super-blocks ahead, as the multiply asks for them */
		for (size_t at = 0; at < block_bytes; at += 64)
			_mm_prefetch(group + (size_t)(b + 2) * block_bytes + at, _MM_HINT_T0);
		if (w->layout == CPU_LAYOUT_Q4_K_X16) {
			const q4_k_x16 *g = (const q4_k_x16 *)w->data + gi * n_super + b;
			for (int l = 0; l < LANES; l++) {
				for (int k = 0; k < 4; k++) {
					__m512i v = _mm512_loadu_si512((const void *)g->qs[l][k]);
					_mm512_storeu_si512(q + 16 * k + l, _mm512_and_si512(v, low4));
					_mm512_storeu_si512(q + 16 * k + 8 + l,
							    _mm512_and_si512(_mm512_srli_epi16(v, 4), low4));
				}
			}
			__m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g->d));
			__m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g->dmin));
			for (int j = 0; j < 8; j++) {
				uint8_t m[ROWS];
				for (int r = 0; r < ROWS; r++)
					m[r] = g->m[j / 2][r][j % 2];
				float *dw = out->dw + (b * 8 + j) * ROWS, *mw = out->mw + (b * 8 + j) * ROWS;
				_mm512_storeu_ps(dw, _mm512_mul_ps(d, bytes_to_f32(g->sc[j], false)));
				/* -(dmin * m), as the standard layout's unpacking has it */
				_mm512_storeu_ps(mw, _mm512_xor_ps(_mm512_mul_ps(dmin, bytes_to_f32(m, false)),
								   _mm512_set1_ps(-0.0f)));
			}
			continue;
		}
		const q6_k_x16 *g = (const q6_k_x16 *)w->data + gi * n_super + b;
		for (int h = 0; h < 2; h++) {
			for (int l = 0; l < LANES; l++) {
				__m512i ql0 = _mm512_loadu_si512((const void *)g->ql[h][l][0]);
				__m512i ql1 = _mm512_loadu_si512((const void *)g->ql[h][l][1]);
				__m512i qh = _mm512_loadu_si512((const void *)g->qh[h][l]);
				for (int k = 0; k < 4; k++) {
					__m512i ql = k % 2 == 0 ? ql0 : ql1;
					__m512i lo = k < 2 ? _mm512_and_si512(ql, low4)
							   : _mm512_and_si512(_mm512_srli_epi16(ql, 4), low4);
					__m512i hi = _mm512_and_si512(_mm512_srli_epi16(qh, 2 * k), three);
					__m512i v = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
					_mm512_storeu_si512(q + 8 * (4 * h + k) + l, _mm512_sub_epi8(v, _mm512_set1_epi8(32)));
				}
			}
		}
		__m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g->d));
		for (int j = 0; j < 16; j++)
			_mm512_storeu_ps(out->dw + (b * 16 + j) * ROWS,
					 _mm512_mul_ps(d, bytes_to_f32((const uint8_t *)g->sc[j % 2][j / 2], true)));
	}
}
#endif

#endif
