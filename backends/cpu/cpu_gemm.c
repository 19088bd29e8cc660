/*
 * cpu_gemm.c - matmul tile kernels (see cpu_gemm.h).
 *
 * A tile keeps CPU_GEMM_ROWS x nt accumulators in registers. nt is a
 * compile-time constant in each instance (the dispatchers switch on it), so
 * the loops over rows and tokens unroll and the accumulators stay in
 * registers. A tile with fewer than CPU_GEMM_ROWS weight rows repeats its
 * last row and drops the extra results, which only happens at the end of a
 * matrix. Every output element is computed by the same sequence of
 * operations wherever its tile falls, so results do not depend on how the
 * rows are split among threads.
 */
#include "cpu_gemm.h"

#include "cpu_convert.h"
#include "cpu_quant.h"
#include "cpu_simd.h"
#include "cpu_vec.h"

#define CPU_INLINE static inline __attribute__((always_inline))

/* Weight row r of the tile, the last real one standing in past nr. */
CPU_INLINE const char *weight_row(const cpu_gemm_args *a, int r)
{
	return a->w + (size_t)(r < a->nr ? r : a->nr - 1) * a->w_stride;
}

CPU_INLINE const char *act_row(const cpu_gemm_args *a, int t)
{
	return a->x + (size_t)t * a->x_stride;
}

CPU_INLINE float *out_row(const cpu_gemm_args *a, int t)
{
	return (float *)((char *)a->y + (size_t)t * a->y_stride);
}

enum weight_kind { W_F32, W_F16, W_BF16 };

#if defined(__AVX512F__)

CPU_INLINE __m512 load_weights(const char *row, int64_t i, __mmask16 m, enum weight_kind kind)
{
	if (kind == W_F16)
		return cpu_load_fp16_x16((const uint16_t *)row + i, m);
	if (kind == W_BF16)
		return cpu_load_bf16_x16((const uint16_t *)row + i, m);
	return _mm512_maskz_loadu_ps(m, (const float *)row + i);
}

CPU_INLINE void tile_float(const cpu_gemm_args *a, enum weight_kind kind, const int nt)
{
	const char *w[CPU_GEMM_ROWS];
	const float *x[CPU_GEMM_TOKENS];
	__m512 acc[CPU_GEMM_ROWS][CPU_GEMM_TOKENS];

	for (int r = 0; r < CPU_GEMM_ROWS; r++) {
		w[r] = weight_row(a, r);
		for (int t = 0; t < nt; t++)
			acc[r][t] = _mm512_setzero_ps();
	}
	for (int t = 0; t < nt; t++)
		x[t] = (const float *)act_row(a, t);
	for (int64_t i = 0; i < a->n; i += 16) {
		__mmask16 m = a->n - i >= 16 ? 0xffff : cpu_tail_mask(a->n - i);
		__m512 xv[CPU_GEMM_TOKENS];
		for (int t = 0; t < nt; t++)
			xv[t] = _mm512_maskz_loadu_ps(m, x[t] + i);
		for (int r = 0; r < CPU_GEMM_ROWS; r++) {
			__m512 wv = load_weights(w[r], i, m, kind);
			for (int t = 0; t < nt; t++)
				acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
		}
	}
	for (int t = 0; t < nt; t++)
		for (int r = 0; r < a->nr; r++)
			out_row(a, t)[r] = _mm512_reduce_add_ps(acc[r][t]);
}

/*
 * Q8_0 with VNNI. dpbusd multiplies unsigned by signed bytes, so the weight
 * bytes are made unsigned by adding 128 (xor 0x80) and each activation
 * block's 128 * sum(x) comes off again by starting the accumulation from its
 * negation; that correction is per token and shared by every weight row.
 * Two weight rows share a 512-bit register, one per half, against the same
 * activation block in both halves, so one dpbusd does two rows.
 */

