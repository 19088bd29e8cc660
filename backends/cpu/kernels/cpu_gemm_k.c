/*
 * cpu_gemm_k.c - tile kernels for the K-quants Q2_K, Q3_K, Q4_K, Q5_K and
 * Q6_K with Q8_K activations (cpu_gemm_tile.h).
 *
 * One tile serves all five. A super-block of a weight row is taken 32
 * elements (a chunk) at a time, in element order: the type's bits become 32
 * bytes q and its sub-block scales a vector of 16-bit multipliers (a chunk
 * holds one sub-block of 32 or two of 16). Each token then adds
 *     madd(maddubs(q, x), scale)
 * to 8 integer lanes, lane l holding elements 4l..4l+3 of every chunk:
 * exactly the lanes of the row kernels in cpu_quant_k.c, whose summation
 * order the f32 steps here repeat (mins first into the lanes for Q2_K, into
 * 4 lanes of their own for Q4_K, into one running sum for Q5_K), so a
 * variant gives the same results through either. maddubs takes unsigned
 * weights; the signed ones (Q3_K, Q6_K) give it |q| and move q's sign onto
 * x. The weight bits are unpacked once per row and super-block and serve
 * every token of the tile.
 */
#include "cpu_gemm_tile.h"

#include "cpu_half.h"

#include <string.h>

#if defined(__AVX2__)

enum k_type { K_Q2, K_Q3, K_Q4, K_Q5, K_Q6 };

/* Q3_K and Q6_K weights are signed, the others not. */
CPU_INLINE bool k_signed(enum k_type type)
{
	return type == K_Q3 || type == K_Q6;
}

/* One row's super-block, ready for its chunks. */
typedef struct k_block_view {
	const uint8_t *blk;
	__m256i scales16;   /* 16 sub-blocks: the scales as 16-bit values */
	__m128i scales8;    /* 8 sub-blocks: the scales as 16-bit values */
	__m256i mins;       /* the min of each of Q8_K's 16-element sums, 16-bit */
	float d, dmin;
} k_block_view;

/* Spreads a pair of 16-bit scales, repeated in every 32 bits, as the
 * first over the low 128 bits and the second over the high 128. */
CPU_INLINE __m256i scale_pair_shuffle(void)
{
	return _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
				2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
}

/* The chunk's multipliers: for 16 sub-blocks of 16, sub-block 2c over
 * elements 0..15 (lanes 0..3) and 2c + 1 over 16..31; for 8 of 32, sc[c]. */
CPU_INLINE __m256i chunk_scale(enum k_type type, const k_block_view *v, int c)
{
	if (type == K_Q4 || type == K_Q5)
		return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(v->scales8),
					   _mm256_set1_epi16((short)((2 * c + 1) << 8 | 2 * c)));
	__m256i pair = _mm256_permutevar8x32_epi32(v->scales16, _mm256_set1_epi32(c));
	return _mm256_shuffle_epi8(pair, scale_pair_shuffle());
}

/* Bits 2j..2j+1 of the 32 bytes at p, as bytes 0..3. */
CPU_INLINE __m256i two_bits(const uint8_t *p, int j)
{
	__m256i v = _mm256_loadu_si256((const __m256i *)p);
	return _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), _mm256_set1_epi8(3));
}

/* Bit j of each of the 32 bytes at p, as 0 or 1 << shift. */
CPU_INLINE __m256i one_bit(const uint8_t *p, int j, int shift)
{
	__m256i v = _mm256_loadu_si256((const __m256i *)p);
	__m256i bit = _mm256_and_si256(_mm256_srli_epi16(v, j), _mm256_set1_epi8(1));
	return _mm256_slli_epi16(bit, shift);
}

/* Chunk c's 32 weights as bytes: unsigned for Q2_K, Q4_K and Q5_K, signed
 * for Q3_K and Q6_K. The bit layouts are described in cpu_quant_k.c. */
