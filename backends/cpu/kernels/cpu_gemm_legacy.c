/*
 * cpu_gemm_legacy.c - tile kernels for the 32-element types Q4_0, Q4_1,
 * Q5_0, Q5_1 and Q8_0 with Q8_0 or Q8_1 activations (cpu_gemm_tile.h).
 *
 * A block's integer products are summed exactly, per 4 elements into 8
 * lanes, and scaled into f32 lanes by FMA; the min terms m * s of Q4_1 and
 * Q5_1 are exact products summed on their own. That is the order of the
 * row kernels in cpu_quant_legacy.c (and of llama.cpp's x86 kernels), so a
 * variant gives the same results through either. Q4_0 keeps llama.cpp's
 * order for it: one f32 sum per row, each block's integer total added in
 * turn.
 *
 * dpbusd and maddubs multiply unsigned by signed bytes. The weights meet
 * them unsigned: Q4_0's q - 8 (Q5_0's q - 16, Q8_0's q, made unsigned by
 * adding 128) is q times x, less an offset times sum(x), and that
 * correction, per token and block, starts the integer accumulation of every
 * row of the tile.
 */
#include "cpu_gemm_tile.h"

#include "cpu_half.h"

#include <string.h>

#if defined(__AVX2__)

enum legacy_type { L_Q4_0, L_Q4_1, L_Q5_0, L_Q5_1, L_Q8_0 };

CPU_INLINE size_t legacy_block_bytes(enum legacy_type type)
{
	static const size_t bytes[] = {
		[L_Q4_0] = sizeof(cpu_block_q4_0), [L_Q4_1] = sizeof(cpu_block_q4_1),
		[L_Q5_0] = sizeof(cpu_block_q5_0), [L_Q5_1] = sizeof(cpu_block_q5_1),
		[L_Q8_0] = sizeof(cpu_block_q8_0),
	};
	return bytes[type];
}

/* What the unsigned weight bytes exceed the weights by. */
CPU_INLINE int legacy_offset(enum legacy_type type)
{
	return type == L_Q4_0 ? 8 : type == L_Q5_0 ? 16 : type == L_Q8_0 ? 128 : 0;
}

CPU_INLINE bool legacy_has_min(enum legacy_type type)
{
	return type == L_Q4_1 || type == L_Q5_1;
}

/* 32 bits as 32 bytes, 16 where a bit is set: bit 4 of Q5 weights. */
CPU_INLINE __m256i fifth_bits(const uint8_t *qh)
{
	uint32_t h;

	memcpy(&h, qh, sizeof(h));
#if defined(__AVX512BW__) && defined(__AVX512VL__)
	return _mm256_maskz_mov_epi8((__mmask32)h, _mm256_set1_epi8(16));
#else
	const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
						2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
	__m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), spread);
	__m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
	return _mm256_and_si256(set, _mm256_set1_epi8(16));
#endif
}

/* 16 bytes of nibbles as 32 bytes: low nibbles first, as the blocks order
 * their elements. */
CPU_INLINE __m256i nibble_block(const uint8_t *qs)
{
	__m128i packed = _mm_loadu_si128((const __m128i *)qs);
	return cpu_low_nibbles(_mm256_inserti128_si256(_mm256_castsi128_si256(packed),
						       _mm_srli_epi16(packed, 4), 1));
}

/* Block b of a Q4_1, Q5_0, Q5_1 or Q8_0 weight row: its bytes q (weight +
 * offset), scale and min, the last two as fp16. (Q4_0's tiles unpack their
 * blocks themselves.) */
CPU_INLINE __m256i legacy_block(enum legacy_type type, const char *row, int64_t b, uint16_t *d,
				uint16_t *m)
{
	const char *blk = row + (size_t)b * legacy_block_bytes(type);

	*m = 0;
	switch (type) {
	case L_Q4_1: {
		const cpu_block_q4_1 *q = (const void *)blk;
		*d = q->d;
		*m = q->m;
		return nibble_block(q->qs);
	}
	case L_Q5_0: {
		const cpu_block_q5_0 *q = (const void *)blk;
		*d = q->d;
		return _mm256_or_si256(nibble_block(q->qs), fifth_bits(q->qh));
	}
	case L_Q5_1: {
		const cpu_block_q5_1 *q = (const void *)blk;
		*d = q->d;
		*m = q->m;
		return _mm256_or_si256(nibble_block(q->qs), fifth_bits(q->qh));
	}
	case L_Q8_0:
	default: {
		const cpu_block_q8_0 *q = (const void *)blk;
		*d = q->d;
		__m256i v = _mm256_loadu_si256((const __m256i *)q->qs);
		return _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80));
	}
	}
}

