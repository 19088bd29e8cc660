/*
 * cpu_repack_k.c - Q4_K and Q6_K in 16-row groups (cpu_repack.h).
 *
 * A K-quant dot product in llama.cpp's order (cpu_quant_k.c) gives each
 * row, per super-block, 8 exact integer lanes: lane l = sum over the
 * chunks c (32 elements each) of sc * (q . x) over elements 4l..4l+3 of
 * the chunk, sc being the scale of the sub-block those elements are in.
 * With 16 rows side by side, one 512-bit register holds one 4-element
 * group of all 16 rows; maddubs gives each row its two pair sums q . x as
 * 16-bit values and dpwssd multiplies them by the row's scale, repeated in
 * both halves of its 32 bits, into the row's lane. The scales are stored
 * as bytes, widened once per super-block for every token, and a lane's
 * integer sum goes to f32 as the row kernels' does, so Q6_K's results
 * equal theirs bit for bit. Q4_K's multiply takes half those multiplies by
 * summing each sub-block with dpbusd and scaling it once, in an order of
 * its own (q4_k_tokens).
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

/* Part `part` of `parts` of the group's next super-block, asked for while
 * this one is multiplied: spread over the super-block, so that the
 * requests do not all wait for the line fill buffers at once. The
 * hardware prefetchers stop at every 4 KiB page. */
CPU_INLINE void prefetch_part(const void *next, size_t bytes, int part, int parts)
{
	size_t lo = bytes * (size_t)part / (size_t)parts / 64 * 64;
	size_t hi = part + 1 == parts ? bytes : bytes * (size_t)(part + 1) / (size_t)parts / 64 * 64;

	for (size_t o = lo; o < hi; o += 64)
		_mm_prefetch((const char *)next + o, _MM_HINT_T0);
}

/* Lanes of a super-block multiplied together: two for few tokens, to
 * have more independent dpwssd chains; one for more, whose tokens give
 * enough and would run out of registers with two. */
CPU_INLINE int lanes_at_once(int nt)
{
	return nt <= 2 ? 2 : 1;
}

/* Two rows of 16 byte scales (a, then b) as the multipliers dpwssd takes:
 * row r's scale in both 16-bit halves of lane r; *a_out from a, *b_out
 * from b. */
CPU_INLINE void widen_scale_pair(__m512i bytes16, __m512i *a_out, __m512i *b_out)
{
	const __m512i lo = _mm512_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8,
					    7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
	const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));

	*a_out = _mm512_permutexvar_epi16(lo, bytes16);
	*b_out = _mm512_permutexvar_epi16(hi, bytes16);
}

/* Lanes l..l+at_once-1 of each token's super-block, two integer sums
 * each, scaled by the token's d_w * d_x into its f32 lanes. */
CPU_INLINE void add_lanes(__m512 acc[][LANES], const __m512 *dt, __m512i sum[][2][2], int nt, int l, int at_once)
{
	for (int t = 0; t < nt; t++)
		for (int u = 0; u < at_once; u++)
			acc[t][l + u] = _mm512_fmadd_ps(
				dt[t], _mm512_cvtepi32_ps(_mm512_add_epi32(sum[t][u][0], sum[t][u][1])), acc[t][l + u]);
}

/* The rows' 8 f32 lanes reduced as cpu_reduce_lanes does. */
CPU_INLINE __m512 reduce_rows(const __m512 *acc)
{
	__m512 r[4];

	for (int l = 0; l < 4; l++)
		r[l] = _mm512_add_ps(acc[l], acc[l + 4]);
	return _mm512_add_ps(_mm512_add_ps(r[0], r[2]), _mm512_add_ps(r[1], r[3]));
}