CPU_INLINE __m256i chunk_q(enum k_type type, const uint8_t *blk, int c)
{
	switch (type) {
	case K_Q2: {
		const cpu_block_q2_k *b = (const void *)blk;
		return two_bits(b->qs + 32 * (c / 4), c % 4);
	}
	case K_Q3: {
		const cpu_block_q3_k *b = (const void *)blk;
		__m256i q = _mm256_or_si256(two_bits(b->qs + 32 * (c / 4), c % 4), one_bit(b->hmask, c, 2));
		return _mm256_sub_epi8(q, _mm256_set1_epi8(4));
	}
	case K_Q4:
	case K_Q5: {
		const uint8_t *qs = type == K_Q4 ? ((const cpu_block_q4_k *)(const void *)blk)->qs
						 : ((const cpu_block_q5_k *)(const void *)blk)->qs;
		__m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * (c / 2)));
		__m256i q = c % 2 ? cpu_high_nibbles(v) : cpu_low_nibbles(v);
		if (type == K_Q5)
			q = _mm256_or_si256(q, one_bit(((const cpu_block_q5_k *)(const void *)blk)->qh, c, 4));
		return q;
	}
	case K_Q6:
	default: {
		const cpu_block_q6_k *b = (const void *)blk;
		int half = c / 4, k = c % 4;
		__m256i l = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * half + 32 * (k % 2)));
		__m256i h = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * half));
		__m256i lo = k < 2 ? cpu_low_nibbles(l) : cpu_high_nibbles(l);
		__m256i hi = _mm256_and_si256(_mm256_srli_epi16(h, 2 * k), _mm256_set1_epi8(3));
		__m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
		return _mm256_sub_epi8(q, _mm256_set1_epi8(32));
	}
	}
}

/* 16 bytes as 16-bit values, signed or not. */
CPU_INLINE __m256i widen_s8(__m128i v)
{
	return _mm256_cvtepi8_epi16(v);
}

CPU_INLINE __m256i widen_u8(__m128i v)
{
	return _mm256_cvtepu8_epi16(v);
}

/* The low 8 bytes of v as 8 16-bit values. */
CPU_INLINE __m128i widen_u8_low(__m128i v)
{
	return _mm_cvtepu8_epi16(v);
}

/* The eight 6-bit scales (bytes 0..7) and mins (8..15) of a Q4_K/Q5_K
 * block, unpacked four at a time in 32-bit words (cpu_k_scale_min). */
CPU_INLINE __m128i q4_k_scales_mins(const uint8_t *s)
{
	const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
	uint32_t w0, w1, w2;

	memcpy(&w0, s, 4);
	memcpy(&w1, s + 4, 4);
	memcpy(&w2, s + 8, 4);
	uint32_t sc_lo = w0 & low6;
	uint32_t sc_hi = (w2 & low4) | ((w0 >> 6) & low2) << 4;
	uint32_t m_lo = w1 & low6;
	uint32_t m_hi = ((w2 >> 4) & low4) | ((w1 >> 6) & low2) << 4;
	return _mm_setr_epi32((int)sc_lo, (int)sc_hi, (int)m_lo, (int)m_hi);
}

/* Sixteen 6-bit Q3_K scales, less 32 (cpu_quant_k.c), four at a time in
 * 32-bit words: the low 4 bits from the nibbles of bytes 0..7, the top 2
 * from bytes 8..11. */
CPU_INLINE __m128i q3_k_scales(const uint8_t *s)
{
	const uint32_t low4 = 0x0f0f0f0f, low2 = 0x03030303;
	uint32_t w0, w1, w2;

	memcpy(&w0, s, 4);
	memcpy(&w1, s + 4, 4);
	memcpy(&w2, s + 8, 4);
	__m128i v = _mm_setr_epi32((int)((w0 & low4) | (w2 & low2) << 4),
				   (int)((w1 & low4) | ((w2 >> 2) & low2) << 4),
				   (int)(((w0 >> 4) & low4) | ((w2 >> 4) & low2) << 4),
				   (int)(((w1 >> 4) & low4) | ((w2 >> 6) & low2) << 4));
	return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

CPU_INLINE void view_block(enum k_type type, const uint8_t *blk, k_block_view *v)
{
	v->blk = blk;
	v->mins = _mm256_setzero_si256();
	v->dmin = 0.0f;
	switch (type) {
	case K_Q2: {
		const cpu_block_q2_k *b = (const void *)blk;
		__m128i s = _mm_loadu_si128((const __m128i *)b->scales);
		v->scales16 = widen_u8(_mm_and_si128(s, _mm_set1_epi8(15)));
		v->mins = widen_u8(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(15)));
		v->d = cpu_fp16_to_f32(b->d);
		v->dmin = cpu_fp16_to_f32(b->dmin);
		break;
	}
	case K_Q3: {
		const cpu_block_q3_k *b = (const void *)blk;
		v->scales16 = widen_s8(q3_k_scales(b->scales));
		v->d = cpu_fp16_to_f32(b->d);
		break;
	}
	case K_Q4:
	case K_Q5: {
		/* The two types share the head: d, dmin, scales. */
		const cpu_block_q4_k *b = (const void *)blk;
		__m128i sc_m = q4_k_scales_mins(b->scales);
		v->scales8 = widen_u8_low(sc_m);
		v->mins = widen_u8(_mm_unpackhi_epi8(sc_m, sc_m));
		v->d = cpu_fp16_to_f32(b->d);
		v->dmin = cpu_fp16_to_f32(b->dmin);
		break;
	}
	case K_Q6:
	default: {
		const cpu_block_q6_k *b = (const void *)blk;
		v->scales16 = widen_s8(_mm_loadu_si128((const __m128i *)b->scales));
		v->d = cpu_fp16_to_f32(b->d);
		break;
	}
	}
}