/* Rows 2p and 2p+1 of block b, made unsigned. */
CPU_INLINE __m512i q8_0_row_pair(const cpu_block_q8_0 *const *w, int p, int64_t b)
{
	__m256i lo = _mm256_loadu_si256((const __m256i *)w[2 * p][b].qs);
	__m256i hi = _mm256_loadu_si256((const __m256i *)w[2 * p + 1][b].qs);
	__m512i pair = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
	return _mm512_xor_si512(pair, _mm512_set1_epi8((char)0x80));
}

/* The scales of rows 2p and 2p+1 of block b, each over its half. */
CPU_INLINE __m512 q8_0_scale_pair(const cpu_block_q8_0 *const *w, int p, int64_t b)
{
	__m128i h = _mm_insert_epi16(_mm_cvtsi32_si128(w[2 * p][b].d), w[2 * p + 1][b].d, 1);
	__m512 d = _mm512_castps128_ps512(_mm_cvtph_ps(h));
	__m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
	return _mm512_permutexvar_ps(halves, d);
}

CPU_INLINE float hsum_halves(__m512 v, int half)
{
	return cpu_hsum_x8(half ? _mm512_extractf32x8_ps(v, 1) : _mm512_castps512_ps256(v));
}

CPU_INLINE void tile_q8_0(const cpu_gemm_args *a, const int nt)
{
	const __m512i k80 = _mm512_set1_epi8((char)0x80);
	const cpu_block_q8_0 *w[CPU_GEMM_ROWS];
	const cpu_block_q8_0 *x[CPU_GEMM_TOKENS];
	__m512 acc[CPU_GEMM_ROWS / 2][CPU_GEMM_TOKENS];

	for (int r = 0; r < CPU_GEMM_ROWS; r++)
		w[r] = (const cpu_block_q8_0 *)weight_row(a, r);
	for (int p = 0; p < CPU_GEMM_ROWS / 2; p++)
		for (int t = 0; t < nt; t++)
			acc[p][t] = _mm512_setzero_ps();
	for (int t = 0; t < nt; t++)
		x[t] = (const cpu_block_q8_0 *)act_row(a, t);
	for (int64_t b = 0; b < a->n / CPU_QK; b++) {
		__m512i xq[CPU_GEMM_TOKENS], corr[CPU_GEMM_TOKENS];
		__m512 xd[CPU_GEMM_TOKENS];
		for (int t = 0; t < nt; t++) {
			xq[t] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)x[t][b].qs));
			corr[t] = _mm512_sub_epi32(_mm512_setzero_si512(),
						   _mm512_dpbusd_epi32(_mm512_setzero_si512(), k80, xq[t]));
			xd[t] = _mm512_set1_ps(cpu_fp16_to_f32(x[t][b].d));
		}
		for (int p = 0; p < CPU_GEMM_ROWS / 2; p++) {
			__m512i wq = q8_0_row_pair(w, p, b);
			__m512 wd = q8_0_scale_pair(w, p, b);
			for (int t = 0; t < nt; t++) {
				__m512i s = _mm512_dpbusd_epi32(corr[t], wq, xq[t]);
				acc[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wd, xd[t]),
							    acc[p][t]);
			}
		}
	}
	for (int t = 0; t < nt; t++)
		for (int r = 0; r < a->nr; r++)
			out_row(a, t)[r] = hsum_halves(acc[r / 2][t], r % 2);
}

#elif defined(__AVX2__)

CPU_INLINE __m256 load_weights(const char *row, int64_t i, enum weight_kind kind)
{
	if (kind == W_F16)
		return cpu_load_fp16_x8((const uint16_t *)row + i);
	if (kind == W_BF16)
		return cpu_load_bf16_x8((const uint16_t *)row + i);
	return _mm256_loadu_ps((const float *)row + i);
}

CPU_INLINE float weight_at(const char *row, int64_t i, enum weight_kind kind)
{
	if (kind == W_F16)
		return cpu_fp16_to_f32(((const uint16_t *)row)[i]);
	if (kind == W_BF16)
		return cpu_bf16_to_f32(((const uint16_t *)row)[i]);
	return ((const float *)row)[i];
}

