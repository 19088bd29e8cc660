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
	for (int64_t b = 0; b < a->n / CPU_QK8_0; b++) {
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
	for (int64_t b = 0; b < a->n / CPU_QK8_0; b++) {
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

/* Integer products summed exactly per block, then scaled by the product of
 * the two fp16 scales. */
static float dot_q8_0(const cpu_block_q8_0 *w, const cpu_block_q8_0 *x, int64_t nb)
{
	float sum = 0.0f;
	for (int64_t b = 0; b < nb; b++) {
		int32_t isum = 0;
		for (int j = 0; j < CPU_QK8_0; j++)
			isum += (int32_t)w[b].qs[j] * (int32_t)x[b].qs[j];
		sum += (float)isum * (cpu_fp16_to_f32(w[b].d) * cpu_fp16_to_f32(x[b].d));
	}
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
			out_row(a, t)[r] = dot_q8_0((const cpu_block_q8_0 *)weight_row(a, r),
						    (const cpu_block_q8_0 *)act_row(a, t),
						    a->n / CPU_QK8_0);
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

cpu_gemm_fn cpu_gemm_kernel(loom_dtype weight_type)
{
	switch (weight_type) {
	case LOOM_DTYPE_F32:
		return gemm_f32;
	case LOOM_DTYPE_F16:
		return gemm_f16;
	case LOOM_DTYPE_BF16:
		return gemm_bf16;
	case LOOM_DTYPE_Q8_0:
		return gemm_q8_0;
	default:
		return NULL;
	}
}
