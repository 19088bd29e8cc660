/*
 * cpu_gemm_mxfp4.c - the tile kernel of MXFP4 weights with Q8_0
 * activations (cpu_gemm_tile.h; the rows' functions are
 * cpu_quant_mxfp4.c). The vector kernels look a block's 32 values up at
 * once with a byte shuffle; AVX-512 VNNI multiplies two blocks at a time
 * by dpbusd, the values shifted unsigned, AVX2 signed bytes by signed
 * bytes (the weight's sign moved onto the activation): exact integer sums
 * in eight lanes a block, scaled once a block.
 */
#include "cpu_gemm_tile.h"

#include "cpu_half.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)

/* Two blocks' 64 values as unsigned bytes, each value + 12 (dpbusd's
 * unsigned operand): lanes of 16 bytes are block b's low nibbles
 * (elements 0-15), its high ones (16-31), then block b + 1's. */
CPU_INLINE __m512i pair_values(const cpu_block_mxfp4 *b)
{
	static const int8_t shifted[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
	const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)shifted));
	__m512i qs = _mm512_inserti32x4(_mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)b[0].qs)),
					_mm_loadu_si128((const __m128i *)b[0].qs), 1);
	qs = _mm512_inserti32x4(qs, _mm_loadu_si128((const __m128i *)b[1].qs), 2);
	qs = _mm512_inserti32x4(qs, _mm_loadu_si128((const __m128i *)b[1].qs), 3);
	const __m512i shift = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
	__m512i idx = _mm512_and_si512(_mm512_srlv_epi64(qs, shift), _mm512_set1_epi8(15));
	return _mm512_shuffle_epi8(table, idx);
}

/* y[t][r] over the tile, two blocks at a time: dpbusd of the shifted
 * values, started at -12 sum(x) (the shift taken back, once a token for
 * every row), scaled by each block's f32(half(E) * d_x) in its eight
 * lanes; an odd last block alone, as the AVX2 kernel does it. */
CPU_INLINE void tile_mxfp4(const cpu_gemm_args *a, const int nt)
{
	__m512 acc[CPU_GEMM_ROWS][CPU_GEMM_TOKENS];
	const int64_t n_blocks = a->n / CPU_QK;
	for (int r = 0; r < CPU_GEMM_ROWS; r++)
		for (int t = 0; t < nt; t++)
			acc[r][t] = _mm512_setzero_ps();
	int64_t b = 0;
	for (; b + 2 <= n_blocks; b += 2) {
		__m512i xq[CPU_GEMM_TOKENS], corr[CPU_GEMM_TOKENS];
		float xd[CPU_GEMM_TOKENS][2];
		for (int t = 0; t < nt; t++) {
			const cpu_block_q8_0 *xb = (const cpu_block_q8_0 *)cpu_tile_act_row(a, t) + b;
			xq[t] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)xb[0].qs)),
						   _mm256_loadu_si256((const __m256i *)xb[1].qs), 1);
			corr[t] = _mm512_sub_epi32(_mm512_setzero_si512(),
						   _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(12), xq[t]));
			xd[t][0] = cpu_fp16_to_f32(xb[0].d);
			xd[t][1] = cpu_fp16_to_f32(xb[1].d);
		}
		for (int r = 0; r < CPU_GEMM_ROWS; r++) {
			const cpu_block_mxfp4 *wb = (const cpu_block_mxfp4 *)cpu_tile_weight_row(a, r) + b;
			if (a->prefetch_ahead != 0)
				_mm_prefetch((const char *)wb + a->prefetch_ahead, _MM_HINT_T0);
			const __m512i w = pair_values(wb);
			const float d0 = cpu_mxfp4_half_scale(wb[0].e), d1 = cpu_mxfp4_half_scale(wb[1].e);
			for (int t = 0; t < nt; t++) {
				__m512 scale = _mm512_insertf32x8(_mm512_set1_ps(d0 * xd[t][0]), _mm256_set1_ps(d1 * xd[t][1]), 1);
				__m512i sum = _mm512_dpbusd_epi32(corr[t], w, xq[t]);
				acc[r][t] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(sum), acc[r][t]);
			}
		}
	}
	for (int t = 0; t < nt; t++) {
		float *y = cpu_tile_out_row(a, t);
		for (int r = 0; r < a->nr; r++) {
			y[r] = _mm512_reduce_add_ps(acc[r][t]);
			if (b < n_blocks)
				y[r] += cpu_dot_mxfp4((const cpu_block_mxfp4 *)cpu_tile_weight_row(a, r) + b,
						      (const cpu_block_q8_0 *)cpu_tile_act_row(a, t) + b, CPU_QK);
		}
	}
}