CPU_INLINE void tile_float(const cpu_gemm_args *a, enum weight_kind kind, const int nt)
{
	const char *w[CPU_GEMM_ROWS];
	const float *x[CPU_GEMM_TOKENS];
	__m256 acc[CPU_GEMM_ROWS][CPU_GEMM_TOKENS];
	int64_t i = 0;

	for (int r = 0; r < CPU_GEMM_ROWS; r++) {
		w[r] = weight_row(a, r);
		for (int t = 0; t < nt; t++)
			acc[r][t] = _mm256_setzero_ps();
	}
	for (int t = 0; t < nt; t++)
		x[t] = (const float *)act_row(a, t);
	for (; i + 8 <= a->n; i += 8) {
		__m256 xv[CPU_GEMM_TOKENS];
		for (int t = 0; t < nt; t++)
			xv[t] = _mm256_loadu_ps(x[t] + i);
		for (int r = 0; r < CPU_GEMM_ROWS; r++) {
			__m256 wv = load_weights(w[r], i, kind);
			for (int t = 0; t < nt; t++)
				acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
		}
	}
	for (int t = 0; t < nt; t++) {
		for (int r = 0; r < a->nr; r++) {
			float sum = cpu_hsum_x8(acc[r][t]);
			for (int64_t j = i; j < a->n; j++)
				sum += weight_at(w[r], j, kind) * x[t][j];
			out_row(a, t)[r] = sum;
		}
	}
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
		w[r] = (const cpu_block_q8_0 *)weight_row(a, r);
		for (int t = 0; t < nt; t++)
			acc[r][t] = _mm256_setzero_ps();
	}
	for (int t = 0; t < nt; t++)
		x[t] = (const cpu_block_q8_0 *)act_row(a, t);
	for (int64_t b = 0; b < a->n / CPU_QK; b++) {
		__m256i xq[CPU_GEMM_TOKENS];
		__m256 xd[CPU_GEMM_TOKENS];
		for (int t = 0; t < nt; t++) {
			xq[t] = _mm256_loadu_si256((const __m256i *)x[t][b].qs);
			xd[t] = _mm256_set1_ps(cpu_fp16_to_f32(x[t][b].d));
		}
		for (int r = 0; r < CPU_GEMM_ROWS; r++) {
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
			out_row(a, t)[r] = cpu_hsum_x8(acc[r][t]);
}

#else

/* The reference: one plain dot product per output element. */

static float dot_bf16(const uint16_t *w, const float *x, int64_t n)
{
	float sum = 0.0f;
	for (int64_t i = 0; i < n; i++)
		sum += cpu_bf16_to_f32(w[i]) * x[i];
	return sum;
}

static float dot_one(const cpu_gemm_args *a, const char *w, const char *x, enum weight_kind kind)
{
	if (kind == W_F16)
		return cpu_dot_fp16((const uint16_t *)w, (const float *)x, a->n);
	if (kind == W_BF16)
		return dot_bf16((const uint16_t *)w, (const float *)x, a->n);
	return cpu_dot_f32((const float *)w, (const float *)x, a->n);
}

static void tile_float(const cpu_gemm_args *a, enum weight_kind kind, int nt)
{
	for (int t = 0; t < nt; t++)
		for (int r = 0; r < a->nr; r++)
			out_row(a, t)[r] = dot_one(a, weight_row(a, r), act_row(a, t), kind);
}

static void tile_q8_0(const cpu_gemm_args *a, int nt)
{
	for (int t = 0; t < nt; t++)
		for (int r = 0; r < a->nr; r++)
			out_row(a, t)[r] = cpu_dot_q8_0(weight_row(a, r), act_row(a, t), a->n);
}

#endif

#if defined(__AVX2__)

/*
 * Q4_0 and Q4_K, for both x86 variants (256-bit; the AVX-512 one with VNNI
 * where it helps). Each reproduces the summation order of the row kernels
 * in cpu_quant_legacy.c and cpu_quant_k.c (cpu_quant.h), so a variant gives
 * the same results through either. The 4-bit weights meet the activations
 * as unsigned bytes: maddubs and dpbusd take unsigned times signed, and
 * 15 * 127 * 2 cannot saturate maddubs' 16-bit pairs.
 */

/* u . s for each group of 4 bytes, in the group's 32-bit lane. */
CPU_INLINE __m256i dot_u8_s8(__m256i u, __m256i s)
{
#if defined(__AVX512VNNI__)
	return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
	return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* The low (high) 4 bits of each of 32 bytes. */
CPU_INLINE __m256i low_nibbles(__m256i v)
{
	return _mm256_and_si256(v, _mm256_set1_epi8(15));
}

CPU_INLINE __m256i high_nibbles(__m256i v)
{
	return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(15));
}

/* Q4_0 block b of a row as 32 unsigned bytes q (the weight is q - 8). */
CPU_INLINE __m256i q4_0_block(const cpu_block_q4_0 *row, int64_t b)
{
	__m128i packed = _mm_loadu_si128((const __m128i *)row[b].qs);
	return low_nibbles(_mm256_inserti128_si256(_mm256_castsi128_si256(packed),
						   _mm_srli_epi16(packed, 4), 1));
}

/* Lane r: the sum of the 8 lanes of v[r]. */
CPU_INLINE __m128i fold_rows(const __m256i *v)
{
	__m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
	return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* Q4_0 keeps one running sum per row, so the four rows of a tile share a
 * vector: lane r adds f32(isum_r) * f32(d_r * d_x) by FMA, block by block.
 * q - 8 is made of q and 8 * sum(x), the latter shared by the rows. */
CPU_INLINE void tile_q4_0(const cpu_gemm_args *a, const int nt)
{
	_Static_assert(CPU_GEMM_ROWS == 4, "the Q4_0 tile keeps its rows in the 4 lanes of a vector");
	const cpu_block_q4_0 *w[CPU_GEMM_ROWS];
	const cpu_block_q8_0 *x[CPU_GEMM_TOKENS];
	__m128 acc[CPU_GEMM_TOKENS];

	for (int r = 0; r < CPU_GEMM_ROWS; r++)
		w[r] = (const cpu_block_q4_0 *)weight_row(a, r);
	for (int t = 0; t < nt; t++) {
		x[t] = (const cpu_block_q8_0 *)act_row(a, t);
		acc[t] = _mm_setzero_ps();
	}
	for (int64_t b = 0; b < a->n / CPU_QK; b++) {
		__m256i q[CPU_GEMM_ROWS];
		__m128 wd = _mm_cvtph_ps(_mm_setr_epi16((short)w[0][b].d, (short)w[1][b].d, (short)w[2][b].d,
							(short)w[3][b].d, 0, 0, 0, 0));
		for (int r = 0; r < CPU_GEMM_ROWS; r++)
			q[r] = q4_0_block(w[r], b);
		for (int t = 0; t < nt; t++) {
			__m256i xq = _mm256_loadu_si256((const __m256i *)x[t][b].qs);
			__m256i offset = dot_u8_s8(_mm256_set1_epi8(8), xq);
			__m256i p[CPU_GEMM_ROWS];
			for (int r = 0; r < CPU_GEMM_ROWS; r++)
				p[r] = _mm256_sub_epi32(dot_u8_s8(q[r], xq), offset);
			__m128 isum = _mm_cvtepi32_ps(fold_rows(p));
			__m128 scale = _mm_mul_ps(wd, _mm_set1_ps(cpu_fp16_to_f32(x[t][b].d)));
			acc[t] = _mm_fmadd_ps(isum, scale, acc[t]);
		}
	}
	for (int t = 0; t < nt; t++) {
		float sums[CPU_GEMM_ROWS];
		_mm_storeu_ps(sums, acc[t]);
		for (int r = 0; r < a->nr; r++)
			out_row(a, t)[r] = sums[r];
	}
}

/* A Q4_K super-block unpacked: sub-block j's 32 weights as bytes, its
 * scale and min. */
typedef struct q4_k_unpacked {
	__m256i q[8];
	uint8_t sc[8], m[8];
	float d, dmin;
} q4_k_unpacked;

CPU_INLINE void q4_k_unpack(const cpu_block_q4_k *blk, q4_k_unpacked *u)
{
	for (int c = 0; c < 4; c++) {
		__m256i bytes = _mm256_loadu_si256((const __m256i *)(blk->qs + 32 * c));
		u->q[2 * c] = low_nibbles(bytes);
		u->q[2 * c + 1] = high_nibbles(bytes);
	}
	for (int j = 0; j < 8; j++)
		cpu_k_scale_min(blk->scales, j, &u->sc[j], &u->m[j]);
	u->d = cpu_fp16_to_f32(blk->d);
	u->dmin = cpu_fp16_to_f32(blk->dmin);
}

/* The 8 integer lanes of a super-block: lane l sums sc_j * q * x over the
 * elements 4l..4l+3 of every sub-block j (maddubs pairs, madd by sc_j). */
CPU_INLINE __m256i q4_k_lanes(const q4_k_unpacked *u, const cpu_block_q8_k *xb)
{
	__m256i sum = _mm256_setzero_si256();

	for (int j = 0; j < 8; j++) {
		__m256i xq = _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * j));
		__m256i pairs = _mm256_maddubs_epi16(u->q[j], xq);
		sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(u->sc[j])));
	}
	return sum;
}