/* Block b of an activation row: Q8_1 (with s = d * sum(q)) for the types
 * with a min, else Q8_0. */
CPU_INLINE const int8_t *legacy_act(enum legacy_type type, const char *row, int64_t b, float *d,
				    float *s)
{
	if (!legacy_has_min(type)) {
		const cpu_block_q8_0 *blk = (const cpu_block_q8_0 *)row + b;
		*d = cpu_fp16_to_f32(blk->d);
		*s = 0.0f;
		return blk->qs;
	}
	const cpu_block_q8_1 *blk = (const cpu_block_q8_1 *)row + b;
	*d = cpu_fp16_to_f32(blk->d);
	*s = cpu_fp16_to_f32(blk->s);
	return blk->qs;
}

#endif

#if defined(__AVX512F__)

/* Q8_0: two weight rows share a 512-bit register, one per half, against
 * the same activation block in both halves, so one dpbusd serves two rows.
 * (A repacked Q8_0 weight, cpu_repack.c, takes this tile's place.) */

CPU_INLINE float hsum_halves(__m512 v, int half)
{
	return cpu_hsum_x8(half ? _mm512_extractf32x8_ps(v, 1) : _mm512_castps512_ps256(v));
}

/* Lane r of v (r < 4) over the half of row pair p that row r takes. */
CPU_INLINE __m512 spread_pair(__m128 v, int p)
{
	__m512i idx = _mm512_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p,
					2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1,
					2 * p + 1, 2 * p + 1, 2 * p + 1);
	return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

CPU_INLINE __m128 fp16_x4(const uint16_t *h)
{
	return _mm_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], 0, 0, 0, 0));
}

CPU_INLINE void tile_q8_0(const cpu_gemm_args *a, const int nt)
{
	_Static_assert(CPU_GEMM_ROWS == 4, "the scales of a tile's rows share a vector");
	const size_t bb = sizeof(cpu_block_q8_0);
	const char *w[CPU_GEMM_ROWS];
	__m512 acc[CPU_GEMM_ROWS / 2][CPU_GEMM_TOKENS];

	for (int r = 0; r < CPU_GEMM_ROWS; r++)
		w[r] = cpu_tile_weight_row(a, r);
	for (int p = 0; p < CPU_GEMM_ROWS / 2; p++)
		for (int t = 0; t < nt; t++)
			acc[p][t] = _mm512_setzero_ps();
	for (int64_t b = 0; b < a->n / CPU_QK; b++) {
		__m512i xq[CPU_GEMM_TOKENS], corr[CPU_GEMM_TOKENS];
		__m512 xd[CPU_GEMM_TOKENS];
		for (int t = 0; t < nt; t++) {
			float d, s;
			const int8_t *q = legacy_act(L_Q8_0, cpu_tile_act_row(a, t), b, &d, &s);
			xq[t] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)q));
			corr[t] = _mm512_sub_epi32(_mm512_setzero_si512(),
						   _mm512_dpbusd_epi32(_mm512_setzero_si512(),
								       _mm512_set1_epi8((char)0x80), xq[t]));
			xd[t] = _mm512_set1_ps(d);
		}
		__m256i q[CPU_GEMM_ROWS];
		uint16_t d[CPU_GEMM_ROWS], m[CPU_GEMM_ROWS];
		for (int r = 0; r < CPU_GEMM_ROWS; r++) {
			cpu_tile_prefetch(a, w[r] + (size_t)b * bb, bb);
			q[r] = legacy_block(L_Q8_0, w[r], b, &d[r], &m[r]);
		}
		__m128 wd = fp16_x4(d);
		for (int p = 0; p < CPU_GEMM_ROWS / 2; p++) {
			__m512i wq = _mm512_inserti64x4(_mm512_castsi256_si512(q[2 * p]), q[2 * p + 1], 1);
			__m512 wd_p = spread_pair(wd, p);
			for (int t = 0; t < nt; t++) {
				__m512i sum = _mm512_dpbusd_epi32(corr[t], wq, xq[t]);
				acc[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(wd_p, xd[t]),
							    acc[p][t]);
			}
		}
	}
	for (int t = 0; t < nt; t++)
		for (int r = 0; r < a->nr; r++)
			cpu_tile_out_row(a, t)[r] = hsum_halves(acc[r / 2][t], r % 2);
}

