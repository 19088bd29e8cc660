/* cpu_quant.c - Q8_0 quantization and dequantization of rows. */
#include "cpu_quant.h"

#include "cpu_convert.h"

#include <math.h>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

/* Note: the scale uses 127 / amax rather than 1 / d; the two can differ in
 * the last bit, and llama.cpp's x86 quantizer (which made our reference
 * data) uses the former. */
static float q8_0_inverse_scale(float amax)
{
	return amax != 0.0f ? 127.0f / amax : 0.0f;
}

#if defined(__AVX512F__)
static void quantize_block(const float *x, cpu_block_q8_0 *y)
{
	__m512 a = _mm512_loadu_ps(x);
	__m512 b = _mm512_loadu_ps(x + 16);
	float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
	__m512 id = _mm512_set1_ps(q8_0_inverse_scale(amax));

	y->d = cpu_f32_to_fp16(amax / 127.0f);
	/* cvtps rounds by MXCSR: to nearest even unless someone changed it,
	 * which is also what rintf in the scalar version obeys. */
	__m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, id));
	__m512i qb = _mm512_cvtps_epi32(_mm512_mul_ps(b, id));
	_mm_storeu_si128((__m128i *)y->qs, _mm512_cvtsepi32_epi8(qa));
	_mm_storeu_si128((__m128i *)(y->qs + 16), _mm512_cvtsepi32_epi8(qb));
}
#elif defined(__AVX2__)
static float hmax_x8(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}

static void quantize_block(const float *x, cpu_block_q8_0 *y)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 v[4];
	__m256 m = _mm256_setzero_ps();

	for (int k = 0; k < 4; k++) {
		v[k] = _mm256_loadu_ps(x + 8 * k);
		m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
	}
	float amax = hmax_x8(m);
	__m256 id = _mm256_set1_ps(q8_0_inverse_scale(amax));
	__m256i q[4];

	y->d = cpu_f32_to_fp16(amax / 127.0f);
	for (int k = 0; k < 4; k++)
		q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
	/* Packing works within 128-bit lanes; the permute restores order. */
	__m256i q01 = _mm256_packs_epi32(q[0], q[1]);
	__m256i q23 = _mm256_packs_epi32(q[2], q[3]);
	__m256i bytes = _mm256_packs_epi16(q01, q23);
	bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
	_mm256_storeu_si256((__m256i *)y->qs, bytes);
}
#else
static void quantize_block(const float *x, cpu_block_q8_0 *y)
{
	float amax = 0.0f;

	for (int j = 0; j < CPU_QK8_0; j++)
		amax = fmaxf(amax, fabsf(x[j]));
	float id = q8_0_inverse_scale(amax);

	y->d = cpu_f32_to_fp16(amax / 127.0f);
	for (int j = 0; j < CPU_QK8_0; j++)
		y->qs[j] = (int8_t)rintf(x[j] * id);
}
#endif

void cpu_quantize_row_q8_0(const float *x, cpu_block_q8_0 *y, int64_t n)
{
	for (int64_t b = 0; b < n / CPU_QK8_0; b++)
		quantize_block(x + b * CPU_QK8_0, y + b);
}

void cpu_dequantize_row_q8_0(const cpu_block_q8_0 *x, float *y, int64_t n)
{
	for (int64_t b = 0; b < n / CPU_QK8_0; b++) {
		float d = cpu_fp16_to_f32(x[b].d);
		for (int j = 0; j < CPU_QK8_0; j++)
			y[b * CPU_QK8_0 + j] = (float)x[b].qs[j] * d;
	}
}