/* The min terms of a super-block into their 4 lanes (pairs of sub-blocks). */
CPU_INLINE void q4_k_mins(const q4_k_unpacked *u, const cpu_block_q8_k *xb, float *acc_m)
{
	float dmin = -xb->d * u->dmin;

	for (int p = 0; p < 4; p++) {
		int32_t pair = 0;
		for (int j = 2 * p; j < 2 * p + 2; j++)
			pair += u->m[j] * (xb->bsums[2 * j] + xb->bsums[2 * j + 1]);
		acc_m[p] = cpu_mul_add(dmin, (float)pair, acc_m[p]);
	}
}

CPU_INLINE void tile_q4_k(const cpu_gemm_args *a, const int nt)
{
	const cpu_block_q4_k *w[CPU_GEMM_ROWS];
	const cpu_block_q8_k *x[CPU_GEMM_TOKENS];
	__m256 acc[CPU_GEMM_ROWS][CPU_GEMM_TOKENS];
	float acc_m[CPU_GEMM_ROWS][CPU_GEMM_TOKENS][4] = {0};

	for (int r = 0; r < CPU_GEMM_ROWS; r++) {
		w[r] = (const cpu_block_q4_k *)weight_row(a, r);
		for (int t = 0; t < nt; t++)
			acc[r][t] = _mm256_setzero_ps();
	}
	for (int t = 0; t < nt; t++)
		x[t] = (const cpu_block_q8_k *)act_row(a, t);
	for (int64_t b = 0; b < a->n / CPU_QK_K; b++) {
		for (int r = 0; r < a->nr; r++) {
			q4_k_unpacked u;
			q4_k_unpack(&w[r][b], &u);
			for (int t = 0; t < nt; t++) {
				__m256 lanes = _mm256_cvtepi32_ps(q4_k_lanes(&u, &x[t][b]));
				acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(x[t][b].d * u.d), lanes, acc[r][t]);
				q4_k_mins(&u, &x[t][b], acc_m[r][t]);
			}
		}
	}
	for (int t = 0; t < nt; t++)
		for (int r = 0; r < a->nr; r++)
			out_row(a, t)[r] = cpu_hsum_x8(acc[r][t]) + cpu_reduce_4(acc_m[r][t]);
}