/*
 * The 4- and 5-bit types: a tile's four rows share a 512-bit register, 16
 * packed bytes each, so one mask makes their low nibbles (elements 0..15)
 * and one shift their high ones (16..31). dpbusd against each half of the
 * activation block, copied to all four rows, leaves each row 4 integer
 * lanes per half: the row kernels' lanes 0..3 and 4..7, kept apart in f32
 * as they are there. Q4_0 instead adds a row's lanes up per block.
 */

/* The 4 values of v, each over a quarter. */
CPU_INLINE __m512 spread_quarters(__m128 v)
{
	__m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
	return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

/* Every lane of each quarter: the sum of the quarter's 4 lanes. */
CPU_INLINE __m512i sum_quarters(__m512i v)
{
	v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_BADC));
	return _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_CDAB));
}

/* Bit 4 of elements 0..15 (high == 0) or 16..31 of each row's block: the
 * rows' 16-bit halves of qh side by side. */
CPU_INLINE __mmask64 fifth_bit_mask(const uint32_t *qh, int high)
{
	uint64_t m = 0;

	for (int r = 0; r < CPU_GEMM_ROWS; r++)
		m |= (uint64_t)((qh[r] >> (16 * high)) & 0xffff) << (16 * r);
	return (__mmask64)m;
}

/* -offset * (sum of each 4 bytes of x): the correction for q - offset. */
CPU_INLINE __m512i offset_correction(enum legacy_type type, __m512i x)
{
	__m512i off = _mm512_set1_epi8((char)legacy_offset(type));
	return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, x));
}