CPU_INLINE size_t k_block_bytes(enum k_type type)
{
	static const size_t bytes[] = {
		[K_Q2] = sizeof(cpu_block_q2_k), [K_Q3] = sizeof(cpu_block_q3_k),
		[K_Q4] = sizeof(cpu_block_q4_k), [K_Q5] = sizeof(cpu_block_q5_k),
		[K_Q6] = sizeof(cpu_block_q6_k),
	};
	return bytes[type];
}

#if defined(__AVX512BW__)
/* Chunks 2 * c2 and 2 * c2 + 1 side by side, as chunk_q gives them. */

/* a over the low 256 bits, b over the high, as bytes or 16-bit values. */
CPU_INLINE __m512i halves_epi8(int a, int b)
{
	return _mm512_inserti64x4(_mm512_set1_epi8((char)a), _mm256_set1_epi8((char)b), 1);
}

CPU_INLINE __m512i halves_epi16(int a, int b)
{
	return _mm512_inserti64x4(_mm512_set1_epi16((short)a), _mm256_set1_epi16((short)b), 1);
}

CPU_INLINE __m512i both_halves(const uint8_t *p)
{
	return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

/* Bits 2j..2j+1 (low half) and 2j+2..2j+3 (high half) of the 32 bytes at
 * p, j = 2 * (c2 % 2): Q2_K's and Q3_K's low bits. */
CPU_INLINE __m512i two_bits_pair(const uint8_t *p, int c2)
{
	int j = 2 * (c2 % 2);
	__m512i v = _mm512_srlv_epi16(both_halves(p), halves_epi16(2 * j, 2 * j + 2));
	return _mm512_and_si512(v, _mm512_set1_epi8(3));
}

/* Set where bit 2 * c2 (low half) or 2 * c2 + 1 (high half) of the 32
 * bytes at p is. */
CPU_INLINE __mmask64 bit_pair(const uint8_t *p, int c2)
{
	return _mm512_test_epi8_mask(both_halves(p), halves_epi8(1 << (2 * c2), 1 << (2 * c2 + 1)));
}

CPU_INLINE __m512i chunk_pair_q(enum k_type type, const uint8_t *blk, int c2)
{
	const __m512i k15 = _mm512_set1_epi8(15);

	switch (type) {
	case K_Q2: {
		const cpu_block_q2_k *b = (const void *)blk;
		return two_bits_pair(b->qs + 32 * (c2 / 2), c2);
	}
	case K_Q3: {
		const cpu_block_q3_k *b = (const void *)blk;
		__m512i q = two_bits_pair(b->qs + 32 * (c2 / 2), c2);
		return _mm512_mask_sub_epi8(q, _knot_mask64(bit_pair(b->hmask, c2)), q, _mm512_set1_epi8(4));
	}
	case K_Q4:
	case K_Q5: {
		const uint8_t *qs = type == K_Q4 ? ((const cpu_block_q4_k *)(const void *)blk)->qs
						 : ((const cpu_block_q5_k *)(const void *)blk)->qs;
		__m512i v = _mm512_srlv_epi16(both_halves(qs + 32 * c2), halves_epi16(0, 4));
		__m512i q = _mm512_and_si512(v, k15);
		if (type == K_Q5)
			q = _mm512_mask_add_epi8(q, bit_pair(((const cpu_block_q5_k *)(const void *)blk)->qh, c2), q,
						 _mm512_set1_epi8(16));
		return q;
	}
	case K_Q6:
	default: {
		const cpu_block_q6_k *b = (const void *)blk;
		int half = c2 / 2, k2 = c2 % 2;
		__m512i l = _mm512_loadu_si512((const void *)(b->ql + 64 * half));
		__m512i lo = _mm512_and_si512(k2 ? _mm512_srli_epi16(l, 4) : l, k15);
		__m512i h = _mm512_srlv_epi16(both_halves(b->qh + 32 * half), halves_epi16(4 * k2, 4 * k2 + 2));
		__m512i hi = _mm512_and_si512(h, _mm512_set1_epi8(3));
		__m512i q = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
		return _mm512_sub_epi8(q, _mm512_set1_epi8(32));
	}
	}
}

/* The multipliers of chunks 2 * c2 and 2 * c2 + 1, as chunk_scale's. */
CPU_INLINE __m512i chunk_pair_scale(enum k_type type, const k_block_view *v, int c2)
{
	if (type == K_Q4 || type == K_Q5) {
		__m512i idx = halves_epi16(2 * c2, 2 * c2 + 1);
		return _mm512_permutexvar_epi16(idx, _mm512_castsi128_si512(v->scales8));
	}
	__m512i idx = _mm512_inserti64x4(
		_mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_set1_epi16((short)(4 * c2)),
							       _mm_set1_epi16((short)(4 * c2 + 1)), 1)),
		_mm256_inserti128_si256(_mm256_set1_epi16((short)(4 * c2 + 2)), _mm_set1_epi16((short)(4 * c2 + 3)), 1),
		1);
	return _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(v->scales16));
}
#endif

