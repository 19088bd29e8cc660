/*
 * cpu_quant_act.c - quantization of a matmul's activations to Q8_0, Q8_1
 * and Q8_K (definitions in cpu_quant.h).
 */
#include "cpu_quant.h"

#include "cpu_half.h"

#include <math.h>
#include <string.h>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

static float q8_inverse_scale(float amax)
{
	return amax != 0.0f ? 127.0f / amax : 0.0f;
}

/* Each version rounds 32 floats to q = round-half-even(x * 127 / amax) and
 * returns amax. */
#if defined(__AVX512F__)
static float quantize_32(const float *x, int8_t *qs)
{
	__m512 a = _mm512_loadu_ps(x);
	__m512 b = _mm512_loadu_ps(x + 16);
	float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
	__m512 id = _mm512_set1_ps(q8_inverse_scale(amax));

	/* cvtps rounds by MXCSR: to nearest even unless someone changed it,
	 * which is also what rintf in the scalar version obeys. */
	__m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, id));
	__m512i qb = _mm512_cvtps_epi32(_mm512_mul_ps(b, id));
	_mm_storeu_si128((__m128i *)qs, _mm512_cvtsepi32_epi8(qa));
	_mm_storeu_si128((__m128i *)(qs + 16), _mm512_cvtsepi32_epi8(qb));
	return amax;
}
#elif defined(__AVX2__)
static float hmax_x8(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}

static float quantize_32(const float *x, int8_t *qs)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 v[4];
	__m256 m = _mm256_setzero_ps();

	for (int k = 0; k < 4; k++) {
		v[k] = _mm256_loadu_ps(x + 8 * k);
		m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
	}
	float amax = hmax_x8(m);
	__m256 id = _mm256_set1_ps(q8_inverse_scale(amax));
	__m256i q[4];

	for (int k = 0; k < 4; k++)
		q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
	/* Packing works within 128-bit lanes; the permute restores order. */
	__m256i q01 = _mm256_packs_epi32(q[0], q[1]);
	__m256i q23 = _mm256_packs_epi32(q[2], q[3]);
	__m256i bytes = _mm256_packs_epi16(q01, q23);
	bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
	_mm256_storeu_si256((__m256i *)qs, bytes);
	return amax;
}
#else
static float quantize_32(const float *x, int8_t *qs)
{
	float amax = 0.0f;

	for (int j = 0; j < CPU_QK; j++)
		amax = fmaxf(amax, fabsf(x[j]));
	float id = q8_inverse_scale(amax);

	/* Clamped, as the SIMD versions saturate: activations that are not
	 * finite (q of NaN or +-inf) must not make the conversion undefined. */
	for (int j = 0; j < CPU_QK; j++) {
		float q = rintf(x[j] * id);
		q = q > -127.0f ? q : -127.0f;
		qs[j] = (int8_t)(q < 127.0f ? q : 127.0f);
	}
	return amax;
}
#endif

void cpu_quantize_act_q8_0(const float *x, cpu_block_q8_0 *y, int64_t n)
{
	for (int64_t b = 0; b < n / CPU_QK; b++) {
		float amax = quantize_32(x + b * CPU_QK, y[b].qs);
		y[b].d = cpu_f32_to_fp16(amax / 127.0f);
	}
}

void cpu_quantize_act_q8_1(const float *x, cpu_block_q8_1 *y, int64_t n)
{
	for (int64_t b = 0; b < n / CPU_QK; b++) {
		float d = quantize_32(x + b * CPU_QK, y[b].qs) / 127.0f;
		int sum = 0;

		for (int j = 0; j < CPU_QK; j++)
			sum += y[b].qs[j];
		y[b].d = cpu_f32_to_fp16(d);
		y[b].s = cpu_f32_to_fp16(d * (float)sum);
	}
}

static void quantize_k_block(const float *x, cpu_block_q8_k *y)
{
	float max = cpu_signed_max(x, CPU_QK_K);

	if (max == 0.0f) {
		memset(y, 0, sizeof(*y));
		return;
	}
	/* As llama.cpp: the extreme element goes to -127 whatever its sign, so
	 * every q lies in -127..127 and d is negative when max is positive.
	 * A block of tiny activations (max below 127 / FLT_MAX: iscale is inf)
	 * or of ones that overflowed (inf: iscale 0, and 0 * inf) gives q of
	 * +-inf or NaN; clamped on both sides (NaN to -127), its conversion
	 * stays defined. */
	float iscale = -127.0f / max;
#if defined(__AVX512F__)
	/* The same roundings 16 at a time; max(q, -127) takes a NaN to -127
	 * as the comparison below does. */
	const __m512 scale = _mm512_set1_ps(iscale), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
	for (int g = 0; g < CPU_QK_K / 16; g++) {
		__m512 q = _mm512_roundscale_ps(_mm512_mul_ps(scale, _mm512_loadu_ps(x + 16 * g)),
						_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		__m512i qi = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(q, lo), hi));
		_mm_storeu_si128((__m128i *)(y->qs + 16 * g), _mm512_cvtepi32_epi8(qi));
		y->bsums[g] = (int16_t)_mm512_reduce_add_epi32(qi);
	}
#else
	for (int j = 0; j < CPU_QK_K; j++) {
		float q = rintf(iscale * x[j]);
		q = q > -127.0f ? q : -127.0f;
		y->qs[j] = (int8_t)(q < 127.0f ? q : 127.0f);
	}
	for (int g = 0; g < CPU_QK_K / 16; g++) {
		int sum = 0;
		for (int j = 0; j < 16; j++)
			sum += y->qs[16 * g + j];
		y->bsums[g] = (int16_t)sum;
	}
#endif
	y->d = 1.0f / iscale;
}

void cpu_quantize_act_q8_k(const float *x, cpu_block_q8_k *y, int64_t n)
{
	for (int64_t b = 0; b < n / CPU_QK_K; b++)
		quantize_k_block(x + b * CPU_QK_K, y + b);
}

void cpu_quantize_act(loom_dtype act_type, const float *x, void *blocks, int64_t n)
{
	switch (act_type) {
	case LOOM_DTYPE_Q8_0:
		cpu_quantize_act_q8_0(x, blocks, n);
		break;
	case LOOM_DTYPE_Q8_1:
		cpu_quantize_act_q8_1(x, blocks, n);
		break;
	case LOOM_DTYPE_Q8_K:
		cpu_quantize_act_q8_k(x, blocks, n);
		break;
	default:
		break;
	}
}