CPU_INLINE void tile_nibbles(const cpu_gemm_args *a, enum legacy_type type, const int nt)
{
	const size_t bb = legacy_block_bytes(type);
	const bool five = type == L_Q5_0 || type == L_Q5_1;
	/* Where a block's nibbles and its qh start. */
	const size_t qs_at = type == L_Q4_0 ? 2 : type == L_Q4_1 ? 4 : type == L_Q5_0 ? 6 : 8;
	const size_t qh_at = type == L_Q5_0 ? 2 : 4;
	const char *w[CPU_GEMM_ROWS];
	__m512 acc_lo[CPU_GEMM_TOKENS], acc_hi[CPU_GEMM_TOKENS], mins[CPU_GEMM_TOKENS];

	for (int r = 0; r < CPU_GEMM_ROWS; r++)
		w[r] = cpu_tile_weight_row(a, r);
	for (int t = 0; t < nt; t++) {
		acc_lo[t] = _mm512_setzero_ps();
		acc_hi[t] = _mm512_setzero_ps();
		mins[t] = _mm512_setzero_ps();
	}
	for (int64_t b = 0; b < a->n / CPU_QK; b++) {
		__m512i xlo[CPU_GEMM_TOKENS], xhi[CPU_GEMM_TOKENS];
		__m512i corr_lo[CPU_GEMM_TOKENS], corr_hi[CPU_GEMM_TOKENS];
		__m512 xd[CPU_GEMM_TOKENS], xs[CPU_GEMM_TOKENS];
		for (int t = 0; t < nt; t++) {
			float d, s;
			const int8_t *q = legacy_act(type, cpu_tile_act_row(a, t), b, &d, &s);
			xlo[t] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)q));
			xhi[t] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(q + 16)));
			corr_lo[t] = offset_correction(type, xlo[t]);
			corr_hi[t] = offset_correction(type, xhi[t]);
			if (type == L_Q4_0) /* one integer sum per row */
				corr_lo[t] = _mm512_add_epi32(corr_lo[t], corr_hi[t]);
			xd[t] = _mm512_set1_ps(d);
			xs[t] = _mm512_set1_ps(s);
		}
		const char *blk[CPU_GEMM_ROWS];
		uint16_t d[CPU_GEMM_ROWS], m[CPU_GEMM_ROWS] = {0};
		uint32_t qh[CPU_GEMM_ROWS];
		for (int r = 0; r < CPU_GEMM_ROWS; r++) {
			blk[r] = w[r] + (size_t)b * bb;
			cpu_tile_prefetch(a, blk[r], bb);
			memcpy(&d[r], blk[r], sizeof(uint16_t));
			if (legacy_has_min(type))
				memcpy(&m[r], blk[r] + 2, sizeof(uint16_t));
			if (five)
				memcpy(&qh[r], blk[r] + qh_at, sizeof(uint32_t));
		}
		__m512i packed = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(blk[0] + qs_at)));
		packed = _mm512_inserti32x4(packed, _mm_loadu_si128((const __m128i *)(blk[1] + qs_at)), 1);
		packed = _mm512_inserti32x4(packed, _mm_loadu_si128((const __m128i *)(blk[2] + qs_at)), 2);
		packed = _mm512_inserti32x4(packed, _mm_loadu_si128((const __m128i *)(blk[3] + qs_at)), 3);
		__m512i lo = _mm512_and_si512(packed, _mm512_set1_epi8(15));
		__m512i hi = _mm512_and_si512(_mm512_srli_epi16(packed, 4), _mm512_set1_epi8(15));
		if (five) {
			const __m512i k16 = _mm512_set1_epi8(16);
			lo = _mm512_or_si512(lo, _mm512_maskz_mov_epi8(fifth_bit_mask(qh, 0), k16));
			hi = _mm512_or_si512(hi, _mm512_maskz_mov_epi8(fifth_bit_mask(qh, 1), k16));
		}
		__m512 wd = spread_quarters(fp16_x4(d)), wm = spread_quarters(fp16_x4(m));
		for (int t = 0; t < nt; t++) {
			__m512 scale = _mm512_mul_ps(wd, xd[t]);
			__m512i sum_lo = _mm512_dpbusd_epi32(corr_lo[t], lo, xlo[t]);
			if (type == L_Q4_0) {
				__m512i sum = sum_quarters(_mm512_dpbusd_epi32(sum_lo, hi, xhi[t]));
				acc_lo[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, acc_lo[t]);
				continue;
			}
			__m512i sum_hi = _mm512_dpbusd_epi32(corr_hi[t], hi, xhi[t]);
			acc_lo[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum_lo), scale, acc_lo[t]);
			acc_hi[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum_hi), scale, acc_hi[t]);
			if (legacy_has_min(type))
				mins[t] = _mm512_add_ps(mins[t], _mm512_mul_ps(wm, xs[t]));
		}
	}
	for (int t = 0; t < nt; t++) {
		float lo[16], hi[16], mn[16];
		_mm512_storeu_ps(lo, acc_lo[t]);
		_mm512_storeu_ps(hi, acc_hi[t]);
		_mm512_storeu_ps(mn, mins[t]);
		for (int r = 0; r < a->nr; r++) {
			const float *l = lo + 4 * r, *h = hi + 4 * r;
			cpu_tile_out_row(a, t)[r] = type == L_Q4_0 ? l[0]
				: ((l[0] + h[0]) + (l[2] + h[2])) + ((l[1] + h[1]) + (l[3] + h[3])) + mn[4 * r];
		}
	}
}

#define TILE_Q8_0(nt) tile_q8_0(a, nt)
#define TILE_Q4_0(nt) tile_nibbles(a, L_Q4_0, nt)
#define TILE_Q4_1(nt) tile_nibbles(a, L_Q4_1, nt)
#define TILE_Q5_0(nt) tile_nibbles(a, L_Q5_0, nt)
#define TILE_Q5_1(nt) tile_nibbles(a, L_Q5_1, nt)

#elif defined(__AVX2__)

/* One row per register. The offset types need maddubs' pair sums of
 * unsigned q <= 31 times x, which stay far from its saturation. */