/* The sum of the 8 lanes of integers. */
CPU_INLINE int32_t hsum_i32(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
	return _mm_cvtsi128_si32(s);
}

/* Lanes 2p and 2p + 1 added, p = 0..3: the min terms of sub-block pairs. */
CPU_INLINE __m128 pair_lanes(__m256i v)
{
	__m256i h = _mm256_hadd_epi32(v, v);
	return _mm_cvtepi32_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(h, _MM_SHUFFLE(3, 1, 2, 0))));
}

/* lanes[t]: the 8 integer lanes of the super-block with token t's block b:
 * each chunk's maddubs pairs times its scales, summed. */
CPU_INLINE void block_lanes(enum k_type type, const k_block_view *v, const cpu_block_q8_k *const *x,
			    int64_t b, const int nt, __m256i *lanes)
{
#if defined(__AVX512BW__)
	/* Two chunks per 512-bit register; the halves add up at the end. */
	__m512i sum[CPU_GEMM_TOKENS];

	for (int t = 0; t < nt; t++)
		sum[t] = _mm512_setzero_si512();
	for (int c2 = 0; c2 < 4; c2++) {
		__m512i q = chunk_pair_q(type, v->blk, c2);
		__m512i scale = chunk_pair_scale(type, v, c2);
		__m512i qa = k_signed(type) ? _mm512_abs_epi8(q) : q;
		__mmask64 negative = _mm512_movepi8_mask(q);
		for (int t = 0; t < nt; t++) {
			__m512i xq = _mm512_loadu_si512((const void *)(x[t][b].qs + 64 * c2));
			if (k_signed(type))
				xq = _mm512_mask_sub_epi8(xq, negative, _mm512_setzero_si512(), xq);
			__m512i pairs = _mm512_maddubs_epi16(qa, xq);
			sum[t] = _mm512_add_epi32(sum[t], _mm512_madd_epi16(pairs, scale));
		}
	}
	for (int t = 0; t < nt; t++)
		lanes[t] = _mm256_add_epi32(_mm512_castsi512_si256(sum[t]), _mm512_extracti64x4_epi64(sum[t], 1));
#else
	for (int t = 0; t < nt; t++)
		lanes[t] = _mm256_setzero_si256();
	for (int c = 0; c < 8; c++) {
		__m256i q = chunk_q(type, v->blk, c);
		__m256i scale = chunk_scale(type, v, c);
		__m256i qa = k_signed(type) ? _mm256_abs_epi8(q) : q;
		for (int t = 0; t < nt; t++) {
			__m256i xq = _mm256_loadu_si256((const __m256i *)(x[t][b].qs + 32 * c));
			if (k_signed(type))
				xq = _mm256_sign_epi8(xq, q);
			__m256i pairs = _mm256_maddubs_epi16(qa, xq);
			lanes[t] = _mm256_add_epi32(lanes[t], _mm256_madd_epi16(pairs, scale));
		}
	}
#endif
}