#endif

/* One instance per tile height; see the file comment. */
#if CPU_GEMM_TOKENS == 4
#define CPU_GEMM_DISPATCH(call)         \
	switch (a->nt) {                \
	case 1: call(1); break;         \
	case 2: call(2); break;         \
	case 3: call(3); break;         \
	default: call(4); break;        \
	}
#elif CPU_GEMM_TOKENS == 2
#define CPU_GEMM_DISPATCH(call)         \
	switch (a->nt) {                \
	case 1: call(1); break;         \
	default: call(2); break;        \
	}
#endif

static void gemm_f32(const cpu_gemm_args *a)
{
#define CALL(nt) tile_float(a, W_F32, nt)
	CPU_GEMM_DISPATCH(CALL)
#undef CALL
}

static void gemm_f16(const cpu_gemm_args *a)
{
#define CALL(nt) tile_float(a, W_F16, nt)
	CPU_GEMM_DISPATCH(CALL)
#undef CALL
}

static void gemm_bf16(const cpu_gemm_args *a)
{
#define CALL(nt) tile_float(a, W_BF16, nt)
	CPU_GEMM_DISPATCH(CALL)
#undef CALL
}

static void gemm_q8_0(const cpu_gemm_args *a)
{
#define CALL(nt) tile_q8_0(a, nt)
	CPU_GEMM_DISPATCH(CALL)
#undef CALL
}