#elif defined(__AVX2__)

/* A block's 32 values as signed bytes, element order. */
CPU_INLINE __m256i block_values(const cpu_block_mxfp4 *b)
{
	const __m128i table = _mm_loadu_si128((const __m128i *)cpu_mxfp4_values);
	__m128i qs = _mm_loadu_si128((const __m128i *)b->qs);
	__m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(qs, _mm_set1_epi8(15)));
	__m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(qs, 4), _mm_set1_epi8(15)));
	return _mm256_set_m128i(hi, lo);
}

/* Eight lanes of sums of products of signed bytes w and x. */
CPU_INLINE __m256i signed_dot(__m256i w, __m256i x)
{
	__m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
	return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

/* y[t][r] over the tile: each weight block decoded once, met by every
 * token's block, each (row, token) summed in eight f32 lanes. */
CPU_INLINE void tile_mxfp4(const cpu_gemm_args *a, const int nt)
{
	__m256 acc[CPU_GEMM_ROWS][CPU_GEMM_TOKENS];
	for (int r = 0; r < CPU_GEMM_ROWS; r++)
		for (int t = 0; t < nt; t++)
			acc[r][t] = _mm256_setzero_ps();
	for (int64_t b = 0; b < a->n / CPU_QK; b++) {
		__m256i xq[CPU_GEMM_TOKENS];
		float xd[CPU_GEMM_TOKENS];
		for (int t = 0; t < nt; t++) {
			const cpu_block_q8_0 *xb = (const cpu_block_q8_0 *)cpu_tile_act_row(a, t) + b;
			xq[t] = _mm256_loadu_si256((const __m256i *)xb->qs);
			xd[t] = cpu_fp16_to_f32(xb->d);
		}
		for (int r = 0; r < CPU_GEMM_ROWS; r++) {
			const cpu_block_mxfp4 *wb = (const cpu_block_mxfp4 *)cpu_tile_weight_row(a, r) + b;
			if (a->prefetch_ahead != 0)
				_mm_prefetch((const char *)wb + a->prefetch_ahead, _MM_HINT_T0);
			const __m256i w = block_values(wb);
			const float wd = cpu_mxfp4_half_scale(wb->e);
			for (int t = 0; t < nt; t++)
				acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(wd * xd[t]),
							    _mm256_cvtepi32_ps(signed_dot(w, xq[t])), acc[r][t]);
		}
	}
	for (int t = 0; t < nt; t++) {
		float *y = cpu_tile_out_row(a, t);
		for (int r = 0; r < a->nr; r++)
			y[r] = cpu_hsum_x8(acc[r][t]);
	}
}

#else

CPU_INLINE void tile_mxfp4(const cpu_gemm_args *a, const int nt)
{
	for (int t = 0; t < nt; t++)
		for (int r = 0; r < a->nr; r++)
			cpu_tile_out_row(a, t)[r] = cpu_dot_mxfp4(cpu_tile_weight_row(a, r), cpu_tile_act_row(a, t), a->n);
}

#endif

#define MXFP4_TILE(nt) tile_mxfp4(a, nt)
CPU_GEMM_TILED(mxfp4, MXFP4_TILE)