CPU_INLINE void tile_legacy(const cpu_gemm_args *a, enum legacy_type type, const int nt)
{
	const size_t bb = legacy_block_bytes(type);
	const char *w[CPU_GEMM_ROWS];
	__m256 acc[CPU_GEMM_ROWS][CPU_GEMM_TOKENS];
	float mins[CPU_GEMM_ROWS][CPU_GEMM_TOKENS];

	for (int r = 0; r < CPU_GEMM_ROWS; r++) {
		w[r] = cpu_tile_weight_row(a, r);
		for (int t = 0; t < nt; t++) {
			acc[r][t] = _mm256_setzero_ps();
			mins[r][t] = 0.0f;
		}
	}
	for (int64_t b = 0; b < a->n / CPU_QK; b++) {
		__m256i xq[CPU_GEMM_TOKENS], corr[CPU_GEMM_TOKENS];
		float xd[CPU_GEMM_TOKENS], xs[CPU_GEMM_TOKENS];
		for (int t = 0; t < nt; t++) {
			xq[t] = _mm256_loadu_si256(
				(const __m256i *)legacy_act(type, cpu_tile_act_row(a, t), b, &xd[t], &xs[t]));
			corr[t] = _mm256_sub_epi32(_mm256_setzero_si256(),
						   cpu_dot_u8_s8(_mm256_set1_epi8((char)legacy_offset(type)), xq[t]));
		}
		for (int r = 0; r < a->nr; r++) {
			uint16_t d, m;
			cpu_tile_prefetch(a, w[r] + (size_t)b * bb, bb);
			__m256i q = legacy_block(type, w[r], b, &d, &m);
			float wd = cpu_fp16_to_f32(d), wm = cpu_fp16_to_f32(m);
			for (int t = 0; t < nt; t++) {
				__m256i sum = cpu_dot_u8_s8(q, xq[t]);
				if (legacy_offset(type) != 0)
					sum = _mm256_add_epi32(sum, corr[t]);
				acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(wd * xd[t]),
							    acc[r][t]);
				if (legacy_has_min(type))
					mins[r][t] += wm * xs[t];
			}
		}
	}
	for (int t = 0; t < nt; t++)
		for (int r = 0; r < a->nr; r++)
			cpu_tile_out_row(a, t)[r] = cpu_hsum_x8(acc[r][t]) + mins[r][t];
}

/*
 * maddubs multiplies unsigned by signed bytes: |w| times x with w's sign
 * moved onto x gives the same products. |w| <= 128 and |x| <= 127, so the
 * pairwise 16-bit sums cannot saturate.
 */
CPU_INLINE void tile_q8_0(const cpu_gemm_args *a, const int nt)
{
	const __m256i ones = _mm256_set1_epi16(1);
	const cpu_block_q8_0 *w[CPU_GEMM_ROWS];
	const cpu_block_q8_0 *x[CPU_GEMM_TOKENS];
	__m256 acc[CPU_GEMM_ROWS][CPU_GEMM_TOKENS];

	for (int r = 0; r < CPU_GEMM_ROWS; r++) {
		w[r] = (const cpu_block_q8_0 *)cpu_tile_weight_row(a, r);
		for (int t = 0; t < nt; t++)
			acc[r][t] = _mm256_setzero_ps();
	}
	for (int t = 0; t < nt; t++)
		x[t] = (const cpu_block_q8_0 *)cpu_tile_act_row(a, t);
	for (int64_t b = 0; b < a->n / CPU_QK; b++) {
		__m256i xq[CPU_GEMM_TOKENS];
		__m256 xd[CPU_GEMM_TOKENS];
		for (int t = 0; t < nt; t++) {
			xq[t] = _mm256_loadu_si256((const __m256i *)x[t][b].qs);
			xd[t] = _mm256_set1_ps(cpu_fp16_to_f32(x[t][b].d));
		}
		for (int r = 0; r < CPU_GEMM_ROWS; r++) {
			cpu_tile_prefetch(a, &w[r][b], sizeof(w[r][b]));
			__m256i wq = _mm256_loadu_si256((const __m256i *)w[r][b].qs);
			__m256i wabs = _mm256_abs_epi8(wq);
			__m256 wd = _mm256_set1_ps(cpu_fp16_to_f32(w[r][b].d));
			for (int t = 0; t < nt; t++) {
				__m256i p16 = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xq[t], wq));
				__m256i p32 = _mm256_madd_epi16(p16, ones);
				acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p32), _mm256_mul_ps(wd, xd[t]),
							    acc[r][t]);
			}
		}
	}
	for (int t = 0; t < nt; t++)
		for (int r = 0; r < a->nr; r++)
			cpu_tile_out_row(a, t)[r] = cpu_hsum_x8(acc[r][t]);
}