/*
 * Q4_K, nt tokens. A super-block's main term is summed exactly, as one
 * integer per row and token: dpbusd adds four weights times four
 * activation bytes into a sub-block's sum, the sub-block's scale
 * multiplies that sum once, and the total goes to f32 once. The high
 * nibbles are taken in place (v & 0xf0, 16 q), saving a shift per load;
 * their sums are divided by 16 again, exactly. The min terms, m times
 * Q8_K's sums of x, make a second exact integer. That is half the
 * multiplies of the row kernels' 8 lanes (maddubs, then dpwssd by the
 * scale, per 4-element group) in another summation order: results agree
 * with the standard layout's to rounding (cpu_repack.h).
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
				prefetch_part(gb + 2, sizeof(q4_k_x16), k0 / pairs * LANES + l, 4 / pairs * LANES);
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
 * Q6_K, nt tokens. maddubs takes the weights unsigned (q + 32, as stored)
 * and 32 * x is taken off each pair sum before the scale, which leaves the
 * exact (q . x) of the signed weights: the pair sums stay within 16 bits
 * either way.
 */
CPU_INLINE void q6_k_tokens(const q6_k_x16 *g, int64_t n_super, const char *x, size_t x_stride,
			     const int nt, float *y, size_t y_stride, __mmask16 rows)
{
	__m512 acc[4][LANES];

	for (int t = 0; t < nt; t++)
		for (int l = 0; l < LANES; l++)
			acc[t][l] = _mm512_setzero_ps();
	for (int64_t b = 0; b < n_super; b++) {
		const q6_k_x16 *gb = g + b;

		/* 32 (x0 + x1) and 32 (x2 + x3) of each group of 4, by token. */
		int32_t offset[4][CPU_QK_K / 4];
		__m512 dt[4];
		__m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb->d));
		for (int t = 0; t < nt; t++) {
			const cpu_block_q8_k *xb = act_block(x, x_stride, t, b);
			for (int i = 0; i < CPU_QK_K / 64; i++)
				_mm512_storeu_si512(offset[t] + 16 * i,
						    _mm512_maddubs_epi16(_mm512_set1_epi8(32),
									 _mm512_loadu_si512(xb->qs + 64 * i)));
			dt[t] = _mm512_mul_ps(d, _mm512_set1_ps(xb->d));
		}

		for (int s = 0; s < 2; s++) {
			__m512i scale[CHUNKS];
			for (int c = 0; c < CHUNKS; c += 2)
				widen_scale_pair(_mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)gb->sc[s][c])),
						 &scale[c], &scale[c + 1]);
			/* Lanes_at_once(nt) lanes at a time, as for Q4_K. */
			const int at_once = lanes_at_once(nt);
			for (int l = 4 * s; l < 4 * s + 4; l += at_once) {
				prefetch_part(gb + 2, sizeof(q6_k_x16), l / at_once, LANES / at_once);
				__m512i sum[4][2][2];
				for (int t = 0; t < nt; t++)
					for (int u = 0; u < at_once; u++)
						sum[t][u][0] = sum[t][u][1] = _mm512_setzero_si512();
				for (int h = 0; h < 2; h++) {
					__m512i q[2][4];
					for (int u = 0; u < at_once; u++)
						q6_k_unpack(gb, h, l + u, q[u]);
					for (int t = 0; t < nt; t++) {
						const int8_t *qs = act_block(x, x_stride, t, b)->qs;
						for (int k = 0; k < 4; k++) {
							for (int u = 0; u < at_once; u++) {
								int c = 4 * h + k, grp = 8 * c + l + u;
								__m512i p = _mm512_sub_epi16(
									_mm512_maddubs_epi16(q[u][k], act_group(qs, grp)),
									_mm512_set1_epi32(offset[t][grp]));
								sum[t][u][k % 2] = _mm512_dpwssd_epi32(sum[t][u][k % 2], p, scale[c]);
							}
						}
					}
				}
				add_lanes(acc, dt, sum, nt, l, at_once);
			}
		}
	}
	for (int t = 0; t < nt; t++)
		_mm512_mask_storeu_ps((float *)((char *)y + (size_t)t * y_stride), rows, reduce_rows(acc[t]));
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