CPU_INLINE void tile_k(const cpu_gemm_args *a, enum k_type type, const int nt)
{
	const size_t bb = k_block_bytes(type);
	const uint8_t *w[CPU_GEMM_ROWS];
	const cpu_block_q8_k *x[CPU_GEMM_TOKENS];
	__m256 acc[CPU_GEMM_ROWS][CPU_GEMM_TOKENS];
	__m128 acc_m[CPU_GEMM_ROWS][CPU_GEMM_TOKENS];
	float running[CPU_GEMM_ROWS][CPU_GEMM_TOKENS];

	for (int r = 0; r < CPU_GEMM_ROWS; r++) {
		w[r] = (const uint8_t *)cpu_tile_weight_row(a, r);
		for (int t = 0; t < nt; t++) {
			acc[r][t] = _mm256_setzero_ps();
			acc_m[r][t] = _mm_setzero_ps();
			running[r][t] = 0.0f;
		}
	}
	for (int t = 0; t < nt; t++)
		x[t] = (const cpu_block_q8_k *)cpu_tile_act_row(a, t);
	for (int64_t b = 0; b < a->n / CPU_QK_K; b++) {
		for (int r = 0; r < a->nr; r++) {
			k_block_view v;
			__m256i lanes[CPU_GEMM_TOKENS];
			view_block(type, w[r] + (size_t)b * bb, &v);
			cpu_tile_prefetch(a, v.blk, bb);
			block_lanes(type, &v, x, b, nt, lanes);
			for (int t = 0; t < nt; t++) {
				const cpu_block_q8_k *xb = &x[t][b];
				if (type == K_Q2 || type == K_Q4 || type == K_Q5) {
					__m256i bsums = _mm256_loadu_si256((const __m256i *)xb->bsums);
					__m256i mins = _mm256_madd_epi16(bsums, v.mins);
					float dmin = -xb->d * v.dmin;
					if (type == K_Q2)
						acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(dmin),
									    _mm256_cvtepi32_ps(mins), acc[r][t]);
					else if (type == K_Q4)
						acc_m[r][t] = _mm_fmadd_ps(_mm_set1_ps(dmin), pair_lanes(mins),
									   acc_m[r][t]);
					else
						running[r][t] = cpu_mul_add(dmin, (float)hsum_i32(mins),
									    running[r][t]);
				}
				acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(xb->d * v.d),
							    _mm256_cvtepi32_ps(lanes[t]), acc[r][t]);
			}
		}
	}
	for (int t = 0; t < nt; t++) {
		for (int r = 0; r < a->nr; r++) {
			float m[4];
			_mm_storeu_ps(m, acc_m[r][t]);
			cpu_tile_out_row(a, t)[r] = cpu_hsum_x8(acc[r][t]) + cpu_reduce_4(m) + running[r][t];
		}
	}
}

#define TILE_Q2_K(nt) tile_k(a, K_Q2, nt)
#define TILE_Q3_K(nt) tile_k(a, K_Q3, nt)
#define TILE_Q4_K(nt) tile_k(a, K_Q4, nt)
#define TILE_Q5_K(nt) tile_k(a, K_Q5, nt)
#define TILE_Q6_K(nt) tile_k(a, K_Q6, nt)
CPU_GEMM_TILED(q2_k, TILE_Q2_K)
CPU_GEMM_TILED(q3_k, TILE_Q3_K)
CPU_GEMM_TILED(q4_k, TILE_Q4_K)
CPU_GEMM_TILED(q5_k, TILE_Q5_K)
CPU_GEMM_TILED(q6_k, TILE_Q6_K)

#else

CPU_GEMM_BY_ROWS(q2_k)
CPU_GEMM_BY_ROWS(q3_k)
CPU_GEMM_BY_ROWS(q4_k)
CPU_GEMM_BY_ROWS(q5_k)
CPU_GEMM_BY_ROWS(q6_k)

#endif