/* Lane r: the sum of the 8 lanes of v[r]. */
CPU_INLINE __m128i fold_rows(const __m256i *v)
{
	__m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
	return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* Q4_0 in llama.cpp's order: one running sum per row, so the four rows of
 * a tile share a vector, lane r adding f32(isum_r) * f32(d_r * d_x) by
 * FMA, block by block. */
CPU_INLINE void tile_q4_0(const cpu_gemm_args *a, const int nt)
{
	_Static_assert(CPU_GEMM_ROWS == 4, "the Q4_0 tile keeps its rows in the 4 lanes of a vector");
	const cpu_block_q4_0 *w[CPU_GEMM_ROWS];
	const cpu_block_q8_0 *x[CPU_GEMM_TOKENS];
	__m128 acc[CPU_GEMM_TOKENS];

	for (int r = 0; r < CPU_GEMM_ROWS; r++)
		w[r] = (const cpu_block_q4_0 *)cpu_tile_weight_row(a, r);
	for (int t = 0; t < nt; t++) {
		x[t] = (const cpu_block_q8_0 *)cpu_tile_act_row(a, t);
		acc[t] = _mm_setzero_ps();
	}
	for (int64_t b = 0; b < a->n / CPU_QK; b++) {
		__m256i q[CPU_GEMM_ROWS];
		__m128 wd = _mm_cvtph_ps(_mm_setr_epi16((short)w[0][b].d, (short)w[1][b].d, (short)w[2][b].d,
							(short)w[3][b].d, 0, 0, 0, 0));
		for (int r = 0; r < CPU_GEMM_ROWS; r++) {
			cpu_tile_prefetch(a, &w[r][b], sizeof(w[r][b]));
			q[r] = nibble_block(w[r][b].qs);
		}
		for (int t = 0; t < nt; t++) {
			__m256i xq = _mm256_loadu_si256((const __m256i *)x[t][b].qs);
			__m256i offset = cpu_dot_u8_s8(_mm256_set1_epi8(8), xq);
			__m256i p[CPU_GEMM_ROWS];
			for (int r = 0; r < CPU_GEMM_ROWS; r++)
				p[r] = _mm256_sub_epi32(cpu_dot_u8_s8(q[r], xq), offset);
			__m128 isum = _mm_cvtepi32_ps(fold_rows(p));
			__m128 scale = _mm_mul_ps(wd, _mm_set1_ps(cpu_fp16_to_f32(x[t][b].d)));
			acc[t] = _mm_fmadd_ps(isum, scale, acc[t]);
		}
	}
	for (int t = 0; t < nt; t++) {
		float sums[CPU_GEMM_ROWS];
		_mm_storeu_ps(sums, acc[t]);
		for (int r = 0; r < a->nr; r++)
			cpu_tile_out_row(a, t)[r] = sums[r];
	}
}

#define TILE_Q8_0(nt) tile_q8_0(a, nt)
#define TILE_Q4_0(nt) tile_q4_0(a, nt)
#define TILE_Q4_1(nt) tile_legacy(a, L_Q4_1, nt)
#define TILE_Q5_0(nt) tile_legacy(a, L_Q5_0, nt)
#define TILE_Q5_1(nt) tile_legacy(a, L_Q5_1, nt)

#endif

#if defined(__AVX2__)

CPU_GEMM_TILED(q8_0, TILE_Q8_0)
CPU_GEMM_TILED(q4_0, TILE_Q4_0)
CPU_GEMM_TILED(q4_1, TILE_Q4_1)
CPU_GEMM_TILED(q5_0, TILE_Q5_0)
CPU_GEMM_TILED(q5_1, TILE_Q5_1)

#else

CPU_GEMM_BY_ROWS(q8_0)
CPU_GEMM_BY_ROWS(q4_0)
CPU_GEMM_BY_ROWS(q4_1)
CPU_GEMM_BY_ROWS(q5_0)
CPU_GEMM_BY_ROWS(q5_1)

#endif