#if defined(__AVX2__)
static void gemm_q4_0(const cpu_gemm_args *a)
{
#define CALL(nt) tile_q4_0(a, nt)
	CPU_GEMM_DISPATCH(CALL)
#undef CALL
}

static void gemm_q4_k(const cpu_gemm_args *a)
{
#define CALL(nt) tile_q4_k(a, nt)
	CPU_GEMM_DISPATCH(CALL)
#undef CALL
}
#endif

/* The quantized types without a tile kernel of their own: one dot product
 * per output element through the type's row kernel (cpu_quant.h), which
 * each variant's compiler vectorizes as it can. */
static void tile_by_rows(const cpu_gemm_args *a, cpu_vec_dot_fn dot)
{
	for (int t = 0; t < a->nt; t++)
		for (int r = 0; r < a->nr; r++)
			out_row(a, t)[r] = dot(weight_row(a, r), act_row(a, t), a->n);
}

#define GEMM_BY_ROWS(name)                                  \
	static void gemm_##name(const cpu_gemm_args *a)     \
	{                                                   \
		tile_by_rows(a, cpu_dot_##name);            \
	}

GEMM_BY_ROWS(q4_1)
GEMM_BY_ROWS(q5_0)
GEMM_BY_ROWS(q5_1)
GEMM_BY_ROWS(q2_k)
GEMM_BY_ROWS(q3_k)
GEMM_BY_ROWS(q5_k)
GEMM_BY_ROWS(q6_k)
#if !defined(__AVX2__)
GEMM_BY_ROWS(q4_0)
GEMM_BY_ROWS(q4_k)
#endif

static const cpu_gemm_fn kernels[LOOM_DTYPE_COUNT] = {
	[LOOM_DTYPE_F32] = gemm_f32,   [LOOM_DTYPE_F16] = gemm_f16,   [LOOM_DTYPE_BF16] = gemm_bf16,
	[LOOM_DTYPE_Q4_0] = gemm_q4_0, [LOOM_DTYPE_Q4_1] = gemm_q4_1, [LOOM_DTYPE_Q5_0] = gemm_q5_0,
	[LOOM_DTYPE_Q5_1] = gemm_q5_1, [LOOM_DTYPE_Q8_0] = gemm_q8_0, [LOOM_DTYPE_Q2_K] = gemm_q2_k,
	[LOOM_DTYPE_Q3_K] = gemm_q3_k, [LOOM_DTYPE_Q4_K] = gemm_q4_k, [LOOM_DTYPE_Q5_K] = gemm_q5_k,
	[LOOM_DTYPE_Q6_K] = gemm_q6_k,
};

cpu_gemm_fn cpu_gemm_kernel(loom_dtype weight_type)
{
	if ((int)weight_type < 0 || weight_type >= LOOM_DTYPE_COUNT)
		return NULL;
	return kernels[weight_type];
}
